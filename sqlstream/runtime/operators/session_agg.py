"""Session window aggregation: windows per key that merge while gaps stay below ``gap``.

A batch is sorted by (partition key, time) and cut into sessions inside the
batch vectorized (a new session where the key changes or the time jumps by
``gap`` or more); each batch-session is pre-aggregated in Arrow and then
merged with the key's open sessions that it overlaps.  A session [start,
last + gap) fires when the watermark reaches its end - 1 (on a TIMESTAMP_LTZ time
attribute: sessions are cut on the zone's wall-clock time, see runtime/windows.py).
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.aggregates import AggCall
from sqlstream.core.windows import WindowSpec
from sqlstream.runtime import aggregates
from sqlstream.runtime.elements import MIN_WATERMARK, Chunk
from sqlstream.runtime.operators.base import Operator, OperatorContext, Output
from sqlstream.runtime.operators.keyed import key_group_column
from sqlstream.runtime.operators.window_agg import SIGN, WindowOutput, rows_with_event_time, signs
from sqlstream.runtime.windows import WindowClock


class SessionWindowAggOperator(Operator):
    name = "SessionWindowAggregate"
    keyed = True

    def __init__(self, window: WindowSpec, outputs: list[str | int], aggs: list[AggCall],
                 schema: pa.Schema, retracting: bool = False) -> None:
        """``retracting``: the input is a changelog; a -U/-D row is subtracted from the session its
        time falls in (and, as in Flink, still opens or extends one); an emptied session emits nothing."""
        self.window = window
        self.gap = window.gap_ms
        # sessions are kept per PARTITION BY key; the GROUP BY keys must be among them
        self.partition = list(window.partition_keys)
        self.key_indexes = [o for o in outputs if isinstance(o, int)]
        missing = [k for k in self.key_indexes if k not in self.partition]
        if missing:
            self.partition += missing
        self.key_positions = [self.partition.index(k) for k in self.key_indexes]
        self.retracting = retracting
        self.functions = [aggregates.make(a, retracting) for a in aggs]
        self.clock = WindowClock(window.zone)
        self.output = WindowOutput(outputs, schema, self.functions, self.clock)
        if retracting:  # a hidden COUNT(*) tells an emptied session
            self.functions = [*self.functions, aggregates.make(AggCall("COUNT", None, False, pa.int64(), "$rows"), True)]
        self.pre_aggregate = aggregates.PreAggregator(self.functions)
        self.timers: list[tuple[int, int, tuple]] = []  # (end, key group, key), lazily invalidated
        self.watermark = MIN_WATERMARK

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        # partition key -> tuple of (start, end, accumulators) sessions, each immutable once stored
        self.sessions = ctx.keyed_state.state("sessions")

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        batch = chunk.batch
        if self.retracting:  # each row's sign rides along through the sort
            batch = batch.append_column(SIGN, signs(chunk))
        batch, ts_arrow = rows_with_event_time(batch, self.window.time_index, self.ctx.metrics)
        if batch.num_rows == 0:
            return []
        # sessions on a TIMESTAMP_LTZ time attribute are cut on wall-clock time of the zone, as in Flink
        # (so they are sorted by it: a repeated hour's second pass comes back in wall-clock order)
        local = pa.array(self.clock.local(ts_arrow.to_numpy(zero_copy_only=False)))
        sort_keys = [(f"p{i}", "ascending") for i in range(len(self.partition))] + [("ts", "ascending")]
        cols = {f"p{i}": batch.column(k) for i, k in enumerate(self.partition)}
        cols["ts"] = local
        order = pc.sort_indices(pa.table(cols), sort_keys=sort_keys)
        batch = batch.take(order)
        ts = local.take(order).to_numpy(zero_copy_only=False)
        new_session = np.ones(len(ts), dtype=bool)
        if len(ts) > 1:
            # a row exactly one gap after the previous one still joins its session: Flink merges
            # windows [t, t + gap) that touch (TimeWindow.intersects is inclusive)
            jump = (ts[1:] - ts[:-1]) > self.gap
            changed = np.zeros(len(ts) - 1, dtype=bool)
            for k in self.partition:
                col = batch.column(k)
                changed |= ~pc.fill_null(
                    pc.equal(col.slice(1), col.slice(0, len(ts) - 1)), False
                ).to_numpy(zero_copy_only=False)
                nulls = pc.and_(pc.is_null(col.slice(1)), pc.is_null(col.slice(0, len(ts) - 1)))
                changed &= ~nulls.to_numpy(zero_copy_only=False)
            new_session[1:] = jump | changed
        session_id = pa.array(np.cumsum(new_session) - 1)
        keys = [session_id, pa.array(ts)]
        groups, partials = self._pre_aggregate_sessions(batch, keys)
        for g, (group, key, (start, last, rows)) in enumerate(groups):
            self._merge(group, key, start, last, rows, [partials[fi][g] for fi in range(len(self.functions))])
        return []

    def _pre_aggregate_sessions(
        self, batch: pa.RecordBatch, keys: list[pa.Array]
    ) -> tuple[list[tuple[int, tuple, tuple[int, int, int]]], list[list[list[Any]]]]:
        """Per batch-session: (key group, partition key, (first ts, last ts, rows)), and the partials."""
        session_id, ts = keys
        kg = key_group_column(batch, self.partition, self.ctx.max_parallelism)
        key_cols = [session_id, kg] + [batch.column(k) for k in self.partition]
        sign = None
        if self.retracting:
            sign = batch.column(batch.num_columns - 1)
            batch = batch.drop_columns([SIGN.name])
        key_lists, partials = self.pre_aggregate(key_cols, batch, sign)
        bounds = pa.table({"s": session_id, "t": ts}).group_by("s", use_threads=False).aggregate(
            [("t", "min"), ("t", "max"), ("t", "count")]
        )
        spans = {
            sid: (lo, hi, n)
            for sid, lo, hi, n in zip(
                bounds.column("s").to_pylist(), bounds.column("t_min").to_pylist(),
                bounds.column("t_max").to_pylist(), bounds.column("t_count").to_pylist(), strict=True,
            )
        }
        out = []
        for g, sid in enumerate(key_lists[0]):
            part = tuple(col[g] for col in key_lists[2:])
            out.append((key_lists[1][g], part, spans[sid]))
        return out, partials

    def _merge(self, group: int, key: tuple, start: int, last: int, rows: int, partial: list[list[Any]]) -> None:
        end = last + self.gap
        accs = [fn.create() for fn in self.functions]
        for fi, fn in enumerate(self.functions):
            fn.merge(accs[fi], partial[fi])
        keep = []
        merged = False
        for s in self.sessions.get(group, key) or ():
            if s[0] <= end and start <= s[1]:
                start, end = min(start, s[0]), max(end, s[1])
                merged = True
                for fi, fn in enumerate(self.functions):
                    fn.merge_acc(accs[fi], s[2][fi])
            else:
                keep.append(s)
        if self.clock.fire_time(end) <= self.watermark and not merged:
            # a session that would already be complete: the rows are late (Flink drops them)
            self.ctx.metrics.late_records_dropped += rows
            return
        keep.append((start, end, accs))
        self.sessions.put(group, key, tuple(keep))
        heapq.heappush(self.timers, (end, group, key))

    def on_watermark(self, timestamp: int) -> Output:
        self.watermark = timestamp
        fired = []
        while self.timers and self.clock.fire_time(self.timers[0][0]) <= timestamp:
            end, group, key = heapq.heappop(self.timers)
            sessions = self.sessions.get(group, key)
            if not sessions:
                continue
            remaining = []
            for s in sessions:
                due = self.clock.fire_time(s[1]) <= timestamp
                if due and self.retracting and not self.functions[-1].result(s[2][-1]):
                    continue  # every row of the session was retracted
                if due:
                    fired.append((s[0], s[1], tuple(key[p] for p in self.key_positions), s[2]))
                else:
                    remaining.append(s)
            if remaining:
                self.sessions.put(group, key, tuple(remaining))
            else:
                self.sessions.delete(group, key)
        if not fired:
            return []
        fired.sort(key=lambda r: (r[1], r[0]))
        return [Chunk(self.output.build(fired))]

    def snapshot_state(self, checkpoint_id: int) -> Any:
        return {"watermark": self.watermark}

    def restore_state(self, state: Any) -> None:
        if state is not None:
            self.watermark = state["watermark"]
        self.timers = [(s[1], group, key) for group, key, ss in self.sessions.items() for s in ss]
        heapq.heapify(self.timers)
