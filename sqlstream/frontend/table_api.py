"""A Python Table API in the style of PyFlink, compiled to Flink SQL.

Every call composes SQL text in the Flink dialect (identifiers quoted with
backticks), and a table is planned by parsing that text and handing it to
the same binder, optimizer and runtime as a typed query: one planner, two
front-ends, so a Table API program and its SQL spelling cannot drift apart.
``Table.explain()`` shows the plan and ``Table.sql`` the SQL behind it.

    env = TableEnvironment.create(streaming=True)
    env.execute_sql("CREATE TABLE orders (...) WITH ('connector' = 'datagen', ...)")
    t = env.from_path("orders").where(col("amount") > 10)
    t.group_by(col("k")).select(col("k"), col("amount").sum.alias("total")).execute().print()

Streaming results are changelogs: ``collect()`` yields :class:`Row` objects
whose :meth:`Row.get_row_kind` says whether they insert, retract or update.
``to_arrow()`` / ``to_pandas()`` run a bounded query to its end and return
the final rows (the changelog applied).  In batch mode ``collect()`` yields
the final rows too.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
import queue
import re
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

import pyarrow as pa
from sqlglot import exp

from sqlstream.catalog.persistent import FunctionDef, parse_statements
from sqlstream.core import config as config_keys
from sqlstream.core.errors import PlanError, SqlStreamError
from sqlstream.core.functions import udfs
from sqlstream.core.pandas_deferral import restore_pandas
from sqlstream.core.sql import dialect
from sqlstream.core.sql.script import parse_one
from sqlstream.core.tables import ViewDef
from sqlstream.core.types import sql_type_name
from sqlstream.frontend.session import Session as SqlSession
from sqlstream.frontend.session import StatementResult
from sqlstream.frontend.tableau import TableauPrinter
from sqlstream.planner import planner
from sqlstream.runtime.elements import Chunk, RowKind

# ---------------------------------------------------------------- SQL text helpers


def quote(name: str) -> str:
    """A Flink identifier: backticks, with an embedded backtick doubled."""
    return "`" + name.replace("`", "``") + "`"


def _string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _type_sql(t: str | pa.DataType) -> str:
    return t if isinstance(t, str) else sql_type_name(t)


# ---------------------------------------------------------------- expressions



def _python_values(column: pa.Array | pa.ChunkedArray) -> list[Any]:
    """A result column as Python values: a nanosecond TIMESTAMP becomes a ``datetime`` cut to
    microseconds, as PyFlink hands Java's LocalDateTime to Python (without pandas pyarrow has no
    Python value for nanoseconds)."""
    t = column.type
    if pa.types.is_timestamp(t) and t.unit == "ns":
        column = column.cast(pa.timestamp("us", t.tz), safe=False)
    return column.to_pylist()

class Expression:
    """A column expression; operators and properties build larger ones, as in PyFlink."""

    __hash__ = object.__hash__  # == builds an expression, so hash by identity

    def render(self, ctx: _RenderContext) -> str:
        raise NotImplementedError(type(self).__name__)

    # -- operators
    def _bin(self, op: str, other: Any, reverse: bool = False) -> Expression:
        left, right = (_expr(other), self) if reverse else (self, _expr(other))
        return _Binary(op, left, right)

    def __add__(self, o: Any) -> Expression: return self._bin("+", o)
    def __radd__(self, o: Any) -> Expression: return self._bin("+", o, True)
    def __sub__(self, o: Any) -> Expression: return self._bin("-", o)
    def __rsub__(self, o: Any) -> Expression: return self._bin("-", o, True)
    def __mul__(self, o: Any) -> Expression: return self._bin("*", o)
    def __rmul__(self, o: Any) -> Expression: return self._bin("*", o, True)
    def __truediv__(self, o: Any) -> Expression: return self._bin("/", o)
    def __rtruediv__(self, o: Any) -> Expression: return self._bin("/", o, True)
    def __mod__(self, o: Any) -> Expression: return self._bin("%", o)
    def __eq__(self, o: Any) -> Expression: return self._bin("=", o)  # type: ignore[override]
    def __ne__(self, o: Any) -> Expression: return self._bin("<>", o)  # type: ignore[override]
    def __lt__(self, o: Any) -> Expression: return self._bin("<", o)
    def __le__(self, o: Any) -> Expression: return self._bin("<=", o)
    def __gt__(self, o: Any) -> Expression: return self._bin(">", o)
    def __ge__(self, o: Any) -> Expression: return self._bin(">=", o)
    def __and__(self, o: Any) -> Expression: return self._bin("AND", o)
    def __or__(self, o: Any) -> Expression: return self._bin("OR", o)
    def __invert__(self) -> Expression: return _Template("NOT ({0})", [self])
    def __neg__(self) -> Expression: return _Template("-({0})", [self])

    def __bool__(self) -> bool:
        raise TypeError("a Table API expression has no truth value; use & | ~ instead of and/or/not")

    # -- naming and types
    def alias(self, name: str, *extra_names: str) -> Expression:
        """A name for the value; several names for the columns of a table function call
        (``call('split', col('s')).alias('word', 'length')`` in ``join_lateral``)."""
        return _Alias(self, name) if not extra_names else _ColumnsAlias(self, (name, *extra_names))

    def cast(self, type_: str | pa.DataType) -> Expression:
        return _Template(f"CAST({{0}} AS {_type_sql(type_)})", [self])

    # -- aggregates (PyFlink spells them as properties)
    @property
    def sum(self) -> _Aggregate: return _Aggregate("SUM", self)
    @property
    def count(self) -> _Aggregate: return _Aggregate("COUNT", self)
    @property
    def avg(self) -> _Aggregate: return _Aggregate("AVG", self)
    @property
    def min(self) -> _Aggregate: return _Aggregate("MIN", self)
    @property
    def max(self) -> _Aggregate: return _Aggregate("MAX", self)

    # -- predicates and common functions
    @property
    def is_null(self) -> Expression: return _Template("{0} IS NULL", [self])
    @property
    def is_not_null(self) -> Expression: return _Template("{0} IS NOT NULL", [self])
    @property
    def upper_case(self) -> Expression: return call("UPPER", self)
    @property
    def lower_case(self) -> Expression: return call("LOWER", self)
    @property
    def char_length(self) -> Expression: return call("CHAR_LENGTH", self)

    def like(self, pattern: Any) -> Expression:
        return _Template("{0} LIKE {1}", [self, _expr(pattern)])

    def between(self, low: Any, high: Any) -> Expression:
        return _Template("{0} BETWEEN {1} AND {2}", [self, _expr(low), _expr(high)])

    def in_(self, *values: Any) -> Expression:
        args = [self, *map(_expr, values)]
        return _Template("{0} IN (" + ", ".join(f"{{{i}}}" for i in range(1, len(args))) + ")", args)

    # -- intervals: lit(10).seconds
    def _interval(self, unit: str) -> Expression:
        if not isinstance(self, _Literal) or not isinstance(self.value, int | float):
            raise PlanError(f"an interval needs a numeric literal, e.g. lit(10).{unit.lower()}s")
        return _Raw(f"INTERVAL {_string(str(self.value))} {unit}")

    @property
    def millis(self) -> Expression: return self._interval("MILLISECOND")
    @property
    def seconds(self) -> Expression: return self._interval("SECOND")
    @property
    def minutes(self) -> Expression: return self._interval("MINUTE")
    @property
    def hours(self) -> Expression: return self._interval("HOUR")
    @property
    def days(self) -> Expression: return self._interval("DAY")

    milli, second, minute, hour, day = millis, seconds, minutes, hours, days

    # -- window properties: col('w').start
    @property
    def start(self) -> Expression: return _WindowProperty(self, "window_start")
    @property
    def end(self) -> Expression: return _WindowProperty(self, "window_end")
    @property
    def rowtime(self) -> Expression: return _WindowProperty(self, "window_time")

    def __repr__(self) -> str:
        return f"Expression({self.render(_RenderContext())})"


@dataclass(frozen=True, eq=False)
class _Column(Expression):
    name: str

    def render(self, ctx: _RenderContext) -> str:
        if ctx.window_alias is not None and self.name.lower() == ctx.window_alias.lower():
            raise PlanError(f"the window '{self.name}' can only be grouped on, or used as {self.name}.start / .end")
        return quote(self.name)


@dataclass(frozen=True, eq=False)
class _Literal(Expression):
    value: Any

    def render(self, ctx: _RenderContext) -> str:
        return sql_literal(self.value)


@dataclass(frozen=True, eq=False)
class _Raw(Expression):
    text: str

    def render(self, ctx: _RenderContext) -> str:
        return self.text


@dataclass(frozen=True, eq=False)
class _Binary(Expression):
    op: str
    left: Expression
    right: Expression

    def render(self, ctx: _RenderContext) -> str:
        return f"({self.left.render(ctx)} {self.op} {self.right.render(ctx)})"


@dataclass(frozen=True, eq=False)
class _Template(Expression):
    template: str
    args: list[Expression]

    def render(self, ctx: _RenderContext) -> str:
        return self.template.format(*(a.render(ctx) for a in self.args))


@dataclass(frozen=True, eq=False)
class _Aggregate(Expression):
    function: str
    arg: Expression
    is_distinct: bool = False

    @property
    def distinct(self) -> _Aggregate:
        """``col('a').count.distinct`` is COUNT(DISTINCT a)."""
        return replace(self, is_distinct=True)

    def render(self, ctx: _RenderContext) -> str:
        return f"{self.function}({'DISTINCT ' if self.is_distinct else ''}{self.arg.render(ctx)})"


@dataclass(frozen=True, eq=False)
class _Alias(Expression):
    inner: Expression
    name: str

    def render(self, ctx: _RenderContext) -> str:
        return f"{self.inner.render(ctx)} AS {quote(self.name)}"


@dataclass(frozen=True, eq=False)
class _ColumnsAlias(Expression):
    """Names for the columns a table function yields; only ``join_lateral`` takes it."""

    inner: Expression
    names: tuple[str, ...]

    def render(self, ctx: _RenderContext) -> str:
        raise PlanError(f"several names ({', '.join(self.names)}) only name a table function's columns, "
                        "in join_lateral / left_outer_join_lateral")


@dataclass(frozen=True, eq=False)
class _WindowProperty(Expression):
    window: Expression
    column: str  # window_start | window_end | window_time

    def render(self, ctx: _RenderContext) -> str:
        name = self.window.name if isinstance(self.window, _Column) else None
        if ctx.window_alias is None or name is None or name.lower() != ctx.window_alias.lower():
            raise PlanError(f"'{name}.{self.column.removeprefix('window_')}' refers to no window of this table; "
                            "use .window(Tumble.over(...).on(...).alias(name)) first")
        return quote(self.column)


@dataclass
class _RenderContext:
    window_alias: str | None = None


def col(name: str) -> Expression:
    """A column by name (case-insensitive, as in SQL)."""
    return _Column(name)


def lit(value: Any) -> Expression:
    """A constant: numbers, strings, booleans, None, datetimes, dates and decimals."""
    return _Literal(value)


def call(function: str, *args: Any) -> Expression:
    """A built-in SQL function by name, e.g. ``call('ROUND', col('v'), 2)``."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", function):
        raise PlanError(f"'{function}' is not a function name")
    exprs = [_expr(a) for a in args]
    return _Template(f"{function.upper()}(" + ", ".join(f"{{{i}}}" for i in range(len(exprs))) + ")", exprs)


def call_sql(sql_expression: str) -> Expression:
    """A SQL expression written as text, e.g. ``call_sql("DATE_FORMAT(ts, 'yyyy-MM-dd')")``."""
    parse_one(sql_expression)  # a syntax error is reported here, located in the expression
    return _Raw(f"({sql_expression})")


def _precision(value: dt.datetime) -> int:
    return 3 if value.microsecond % 1000 == 0 else 6


def _timestamp_text(value: dt.datetime) -> str:
    return value.isoformat(sep=" ", timespec="milliseconds" if _precision(value) == 3 else "microseconds")


def _expr(value: Any) -> Expression:
    return value if isinstance(value, Expression) else _Literal(value)


def sql_literal(value: Any) -> str:
    """A Python value as a Flink SQL constant."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return f"CAST({_string(str(value))} AS DOUBLE)"
        return repr(value)
    if isinstance(value, Decimal):
        sign, digits, exponent = value.as_tuple()
        scale = max(-int(exponent), 0)
        precision = max(len(digits) + max(int(exponent), 0), scale, 1)
        return f"CAST({_string(format(value, 'f'))} AS DECIMAL({precision}, {scale}))"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            utc = value.astimezone(dt.UTC).replace(tzinfo=None)
            return f"CAST({_string(_timestamp_text(utc) + 'Z')} AS TIMESTAMP_LTZ({_precision(utc)}))"
        return f"CAST({_string(_timestamp_text(value))} AS TIMESTAMP({_precision(value)}))"
    if isinstance(value, dt.date):
        return f"CAST({_string(value.isoformat())} AS DATE)"
    raise PlanError(f"cannot write {type(value).__name__} value {value!r} as a SQL constant")


# ---------------------------------------------------------------- windows


@dataclass(frozen=True)
class GroupWindow:
    """A group window: TUMBLE, HOP or SESSION over a time attribute, named by ``alias``."""

    kind: str
    intervals: tuple[Expression, ...]
    time: Expression | None = None
    name: str | None = None

    def on(self, time_field: Expression) -> GroupWindow:
        return replace(self, time=time_field)

    def alias(self, name: str) -> GroupWindow:
        return replace(self, name=name)


class Tumble:
    """``Tumble.over(lit(10).seconds).on(col('ts')).alias('w')``: fixed, non-overlapping windows."""

    @staticmethod
    def over(size: Expression) -> GroupWindow:
        return GroupWindow("TUMBLE", (size,))


@dataclass(frozen=True)
class _SlideSize:
    size: Expression

    def every(self, slide: Expression) -> GroupWindow:
        return GroupWindow("HOP", (slide, self.size))


class Slide:
    """``Slide.over(lit(1).minutes).every(lit(20).seconds)``: overlapping (hopping) windows."""

    @staticmethod
    def over(size: Expression) -> _SlideSize:
        return _SlideSize(size)


class Session:
    """``Session.with_gap(lit(30).seconds)``: a window per key that closes after a gap without rows."""

    @staticmethod
    def with_gap(gap: Expression) -> GroupWindow:
        return GroupWindow("SESSION", (gap,))


# ---------------------------------------------------------------- tables


@dataclass(frozen=True)
class _Spec:
    """One SELECT: ``ctes`` stay at the top, everything else nests as subqueries."""

    source: str  # the FROM item: a quoted name, a subquery with alias, or TABLE(TUMBLE(...))
    name: str | None = None  # set when the source is a plain table, view or CTE name
    where: tuple[str, ...] = ()
    items: tuple[str, ...] | None = None  # None: *
    group: tuple[str, ...] | None = None
    ctes: tuple[tuple[str, str], ...] = ()

    @property
    def plain(self) -> bool:
        """Only a source and filters: a projection or grouping can still be added to this SELECT."""
        return self.items is None and self.group is None

    def body(self) -> str:
        text = f"SELECT {', '.join(self.items) if self.items is not None else '*'} FROM {self.source}"
        if self.where:
            text += " WHERE " + " AND ".join(self.where)
        if self.group:
            text += " GROUP BY " + ", ".join(self.group)
        return text

    def sql(self) -> str:
        if not self.ctes:
            return self.body()
        return "WITH " + ", ".join(f"{quote(n)} AS ({q})" for n, q in self.ctes) + " " + self.body()


class Table:
    """A relational expression over catalog tables; nothing runs until it is executed."""

    def __init__(self, env: TableEnvironment, spec: _Spec) -> None:
        self._env = env
        self._spec = spec

    @property
    def sql(self) -> str:
        """The Flink SQL query this table stands for."""
        return self._spec.sql()

    def __repr__(self) -> str:
        return f"Table({self.sql})"

    def _wrapped(self) -> _Spec:
        """This table as the FROM of a new SELECT."""
        spec = self._spec
        alias = self._env._fresh("t")
        return _Spec(f"({spec.body()}) AS {quote(alias)}", ctes=spec.ctes)

    def _open(self) -> _Spec:
        return self._spec if self._spec.plain else self._wrapped()

    # -- relational operations
    def select(self, *fields: Expression | str) -> Table:
        spec = self._open()
        return Table(self._env, replace(spec, items=tuple(_item(f, _RenderContext()) for f in fields)))

    def where(self, predicate: Expression | str) -> Table:
        spec = self._open()
        return Table(self._env, replace(spec, where=(*spec.where, _predicate(predicate, _RenderContext()))))

    filter = where

    def group_by(self, *keys: Expression | str) -> GroupedTable:
        return GroupedTable(self, list(keys))

    def window(self, window: GroupWindow) -> GroupWindowedTable:
        if window.time is None or window.name is None:
            raise PlanError("a group window needs .on(time column) and .alias(name)")
        return GroupWindowedTable(self, window)

    def distinct(self) -> Table:
        spec = self._wrapped()
        return Table(self._env, replace(spec, items=("DISTINCT *",)))

    def join_lateral(self, table_function_call: Expression, join_predicate: Expression | str | None = None) -> Table:
        """Each row joined with the rows a table function yields for it (rows yielding none are
        dropped), as PyFlink's: ``t.join_lateral(call('split', col('s')).alias('word', 'len'))``,
        optionally only where ``join_predicate`` holds. SQL: ``JOIN LATERAL TABLE(...) ON ...``."""
        return self._lateral(table_function_call, join_predicate, outer=False)

    def left_outer_join_lateral(self, table_function_call: Expression,
                                join_predicate: Expression | str | None = None) -> Table:
        """As ``join_lateral``, keeping a row whose call yields nothing with NULLs for the function's
        columns; the predicate, as in Flink, may only be TRUE."""
        return self._lateral(table_function_call, join_predicate, outer=True)

    def _lateral(self, table_function_call: Expression, join_predicate: Expression | str | None, outer: bool) -> Table:
        names: tuple[str, ...] = ()
        fn = table_function_call
        if isinstance(fn, _Alias):
            fn, names = fn.inner, (fn.name,)
        elif isinstance(fn, _ColumnsAlias):
            fn, names = fn.inner, fn.names
        if not isinstance(fn, Expression):
            raise PlanError("join_lateral takes a table function call: call('f', col('x')), optionally "
                            ".alias('a', 'b', ...)")
        ctx = _RenderContext()
        left = self._env._fresh("t")
        alias = self._env._fresh("f")
        columns = f" ({', '.join(quote(n) for n in names)})" if names else ""
        condition = "TRUE" if join_predicate is None else _predicate(join_predicate, ctx)
        spec = self._spec
        source = (f"({spec.body()}) AS {quote(left)} {'LEFT JOIN' if outer else 'JOIN'} "
                  f"LATERAL TABLE({fn.render(ctx)}) AS {quote(alias)}{columns} ON {condition}")
        return Table(self._env, _Spec(source, ctes=spec.ctes))

    def union_all(self, other: Table) -> Table:
        alias = self._env._fresh("t")
        source = f"({self._spec.body()} UNION ALL {other._spec.body()}) AS {quote(alias)}"
        ctes = self._spec.ctes + tuple(c for c in other._spec.ctes if c not in self._spec.ctes)
        return Table(self._env, _Spec(source, ctes=ctes))

    # -- execution
    def get_schema(self) -> pa.Schema:
        return planner.select_plan(self._env.session.catalog, parse_one(self.sql), self._env.session.config).schema

    def explain(self) -> str:
        return self._env.explain_sql(self.sql)

    def execute(self) -> TableResult:
        """Runs the query; the result's ``collect()`` / ``print()`` stream its rows."""
        return self._env.execute_sql(self.sql)

    def execute_insert(self, table_path: str) -> TableResult:
        """``INSERT INTO table_path`` this table, as an asynchronous job (``.wait()`` for it)."""
        return self._env.execute_sql(f"INSERT INTO {quote(table_path)} {self.sql}")

    def to_arrow(self) -> pa.Table:
        """Runs a bounded query to its end; the final rows (an updating result's changelog applied)."""
        return self._env._run_bounded(self.sql)

    def to_pandas(self) -> Any:
        return self.to_arrow().to_pandas()


class GroupedTable:
    def __init__(self, table: Table, keys: list[Expression | str]) -> None:
        self._table = table
        self._keys = keys

    def select(self, *fields: Expression | str) -> Table:
        ctx = _RenderContext()
        spec = self._table._open()
        group = tuple(_expression(k, ctx) for k in self._keys)
        items = tuple(_item(f, ctx) for f in fields)
        return Table(self._table._env, replace(spec, items=items, group=group))


class GroupWindowedTable:
    def __init__(self, table: Table, window: GroupWindow) -> None:
        self._table = table
        self._window = window

    def group_by(self, *keys: Expression | str) -> WindowGroupedTable:
        return WindowGroupedTable(self._table, self._window, list(keys))


class WindowGroupedTable:
    def __init__(self, table: Table, window: GroupWindow, keys: list[Expression | str]) -> None:
        self._table = table
        self._window = window
        self._keys = keys

    def select(self, *fields: Expression | str) -> Table:
        env, w = self._table._env, self._window
        assert w.name is not None and w.time is not None
        spec = self._table._spec
        if spec.name is None or not spec.plain:
            # a window TVF reads a named relation: make this table a CTE
            cte = env._fresh("w")
            spec = _Spec(quote(cte), name=cte, ctes=(*spec.ctes, (cte, spec.body())))
        plain_ctx = _RenderContext()
        keys: list[str] = []
        partition: list[str] = []
        has_window = False
        for k in self._keys:
            e = col(k) if isinstance(k, str) else k
            if isinstance(e, _Column) and e.name.lower() == w.name.lower():
                has_window = True
                keys += [quote("window_start"), quote("window_end")]
            else:
                keys.append(e.render(plain_ctx))
                partition.append(e.render(plain_ctx))
        if not has_window:
            raise PlanError(f"a windowed table must be grouped by its window: .group_by(col('{w.name}'), ...)")
        intervals = ", ".join(i.render(plain_ctx) for i in w.intervals)
        by = f" PARTITION BY {', '.join(partition)}" if w.kind == "SESSION" and partition else ""
        source = (f"TABLE({w.kind}(TABLE {quote(spec.name or '')}{by}, DESCRIPTOR({w.time.render(plain_ctx)}), "
                  f"{intervals}))")
        ctx = _RenderContext(window_alias=w.name)
        items = tuple(_item(f, ctx) for f in fields)
        out = _Spec(source, where=spec.where, items=items, group=tuple(keys), ctes=spec.ctes)
        return Table(env, out)


def _expression(e: Expression | str, ctx: _RenderContext) -> str:
    return (col(e) if isinstance(e, str) else e).render(ctx)


def _item(e: Expression | str, ctx: _RenderContext) -> str:
    if isinstance(e, str):
        return "*" if e == "*" else quote(e)
    return e.render(ctx)


def _predicate(e: Expression | str, ctx: _RenderContext) -> str:
    if isinstance(e, str):
        parse_one(e)  # a SQL condition written as text; located errors come from here
        return f"({e})"
    return e.render(ctx)


# ---------------------------------------------------------------- results


class Row(tuple):
    """A result row: a tuple with field names and a row kind (+I, -U, +U, -D)."""

    _fields: tuple[str, ...]
    _kind: RowKind

    def __new__(cls, values: tuple | list, fields: tuple[str, ...] = (), kind: RowKind = RowKind.INSERT) -> Row:
        row = super().__new__(cls, values)
        row._fields = fields
        row._kind = kind
        return row

    def get_row_kind(self) -> RowKind:
        return self._kind

    def get_field_names(self) -> list[str]:
        return list(self._fields)

    def as_dict(self) -> dict[str, Any]:
        return dict(zip(self._fields, self, strict=True))

    def __getattr__(self, name: str) -> Any:
        try:
            return self[self._fields.index(name)]
        except ValueError:
            raise AttributeError(name) from None

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._fields.index(key))
        return tuple.__getitem__(self, key)

    def __repr__(self) -> str:
        return f"{self._kind.short}{list(self)}"


def _hashable(value: Any) -> Any:
    """A row (a tuple) or value as a dict key: its ARRAYs and ROWs made tuples, all the way down."""
    if isinstance(value, list | tuple):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    return value


class MaterializedChangelog:
    """The rows a changelog stands for: +I/+U add a row, -U/-D take one away; order is kept."""

    def __init__(self) -> None:
        self._rows: dict[Any, list] = {}  # key -> [values, count]

    def apply(self, values: tuple, kind: RowKind) -> None:
        key = _hashable(values)
        entry = self._rows.get(key)
        if kind in (RowKind.INSERT, RowKind.UPDATE_AFTER):
            if entry is None:
                self._rows[key] = [values, 1]
            else:
                entry[1] += 1
            return
        if entry is None:
            raise SqlStreamError(f"the changelog retracts a row it never inserted: {list(values)}")
        entry[1] -= 1
        if entry[1] == 0:
            del self._rows[key]

    def apply_chunk(self, batch: pa.RecordBatch | pa.Table, kinds: pa.Array | None) -> None:
        columns = [_python_values(c) for c in batch.columns]
        ops = kinds.to_pylist() if kinds is not None else [0] * batch.num_rows
        for i, op in enumerate(ops):
            self.apply(tuple(c[i] for c in columns), RowKind(op))

    def rows(self) -> list[tuple]:
        return [values for values, count in self._rows.values() for _ in range(count)]

    def __len__(self) -> int:
        return sum(count for _, count in self._rows.values())

    def to_arrow(self, schema: pa.Schema) -> pa.Table:
        rows = self.rows()
        return pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema=schema) \
            if rows else schema.empty_table()


class CloseableIterator:
    """Rows of a running query as they arrive; ``close()`` (or leaving a ``with``) cancels it."""

    def __init__(self, rows: Iterator[Row], close: Callable[[], None]) -> None:
        self._rows = rows
        self._close = close

    def __iter__(self) -> CloseableIterator:
        return self

    def __next__(self) -> Row:
        return next(self._rows)

    def close(self) -> None:
        self._close()

    def __enter__(self) -> CloseableIterator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Job:
    """One query or INSERT running in a thread of its own, on a session of its own."""

    def __init__(self, env: TableEnvironment, sql: str, on_rows: Callable[[Chunk, pa.Schema], None] | None) -> None:
        self.session = env._job_session()
        self.sql = sql
        self.on_rows = on_rows
        self.cancelled = threading.Event()
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.result: StatementResult | None = None
        self.thread = threading.Thread(target=self._run, name="table-api-job", daemon=True)

    def start(self) -> _Job:
        self.thread.start()
        return self

    def _run(self) -> None:
        try:
            self.result = self.session.execute_script(self.sql, on_rows=self.on_rows)[-1]
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            self.error = e
        finally:
            self.done.set()

    def cancel(self) -> None:
        self.cancelled.set()
        while not self.done.is_set():
            executor = self.session.current_executor
            if executor is not None:
                executor.cancel()
            self.done.wait(0.05)

    def wait(self, timeout: float | None = None) -> StatementResult | None:
        if not self.done.wait(timeout):
            raise TimeoutError(f"the job did not finish within {timeout} s")
        if self.error is not None:
            raise self.error
        return self.result


class TableResult:
    """What ``execute_sql`` / ``Table.execute`` return: a message, rows, or a running job."""

    def __init__(self, env: TableEnvironment, schema: pa.Schema, *, message: str = "",
                 table: pa.Table | None = None, query: str | None = None, job: _Job | None = None) -> None:
        self._env = env
        self._schema = schema
        self._message = message
        self._table = table
        self._query = query
        self._job = job

    @property
    def schema(self) -> pa.Schema:
        return self._schema

    def get_result_kind(self) -> str:
        """'SUCCESS' for DDL and settings, 'SUCCESS_WITH_CONTENT' for anything with rows."""
        return "SUCCESS" if self._table is None and self._query is None and self._job is None else "SUCCESS_WITH_CONTENT"

    def wait(self, timeout: float | None = None) -> None:
        """Blocks until an INSERT job ends; re-raises its failure."""
        if self._job is not None:
            self._job.wait(timeout)

    def cancel(self) -> None:
        if self._job is not None:
            self._job.cancel()

    def collect(self) -> CloseableIterator:
        """The rows; for a query, streamed while it runs (a changelog in streaming mode)."""
        fields = tuple(self._schema.names)
        if self._query is None:
            table = self._table if self._table is not None else pa.table({"result": [self._message or "OK"]})
            rows = (Row(tuple(v), fields) for v in zip(*(_python_values(c) for c in table.columns), strict=True))
            return CloseableIterator(iter(rows), lambda: None)
        if not self._env.streaming:
            final = self._env._run_bounded(self._query)
            values = zip(*(_python_values(c) for c in final.columns), strict=True)
            return CloseableIterator(iter([Row(tuple(v), fields) for v in values]), lambda: None)
        chunks: queue.Queue[Chunk] = queue.Queue(maxsize=16)
        job: _Job

        def on_rows(chunk: Chunk, schema: pa.Schema) -> None:
            while not job.cancelled.is_set():
                try:
                    chunks.put(chunk, timeout=0.1)
                    return
                except queue.Full:
                    continue

        job = _Job(self._env, self._query, on_rows)

        def rows() -> Iterator[Row]:
            job.start()
            while True:
                try:
                    item = chunks.get(timeout=0.05)
                except queue.Empty:
                    if job.done.is_set() and chunks.empty():
                        break  # every chunk is put before the job is done
                    continue
                columns = [_python_values(c) for c in item.batch.columns]
                kinds = item.kinds.to_pylist() if item.kinds is not None else [0] * item.num_rows
                for i, k in enumerate(kinds):
                    yield Row(tuple(c[i] for c in columns), fields, RowKind(k))
            if job.error is not None and not job.cancelled.is_set():
                raise job.error

        return CloseableIterator(rows(), job.cancel)

    def print(self, out: Any = None) -> None:
        """Prints the rows in the SQL client's tableau format, as they arrive."""
        out = out or sys.stdout
        if self._query is None:
            if self._table is None:
                print(self._message or "OK", file=out)
                return
            printer = TableauPrinter(self._table.schema, out, changelog=False)
            printer.write(self._table, None)
            printer.finish()
            return
        printer = TableauPrinter(self._schema, out, changelog=self._env.streaming)
        if self._env.streaming:
            with self.collect() as rows:
                for group in _batched(rows, 256):
                    table = pa.Table.from_pylist([r.as_dict() for r in group], schema=self._schema)
                    printer.write(table, pa.array([int(r.get_row_kind()) for r in group], pa.int8()))
        else:
            printer.write(self._env._run_bounded(self._query), None)
        printer.finish()


def _batched(rows: Iterator[Row], n: int) -> Iterator[list[Row]]:
    while group := list(itertools.islice(rows, n)):
        yield group


# ---------------------------------------------------------------- the environment


@dataclass(frozen=True)
class EnvironmentSettings:
    streaming: bool = True

    @staticmethod
    def in_streaming_mode() -> EnvironmentSettings:
        return EnvironmentSettings(True)

    @staticmethod
    def in_batch_mode() -> EnvironmentSettings:
        return EnvironmentSettings(False)


class TableConfig:
    """The session's settings, as ``SET 'key' = 'value'`` would make them."""

    def __init__(self, config: dict[str, str]) -> None:
        self._config = config

    def set(self, key: str, value: str) -> TableConfig:
        """Set a key as SET would: an unknown key or bad value raises, a key without effect warns."""
        warning = config_keys.validate(key, str(value))
        if warning is not None:
            warnings.warn(warning, stacklevel=2)
        self._config[key] = str(value)
        return self

    def get(self, key: str, default: str | None = None) -> str | None:
        return self._config.get(key, default)


class TableEnvironment:
    """Entry point: a catalog, settings, and the execution of SQL and Table API programs."""

    def __init__(self, settings: EnvironmentSettings | None = None, session: SqlSession | None = None) -> None:
        self.settings = settings or EnvironmentSettings.in_streaming_mode()
        self.session = session or SqlSession()
        self._names = itertools.count()

    @staticmethod
    def create(settings: EnvironmentSettings | None = None, streaming: bool | None = None) -> TableEnvironment:
        if settings is None:
            settings = EnvironmentSettings(True if streaming is None else streaming)
        return TableEnvironment(settings)

    @property
    def streaming(self) -> bool:
        return self.settings.streaming

    def _fresh(self, prefix: str) -> str:
        return f"_{prefix}{next(self._names)}"

    def _job_session(self) -> SqlSession:
        """Jobs share the catalog and a copy of the settings; each has its own executor to cancel."""
        return SqlSession(catalog=self.session.catalog, config=dict(self.session.config))

    def get_config(self) -> TableConfig:
        return TableConfig(self.session.config)

    # -- SQL
    def execute_sql(self, statement: str) -> TableResult:
        """Runs one statement.  DDL and SET run now; an INSERT starts a job (``.wait()``);
        a SELECT runs when its rows are collected or printed."""

        statements = parse_statements(statement)
        if len(statements) != 1:
            raise PlanError(f"execute_sql takes one statement, got {len(statements)}")
        node = statements[0].node
        if isinstance(node, exp.Query):
            schema = planner.select_plan(self.session.catalog, node, self.session.config).schema
            return TableResult(self, schema, query=statement)
        if isinstance(node, exp.Insert | dialect.StatementSet):
            self.session._roots(node)  # plan errors surface here, not in the job's thread
            job = _Job(self, statement, None).start()
            return TableResult(self, pa.schema([("job", pa.string())]), job=job)
        result = self.session.execute_script(statement)[0]
        if result.table is not None:
            return TableResult(self, result.table.schema, table=result.table)
        return TableResult(self, pa.schema([("result", pa.string())]), message=result.message)

    def sql_query(self, query: str) -> Table:
        """A Table for a SELECT written in SQL, to continue with Table API calls."""
        node = parse_one(query)
        if not isinstance(node, exp.Query):
            raise PlanError("sql_query takes a SELECT query; use execute_sql for other statements")
        planner.select_plan(self.session.catalog, node, self.session.config)  # fail now on unknown tables or columns
        alias = self._fresh("q")
        return Table(self, _Spec(f"({query}) AS {quote(alias)}"))

    def explain_sql(self, statement: str) -> str:
        return planner.explain_text(self.session._roots(parse_one(statement)), self.session.config)

    def _run_bounded(self, query: str) -> pa.Table:
        result = self._job_session().execute_script(query)[-1]
        table = result.table
        assert table is not None
        if "op" not in table.column_names:
            return table
        data = table.drop_columns(["op"])
        view = MaterializedChangelog()
        view.apply_chunk(data, table.column("op").combine_chunks())
        return view.to_arrow(data.schema)

    # -- tables
    def from_path(self, path: str) -> Table:
        obj = self.session.catalog.require(path)
        return Table(self, _Spec(quote(obj.name), name=obj.name))

    def from_arrow(self, table: pa.Table) -> Table:
        """An in-memory, bounded table of these rows (planned as literal VALUES)."""
        alias = self._fresh("values")
        return Table(self, _Spec(f"({values_query(table)}) AS {quote(alias)}"))

    def from_pandas(self, df: Any) -> Table:
        restore_pandas()
        return self.from_arrow(pa.Table.from_pandas(df, preserve_index=False))

    def create_temporary_function(self, name: str, function: Callable[..., Any],
                                  result_type: str | pa.DataType | None = None) -> None:
        """A Python scalar UDF (or an ``AggregateFunction``) callable from SQL and ``call(name, ...)``.

        ``result_type`` may be left out for a function decorated with ``@udf(result_type=...)``.
        """

        udfs.register(name, function, None if result_type is None else _type_sql(result_type))
        identifier = f"{getattr(function, '__module__', '')}.{getattr(function, '__qualname__', type(function).__name__)}"
        self.session.catalog.create_function(FunctionDef(name, identifier, "PYTHON", temporary=True))

    def create_temporary_view(self, name: str, table: Table) -> None:
        self.session.catalog.create(ViewDef(name, table.sql, temporary=True))

    def drop_temporary_view(self, name: str) -> None:
        self.session.catalog.drop(name, ViewDef)

    def list_tables(self) -> list[str]:
        return self.session.catalog.names()

    def use_catalog(self, name: str) -> None:
        self.session.catalog.use_catalog(name)

    def use_database(self, name: str) -> None:
        self.session.catalog.use_database(name)


def values_query(table: pa.Table) -> str:
    """``SELECT CAST(c AS type) AS name, ... FROM (VALUES ...)``: the rows with their exact Arrow types.

    VALUES only takes constants, so a value that SQL spells with a CAST (a
    timestamp, a decimal, NaN) is written as a string and cast outside.
    """
    if table.num_columns == 0:
        raise PlanError("from_arrow needs at least one column")
    casts = []
    writers: list[Callable[[Any], str]] = []
    for i, f in enumerate(table.schema):
        type_sql = sql_type_name(f.type)
        native = _native_literal(f.type, table.column(i))
        writers.append(sql_literal if native else _text_literal(f.type))
        casts.append(f"CAST({quote(f'_c{i}')} AS {type_sql}) AS {quote(f.name)}")
    if table.num_rows == 0:
        nulls = ", ".join(f"CAST(NULL AS {sql_type_name(f.type)}) AS {quote(f.name)}" for f in table.schema)
        return f"SELECT {nulls} WHERE FALSE"
    columns = [c.to_pylist() for c in table.columns]
    tuples = ", ".join(
        "(" + ", ".join(w(col[r]) for w, col in zip(writers, columns, strict=True)) + ")"
        for r in range(table.num_rows)
    )
    names = ", ".join(quote(f"_c{i}") for i in range(table.num_columns))
    return f"SELECT {', '.join(casts)} FROM (VALUES {tuples}) AS {quote('_v')} ({names})"


def _native_literal(t: pa.DataType, column: pa.ChunkedArray) -> bool:
    """Whether SQL writes every value of the column as a bare constant (-1 is an expression, NaN a CAST)."""
    if pa.types.is_boolean(t) or pa.types.is_string(t) or pa.types.is_large_string(t):
        return True
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return all(v is None or (math.isfinite(v) and math.copysign(1, v) > 0) for v in column.to_pylist())
    if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_decimal(t):
        return False
    raise PlanError(f"from_arrow does not support columns of type {sql_type_name(t)} yet")


def _text_literal(t: pa.DataType) -> Callable[[Any], str]:
    """Writes a value as the string its column's CAST reads back."""
    if pa.types.is_timestamp(t):
        digits = {"s": 0, "ms": 3, "us": 6, "ns": 6}[t.unit]

        def timestamp(v: dt.datetime | None) -> str:
            if v is None:
                return "NULL"
            if v.tzinfo is not None:
                v = v.astimezone(dt.UTC).replace(tzinfo=None)
            text = v.isoformat(sep=" ", timespec="microseconds")[: 19 + (digits + 1 if digits else 0)]
            return _string(text + ("Z" if t.tz else ""))

        return timestamp
    return lambda v: "NULL" if v is None else _string(str(v))


__all__ = [
    "CloseableIterator", "EnvironmentSettings", "Expression", "GroupWindow", "MaterializedChangelog", "Row",
    "Session", "Slide", "Table", "TableConfig", "TableEnvironment", "TableResult", "Tumble", "call", "call_sql",
    "col", "lit", "quote", "sql_literal", "values_query",
]
