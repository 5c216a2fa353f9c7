"""Regular (unbounded) joins: INNER, LEFT, RIGHT, FULL over changelog inputs.

Each side's rows are kept in keyed state under their join key, with the
number of rows of the other side they currently match (Flink's
"associations"), which is what outer joins need to know when to emit or
retract a NULL-padded row.  A batch is matched against the other side in
one go: candidate pairs are gathered per distinct key, the residual
condition is evaluated on all pairs at once with Arrow, then rows are
applied in order so that retractions and paddings come out right.
State expires after ``table.exec.state.ttl`` if it is set, or after each side's STATE_TTL hint.

An INNER join of two append-only inputs runs vectorized instead: on the
hashmap backend with its rows as Arrow tables in memory
(runtime/operators/join_columnar.py), on the rocksdb backend with its rows in
RocksDB, read and written a batch at a time (join_rocksdb.py; columns of the
types its row encoding has, join keys of one type on both sides).  Savepoints
hold the columnar table (both vectorized forms) or the per-key entries;
restore_state converts between them, so a job can switch backends.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from sqlstream.core.errors import JobError
from sqlstream.core.evaluator import Predicate
from sqlstream.core.expressions import Expr
from sqlstream.core.joins import Horizon, join_columnar_rows
from sqlstream.runtime.elements import Chunk, RowKind
from sqlstream.runtime.hashing import key_groups
from sqlstream.runtime.operators.base import Operator, OperatorContext, Output
from sqlstream.runtime.operators.join_columnar import ColumnarInnerJoin
from sqlstream.runtime.operators.join_rocksdb import RocksDBInnerJoin
from sqlstream.runtime.operators.keyed import columnar_state
from sqlstream.runtime.state.rocksdb import RocksDBStateBackend

_INSERTS = (RowKind.INSERT, RowKind.UPDATE_AFTER)
# the columnar form's state names (keyed state "left"/"right" is the per-key form's)
COLUMNAR_STATES = ("join-left", "join-right")


def rows_of(batch: pa.RecordBatch) -> list[tuple]:
    columns = [c.to_pylist() for c in batch.columns]
    return list(zip(*columns, strict=True)) if columns else [()] * batch.num_rows


def build_batch(rows: list[tuple], schema: pa.Schema) -> pa.RecordBatch:
    arrays = [pa.array([r[i] for r in rows], f.type) for i, f in enumerate(schema)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


class PairFilter:
    """Evaluates the residual condition on many (left row, right row) pairs in one Arrow call."""

    def __init__(self, residual: Expr | None, schema: pa.Schema) -> None:
        self.predicate = Predicate(residual) if residual is not None else None
        self.schema = schema

    def __call__(self, pairs: list[tuple[tuple, tuple]]) -> list[bool]:
        if self.predicate is None or not pairs:
            return [True] * len(pairs)
        batch = build_batch([left + right for left, right in pairs], self.schema)
        return [bool(v) for v in self.predicate(batch).fill_null(False).to_pylist()]


class RegularJoinOperator(Operator):
    name = "Join"
    keyed = True

    def __init__(self, kind: str, left_keys: tuple[int, ...], right_keys: tuple[int, ...],
                 residual: Expr | None, left_schema: pa.Schema, right_schema: pa.Schema,
                 schema: pa.Schema, append_only: bool = False,
                 horizons: tuple[Horizon | None, Horizon | None] = (None, None),
                 state_ttl_ms: tuple[int | None, int | None] = (None, None),
                 columnar: bool = False) -> None:
        self.state_ttl_ms = state_ttl_ms
        self.columnar_form = columnar
        """``append_only``: neither input retracts (the planner knows it from the plan);
        ``horizons``: when a stored row of each side can no longer match (planner.horizons)."""
        self.kind = kind
        self.keys = (left_keys, right_keys)
        self.widths = (len(left_schema), len(right_schema))
        self.side_schemas = (left_schema, right_schema)
        self.residual = residual
        self.schema = schema
        self.pairs = PairFilter(residual, schema)
        # which sides keep their unmatched rows (NULL-padded)
        self.outer = (kind in ("LEFT", "FULL"), kind in ("RIGHT", "FULL"))
        self.append_only = append_only
        self.horizons = horizons

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        ttl = self.state_ttl_ms
        # join key -> tuple of (row, associations) entries, per side
        self.sides = (ctx.keyed_state.state("left", ttl[0]), ctx.keyed_state.state("right", ttl[1]))
        self.columnar: ColumnarInnerJoin | RocksDBInnerJoin | None = None
        backend = ctx.keyed_state
        if isinstance(backend, RocksDBStateBackend) and self.columnar_form:
            if not join_columnar_rows(self.side_schemas, self.keys):
                raise JobError("the plan keeps this join's rows in columnar form, which the rocksdb state backend "
                               "holds only for columns of simple types and join keys of one type on both sides; "
                               "plan the job with the backend it runs on")
            rows = RocksDBInnerJoin(COLUMNAR_STATES, self.keys, self.residual, self.side_schemas, self.schema,
                                    ttl, ctx.max_parallelism, backend, backend.clock)
            for side, name in enumerate(COLUMNAR_STATES):
                # columnar rows restored from a savepoint (restore_all ran before open), a batch at a time
                restored = backend.columnar_states.get(name)
                if restored is not None:
                    rows.restore(side, restored.restored_tables())
                backend.columnar_states[name] = rows.sides[side].state
            self.columnar = rows
        elif columnar_state(ctx, self.columnar_form):
            states = (backend.columnar(COLUMNAR_STATES[0]), backend.columnar(COLUMNAR_STATES[1]))
            self.columnar = ColumnarInnerJoin(self.keys, self.residual, self.side_schemas, self.schema,
                                              states, ttl, ctx.max_parallelism, self.horizons, backend.clock)

    def on_watermark(self, timestamp: int) -> Output:
        # the per-key and RocksDB forms keep their rows (as Flink does, until state TTL)
        if isinstance(self.columnar, ColumnarInnerJoin):
            self.columnar.drop_behind(timestamp)
        return []

    def restore_state(self, state: Any) -> None:
        backend = self.ctx.keyed_state
        if self.columnar is not None:
            # per-key rows restored from a rocksdb savepoint join the columnar store
            for side, st in enumerate(self.sides):
                entries = list(st.items())
                rows = [row for _, _, stored in entries for row, _ in stored]
                for kg, key, _ in entries:
                    st.delete(kg, key)
                if rows:
                    self.columnar.store(build_batch(rows, self.side_schemas[side]), side)
            return
        for side, name in enumerate(COLUMNAR_STATES):
            # rows restored from a hashmap savepoint (columnar) become per-key entries
            table = backend.take_columnar(name)
            if table is None:
                continue
            names = self.side_schemas[side].names
            groups = table.column("$kg").to_pylist()
            rows = rows_of(table.select(names))
            by_key: dict[tuple[int, tuple], list[tuple]] = {}
            for g, row in zip(groups, rows, strict=True):
                by_key.setdefault((g, tuple(row[k] for k in self.keys[side])), []).append((row, 0))
            for (g, key), entries in by_key.items():
                self.sides[side].put(g, key, tuple(entries))

    def _join(self, side: int, row: tuple, other: tuple) -> tuple:
        return row + other if side == 0 else other + row

    def _pad(self, side: int, row: tuple) -> tuple:
        nulls = (None,) * self.widths[1 - side]
        return row + nulls if side == 0 else nulls + row

    def _match(self, chunk: Chunk, side: int) -> tuple[list[tuple], list[int], list[tuple], list[int],
                                                       dict[tuple, list[list[Any]]], list[list[int]]]:
        """The batch's rows, kinds, join keys and key groups; the other side's stored entries
        ([row, associations]) per key; and for each row, which of its key's entries it matches."""
        batch = chunk.batch
        rows = rows_of(batch)
        kinds = chunk.kinds.to_pylist() if chunk.kinds is not None else [RowKind.INSERT] * len(rows)
        key_idx = self.keys[side]
        if key_idx:
            groups = key_groups([batch.column(k) for k in key_idx], self.ctx.max_parallelism).tolist()
            keys = [tuple(r[k] for k in key_idx) for r in rows]
        else:
            groups, keys = [0] * len(rows), [()] * len(rows)
        other = self.sides[1 - side]
        # the other side does not change membership during this batch: gather candidates once
        candidates: dict[tuple, list[list[Any]]] = {}
        for g, k in zip(groups, keys, strict=True):
            if k not in candidates:
                stored = other.get(g, k) if None not in k else None
                candidates[k] = [list(e) for e in stored] if stored else []
        pair_rows = []
        pair_index: list[tuple[int, int]] = []
        for i, k in enumerate(keys):
            for j, entry in enumerate(candidates[k]):
                pair_rows.append((rows[i], entry[0]) if side == 0 else (entry[0], rows[i]))
                pair_index.append((i, j))
        ok = self.pairs(pair_rows)
        matches: list[list[int]] = [[] for _ in rows]
        for (i, j), good in zip(pair_index, ok, strict=True):
            if good:
                matches[i].append(j)
        return rows, kinds, keys, groups, candidates, matches

    @staticmethod
    def _store(state: Any, changed: dict[tuple, tuple[int, list[list[Any]]]]) -> None:
        """Write back the entries of the keys a batch changed, deleting keys left with none."""
        for k, (g, entries) in changed.items():
            if entries:
                state.put(g, k, tuple(tuple(e) for e in entries))
            else:
                state.delete(g, k)

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        if self.columnar is not None:
            out = self.columnar.process(chunk.batch, input_index)
            return [Chunk(out)] if out is not None else []
        side, other_side = input_index, 1 - input_index
        rows, kinds, keys, groups, candidates, matches = self._match(chunk, side)
        own, other = self.sides[side], self.sides[other_side]
        out_rows: list[tuple] = []
        out_kinds: list[int] = []

        def emit(kind: int, r: tuple) -> None:
            out_rows.append(r)
            out_kinds.append(kind)

        changed_own: dict[tuple, tuple[int, list[list[Any]]]] = {}
        for i, (row, kind) in enumerate(zip(rows, kinds, strict=True)):
            k, g = keys[i], groups[i]
            entries = candidates[k]
            if k not in changed_own:
                stored = own.get(g, k)
                changed_own[k] = (g, [list(e) for e in stored] if stored else [])
            mine = changed_own[k][1]
            matched = matches[i]
            if kind in _INSERTS:
                if self.outer[side] and not matched:
                    emit(RowKind.INSERT, self._pad(side, row))
                for j in matched:
                    entry = entries[j]
                    if self.outer[other_side] and entry[1] == 0:
                        emit(RowKind.DELETE, self._pad(other_side, entry[0]))
                    entry[1] += 1
                    emit(RowKind.INSERT, self._join(side, row, entry[0]))
                mine.append([row, len(matched)])
            else:
                for pos, e in enumerate(mine):
                    if e[0] == row:
                        del mine[pos]
                        break
                else:
                    continue  # a retraction of a row we no longer hold (expired state)
                if self.outer[side] and not matched:
                    emit(RowKind.DELETE, self._pad(side, row))
                for j in matched:
                    entry = entries[j]
                    emit(RowKind.DELETE, self._join(side, row, entry[0]))
                    entry[1] -= 1
                    if self.outer[other_side] and entry[1] == 0:
                        emit(RowKind.INSERT, self._pad(other_side, entry[0]))
        self._store(own, changed_own)
        if self.outer[other_side]:
            # association counts of the other side's rows changed; only outer sides read them
            group_of = dict(zip(keys, groups, strict=True))
            self._store(other, {k: (group_of[k], entries) for k, entries in candidates.items() if entries})
        if not out_rows:
            return []
        append_only = all(kd == RowKind.INSERT for kd in out_kinds) and self.kind == "INNER" and chunk.kinds is None
        return [Chunk(build_batch(out_rows, self.schema), None if append_only else pa.array(out_kinds, pa.int8()))]
