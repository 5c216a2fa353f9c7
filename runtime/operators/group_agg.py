"""Non-windowed GROUP BY: keeps one accumulator per key and emits a changelog.

For each batch, partials are computed per key in Arrow, merged into the
key's accumulators, and for every key whose result changed the operator
emits -U(old) +U(new), or +I for a new key, or -D when a retraction empties
the key (Flink's GroupAggFunction with mini-batch: one update per key and
batch).  Input -U/-D rows retract (sign -1), so aggregates can be stacked.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from planner.logical import AggCall
from runtime import aggregates
from runtime.elements import Chunk, RowKind
from runtime.operators.base import Operator, Output

_RETRACT_KINDS = pa.array([RowKind.UPDATE_BEFORE, RowKind.DELETE], pa.int8())


class GroupAggOperator(Operator):
    name = "GroupAggregate"

    def __init__(self, keys: list[int], aggs: list[AggCall], schema: pa.Schema, retracting: bool) -> None:
        self.keys = keys
        self.retracting = retracting
        self.functions = [aggregates.make(a, retracting) for a in aggs]
        # a hidden COUNT(*) tells when a key has no rows left
        self.row_count = aggregates.make(AggCall("COUNT", None, False, pa.int64(), "$count"), retracting)
        self.pre_aggregate = aggregates.PreAggregator([self.row_count, *self.functions])
        self.schema = schema
        # key -> [row count accumulator, accumulators..., last emitted row or None]
        self.state: dict[tuple, list[Any]] = {}

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        batch = chunk.batch
        sign = None
        if self.retracting:
            if chunk.kinds is None:
                sign = pa.array(np.ones(batch.num_rows, dtype=np.int64))
            else:
                retract = pc.is_in(chunk.kinds, value_set=_RETRACT_KINDS)
                sign = pc.if_else(retract, -1, 1).cast(pa.int64())
        key_cols = [batch.column(k) for k in self.keys]
        key_lists, partials = self.pre_aggregate(key_cols, batch, sign)
        n_groups = len(key_lists[0])
        before: list[tuple] = []
        after: list[tuple] = []
        kinds_out: list[int] = []
        for g in range(n_groups):
            key = tuple(col[g] for col in key_lists) if self.keys else ()
            entry = self.state.get(key)
            if entry is None:
                entry = [self.row_count.create(), *[fn.create() for fn in self.functions], None]
            self.row_count.merge(entry[0], partials[0][g])
            for fi, fn in enumerate(self.functions):
                fn.merge(entry[fi + 1], partials[fi + 1][g])
            previous = entry[-1]
            if self.row_count.result(entry[0]) <= 0:
                if previous is not None:
                    before.append(previous)
                    kinds_out.append(RowKind.DELETE)
                self.state.pop(key, None)
                continue
            row = key + tuple(fn.result(entry[fi + 1]) for fi, fn in enumerate(self.functions))
            self.state[key] = entry
            if previous is None:
                after.append(row)
                kinds_out.append(RowKind.INSERT)
            elif previous != row:
                before.append(previous)
                kinds_out.append(RowKind.UPDATE_BEFORE)
                after.append(row)
                kinds_out.append(RowKind.UPDATE_AFTER)
            entry[-1] = row
        if not kinds_out:
            return []
        # interleave: each -U/-D precedes its +U in emission order
        rows: list[tuple] = []
        bi = ai = 0
        for k in kinds_out:
            if k in (RowKind.UPDATE_BEFORE, RowKind.DELETE):
                rows.append(before[bi])
                bi += 1
            else:
                rows.append(after[ai])
                ai += 1
        columns = [pa.array([r[i] for r in rows], f.type) for i, f in enumerate(self.schema)]
        out = pa.RecordBatch.from_arrays(columns, schema=self.schema)
        return [Chunk(out, pa.array(kinds_out, pa.int8()))]

    def snapshot_state(self) -> Any:
        return {"state": self.state}

    def restore_state(self, state: Any) -> None:
        self.state = state["state"]
