"""Operators built from the plan's data: one entry per operator config type.

The planner decides what each node computes and with which state form (``sqlstream.core.physical``);
this registry is the only place that turns a node's config into a runtime operator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from sqlstream.core import physical as p
from sqlstream.runtime.operators.base import Operator


def _calc(c: p.CalcConfig, schema: pa.Schema) -> Operator:
    from sqlstream.runtime.operators.calc import CalcOperator

    return CalcOperator(c.predicate, c.exprs, c.names)


def _watermark(c: p.WatermarkConfig, schema: pa.Schema) -> Operator:
    from sqlstream.runtime.operators.watermark import WatermarkAssigner

    return WatermarkAssigner(c.watermark, c.idle_timeout_ms, c.proctime)


def _window_tvf(c: p.WindowTVFConfig, schema: pa.Schema) -> Operator:
    from sqlstream.runtime.operators.window_tvf import WindowTVFOperator

    return WindowTVFOperator(c.window, schema)


def _window_agg(c: p.WindowAggConfig, schema: pa.Schema) -> Operator:
    from sqlstream.runtime.operators.window_agg import WindowAggOperator

    return WindowAggOperator(c.window, c.outputs, c.aggs, schema, c.input_window, columnar=c.columnar,
                             retracting=c.retracting)


def _session_agg(c: p.SessionWindowAggConfig, schema: pa.Schema) -> Operator:
    from sqlstream.runtime.operators.session_agg import SessionWindowAggOperator

    return SessionWindowAggOperator(c.window, c.outputs, c.aggs, schema, c.retracting)


def _group_agg(c: p.GroupAggConfig, schema: pa.Schema) -> Operator:
    from sqlstream.runtime.operators.group_agg import GroupAggOperator

    return GroupAggOperator(c.keys, c.aggs, schema, c.retracting, c.state_ttl_ms, c.columnar)


def _regular_join(c: p.RegularJoinConfig, schema: pa.Schema) -> Operator:
    from sqlstream.runtime.operators.join import RegularJoinOperator

    if c.kind in ("SEMI", "ANTI"):
        from sqlstream.runtime.operators.semi_join import SemiAntiJoinOperator

        return SemiAntiJoinOperator(c.kind == "ANTI", c.left_keys, c.right_keys, c.residual, c.left_schema,
                                    c.right_schema, c.state_ttl_ms)

    return RegularJoinOperator(c.kind, c.left_keys, c.right_keys, c.residual, c.left_schema, c.right_schema,
                               schema, c.append_only, c.horizons, c.state_ttl_ms, c.columnar)


def _interval_join(c: p.IntervalJoinConfig, schema: pa.Schema) -> Operator:
    from sqlstream.runtime.operators.interval_join import IntervalJoinOperator

    return IntervalJoinOperator(c.kind, c.left_keys, c.right_keys, c.residual, c.bounds, c.left_schema,
                                c.right_schema, schema)


def _window_join(c: p.WindowJoinConfig, schema: pa.Schema) -> Operator:
    from sqlstream.runtime.operators.window_join import WindowJoinOperator

    return WindowJoinOperator(c.kind, c.left_keys, c.right_keys, c.residual, c.ends, c.left_schema,
                              c.right_schema, schema, c.columnar, c.zone)


def _lookup_join(c: p.LookupJoinConfig, schema: pa.Schema) -> Operator:
    from sqlstream.runtime.operators.lookup_join import LookupJoinOperator

    return LookupJoinOperator(c.table, c.options, c.kind, c.keys, c.columns, c.residual, schema)


def _temporal_join(c: p.TemporalJoinConfig, schema: pa.Schema) -> Operator:
    from sqlstream.runtime.operators.temporal_join import TemporalJoinOperator

    return TemporalJoinOperator(c.kind, c.left_keys, c.right_keys, c.left_time, c.right_time, c.residual,
                                c.widths, schema)


def _union(c: p.UnionConfig, schema: pa.Schema) -> Operator:
    from sqlstream.runtime.operators.union import UnionOperator

    return UnionOperator(schema)


def _replicate_rows(c: p.ReplicateRowsConfig, schema: pa.Schema) -> Operator:
    from sqlstream.runtime.operators.replicate import ReplicateRowsOperator

    return ReplicateRowsOperator(c.times)


def _unnest(c: p.UnnestConfig, schema: pa.Schema) -> Operator:
    from sqlstream.runtime.operators.unnest import UnnestOperator

    return UnnestOperator(c.collection, c.ordinality, c.left, schema)


def _not_null_enforcer(c: p.NotNullEnforcerConfig, schema: pa.Schema) -> Operator:
    from sqlstream.runtime.operators.constraint import NotNullEnforcer

    return NotNullEnforcer(c.columns, c.names, c.not_null_enforcer)


def _match_recognize(c: p.MatchRecognizeConfig, schema: pa.Schema) -> Operator:
    from sqlstream.runtime.operators.match_recognize import MatchRecognizeOperator

    return MatchRecognizeOperator(c, schema)


def _over_agg(c: p.OverAggConfig, schema: pa.Schema) -> Operator:
    from sqlstream.runtime.operators.over_agg import OverAggOperator

    return OverAggOperator(c.partition_keys, c.time_index, c.frame_kind, c.preceding, c.aggs, schema)


def _top_n(c: p.TopNConfig, schema: pa.Schema) -> Operator:
    from sqlstream.runtime.operators.rank import TopNOperator

    return TopNOperator(c.keys, c.sort, c.start, c.end, c.output_rank, c.retracting, c.newer_wins, schema,
                        c.state_ttl_ms, c.columnar)


def _changelog_normalize(c: p.ChangelogNormalizeConfig, schema: pa.Schema) -> Operator:
    from sqlstream.runtime.operators.changelog_normalize import ChangelogNormalizeOperator

    return ChangelogNormalizeOperator(c.keys, c.state_ttl_ms)


def _dedup_first(c: p.DeduplicateFirstConfig, schema: pa.Schema) -> Operator:
    from sqlstream.runtime.operators.rank import DeduplicateFirstOperator

    return DeduplicateFirstOperator(c.keys, c.time_index, c.output_rank, schema, c.state_ttl_ms)


def _window_rank(c: p.WindowRankConfig, schema: pa.Schema) -> Operator:
    from sqlstream.runtime.operators.rank import WindowRankOperator

    return WindowRankOperator(c.keys, c.window_end, c.sort, c.start, c.end, c.output_rank, c.newer_wins, schema,
                              c.zone)


def _stream_sort(c: p.StreamSortConfig, schema: pa.Schema) -> Operator:
    from sqlstream.runtime.operators.rank import StreamSortOperator

    return StreamSortOperator(c.sort, c.limit)


def _limit(c: p.LimitConfig, schema: pa.Schema) -> Operator:
    from sqlstream.runtime.operators.rank import LimitOperator

    return LimitOperator(c.limit)


# operator modules are imported when a plan first needs them (a job imports only its own)
BUILDERS: dict[type[p.OperatorConfig], Callable[[Any, pa.Schema], Operator]] = {
    p.CalcConfig: _calc,
    p.WatermarkConfig: _watermark,
    p.WindowTVFConfig: _window_tvf,
    p.WindowAggConfig: _window_agg,
    p.SessionWindowAggConfig: _session_agg,
    p.GroupAggConfig: _group_agg,
    p.RegularJoinConfig: _regular_join,
    p.IntervalJoinConfig: _interval_join,
    p.WindowJoinConfig: _window_join,
    p.LookupJoinConfig: _lookup_join,
    p.TemporalJoinConfig: _temporal_join,
    p.UnionConfig: _union,
    p.ReplicateRowsConfig: _replicate_rows,
    p.UnnestConfig: _unnest,
    p.NotNullEnforcerConfig: _not_null_enforcer,
    p.MatchRecognizeConfig: _match_recognize,
    p.OverAggConfig: _over_agg,
    p.TopNConfig: _top_n,
    p.ChangelogNormalizeConfig: _changelog_normalize,
    p.DeduplicateFirstConfig: _dedup_first,
    p.WindowRankConfig: _window_rank,
    p.StreamSortConfig: _stream_sort,
    p.LimitConfig: _limit,
}


def build_operator(node: p.PhysicalNode) -> Operator:
    """A fresh operator for one subtask of ``node``."""
    assert node.config is not None, f"node #{node.id} {node.name} has no operator config"
    return BUILDERS[type(node.config)](node.config, node.schema)
