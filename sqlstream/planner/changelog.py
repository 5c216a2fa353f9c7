"""Changelog checks: which results update, and which sinks can take updates."""

from __future__ import annotations

from sqlstream.core.aggregates import retraction_refusal
from sqlstream.core.connectors import connector_spec
from sqlstream.core.errors import PlanError
from sqlstream.planner.logical import Aggregate, LogicalNode, Sink, WindowAggregate


def _first_updating(node: LogicalNode) -> LogicalNode | None:
    """The lowest node that turns an append-only stream into an updating one."""
    for child in node.inputs:
        found = _first_updating(child)
        if found is not None:
            return found
    if node.updating and not any(c.updating for c in node.inputs):
        return node
    return None


def check_sink(root: Sink) -> None:
    _check_retractions(root)
    if root.table is None or not root.input.updating:
        return

    connector = connector_spec(root.table.connector)
    if not connector.sink_accepts_updates(root.table):
        producer = _first_updating(root.input)
        what = producer.describe() if producer is not None else "the query"
        raise PlanError(
            f"table sink '{root.table.name}' (connector '{root.table.connector}') is append-only and "
            f"cannot consume the update changes produced by {what}. Use a windowed aggregation "
            "(TABLE(TUMBLE(...)) ... GROUP BY window_start, window_end, ...) for append-only results, "
            "or a sink that accepts updates (e.g. 'print', 'blackhole', 'upsert-kafka', or a changelog format "
            "such as 'format' = 'debezium-json')."
        )
    if connector.updates_need_primary_key and not root.table.primary_key:
        producer = _first_updating(root.input)
        what = producer.describe() if producer is not None else "the query"
        raise PlanError(
            f"table sink '{root.table.name}' (connector '{root.table.connector}') applies updates by its primary "
            f"key, and has none, so it cannot consume the update changes produced by {what}. Declare "
            "PRIMARY KEY (...) NOT ENFORCED on the table (an upsert sink), or write an append-only result."
        )


def _check_retractions(node: LogicalNode) -> None:
    for child in node.inputs:
        _check_retractions(child)
    if isinstance(node, Aggregate) and node.input.updating:
        for a in node.aggs:
            refusal = retraction_refusal(a)
            if refusal is not None:
                raise PlanError(f"{a.describe()} over an updating input (an aggregate of an aggregate, a join's "
                                f"or a Top-N's changes) is not supported: {refusal}")
    if isinstance(node, WindowAggregate) and node.input.updating:
        for a in node.aggs:
            refusal = retraction_refusal(a)
            if refusal is not None:
                raise PlanError(f"{a.describe()} in a window aggregation over an updating input is not supported: "
                                f"{refusal}")
