"""The Flink SQL dialect, as an extension of sqlglot's default dialect.

Flink SQL is Calcite SQL plus streaming DDL (watermarks, computed and metadata
columns, ``WITH (...)`` connector options), windowing table-valued functions
and SQL-client commands (``SET``, ``RESET``, ``SHOW``, ``EXPLAIN``, statement
sets).  Rather than writing a parser, we teach sqlglot the missing pieces so
the rest of the engine works on ordinary sqlglot trees.

How each Flink statement is represented (``node`` is what the parser returns):

* ``SELECT`` / ``WITH`` / ``VALUES`` / ``UNION``: the usual sqlglot query nodes.
* ``INSERT INTO t [(cols)] <query>``: ``exp.Insert``.
* ``CREATE [TEMPORARY] TABLE``: ``exp.Create(kind="TABLE", this=exp.Schema(
  this=exp.Table, expressions=[exp.ColumnDef | exp.WatermarkColumnConstraint
  | exp.PrimaryKey]), properties=exp.Properties([...]))``.  Connector options
  are ``exp.Property(this=Literal key, value=Literal value)``; ``TEMPORARY`` is
  an ``exp.TemporaryProperty`` and ``COMMENT`` an ``exp.SchemaCommentProperty``.
  A computed column ``c AS expr`` is a ``ColumnDef`` without ``kind`` whose
  constraint is ``exp.ComputedColumnConstraint(this=expr)``; a metadata column
  carries a :class:`MetadataColumnConstraint`.  Use :func:`table_options`
  and :func:`watermarks` to read them.
* ``CREATE [TEMPORARY] VIEW v [(cols)] AS <query>``: ``exp.Create(kind="VIEW")``.
* ``DROP [TEMPORARY] TABLE|VIEW [IF EXISTS] t``: ``exp.Drop``.
* ``DESCRIBE t`` / ``DESC t``: ``exp.Describe(this=exp.Table)``.
* ``SHOW ...``: ``exp.Show(this="TABLES" | "VIEWS" | "FUNCTIONS" | "USER FUNCTIONS"
  | "CATALOGS" | "DATABASES" | "CURRENT CATALOG" | "CURRENT DATABASE" | "MODULES"
  | "FULL MODULES" | "JOBS" | "JARS" | "COLUMNS" | "CREATE TABLE" | "CREATE VIEW",
  target=exp.Table for COLUMNS / CREATE ..., db=exp.Table for ``FROM db``,
  like=Literal pattern)``.
* ``SET 'k' = 'v'``: ``exp.Set(expressions=[exp.SetItem(this=exp.EQ(this=Literal k,
  expression=Literal v))])``; ``SET`` alone: ``exp.Set(expressions=[])``.
* ``RESET ['k']``: :class:`Reset`.
* ``EXPLAIN [PLAN FOR | detail, ...] <stmt>``: :class:`Explain`.
* ``EXECUTE STATEMENT SET BEGIN ... END`` / ``BEGIN STATEMENT SET; ... END``:
  :class:`StatementSet` holding the ``exp.Insert`` nodes.
* ``FROM TABLE(TUMBLE|HOP|CUMULATE|SESSION(...))``: :class:`WindowTVF`, placed
  where a table would be.

Statements sqlglot cannot parse structurally are errors, never ``exp.Command``.

Functions whose sqlglot node differs from a plain call: ``TIMESTAMPDIFF(unit,
a, b)`` is ``exp.TimestampDiff(this=b, expression=a, unit=Var)`` (and likewise
``TIMESTAMPADD(unit, n, ts)`` is ``exp.TimestampAdd(this=ts, expression=n)``);
``DATE_FORMAT(ts, 'yyyy-MM-dd')`` is ``exp.TimeToStr(this=ts, format='%Y-%m-%d')``
(Java patterns translated to strftime codes); ``TO_TIMESTAMP_LTZ(x, 3)`` is
``exp.UnixToTime(this=x, scale=3, target_type=TIMESTAMPLTZ)``.  ``ROW<...>``
column types are STRUCT data types.  Positions: identifiers, intervals and
window TVFs carry sqlglot's ``meta`` line/col; :func:`position_of` turns it
into a start column.

Defining :class:`Flink` registers it with sqlglot, so ``read="flink"`` works
once this module is imported.
"""

from __future__ import annotations

import difflib
import re
import typing as t

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect, NormalizationStrategy, build_date_delta
from sqlglot.errors import ParseError, TokenError
from sqlglot.generator import _DISPATCH_CACHE
from sqlglot.generator import Generator as BaseGenerator
from sqlglot.helper import seq_get
from sqlglot.parser import Parser as BaseParser
from sqlglot.tokens import Token, TokenType
from sqlglot.tokens import Tokenizer as BaseTokenizer

from sqlstream.core.errors import PlanError

# ---------------------------------------------------------------------------
# Node classes for what sqlglot has no structure of its own
# ---------------------------------------------------------------------------


class FlinkExpression(exp.Expression):
    """Base of the Flink-only nodes below.

    Only the Flink generator knows how to write them, so ``node.sql()`` means
    Flink SQL here; a whole tree containing one must be written with
    ``tree.sql(dialect=Flink)``.
    """

    def sql(self, dialect: t.Any = None, copy: bool = True, **opts: t.Any) -> str:
        return super().sql(dialect=dialect or Flink, copy=copy, **opts)


class WindowTVF(FlinkExpression, exp.UDTF):
    """A windowing table-valued function used as a FROM/JOIN source.

    ``TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECOND)) AS w``

    Args (named or positional calls are normalised to the same shape):
        kind: ``"TUMBLE"``, ``"HOP"``, ``"CUMULATE"`` or ``"SESSION"``.
        this: the input ``exp.Table`` (Flink only allows ``TABLE name``).
        time_col: the ``exp.Column`` inside ``DESCRIPTOR(...)``.
        expressions: the window-shape arguments in Flink's positional order:
            TUMBLE ``[size]``, HOP ``[slide, size]``, CUMULATE ``[step, size]``,
            SESSION ``[gap]``.  Usually ``exp.Interval`` nodes (see :func:`interval_ms`).
        partition_by: SESSION's ``PARTITION BY`` columns (``exp.Column`` list), if any.
        offset: the optional trailing offset argument (TUMBLE/HOP/CUMULATE).
        alias: an ``exp.TableAlias`` for ``... ) AS w``.
        joins: joins attached when parsed inside a parenthesised join tree.
    """

    arg_types = {
        "this": True,
        "kind": True,
        "time_col": True,
        "expressions": True,
        "partition_by": False,
        "offset": False,
        "alias": False,
        "joins": False,
    }

    @property
    def kind(self) -> str:
        return self.args["kind"]

    @property
    def table(self) -> exp.Table:  # type: ignore[override]
        return self.args["this"]

    @property
    def time_col(self) -> exp.Column:
        return self.args["time_col"]

    @property
    def partition_by(self) -> list[exp.Expr]:
        return self.args.get("partition_by") or []

    @property
    def offset(self) -> exp.Expr | None:
        return self.args.get("offset")

    def _shape_arg(self, name: str) -> exp.Expr | None:
        params = WINDOW_TVF_PARAMS[self.kind][2:]
        return seq_get(self.expressions, params.index(name)) if name in params else None

    @property
    def size(self) -> exp.Expr | None:
        """Window size of TUMBLE, HOP and CUMULATE (None for SESSION)."""
        return self._shape_arg("SIZE")

    @property
    def slide(self) -> exp.Expr | None:
        return self._shape_arg("SLIDE")

    @property
    def step(self) -> exp.Expr | None:
        return self._shape_arg("STEP")

    @property
    def gap(self) -> exp.Expr | None:
        return self._shape_arg("GAP")


class Explain(FlinkExpression):
    """``EXPLAIN [PLAN FOR | detail, ...] <statement>``.

    Args:
        this: the parsed inner query, ``exp.Insert`` or :class:`StatementSet`.
        details: ``exp.Var`` list of requested details (e.g. ``CHANGELOG_MODE``).
    """

    arg_types = {"this": True, "details": False}


class Reset(FlinkExpression):
    """``RESET ['key']``; ``this`` is the key ``Literal`` or None for "reset all"."""

    arg_types = {"this": False}


class StatementSet(FlinkExpression):
    """A statement set; ``expressions`` are the ``exp.Insert`` nodes, in order."""

    arg_types = {"expressions": True}


class MetadataColumnConstraint(FlinkExpression, exp.ColumnConstraintKind):
    """``METADATA [FROM 'key'] [VIRTUAL]`` of a metadata column.

    Args:
        this: the metadata key ``Literal`` or None (the column name is the key).
        virtual: True when the column is read-only (not written by INSERT).
    """

    arg_types = {"this": False, "virtual": False}


class JsonBehavior(FlinkExpression):
    """One ``... ON EMPTY`` / ``... ON ERROR`` clause of JSON_VALUE, JSON_QUERY or JSON_EXISTS.

    Args:
        kind: ``"NULL"``, ``"ERROR"``, ``"DEFAULT"`` (with ``this``), ``"EMPTY ARRAY"``,
            ``"EMPTY OBJECT"``, ``"TRUE"``, ``"FALSE"`` or ``"UNKNOWN"``.
        this: DEFAULT's expression.
    """

    arg_types = {"kind": True, "this": False}


class FlinkJsonValue(FlinkExpression, exp.Func):
    """``JSON_VALUE(this, path [RETURNING returning] [on_empty ON EMPTY] [on_error ON ERROR])``;
    ``on_empty``/``on_error`` are :class:`JsonBehavior` nodes."""

    arg_types = {"this": True, "path": True, "returning": False, "on_empty": False, "on_error": False}


class FlinkJsonQuery(FlinkExpression, exp.Func):
    """``JSON_QUERY(this, path [RETURNING returning] [wrapper] [on_empty ON EMPTY] [on_error ON
    ERROR])``; ``wrapper`` is ``"WITHOUT"``, ``"CONDITIONAL"`` or ``"UNCONDITIONAL"``."""

    arg_types = {"this": True, "path": True, "returning": False, "wrapper": False, "on_empty": False,
                 "on_error": False}


class FlinkJsonExists(FlinkExpression, exp.Func):
    """``JSON_EXISTS(this, path [on_error ON ERROR])``."""

    arg_types = {"this": True, "path": True, "on_error": False}


class FlinkJsonObject(FlinkExpression, exp.Func):
    """``JSON_OBJECT([KEY] k VALUE v, ... [on_null ON NULL])``: ``expressions`` are
    ``exp.JSONKeyValue`` pairs, ``on_null`` is ``"NULL"``, ``"ABSENT"`` or None."""

    arg_types = {"expressions": False, "on_null": False}


class FlinkJsonArray(FlinkExpression, exp.Func):
    """``JSON_ARRAY(v, ... [on_null ON NULL])``."""

    arg_types = {"expressions": False, "on_null": False}


class FlinkJsonObjectAgg(FlinkExpression, exp.AggFunc):
    """``JSON_OBJECTAGG([KEY] this VALUE expression [on_null ON NULL])``."""

    arg_types = {"this": True, "expression": True, "on_null": False}


class FlinkJsonArrayAgg(FlinkExpression, exp.AggFunc):
    """``JSON_ARRAYAGG(this [on_null ON NULL])``."""

    arg_types = {"this": True, "on_null": False}


JSON_AGGREGATES = (FlinkJsonObjectAgg, FlinkJsonArrayAgg)


def _json_behavior_sql(self: BaseGenerator, expression: JsonBehavior) -> str:
    kind = expression.args["kind"]
    return f"DEFAULT {self.sql(expression, 'this')}" if kind == "DEFAULT" else kind


def _json_clauses(self: BaseGenerator, expression: exp.Expr) -> str:
    out = ""
    for key, on in (("on_empty", "EMPTY"), ("on_error", "ERROR")):
        if expression.args.get(key) is not None:
            out += f" {self.sql(expression, key)} ON {on}"
    return out


def _json_returning(self: BaseGenerator, expression: exp.Expr) -> str:
    returning = expression.args.get("returning")
    return f" RETURNING {self.sql(returning)}" if returning is not None else ""


def _json_value_sql(self: BaseGenerator, expression: FlinkJsonValue) -> str:
    return (f"JSON_VALUE({self.sql(expression, 'this')}, {self.sql(expression, 'path')}"
            f"{_json_returning(self, expression)}{_json_clauses(self, expression)})")


def _json_query_sql(self: BaseGenerator, expression: FlinkJsonQuery) -> str:
    wrapper = expression.args.get("wrapper")
    written = {None: "", "WITHOUT": " WITHOUT ARRAY WRAPPER", "CONDITIONAL": " WITH CONDITIONAL ARRAY WRAPPER",
               "UNCONDITIONAL": " WITH UNCONDITIONAL ARRAY WRAPPER"}[wrapper]
    return (f"JSON_QUERY({self.sql(expression, 'this')}, {self.sql(expression, 'path')}"
            f"{_json_returning(self, expression)}{written}{_json_clauses(self, expression)})")


def _json_exists_sql(self: BaseGenerator, expression: FlinkJsonExists) -> str:
    return (f"JSON_EXISTS({self.sql(expression, 'this')}, {self.sql(expression, 'path')}"
            f"{_json_clauses(self, expression)})")


def _on_null(self: BaseGenerator, expression: exp.Expr) -> str:
    on_null = expression.args.get("on_null")
    return f" {on_null} ON NULL" if on_null else ""


def _json_object_sql(self: BaseGenerator, expression: FlinkJsonObject) -> str:
    pairs = ", ".join(f"KEY {self.sql(p, 'this')} VALUE {self.sql(p, 'expression')}"
                      for p in expression.expressions)
    return f"JSON_OBJECT({pairs}{_on_null(self, expression)})".replace("( ", "(")


def _json_array_sql(self: BaseGenerator, expression: FlinkJsonArray) -> str:
    values = ", ".join(self.sql(v) for v in expression.expressions)
    return f"JSON_ARRAY({values}{_on_null(self, expression)})".replace("( ", "(")


def _json_objectagg_sql(self: BaseGenerator, expression: FlinkJsonObjectAgg) -> str:
    return (f"JSON_OBJECTAGG(KEY {self.sql(expression, 'this')} VALUE {self.sql(expression, 'expression')}"
            f"{_on_null(self, expression)})")


def _json_arrayagg_sql(self: BaseGenerator, expression: FlinkJsonArrayAgg) -> str:
    return f"JSON_ARRAYAGG({self.sql(expression, 'this')}{_on_null(self, expression)})"


JSON_WRITERS: dict[type[exp.Expr], t.Callable[[BaseGenerator, t.Any], str]] = {
    JsonBehavior: _json_behavior_sql,
    FlinkJsonValue: _json_value_sql,
    FlinkJsonQuery: _json_query_sql,
    FlinkJsonExists: _json_exists_sql,
    FlinkJsonObject: _json_object_sql,
    FlinkJsonArray: _json_array_sql,
    FlinkJsonObjectAgg: _json_objectagg_sql,
    FlinkJsonArrayAgg: _json_arrayagg_sql,
}
# The JSON nodes sit inside ordinary expressions, which the planner writes with sqlglot's default
# dialect too (``node.sql()`` keys the GROUP BY and aggregate lookups): its generator learns them
# here, in Flink's syntax (its dispatch table is rebuilt from TRANSFORMS on next use).
BaseGenerator.TRANSFORMS.update(JSON_WRITERS)
_DISPATCH_CACHE.pop(BaseGenerator, None)


# Parameter names of each windowing TVF, in Flink's positional order.  The
# first two are always DATA and TIMECOL; OFFSET is optional where present.
WINDOW_TVF_PARAMS: dict[str, tuple[str, ...]] = {
    "TUMBLE": ("DATA", "TIMECOL", "SIZE", "OFFSET"),
    "HOP": ("DATA", "TIMECOL", "SLIDE", "SIZE", "OFFSET"),
    "CUMULATE": ("DATA", "TIMECOL", "STEP", "SIZE", "OFFSET"),
    "SESSION": ("DATA", "TIMECOL", "GAP"),
}

# Java (SimpleDateFormat) patterns used by DATE_FORMAT and friends, mapped to
# the strftime codes sqlglot uses internally so other dialects can run them.
# Milliseconds ('SSS') have no strftime equivalent and are left as written.
FLINK_TIME_MAPPING: dict[str, str] = {
    "yyyy": "%Y",
    "yy": "%y",
    "MMMM": "%B",
    "MMM": "%b",
    "MM": "%m",
    "M": "%-m",
    "dd": "%d",
    "d": "%-d",
    "HH": "%H",
    "H": "%-H",
    "hh": "%I",
    "h": "%-I",
    "mm": "%M",
    "m": "%-M",
    "ss": "%S",
    "s": "%-S",
    "SSSSSS": "%f",
    "a": "%p",
    "DDD": "%j",
    "EEEE": "%A",
    "EEE": "%a",
    "Z": "%z",
    "z": "%Z",
}

# Keywords a statement can start with, for "did you mean" hints.
STATEMENT_KEYWORDS = (
    "SELECT",
    "INSERT",
    "CREATE",
    "DROP",
    "ALTER",
    "WITH",
    "VALUES",
    "SET",
    "RESET",
    "SHOW",
    "DESCRIBE",
    "DESC",
    "EXPLAIN",
    "EXECUTE",
    "BEGIN",
    "USE",
)

# Clause keywords that a typo may turn into an alias (SELECT a FORM t).
CLAUSE_KEYWORDS = (
    "FROM",
    "WHERE",
    "GROUP",
    "HAVING",
    "ORDER",
    "LIMIT",
    "WINDOW",
    "UNION",
    "JOIN",
    "ON",
    "SELECT",
    "INNER",
    "LEFT",
    "RIGHT",
    "CROSS",
    "PARTITION",
    "VALUES",
)

# CREATE TABLE ... LIKE source (<strategy> <feature> ...): Flink's merging strategies and features.
LIKE_STRATEGIES = ("INCLUDING", "EXCLUDING", "OVERWRITING")
LIKE_FEATURES = ("ALL", "CONSTRAINTS", "GENERATED", "OPTIONS", "WATERMARKS", "PARTITIONS", "METADATA")

SHOW_KINDS = (
    ("USER", "FUNCTIONS"),
    ("FULL", "MODULES"),
    ("CURRENT", "CATALOG"),
    ("CURRENT", "DATABASE"),
    ("CREATE", "TABLE"),
    ("CREATE", "VIEW"),
    ("TABLES",),
    ("VIEWS",),
    ("FUNCTIONS",),
    ("CATALOGS",),
    ("DATABASES",),
    ("MODULES",),
    ("JOBS",),
    ("JARS",),
    ("COLUMNS",),
)

EXPLAIN_DETAILS = ("ESTIMATED_COST", "CHANGELOG_MODE", "PLAN_ADVICE", "JSON_EXECUTION_PLAN")


# ---------------------------------------------------------------------------
# Helpers shared with the script parser and the planner
# ---------------------------------------------------------------------------


def split_statements(tokens: list[Token]) -> list[list[Token]]:
    """Groups tokens into statements, without the separating semicolons.

    A statement set (``[EXECUTE] STATEMENT SET BEGIN ... END`` or ``BEGIN
    STATEMENT SET; ... END``) contains semicolons of its own, so it stays one
    statement until the ``END`` that follows a semicolon (or the ``BEGIN``).
    Empty statements are dropped.
    """
    statements: list[list[Token]] = []
    current: list[Token] = []
    in_block = False
    for token in tokens:
        kind = token.token_type
        if kind == TokenType.SEMICOLON and not in_block:
            if current:
                statements.append(current)
            current = []
            continue
        if in_block:
            if kind == TokenType.END and current[-1].token_type in (
                TokenType.SEMICOLON,
                TokenType.BEGIN,
            ):
                in_block = False
        elif _opens_statement_set(current, token):
            in_block = True
        current.append(token)
    if current:
        statements.append(current)
    return statements


def _opens_statement_set(previous: list[Token], token: Token) -> bool:
    """True if ``token`` completes ``STATEMENT SET BEGIN`` or ``BEGIN STATEMENT SET``."""
    texts = [tok.text.upper() for tok in previous[-2:]] + [token.text.upper()]
    if texts[-3:] == ["STATEMENT", "SET", "BEGIN"]:
        return True
    return texts[-3:] == ["BEGIN", "STATEMENT", "SET"] and len(previous) == 2


def position_of(node: exp.Expr) -> tuple[int | None, int | None]:
    """Line and (start) column of the first token of ``node`` that the parser located.

    sqlglot records the *end* column of a token; the start is recovered from
    the token's character span, which is exact for single-line tokens.
    """
    for child in node.walk():
        meta = child.meta
        if "line" in meta:
            width = meta.get("end", 0) - meta.get("start", 0)
            return meta["line"], max(meta["col"] - width, 1)
    return None, None


_UNIT_MS: dict[str, int] = {
    "MILLISECOND": 1,
    "SECOND": 1000,
    "MINUTE": 60_000,
    "HOUR": 3_600_000,
    "DAY": 86_400_000,
    "WEEK": 7 * 86_400_000,
}

# Fields of a day-time span in order, with the separator that precedes each.
_SPAN_FIELDS: tuple[tuple[str, str], ...] = (
    ("DAY", ""),
    ("HOUR", " "),
    ("MINUTE", ":"),
    ("SECOND", ":"),
)


# Year-month interval units, in months: calendar lengths, so they never become milliseconds.
_UNIT_MONTHS: dict[str, int] = {"MONTH": 1, "QUARTER": 3, "YEAR": 12}


def _unit_name(unit: exp.Expr) -> str:
    """Normalises ``SECONDS`` / ``second`` / ``SECOND(3)`` to ``SECOND``."""
    name = unit.name.upper()
    if name.endswith("S") and (name[:-1] in _UNIT_MS or name[:-1] in _UNIT_MONTHS):
        name = name[:-1]
    return name


def interval_months(node: exp.Expr) -> int | None:
    """Months of a constant year-month interval, or None when ``node`` is not one.

    Flink's INTERVAL YEAR / MONTH / YEAR TO MONTH (``INTERVAL '1-2' YEAR TO MONTH``
    is 14 months) counts calendar months, whose length varies; it is kept apart
    from day-time intervals (:func:`interval_ms`), which have a fixed length.
    """
    if not isinstance(node, exp.Interval) or not isinstance(node.this, exp.Literal):
        return None
    unit = node.args.get("unit")
    if unit is None:
        return None
    raw = node.this.name.strip()
    sign = -1 if raw.startswith("-") else 1
    raw = raw.lstrip("+-").strip()
    if isinstance(unit, exp.IntervalSpan):
        if (_unit_name(unit.this), _unit_name(unit.expression)) != ("YEAR", "MONTH"):
            return None
        match = re.fullmatch(r"(\d+)-(\d+)", raw)
        if not match:
            line, col = position_of(node)
            text = node.sql(dialect=Flink)
            raise PlanError(
                f"interval value '{node.this.name}' does not match YEAR TO MONTH: {text}", line, col, text
            )
        return sign * (int(match.group(1)) * 12 + int(match.group(2)))
    name = _unit_name(unit)
    if name not in _UNIT_MONTHS:
        return None
    if not re.fullmatch(r"\d+", raw):
        line, col = position_of(node)
        text = node.sql(dialect=Flink)
        raise PlanError(f"interval value '{node.this.name}' is not a whole number: {text}", line, col, text)
    return sign * int(raw) * _UNIT_MONTHS[name]


def interval_ms(node: exp.Expr) -> int:
    """Milliseconds of a constant Flink interval such as ``INTERVAL '10' SECOND``.

    Also accepts ``INTERVAL '1:30' MINUTE TO SECOND``-style spans, plural
    units and a leading sign.  Windows and watermarks need a fixed length,
    so anything else (a column, a year-month interval, which Flink also refuses
    for windows) is a :class:`PlanError` located at the interval.
    """
    line, col = position_of(node)
    text = node.sql(dialect=Flink)

    def fail(reason: str) -> t.NoReturn:
        raise PlanError(f"{reason}: {text}", line, col, text)

    if isinstance(node, exp.Paren):
        return interval_ms(node.this)
    if isinstance(node, exp.Neg):
        return -interval_ms(node.this)
    if isinstance(node, exp.Add) and isinstance(node.this, exp.Interval):
        return interval_ms(node.this) + interval_ms(node.expression)
    if not isinstance(node, exp.Interval):
        fail("expected a constant INTERVAL literal")
    if interval_months(node) is not None:
        fail(
            "a year-month interval has no fixed length; windows take SECOND, MINUTE, HOUR or DAY"
            " units (Flink: MONTH and YEAR time unit are not supported yet)"
        )
    value = node.this
    if not isinstance(value, exp.Literal):
        fail("interval value must be a constant")
    unit = node.args.get("unit")
    if unit is None:
        fail("interval needs a unit")
    raw = value.name.strip()
    sign = -1 if raw.startswith("-") else 1
    raw = raw.lstrip("+-").strip()

    if isinstance(unit, exp.IntervalSpan):
        first, last = _unit_name(unit.this), _unit_name(unit.expression)
        names = [name for name, _ in _SPAN_FIELDS]
        if first not in names or last not in names or names.index(first) >= names.index(last):
            fail(f"unsupported interval span {first} TO {last}")
        fields = _SPAN_FIELDS[names.index(first) : names.index(last) + 1]
        pattern = ""
        for i, (name, sep) in enumerate(fields):
            number = r"(\d+(?:\.\d+)?)" if name == "SECOND" else r"(\d+)"
            pattern += (re.escape(sep) if i else "") + number
        match = re.fullmatch(pattern, raw)
        if not match:
            fail(f"interval value '{value.name}' does not match {first} TO {last}")
        total = sum(
            float(group) * _UNIT_MS[name]
            for group, (name, _) in zip(match.groups(), fields, strict=True)
        )
        return sign * round(total)

    name = _unit_name(unit)
    if name not in _UNIT_MS:
        fail(f"unsupported interval unit {unit.name.upper()} (needs a fixed length)")
    try:
        amount = float(raw)
    except ValueError:
        fail(f"interval value '{value.name}' is not a number")
    return sign * round(amount * _UNIT_MS[name])


def table_options(create: exp.Create) -> dict[str, str]:
    """The ``WITH ('key' = 'value', ...)`` options of a CREATE TABLE, in order."""
    properties = create.args.get("properties")
    if not properties:
        return {}
    return {
        prop.this.name: prop.args["value"].name
        for prop in properties.expressions
        if type(prop) is exp.Property
    }


def watermarks(create: exp.Create) -> list[exp.WatermarkColumnConstraint]:
    """The ``WATERMARK FOR col AS expr`` declarations of a CREATE TABLE."""
    schema = create.this
    if not isinstance(schema, exp.Schema):
        return []
    return [e for e in schema.expressions if isinstance(e, exp.WatermarkColumnConstraint)]


def _as_struct(token: Token) -> Token:
    """The same token, read as the STRUCT type keyword."""
    return Token(
        TokenType.STRUCT,
        token.text,
        line=token.line,
        col=token.col,
        start=token.start,
        end=token.end,
        comments=token.comments,
    )


def _token_of(node: exp.Expr) -> Token | None:
    """A stand-in token at ``node``'s recorded position, for located errors."""
    meta = node.meta
    if "line" not in meta:
        return None
    return Token(
        TokenType.VAR,
        node.sql(dialect=Flink),
        line=meta["line"],
        col=meta["col"],
        start=meta["start"],
        end=meta["end"],
    )


# ---------------------------------------------------------------------------
# The dialect
# ---------------------------------------------------------------------------


def _build_to_timestamp_ltz(args: list[exp.Expr]) -> exp.Expr:
    """TO_TIMESTAMP_LTZ(epoch, precision) is sqlglot's UnixToTime with that scale."""
    value, precision = seq_get(args, 0), seq_get(args, 1)
    if len(args) == 2 and isinstance(precision, exp.Literal) and precision.is_int:
        return exp.UnixToTime(
            this=value,
            scale=precision,
            target_type=exp.DataType.build("TIMESTAMPLTZ"),
        )
    return exp.Anonymous(this="TO_TIMESTAMP_LTZ", expressions=args)


def _build_date_format(args: list[exp.Expr], dialect: Dialect) -> exp.Expr:
    """DATE_FORMAT(ts, 'java pattern') is sqlglot's TimeToStr with a strftime format."""
    if len(args) != 2:
        return exp.Anonymous(this="DATE_FORMAT", expressions=args)
    return exp.TimeToStr(this=args[0], format=dialect.format_time(args[1]))



def _array_agg_nulls(node: exp.Expression) -> exp.Expression:
    """``ARRAY_AGG(x IGNORE NULLS)`` as one ArrayAgg node marked ``nulls_excluded`` (sqlglot wraps
    the call in IgnoreNulls, which would read as an aggregate around an aggregate); ``RESPECT
    NULLS`` is ARRAY_AGG's default."""
    nulls = exp.IgnoreNulls | exp.RespectNulls
    if isinstance(node, nulls) and isinstance(node.this, exp.ArrayAgg):
        return exp.ArrayAgg(this=node.this.this, nulls_excluded=True if isinstance(node, exp.IgnoreNulls) else None)
    if isinstance(node, exp.ArrayAgg):  # before FILTER (...) sqlglot wraps the argument instead
        arg = node.this
        inner = arg.expressions[0] if isinstance(arg, exp.Distinct) and len(arg.expressions) == 1 else arg
        if isinstance(inner, nulls):
            if inner is arg:
                arg = inner.this
            else:
                arg.set("expressions", [inner.this])
            return exp.ArrayAgg(this=arg, nulls_excluded=True if isinstance(inner, exp.IgnoreNulls) else None)
    return node

class Flink(Dialect):
    """Apache Flink SQL (Calcite-based, streaming extensions)."""

    # Flink resolves identifiers case-sensitively, quoted or not.
    NORMALIZATION_STRATEGY = NormalizationStrategy.CASE_SENSITIVE
    # Flink arrays are 1-based, and a[1] is kept as written: sqlglot would shift a literal index
    # to its own 0-based form but leave a column index alone, so the binder could not tell them
    # apart; 0 here makes Bracket hold the index the user wrote, and the SQL generated from it too.
    INDEX_OFFSET = 0
    TIME_MAPPING = FLINK_TIME_MAPPING
    # DDL only knows built-in types, so an unknown type name is a typo.
    SUPPORTS_USER_DEFINED_TYPES = False

    class Tokenizer(BaseTokenizer):
        IDENTIFIERS = ["`"]
        QUOTES = ["'"]
        STRING_ESCAPES = ["'"]

        KEYWORDS = {
            **{k: v for k, v in BaseTokenizer.KEYWORDS.items() if k != "EXPLAIN"},
            "BYTES": TokenType.VARBINARY,
            "MATCH_RECOGNIZE": TokenType.MATCH_RECOGNIZE,
        }

        # ``/*+ ... */`` is a hint wherever it stands, as in Calcite: after SELECT or INSERT a query
        # hint, after a table name (a keyword such as ``out`` included) a table hint, and a syntax
        # error anywhere else, never a comment that silently drops it.
        TOKENS_PRECEDING_HINT: t.ClassVar[set[TokenType]] = set(TokenType)

        # sqlglot swallows the rest of a "command" statement into one string;
        # every Flink statement is tokenized normally and parsed structurally.
        COMMANDS: t.ClassVar[set[TokenType]] = set()

        def tokenize(self, sql: str) -> list[Token]:
            """Tokenizes, reporting a failure at the offending token's offset.

            sqlglot's TokenError only quotes 100 characters of context; the
            offset of the unterminated string or comment is what a user needs.
            """
            try:
                tokens = super().tokenize(sql)
            except TokenError as error:
                start = self._core._start
                raise TokenError(str(error.__cause__ or error), start=start, end=start) from error
            # ROW<a INT, ...> is Flink's spelling of STRUCT<...>; "ROW <" has no other meaning.
            return [
                _as_struct(token)
                if token.token_type == TokenType.ROW
                and i + 1 < len(tokens)
                and tokens[i + 1].token_type == TokenType.LT
                else token
                for i, token in enumerate(tokens)
            ]

    class Parser(BaseParser):
        LOG_DEFAULTS_TO_LN = True

        # SESSION is also the legacy group-window function: GROUP BY SESSION(ts, gap).
        FUNC_TOKENS = {*BaseParser.FUNC_TOKENS, TokenType.SESSION}

        FUNCTIONS = {
            **BaseParser.FUNCTIONS,
            "DATE_FORMAT": _build_date_format,
            "TIMESTAMPADD": build_date_delta(exp.TimestampAdd),
            "TIMESTAMPDIFF": build_date_delta(exp.TimestampDiff),
            "TO_TIMESTAMP_LTZ": _build_to_timestamp_ltz,
            # Flink's ENCODE(s, charset) / DECODE(bytes, charset), not sqlglot's Oracle-style DECODE
            "ENCODE": lambda args: exp.Anonymous(this="ENCODE", expressions=args),
            "DECODE": lambda args: exp.Anonymous(this="DECODE", expressions=args),
        }

        FUNCTION_PARSERS = {
            **{k: v for k, v in BaseParser.FUNCTION_PARSERS.items() if k != "DECODE"},
            "JSON_VALUE": lambda self: self._parse_flink_json_value(),
            "JSON_QUERY": lambda self: self._parse_flink_json_query(),
            "JSON_EXISTS": lambda self: self._parse_flink_json_exists(),
            "JSON_OBJECT": lambda self: self._parse_flink_json_object(),
            "JSON_ARRAY": lambda self: self._parse_flink_json_array(),
            "JSON_OBJECTAGG": lambda self: self._parse_flink_json_objectagg(),
            "JSON_ARRAYAGG": lambda self: self._parse_flink_json_arrayagg(),
        }

        STATEMENT_PARSERS = {
            TokenType.ALTER: BaseParser.STATEMENT_PARSERS[TokenType.ALTER],
            TokenType.CREATE: BaseParser.STATEMENT_PARSERS[TokenType.CREATE],
            TokenType.DESC: BaseParser.STATEMENT_PARSERS[TokenType.DESC],
            TokenType.DESCRIBE: BaseParser.STATEMENT_PARSERS[TokenType.DESCRIBE],
            TokenType.DROP: BaseParser.STATEMENT_PARSERS[TokenType.DROP],
            TokenType.INSERT: BaseParser.STATEMENT_PARSERS[TokenType.INSERT],
            TokenType.USE: BaseParser.STATEMENT_PARSERS[TokenType.USE],
            TokenType.BEGIN: lambda self: self._parse_begin_statement_set(),
            TokenType.EXECUTE: lambda self: self._parse_execute(),
            TokenType.SET: lambda self: self._parse_flink_set(),
            TokenType.SHOW: lambda self: self._parse_flink_show(),
        }

        # Statements whose keyword is not a sqlglot token type of its own.
        TEXT_STATEMENT_PARSERS: t.ClassVar[dict[str, t.Callable[[Flink.Parser], exp.Expr]]] = {
            "EXPLAIN": lambda self: self._parse_explain(),
            "RESET": lambda self: self._parse_reset(),
        }

        QUERY_START_TOKENS: t.ClassVar[set[TokenType]] = {
            TokenType.SELECT,
            TokenType.WITH,
            TokenType.VALUES,
            TokenType.L_PAREN,
        }

        CONSTRAINT_PARSERS = {
            **BaseParser.CONSTRAINT_PARSERS,
            "WATERMARK": lambda self: self._parse_watermark(),
            "METADATA": lambda self: self.expression(
                MetadataColumnConstraint(
                    this=self._match(TokenType.FROM) and self._parse_string(),
                    virtual=self._match_text_seq("VIRTUAL"),
                )
            ),
        }

        SCHEMA_UNNAMED_CONSTRAINTS = {*BaseParser.SCHEMA_UNNAMED_CONSTRAINTS, "WATERMARK"}

        PROPERTY_PARSERS = {
            **BaseParser.PROPERTY_PARSERS,
            "LIKE": lambda self: self._parse_flink_create_like(),
        }

        # -- statements and error reporting ---------------------------------

        def _parse(
            self,
            parse_method: t.Callable[[BaseParser], exp.Expr | None],
            raw_tokens: list[Token],
            sql: str | None = None,
        ) -> list[exp.Expr | None]:
            """Parses each statement; splitting keeps statement sets in one piece."""
            self.reset()
            self.sql = sql or ""
            self._chunks = split_statements(raw_tokens) or [[]]
            results: list[exp.Expr | None] = []
            while self._chunk_index < len(self._chunks):
                self._advance_chunk()
                node = parse_method(self)
                if self._index < self._tokens_size:
                    self._raise_trailing(node)
                results.append(node.transform(_array_agg_nulls, copy=False) if node is not None else None)
                self.check_errors()
            return results

        def _raise_trailing(self, node: exp.Expr | None) -> None:
            """Reports tokens left after a complete statement, guessing the typo."""
            prev = self._prev
            close = (
                difflib.get_close_matches(prev.text.upper(), CLAUSE_KEYWORDS, n=1, cutoff=0.7)
                if prev and prev.token_type == TokenType.VAR
                else []
            )
            if close and prev.text.upper() not in CLAUSE_KEYWORDS:
                self.raise_error(
                    f"unexpected '{prev.text}'; did you mean {close[0]}?", token=prev
                )
            elif prev and prev.text.upper() in ("GROUP", "ORDER"):
                self.raise_error(
                    f"unexpected '{self._curr.text}'; expected BY after {prev.text.upper()}"
                )
            elif isinstance(node, exp.Query):
                self.raise_error(
                    f"unexpected '{self._curr.text}'; expected FROM, WHERE, GROUP BY, "
                    "HAVING, WINDOW, ORDER BY, LIMIT, UNION or the end of the statement"
                )
            else:
                self.raise_error(
                    f"unexpected '{self._curr.text}'; expected the end of the statement"
                )

        def raise_error(self, message: str, token: Token | None = None) -> None:
            """Records the offending token's offsets, which sqlglot leaves out.

            sqlglot reports the *end* column only; the script parser needs the
            start offset to point at the token, and whether input ran out.
            """
            at_end = token is None and not self._curr
            token = token or self._curr or self._prev or Token.string("")
            before = len(self.errors)
            try:
                super().raise_error(message, token)
            except ParseError as error:
                error.errors[0].update(start=token.start, end=token.end, at_end=at_end)
                raise
            for error in self.errors[before:]:
                error.errors[0].update(start=token.start, end=token.end, at_end=at_end)

        # -- JSON functions (Calcite's grammar, as Flink parses them) ---------

        def _json_argument(self, function: str, what: str, first: bool = False) -> exp.Expr:
            if not first and not self._match(TokenType.COMMA):
                self.raise_error(f"{function} expects a comma before its {what}")
            node = self._parse_bitwise()
            if node is None:
                self.raise_error(f"{function} expects its {what}")
            return node  # type: ignore[return-value]

        def _parse_json_clauses(
            self, function: str, kinds: tuple[str, ...], ons: tuple[str, ...]
        ) -> dict[str, JsonBehavior]:
            """``<kind> ON EMPTY|ERROR`` clauses in any order, at most one of each."""
            clauses: dict[str, JsonBehavior] = {}
            while self._curr and self._curr.token_type != TokenType.R_PAREN:
                start = self._curr
                default = None
                if "DEFAULT" in kinds and self._match(TokenType.DEFAULT):
                    kind = "DEFAULT"
                    default = self._parse_bitwise()
                else:
                    kind = next((k for k in kinds if k != "DEFAULT" and self._match_text_seq(*k.split())), "")
                if not kind:
                    allowed = ", ".join(f"{k} ON" for k in kinds)
                    self.raise_error(f"unexpected '{start.text}' in {function}; expected {allowed} "
                                     f"{' or '.join(ons)}, or ')'", token=start)
                if not self._match(TokenType.ON):
                    self.raise_error(f"expected ON after {kind} in {function}")
                on = self._curr.text.upper() if self._curr else ""
                if on not in ons:
                    self.raise_error(f"expected {' or '.join(ons)} after {kind} ON in {function}")
                self._advance()
                if on in clauses:
                    self.raise_error(f"{function} takes one ON {on} clause", token=start)
                clauses[on] = self.expression(JsonBehavior(kind=kind, this=default))
            return clauses

        def _parse_json_returning(self) -> exp.DataType | None:
            if not self._match_text_seq("RETURNING"):
                return None
            returning = self._parse_types()
            if not isinstance(returning, exp.DataType):
                self.raise_error("expected a type after RETURNING")
            return returning  # type: ignore[return-value]

        def _parse_flink_json_value(self) -> FlinkJsonValue:
            this = self._json_argument("JSON_VALUE", "JSON argument", first=True)
            path = self._json_argument("JSON_VALUE", "path")
            returning = self._parse_json_returning()
            clauses = self._parse_json_clauses("JSON_VALUE", ("NULL", "ERROR", "DEFAULT"), ("EMPTY", "ERROR"))
            return self.expression(FlinkJsonValue(
                this=this, path=path, returning=returning, on_empty=clauses.get("EMPTY"),
                on_error=clauses.get("ERROR")))

        def _parse_flink_json_query(self) -> FlinkJsonQuery:
            this = self._json_argument("JSON_QUERY", "JSON argument", first=True)
            path = self._json_argument("JSON_QUERY", "path")
            returning = self._parse_json_returning()
            wrapper = None
            if self._match_text_seq("WITHOUT"):
                wrapper = "WITHOUT"
            elif self._match(TokenType.WITH):
                wrapper = "UNCONDITIONAL"
                if self._match_text_seq("CONDITIONAL"):
                    wrapper = "CONDITIONAL"
                else:
                    self._match_text_seq("UNCONDITIONAL")
            if wrapper is not None:
                self._match(TokenType.ARRAY)
                if not self._match_text_seq("WRAPPER"):
                    self.raise_error("expected WRAPPER in JSON_QUERY's wrapper clause")
            clauses = self._parse_json_clauses(
                "JSON_QUERY", ("NULL", "ERROR", "EMPTY ARRAY", "EMPTY OBJECT"), ("EMPTY", "ERROR"))
            return self.expression(FlinkJsonQuery(
                this=this, path=path, returning=returning, wrapper=wrapper,
                on_empty=clauses.get("EMPTY"), on_error=clauses.get("ERROR")))

        def _parse_flink_json_exists(self) -> FlinkJsonExists:
            this = self._json_argument("JSON_EXISTS", "JSON argument", first=True)
            path = self._json_argument("JSON_EXISTS", "path")
            clauses = self._parse_json_clauses("JSON_EXISTS", ("TRUE", "FALSE", "UNKNOWN", "ERROR"), ("ERROR",))
            return self.expression(FlinkJsonExists(this=this, path=path, on_error=clauses.get("ERROR")))

        def _parse_json_on_null(self) -> str | None:
            index = self._index
            for kind in ("NULL", "ABSENT"):
                if self._match_text_seq(kind, "ON", "NULL"):
                    return kind
                self._retreat(index)
            return None

        def _parse_json_values(self, function: str, pair: bool) -> tuple[list[exp.Expr], str | None]:
            """The comma-separated values (``[KEY] k VALUE|: v`` pairs) and the ON NULL clause."""
            values: list[exp.Expr] = []
            on_null = None
            while self._curr and self._curr.token_type != TokenType.R_PAREN:
                on_null = self._parse_json_on_null()
                if on_null is not None:
                    break
                if values and not self._match(TokenType.COMMA):
                    self.raise_error(f"expected ',', NULL ON NULL, ABSENT ON NULL or ')' in {function}")
                values.append(self._parse_json_pair(function) if pair else self._json_argument(function, "value", True))
            return values, on_null

        def _parse_json_pair(self, function: str) -> exp.JSONKeyValue:
            self._match_text_seq("KEY")
            key = self._json_argument(function, "key", first=True)
            if not (self._match_text_seq("VALUE") or self._match(TokenType.COLON)):
                self.raise_error(f"expected VALUE after the key in {function}")
            value = self._json_argument(function, "value", first=True)
            return self.expression(exp.JSONKeyValue(this=key, expression=value))

        def _parse_flink_json_object(self) -> FlinkJsonObject:
            values, on_null = self._parse_json_values("JSON_OBJECT", pair=True)
            return self.expression(FlinkJsonObject(expressions=values, on_null=on_null))

        def _parse_flink_json_array(self) -> FlinkJsonArray:
            values, on_null = self._parse_json_values("JSON_ARRAY", pair=False)
            return self.expression(FlinkJsonArray(expressions=values, on_null=on_null))

        def _parse_flink_json_objectagg(self) -> FlinkJsonObjectAgg:
            pair = self._parse_json_pair("JSON_OBJECTAGG")
            return self.expression(FlinkJsonObjectAgg(
                this=pair.this, expression=pair.expression, on_null=self._parse_json_on_null()))

        def _parse_flink_json_arrayagg(self) -> FlinkJsonArrayAgg:
            value = self._json_argument("JSON_ARRAYAGG", "value", first=True)
            if self._curr and self._curr.token_type == TokenType.ORDER_BY:
                self.raise_error("ORDER BY inside JSON_ARRAYAGG is not supported (rows are aggregated in "
                                 "arrival order)")
            return self.expression(FlinkJsonArrayAgg(this=value, on_null=self._parse_json_on_null()))

        def _parse_statement(self) -> exp.Expr | None:
            if not self._curr:
                return None
            text = self._curr.text.upper()
            if self._curr.token_type == TokenType.VAR and text in self.TEXT_STATEMENT_PARSERS:
                self._advance()
                return self.TEXT_STATEMENT_PARSERS[text](self)
            if (
                self._curr.token_type not in self.STATEMENT_PARSERS
                and self._curr.token_type not in self.QUERY_START_TOKENS
            ):
                close = difflib.get_close_matches(text, STATEMENT_KEYWORDS, n=1, cutoff=0.75)
                hint = f"; did you mean {close[0]}?" if close else ""
                self.raise_error(
                    f"unknown or unsupported statement '{self._curr.text}'{hint} (expected "
                    "SELECT, INSERT, CREATE, DROP, SET, RESET, SHOW, DESCRIBE, EXPLAIN or EXECUTE)"
                )
                return None
            first = self._curr
            statement = super()._parse_statement()
            if first.token_type == TokenType.L_PAREN and not isinstance(statement, exp.Query):
                # "(1 + 2)" is an expression, which Flink does not run as a statement.
                self.raise_error("expected a statement, found an expression", token=first)
            return statement

        def _parse_cube_or_rollup(self, with_prefix: bool = False) -> exp.Cube | exp.Rollup | None:
            # Flink groups by any expression inside CUBE and ROLLUP (CUBE(bidder IS NULL, channel));
            # sqlglot's default reads only bitwise-level ones there
            if not self._match_set((TokenType.CUBE, TokenType.ROLLUP)):
                return None
            kind = exp.Cube if self._prev.token_type == TokenType.CUBE else exp.Rollup
            return self.expression(kind(expressions=[] if with_prefix else self._parse_wrapped_csv(self._parse_disjunction)))

        def _parse_grouping_set(self) -> exp.Expr | None:
            return self._parse_grouping_sets() or self._parse_cube_or_rollup() or self._parse_disjunction()

        def _parse_projections(self) -> tuple[list[exp.Expr], list[exp.Expr] | None]:
            """Rejects ``SELECT FROM t``, which sqlglot accepts as an empty projection."""
            projections, exclude = super()._parse_projections()
            if not projections:
                self.raise_error("expected a column or expression after SELECT")
            return projections, exclude

        def _parse_field_def(self) -> exp.Expr | None:
            """Reports ``b STRNG`` in a schema as an unknown type, not a missing ')'."""
            column = super()._parse_field_def()
            if isinstance(column, exp.Identifier) and self._curr.token_type in (
                TokenType.VAR,
                TokenType.IDENTIFIER,
            ):
                if self._curr.text.upper() == "MULTISET":
                    self.raise_error("MULTISET columns are not supported (a query's COLLECT gives a MULTISET, which can "
                                     "be selected or CAST to STRING)")
                self.raise_error(f"unknown data type '{self._curr.text}'")
            return column

        def _parse_insert(self) -> exp.Insert | exp.MultitableInserts:
            insert = super()._parse_insert()
            if isinstance(insert, exp.Insert) and not insert.expression:
                self.raise_error("expected a query or VALUES after INSERT INTO <table>")
            return insert

        def _parse_create(self) -> exp.Create | exp.Command:
            """Requires a type (or ``AS expr``) for each column of a CREATE TABLE."""
            create = super()._parse_create()
            schema = create.this
            if create.args.get("kind") == "TABLE" and isinstance(schema, exp.Schema):
                for column in schema.expressions:
                    if isinstance(column, exp.Identifier):
                        self.raise_error(
                            f"column '{column.name}' needs a data type "
                            "(or AS <expression> for a computed column)",
                            token=_token_of(column),
                        )
            return create

        def _parse_as_command(self, start: Token) -> exp.Command:
            """sqlglot's fallback for syntax it does not know: an error here."""
            token = self._curr or self._prev
            self.raise_error(
                f"unsupported {start.text.upper()} statement: unexpected '{token.text}'",
                token=token,
            )
            return exp.Command(this=start.text.upper())

        def _parse_command(self) -> exp.Command:
            return self._parse_as_command(self._prev)

        def _parse_watermark(self) -> exp.WatermarkColumnConstraint:
            """``WATERMARK FOR <rowtime column> AS <watermark expression>``."""
            if not self._match(TokenType.FOR):
                self.raise_error("expected FOR <time column> after WATERMARK")
            column = self._parse_column()
            if not self._match(TokenType.ALIAS):
                self.raise_error("expected AS <watermark expression> after WATERMARK FOR <column>")
            return self.expression(
                exp.WatermarkColumnConstraint(this=column, expression=self._parse_disjunction())
            )

        def _parse_flink_create_like(self) -> exp.LikeProperty:
            """``LIKE source [( {INCLUDING | EXCLUDING | OVERWRITING} feature ... )]``.

            Each like option is an ``exp.Property(this=strategy, value=Var feature)``, in the
            order written (later options refine ``ALL``); :func:`like_options` reads them.
            """
            source = self._parse_table_parts(schema=True)  # schema: 't1 (' is no function call
            options: list[exp.Expr] = []
            if self._match(TokenType.L_PAREN):
                while not self._match(TokenType.R_PAREN):
                    if not self._match_texts(LIKE_STRATEGIES):
                        self.raise_error(
                            "expected INCLUDING, EXCLUDING or OVERWRITING in the LIKE options"
                        )
                        break
                    strategy = self._prev.text.upper()
                    if not self._match_texts(LIKE_FEATURES):
                        self.raise_error(
                            f"expected one of {', '.join(LIKE_FEATURES)} after {strategy}"
                        )
                        break
                    options.append(
                        exp.Property(this=exp.var(strategy), value=exp.var(self._prev.text.upper()))
                    )
            return self.expression(exp.LikeProperty(this=source, expressions=options))

        def _parse_table_parts(
            self, schema: bool = False, is_db_reference: bool = False, wildcard: bool = False,
            fast: bool = False,
        ) -> exp.Table | exp.Dot | None:
            """A table name and its ``/*+ OPTIONS(...) */`` hints (``Table.args["hints"]``)."""
            self._table_hints: list[exp.Expr] | None = None
            table = super()._parse_table_parts(
                schema=schema, is_db_reference=is_db_reference, wildcard=wildcard, fast=fast
            )
            hints = []
            while isinstance(table, exp.Table) and self._match(TokenType.HINT):
                comment = self._prev_comments[0] if self._prev_comments else ""
                hints.append(exp.maybe_parse(comment, into=exp.Hint, dialect=self.dialect))
                self._prev_comments = []  # the hint is no comment of the next node
            if hints:
                assert isinstance(table, exp.Table)
                table.set("hints", hints)
                self._table_hints = hints
            return table

        def _parse_table_hints(self) -> list[exp.Expr] | None:
            """The hints read after the table's name (sqlglot asks once the alias is read)."""
            hints, self._table_hints = getattr(self, "_table_hints", None), None
            return hints or super()._parse_table_hints()

        # -- Flink statements -------------------------------------------------

        def _parse_flink_set(self) -> exp.Set:
            """``SET`` (list all) or ``SET 'key' = 'value'``."""
            if not self._curr:
                return self.expression(exp.Set(expressions=[]))
            key = self._parse_string()
            if key is None:
                self.raise_error("expected a quoted configuration key, e.g. SET 'key' = 'value'")
            if not self._match(TokenType.EQ):
                self.raise_error("expected '=' after the configuration key")
            value = self._parse_config_value()
            item = exp.SetItem(this=exp.EQ(this=key, expression=value))
            return self.expression(exp.Set(expressions=[item]))

        def _parse_config_value(self) -> exp.Literal:
            """A SET value: quoted, though a bare number or word is taken as its text."""
            token = self._curr
            if not token:
                self.raise_error("expected a quoted configuration value after '='")
                return exp.Literal.string("")
            self._advance()
            return exp.Literal.string(token.text)

        def _parse_reset(self) -> Reset:
            key = self._parse_string() if self._curr else None
            if self._curr and key is None:
                self.raise_error("expected a quoted configuration key, e.g. RESET 'key'")
            return self.expression(Reset(this=key))

        def _parse_flink_show(self) -> exp.Show:
            for words in SHOW_KINDS:
                if self._match_text_seq(*words):
                    kind = " ".join(words)
                    break
            else:
                self.raise_error(
                    "expected TABLES, VIEWS, FUNCTIONS, CATALOGS, DATABASES, COLUMNS, "
                    "CREATE TABLE or CREATE VIEW after SHOW"
                )
                return exp.Show(this="")
            target = db = like = None
            if kind.startswith("CREATE"):
                target = self._parse_table_parts()
            elif kind == "COLUMNS":
                if not self._match_set((TokenType.FROM, TokenType.IN)):
                    self.raise_error("expected FROM or IN after SHOW COLUMNS")
                target = self._parse_table_parts()
            elif kind in ("TABLES", "VIEWS", "FUNCTIONS", "USER FUNCTIONS") and self._match_set(
                (TokenType.FROM, TokenType.IN)
            ):
                db = self._parse_table_parts(is_db_reference=True)
            if kind in ("TABLES", "VIEWS", "FUNCTIONS", "USER FUNCTIONS", "COLUMNS", "DATABASES"):
                if self._match(TokenType.LIKE):
                    like = self._parse_string()
            return self.expression(exp.Show(this=kind, target=target, db=db, like=like))

        def _parse_explain(self) -> Explain:
            details: list[exp.Expr] = []
            if not self._match_text_seq("PLAN", "FOR") and self._match_texts(
                EXPLAIN_DETAILS, advance=False
            ):
                details = self._parse_csv(self._parse_explain_detail)
            start = self._curr
            if self._match_text_seq("STATEMENT", "SET", "BEGIN"):
                inner: exp.Expr | None = self._parse_statement_set_body(start)
            else:
                inner = self._parse_statement()
            if inner is None or not isinstance(inner, (exp.Query, exp.Insert, StatementSet)):
                self.raise_error(
                    "EXPLAIN needs a query, an INSERT statement or a statement set", token=start
                )
            return self.expression(Explain(this=inner, details=details or None))

        def _parse_explain_detail(self) -> exp.Var:
            if not self._match_texts(EXPLAIN_DETAILS):
                self.raise_error(f"expected an EXPLAIN detail ({', '.join(EXPLAIN_DETAILS)})")
            return exp.var(self._prev.text.upper())

        def _parse_execute(self) -> StatementSet:
            start = self._prev
            if not self._match_text_seq("STATEMENT", "SET", "BEGIN"):
                self.raise_error("expected STATEMENT SET BEGIN after EXECUTE")
            return self._parse_statement_set_body(start)

        def _parse_begin_statement_set(self) -> StatementSet:
            start = self._prev
            if not self._match_text_seq("STATEMENT", "SET"):
                self.raise_error("expected STATEMENT SET after BEGIN (transactions do not exist)")
            self._match(TokenType.SEMICOLON)
            return self._parse_statement_set_body(start)

        def _parse_statement_set_body(self, start: Token) -> StatementSet:
            """``insert; ... END`` after the opening of a statement set."""
            inserts: list[exp.Expr] = []
            while not self._match(TokenType.END):
                if not self._curr:
                    self.raise_error("statement set is not closed with END", token=start)
                    break
                if self._match(TokenType.SEMICOLON):
                    continue
                first = self._curr
                statement = self._parse_statement()
                if not isinstance(statement, exp.Insert):
                    self.raise_error(
                        "only INSERT statements are allowed in a statement set", token=first
                    )
                inserts.append(t.cast(exp.Expr, statement))
                if not self._match(TokenType.SEMICOLON):
                    self.raise_error(
                        f"expected ';' after the INSERT statement, found '{self._curr.text}'"
                        if self._curr
                        else "statement set is not closed with END"
                    )
            return self.expression(StatementSet(expressions=inserts), token=start)

        # -- expressions and sources -------------------------------------------

        def _parse_types(
            self,
            check_func: bool = False,
            schema: bool = False,
            allow_identifiers: bool = True,
            with_collation: bool = False,
        ) -> exp.Expr | None:
            """Reads a column type ``ROW(name type, ...)`` as a STRUCT.

            (``ROW<...>`` is retyped by the tokenizer; ``ROW(`` is only a type in
            a column definition, elsewhere it constructs a row value.)
            """
            curr = self._curr
            if schema and curr.token_type == TokenType.ROW and self._next.token_type == (
                TokenType.L_PAREN
            ):
                self._tokens[self._index] = _as_struct(curr)
                self._retreat(self._index - 1)
                self._advance()
            return super()._parse_types(
                check_func=check_func,
                schema=schema,
                allow_identifiers=allow_identifiers,
                with_collation=with_collation,
            )

        def _parse_match_recognize(self) -> exp.MatchRecognize | None:
            """sqlglot's MATCH_RECOGNIZE, plus Flink's ``WITHIN INTERVAL ...`` and ``SUBSET name =
            (v, ...), ...`` between PATTERN and DEFINE (sqlglot reads neither):
            :meth:`_match_text_seq` takes them where DEFINE is looked for; they become the node's
            ``within`` and ``subset`` (aliased tuples of the member variables)."""
            self._match_within: list[exp.Expr] | None = []
            self._match_subset: list[exp.Expr] = []
            try:
                node = super()._parse_match_recognize()
            except ValueError:  # sqlglot's exp.var("") of PATTERN ()
                self.raise_error("MATCH_RECOGNIZE: the PATTERN is empty")
                raise
            finally:
                within, self._match_within = self._match_within, None
                subset, self._match_subset = self._match_subset, []
            if node is not None and within:
                node.set("within", within[0])
            if node is not None and subset:
                node.set("subset", subset)
            return node

        def _match_text_seq(self, *texts: str, advance: bool = True) -> bool | None:
            within = getattr(self, "_match_within", None)
            if texts == ("DEFINE",) and within is not None:
                if self._curr and self._curr.text.upper() == "WITHIN":
                    self._advance()
                    interval = self._parse_interval()
                    if interval is None:
                        self.raise_error("Expecting an INTERVAL after WITHIN")
                    within.append(interval)
                if self._curr and self._curr.text.upper() == "SUBSET":
                    self._advance()
                    self._parse_subsets()
            return super()._match_text_seq(*texts, advance=advance)

        def _parse_subsets(self) -> None:
            """``name = (v [, v ...]) [, ...]`` after SUBSET."""
            while True:
                name = self._parse_id_var(any_token=False)
                if name is None or not self._match(TokenType.EQ) or not self._match(TokenType.L_PAREN):
                    self.raise_error("Expecting SUBSET name = (variable, ...)")
                members = self._parse_csv(lambda: self._parse_id_var(any_token=False))
                self._match_r_paren()
                self._match_subset.append(exp.alias_(exp.Tuple(expressions=members), name))
                if not self._match(TokenType.COMMA):
                    return

        def _parse_interval(
            self, require_interval: bool = True, parse_function_unit: bool = True
        ) -> exp.Add | exp.Interval | None:
            """Locates intervals so that :func:`interval_ms` errors can point at them."""
            token = self._curr
            interval = super()._parse_interval(
                require_interval=require_interval, parse_function_unit=parse_function_unit
            )
            if interval is not None and token:
                interval.update_positions(token)
            return interval

        def _parse_table(
            self,
            schema: bool = False,
            joins: bool = False,
            alias_tokens: t.Collection[TokenType] | None = None,
            parse_bracket: bool = False,
            is_db_reference: bool = False,
            parse_partition: bool = False,
            consume_pipe: bool = False,
        ) -> exp.Expr | None:
            if not schema and self._at_window_tvf():
                tvf = self._parse_window_tvf(alias_tokens)
                if joins:
                    for join in self._parse_joins(alias_tokens=alias_tokens):
                        tvf.append("joins", join)
                return tvf
            return super()._parse_table(
                schema=schema,
                joins=joins,
                alias_tokens=alias_tokens,
                parse_bracket=parse_bracket,
                is_db_reference=is_db_reference,
                parse_partition=parse_partition,
                consume_pipe=consume_pipe,
            )

        def _at_window_tvf(self) -> bool:
            """True at ``TABLE ( TUMBLE|HOP|CUMULATE|SESSION (``."""
            index = self._index
            tokens = self._tokens
            return (
                index + 3 < len(tokens)
                and tokens[index].token_type == TokenType.TABLE
                and tokens[index + 1].token_type == TokenType.L_PAREN
                and tokens[index + 2].text.upper() in WINDOW_TVF_PARAMS
                and tokens[index + 3].token_type == TokenType.L_PAREN
            )

        def _parse_window_tvf(self, alias_tokens: t.Collection[TokenType] | None) -> WindowTVF:
            start = self._curr
            self._advance(2)
            kind_token = self._curr
            kind = kind_token.text.upper()
            self._advance(2)
            params = WINDOW_TVF_PARAMS[kind]

            # name -> (first token, argument kind, value); see _parse_tvf_argument.
            values: dict[str, tuple[Token, str, t.Any]] = {}
            named = False
            while True:
                arg_token = self._curr
                name = arg_token.text.upper()
                if self._next.token_type == TokenType.FARROW:
                    named = True
                    self._advance(2)
                    if name not in params:
                        self.raise_error(
                            f"{kind} has no parameter {arg_token.text}; expected one of "
                            f"{', '.join(params)}",
                            token=arg_token,
                        )
                elif named:
                    self.raise_error(
                        "positional arguments cannot follow named arguments", token=arg_token
                    )
                elif len(values) < len(params):
                    name = params[len(values)]
                else:
                    self.raise_error(
                        f"too many arguments for {kind}; expected {', '.join(params)}",
                        token=arg_token,
                    )
                if name in values:
                    self.raise_error(f"{kind} argument {name} is given twice", token=arg_token)
                values[name] = (arg_token, *self._parse_tvf_argument())
                if not self._match(TokenType.COMMA):
                    break

            self._match_r_paren()
            self._match_r_paren()

            missing = [p for p in params if p != "OFFSET" and p not in values]
            if missing:
                self.raise_error(
                    f"{kind} is missing {', '.join(missing)} (arguments: {', '.join(params)})",
                    token=kind_token,
                )
            table = partition_by = None
            for name, (token, arg_kind, value) in values.items():
                expected = {"DATA": "table", "TIMECOL": "descriptor"}.get(name, "value")
                if arg_kind != expected:
                    wanted = {
                        "table": "TABLE <name>",
                        "descriptor": "DESCRIPTOR(<time column>)",
                        "value": "an interval",
                    }[expected]
                    self.raise_error(f"{kind} argument {name} must be {wanted}", token=token)
                if name == "DATA" and arg_kind == "table":
                    table, partition_by = value
                    if partition_by and kind != "SESSION":
                        self.raise_error(
                            f"PARTITION BY is only allowed for SESSION windows, not {kind}",
                            token=token,
                        )
            shape = [values[p][2] for p in params[2:] if p != "OFFSET" and p in values]
            offset = values.get("OFFSET")
            tvf = WindowTVF(
                kind=kind,
                this=table,
                time_col=values["TIMECOL"][2] if "TIMECOL" in values else None,
                expressions=shape,
                partition_by=partition_by,
                offset=offset[2] if offset else None,
            )
            tvf.set(
                "alias", self._parse_table_alias(alias_tokens=alias_tokens or self.TABLE_ALIAS_TOKENS)
            )
            return self.expression(tvf, token=start)

        def _parse_tvf_argument(self) -> tuple[str, t.Any]:
            """One TVF argument: ``("table", (Table, partition columns))``,
            ``("descriptor", Column)`` or ``("value", expression)``."""
            if self._match(TokenType.TABLE):
                table = self._parse_table_parts()
                partition_by = None
                if self._match(TokenType.PARTITION_BY):
                    # As in Calcite: one column, or a parenthesised list of them.
                    if self._match(TokenType.L_PAREN, advance=False):
                        partition_by = self._parse_wrapped_csv(self._parse_column)
                    else:
                        partition_by = [self._parse_column()]
                return "table", (table, partition_by)
            if self._curr and self._curr.text.upper() == "DESCRIPTOR" and self._next and (
                self._next.token_type == TokenType.L_PAREN
            ):
                self._advance()
                columns = self._parse_wrapped_csv(self._parse_column)
                if len(columns) != 1:
                    self.raise_error("DESCRIPTOR takes exactly one time column", token=self._prev)
                return "descriptor", columns[0]
            value = self._parse_bitwise()
            if value is None:
                self.raise_error("expected a window function argument")
            return "value", value

    class Generator(BaseGenerator):
        """Writes trees back as Flink SQL (used for SHOW CREATE and EXPLAIN output)."""

        def flink_array_agg_sql(self, e: exp.ArrayAgg) -> str:
            """ARRAY_AGG([DISTINCT] x [IGNORE NULLS]), and the FILTER that the binder folded into its
            argument (``filtered``: the argument is CASE WHEN condition THEN x END) written back."""
            ignore = " IGNORE NULLS" if e.args.get("nulls_excluded") else ""
            if not e.args.get("filtered"):
                return f"ARRAY_AGG({self.sql(e, 'this')}{ignore})"
            arg = e.this
            distinct = isinstance(arg, exp.Distinct)
            when = (arg.expressions[0] if distinct else arg).args["ifs"][0]
            value = f"{'DISTINCT ' if distinct else ''}{self.sql(when, 'true')}"
            return f"ARRAY_AGG({value}{ignore}) FILTER (WHERE {self.sql(when, 'this')})"

        TYPE_MAPPING = {
            **BaseGenerator.TYPE_MAPPING,
            exp.DType.STRUCT: "ROW",
            exp.DType.TEXT: "STRING",
            exp.DType.VARBINARY: "BYTES",
            exp.DType.TIMESTAMPLTZ: "TIMESTAMP_LTZ",
        }

        TRANSFORMS = {
            **BaseGenerator.TRANSFORMS,
            exp.ArrayAgg: lambda self, e: self.flink_array_agg_sql(e),
            Explain: lambda self, e: self.explain_sql(e),
            MetadataColumnConstraint: lambda self, e: self.metadatacolumnconstraint_sql(e),
            Reset: lambda self, e: f"RESET {self.sql(e, 'this')}".rstrip(),
            StatementSet: lambda self, e: self.statementset_sql(e),
            WindowTVF: lambda self, e: self.windowtvf_sql(e),
            **JSON_WRITERS,
            exp.TimestampAdd: lambda self, e: self.func(
                "TIMESTAMPADD", e.unit, e.expression, e.this
            ),
            exp.TimestampDiff: lambda self, e: self.func(
                "TIMESTAMPDIFF", e.unit, e.expression, e.this
            ),
            exp.TimeToStr: lambda self, e: self.func(
                "DATE_FORMAT", e.this, self.format_time(e)
            ),
            exp.Version: lambda self, e: (
                f"FOR SYSTEM_TIME AS OF {self.sql(e, 'expression')}"
            ),
        }

        PROPERTIES_LOCATION = {
            **BaseGenerator.PROPERTIES_LOCATION,
            exp.PartitionedByProperty: exp.Properties.Location.POST_SCHEMA,
            exp.LikeProperty: exp.Properties.Location.POST_EXPRESSION,
        }

        def table_sql(self, expression: exp.Table, sep: str = " AS ") -> str:
            """Table hints go right after the name, as Flink writes them: ``t /*+ OPTIONS(...) */ AS a``."""
            hints = expression.args.get("hints")
            if not hints:
                return super().table_sql(expression, sep)
            bare = expression.copy()
            bare.set("hints", None)
            text = super().table_sql(bare, sep)
            name = self.table_parts(bare)
            written = "".join(self.sql(h) for h in hints)
            return text[: len(name)] + written + text[len(name) :]

        def likeproperty_sql(self, expression: exp.LikeProperty) -> str:
            options = " ".join(
                f"{o.this.name} {o.args['value'].name}" for o in expression.expressions
            )
            return f"LIKE {self.sql(expression, 'this')}" + (f" ({options})" if options else "")

        def partitionedbyproperty_sql(self, expression: exp.PartitionedByProperty) -> str:
            return f"PARTITIONED BY {self.sql(expression, 'this')}"

        def unixtotime_sql(self, expression: exp.UnixToTime) -> str:
            return self.func("TO_TIMESTAMP_LTZ", expression.this, expression.args.get("scale"))

        def show_sql(self, expression: exp.Show) -> str:
            parts = [f"SHOW {expression.name}"]
            if expression.args.get("target"):
                prefix = "FROM " if expression.name == "COLUMNS" else ""
                parts.append(prefix + self.sql(expression, "target"))
            if expression.args.get("db"):
                parts.append(f"FROM {self.sql(expression, 'db')}")
            if expression.args.get("like"):
                parts.append(f"LIKE {self.sql(expression, 'like')}")
            return " ".join(parts)

        def matchrecognize_sql(self, expression: exp.MatchRecognize) -> str:
            """sqlglot's text plus Flink's WITHIN and SUBSET, which it does not know (a view's
            stored text must keep them)."""
            within = expression.args.get("within")
            subsets = expression.args.get("subset") or []
            define = expression.args.get("define") or []
            if within is None and not subsets:
                return super().matchrecognize_sql(expression)
            extra = f" WITHIN {self.sql(within)}" if within is not None else ""
            if subsets:
                extra += " SUBSET " + ", ".join(
                    f"{self.sql(s, 'alias')} = ({', '.join(self.sql(m) for m in s.this.expressions)})"
                    for s in subsets
                )
            # the DEFINE clause goes after them: written by sqlglot, then moved behind
            bare = expression.copy()
            bare.set("define", None)
            text = super().matchrecognize_sql(bare)
            close = text.rindex(")")
            defines = ", ".join(f"{self.sql(d, 'alias')} AS {self.sql(d, 'this')}" for d in define)
            tail = f" DEFINE {defines}" if defines else ""
            return f"{text[:close]}{extra}{tail}{text[close:]}"

        def explain_sql(self, expression: Explain) -> str:
            details = expression.args.get("details")
            head = f"EXPLAIN {self.expressions(expression, 'details', flat=True)}" if details else (
                "EXPLAIN"
            )
            return f"{head} {self.sql(expression, 'this')}"

        def statementset_sql(self, expression: StatementSet) -> str:
            inserts = "".join(f"{self.sql(e)}; " for e in expression.expressions)
            return f"EXECUTE STATEMENT SET BEGIN {inserts}END"

        def property_sql(self, expression: exp.Property) -> str:
            if type(expression) is exp.Property:
                return f"{self.sql(expression, 'this')} = {self.sql(expression, 'value')}"
            return super().property_sql(expression)

        def schemacommentproperty_sql(self, expression: exp.SchemaCommentProperty) -> str:
            return f"COMMENT {self.sql(expression, 'this')}"

        def metadatacolumnconstraint_sql(self, expression: MetadataColumnConstraint) -> str:
            key = self.sql(expression, "this")
            virtual = " VIRTUAL" if expression.args.get("virtual") else ""
            return f"METADATA{' FROM ' + key if key else ''}{virtual}"

        def windowtvf_sql(self, expression: WindowTVF) -> str:
            table = self.sql(expression, "this")
            partition = expression.args.get("partition_by")
            if partition:
                table += f" PARTITION BY ({self.expressions(expression, 'partition_by', flat=True)})"
            args = [f"TABLE {table}", f"DESCRIPTOR({self.sql(expression, 'time_col')})"]
            args += [self.sql(e) for e in expression.expressions]
            if expression.args.get("offset"):
                args.append(self.sql(expression, "offset"))
            alias = self.sql(expression, "alias")
            alias = f" AS {alias}" if alias else ""
            joins = self.expressions(expression, key="joins", sep="", flat=True)
            return f"TABLE({expression.kind}({', '.join(args)})){alias}{joins}"
