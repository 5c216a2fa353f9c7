"""Lower an optimized logical plan into a physical dataflow (``sqlstream.core.physical``).

The planner decides here: each logical node becomes an operator kind with a typed config,
including the choices that depend on the job's settings (state TTL, and the columnar state
form where the state backend keeps Arrow tables and the operator has one); the runtime only
builds and runs what the config says.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from sqlstream.core.aggregates import (
    AggCall,
    group_agg_columnar,
    group_agg_columnar_rows,
    rank_columnar_rows,
    window_agg_columnar,
    window_agg_columnar_rows,
)
from sqlstream.core.config import setting
from sqlstream.core.connectors import connector_spec
from sqlstream.core.durations import parse_duration_ms
from sqlstream.core.errors import PlanError
from sqlstream.core.joins import join_columnar_rows
from sqlstream.core.physical import (
    CalcConfig,
    ChangelogNormalizeConfig,
    DeduplicateFirstConfig,
    Exchange,
    GroupAggConfig,
    IntervalJoinConfig,
    LimitConfig,
    LookupJoinConfig,
    MatchRecognizeConfig,
    NotNullEnforcerConfig,
    OperatorConfig,
    OverAggConfig,
    PhysicalNode,
    RegularJoinConfig,
    ReplicateRowsConfig,
    SessionWindowAggConfig,
    SinkSpec,
    SourceSpec,
    StreamSortConfig,
    TemporalJoinConfig,
    TopNConfig,
    UnionConfig,
    UnnestConfig,
    WatermarkConfig,
    WindowAggConfig,
    WindowJoinConfig,
    WindowRankConfig,
    WindowTVFConfig,
    parallelisms,
)
from sqlstream.core.state_backends import capabilities
from sqlstream.core.tables import TableDef
from sqlstream.core.types import is_nested, sql_type_name
from sqlstream.core.windows import partition_columns
from sqlstream.planner.horizons import join_horizons
from sqlstream.planner.joins import analyze
from sqlstream.planner.logical import (
    Aggregate,
    ChangelogNormalize,
    Filter,
    Join,
    LogicalNode,
    LookupJoin,
    MatchRecognize,
    OverAggregate,
    Project,
    Rank,
    ReplicateRows,
    Scan,
    SemiJoin,
    Sink,
    StreamSort,
    TemporalJoin,
    Union,
    Unnest,
    Values,
    WatermarkAssign,
    WindowAggregate,
    WindowTVF,
)


class Lowering:
    def __init__(self, settings: Mapping[str, str] | None = None) -> None:
        self.nodes: list[PhysicalNode] = []
        settings = settings or {}
        self.columnar_state = capabilities(settings).columnar
        self.columnar_rows = capabilities(settings).columnar_rows
        ttl = settings.get("table.exec.state.ttl")
        try:
            ttl_ms = parse_duration_ms(ttl) if ttl else 0
        except ValueError as e:
            raise PlanError(f"table.exec.state.ttl: {e}") from None
        # Flink: how long a key's state lives unwritten; 0 (the default) keeps it forever
        self.state_ttl_ms = ttl_ms if ttl_ms > 0 else None
        idle = settings.get("table.exec.source.idle-timeout")
        try:
            idle_ms = parse_duration_ms(idle) if idle else 0
        except ValueError as e:
            raise PlanError(f"table.exec.source.idle-timeout: {e}") from None
        # Flink: a source split without data for this long stops holding the watermark back
        # (0, the default, never); a table's 'scan.watermark.idle-timeout' takes precedence
        self.source_idle_timeout_ms = idle_ms if idle_ms > 0 else None
        # Flink: a NULL written into a NOT NULL sink column fails the job, or is dropped with DROP
        enforcer = settings.get("table.exec.sink.not-null-enforcer", "ERROR").strip().upper()
        if enforcer not in ("ERROR", "DROP"):
            raise PlanError(
                f"table.exec.sink.not-null-enforcer: '{settings['table.exec.sink.not-null-enforcer']}' "
                "is not one of ERROR, DROP"
            )
        self.not_null_enforcer = enforcer
        self.default_parallelism: int = setting(settings, "parallelism.default")
        self.keyed_shuffle: str = setting(settings, "table.exec.sink.keyed-shuffle")

    def add(self, name: str, detail: str, schema: pa.Schema, inputs: list[Exchange],
            config: OperatorConfig | None = None, **kw: Any) -> int:
        for exchange in inputs:
            upstream = self.nodes[exchange.upstream].schema
            for k in exchange.keys:
                if is_nested(upstream.field(k).type):
                    # rows are routed and keyed state is found by the key's hash; nested values have none
                    raise PlanError(f"{name}: keying rows by the {sql_type_name(upstream.field(k).type)} column "
                                    f"'{upstream.field(k).name}' (GROUP BY, DISTINCT, PARTITION BY or a join key) "
                                    "is not supported; key by its elements or fields instead")
        node = PhysicalNode(len(self.nodes), name, detail, schema, inputs, config, **kw)
        self.nodes.append(node)
        return node.id

    def lower(self, node: LogicalNode) -> int:
        schema = node.schema
        if isinstance(node, Scan):
            options = connector_spec(node.table.connector).validate(node.table)
            spec = SourceSpec(node.table, list(node.columns), options, partition_filter=node.partition_filter)
            return self.add(
                "Source", f"{node.table.name} [{node.table.connector}] columns=[{', '.join(node.columns)}]"
                f"{node.partitions_text()}",
                schema, [], source=spec,
            )
        if isinstance(node, Values):
            return self.add("Values", f"rows={node.table.num_rows}", schema, [],
                            source=SourceSpec(None, node.table.column_names, values=node.table))
        if isinstance(node, WatermarkAssign):
            up = self.lower(node.input)
            kind = "proctime" if node.proctime else "rowtime"
            idle = node.idle_timeout_ms if node.idle_timeout_ms is not None else self.source_idle_timeout_ms
            return self.add("WatermarkAssigner", f"{kind}={schema.names[node.rowtime_index]}, watermark={node.watermark}",
                            schema, [Exchange(up)],
                            config=WatermarkConfig(node.watermark, idle, node.proctime))
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
                            config=CalcConfig(predicate, exprs, names))
        if isinstance(node, WindowTVF):
            up = self.lower(node.input)
            w = node.window
            if w.kind == "SESSION":
                raise PlanError("a SESSION window TVF must be followed by GROUP BY window_start, window_end")
            return self.add("WindowTableFunction", w.describe(), schema, [Exchange(up)], config=WindowTVFConfig(w))
        if isinstance(node, WindowAggregate):
            up = self.lower(node.input)
            w, input_window = node.window, node.input_window
            detail = node.describe()
            if w.kind == "SESSION" and input_window is None:
                keys = tuple(node.key_indexes) or tuple(w.partition_keys)
                return self.add("SessionWindowAggregate", detail, schema, [Exchange(up, "hash", keys)],
                                config=SessionWindowAggConfig(w, node.outputs, node.aggs, node.input.updating))
            keys = partition_columns(node.key_indexes, input_window)
            retracting = node.input.updating
            key_types = [schema.field(i).type for i, o in enumerate(node.outputs) if isinstance(o, int)]
            columnar = not retracting and self.window_agg_columnar(node.aggs, key_types)
            return self.add("WindowAggregate", detail, schema, [Exchange(up, "hash", keys)],
                            config=WindowAggConfig(w, node.outputs, node.aggs, input_window, columnar, retracting))
        if isinstance(node, ChangelogNormalize):
            up = self.lower(node.input)
            return self.add("ChangelogNormalize", node.describe(), schema, [Exchange(up, "hash", tuple(node.keys))],
                            config=ChangelogNormalizeConfig(node.keys, self.state_ttl_ms))
        if isinstance(node, Aggregate):
            up = self.lower(node.input)
            retracting = node.input.updating
            columnar = self.group_agg_columnar(node.aggs, retracting, [f.type for f in schema][: len(node.keys)],
                                               self.nodes[up].schema.types)
            return self.add("GroupAggregate", node.describe(), schema, [Exchange(up, "hash", tuple(node.keys))],
                            config=GroupAggConfig(node.keys, node.aggs, retracting, self._ttl(node.state_ttl_ms),
                                                  columnar))
        if isinstance(node, Join):
            return self._lower_join(node)
        if isinstance(node, SemiJoin):
            return self._lower_semi_join(node)
        if isinstance(node, LookupJoin):
            up = self.lower(node.left)
            table = node.table
            options = connector_spec(table.connector).validate(table)
            return self.add("LookupJoin", node.describe(), schema, [Exchange(up)],
                            config=LookupJoinConfig(table, options, node.kind, node.keys, node.columns, node.residual))
        if isinstance(node, TemporalJoin):
            left, right = self.lower(node.left), self.lower(node.right)
            lk, rk = tuple(node.left_keys), tuple(node.right_keys)
            widths = (len(node.left.schema), len(node.right.schema))
            config = TemporalJoinConfig(node.kind, lk, rk, node.left.rowtime, node.right.rowtime, node.residual, widths)
            return self.add("TemporalJoin", node.describe(), schema,
                            [Exchange(left, "hash", lk), Exchange(right, "hash", rk)], config=config)
        if isinstance(node, OverAggregate):
            up = self.lower(node.input)
            keys, frame = node.partition_keys, node.frame
            return self.add("OverAggregate", node.describe(), schema, [Exchange(up, "hash", tuple(keys))],
                            config=OverAggConfig(keys, node.time_index, frame.kind, frame.preceding, node.aggs))
        if isinstance(node, MatchRecognize):
            up = self.lower(node.input)
            keys = tuple(node.partition_keys)  # no PARTITION BY: one subtask (a hash exchange without keys)
            config = MatchRecognizeConfig(node.partition_keys, node.time_index, len(node.input.schema), node.pattern, node.defines,
                                          node.navigations, node.navigation_types, node.primitives, node.primitive_types, node.measures,
                                          node.skip, node.within_ms, node.tie_order)
            return self.add("MatchRecognize", node.describe(), schema, [Exchange(up, "hash", keys)], config=config)
        if isinstance(node, Rank):
            return self._lower_rank(node)
        if isinstance(node, StreamSort):
            up = self.lower(node.input)
            # one global subtask: a hash exchange without keys
            inputs = [Exchange(up, "hash", ())]
            if not node.order:
                assert node.limit is not None
                return self.add("Limit", node.describe(), schema, inputs, config=LimitConfig(node.limit))
            sort = [(k.index, k.descending, k.nulls_first) for k in node.order]
            _require_sortable(node.input.schema, sort)
            return self.add("Sort", node.describe(), schema, inputs, config=StreamSortConfig(sort, node.limit))
        if isinstance(node, ReplicateRows):
            up = self.lower(node.input)
            return self.add("ReplicateRows", node.describe(), schema, [Exchange(up)],
                            config=ReplicateRowsConfig(node.times))
        if isinstance(node, Unnest):
            up = self.lower(node.input)
            return self.add("Unnest", node.describe(), schema, [Exchange(up)],
                            config=UnnestConfig(node.collection, node.ordinality, node.left))
        if isinstance(node, Union):
            ups = [self.lower(c) for c in node.children]
            return self.add("Union", f"inputs={len(ups)}", schema, [Exchange(u) for u in ups], config=UnionConfig())
        if isinstance(node, Sink):
            up = self.lower(node.input)
            if node.table is not None:
                up = self._enforce_not_null(up, node.table, node.input.schema)
            options: dict[str, Any] = {}
            if node.table is not None:
                options = connector_spec(node.table.connector).validate(node.table)
            spec = SinkSpec(node.table, options, node.input.schema, node.input.updating)
            name = node.table.name if node.table else "<client>"
            conn = f" [{node.table.connector}]" if node.table else ""
            exchange = Exchange(up)
            names = [n.lower() for n in node.input.schema.names]
            if node.table is not None and node.table.partition_keys and options.get("sink.shuffle-by-partition.enable"):
                # each partition written by one sink subtask (Flink's sink.shuffle-by-partition.enable)
                exchange = Exchange(up, "hash", tuple(names.index(k.lower()) for k in node.table.partition_keys))
            if node.table is not None and node.table.primary_key:
                connector = connector_spec(node.table.connector)
                parallelism = self._keyed_shuffle(up, options, connector.sink_keyed_by_primary_key)
                if parallelism is not None:
                    # each key's changes reach one sink subtask, in the order they were produced
                    exchange = Exchange(up, "hash", tuple(names.index(k.lower()) for k in node.table.primary_key))
                    spec.parallelism = parallelism
            return self.add("Sink", f"{name}{conn}", schema, [exchange], sink=spec)
        raise TypeError(node)

    def _keyed_shuffle(self, up: int, options: Mapping[str, Any], connector_keyed: bool) -> int | None:
        """The sink's parallelism if a sink with a PRIMARY KEY shuffles its rows by that key, else None.

        Flink's CommonExecSink.applyKeyBy: the sink runs at its 'sink.parallelism', else at its
        input's; AUTO shuffles when the two differ (a forward edge between them would deal one key's
        rows round-robin to several subtasks, whose writes then race), FORCE whenever the sink has
        more than one subtask, NONE never; a sink of one subtask receives every row in order anyway.
        ``connector_keyed``: the connector keys its sink's rows itself (Iceberg), at any setting."""
        input_parallelism = parallelisms(self.nodes, self.default_parallelism)[up]
        sink_parallelism = options.get("sink.parallelism") or input_parallelism
        if sink_parallelism == 1:
            return None
        if connector_keyed:
            return sink_parallelism
        if self.keyed_shuffle == "none":
            return None
        if self.keyed_shuffle == "auto" and sink_parallelism == input_parallelism:
            return None
        return sink_parallelism

    def _enforce_not_null(self, up: int, table: TableDef, schema: pa.Schema) -> int:
        """A ConstraintEnforcer before a sink with NOT NULL columns, as Flink plans one."""
        required = [(i, c.name) for i, c in enumerate(table.persisted_columns) if not c.nullable]
        if not required:
            return up
        columns, names = (tuple(x) for x in zip(*required, strict=True))
        detail = f"NotNullEnforcer(fields=[{', '.join(names)}])"
        return self.add("ConstraintEnforcer", detail, schema, [Exchange(up)],
                        config=NotNullEnforcerConfig(columns, names, self.not_null_enforcer))

    def _lower_rank(self, node: Rank) -> int:
        up = self.lower(node.input)
        keys, order, schema = node.partition_keys, node.order, node.schema
        start, end, output_rank = node.rank_start, node.rank_end, node.output_rank
        sort = [(k.index, k.descending, k.nulls_first) for k in order]
        _require_sortable(node.input.schema, sort)
        inputs = [Exchange(up, "hash", tuple(keys))]
        strategy = node.strategy
        if strategy == "window":
            window_end = node.window[1] if node.window is not None else 0
            zone = next((w.window.zone for w in node.input.window_properties if w.end == window_end), None)
            return self.add("WindowRank", node.describe(), schema, inputs,
                            config=WindowRankConfig(keys, window_end, sort, start, end, output_rank, node.newer_wins,
                                                    zone))
        if strategy == "first":
            return self.add("Deduplicate", node.describe(), schema, inputs,
                            config=DeduplicateFirstConfig(keys, order[0].index, output_rank, self.state_ttl_ms))
        retracting = node.input.updating
        assert end is not None  # Rank.with_inputs refused an unbounded ROW_NUMBER
        columnar = self.rank_columnar(retracting, node.input.schema)
        return self.add("Rank", node.describe(), schema, inputs,
                        config=TopNConfig(keys, sort, start, end, output_rank, retracting, node.newer_wins,
                                          self.state_ttl_ms, columnar))

    def rank_columnar(self, retracting: bool, input_schema: pa.Schema) -> bool:
        """Whether a Top-N (or keep-last deduplication) runs its vectorized form on this job's
        backend: over an append-only input, its rows in memory (hashmap), or as rows in RocksDB
        (columns of the types the row encoding has)."""
        if retracting:
            return False
        return self.columnar_state or (self.columnar_rows and rank_columnar_rows(input_schema.types))

    def join_columnar(self, kind: str, append_only: bool, schemas: tuple[pa.Schema, pa.Schema],
                      keys: tuple[tuple[int, ...], tuple[int, ...]]) -> bool:
        """Whether a regular join runs its vectorized form (an INNER join of append-only inputs) on
        this job's backend: in memory (hashmap), or as rows in RocksDB (columns of the types the
        row encoding has, join keys of one type on both sides)."""
        if kind != "INNER" or not append_only:
            return False
        return self.columnar_state or (self.columnar_rows and join_columnar_rows(schemas, keys))

    def group_agg_columnar(self, aggs: list[AggCall], retracting: bool, key_types: list[pa.DataType],
                           input_types: list[pa.DataType]) -> bool:
        """Whether a non-windowed GROUP BY runs its columnar form on this job's backend: in memory
        (hashmap), or as rows in RocksDB (keys and COUNT(DISTINCT) values of the row encoding's types)."""
        if self.columnar_state:
            return group_agg_columnar(aggs, retracting)
        return self.columnar_rows and group_agg_columnar_rows(aggs, retracting, key_types, input_types)

    def window_agg_columnar(self, aggs: list[AggCall], key_types: list[pa.DataType]) -> bool:
        """Whether a window aggregation runs its columnar form on this job's backend: partials in
        memory (hashmap), or as rows in RocksDB (fewer aggregates: no COUNT(DISTINCT))."""
        if self.columnar_state:
            return window_agg_columnar(aggs)
        return self.columnar_rows and window_agg_columnar_rows(aggs, key_types)

    def _ttl(self, hinted: int | None) -> int | None:
        """An operator's state TTL: its STATE_TTL hint's (0 keeps state forever), else the session's."""
        if hinted is None:
            return self.state_ttl_ms
        return hinted or None

    def _lower_semi_join(self, node: SemiJoin) -> int:
        spec = analyze(node)
        left, right = self.lower(node.left), self.lower(node.right)
        lk, rk = spec.left_keys, spec.right_keys
        append_only = not (node.left.updating or node.right.updating)
        return self.add("Join", f"{spec.kind}, {spec.describe()}", node.schema,
                        [Exchange(left, "hash", lk), Exchange(right, "hash", rk)],
                        config=RegularJoinConfig(spec.kind, lk, rk, spec.residual, node.left.schema,
                                                 node.right.schema, append_only, (None, None),
                                                 (self.state_ttl_ms, self.state_ttl_ms)))

    def _lower_join(self, node: Join) -> int:
        spec = analyze(node)
        left, right = self.lower(node.left), self.lower(node.right)
        ls, rs, schema = node.left.schema, node.right.schema, node.schema
        lk, rk, residual, kind = spec.left_keys, spec.right_keys, spec.residual, spec.kind
        inputs = [Exchange(left, "hash", lk), Exchange(right, "hash", rk)]
        detail = f"{kind}, {spec.describe()}"
        if spec.window is not None:
            ends = (spec.window.left_end, spec.window.right_end)
            return self.add("WindowJoin", detail, schema, inputs,
                            config=WindowJoinConfig(kind, lk, rk, residual, ends, ls, rs, self.columnar_state,
                                                    spec.window.left.window.zone))
        if spec.interval is not None:
            return self.add("IntervalJoin", detail, schema, inputs,
                            config=IntervalJoinConfig(kind, lk, rk, residual, spec.interval, ls, rs))
        append_only = not (node.left.updating or node.right.updating)
        horizons = join_horizons(node.left, node.right, (lk, rk), residual)
        detail += "".join(f", {h.describe(side)}" for h, side in zip(horizons, ("left", "right"), strict=True) if h)
        columnar = self.join_columnar(kind, append_only, (ls, rs), (lk, rk))
        return self.add("Join", detail, schema, inputs,
                        config=RegularJoinConfig(kind, lk, rk, residual, ls, rs, append_only, horizons,
                                                 (self._ttl(node.state_ttl_ms[0]), self._ttl(node.state_ttl_ms[1])),
                                                 columnar))


def _require_sortable(schema: pa.Schema, sort: list[tuple[int, bool, bool]]) -> None:
    """ARRAY, MAP and ROW values have no order here: sorting by one is refused, naming it."""
    for index, _, _ in sort:
        f = schema.field(index)
        if is_nested(f.type):
            raise PlanError(f"ORDER BY the {sql_type_name(f.type)} column '{f.name}' is not supported; "
                            "order by its elements or fields instead")
