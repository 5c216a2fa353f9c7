"""The logical node of MATCH_RECOGNIZE: row pattern recognition per partition, in event-time order.
planner.match_recognize binds it from SQL."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import pyarrow as pa

from sqlstream.core.expressions import Expr
from sqlstream.core.physical import PatternTerm
from sqlstream.planner.logical.base import LogicalNode, Prune


@dataclass
class MatchRecognize(LogicalNode):
    """ONE ROW PER MATCH: the partition columns, then one column per measure.

    ``defines`` hold, per pattern variable, its condition over the input row followed by one
    column per navigation into the match so far (``navigations``: FIRST|LAST, variable or -1
    for all rows, input column, offset), or None (any row matches); ``primitives`` are what the
    measures read of a match (navigations, or COUNT/SUM/AVG/MIN/MAX, variable, column, 0, or
    ROWTIME: when the match was emitted, MATCH_ROWTIME()), and ``measures`` are expressions over them.
    """

    input: LogicalNode
    partition_keys: list[int]
    time_index: int
    variables: tuple[str, ...]
    pattern: tuple[PatternTerm, ...]
    defines: tuple[Expr | None, ...]
    navigations: tuple[tuple[str, int, int, int], ...]
    navigation_types: tuple[pa.DataType, ...]
    primitives: tuple[tuple[str, int, int, int], ...]
    primitive_types: tuple[pa.DataType, ...]
    measures: tuple[Expr, ...]
    names: tuple[str, ...]
    skip: tuple[str, int]
    rowtime_measure: int | None  # the measure that is MATCH_ROWTIME(), the output's time attribute
    within_ms: int | None  # WITHIN INTERVAL ...
    tie_order: list[tuple[int, bool, bool]]  # ORDER BY after the time attribute: (column, desc, nulls first)

    @property
    def schema(self) -> pa.Schema:
        fields = [self.input.schema.field(k) for k in self.partition_keys]
        fields += [pa.field(n, m.type) for n, m in zip(self.names, self.measures, strict=True)]
        return pa.schema(fields)

    @property
    def rowtime(self) -> int | None:
        return None if self.rowtime_measure is None else len(self.partition_keys) + self.rowtime_measure

    @property
    def updating(self) -> bool:
        return False

    @property
    def inputs(self) -> list[LogicalNode]:
        return [self.input]

    def describe(self) -> str:
        keys = ", ".join(f"${k}" for k in self.partition_keys)
        pattern = " ".join(t.describe(self.variables) for t in self.pattern)
        defines = ", ".join(f"{v} AS {d}" for v, d in zip(self.variables, self.defines, strict=True) if d is not None)
        measures = ", ".join(f"{m} AS {n}" for m, n in zip(self.measures, self.names, strict=True))
        skip = self.skip[0] + (f" {self.variables[self.skip[1]]}" if self.skip[1] >= 0 else "")
        within = "" if self.within_ms is None else f", within={self.within_ms}ms"
        order = "".join(f", ${c}{' DESC' if d else ''}{' NULLS FIRST' if n else ''}" for c, d, n in self.tie_order)
        return (f"MatchRecognize(partition=[{keys}], order=${self.time_index}{order}, pattern=[{pattern}]{within}, "
                f"define=[{defines}], measures=[{measures}], skip={skip})")

    def with_inputs(self, inputs: list[LogicalNode]) -> MatchRecognize:
        return replace(self, input=inputs[0])

    def map_expressions(self, fn: Callable[[Expr], Expr]) -> LogicalNode:
        # the expressions are over this node's own scopes (row + PREV columns, primitives), which
        # a rewrite meant for input columns must not touch
        return self

    def prune_columns(self, required: set[int], prune: Prune) -> tuple[LogicalNode, dict[int, int]]:
        # the DEFINE conditions are over the whole input row: keep every input column
        width = len(self.input.schema)
        child, mapping = prune(self.input, set(range(width)))
        assert all(mapping[i] == i for i in range(width)), "an input kept whole keeps its column order"
        return replace(self, input=child), {i: i for i in range(len(self.schema))}
