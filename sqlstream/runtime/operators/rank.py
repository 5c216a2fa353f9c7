"""Top-N, deduplication, window Top-N, and the streaming ORDER BY / LIMIT.

All of them rank rows within a partition key.  A batch is first reduced in
Arrow: rows are sorted by (key group, partition key, sort keys) and only the
first N of each partition survive (:func:`group_rows`), since a row that is
not in the top N of its own batch cannot be in the top N of its partition
(append-only input).  Only the survivors are merged, per partition and in
Python, into the ranked rows kept in keyed state.  The Top-N of an
append-only input (and keep-last deduplication) has a vectorized form instead:
its rows in memory on hashmap (rank_columnar.py), in RocksDB on rocksdb
(rank_rocksdb.py).

* :class:`TopNOperator`: updating Top-N (Flink's AppendOnlyTopNFunction and,
  over an updating input, RetractableTopNFunction, which keeps every row).  With
  the row number in the output a changed position is -U/+U of that rank (or
  +I/-D when the top N grows or shrinks); without it, rows leaving the top N are
  -D and rows entering it +I.  One change set per key and batch.
* :class:`DeduplicateFirstOperator`: ``ORDER BY <time attribute> ASC ... rn = 1``.
  Rows wait until the watermark passes them, so the earliest row per key is
  known when it is emitted: append-only.
* :class:`WindowRankOperator`: Top-N within window_start/window_end partitions,
  emitted once when the watermark passes the window end; append-only.
* :class:`StreamSortOperator` and :class:`LimitOperator`: global (one subtask).

Ties in the sort order go to the row that arrived first, except for keep-last
deduplication (``newer_wins``), where the latest arrival replaces an equal one.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.aggregates import rank_columnar_rows
from sqlstream.core.errors import JobError
from sqlstream.runtime.elements import MIN_WATERMARK, Chunk, RowKind
from sqlstream.runtime.operators.base import Operator, OperatorContext, Output
from sqlstream.runtime.operators.keyed import columnar_state, key_group_column
from sqlstream.runtime.operators.rank_columnar import ColumnarTopN
from sqlstream.runtime.operators.rank_rocksdb import RocksDBTopN
from sqlstream.runtime.operators.window_agg import event_times
from sqlstream.runtime.state.rocksdb import RocksDBStateBackend
from sqlstream.runtime.windows import WindowClock

# (column index, descending, nulls first)
SortSpec = Sequence[tuple[int, bool, bool]]
Group = tuple[int, tuple, np.ndarray]  # key group, partition key, row indexes in arrival order

_RETRACT = (RowKind.UPDATE_BEFORE, RowKind.DELETE)
COLUMNAR_STATE = "ranked-columnar"  # the vectorized Top-N's rows ("ranked" is the per-key form's)


# ------------------------------------------------------------------ shared pieces

def group_rows(batch: pa.RecordBatch, key_indexes: Sequence[int], max_parallelism: int,
               sort: SortSpec = (), limit: int | None = None, newer_first: bool = False) -> list[Group]:
    """The rows of each partition key in ``batch``; with ``limit``, only its first ``limit`` by ``sort``.

    One Arrow sort over (key group, keys, sort keys, arrival) finds the
    partitions and each row's rank inside its partition; the surviving row
    indexes come back in arrival order so merging them keeps ties stable.
    """
    n = batch.num_rows
    if n == 0:
        return []
    kg = key_group_column(batch, list(key_indexes), max_parallelism)
    columns: dict[str, pa.Array] = {"$kg": kg}
    spec: list[tuple[str, str] | tuple[str, str, str]] = [("$kg", "ascending")]
    key_names = ["$kg"]
    for i, k in enumerate(key_indexes):
        columns[f"k{i}"] = batch.column(k)
        spec.append((f"k{i}", "ascending", "at_end"))
        key_names.append(f"k{i}")
    if limit is not None:
        for i, (index, desc, nulls_first) in enumerate(sort):
            columns[f"s{i}"] = batch.column(index)
            spec.append((f"s{i}", "descending" if desc else "ascending", "at_start" if nulls_first else "at_end"))
    seq = np.arange(n, dtype=np.int64)
    columns["$seq"] = pa.array(seq)
    spec.append(("$seq", "descending" if newer_first and limit is not None else "ascending"))
    table = pa.table(columns)
    order = pc.sort_indices(table, sort_keys=spec).to_numpy()
    ordered = table.select(key_names).take(pa.array(order))
    new_group = np.zeros(n, dtype=bool)
    new_group[0] = True
    if n > 1:
        for name in key_names:
            new_group[1:] |= _differs_from_previous(ordered.column(name).combine_chunks())
    starts = np.flatnonzero(new_group)
    group_of = np.cumsum(new_group) - 1
    rows = order
    groups_kept = group_of
    if limit is not None:
        keep = (seq - starts[group_of]) < limit  # seq doubles as the position in sorted order
        rows, groups_kept = order[keep], group_of[keep]
        arrival = np.lexsort((rows, groups_kept))
        rows, groups_kept = rows[arrival], groups_kept[arrival]
    bounds = np.searchsorted(groups_kept, np.arange(len(starts) + 1))
    firsts = ordered.take(pa.array(starts))
    kgs = firsts.column("$kg").to_pylist()
    key_values = [firsts.column(name).to_pylist() for name in key_names[1:]]
    keys = list(zip(*key_values, strict=True)) if key_values else [()] * len(starts)
    return [(kgs[g], keys[g], rows[bounds[g]:bounds[g + 1]]) for g in range(len(starts))]


def _differs_from_previous(col: pa.Array) -> np.ndarray:
    """For rows 1..n-1: whether the value differs from the previous row's (NULL equals NULL)."""
    a, b = col.slice(1), col.slice(0, len(col) - 1)
    same = pc.or_(pc.fill_null(pc.equal(a, b), False), pc.and_(pc.is_null(a), pc.is_null(b)))
    return np.logical_not(same.to_numpy(zero_copy_only=False))


def on_time(ctx: OperatorContext, batch: pa.RecordBatch, time_index: int, watermark: int,
            window_end: WindowClock | None = None) -> tuple[pa.RecordBatch, np.ndarray]:
    """The batch without rows whose time is NULL or already passed by the watermark (late), and their times.

    With ``window_end`` the column is a window end on that clock: its row is late once its window fired.
    """
    ts_arrow = event_times(batch, time_index)
    metrics = ctx.metrics
    if ts_arrow.null_count:
        metrics.extra["null_rowtime_dropped"] = metrics.extra.get("null_rowtime_dropped", 0) + ts_arrow.null_count
        valid = pc.is_valid(ts_arrow)
        batch, ts_arrow = batch.filter(valid), ts_arrow.filter(valid)
    ts = ts_arrow.to_numpy(zero_copy_only=False)
    if watermark != MIN_WATERMARK:
        fresh = (ts if window_end is None else window_end.fire_times(ts)) > watermark
        late = len(ts) - int(np.count_nonzero(fresh))
        if late:
            metrics.late_records_dropped += late
            batch, ts = batch.filter(pa.array(fresh)), ts[fresh]
    return batch, ts


def python_rows(batch: pa.RecordBatch) -> list[tuple]:
    columns = [c.to_pylist() for c in batch.columns]
    return list(zip(*columns, strict=True)) if columns else [()] * batch.num_rows


def build_batch(rows: list[tuple], schema: pa.Schema) -> pa.RecordBatch:
    columns = [pa.array([r[i] for r in rows], f.type) for i, f in enumerate(schema)]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


class _Descending:
    """Reverses the order of one sort-key value."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __lt__(self, other: _Descending) -> bool:
        return other.value < self.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Descending) and self.value == other.value

    __hash__ = None  # type: ignore[assignment]


def sort_key_function(sort: SortSpec) -> Callable[[tuple], tuple]:
    """Python key equal to the Arrow order of ``sort``: NULLs first or last, then the value."""

    def key(row: tuple) -> tuple:
        out = []
        for index, desc, nulls_first in sort:
            v = row[index]
            if v is None:
                out.append((0,) if nulls_first else (2,))
            else:
                out.append((1, _Descending(v) if desc else v))
        return tuple(out)

    return key


class KeyTimers:
    """Event-time timers per key: the earliest time each key wants to be visited.

    A heap with lazy deletion: re-registering a key earlier leaves the old entry,
    which is skipped when it no longer matches the key's registered time.
    """

    def __init__(self) -> None:
        self.heap: list[tuple[int, int, int, tuple]] = []
        self.registered: dict[tuple[int, tuple], int] = {}
        self.counter = itertools.count()

    def register(self, kg: int, key: tuple, at: int) -> None:
        current = self.registered.get((kg, key))
        if current is None or at < current:
            self.registered[(kg, key)] = at
            heapq.heappush(self.heap, (at, next(self.counter), kg, key))

    def pop_due(self, watermark: int) -> list[tuple[int, tuple]]:
        due = []
        while self.heap and self.heap[0][0] <= watermark:
            at, _, kg, key = heapq.heappop(self.heap)
            if self.registered.get((kg, key)) == at:
                del self.registered[(kg, key)]
                due.append((kg, key))
        return due


# ------------------------------------------------------------------ Top-N

class _Ranking:
    """Merging rows into a partition's ranked list, and the changes between two rankings."""

    def __init__(self, sort: SortSpec, start: int, end: int | None, output_rank: bool, newer_wins: bool,
                 keep_all: bool = False) -> None:
        self.key = sort_key_function(sort)
        self.start = start
        self.end = end  # rows start..end are visible
        self.keep = None if keep_all else end  # rows kept in state
        self.output_rank = output_rank
        self.insort = bisect.insort_left if newer_wins else bisect.insort_right

    def insert(self, ranked: list[tuple], rows: list[tuple]) -> None:
        for row in rows:
            self.insort(ranked, row, key=self.key)
        if self.keep is not None:
            del ranked[self.keep:]

    def remove(self, ranked: list[tuple], row: tuple) -> None:
        k = self.key(row)
        i = bisect.bisect_left(ranked, k, key=self.key)
        while i < len(ranked) and self.key(ranked[i]) == k:
            if ranked[i] == row:
                del ranked[i]
                return
            i += 1
        # a retraction of a row that is not kept (expired by state TTL): nothing to retract

    def visible(self, ranked: Sequence[tuple]) -> Sequence[tuple]:
        return ranked[self.start - 1:self.end]

    def numbered(self, rows: Sequence[tuple]) -> list[tuple]:
        if not self.output_rank:
            return list(rows)
        return [row + (self.start + i,) for i, row in enumerate(rows)]

    def changes(self, old: Sequence[tuple], new: Sequence[tuple], rows: list[tuple], kinds: list[int]) -> None:
        before, after = self.visible(old), self.visible(new)
        if self.output_rank:
            for i in range(max(len(before), len(after))):
                o = before[i] if i < len(before) else None
                n = after[i] if i < len(after) else None
                if o == n:
                    continue
                rank = (self.start + i,)
                if o is None:
                    rows.append(n + rank)
                    kinds.append(RowKind.INSERT)
                elif n is None:
                    rows.append(o + rank)
                    kinds.append(RowKind.DELETE)
                else:
                    rows += [o + rank, n + rank]
                    kinds += [RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER]
            return
        # rows compared by value; an ARRAY, MAP or ROW value (a list or dict) as a tuple
        originals = {_hashable(r): r for r in (*before, *after)}
        old, new = Counter(map(_hashable, before)), Counter(map(_hashable, after))
        for key in (old - new).elements():
            rows.append(originals[key])
            kinds.append(RowKind.DELETE)
        for key in (new - old).elements():
            rows.append(originals[key])
            kinds.append(RowKind.INSERT)


def _hashable(value: Any) -> Any:
    """``value`` with its lists and dicts (nested values) as tuples, so that it can be counted."""
    if isinstance(value, list | tuple):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, _hashable(v)) for k, v in value.items())
    return value


class TopNOperator(Operator):
    """ROW_NUMBER() OVER (PARTITION BY keys ORDER BY sort) with start <= rn <= end: an updating result."""

    name = "Rank"
    keyed = True

    def __init__(self, keys: list[int], sort: SortSpec, start: int, end: int, output_rank: bool,
                 retracting: bool, newer_wins: bool, schema: pa.Schema, state_ttl_ms: int | None = None,
                 columnar: bool = False) -> None:
        self.keys = keys
        self.state_ttl_ms = state_ttl_ms
        self.columnar_form = columnar
        self.sort = sort
        self.end = end
        self.retracting = retracting
        self.newer_wins = newer_wins
        # over an updating input a row can leave the top N, so every row is kept
        self.ranking = _Ranking(sort, start, end, output_rank, newer_wins, keep_all=retracting)
        self.schema = schema

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        # partition key -> its rows in rank order (the top `end` rows; all rows over an updating input)
        self.ranked = ctx.keyed_state.state("ranked", self.state_ttl_ms)
        # over an append-only input: the vectorized form, its rows in memory (rank_columnar.py) or,
        # on the rocksdb backend, in RocksDB (rank_rocksdb.py)
        self.columnar: ColumnarTopN | RocksDBTopN | None = None
        backend = ctx.keyed_state
        if isinstance(backend, RocksDBStateBackend) and self.columnar_form:
            if not rank_columnar_rows(self._input_schema().types):
                raise JobError("the plan keeps this Top-N's rows in columnar form, which the rocksdb state backend "
                               "holds only for columns of simple types; plan the job with the backend it runs on")
            r = self.ranking
            self.columnar = RocksDBTopN(COLUMNAR_STATE, self.keys, self.sort, r.start, self.end, r.output_rank,
                                        self.newer_wins, self._input_schema(), self.schema, self.state_ttl_ms,
                                        ctx.max_parallelism, backend, backend.clock)
        elif columnar_state(ctx, self.columnar_form):
            self.columnar = self._columnar_store()
        if self.columnar is not None:
            restored = backend.columnar_states.get(COLUMNAR_STATE)  # restore_all ran before open
            if restored is not None:
                for table in restored.restored_tables():  # a batch at a time: RocksDB takes them so
                    self.columnar.load(table)
            backend.columnar_states[COLUMNAR_STATE] = self.columnar.state

    def _input_schema(self) -> pa.Schema:
        return pa.schema(list(self.schema)[: len(self.schema) - (1 if self.ranking.output_rank else 0)])

    def _columnar_store(self) -> ColumnarTopN:
        r = self.ranking
        return ColumnarTopN(COLUMNAR_STATE, self.keys, self.sort, r.start, self.end, r.output_rank,
                            self.newer_wins, self._input_schema(), self.schema, self.state_ttl_ms,
                            self.ctx.max_parallelism, self.ctx.keyed_state.clock)

    def restore_state(self, state: Any) -> None:
        if self.columnar is not None:
            # per-key rankings restored from a rocksdb savepoint join the columnar store
            entries = list(self.ranked.items())
            for kg, key, _ in entries:
                self.ranked.delete(kg, key)
            self.columnar.add_ranked(entries)
            return
        table = self.ctx.keyed_state.take_columnar(COLUMNAR_STATE)
        if table is not None:
            # rows restored from a hashmap savepoint (columnar) become per-key rankings
            for kg, key, rows in self._columnar_store().ranked(table):
                self.ranked.put(kg, key, rows)

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        batch = chunk.batch
        if self.columnar is not None:
            changes = self.columnar.process(batch)
            return [Chunk(changes[0], changes[1])] if changes is not None else []
        maxp = self.ctx.max_parallelism
        if self.retracting:
            groups = group_rows(batch, self.keys, maxp)
            kinds = chunk.kinds_or_inserts().to_numpy(zero_copy_only=False)
        else:
            groups = group_rows(batch, self.keys, maxp, self.sort, self.end, self.newer_wins)
        if not groups:
            return []
        indexes = np.concatenate([g[2] for g in groups])
        rows = python_rows(batch.take(pa.array(indexes)))
        out_rows: list[tuple] = []
        out_kinds: list[int] = []
        offset = 0
        ranking = self.ranking
        for kg, key, idx in groups:
            arrived = rows[offset:offset + len(idx)]
            offset += len(idx)
            stored = self.ranked.get(kg, key)
            old: tuple = stored if stored is not None else ()
            ranked = list(old)
            if self.retracting:
                for row, kind in zip(arrived, kinds[idx], strict=True):
                    if kind in _RETRACT:
                        ranking.remove(ranked, row)
                    else:
                        ranking.insert(ranked, [row])
            else:
                ranking.insert(ranked, arrived)
            ranking.changes(old, ranked, out_rows, out_kinds)
            if ranked:
                self.ranked.put(kg, key, tuple(ranked))
            else:
                self.ranked.delete(kg, key)
        if not out_rows:
            return []
        return [Chunk(build_batch(out_rows, self.schema), pa.array(out_kinds, pa.int8()))]


# ------------------------------------------------------------------ deduplication

class DeduplicateFirstOperator(Operator):
    """The first row per key by event time, emitted once the watermark has passed it."""

    name = "Deduplicate"
    keyed = True

    def __init__(self, keys: list[int], time_index: int, output_rank: bool, schema: pa.Schema,
                 state_ttl_ms: int | None = None) -> None:
        self.keys = keys
        self.state_ttl_ms = state_ttl_ms
        self.time_index = time_index
        self.output_rank = output_rank
        self.schema = schema
        self.timers = KeyTimers()
        self.watermark = MIN_WATERMARK

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        # key -> (time, row) while the earliest row waits for the watermark; (time, None) once emitted
        self.first = ctx.keyed_state.state("first", self.state_ttl_ms)

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        batch, ts = on_time(self.ctx, chunk.batch, self.time_index, self.watermark)
        groups = group_rows(batch, self.keys, self.ctx.max_parallelism, [(self.time_index, False, False)], 1)
        if not groups:
            return []
        indexes = np.concatenate([g[2] for g in groups])
        rows = python_rows(batch.take(pa.array(indexes)))
        for (kg, key, _), row, t in zip(groups, rows, ts[indexes].tolist(), strict=True):
            stored = self.first.get(kg, key)
            if stored is not None and (stored[1] is None or stored[0] <= t):
                continue  # already emitted, or an earlier row waits
            self.first.put(kg, key, (t, row))
            self.timers.register(kg, key, t)
        return []

    def on_watermark(self, timestamp: int) -> Output:
        self.watermark = timestamp
        fired: list[tuple[int, tuple]] = []
        for kg, key in self.timers.pop_due(timestamp):
            stored = self.first.get(kg, key)
            if stored is None or stored[1] is None:
                continue  # expired by state TTL
            fired.append((stored[0], stored[1]))
            self.first.put(kg, key, (stored[0], None))
        if not fired:
            return []
        fired.sort(key=lambda f: f[0])
        rows = [row + (1,) if self.output_rank else row for _, row in fired]
        return [Chunk(build_batch(rows, self.schema))]

    def snapshot_state(self, checkpoint_id: int) -> Any:
        return {"watermark": self.watermark}

    def restore_state(self, state: Any) -> None:
        if state is not None:
            self.watermark = state["watermark"]
        for kg, key, (t, row) in self.first.items():
            if row is not None:
                self.timers.register(kg, key, t)


# ------------------------------------------------------------------ window Top-N

class WindowRankOperator(Operator):
    """Top-N per (window_start, window_end, keys): emitted once, when the watermark passes the window end."""

    name = "WindowRank"
    keyed = True

    def __init__(self, keys: list[int], window_end: int, sort: SortSpec, start: int, end: int | None,
                 output_rank: bool, newer_wins: bool, schema: pa.Schema, zone: str | None = None) -> None:
        """``zone``: the windows' session zone when they are on a TIMESTAMP_LTZ time attribute."""
        self.keys = keys
        self.window_end = window_end
        self.clock = WindowClock(zone)
        self.sort = sort
        self.end = end
        self.newer_wins = newer_wins
        self.ranking = _Ranking(sort, start, end, output_rank, newer_wins)
        self.schema = schema
        self.timers: dict[int, set[tuple[int, tuple]]] = {}  # window end -> keys
        self.ends: list[int] = []
        self.watermark = MIN_WATERMARK

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        # partition key (with window_start, window_end) -> (window end ms, its top rows in rank order)
        self.windows = ctx.keyed_state.state("windows")

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        batch, ends = on_time(self.ctx, chunk.batch, self.window_end, self.watermark, window_end=self.clock)
        groups = group_rows(batch, self.keys, self.ctx.max_parallelism, self.sort, self.end, self.newer_wins)
        if not groups:
            return []
        indexes = np.concatenate([g[2] for g in groups])
        rows = python_rows(batch.take(pa.array(indexes)))
        offset = 0
        for kg, key, idx in groups:
            arrived = rows[offset:offset + len(idx)]
            offset += len(idx)
            end = int(ends[idx[0]])
            stored = self.windows.get(kg, key)
            ranked = list(stored[1]) if stored is not None else []
            self.ranking.insert(ranked, arrived)
            self.windows.put(kg, key, (end, tuple(ranked)))
            self._add_timer(end, kg, key)
        return []

    def _add_timer(self, end: int, kg: int, key: tuple) -> None:
        bucket = self.timers.get(end)
        if bucket is None:
            bucket = self.timers[end] = set()
            heapq.heappush(self.ends, end)
        bucket.add((kg, key))

    def on_watermark(self, timestamp: int) -> Output:
        self.watermark = timestamp
        out: list[tuple] = []
        while self.ends and self.clock.fire_time(self.ends[0]) <= timestamp:
            end = heapq.heappop(self.ends)
            for kg, key in sorted(self.timers.pop(end), key=lambda item: tuple(str(v) for v in item[1])):
                stored = self.windows.get(kg, key)
                if stored is None:
                    continue
                self.windows.delete(kg, key)
                out += self.ranking.numbered(self.ranking.visible(stored[1]))
        if not out:
            return []
        return [Chunk(build_batch(out, self.schema))]

    def snapshot_state(self, checkpoint_id: int) -> Any:
        return {"watermark": self.watermark}

    def restore_state(self, state: Any) -> None:
        if state is not None:
            self.watermark = state["watermark"]
        for kg, key, (end, _) in self.windows.items():
            self._add_timer(end, kg, key)


# ------------------------------------------------------------------ ORDER BY / LIMIT

class StreamSortOperator(Operator):
    """ORDER BY <time attribute>, ... [LIMIT n]: rows are sorted and emitted as the watermark passes them."""

    name = "Sort"

    def __init__(self, sort: SortSpec, limit: int | None) -> None:
        self.sort = sort
        self.time_index = sort[0][0]
        self.limit = limit
        self.buffer: list[pa.RecordBatch] = []
        self.emitted = 0
        self.watermark = MIN_WATERMARK

    def _done(self) -> bool:
        return self.limit is not None and self.emitted >= self.limit

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        if self._done():
            return []
        batch, _ = on_time(self.ctx, chunk.batch, self.time_index, self.watermark)
        if batch.num_rows:
            self.buffer.append(batch)
        return []

    def on_watermark(self, timestamp: int) -> Output:
        self.watermark = timestamp
        if not self.buffer:
            return []
        rows = self.buffer[0] if len(self.buffer) == 1 else pa.concat_batches(self.buffer)
        due = pc.less_equal(event_times(rows, self.time_index), timestamp)
        ready = rows.filter(due)
        rest = rows.filter(pc.invert(due))
        self.buffer = [rest] if rest.num_rows else []
        if ready.num_rows == 0:
            return []
        columns = {f"s{i}": ready.column(index) for i, (index, _, _) in enumerate(self.sort)}
        spec = [(f"s{i}", "descending" if desc else "ascending", "at_start" if nulls_first else "at_end")
                for i, (_, desc, nulls_first) in enumerate(self.sort)]
        out = ready.take(pc.sort_indices(pa.table(columns), sort_keys=spec))
        if self.limit is not None:
            out = out.slice(0, self.limit - self.emitted)
            self.emitted += out.num_rows
            if self._done():
                self.buffer = []
        return [Chunk(out)]

    def snapshot_state(self, checkpoint_id: int) -> Any:
        return {"watermark": self.watermark, "buffer": list(self.buffer), "emitted": self.emitted}

    def restore_state(self, state: Any) -> None:
        if state is not None:
            self.watermark, self.buffer, self.emitted = state["watermark"], state["buffer"], state["emitted"]


class LimitOperator(Operator):
    """LIMIT n on a stream: the first n rows that arrive, then nothing."""

    name = "Limit"

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.emitted = 0

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        remaining = self.limit - self.emitted
        if remaining <= 0:
            return []
        batch = chunk.batch.slice(0, remaining) if chunk.num_rows > remaining else chunk.batch
        self.emitted += batch.num_rows
        return [Chunk(batch)]

    def snapshot_state(self, checkpoint_id: int) -> Any:
        return {"emitted": self.emitted}

    def restore_state(self, state: Any) -> None:
        if state is not None:
            self.emitted = state["emitted"]
