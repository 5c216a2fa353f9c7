"""What the lakehouse connectors ('iceberg', 'delta') share.

Sources (:class:`LakeScan`) read one pinned version of the table as a bounded scan.

Sinks (:class:`StagedLakeSink`) stage a checkpoint's rows and commit them once.

A lakehouse table changes only by commits (an Iceberg snapshot, a Delta version), so
the sink's two-phase commit is: between checkpoints the rows (Arrow batches, with a
row-kind column when the input updates) stream into a hidden Arrow IPC file under
``<table location>/_sqlstream_staging/``; :meth:`StagedLakeSink.prepare_commit` closes
it and returns ``{"app": app id, "checkpoint": id, "files": [...], "lineage": ...}``; :meth:`commit`
makes one table commit of those rows that carries the app id and the checkpoint id
(an Iceberg snapshot summary property, a Delta application transaction ``txn``).
Before committing, the sink asks the table for the newest checkpoint id committed
under that app id: if it is not below the committable's, the commit was already made
(it is being replayed after a restore) and is skipped.  The app id is
``<run uuid>-<subtask>``, new for every writer, so the ids of one writer only grow;
a restored job commits its predecessor's committables under the predecessor's app id.

Staged files of a killed attempt that no completed checkpoint holds (staged after the
checkpoint restored, or being written when the process died) are garbage-collected, as
Flink's FileSink cleans up in-progress files: a file is named
``<lineage>.<app id>-<n>.arrow``, where the *lineage* is a fresh id for a new writer and
is inherited by a writer restored from a checkpoint (every committable carries it, even
one without files).  When a restored writer has committed the restored checkpoint's
committables, every staged file of its lineage that is not its own is an orphan (the
writers that staged it are gone, their rows will be written again) and is deleted.

A checkpoint's rows are read back into memory to be committed (a MERGE needs them all to
reduce them to one change per key).  Leading '_' keeps the staging directory out of Delta's log and vacuum and out of
Iceberg's metadata (which only lists the files it committed).
"""

from __future__ import annotations

import importlib
import os
import uuid
from abc import abstractmethod
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.ipc as ipc

from sqlstream.core.errors import ConnectorError, DataError
from sqlstream.core.tables import TableDef
from sqlstream.core.types import sql_type_name
from sqlstream.runtime.connectors.base import (
    SinkContext,
    SinkWriter,
    SourceContext,
    SourceReader,
    conform,
)
from sqlstream.runtime.elements import RowKind

KIND_COLUMN = "__sqlstream_kind"  # the RowKind of each staged row, for sinks that apply updates
STAGING_DIR = "_sqlstream_staging"


def filesystem(location: str) -> tuple[pafs.FileSystem, str]:
    """The Arrow filesystem and path of a table location (a URI, or a local path)."""
    if "://" not in location:
        location = os.path.abspath(location)
    return pafs.FileSystem.from_uri(location)


def last_row_per_key(rows: pa.Table, keys: list[str]) -> pa.Table:
    """The last row of every key (the changes of a checkpoint reduced to their outcome), -U rows left out.

    A -U row is always followed by the +U or -D that completes it, so dropping it loses nothing.
    """
    rows = rows.filter(pc.not_equal(rows[KIND_COLUMN], int(RowKind.UPDATE_BEFORE)))
    numbered = rows.append_column("__sqlstream_row", pa.array(np.arange(rows.num_rows, dtype=np.int64)))
    last = numbered.group_by(keys, use_threads=False).aggregate([("__sqlstream_row", "max")])
    positions = last["__sqlstream_row_max"]
    return rows.take(positions.take(pc.sort_indices(positions)))  # in the order the changes came


class StagedLakeSink(SinkWriter):
    """Stages rows per checkpoint and commits each checkpoint once; subclasses make the table commit."""

    def __init__(self, ctx: SinkContext, keys: tuple[str, ...]) -> None:
        self._ctx = ctx
        self._table = ctx.table.name
        self._keys = keys  # the PRIMARY KEY of a sink that upserts by it (Delta), else (): it appends
        self._app = f"{uuid.uuid4().hex}-{ctx.subtask_index}"
        self._staged_schema = ctx.schema if not keys else ctx.schema.append(pa.field(KIND_COLUMN, pa.int8()))
        self._fs: pafs.FileSystem | None = None
        self._staging = ""
        self._writer: ipc.RecordBatchFileWriter | None = None
        self._stream: Any = None
        self._current = ""
        self._counter = 0
        # staged file names start with it; a restored writer continues the lineage it restores
        self._lineage = uuid.uuid4().hex
        self._orphaned: set[str] = set()  # restored lineages whose leftover staged files are to be deleted

    def _key_indexes(self) -> list[int]:
        """Positions of the PRIMARY KEY columns among the sink's columns."""
        lowered = [n.lower() for n in self._ctx.schema.names]
        return [lowered.index(k.lower()) for k in self._keys]

    # -- what a table format implements ------------------------------------

    @abstractmethod
    def _open_table(self) -> str:
        """Create the table if it does not exist; return its location (where staging goes)."""

    @abstractmethod
    def _committed_checkpoint(self, app: str) -> int | None:
        """The newest checkpoint id the table holds a commit of under ``app``."""

    @abstractmethod
    def _commit_rows(self, rows: pa.Table, app: str, checkpoint_id: int) -> None:
        """One table commit of ``rows`` (with KIND_COLUMN when keys are set), tagged with app and checkpoint."""

    @abstractmethod
    def _describe(self) -> str:
        """The lakehouse table, for messages."""

    # -- SinkWriter ---------------------------------------------------------

    def open(self) -> None:
        if self._fs is not None:
            return
        location = self._open_table()
        self._fs, root = filesystem(location)
        self._staging = f"{root.rstrip('/')}/{STAGING_DIR}"
        try:
            self._fs.create_dir(self._staging, recursive=True)
        except OSError as e:
            raise ConnectorError(
                f"table '{self._table}': cannot create the staging directory '{self._staging}' of "
                f"{self._describe()}: {e}"
            ) from None

    def write(self, batch: pa.RecordBatch, kinds: pa.Array | None) -> None:
        if not self._keys and kinds is not None and pc.any(pc.not_equal(kinds, int(RowKind.INSERT))).as_py():
            raise ConnectorError(
                f"table '{self._table}': the sink into {self._describe()} appends and cannot write update or "
                "delete rows"
            )
        if batch.num_rows == 0:
            return
        batch = conform(batch, self._ctx.schema)
        if self._keys:
            row_kinds = pa.repeat(pa.scalar(int(RowKind.INSERT), pa.int8()), batch.num_rows) if kinds is None \
                else kinds.cast(pa.int8())
            batch = pa.RecordBatch.from_arrays([*batch.columns, row_kinds], schema=self._staged_schema)
        if self._writer is None:
            self._start_file()
        assert self._writer is not None
        self._writer.write_batch(batch)

    def _start_file(self) -> None:
        assert self._fs is not None, "open() first"
        self._current = f"{self._staging}/{self._lineage}.{self._app}-{self._counter}.arrow"
        self._counter += 1
        self._stream = self._fs.open_output_stream(self._current)
        self._writer = ipc.new_file(self._stream, self._staged_schema)

    def _finish_file(self) -> str | None:
        if self._writer is None:
            return None
        self._writer.close()
        self._stream.close()
        self._writer = self._stream = None
        return self._current

    def prepare_commit(self, checkpoint_id: int) -> Any:
        """The checkpoint's staged file; without one still a committable, so the checkpoint holds the lineage."""
        staged = self._finish_file()
        return {"app": self._app, "checkpoint": checkpoint_id, "files": [] if staged is None else [staged],
                "lineage": self._lineage}

    def restore_committed(self, committables: list[Any]) -> None:
        """Continue the restored writers' lineage; their staged files past the checkpoint are orphans."""
        for c in committables:
            if c is not None and c.get("lineage"):  # checkpoints of older versions have none
                self._lineage = c["lineage"]
                self._orphaned.add(c["lineage"])

    def commit(self, committables: list[Any]) -> None:
        """Commit each checkpoint's rows once: a checkpoint the table already holds is skipped.

        The first commit after a restore then deletes the orphaned staged files (module docstring).
        """
        self.open()
        for c in committables:
            app, checkpoint_id, files = c["app"], int(c["checkpoint"]), list(c["files"])
            if not files:
                continue
            done = self._committed_checkpoint(app)
            if done is None or done < checkpoint_id:
                self._commit_rows(self._read(files), app, checkpoint_id)
            self._delete(files)
        if self._orphaned:
            self._collect_orphans()

    def _collect_orphans(self) -> None:
        """Delete the staged files of the restored lineages that are not this writer's own."""
        assert self._fs is not None
        prefixes = tuple(f"{lineage}." for lineage in self._orphaned)
        own = f".{self._app}-"
        listed = self._fs.get_file_info(pafs.FileSelector(self._staging, allow_not_found=True))
        self._delete([f.path for f in listed if f.base_name.startswith(prefixes) and own not in f.base_name])
        self._orphaned = set()

    def _read(self, files: list[str]) -> pa.Table:
        assert self._fs is not None
        tables = []
        for path in files:
            try:
                with self._fs.open_input_file(path) as f:
                    tables.append(ipc.open_file(f).read_all())
            except (OSError, FileNotFoundError) as e:
                raise ConnectorError(
                    f"table '{self._table}': cannot commit to {self._describe()}: staged file '{path}' is gone "
                    f"({e})"
                ) from None
        return pa.concat_tables(tables)

    def _delete(self, files: list[str]) -> None:
        assert self._fs is not None
        for path in files:
            try:
                self._fs.delete_file(path)
            except (OSError, FileNotFoundError):
                pass  # gone already (committed and cleaned up before a restore)

    def abort(self, committables: list[Any]) -> None:
        """Delete the staged files of checkpoints that will never be committed."""
        self.open()
        for c in committables:
            self._delete(list(c["files"]))

    def close(self) -> None:
        """Delete the rows no checkpoint staged: a restore writes them again."""
        staged = self._finish_file()
        if staged is not None:
            self._delete([staged])


def require(module: str, table: TableDef, extra: str) -> None:
    """ConnectorError at CREATE TABLE when the library behind the connector is not installed.

    pyiceberg and deltalake are optional extras, imported where they are used; this names the
    extra before a job would fail for want of it.
    """
    try:
        importlib.import_module(module)
    except ImportError:
        raise ConnectorError(
            f"table '{table.name}': connector '{table.connector}' needs {module}, which is not installed: "
            f"pip install 'sqlstream[{extra}]'"
        ) from None


def refuse_types(table: TableDef, unsupported: Callable[[pa.DataType], bool], fmt: str) -> None:
    """ConnectorError at CREATE TABLE for the first column whose type (or a type inside it) ``fmt`` cannot store."""

    def inner(t: pa.DataType) -> list[pa.DataType]:
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return [t.value_type]
        if pa.types.is_map(t):
            return [t.key_type, t.item_type]
        if pa.types.is_struct(t):
            return [f.type for f in t]
        return []

    for column in table.physical_columns:
        pending = [column.type]
        while pending:
            t = pending.pop()
            if unsupported(t):
                raise ConnectorError(
                    f"table '{table.name}': column '{column.name}' has type {sql_type_name(column.type)}, "
                    f"which {fmt} has no type for"
                )
            pending += inner(t)


def column_names(wanted: list[str], available: list[str], table: str, what: str) -> list[str]:
    """The lakehouse table's column for each sqlstream column: the same name, else the only case-insensitive match."""
    out = []
    for name in wanted:
        if name in available:
            out.append(name)
            continue
        folded = [c for c in available if c.lower() == name.lower()]
        if len(folded) != 1:
            raise ConnectorError(
                f"table '{table}': column '{name}' is not a column of {what} (columns: {', '.join(available)})"
            )
        out.append(folded[0])
    return out


def to_target(columns: list[pa.ChunkedArray], names: list[str], target: pa.Schema, table: str,
              what: str) -> pa.Table:
    """The written columns as the lakehouse table's columns ``names`` with its types and nullability.

    A value that does not fit the table's type, or a NULL in a required column, is a DataError
    naming the column, raised before anything is committed.
    """
    arrays = []
    for column, name in zip(columns, names, strict=True):
        field = target.field(name)
        if not field.nullable and column.null_count:
            raise DataError(f"table '{table}': column '{name}' of {what} is required, and a row has NULL in it")
        try:
            arrays.append(column if column.type == field.type else column.cast(field.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise DataError(
                f"table '{table}': column '{name}' ({column.type}) does not convert to {field.type} of {what}: {e}"
            ) from None
    return pa.Table.from_arrays(arrays, schema=pa.schema([target.field(n) for n in names]))


class LakeScan(SourceReader):
    """A bounded read of one pinned table version, this subtask's share of its data files.

    The position is the version read and the rows returned: a restored reader reads the same
    version (not a newer one) and skips those rows.  Subclasses list the files and read them.
    """

    bounded = True

    def __init__(self, ctx: SourceContext) -> None:
        self._ctx = ctx
        self._table = ctx.table.name
        self._schema = ctx.schema
        self._version: int | None = None  # the snapshot / version read
        self._returned = 0
        self._skip = 0
        self._batches: Iterator[pa.RecordBatch] | None = None
        self._done = False

    @abstractmethod
    def _scan(self, version: int | None) -> tuple[int | None, list[str], Iterator[pa.RecordBatch]]:
        """(the version read, its column names for this source's columns, batches of this subtask's files).

        ``version`` is the restored one, or None for the current one (or the configured one).
        """

    def open(self) -> None:
        version, names, batches = self._scan(self._version)
        self._version = version
        self._batches = self._conformed(names, batches)

    def _conformed(self, names: list[str], batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        size = self._ctx.batch_size
        for batch in batches:
            for start in range(0, batch.num_rows, size):
                piece = batch.slice(start, size)
                if self._skip:
                    dropped = min(self._skip, piece.num_rows)
                    self._skip -= dropped
                    piece = piece.slice(dropped)
                if piece.num_rows:
                    yield self._convert(piece, names)

    def _convert(self, batch: pa.RecordBatch, names: list[str]) -> pa.RecordBatch:
        if not self._schema:  # no column wanted (COUNT(*)): the rows still count
            return pa.RecordBatch.from_struct_array(pa.repeat(pa.scalar({}, pa.struct([])), batch.num_rows))
        arrays = []
        for field, name in zip(self._schema, names, strict=True):
            column = batch.column(name)
            try:
                arrays.append(column if column.type == field.type else column.cast(field.type))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise DataError(
                    f"table '{self._table}': column '{name}' ({column.type}) does not convert to {field.type}: {e}"
                ) from None
        return pa.RecordBatch.from_arrays(arrays, schema=self._schema)

    def read_batch(self) -> pa.RecordBatch | None:
        if self._done:
            return None
        assert self._batches is not None, "open() first"
        batch = next(self._batches, None)
        if batch is None:
            self._done = True
            return None
        self._returned += batch.num_rows
        return batch

    @property
    def finished(self) -> bool:
        return self._done

    def snapshot_position(self) -> Any:
        return {"version": self._version, "rows": self._returned}

    def restore_position(self, position: Any) -> None:
        self._version = position.get("version")
        self._returned = self._skip = int(position.get("rows", 0))

    def close(self) -> None:
        self._batches = None
