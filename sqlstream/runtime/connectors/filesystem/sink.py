"""The 'filesystem' connector: csv / json / parquet files in a file or directory.

Source: a file, or every visible file under a directory (recursively, names
starting with '.' or '_' are hidden, like Flink), read in name order.  The
position is "which files are done, and how many rows of the current one were
returned", so a restored reader re-decodes the current file and skips exactly
those rows.  With ``source.monitor-interval`` the source is unbounded and
rescans the directory for new files; files must then appear atomically (write
elsewhere or under a hidden name, then rename), as this sink does.

Sink: two-phase commit.  Rows go to hidden in-progress part files; a
checkpoint's ``prepare_commit`` closes them and ``commit`` renames them to
their visible names, so readers never see a partial or uncommitted file.
"""

from __future__ import annotations

import os
import re
import time
import uuid
import zlib
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.connectors import Option
from sqlstream.core.errors import ConnectorError
from sqlstream.core.tables import TableDef
from sqlstream.runtime.connectors.base import (
    Connector,
    SinkContext,
    SinkWriter,
    SourceContext,
    SourceReader,
)
from sqlstream.runtime.elements import RowKind
from sqlstream.runtime.formats import (
    FORMAT_NAMES,
    FileFormat,
    FileWriter,
    all_format_options,
    create_format,
)

_MEMORY = re.compile(
    r"^\s*(\d+)\s*(b|bytes|k|kb|kib|kibibytes|m|mb|mib|mebibytes|g|gb|gib|gibibytes|t|tb|tib|tebibytes)?\s*$"
)
_MEMORY_UNIT = {"b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_memory_size(text: str) -> int:
    """Flink MemorySize text ('128MB', '64 kb', '1024') in bytes (units are powers of 1024)."""
    m = _MEMORY.match(text.lower())
    if not m:
        raise ValueError(f"'{text}' is not a memory size (e.g. '128MB', '64 kb')")
    unit = (m.group(2) or "b")[0]
    return int(m.group(1)) * _MEMORY_UNIT[unit]


def _hidden(name: str) -> bool:
    return name.startswith((".", "_"))


def _format_options(options: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in options.items() if "." in k and k.split(".", 1)[0] in (*FORMAT_NAMES, "format")}


def _validate(table: TableDef, given: dict[str, str]) -> None:
    """Checks that need more than one option: format options match the format, sizes parse."""
    fmt = given.get("format", "").lower()
    for key in given:
        prefix = key.split(".", 1)[0]
        if prefix in FORMAT_NAMES and prefix != fmt:
            raise ConnectorError(
                f"table '{table.name}': option '{key}' applies to format '{prefix}', "
                f"but the table's format is '{fmt}'"
            )
    size = given.get("sink.rolling-policy.file-size")
    if size is not None:
        try:
            if parse_memory_size(size) <= 0:
                raise ValueError("must be positive")
        except ValueError as e:
            raise ConnectorError(
                f"table '{table.name}': option 'sink.rolling-policy.file-size' = '{size}' is invalid: {e}"
            ) from None
    declared = {o.key: o for o in all_format_options()}
    typed = {k: declared[k].convert(v, table.name) for k, v in given.items() if k in declared}
    # Building the format checks its option values and the column types it supports.
    create_format(fmt, table.physical_schema, typed, None, table.name)


class FileSystemSource(SourceReader):
    """Reads this subtask's files; see the module docstring for the position."""

    def __init__(self, ctx: SourceContext) -> None:
        self._ctx = ctx
        self._table = ctx.table.name
        self._path: str = ctx.options["path"]
        self._format: FileFormat = create_format(
            ctx.options["format"],
            ctx.table.physical_schema,
            _format_options(ctx.options),
            ctx.columns,
            self._table,
        )
        interval = ctx.options.get("source.monitor-interval")
        self._interval_s: float | None = None if interval is None else interval / 1000.0
        self.bounded = self._interval_s is None
        self._root = ""
        self._done: list[str] = []  # relative names of finished files, in reading order
        self._done_set: set[str] = set()
        self._queue: list[str] = []
        self._known: set[str] = set()
        self._current: str | None = None
        self._offset = 0  # rows of the current file already returned
        self._batches: Iterator[pa.RecordBatch] | None = None
        self._restored_errors = 0
        self._next_scan = 0.0
        self._end = False

    @property
    def parse_errors(self) -> int:
        """Malformed records skipped (with ignore-parse-errors), including before a restore."""
        return self._restored_errors + self._format.parse_errors

    def open(self) -> None:
        if not os.path.exists(self._path):
            raise ConnectorError(f"table '{self._table}': path '{self._path}' does not exist")
        self._root = self._path if os.path.isdir(self._path) else os.path.dirname(self._path)
        if self._current is not None:
            self._known.add(self._current)
        self._scan()

    def _list(self) -> list[str]:
        """Relative names of the visible files, sorted."""
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
            batch = next(self._batches, None)
            if batch is None:
                self._finish_current()
                continue
            if batch.num_rows == 0:
                continue
            self._offset += batch.num_rows
            return batch

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
        self._batches = self._file_batches(os.path.join(self._root, self._current), self._offset)
        return True

    def _file_batches(self, path: str, skip: int) -> Iterator[pa.RecordBatch]:
        size = self._ctx.batch_size
        for batch in self._format.read_file(path, skip):
            for start in range(0, batch.num_rows, size):
                yield batch.slice(start, size)

    def _finish_current(self) -> None:
        assert self._current is not None
        self._done.append(self._current)
        self._done_set.add(self._current)
        self._current = None
        self._offset = 0
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
        self._format.parse_errors = 0
        self._batches = None
        self._queue = []
        self._known = set()

    def close(self) -> None:
        self._batches = None


class FileSystemSink(SinkWriter):
    """Two-phase-commit writer of part files; see the module docstring."""

    def __init__(self, ctx: SinkContext) -> None:
        self._ctx = ctx
        opts = ctx.options
        self._dir = os.path.abspath(opts["path"])
        self._format = create_format(opts["format"], ctx.schema, _format_options(opts), None, ctx.table.name)
        size = opts.get("sink.rolling-policy.file-size")
        self._roll_bytes = None if size is None else parse_memory_size(size)
        self._uuid = uuid.uuid4().hex
        self._counter = 0
        self._writer: FileWriter | None = None
        self._current: tuple[str, str] | None = None  # (in-progress path, final path)
        self._pending: list[tuple[str, str]] = []  # closed, not yet handed to a checkpoint

    def open(self) -> None:
        os.makedirs(self._dir, exist_ok=True)

    def _new_file(self) -> None:
        ext = self._format.extension
        base = f"part-{self._ctx.subtask_index}-{self._uuid}-{self._counter}.{ext}"
        self._counter += 1
        self._current = (os.path.join(self._dir, f".{base}.inprogress"), os.path.join(self._dir, base))
        self._writer = self._format.open_writer(self._current[0], self._ctx.schema)

    def _roll(self) -> None:
        if self._writer is not None and self._current is not None:
            self._writer.close()
            self._pending.append(self._current)
        self._writer = None
        self._current = None

    def _conform(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        schema = self._ctx.schema
        if batch.schema.equals(schema):
            return batch
        arrays = [col if col.type == f.type else col.cast(f.type) for col, f in zip(batch.columns, schema, strict=True)]
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    def write(self, batch: pa.RecordBatch, kinds: pa.Array | None) -> None:
        if kinds is not None and pc.any(pc.not_equal(kinds, int(RowKind.INSERT))).as_py():
            raise ConnectorError(
                f"table '{self._ctx.table.name}': the filesystem sink is append-only and cannot "
                "write update or delete rows"
            )
        if batch.num_rows == 0:
            return
        if self._writer is None:
            self._new_file()
        assert self._writer is not None
        self._writer.write(self._conform(batch))
        if self._roll_bytes is not None and self._writer.size >= self._roll_bytes:
            self._roll()

    def prepare_commit(self, checkpoint_id: int) -> Any:
        self._roll()
        staged = [[inprogress, final] for inprogress, final in self._pending]
        self._pending = []
        return staged

    def commit(self, committables: list[Any]) -> None:
        for staged in committables:
            for inprogress, final in staged or []:
                if os.path.exists(inprogress):
                    os.replace(inprogress, final)
                elif not os.path.exists(final):
                    raise ConnectorError(
                        f"table '{self._ctx.table.name}': cannot commit '{final}': "
                        f"staged file '{inprogress}' is gone"
                    )

    def abort(self, committables: list[Any]) -> None:
        for staged in committables:
            for inprogress, _final in staged or []:
                if os.path.exists(inprogress):
                    os.remove(inprogress)

    def close(self) -> None:
        """Discard what no checkpoint has staged; staged files stay hidden until commit or abort."""
        self._roll()
        for inprogress, _final in self._pending:
            if os.path.exists(inprogress):
                os.remove(inprogress)
        self._pending = []


def _options() -> tuple[Option, ...]:
    return (
        Option("path", required=True, description="a file or directory"),
        Option("format", required=True, choices=FORMAT_NAMES, description="csv, json or parquet"),
        *all_format_options(),
        Option(
            "source.monitor-interval",
            "duration",
            description="rescan the directory for new files this often (the source becomes unbounded)",
        ),
        Option("sink.rolling-policy.file-size", description="start a new part file at this size, e.g. '128MB'"),
    )


CONNECTOR = Connector(
    "filesystem",
    options=_options(),
    create_source=FileSystemSource,
    create_sink=FileSystemSink,
    accepts_updates=False,
    validate_extra=_validate,
    description="csv, json lines or parquet files in a file or directory",
)
