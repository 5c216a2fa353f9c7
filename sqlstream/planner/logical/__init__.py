"""The logical plan: plain data classes, one per relational operator, under one base class
(``base.LogicalNode``).  ``nodes`` holds the relational nodes, ``over`` those of OVER windows."""

from __future__ import annotations

from sqlstream.planner.logical.base import LogicalNode, Prune, WindowColumns, time_columns
from sqlstream.planner.logical.match_recognize import MatchRecognize
from sqlstream.planner.logical.nodes import (
    JOIN_KINDS,
    Aggregate,
    ChangelogNormalize,
    Filter,
    Join,
    LookupJoin,
    Project,
    ReplicateRows,
    Scan,
    SemiJoin,
    Sink,
    TemporalJoin,
    Union,
    Unnest,
    Values,
    WatermarkAssign,
    WindowAggregate,
    WindowTVF,
)
from sqlstream.planner.logical.over import (
    TOP_N_HINT,
    OverAggregate,
    OverFrame,
    Rank,
    SortKey,
    StreamSort,
)

__all__ = [
    "JOIN_KINDS", "TOP_N_HINT", "Aggregate", "ChangelogNormalize", "Filter", "Join", "LogicalNode", "LookupJoin", "MatchRecognize",
    "OverAggregate",
    "OverFrame", "Project", "Prune", "Rank", "ReplicateRows", "Scan", "SemiJoin", "Sink", "SortKey", "StreamSort", "TemporalJoin", "Union", "Unnest",
    "Values", "WatermarkAssign", "WindowAggregate", "WindowColumns", "WindowTVF", "explain", "time_columns",
]


def explain(node: LogicalNode, indent: int = 0) -> str:
    """An indented text tree of a logical plan (EXPLAIN)."""
    pad = "  " * indent
    line = pad + node.describe()
    if node.updating and not isinstance(node, Sink):
        line += "  [changelog]"
    return "\n".join([line] + [explain(i, indent + 1) for i in node.inputs])
