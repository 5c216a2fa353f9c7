"""Interval joins: rows match when lower <= left.time - right.time <= upper.

Both inputs are append-only and so is the output.  A row stays in state
only while a future row of the other side could still match it: once the
watermark passes that bound it is dropped (and, for an outer side, emitted
NULL-padded if it never matched), so state stays bounded by the interval.
The forwarded watermark is held back by the lower bound, because a match
found later can carry a left time up to that much older than the watermark.
"""

from __future__ import annotations

import heapq
from typing import Any

import pyarrow as pa

from sqlstream.core.expressions import Expr
from sqlstream.core.joins import IntervalBounds
from sqlstream.runtime.elements import MAX_WATERMARK, MIN_WATERMARK, Chunk
from sqlstream.runtime.hashing import key_groups
from sqlstream.runtime.operators.base import Operator, OperatorContext, Output
from sqlstream.runtime.operators.join import PairFilter, build_batch, rows_of


class IntervalJoinOperator(Operator):
    name = "IntervalJoin"
    keyed = True

    def __init__(self, kind: str, left_keys: tuple[int, ...], right_keys: tuple[int, ...],
                 residual: Expr | None, bounds: IntervalBounds, left_schema: pa.Schema,
                 right_schema: pa.Schema, schema: pa.Schema) -> None:
        self.kind = kind
        self.keys = (left_keys, right_keys)
        self.times = (bounds.left_time, bounds.right_time)
        self.bounds = bounds
        self.widths = (len(left_schema), len(right_schema))
        self.schema = schema
        self.pairs = PairFilter(residual, schema)
        self.outer = (kind in ("LEFT", "FULL"), kind in ("RIGHT", "FULL"))
        self.watermark = MIN_WATERMARK
        self.expiry: list[tuple[int, int, int, tuple]] = []  # (expires at, side, key group, key)

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        # key -> tuple of (time ms, row, matched) per side
        self.sides = (ctx.keyed_state.state("left"), ctx.keyed_state.state("right"))

    def _expires(self, side: int, ts: int) -> int:
        """The watermark after which no row of the other side can match a row at ``ts``."""
        return ts - self.bounds.lower if side == 0 else ts + self.bounds.upper

    def _matches(self, side: int, ts: int, other_ts: int) -> bool:
        diff = ts - other_ts if side == 0 else other_ts - ts
        return self.bounds.lower <= diff <= self.bounds.upper

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        side, other_side = input_index, 1 - input_index
        batch = chunk.batch
        times = batch.column(self.times[side]).cast(pa.int64()).to_pylist()
        rows = rows_of(batch)
        key_idx = self.keys[side]
        groups = key_groups([batch.column(k) for k in key_idx], self.ctx.max_parallelism).tolist() if key_idx else [0] * len(rows)
        keys = [tuple(r[k] for k in key_idx) for r in rows]
        own, other = self.sides[side], self.sides[other_side]
        candidates: dict[tuple, list[list[Any]]] = {}
        pair_rows, pair_index = [], []
        live: list[int] = []
        for i, (row, ts, k, g) in enumerate(zip(rows, times, keys, groups, strict=True)):
            if ts is None or ts < self.watermark:
                self.ctx.metrics.late_records_dropped += 1
                continue
            live.append(i)
            if k not in candidates:
                stored = other.get(g, k) if None not in k else None
                candidates[k] = [list(e) for e in stored] if stored else []
            for j, entry in enumerate(candidates[k]):
                if self._matches(side, ts, entry[0]):
                    pair_rows.append((row, entry[1]) if side == 0 else (entry[1], row))
                    pair_index.append((i, j))
        ok = self.pairs(pair_rows)
        out: list[tuple] = []
        matched_rows: set[int] = set()
        touched: set[tuple] = set()
        for (i, j), good in zip(pair_index, ok, strict=True):
            if good:
                entry = candidates[keys[i]][j]
                out.append(rows[i] + entry[1] if side == 0 else entry[1] + rows[i])
                matched_rows.add(i)
                if not entry[2]:
                    entry[2] = True
                    touched.add(keys[i])
        group_of = dict(zip(keys, groups, strict=True))
        for k in touched:
            other.put(group_of[k], k, tuple(tuple(e) for e in candidates[k]))
        additions: dict[tuple, list[tuple]] = {}
        for i in live:
            additions.setdefault(keys[i], []).append((times[i], rows[i], i in matched_rows))
        for k, new in additions.items():
            g = group_of[k]
            own.put(g, k, (own.get(g, k) or ()) + tuple(new))
            heapq.heappush(self.expiry, (self._expires(side, min(t for t, _, _ in new)), side, g, k))
        if not out:
            return []
        return [Chunk(build_batch(out, self.schema))]

    def on_watermark(self, timestamp: int) -> Output:
        self.watermark = timestamp
        padded: list[tuple] = []
        while self.expiry and self.expiry[0][0] < timestamp:
            _, side, g, k = heapq.heappop(self.expiry)
            state = self.sides[side]
            entries = state.get(g, k)
            if not entries:
                continue
            keep = []
            for e in entries:
                if self._expires(side, e[0]) < timestamp:
                    if self.outer[side] and not e[2]:
                        nulls = (None,) * self.widths[1 - side]
                        padded.append(e[1] + nulls if side == 0 else nulls + e[1])
                else:
                    keep.append(e)
            if keep:
                state.put(g, k, tuple(keep))
                heapq.heappush(self.expiry, (min(self._expires(side, e[0]) for e in keep), side, g, k))
            else:
                state.delete(g, k)
        return [Chunk(build_batch(padded, self.schema))] if padded else []

    def output_watermark(self, timestamp: int) -> int:
        if timestamp in (MIN_WATERMARK, MAX_WATERMARK):
            return timestamp
        return timestamp + min(self.bounds.lower, 0)

    def state_rows(self) -> int:
        """Rows held on both sides (what must stay flat over a long run)."""
        return sum(len(entries) for st in self.sides for _, _, entries in st.items())

    def snapshot_state(self, checkpoint_id: int) -> Any:
        return {"watermark": self.watermark}

    def restore_state(self, state: Any) -> None:
        if state is not None:
            self.watermark = state["watermark"]
        for side, st in enumerate(self.sides):
            for g, k, entries in st.items():
                heapq.heappush(self.expiry, (min(self._expires(side, e[0]) for e in entries), side, g, k))
