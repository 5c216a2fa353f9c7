"""OVER windows on streams: OVER aggregates, Top-N, deduplication, window Top-N, ORDER BY / LIMIT.

Binding follows Flink's streaming rules:

* ``agg(x) OVER (PARTITION BY k ORDER BY <time attribute> ROWS|RANGE ... PRECEDING)``
  is an :class:`OverAggregate`: append-only, each row emitted once the watermark
  passes its timestamp.  ``LAG(x [, offset [, default]])`` is one of its calls (no
  frame allowed, as in Flink); ``LEAD`` is refused, as Flink refuses it in stream mode.  All OVER windows of one SELECT must be the same (Flink's
  streaming limitation), and the only ordering is the time attribute ascending.
* ``ROW_NUMBER() OVER (PARTITION BY k ORDER BY ...)`` is a :class:`Rank`.  On its
  own it has no end on a stream, so it is only plannable once a condition on the
  row number bounds it (``WHERE rn <= N``).  That condition is written in the
  *enclosing* query, so :func:`absorb_rank_filter` is called by the binder right
  after it binds a WHERE clause: a filter over (projections of) an unbounded Rank
  gives its ``rn`` bounds to the Rank and keeps only the rest of the condition.
  Doing it on the bound plan (not the syntax tree) finds the pattern through
  subqueries, CTEs and views alike; the optimizer never sees an unbounded Rank
  except for a ROW_NUMBER nobody bounded, which :meth:`Rank.with_inputs`
  (the optimizer's first look at a complete plan) rejects.
* A Rank is lowered to one of three operators, chosen from its shape
  (:attr:`Rank.strategy`): a window Top-N when it is partitioned by the
  window_start and window_end of a window TVF or window aggregation (append-only,
  once per window), a buffered deduplication keeping the first row when it orders
  by the time attribute ascending with ``rn = 1`` (append-only), or an updating
  Top-N (which also covers keep-last deduplication).
* ``ORDER BY`` must start with the time attribute ascending and sorts rows as the
  watermark passes them; ``LIMIT n`` alone emits the first n rows (:class:`StreamSort`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import TYPE_CHECKING

import pyarrow as pa
from sqlglot import exp

from sqlstream.core.aggregates import AggCall
from sqlstream.core.errors import PlanError
from sqlstream.core.evaluator import compile_expr
from sqlstream.core.expressions import (
    Call,
    Case,
    Cast,
    ColumnRef,
    Expr,
    Literal,
    referenced_columns,
    substitute,
)
from sqlstream.core.functions.arithmetic import avg_type, sum_type
from sqlstream.core.functions.udfs import USER_AGGREGATES
from sqlstream.core.sql import dialect
from sqlstream.core.types import sql_type_name
from sqlstream.core.windows import WINDOW_COLUMNS
from sqlstream.planner.expr_binder import (
    AGGREGATES,
    GROUP_AGGREGATES,
    ExprBinder,
    coerce,
    is_aggregate,
)
from sqlstream.planner.joins import conjoin, conjuncts
from sqlstream.planner.logical import (
    TOP_N_HINT,
    Filter,
    LogicalNode,
    OverAggregate,
    OverFrame,
    Project,
    Rank,
    SortKey,
    StreamSort,
    WindowAggregate,
    WindowTVF,
)
from sqlstream.planner.optimizer.constant_folding import deterministic
from sqlstream.planner.scope import Scope, ScopeColumn, plan_error

if TYPE_CHECKING:
    from sqlstream.planner.binder import QueryBinder, Relation

# RANK() and DENSE_RANK() as OVER aggregates, by their AggCall function names
RANKINGS: dict[type[exp.Expression], str] = {exp.Rank: "RANK", exp.DenseRank: "DENSE_RANK"}

# ------------------------------------------------------------------ logical nodes

# ------------------------------------------------------------------ binding SELECT items

@dataclass(frozen=True)
class _BoundWindow:
    partition: tuple[int, ...]
    order: tuple[SortKey, ...]
    frame: OverFrame | None  # None: no frame given


def bind_window_items(binder: QueryBinder, rel: Relation, items: list[exp.Expression]) -> LogicalNode:
    """A SELECT list with OVER windows: an OverAggregate or a Rank, under a projection of the items
    (a grouping query's items were moved above its GROUP BY first: over_aggregated)."""
    select = items[0].parent if items else None
    if not isinstance(select, exp.Select):
        select = None
    windows: list[exp.Window] = []
    for item in items:
        for n in item.walk():
            if isinstance(n, exp.Window):
                windows.append(n)
                for inner in n.walk():
                    if inner is not n and isinstance(inner, exp.Window):
                        raise plan_error("OVER windows cannot be nested", inner)
            elif isinstance(n, AGGREGATES) and not _inside_window(n):
                raise plan_error(
                    f"aggregate {n.sql()} without OVER cannot be mixed with OVER windows in one SELECT; "
                    "use GROUP BY in a subquery",
                    n,
                )
    functions = [w.this for w in windows]
    if any(isinstance(f, exp.RowNumber) for f in functions):
        if len(windows) > 1:
            raise plan_error("a streaming SELECT takes one ROW_NUMBER() OVER (...) and no other OVER window",
                             windows[1])
        return _bind_row_number(binder, rel, items, windows[0], select)
    for f, w in zip(functions, windows, strict=True):
        if isinstance(f, exp.Lead):
            raise plan_error("LEAD is not supported on streams (Flink: LEAD Function is not supported in stream "
                             "mode); LAG is", w)
        # aggregate UDFs and LISTAGG / PERCENTILE / COLLECT (ARRAY_AGG is a typed node); the
        # statistics are rewritten into SUM and COUNT (_statistics)
        framed = isinstance(f, exp.Anonymous) and f.name.upper() in (*USER_AGGREGATES, "LISTAGG", "PERCENTILE", "COLLECT")
        if not isinstance(f, (*AGGREGATES, exp.Lag, exp.FirstValue, exp.LastValue, exp.ArrayAgg, *RANKINGS,
                              *_STATISTICS)) and not framed:
            name = GROUP_AGGREGATES.get(type(f)) or (f.name.upper() if isinstance(f, exp.Anonymous) else
                                                     f.sql_name() if isinstance(f, exp.Func) else f.sql())
            raise plan_error(
                f"window function {name} is not supported in OVER on streams; OVER takes COUNT, SUM, MIN, MAX, AVG, "
                "STDDEV_POP, STDDEV_SAMP, VAR_POP, VAR_SAMP, "
                "FIRST_VALUE, LAST_VALUE, LISTAGG, ARRAY_AGG, PERCENTILE, COLLECT, LAG and aggregate "
                "UDFs, RANK() and DENSE_RANK() in time order, and ROW_NUMBER() (numbering rows in time order, or "
                "with a condition on it for Top-N and deduplication)",
                w,
            )
    return _bind_over_aggregates(binder, rel, items, windows, select)


def _inside_window(node: exp.Expression) -> bool:
    parent = node.parent
    while parent is not None:
        if isinstance(parent, exp.Window):
            return True
        parent = parent.parent
    return False


class _PreProjection:
    """The input columns plus computed partition / order / argument expressions appended to them."""

    def __init__(self, rel: Relation) -> None:
        self.rel = rel
        self.scope = rel.scope
        self.exprs: list[Expr] = [ColumnRef(i, c.name, c.type) for i, c in enumerate(rel.scope.columns)]
        self.names = [c.name for c in rel.scope.columns]

    def column_of(self, e: Expr) -> int:
        if isinstance(e, ColumnRef):
            return e.index
        for i, existing in enumerate(self.exprs):
            if i >= len(self.scope.columns) and existing == e:
                return i
        self.exprs.append(e)
        self.names.append(f"$expr{len(self.exprs)}")
        return len(self.exprs) - 1

    def node(self) -> LogicalNode:
        if len(self.exprs) == len(self.scope.columns):
            return self.rel.node
        return Project(self.rel.node, self.exprs, self.names, self.rel.node.rowtime)

    def item_scope(self, extra: list[tuple[str, pa.DataType]]) -> Scope:
        """The items see the input columns (``*`` skips the ``$`` ones) and the window results."""
        cols = list(self.scope.columns)
        cols += [ScopeColumn(None, n, e.type) for n, e in zip(self.names[len(cols):], self.exprs[len(cols):],
                                                               strict=True)]
        cols += [ScopeColumn(None, n, t) for n, t in extra]
        return Scope(cols)


def _window_definition(window: exp.Window, select: exp.Select | None) -> dict[str, exp.Expression | None]:
    """partition_by / order / spec of an OVER clause, completed from the named WINDOW it refers to."""
    parts: dict[str, exp.Expression | None] = {
        k: window.args.get(k) for k in ("partition_by", "order", "spec")
    }
    alias = window.args.get("alias")
    if alias is None:
        return parts
    named = {w.this.name.lower(): w for w in (select.args.get("windows") or [])} if select is not None else {}
    base = named.get(alias.name.lower())
    if base is None:
        known = ", ".join(named) or "none"
        raise plan_error(f"unknown window '{alias.name}' (WINDOW clauses defined: {known})", window, alias.name)
    for k in parts:
        if not parts[k]:
            parts[k] = base.args.get(k)
    return parts


def _bind_window(window: exp.Window, select: exp.Select | None, pre: _PreProjection, zone: str) -> _BoundWindow:
    parts = _window_definition(window, select)
    binder = ExprBinder(pre.scope, zone=zone)
    partition = tuple(pre.column_of(binder.bind(p)) for p in parts["partition_by"] or [])
    order: list[SortKey] = []
    order_node = parts["order"]
    for o in order_node.expressions if isinstance(order_node, exp.Order) else []:
        index = pre.column_of(binder.bind(o.this))
        desc = bool(o.args.get("desc"))
        nulls_first = o.args.get("nulls_first")
        order.append(SortKey(index, desc, (not desc) if nulls_first is None else bool(nulls_first)))
    spec = parts["spec"]
    frame = _bind_frame(spec) if isinstance(spec, exp.WindowSpec) else None
    return _BoundWindow(partition, tuple(order), frame)


def _bind_frame(spec: exp.WindowSpec) -> OverFrame:
    kind = (spec.args.get("kind") or "").upper()
    end = spec.args.get("end")
    end_text = end.upper() if isinstance(end, str) else (end.sql() if end is not None else "CURRENT ROW")
    if end_text != "CURRENT ROW":
        raise plan_error(
            f"OVER windows on streams end at CURRENT ROW (Flink does not support FOLLOWING), got '{spec.sql()}'",
            spec,
        )
    start = spec.args.get("start")
    side = (spec.args.get("start_side") or "").upper()
    if isinstance(start, str) and start.upper() == "UNBOUNDED":
        return OverFrame(kind, None)
    if isinstance(start, str) and start.upper() == "CURRENT ROW":
        return OverFrame(kind, 0)
    if side != "PRECEDING":
        raise plan_error(f"an OVER window starts at UNBOUNDED or n PRECEDING, got '{spec.sql()}'", spec)
    if kind == "ROWS":
        if not (isinstance(start, exp.Literal) and not start.is_string and str(start.this).isdigit()):
            raise plan_error(f"ROWS takes a constant number of preceding rows, got '{start.sql()}'", spec)
        return OverFrame("ROWS", int(start.this))
    if not isinstance(start, exp.Interval):
        raise plan_error(
            f"RANGE over the time attribute takes an INTERVAL (e.g. INTERVAL '1' HOUR PRECEDING), got '{start.sql()}'",
            spec,
        )
    ms = dialect.interval_ms(start)
    if ms < 0:
        raise plan_error("the RANGE of an OVER window must not be negative", spec)
    return OverFrame("RANGE", ms)


def _require_append_only(rel: Relation, what: str, node: exp.Expression) -> None:
    if rel.node.updating:
        raise plan_error(
            f"{what} needs an append-only input, but its input is an updating result (a changelog)", node
        )


def _bind_over_aggregates(binder: QueryBinder, rel: Relation, items: list[exp.Expression],
                          windows: list[exp.Window], select: exp.Select | None) -> LogicalNode:
    _require_append_only(rel, "an OVER aggregation", windows[0])
    pre = _PreProjection(rel)
    bound = [_bind_window(w, select, pre, binder.zone) for w in windows]
    if any(b != bound[0] for b in bound[1:]):
        other = next(w for w, b in zip(windows, bound, strict=True) if b != bound[0])
        raise plan_error(
            "all OVER windows of a streaming SELECT must be the same (a Flink limitation); "
            "define it once with WINDOW w AS (...) and use OVER w",
            other,
        )
    spec = bound[0]
    rowtime = rel.node.rowtime
    time_name = rel.scope.columns[rowtime].name if rowtime is not None else None
    if rowtime is None:
        raise plan_error(
            "an OVER window on a stream must be ordered by a time attribute, and this input has none "
            "(declare a WATERMARK on the table's time column)",
            windows[0],
        )
    if len(spec.order) != 1 or spec.order[0].index != rowtime or spec.order[0].descending:
        raise plan_error(
            f"an OVER window on a stream must be ORDER BY the time attribute ascending (ORDER BY {time_name}); "
            "Flink supports no other ordering for streaming OVER aggregates",
            windows[0],
        )
    lag = next((w for w in windows if isinstance(w.this, exp.Lag)), None)
    if lag is not None and spec.frame is not None:
        raise plan_error("LAG takes no ROWS/RANGE frame, and the OVER windows of one streaming SELECT are one "
                         "window: drop the frame (Flink: ROW/RANGE not allowed)", lag)
    ranking = next((w for w in windows if isinstance(w.this, tuple(RANKINGS))), None)
    if ranking is not None and spec.frame is not None:
        raise plan_error(f"{ranking.this.sql_name()} takes no ROWS/RANGE frame, and the OVER windows of one "
                         "streaming SELECT are one window: drop the frame (Flink: ROW/RANGE not allowed with "
                         "RANK, DENSE_RANK or ROW_NUMBER functions)", ranking)
    frame = spec.frame or OverFrame("RANGE", None)  # the SQL default with ORDER BY
    expr_binder = ExprBinder(pre.scope, zone=binder.zone)
    aggs: list[AggCall] = []
    agg_of: dict[str, int] = {}
    statistics: dict[str, _Statistic] = {}

    def helper(function: str, arg: Expr | None) -> int:
        """The index of a hidden SUM / COUNT call of the statistics, shared between them."""
        key = f"$statistic {function}({arg})"
        if key not in agg_of:
            column = pre.column_of(arg)
            t = pa.int64() if function == "COUNT" else sum_type(arg.type)
            agg_of[key] = len(aggs)
            aggs.append(AggCall(function, column, False, t, f"$over{len(aggs)}"))
        return agg_of[key]

    for w in windows:
        key = w.this.sql()
        if key in agg_of or key in statistics:
            continue
        if isinstance(w.this, _STATISTICS):
            statistics[key] = _statistic(w.this, expr_binder, helper)
            continue
        name = f"$over{len(aggs)}"
        if isinstance(w.this, exp.Lag):
            aggs.append(_lag_call(w.this, expr_binder, pre.column_of, name))
            agg_of[key] = len(aggs) - 1
            continue
        if isinstance(w.this, tuple(RANKINGS)):
            # Flink 2.3's streaming OVER aggregation gives both the row count of the RANGE UNBOUNDED
            # frame (its rank functions get no order key to compare): peers rank alike, a tie of three
            # at the start ranks 3; the operator computes them as COUNT(*)
            aggs.append(AggCall(RANKINGS[type(w.this)], None, False, pa.int64(), name))
            agg_of[key] = len(aggs) - 1
            continue
        call = binder._agg_call(w.this, expr_binder, pre.column_of, name)
        if call.distinct:
            raise plan_error(f"{call.function}(DISTINCT ...) OVER is not supported on streams", w)
        agg_of[key] = len(aggs)
        aggs.append(call)
    input_node = pre.node()
    node = OverAggregate(input_node, list(spec.partition), rowtime, frame, aggs)
    width = len(input_node.schema)
    scope = pre.item_scope([(a.name, a.type) for a in aggs])

    def result(j: int) -> ColumnRef:
        return ColumnRef(width + j, aggs[j].name, aggs[j].type)

    def intercept(n: exp.Expression) -> Expr | None:
        if isinstance(n, exp.Window):
            key = n.this.sql()
            if key in statistics:
                return statistics[key].expression(result, ExprBinder(scope, zone=binder.zone), n)
            return result(agg_of[key])
        return None

    exprs, names = binder._bind_items(items, scope, ExprBinder(scope, intercept, zone=binder.zone))
    return Project(node, exprs, names, _rowtime_through(exprs, node.rowtime))


_STATISTICS = (exp.StddevPop, exp.StddevSamp, exp.Stddev, exp.VariancePop, exp.Variance)


@dataclass(frozen=True)
class _Statistic:
    """STDDEV_POP / STDDEV_SAMP / VAR_POP / VAR_SAMP in OVER, as Flink runs it there.

    Flink's planner (Calcite's AggregateReduceFunctionsRule, reduceStddev) replaces the call by
    SUM(x * x), SUM(x) and COUNT(x) over the window and an expression in the result's type T (x's
    for INT, DOUBLE; DECIMAL(38, 6) for a DECIMAL): CAST(POWER((SUM(x*x) - SUM(x) * SUM(x) / COUNT(x))
    / d, 0.5) AS T), d being COUNT(x) (POP) or CASE WHEN COUNT(x) = 1 THEN NULL ELSE COUNT(x) - 1
    END (SAMP), without the POWER for a variance. Integer arithmetic truncates at each division, so
    VAR_POP of 3, 3, 1 is (19 - 49 / 3) / 3 = 1 there where GROUP BY's exact computation gives 0."""

    function: str
    type: pa.DataType  # T
    sum_squares: int  # the hidden aggregates' indices
    total: int
    count: int

    def expression(self, result: Callable[[int], ColumnRef], b: ExprBinder, node: exp.Expression) -> Expr:
        total = coerce(result(self.total), self.type, zone=b.zone)
        count = result(self.count)
        mean_square = b._call("/", [b._call("*", [total, total], node), count], node)
        difference = b._call("-", [result(self.sum_squares), mean_square], node)
        if self.function.endswith("_POP"):
            divisor: Expr = count
        else:
            one = Literal(1, pa.int32())
            divisor = Case(((b._call("=", [count, one], node), Literal(None, pa.int64())),),
                           b._call("-", [count, one], node), pa.int64())
        value = b._call("/", [difference, divisor], node)
        if self.function.startswith("STDDEV"):
            value = b._call("POWER", [value, Literal(Decimal("0.5"), pa.decimal128(1, 1))], node)
        return value if value.type == self.type else Cast(value, self.type)


def _statistic(node: exp.Expression, binder: ExprBinder, helper: Callable[[str, Expr | None], int]) -> _Statistic:
    """The hidden SUM / COUNT calls of a statistic in OVER (see _Statistic), typed as GROUP BY types it."""
    function = GROUP_AGGREGATES[type(node)]
    arg = binder.bind(node.this)
    t = arg.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)):
        raise plan_error(f"{function} needs a numeric argument, got {sql_type_name(t)}", node)
    # Flink types them as GROUP BY does: integers and floats keep the argument's type, DECIMAL(p, s)
    # becomes DECIMAL(38, max(6, s)) as AVG does
    out = avg_type(t) if pa.types.is_decimal(t) else t
    x = coerce(arg, out, zone=binder.zone)
    square = binder._call("*", [x, x], node)
    return _Statistic(function, out, helper("SUM", square), helper("SUM", x), helper("COUNT", x))


def _lag_call(node: exp.Lag, binder: ExprBinder, column_of: Callable[[Expr], int], name: str) -> AggCall:
    """``LAG(x [, offset [, default]])``: typed as x, with a constant offset (default 1) and default."""
    arg = binder.bind(node.this)
    offset_node = node.args.get("offset")
    offset = 1
    if offset_node is not None:
        if not (isinstance(offset_node, exp.Literal) and not offset_node.is_string and str(offset_node.this).isdigit()):
            raise plan_error(f"LAG takes a constant non-negative offset, got '{offset_node.sql()}'", offset_node)
        offset = int(offset_node.this)
    default = None
    default_node = node.args.get("default")
    if default_node is not None:
        bound = binder.bind(default_node)
        if referenced_columns(bound) or not deterministic(bound):
            raise plan_error(f"LAG takes a constant default, got '{default_node.sql()}'", default_node)
        value = compile_expr(bound)(pa.record_batch([pa.array([0])], names=["x"]))
        value = (value if isinstance(value, pa.Scalar) else value[0]).as_py()
        same = bound.type == arg.type or (pa.types.is_string(bound.type) and pa.types.is_string(arg.type))
        if value is not None and not same:
            raise plan_error(
                f"LAG's default must have the type of its value: explicitly cast the default "
                f"{sql_type_name(bound.type)} to {sql_type_name(arg.type)} (as Flink asks)", default_node)
        default = value
    return AggCall("LAG", column_of(arg), False, arg.type, name, offset=offset, default=default)


def _bind_row_number(binder: QueryBinder, rel: Relation, items: list[exp.Expression], window: exp.Window,
                     select: exp.Select | None) -> LogicalNode:
    pre = _PreProjection(rel)
    spec = _bind_window(window, select, pre, binder.zone)
    if spec.frame is not None:
        raise plan_error("ROW_NUMBER() takes no ROWS/RANGE frame", window)
    if not spec.order:
        raise plan_error(f"ROW_NUMBER() on a stream needs an ORDER BY in its OVER clause: {TOP_N_HINT}", window)
    input_node = pre.node()
    roles = window_roles(input_node)
    by_role = {roles.get(k): k for k in spec.partition}
    ranked_window = None
    if "window_start" in by_role and "window_end" in by_role:
        ranked_window = (by_role["window_start"], by_role["window_end"])
        _require_append_only(rel, "a window Top-N", window)
    time_columns = {c for c, r in roles.items() if r == "time"}
    if input_node.rowtime is not None:
        time_columns.add(input_node.rowtime)
    time_order = len(spec.order) == 1 and spec.order[0].index in time_columns
    node = Rank(input_node, list(spec.partition), list(spec.order), window=ranked_window, time_order=time_order)
    width = len(input_node.schema)
    scope = pre.item_scope([("$rn", pa.int64())])

    def intercept(n: exp.Expression) -> Expr | None:
        if isinstance(n, exp.Window):
            return ColumnRef(width, "$rn", pa.int64())
        return None

    exprs, names = binder._bind_items(items, scope, ExprBinder(scope, intercept, zone=binder.zone))
    return Project(node, exprs, names, _rowtime_through(exprs, node.rowtime))


def window_roles(node: LogicalNode) -> dict[int, str]:
    """Which output columns are window_start / window_end / window_time, or a window TVF's time column."""
    if isinstance(node, WindowTVF):
        width = len(node.input.schema)
        roles = {width + j: name for j, name in enumerate(WINDOW_COLUMNS)}
        roles[node.window.time_index] = "time"
        return roles
    if isinstance(node, WindowAggregate):
        return {i: o for i, o in enumerate(node.outputs) if isinstance(o, str)}
    if isinstance(node, Filter):
        return window_roles(node.input)
    if isinstance(node, Project):
        below = window_roles(node.input)
        return {i: below[e.index] for i, e in enumerate(node.exprs) if isinstance(e, ColumnRef) and e.index in below}
    return {}


def _rowtime_through(exprs: list[Expr], rowtime: int | None) -> int | None:
    """The output position of the time attribute when a projection passes it through unchanged."""
    if rowtime is None:
        return None
    for i, e in enumerate(exprs):
        if isinstance(e, ColumnRef) and e.index == rowtime:
            return i
    return None


# ------------------------------------------------------------------ Top-N detection

def absorb_rank_filter(node: LogicalNode) -> LogicalNode:
    """``Filter(Project*(Rank))``: move the filter's bounds on the row number into the Rank.

    Conjuncts ``rn <= N``, ``rn < N``, ``rn = N``, ``rn >= N``, ``rn > N`` (either side,
    so also BETWEEN) set the Rank's range; the other conjuncts stay a filter above.
    Anything else is returned unchanged.
    """
    if not isinstance(node, Filter):
        return node
    chain: list[Project] = []
    inner = node.input
    while isinstance(inner, Project):
        chain.append(inner)
        inner = inner.input
    if not isinstance(inner, Rank) or not inner.output_rank:
        return node
    rn = len(inner.input.schema)
    start, end = inner.rank_start, inner.rank_end
    kept: list[Expr] = []
    for c in conjuncts(node.predicate):
        e = c
        for p in chain:
            e = substitute(e, p.exprs)
        bound = _rank_bound(e, rn)
        if bound is None:
            kept.append(c)
            continue
        start = max(start, bound[0])
        if bound[1] is not None:
            end = bound[1] if end is None else min(end, bound[1])
    if (start, end) == (inner.rank_start, inner.rank_end):
        return node
    if end is not None and end < start:
        raise PlanError(f"the condition on the row number selects no rows (rows {start}..{end})")
    out: LogicalNode = replace(inner, rank_start=start, rank_end=end)
    for p in reversed(chain):
        out = Project(out, p.exprs, p.names, _rowtime_through(p.exprs, out.rowtime))
    rest = conjoin(kept)
    return out if rest is None else Filter(out, rest)


_FLIPPED = {"<=": ">=", "<": ">", ">=": "<=", ">": "<", "=": "="}


def _rank_bound(e: Expr, rn: int) -> tuple[int, int | None] | None:
    """(first, last or None) row numbers that ``e`` lets through, if it bounds column ``rn`` by a constant."""
    if not (isinstance(e, Call) and e.name in _FLIPPED and len(e.args) == 2):
        return None
    a, b = e.args
    op = e.name
    if isinstance(b, ColumnRef) and b.index == rn:
        a, b, op = b, a, _FLIPPED[op]
    if not (isinstance(a, ColumnRef) and a.index == rn and isinstance(b, Literal) and isinstance(b.value, int)):
        return None
    n = b.value
    return {
        "<=": (1, n), "<": (1, n - 1), "=": (n, n), ">=": (n, None), ">": (n + 1, None),
    }[op]


# ------------------------------------------------------------------ ORDER BY / LIMIT

def bind_order_limit(node: LogicalNode, order: exp.Order | None, limit: exp.Expression | None,
                     zone: str) -> LogicalNode:
    """ORDER BY <time attribute> [, ...] [LIMIT n] or LIMIT n over a query's result, as Flink streams them."""
    count = None if limit is None else _limit_count(limit)
    if node.updating and order is not None and count is not None:
        return _global_top_n(node, _sort_keys(node, order, zone), count)
    if node.updating:
        what = "ORDER BY" if order is not None else "LIMIT"
        raise plan_error(
            f"{what} over an updating result (a changelog) is not supported on streams; "
            f"for the first N rows per key use Top-N: {TOP_N_HINT}",
            order if order is not None else limit,
        )
    if order is None:
        return StreamSort(node, [], count)
    keys = _sort_keys(node, order, zone)
    first = keys[0]
    rowtime = node.rowtime
    if rowtime is not None and first.index == rowtime and not first.descending:
        return StreamSort(node, keys, count)
    if count is not None:
        return _global_top_n(node, keys, count)
    time_hint = f"ORDER BY {node.schema.names[rowtime]}" if rowtime is not None else "ORDER BY <time attribute>"
    raise plan_error(
        f"ORDER BY {order.expressions[0].sql()} without LIMIT is not supported on a streaming query: Flink "
        f"sorts a stream only by its time attribute ascending first ({time_hint} [, ...]), or keeps the top "
        f"rows of another order with a LIMIT (ORDER BY {order.expressions[0].sql()} LIMIT n); for the top "
        f"rows per key use Top-N: {TOP_N_HINT}",
        order,
    )


def _global_top_n(node: LogicalNode, keys: list[SortKey], count: int) -> LogicalNode:
    """ORDER BY <not the time attribute ascending> LIMIT n: Flink's streaming SortLimit, a Top-N
    over the whole result (no partition) whose output updates as the top n change."""
    return Rank(node, [], keys, 1, count, output_rank=False)


def _sort_keys(node: LogicalNode, order: exp.Order, zone: str) -> list[SortKey]:
    """The ORDER BY items as sort keys over the columns of the query's result."""
    scope = Scope.of(node.schema)
    keys: list[SortKey] = []
    for o in order.expressions:
        target = o.this
        if isinstance(target, exp.Literal) and not target.is_string:
            position = int(target.this)
            if not 1 <= position <= len(node.schema):
                raise plan_error(f"ORDER BY position {position} is not in the select list", o)
            index = position - 1
        else:
            if isinstance(target, exp.Column) and target.table:
                target = target.copy()
                target.set("table", None)  # the result's columns have no table qualifier
            try:
                bound = ExprBinder(scope, zone=zone).bind(target)
            except PlanError as e:
                raise PlanError(f"{e.message}. ORDER BY on a stream sorts the query's result: select the "
                                "columns it sorts by", e.line, e.col, e.token) from None
            if not isinstance(bound, ColumnRef):
                raise plan_error(
                    f"ORDER BY '{target.sql()}': a stream is sorted by columns of the query's result; "
                    "select the expression and order by its alias",
                    o,
                )
            index = bound.index
        desc = bool(o.args.get("desc"))
        nulls_first = o.args.get("nulls_first")
        keys.append(SortKey(index, desc, (not desc) if nulls_first is None else bool(nulls_first)))
    return keys


def _limit_count(limit: exp.Expression) -> int:
    if isinstance(limit, exp.Fetch):
        options = limit.args.get("limit_options")
        if options is not None and (options.args.get("percent") or options.args.get("with_ties")):
            raise plan_error("FETCH FIRST ... PERCENT / WITH TIES is not supported on streams", limit)
        value = limit.args.get("count")
    else:
        value = limit.expression
    if not (isinstance(value, exp.Literal) and not value.is_string and str(value.this).isdigit()):
        shown = value.sql() if value is not None else "nothing"
        raise plan_error(f"LIMIT takes a constant non-negative number of rows, got {shown}", limit)
    return int(value.this)


def _window_function(n: exp.Expression) -> bool:
    """The function an OVER clause applies (SUM in SUM(x) OVER w), not an aggregate of the rows."""
    return isinstance(n.parent, exp.Window) and n.parent.this is n


def group_aggregate_calls(node: exp.Expression) -> list[exp.Expression]:
    """The aggregate calls of ``node`` that aggregate its query's groups: not window functions
    (whose arguments are searched: SUM(SUM(x)) OVER w holds one) and not inside subqueries."""
    found: list[exp.Expression] = []

    def visit(n: exp.Expression) -> None:
        if isinstance(n, exp.Subquery | exp.Select) and n is not node:
            return
        if is_aggregate(n) and not _window_function(n):
            found.append(n)
            return
        for child in n.iter_expressions():
            visit(child)

    visit(node)
    return found


def over_aggregated(sel: exp.Select) -> exp.Select:
    """A SELECT with both GROUP BY (or aggregates) and OVER windows as two query blocks, as SQL
    evaluates it: the inner one groups (keys and every aggregate call, with WHERE and HAVING), the
    outer one computes the items, OVER windows included, over the grouped rows. So a window Top-N
    can rank a window aggregation's rows in one query, as in Flink:
    ``ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY SUM(x) DESC)``."""
    group = sel.args.get("group")
    keys = list(group.expressions) if group is not None else []
    if group is not None and any(group.args.get(k) for k in ("grouping_sets", "cube", "rollup")):
        raise plan_error("OVER windows over GROUPING SETS, ROLLUP or CUBE are not supported; aggregate in a "
                         "subquery and apply the OVER window to its result", group)
    inner_items: list[exp.Expression] = []
    replaced: dict[str, exp.Expression] = {}
    names: set[str] = set()
    for i, key in enumerate(keys):
        name = key.name if isinstance(key, exp.Column) else f"$g{i}"
        if name.lower() in names:
            raise plan_error(f"OVER windows over a GROUP BY with two keys named '{name}': aggregate in a subquery "
                             "with distinct names and apply the OVER window to its result", key)
        names.add(name.lower())
        inner_items.append(exp.alias_(key.copy(), name, quoted=True))
        replaced[key.sql()] = exp.column(exp.to_identifier(name, quoted=True))
    aggregates: list[exp.Expression] = []
    for item in sel.expressions:
        for n in group_aggregate_calls(item):
            if n.sql() not in replaced:
                name = f"$a{len(aggregates)}"
                aggregates.append(n)
                inner_items.append(exp.alias_(n.copy(), name, quoted=True))
                replaced[n.sql()] = exp.column(exp.to_identifier(name, quoted=True))
    inner = sel.copy()
    inner.set("expressions", inner_items)
    for clause in ("distinct", "order", "limit", "offset"):
        inner.set(clause, None)

    def outer_form(n: exp.Expression) -> exp.Expression:
        if n.sql() in replaced and not _window_function(n) and not isinstance(n, exp.Ordered):
            return replaced[n.sql()].copy()
        if isinstance(n, exp.Column) and not isinstance(n.this, exp.Star):
            if n.name.lower() not in names:
                raise plan_error(f"'{n.sql()}' is neither grouped nor aggregated; OVER windows in an aggregating "
                                 "query read its GROUP BY keys and aggregates", n)
            return exp.column(exp.to_identifier(n.name, quoted=True))
        return n

    outer = exp.Select(expressions=[i.copy().transform(outer_form) for i in sel.expressions])
    outer.set("from_", exp.From(this=exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier("$grouped")))))
    for clause in ("distinct", "order", "limit", "offset", "windows"):
        if sel.args.get(clause) is not None:
            outer.set(clause, sel.args[clause].copy().transform(outer_form))
    inner.set("windows", None)
    return outer
