"""Projection pruning: every node reads only the columns some ancestor needs (scans read fewer
columns from their connectors)."""

from __future__ import annotations

from sqlstream.planner.logical import LogicalNode


def prune(node: LogicalNode, required: set[int]) -> tuple[LogicalNode, dict[int, int]]:
    """Drop columns no ancestor reads.  Returns the new node and old -> new column index."""
    return node.prune_columns(required, prune)


def prune_projections(root: LogicalNode) -> LogicalNode:
    return prune(root, set(range(len(root.schema))))[0]
