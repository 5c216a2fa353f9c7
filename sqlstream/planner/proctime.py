"""Processing-time attributes: a column computed as ``PROCTIME()`` that a window groups by.

Flink marks ``PROCTIME()`` columns as processing-time attributes, and its window
operators then fire on the wall clock.  Here a window over such a column is
planned as an ordinary event-time window over a watermark assigner in proctime
mode, which is the clock: it stamps each batch's column with the wall clock and
emits the stamp as the watermark, and while its input is idle it advances the
watermark with the clock.  Stamps only grow, so no row is ever late; a window
fires once the clock has passed its end, and the end of a bounded input fires the
rest.  The column only becomes the time attribute where a window is placed on it,
so a view that projects ``PROCTIME()`` for a lookup join keeps its event-time
attribute.
"""

from __future__ import annotations

from sqlstream.core.expressions import Call, ColumnRef
from sqlstream.planner.logical import Filter, LogicalNode, MatchRecognize, Project, WatermarkAssign


def with_proctime_attribute(node: LogicalNode, index: int) -> LogicalNode:
    """``node`` with column ``index`` made its time attribute if that column is a ``PROCTIME()``
    value (and not the time attribute already); otherwise ``node`` as it is."""
    if index == node.rowtime or not _is_proctime_column(node, index):
        return node
    column = ColumnRef(index, node.schema.names[index], node.schema.field(index).type)
    return WatermarkAssign(node, index, column, proctime=True)


def _is_proctime_column(node: LogicalNode, index: int) -> bool:
    """Whether column ``index`` of ``node`` is a ``PROCTIME()`` value passed through unchanged."""
    while True:
        if isinstance(node, Project):
            expr = node.exprs[index]
            if isinstance(expr, Call) and expr.name == "PROCTIME" and not expr.args:
                return True
            if not isinstance(expr, ColumnRef):
                return False
            node, index = node.input, expr.index
        elif isinstance(node, (Filter, WatermarkAssign)):
            node = node.input
        elif isinstance(node, MatchRecognize):
            # MATCH_PROCTIME() is a processing-time attribute (Flink)
            measure = index - len(node.partition_keys)
            expr = node.measures[measure] if measure >= 0 else None
            return isinstance(expr, Call) and expr.name == "PROCTIME" and not expr.args
        else:
            return False
