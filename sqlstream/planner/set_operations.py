"""UNION, INTERSECT and EXCEPT, with and without ALL, bound as Flink plans them.

Both inputs are cast to the common type of each column.  INTERSECT and EXCEPT become a GROUP BY
over the union of the inputs, each row tagged with the side it came from, counting the rows of
each side per distinct row (NULLs equal, as in Flink): INTERSECT keeps the rows both sides have,
EXCEPT those only the left has; the ALL forms repeat each row ``LEAST(left, right)`` or
``left - right`` times (Flink's ReplicateRows).  As in Flink their results are updating: a row
arriving on either side can add or withdraw a result row.
"""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from sqlstream.core.aggregates import AggCall
from sqlstream.core.expressions import Call, ColumnRef, Expr, Literal
from sqlstream.core.functions import common_type
from sqlstream.core.types import sql_type_name
from sqlstream.planner.expr_binder import coerce
from sqlstream.planner.logical import Aggregate, Filter, LogicalNode, Project, ReplicateRows, Union
from sqlstream.planner.scope import plan_error

_COUNT = pa.int64()


def coerced_inputs(left: LogicalNode, right: LogicalNode, node: exp.Expression, zone: str) -> list[LogicalNode]:
    """Both inputs with each column cast to the common type of the pair, named as the left's."""
    what = node.key.upper()
    lt, rt = left.schema, right.schema
    if len(lt) != len(rt):
        raise plan_error(f"{what} inputs have {len(lt)} and {len(rt)} columns; they must have the same number", node)
    targets = []
    for a, b in zip(lt, rt, strict=True):
        c = common_type(a.type, b.type)
        if c is None:
            raise plan_error(
                f"{what} column '{a.name}' has types {sql_type_name(a.type)} and {sql_type_name(b.type)}", node)
        targets.append(c if not pa.types.is_null(c) else pa.string())
    out = []
    for side in (left, right):
        schema = side.schema
        if [f.type for f in schema] == targets:
            out.append(side)
        else:
            exprs: list[Expr] = [coerce(ColumnRef(i, f.name, f.type), t, zone=zone)
                                 for i, (f, t) in enumerate(zip(schema, targets, strict=True))]
            out.append(Project(side, exprs, lt.names, side.rowtime))
    return out


def intersect_or_except(left: LogicalNode, right: LogicalNode, node: exp.Intersect | exp.Except,
                        zone: str) -> LogicalNode:
    sides = coerced_inputs(left, right, node, zone)
    schema = sides[0].schema
    width = len(schema)
    tagged = []
    for side, (ls, rs) in zip(sides, ((1, 0), (0, 1)), strict=True):
        exprs: list[Expr] = [ColumnRef(i, f.name, f.type) for i, f in enumerate(side.schema)]
        tagged.append(Project(side, [*exprs, Literal(ls, _COUNT), Literal(rs, _COUNT)],
                              [*schema.names, "$left", "$right"]))
    counts = Aggregate(Union(tagged), list(range(width)),
                       [AggCall("SUM", width, False, _COUNT, "$left"), AggCall("SUM", width + 1, False, _COUNT, "$right")],
                       list(schema.names))
    left_n, right_n = ColumnRef(width, "$left", _COUNT), ColumnRef(width + 1, "$right", _COUNT)
    zero = Literal(0, _COUNT)
    intersect = isinstance(node, exp.Intersect)
    distinct = bool(node.args.get("distinct"))
    if intersect:
        keep = Call("AND", (Call(">", (left_n, zero), pa.bool_()), Call(">", (right_n, zero), pa.bool_())), pa.bool_())
        times: Expr = Call("LEAST", (left_n, right_n), _COUNT)
    elif distinct:
        keep = Call("AND", (Call(">", (left_n, zero), pa.bool_()), Call("=", (right_n, zero), pa.bool_())), pa.bool_())
        times = left_n
    else:
        keep = Call(">", (left_n, right_n), pa.bool_())
        times = Call("-", (left_n, right_n), _COUNT)
    kept: LogicalNode = Filter(counts, keep)
    columns: list[Expr] = [ColumnRef(i, f.name, f.type) for i, f in enumerate(schema)]
    if distinct:
        return Project(kept, columns, list(schema.names))
    with_times = Project(kept, [*columns, times], [*schema.names, "$times"])
    repeated = ReplicateRows(with_times, width)
    return Project(repeated, columns, list(schema.names))
