"""Watermark assigner: event time is the running maximum of the WATERMARK expression."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.evaluator import as_array, compile_expr
from sqlstream.core.expressions import ColumnRef, Expr
from sqlstream.runtime.elements import MIN_WATERMARK, Chunk, Watermark
from sqlstream.runtime.operators.base import Operator, Output


class WatermarkAssigner(Operator):
    """Emits a watermark after each batch that advanced it.

    Per split (file, Kafka partition) the watermark is the running maximum of
    the WATERMARK expression; the source's watermark is the minimum over all the
    splits the source was assigned (announced through ``on_splits`` before any of
    them delivers, so a partition that has not delivered yet holds event time back,
    as in Flink), leaving out splits read to their end and splits idle for longer
    than ``idle_timeout_ms`` (so a quiet partition does not stall event time).
    Flink emits SQL watermarks
    periodically; emitting after every batch gives the same firing decisions
    deterministically, which the tests rely on.

    With ``proctime`` the expression is a ``PROCTIME()`` column and this operator
    is its clock: it stamps each batch's column with the context's clock (never earlier
    than 1 ms past the watermark it emitted, so no row is late, even when the
    batch was stamped upstream before a tick here) and emits the stamp as the
    watermark, for all splits at once; when idle, ``on_processing_time`` advances
    it, so windows on processing time fire on a quiet stream too.
    """

    name = "WatermarkAssigner"
    generates_watermarks = True

    def __init__(self, watermark: Expr, idle_timeout_ms: int | None = None, proctime: bool = False) -> None:
        self.watermark_expr = watermark
        self.compiled = compile_expr(watermark)
        self.idle_timeout_ms = idle_timeout_ms
        self.proctime = proctime
        if proctime and not isinstance(watermark, ColumnRef):
            raise ValueError(f"a processing-time watermark is a PROCTIME() column, got {watermark}")
        self.current = MIN_WATERMARK
        self.split_max: dict[str, int] = {}
        self.last_seen: dict[str, float] = {}
        self.finished: frozenset[str] = frozenset()

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        out: Output = [chunk]
        if not chunk.num_rows:
            return out
        if self.proctime:
            return self._stamp(chunk)
        values = as_array(self.compiled(chunk.batch), chunk.num_rows, self.watermark_expr.type)
        top = pc.max(values.cast(pa.int64()))
        split = chunk.split or ""
        now = self.ctx.clock.monotonic()
        self.last_seen[split] = now
        if top.is_valid and top.as_py() > self.split_max.get(split, MIN_WATERMARK):
            self.split_max[split] = top.as_py()
        return out + self._advance(now)

    def on_splits(self, assigned: tuple[str, ...], finished: frozenset[str]) -> Output:
        if self.proctime:
            return []
        now = self.ctx.clock.monotonic()
        for split in assigned:
            if split not in self.split_max:
                self.split_max[split] = MIN_WATERMARK
                self.last_seen[split] = now  # an idle timeout counts from the assignment
        self.finished = finished
        return self._advance(now)

    def _advance(self, now: float) -> Output:
        active = [
            m for s, m in self.split_max.items()
            if s not in self.finished
            and (self.idle_timeout_ms is None or (now - self.last_seen[s]) * 1000 <= self.idle_timeout_ms)
        ]
        candidate = min(active) if active else MIN_WATERMARK
        if candidate > self.current:
            self.current = candidate
            return [Watermark(self.current)]
        return []

    def _stamp(self, chunk: Chunk) -> Output:
        assert isinstance(self.watermark_expr, ColumnRef)
        index, batch = self.watermark_expr.index, chunk.batch
        self.current = max(self.ctx.clock.time_ms(), self.current + 1)
        field = batch.schema.field(index)
        stamps = pa.array(np.full(chunk.num_rows, self.current, dtype=np.int64)).cast(field.type)
        stamped = Chunk(batch.set_column(index, field, stamps), chunk.kinds, chunk.split)
        return [stamped, Watermark(self.current)]

    def on_processing_time(self, now_ms: int) -> Output:
        """An idle input's processing time still advances: the next stamp will be no earlier."""
        if not self.proctime or now_ms <= self.current:
            return []
        self.current = now_ms
        return [Watermark(now_ms)]

    def snapshot_state(self, checkpoint_id: int) -> Any:
        return {"current": self.current, "splits": dict(self.split_max)}

    def restore_state(self, state: Any) -> None:
        if state is not None:
            self.current = state["current"]
            self.split_max = dict(state.get("splits", {}))
            now = self.ctx.clock.monotonic()
            self.last_seen = {s: now for s in self.split_max}
