"""The checkpoint coordinator: triggers barriers, gathers acknowledgements, publishes checkpoints.

Checkpoint n is triggered by asking every running source subtask to inject
barrier n.  Each subtask acknowledges once it has snapshotted (its state
files written); subtasks that already finished are represented by their
final snapshot.  When all have acknowledged, the metadata is written
atomically and every subtask is told that n completed, which is when sinks
commit.  A newer checkpoint never waits for an older one: an older one still
pending when a newer one completes is abandoned.

Periodic checkpoints follow Flink's ``execution.checkpointing.*`` options:
at most ``max-concurrent-checkpoints`` in flight, at least ``min-pause``
between the end of one and the start of the next, and one still pending
after ``timeout`` is aborted.  The directory of an aborted or abandoned
checkpoint is removed, also when a subtask's late write lands after the abort.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sqlstream.core.status import ABORTED, COMPLETED, FAILED, IN_PROGRESS, CheckpointStatus
from sqlstream.runtime.checkpoint.storage import (
    CheckpointError,
    CheckpointStorage,
    upload_tree,
    write_metadata,
)
from sqlstream.runtime.fs import Location

SubtaskKey = tuple[str, int]  # (operator chain uid, subtask index)


class CheckpointTimeout(CheckpointError):
    """A checkpoint was aborted: it did not complete within execution.checkpointing.timeout."""


@dataclass
class PendingCheckpoint:
    checkpoint_id: int
    savepoint_dir: Path | None
    started: float
    acks: dict[SubtaskKey, Any] = field(default_factory=dict)
    future: Future = field(default_factory=Future)
    created_dir: bool = False  # the savepoint directory did not exist before: an abort removes it
    # a savepoint on a store: savepoint_dir is its local copy, uploaded when it completes
    savepoint_remote: Location | None = None
    # (size, sha256) of the acknowledged files their writers put on the store themselves (Ray
    # actors on other machines): they are listed in the metadata but not here to be read
    written: dict[Path, tuple[int, str]] = field(default_factory=dict)


@dataclass
class CheckpointStats:
    checkpoint_id: int
    duration_s: float
    size_bytes: int
    completed_ms: float = 0.0  # epoch ms when it completed (sinks commit from then on)


HISTORY_SIZE = 10  # checkpoints a status lists (the counts cover all): Flink's web.checkpoints.history default


class CheckpointHistory:
    """The newest checkpoints' status, oldest first, bounded, and counts of all completed and failed ones.

    Shared by the coordinators of a job's attempts (a restart keeps the record) and safe to
    read from another thread (the status publisher) while the coordinator writes it.
    """

    def __init__(self, size: int = HISTORY_SIZE) -> None:
        self.size = size
        self.lock = threading.Lock()
        self.entries: dict[int, CheckpointStatus] = {}
        self.completed = 0
        self.failed = 0

    def record(self, checkpoint: CheckpointStatus) -> None:
        """A checkpoint's new status (a newer one replaces the older in place)."""
        with self.lock:
            before = self.entries.get(checkpoint.id)
            if before is not None and before.state == checkpoint.state:
                return
            self.entries[checkpoint.id] = checkpoint
            self.completed += checkpoint.state == COMPLETED
            self.failed += checkpoint.state == FAILED
            while len(self.entries) > self.size:
                del self.entries[next(iter(self.entries))]

    def merge(self, checkpoints: Iterable[CheckpointStatus]) -> None:
        """Take over another history's entries (the Ray coordinator actor's, in the driver)."""
        for checkpoint in checkpoints:
            self.record(checkpoint)

    def finish(self, checkpoint_id: int, state: str, failure: str | None = None,
               duration_ms: float | None = None, size_bytes: int | None = None) -> None:
        """A checkpoint in progress completed, or ended without completing (ABORTED or FAILED)."""
        with self.lock:
            entry = self.entries.get(checkpoint_id)
        if entry is not None and entry.state == IN_PROGRESS:
            self.record(replace(entry, state=state, failure=failure, duration_ms=duration_ms, size_bytes=size_bytes))

    def end_in_progress(self, state: str, failure: str) -> None:
        """The attempt ended: checkpoints still in progress never complete."""
        with self.lock:
            ids = [c.id for c in self.entries.values() if c.state == IN_PROGRESS]
        for checkpoint_id in ids:
            self.finish(checkpoint_id, state, failure)

    def snapshot(self) -> tuple[tuple[CheckpointStatus, ...], int, int]:
        """(the entries oldest first, completed count, failed count), consistent with each other."""
        with self.lock:
            return tuple(self.entries.values()), self.completed, self.failed


def _size_of(path: Path) -> int:
    """Bytes under ``path``; files that vanish meanwhile (pruned) count as nothing."""
    total = 0
    for f in path.rglob("*") if path.exists() else ():
        try:
            total += f.stat().st_size if f.is_file() else 0
        except FileNotFoundError:
            continue
    return total


class CheckpointCoordinator:
    def __init__(
        self,
        storage: CheckpointStorage | None,
        interval_ms: int | None,
        subtasks: list[SubtaskKey],
        trigger: Callable[[int, bool], None],
        notify_complete: Callable[[int, bool], None],
        job_info: dict[str, Any],
        first_id: int = 1,
        history: CheckpointHistory | None = None,
        max_concurrent: int = 1,
        min_pause_ms: int = 0,
        timeout_ms: int | None = None,
    ) -> None:
        self.storage = storage
        self.interval_ms = interval_ms
        self.max_concurrent = max(1, max_concurrent)
        self.min_pause_s = min_pause_ms / 1000
        self.timeout_s = timeout_ms / 1000 if timeout_ms else None
        self.expected = set(subtasks)
        self.trigger = trigger
        self.notify_complete = notify_complete
        self.job_info = job_info
        self.next_id = first_id
        self.lock = threading.Lock()
        self.publish_lock = threading.Lock()
        self.pending: dict[int, PendingCheckpoint] = {}
        self.savepoints: set[int] = set()  # ids of savepoints (their files are not in the checkpoint root)
        # ids _complete took to publish: a subtask's late acknowledgement of one must not remove its
        # directory (a finished subtask's final snapshot can complete a checkpoint before the
        # subtask's own write for it is acknowledged), neither while it is published nor after
        self.published: set[int] = set()
        self.finished: dict[SubtaskKey, Any] = {}
        self.finished_written: dict[Path, tuple[int, str]] = {}  # PendingCheckpoint.written of final snapshots
        self.completed: list[CheckpointStats] = []
        self.latest_completed: int | None = None
        self.history = history if history is not None else CheckpointHistory()
        self.peak_in_flight = 0  # most periodic checkpoints pending at once
        self.aborted: list[int] = []  # checkpoints aborted on timeout
        self.last_trigger = float("-inf")
        self.last_end = float("-inf")  # when the last checkpoint completed or was aborted
        self.stop_event = threading.Event()
        self.thread: threading.Thread | None = None
        # stop-with-savepoint: no periodic checkpoint (or final commit) may commit past the savepoint
        self.suspended = False
        # the attempt is over: no checkpoint completes any more (see seal)
        self.sealed = False

    # ------------------------------------------------------------ periodic trigger
    def start(self) -> None:
        if self.interval_ms and self.storage is not None:
            self.last_trigger = time.monotonic()  # the first periodic checkpoint comes one interval in
            self.thread = threading.Thread(target=self._loop, name="checkpoint-coordinator", daemon=True)
            self.thread.start()

    def _loop(self) -> None:
        interval = self.interval_ms / 1000.0  # type: ignore[operator]
        tick = min(interval, 0.01)
        while not self.stop_event.wait(tick):
            self.abort_expired()
            if not self.suspended and self.may_trigger(interval):
                self.trigger_checkpoint()

    def may_trigger(self, interval: float) -> bool:
        """Flink's rules for the next periodic checkpoint: the interval passed since the last one
        started, fewer than max-concurrent-checkpoints are in flight, min-pause passed since the last ended."""
        now = time.monotonic()
        with self.lock:
            in_flight = sum(1 for p in self.pending.values() if p.savepoint_dir is None)
        return (now - self.last_trigger >= interval and in_flight < self.max_concurrent
                and now - self.last_end >= self.min_pause_s)

    def abort_expired(self) -> None:
        """Abort every checkpoint pending for longer than execution.checkpointing.timeout."""
        if self.timeout_s is None:
            return
        now = time.monotonic()
        with self.lock:
            expired = [p for p in self.pending.values() if now - p.started > self.timeout_s]
            for p in expired:
                del self.pending[p.checkpoint_id]
        for p in expired:
            self.aborted.append(p.checkpoint_id)
            self.last_end = time.monotonic()
            self._discard(p)
            self.history.finish(p.checkpoint_id, FAILED, "Checkpoint expired before completing.")
            p.future.set_exception(CheckpointTimeout(
                f"checkpoint {p.checkpoint_id} expired before completing (execution.checkpointing.timeout)"))

    def _discard(self, pending: PendingCheckpoint) -> None:
        """Remove the files of a checkpoint that will never complete."""
        if pending.savepoint_dir is not None:
            if pending.created_dir:
                shutil.rmtree(pending.savepoint_dir, ignore_errors=True)
        elif self.storage is not None:
            self.storage.discard(pending.checkpoint_id)

    def suspend(self) -> None:
        """Take no more checkpoints (before a stop-with-savepoint)."""
        self.suspended = True

    def stop(self) -> None:
        self.stop_event.set()

    def seal(self) -> int | None:
        """End the attempt's checkpointing: no checkpoint completes after this; the latest completed one.

        Pending checkpoints are abandoned and a completion being published is waited for, so
        the answer is final: a sink may abort what it pre-committed for any later checkpoint,
        because no restore will ever commit it.
        """
        with self.lock:
            self.sealed = True
            abandoned = list(self.pending.values())
            self.pending.clear()
        for pending in abandoned:
            pending.future.cancel()
            self._discard(pending)  # its files go, a savepoint's directory too if this made it
        with self.publish_lock:
            return self.latest_completed

    def trigger_checkpoint(self, savepoint_dir: Path | None = None, savepoint_remote: Location | None = None) -> Future:
        """Take a checkpoint, or a savepoint into ``savepoint_dir`` (the local copy of
        ``savepoint_remote``, if given); the future yields the path (or URI) once it is complete."""
        with self.lock:
            if self.sealed:
                abandoned: Future = Future()
                abandoned.cancel()
                return abandoned
            n = self.next_id
            self.next_id += 1
            pending = PendingCheckpoint(n, savepoint_dir, time.monotonic(), savepoint_remote=savepoint_remote)
            if savepoint_dir is not None:
                self.savepoints.add(n)
                pending.created_dir = not savepoint_dir.exists()
            else:
                self.last_trigger = pending.started
            self.pending[n] = pending
            self.history.record(CheckpointStatus(n, time.time_ns() // 1_000_000, IN_PROGRESS, savepoint_dir is not None))
            self.peak_in_flight = max(self.peak_in_flight,
                                      sum(1 for p in self.pending.values() if p.savepoint_dir is None))
            # finished subtasks take part through their final snapshot
            for key, snap in self.finished.items():
                pending.acks[key] = snap
            pending.written.update(self.finished_written)
            done = self._is_complete(pending)
        if done:
            self._complete(pending)
        else:
            self.trigger(n, savepoint_dir is not None)
        return pending.future

    def directory_for(self, checkpoint_id: int, uid: str, subtask: int) -> Path:
        pending = self.pending.get(checkpoint_id)
        if pending is not None and pending.savepoint_dir is not None:
            d = pending.savepoint_dir / f"{uid}-{subtask}"
            d.mkdir(parents=True, exist_ok=True)
            return d
        assert self.storage is not None
        return self.storage.subtask_dir(checkpoint_id, uid, subtask)

    # ------------------------------------------------------------ acknowledgements
    def _is_complete(self, pending: PendingCheckpoint) -> bool:
        return self.expected <= set(pending.acks)

    def is_pending(self, checkpoint_id: int) -> bool:
        with self.lock:
            return checkpoint_id in self.pending

    def acknowledge(self, checkpoint_id: int, key: SubtaskKey, snapshot: Any,
                    written: dict[Path, tuple[int, str]] | None = None) -> None:
        """A subtask's snapshot for ``checkpoint_id``; ``written``: see PendingCheckpoint.written."""
        with self.lock:
            pending = self.pending.get(checkpoint_id)
            if pending is None:
                # aborted or abandoned meanwhile: what this subtask just wrote is removed with it
                if self.storage is not None and checkpoint_id not in self.savepoints | self.published:
                    self.storage.discard(checkpoint_id)
                return
            pending.acks[key] = snapshot
            pending.written.update(written or {})
            done = self._is_complete(pending)
        if done:
            self._complete(pending)

    def subtask_finished(self, key: SubtaskKey, snapshot: Any,
                         written: dict[Path, tuple[int, str]] | None = None) -> None:
        with self.lock:
            self.finished[key] = snapshot
            self.finished_written.update(written or {})
            ready = []
            for pending in self.pending.values():
                if key not in pending.acks:
                    pending.acks[key] = snapshot
                    pending.written.update(written or {})
                if self._is_complete(pending):
                    ready.append(pending)
        for pending in ready:
            self._complete(pending)

    def all_finished(self) -> bool:
        with self.lock:
            return self.expected <= set(self.finished)

    def _metadata(self, pending: PendingCheckpoint, finished: bool) -> dict[str, Any]:
        return {
            **self.job_info,
            "checkpoint_id": pending.checkpoint_id,
            "savepoint": pending.savepoint_dir is not None,
            "finished": finished,
            "timestamp": time.time(),
            "subtasks": dict(pending.acks),
        }

    def _complete(self, pending: PendingCheckpoint) -> None:
        with self.lock:
            if self.pending.pop(pending.checkpoint_id, None) is None:
                return
            self.published.add(pending.checkpoint_id)
            # an older checkpoint that has not completed by now never will be used; an older savepoint
            # still is (someone asked for it): as in Flink, a savepoint is never subsumed
            abandoned = [self.pending.pop(n) for n in sorted(self.pending)
                         if n < pending.checkpoint_id and self.pending[n].savepoint_dir is None]
        for older in abandoned:
            older.future.cancel()
            self.history.finish(older.checkpoint_id, ABORTED, f"subsumed by checkpoint {pending.checkpoint_id}")
            self._discard(older)
        metadata = self._metadata(pending, finished=False)
        # one completion at a time: publishing prunes older checkpoints, and a newer one must win
        with self.publish_lock:
            if self.sealed:  # the attempt is ending: it stays in progress until the job says how it ended
                pending.future.cancel()
                return
            if (self.latest_completed is not None and pending.checkpoint_id < self.latest_completed
                    and pending.savepoint_dir is None):
                pending.future.cancel()
                self.history.finish(pending.checkpoint_id, ABORTED, f"subsumed by checkpoint {self.latest_completed}")
                self._discard(pending)
                return
            target = pending.savepoint_dir or self.storage.checkpoint_dir(pending.checkpoint_id)  # type: ignore[union-attr]
            # measured before publishing: pruning may follow it
            size = _size_of(target) + sum(n for path, (n, _) in pending.written.items() if path.is_relative_to(target))
            if pending.savepoint_dir is not None:
                pending.savepoint_dir.mkdir(parents=True, exist_ok=True)
                write_metadata(pending.savepoint_dir, metadata, self_contained=True, written=pending.written)
                path = pending.savepoint_dir
                if pending.savepoint_remote is not None:
                    upload_tree(pending.savepoint_dir, pending.savepoint_remote)
                    shutil.rmtree(pending.savepoint_dir, ignore_errors=True)
                    path = pending.savepoint_remote.uri
            else:
                assert self.storage is not None
                path = self.storage.complete(pending.checkpoint_id, metadata, pending.written)
            duration_s = time.monotonic() - pending.started
            self.completed.append(CheckpointStats(pending.checkpoint_id, duration_s, size,
                                                  time.time_ns() / 1e6))
            self.history.finish(pending.checkpoint_id, COMPLETED, duration_ms=round(duration_s * 1000, 1),
                                size_bytes=size)
            # a savepoint may complete after a newer checkpoint: the latest never goes back
            self.latest_completed = max(pending.checkpoint_id, self.latest_completed or 0)
            self.last_end = time.monotonic()
            self.notify_complete(pending.checkpoint_id, False)
        pending.future.set_result(path)

    def final_checkpoint(self) -> None:
        """Everything finished: record that (so a restore does not replay) and let sinks commit."""
        with self.publish_lock:  # before the lock, so seal() cannot return while this publishes
            with self.lock:
                if self.sealed:
                    return
                n = self.next_id
                self.next_id += 1
                pending = PendingCheckpoint(n, None, time.monotonic(), dict(self.finished))
            if self.storage is not None:
                self.storage.complete(n, self._metadata(pending, finished=True), dict(self.finished_written))
            self.latest_completed = n
            self.notify_complete(n, True)
