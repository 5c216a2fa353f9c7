"""Predicate pushdown: filters merge, move below projections, unions, window TVFs and UNNEST (when
they read only the unnested row's columns), and into joins (or below them, on the sides whose
rows are not NULL-padded)."""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa

from sqlstream.core.expressions import (
    Call,
    Expr,
    Literal,
    referenced_columns,
    remap_columns,
    substitute,
)
from sqlstream.planner.joins import conjoin, conjuncts, side_of
from sqlstream.planner.logical import (
    Filter,
    Join,
    LogicalNode,
    Project,
    Scan,
    Union,
    Unnest,
    WatermarkAssign,
    WindowTVF,
)
from sqlstream.planner.optimizer.constant_folding import deterministic, fold


def push_down_predicates(node: LogicalNode) -> LogicalNode:
    node = node.with_inputs([push_down_predicates(i) for i in node.inputs])
    if isinstance(node, Filter):
        return _push_filter(node.predicate, node.input)
    if isinstance(node, Join):
        return _push_into_join(node, [])
    return node


def _is_true(e: Expr) -> bool:
    return isinstance(e, Literal) and e.value is True


def _push_filter(pred: Expr, node: LogicalNode) -> LogicalNode:
    if _is_true(pred):
        return node
    if isinstance(node, Filter):
        return _push_filter(Call("AND", (node.predicate, pred), pa.bool_()), node.input)
    if isinstance(node, Project) and all(deterministic(e) for e in node.exprs):
        inner_pred = fold(substitute(pred, node.exprs))
        return Project(_push_filter(inner_pred, node.input), node.exprs, node.names, node.rowtime_out)
    if isinstance(node, Union):
        return Union([_push_filter(pred, c) for c in node.children])
    if isinstance(node, Join):
        return _push_into_join(node, conjuncts(pred))
    if isinstance(node, WindowTVF) and all(i < len(node.input.schema) for i in referenced_columns(pred)):
        return WindowTVF(_push_filter(pred, node.input), node.window)
    if isinstance(node, Unnest):
        # a condition on the unnested row's own columns holds for all its elements (and its padding)
        width = len(node.input.schema)
        parts = conjuncts(pred)
        below = [c for c in parts if all(i < width for i in referenced_columns(c))]
        if below:
            node = replace(node, input=_push_filter(conjoin(below), node.input))
            above = [c for c in parts if not any(c is b for b in below)]
            return Filter(node, conjoin(above)) if above else node
    return Filter(_prune_below(pred, node), pred)


def _prune_below(pred: Expr, node: LogicalNode) -> LogicalNode:
    """``node`` with the partitioned scan it reads (through watermark assigners and projections,
    which the filter itself does not cross) listing only the partitions ``pred`` can keep: as in
    Flink, partition pruning also applies below a WATERMARK, whose source never reads those rows."""
    if isinstance(node, Scan) and node.table.partition_keys:
        return _prune_partitions(node, pred)
    if isinstance(node, WatermarkAssign):
        return replace(node, input=_prune_below(pred, node.input))
    if isinstance(node, Project) and all(deterministic(e) for e in node.exprs):
        return replace(node, input=_prune_below(fold(substitute(pred, node.exprs)), node.input))
    return node


def _prune_partitions(scan: Scan, pred: Expr) -> Scan:
    """The scan with the conjuncts of ``pred`` that read only partition columns as its partition
    filter (re-indexed to PARTITIONED BY order); the Filter above keeps all of ``pred``."""
    keys = [k.lower() for k in scan.table.partition_keys]
    position = {i: keys.index(c.lower()) for i, c in enumerate(scan.columns) if c.lower() in keys}
    usable = [
        remap_columns(c, position)
        for c in conjuncts(pred)
        if referenced_columns(c) and referenced_columns(c) <= position.keys() and deterministic(c)
    ]
    if not usable:
        return scan
    if scan.partition_filter is not None:
        usable.insert(0, scan.partition_filter)
    return replace(scan, partition_filter=conjoin(usable))


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
    out: LogicalNode = Join(left, right, join.kind, conjoin(keep_on), join.state_ttl_ms)
    if stay_above:
        out = Filter(out, conjoin(stay_above))
    return out
