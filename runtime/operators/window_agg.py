"""Window aggregation over TUMBLE / HOP / CUMULATE windows.

process_batch assigns rows to windows, drops late rows (those whose earliest
window already fired), pre-aggregates per (window, key) in Arrow and merges
the partials into per-window accumulators.  on_watermark emits every window
whose end - 1 <= watermark, once, as append-only rows.
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from planner.logical import AggCall, WindowSpec
from runtime import aggregates
from runtime.elements import MIN_WATERMARK, Chunk
from runtime.operators.base import Operator, Output
from runtime.windows import assign, first_window_end


def event_times(batch: pa.RecordBatch, index: int) -> pa.Array:
    return batch.column(index).cast(pa.int64())


class WindowOutput:
    """Builds output batches from fired (start, end, key, accumulators) tuples."""

    def __init__(self, outputs: list[str | int], schema: pa.Schema,
                 functions: list[aggregates.AggFunction]) -> None:
        self.outputs = outputs
        self.schema = schema
        self.functions = functions

    def build(self, rows: list[tuple[int, int, tuple, list[list[Any]]]]) -> pa.RecordBatch:
        columns: list[pa.Array] = []
        starts = np.fromiter((r[0] for r in rows), np.int64, len(rows))
        ends = np.fromiter((r[1] for r in rows), np.int64, len(rows))
        key_i = 0
        for pos, o in enumerate(self.outputs):
            field = self.schema.field(pos)
            if o == "window_start":
                columns.append(pa.array(starts).cast(field.type))
            elif o == "window_end":
                columns.append(pa.array(ends).cast(field.type))
            elif o == "window_time":
                columns.append(pa.array(ends - 1).cast(field.type))
            else:
                columns.append(pa.array([r[2][key_i] for r in rows], field.type))
                key_i += 1
        base = len(self.outputs)
        for fi, fn in enumerate(self.functions):
            field = self.schema.field(base + fi)
            columns.append(pa.array([fn.result(r[3][fi]) for r in rows], field.type))
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)


class WindowAggOperator(Operator):
    name = "WindowAggregate"

    def __init__(self, window: WindowSpec, outputs: list[str | int],
                 aggs: list[AggCall], schema: pa.Schema) -> None:
        self.window = window
        self.key_indexes = [o for o in outputs if isinstance(o, int)]
        self.functions = [aggregates.make(a) for a in aggs]
        self.pre_aggregate = aggregates.PreAggregator(self.functions)
        self.output = WindowOutput(outputs, schema, self.functions)
        # window end -> {(start, *keys): accumulators}; ends also kept in a heap for firing order
        self.windows: dict[int, dict[tuple, list[list[Any]]]] = {}
        self.ends: list[int] = []
        self.watermark = MIN_WATERMARK

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        batch = chunk.batch
        ts_arrow = event_times(batch, self.window.time_index)
        if ts_arrow.null_count:
            valid = pc.is_valid(ts_arrow)
            self.ctx.metrics.extra["null_rowtime_dropped"] = (
                self.ctx.metrics.extra.get("null_rowtime_dropped", 0) + ts_arrow.null_count
            )
            batch, ts_arrow = batch.filter(valid), ts_arrow.filter(valid)
        ts = ts_arrow.to_numpy(zero_copy_only=False)
        if self.watermark != MIN_WATERMARK:
            on_time = first_window_end(self.window, ts) - 1 > self.watermark
            late = int(len(ts) - np.count_nonzero(on_time))
            if late:
                self.ctx.metrics.late_records_dropped += late
                mask = pa.array(on_time)
                batch, ts = batch.filter(mask), ts[on_time]
        if batch.num_rows == 0:
            return []
        rows, starts, ends = assign(self.window, ts)
        take = pa.array(rows)
        expanded = batch.take(take) if len(rows) != batch.num_rows else batch
        keys = [pa.array(ends), pa.array(starts)] + [expanded.column(k) for k in self.key_indexes]
        key_lists, partials = self.pre_aggregate(keys, expanded, None)
        end_list, start_list = key_lists[0], key_lists[1]
        other = key_lists[2:]
        windows = self.windows
        for g in range(len(end_list)):
            end = end_list[g]
            bucket = windows.get(end)
            if bucket is None:
                bucket = windows[end] = {}
                heapq.heappush(self.ends, end)
            key = (start_list[g], *(col[g] for col in other))
            accs = bucket.get(key)
            if accs is None:
                accs = bucket[key] = [fn.create() for fn in self.functions]
            for fi, fn in enumerate(self.functions):
                fn.merge(accs[fi], partials[fi][g])
        return []

    def on_watermark(self, timestamp: int) -> Output:
        self.watermark = timestamp
        fired: list[tuple[int, int, tuple, list[list[Any]]]] = []
        while self.ends and self.ends[0] - 1 <= timestamp:
            end = heapq.heappop(self.ends)
            for key, accs in self.windows.pop(end).items():
                fired.append((key[0], end, key[1:], accs))
        if not fired:
            return []
        return [Chunk(self.output.build(fired))]

    def snapshot_state(self) -> Any:
        return {"watermark": self.watermark, "windows": self.windows}

    def restore_state(self, state: Any) -> None:
        self.watermark = state["watermark"]
        self.windows = state["windows"]
        self.ends = sorted(self.windows)
