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

from sqlstream.runtime.elements import Chunk, RowKind
from sqlstream.runtime.operators.base import Operator, OperatorContext, Output
from sqlstream.runtime.operators.rank import build_batch, group_rows, python_rows

_ADDS = (int(RowKind.INSERT), int(RowKind.UPDATE_AFTER))


class ChangelogNormalizeOperator(Operator):
    """See the module docstring."""

    name = "ChangelogNormalize"
    keyed = True

    def __init__(self, keys: list[int], schema: pa.Schema, state_ttl_ms: int | None = None) -> None:
        self.keys = keys
        self.schema = schema
        self.state_ttl_ms = state_ttl_ms

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        self.last = ctx.keyed_state.state("last-row", self.state_ttl_ms)  # key -> the row kept for it

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        groups = group_rows(chunk.batch, self.keys, self.ctx.max_parallelism)
        if not groups:
            return []
        kinds = chunk.kinds_or_inserts().to_numpy(zero_copy_only=False)
        order = np.concatenate([g[2] for g in groups])
        rows = iter(python_rows(chunk.batch.take(pa.array(order))))
        out_rows: list[tuple] = []
        out_kinds: list[int] = []
        for kg, key, indexes in groups:
            kept = self.last.get(kg, key)
            for i in indexes.tolist():
                row = next(rows)
                if int(kinds[i]) in _ADDS:
                    if kept is None:
                        out_rows.append(row)
                        out_kinds.append(RowKind.INSERT)
                    elif kept != row or self.state_ttl_ms is not None:
                        out_rows += [kept, row]
                        out_kinds += [RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER]
                    kept = row
                elif kept is not None:
                    out_rows.append(kept)
                    out_kinds.append(RowKind.DELETE)
                    kept = None
            if kept is None:
                self.last.delete(kg, key)
            else:
                self.last.put(kg, key, kept)
        if not out_rows:
            return []
        return [Chunk(build_batch(out_rows, self.schema), pa.array(out_kinds, pa.int8()))]
