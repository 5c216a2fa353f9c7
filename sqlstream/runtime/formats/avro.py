"""Avro format, following Flink's 'avro' format.

Files are Avro object container files (the schema in the header, 'avro.codec'
compressing the blocks, snappy by default as in Flink); a Kafka message is one
record without any header (Flink's 'avro' format is schemaless: both sides
derive the schema from the table) in Avro's binary encoding, or with
'avro.encoding' = 'json' in Avro's JSON encoding (written compact, as Java's
JsonEncoder writes it; container files are binary either way, as in Flink).

The Avro schema is derived from the table as Flink's AvroSchemaConverter does:
a record named 'record' whose fields are the columns, a nullable column a union
``["null", T]``; BOOLEAN boolean, TINYINT/SMALLINT/INT int, BIGINT long, FLOAT
float, DOUBLE double, STRING string, BYTES bytes, DECIMAL(p, s) bytes with the
decimal logical type, DATE int/date, TIME int/time-millis, ARRAY array.
Timestamps follow 'avro.timestamp_mapping.legacy' (default true, as in Flink):
the legacy mapping writes TIMESTAMP(p) as timestamp-millis/-micros and has no
TIMESTAMP_LTZ; the other writes TIMESTAMP as local-timestamp-millis/-micros and
TIMESTAMP_LTZ as timestamp-millis/-micros.  Precision above 6 is refused.

Reading a file resolves its own (writer) schema by field name; a column the
file lacks is an error naming the file.  A message that does not decode with
the table's schema (too short, a bad union index, bytes left over) is an error
naming its topic, partition and offset, or is skipped with ignore-parse-errors.
Decoding and encoding go through fastavro (compiled), record by record: Avro
is a row format, so there is no columnar path.
"""

from __future__ import annotations

import io
import json
import os
import struct
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa

from sqlstream.core.connectors import Option
from sqlstream.core.errors import ConnectorError, DataError
from sqlstream.core.types import sql_type_name
from sqlstream.runtime.formats import (
    CONVERSION_ERRORS,
    FileFormat,
    FileWriter,
    Locate,
    MessageFormat,
    ignore_parse_errors,
    make_batch,
)

CODECS = ("null", "deflate", "snappy", "bzip2", "xz")

OPTIONS: tuple[Option, ...] = (
    Option("avro.codec", default="snappy", choices=CODECS, description="file block compression (filesystem)"),
    Option(
        "avro.timestamp_mapping.legacy",
        "bool",
        default=True,
        description="true: TIMESTAMP is timestamp-millis, no TIMESTAMP_LTZ; false: TIMESTAMP is "
        "local-timestamp-millis and TIMESTAMP_LTZ timestamp-millis",
    ),
    Option(
        "avro.encoding",
        default="binary",
        choices=("binary", "json"),
        description="encoding of a message: Avro binary or Avro JSON",
    ),
    Option("avro.ignore-parse-errors", "bool", description="skip records that do not decode instead of failing"),
)

_READ_BATCH = 8192


def _fastavro() -> Any:
    """fastavro, imported when an avro table is first used (the optional 'avro' extra)."""
    try:
        import fastavro
        import fastavro.write
    except ImportError:
        raise ConnectorError("the 'avro' format needs fastavro: pip install 'sqlstream[avro]'") from None
    return fastavro


# What fastavro raises for bytes that are not a record of the schema.
_DECODE_ERRORS = (
    EOFError, ValueError, IndexError, KeyError, TypeError, OverflowError, AttributeError, struct.error
)


def _type_schema(t: pa.DataType, legacy: bool, column: str, table: str) -> Any:
    """The Avro schema of a non-null value of Arrow type ``t`` (Flink's mapping, see the module docstring)."""
    if pa.types.is_boolean(t):
        return "boolean"
    if t in (pa.int8(), pa.int16(), pa.int32()):
        return "int"
    if t == pa.int64():
        return "long"
    if t == pa.float32():
        return "float"
    if t == pa.float64():
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "bytes"
    if pa.types.is_decimal(t):
        return {"type": "bytes", "logicalType": "decimal", "precision": t.precision, "scale": t.scale}
    if pa.types.is_date32(t):
        return {"type": "int", "logicalType": "date"}
    if t == pa.time32("ms"):
        return {"type": "int", "logicalType": "time-millis"}
    if pa.types.is_timestamp(t) and t.unit in ("ms", "us") and not (legacy and t.tz is not None):
        unit = "millis" if t.unit == "ms" else "micros"
        local = "" if legacy or t.tz is not None else "local-"
        return {"type": "long", "logicalType": f"{local}timestamp-{unit}"}
    if pa.types.is_list(t):
        return {"type": "array", "items": ["null", _type_schema(t.value_type, legacy, column, table)]}
    hint = ""
    if pa.types.is_timestamp(t) and t.tz is not None and t.unit != "ns":
        hint = "; set 'avro.timestamp_mapping.legacy' = 'false' to map TIMESTAMP_LTZ to timestamp-millis/-micros"
    elif pa.types.is_timestamp(t):
        hint = "; Avro timestamps have at most microsecond precision (6)"
    raise ConnectorError(
        f"table '{table}': format 'avro' does not support column '{column}' of type {sql_type_name(t)}{hint}"
    )


def avro_schema(schema: pa.Schema, legacy: bool, table: str) -> dict[str, Any]:
    """The Avro record schema Flink derives from a table's columns."""
    fields = []
    for f in schema:
        value = _type_schema(f.type, legacy, f.name, table)
        fields.append({"name": f.name, "type": ["null", value] if f.nullable else value})
    return {"type": "record", "name": "record", "namespace": "org.apache.flink.avro.generated", "fields": fields}


def _plain(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    """Rows as dicts fastavro writes: temporal columns as their integer encoding (no datetime objects)."""
    arrays = []
    for col in batch.columns:
        t = col.type
        if pa.types.is_timestamp(t):
            col = col.cast(pa.int64())
        elif pa.types.is_date32(t) or pa.types.is_time32(t):
            col = col.cast(pa.int32())
        arrays.append(col)
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names).to_pylist()


class AvroFormat(FileFormat, MessageFormat):
    """Avro container files and schemaless Avro binary messages of the table's derived schema."""

    name = "avro"
    extension = "avro"

    def __init__(
        self, schema: pa.Schema, options: Mapping[str, Any], columns: Sequence[str] | None, table: str
    ) -> None:
        super().__init__(schema, options, columns, table)
        legacy = options.get("avro.timestamp_mapping.legacy")
        self._schema_json = avro_schema(schema, True if legacy is None else bool(legacy), table)
        self._parsed = _fastavro().parse_schema(self._schema_json)
        self._codec = options.get("avro.codec") or "snappy"
        self._json = options.get("avro.encoding") == "json"
        self.ignore_errors = ignore_parse_errors(options, "avro")

    # -- values -> batches ------------------------------------------------

    def _to_batch(self, records: list[dict[str, Any]], where: Locate) -> pa.RecordBatch:
        """Decoded records -> a batch of the projected columns, cast to the table's types."""
        names = self.columns
        if not names:
            return make_batch([], self.output_schema, len(records))
        try:
            return pa.RecordBatch.from_pylist(records, schema=self.output_schema)
        except CONVERSION_ERRORS:
            pass
        for i, record in enumerate(records):  # only to name the record that does not convert
            try:
                pa.RecordBatch.from_pylist([record], schema=self.output_schema)
            except CONVERSION_ERRORS as e:
                raise DataError(f"Avro record in {where(i)} does not match the table's columns: {e}") from None
        raise AssertionError("a batch failed to convert but none of its records did")

    # -- files -------------------------------------------------------------

    def read_file(self, path: str, skip_rows: int = 0) -> Iterator[pa.RecordBatch]:
        with open(path, "rb") as f:
            try:
                blocks = _fastavro().block_reader(f)
            except _DECODE_ERRORS as e:
                raise DataError(f"cannot read Avro file {path}: {e}") from None
            fields = {fld["name"] for fld in blocks.writer_schema.get("fields", ())}
            missing = [c for c in self.columns if c not in fields]
            if missing:
                raise DataError(f"Avro file {path} has no field '{missing[0]}' (fields: {sorted(fields)})")
            first = 0  # index in the file of the next record read
            pending: list[dict[str, Any]] = []
            start = 0
            try:
                for block in blocks:
                    if skip_rows >= block.num_records:  # whole blocks before the restore point stay undecoded
                        skip_rows -= block.num_records
                        first += block.num_records
                        continue
                    for record in block:
                        if skip_rows:
                            skip_rows -= 1
                            first += 1
                            continue
                        if not pending:
                            start = first
                        pending.append(record)
                        first += 1
                        if len(pending) >= _READ_BATCH:
                            yield self._file_batch(pending, path, start)
                            pending = []
            except _DECODE_ERRORS as e:
                raise DataError(f"Avro file {path}: cannot decode record {first}: {e}") from None
            if pending:
                yield self._file_batch(pending, path, start)

    def _file_batch(self, records: list[dict[str, Any]], path: str, start: int) -> pa.RecordBatch:
        return self._to_batch(records, lambda i: f"file {path} record {start + i}")

    def open_writer(self, path: str, schema: pa.Schema) -> FileWriter:
        return AvroFileWriter(path, self._parsed, self._codec)

    # -- messages ----------------------------------------------------------

    def decode_messages(self, messages: Sequence[bytes | None], where: Locate) -> pa.RecordBatch:
        records: list[dict[str, Any]] = []
        kept: list[int] = []
        for i, message in enumerate(messages):
            if message is None:  # a tombstone: Flink's avro deserializer returns no row
                continue
            try:
                record = self._decode_json(message) if self._json else self._decode_binary(message)
            except _DECODE_ERRORS as e:
                if self.ignore_errors:
                    self.parse_errors += 1
                    continue
                raise DataError(
                    f"Avro record in {where(i)} does not match the table's schema {self._schema_json['fields']}: "
                    f"{type(e).__name__}: {e}"
                ) from None
            records.append(record)
            kept.append(i)
        return self._to_batch(records, lambda k: where(kept[k]))

    def _decode_binary(self, message: bytes) -> dict[str, Any]:
        buffer = io.BytesIO(message)
        record = _fastavro().schemaless_reader(buffer, self._parsed, None)
        left = len(message) - buffer.tell()
        if left:
            raise ValueError(f"{left} bytes left over after the record")
        return record

    def _decode_json(self, message: bytes) -> dict[str, Any]:
        records = list(_fastavro().json_reader(io.StringIO(message.decode()), self._parsed))
        if len(records) != 1:
            raise ValueError(f"expected one JSON-encoded record, got {len(records)}")
        return records[0]

    def encode_messages(self, batch: pa.RecordBatch) -> list[bytes | None]:
        if self._json:
            text = io.StringIO()
            _fastavro().json_writer(text, self._parsed, _plain(batch))
            lines = text.getvalue().split("\n") if batch.num_rows else []
            return [json.dumps(json.loads(line), separators=(",", ":"), ensure_ascii=False).encode() for line in lines]
        out: list[bytes | None] = []
        buffer = io.BytesIO()
        for row in _plain(batch):
            buffer.seek(0)
            buffer.truncate()
            _fastavro().schemaless_writer(buffer, self._parsed, row)
            out.append(buffer.getvalue())
        return out


class AvroFileWriter(FileWriter):
    """One Avro container file; each written batch becomes (at least) one block."""

    def __init__(self, path: str, schema: Any, codec: str) -> None:
        self._file = open(path, "wb")  # noqa: SIM115 - closed in close()
        self._writer = _fastavro().write.Writer(self._file, schema, codec=codec)

    def write(self, batch: pa.RecordBatch) -> None:
        for row in _plain(batch):
            self._writer.write(row)
        self._writer.flush()

    @property
    def size(self) -> int:
        return self._file.tell()

    def close(self) -> None:
        if self._file.closed:
            return
        self._writer.flush()
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
