"""SEMI and ANTI joins (``IN``/``EXISTS`` subqueries and their negations), as Flink's
StreamingSemiAntiJoinOperator runs them.

The state is the regular join's: both sides' rows under their join key, each left row with the
number of right rows it matches.  A left row is emitted while that number is above zero (SEMI) or
zero (ANTI); a right row that takes a left row's count from zero to one, or back, emits or retracts
that left row.  So a SEMI join of append-only inputs only inserts, and an ANTI join updates.
"""

from __future__ import annotations

import pyarrow as pa

from sqlstream.core.expressions import Expr
from sqlstream.runtime.elements import Chunk, RowKind
from sqlstream.runtime.operators.base import Output
from sqlstream.runtime.operators.join import RegularJoinOperator, build_batch

_INSERTS = (RowKind.INSERT, RowKind.UPDATE_AFTER)


class SemiAntiJoinOperator(RegularJoinOperator):
    name = "Join"

    def __init__(self, anti: bool, left_keys: tuple[int, ...], right_keys: tuple[int, ...],
                 residual: Expr | None, left_schema: pa.Schema, right_schema: pa.Schema,
                 state_ttl_ms: tuple[int | None, int | None] = (None, None)) -> None:
        # the residual condition reads the pair of rows: the left's columns, then the right's
        pairs = pa.schema(list(left_schema) + list(right_schema))
        super().__init__("ANTI" if anti else "SEMI", left_keys, right_keys, residual, left_schema, right_schema,
                         pairs, state_ttl_ms=state_ttl_ms)
        self.anti = anti
        self.output_schema = left_schema

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        side = input_index
        rows, kinds, keys, groups, candidates, matches = self._match(chunk, side)
        own = self.sides[side]
        out_rows: list[tuple] = []
        out_kinds: list[int] = []
        # a left row is in the output while (it has a match) differs from (the join is ANTI)
        shown, hidden = (RowKind.DELETE, RowKind.INSERT) if self.anti else (RowKind.INSERT, RowKind.DELETE)
        changed_own: dict[tuple, tuple[int, list[list]]] = {}
        for i, (row, kind) in enumerate(zip(rows, kinds, strict=True)):
            k, g = keys[i], groups[i]
            if k not in changed_own:
                stored = own.get(g, k)
                changed_own[k] = (g, [list(e) for e in stored] if stored else [])
            mine = changed_own[k][1]
            if kind not in _INSERTS:
                for pos, e in enumerate(mine):
                    if e[0] == row:
                        del mine[pos]
                        break
                else:
                    continue  # a retraction of a row no longer held (expired state)
            matched = len(matches[i])
            if side == 0:
                if kind in _INSERTS:
                    mine.append([row, matched])
                if (matched > 0) != self.anti:
                    out_rows.append(row)
                    out_kinds.append(RowKind.INSERT if kind in _INSERTS else RowKind.DELETE)
                continue
            if kind in _INSERTS:
                mine.append([row, 0])
            for j in matches[i]:
                entry = candidates[k][j]
                if kind in _INSERTS:
                    entry[1] += 1
                    if entry[1] == 1:
                        out_rows.append(entry[0])
                        out_kinds.append(shown)
                else:
                    entry[1] -= 1
                    if entry[1] == 0:
                        out_rows.append(entry[0])
                        out_kinds.append(hidden)
        self._store(own, changed_own)
        if side == 1:
            # the left rows' match counts changed
            group_of = dict(zip(keys, groups, strict=True))
            self._store(self.sides[0], {k: (group_of[k], entries) for k, entries in candidates.items() if entries})
        if not out_rows:
            return []
        append_only = chunk.kinds is None and all(kd == RowKind.INSERT for kd in out_kinds) and not self.anti
        return [Chunk(build_batch(out_rows, self.output_schema), None if append_only else pa.array(out_kinds, pa.int8()))]
