"""Sink operator: hands chunks to a connector's SinkWriter and drives its two-phase commit.

This is the one reusable committer every transactional sink uses: on each
checkpoint barrier the writer pre-commits (stages what it wrote) and the
committable goes into the checkpoint; when the checkpoint completes the
committables up to it are committed.  After a restore, the committables in
the restored checkpoint are committed again (writers make commit
idempotent), so a crash between "checkpoint complete" and "commit" loses
nothing and duplicates nothing.  When an attempt ends (fails or is
cancelled), the committables that no completed checkpoint holds are
aborted (:meth:`SinkOperator.discard_uncommitted`): no restore will commit
them, so their staged files or prepared transactions are discarded at once.

With checkpoint storage, every commit is first recorded in the commit
journal (storage.CommitJournal): when recovery has to fall back to an older
checkpoint because the newest is corrupt, the commits made after the older
one are undone before its rows are written again.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from sqlstream.runtime.checkpoint.storage import CommitJournal
from sqlstream.runtime.connectors.base import SinkWriter
from sqlstream.runtime.elements import Chunk
from sqlstream.runtime.operators.base import CommitTiming, Operator, OperatorContext, Output

FINAL_CHECKPOINT = 2**62  # the pre-commit made when a bounded job ends

_LOG = logging.getLogger(__name__)


class SinkOperator(Operator):
    name = "Sink"

    def __init__(self, writer: SinkWriter, journal: CommitJournal | None = None,
                 restored_from: int | None = None) -> None:
        self.writer = writer
        self.pending: dict[int, Any] = {}  # checkpoint id -> committable, not yet committed
        # checkpoint id of a pending committable -> the first checkpoint whose state can hold it
        self.held_from: dict[int, int] = {}
        self.last_snapshot = 0  # the newest checkpoint this operator snapshotted
        self.journal = journal
        self.restored_from = restored_from  # the checkpoint this subtask restores, if any

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        self.writer.open()

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        self.writer.write(chunk.batch, chunk.kinds)
        self.ctx.metrics.records_out += chunk.num_rows
        return []

    def on_watermark(self, timestamp: int) -> Output:
        self.writer.on_watermark(timestamp)
        return []

    def end_input(self) -> Output:
        self.writer.end_input()
        self._prepare(FINAL_CHECKPOINT)
        return []

    def _prepare(self, checkpoint_id: int) -> None:
        committable = self.writer.prepare_commit(checkpoint_id)
        if committable is not None:
            self.pending[checkpoint_id] = committable
            # A barrier's pre-commit is in that checkpoint; the one made at the end of the input
            # (FINAL_CHECKPOINT, or -1 from the final snapshot) goes into the subtask's final
            # snapshot, which stands for it in every checkpoint after the last barrier it saw.
            periodic = 0 < checkpoint_id < FINAL_CHECKPOINT
            self.held_from[checkpoint_id] = checkpoint_id if periodic else self.last_snapshot + 1

    def snapshot_state(self, checkpoint_id: int) -> Any:
        if checkpoint_id not in self.pending and FINAL_CHECKPOINT not in self.pending:
            self._prepare(checkpoint_id)
        self.last_snapshot = max(self.last_snapshot, checkpoint_id)
        return {"pending": dict(self.pending)}

    def notify_checkpoint_complete(self, checkpoint_id: int, final: bool = False) -> None:
        due = sorted(n for n in self.pending if n <= checkpoint_id or final)
        if due:
            self._commit(checkpoint_id, {n: self.pending[n] for n in due})
            for n in due:
                del self.pending[n]
                del self.held_from[n]

    def discard_uncommitted(self, latest_completed: int | None) -> None:
        """The attempt ended and ``latest_completed`` is its last completed checkpoint, for good
        (CheckpointCoordinator.seal): abort every committable that no completed checkpoint holds.

        A committable some completed checkpoint holds stays (a restore from it commits it,
        even if this attempt never got to).  A failing abort is logged, not raised: the
        attempt has already failed or been cancelled, and what stays staged is harmless.
        """
        doomed = sorted(n for n in self.pending if latest_completed is None or self.held_from[n] > latest_completed)
        if not doomed:
            return
        committables = [self.pending.pop(n) for n in doomed]
        for n in doomed:
            del self.held_from[n]
        try:
            self.writer.abort(committables)
        except Exception as e:  # noqa: BLE001 - see the docstring
            _LOG.warning("aborting the pre-commits of checkpoints %s failed: %s", doomed, e)

    def restore_state(self, state: Any) -> None:
        if state and state.get("pending"):
            restored = state["pending"]
            self.writer.restore_committed([restored[n] for n in sorted(restored)])
            # committed as of the restored checkpoint; rows after it will be written again
            self._commit(self.restored_from or max(restored), restored)

    def _commit(self, notified: int, committables: dict[int, Any]) -> None:
        if self.journal is not None:
            self.journal.record(notified, committables)  # before the commit: it may be undone later
        started = time.perf_counter()
        self.writer.commit([committables[n] for n in sorted(committables)])
        self.ctx.metrics.commits.append(CommitTiming(notified, time.time_ns() / 1e6,
                                                     (time.perf_counter() - started) * 1000))

    def close(self) -> None:
        self.writer.close()
