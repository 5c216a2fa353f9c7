"""The physical plan as data: what the planner decided, for the runtime to execute.

Each node names an operator kind and carries a typed config resolved at plan time (keys,
expressions, windows, and the choices that depend on the job's settings: state TTL, the
columnar or per-key state form).  EXPLAIN prints it; the runtime builds an operator from a
node's config through one registry (``sqlstream.runtime.operators.registry``); nothing here
runs.  Edges say how records move between nodes: ``forward`` keeps order and partition,
``hash`` repartitions by key columns, so a node can run as several parallel subtasks.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import pyarrow as pa

from sqlstream.core.aggregates import AggCall
from sqlstream.core.expressions import Expr
from sqlstream.core.joins import Horizon, IntervalBounds
from sqlstream.core.tables import TableDef
from sqlstream.core.windows import WindowSpec

# (column, descending, nulls first) per sort key
SortSpec = list[tuple[int, bool, bool]]


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
    partition_filter: Expr | None = None  # conditions on partition columns, PARTITIONED BY order


@dataclass
class SinkSpec:
    table: TableDef | None  # None: collect to the client
    options: dict[str, Any]
    schema: pa.Schema
    updating: bool
    # set when the rows are shuffled by the table's PRIMARY KEY (Flink's table.exec.sink.keyed-shuffle):
    # the parallelism the sink had before, which a hash input would otherwise replace by the default
    parallelism: int | None = None


@dataclass(frozen=True)
class OperatorConfig:
    """Base of the operator configs.  ``choices`` are the plan-time decisions that depend on the
    job's settings rather than on the query; EXPLAIN shows them, operator ids leave them out (a
    savepoint moves between state backends)."""

    def choices(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.metadata.get("choice"):
                value = getattr(self, f.name)
                if f.name == "columnar":
                    out["state"] = "columnar" if value else "per-key"
                elif value is not None:
                    out[f.name.replace("_", "-")] = value
        return out


def _choice(default: Any = None) -> Any:
    return field(default=default, metadata={"choice": True})


@dataclass(frozen=True)
class CalcConfig(OperatorConfig):
    predicate: Expr | None
    exprs: list[Expr] | None
    names: list[str] | None


@dataclass(frozen=True)
class WatermarkConfig(OperatorConfig):
    watermark: Expr
    idle_timeout_ms: int | None = _choice()  # a split quiet this long stops holding event time back
    proctime: bool = False


@dataclass(frozen=True)
class WindowTVFConfig(OperatorConfig):
    window: WindowSpec


@dataclass(frozen=True)
class WindowAggConfig(OperatorConfig):
    """``outputs``: per grouping column, a window property name or an input column;
    ``input_window``: cascaded, the input columns of each row's window_start and window_end."""

    window: WindowSpec
    outputs: list[str | int]
    aggs: list[AggCall]
    input_window: tuple[int, int] | None
    columnar: bool = _choice(False)
    retracting: bool = False  # the input carries -U/-D rows (a changelog source), subtracted from their windows


@dataclass(frozen=True)
class SessionWindowAggConfig(OperatorConfig):
    window: WindowSpec
    outputs: list[str | int]
    aggs: list[AggCall]
    retracting: bool = False  # the input carries -U/-D rows (a changelog source)


@dataclass(frozen=True)
class GroupAggConfig(OperatorConfig):
    keys: list[int]
    aggs: list[AggCall]
    retracting: bool  # the input carries -U/-D rows
    state_ttl_ms: int | None = _choice()
    columnar: bool = _choice(False)


@dataclass(frozen=True)
class RegularJoinConfig(OperatorConfig):
    kind: str
    left_keys: tuple[int, ...]
    right_keys: tuple[int, ...]
    residual: Expr | None
    left_schema: pa.Schema
    right_schema: pa.Schema
    append_only: bool
    horizons: tuple[Horizon | None, Horizon | None]
    # how long each side's (left, right) rows live unwritten (None: forever)
    state_ttl_ms: tuple[int | None, int | None] = _choice((None, None))
    columnar: bool = _choice(False)


@dataclass(frozen=True)
class IntervalJoinConfig(OperatorConfig):
    kind: str
    left_keys: tuple[int, ...]
    right_keys: tuple[int, ...]
    residual: Expr | None
    bounds: IntervalBounds
    left_schema: pa.Schema
    right_schema: pa.Schema


@dataclass(frozen=True)
class WindowJoinConfig(OperatorConfig):
    kind: str
    left_keys: tuple[int, ...]
    right_keys: tuple[int, ...]
    residual: Expr | None
    ends: tuple[int, int]  # each side's window_end column
    left_schema: pa.Schema
    right_schema: pa.Schema
    columnar: bool = _choice(False)
    zone: str | None = None  # windows on a TIMESTAMP_LTZ time attribute: their session zone (WindowSpec.zone)


@dataclass(frozen=True)
class LookupJoinConfig(OperatorConfig):
    table: TableDef
    options: dict[str, Any]
    kind: str
    keys: list[tuple[int, str]]  # (probe column, dimension column)
    columns: list[str]
    residual: Expr | None


@dataclass(frozen=True)
class TemporalJoinConfig(OperatorConfig):
    kind: str
    left_keys: tuple[int, ...]
    right_keys: tuple[int, ...]
    left_time: int
    right_time: int
    residual: Expr | None
    widths: tuple[int, int]


@dataclass(frozen=True)
class UnionConfig(OperatorConfig):
    pass


@dataclass(frozen=True)
class UnnestConfig(OperatorConfig):
    collection: Expr  # the ARRAY or MAP each input row is joined with the elements of
    ordinality: bool  # a last column with each element's 1-based position
    left: bool  # a row with a NULL or empty collection is kept once, NULL-padded


@dataclass(frozen=True)
class ReplicateRowsConfig(OperatorConfig):
    times: int  # the column saying how often each row is repeated


@dataclass(frozen=True)
class NotNullEnforcerConfig(OperatorConfig):
    """Flink's ConstraintEnforcer before a sink: the input positions and names of the sink table's
    NOT NULL columns, and what a NULL in one of them does ('table.exec.sink.not-null-enforcer':
    ERROR fails the job, DROP drops the row)."""

    columns: tuple[int, ...]
    names: tuple[str, ...]
    not_null_enforcer: str = _choice("ERROR")


@dataclass(frozen=True)
class OverAggConfig(OperatorConfig):
    partition_keys: list[int]
    time_index: int
    frame_kind: str  # ROWS | RANGE
    preceding: int | None  # None: UNBOUNDED PRECEDING
    aggs: list[AggCall]


@dataclass(frozen=True)
class PatternTerm:
    """One element of a MATCH_RECOGNIZE pattern: a variable (its index) repeated min..max times
    (``max`` None: unbounded), reluctantly or not."""

    variable: int
    min: int
    max: int | None
    reluctant: bool = False

    @property
    def greedy(self) -> bool:
        """Flink's translation makes ``+ * {n,} {n,m}`` greedy; ``v?``, ``{n}`` and the reluctant
        forms are not."""
        return self.min != self.max and (self.min, self.max) != (0, 1) and not self.reluctant

    def describe(self, variables: tuple[str, ...]) -> str:
        name, lo, hi = variables[self.variable], self.min, self.max
        if (lo, hi) == (1, 1):
            return name
        quantifier = {(1, None): "+", (0, None): "*", (0, 1): "?"}.get((lo, hi))
        if quantifier is None:
            quantifier = f"{{{lo}}}" if lo == hi else f"{{{lo},{'' if hi is None else hi}}}"
        return name + quantifier + ("?" if self.reluctant else "")


@dataclass(frozen=True)
class MatchRecognizeConfig(OperatorConfig):
    """MATCH_RECOGNIZE ... ONE ROW PER MATCH (see planner.logical.match_recognize.MatchRecognize):
    ``skip`` is (PAST LAST ROW | TO NEXT ROW | TO FIRST | TO LAST, variable or -1)."""

    partition_keys: list[int]
    time_index: int
    input_width: int  # the DEFINE conditions' navigation columns follow the input row's
    pattern: tuple[PatternTerm, ...]
    defines: tuple[Expr | None, ...]
    navigations: tuple[tuple[str, int, int, int], ...]
    navigation_types: tuple[pa.DataType, ...]
    primitives: tuple[tuple[str, int, int, int], ...]
    primitive_types: tuple[pa.DataType, ...]
    measures: tuple[Expr, ...]
    skip: tuple[str, int]
    within_ms: int | None  # WITHIN: how long a partial match may stay open, from its first row
    tie_order: SortSpec  # how rows of equal times are ordered (ORDER BY after the time attribute)


@dataclass(frozen=True)
class TopNConfig(OperatorConfig):
    keys: list[int]
    sort: SortSpec
    start: int
    end: int
    output_rank: bool
    retracting: bool
    newer_wins: bool
    state_ttl_ms: int | None = _choice()
    columnar: bool = _choice(False)


@dataclass(frozen=True)
class ChangelogNormalizeConfig(OperatorConfig):
    """The last row per key of an upsert changelog, emitted as a full changelog (see the operator)."""

    keys: list[int]
    state_ttl_ms: int | None = _choice()


@dataclass(frozen=True)
class DeduplicateFirstConfig(OperatorConfig):
    keys: list[int]
    time_index: int
    output_rank: bool
    state_ttl_ms: int | None = _choice()


@dataclass(frozen=True)
class WindowRankConfig(OperatorConfig):
    keys: list[int]
    window_end: int
    sort: SortSpec
    start: int
    end: int | None
    output_rank: bool
    newer_wins: bool
    zone: str | None = None  # windows on a TIMESTAMP_LTZ time attribute: their session zone (WindowSpec.zone)


@dataclass(frozen=True)
class StreamSortConfig(OperatorConfig):
    sort: SortSpec
    limit: int | None


@dataclass(frozen=True)
class LimitConfig(OperatorConfig):
    limit: int


@dataclass
class PhysicalNode:
    """One node of the dataflow.  ``detail`` describes what the node computes (it identifies the
    node's state across runs); ``config`` is what the runtime builds its operator from (sources and
    sinks have a spec instead)."""

    id: int
    name: str
    detail: str
    schema: pa.Schema
    inputs: list[Exchange]
    config: OperatorConfig | None = None
    source: SourceSpec | None = None
    sink: SinkSpec | None = None

    def describe(self) -> str:
        choices = self.config.choices() if self.config is not None else {}
        extra = "".join(f", {k}={v}" for k, v in choices.items())
        return f"{self.detail}{extra}"


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
            lines.append(f"#{n.id} {n.name}: {n.describe()}" + (f"  ({ins})" if ins else ""))
        return "\n".join(lines)


def parallelism_of(node: PhysicalNode, default: int) -> int:
    """A node's subtask count: ``default`` is ``parallelism.default``, or the upstream's for a node
    behind a forward edge (which keeps the upstream's parallelism, as Flink's forward partitioner)."""
    if node.source is not None and node.source.values is not None:
        return 1
    if node.source is not None and node.source.options.get("scan.parallelism"):
        return node.source.options["scan.parallelism"]
    if node.sink is not None and node.sink.table is None:
        return 1  # the client reads one ordered stream
    if node.sink is not None and node.sink.options.get("sink.parallelism"):
        return node.sink.options["sink.parallelism"]
    if node.sink is not None and node.sink.parallelism is not None:
        return node.sink.parallelism
    if any(e.mode == "hash" and not e.keys for e in node.inputs):
        return 1  # a global aggregation
    return default


def parallelisms(nodes: list[PhysicalNode], default: int) -> dict[int, int]:
    """Every node's subtask count (``nodes`` in topological order); the planner asks it where a
    decision depends on parallelism (a sink's keyed shuffle), the runtime builds its chains by it."""
    par: dict[int, int] = {}
    for n in nodes:
        inherited = default
        if len(n.inputs) == 1 and n.inputs[0].mode == "forward":
            inherited = par[n.inputs[0].upstream]
        par[n.id] = parallelism_of(n, inherited)
    return par
