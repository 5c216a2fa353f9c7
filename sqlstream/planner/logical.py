"""Logical plan: plain data classes, one per relational operator.

Each node knows its output schema, which output column (if any) is the
event-time attribute, and whether its output is an updating changelog
(+I/-U/+U/-D) or append-only.  The optimizer rewrites these trees; the
physical planner lowers them into a dataflow.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from sqlstream.core.aggregates import AggCall
from sqlstream.core.expressions import ColumnRef, Expr
from sqlstream.core.tables import TableDef
from sqlstream.core.windows import WINDOW_COLUMNS, WindowSpec


@dataclass
class Scan:
    """Read physical ``columns`` of ``table`` from its connector."""

    table: TableDef
    columns: list[str]

    @property
    def schema(self) -> pa.Schema:
        full = self.table.physical_schema
        return pa.schema([full.field(c) for c in self.columns])

    @property
    def rowtime(self) -> int | None:
        return None  # the WatermarkAssign above the scan makes a column a time attribute

    @property
    def updating(self) -> bool:
        return False

    @property
    def inputs(self) -> list[LogicalNode]:
        return []


@dataclass
class WatermarkAssign:
    """Declares column ``rowtime`` the event-time attribute with watermark ``delay`` expression."""

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
        return window_properties(self.input)

    @property
    def updating(self) -> bool:
        return self.input.updating

    @property
    def inputs(self) -> list[LogicalNode]:
        return [self.input]


@dataclass
class Project:
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
        moved = (w.through(mapping) for w in window_properties(self.input))
        return tuple(w for w in moved if w is not None)

    @property
    def updating(self) -> bool:
        return self.input.updating

    @property
    def inputs(self) -> list[LogicalNode]:
        return [self.input]


@dataclass
class Filter:
    input: LogicalNode
    predicate: Expr

    @property
    def schema(self) -> pa.Schema:
        return self.input.schema

    @property
    def rowtime(self) -> int | None:
        return self.input.rowtime

    @property
    def window_properties(self) -> tuple[WindowColumns, ...]:
        return window_properties(self.input)

    @property
    def updating(self) -> bool:
        return self.input.updating

    @property
    def inputs(self) -> list[LogicalNode]:
        return [self.input]


@dataclass(frozen=True)
class WindowColumns:
    """Window properties: the output columns that hold the bounds of each row's window.

    Rows carrying window columns of ``window`` arrive, at any operator, before the
    watermark passes their window's end - 1: that is what lets a GROUP BY or a join on
    them fire once per window and forget it (a cascaded window aggregation, a window
    join).  ``window`` is the spec of the windowing TVF that assigned the windows, so its
    column indexes refer to that TVF's input; compare specs with ``same_windows``.
    """

    window: WindowSpec
    start: int | None
    end: int | None
    time: int | None

    def role(self, index: int) -> str | None:
        """'window_start' | 'window_end' | 'window_time' if column ``index`` is one of them."""
        for name, col in zip(WINDOW_COLUMNS, (self.start, self.end, self.time), strict=True):
            if col == index:
                return name
        return None

    def through(self, mapping: dict[int, int]) -> WindowColumns | None:
        """The same columns after ``mapping`` (old index -> new); None when none of them is left."""
        moved = [None if c is None else mapping.get(c) for c in (self.start, self.end, self.time)]
        return None if moved == [None, None, None] else WindowColumns(self.window, *moved)


def window_properties(node: LogicalNode) -> tuple[WindowColumns, ...]:
    """A node's window properties.  Nodes that neither make nor pass on window columns (scans,
    regular aggregations and joins, unions, nodes defined in planner.over) have none."""
    return getattr(node, "window_properties", ())


@dataclass
class WindowTVF:
    """Input columns plus window_start, window_end, window_time (one row per window a row is in)."""

    input: LogicalNode
    window: WindowSpec

    @property
    def schema(self) -> pa.Schema:
        ts = self.input.schema.field(self.window.time_index).type
        extra = [pa.field("window_start", ts), pa.field("window_end", ts), pa.field("window_time", ts)]
        return pa.schema(list(self.input.schema) + extra)

    @property
    def rowtime(self) -> int | None:
        return len(self.input.schema) + 2  # window_time

    @property
    def window_properties(self) -> tuple[WindowColumns, ...]:
        width = len(self.input.schema)
        return (*window_properties(self.input), WindowColumns(self.window, width, width + 1, width + 2))

    @property
    def updating(self) -> bool:
        return self.input.updating

    @property
    def inputs(self) -> list[LogicalNode]:
        return [self.input]


@dataclass
class Aggregate:
    """GROUP BY ``keys``: updating output (a changelog keyed by the group keys)."""

    input: LogicalNode
    keys: list[int]
    aggs: list[AggCall]
    key_names: list[str]

    @property
    def schema(self) -> pa.Schema:
        in_schema = self.input.schema
        fields = [pa.field(n, in_schema.field(k).type) for n, k in zip(self.key_names, self.keys, strict=True)]
        return pa.schema(fields + [pa.field(a.name, a.type) for a in self.aggs])

    @property
    def rowtime(self) -> int | None:
        return None

    @property
    def updating(self) -> bool:
        return True

    @property
    def inputs(self) -> list[LogicalNode]:
        return [self.input]


@dataclass
class WindowAggregate:
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
        ts = in_schema.field(ts_column).type
        fields = []
        for name, o in zip(self.output_names, self.outputs, strict=True):
            fields.append(pa.field(name, ts if isinstance(o, str) else in_schema.field(o).type))
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

    @property
    def inputs(self) -> list[LogicalNode]:
        return [self.input]


JOIN_KINDS = ("INNER", "LEFT", "RIGHT", "FULL")


@dataclass
class Join:
    """left JOIN right ON condition; the condition reads left columns then right columns.

    How it runs (equi keys, an interval on the time attributes, a window
    join) is decided when lowering, from the condition (planner.joins).
    """

    left: LogicalNode
    right: LogicalNode
    kind: str  # INNER | LEFT | RIGHT | FULL
    condition: Expr | None

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

    @property
    def inputs(self) -> list[LogicalNode]:
        return [self.left, self.right]


@dataclass
class LookupJoin:
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
    def updating(self) -> bool:
        return self.left.updating

    @property
    def inputs(self) -> list[LogicalNode]:
        return [self.left]


@dataclass
class TemporalJoin:
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


@dataclass
class Union:
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
    def updating(self) -> bool:
        return any(c.updating for c in self.children)

    @property
    def inputs(self) -> list[LogicalNode]:
        return self.children


@dataclass
class Values:
    """Literal rows (INSERT INTO ... VALUES, SELECT without FROM)."""

    table: pa.Table

    @property
    def schema(self) -> pa.Schema:
        return self.table.schema

    @property
    def rowtime(self) -> int | None:
        return None

    @property
    def updating(self) -> bool:
        return False

    @property
    def inputs(self) -> list[LogicalNode]:
        return []


@dataclass
class Sink:
    """INSERT INTO ``table``; ``table`` None means collect the rows for the client (SELECT)."""

    input: LogicalNode
    table: TableDef | None
    options: dict = field(default_factory=dict)

    @property
    def schema(self) -> pa.Schema:
        return self.input.schema

    @property
    def rowtime(self) -> int | None:
        return None

    @property
    def updating(self) -> bool:
        return self.input.updating

    @property
    def inputs(self) -> list[LogicalNode]:
        return [self.input]


LogicalNode = (
    Scan | WatermarkAssign | Project | Filter | WindowTVF | Aggregate | WindowAggregate | Join | LookupJoin
    | TemporalJoin | Union | Values | Sink
)


def explain(node: LogicalNode, indent: int = 0) -> str:
    """An indented text tree of a logical plan (EXPLAIN)."""
    pad = "  " * indent
    line = pad + _describe(node)
    if node.updating and not isinstance(node, Sink):
        line += "  [changelog]"
    return "\n".join([line] + [explain(i, indent + 1) for i in node.inputs])


def _describe(node: LogicalNode) -> str:
    cols = lambda s: ", ".join(s.names)  # noqa: E731
    if isinstance(node, Scan):
        return f"Scan(table={node.table.name}, connector={node.table.connector}, columns=[{', '.join(node.columns)}])"
    if isinstance(node, WatermarkAssign):
        kind = "proctime" if node.proctime else "rowtime"
        return f"WatermarkAssigner({kind}={node.schema.names[node.rowtime_index]}, watermark={node.watermark})"
    if isinstance(node, Project):
        return "Project(" + ", ".join(f"{n}={e}" for n, e in zip(node.names, node.exprs, strict=True)) + ")"
    if isinstance(node, Filter):
        return f"Filter({node.predicate})"
    if isinstance(node, WindowTVF):
        return f"WindowTableFunction({node.window.describe()})"
    if isinstance(node, Aggregate):
        keys = ", ".join(f"${k}" for k in node.keys)
        return f"GroupAggregate(keys=[{keys}], aggs=[{', '.join(a.describe() for a in node.aggs)}])"
    if isinstance(node, WindowAggregate):
        outs = ", ".join(o if isinstance(o, str) else f"${o}" for o in node.outputs)
        if node.input_window is None:
            window = node.window.describe()
        else:
            start, end = node.input_window
            window = f"cascaded, {node.window.describe(time=False)} from window_start=${start}, window_end=${end}"
        return f"WindowAggregate({window}, groups=[{outs}], aggs=[{', '.join(a.describe() for a in node.aggs)}])"
    if isinstance(node, Join):
        from sqlstream.planner.joins import analyze

        spec = analyze(node)
        return f"{'WindowJoin' if spec.window is not None else 'Join'}({node.kind}, {spec.describe(True)})"
    if isinstance(node, LookupJoin):
        keys = ", ".join(f"${i}={c}" for i, c in node.keys)
        where = f", where={node.residual}" if node.residual is not None else ""
        return f"LookupJoin({node.kind}, table={node.table.name} [{node.table.connector}], keys=[{keys}]{where})"
    if isinstance(node, TemporalJoin):
        keys = ", ".join(f"${lk}=right.${rk}" for lk, rk in zip(node.left_keys, node.right_keys, strict=True))
        where = f", where={node.residual}" if node.residual is not None else ""
        return f"TemporalJoin({node.kind}, keys=[{keys}]{where})"
    if isinstance(node, Union):
        return f"UnionAll(columns=[{cols(node.schema)}])"
    if isinstance(node, Values):
        return f"Values(rows={node.table.num_rows})"
    if isinstance(node, Sink):
        return f"Sink(table={node.table.name if node.table else '<client>'}, columns=[{cols(node.schema)}])"
    if hasattr(node, "describe"):  # nodes defined outside this module (planner.over)
        return node.describe()
    raise TypeError(node)
