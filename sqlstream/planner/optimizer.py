"""Logical rewrites: constant folding, predicate pushdown, projection pruning.

Each rule preserves results; filters are never pushed below a watermark
assigner because rows dropped there would no longer advance event time.
"""

from __future__ import annotations

import pyarrow as pa

from sqlstream.core.aggregates import AggCall
from sqlstream.core.expressions import (
    Call,
    Case,
    Cast,
    Expr,
    Literal,
    children,
    referenced_columns,
    remap_columns,
    substitute,
)
from sqlstream.core.windows import WindowSpec
from sqlstream.planner.joins import conjoin, conjuncts, side_of
from sqlstream.planner.logical import (
    Aggregate,
    Filter,
    Join,
    LogicalNode,
    LookupJoin,
    Project,
    Scan,
    Sink,
    TemporalJoin,
    Union,
    Values,
    WatermarkAssign,
    WindowAggregate,
    WindowTVF,
)

# functions whose value changes between calls: never folded
NON_DETERMINISTIC = {"CURRENT_TIMESTAMP", "NOW", "LOCALTIMESTAMP", "CURRENT_DATE", "CURRENT_TIME", "RAND", "UUID", "PROCTIME"}


def optimize(root: LogicalNode) -> LogicalNode:
    root = _rewrite(root)
    required = set(range(len(root.schema)))
    root, _ = prune(root, required)
    return root


# ------------------------------------------------------------ constant folding

def fold(e: Expr) -> Expr:
    from sqlstream.core.evaluator import compile_expr

    if isinstance(e, Call):
        args = tuple(fold(a) for a in e.args)
        e = Call(e.name, args, e.type)
        if args and all(isinstance(a, Literal) for a in args) and e.name not in NON_DETERMINISTIC:
            try:
                value = compile_expr(e)(pa.record_batch([pa.array([0])], names=["x"]))
            except Exception:  # noqa: BLE001 - leave it to runtime, which reports the error with context
                return e
            if isinstance(value, pa.Scalar):
                return Literal(value.cast(e.type).as_py(), e.type)
        return e
    if isinstance(e, Cast):
        arg = fold(e.arg)
        if isinstance(arg, Literal) and arg.value is not None:
            try:
                return Literal(pa.scalar(arg.value, arg.type).cast(e.type).as_py(), e.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return Cast(arg, e.type, e.safe)
        return Cast(arg, e.type, e.safe)
    if isinstance(e, Case):
        return Case(tuple((fold(c), fold(v)) for c, v in e.whens), None if e.default is None else fold(e.default), e.type)
    return e


def _is_true(e: Expr) -> bool:
    return isinstance(e, Literal) and e.value is True


def _deterministic(e: Expr) -> bool:
    if isinstance(e, Call) and e.name in NON_DETERMINISTIC:
        return False
    return all(_deterministic(c) for c in children(e))


# ------------------------------------------------------------ rule driver

def _rewrite(node: LogicalNode) -> LogicalNode:
    """Bottom-up: fold constants, merge and push filters, merge projections."""
    if isinstance(node, Project):
        inner = _rewrite(node.input)
        exprs = [fold(e) for e in node.exprs]
        if isinstance(inner, Project) and all(_deterministic(e) for e in inner.exprs):
            exprs = [fold(substitute(e, inner.exprs)) for e in exprs]
            rowtime = node.rowtime_out
            return Project(inner.input, exprs, node.names, rowtime)
        return Project(inner, exprs, node.names, node.rowtime_out)
    if isinstance(node, Filter):
        inner = _rewrite(node.input)
        return _push_filter(fold(node.predicate), inner)
    if isinstance(node, WatermarkAssign):
        return WatermarkAssign(
            _rewrite(node.input), node.rowtime_index, fold(node.watermark), node.idle_timeout_ms, node.proctime
        )
    if isinstance(node, WindowTVF):
        return WindowTVF(_rewrite(node.input), node.window)
    if isinstance(node, Aggregate):
        return Aggregate(_rewrite(node.input), node.keys, node.aggs, node.key_names)
    if isinstance(node, WindowAggregate):
        return WindowAggregate(_rewrite(node.input), node.window, node.outputs, node.output_names, node.aggs,
                               node.input_window)
    if isinstance(node, Union):
        return Union([_rewrite(c) for c in node.children])
    if isinstance(node, Join):
        return _push_into_join(
            Join(_rewrite(node.left), _rewrite(node.right), node.kind,
                 None if node.condition is None else fold(node.condition)),
            [],
        )
    if isinstance(node, LookupJoin):
        return LookupJoin(_rewrite(node.left), node.table, node.kind, node.keys, node.columns,
                          None if node.residual is None else fold(node.residual))
    if isinstance(node, TemporalJoin):
        return TemporalJoin(_rewrite(node.left), _rewrite(node.right), node.kind, node.left_keys,
                            node.right_keys, None if node.residual is None else fold(node.residual))
    if isinstance(node, Sink):
        return Sink(_rewrite(node.input), node.table, node.options)
    if hasattr(node, "with_inputs"):  # nodes defined outside this module (planner.over)
        return node.with_inputs([_rewrite(i) for i in node.inputs])
    return node


def _push_filter(pred: Expr, node: LogicalNode) -> LogicalNode:
    if _is_true(pred):
        return node
    if isinstance(node, Filter):
        return _push_filter(Call("AND", (node.predicate, pred), pa.bool_()), node.input)
    if isinstance(node, Project) and all(_deterministic(e) for e in node.exprs):
        inner_pred = fold(substitute(pred, node.exprs))
        return Project(_push_filter(inner_pred, node.input), node.exprs, node.names, node.rowtime_out)
    if isinstance(node, Union):
        return Union([_push_filter(pred, c) for c in node.children])
    if isinstance(node, Join):
        return _push_into_join(node, conjuncts(pred))
    if isinstance(node, WindowTVF) and all(i < len(node.input.schema) for i in referenced_columns(pred)):
        return WindowTVF(_push_filter(pred, node.input), node.window)
    return Filter(node, pred)


def _push_into_join(join: Join, where: list[Expr]) -> LogicalNode:
    """Move WHERE conjuncts (and ON conjuncts of one side) into the join or below it.

    A conjunct may go below a join only on a side whose rows are not padded
    with NULLs: the left of a LEFT join, either side of an INNER join.
    """
    width = len(join.left.schema)
    left_ok = join.kind in ("INNER", "LEFT")
    right_ok = join.kind in ("INNER", "RIGHT")
    to_left: list[Expr] = []
    to_right: list[Expr] = []
    stay_above: list[Expr] = []
    on = conjuncts(join.condition)
    keep_on: list[Expr] = []
    for c in where:
        side = side_of(c, width)
        if side == "left" and left_ok:
            to_left.append(c)
        elif side == "right" and right_ok:
            to_right.append(c)
        elif join.kind == "INNER" and side in ("both", "none"):
            keep_on.append(c)
        else:
            stay_above.append(c)
    for c in on:
        side = side_of(c, width)
        # in ON, a condition on the side whose rows are matched (not preserved) filters that input
        if side == "left" and join.kind in ("INNER", "RIGHT"):
            to_left.append(c)
        elif side == "right" and join.kind in ("INNER", "LEFT"):
            to_right.append(c)
        else:
            keep_on.append(c)
    left = _push_filter(conjoin(to_left), join.left) if to_left else join.left
    shift = {i: i - width for i in range(width, width + len(join.right.schema))}
    right = _push_filter(conjoin([remap_columns(c, shift) for c in to_right]), join.right) if to_right else join.right
    out: LogicalNode = Join(left, right, join.kind, conjoin(keep_on))
    if stay_above:
        out = Filter(out, conjoin(stay_above))
    return out


# ------------------------------------------------------------ projection pruning

def prune(node: LogicalNode, required: set[int]) -> tuple[LogicalNode, dict[int, int]]:
    """Drop columns no ancestor reads.  Returns the new node and old -> new column index."""
    if isinstance(node, Sink):
        child, _ = prune(node.input, set(range(len(node.input.schema))))
        return Sink(child, node.table, node.options), {}
    if isinstance(node, Scan):
        keep = sorted(required) or [0]
        columns = [node.columns[i] for i in keep]
        return Scan(node.table, columns), {old: new for new, old in enumerate(keep)}
    if isinstance(node, Values):
        keep = sorted(required) or [0]
        table = node.table.select(keep)
        return Values(table), {old: new for new, old in enumerate(keep)}
    if isinstance(node, Project):
        keep = sorted(required)
        needed: set[int] = set()
        for i in keep:
            needed |= referenced_columns(node.exprs[i])
        child, mapping = prune(node.input, needed)
        exprs = [remap_columns(node.exprs[i], mapping) for i in keep]
        names = [node.names[i] for i in keep]
        rowtime = keep.index(node.rowtime_out) if node.rowtime_out in keep else None
        out = {old: new for new, old in enumerate(keep)}
        if not keep:
            # nothing read (SELECT COUNT(*)): keep one cheap column so rows still flow
            exprs, names, out = [Literal(0, pa.int32())], ["$zero"], {}
        return Project(child, exprs, names, rowtime), out
    if isinstance(node, Filter):
        needed = set(required) | referenced_columns(node.predicate)
        child, mapping = prune(node.input, needed)
        return Filter(child, remap_columns(node.predicate, mapping)), mapping
    if isinstance(node, WatermarkAssign):
        needed = set(required) | referenced_columns(node.watermark) | {node.rowtime_index}
        child, mapping = prune(node.input, needed)
        return WatermarkAssign(
            child, mapping[node.rowtime_index], remap_columns(node.watermark, mapping), node.idle_timeout_ms,
            node.proctime,
        ), mapping
    if isinstance(node, WindowTVF):
        width = len(node.input.schema)
        needed = {i for i in required if i < width} | {node.window.time_index} | set(node.window.partition_keys)
        child, mapping = prune(node.input, needed)
        new_width = len(child.schema)
        spec = _remap_window(node.window, mapping)
        out = dict(mapping)
        for j in range(3):
            out[width + j] = new_width + j
        return WindowTVF(child, spec), out
    if isinstance(node, WindowAggregate):
        needed = set(node.key_indexes) | {a.arg for a in node.aggs if a.arg is not None}
        if node.input_window is None:
            needed |= {node.window.time_index} | set(node.window.partition_keys)
        else:
            needed |= set(node.input_window)  # cascaded: the window spec's columns are not this input's
        child, mapping = prune(node.input, needed)
        outputs = [o if isinstance(o, str) else mapping[o] for o in node.outputs]
        aggs = [_remap_agg(a, mapping) for a in node.aggs]
        identity = {i: i for i in range(len(node.schema))}
        if node.input_window is None:
            window, input_window = _remap_window(node.window, mapping), None
        else:
            window, input_window = node.window, (mapping[node.input_window[0]], mapping[node.input_window[1]])
        return WindowAggregate(child, window, outputs, node.output_names, aggs, input_window), identity
    if isinstance(node, Aggregate):
        needed = set(node.keys) | {a.arg for a in node.aggs if a.arg is not None}
        child, mapping = prune(node.input, needed)
        identity = {i: i for i in range(len(node.schema))}
        return Aggregate(child, [mapping[k] for k in node.keys], [_remap_agg(a, mapping) for a in node.aggs], node.key_names), identity
    if isinstance(node, Join):
        width = len(node.left.schema)
        needed = set(required) | (referenced_columns(node.condition) if node.condition is not None else set())
        left, lmap = prune(node.left, {i for i in needed if i < width} | _time_columns(node.left))
        right, rmap = prune(node.right, {i - width for i in needed if i >= width} | _time_columns(node.right))
        new_width = len(left.schema)
        mapping = dict(lmap)
        mapping.update({width + old: new_width + new for old, new in rmap.items()})
        condition = None if node.condition is None else remap_columns(node.condition, mapping)
        return Join(left, right, node.kind, condition), mapping
    if isinstance(node, LookupJoin):
        width = len(node.left.schema)
        needed = {i for i in required if i < width} | {k for k, _ in node.keys} | _time_columns(node.left)
        if node.residual is not None:
            needed |= {i for i in referenced_columns(node.residual) if i < width}
        left, lmap = prune(node.left, needed)
        new_width = len(left.schema)
        mapping = dict(lmap)
        mapping.update({width + j: new_width + j for j in range(len(node.columns))})
        residual = None if node.residual is None else remap_columns(node.residual, mapping)
        return LookupJoin(left, node.table, node.kind, [(lmap[k], c) for k, c in node.keys], node.columns, residual), mapping
    if isinstance(node, TemporalJoin):
        width = len(node.left.schema)
        needed = set(required) | set(node.left_keys) | {width + k for k in node.right_keys}
        if node.residual is not None:
            needed |= referenced_columns(node.residual)
        left, lmap = prune(node.left, {i for i in needed if i < width} | _time_columns(node.left))
        right, rmap = prune(node.right, {i - width for i in needed if i >= width} | _time_columns(node.right))
        new_width = len(left.schema)
        mapping = dict(lmap)
        mapping.update({width + old: new_width + new for old, new in rmap.items()})
        residual = None if node.residual is None else remap_columns(node.residual, mapping)
        return TemporalJoin(left, right, node.kind, [lmap[k] for k in node.left_keys],
                            [rmap[k] for k in node.right_keys], residual), mapping
    if isinstance(node, Union):
        children = [prune(c, set(range(len(c.schema))))[0] for c in node.children]
        return Union(children), {i: i for i in range(len(node.schema))}
    if hasattr(node, "prune_columns"):  # nodes defined outside this module (planner.over)
        return node.prune_columns(required, prune)
    raise TypeError(node)


def _time_columns(node: LogicalNode) -> set[int]:
    """A join input keeps its time attribute: the join's output event time may need it."""
    return set() if node.rowtime is None else {node.rowtime}


def _remap_window(w: WindowSpec, mapping: dict[int, int]) -> WindowSpec:
    return WindowSpec(
        w.kind, mapping[w.time_index], w.size_ms, w.slide_ms, w.step_ms, w.gap_ms, w.offset_ms,
        tuple(mapping[k] for k in w.partition_keys),
    )


def _remap_agg(a: AggCall, mapping: dict[int, int]) -> AggCall:
    return AggCall(a.function, None if a.arg is None else mapping[a.arg], a.distinct, a.type, a.name)
