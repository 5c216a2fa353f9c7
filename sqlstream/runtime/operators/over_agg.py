"""OVER aggregation on event time: ROWS / RANGE ... PRECEDING AND CURRENT ROW per partition key.

As in Flink (RowTimeRangeBoundedPrecedingFunction and its siblings), rows wait
in keyed state until the watermark passes their timestamp, then are processed
in timestamp order (arrival order among equal timestamps); in RANGE mode rows
with equal timestamps are in each other's frames.  A row whose timestamp the
watermark has already passed is late: dropped and counted.

Waiting rows are kept per key group (Arrow batches in arrival order), so a
batch costs one state write per key group it touches, not per key.  Per key
the state holds, for the frames of its future rows, only what they can still
reach, as *contributions*: numpy columns of time, row count and, per
aggregate, its non-NULL count and sum or its value for MIN/MAX.  That is the
rows of the last ``preceding`` ms (RANGE), the last n rows (ROWS), or for
UNBOUNDED frames one row holding the running totals.  RANGE frames are pruned
each time their key fires, and removed by a cleanup timer once event time
has passed them all.

RANK() and DENSE_RANK() run in the RANGE UNBOUNDED frame (Flink allows no other) and, as
Flink computes them there, are the frame's row count: rows with equal timestamps (peers)
rank alike, and a tie counts all its rows (1, 1, 1, 4 by RANK and by DENSE_RANK alike).

An aggregate UDF, LISTAGG, ARRAY_AGG, PERCENTILE or COLLECT contributes its
per-row partials; each due row's frame is fed to a fresh
accumulator, except that an UNBOUNDED frame's accumulator so far is kept per
key in state (so an aggregate UDF needs only ``accumulate`` and ``get_value``).

LAG needs no frame (Flink allows none with it): per key the state keeps the
last ``offset`` values of each LAG argument, read back before the key's next
due rows.

When the watermark fires, the waiting rows of all due key groups are split
into due and later at once, and every key with due rows is evaluated in one
vectorized pass: contributions sorted by (key, time), frame bounds found by
binary search, sums and counts taken as differences of prefix sums (a
floating-point sum runs on one accumulator per key, rows added and retracted in
turn as Flink's does: _retracting_sums), and MIN/MAX as range queries over a sparse table of
dense value ranks.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.aggregates import COLLECT, PERCENTILE, AggCall
from sqlstream.core.functions.udfs import USER_AGGREGATES
from sqlstream.runtime import aggregates
from sqlstream.runtime.elements import MIN_WATERMARK, Chunk
from sqlstream.runtime.operators.base import Operator, OperatorContext, Output
from sqlstream.runtime.operators.rank import KeyTimers, group_rows
from sqlstream.runtime.operators.waiting import take_due, wait_for_watermark
from sqlstream.runtime.operators.window_agg import event_times

Frame = tuple[np.ndarray, ...]  # contribution columns, sorted by time
# the built-in aggregates OVER runs a frame at a time (_FramedAggregate), as it runs aggregate UDFs
FRAMED = ("LISTAGG", "ARRAY_AGG", PERCENTILE, COLLECT)


def _prefix(values: np.ndarray) -> np.ndarray:
    """Prefix sums with a leading zero: sum(values[lo:hi+1]) = p[hi+1] - p[lo] (exact under int64 wrap-around)."""
    out = np.zeros(len(values) + 1, dtype=values.dtype)
    np.cumsum(values, out=out[1:])
    return out


def _range_sum(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    prefix = _prefix(values)
    return prefix[hi + 1] - prefix[lo]


def _running_sum(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """sum(values[lo:hi+1]) added one value at a time from values[lo], for frames that start at their
    key's first contribution (UNBOUNDED): Flink's accumulator adds each row in turn, and a DOUBLE
    sum's last bits depend on that order (a difference of prefix sums over all keys of a firing
    would carry other keys' rounding into them, which a statistic's cancellation magnifies)."""
    if not len(lo):
        return np.zeros(0, dtype=values.dtype)
    starts = np.unique(lo)
    segment = np.searchsorted(starts, lo)
    ends = np.zeros(len(starts), dtype=np.int64)
    np.maximum.at(ends, segment, hi)
    width = int((ends - starts).max()) + 1
    if len(starts) * width <= 4 * len(values) + 1024:
        # one row per key, padded with zeros past its end: a cumsum along a row adds in order
        index = starts[:, None] + np.arange(width)[None, :]
        padded = np.where(index <= ends[:, None], values[np.minimum(index, len(values) - 1)], 0)
        return np.cumsum(padded, axis=1)[segment, hi - lo]
    # keys of very different sizes: each key's cumsum on its own (the keys are contiguous)
    running = np.zeros(len(values), dtype=values.dtype)
    for start, end in zip(starts, ends, strict=True):
        running[start:end + 1] = np.cumsum(values[start:end + 1])
    return running[hi]


def _retracting_sums(ts: np.ndarray, owner: np.ndarray, due: np.ndarray, totals: list[np.ndarray],
                     seeds: np.ndarray, kind: str, preceding: int, watermark: int,
                     ) -> tuple[list[np.ndarray], np.ndarray]:
    """Floating-point sums of bounded frames as Flink's RowTime{Range,Rows}BoundedPrecedingFunction
    reach them: per key one running accumulator (``seeds``: its value before this firing, one column
    per sum) that first retracts what left the frame, then adds the new rows, and is kept with the
    bits rounding left in it. RANGE: at each due timestamp T, every row older than T - preceding
    leaves (in time order; Flink walks its map of timestamps, which can order two that leave at once
    otherwise), then T's rows are added; ROWS: each row retracts the row ``preceding`` + 1 before it.
    Rows this firing drops from the frame state leave at its end, which is where Flink's next step
    of the key starts: the same sequence. ``ts``, ``owner`` (keys 0..n-1) and ``due`` describe the
    contributions in (key, time, arrival) order (a key's stored rows, then its due rows). Returns
    each sum at every due row (in that order) and each key's accumulator after the firing."""
    keys = len(seeds)
    due_rows = np.flatnonzero(due)
    rows = np.arange(len(ts))
    key_end = np.searchsorted(owner, owner, side="right")  # one past each row's key's last row
    if kind == "ROWS":
        add_step = due_rows  # a step per row
        leaver = rows + preceding + 1  # the row whose step retracts this one
        leaves = leaver < key_end
        retracted = np.flatnonzero(leaves | (leaver == key_end))
        end = len(ts)
        retract_step = np.where(leaves[retracted], leaver[retracted], end)
    else:
        times = np.unique(ts)
        width = len(times) + 1
        steps = np.unique(owner[due_rows] * width + np.searchsorted(times, ts[due_rows]))  # (key, due time)
        add_step = np.searchsorted(steps, owner[due_rows] * width + np.searchsorted(times, ts[due_rows]))
        # a row leaves at the first due timestamp of its key more than ``preceding`` after it
        after = np.searchsorted(steps, owner * width + np.searchsorted(times, ts + preceding, side="right"))
        leaves = after < len(steps)
        leaves[leaves] = steps[after[leaves]] // width == owner[leaves]
        retracted = np.flatnonzero(leaves | (ts <= watermark - preceding))  # the latter: dropped from state
        end = len(steps)
        retract_step = np.where(leaves[retracted], after[retracted], end)
    event_owner = np.concatenate([np.arange(keys), owner[due_rows], owner[retracted]])
    event_step = np.concatenate([np.full(keys, -1), add_step, retract_step])
    event_kind = np.concatenate([np.zeros(keys), np.ones(len(due_rows)), np.zeros(len(retracted))])  # retract first
    event_row = np.concatenate([np.full(keys, -1), due_rows, retracted])
    order = np.lexsort((event_row, event_kind, event_step, event_owner))
    sorted_owner = event_owner[order]
    group = sorted_owner * (end + 2) + event_step[order] + 1  # (key, step), ascending
    first = np.searchsorted(sorted_owner, sorted_owner)  # each event's key's first event: its seed
    add_event = np.argsort(order)[keys:keys + len(due_rows)]  # where each due row's addition went
    # a due row reads the accumulator after its step's last addition (RANGE peers see each other)
    read_at = np.searchsorted(group, group[add_event], side="right") - 1
    last_event = np.searchsorted(sorted_owner, np.arange(keys), side="right") - 1
    values, next_seeds = [], np.empty_like(seeds)
    for j, total in enumerate(totals):
        signed = np.concatenate([seeds[:, j], total[due_rows], -total[retracted]])[order]
        running = _running_sum(signed, first, np.arange(len(order)))
        values.append(running[read_at])
        next_seeds[:, j] = running[last_event]
    return values, next_seeds


def _range_extreme(values: np.ndarray, lo: np.ndarray, hi: np.ndarray, maximum: bool) -> np.ndarray:
    """min or max of values[lo:hi+1] for every (lo, hi): a sparse table, one level per power of two."""
    fn = np.maximum if maximum else np.minimum
    level = np.frexp((hi - lo + 1).astype(np.float64))[1] - 1  # floor(log2(length))
    out = np.empty(len(lo), dtype=values.dtype)
    table = values
    for k in range(int(level.max()) + 1 if len(lo) else 0):
        if k:
            half = 1 << (k - 1)
            table = fn(table[:-half], table[half:])
        sel = level == k
        if sel.any():
            out[sel] = fn(table[lo[sel]], table[hi[sel] - (1 << k) + 1])
    return out


def _numpy_values(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(values, validity): numbers and times as native numpy, other types as Python objects."""
    valid = arr.is_valid().to_numpy(zero_copy_only=False)
    t = arr.type
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_temporal(t) or pa.types.is_boolean(t):
        zero = pa.scalar(False) if pa.types.is_boolean(t) else pa.scalar(0, pa.int64()).cast(t)
        return pc.fill_null(arr, zero).to_numpy(zero_copy_only=False), valid
    return np.array(arr.to_pylist(), dtype=object), valid


def _arrow_values(values: np.ndarray, valid: np.ndarray, t: pa.DataType) -> pa.Array:
    if values.dtype == object:
        return pa.array([v if ok else None for v, ok in zip(values, valid, strict=True)], t)
    return pa.array(values, mask=~valid).cast(t)


def _null_in_not_null(t: pa.DataType) -> pa.Scalar:
    """What a NULL becomes in a NOT NULL field of Flink's generated code (CodeGenUtils.primitiveDefaultValue):
    -1 for numbers, '' for strings, false for booleans; other types stay NULL."""
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return pa.scalar(-1, pa.int64()).cast(t)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return pa.scalar("", t)
    if pa.types.is_boolean(t):
        return pa.scalar(False)
    return pa.scalar(None, t)


_VALUE_PICKS = ("MIN", "MAX", "FIRST_VALUE", "LAST_VALUE")  # contributions [value, is valid]


class _OverAgg:
    """One aggregate: its contribution columns, and its result over frames of them."""

    def __init__(self, call: AggCall, arg_type: pa.DataType | None, first_column: int, running: bool = False) -> None:
        self.call = call
        # UNBOUNDED frames: a floating-point sum is added up row by row in each key, as Flink does
        self.running = running
        self.function = call.function
        self.arg_type = arg_type
        self.sum_type: pa.DataType | None = None
        if arg_type is not None and call.function in ("SUM", "AVG"):
            # sums are kept in 64 bits (exact for integers, as Flink's BIGINT), decimals as Decimal objects
            self.sum_type = (pa.float64() if pa.types.is_floating(arg_type)
                             else arg_type if pa.types.is_decimal(arg_type) else pa.int64())
        width = 1 if call.function == "COUNT" else 2
        width = width if call.arg is not None else 0
        # COUNT(x): [non-NULL count]; SUM/AVG: [sum, non-NULL count]; MIN/MAX/FIRST_VALUE/LAST_VALUE: [value, is valid]
        self.columns = list(range(first_column, first_column + width))

    def contributions(self, rows: pa.RecordBatch) -> list[np.ndarray]:
        if self.call.arg is None:
            return []  # COUNT(*) is the row count
        x = rows.column(self.call.arg)
        if self.function in _VALUE_PICKS:
            return list(_numpy_values(x))
        count = x.is_valid().to_numpy(zero_copy_only=False).astype(np.int64)
        if self.function == "COUNT":
            return [count]
        if self.sum_type is not None and pa.types.is_decimal(self.sum_type):
            total = np.array([Decimal(0) if v is None else v for v in x.to_pylist()], dtype=object)
        else:
            total = pc.fill_null(x.cast(self.sum_type), 0).to_numpy(zero_copy_only=False)
        return [total, count]

    def evaluate(self, cols: list[np.ndarray], lo: np.ndarray, hi: np.ndarray) -> list[np.ndarray]:
        """The frame of every due row, in contribution form (so it can also seed a running total)."""
        if self.function in ("FIRST_VALUE", "LAST_VALUE"):
            # the first / last non-NULL value of the frame (Flink's FIRST_VALUE and LAST_VALUE skip NULLs);
            # a running total's one row sorts first in its key, so it stays the first and is overridden as last
            values, valid = cols[self.columns[0]], cols[self.columns[1]]
            last = self.function == "LAST_VALUE"
            sentinel = -1 if last else len(values)
            where = np.where(valid, np.arange(len(values)), sentinel)
            best = _range_extreme(where, lo, hi, last)
            found = best != sentinel
            return [values[np.where(found, best, 0)] if len(values) else values[:0], found]
        if self.function in ("MIN", "MAX"):
            values, valid = cols[self.columns[0]], cols[self.columns[1]]
            maximum = self.function == "MAX"
            if not valid.any():
                return [np.zeros(len(lo), dtype=values.dtype), np.zeros(len(lo), dtype=bool)]
            distinct, inverse = np.unique(values[valid], return_inverse=True)
            sentinel = 0 if maximum else len(distinct) + 1  # a NULL never wins
            ranks = np.full(len(values), sentinel, dtype=np.int64)
            ranks[valid] = inverse.reshape(-1) + 1
            best = _range_extreme(ranks, lo, hi, maximum)
            found = best != sentinel
            return [distinct[np.clip(best - 1, 0, len(distinct) - 1)], found]
        if self.running and self.sum_type is not None and pa.types.is_floating(self.sum_type):
            total, count = self.columns
            return [_running_sum(cols[total], lo, hi), _range_sum(cols[count], lo, hi)]
        return [_range_sum(cols[c], lo, hi) for c in self.columns]

    def result(self, frame: list[np.ndarray], n_frame: np.ndarray) -> pa.Array:
        t = self.call.type
        if self.call.arg is None:
            return pa.array(n_frame, pa.int64())
        if self.function == "COUNT":
            return pa.array(frame[0], pa.int64())
        if self.function in _VALUE_PICKS:
            return _arrow_values(frame[0], frame[1], t)
        total, count = frame
        filled = count > 0
        if pa.types.is_integer(t):
            # the sum wraps around in the argument's type (Flink's SUM(INT) is INT)
            total = total.astype(t.to_pandas_dtype()).astype(np.int64)
        if self.function == "SUM":
            return _arrow_values(total, filled, t)
        # AVG keeps an integer type, truncating toward zero; a DECIMAL rounds HALF_UP (Flink)
        safe = np.maximum(count, 1)
        if pa.types.is_decimal(t):
            quantum = Decimal(1).scaleb(-t.scale)
            with localcontext() as ctx:
                ctx.prec = 80
                avg = np.array([(Decimal(v) / int(c)).quantize(quantum, rounding=ROUND_HALF_UP)
                                for v, c in zip(total, safe, strict=True)], dtype=object)
            return _arrow_values(avg, filled, t)
        if pa.types.is_integer(t):
            return _arrow_values((np.abs(total) // safe) * np.sign(total), filled, t)
        return _arrow_values(total / safe, filled, t)


class _FramedAggregate:
    """An aggregate that runs a frame at a time (aggregate UDFs, LISTAGG, ARRAY_AGG, PERCENTILE,
    COLLECT), as Flink runs them in OVER: per due row, the function's accumulator fed the
    frame's rows in time order, then its result.  The contribution columns are [present (0 on an
    UNBOUNDED frame's running row), then the values and validity of each of the function's
    per-row partials (runtime.aggregates: lists, or sums)]; an UNBOUNDED frame's accumulator so far
    is kept per key (``seeds``), a bounded frame is fed from its first row (so nothing is retracted)."""

    def __init__(self, call: AggCall, schema: pa.Schema, first_column: int) -> None:
        self.call = call
        self.fn = aggregates.make(call)
        empty = self.fn.partials(pa.RecordBatch.from_pylist([], schema=schema), None)
        self.kinds = [kind for _, kind, _ in empty]
        self.types = [arr.type for arr, _, _ in empty]
        if any(kind not in ("list", "sum") for kind in self.kinds):
            raise ValueError(f"{call.function} cannot run a frame at a time")
        self.columns = list(range(first_column, first_column + 1 + 2 * len(self.kinds)))

    def contributions(self, rows: pa.RecordBatch) -> list[np.ndarray]:
        out = [np.ones(rows.num_rows, dtype=np.int8)]
        for arr, _, _ in self.fn.partials(rows, None):
            out += list(_numpy_values(arr))
        return out

    def run(self, cols: list[np.ndarray], lo: np.ndarray, hi: np.ndarray, due_key: np.ndarray,
            seeds: list[Any] | None) -> tuple[pa.Array, list[np.ndarray], list[Any] | None]:
        """(the due rows' results, their frames' contributions, each key's next accumulator if
        ``seeds`` (an UNBOUNDED frame) else None)."""
        present = cols[self.columns[0]]
        values = [_arrow_values(cols[c], cols[c + 1].astype(bool), t).to_pylist()
                  for c, t in zip(self.columns[1::2], self.types, strict=True)]

        def feed(acc: list[Any], start: int, end: int) -> list[Any]:
            rows = [j for j in range(start, end + 1) if present[j]]
            if rows:
                parts = [[v[j] for j in rows] for v in values]
                self.fn.merge(acc, [part if kind == "list" else sum(x for x in part if x is not None)
                                    for part, kind in zip(parts, self.kinds, strict=True)])
            return acc

        results: list[Any] = []
        next_seeds = None if seeds is None else list(seeds)
        acc: list[Any] = []
        key, fed = -1, -1
        for i in range(len(lo)):
            if seeds is None:
                results.append(self.fn.result(feed(self.fn.create(), int(lo[i]), int(hi[i]))))
                continue
            k = int(due_key[i])
            if k != key:  # the key's first due row: its accumulator so far, fed from the frame's start
                seed = seeds[k]
                acc = self.fn.create() if seed is None else self.fn.copy(list(seed))
                key, fed = k, int(lo[i]) - 1
            acc = feed(acc, fed + 1, int(hi[i]))
            fed = max(fed, int(hi[i]))
            results.append(self.fn.result(acc))
            next_seeds[k] = acc
        # a running row made of a frame is not a row of its own: present 0, its partials NULL
        frame = [np.zeros(len(lo), dtype=np.int8)]
        for c in self.columns[1::2]:
            frame += [cols[c][hi], np.zeros(len(lo), dtype=cols[c + 1].dtype)]
        return pa.array(results, self.call.type), frame, next_seeds


class OverAggOperator(Operator):
    name = "OverAggregate"
    keyed = True

    def __init__(self, partition_keys: list[int], time_index: int, kind: str, preceding: int | None,
                 aggs: list[AggCall], schema: pa.Schema) -> None:
        self.keys = partition_keys
        self.time_index = time_index
        self.kind = kind  # ROWS | RANGE
        self.preceding = preceding  # rows or ms; None: UNBOUNDED
        self.schema = schema
        self.calls = aggs
        self.aggs: list[_OverAgg] = []
        width = 2  # contribution columns 0 and 1: time, row count
        self.frame_aggs: list[_FramedAggregate] = []
        self.framed: list[_OverAgg | _FramedAggregate] = []  # both kinds in call order: the order of their columns
        for a in aggs:
            if a.function == "LAG":
                continue
            if a.function in FRAMED or a.function in USER_AGGREGATES:
                framed = _FramedAggregate(a, schema, width)
                width += len(framed.columns)
                self.frame_aggs.append(framed)
                self.framed.append(framed)
                continue
            agg = _OverAgg(a, None if a.arg is None else schema.field(a.arg).type, width, running=preceding is None)
            width += len(agg.columns)
            self.aggs.append(agg)
            self.framed.append(agg)
        self.lags = [a for a in aggs if a.function == "LAG"]
        # bounded frames: floating-point sums run on one accumulator per key, as Flink's
        self.retracting = [a for a in self.aggs if preceding is not None
                           and a.sum_type is not None and pa.types.is_floating(a.sum_type)]
        self.width = width
        # a bounded RANGE frame expires as event time passes; ROWS and UNBOUNDED frames never do
        self.range_ms = preceding if kind == "RANGE" else None
        self.due_timers = KeyTimers()  # key group -> its earliest waiting row
        self.cleanup_timers = KeyTimers()  # (key group, key) -> when its RANGE frame has expired
        self.watermark = MIN_WATERMARK

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        # key group -> batches of its rows that wait for the watermark, in arrival order; kept per key
        # group, not per key, so that a batch costs one state write per key group it touches
        self.waiting = ctx.keyed_state.state("waiting")
        # (key group, partition key) -> the contributions that frames of its future rows reach
        self.frames = ctx.keyed_state.state("frames")
        # (key group, partition key) -> per LAG call, the key's last ``offset`` values of its argument
        # (a one-column batch each)
        self.lag_history = ctx.keyed_state.state("lag")
        # (key group, partition key) -> per _FramedAggregate of an UNBOUNDED frame, its accumulator so far
        self.frame_seeds = ctx.keyed_state.state("framed")
        # the running accumulators of ``retracting``'s sums ride along as a last element of the
        # frame (one numpy array); a key whose frame empties keeps them here, (key group, partition
        # key) -> that array, as Flink keeps its accumulator with the bits rounding left in it
        self.running_sums = ctx.keyed_state.state("sums")

    # ------------------------------------------------------------ input
    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        wait_for_watermark(self.ctx, self.waiting, self.due_timers, chunk.batch, self.keys, self.time_index,
                           self.watermark)
        return []

    # ------------------------------------------------------------ firing
    def on_watermark(self, timestamp: int) -> Output:
        self.watermark = timestamp
        output: list[Chunk] = []
        due = take_due(self.waiting, self.due_timers, self.time_index, timestamp)
        if due is not None:
            output.append(Chunk(self._fire(due, timestamp)))
        expired: list[tuple[int, tuple, Frame]] = []
        for kg, key in self.cleanup_timers.pop_due(timestamp):
            frame = self.frames.get(kg, key)
            if frame is None or self.range_ms is None:
                continue
            # once its last row is at or before watermark - preceding, no future row reaches the frame;
            # until then the frame is pruned each time the key fires
            expiry = int(frame[0][-1]) + self.range_ms
            if expiry <= timestamp:
                self.frames.delete(kg, key)
                expired.append((kg, key, frame))
            else:
                self.cleanup_timers.register(kg, key, expiry)
        if expired and self.retracting:
            self._retire(expired)
        return output

    def _retire(self, expired: list[tuple[int, tuple, Frame]]) -> None:
        """The rows of frames that expired leave their keys' accumulators, in time order; what is
        left of each (the bits rounding left) is kept for the key's next rows."""
        lengths = np.array([len(f[0]) + 1 for _, _, f in expired])
        ends = np.cumsum(lengths) - 1
        starts = ends - lengths + 1
        left = np.empty((len(expired), len(self.retracting)))
        for j, a in enumerate(self.retracting):
            signed = np.concatenate([np.concatenate([[f[self.width][j]], -f[a.columns[0]]]) for _, _, f in expired])
            left[:, j] = _running_sum(signed, starts, ends)
        for (kg, key, _), sums in zip(expired, left, strict=True):
            self.running_sums.put(kg, key, sums)

    def _fire(self, due_rows: pa.RecordBatch, watermark: int) -> pa.RecordBatch:
        groups = group_rows(due_rows, self.keys, self.ctx.max_parallelism)
        ordered = due_rows.take(pa.array(np.concatenate([g[2] for g in groups])))
        owner = np.repeat(np.arange(len(groups)), [len(g[2]) for g in groups])
        frames = [self.frames.get(kg, key) for kg, key, _ in groups]
        histories = [self.lag_history.get(kg, key) for kg, key, _ in groups] if self.lags else []
        seeded = bool(self.frame_aggs) and self.preceding is None
        seeds = [self.frame_seeds.get(kg, key) for kg, key, _ in groups] if seeded else None
        sums = None
        if self.retracting:
            sums = np.zeros((len(groups), len(self.retracting)))
            for k, ((kg, key, _), frame) in enumerate(zip(groups, frames, strict=True)):
                kept = frame[self.width] if frame is not None else self.running_sums.get(kg, key)
                if kept is not None:  # (an entry here is stale while the key has a frame)
                    sums[k] = kept
        batch, new_frames, new_histories, new_seeds = self._evaluate(ordered, owner, frames, histories, watermark,
                                                                     seeds, sums)
        if sums is not None:
            for k, ((kg, key, _), frame) in enumerate(zip(groups, new_frames, strict=True)):
                if frame is None:
                    self.running_sums.put(kg, key, sums[k].copy())
                else:
                    new_frames[k] = (*frame, sums[k].copy())
        for (kg, key, _), seed in zip(groups if seeded else [], new_seeds or [], strict=True):
            self.frame_seeds.put(kg, key, seed)
        for (kg, key, _), frame in zip(groups, new_frames, strict=True):
            self._store_frame(kg, key, frame)
        for (kg, key, _), history in zip(groups if self.lags else [], new_histories, strict=True):
            self.lag_history.put(kg, key, history)
        return batch

    def _store_frame(self, kg: int, key: tuple, frame: Frame | None) -> None:
        if frame is None:
            self.frames.delete(kg, key)
            return
        self.frames.put(kg, key, frame)
        if self.range_ms is not None:
            self.cleanup_timers.register(kg, key, int(frame[0][-1]) + self.range_ms)

    def _contributions(self, rows: pa.RecordBatch) -> list[np.ndarray]:
        ts = event_times(rows, self.time_index).to_numpy(zero_copy_only=False)
        columns = [ts, np.ones(len(ts), dtype=np.int64)]
        for a in self.framed:
            columns += a.contributions(rows)
        return columns

    def _evaluate(self, due_rows: pa.RecordBatch, due_owner: np.ndarray, frames: list[Frame | None],
                  histories: list[tuple[pa.RecordBatch, ...] | None], watermark: int,
                  seeds: list[tuple[Any, ...] | None] | None = None, sums: np.ndarray | None = None,
                  ) -> tuple[pa.RecordBatch, list[Frame | None], list[tuple[pa.RecordBatch, ...]],
                             list[tuple[Any, ...]] | None]:
        """Output rows for the due rows of ``len(frames)`` keys (owners 0..n-1), each key's next frame,
        its next LAG history and (UNBOUNDED frames with aggregate UDFs: ``seeds`` given) its UDFs'
        next accumulators. ``sums`` (keys x ``retracting``), the running accumulators of bounded
        frames' floating-point sums, is advanced in place."""
        keys = len(frames)
        present = [f for f in frames if f is not None]
        contributions = self._contributions(due_rows)
        cols = [np.concatenate([f[c] for f in present] + [contributions[c]]) for c in range(self.width)]
        frame_sizes = [0 if f is None else len(f[0]) for f in frames]
        owner = np.concatenate([np.repeat(np.arange(keys), frame_sizes), due_owner])
        order = np.lexsort((cols[0], owner))  # stable: frames first, then arrival order among equal times
        cols = [c[order] for c in cols]
        owner = owner[order]
        first_due = sum(frame_sizes)
        positions = np.flatnonzero(order >= first_due)  # the due rows, in (key, time) order
        starts = np.searchsorted(owner, np.arange(keys))
        lo, hi = self._frames(cols[0], owner, positions, starts)

        n_frame = _range_sum(cols[1], lo, hi)
        per_agg = [a.evaluate(cols, lo, hi) for a in self.aggs]
        if sums is not None:
            assert self.preceding is not None
            totals, sums[:] = _retracting_sums(cols[0], owner, order >= first_due,
                                               [cols[a.columns[0]] for a in self.retracting], sums,
                                               self.kind, self.preceding, watermark)
            for a, total in zip(self.retracting, totals, strict=True):
                per_agg[self.aggs.index(a)][0] = total
        computed = iter([a.result(f, n_frame) for a, f in zip(self.aggs, per_agg, strict=True)])
        runs = [u.run(cols, lo, hi, owner[positions], None if seeds is None else
                      [None if seed is None else seed[j] for seed in seeds]) for j, u in enumerate(self.frame_aggs)]
        udaf_results = iter([r[0] for r in runs])
        emitted = due_rows.take(pa.array(order[positions] - first_due))
        lagged, next_histories = self._lag(emitted, owner[positions], np.searchsorted(positions, hi), histories, keys)
        lag_results = iter(lagged)
        results = [next(lag_results) if c.function == "LAG" else next(udaf_results) if c.function in FRAMED
                   or c.function in USER_AGGREGATES else next(computed) for c in self.calls]
        output = pa.RecordBatch.from_arrays(list(emitted.columns) + results, schema=self.schema)
        by_time = np.argsort(cols[0][positions], kind="stable")  # emit in event-time order across keys
        output = output.take(pa.array(by_time))
        frames_of = iter(per_agg)
        udaf_frames = iter([r[1] for r in runs])
        in_order = [next(udaf_frames) if isinstance(a, _FramedAggregate) else next(frames_of) for a in self.framed]
        next_seeds = None if seeds is None else [tuple(r[2][k] for r in runs) for k in range(keys)]
        return (output, self._next_frames(cols, owner, positions, starts, n_frame, in_order, watermark),
                next_histories, next_seeds)

    def _lag(self, emitted: pa.RecordBatch, due_key: np.ndarray, last_peer: np.ndarray,
             histories: list[tuple[pa.RecordBatch, ...] | None], keys: int,
             ) -> tuple[list[pa.Array], list[tuple[pa.RecordBatch, ...]]]:
        """LAG of every due row (``emitted``, in (key, time) order; ``due_key`` its key's number,
        ``last_peer`` the index of the last due row of its frame), and each key's next history.

        Flink runs LAG as an aggregate over the frame, so a row reads the value ``offset`` rows
        before the *last* row of its frame: rows with equal timestamps (RANGE peers) all see the
        same value.  Per key the sequence is its history (the last ``offset`` values before this
        firing) followed by its due rows; a target before the key's sequence is ``default``.
        """
        if not self.lags:
            return [], []
        n = len(due_key)
        due_counts = np.bincount(due_key, minlength=keys)
        due_first = np.concatenate([[0], np.cumsum(due_counts)[:-1]])
        results: list[pa.Array] = []
        per_key: list[list[pa.Array]] = [[] for _ in range(keys)]
        for j, call in enumerate(self.lags):
            hist = [pa.array([], call.type) if h is None else h[j].column(0) for h in histories]
            hist_lens = np.array([len(h) for h in hist], dtype=np.int64)
            seg_len = hist_lens + due_counts
            seg_start = np.concatenate([[0], np.cumsum(seg_len)[:-1]]).astype(np.int64)
            # the sequence: each key's history, then its due rows, gathered from [histories..., due values]
            source = np.empty(int(seg_len.sum()), dtype=np.int64)
            hist_total = int(hist_lens.sum())
            hist_key = np.repeat(np.arange(keys), hist_lens)
            hist_first = np.concatenate([[0], np.cumsum(hist_lens)[:-1]]).astype(np.int64)
            source[seg_start[hist_key] + np.arange(hist_total) - hist_first[hist_key]] = np.arange(hist_total)
            due_at = seg_start[due_key] + hist_lens[due_key] + np.arange(n) - due_first[due_key]
            source[due_at] = hist_total + np.arange(n)
            values = emitted.column(call.arg)
            sequence = pa.concat_arrays([*hist, values]).take(pa.array(source))
            target = due_at[last_peer] - call.offset
            found = target >= seg_start[due_key]
            picked = sequence.take(pa.array(np.where(found, target, 0)))
            if call.default is not None:
                # a non-NULL default makes Flink's result type NOT NULL, and a NULL value read through it
                # comes out as the Java primitive default of Flink's code generator: -1, '' or false
                picked = pc.coalesce(picked, _null_in_not_null(call.type))
            results.append(pc.if_else(pa.array(found), picked, pa.scalar(call.default, call.type)))
            seg_end = seg_start + seg_len
            for k in range(keys):
                kept = sequence.slice(max(seg_start[k], seg_end[k] - call.offset), min(call.offset, seg_len[k]))
                per_key[k].append(pa.record_batch([kept], names=["v"]))  # state holds batches, not arrays
        return results, [tuple(h) for h in per_key]

    def _frames(self, ts: np.ndarray, owner: np.ndarray, positions: np.ndarray,
                starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """First and last sorted index of each due row's frame (frames never cross keys)."""
        first = starts[owner[positions]]
        if self.kind == "ROWS":
            lo = first if self.preceding is None else np.maximum(positions - self.preceding, first)
            return lo, positions
        # RANGE: a composite (key, time rank) that is sorted, so binary search stays inside the key
        due_ts = ts[positions]
        probes = [ts] if self.preceding is None else [ts, due_ts - self.preceding]
        times = np.unique(np.concatenate(probes))
        width = len(times)
        composite = owner * width + np.searchsorted(times, ts)
        hi = np.searchsorted(composite, composite[positions], side="right") - 1  # peers included
        if self.preceding is None:
            return first, hi
        lower = owner[positions] * width + np.searchsorted(times, due_ts - self.preceding)
        return np.searchsorted(composite, lower, side="left"), hi

    def _next_frames(self, cols: list[np.ndarray], owner: np.ndarray, positions: np.ndarray, starts: np.ndarray,
                     n_frame: np.ndarray, per_agg: list[list[np.ndarray]], watermark: int) -> list[Frame | None]:
        keys = len(starts)
        ends = np.append(starts[1:], len(owner))
        if self.preceding is None:
            # one synthetic row per key: the frame totals at its last (due) row, at the earliest time
            last = np.searchsorted(positions, ends - 1)
            running = [np.full(keys, MIN_WATERMARK, dtype=np.int64), n_frame[last]]
            for frame in per_agg:
                running += [c[last] for c in frame]
            return [tuple(c[k:k + 1].copy() for c in running) for k in range(keys)]
        if self.kind == "ROWS":
            keep = np.arange(len(owner)) >= ends[owner] - self.preceding
        else:
            keep = cols[0] > watermark - self.preceding
        kept = np.flatnonzero(keep)
        kept_cols = [c[kept] for c in cols]
        bounds = np.searchsorted(owner[kept], np.arange(keys + 1))
        return [tuple(c[bounds[k]:bounds[k + 1]].copy() for c in kept_cols) if bounds[k + 1] > bounds[k] else None
                for k in range(keys)]

    # ------------------------------------------------------------ checkpoints
    def snapshot_state(self, checkpoint_id: int) -> Any:
        return {"watermark": self.watermark}

    def restore_state(self, state: Any) -> None:
        if state is not None:
            self.watermark = state["watermark"]
        for kg, _, waiting in self.waiting.items():
            first = min(int(pc.min(event_times(b, self.time_index)).as_py()) for b in waiting)
            self.due_timers.register(kg, (), first)
        if self.range_ms is not None:
            for kg, key, frame in self.frames.items():
                self.cleanup_timers.register(kg, key, int(frame[0][-1]) + self.range_ms)
