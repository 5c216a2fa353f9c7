"""Window joins: rows of two windowed inputs meet when they share window and key.

Each side's rows wait until the watermark passes their window's end; then the
rows of that window on both sides are joined (INNER, or padded for outer
sides), emitted once as append-only rows, and dropped.  Rows arriving for a
window that has already fired are late and dropped.

On the hashmap backend the rows wait as Arrow tables (the side's columns plus
``$kg``, the key group, and ``$end``, the window end) and a firing is one
Arrow hash join of the due rows on (window end, keys), with the residual
condition evaluated on all candidate pairs at once: no Python code runs per
row.  The rocksdb backend keeps the per-key form, the rows of each
(window end, key) in keyed state, whose state can exceed memory.  Savepoints
convert between the two in restore_state, so a job can switch backends.
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.evaluator import Predicate
from sqlstream.core.expressions import Expr
from sqlstream.runtime.elements import MIN_WATERMARK, Chunk
from sqlstream.runtime.operators.base import Operator, OperatorContext, Output
from sqlstream.runtime.operators.join import PairFilter, build_batch, rows_of
from sqlstream.runtime.operators.keyed import columnar_state, key_group_column
from sqlstream.runtime.operators.window_agg import rows_with_event_time
from sqlstream.runtime.state.base import ColumnarState
from sqlstream.runtime.windows import WindowClock

# the columnar form's state names (keyed state "left"/"right" is the per-key form's)
COLUMNAR_STATES = ("window-join-left", "window-join-right")


class WindowJoinOperator(Operator):
    name = "WindowJoin"
    keyed = True

    def __init__(self, kind: str, left_keys: tuple[int, ...], right_keys: tuple[int, ...],
                 residual: Expr | None, ends: tuple[int, int], left_schema: pa.Schema,
                 right_schema: pa.Schema, schema: pa.Schema, columnar: bool = False, zone: str | None = None) -> None:
        """``ends``: each side's window_end column; ``zone``: the windows' session zone when they are
        on a TIMESTAMP_LTZ time attribute (their ends are then wall-clock time)."""
        self.kind = kind
        self.clock = WindowClock(zone)
        self.columnar_form = columnar
        self.keys = (left_keys, right_keys)
        self.ends = ends
        self.side_schemas = (left_schema, right_schema)
        self.widths = (len(left_schema), len(right_schema))
        self.residual = residual
        self.schema = schema
        self.pairs = PairFilter(residual, schema)
        self.outer = (kind in ("LEFT", "FULL"), kind in ("RIGHT", "FULL"))
        self.watermark = MIN_WATERMARK
        self.timers: dict[int, set[tuple[int, tuple]]] = {}
        self.heap: list[int] = []

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        # per-key form: (window end, *key) -> rows, per side
        self.sides = (ctx.keyed_state.state("left"), ctx.keyed_state.state("right"))
        self.columnar: ColumnarWindowJoin | None = None
        backend = ctx.keyed_state
        if columnar_state(ctx, self.columnar_form):
            states = (backend.columnar(COLUMNAR_STATES[0]), backend.columnar(COLUMNAR_STATES[1]))
            self.columnar = ColumnarWindowJoin(self.kind, self.keys, self.residual, self.widths, self.schema, states,
                                               self.clock)

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        side = input_index
        batch, ends = rows_with_event_time(chunk.batch, self.ends[side], self.ctx.metrics)
        if self.watermark != MIN_WATERMARK and batch.num_rows:
            on_time = pa.array(self.clock.fire_times(ends.to_numpy(zero_copy_only=False)) > self.watermark)
            late = batch.num_rows - pc.sum(on_time).as_py()
            if late:
                self.ctx.metrics.late_records_dropped += late
                batch, ends = batch.filter(on_time), ends.filter(on_time)
        if batch.num_rows == 0:
            return []
        groups = key_group_column(batch, list(self.keys[side]), self.ctx.max_parallelism)
        if self.columnar is not None:
            self.columnar.store(side, batch, groups, ends)
        else:
            self._store_per_key(side, batch, groups.to_pylist(), ends.to_pylist())
        return []

    def _store_per_key(self, side: int, batch: pa.RecordBatch, groups: list[int], ends: list[int]) -> None:
        key_idx = self.keys[side]
        additions: dict[tuple, tuple[int, list[tuple]]] = {}
        for row, end, g in zip(rows_of(batch), ends, groups, strict=True):
            skey = (end, *(row[k] for k in key_idx))
            additions.setdefault(skey, (g, []))[1].append(row)
        state = self.sides[side]
        for skey, (g, new) in additions.items():
            state.put(g, skey, (state.get(g, skey) or ()) + tuple(new))
            self._add_timer(g, skey)

    def _add_timer(self, g: int, skey: tuple) -> None:
        end = skey[0]
        if end not in self.timers:
            self.timers[end] = set()
            heapq.heappush(self.heap, end)
        self.timers[end].add((g, skey))

    def on_watermark(self, timestamp: int) -> Output:
        self.watermark = timestamp
        if self.columnar is not None:
            return [Chunk(b) for b in self.columnar.fire(timestamp)]
        out: list[tuple] = []
        while self.heap and self.clock.fire_time(self.heap[0]) <= timestamp:
            end = heapq.heappop(self.heap)
            for g, skey in sorted(self.timers.pop(end), key=lambda t: tuple(str(x) for x in t[1])):
                left = self.sides[0].get(g, skey) or ()
                right = self.sides[1].get(g, skey) or ()
                self.sides[0].delete(g, skey)
                self.sides[1].delete(g, skey)
                out += self._join(left, right, skey)
        return [Chunk(build_batch(out, self.schema))] if out else []

    def _join(self, left: tuple, right: tuple, skey: tuple) -> list[tuple]:
        if None in skey[1:]:
            pairs: list[tuple[tuple, tuple]] = []  # NULL keys never match
        else:
            pairs = [(lr, rr) for lr in left for rr in right]
        ok = self.pairs(pairs)
        out = []
        left_hit, right_hit = set(), set()
        for n, ((lr, rr), good) in enumerate(zip(pairs, ok, strict=True)):
            if good:
                out.append(lr + rr)
                left_hit.add(n // max(len(right), 1))
                right_hit.add(n % max(len(right), 1))
        if self.outer[0]:
            out += [lr + (None,) * self.widths[1] for i, lr in enumerate(left) if i not in left_hit]
        if self.outer[1]:
            out += [(None,) * self.widths[0] + rr for j, rr in enumerate(right) if j not in right_hit]
        return out

    def state_rows(self) -> int:
        """Rows waiting for their window to fire, on both sides (either form)."""
        if self.columnar is not None:
            return self.columnar.rows()
        return sum(len(rows) for st in self.sides for _, _, rows in st.items())

    def snapshot_state(self, checkpoint_id: int) -> Any:
        return {"watermark": self.watermark}

    def restore_state(self, state: Any) -> None:
        if state is not None:
            self.watermark = state["watermark"]
        backend = self.ctx.keyed_state
        if self.columnar is not None:
            # per-key rows restored from a rocksdb savepoint join the columnar store
            for side, st in enumerate(self.sides):
                entries = list(st.items())
                for g, skey, _ in entries:
                    st.delete(g, skey)
                rows = [row for _, _, stored in entries for row in stored]
                if rows:
                    groups = pa.array([g for g, _, stored in entries for _ in stored], pa.int64())
                    ends = pa.array([skey[0] for _, skey, stored in entries for _ in stored], pa.int64())
                    self.columnar.store(side, build_batch(rows, self.side_schemas[side]), groups, ends)
            self.columnar.restored()
            return
        for side, name in enumerate(COLUMNAR_STATES):
            # rows restored from a hashmap savepoint (columnar) become per-key entries
            table = backend.take_columnar(name)
            if table is None:
                continue
            rows = rows_of(table.select(list(range(self.widths[side]))))
            groups = table.column("$kg").to_pylist()
            ends = table.column("$end").to_pylist()
            by_key: dict[tuple[int, tuple], list[tuple]] = {}
            for g, end, row in zip(groups, ends, rows, strict=True):
                by_key.setdefault((g, (end, *(row[k] for k in self.keys[side]))), []).append(row)
            for (g, skey), new in by_key.items():
                self.sides[side].put(g, skey, (self.sides[side].get(g, skey) or ()) + tuple(new))
        for st in self.sides:
            for g, skey, _ in st.items():
                self._add_timer(g, skey)


class ColumnarWindowJoin:
    """The rows of one window join subtask as Arrow tables, joined window by window with Arrow.

    Each stored table holds one batch of a side: its columns (by position, so that
    duplicate names cannot clash), ``$kg`` and ``$end``.  Tables are never changed in
    place, only replaced in the state's list, so a frozen snapshot stays consistent.
    """

    def __init__(self, kind: str, keys: tuple[tuple[int, ...], tuple[int, ...]], residual: Expr | None,
                 widths: tuple[int, int], schema: pa.Schema, states: tuple[ColumnarState, ColumnarState],
                 clock: WindowClock) -> None:
        self.keys = keys
        self.clock = clock
        self.widths = widths
        self.schema = schema
        self.states = states
        self.predicate = Predicate(residual) if residual is not None else None
        self.outer = (kind in ("LEFT", "FULL"), kind in ("RIGHT", "FULL"))
        self.names = tuple([f"c{i}" for i in range(w)] + ["$kg", "$end"] for w in widths)
        self.min_end: int | None = None  # the earliest window end held, to skip watermarks cheaply

    def store(self, side: int, batch: pa.RecordBatch, groups: pa.Array, ends: pa.Array) -> None:
        table = pa.Table.from_arrays([*batch.columns, groups, ends], names=self.names[side])
        self.states[side].tables.append(table)
        first = pc.min(ends).as_py()
        self.min_end = first if self.min_end is None else min(self.min_end, first)

    def restored(self) -> None:
        """Tables were restored into the states (by key group): find the earliest window end again."""
        self.min_end = self._min_end()

    def rows(self) -> int:
        return sum(t.num_rows for st in self.states for t in st.tables)

    def _min_end(self) -> int | None:
        ends = [pc.min(t.column("$end")).as_py() for st in self.states for t in st.tables if t.num_rows]
        return min(ends) if ends else None

    def fire(self, watermark: int) -> list[pa.RecordBatch]:
        """Join and drop the rows of every window with end - 1 <= watermark; the joined rows."""
        if self.min_end is None or self.clock.fire_time(self.min_end) > watermark:
            return []
        due = [self._take_due(side, watermark) for side in (0, 1)]
        self.min_end = self._min_end()
        return self._join(due[0], due[1])

    def _take_due(self, side: int, watermark: int) -> pa.RecordBatch | None:
        """The due rows of one side as one batch (side columns, then ``$end``); the rest stay."""
        state = self.states[side]
        table = state.frozen()
        if table is None:
            return None
        ends = table.column("$end").combine_chunks().to_numpy(zero_copy_only=False)
        is_due = pa.array(self.clock.fire_times(ends) <= watermark)
        state.tables = [rest] if (rest := table.filter(pc.invert(is_due))).num_rows else []
        due = table.filter(is_due).drop_columns(["$kg"]).combine_chunks()
        return due.to_batches()[0] if due.num_rows else None

    def _join(self, left: pa.RecordBatch | None, right: pa.RecordBatch | None) -> list[pa.RecordBatch]:
        out: list[pa.RecordBatch] = []
        matched: tuple[pa.Array, pa.Array] = (pa.array([], pa.int64()), pa.array([], pa.int64()))
        if left is not None and right is not None:
            matched = self._pairs(left, right)
            if len(matched[0]):
                out.append(self._combine(left.take(matched[0]), right.take(matched[1])))
        for side, rows in ((0, left), (1, right)):
            if self.outer[side] and rows is not None:
                alone = pc.invert(pc.is_in(pa.array(np.arange(rows.num_rows)), value_set=matched[side]))
                rows = rows.filter(alone)
                if rows.num_rows:
                    nulls = self._nulls(1 - side, rows.num_rows)
                    out.append(self._combine(rows, nulls) if side == 0 else self._combine(nulls, rows))
        return out

    def _pairs(self, left: pa.RecordBatch, right: pa.RecordBatch) -> tuple[pa.Array, pa.Array]:
        """Row numbers of the (left, right) pairs with equal window end and keys that pass the residual.

        Arrow's hash join never matches NULL keys, as in SQL.
        """
        sides = []
        for side, (batch, tag) in enumerate(((left, "$l"), (right, "$r"))):
            columns = {"$end": batch.column(self.widths[side])}
            for i, k in enumerate(self.keys[side]):
                columns[f"$k{i}"] = batch.column(k)
            columns[tag] = pa.array(np.arange(batch.num_rows))
            sides.append(pa.table(columns))
        keys = ["$end", *[f"$k{i}" for i in range(len(self.keys[0]))]]
        joined = sides[0].join(sides[1], keys=keys, join_type="inner", use_threads=False)
        joined = joined.sort_by([("$l", "ascending"), ("$r", "ascending")])  # deterministic output order
        lrows, rrows = joined.column("$l").combine_chunks(), joined.column("$r").combine_chunks()
        if self.predicate is not None and len(lrows):
            ok = pc.fill_null(self.predicate(self._combine(left.take(lrows), right.take(rrows))), False)
            lrows, rrows = lrows.filter(ok), rrows.filter(ok)
        return lrows, rrows

    def _combine(self, left: pa.RecordBatch, right: pa.RecordBatch) -> pa.RecordBatch:
        """Output rows from aligned left and right rows (each side's ``$end`` column left out)."""
        columns = left.columns[: self.widths[0]] + right.columns[: self.widths[1]]
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)

    def _nulls(self, side: int, n: int) -> pa.RecordBatch:
        """``n`` NULL-padded rows of a side: its columns, all NULL."""
        offset = 0 if side == 0 else self.widths[0]
        fields = [self.schema.field(offset + i) for i in range(self.widths[side])]
        return pa.RecordBatch.from_arrays([pa.nulls(n, f.type) for f in fields], names=[f.name for f in fields])
