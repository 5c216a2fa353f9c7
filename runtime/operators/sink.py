"""Sink operator: hands chunks to a connector's SinkWriter and drives its commits."""

from __future__ import annotations

from typing import Any

from runtime.connectors.base import SinkWriter
from runtime.elements import Chunk
from runtime.operators.base import Operator, OperatorContext, Output

FINAL_CHECKPOINT = -1  # the commit made when a bounded job ends


class SinkOperator(Operator):
    name = "Sink"

    def __init__(self, writer: SinkWriter) -> None:
        self.writer = writer

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        self.writer.open()

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        self.writer.write(chunk.batch, chunk.kinds)
        self.ctx.metrics.records_out += chunk.num_rows
        return []

    def end_input(self) -> Output:
        committable = self.writer.prepare_commit(FINAL_CHECKPOINT)
        self.writer.commit([committable] if committable is not None else [])
        return []

    def snapshot_state(self) -> Any:
        return None

    def close(self) -> None:
        self.writer.close()
