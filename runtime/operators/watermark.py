"""Watermark assigner: event time is the running maximum of the WATERMARK expression."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from planner.expressions import Expr
from runtime.elements import MIN_WATERMARK, Chunk, Watermark
from runtime.evaluator import as_array, compile_expr
from runtime.operators.base import Operator, Output


class WatermarkAssigner(Operator):
    """Emits a watermark after each batch that advanced ``max(watermark expression)``.

    Flink emits SQL watermarks periodically; emitting after every batch gives
    the same firing decisions deterministically, which the tests rely on.
    """

    name = "WatermarkAssigner"
    generates_watermarks = True

    def __init__(self, watermark: Expr) -> None:
        self.watermark_expr = watermark
        self.compiled = compile_expr(watermark)
        self.current = MIN_WATERMARK

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        values = as_array(self.compiled(chunk.batch), chunk.num_rows, self.watermark_expr.type)
        out: Output = [chunk]
        if chunk.num_rows:
            top = pc.max(values.cast(pa.int64()))
            if top.is_valid and top.as_py() > self.current:
                self.current = top.as_py()
                out.append(Watermark(self.current))
        return out

    def snapshot_state(self, checkpoint_id: int) -> Any:
        return {"current": self.current}

    def restore_state(self, state: Any) -> None:
        self.current = state["current"]
