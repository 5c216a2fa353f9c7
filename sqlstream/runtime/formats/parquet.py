"""Parquet format: columnar files read column-projected and row-group-skipping.

Values are already typed, so the only decoding work is casting a file's
column types to the table's (e.g. INT64 in the file for an INT column), which
fails with a DataError naming the file and the column.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from sqlstream.core.errors import DataError
from sqlstream.runtime.formats import FileFormat, FileWriter, conform_columns

_READ_BATCH = 65536
_ROW_GROUP_ROWS = 65536  # small written batches are buffered up to this many rows per row group


class ParquetFormat(FileFormat):
    """Reads the projected columns of parquet files; writes one parquet file per writer."""

    name = "parquet"
    extension = "parquet"

    def read_file(self, path: str, skip_rows: int = 0) -> Iterator[pa.RecordBatch]:
        try:
            pf = pq.ParquetFile(path)
        except (pa.ArrowInvalid, OSError) as e:
            raise DataError(f"cannot read parquet file {path}: {e}") from None
        with pf:
            columns = self.file_columns(pf.schema_arrow, f"parquet file {path}")
            # Whole row groups before the restore point are skipped unread.
            groups = []
            for g in range(pf.metadata.num_row_groups):
                rows = pf.metadata.row_group(g).num_rows
                if skip_rows >= rows:
                    skip_rows -= rows
                else:
                    groups.append(g)
            if not groups:
                return
            batches = pf.iter_batches(batch_size=_READ_BATCH, row_groups=groups, columns=columns)
            for batch in self.skip_rows(batches, skip_rows):
                yield conform_columns(batch, self.output_schema, f"parquet file {path}")

    def open_writer(self, path: str, schema: pa.Schema) -> FileWriter:
        return ParquetFileWriter(path, schema)


class ParquetFileWriter(FileWriter):
    """One parquet file; written batches are buffered into row groups of a useful size."""

    def __init__(self, path: str, schema: pa.Schema) -> None:
        self._path = path
        self._schema = schema
        self._writer = pq.ParquetWriter(path, schema)
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._pending_bytes = 0
        self._closed = False

    def write(self, batch: pa.RecordBatch) -> None:
        self._pending.append(batch)
        self._pending_rows += batch.num_rows
        self._pending_bytes += batch.nbytes
        if self._pending_rows >= _ROW_GROUP_ROWS:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._writer.write_table(pa.Table.from_batches(self._pending, schema=self._schema))
        self._pending, self._pending_rows, self._pending_bytes = [], 0, 0

    @property
    def size(self) -> int:
        # Buffered rows count with their in-memory size: an estimate of what they will take.
        return os.path.getsize(self._path) + self._pending_bytes

    def close(self) -> None:
        if self._closed:
            return
        self._flush()
        self._writer.close()
        self._closed = True
        fd = os.open(self._path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
