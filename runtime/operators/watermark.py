"""Watermark assigner: event time is the running maximum of the WATERMARK expression."""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from planner.expressions import Expr
from runtime.elements import MIN_WATERMARK, Chunk, Watermark
from runtime.evaluator import as_array, compile_expr
from runtime.operators.base import Operator, Output


class WatermarkAssigner(Operator):
    """Emits a watermark after each batch that advanced it.

    Per split (file, Kafka partition) the watermark is the running maximum of
    the WATERMARK expression; the source's watermark is the minimum over its
    splits, leaving out splits idle for longer than ``idle_timeout_ms`` (so a
    quiet partition does not stall event time).  Flink emits SQL watermarks
    periodically; emitting after every batch gives the same firing decisions
    deterministically, which the tests rely on.
    """

    name = "WatermarkAssigner"
    generates_watermarks = True

    def __init__(self, watermark: Expr, idle_timeout_ms: int | None = None) -> None:
        self.watermark_expr = watermark
        self.compiled = compile_expr(watermark)
        self.idle_timeout_ms = idle_timeout_ms
        self.current = MIN_WATERMARK
        self.split_max: dict[str, int] = {}
        self.last_seen: dict[str, float] = {}

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        out: Output = [chunk]
        if not chunk.num_rows:
            return out
        values = as_array(self.compiled(chunk.batch), chunk.num_rows, self.watermark_expr.type)
        top = pc.max(values.cast(pa.int64()))
        split = chunk.split or ""
        now = time.monotonic()
        self.last_seen[split] = now
        if top.is_valid and top.as_py() > self.split_max.get(split, MIN_WATERMARK):
            self.split_max[split] = top.as_py()
        active = [
            m for s, m in self.split_max.items()
            if self.idle_timeout_ms is None or (now - self.last_seen[s]) * 1000 <= self.idle_timeout_ms
        ]
        candidate = min(active) if active else MIN_WATERMARK
        if candidate > self.current:
            self.current = candidate
            out.append(Watermark(self.current))
        return out

    def snapshot_state(self, checkpoint_id: int) -> Any:
        return {"current": self.current, "splits": dict(self.split_max)}

    def restore_state(self, state: Any) -> None:
        if state is not None:
            self.current = state["current"]
            self.split_max = dict(state.get("splits", {}))
            now = time.monotonic()
            self.last_seen = {s: now for s in self.split_max}
