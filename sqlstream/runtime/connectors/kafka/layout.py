"""How a Kafka record maps to a table row, as in Flink's Kafka SQL connector.

A row's physical columns are split between the message value (format
'format', or 'value.format' with its options prefixed 'value.') and the
message key ('key.format', its options prefixed 'key.', columns 'key.fields'):
'value.fields-include' = 'ALL' puts every physical column into the value (the
key fields also into the key), 'EXCEPT_KEY' leaves the key fields out of it.
With 'key.fields-prefix' the key fields are named with that prefix in the
table and without it in the key format.  When reading with 'ALL', key fields
are taken from the value, as Flink does.

METADATA columns read the record's Kafka metadata (:data:`METADATA`);
'timestamp' and 'headers' are also written (a NULL timestamp lets the producer
take the current time, a NULL headers map writes none, an entry with a NULL key or
value is left out).  'headers' reads as a
MAP<STRING, BYTES> that is never NULL (empty without headers); of repeated
header keys the last one's value is kept, as Flink's HashMap does.
The planner hands the connector metadata columns typed as the metadata is and
casts between that and the declared type in the session time zone, as Flink's
planner does.

upsert-kafka's records are read and written through the same layout: its
key fields are the PRIMARY KEY, a record without a value (a tombstone) reads
as the deletion of its key (:meth:`RecordLayout.decode_deletions`), with the
record's metadata as any other.

A format that skips a message (a tombstone, a blank text message, a malformed
one with ignore-parse-errors) returns fewer rows than it was given; keys and
metadata are then matched to the rows by decoding the messages one by one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa
from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Message

from sqlstream.core.connectors import MetadataKey
from sqlstream.core.errors import ConnectorError
from sqlstream.core.tables import TableDef
from sqlstream.runtime.formats import (
    CHANGELOG_FORMATS,
    ROW_KIND_COLUMN,
    Locate,
    MessageFormat,
    create_format,
    with_row_kinds,
)

_LTZ3 = pa.timestamp("ms", tz="UTC")
_HEADERS = pa.map_(pa.string(), pa.binary())

# Flink's KafkaDynamicSource/KafkaDynamicSink metadata (all readable; 'timestamp' also writable).
METADATA: dict[str, MetadataKey] = {
    "topic": MetadataKey(pa.string()),
    "partition": MetadataKey(pa.int32()),
    "offset": MetadataKey(pa.int64()),
    "timestamp": MetadataKey(_LTZ3, writable=True),
    "timestamp-type": MetadataKey(pa.string()),
    "leader-epoch": MetadataKey(pa.int32()),
    "headers": MetadataKey(_HEADERS, writable=True),
}

# A record's headers: (key, value) pairs as confluent_kafka takes and gives them.
Headers = list[tuple[str, bytes | None]]

_TIMESTAMP_TYPES = {TIMESTAMP_CREATE_TIME: "CreateTime", TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}


def message_format(
    name: str, schema: pa.Schema, options: Mapping[str, Any], columns: list[str] | None, table: str
) -> MessageFormat:
    """A format that encodes and decodes single messages."""
    fmt = create_format(name, schema, options, columns, table)
    if not isinstance(fmt, MessageFormat):
        raise ConnectorError(f"table '{table}': format '{name}' cannot encode single Kafka messages")
    return fmt


class RecordLayout:
    """Splits rows into Kafka keys, values and timestamps, and assembles rows from Kafka records."""

    def __init__(
        self,
        table: TableDef,
        value_format: str,
        format_options: Mapping[str, Any],
        key_format: str | None,
        key_format_options: Mapping[str, Any],
        key_fields: Sequence[str],
        key_prefix: str,
        except_key: bool,
        columns: Sequence[str] | None = None,
        upsert: bool = False,
    ) -> None:
        """``columns``: the columns a source produces (None for a sink: the table's persisted columns);
        ``upsert``: upsert-kafka's, whose tombstones carry only the key, so the key format decodes
        every key column the source produces."""
        name = table.name
        physical = table.physical_schema
        self._key_fields = list(key_fields)
        value_fields = [f for f in physical.names if not (except_key and f in self._key_fields)]
        self._value_schema = pa.schema([physical.field(f) for f in value_fields])
        self._key_schema = pa.schema(
            [physical.field(f).with_name(f[len(key_prefix):]) for f in self._key_fields]
        )
        self._metadata = {c.name: c.metadata_key for c in table.metadata_columns}
        self._types = {c.name: c.type for c in table.source_columns}
        self.columns = list(columns) if columns is not None else [c.name for c in table.persisted_columns]
        value_proj = [c for c in self.columns if c in value_fields]
        # read from the key: key fields the value does not hold (EXCEPT_KEY); a sink writes all of them
        self._from_key = [c for c in self.columns if c in self._key_fields and c not in value_fields]
        decoded_keys = [c for c in self.columns if c in self._key_fields] if upsert else self._from_key
        key_proj = [self._key_schema.field(self._key_fields.index(c)).name for c in decoded_keys]
        self.value = message_format(
            value_format, self._value_schema, format_options, value_proj if columns is not None else None, name
        )
        self.key: MessageFormat | None = None
        if key_format is not None:
            self.key = message_format(
                key_format, self._key_schema, key_format_options, key_proj if columns is not None else None, name
            )
        self._plain = not self._from_key and not any(c in self._metadata for c in self.columns)

    @property
    def key_parse_errors(self) -> int:
        """Malformed keys skipped so far (the value format counts its own)."""
        return self.key.parse_errors if self.key is not None else 0

    # -- reading -----------------------------------------------------------

    def decode(self, messages: list[Message], where: Locate) -> pa.RecordBatch:
        """The rows of one partition's consecutive records, in the source's column order."""
        values = [m.value() if self.value.null_messages_are_rows else (m.value() or b"") for m in messages]
        batch = self.value.decode_messages(values, where)
        if self._plain:
            return batch
        if batch.num_rows != len(messages):
            kept = self._surviving(values, where)
            messages = [messages[i] for i in kept]
            where = _shifted(where, kept)
        arrays: dict[str, pa.Array] = {}
        if self._from_key:
            keys = self._decode_keys(messages, where)
            for c in self._from_key:
                arrays[c] = keys.column(self._key_schema.field(self._key_fields.index(c)).name)
        for c in self.columns:
            key = self._metadata.get(c)
            if key is not None:
                arrays[c] = _metadata_array(key, messages).cast(self._types[c])
        out = [arrays[c] if c in arrays else batch.column(c) for c in self.columns]
        fields = [pa.field(c, self._types[c]) for c in self.columns]
        if batch.num_columns and batch.schema.names[-1] == ROW_KIND_COLUMN:  # a changelog format's RowKinds
            out.append(batch.column(batch.num_columns - 1))
            fields.append(batch.schema.field(batch.num_columns - 1))
        return pa.RecordBatch.from_arrays(out, schema=pa.schema(fields))

    def _surviving(self, values: list[bytes | None], where: Locate) -> list[int]:
        """Which messages the value format turns into a row (the slow path: one decode call each)."""
        errors = self.value.parse_errors
        kept = [i for i, v in enumerate(values) if self.value.decode_messages([v], _shifted(where, [i])).num_rows]
        self.value.parse_errors = errors  # the first decode call counted the skipped ones already
        return kept

    def decode_deletions(self, messages: list[Message], where: Locate) -> pa.RecordBatch:
        """upsert-kafka's tombstones (records without a value) as rows of their key columns and metadata,
        the other columns NULL; a tombstone without a key, or with a key skipped as malformed, deletes
        nothing and gives no row."""
        keys, present = self._keys(messages, where)
        kept = [messages[i] for i in present]
        arrays: dict[str, pa.Array] = {}
        for c in self.columns:
            if c in self._key_fields:
                arrays[c] = keys.column(self._key_schema.field(self._key_fields.index(c)).name)
            elif c in self._metadata:
                arrays[c] = _metadata_array(self._metadata[c], kept).cast(self._types[c])
        out = [arrays[c] if c in arrays else pa.nulls(len(kept), self._types[c]) for c in self.columns]
        return pa.RecordBatch.from_arrays(out, schema=pa.schema([pa.field(c, self._types[c]) for c in self.columns]))

    def _keys(self, messages: list[Message], where: Locate) -> tuple[pa.RecordBatch, list[int]]:
        """The decoded keys and the positions of the messages they belong to (those with a key that is
        not skipped as malformed)."""
        assert self.key is not None
        keys = [m.key() for m in messages]
        present = [i for i, k in enumerate(keys) if k is not None]

        def at(kept: Sequence[int]) -> Locate:
            return lambda i: f"{where(kept[i])} (key)"

        decoded = self.key.decode_messages([keys[i] for i in present], at(present))
        if decoded.num_rows != len(present):
            errors = self.key.parse_errors
            present = [i for i in present if self.key.decode_messages([keys[i]], at([i])).num_rows]
            self.key.parse_errors = errors
        return decoded, present

    def _decode_keys(self, messages: list[Message], where: Locate) -> pa.RecordBatch:
        """The key columns of each message (NULL where a message has no key or a key that is skipped)."""
        decoded, present = self._keys(messages, where)
        if len(present) == len(messages):
            return decoded
        positions = [None] * len(messages)
        for row, i in enumerate(present):
            positions[i] = row
        return decoded.take(pa.array(positions, pa.int32()))

    # -- writing -----------------------------------------------------------

    def encode(
        self, batch: pa.RecordBatch, kinds: pa.Array | None = None
    ) -> tuple[list[bytes | None], list[bytes | None], list[int]]:
        """(keys, values, timestamps in epoch milliseconds, 0 for the producer's current time) per row;
        a changelog value format also encodes the rows' ``kinds``."""
        value_batch = _select(batch, self._value_schema, self._value_schema.names)
        if self.value.name in CHANGELOG_FORMATS:
            value_batch = with_row_kinds(value_batch, kinds)
        values = self.value.encode_messages(value_batch)
        keys: list[bytes | None]
        if self.key is not None:
            keys = self.key.encode_messages(_select(batch, self._key_schema, self._key_fields))
        else:
            keys = [None] * batch.num_rows
        stamp = next((c for c, k in self._metadata.items() if k == "timestamp" and c in batch.schema.names), None)
        if stamp is None:
            return keys, values, [0] * batch.num_rows
        millis = batch.column(stamp).cast(_LTZ3).cast(pa.int64()).fill_null(0)
        return keys, values, millis.to_pylist()

    def headers(self, batch: pa.RecordBatch) -> list[Headers | None] | None:
        """Each row's record headers from its 'headers' metadata column (None: the table has none)."""
        column = next((c for c, k in self._metadata.items() if k == "headers" and c in batch.schema.names), None)
        if column is None:
            return None
        maps = batch.column(column).cast(_HEADERS).to_pylist()
        # as Flink's KafkaDynamicSink, an entry with a NULL key or value is not written
        return [None if m is None else [(k, v) for k, v in m if k is not None and v is not None] for m in maps]


def _select(batch: pa.RecordBatch, schema: pa.Schema, names: list[str]) -> pa.RecordBatch:
    """Columns ``names`` of ``batch`` as a batch of ``schema`` (the format's names and nullability)."""
    return pa.RecordBatch.from_arrays([batch.column(n) for n in names], schema=schema)


def _shifted(where: Locate, kept: Sequence[int]) -> Locate:
    """``where`` for a list holding the messages at ``kept``."""
    return lambda i: where(kept[i])


def _metadata_array(key: str, messages: list[Message]) -> pa.Array:
    """The values of metadata ``key`` of the records (types as in :data:`METADATA`)."""
    get: Callable[[Message], Any]
    if key == "topic":
        get = Message.topic
    elif key == "partition":
        get = Message.partition
    elif key == "offset":
        get = Message.offset
    elif key == "timestamp":
        return pa.array([m.timestamp()[1] for m in messages], pa.int64()).cast(_LTZ3)
    elif key == "timestamp-type":
        return pa.array([_TIMESTAMP_TYPES.get(m.timestamp()[0], "NoTimestampType") for m in messages], pa.string())
    elif key == "leader-epoch":
        get = Message.leader_epoch
    elif key == "headers":
        return pa.array([_header_map(m.headers()) for m in messages], _HEADERS)
    else:
        raise AssertionError(f"metadata key '{key}' is not readable")
    return pa.array([get(m) for m in messages], METADATA[key].type)


def _header_map(headers: Headers | None) -> Headers:
    """A record's headers as map entries: one per key, the last value of a repeated key (Flink's HashMap)."""
    return list(dict(headers or ()).items())
