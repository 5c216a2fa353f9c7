"""Non-windowed GROUP BY: keeps one accumulator per key and emits a changelog.

For each batch, partials are computed per key in Arrow, merged into the
key's accumulators, and for every key whose result changed the operator
emits -U(old) +U(new), or +I for a new key, or -D when a retraction empties
the key (Flink's GroupAggFunction with mini-batch: one update per key and
batch).  Input -U/-D rows retract (sign -1), so aggregates can be stacked.

On the hashmap backend the aggregates that have an exact columnar form run
vectorized (group_agg_columnar.py: accumulators in numpy columns, no Python
step per key; COUNT(DISTINCT) of an append-only input included); on the
rocksdb backend, whose state must be able to exceed memory, the same form
runs with its state in RocksDB, read and written a batch at a time
(group_agg_rocksdb.py; COUNT(DISTINCT) values of simple types only).  The
other aggregates (COUNT(DISTINCT) of a retracting input, or on rocksdb of
decimals, decimal keys, UDFs, MIN/MAX over retractions) keep one entry per
key here.  Savepoints hold the
columnar table or the per-key entries; restore_state converts between the
two, so a job can switch backends.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.aggregates import AggCall, group_agg_columnar_rows
from sqlstream.core.errors import JobError
from sqlstream.runtime import aggregates
from sqlstream.runtime.elements import Chunk, RowKind
from sqlstream.runtime.hashing import hash_columns
from sqlstream.runtime.operators.base import Operator, OperatorContext, Output
from sqlstream.runtime.operators.group_agg_columnar import ColumnarGroupAggregates
from sqlstream.runtime.operators.group_agg_rocksdb import RocksDBGroupAggregates
from sqlstream.runtime.operators.keyed import columnar_state, fresh_or_copy
from sqlstream.runtime.state.rocksdb import RocksDBStateBackend

_RETRACT_KINDS = pa.array([RowKind.UPDATE_BEFORE, RowKind.DELETE], pa.int8())
# the columnar form's state (keyed state "groups" is the per-key form's)
COLUMNAR_STATE = "group_columns"


class GroupAggOperator(Operator):
    name = "GroupAggregate"
    keyed = True

    def __init__(self, keys: list[int], aggs: list[AggCall], schema: pa.Schema, retracting: bool,
                 state_ttl_ms: int | None = None, columnar: bool = False) -> None:
        self.keys = keys
        self.state_ttl_ms = state_ttl_ms
        self.columnar_form = columnar
        self.aggs = aggs
        self.retracting = retracting
        self.functions = [aggregates.make(a, retracting) for a in aggs]
        # a hidden COUNT(*) tells when a key has no rows left
        self.row_count = aggregates.make(AggCall("COUNT", None, False, pa.int64(), "$count"), retracting)
        self.pre_aggregate = aggregates.PreAggregator([self.row_count, *self.functions])
        self.schema = schema

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        # key -> (row count accumulator, accumulators, last emitted row or None); TTL as configured
        ttl_ms = self.state_ttl_ms
        self.ttl_ms = ttl_ms
        self.groups = ctx.keyed_state.state("groups", ttl_ms)
        self.columnar: ColumnarGroupAggregates | RocksDBGroupAggregates | None = None
        # per-key entries restored for the columnar form, taken over at the first batch
        self.restored_per_key = False
        backend = ctx.keyed_state
        if isinstance(backend, RocksDBStateBackend) and self.columnar_form:
            if not group_agg_columnar_rows(self.aggs, self.retracting, self._key_types(), None):
                raise JobError("the plan keeps this GROUP BY's state in columnar form, which the rocksdb state "
                               "backend holds only for keys of simple types; plan the job with the backend it runs on")
            self.columnar = RocksDBGroupAggregates(COLUMNAR_STATE, self.aggs, self._key_types(), self.ttl_ms,
                                                   ctx.max_parallelism, backend, backend.clock)
        elif columnar_state(ctx, self.columnar_form):
            self.columnar = self._columnar_store()
        if self.columnar is not None:
            # columnar state restored from a hashmap snapshot (restore_all ran before open)
            restored = backend.columnar_states.get(COLUMNAR_STATE)
            if restored is not None:
                for table in restored.restored_tables():  # a batch at a time: RocksDB takes them so
                    self.columnar.load(table)
            backend.columnar_states[COLUMNAR_STATE] = self.columnar.state

    def _key_types(self) -> list[pa.DataType]:
        return [self.schema.field(i).type for i in range(len(self.keys))]

    def _columnar_store(self) -> ColumnarGroupAggregates:
        return ColumnarGroupAggregates(COLUMNAR_STATE, self.aggs, self._key_types(), self.ttl_ms,
                                       self.ctx.max_parallelism, self.ctx.keyed_state.clock)

    def restore_state(self, state: Any) -> None:
        backend = self.ctx.keyed_state
        if self.columnar is not None:
            # per-key entries restored from a rocksdb savepoint join the columnar state at the first
            # batch, whose schema gives the Arrow type of COUNT(DISTINCT) values (Python sets
            # here); until then they stay per-key entries, which checkpoints hold as such
            self.restored_per_key = len(self.groups) > 0
            return
        restored = backend.columnar_states.pop(COLUMNAR_STATE, None)
        if restored is not None:
            # columnar state restored from a hashmap savepoint becomes per-key entries
            converter = self._columnar_store()
            for table in restored.tables:
                converter.load(table)
            for kg, key, value in converter.accumulators():
                self.groups.put(kg, key, value)

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        batch = chunk.batch
        sign = None
        if self.retracting:
            if chunk.kinds is None:
                sign = pa.array(np.ones(batch.num_rows, dtype=np.int64))
            else:
                retract = pc.is_in(chunk.kinds, value_set=_RETRACT_KINDS)
                sign = pc.if_else(retract, -1, 1).cast(pa.int64())
        # grouped by (key hash, *keys): both forms get the groups in the same order (Arrow's, which
        # is not always that of their first rows), and the hash gives the key group
        key_cols = [batch.column(k) for k in self.keys]
        hashes = hash_columns(key_cols) if key_cols else np.zeros(batch.num_rows, np.uint64)
        key_cols = [pa.array(hashes), *key_cols]
        if self.columnar is not None:
            if self.restored_per_key:
                self._take_per_key(batch.schema)
            grouped, _, layout = self.pre_aggregate.grouped(key_cols, batch, sign)
            changes = self.columnar.process(grouped, layout)
            if changes is None:
                return []
            columns, kinds = changes
            return [Chunk(pa.RecordBatch.from_arrays(columns, schema=self.schema), pa.array(kinds))]
        return self._process_per_key(key_cols, batch, sign)

    def _take_per_key(self, input_schema: pa.Schema) -> None:
        """Move the restored per-key entries into the columnar state (see restore_state)."""
        assert self.columnar is not None
        entries = list(self.groups.items())
        for kg, key, _ in entries:
            self.groups.delete(kg, key)
        self.columnar.add_accumulators(entries, input_schema)
        self.restored_per_key = False

    def _process_per_key(self, key_cols: list[pa.Array], batch: pa.RecordBatch, sign: pa.Array | None) -> Output:
        key_lists, partials = self.pre_aggregate(key_cols, batch, sign)
        n_groups = len(key_lists[0])
        before: list[tuple] = []
        after: list[tuple] = []
        kinds_out: list[int] = []
        all_functions = [self.row_count, *self.functions]
        max_parallelism = self.ctx.max_parallelism
        for g in range(n_groups):
            group = key_lists[0][g] % max_parallelism
            key = tuple(col[g] for col in key_lists[1:])
            stored = self.groups.get(group, key)
            accs = fresh_or_copy(all_functions, None if stored is None else stored[0])
            previous = None if stored is None else stored[1]
            for fi, fn in enumerate(all_functions):
                fn.merge(accs[fi], partials[fi][g])
            if self.row_count.result(accs[0]) <= 0:
                if previous is not None:
                    before.append(previous)
                    kinds_out.append(RowKind.DELETE)
                self.groups.delete(group, key)
                continue
            row = key + tuple(fn.result(accs[fi + 1]) for fi, fn in enumerate(self.functions))
            self.groups.put(group, key, (accs, row))
            if previous is None:
                after.append(row)
                kinds_out.append(RowKind.INSERT)
            elif previous != row:
                before.append(previous)
                kinds_out.append(RowKind.UPDATE_BEFORE)
                after.append(row)
                kinds_out.append(RowKind.UPDATE_AFTER)
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
