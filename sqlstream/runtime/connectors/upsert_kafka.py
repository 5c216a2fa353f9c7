"""The 'upsert-kafka' connector (Flink's): a topic as a table of the latest row per PRIMARY KEY.

The table's primary key columns are the message key (``key.format``), every
column is the message value (``value.format``, Flink's ``value.fields-include
= ALL``), or with ``EXCEPT_KEY`` only the other columns (then ``key.fields-prefix``
may name the key columns with a prefix the key format drops).  Key and value are
any format whose messages are rows (csv, json, avro, raw, protobuf), not a
changelog format, as Flink checks.  Format options take the key's or the value's
prefix, as in Flink: ``'key.json.ignore-parse-errors'``, ``'value.csv.field-delimiter'``.
The options both connectors have are declared once
(:class:`~sqlstream.runtime.connectors.kafka.options.KafkaTopicOptions`), and rows
map to records through the kafka connector's layout, so METADATA columns
(``timestamp``, ``headers``, ``topic``, ``partition``, ``offset``, ...) read and
write as they do there (Flink builds both connectors' sources and sinks alike).

Sink: +I and +U rows are written as their key and value, -U and -D rows as a
tombstone (the key with a null value), as Flink's upsert serialization does,
except a retraction that a later row of the same batch upserts again (an
aggregation's -U/+U pair: Flink's planner drops such -U before the sink);
partitioned by the key, so all changes of a key stay in order in one
partition.  The delivery guarantees, exactly-once transactions included, are
the kafka sink's (:mod:`sqlstream.runtime.connectors.kafka`).

Source: reads the topic from its earliest offset (no other startup mode, as
in Flink) through the kafka source; a message with a value is an upsert of its
key, a tombstone a deletion (its non-key columns NULL, its metadata read).  That is an upsert
changelog: the planner puts a ChangelogNormalize, keyed by the primary key,
after the source, which keeps the latest row per key and turns the upserts
into +I / -U +U / -D, so a GROUP BY downstream retracts exactly what it
counted (Flink plans the same).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, get_args

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Message

from sqlstream.core.connectors import option
from sqlstream.core.errors import ConnectorError
from sqlstream.core.tables import TableDef
from sqlstream.runtime.connectors.base import Connector, SinkContext, SourceContext, conform
from sqlstream.runtime.connectors.kafka.layout import METADATA, Headers
from sqlstream.runtime.connectors.kafka.options import (
    MESSAGE_FORMATS,
    PROPERTIES,
    KafkaKeyFormat,
    KafkaOptions,
    KafkaTopicOptions,
    MessageFormat,
    check_given_options,
    record_layout,
)
from sqlstream.runtime.connectors.kafka.sink import KafkaSink, Records
from sqlstream.runtime.connectors.kafka.source import KafkaSource
from sqlstream.runtime.elements import RowKind
from sqlstream.runtime.formats import Locate

_DELETE = int(RowKind.DELETE)
_RETRACTIONS = pa.array([int(RowKind.UPDATE_BEFORE), _DELETE], pa.int8())
# formats whose messages are rows (Flink: insert-only); a changelog format is refused for either side
_ROW_FORMATS: tuple[str, ...] = get_args(KafkaKeyFormat)

_PRIMARY_KEY_REQUIRED = (
    "'upsert-kafka' tables require to define a PRIMARY KEY constraint. The PRIMARY KEY specifies which columns "
    "should be read from or write to the Kafka message key. The PRIMARY KEY also defines records in the "
    "'upsert-kafka' table should update or delete on which keys."
)


@dataclass(frozen=True)
class UpsertKafkaOptions(KafkaTopicOptions):
    """What an upsert-kafka source or sink is configured with ('properties.*' client settings aside):
    the options shared with 'kafka', and its key and value formats, both required."""

    key_format: MessageFormat = option(
        "key.format", required=True, choices=MESSAGE_FORMATS, description="format of the message key (the primary key)"
    )
    value_format: MessageFormat = option(
        "value.format", required=True, choices=MESSAGE_FORMATS,
        description="format of the message value (all columns, or EXCEPT_KEY the others)",
    )
    buffer_flush_max_rows: int = option(
        "sink.buffer-flush.max-rows", "int", default=0,
        description="with sink.buffer-flush.interval: the sink keeps the last change per key and writes the "
        "buffer when it holds this many keys (0: no buffer)",
    )
    buffer_flush_interval_ms: int = option(
        "sink.buffer-flush.interval", "duration", default=0,
        description="with sink.buffer-flush.max-rows: the buffer is also written this long after the last write "
        "of it (0: no buffer)",
    )

    @property
    def buffered(self) -> bool:
        return self.buffer_flush_max_rows > 0

    def check(self, table: str) -> None:
        if (self.buffer_flush_max_rows > 0) != (self.buffer_flush_interval_ms > 0):
            # Flink's UpsertKafkaDynamicTableFactory.validateSinkBufferFlush
            raise ConnectorError(
                f"table '{table}': 'sink.buffer-flush.max-rows' and 'sink.buffer-flush.interval' must be set to be "
                "greater than zero together to enable sink buffer flushing."
            )
        for side, fmt in (("key", self.key_format), ("value", self.value_format)):
            if fmt not in _ROW_FORMATS:
                # Flink's UpsertKafkaDynamicTableFactory.validateFormat
                raise ConnectorError(
                    f"table '{table}': 'upsert-kafka' connector doesn't support '{fmt}' as {side} format, "
                    f"because '{fmt}' is not in insert-only mode."
                )

    def kafka(self, table: TableDef) -> KafkaOptions:
        """The kafka connector's options that read and write this table's records: its key fields are
        the primary key, and reading starts at the earliest offset (Flink: always, for data integrity)."""
        options = KafkaOptions(
            topic=self.topic,
            bootstrap_servers=self.bootstrap_servers,
            value_format=self.value_format,
            value_format_options=self.value_format_options,
            key_format=self.key_format,
            key_format_options=self.key_format_options,
            key_fields=tuple(table.primary_key),
            key_fields_prefix=self.key_fields_prefix,
            value_fields_include=self.value_fields_include,
            bounded_mode=self.bounded_mode,
            idle_timeout_ms=self.idle_timeout_ms,
            delivery_guarantee=self.delivery_guarantee,
            transactional_id_prefix=self.transactional_id_prefix,
            commit_marker_topic=self.commit_marker_topic,
        )
        options.check(table.name)
        return options


class UpsertKafkaSource(KafkaSource):
    """The kafka source reading values as upserts and tombstones as deletions of their key."""

    upsert = True

    @classmethod
    def read_options(cls, ctx: SourceContext) -> KafkaOptions:
        return UpsertKafkaOptions.from_options(ctx.options, ctx.table.name).kafka(ctx.table)

    def _decode(self, messages: list[Message], where: Locate) -> tuple[pa.RecordBatch, pa.Array | None]:
        """Runs of values and of tombstones, decoded a run at a time so their order is kept."""
        tombstone = np.array([m.value() is None for m in messages], dtype=bool)
        bounds = np.flatnonzero(np.diff(tombstone.astype(np.int8))) + 1
        starts = [0, *bounds.tolist()]
        ends = [*bounds.tolist(), len(messages)]
        batches: list[pa.RecordBatch] = []
        kinds: list[np.ndarray] = []
        for start, end in zip(starts, ends, strict=True):
            run = messages[start:end]
            locate = _shifted(where, start)
            if tombstone[start]:
                batch = self._layout.decode_deletions(run, locate)
                kinds.append(np.full(batch.num_rows, _DELETE, dtype=np.int8))
            else:
                batch = self._layout.decode(run, locate)
                kinds.append(np.zeros(batch.num_rows, dtype=np.int8))
            batches.append(batch)
        batch = batches[0] if len(batches) == 1 else pa.concat_batches(batches)
        return batch, pa.array(np.concatenate(kinds), pa.int8())


class UpsertKafkaSink(KafkaSink):
    """The kafka sink writing the primary key as the message key and retractions as tombstones.

    With 'sink.buffer-flush.max-rows' and 'sink.buffer-flush.interval' (Flink's ReducingUpsertSink) the
    messages are reduced to the last one per key in a buffer that is written when it holds max-rows
    keys, when a write or watermark comes the interval after the last flush, and on every checkpoint
    and at the end of the input; fewer messages, the same latest row per key."""

    upsert = True

    def __init__(self, ctx: SinkContext) -> None:
        super().__init__(ctx)
        options = UpsertKafkaOptions.from_options(ctx.options, ctx.table.name)
        self._max_rows = options.buffer_flush_max_rows if options.buffered else 0
        self._interval_ms = options.buffer_flush_interval_ms
        self._clock = ctx.clock
        # message key -> (value or None for a tombstone, timestamp, headers) of its last change
        self._reduced: dict[bytes | None, tuple[bytes | None, int, Headers | None]] = {}
        self._flushed_ms = self._clock.time_ms()

    def write(self, batch: pa.RecordBatch, kinds: pa.Array | None) -> None:
        if not self._max_rows:
            super().write(batch, kinds)
            return
        if batch.num_rows == 0:
            return
        keys, values, timestamps, headers = self._encode(conform(batch, self._ctx.schema), kinds)
        for key, value, timestamp, header in zip(keys, values, timestamps, headers, strict=True):
            self._reduced.pop(key, None)  # a key's message goes where its last change came
            self._reduced[key] = (value, timestamp, header)
            if len(self._reduced) >= self._max_rows:
                self._flush_reduced()
        self._flush_if_due()

    def on_watermark(self, timestamp: int) -> None:
        if self._max_rows:
            self._flush_if_due()

    def prepare_commit(self, checkpoint_id: int) -> Any:
        if self._max_rows:
            self._flush_reduced()
        return super().prepare_commit(checkpoint_id)

    def _flush_if_due(self) -> None:
        if self._clock.time_ms() - self._flushed_ms >= self._interval_ms:
            self._flush_reduced()

    def _flush_reduced(self) -> None:
        self._flushed_ms = self._clock.time_ms()
        if not self._reduced:
            return
        keys = list(self._reduced)
        entries = list(self._reduced.values())
        self._reduced.clear()
        self._send((keys, [e[0] for e in entries], [e[1] for e in entries], [e[2] for e in entries]))

    @classmethod
    def read_options(cls, ctx: SinkContext) -> KafkaOptions:
        return UpsertKafkaOptions.from_options(ctx.options, ctx.table.name).kafka(ctx.table)

    def _encode(self, batch: pa.RecordBatch, kinds: pa.Array | None) -> Records:
        keys, values, timestamps, headers = super()._encode(batch, None)  # the formats write rows, not changes
        if kinds is None:
            return keys, values, timestamps, headers
        retracted = np.asarray(pc.is_in(kinds, _RETRACTIONS).to_numpy(zero_copy_only=False)).tolist()
        # A retraction followed in the batch by an upsert of its key is superseded by it: no tombstone,
        # as Flink writes an aggregation's -U/+U into an upsert sink keyed by the group key (+U only).
        upserted: set[bytes | None] = set()
        keep: list[int] = []
        for i in range(len(values) - 1, -1, -1):
            if not retracted[i]:
                upserted.add(keys[i])
                keep.append(i)
            elif keys[i] not in upserted:
                values[i] = None
                keep.append(i)
        keep.reverse()
        if len(keep) == len(values):
            return keys, values, timestamps, headers
        return ([keys[i] for i in keep], [values[i] for i in keep], [timestamps[i] for i in keep],
                [headers[i] for i in keep])


def _shifted(where: Locate, start: int) -> Locate:
    """``where`` for the messages from ``start`` on."""
    return lambda i: where(start + i)


def changelog_mode(table: TableDef) -> str:
    """The source emits upserts per primary key (a ChangelogNormalize completes them)."""
    return "upsert"


def validate_table(table: TableDef, given: dict[str, str]) -> None:
    """A primary key of physical columns; client properties; the key and value formats for the columns."""
    name = table.name
    if not table.primary_key:
        raise ConnectorError(f"table '{name}': {_PRIMARY_KEY_REQUIRED}")
    physical = table.physical_schema
    missing = [k for k in table.primary_key if physical.get_field_index(k) < 0]
    if missing:
        raise ConnectorError(f"table '{name}': the primary key column '{missing[0]}' is not a physical column")
    check_given_options(name, given)
    declared = {o.key: o for o in UpsertKafkaOptions.declared()}
    typed = {k: declared[k].convert(v, name) for k, v in given.items() if k in declared}
    # building the layout checks the formats' options and the column types they support
    record_layout(UpsertKafkaOptions.from_options(typed, name).kafka(table), table, upsert=True)


CONNECTOR = Connector(
    "upsert-kafka",
    options=(),
    options_type=UpsertKafkaOptions,
    create_source=UpsertKafkaSource,
    create_sink=UpsertKafkaSink,
    accepts_updates=True,
    prefixes=(PROPERTIES,),
    validate_extra=validate_table,
    metadata=METADATA,
    changelog=changelog_mode,
    description="a Kafka topic as the latest row per PRIMARY KEY: keys and values, deletions as tombstones",
)

__all__ = ["CONNECTOR", "UpsertKafkaOptions", "UpsertKafkaSink", "UpsertKafkaSource"]
