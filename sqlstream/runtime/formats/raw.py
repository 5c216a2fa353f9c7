"""Raw format, following Flink's 'raw' format: a message is the bytes of one value.

The table has exactly one column.  STRING is text in 'raw.charset' (UTF-8 by
default; undecodable bytes become U+FFFD as Java's String constructor makes
them), BYTES the bytes as they are, BOOLEAN one byte (non-zero is true) and
TINYINT/SMALLINT/INT/BIGINT/FLOAT/DOUBLE their 1/2/4/8/4/8 bytes in
'raw.endianness' order (big-endian by default).  A NULL value is a null
message (a Kafka tombstone) and a null message reads as NULL.

In files (the filesystem connector) each value is one line, as Flink's
filesystem connector frames a serialization format: read up to each newline,
written followed by one (checked against Flink 2.3: INT 258 is written as
``00 00 01 02 0a``).  A NULL value cannot be written to a file (Flink fails
with a NullPointerException; here it is a DataError naming the file).
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.connectors import Option
from sqlstream.core.errors import ConnectorError, DataError
from sqlstream.core.types import sql_type_name
from sqlstream.runtime.formats import (
    CONVERSION_ERRORS,
    FileFormat,
    FileWriter,
    Locate,
    MessageFormat,
    concat_values,
    line_blocks,
    make_batch,
)

OPTIONS: tuple[Option, ...] = (
    Option("raw.charset", default="UTF-8", description="charset of STRING values"),
    Option(
        "raw.endianness",
        default="big-endian",
        choices=("big-endian", "little-endian"),
        description="byte order of numeric values",
    ),
)

# bytes of whole lines read from a file at a time
_BLOCK_SIZE = 4 << 20

# Fixed-width types: numpy dtype character and size in bytes.
_FIXED: dict[pa.DataType, tuple[str, int]] = {
    pa.bool_(): ("u1", 1),
    pa.int8(): ("i1", 1),
    pa.int16(): ("i2", 2),
    pa.int32(): ("i4", 4),
    pa.int64(): ("i8", 8),
    pa.float32(): ("f4", 4),
    pa.float64(): ("f8", 8),
}


class RawFormat(FileFormat, MessageFormat):
    """One value per message (or per line of a file), encoded as Flink's raw format encodes it."""

    name = "raw"
    extension = "raw"
    null_messages_are_rows = True

    def __init__(
        self, schema: pa.Schema, options: Mapping[str, Any], columns: Sequence[str] | None, table: str
    ) -> None:
        super().__init__(schema, options, columns, table)
        if len(schema) != 1:
            columns = ", ".join(f"`{f.name}` {sql_type_name(f.type)}" for f in schema)
            raise ConnectorError(
                f"table '{table}': The 'raw' format only supports single physical column. However the defined "
                f"schema contains multiple physical columns: [{columns}]"
            )
        self._field = schema.field(0)
        t = self._field.type
        if not (pa.types.is_string(t) or pa.types.is_binary(t) or t in _FIXED):
            raise ConnectorError(
                f"table '{table}': The 'raw' format doesn't supports '{sql_type_name(t)}' as column type "
                f"(column '{self._field.name}'; it supports STRING, BYTES, BOOLEAN, TINYINT, SMALLINT, INT, BIGINT, "
                "FLOAT and DOUBLE)."
            )
        charset = str(options.get("raw.charset") or "UTF-8")
        try:
            self._codec = codecs.lookup(charset).name
        except LookupError:
            raise ConnectorError(f"table '{table}': option 'raw.charset' = '{charset}' is not a known charset") from None
        order = ">" if (options.get("raw.endianness") or "big-endian") == "big-endian" else "<"
        if t in _FIXED:
            code, self._width = _FIXED[t]
            self._dtype = np.dtype(order + code)

    # -- bytes -> values ---------------------------------------------------

    def _values(self, raw: pa.Array, where: Locate) -> pa.Array:
        """A binary array (NULL for null messages) -> the column's values, vectorized."""
        t = self._field.type
        if pa.types.is_binary(t):
            return raw
        if pa.types.is_string(t):
            if self._codec == "utf-8":
                try:
                    return raw.cast(pa.string())
                except CONVERSION_ERRORS:
                    pass
            text = [None if v is None else v.decode(self._codec, errors="replace") for v in raw.to_pylist()]
            return pa.array(text, pa.string())
        lengths = pc.fill_null(pc.binary_length(raw), self._width).to_numpy(zero_copy_only=False)
        wrong = np.flatnonzero(lengths != self._width)
        if len(wrong):
            i = int(wrong[0])
            raise DataError(
                f"raw value in {where(i)} has {int(lengths[i])} bytes, but a {sql_type_name(t)} takes "
                f"{self._width}"
            )
        data = np.frombuffer(concat_values(pc.fill_null(raw, b"\0" * self._width)), dtype=self._dtype)
        values = pa.array(data != 0 if t == pa.bool_() else data.astype(self._dtype.newbyteorder("=")))
        return pc.if_else(pc.is_null(raw), pa.scalar(None, t), values.cast(t))

    def _batch(self, raw: pa.Array, where: Locate) -> pa.RecordBatch:
        if not self.columns:
            return make_batch([], self.output_schema, len(raw))
        return pa.RecordBatch.from_arrays([self._values(raw, where)], schema=self.output_schema)

    def decode_messages(self, messages: Sequence[bytes | None], where: Locate) -> pa.RecordBatch:
        return self._batch(pa.array(messages, pa.binary()), where)

    # -- values -> bytes ---------------------------------------------------

    def encode_values(self, values: pa.Array) -> pa.Array:
        """The column's values -> a binary array (NULL stays NULL), vectorized."""
        t = values.type
        if pa.types.is_binary(t):
            return values
        if pa.types.is_string(t):
            if self._codec == "utf-8":
                return values.cast(pa.binary())
            return pa.array([None if v is None else v.encode(self._codec) for v in values.to_pylist()], pa.binary())
        filled = pc.fill_null(values, False if t == pa.bool_() else 0).to_numpy(zero_copy_only=False)
        data = filled.astype(self._dtype).tobytes()
        offsets = pa.array(np.arange(len(values) + 1, dtype=np.int32) * self._width)
        encoded = pa.BinaryArray.from_buffers(pa.binary(), len(values), [None, offsets.buffers()[1], pa.py_buffer(data)])
        return pc.if_else(pc.is_null(values), pa.scalar(None, pa.binary()), encoded)

    def encode_messages(self, batch: pa.RecordBatch) -> list[bytes | None]:
        return self.encode_values(batch.column(0)).to_pylist()

    # -- files -------------------------------------------------------------

    def read_file(self, path: str, skip_rows: int = 0) -> Iterator[pa.RecordBatch]:
        # one value per line, read in blocks of whole lines (a large file is never whole in memory)
        for first, block in line_blocks(path, _BLOCK_SIZE):
            if block.endswith(b"\n"):
                block = block[:-1]
            elif not block:
                continue
            drop = max(0, skip_rows - (first - 1))
            lines = pc.split_pattern(pa.array([block], pa.binary()), b"\n").values.slice(drop)
            if len(lines):
                yield self._batch(lines, lambda i, base=first + drop: f"file {path} line {base + i}")

    def open_writer(self, path: str, schema: pa.Schema) -> FileWriter:
        return RawFileWriter(path, self)


class RawFileWriter(FileWriter):
    """Appends one line per value to a file."""

    def __init__(self, path: str, fmt: RawFormat) -> None:
        self._path = path
        self._fmt = fmt
        self._file = open(path, "wb")  # noqa: SIM115 - closed in close()
        self._size = 0

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        if batch.column(0).null_count:
            raise DataError(f"format 'raw' cannot write a NULL value to file {self._path}: a line holds one value")
        encoded = self._fmt.encode_values(batch.column(0))
        data = concat_values(pc.binary_join_element_wise(encoded, pa.scalar(b""), b"\n"))
        self._file.write(data)
        self._size += len(data)

    @property
    def size(self) -> int:
        return self._size

    def close(self) -> None:
        if self._file.closed:
            return
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
