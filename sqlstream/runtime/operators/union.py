"""Union: forwards every input; the task takes the minimum watermark over inputs."""

from __future__ import annotations

from sqlstream.runtime.elements import Chunk
from sqlstream.runtime.operators.base import Operator, Output


class UnionOperator(Operator):
    name = "Union"

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        return [chunk]
