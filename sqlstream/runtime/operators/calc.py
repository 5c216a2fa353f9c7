"""Calc: a fused filter and projection, evaluated on whole batches."""

from __future__ import annotations

from sqlstream.core.evaluator import Predicate, Projector, SharedSubexpressions
from sqlstream.core.expressions import Expr
from sqlstream.core.functions.temporal import OPERATOR_WATERMARK
from sqlstream.runtime.elements import MIN_WATERMARK, Chunk
from sqlstream.runtime.operators.base import Operator, Output


class CalcOperator(Operator):
    name = "Calc"

    def __init__(self, predicate: Expr | None, exprs: list[Expr] | None, names: list[str] | None) -> None:
        # repeated subexpressions, also between the filter and the projection, run once a batch
        self.shared = SharedSubexpressions([e for e in (predicate, *(exprs or [])) if e is not None])
        self.predicate = Predicate(predicate, self.shared) if predicate is not None else None
        self.projector = Projector(exprs, names, self.shared) if exprs is not None else None
        self.watermark: int | None = None  # for CURRENT_WATERMARK(...)

    def on_watermark(self, timestamp: int) -> Output:
        self.watermark = None if timestamp <= MIN_WATERMARK else timestamp
        return []

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        token = OPERATOR_WATERMARK.set(self.watermark)
        try:
            return self._process(chunk)
        finally:
            OPERATOR_WATERMARK.reset(token)

    def _process(self, chunk: Chunk) -> Output:
        if self.predicate is not None:
            batch, mask = chunk.batch, self.predicate(chunk.batch)
            chunk = chunk.filter(mask)
            if chunk.num_rows == 0:
                return []
            self.shared.carry(batch, mask, chunk.batch)
        if self.projector is not None:
            chunk = Chunk(self.projector(chunk.batch), chunk.kinds, chunk.split)
        return [chunk]
