"""Lookup join: each row probes a dimension table through its connector, as it arrives.

Stateless apart from the connector's cache: a batch's distinct keys are
looked up in one call, joined rows come out in input order, and for a LEFT
join a row without a match is padded with NULLs.  Retractions on the input
(-U/-D) are looked up again and passed on with their kind.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from sqlstream.core.expressions import Expr
from sqlstream.core.tables import TableDef
from sqlstream.runtime.connectors.base import LookupContext
from sqlstream.runtime.elements import Chunk
from sqlstream.runtime.operators.base import Operator, OperatorContext, Output
from sqlstream.runtime.operators.join import PairFilter, build_batch, rows_of


class LookupJoinOperator(Operator):
    name = "LookupJoin"

    def __init__(self, table: TableDef, options: dict[str, Any], kind: str, keys: list[tuple[int, str]],
                 columns: list[str], residual: Expr | None, schema: pa.Schema) -> None:
        self.table = table
        self.options = options
        self.kind = kind
        self.left_keys = [k for k, _ in keys]
        self.dim_keys = [c for _, c in keys]
        self.columns = columns
        self.schema = schema
        self.pairs = PairFilter(residual, schema)

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        from sqlstream.runtime.connectors.registry import get_connector

        factory = get_connector(self.table.connector).create_lookup
        assert factory is not None
        self.lookup = factory(LookupContext(self.table, self.options, self.dim_keys, self.columns, ctx.clock))

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        rows = rows_of(chunk.batch)
        keys = [tuple(r[k] for k in self.left_keys) for r in rows]
        wanted = list({k for k in keys if None not in k})
        found = self.lookup(wanted) if wanted else {}
        pairs, owners = [], []
        for i, (row, k) in enumerate(zip(rows, keys, strict=True)):
            for dim in found.get(k, ()):
                pairs.append((row, dim))
                owners.append(i)
        ok = self.pairs(pairs)
        kinds_in = chunk.kinds.to_pylist() if chunk.kinds is not None else None
        out: list[tuple] = []
        kinds: list[int] = []
        matched = [False] * len(rows)
        for (row, dim), i, good in zip(pairs, owners, ok, strict=True):
            if good:
                matched[i] = True
                out.append(row + dim)
                kinds.append(kinds_in[i] if kinds_in else 0)
        if self.kind == "LEFT":
            pad = (None,) * len(self.columns)
            for i, row in enumerate(rows):
                if not matched[i]:
                    out.append(row + pad)
                    kinds.append(kinds_in[i] if kinds_in else 0)
        if not out:
            return []
        return [Chunk(build_batch(out, self.schema), pa.array(kinds, pa.int8()) if kinds_in else None)]
