"""Flink's ChangelogNormalize: an upsert changelog into a full one, keeping the last row per key.

An upsert source (upsert-kafka) emits, per primary key, +I/+U for the row now
stored under the key and -D for its removal (a tombstone, whose non-key columns
are NULL).  Downstream operators that retract (a GROUP BY over the table) need
the row that is replaced, so this operator keeps the last row of each key in
keyed state and emits: the first row of a key as +I; a later one as -U of the
kept row and +U of the new one (nothing if the row is unchanged, as Flink does
without state TTL); a deletion as -D of the kept row (nothing if there is none).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.functions.collections import nested_equal
from sqlstream.core.types import is_nested
from sqlstream.runtime.elements import Chunk, RowKind
from sqlstream.runtime.operators.base import Operator, OperatorContext, Output
from sqlstream.runtime.operators.rank import build_batch, group_rows, python_rows

_ADDS = (int(RowKind.INSERT), int(RowKind.UPDATE_AFTER))
_INSERT, _UPDATE_BEFORE, _UPDATE_AFTER, _DELETE = (int(k) for k in RowKind)


class ChangelogNormalizeOperator(Operator):
    """See the module docstring."""

    name = "ChangelogNormalize"
    keyed = True

    def __init__(self, keys: list[int], state_ttl_ms: int | None = None) -> None:
        self.keys = keys
        self.state_ttl_ms = state_ttl_ms

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        self.last = ctx.keyed_state.state("last-row", self.state_ttl_ms)  # key -> the row kept for it

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        """Vectorized over the batch's rows; Python work is per key (its kept row in state)."""
        groups = group_rows(chunk.batch, self.keys, self.ctx.max_parallelism)
        if not groups:
            return []
        order = np.concatenate([g[2] for g in groups])
        rows = chunk.batch.take(pa.array(order))  # by key, in arrival order within a key
        n = rows.num_rows
        adds = np.isin(chunk.kinds_or_inserts().to_numpy(zero_copy_only=False)[order], _ADDS)
        sizes = np.array([len(g[2]) for g in groups], dtype=np.int64)
        starts = np.cumsum(sizes) - sizes
        stored = [self.last.get(kg, key) for kg, key, _ in groups]
        kept = [row for row in stored if row is not None]
        # The row each change meets: the previous change of its key if that added a row, for the
        # key's first change the row kept in state; -1 for none.  Rows kept in state follow the
        # batch's rows in ``both``.
        before = np.where(np.concatenate([[False], adds[:-1]]), np.arange(n) - 1, -1)
        kept_at = np.cumsum([row is not None for row in stored]) - 1
        before[starts] = [n + int(kept_at[g]) if row is not None else -1 for g, row in enumerate(stored)]
        both = pa.concat_batches([rows, build_batch(kept, rows.schema)]) if kept else rows
        has_before = before >= 0
        same = np.zeros(n, dtype=bool)
        if self.state_ttl_ms is None and has_before.any():  # Flink drops an unchanged row without TTL
            previous = both.take(pa.array(np.where(has_before, before, 0)))
            same = has_before.copy()
            for a, b in zip(previous.columns, rows.columns, strict=True):
                # ARRAY, MAP and ROW values (a Kafka 'headers' map) compare by value, as Flink's equaliser
                values_equal = nested_equal(a, b) if is_nested(a.type) else pc.equal(a, b)
                equal = pc.or_(pc.fill_null(values_equal, False), pc.and_(pc.is_null(a), pc.is_null(b)))
                same &= equal.to_numpy(zero_copy_only=False)
        inserted = adds & ~has_before
        updated = adds & has_before & ~same
        deleted = ~adds & has_before
        # two slots per change: the row it replaces or deletes (-U/-D), then the row it adds (+I/+U)
        index = np.stack([before, np.arange(n)], axis=1).ravel()
        kinds = np.stack([np.where(updated, _UPDATE_BEFORE, _DELETE),
                          np.where(inserted, _INSERT, _UPDATE_AFTER)], axis=1).ravel().astype(np.int8)
        emitted = np.stack([updated | deleted, inserted | updated], axis=1).ravel()
        lasts = starts + sizes - 1
        last_rows = python_rows(rows.take(pa.array(lasts)))
        for (kg, key, _), last, row in zip(groups, lasts.tolist(), last_rows, strict=True):
            if adds[last]:
                self.last.put(kg, key, row)
            else:
                self.last.delete(kg, key)
        if not emitted.any():
            return []
        out = both.take(pa.array(index[emitted]))
        return [Chunk(out, pa.array(kinds[emitted], pa.int8()))]
