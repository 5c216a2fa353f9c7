"""Sink operator: hands chunks to a connector's SinkWriter and drives its two-phase commit.

This is the one reusable committer every transactional sink uses: on each
checkpoint barrier the writer pre-commits (stages what it wrote) and the
committable goes into the checkpoint; when the checkpoint completes the
committables up to it are committed.  After a restore, the committables in
the restored checkpoint are committed again (writers make commit
idempotent), so a crash between "checkpoint complete" and "commit" loses
nothing and duplicates nothing.
"""

from __future__ import annotations

from typing import Any

from sqlstream.runtime.connectors.base import SinkWriter
from sqlstream.runtime.elements import Chunk
from sqlstream.runtime.operators.base import Operator, OperatorContext, Output

FINAL_CHECKPOINT = 2**62  # the pre-commit made when a bounded job ends


class SinkOperator(Operator):
    name = "Sink"

    def __init__(self, writer: SinkWriter) -> None:
        self.writer = writer
        self.pending: dict[int, Any] = {}  # checkpoint id -> committable, not yet committed

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        self.writer.open()

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        self.writer.write(chunk.batch, chunk.kinds)
        self.ctx.metrics.records_out += chunk.num_rows
        return []

    def end_input(self) -> Output:
        self._prepare(FINAL_CHECKPOINT)
        return []

    def _prepare(self, checkpoint_id: int) -> None:
        committable = self.writer.prepare_commit(checkpoint_id)
        if committable is not None:
            self.pending[checkpoint_id] = committable

    def snapshot_state(self, checkpoint_id: int) -> Any:
        if checkpoint_id not in self.pending and FINAL_CHECKPOINT not in self.pending:
            self._prepare(checkpoint_id)
        return {"pending": dict(self.pending)}

    def notify_checkpoint_complete(self, checkpoint_id: int, final: bool = False) -> None:
        due = sorted(n for n in self.pending if n <= checkpoint_id or final)
        if due:
            self.writer.commit([self.pending[n] for n in due])
            for n in due:
                del self.pending[n]

    def restore_state(self, state: Any) -> None:
        if state and state.get("pending"):
            restored = state["pending"]
            self.writer.commit([restored[n] for n in sorted(restored)])

    def close(self) -> None:
        self.writer.close()
