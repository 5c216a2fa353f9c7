"""The filesystem sink: part files staged hidden and made visible on commit (see the package docstring)."""

from __future__ import annotations

import os
import tempfile
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.errors import ConnectorError
from sqlstream.runtime.connectors.base import SinkContext, SinkWriter, conform
from sqlstream.runtime.connectors.filesystem.options import FileSystemOptions
from sqlstream.runtime.elements import RowKind
from sqlstream.runtime.formats import CHANGELOG_FORMATS, FileWriter, create_format, with_row_kinds
from sqlstream.runtime.fs import Location, StorageError, resolve


class FileSystemSink(SinkWriter):
    """Two-phase-commit writer of part files; see the module docstring.

    A part file is written under a hidden in-progress name in the table's directory and
    renamed to its visible name on commit.  On an object store (no rename, no appending) it is
    written to a local spool file, uploaded whole under the hidden name when it closes, and
    moved (copy, then delete) to its visible key on commit; a commit replayed after a restore
    finds either the hidden object (and moves it again) or only the visible one (done).
    """

    def __init__(self, ctx: SinkContext) -> None:
        self._ctx = ctx
        options = FileSystemOptions.from_options(ctx.options, ctx.table.name)
        try:
            self._dir = resolve(options.path, ctx.settings)
        except StorageError as e:
            raise ConnectorError(f"sink table '{ctx.table.name}': {e}") from None
        self._format = create_format(options.format, ctx.schema, options.format_options, None, ctx.table.name)
        self._roll_bytes = options.rolling_file_size
        # a changelog format writes each row's kind into its event
        self._changelog = options.format in CHANGELOG_FORMATS
        self._uuid = uuid.uuid4().hex
        self._counter = 0
        self._writer: FileWriter | None = None
        self._current: tuple[str, str] | None = None  # (in-progress name, final name) in the directory
        self._spool: str | None = None  # the local file the current part is written to (object stores)
        self._pending: list[tuple[str, str]] = []  # closed, not yet handed to a checkpoint

    def _error(self, e: StorageError) -> ConnectorError:
        return ConnectorError(f"sink table '{self._ctx.table.name}': {e}")

    def open(self) -> None:
        # a directory that exists but takes no files (or a store that refuses them) fails here,
        # before any row is read
        probe = self._dir.child(f".{self._uuid}.probe")
        if not self._dir.remote:
            try:
                os.makedirs(self._dir.path, exist_ok=True)
                with open(probe.path, "wb"):
                    pass
                os.remove(probe.path)
            except OSError as e:
                raise ConnectorError(f"sink table '{self._ctx.table.name}': 'path' = '{self._dir.path}' is not a "
                                     f"writable directory: {e.strerror or e}") from None
            return
        try:
            probe.write_bytes(b"")
            probe.delete()
        except StorageError as e:
            raise self._error(e) from None

    def _new_file(self) -> None:
        ext = self._format.extension
        base = f"part-{self._ctx.subtask_index}-{self._uuid}-{self._counter}.{ext}"
        self._counter += 1
        self._current = (f".{base}.inprogress", base)
        if self._dir.remote:
            fd, self._spool = tempfile.mkstemp(prefix="sqlstream-part-", suffix=f".{ext}")
            os.close(fd)
            target = self._spool
        else:
            target = self._dir.child(self._current[0]).path
        self._writer = self._format.open_writer(target, self._ctx.schema)

    def _roll(self) -> None:
        if self._writer is not None and self._current is not None:
            self._writer.close()
            if self._spool is not None:
                try:
                    self._dir.child(self._current[0]).upload(self._spool)
                except StorageError as e:
                    raise self._error(e) from None
                finally:
                    os.remove(self._spool)
                    self._spool = None
            self._pending.append(self._current)
        self._writer = None
        self._current = None

    def write(self, batch: pa.RecordBatch, kinds: pa.Array | None) -> None:
        if self._changelog:
            batch = with_row_kinds(conform(batch, self._ctx.schema), kinds)
        elif kinds is not None and pc.any(pc.not_equal(kinds, int(RowKind.INSERT))).as_py():
            raise ConnectorError(
                f"table '{self._ctx.table.name}': the filesystem sink is append-only and cannot "
                "write update or delete rows"
            )
        if batch.num_rows == 0:
            return
        if self._writer is None:
            self._new_file()
        assert self._writer is not None
        self._writer.write(batch if self._changelog else conform(batch, self._ctx.schema))
        if self._roll_bytes is not None and self._writer.size >= self._roll_bytes:
            self._roll()

    def prepare_commit(self, checkpoint_id: int) -> Any:
        self._roll()
        staged = [[inprogress, final] for inprogress, final in self._pending]
        self._pending = []
        return staged

    def _staged(self, entry: list[str]) -> tuple[Location, Location]:
        """The (in-progress, final) files of a committable entry.  Entries are plain names in the
        table's directory; absolute local paths (what older checkpoints hold) are taken as they are."""
        inprogress, final = entry
        if os.path.isabs(inprogress) and not self._dir.remote:
            return Location(self._dir.fs, inprogress, inprogress), Location(self._dir.fs, final, final)
        return self._dir.child(inprogress), self._dir.child(final)

    def commit(self, committables: list[Any]) -> None:
        try:
            for staged in committables:
                for entry in staged or []:
                    inprogress, final = self._staged(entry)
                    if inprogress.exists():
                        inprogress.move_to(final)
                    elif not final.exists():
                        raise ConnectorError(
                            f"table '{self._ctx.table.name}': cannot commit {final.where()}: "
                            f"staged file {inprogress.where()} is gone"
                        )
        except StorageError as e:
            raise self._error(e) from None

    def rollback(self, committables: list[Any]) -> bool:
        """Remove the committed part files (and any still staged): their rows are written again."""
        try:
            for staged in committables:
                for entry in staged or []:
                    for f in self._staged(entry):
                        f.delete()
        except StorageError as e:
            raise self._error(e) from None
        return True

    def abort(self, committables: list[Any]) -> None:
        try:
            for staged in committables:
                for entry in staged or []:
                    self._staged(entry)[0].delete()
        except StorageError as e:
            raise self._error(e) from None

    def close(self) -> None:
        """Discard what no checkpoint has staged; staged files stay hidden until commit or abort."""
        writer, self._writer = self._writer, None
        try:
            if writer is not None:
                writer.close()
        finally:  # what was being written goes even when it cannot be flushed (a full disk)
            if writer is not None:
                if self._spool is not None:  # never uploaded: nothing of it is on the store
                    os.remove(self._spool)
                    self._spool = None
                elif self._current is not None:
                    self._dir.child(self._current[0]).delete()
                self._current = None
            for inprogress, _final in self._pending:
                self._dir.child(inprogress).delete()
            self._pending = []
