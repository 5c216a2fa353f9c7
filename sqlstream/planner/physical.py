"""Lower an optimized logical plan into a physical dataflow graph.

Nodes are operators (or sources), edges say how records move between them:
``forward`` keeps order and partition, ``hash`` repartitions by key columns
(group and window aggregations), so a job can later run each node as
several parallel subtasks without replanning.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from sqlstream.core.tables import TableDef
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
from sqlstream.runtime.operators.base import Operator


@dataclass
class Exchange:
    upstream: int
    mode: str = "forward"  # forward | hash
    keys: tuple[int, ...] = ()


@dataclass
class SourceSpec:
    """What a source node reads: a catalog table through its connector, or literal rows."""

    table: TableDef | None
    columns: list[str]
    options: dict[str, Any] = field(default_factory=dict)
    values: pa.Table | None = None

    @property
    def bounded_hint(self) -> str:
        return "values" if self.values is not None else (self.table.connector if self.table else "")


@dataclass
class SinkSpec:
    table: TableDef | None  # None: collect to the client
    options: dict[str, Any]
    schema: pa.Schema
    updating: bool


@dataclass
class PhysicalNode:
    id: int
    name: str
    detail: str
    schema: pa.Schema
    inputs: list[Exchange]
    make_operator: Callable[[], Operator] | None = None
    source: SourceSpec | None = None
    sink: SinkSpec | None = None
    parallelism: int = 1


@dataclass
class Dataflow:
    nodes: list[PhysicalNode]

    @property
    def sources(self) -> list[PhysicalNode]:
        return [n for n in self.nodes if n.source is not None]

    @property
    def sinks(self) -> list[PhysicalNode]:
        return [n for n in self.nodes if n.sink is not None]

    def explain(self) -> str:
        lines = []
        for n in self.nodes:
            ins = ", ".join(
                f"{e.mode}{'[' + ','.join(f'${k}' for k in e.keys) + ']' if e.keys else ''} <- #{e.upstream}"
                for e in n.inputs
            )
            lines.append(f"#{n.id} {n.name}: {n.detail}" + (f"  ({ins})" if ins else ""))
        return "\n".join(lines)


class Lowering:
    def __init__(self) -> None:
        self.nodes: list[PhysicalNode] = []

    def add(self, name: str, detail: str, schema: pa.Schema, inputs: list[Exchange], **kw: Any) -> int:
        node = PhysicalNode(len(self.nodes), name, detail, schema, inputs, **kw)
        self.nodes.append(node)
        return node.id

    def lower(self, node: LogicalNode) -> int:
        from sqlstream.runtime.operators.calc import CalcOperator
        from sqlstream.runtime.operators.group_agg import GroupAggOperator
        from sqlstream.runtime.operators.session_agg import SessionWindowAggOperator
        from sqlstream.runtime.operators.union import UnionOperator
        from sqlstream.runtime.operators.watermark import WatermarkAssigner
        from sqlstream.runtime.operators.window_agg import WindowAggOperator, partition_columns
        from sqlstream.runtime.operators.window_tvf import WindowTVFOperator

        schema = node.schema
        if isinstance(node, Scan):
            from sqlstream.runtime.connectors.registry import get_connector

            options = get_connector(node.table.connector).validate(node.table)
            spec = SourceSpec(node.table, list(node.columns), options)
            return self.add(
                "Source", f"{node.table.name} [{node.table.connector}] columns=[{', '.join(node.columns)}]",
                schema, [], source=spec,
            )
        if isinstance(node, Values):
            return self.add("Values", f"rows={node.table.num_rows}", schema, [],
                            source=SourceSpec(None, node.table.column_names, values=node.table))
        if isinstance(node, WatermarkAssign):
            up = self.lower(node.input)
            wm, idle, proctime = node.watermark, node.idle_timeout_ms, node.proctime
            kind = "proctime" if proctime else "rowtime"
            return self.add("WatermarkAssigner", f"{kind}={schema.names[node.rowtime_index]}, watermark={wm}",
                            schema, [Exchange(up)], make_operator=lambda: WatermarkAssigner(wm, idle, proctime))
        if isinstance(node, Project | Filter):
            predicate = None
            exprs = names = None
            inner = node
            if isinstance(inner, Project):
                exprs, names = inner.exprs, inner.names
                inner = inner.input
            if isinstance(inner, Filter):
                predicate = inner.predicate
                inner = inner.input
            up = self.lower(inner)
            parts = []
            if predicate is not None:
                parts.append(f"where={predicate}")
            if exprs is not None:
                parts.append("select=[" + ", ".join(f"{n}={e}" for n, e in zip(names, exprs, strict=True)) + "]")
            return self.add("Calc", ", ".join(parts), schema, [Exchange(up)],
                            make_operator=lambda: CalcOperator(predicate, exprs, names))
        if isinstance(node, WindowTVF):
            up = self.lower(node.input)
            w = node.window
            if w.kind == "SESSION":
                from sqlstream.core.errors import PlanError

                raise PlanError("a SESSION window TVF must be followed by GROUP BY window_start, window_end")
            return self.add("WindowTableFunction", w.describe(), schema, [Exchange(up)],
                            make_operator=lambda: WindowTVFOperator(w, schema))
        if isinstance(node, WindowAggregate):
            up = self.lower(node.input)
            w, outputs, aggs, input_window = node.window, node.outputs, node.aggs, node.input_window
            detail = node_detail(node)
            if w.kind == "SESSION" and input_window is None:
                keys = tuple(node.key_indexes) or tuple(w.partition_keys)
                return self.add("SessionWindowAggregate", detail, schema, [Exchange(up, "hash", keys)],
                                make_operator=lambda: SessionWindowAggOperator(w, outputs, aggs, schema))
            keys = partition_columns(node.key_indexes, input_window)
            return self.add("WindowAggregate", detail, schema, [Exchange(up, "hash", keys)],
                            make_operator=lambda: WindowAggOperator(w, outputs, aggs, schema, input_window))
        if isinstance(node, Aggregate):
            up = self.lower(node.input)
            keys, aggs, retracting = node.keys, node.aggs, node.input.updating
            return self.add("GroupAggregate", node_detail(node), schema, [Exchange(up, "hash", tuple(keys))],
                            make_operator=lambda: GroupAggOperator(keys, aggs, schema, retracting))
        if isinstance(node, Join):
            return self._lower_join(node)
        if isinstance(node, LookupJoin):
            from sqlstream.runtime.connectors.registry import get_connector
            from sqlstream.runtime.operators.lookup_join import LookupJoinOperator

            up = self.lower(node.left)
            table, kind, keys, columns, residual = node.table, node.kind, node.keys, node.columns, node.residual
            options = get_connector(table.connector).validate(table)
            return self.add("LookupJoin", node_detail(node), schema, [Exchange(up)],
                            make_operator=lambda: LookupJoinOperator(table, options, kind, keys, columns, residual, schema))
        if isinstance(node, TemporalJoin):
            from sqlstream.runtime.operators.temporal_join import TemporalJoinOperator

            left, right = self.lower(node.left), self.lower(node.right)
            lt, rt = node.left.rowtime, node.right.rowtime
            kind, lk, rk, residual = node.kind, tuple(node.left_keys), tuple(node.right_keys), node.residual
            widths = (len(node.left.schema), len(node.right.schema))
            return self.add("TemporalJoin", node_detail(node), schema,
                            [Exchange(left, "hash", lk), Exchange(right, "hash", rk)],
                            make_operator=lambda: TemporalJoinOperator(kind, lk, rk, lt, rt, residual, widths, schema))
        if hasattr(node, "lower_node"):  # nodes defined outside this module (planner.over)
            return node.lower_node(self)
        if isinstance(node, Union):
            ups = [self.lower(c) for c in node.children]
            return self.add("Union", f"inputs={len(ups)}", schema, [Exchange(u) for u in ups],
                            make_operator=UnionOperator)
        if isinstance(node, Sink):
            up = self.lower(node.input)
            options: dict[str, Any] = {}
            if node.table is not None:
                from sqlstream.runtime.connectors.registry import get_connector

                options = get_connector(node.table.connector).validate(node.table)
            spec = SinkSpec(node.table, options, node.input.schema, node.input.updating)
            name = node.table.name if node.table else "<client>"
            conn = f" [{node.table.connector}]" if node.table else ""
            return self.add("Sink", f"{name}{conn}", schema, [Exchange(up)], sink=spec)
        raise TypeError(node)


    def _lower_join(self, node: Join) -> int:
        from sqlstream.planner.horizons import join_horizons
        from sqlstream.planner.joins import analyze
        from sqlstream.runtime.operators.interval_join import IntervalJoinOperator
        from sqlstream.runtime.operators.join import RegularJoinOperator
        from sqlstream.runtime.operators.window_join import WindowJoinOperator

        spec = analyze(node)
        left, right = self.lower(node.left), self.lower(node.right)
        ls, rs, schema = node.left.schema, node.right.schema, node.schema
        lk, rk, residual, kind = spec.left_keys, spec.right_keys, spec.residual, spec.kind
        inputs = [Exchange(left, "hash", lk), Exchange(right, "hash", rk)]
        detail = f"{kind}, {spec.describe()}"
        if spec.window is not None:
            ends = (spec.window.left_end, spec.window.right_end)
            return self.add("WindowJoin", detail, schema, inputs,
                            make_operator=lambda: WindowJoinOperator(kind, lk, rk, residual, ends, ls, rs, schema))
        if spec.interval is not None:
            bounds = spec.interval
            return self.add("IntervalJoin", detail, schema, inputs,
                            make_operator=lambda: IntervalJoinOperator(kind, lk, rk, residual, bounds, ls, rs, schema))
        append_only = not (node.left.updating or node.right.updating)
        horizons = join_horizons(node.left, node.right, (lk, rk), residual)
        detail += "".join(f", {h.describe(side)}" for h, side in zip(horizons, ("left", "right"), strict=True) if h)
        return self.add("Join", detail, schema, inputs,
                        make_operator=lambda: RegularJoinOperator(kind, lk, rk, residual, ls, rs, schema,
                                                                  append_only, horizons))


def node_detail(node: LogicalNode) -> str:
    from sqlstream.planner.logical import _describe

    return _describe(node)
