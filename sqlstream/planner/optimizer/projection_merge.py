"""Projection merging: a projection over a deterministic projection becomes one projection."""

from __future__ import annotations

from sqlstream.core.expressions import substitute
from sqlstream.planner.logical import LogicalNode, Project
from sqlstream.planner.optimizer.constant_folding import deterministic, fold


def merge_projections(node: LogicalNode) -> LogicalNode:
    node = node.with_inputs([merge_projections(i) for i in node.inputs])
    if isinstance(node, Project) and isinstance(node.input, Project) and all(
            deterministic(e) for e in node.input.exprs):
        inner = node.input
        return Project(inner.input, [fold(substitute(e, inner.exprs)) for e in node.exprs], node.names,
                       node.rowtime_out)
    return node
