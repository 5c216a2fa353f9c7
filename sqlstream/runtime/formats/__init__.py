"""Record formats: bytes on disk or on the wire <-> Arrow record batches.

The filesystem connector reads and writes whole files through
:class:`FileFormat`; a message-queue connector (Kafka) uses the formats that
are also a :class:`MessageFormat` (the text formats, avro, raw; protobuf is one
only) one record per
message through :meth:`MessageFormat.decode_messages` and
:meth:`MessageFormat.encode_messages`.

Decoding is vectorized: Arrow's readers parse, and text is converted to the
column types with Arrow casts.  Only when a cast fails does a slow path look
for the offending rows (by bisection, so still mostly vectorized) to name them
in a :class:`DataError`, or to drop exactly them when parse errors are ignored.
"""

from __future__ import annotations

import importlib
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.connectors import Option
from sqlstream.core.errors import ConnectorError, DataError
from sqlstream.core.types import sql_type_name

# Changelog formats: each record is a change event (Flink's debezium-json, canal-json, maxwell-json).
CHANGELOG_FORMATS: tuple[str, ...] = ("debezium-json", "canal-json", "maxwell-json")
FORMAT_NAMES: tuple[str, ...] = ("csv", "json", "parquet", "avro", "raw", "orc", "protobuf", *CHANGELOG_FORMATS)
# A changelog format decodes into, and encodes from, batches ending with this int8 RowKind column.
ROW_KIND_COLUMN = "$row_kind"
# format name -> (module under sqlstream.runtime.formats, class)
_CLASSES: dict[str, tuple[str, str]] = {
    "csv": ("csv", "CsvFormat"),
    "json": ("json", "JsonFormat"),
    "parquet": ("parquet", "ParquetFormat"),
    "avro": ("avro", "AvroFormat"),
    "raw": ("raw", "RawFormat"),
    "orc": ("orc", "OrcFormat"),
    "protobuf": ("protobuf", "ProtobufFormat"),
    "debezium-json": ("changelog_json", "DebeziumJsonFormat"),
    "canal-json": ("changelog_json", "CanalJsonFormat"),
    "maxwell-json": ("changelog_json", "MaxwellJsonFormat"),
}

# Flink formats this engine refuses, with the reason (named in the error of a table using one).
REFUSED_FORMATS: dict[str, str] = {
    "avro-confluent": "it needs a Confluent Schema Registry, which cannot be run or reached here; "
    "use 'avro' (schemaless Avro binary records, Flink's 'avro' format) instead",
}

GENERIC_OPTIONS: tuple[Option, ...] = (
    Option(
        "format.ignore-parse-errors",
        "bool",
        description="skip malformed records instead of failing (any format)",
    ),
)

# Arrow signals a value it cannot convert with one of these.
CONVERSION_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError)

# Below this many values, bisection stops and tries values one by one.
_BISECT_LEAF = 16

# A zone designator after a time of day: 'Z', '+02', '+0200', '+02:00'.
_HAS_ZONE = r"\d{2}:\d{2}(:\d{2}(\.\d*)?)?\s*(Z|z|[+-]\d{2}(:?\d{2})?)$"

Locate = Callable[[int], str]
"""Maps a record's index (0-based, within one decode call) to a location text for errors."""


def format_options(name: str) -> tuple[Option, ...]:
    """The options a format understands (besides the generic ones), for a connector's schema."""
    module_name, class_name = _CLASSES[name]
    module = importlib.import_module(f"sqlstream.runtime.formats.{module_name}")
    # a module of one format declares them at module level, one of several formats on each class
    return getattr(getattr(module, class_name), "OPTIONS", None) or getattr(module, "OPTIONS", ())


def all_format_options() -> tuple[Option, ...]:
    """Generic plus every format's options: what a connector with a 'format' option declares."""
    out: list[Option] = list(GENERIC_OPTIONS)
    for name in FORMAT_NAMES:
        out.extend(format_options(name))
    return tuple(out)


def create_format(
    name: str,
    schema: pa.Schema,
    options: Mapping[str, Any],
    columns: Sequence[str] | None = None,
    table: str = "",
) -> FileFormat | MessageFormat:
    """A format for records of ``schema`` producing ``columns`` (default: all) when decoding.

    Most formats are both; 'protobuf' is a MessageFormat only (Kafka, not files).

    ``options`` maps option keys ('csv.field-delimiter', ...) to typed values;
    missing keys take their defaults.  Bad option values raise ConnectorError
    naming ``table``.
    """
    if name in REFUSED_FORMATS:
        raise ConnectorError(f"table '{table}': format '{name}' is not supported: {REFUSED_FORMATS[name]}")
    if name not in _CLASSES:
        raise ConnectorError(
            f"table '{table}': unknown format '{name}'; supported formats: {', '.join(FORMAT_NAMES)}"
        )
    module_name, class_name = _CLASSES[name]
    cls = getattr(importlib.import_module(f"sqlstream.runtime.formats.{module_name}"), class_name)
    return cls(schema, options, columns, table)


def split_row_kinds(batch: pa.RecordBatch) -> tuple[pa.RecordBatch, pa.Array | None]:
    """A changelog format's decoded batch -> (the rows, their RowKinds); other batches -> (batch, None)."""
    if batch.num_columns == 0 or batch.schema.names[-1] != ROW_KIND_COLUMN:
        return batch, None
    return batch.drop_columns([ROW_KIND_COLUMN]), batch.column(batch.num_columns - 1)


def with_row_kinds(batch: pa.RecordBatch, kinds: pa.Array | None) -> pa.RecordBatch:
    """``batch`` with its RowKinds (all INSERT if None) as the last column, for a changelog format's encoder."""
    if kinds is None:
        kinds = pa.array(np.zeros(batch.num_rows, dtype=np.int8))
    return batch.append_column(pa.field(ROW_KIND_COLUMN, pa.int8()), kinds.cast(pa.int8()))


def ignore_parse_errors(options: Mapping[str, Any], prefix: str) -> bool:
    """The format-specific flag ('csv.ignore-parse-errors') if set, else the generic one."""
    specific = options.get(f"{prefix}.ignore-parse-errors")
    if specific is not None:
        return bool(specific)
    return bool(options.get("format.ignore-parse-errors") or False)


class FileWriter(ABC):
    """Writes one file of one format; the caller owns naming and committing it."""

    @abstractmethod
    def write(self, batch: pa.RecordBatch) -> None:
        """Append rows."""

    @property
    @abstractmethod
    def size(self) -> int:
        """Bytes written so far (for size-based rolling)."""

    @abstractmethod
    def close(self) -> None:
        """Flush, fsync and close: afterwards the file is complete on disk."""


class FileFormat(ABC):
    """Decodes files into batches of the projected columns, and encodes batches into files."""

    name: str = ""
    extension: str = ""

    def __init__(
        self,
        schema: pa.Schema,
        options: Mapping[str, Any],
        columns: Sequence[str] | None,
        table: str,
    ) -> None:
        self.schema = schema
        self.options = options
        self.table = table
        self.columns = list(schema.names if columns is None else columns)
        missing = [c for c in self.columns if schema.get_field_index(c) < 0]
        if missing:
            raise ConnectorError(f"table '{table}': no column {missing[0]!r} in {schema.names}")
        self.output_schema = pa.schema([schema.field(c) for c in self.columns])
        # Malformed records dropped so far (only grows when parse errors are ignored).
        self.parse_errors = 0

    @abstractmethod
    def read_file(self, path: str, skip_rows: int = 0) -> Iterator[pa.RecordBatch]:
        """Batches of ``path`` in file order, after the first ``skip_rows`` good rows."""

    @abstractmethod
    def open_writer(self, path: str, schema: pa.Schema) -> FileWriter:
        """A writer creating ``path`` for batches of ``schema``."""

    def file_columns(self, file_schema: pa.Schema, what: str) -> list[str]:
        """The columns to read from a columnar file (parquet, ORC) named ``what`` in errors: the
        projected ones, each of which it must have (none projected: its first, for the row count)."""
        for name in self.columns:
            if file_schema.get_field_index(name) < 0:
                raise DataError(f"{what} has no column '{name}'")
        return self.columns or file_schema.names[:1]

    def skip_rows(self, batches: Iterator[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
        """``batches`` without their first ``rows`` rows, for resuming inside a file.

        Errors met while decoding the skipped part were already counted by the
        reader that returned those rows (it decoded every batch up to the one
        holding its last row), so they are not counted again.
        """
        if rows == 0:
            yield from batches
            return
        base = self.parse_errors
        it = iter(batches)
        for b in it:
            if rows >= b.num_rows:
                rows -= b.num_rows
                if rows == 0:
                    self.parse_errors = base
                    break
                continue
            self.parse_errors = base
            yield b.slice(rows)
            break
        yield from it


class MessageFormat(ABC):
    """A format that also encodes and decodes single records, one per message (Kafka)."""

    # A null message (a Kafka tombstone) decodes to a row (raw: a NULL value) instead of being skipped.
    null_messages_are_rows: bool = False

    @abstractmethod
    def decode_messages(self, messages: Sequence[bytes | None], where: Locate) -> pa.RecordBatch:
        """One record per message -> a batch of the projected columns.

        ``where(i)`` describes message ``i`` in error messages, e.g. "topic 'orders'
        partition 0 offset 17".
        """

    @abstractmethod
    def encode_messages(self, batch: pa.RecordBatch) -> list[bytes | None]:
        """One encoded record per row (None: a null message)."""


class TextFormat(FileFormat, MessageFormat):
    """A line-oriented text format, usable per file and per message."""

    @abstractmethod
    def encode_lines(self, batch: pa.RecordBatch) -> pa.Array:
        """One text record (string, no line terminator) per row."""

    @abstractmethod
    def decode_messages(self, messages: Sequence[bytes], where: Locate) -> pa.RecordBatch:
        """One record per message -> a batch of the projected columns.

        Empty (blank) messages are skipped.  ``where(i)`` describes message
        ``i`` in error messages, e.g. "topic 'orders' partition 0 offset 17".
        """

    def encode(self, batch: pa.RecordBatch) -> bytes:
        """The rows as text, each terminated by a newline."""
        if batch.num_rows == 0:
            return b""
        terminated = pc.binary_join_element_wise(self.encode_lines(batch), pa.scalar(""), "\n")
        return concat_values(terminated)

    def encode_messages(self, batch: pa.RecordBatch) -> list[bytes]:
        """One encoded record per row, without a line terminator."""
        return self.encode_lines(batch).cast(pa.binary()).to_pylist()

    def open_writer(self, path: str, schema: pa.Schema) -> FileWriter:
        return TextFileWriter(path, self)


class TextFileWriter(FileWriter):
    """Appends encoded batches of a text format to a file."""

    def __init__(self, path: str, fmt: TextFormat) -> None:
        self._fmt = fmt
        self._file = open(path, "wb")  # noqa: SIM115 - closed in close()
        self._size = 0

    def write(self, batch: pa.RecordBatch) -> None:
        data = self._fmt.encode(batch)
        self._file.write(data)
        self._size += len(data)

    @property
    def size(self) -> int:
        return self._size

    def close(self) -> None:
        if self._file.closed:
            return
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
        finally:  # the descriptor is released even when the flush fails (a full disk)
            self._file.close()


def make_batch(arrays: Sequence[pa.Array], schema: pa.Schema, rows: int) -> pa.RecordBatch:
    """A batch of ``arrays``; with zero columns (a projection of none) it still has ``rows`` rows."""
    if arrays:
        return pa.RecordBatch.from_arrays(list(arrays), schema=schema)
    return pa.record_batch([pa.nulls(rows)], names=["_"]).select([])


def conform_columns(batch: pa.RecordBatch, schema: pa.Schema, where: str) -> pa.RecordBatch:
    """A batch read from a columnar file (parquet, ORC) with exactly ``schema``'s columns, cast to the
    table's types; a column that cannot be is a DataError naming ``where`` (the file)."""
    arrays = []
    for f in schema:
        arr = batch.column(f.name)
        if arr.type != f.type:
            try:
                arr = arr.cast(f.type)
            except CONVERSION_ERRORS as e:
                raise DataError(f"{where}: column '{f.name}' of type {sql_type_name(arr.type)} "
                                f"cannot be read as {sql_type_name(f.type)}: {e}") from None
        arrays.append(arr)
    return make_batch(arrays, schema, batch.num_rows)


def concat_values(strings: pa.Array) -> bytes:
    """The concatenated bytes of a string/binary array's values (no separators)."""
    if len(strings) == 0:
        return b""
    strings = pc.fill_null(strings, "")
    if strings.offset != 0 or strings.null_count:
        strings = pa.concat_arrays([strings])
    offsets = strings.buffers()[1]
    width = 8 if pa.types.is_large_string(strings.type) or pa.types.is_large_binary(strings.type) else 4
    start = int.from_bytes(offsets[0:width], "little", signed=True)
    end = int.from_bytes(offsets[len(strings) * width : (len(strings) + 1) * width], "little", signed=True)
    data = strings.buffers()[2]
    return b"" if data is None else data[start:end].to_pybytes()


# ---------------------------------------------------------------------------
# text -> typed values


def check_text_type(t: pa.DataType, fmt: str, column: str, table: str) -> None:
    """Fail early (ConnectorError) for a column type the text formats cannot represent."""
    if fmt == "csv" and (pa.types.is_list(t) or pa.types.is_struct(t)):
        # an ARRAY or ROW field is its elements or fields joined by 'csv.array-element-delimiter'
        # (Flink's csv format has no MAP); their values are scalars
        children = (t.value_type,) if pa.types.is_list(t) else tuple(f.type for f in t)
        for child in children:
            if pa.types.is_list(child) or pa.types.is_map(child) or pa.types.is_struct(child):
                raise ConnectorError(f"table '{table}': format 'csv' does not support column '{column}' of "
                                     f"type {sql_type_name(t)}: its elements or fields must be scalars")
            check_text_type(child, fmt, column, table)
        return
    if fmt == "json" and (pa.types.is_list(t) or pa.types.is_map(t) or pa.types.is_struct(t)):
        # JSON arrays, and objects for MAP and ROW columns (as Flink's json format)
        children = (t.value_type,) if pa.types.is_list(t) else (
            (t.key_type, t.item_type) if pa.types.is_map(t) else tuple(f.type for f in t))
        for child in children:
            check_text_type(child, fmt, column, table)
        return
    ok = (
        pa.types.is_boolean(t)
        or pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_decimal(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_date32(t)
        or pa.types.is_time(t)
        or pa.types.is_timestamp(t)
    )
    if not ok:
        raise ConnectorError(
            f"table '{table}': format '{fmt}' does not support column '{column}' of type {sql_type_name(t)}"
        )


def parse_text(strings: pa.Array, t: pa.DataType) -> pa.Array:
    """Convert text to ``t`` with Arrow casts; raises one of CONVERSION_ERRORS on any bad value."""
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return strings.cast(t)
    if pa.types.is_timestamp(t):
        parse_unit = "ns" if t.unit == "ns" else "us"
        if t.tz is None:
            try:
                # the common text: Arrow takes no zone designator into a naive timestamp, nor a finer
                # fraction than the unit's, so there is nothing to strip or truncate
                return pc.cast(strings, t)
            except CONVERSION_ERRORS:
                pass
            # the regex pass costs 8x the two suffix tests, and text with a trailing Z is rare
            zulu = pc.or_(pc.ends_with(strings, "Z"), pc.ends_with(strings, "z"))
            naive = pc.replace_substring_regex(strings, r"[Zz]$", "") if pc.any(zulu).as_py() else strings
            parsed = pc.cast(naive, pa.timestamp(parse_unit))
        else:
            has_zone = pc.match_substring_regex(strings, _HAS_ZONE)
            zoned = pc.if_else(has_zone, strings, pc.binary_join_element_wise(strings, "Z", ""))
            parsed = pc.cast(zoned, pa.timestamp(parse_unit, "UTC"))
        # Finer fractions than the column's precision are truncated, as Flink does.
        return pc.cast(parsed, t, safe=False)
    if pa.types.is_time(t):
        stamped = pc.binary_join_element_wise("1970-01-01 ", strings, "")
        stamps = pc.cast(stamped, pa.timestamp(t.unit))
        return pc.cast(pc.cast(stamps, pa.int64()), pa.int32() if t.bit_width == 32 else pa.int64()).cast(t)
    return pc.cast(strings, t)


def _normalize_text(strings: pa.Array) -> pa.Array:
    """Lenient form of non-string text: surrounding blanks removed, empty text is NULL (like Flink)."""
    trimmed = pc.utf8_trim_whitespace(strings)
    return pc.if_else(pc.equal(trimmed, ""), pa.scalar(None, strings.type), trimmed)


def convert_text(strings: pa.Array, t: pa.DataType) -> pa.Array:
    """Text -> values of ``t`` (vectorized); raises one of CONVERSION_ERRORS if any value is bad."""
    try:
        return parse_text(strings, t)
    except CONVERSION_ERRORS:
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            raise
    return parse_text(_normalize_text(strings), t)


def bad_positions(strings: pa.Array, t: pa.DataType, first_only: bool) -> list[int]:
    """Indices of values that do not convert to ``t``, found by bisection (ascending).

    With ``first_only`` only the leftmost bad value is searched for, in
    O(log n) vectorized casts.
    """
    bad: list[int] = []

    def ok(start: int, length: int) -> bool:
        try:
            convert_text(strings.slice(start, length), t)
        except CONVERSION_ERRORS:
            return False
        return True

    def visit(start: int, length: int) -> None:
        if (first_only and bad) or ok(start, length):
            return
        if length <= _BISECT_LEAF:
            for i in range(start, start + length):
                if not ok(i, 1):
                    bad.append(i)
                    if first_only:
                        return
            return
        half = length // 2
        visit(start, half)
        visit(start + half, length - half)

    visit(0, len(strings))
    return bad


def cannot_parse(value: Any, t: pa.DataType) -> str:
    """The reason text for a value that does not convert to ``t``."""
    return f"cannot parse {_quote(value)} as {sql_type_name(t)}"


def _quote(value: Any) -> str:
    text = str(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"'{text}'"


def convert_columns(
    strings: Sequence[pa.Array],
    fields: Sequence[pa.Field],
    first_only: bool,
    what: str = "column",
) -> tuple[list[pa.Array], dict[int, str]]:
    """Convert text columns to ``fields``' types.

    Returns the converted arrays and ``{row: reason}`` for the rows holding a
    value that does not convert (the reason names the first bad column of the
    row).  With ``first_only`` the dict holds just the first bad row and the
    arrays are not usable (the caller reports the error); otherwise bad values
    are NULL in the arrays and the caller drops those rows.
    """
    out: list[pa.Array] = []
    failed: list[tuple[int, list[int]]] = []
    for k, (arr, f) in enumerate(zip(strings, fields, strict=True)):
        try:
            out.append(convert_text(arr, f.type))
        except CONVERSION_ERRORS:
            failed.append((k, bad_positions(arr, f.type, first_only)))
            out.append(arr)  # replaced below unless first_only
    if not failed:
        return out, {}
    reasons: dict[int, str] = {}
    for k, rows in failed:
        f = fields[k]
        for row in rows:
            if row not in reasons:
                reasons[row] = f"{what} '{f.name}': {cannot_parse(strings[k][row].as_py(), f.type)}"
    if first_only and reasons:
        first = min(reasons)
        return out, {first: reasons[first]}
    for k, rows in failed:
        mask = pa.array(_mask(len(strings[k]), rows))
        cleaned = pc.if_else(mask, pa.scalar(None, strings[k].type), strings[k])
        out[k] = convert_text(cleaned, fields[k].type)
    return out, dict(sorted(reasons.items()))


def _mask(n: int, rows: Sequence[int]) -> np.ndarray:
    """A boolean mask of length n, true at ``rows``."""
    m = np.zeros(n, dtype=bool)
    m[list(rows)] = True
    return m


def drop_rows(arrays: Sequence[pa.Array], n: int, rows: Sequence[int]) -> list[pa.Array]:
    """The arrays without the given row indices."""
    if not rows:
        return list(arrays)
    keep = np.ones(n, dtype=bool)
    keep[list(rows)] = False
    mask = pa.array(keep)
    return [pc.filter(a, mask) for a in arrays]


# ---------------------------------------------------------------------------
# typed values -> text


def timestamp_text(arr: pa.Array, iso: bool = False) -> pa.Array:
    """'yyyy-MM-dd HH:mm:ss.SSS' (digits per precision; 'Z' appended for TIMESTAMP_LTZ).

    With ``iso`` the date and time are separated by 'T' (ISO-8601).
    """
    text = pc.cast(arr, pa.string())
    if iso:
        text = pc.replace_substring(text, " ", "T", max_replacements=1)
    return text


def value_text(arr: pa.Array, iso_timestamps: bool = False) -> pa.Array:
    """The canonical text of each value (NULL stays NULL), as the text formats write it."""
    t = arr.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return arr
    if pa.types.is_timestamp(t):
        return timestamp_text(arr, iso_timestamps)
    return pc.cast(arr, pa.string())


def line_blocks(path: str, block_size: int) -> Iterator[tuple[int, bytes]]:
    """(number of its first line, block) for the blocks of whole lines of a file, about
    ``block_size`` bytes each; the last block holds what follows the last newline."""
    with open(path, "rb") as f:
        line = 1
        rest = b""
        while True:
            chunk = f.read(block_size)
            data = rest + chunk
            if chunk:
                cut = data.rfind(b"\n") + 1
                if cut == 0:
                    rest = data
                    continue
                block, rest = data[:cut], data[cut:]
            else:
                block, rest = data, b""
            yield line, block
            if not chunk:
                return
            line += block.count(b"\n")


def message_lines(messages: Sequence[bytes]) -> tuple[bytes, np.ndarray] | None:
    """The messages that are not blank as one block of lines, with each line's message index
    (None: all blank).  A JSON document's raw line breaks can only be whitespace between tokens,
    so they become spaces."""
    flat = pc.replace_substring_regex(pa.array(messages, pa.binary()), r"[\r\n]", " ")
    blank = pc.match_substring_regex(flat, r"^\s*$").to_numpy(zero_copy_only=False).astype(bool)
    keep = np.flatnonzero(~blank)
    if len(keep) == 0:
        return None
    return concat_values(pc.binary_join_element_wise(flat.take(pa.array(keep)), pa.scalar(b""), b"\n")), keep
