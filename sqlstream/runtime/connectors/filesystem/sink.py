"""The filesystem sink: part files staged hidden and made visible on commit (see the package docstring)."""

from __future__ import annotations

import os
import tempfile
import uuid
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from sqlstream.core.errors import ConnectorError
from sqlstream.runtime.connectors.base import SinkContext, SinkWriter, conform
from sqlstream.runtime.connectors.filesystem.options import FileSystemOptions
from sqlstream.runtime.connectors.filesystem.partitions import (
    TimeExtractor,
    parse_partition,
    split_by_partition,
)
from sqlstream.runtime.elements import RowKind
from sqlstream.runtime.formats import CHANGELOG_FORMATS, FileWriter, create_format, with_row_kinds
from sqlstream.runtime.fs import Location, StorageError, resolve


@dataclass
class _OpenPart:
    """A part file being written: its (in-progress, final) names in the table's directory."""

    writer: FileWriter
    names: tuple[str, str]
    spool: str | None  # the local file it is written to (object stores)
    opened_ms: int  # processing time it was opened, for the rollover interval
    written_ms: int  # processing time it last took rows, for the inactivity interval


class FileSystemSink(SinkWriter):
    """Two-phase-commit writer of part files; see the module docstring.

    A part file is written under a hidden in-progress name in its directory (the table's, or
    the partition's under it) and renamed to its visible name on commit.  On an object store
    (no rename, no appending) it is written to a local spool file, uploaded whole under the
    hidden name when it closes, and moved (copy, then delete) to its visible key on commit; a
    commit replayed after a restore finds either the hidden object (and moves it again) or
    only the visible one (done).

    A partitioned table keeps one open part file per partition.  A partition written to is
    *pending* until its commit trigger fires (processing time past its creation + delay, or
    the watermark past its partition time + delay); the checkpoint taken then carries it, and
    when that checkpoint completes its files are committed and then the partition (a success
    file).  The pending partitions travel in every committable, so a restore knows them.
    """

    def __init__(self, ctx: SinkContext) -> None:
        self._ctx = ctx
        options = FileSystemOptions.from_options(ctx.options, ctx.table.name)
        try:
            self._dir = resolve(options.path, ctx.settings)
        except StorageError as e:
            raise ConnectorError(f"sink table '{ctx.table.name}': {e}") from None
        self._keys = list(ctx.table.partition_keys)
        # the files hold the other columns (Flink leaves partition columns out of them)
        self._file_schema = pa.schema([f for f in ctx.schema if f.name not in self._keys])
        self._format = create_format(options.format, self._file_schema, options.format_options, None, ctx.table.name)
        self._options = options
        self._roll_bytes = options.rolling_file_size
        # a changelog format writes each row's kind into its event
        self._changelog = options.format in CHANGELOG_FORMATS
        self._rollover_ms = options.rollover_interval_ms
        self._next_check = 0
        self._clock = ctx.clock
        self._uuid = uuid.uuid4().hex
        self._counter = 0
        # in-progress names end with it; a restored writer continues the lineage it restores
        self._lineage = uuid.uuid4().hex
        self._orphaned: set[str] = set()  # restored lineages whose leftover in-progress files are to be deleted
        self._open: dict[str, _OpenPart] = {}  # partition directory ('' unpartitioned) -> its open file
        self._pending: list[tuple[str, str]] = []  # closed, not yet handed to a checkpoint
        # partition directory -> the time its commit trigger counts from (creation or partition time)
        self._partitions: dict[str, int] = {}
        self._written: set[str] = set()  # partitions written to since the last pre-commit
        self._watermark: int | None = None
        self._ended = False
        self._extractor = (
            TimeExtractor(self._keys, options.timestamp_pattern, options.timestamp_formatter,
                          options.watermark_time_zone)
            if self._keys and options.commit_trigger == "partition-time" else None
        )

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

    def _new_file(self, partition: str) -> _OpenPart:
        ext = self._format.extension
        base = f"part-{self._ctx.subtask_index}-{self._uuid}-{self._counter}.{ext}"
        self._counter += 1
        prefix = f"{partition}/" if partition else ""
        names = (f"{prefix}.{base}.{self._lineage}.inprogress", f"{prefix}{base}")
        spool = None
        if self._dir.remote:
            fd, spool = tempfile.mkstemp(prefix="sqlstream-part-", suffix=f".{ext}")
            os.close(fd)
            target = spool
        else:
            if partition:
                os.makedirs(os.path.join(self._dir.path, partition), exist_ok=True)
            target = self._dir.child(names[0]).path
        now = self._clock.time_ms()
        part = _OpenPart(self._format.open_writer(target, self._file_schema), names, spool, now, now)
        self._open[partition] = part
        return part

    def _roll(self, partition: str) -> None:
        part = self._open.pop(partition, None)
        if part is None:
            return
        part.writer.close()
        if part.spool is not None:
            try:
                self._dir.child(part.names[0]).upload(part.spool)
            except StorageError as e:
                raise self._error(e) from None
            finally:
                os.remove(part.spool)
        self._pending.append(part.names)

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
        if not self._changelog:  # a changelog batch was conformed before its kinds were added
            batch = conform(batch, self._ctx.schema)
        if self._keys:
            groups = split_by_partition(batch, self._keys, self._options.default_partition_name)
        else:
            groups = [("", batch)]
        for partition, rows in groups:
            part = self._open.get(partition) or self._new_file(partition)
            if self._keys:
                self._written.add(partition)
            part.writer.write(rows)
            part.written_ms = self._clock.time_ms()
            if part.writer.size >= self._roll_bytes:
                self._roll(partition)
        self._check_rollover()

    def _trigger_time(self, partition: str) -> int:
        """What the partition's commit delay counts from: now, the checkpoint that first reports
        it (process-time, as Flink's committer records it), or its time (partition-time)."""
        if self._extractor is None:
            return self._clock.time_ms()
        raw = parse_partition(partition, self._keys)
        assert raw is not None
        try:
            return self._extractor(raw)
        except ValueError as e:
            raise ConnectorError(f"sink table '{self._ctx.table.name}': partition '{partition}': {e} "
                                 "('partition.time-extractor.*' options)") from None

    def _check_rollover(self) -> None:
        """Every check-interval, close the part files open longer than the rollover interval or
        idle longer than the inactivity interval (Flink's DefaultRollingPolicy)."""
        now = self._clock.time_ms()
        if now < self._next_check:
            return
        self._next_check = now + self._options.check_interval_ms
        idle = self._options.inactivity_interval_ms
        for partition in [p for p, part in self._open.items()
                          if now - part.opened_ms >= self._rollover_ms or now - part.written_ms >= idle]:
            self._roll(partition)

    def on_watermark(self, timestamp: int) -> None:
        self._watermark = timestamp

    def end_input(self) -> None:
        self._ended = True

    def _due(self) -> list[str]:
        """Pending partitions whose commit trigger has fired (all of them once the input ended)."""
        if self._ended:
            return sorted(self._partitions)
        delay = self._options.commit_delay_ms
        if self._extractor is None:  # Flink's ProcTimeCommitTrigger: at once without a delay
            now = self._clock.time_ms()
            return sorted(p for p, t in self._partitions.items() if delay == 0 or now > t + delay)
        if self._watermark is None:
            return []
        watermark = self._watermark  # Flink's PartitionTimeCommitTrigger: strictly past the time + delay
        return sorted(p for p, t in self._partitions.items() if watermark > t + delay)

    def prepare_commit(self, checkpoint_id: int) -> Any:
        self._check_rollover()
        for partition in list(self._open):
            self._roll(partition)
        staged = [[inprogress, final] for inprogress, final in self._pending]
        self._pending = []
        if not self._keys:
            return {"files": staged, "lineage": self._lineage}
        for partition in sorted(self._written):
            self._partitions.setdefault(partition, self._trigger_time(partition))
        self._written = set()
        due = self._due()
        for p in due:
            del self._partitions[p]
        return {"files": staged, "commit": due, "pending": [[p, t] for p, t in sorted(self._partitions.items())],
                "lineage": self._lineage}

    def restore_committed(self, committables: list[Any]) -> None:
        """The pending partitions of the restored checkpoint are pending again; the writer continues the
        restored lineage, whose in-progress files past the checkpoint are orphans."""
        for staged in committables:
            if isinstance(staged, dict):  # older checkpoints of unpartitioned tables hold plain lists
                self._partitions = {p: int(t) for p, t in staged.get("pending", [])}
                if staged.get("lineage"):
                    self._lineage = staged["lineage"]
                    self._orphaned.add(staged["lineage"])

    def _staged(self, entry: list[str]) -> tuple[Location, Location]:
        """The (in-progress, final) files of a committable entry.  Entries are plain names in the
        table's directory; absolute local paths (what older checkpoints hold) are taken as they are."""
        inprogress, final = entry
        if os.path.isabs(inprogress) and not self._dir.remote:
            return Location(self._dir.fs, inprogress, inprogress), Location(self._dir.fs, final, final)
        return self._dir.child(inprogress), self._dir.child(final)

    @staticmethod
    def _files(staged: Any) -> list[list[str]]:
        if isinstance(staged, dict):
            return staged["files"]
        return staged or []

    def commit(self, committables: list[Any]) -> None:
        try:
            for staged in committables:
                for entry in self._files(staged):
                    inprogress, final = self._staged(entry)
                    if inprogress.exists():
                        inprogress.move_to(final)
                    elif not final.exists():
                        raise ConnectorError(
                            f"table '{self._ctx.table.name}': cannot commit {final.where()}: "
                            f"staged file {inprogress.where()} is gone"
                        )
                if isinstance(staged, dict) and "success-file" in self._options.commit_policy:
                    for partition in staged.get("commit", ()):
                        self._dir.child(partition, self._options.success_file_name).write_bytes(b"")
            if self._orphaned:
                self._collect_orphans()
        except StorageError as e:
            raise self._error(e) from None

    def _collect_orphans(self) -> None:
        """After the restored checkpoint is committed: delete the in-progress files of the restored lineages
        that are not this writer's (a killed attempt's, staged past the checkpoint or being written)."""
        ends = tuple(f".{lineage}.inprogress" for lineage in self._orphaned)
        for info in self._dir.list(recursive=True):
            name = info.base_name
            if info.type == pafs.FileType.File and name.startswith(".") and name.endswith(ends) \
                    and self._uuid not in name:
                Location(self._dir.fs, info.path, info.path, self._dir.endpoint).delete()
        self._orphaned = set()

    def rollback(self, committables: list[Any]) -> bool:
        """Remove the committed part files (and any still staged): their rows are written again."""
        try:
            for staged in committables:
                for entry in self._files(staged):
                    for f in self._staged(entry):
                        f.delete()
        except StorageError as e:
            raise self._error(e) from None
        return True

    def abort(self, committables: list[Any]) -> None:
        try:
            for staged in committables:
                for entry in self._files(staged):
                    self._staged(entry)[0].delete()
        except StorageError as e:
            raise self._error(e) from None

    def close(self) -> None:
        """Discard what no checkpoint has staged; staged files stay hidden until commit or abort."""
        parts, self._open = list(self._open.values()), {}
        failure: Exception | None = None
        for part in parts:
            try:
                part.writer.close()
            except Exception as e:  # noqa: BLE001 - raised below, once everything is removed
                failure = failure or e
            # what was being written goes even when it cannot be flushed (a full disk)
            if part.spool is not None:  # never uploaded: nothing of it is on the store
                os.remove(part.spool)
            else:
                self._dir.child(part.names[0]).delete()
        for inprogress, _final in self._pending:
            self._dir.child(inprogress).delete()
        self._pending = []
        if failure is not None:
            raise failure
