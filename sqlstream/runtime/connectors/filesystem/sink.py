"""The filesystem sink: part files staged hidden and renamed visible on commit (see the package docstring)."""

from __future__ import annotations

import os
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.errors import ConnectorError
from sqlstream.runtime.connectors.base import SinkContext, SinkWriter, conform
from sqlstream.runtime.connectors.filesystem.options import FileSystemOptions
from sqlstream.runtime.elements import RowKind
from sqlstream.runtime.formats import FileWriter, create_format


class FileSystemSink(SinkWriter):
    """Two-phase-commit writer of part files; see the module docstring."""

    def __init__(self, ctx: SinkContext) -> None:
        self._ctx = ctx
        options = FileSystemOptions.from_options(ctx.options, ctx.table.name)
        self._dir = os.path.abspath(options.path)
        self._format = create_format(options.format, ctx.schema, options.format_options, None, ctx.table.name)
        self._roll_bytes = options.rolling_file_size
        self._uuid = uuid.uuid4().hex
        self._counter = 0
        self._writer: FileWriter | None = None
        self._current: tuple[str, str] | None = None  # (in-progress path, final path)
        self._pending: list[tuple[str, str]] = []  # closed, not yet handed to a checkpoint

    def open(self) -> None:
        try:
            os.makedirs(self._dir, exist_ok=True)
            # a directory that exists but takes no files fails here, before any row is read
            probe = os.path.join(self._dir, f".{self._uuid}.probe")
            with open(probe, "wb"):
                pass
            os.remove(probe)
        except OSError as e:
            raise ConnectorError(f"sink table '{self._ctx.table.name}': 'path' = '{self._dir}' is not a writable "
                                 f"directory: {e.strerror or e}") from None

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
        self._writer.write(conform(batch, self._ctx.schema))
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

    def rollback(self, committables: list[Any]) -> bool:
        """Remove the committed part files (and any still staged): their rows are written again."""
        for staged in committables:
            for inprogress, final in staged or []:
                for path in (final, inprogress):
                    if os.path.exists(path):
                        os.remove(path)
        return True

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
