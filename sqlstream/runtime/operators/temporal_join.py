"""Event-time temporal join against a versioned table.

The left input may be a changelog: each row joins as it is and its output
keeps its kind (Flink's TemporalRowTimeJoinOperator does the same).
The right input is the versioned table: each row is the version of its
primary key from its event time on; a -D row (a changelog source) means no
version from its time on, and -U rows are dropped (the versioned side is an
upsert stream, as Flink plans it).  Left rows wait in state until the
watermark passes their time; then each meets the latest version of its key
whose time is not after it (INNER drops rows with no version yet, LEFT pads
them).  Versions older than the one valid at the watermark can never be
chosen again and are dropped, so state holds one version per key plus the
ones still ahead of event time.
"""

from __future__ import annotations

import bisect
import heapq
from typing import Any

import pyarrow as pa

from sqlstream.core.expressions import Expr
from sqlstream.runtime.elements import MIN_WATERMARK, Chunk, RowKind
from sqlstream.runtime.hashing import key_groups
from sqlstream.runtime.operators.base import Operator, OperatorContext, Output
from sqlstream.runtime.operators.join import PairFilter, build_batch, rows_of


def _current_and_later(versions: tuple, timestamp: int) -> tuple:
    """The version valid at ``timestamp`` and the ones after it: older ones can never be chosen."""
    pos = bisect.bisect_right([v[0] for v in versions], timestamp) - 1
    return versions[pos:] if pos > 0 else versions


class TemporalJoinOperator(Operator):
    name = "TemporalJoin"
    keyed = True

    def __init__(self, kind: str, left_keys: tuple[int, ...], right_keys: tuple[int, ...], left_time: int,
                 right_time: int, residual: Expr | None, widths: tuple[int, int], schema: pa.Schema) -> None:
        self.kind = kind
        self.keys = (left_keys, right_keys)
        self.times = (left_time, right_time)
        self.widths = widths
        self.schema = schema
        self.pairs = PairFilter(residual, schema)
        self.watermark = MIN_WATERMARK
        self.pending: list[tuple[int, int, tuple]] = []  # (left time, key group, key) to resolve

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        # key -> tuple of (time, left row) waiting; key -> tuple of (time, right row) versions, by time
        self.waiting = ctx.keyed_state.state("left")
        self.versions = ctx.keyed_state.state("versions")

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        batch = chunk.batch
        rows = rows_of(batch)
        times = batch.column(self.times[input_index]).cast(pa.int64()).to_pylist()
        key_idx = self.keys[input_index]
        groups = key_groups([batch.column(k) for k in key_idx], self.ctx.max_parallelism).tolist()
        grouped: dict[tuple, tuple[int, list[tuple]]] = {}
        kinds = chunk.kinds.to_pylist() if chunk.kinds is not None else [RowKind.INSERT] * len(rows)
        for row, ts, g, kind in zip(rows, times, groups, kinds, strict=True):
            if ts is None or (input_index == 1 and kind == RowKind.UPDATE_BEFORE):
                continue  # Flink drops -U before a temporal join: its versioned side is an upsert stream
            if input_index == 0 and ts <= self.watermark and kind in (RowKind.INSERT, RowKind.UPDATE_AFTER):
                # a late retraction still joins (at the next watermark): it cancels what was emitted
                self.ctx.metrics.late_records_dropped += 1
                continue
            if input_index == 0:  # a left row of a changelog joins with its kind, which the output keeps
                entry: tuple = (ts, row) if kind == RowKind.INSERT else (ts, row, int(kind))
            else:  # a deletion is a version too: from its time on the key has no row (Flink keeps it, by time)
                entry = (ts, None if kind == RowKind.DELETE else row)
            grouped.setdefault(tuple(row[k] for k in key_idx), (g, []))[1].append(entry)
        state = self.waiting if input_index == 0 else self.versions
        for key, (g, new) in grouped.items():
            merged = tuple(sorted((state.get(g, key) or ()) + tuple(new), key=lambda e: e[0]))
            if input_index == 0:
                heapq.heappush(self.pending, (min(e[0] for e in new), g, key))
            else:
                merged = _current_and_later(merged, self.watermark)
            state.put(g, key, merged)
        return []

    def on_watermark(self, timestamp: int) -> Output:
        self.watermark = timestamp
        out: list[tuple] = []
        kinds: list[int] = []
        seen: set[tuple] = set()
        while self.pending and self.pending[0][0] <= timestamp:
            _, g, key = heapq.heappop(self.pending)
            if (g, key) in seen:
                continue
            seen.add((g, key))
            waiting = self.waiting.get(g, key) or ()
            due = [e for e in waiting if e[0] <= timestamp]
            later = tuple(e for e in waiting if e[0] > timestamp)
            versions = self.versions.get(g, key) or ()
            version_times = [v[0] for v in versions]
            pairs, pair_kinds = [], []
            for entry in due:
                ts, row = entry[0], entry[1]
                kind = entry[2] if len(entry) > 2 else RowKind.INSERT
                pos = bisect.bisect_right(version_times, ts) - 1
                if pos >= 0 and None not in key and versions[pos][1] is not None:
                    pairs.append((row, versions[pos][1]))
                    pair_kinds.append(kind)
                elif self.kind == "LEFT":
                    out.append(row + (None,) * self.widths[1])
                    kinds.append(kind)
            for (row, version), good, kind in zip(pairs, self.pairs(pairs), pair_kinds, strict=True):
                if good:
                    out.append(row + version)
                    kinds.append(kind)
                elif self.kind == "LEFT":
                    out.append(row + (None,) * self.widths[1])
                    kinds.append(kind)
            if later:
                self.waiting.put(g, key, later)
                heapq.heappush(self.pending, (later[0][0], g, key))
            else:
                self.waiting.delete(g, key)
            kept = _current_and_later(versions, timestamp)
            if len(kept) != len(versions):
                self.versions.put(g, key, kept)
        if not out:
            return []
        changes = None if not any(kinds) else pa.array(kinds, pa.int8())  # all +I: an append-only chunk
        return [Chunk(build_batch(out, self.schema), changes)]

    def snapshot_state(self, checkpoint_id: int) -> Any:
        return {"watermark": self.watermark}

    def restore_state(self, state: Any) -> None:
        if state is not None:
            self.watermark = state["watermark"]
        for g, key, waiting in self.waiting.items():
            heapq.heappush(self.pending, (waiting[0][0], g, key))
