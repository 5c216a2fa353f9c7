"""The 'upsert-kafka' connector (Flink's): a topic as a table of the latest row per PRIMARY KEY.

The table's primary key columns are the message key (``key.format``), every
column is the message value (``value.format``, Flink's ``value.fields-include
= ALL``), or with ``EXCEPT_KEY`` only the other columns.  Format options take the key's or the value's prefix, as in Flink:
``'key.json.ignore-parse-errors'``, ``'value.csv.field-delimiter'``.

Sink: +I and +U rows are written as their key and value, -U and -D rows as a
tombstone (the key with a null value), as Flink's upsert serialization does,
except a retraction that a later row of the same batch upserts again (an
aggregation's -U/+U pair: Flink's planner drops such -U before the sink);
partitioned by the key, so all changes of a key stay in order in one
partition.  The delivery guarantees, exactly-once transactions included, are
the kafka sink's (:mod:`sqlstream.runtime.connectors.kafka`).

Source: reads the topic from its earliest offset (no other startup mode, as
in Flink) through the kafka source; a message with a value is an upsert of its
key, a tombstone a deletion (its non-key columns NULL).  That is an upsert
changelog: the planner puts a ChangelogNormalize, keyed by the primary key,
after the source, which keeps the latest row per key and turns the upserts
into +I / -U +U / -D, so a GROUP BY downstream retracts exactly what it
counted (Flink plans the same).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, get_args

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Message

from sqlstream.core.connectors import ConnectorOptions, Option, option, option_group
from sqlstream.core.errors import ConnectorError, DataError
from sqlstream.core.tables import TableDef
from sqlstream.runtime.connectors.base import Connector, SinkContext, SourceContext
from sqlstream.runtime.connectors.kafka.options import (
    KEY_FORMATS,
    PROPERTIES,
    BoundedMode,
    DeliveryGuarantee,
    KafkaOptions,
    KeyFormat,
    check_properties,
    text_format,
)
from sqlstream.runtime.connectors.kafka.sink import KafkaSink
from sqlstream.runtime.connectors.kafka.source import KafkaSource
from sqlstream.runtime.elements import RowKind
from sqlstream.runtime.formats import Locate, TextFormat, format_options

_TEXT_FORMAT_OPTIONS: tuple[Option, ...] = (*format_options("csv"), *format_options("json"))
_DELETE = int(RowKind.DELETE)
_RETRACTIONS = pa.array([int(RowKind.UPDATE_BEFORE), _DELETE], pa.int8())

_PRIMARY_KEY_REQUIRED = (
    "'upsert-kafka' tables require to define a PRIMARY KEY constraint. The PRIMARY KEY specifies which columns "
    "should be read from or write to the Kafka message key. The PRIMARY KEY also defines records in the "
    "'upsert-kafka' table should update or delete on which keys."
)


def _prefixed(prefix: str) -> tuple[Option, ...]:
    return tuple(
        Option(prefix + o.key, o.type, o.required, o.default, o.choices, o.description) for o in _TEXT_FORMAT_OPTIONS
    )


def _unprefixed(options: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    return {k[len(prefix):]: v for k, v in options.items() if k.startswith(prefix)}


@dataclass(frozen=True)
class UpsertKafkaOptions(ConnectorOptions):
    """What an upsert-kafka source or sink is configured with ('properties.*' client settings aside)."""

    topic: str = option("topic", required=True, description="the Kafka topic to read or write")
    bootstrap_servers: str = option(
        "properties.bootstrap.servers", required=True, description="Kafka brokers, e.g. 'localhost:9092'"
    )
    key_format: KeyFormat = option(
        "key.format", required=True, choices=KEY_FORMATS, description="format of the message key (the primary key)"
    )
    value_format: KeyFormat = option(
        "value.format", required=True, choices=KEY_FORMATS, description="format of the message value (all columns)"
    )
    key_format_options: Mapping[str, Any] = option_group(_prefixed("key."))
    value_format_options: Mapping[str, Any] = option_group(_prefixed("value."))
    value_fields_include: str = option(
        "value.fields-include",
        default="all",
        choices=("all", "except_key"),
        description="ALL: the value holds every column; EXCEPT_KEY: only the columns outside the primary key",
    )
    bounded_mode: BoundedMode = option(
        "scan.bounded.mode",
        default="unbounded",
        choices=get_args(BoundedMode),
        description="latest-offset: each partition stops at its end offset when reading starts",
    )
    idle_timeout_ms: int | None = option(
        "scan.watermark.idle-timeout",
        "duration",
        description="a partition without records for this long does not hold back the watermark",
    )
    delivery_guarantee: DeliveryGuarantee = option(
        "sink.delivery-guarantee",
        default="at-least-once",
        choices=get_args(DeliveryGuarantee),
        description="none, at-least-once (flush on checkpoints) or exactly-once (transactions)",
    )
    transactional_id_prefix: str | None = option(
        "sink.transactional-id-prefix",
        description="exactly-once: prefix of the transactional ids '<prefix>-<subtask>' (unique per job)",
    )
    commit_marker_topic: str | None = option(
        "sink.commit-marker-topic",
        description="exactly-once: topic of the commit markers (default '<topic>.__sqlstream_commits')",
    )

    @property
    def except_key(self) -> bool:
        return self.value_fields_include == "except_key"

    def check(self, table: str) -> None:
        if self.except_key and any(
            v for k, v in (*self.key_format_options.items(), *self.value_format_options.items())
            if k.endswith("ignore-parse-errors")
        ):
            # a key and a value skipped apart would pair the wrong halves of two messages
            raise ConnectorError(
                f"table '{table}': 'value.fields-include' = 'EXCEPT_KEY' cannot be combined with "
                "'ignore-parse-errors' of the key or value format"
            )

    def kafka(self, table: TableDef) -> KafkaOptions:
        """The kafka connector's options that read and write this table's messages."""
        options = KafkaOptions(
            topic=self.topic,
            bootstrap_servers=self.bootstrap_servers,
            format=self.value_format,
            format_options=_unprefixed(self.value_format_options, "value."),
            key_format=self.key_format,
            key_fields=tuple(table.primary_key),
            bounded_mode=self.bounded_mode,
            idle_timeout_ms=self.idle_timeout_ms,
            delivery_guarantee=self.delivery_guarantee,
            transactional_id_prefix=self.transactional_id_prefix,
            commit_marker_topic=self.commit_marker_topic,
        )
        options.check(table.name)
        return options


def _key_format(table: TableDef, options: UpsertKafkaOptions) -> TextFormat:
    schema = table.physical_schema
    key_schema = pa.schema([schema.field(k) for k in table.primary_key])
    return text_format(
        options.key_format, key_schema, _unprefixed(options.key_format_options, "key."), None, table.name
    )


class UpsertKafkaSource(KafkaSource):
    """The kafka source reading values as upserts and tombstones as deletions of their key."""

    def __init__(self, ctx: SourceContext) -> None:
        super().__init__(ctx)
        options = UpsertKafkaOptions.from_options(ctx.options, ctx.table.name)
        self._keys = _key_format(ctx.table, options)
        self._schema = ctx.schema
        self._except_key = options.except_key
        if self._except_key:  # the value holds the other columns: its format decodes only those
            key = set(ctx.table.primary_key)
            physical = ctx.table.physical_schema
            value_schema = pa.schema([f for f in physical if f.name not in key])
            value_columns = [c for c in ctx.columns if c not in key]
            self._format = text_format(options.value_format, value_schema,
                                       _unprefixed(options.value_format_options, "value."), value_columns,
                                       ctx.table.name)

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
                batch = self._deletions(run, locate)
                kinds.append(np.full(batch.num_rows, _DELETE, dtype=np.int8))
            else:
                batch = self._upserts(run, locate)
                kinds.append(np.zeros(batch.num_rows, dtype=np.int8))
            batches.append(batch)
        batch = batches[0] if len(batches) == 1 else pa.concat_batches(batches)
        return batch, pa.array(np.concatenate(kinds), pa.int8())

    def _upserts(self, run: list[Message], locate: Locate) -> pa.RecordBatch:
        """Messages with a value -> rows (EXCEPT_KEY: the key columns from the message key)."""
        values = self._format.decode_messages([m.value() or b"" for m in run], locate)
        if not self._except_key:
            return values
        keys = self._keys.decode_messages([m.key() or b"" for m in run], lambda i: f"{locate(i)} (key)")
        if keys.num_rows != values.num_rows:
            raise DataError(
                f"table '{self._table}': {locate(0)}: of {len(run)} messages {keys.num_rows} have a key and "
                f"{values.num_rows} a value ('value.fields-include' = 'EXCEPT_KEY' needs both in every message)"
            )
        return _assemble(self._schema, [keys, values], values.num_rows)

    def _deletions(self, run: list[Message], locate: Locate) -> pa.RecordBatch:
        """Tombstones -> rows of their key columns, the others NULL (a tombstone without key deletes nothing)."""
        keyed = [i for i, m in enumerate(run) if m.key()]
        keys = self._keys.decode_messages([run[i].key() for i in keyed], lambda i: f"{locate(keyed[i])} (key)")
        return _assemble(self._schema, [keys], keys.num_rows)

    @property
    def parse_errors(self) -> int:
        return super().parse_errors + self._keys.parse_errors


class UpsertKafkaSink(KafkaSink):
    """The kafka sink writing the primary key as the message key and retractions as tombstones."""

    def __init__(self, ctx: SinkContext) -> None:
        super().__init__(ctx)
        options = UpsertKafkaOptions.from_options(ctx.options, ctx.table.name)
        self._key_format = _key_format(ctx.table, options)
        key = set(ctx.table.primary_key)
        # EXCEPT_KEY: the value holds only the columns outside the primary key
        self._value_columns = [n for n in ctx.schema.names if n not in key] if options.except_key else None

    @classmethod
    def read_options(cls, ctx: SinkContext) -> KafkaOptions:
        return UpsertKafkaOptions.from_options(ctx.options, ctx.table.name).kafka(ctx.table)

    def _encode(
        self, batch: pa.RecordBatch, kinds: pa.Array | None
    ) -> tuple[list[bytes | None], list[bytes | None], list[int]]:
        assert self._key_format is not None
        keys: list[bytes | None] = list(self._key_format.encode_messages(batch.select(self._key_fields)))
        value_batch = batch if self._value_columns is None else batch.select(self._value_columns)
        values: list[bytes | None] = list(self._format.encode_messages(value_batch))
        if kinds is None:
            return keys, values, [0] * len(values)
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
            return keys, values, [0] * len(values)
        return [keys[i] for i in keep], [values[i] for i in keep], [0] * len(keep)


def _assemble(schema: pa.Schema, parts: list[pa.RecordBatch], rows: int) -> pa.RecordBatch:
    """A batch of ``schema`` taking each column from the first part that has it, NULL otherwise."""
    arrays = []
    for f in schema:
        found = next((p.column(p.schema.get_field_index(f.name)) for p in parts if f.name in p.schema.names), None)
        arrays.append(found if found is not None else pa.nulls(rows, f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


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
    check_properties(name, given)
    for side in ("key", "value"):
        if given.get(f"{side}.csv.header", "false").lower() == "true":
            raise ConnectorError(
                f"table '{name}': '{side}.csv.header' does not apply to Kafka messages (one record each)"
            )
    for side in ("key", "value"):
        fmt = given.get(f"{side}.format", "").lower()
        for key in given:
            parts = key.split(".")
            if len(parts) > 2 and parts[0] == side and parts[1] in KEY_FORMATS and parts[1] != fmt:
                raise ConnectorError(
                    f"table '{name}': option '{key}' applies to format '{parts[1]}', "
                    f"but the table's {side}.format is '{fmt}'"
                )
    typed = UpsertKafkaOptions.from_options(
        {o.key: o.convert(given[o.key], name) if o.key in given else o.default
         for o in UpsertKafkaOptions.declared()},
        name,
    )
    _key_format(table, typed)
    text_format(typed.value_format, physical, _unprefixed(typed.value_format_options, "value."), None, name)


CONNECTOR = Connector(
    "upsert-kafka",
    options=(),
    options_type=UpsertKafkaOptions,
    create_source=UpsertKafkaSource,
    create_sink=UpsertKafkaSink,
    accepts_updates=True,
    prefixes=(PROPERTIES,),
    validate_extra=validate_table,
    changelog=changelog_mode,
    description="a Kafka topic as the latest row per PRIMARY KEY: keys and values, deletions as tombstones",
)

__all__ = ["CONNECTOR", "UpsertKafkaOptions", "UpsertKafkaSink", "UpsertKafkaSource"]
