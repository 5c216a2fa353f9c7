"""ORC format, following Flink's 'orc' format (filesystem connector only, as in Flink).

Files are read stripe by stripe, column-projected, and whole stripes before a
restore point are skipped unread.  ORC stores timestamps in nanoseconds, so
read columns are cast to the table's types; a file column that does not cast
is an error naming the file and the column.  ORC has no TIME type (Flink's orc
format has none either), so a TIME column is refused when the table is created.
Files are written with 'orc.compress' (ORC's own default, ZLIB, as Flink's
writer leaves it; LZO is not offered by Arrow's ORC writer).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.orc as orc

from sqlstream.core.connectors import Option
from sqlstream.core.errors import ConnectorError, DataError
from sqlstream.core.types import sql_type_name
from sqlstream.runtime.formats import FileFormat, FileWriter, conform_columns

OPTIONS: tuple[Option, ...] = (
    Option(
        "orc.compress",
        default="zlib",
        choices=("none", "zlib", "snappy", "lz4", "zstd"),
        description="compression of written ORC files (ORC's default ZLIB)",
    ),
)


def _supported(t: pa.DataType) -> bool:
    if pa.types.is_list(t):
        return _supported(t.value_type)
    return not (pa.types.is_time(t) or pa.types.is_interval(t) or pa.types.is_duration(t))


class OrcFormat(FileFormat):
    """Reads the projected columns of ORC files; writes one ORC file per writer."""

    name = "orc"
    extension = "orc"

    def __init__(
        self, schema: pa.Schema, options: Mapping[str, Any], columns: Sequence[str] | None, table: str
    ) -> None:
        super().__init__(schema, options, columns, table)
        for f in schema:
            if not _supported(f.type):
                raise ConnectorError(
                    f"table '{table}': format 'orc' does not support column '{f.name}' of type {sql_type_name(f.type)}"
                )
        compress = str(options.get("orc.compress") or "zlib")
        self._compression = "uncompressed" if compress == "none" else compress

    def read_file(self, path: str, skip_rows: int = 0) -> Iterator[pa.RecordBatch]:
        try:
            reader = orc.ORCFile(path)
        except (pa.ArrowInvalid, OSError) as e:
            raise DataError(f"cannot read ORC file {path}: {e}") from None
        columns = self.file_columns(reader.schema, f"ORC file {path}")
        stripes = (reader.read_stripe(stripe, columns=columns) for stripe in range(reader.nstripes))
        for batch in self.skip_rows(stripes, skip_rows):
            yield conform_columns(batch, self.output_schema, f"ORC file {path}")

    def open_writer(self, path: str, schema: pa.Schema) -> FileWriter:
        return OrcFileWriter(path, schema, self._compression)


class OrcFileWriter(FileWriter):
    """One ORC file; each written batch is appended (the writer forms stripes)."""

    def __init__(self, path: str, schema: pa.Schema, compression: str) -> None:
        self._path = path
        self._schema = schema
        self._writer = orc.ORCWriter(path, compression=compression)
        self._written = False
        self._closed = False

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows:
            self._writer.write(pa.Table.from_batches([batch]))
            self._written = True

    @property
    def size(self) -> int:
        return os.path.getsize(self._path)

    def close(self) -> None:
        if self._closed:
            return
        if not self._written:  # a file without rows still has the columns (and is a valid ORC file)
            self._writer.write(self._schema.empty_table())
        self._writer.close()
        self._closed = True
        fd = os.open(self._path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
