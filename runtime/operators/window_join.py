"""Window joins: rows of two windowing TVFs meet when they share window and key.

Each side's rows wait in keyed state under (window end, key).  When the
watermark passes a window's end, its rows on both sides are joined (INNER,
or padded for outer sides), emitted once as append-only rows, and dropped.
Rows arriving for a window that has already fired are late and dropped.
"""

from __future__ import annotations

import heapq
from typing import Any

import pyarrow as pa

from planner.expressions import Expr
from runtime.elements import MIN_WATERMARK, Chunk
from runtime.hashing import key_groups
from runtime.operators.base import Operator, OperatorContext, Output
from runtime.operators.join import PairFilter, build_batch, rows_of


class WindowJoinOperator(Operator):
    name = "WindowJoin"
    keyed = True

    def __init__(self, kind: str, left_keys: tuple[int, ...], right_keys: tuple[int, ...],
                 residual: Expr | None, ends: tuple[int, int], left_schema: pa.Schema,
                 right_schema: pa.Schema, schema: pa.Schema) -> None:
        self.kind = kind
        self.keys = (left_keys, right_keys)
        self.ends = ends
        self.widths = (len(left_schema), len(right_schema))
        self.schema = schema
        self.pairs = PairFilter(residual, schema)
        self.outer = (kind in ("LEFT", "FULL"), kind in ("RIGHT", "FULL"))
        self.watermark = MIN_WATERMARK
        self.timers: dict[int, set[tuple[int, tuple]]] = {}
        self.heap: list[int] = []

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        # (window end, *key) -> rows, per side
        self.sides = (ctx.keyed_state.state("left"), ctx.keyed_state.state("right"))

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        side = input_index
        batch = chunk.batch
        ends = batch.column(self.ends[side]).cast(pa.int64()).to_pylist()
        rows = rows_of(batch)
        key_idx = self.keys[side]
        groups = key_groups([batch.column(k) for k in key_idx], self.ctx.max_parallelism).tolist() if key_idx else [0] * len(rows)
        additions: dict[tuple, tuple[int, list[tuple]]] = {}
        for row, end, g in zip(rows, ends, groups, strict=True):
            if end - 1 <= self.watermark:
                self.ctx.metrics.late_records_dropped += 1
                continue
            skey = (end, *(row[k] for k in key_idx))
            additions.setdefault(skey, (g, []))[1].append(row)
        state = self.sides[side]
        for skey, (g, new) in additions.items():
            state.put(g, skey, (state.get(g, skey) or ()) + tuple(new))
            end = skey[0]
            if end not in self.timers:
                self.timers[end] = set()
                heapq.heappush(self.heap, end)
            self.timers[end].add((g, skey))
        return []

    def on_watermark(self, timestamp: int) -> Output:
        self.watermark = timestamp
        out: list[tuple] = []
        while self.heap and self.heap[0] - 1 <= timestamp:
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

    def snapshot_state(self, checkpoint_id: int) -> Any:
        return {"watermark": self.watermark}

    def restore_state(self, state: Any) -> None:
        if state is not None:
            self.watermark = state["watermark"]
        for st in self.sides:
            for g, skey, _ in st.items():
                if skey[0] not in self.timers:
                    self.timers[skey[0]] = set()
                    heapq.heappush(self.heap, skey[0])
                self.timers[skey[0]].add((g, skey))
