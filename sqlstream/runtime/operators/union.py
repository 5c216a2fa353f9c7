"""Union: forwards every input under the union's own column names; the task takes the minimum
watermark over inputs."""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa

from sqlstream.runtime.elements import Chunk
from sqlstream.runtime.operators.base import Operator, Output


class UnionOperator(Operator):
    name = "Union"

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        # the inputs' columns have the union's types but their own names (SELECT a ... UNION ALL
        # SELECT b ...): downstream, every batch of one stream has one schema
        if chunk.batch.schema.names != self.schema.names:
            chunk = replace(chunk, batch=chunk.batch.rename_columns(self.schema.names))
        return [chunk]
