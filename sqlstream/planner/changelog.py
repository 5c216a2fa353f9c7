"""Changelog checks: which results update, and which sinks can take updates."""

from __future__ import annotations

from collections.abc import Mapping

from sqlstream.core.aggregates import retraction_refusal
from sqlstream.core.config import setting
from sqlstream.core.connectors import connector_spec
from sqlstream.core.errors import PlanError
from sqlstream.core.expressions import ColumnRef, referenced_columns
from sqlstream.planner.joins import analyze
from sqlstream.planner.logical import (
    Aggregate,
    ChangelogNormalize,
    Filter,
    Join,
    LogicalNode,
    Project,
    Rank,
    Scan,
    SemiJoin,
    Sink,
    Union,
    WatermarkAssign,
    WindowAggregate,
)

# a set of output columns that identifies each row of an updating result (Flink's upsert key)
UpsertKey = frozenset[int]


def _first_updating(node: LogicalNode) -> LogicalNode | None:
    """The lowest node that turns an append-only stream into an updating one."""
    for child in node.inputs:
        found = _first_updating(child)
        if found is not None:
            return found
    if node.updating and not any(c.updating for c in node.inputs):
        return node
    return None


def check_sink(root: Sink, settings: Mapping[str, str] | None = None) -> None:
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
    if root.table.primary_key and connector.changelog_mode(root.table) != "all":
        _check_upsert_key(root, settings or {})


def _check_upsert_key(root: Sink, settings: Mapping[str, str]) -> None:
    """Flink 2.3 (FLIP-558): an updating query into an upsert sink (a PRIMARY KEY, no -U rows: every
    sink with a key here but a changelog format's) whose changes are keyed by other columns than the
    sink's key, so that two rows of the query can meet under one key of the table, is refused unless
    the INSERT says ON CONFLICT; with 'table.exec.sink.require-on-conflict' false Flink materializes
    the sink's input instead (SinkUpsertMaterializer), with 'table.exec.sink.upsert-materialize' NONE
    it writes the changes as they arrive.  Where this planner cannot tell the query's upsert keys
    (see :func:`upsert_keys`) the query is written as it arrives."""
    if setting(settings, "table.exec.sink.upsert-materialize") == "none":
        return
    keys = upsert_keys(root.input)
    if keys is None:
        return
    names = root.input.schema.names
    lowered = [n.lower() for n in names]
    primary = frozenset(lowered.index(k.lower()) for k in root.table.primary_key)
    if any(k <= primary for k in keys):
        return
    shown = f"[{', '.join(names[i] for i in sorted(keys[0]))}]" if keys else "none" if _keyless_source(root.input) else ""
    flink = (f"The query has an upsert key that differs from the primary key of the sink table '{root.table.name}'. "
             f"Primary key: [{', '.join(root.table.primary_key)}], upsert key: {shown}. ")
    if setting(settings, "table.exec.sink.require-on-conflict"):
        raise PlanError(
            flink + "This can lead to non-deterministic results when multiple records with different upsert keys "
            "map to the same primary key. Please specify an ON CONFLICT clause to define how conflicts should be "
            "handled (Flink: ON CONFLICT DO DEDUPLICATE, DO ERROR or DO NOTHING). sqlstream has no ON CONFLICT "
            "clause: key the query by the sink's primary key, or SET 'table.exec.sink.upsert-materialize' = 'NONE' "
            "to write the changes as they arrive, as Flink then does."
        )
    raise PlanError(
        flink + "With 'table.exec.sink.require-on-conflict' false Flink materializes the sink's input here "
        "(SinkUpsertMaterializer), which sqlstream does not have; SET 'table.exec.sink.upsert-materialize' = 'NONE' "
        "to write the changes as they arrive."
    )


def _keyless_source(node: LogicalNode) -> bool:
    """Whether the rows come straight from a table without PRIMARY KEY (Flink then knows no upsert key at all
    and names it 'none'; a key lost on the way it names as empty)."""
    while isinstance(node, Filter | WatermarkAssign | Project):
        node = node.input
    return isinstance(node, Scan) and not node.table.primary_key


def upsert_keys(node: LogicalNode) -> list[UpsertKey] | None:
    """The column sets that identify a row of ``node``'s changelog (Flink's FlinkRelMdUpsertKeys), as far
    as this planner knows them: ``[]`` when none does (a union, a key projected away, a Top-N without its
    rank number, a table without PRIMARY KEY), None when it cannot tell (the nodes not listed here)."""
    if isinstance(node, Aggregate):
        return [frozenset(range(len(node.keys)))]  # no GROUP BY: the one row, keyed by nothing
    if isinstance(node, ChangelogNormalize):
        return [frozenset(node.keys)]
    if isinstance(node, Scan):
        position = {c.lower(): i for i, c in enumerate(node.columns)}
        if node.table.primary_key and all(k.lower() in position for k in node.table.primary_key):
            return [frozenset(position[k.lower()] for k in node.table.primary_key)]
        return []  # a table without key: rows may repeat
    if isinstance(node, Join):
        return _join_keys(node)
    if isinstance(node, SemiJoin):
        return upsert_keys(node.left)  # the left rows that have (or lack) a match
    if isinstance(node, Filter | WatermarkAssign):
        return upsert_keys(node.input)
    if isinstance(node, Project):
        return _projected_keys(node)
    if isinstance(node, Rank):
        if node.strategy != "topn" or (node.rank_start, node.rank_end) == (1, 1):
            return [frozenset(node.partition_keys)]  # one row per partition
        if node.output_rank:
            return [frozenset([*node.partition_keys, len(node.input.schema)])]
        return []
    if isinstance(node, Union):
        return []
    return None


def _join_keys(node: Join) -> list[UpsertKey] | None:
    """A regular equi-join's (Flink's FlinkRelMdUniqueKeys.getJoinUniqueKeys): a left key joined with a
    right key identifies a joined row; a side's keys alone do when the other side's join columns hold
    one of its keys (each row meets at most one row there) and that side is not NULL-padded."""
    spec = analyze(node)
    if spec.interval is not None or spec.window is not None:
        return None
    left, right = upsert_keys(node.left), upsert_keys(node.right)
    if left is None or right is None:
        return None
    width = len(node.left.schema)
    shifted = [frozenset(width + i for i in k) for k in right]
    out = [lk | rk for lk in left for rk in shifted]
    if any(k <= set(spec.right_keys) for k in right) and node.kind in ("INNER", "LEFT"):
        out += left
    if any(k <= set(spec.left_keys) for k in left) and node.kind in ("INNER", "RIGHT"):
        out += shifted
    return out


def _projected_keys(node: Project) -> list[UpsertKey] | None:
    """The input's upsert keys whose columns the projection passes on; None if a key column is only
    read inside an expression (which Flink may see through: a cast, ``a + 0``)."""
    keys = upsert_keys(node.input)
    if keys is None:
        return None
    position: dict[int, int] = {}
    read: set[int] = set()
    for i, e in enumerate(node.exprs):
        if isinstance(e, ColumnRef):
            position.setdefault(e.index, i)
        read |= referenced_columns(e)
    out: list[UpsertKey] = []
    unsure = False
    for key in keys:
        if key <= position.keys():
            out.append(frozenset(position[k] for k in key))
        elif all(k in position or k not in read for k in key):
            continue  # a key column is gone
        else:
            unsure = True
    return out if out or not unsure else None


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
