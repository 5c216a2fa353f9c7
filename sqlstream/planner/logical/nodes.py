"""The relational logical nodes: scans, projections and filters, windows, aggregations, joins,
unions, literal rows and sinks.  Plain data; the optimizer rewrites trees of them and the
physical planner lowers them into a dataflow."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import pyarrow as pa

from sqlstream.core.aggregates import AggCall
from sqlstream.core.expressions import ColumnRef, Expr, Literal, referenced_columns, remap_columns
from sqlstream.core.tables import TableDef
from sqlstream.core.windows import WINDOW_COLUMNS, WindowSpec, window_column_types
from sqlstream.planner.logical.base import (
    KeepsTime,
    LogicalNode,
    OneInput,
    Prune,
    WindowColumns,
    time_columns,
)


def _identity(node: LogicalNode) -> dict[int, int]:
    return {i: i for i in range(len(node.schema))}


def _names(schema: pa.Schema) -> str:
    return ", ".join(schema.names)


@dataclass
class Scan(LogicalNode):
    """Read physical ``columns`` of ``table`` from its connector.

    ``changelog`` is what the source emits (its connector's changelog mode for the table):
    'insert-only', 'all' (a CDC format's +I/-U/+U/-D) or 'upsert' (+I/+U/-D per primary key,
    which a :class:`ChangelogNormalize` above turns into a full changelog).
    """

    table: TableDef
    columns: list[str]
    changelog: str = "insert-only"
    # WHERE conditions on partition columns (reading them in PARTITIONED BY order): the source
    # lists only the partitions they keep; the Filter above still applies them to the rows
    partition_filter: Expr | None = None

    @property
    def updating(self) -> bool:
        return self.changelog != "insert-only"

    @property
    def schema(self) -> pa.Schema:
        full = self.table.source_schema
        return pa.schema([full.field(c) for c in self.columns])

    def partitions_text(self) -> str:
        """The pruning as EXPLAIN shows it (the filter itself reads the partition columns in
        PARTITIONED BY order, which is what the source evaluates it on)."""
        if self.partition_filter is None:
            return ""
        shown = self.partition_filter
        position = {c.lower(): i for i, c in enumerate(self.columns)}
        mapping = {i: position[k.lower()] for i, k in enumerate(self.table.partition_keys) if k.lower() in position}
        if referenced_columns(shown) <= mapping.keys():  # numbered as the scan's columns, like the rest of the plan
            shown = remap_columns(shown, mapping)
        return f", partitions=[{shown}]"

    @property
    def inputs(self) -> list[LogicalNode]:
        return []

    def with_inputs(self, inputs: list[LogicalNode]) -> Scan:
        return self

    def describe(self) -> str:
        mode = "" if self.changelog == "insert-only" else f", changelog={self.changelog}"
        return (f"Scan(table={self.table.name}, connector={self.table.connector}, "
                f"columns=[{', '.join(self.columns)}]{mode}{self.partitions_text()})")

    def prune_columns(self, required: set[int], prune: Prune) -> tuple[LogicalNode, dict[int, int]]:
        keep = sorted(required) or [0]
        scan = Scan(self.table, [self.columns[i] for i in keep], self.changelog, self.partition_filter)
        return scan, {old: new for new, old in enumerate(keep)}


@dataclass
class ChangelogNormalize(OneInput):
    """Flink's ChangelogNormalize: an upsert changelog (+I/+U/-D by key, a -D perhaps carrying
    only its key) into a full one, keeping the last row per key: the first row of a key is +I,
    a later one -U of the kept row and +U (an identical row is dropped), a -D retracts the kept
    row (and is dropped if the key has none).  Downstream retractions then remove exactly what
    was added."""

    input: LogicalNode
    keys: list[int]

    @property
    def schema(self) -> pa.Schema:
        return self.input.schema

    @property
    def rowtime(self) -> int | None:
        return self.input.rowtime

    @property
    def updating(self) -> bool:
        return True

    def describe(self) -> str:
        names = self.input.schema.names
        return f"ChangelogNormalize(key=[{', '.join(names[k] for k in self.keys)}])"

    def prune_columns(self, required: set[int], prune: Prune) -> tuple[LogicalNode, dict[int, int]]:
        child, mapping = prune(self.input, set(required) | set(self.keys))
        return ChangelogNormalize(child, [mapping[k] for k in self.keys]), mapping


@dataclass
class WatermarkAssign(OneInput):
    """Declares column ``rowtime_index`` the event-time attribute, with its watermark expression."""

    input: LogicalNode
    rowtime_index: int
    watermark: Expr  # evaluated per row over the input; the watermark is its running max
    idle_timeout_ms: int | None = None  # splits quiet for longer do not hold event time back
    proctime: bool = False  # a PROCTIME() column: the assigner stamps it with the wall clock, its watermark

    @property
    def schema(self) -> pa.Schema:
        return self.input.schema

    @property
    def rowtime(self) -> int | None:
        return self.rowtime_index

    @property
    def window_properties(self) -> tuple[WindowColumns, ...]:
        return self.input.window_properties

    def map_expressions(self, fn: Callable[[Expr], Expr]) -> WatermarkAssign:
        return replace(self, watermark=fn(self.watermark))

    def describe(self) -> str:
        kind = "proctime" if self.proctime else "rowtime"
        return f"WatermarkAssigner({kind}={self.schema.names[self.rowtime_index]}, watermark={self.watermark})"

    def prune_columns(self, required: set[int], prune: Prune) -> tuple[LogicalNode, dict[int, int]]:
        needed = set(required) | referenced_columns(self.watermark) | {self.rowtime_index}
        child, mapping = prune(self.input, needed)
        return WatermarkAssign(child, mapping[self.rowtime_index], remap_columns(self.watermark, mapping),
                               self.idle_timeout_ms, self.proctime), mapping


@dataclass
class Project(OneInput):
    input: LogicalNode
    exprs: list[Expr]
    names: list[str]
    rowtime_out: int | None = None  # output column that still is the time attribute

    @property
    def schema(self) -> pa.Schema:
        return pa.schema([pa.field(n, e.type) for n, e in zip(self.names, self.exprs, strict=True)])

    @property
    def rowtime(self) -> int | None:
        return self.rowtime_out

    @property
    def window_properties(self) -> tuple[WindowColumns, ...]:
        """Window columns passed through as column references keep their meaning (renamed or not)."""
        mapping: dict[int, int] = {}
        for i, e in enumerate(self.exprs):
            if isinstance(e, ColumnRef):
                mapping.setdefault(e.index, i)
        moved = (w.through(mapping) for w in self.input.window_properties)
        return tuple(w for w in moved if w is not None)

    def map_expressions(self, fn: Callable[[Expr], Expr]) -> Project:
        return replace(self, exprs=[fn(e) for e in self.exprs])

    def describe(self) -> str:
        return "Project(" + ", ".join(f"{n}={e}" for n, e in zip(self.names, self.exprs, strict=True)) + ")"

    def prune_columns(self, required: set[int], prune: Prune) -> tuple[LogicalNode, dict[int, int]]:
        keep = sorted(required)
        needed: set[int] = set()
        for i in keep:
            needed |= referenced_columns(self.exprs[i])
        child, mapping = prune(self.input, needed)
        exprs = [remap_columns(self.exprs[i], mapping) for i in keep]
        names = [self.names[i] for i in keep]
        rowtime = keep.index(self.rowtime_out) if self.rowtime_out in keep else None
        out = {old: new for new, old in enumerate(keep)}
        if not keep:
            # nothing read (SELECT COUNT(*)): keep one cheap column so rows still flow
            exprs, names, out = [Literal(0, pa.int32())], ["$zero"], {}
        return Project(child, exprs, names, rowtime), out


@dataclass
class Filter(KeepsTime):
    input: LogicalNode
    predicate: Expr

    @property
    def schema(self) -> pa.Schema:
        return self.input.schema

    def map_expressions(self, fn: Callable[[Expr], Expr]) -> Filter:
        return replace(self, predicate=fn(self.predicate))

    def describe(self) -> str:
        return f"Filter({self.predicate})"

    def prune_columns(self, required: set[int], prune: Prune) -> tuple[LogicalNode, dict[int, int]]:
        child, mapping = prune(self.input, set(required) | referenced_columns(self.predicate))
        return Filter(child, remap_columns(self.predicate, mapping)), mapping


@dataclass
class WindowTVF(OneInput):
    """Input columns plus window_start, window_end, window_time (one row per window a row is in)."""

    input: LogicalNode
    window: WindowSpec

    @property
    def schema(self) -> pa.Schema:
        types = window_column_types(self.window, self.input.schema.field(self.window.time_index).type)
        extra = [pa.field(n, t) for n, t in zip(WINDOW_COLUMNS, types, strict=True)]
        return pa.schema(list(self.input.schema) + extra)

    @property
    def rowtime(self) -> int | None:
        return len(self.input.schema) + 2  # window_time

    @property
    def window_properties(self) -> tuple[WindowColumns, ...]:
        width = len(self.input.schema)
        return (*self.input.window_properties, WindowColumns(self.window, width, width + 1, width + 2))

    def describe(self) -> str:
        return f"WindowTableFunction({self.window.describe()})"

    def prune_columns(self, required: set[int], prune: Prune) -> tuple[LogicalNode, dict[int, int]]:
        width = len(self.input.schema)
        needed = {i for i in required if i < width} | {self.window.time_index} | set(self.window.partition_keys)
        child, mapping = prune(self.input, needed)
        new_width = len(child.schema)
        out = dict(mapping)
        for j in range(3):
            out[width + j] = new_width + j
        return WindowTVF(child, self.window.remapped(mapping)), out


@dataclass
class Aggregate(OneInput):
    """GROUP BY ``keys``: updating output (a changelog keyed by the group keys)."""

    input: LogicalNode
    keys: list[int]
    aggs: list[AggCall]
    key_names: list[str]
    # a STATE_TTL hint's TTL in ms (0: kept forever); None: table.exec.state.ttl applies
    state_ttl_ms: int | None = None

    @property
    def schema(self) -> pa.Schema:
        in_schema = self.input.schema
        fields = [pa.field(n, in_schema.field(k).type) for n, k in zip(self.key_names, self.keys, strict=True)]
        return pa.schema(fields + [pa.field(a.name, a.type) for a in self.aggs])

    @property
    def updating(self) -> bool:
        return True

    def describe(self) -> str:
        keys = ", ".join(f"${k}" for k in self.keys)
        return f"GroupAggregate(keys=[{keys}], aggs=[{', '.join(a.describe() for a in self.aggs)}])"

    def prune_columns(self, required: set[int], prune: Prune) -> tuple[LogicalNode, dict[int, int]]:
        child, mapping = prune(self.input, set(self.keys).union(*(a.columns for a in self.aggs)))
        node = Aggregate(child, [mapping[k] for k in self.keys], [a.remapped(mapping) for a in self.aggs],
                         self.key_names, self.state_ttl_ms)
        return node, _identity(self)


@dataclass
class WindowAggregate(OneInput):
    """GROUP BY window_start, window_end, keys over windowed rows: append-only, fires on watermark.

    ``outputs`` lists, in output order, what each grouping column is: a window
    property ('window_start' | 'window_end' | 'window_time') or an input key column index.

    With ``input_window`` None the windows are assigned here, from the time
    attribute ``window.time_index`` (the fused form of a windowing TVF and its
    GROUP BY).  A cascaded window aggregation groups rows whose windows were
    assigned upstream (by a window aggregation, a TVF, a window join): then
    ``input_window`` holds the input columns of each row's window_start and
    window_end, no row is assigned again (HOP rows are not re-expanded), and
    ``window`` is the upstream spec, of which only the shape matters here.
    """

    input: LogicalNode
    window: WindowSpec
    outputs: list[str | int]
    output_names: list[str]
    aggs: list[AggCall]
    input_window: tuple[int, int] | None = None

    @property
    def key_indexes(self) -> list[int]:
        return [o for o in self.outputs if isinstance(o, int)]

    @property
    def schema(self) -> pa.Schema:
        in_schema = self.input.schema
        ts_column = self.window.time_index if self.input_window is None else self.input_window[1]
        types = dict(zip(WINDOW_COLUMNS, window_column_types(self.window, in_schema.field(ts_column).type), strict=True))
        fields = []
        for name, o in zip(self.output_names, self.outputs, strict=True):
            fields.append(pa.field(name, types[o] if isinstance(o, str) else in_schema.field(o).type))
        return pa.schema(fields + [pa.field(a.name, a.type) for a in self.aggs])

    @property
    def rowtime(self) -> int | None:
        for i, o in enumerate(self.outputs):
            if o == "window_time":
                return i
        return None

    @property
    def window_properties(self) -> tuple[WindowColumns, ...]:
        found = [self.outputs.index(r) if r in self.outputs else None for r in WINDOW_COLUMNS]
        return () if found == [None, None, None] else (WindowColumns(self.window, *found),)

    @property
    def updating(self) -> bool:
        return False

    def describe(self) -> str:
        outs = ", ".join(o if isinstance(o, str) else f"${o}" for o in self.outputs)
        if self.input_window is None:
            window = self.window.describe()
        else:
            start, end = self.input_window
            window = f"cascaded, {self.window.describe(time=False)} from window_start=${start}, window_end=${end}"
        return f"WindowAggregate({window}, groups=[{outs}], aggs=[{', '.join(a.describe() for a in self.aggs)}])"

    def prune_columns(self, required: set[int], prune: Prune) -> tuple[LogicalNode, dict[int, int]]:
        needed = set(self.key_indexes).union(*(a.columns for a in self.aggs))
        if self.input_window is None:
            needed |= {self.window.time_index} | set(self.window.partition_keys)
        else:
            needed |= set(self.input_window)  # cascaded: the window spec's columns are not this input's
        child, mapping = prune(self.input, needed)
        outputs = [o if isinstance(o, str) else mapping[o] for o in self.outputs]
        aggs = [a.remapped(mapping) for a in self.aggs]
        if self.input_window is None:
            window, input_window = self.window.remapped(mapping), None
        else:
            window, input_window = self.window, (mapping[self.input_window[0]], mapping[self.input_window[1]])
        return WindowAggregate(child, window, outputs, self.output_names, aggs, input_window), _identity(self)


JOIN_KINDS = ("INNER", "LEFT", "RIGHT", "FULL")


def _prune_two_inputs(left: LogicalNode, right: LogicalNode, needed: set[int], prune: Prune
                      ) -> tuple[LogicalNode, LogicalNode, dict[int, int], dict[int, int], dict[int, int]]:
    """Prune both inputs of a join to the columns ``needed`` of their concatenation (and their time
    attributes); returns them, their own maps and the map of the concatenated columns."""
    width = len(left.schema)
    new_left, lmap = prune(left, {i for i in needed if i < width} | time_columns(left))
    new_right, rmap = prune(right, {i - width for i in needed if i >= width} | time_columns(right))
    new_width = len(new_left.schema)
    mapping = dict(lmap)
    mapping.update({width + old: new_width + new for old, new in rmap.items()})
    return new_left, new_right, lmap, rmap, mapping


class _TwoInputs(LogicalNode):
    """What joins share: two inputs, and a condition over the left's columns then the right's."""

    left: LogicalNode
    right: LogicalNode
    condition: Expr | None

    @property
    def inputs(self) -> list[LogicalNode]:
        return [self.left, self.right]

    def with_inputs(self, inputs: list[LogicalNode]) -> LogicalNode:
        return replace(self, left=inputs[0], right=inputs[1])  # type: ignore[type-var]

    def map_expressions(self, fn: Callable[[Expr], Expr]) -> LogicalNode:
        return replace(self, condition=None if self.condition is None else fn(self.condition))  # type: ignore[type-var]

    def _pruned_inputs(self, required: set[int], prune: Prune
                       ) -> tuple[LogicalNode, LogicalNode, Expr | None, dict[int, int], dict[int, int]]:
        """Both inputs pruned to ``required`` and the condition's columns: (left, right, the
        condition remapped, the left's column map, the concatenation's column map)."""
        needed = set(required) | (referenced_columns(self.condition) if self.condition is not None else set())
        left, right, lmap, _, mapping = _prune_two_inputs(self.left, self.right, needed, prune)
        condition = None if self.condition is None else remap_columns(self.condition, mapping)
        return left, right, condition, lmap, mapping


@dataclass
class Join(_TwoInputs):
    """left JOIN right ON condition; the condition reads left columns then right columns.

    How it runs (equi keys, an interval on the time attributes, a window
    join) is decided when lowering, from the condition (planner.joins).
    """

    left: LogicalNode
    right: LogicalNode
    kind: str  # INNER | LEFT | RIGHT | FULL
    condition: Expr | None
    # STATE_TTL hint TTLs in ms of the (left, right) rows (0: kept forever; None: table.exec.state.ttl)
    state_ttl_ms: tuple[int | None, int | None] = (None, None)

    @property
    def schema(self) -> pa.Schema:
        fields = list(self.left.schema) + list(self.right.schema)
        return pa.schema([pa.field(f.name, f.type) for f in fields])

    @property
    def rowtime(self) -> int | None:
        from sqlstream.planner.joins import analyze

        spec = analyze(self)
        if spec.interval is not None or spec.window is not None:
            # time-bounded joins keep the left input's event time (Flink keeps both)
            return self.left.rowtime
        return None

    @property
    def window_properties(self) -> tuple[WindowColumns, ...]:
        """A window join's window columns, on the sides whose rows are never NULL-padded."""
        from sqlstream.planner.joins import analyze

        window = analyze(self).window
        if window is None:
            return ()
        width = len(self.left.schema)
        right = window.right.through({i: width + i for i in range(len(self.right.schema))})
        assert right is not None  # a window join equates both window_start and window_end
        return {"INNER": (window.left, right), "LEFT": (window.left,), "RIGHT": (right,), "FULL": ()}[self.kind]

    @property
    def updating(self) -> bool:
        from sqlstream.planner.joins import analyze

        spec = analyze(self)
        if spec.interval is not None or spec.window is not None:
            return False  # outer rows are emitted once, when the bound has passed
        return self.left.updating or self.right.updating or self.kind != "INNER"

    def describe(self) -> str:
        from sqlstream.planner.joins import analyze

        spec = analyze(self)
        return f"{'WindowJoin' if spec.window is not None else 'Join'}({self.kind}, {spec.describe(True)})"

    def prune_columns(self, required: set[int], prune: Prune) -> tuple[LogicalNode, dict[int, int]]:
        left, right, condition, _, mapping = self._pruned_inputs(required, prune)
        return Join(left, right, self.kind, condition, self.state_ttl_ms), mapping


@dataclass
class SemiJoin(_TwoInputs):
    """left rows for which some right row satisfies ``condition`` (SEMI), or none does (ANTI):
    what ``IN``/``EXISTS`` subqueries and their negations become, as in Flink.

    The condition reads left columns then right columns; the output is the left columns only.
    An ANTI join retracts a left row when its first match arrives, so its output updates; a
    SEMI join of append-only inputs stays append-only.  Like a regular join's output, the
    rows lose their event-time attribute.
    """

    left: LogicalNode
    right: LogicalNode
    anti: bool
    condition: Expr | None

    @property
    def schema(self) -> pa.Schema:
        return self.left.schema

    @property
    def updating(self) -> bool:
        return self.left.updating or self.right.updating or self.anti

    def describe(self) -> str:
        from sqlstream.planner.joins import analyze

        return f"Join({'ANTI' if self.anti else 'SEMI'}, {analyze(self).describe()})"

    def prune_columns(self, required: set[int], prune: Prune) -> tuple[LogicalNode, dict[int, int]]:
        left, right, condition, lmap, _ = self._pruned_inputs(required, prune)
        return SemiJoin(left, right, self.anti, condition), lmap

    @property
    def kind(self) -> str:
        """The join kind as planner.joins and the runtime name it."""
        return "ANTI" if self.anti else "SEMI"


@dataclass
class LookupJoin(LogicalNode):
    """left JOIN dim FOR SYSTEM_TIME AS OF left.proctime ON left.k = dim.k: probes the connector.

    ``keys`` pairs a left column with a dimension column name; the output is
    the left columns then ``columns`` of the dimension table.
    """

    left: LogicalNode
    table: TableDef
    kind: str  # INNER | LEFT
    keys: list[tuple[int, str]]
    columns: list[str]
    residual: Expr | None  # over left + dimension columns

    @property
    def schema(self) -> pa.Schema:
        dim = self.table.physical_schema
        return pa.schema(list(self.left.schema) + [pa.field(c, dim.field(c).type) for c in self.columns])

    @property
    def rowtime(self) -> int | None:
        return self.left.rowtime

    @property
    def inputs(self) -> list[LogicalNode]:
        return [self.left]

    def with_inputs(self, inputs: list[LogicalNode]) -> LookupJoin:
        return replace(self, left=inputs[0])

    def map_expressions(self, fn: Callable[[Expr], Expr]) -> LookupJoin:
        return replace(self, residual=None if self.residual is None else fn(self.residual))

    def describe(self) -> str:
        keys = ", ".join(f"${i}={c}" for i, c in self.keys)
        where = f", where={self.residual}" if self.residual is not None else ""
        return f"LookupJoin({self.kind}, table={self.table.name} [{self.table.connector}], keys=[{keys}]{where})"

    def prune_columns(self, required: set[int], prune: Prune) -> tuple[LogicalNode, dict[int, int]]:
        width = len(self.left.schema)
        needed = {i for i in required if i < width} | {k for k, _ in self.keys} | time_columns(self.left)
        if self.residual is not None:
            needed |= {i for i in referenced_columns(self.residual) if i < width}
        left, lmap = prune(self.left, needed)
        new_width = len(left.schema)
        mapping = dict(lmap)
        mapping.update({width + j: new_width + j for j in range(len(self.columns))})
        residual = None if self.residual is None else remap_columns(self.residual, mapping)
        keys = [(lmap[k], c) for k, c in self.keys]
        return LookupJoin(left, self.table, self.kind, keys, self.columns, residual), mapping


@dataclass
class TemporalJoin(LogicalNode):
    """left JOIN versioned FOR SYSTEM_TIME AS OF left.rowtime: each left row meets the version
    of its key that was valid at its event time."""

    left: LogicalNode
    right: LogicalNode
    kind: str  # INNER | LEFT
    left_keys: list[int]
    right_keys: list[int]  # within the right input: its primary key
    residual: Expr | None

    @property
    def schema(self) -> pa.Schema:
        return pa.schema(list(self.left.schema) + list(self.right.schema))

    @property
    def rowtime(self) -> int | None:
        return self.left.rowtime

    @property
    def updating(self) -> bool:
        return self.left.updating

    @property
    def inputs(self) -> list[LogicalNode]:
        return [self.left, self.right]

    def with_inputs(self, inputs: list[LogicalNode]) -> TemporalJoin:
        return replace(self, left=inputs[0], right=inputs[1])

    def map_expressions(self, fn: Callable[[Expr], Expr]) -> TemporalJoin:
        return replace(self, residual=None if self.residual is None else fn(self.residual))

    def describe(self) -> str:
        keys = ", ".join(f"${lk}=right.${rk}" for lk, rk in zip(self.left_keys, self.right_keys, strict=True))
        where = f", where={self.residual}" if self.residual is not None else ""
        return f"TemporalJoin({self.kind}, keys=[{keys}]{where})"

    def prune_columns(self, required: set[int], prune: Prune) -> tuple[LogicalNode, dict[int, int]]:
        width = len(self.left.schema)
        needed = set(required) | set(self.left_keys) | {width + k for k in self.right_keys}
        if self.residual is not None:
            needed |= referenced_columns(self.residual)
        left, right, lmap, rmap, mapping = _prune_two_inputs(self.left, self.right, needed, prune)
        residual = None if self.residual is None else remap_columns(self.residual, mapping)
        return TemporalJoin(left, right, self.kind, [lmap[k] for k in self.left_keys],
                            [rmap[k] for k in self.right_keys], residual), mapping


@dataclass
class Union(LogicalNode):
    """UNION ALL of inputs with identical column types."""

    children: list[LogicalNode]

    @property
    def schema(self) -> pa.Schema:
        return self.children[0].schema

    @property
    def rowtime(self) -> int | None:
        times = {c.rowtime for c in self.children}
        return times.pop() if len(times) == 1 else None

    @property
    def inputs(self) -> list[LogicalNode]:
        return self.children

    def with_inputs(self, inputs: list[LogicalNode]) -> Union:
        return Union(list(inputs))

    def describe(self) -> str:
        return f"UnionAll(columns=[{_names(self.schema)}])"

    def prune_columns(self, required: set[int], prune: Prune) -> tuple[LogicalNode, dict[int, int]]:
        children = [prune(c, set(range(len(c.schema))))[0] for c in self.children]
        return Union(children), _identity(self)


@dataclass
class ReplicateRows(OneInput):
    """Each row repeated as often as its column ``times`` says (none when 0 or less): the ALL forms
    of INTERSECT and EXCEPT.  An updating input's -U/-D rows are repeated as their +I/+U were."""

    input: LogicalNode
    times: int

    @property
    def schema(self) -> pa.Schema:
        return self.input.schema

    def describe(self) -> str:
        return f"ReplicateRows(times=${self.times})"

    def prune_columns(self, required: set[int], prune: Prune) -> tuple[LogicalNode, dict[int, int]]:
        child, mapping = prune(self.input, set(required) | {self.times})
        return ReplicateRows(child, mapping[self.times]), mapping


@dataclass
class Unnest(KeepsTime):
    """Each input row joined with the elements of a collection it holds: ``CROSS JOIN UNNEST(c) AS
    t(...)`` (and ``LEFT JOIN ... ON TRUE``, where a row whose collection is NULL or empty is kept
    once with NULLs), Flink's correlate over $UNNEST_ROWS.  The output is the input's columns, then
    the element's: one for an ARRAY of scalars, one per field for an ARRAY of ROWs, key and value
    for a MAP, and the 1-based position WITH ORDINALITY.  Stateless: a retraction expands into the
    same rows its insertion did."""

    input: LogicalNode
    collection: Expr  # an ARRAY or MAP over the input's columns
    names: list[str]  # the element's columns (and the ordinality's)
    ordinality: bool
    left: bool

    @property
    def element_fields(self) -> list[pa.Field]:
        t = self.collection.type
        if pa.types.is_map(t):
            types = [t.key_type, t.item_type]
        elif pa.types.is_struct(t.value_type):
            types = [f.type for f in t.value_type]
        else:
            types = [t.value_type]
        if self.ordinality:
            types.append(pa.int32())
        return [pa.field(n, ty) for n, ty in zip(self.names, types, strict=True)]

    @property
    def schema(self) -> pa.Schema:
        return pa.schema(list(self.input.schema) + self.element_fields)

    def map_expressions(self, fn: Callable[[Expr], Expr]) -> Unnest:
        return replace(self, collection=fn(self.collection))

    def describe(self) -> str:
        kind = "LEFT" if self.left else "INNER"
        ordinality = " WITH ORDINALITY" if self.ordinality else ""
        return f"Unnest({kind}, {self.collection}{ordinality} AS ({', '.join(self.names)}))"

    def prune_columns(self, required: set[int], prune: Prune) -> tuple[LogicalNode, dict[int, int]]:
        width = len(self.input.schema)
        child, mapping = prune(self.input, {i for i in required if i < width} | referenced_columns(self.collection))
        node = replace(self, input=child, collection=remap_columns(self.collection, mapping))
        child_width = len(child.schema)
        out = {old: new for old, new in mapping.items() if old < width}
        out.update({width + j: child_width + j for j in range(len(self.names))})
        return node, out


@dataclass
class Values(LogicalNode):
    """Literal rows (INSERT INTO ... VALUES, SELECT without FROM)."""

    table: pa.Table

    @property
    def schema(self) -> pa.Schema:
        return self.table.schema

    @property
    def inputs(self) -> list[LogicalNode]:
        return []

    def with_inputs(self, inputs: list[LogicalNode]) -> Values:
        return self

    def describe(self) -> str:
        return f"Values(rows={self.table.num_rows})"

    def prune_columns(self, required: set[int], prune: Prune) -> tuple[LogicalNode, dict[int, int]]:
        keep = sorted(required) or [0]
        return Values(self.table.select(keep)), {old: new for new, old in enumerate(keep)}


@dataclass
class Sink(OneInput):
    """INSERT INTO ``table``; ``table`` None means collect the rows for the client (SELECT)."""

    input: LogicalNode
    table: TableDef | None
    options: dict = field(default_factory=dict)

    @property
    def schema(self) -> pa.Schema:
        return self.input.schema

    def describe(self) -> str:
        return f"Sink(table={self.table.name if self.table else '<client>'}, columns=[{_names(self.schema)}])"

    def prune_columns(self, required: set[int], prune: Prune) -> tuple[LogicalNode, dict[int, int]]:
        child, _ = prune(self.input, set(range(len(self.input.schema))))
        return Sink(child, self.table, self.options), {}
