"""Logical rewrites, as an ordered list of passes (one module each), in the manner of sqlglot's
optimizer: each pass takes a plan and returns an equivalent one.

Each pass preserves results; filters are never pushed below a watermark assigner, because rows
dropped there would no longer advance event time.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlstream.planner.logical import LogicalNode
from sqlstream.planner.optimizer.constant_folding import fold_constants
from sqlstream.planner.optimizer.predicate_pushdown import push_down_predicates
from sqlstream.planner.optimizer.projection_merge import merge_projections
from sqlstream.planner.optimizer.projection_pruning import prune_projections

# in order: folded constants make more filters pushable; filters pushed below projections leave
# projections next to each other, which are merged next; pruning last drops what the rewritten
# plan no longer reads
PASSES: tuple[Callable[[LogicalNode], LogicalNode], ...] = (
    fold_constants,
    push_down_predicates,
    merge_projections,
    prune_projections,
)


def optimize(root: LogicalNode) -> LogicalNode:
    for rewrite in PASSES:
        root = rewrite(root)
    return root
