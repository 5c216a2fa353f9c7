"""A windowing TVF on its own (not fused into an aggregation): tags rows with their windows."""

from __future__ import annotations

import pyarrow as pa

from sqlstream.core.windows import WINDOW_COLUMNS, WindowSpec
from sqlstream.runtime.elements import Chunk
from sqlstream.runtime.operators.base import Operator, Output
from sqlstream.runtime.operators.window_agg import event_times
from sqlstream.runtime.windows import WindowClock, assign


class WindowTVFOperator(Operator):
    """Appends window_start, window_end, window_time; a row in k windows is emitted k times."""

    name = "WindowTableFunction"

    def __init__(self, window: WindowSpec, schema: pa.Schema) -> None:
        self.window = window
        self.clock = WindowClock(window.zone)
        self.schema = schema

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        batch = chunk.batch
        ts = event_times(batch, self.window.time_index)
        if ts.null_count:
            keep = ts.is_valid()
            batch, ts = batch.filter(keep), ts.filter(keep)
        clock = self.clock
        rows, starts, ends = assign(self.window, clock.local(ts.to_numpy(zero_copy_only=False)))
        out = batch.take(pa.array(rows))
        types = [f.type for f in list(self.schema)[-len(WINDOW_COLUMNS):]]
        cols = list(out.columns) + [pa.array(v).cast(t) for v, t in zip((starts, ends, clock.window_times(ends)), types, strict=True)]
        kinds = None if chunk.kinds is None else chunk.kinds.take(pa.array(rows))
        return [Chunk(pa.RecordBatch.from_arrays(cols, schema=self.schema), kinds)]
