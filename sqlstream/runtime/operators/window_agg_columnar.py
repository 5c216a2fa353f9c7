"""Vectorized window aggregation: partial aggregates kept as Arrow tables, merged by group-bys.

Each batch is pre-aggregated per (window, key) into a partial table that is
appended to the state; the tables are compacted (concatenated and merged by
one Arrow group-by) when they grow, and when the watermark passes window
ends the due rows are merged once more and turned into result columns.  No
Python code runs per key: this is the hot path of windowed queries (Nexmark
q5, q7).  It serves COUNT, COUNT(DISTINCT), SUM, MIN, MAX and AVG over
integer, floating point, string and temporal values; other aggregates use
the per-key path in window_agg.py.  On rocksdb the same pre-aggregation,
merges and results run with the partials as RocksDB entries
(window_agg_rocksdb.py, a subclass).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.aggregates import AggCall
from sqlstream.runtime.state.base import ColumnarState
from sqlstream.runtime.windows import WindowClock

WINDOW_KEYS = ["$end", "$start", "$kg"]
COMPACT_MIN_ROWS = 200_000


class ColumnarWindowAggregates:
    """The aggregation state of one window operator subtask, in columnar form."""

    def __init__(self, aggs: list[AggCall], key_count: int, partials: ColumnarState,
                 distincts: list[ColumnarState]) -> None:
        self.aggs = aggs
        self.keys = WINDOW_KEYS + [f"k{i}" for i in range(key_count)]
        self.partials = partials
        self.distincts = distincts  # one per COUNT(DISTINCT ...), in agg order
        self.distinct_of = {i: n for n, i in enumerate(i for i, a in enumerate(aggs) if a.distinct)}
        # (input column, Arrow aggregation, options, partial column it becomes)
        self.specs: list[tuple[str, str, pc.FunctionOptions | None, str]] = []
        self.merges: list[tuple[str, str]] = []  # (partial column, aggregation merging partials)
        for i, a in enumerate(aggs):
            if a.distinct:
                continue
            if a.function == "COUNT":
                mode = "all" if a.arg is None else "only_valid"
                self.specs.append((f"x{i}", "count", pc.CountOptions(mode=mode), f"p{i}"))
                self.merges.append((f"p{i}", "sum"))
            elif a.function in ("SUM", "AVG"):
                self.specs += [(f"x{i}", "sum", pc.ScalarAggregateOptions(min_count=0), f"p{i}"),
                               (f"x{i}", "count", pc.CountOptions(mode="only_valid"), f"n{i}")]
                self.merges += [(f"p{i}", "sum"), (f"n{i}", "sum")]
            else:
                fn = "min" if a.function == "MIN" else "max"
                self.specs.append((f"x{i}", fn, None, f"p{i}"))
                self.merges.append((f"p{i}", fn))
        self.state_rows = 0
        self.compacted_rows = 0

    # ------------------------------------------------------------ building partials
    def add(self, keys: list[pa.Array], batch: pa.RecordBatch) -> None:
        """Pre-aggregate rows (already assigned to windows) and append the partials."""
        table = self._inputs(keys, batch)
        self._append(self.partials, self.pre_aggregate(table))
        for i, n in self.distinct_of.items():
            values = table.select([*self.keys, f"x{i}"]).filter(pc.is_valid(table.column(f"x{i}")))
            distinct = values.group_by([*self.keys, f"x{i}"], use_threads=False).aggregate([])
            self._append(self.distincts[n], distinct.rename_columns([*self.keys, "v"]))
        if self.state_rows > max(COMPACT_MIN_ROWS, 2 * self.compacted_rows):
            self.compact()

    def _inputs(self, keys: list[pa.Array], batch: pa.RecordBatch) -> pa.Table:
        """The window keys and each aggregate's input column (x<i>) of rows assigned to windows."""
        columns = dict(zip(self.keys, keys, strict=True))
        for i, a in enumerate(self.aggs):
            if a.arg is None:
                columns[f"x{i}"] = pa.nulls(batch.num_rows, pa.int8())  # COUNT(*) counts rows
            else:
                x = batch.column(a.arg)
                if a.function in ("SUM", "AVG") and pa.types.is_integer(x.type):
                    x = x.cast(pa.int64())
                columns[f"x{i}"] = x
        return pa.table(columns)

    def pre_aggregate(self, table: pa.Table) -> pa.Table:
        """The partials of ``_inputs``' rows: one row per (window, key), by one Arrow group-by."""
        grouped = table.group_by(self.keys, use_threads=False).aggregate(
            [(c, f, o) if o is not None else (c, f) for c, f, o, _ in self.specs])
        named = {f"{c}_{f}": target for c, f, _, target in self.specs}
        return pa.table({named.get(n, n): grouped.column(n) for n in grouped.column_names})

    def _append(self, state: ColumnarState, table: pa.Table) -> None:
        if state.tables and state.tables[-1].schema != table.schema:
            # tables taken over from the per-key form (add_accumulators) carry the types Python
            # inferred (an INT key as BIGINT, timestamps in microseconds) in their own column order:
            # a batch's table says the real ones
            state.tables = [t.select(table.schema.names).cast(table.schema) for t in state.tables]
        state.tables.append(table)
        self.state_rows += table.num_rows

    # ------------------------------------------------------------ merging
    def _merged(self, state: ColumnarState, distinct: bool) -> pa.Table | None:
        table = state.frozen()
        if table is None:
            return None
        if distinct:
            merged = table.group_by([*self.keys, "v"], use_threads=False).aggregate([])
        else:
            merged = self.combine(table)
        state.tables = [merged]
        return merged

    def combine(self, table: pa.Table) -> pa.Table:
        """Partials merged into one row per (window, key)."""
        merged = table.group_by(self.keys, use_threads=False).aggregate(self.merges)
        named = {f"{c}_{f}": c for c, f in self.merges}
        return pa.table({named.get(n, n): merged.column(n) for n in merged.column_names})

    def compact(self) -> None:
        self.state_rows = 0
        for state, distinct in [(self.partials, False), *[(d, True) for d in self.distincts]]:
            merged = self._merged(state, distinct)
            self.state_rows += 0 if merged is None else merged.num_rows
        self.compacted_rows = self.state_rows

    # ------------------------------------------------------------ the per-key form (other backends)
    def add_accumulators(self, entries: list[tuple[int, tuple, list[list]]]) -> None:
        """Take over per-key accumulators ((key group, (end, start, *keys), accumulators)) as partials.

        A savepoint of the per-key form (rocksdb) restored where the columnar form runs (hashmap).
        """
        if not entries:
            return
        columns: dict[str, list] = {k: [] for k in self.keys}
        for name, _ in self.merges:
            columns[name] = []
        distinct_rows: dict[int, dict[str, list]] = {n: {k: [] for k in [*self.keys, "v"]} for n in self.distinct_of.values()}
        for kg, skey, accs in entries:
            base = [skey[0], skey[1], kg, *skey[2:]]
            for k, v in zip(self.keys, base, strict=True):
                columns[k].append(v)
            for i, a in enumerate(self.aggs):
                acc = accs[i]
                if a.distinct:
                    rows = distinct_rows[self.distinct_of[i]]
                    for value in acc[0]:
                        for k, v in zip(self.keys, base, strict=True):
                            rows[k].append(v)
                        rows["v"].append(value)
                elif a.function in ("SUM", "AVG"):
                    columns[f"p{i}"].append(acc[0])
                    columns[f"n{i}"].append(acc[1])
                else:
                    columns[f"p{i}"].append(acc[0])
        table = pa.table(columns)
        self._append(self.partials, table)
        for n, rows in distinct_rows.items():
            if rows["v"]:
                self._append(self.distincts[n], pa.table(rows))

    def accumulators(self) -> list[tuple[int, tuple, list[list]]]:
        """All state as per-key accumulators: a columnar savepoint restored on rocksdb."""
        merged = self._merged(self.partials, False)
        if merged is None:
            return []
        distinct_sets: list[dict[tuple, set]] = []
        for state in self.distincts:
            table = self._merged(state, True)
            sets: dict[tuple, set] = {}
            if table is not None:
                cols = [table.column(k).to_pylist() for k in [*self.keys, "v"]]
                for row in zip(*cols, strict=True):
                    sets.setdefault(tuple(row[:-1]), set()).add(row[-1])
            distinct_sets.append(sets)
        names = [c for c, _ in self.merges]
        cols = {k: merged.column(k).to_pylist() for k in [*self.keys, *names]}
        out = []
        for r in range(merged.num_rows):
            key = tuple(cols[k][r] for k in self.keys)
            accs = []
            for i, a in enumerate(self.aggs):
                if a.distinct:
                    accs.append([distinct_sets[self.distinct_of[i]].get(key, set())])
                elif a.function in ("SUM", "AVG"):
                    accs.append([cols[f"p{i}"][r] if cols[f"n{i}"][r] else None, cols[f"n{i}"][r] or 0])
                else:
                    accs.append([cols[f"p{i}"][r]])
            end, start, kg, *group = key
            out.append((kg, (end, start, *group), accs))
        return out

    def min_end(self) -> int | None:
        ends = [pc.min(t.column("$end")).as_py() for t in self.partials.tables if t.num_rows]
        return min(ends) if ends else None

    # ------------------------------------------------------------ firing
    def fire(self, watermark: int, clock: WindowClock) -> tuple[pa.Table, list[pa.Array]] | None:
        """Merged groups whose window ended by ``watermark`` (removed from state) and their results."""
        merged = self._merged(self.partials, False)
        if merged is None:
            return None
        due = _due(merged, watermark, clock)
        fired = merged.filter(due)
        if fired.num_rows == 0:
            return None
        fired = fired.sort_by([("$end", "ascending"), ("$start", "ascending")])
        self.partials.tables = [merged.filter(pc.invert(due))]
        results = self.results(fired, watermark, clock)
        self.state_rows = sum(t.num_rows for t in self.partials.tables)
        return fired, results

    def results(self, fired: pa.Table, watermark: int, clock: WindowClock) -> list[pa.Array]:
        """The aggregates' values of fired (merged) partials, in agg order."""
        results: list[pa.Array] = []
        for i, a in enumerate(self.aggs):
            if a.distinct:
                results.append(self._distinct_counts(fired, self.distinct_of[i], watermark, clock))
            elif a.function == "COUNT":
                results.append(fired.column(f"p{i}").cast(pa.int64()))
            elif a.function == "SUM":
                s, n = fired.column(f"p{i}"), fired.column(f"n{i}")
                # an integer SUM wraps around in its type (Flink's SUM(INT) is INT)
                results.append(pc.if_else(pc.greater(n, 0), s, pa.scalar(None, s.type)).cast(
                    a.type, safe=not pa.types.is_integer(a.type)))
            elif a.function == "AVG":
                s, n = fired.column(f"p{i}"), fired.column(f"n{i}")
                if pa.types.is_integer(a.type):  # the sum wrapped into the type first
                    s = s.cast(a.type, safe=False).cast(pa.int64())
                nonzero = pc.greater(n, 0)
                avg = pc.divide(s, pc.if_else(nonzero, n, 1).cast(s.type))  # integers truncate, as in Flink
                results.append(pc.if_else(nonzero, avg, pa.scalar(None, avg.type)).cast(a.type))
            else:
                results.append(fired.column(f"p{i}").cast(a.type))
        return [r.combine_chunks() if isinstance(r, pa.ChunkedArray) else r for r in results]

    def _distinct_counts(self, fired: pa.Table, n: int, watermark: int, clock: WindowClock) -> pa.Array:
        merged = self._merged(self.distincts[n], True)
        if merged is None:
            return pa.array([0] * fired.num_rows, pa.int64())
        due = _due(merged, watermark, clock)
        counts = merged.filter(due).group_by(self.keys, use_threads=False).aggregate([("v", "count")])
        self.distincts[n].tables = [merged.filter(pc.invert(due))]
        # join on keys made NULL-safe (a NULL group key is a group like any other)
        left = _null_safe(fired.select(self.keys), self.keys).append_column("$row", pa.array(range(fired.num_rows)))
        right = _null_safe(counts, self.keys)
        join_keys = [c for c in left.column_names if c.startswith("$j")]
        joined = left.join(right.select([*join_keys, "v_count"]), keys=join_keys, join_type="left outer")
        joined = joined.sort_by("$row")
        return pc.fill_null(joined.column("v_count"), 0).cast(pa.int64()).combine_chunks()


def _due(table: pa.Table, watermark: int, clock: WindowClock) -> pa.Array:
    """Which rows of ``table`` belong to windows that fire at ``watermark``."""
    ends = table.column("$end").combine_chunks().to_numpy(zero_copy_only=False)
    return pa.array(clock.fire_times(ends) <= watermark)


def _null_safe(table: pa.Table, keys: list[str]) -> pa.Table:
    """Add join columns where a NULL key becomes (filler, True) so that NULLs match NULLs."""
    out = table
    for i, k in enumerate(keys):
        col = table.column(k)
        filler = _filler(col.type)
        out = out.append_column(f"$jv{i}", pc.fill_null(col, filler) if filler is not None else col)
        out = out.append_column(f"$jn{i}", pc.is_null(col))
    return out


def _filler(t: pa.DataType) -> pa.Scalar | None:
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return pa.scalar("", t)
    if pa.types.is_boolean(t):
        return pa.scalar(False)
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return pa.scalar(0, t)
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        return pa.scalar(0, pa.int64()).cast(t)
    return None
