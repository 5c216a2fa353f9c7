"""A windowing TVF on its own (not fused into an aggregation): tags rows with their windows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from sqlstream.core.windows import WindowSpec
from sqlstream.runtime.elements import Chunk
from sqlstream.runtime.operators.base import Operator, Output
from sqlstream.runtime.operators.window_agg import event_times
from sqlstream.runtime.windows import assign


class WindowTVFOperator(Operator):
    """Appends window_start, window_end, window_time; a row in k windows is emitted k times."""

    name = "WindowTableFunction"

    def __init__(self, window: WindowSpec, schema: pa.Schema) -> None:
        self.window = window
        self.schema = schema

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        batch = chunk.batch
        ts = event_times(batch, self.window.time_index)
        if ts.null_count:
            keep = ts.is_valid()
            batch, ts = batch.filter(keep), ts.filter(keep)
        rows, starts, ends = assign(self.window, ts.to_numpy(zero_copy_only=False))
        out = batch.take(pa.array(rows))
        t = self.schema.field("window_start").type
        cols = list(out.columns) + [pa.array(starts).cast(t), pa.array(ends).cast(t), pa.array(ends - np.int64(1)).cast(t)]
        kinds = None if chunk.kinds is None else chunk.kinds.take(pa.array(rows))
        return [Chunk(pa.RecordBatch.from_arrays(cols, schema=self.schema), kinds)]
