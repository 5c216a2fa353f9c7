"""ReplicateRows: each row repeated as often as one of its columns says (INTERSECT ALL, EXCEPT ALL)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.runtime.elements import Chunk
from sqlstream.runtime.operators.base import Operator, Output


class ReplicateRowsOperator(Operator):
    """Stateless: a row with ``times`` = n becomes n rows of the same kind (none when n <= 0), so a
    retraction withdraws as many copies as its insertion added."""

    name = "ReplicateRows"

    def __init__(self, times: int) -> None:
        self.times = times

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        counts = pc.fill_null(chunk.batch.column(self.times), 0).to_numpy(zero_copy_only=False)
        indices = pa.array(np.repeat(np.arange(chunk.num_rows), np.maximum(counts, 0)))
        kinds = None if chunk.kinds is None else chunk.kinds.take(indices)
        return [Chunk(chunk.batch.take(indices), kinds, chunk.split)]
