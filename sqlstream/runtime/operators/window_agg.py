"""Window aggregation over TUMBLE / HOP / CUMULATE windows.

process_batch assigns rows to windows, drops late rows (those whose earliest
window already fired), pre-aggregates per (window, key) in Arrow and merges
the partials into per-window accumulators in keyed state.  on_watermark
emits every window whose end - 1 <= watermark, once, as append-only rows
(windows on a TIMESTAMP_LTZ time attribute are assigned on the session zone's
wall-clock time and fire when the watermark passes the instant of their last
millisecond: runtime/windows.py's WindowClock).
Timers (window end -> keys) are an in-memory index rebuilt from the keyed
state on restore, so they need no snapshot of their own.

A cascaded window aggregation (``input_window`` set) aggregates rows whose
windows were assigned upstream: each row's window is read from its
window_start and window_end columns, rows are not assigned again, and a row
whose window already fired is late.  Everything after that is shared.
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.aggregates import AggCall, window_agg_columnar_rows
from sqlstream.core.errors import JobError
from sqlstream.core.windows import WindowSpec, partition_columns
from sqlstream.runtime import aggregates
from sqlstream.runtime.elements import MIN_WATERMARK, Chunk, RowKind
from sqlstream.runtime.operators.base import Metrics, Operator, OperatorContext, Output
from sqlstream.runtime.operators.keyed import columnar_state, fresh_or_copy, key_group_column
from sqlstream.runtime.operators.window_agg_columnar import ColumnarWindowAggregates
from sqlstream.runtime.operators.window_agg_rocksdb import PARTIALS, RocksDBWindowAggregates
from sqlstream.runtime.state.rocksdb import RocksDBStateBackend
from sqlstream.runtime.windows import WindowClock, assign, first_window_end, slice_size

SIGN = pa.field("$sign", pa.int64())


def signs(chunk: Chunk) -> pa.Array:
    """+1 for +I/+U rows, -1 for -U/-D rows."""
    retract = pc.is_in(chunk.kinds_or_inserts(), pa.array([int(RowKind.UPDATE_BEFORE), int(RowKind.DELETE)], pa.int8()))
    return pc.if_else(retract, pa.scalar(-1, pa.int64()), pa.scalar(1, pa.int64()))


def event_times(batch: pa.RecordBatch, index: int) -> pa.Array:
    return batch.column(index).cast(pa.int64())


def rows_with_event_time(batch: pa.RecordBatch, index: int, metrics: Metrics) -> tuple[pa.RecordBatch, pa.Array]:
    """The rows that have an event time (NULL ones are dropped and counted), and those times in ms."""
    ts = event_times(batch, index)
    if ts.null_count:
        valid = pc.is_valid(ts)
        metrics.extra["null_rowtime_dropped"] = metrics.extra.get("null_rowtime_dropped", 0) + ts.null_count
        batch, ts = batch.filter(valid), ts.filter(valid)
    return batch, ts


class WindowOutput:
    """Builds output batches from fired (start, end, key, accumulators) tuples."""

    def __init__(self, outputs: list[str | int], schema: pa.Schema,
                 functions: list[aggregates.AggFunction], clock: WindowClock) -> None:
        self.outputs = outputs
        self.clock = clock
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
                columns.append(pa.array(self.clock.window_times(ends)).cast(field.type))
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
    keyed = True

    def __init__(self, window: WindowSpec, outputs: list[str | int], aggs: list[AggCall],
                 schema: pa.Schema, input_window: tuple[int, int] | None = None, columnar: bool = False,
                 retracting: bool = False) -> None:
        """``input_window``: cascaded, the input columns of each row's window_start and window_end;
        ``retracting``: the input is a changelog whose -U/-D rows are subtracted from their windows
        (a hidden COUNT(*) then tells an emptied window, which emits nothing, as Flink)."""
        self.window = window
        self.columnar_form = columnar
        self.input_window = input_window
        self.outputs = outputs
        self.schema = schema
        self.aggs = aggs
        self.key_indexes = [o for o in outputs if isinstance(o, int)]
        self.partition = list(partition_columns(self.key_indexes, input_window))
        self.retracting = retracting
        self.functions = [aggregates.make(a, retracting) for a in aggs]
        self.counted = self.functions
        if retracting:
            self.counted = [*self.functions, aggregates.make(AggCall("COUNT", None, False, pa.int64(), "$rows"), True)]
        self.pre_aggregate = aggregates.PreAggregator(self.counted)
        self.clock = WindowClock(window.zone)
        self.output = WindowOutput(outputs, schema, self.functions, self.clock)
        self.timers: dict[int, set[tuple[int, tuple]]] = {}  # window end -> {(key group, state key)}
        self.ends: list[int] = []
        self.watermark = MIN_WATERMARK

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        # state key: (window end, window start, *group keys) -> accumulators
        self.windows = ctx.keyed_state.state("windows")
        # in memory (hashmap backend) the partials are Arrow tables merged by group-bys; on rocksdb
        # they are RocksDB entries merged a batch at a time (window_agg_rocksdb.py); aggregates
        # without a columnar form keep one accumulator per window and key (the per-key form)
        self.columnar: ColumnarWindowAggregates | None = None
        self.slicing: WindowSpec | None = None  # rows go to their one slice, not their windows
        self.min_end: int | None = None
        backend = ctx.keyed_state
        if isinstance(backend, RocksDBStateBackend) and self.columnar_form:
            # on rocksdb the partials are RocksDB entries merged a batch at a time (window_agg_rocksdb)
            key_types = [self.schema.field(pos).type for pos, o in enumerate(self.outputs) if isinstance(o, int)]
            if not window_agg_columnar_rows(self.aggs, key_types):
                raise JobError("the plan keeps this window aggregation's state in columnar form, which the rocksdb "
                               "state backend holds only without COUNT(DISTINCT) and for keys of simple types; plan "
                               "the job with the backend it runs on")
            # rows assigned here (not cascaded) to HOP or CUMULATE windows are kept per slice
            rows = RocksDBWindowAggregates(self.aggs, key_types, backend,
                                           self.window if self.input_window is None else None, self.clock)
            self.slicing = rows.slicing
            # partials restored from a savepoint (restore_all ran before open) join the entries
            restored = backend.columnar_states.get(PARTIALS)
            if restored is not None:
                rows.load(restored.restored_tables())  # a file batch at a time: never whole in memory
            backend.columnar_states[PARTIALS] = rows.partials
            self.columnar = rows
            self.min_end = rows.min_end()
        elif columnar_state(ctx, self.columnar_form):
            distincts = [backend.columnar(f"distinct{i}") for i, a in enumerate(self.aggs) if a.distinct]
            self.columnar = ColumnarWindowAggregates(self.aggs, len(self.key_indexes), backend.columnar(PARTIALS), distincts)

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        batch = chunk.batch
        if self.retracting:  # each row's sign rides along while rows are assigned to windows
            batch = batch.append_column(SIGN, signs(chunk))
        windowed = self._windows(batch)
        if windowed is None:
            return []
        expanded, starts, ends = windowed
        sign = None
        if self.retracting:
            sign = expanded.column(expanded.num_columns - 1)
            expanded = expanded.drop_columns([SIGN.name])
        kg = key_group_column(expanded, self.partition, self.ctx.max_parallelism)
        keys = [pa.array(ends), pa.array(starts), kg] + [expanded.column(k) for k in self.key_indexes]
        if self.columnar is not None:
            self.columnar.add(keys, expanded)
            first = int(ends.min())
            self.min_end = first if self.min_end is None else min(self.min_end, first)
            return []
        key_lists, partials = self.pre_aggregate(keys, expanded, sign)
        end_list, start_list, kg_list = key_lists[0], key_lists[1], key_lists[2]
        other = key_lists[3:]
        windows, functions = self.windows, self.counted
        for g in range(len(end_list)):
            end = end_list[g]
            skey = (end, start_list[g], *(col[g] for col in other))
            group = kg_list[g]
            accs = fresh_or_copy(functions, windows.get(group, skey))
            for fi, fn in enumerate(functions):
                fn.merge(accs[fi], partials[fi][g])
            windows.put(group, skey, accs)
            self._add_timer(end, group, skey)
        return []

    def _windows(self, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, np.ndarray, np.ndarray] | None:
        """The on-time rows, one per (row, window), with their window starts and ends (ms)."""
        time_column = self.window.time_index if self.input_window is None else self.input_window[1]
        batch, ts_arrow = rows_with_event_time(batch, time_column, self.ctx.metrics)
        ts = ts_arrow.to_numpy(zero_copy_only=False)
        if self.input_window is None:
            ts = self.clock.local(ts)  # cascaded: the window end is wall-clock time already
        if self.watermark != MIN_WATERMARK:
            # a row is late when its earliest window fired (cascaded: its one window)
            first_end = ts if self.input_window is not None else first_window_end(self.window, ts)
            on_time = self.clock.fire_times(first_end) > self.watermark
            late = int(len(ts) - np.count_nonzero(on_time))
            if late:
                self.ctx.metrics.late_records_dropped += late
                batch, ts = batch.filter(pa.array(on_time)), ts[on_time]
        if batch.num_rows == 0:
            return None
        if self.input_window is not None:
            starts = event_times(batch, self.input_window[0]).to_numpy(zero_copy_only=False)
            return batch, starts, ts
        step = None if self.slicing is None else slice_size(self.slicing)
        if step is not None:  # a row's first window ends where its slice ends
            ends = first_window_end(self.window, ts)
            return batch, ends - step, ends
        rows, starts, ends = assign(self.window, ts)
        return (batch.take(pa.array(rows)) if len(rows) != batch.num_rows else batch), starts, ends

    def _add_timer(self, end: int, group: int, skey: tuple) -> None:
        bucket = self.timers.get(end)
        if bucket is None:
            bucket = self.timers[end] = set()
            heapq.heappush(self.ends, end)
        bucket.add((group, skey))

    def on_watermark(self, timestamp: int) -> Output:
        self.watermark = timestamp
        if self.columnar is not None:
            return self._fire_columnar(timestamp)
        fired: list[tuple[int, int, tuple, list[list[Any]]]] = []
        while self.ends and self.clock.fire_time(self.ends[0]) <= timestamp:
            end = heapq.heappop(self.ends)
            for group, skey in sorted(self.timers.pop(end), key=_sort_key):
                accs = self.windows.get(group, skey)
                if accs is None:
                    continue  # expired by state TTL
                self.windows.delete(group, skey)
                if self.retracting and not self.counted[-1].result(accs[-1]):
                    continue  # every row of the window was retracted
                fired.append((skey[1], end, skey[2:], accs))
        if not fired:
            return []
        return [Chunk(self.output.build(fired))]

    def _fire_columnar(self, timestamp: int) -> Output:
        assert self.columnar is not None
        if self.min_end is None or self.clock.fire_time(self.min_end) > timestamp:
            return []
        result = self.columnar.fire(timestamp, self.clock)
        self.min_end = self.columnar.min_end()
        if result is None:
            return []
        fired, values = result
        columns: list[pa.Array] = []
        key_i = 0
        for pos, o in enumerate(self.outputs):
            t = self.schema.field(pos).type
            if o == "window_start":
                columns.append(fired.column("$start").combine_chunks().cast(t))
            elif o == "window_end":
                columns.append(fired.column("$end").combine_chunks().cast(t))
            elif o == "window_time":
                ends = fired.column("$end").combine_chunks().to_numpy(zero_copy_only=False)
                columns.append(pa.array(self.clock.window_times(ends)).cast(t))
            else:
                columns.append(fired.column(f"k{key_i}").combine_chunks().cast(t))
                key_i += 1
        columns += values
        return [Chunk(pa.RecordBatch.from_arrays(columns, schema=self.schema))]

    def snapshot_state(self, checkpoint_id: int) -> Any:
        return {"watermark": self.watermark}

    def restore_state(self, state: Any) -> None:
        if state is not None:
            self.watermark = state["watermark"]
        backend = self.ctx.keyed_state
        if self.columnar is not None:
            # per-key accumulators restored from a rocksdb savepoint become partials
            entries = list(self.windows.items())
            for group, skey, _ in entries:
                self.windows.delete(group, skey)
            self.columnar.add_accumulators(entries)
            self.min_end = self.columnar.min_end()
            return
        if "partials" in backend.columnar_states:
            # partials restored from a hashmap savepoint become per-key accumulators
            distincts = [backend.columnar(f"distinct{i}") for i, a in enumerate(self.aggs) if a.distinct]
            converter = ColumnarWindowAggregates(self.aggs, len(self.key_indexes), backend.columnar("partials"), distincts)
            for group, skey, accs in converter.accumulators():
                self.windows.put(group, skey, accs)
            for name in ["partials", *[d.name for d in distincts]]:
                backend.columnar_states.pop(name, None)
        for group, skey, _ in self.windows.items():
            self._add_timer(skey[0], group, skey)


def _sort_key(item: tuple[int, tuple]) -> tuple:
    """Deterministic firing order within one window end (start, then keys as text)."""
    group, skey = item
    return (skey[1], tuple(str(k) for k in skey[2:]))
