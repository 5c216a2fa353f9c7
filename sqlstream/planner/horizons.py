"""When a regular join may forget a stored row: horizons from columns the watermark bounds.

A regular join keeps every row of both inputs, since any later row of the
other side might match it.  Some columns, though, only ever grow past the
watermark: a window aggregation emits each window once, when the watermark
passes its end, and drops the rows that arrive after that, so every row it
sends after watermark W has ``window_end > W + 1`` and ``window_time > W``.
When the join condition bounds a column of the stored row by such a column
of the other side from above — Nexmark q7's ``B.dateTime BETWEEN
B1.dateTime - INTERVAL '10' SECOND AND B1.dateTime`` where ``B1.dateTime``
is a window_end — a stored row whose column has fallen further behind the
watermark than the bound allows can never match again.  Dropping it changes
no result: the condition is still evaluated in full on every pair.  Flink
keeps such rows until state TTL (if any); this keeps state flat.

The watermark the join sees is the minimum over its inputs, never ahead of
the other side's own, so the horizon is safe with several inputs and subtasks.
"""

from __future__ import annotations

import pyarrow as pa

from sqlstream.core.expressions import ColumnRef, Expr
from sqlstream.core.joins import Horizon
from sqlstream.planner.joins import _bound, _time_offset, conjuncts
from sqlstream.planner.logical import Filter, LogicalNode, Project, WindowAggregate

# the least value a later row can have in a window column, relative to the watermark W (ms)
_MARGIN = {"window_end": 1, "window_time": 0}


def watermark_bounded(node: LogicalNode, index: int) -> int | None:
    """The margin m such that rows sent after watermark W have column ``index`` >= W + m,
    if the column is a window_end / window_time a window aggregation emits; else None."""
    while True:
        if isinstance(node, Filter):
            node = node.input
        elif isinstance(node, Project):
            e = node.exprs[index]
            if not isinstance(e, ColumnRef):
                return None
            node, index = node.input, e.index
        elif isinstance(node, WindowAggregate):
            if node.window.zone not in (None, "UTC"):
                # bounds in a zone's wall-clock time are not on the watermark's scale, and window_time
                # of a window over a repeated hour is before the watermark that fires it
                return None
            role = node.outputs[index] if index < len(node.outputs) else None
            return _MARGIN.get(role) if isinstance(role, str) else None
        else:
            return None


def join_horizons(left: LogicalNode, right: LogicalNode, keys: tuple[tuple[int, ...], tuple[int, ...]],
                  residual: Expr | None) -> tuple[Horizon | None, Horizon | None]:
    """For each side, the horizon its stored rows get from the condition (or None).

    Bounds come from residual comparisons of two time columns and from equi-key pairs of
    time columns (``l.window_end = r.window_end``: a difference of exactly 0).
    """
    width = len(left.schema)
    bounds: list[tuple[int, int, int | None, int | None]] = []  # (left col, right col, lower, upper)
    for lcol, rcol in zip(*keys, strict=True):
        bounds.append((lcol, rcol, 0, 0))
    for c in conjuncts(residual):
        columns = [_time_offset(a) for a in getattr(c, "args", ())[:2]]
        if len(columns) != 2 or None in columns:
            continue
        (ia, _), (ib, _) = columns  # type: ignore[misc]
        if (ia < width) == (ib < width):
            continue
        lcol, rcol = (ia, ib - width) if ia < width else (ib, ia - width)
        bound = _bound(c, width, lcol, rcol)  # lower <= left - right <= upper
        if bound is not None:
            bounds.append((lcol, rcol, *bound))
    found: list[Horizon | None] = [None, None]
    for lcol, rcol, lower, upper in bounds:
        if not (_is_time(left.schema.field(lcol).type) and _is_time(right.schema.field(rcol).type)):
            continue
        # stored left row: right <= left - lower, and later right rows are >= W + margin
        margin = watermark_bounded(right, rcol)
        if lower is not None and margin is not None:
            found[0] = _tighter(found[0], Horizon(lcol, margin + lower))
        # stored right row: left <= right + upper, and later left rows are >= W + margin
        margin = watermark_bounded(left, lcol)
        if upper is not None and margin is not None:
            found[1] = _tighter(found[1], Horizon(rcol, margin - upper))
    return found[0], found[1]


def _is_time(t: pa.DataType) -> bool:
    return pa.types.is_timestamp(t)


def _tighter(old: Horizon | None, new: Horizon) -> Horizon:
    """Two horizons on the same rows: a row is dead when either says so."""
    if old is None or (old.column == new.column and new.offset > old.offset):
        return new
    return old
