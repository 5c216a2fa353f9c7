"""The filesystem source: a file, or the visible files of a directory (see the package docstring)."""

from __future__ import annotations

import os
import tempfile
import time
import zlib
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from sqlstream.core.connectors import MetadataKey
from sqlstream.core.errors import ConnectorError, DataError
from sqlstream.runtime.connectors.base import SourceContext, SourceReader
from sqlstream.runtime.connectors.filesystem.fetch import read_ahead, rebatch
from sqlstream.runtime.connectors.filesystem.options import FileSystemOptions
from sqlstream.runtime.connectors.filesystem.partitions import parse_partition, prune, typed_values
from sqlstream.runtime.formats import FileFormat, create_format, split_row_kinds
from sqlstream.runtime.fs import StorageError, resolve

# Flink's filesystem source metadata (FileSystemTableSource.ReadableFileInfo), all read-only.
METADATA: dict[str, MetadataKey] = {
    "file.path": MetadataKey(pa.string()),
    "file.name": MetadataKey(pa.string()),
    "file.size": MetadataKey(pa.int64()),
    "file.modification-time": MetadataKey(pa.timestamp("ms", tz="UTC")),
}


def file_metadata(path: str, info: pafs.FileInfo, name: str) -> dict[str, pa.Scalar]:
    """The METADATA values of one file: ``path`` as shown (absolute, or the object's URI), its store info."""
    mtime_ns = info.mtime_ns if info.mtime_ns is not None else 0
    return {
        "file.path": pa.scalar(path),
        "file.name": pa.scalar(name),
        "file.size": pa.scalar(info.size, pa.int64()),
        "file.modification-time": pa.scalar(mtime_ns // 1_000_000, pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
    }


def _hidden(name: str) -> bool:
    return name.startswith((".", "_"))


class FileSystemSource(SourceReader):
    """Reads this subtask's files; see the module docstring for the position."""

    def __init__(self, ctx: SourceContext) -> None:
        self._ctx = ctx
        self._table = ctx.table.name
        options = FileSystemOptions.from_options(ctx.options, self._table)
        self._path = options.path.removeprefix("file://")  # a local path as it was given
        try:
            self._location = resolve(options.path, ctx.settings)
        except StorageError as e:
            raise ConnectorError(f"table '{self._table}': {e}") from None
        # partition columns come from the directory names, metadata columns ('file.path', ...) from the
        # file itself, the others from the files' contents
        self._keys = list(ctx.table.partition_keys)
        self._metadata = {c.name: c.metadata_key for c in ctx.table.metadata_columns if c.name in ctx.columns}
        self._file_info: dict[str, pa.Scalar] = {}  # the current file's METADATA values
        self._default_name = options.default_partition_name
        self._partition_filter = ctx.partition_filter
        data_schema = pa.schema([f for f in ctx.table.physical_schema if f.name not in self._keys])
        data_columns = [c for c in ctx.columns if c not in self._keys and c not in self._metadata]
        if self._keys and not data_columns:  # only partition columns read: one column counts the rows
            data_columns = [data_schema.names[0]]
        self._format: FileFormat = create_format(
            options.format, data_schema, options.format_options, data_columns, self._table
        )
        self._out_schema = ctx.schema
        self._partition_values: dict[str, dict[str, pa.Scalar]] = {}  # directory -> typed values
        self.listed_partitions: list[str] = []  # the partition directories the last scan listed files in
        interval = options.monitor_interval_ms
        self._interval_s: float | None = None if interval is None else interval / 1000.0
        self.bounded = self._interval_s is None
        self._root = ""
        self._remote_dir = False  # the store path is a directory (else one object)
        self._done: list[str] = []  # relative names of finished files, in reading order
        self._done_set: set[str] = set()
        self._queue: list[str] = []
        self._known: set[str] = set()
        self._current: str | None = None
        self._offset = 0  # rows of the current file already returned
        self._batches: Iterator[tuple[pa.RecordBatch, int]] | None = None
        self._restored_errors = 0
        self._handed_errors = 0  # the format's count once it had decoded the last batch handed on
        self._next_scan = 0.0
        self._end = False
        self._kinds: pa.Array | None = None  # RowKinds of the last batch (a changelog format)

    @property
    def current_kinds(self) -> pa.Array | None:
        return self._kinds

    @property
    def parse_errors(self) -> int:
        """Malformed records skipped (with ignore-parse-errors), including before a restore."""
        return self._restored_errors + self._handed_errors

    def open(self) -> None:
        if self._location.remote:
            self._open_remote()
            return
        if not os.path.exists(self._path):
            raise ConnectorError(f"table '{self._table}': path '{self._path}' does not exist")
        if self._keys and not os.path.isdir(self._path):
            raise ConnectorError(f"table '{self._table}' is partitioned, so 'path' must be a directory; "
                                 f"'{self._path}' is a file")
        self._root = self._path if os.path.isdir(self._path) else os.path.dirname(self._path)
        if self._current is not None:
            self._known.add(self._current)
        self._scan()

    def _open_remote(self) -> None:
        """A file or directory on an object store: its existence checked, its listing remote."""
        try:
            kind = self._location.info().type
        except StorageError as e:
            raise ConnectorError(f"table '{self._table}': {e}") from None
        if kind == pafs.FileType.NotFound:
            raise ConnectorError(f"table '{self._table}': path {self._location.where()} does not exist")
        self._remote_dir = kind == pafs.FileType.Directory
        if self._keys and not self._remote_dir:
            raise ConnectorError(f"table '{self._table}' is partitioned, so 'path' must be a directory; "
                                 f"{self._location.where()} is an object")
        if self._current is not None:
            self._known.add(self._current)
        self._scan()

    def _list_remote(self) -> list[str]:
        """Relative names of the visible objects under the store path, sorted."""
        if not self._remote_dir:
            return [self._location.name]
        try:
            entries = self._location.list()
        except StorageError as e:
            raise ConnectorError(f"table '{self._table}': {e}") from None
        prefix = self._location.path.rstrip("/") + "/"
        out = []
        for entry in entries:
            rel = entry.path.removeprefix(prefix)
            if entry.type == pafs.FileType.File and not any(_hidden(part) for part in rel.split("/")):
                out.append(rel)
        return sorted(out)

    def _list_partitioned(self) -> list[str]:
        """Relative names of the visible files in the partitions the filter keeps, sorted.  Only
        directory names are listed level by level; files are listed only in kept partitions."""
        dirs = [""]
        for _ in self._keys:
            deeper = []
            for d in dirs:
                where = self._location.child(*d.split("/")) if d else self._location
                try:
                    entries = where.list(recursive=False)
                except StorageError as e:
                    raise ConnectorError(f"table '{self._table}': {e}") from None
                for entry in entries:
                    if entry.type == pafs.FileType.Directory and not _hidden(entry.base_name):
                        deeper.append(f"{d}/{entry.base_name}" if d else entry.base_name)
            dirs = deeper
        raw = [(d, parse_partition(d, self._keys)) for d in dirs]
        parts = [(d, r) for d, r in raw if r is not None]
        try:
            values = typed_values([r for _, r in parts], self._keys, self._ctx.table.physical_schema,
                                  self._default_name)
        except ValueError as e:
            raise DataError(f"table '{self._table}': {e} (a directory under {self._location.where()})") from None
        keep = prune(values, self._partition_filter)
        self.listed_partitions = [d for (d, _), k in zip(parts, keep, strict=True) if k]
        out: list[str] = []
        for i, ((d, _), k) in enumerate(zip(parts, keep, strict=True)):
            if not k:
                continue
            self._partition_values[d] = {key: values.column(key)[i] for key in self._keys}
            try:
                entries = self._location.child(*d.split("/")).list(recursive=False)
            except StorageError as e:
                raise ConnectorError(f"table '{self._table}': {e}") from None
            out.extend(f"{d}/{e.base_name}" for e in entries
                       if e.type == pafs.FileType.File and not _hidden(e.base_name))
        return sorted(out)

    def _with_partition(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The batch with the current file's partition values as columns, in the order asked for."""
        assert self._current is not None
        directory = self._current.rsplit("/", 1)[0]
        values = self._partition_values.get(directory)
        if values is None:  # a restored file: its directory's values from its name
            raw = parse_partition(directory, self._keys)
            assert raw is not None
            table = typed_values([raw], self._keys, self._ctx.table.physical_schema, self._default_name)
            values = {key: table.column(key)[0] for key in self._keys}
            self._partition_values[directory] = values
        n = batch.num_rows
        cols = [pa.repeat(values[c], n) if c in values else batch.column(c) for c in self._out_schema.names]
        return pa.RecordBatch.from_arrays(cols, schema=self._out_schema)

    def _list(self) -> list[str]:
        """Relative names of the visible files, sorted."""
        if self._keys:
            return self._list_partitioned()
        if self._location.remote:
            return self._list_remote()
        if not os.path.isdir(self._path):
            return [os.path.basename(self._path)] if os.path.exists(self._path) else []
        out: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self._path):
            dirnames[:] = [d for d in dirnames if not _hidden(d)]
            for name in filenames:
                if not _hidden(name):
                    out.append(os.path.relpath(os.path.join(dirpath, name), self._path))
        return sorted(out)

    def _mine(self, index: int, name: str) -> bool:
        p = self._ctx.parallelism
        if self.bounded:
            return index % p == self._ctx.subtask_index
        # Subtasks scan at different times, so an unbounded source must not split by list
        # position (it shifts as files appear): a stable hash of the name decides.
        return zlib.crc32(name.encode()) % p == self._ctx.subtask_index

    def _scan(self) -> None:
        for i, name in enumerate(self._list()):
            if name in self._known or name in self._done_set or not self._mine(i, name):
                continue
            self._known.add(name)
            self._queue.append(name)
        if self._interval_s is not None:
            self._next_scan = time.monotonic() + self._interval_s

    def read_batch(self) -> pa.RecordBatch | None:
        while True:
            if self._batches is None and not self._start_next():
                return None
            assert self._batches is not None
            item = next(self._batches, None)
            if item is None:  # the file's fetcher has ended: its count is final
                self._handed_errors = self._format.parse_errors
                self._finish_current()
                continue
            batch, self._handed_errors = item
            self._offset += batch.num_rows
            batch, self._kinds = split_row_kinds(batch)
            if self._metadata:
                batch = self._with_metadata(batch)
            if self._keys:
                return self._with_partition(batch)
            return batch.select(self._out_schema.names) if self._metadata else batch

    def _start_next(self) -> bool:
        """Begin the next file (resuming the restored one first); False if there is none now."""
        if self._current is None:
            if not self._queue and not self.bounded and time.monotonic() >= self._next_scan:
                self._scan()
            if not self._queue:
                self._end = self.bounded
                return False
            self._current = self._queue.pop(0)
            self._offset = 0
        if self._location.remote:
            self._batches = self._remote_batches(self._current, self._offset)
        else:
            self._batches = self._file_batches(os.path.join(self._root, self._current), self._offset)
        return True

    def _file_batches(
        self, path: str, skip: int, metadata: dict[str, pa.Scalar] | None = None
    ) -> Iterator[tuple[pa.RecordBatch, int]]:
        """(batch, the format's count of malformed records skipped once it had decoded that batch)
        of the local file ``path`` from row ``skip`` on; ``metadata``: the file's METADATA values
        (default: those of the local file ``path``)."""
        size = self._ctx.batch_size
        if self._metadata:
            if metadata is None:
                local = pafs.LocalFileSystem().get_file_info(path)
                metadata = file_metadata(os.path.abspath(path), local, os.path.basename(path))
            self._file_info = metadata
        decoded = ((batch, self._format.parse_errors) for batch in self._format.read_file(path, skip))
        yield from rebatch(read_ahead(decoded), size)

    def _with_metadata(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The batch with the current file's METADATA columns appended (cast to their declared types)."""
        n = batch.num_rows
        for name, key in self._metadata.items():
            value = self._file_info[key]
            column = pa.repeat(value, n).cast(self._out_schema.field(name).type)
            batch = batch.append_column(pa.field(name, column.type), column)
        return batch

    def _remote_batches(self, name: str, skip: int) -> Iterator[tuple[pa.RecordBatch, int]]:
        """The batches of an object, decoded from a local copy (the formats read local files,
        and parquet seeks); errors name the object, not the copy."""
        obj = self._location.child(*name.split("/")) if self._remote_dir else self._location
        with tempfile.TemporaryDirectory(prefix="sqlstream-read-") as tmp:
            local = os.path.join(tmp, os.path.basename(name))
            try:
                obj.download(local)
                metadata = file_metadata(obj.uri, obj.info(), obj.name) if self._metadata else None
            except StorageError as e:
                raise ConnectorError(f"table '{self._table}': {e}") from None
            try:
                yield from self._file_batches(local, skip, metadata)
            except DataError as e:
                raise type(e)(str(e).replace(local, obj.uri)) from None

    def _finish_current(self) -> None:
        assert self._current is not None
        self._done.append(self._current)
        self._done_set.add(self._current)
        self._current = None
        self._offset = 0
        self._batches = None

    def _stop_reading(self) -> None:
        """End the current file's fetcher thread (it closes the file)."""
        if self._batches is not None:
            self._batches.close()  # type: ignore[attr-defined]
            self._batches = None

    @property
    def finished(self) -> bool:
        return self._end

    def snapshot_position(self) -> Any:
        return {
            "finished": list(self._done),
            "current": self._current,
            "offset": self._offset,
            "parse_errors": self.parse_errors,
        }

    def restore_position(self, position: Any) -> None:
        self._done = list(position.get("finished", []))
        self._done_set = set(self._done)
        self._current = position.get("current")
        self._offset = int(position.get("offset", 0))
        self._restored_errors = int(position.get("parse_errors", 0))
        self._stop_reading()
        self._format.parse_errors = 0
        self._handed_errors = 0
        self._queue = []
        self._known = set()

    def close(self) -> None:
        self._stop_reading()
