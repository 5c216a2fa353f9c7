"""Bind sqlglot scalar expressions to typed IR over a scope.

Type checking happens here, so a mismatch (``'abc' + 1``, ``UPPER(1)``) is a
plan-time error at the expression's line and column.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import pyarrow as pa
from sqlglot import exp

from sqlstream.core.errors import PlanError
from sqlstream.core.expressions import (
    Call,
    Case,
    Cast,
    ColumnRef,
    Expr,
    Literal,
    referenced_columns,
)
from sqlstream.core.functions import NOT_SUPPORTED, ArgumentTypeError, common_type, lookup
from sqlstream.core.functions.collections import FIELD, ITEM
from sqlstream.core.functions.json import constant_path
from sqlstream.core.functions.udfs import USER_AGGREGATES
from sqlstream.core.sql.dialect import (
    JSON_AGGREGATES,
    FlinkJsonArray,
    FlinkJsonExists,
    FlinkJsonObject,
    FlinkJsonQuery,
    FlinkJsonValue,
    JsonBehavior,
    interval_months,
)
from sqlstream.core.sql.dialect import interval_ms as dialect_interval_ms
from sqlstream.core.types import (
    INTERVAL_MONTH,
    arrow_type,
    is_ltz,
    is_month_interval,
    is_multiset,
    is_string,
    sql_type_name,
)
from sqlstream.planner.function_calls import translate_call
from sqlstream.planner.scope import Scope, plan_error

AGGREGATES = (exp.Count, exp.Sum, exp.Min, exp.Max, exp.Avg)
# aggregates beyond COUNT/SUM/MIN/MAX/AVG: GROUP BY and windows run them (OVER all but the statistics)
GROUP_AGGREGATES: dict[type, str] = {
    exp.StddevPop: "STDDEV_POP", exp.StddevSamp: "STDDEV_SAMP", exp.Stddev: "STDDEV_SAMP",
    exp.VariancePop: "VAR_POP", exp.Variance: "VAR_SAMP", exp.FirstValue: "FIRST_VALUE",
    exp.LastValue: "LAST_VALUE", exp.ArrayAgg: "ARRAY_AGG",
}

_BINARY: dict[type, str] = {
    exp.Add: "+",
    exp.Sub: "-",
    exp.Mul: "*",
    exp.Div: "/",
    exp.Mod: "%",
    exp.EQ: "=",
    exp.NEQ: "<>",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.GT: ">",
    exp.GTE: ">=",
    exp.And: "AND",
    exp.Or: "OR",
    exp.DPipe: "CONCAT",
    exp.NullSafeNEQ: "IS_DISTINCT_FROM",
    exp.NullSafeEQ: "IS_NOT_DISTINCT_FROM",
}

# Hook consulted before the default rules; returns IR to use for the node, or None.
Intercept = Callable[[exp.Expression], Expr | None]


def interval_ms(node: exp.Interval) -> int:
    return dialect_interval_ms(node)


class ExprBinder:
    def __init__(self, scope: Scope, intercept: Intercept | None = None, *, zone: str) -> None:
        self.scope = scope
        self.intercept = intercept
        # the session zone ('table.local-time-zone'), set on the calls and casts that read or
        # write wall-clock time so that the evaluator applies it
        self.zone = zone

    def bind(self, node: exp.Expression) -> Expr:
        if self.intercept is not None:
            hit = self.intercept(node)
            if hit is not None:
                return hit
        try:
            return self._bind(node)
        except ArgumentTypeError as e:
            raise plan_error(f"type mismatch in '{node.sql()}': {e}", node) from None

    # ------------------------------------------------------------------ rules
    def _bind(self, node: exp.Expression) -> Expr:
        if isinstance(node, exp.Paren):
            return self.bind(node.this)
        if isinstance(node, exp.Column):
            if isinstance(node.this, exp.Star):
                raise plan_error("'*' is only allowed in the SELECT list or COUNT(*)", node)
            if node.table:
                return self._qualified_column(node)
            return self.scope.resolve(node)
        if isinstance(node, exp.Array):
            return self._call("ARRAY", [self.bind(a) for a in node.expressions], node)
        if isinstance(node, exp.Tuple) and len(node.expressions) > 1:
            # (a, b): the implicit ROW constructor, as Calcite reads it
            return self._call("ROW", [self.bind(a) for a in node.expressions], node)
        if isinstance(node, exp.Bracket):
            return self._bracket(node)
        if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Identifier):
            return self._field(self.bind(node.this), node.expression.name, node)
        if isinstance(node, exp.Literal):
            return self._literal(node)
        if isinstance(node, exp.Boolean):
            return Literal(bool(node.this), pa.bool_())
        if isinstance(node, exp.Null):
            return Literal(None, pa.null())
        if isinstance(node, exp.Interval):
            months = interval_months(node)
            if months is not None:
                return Literal(pa.MonthDayNano((months, 0, 0)), INTERVAL_MONTH)
            return Literal(interval_ms(node), pa.duration("ms"))
        if is_aggregate(node):
            raise plan_error(
                f"aggregate function {node.sql()} is not allowed here "
                "(only in the SELECT list or HAVING of an aggregating query)",
                node,
            )
        if isinstance(node, exp.Neg):
            inner = self.bind(node.this)
            if isinstance(inner, Literal) and isinstance(inner.value, int | float | Decimal) and not isinstance(inner.value, bool):
                # -2 is a numeric literal, as in Flink's parser (ROUND(d, -2) types by its value)
                return Literal(-inner.value, inner.type)
            if isinstance(inner, Literal) and is_month_interval(inner.type):
                # - INTERVAL '13' MONTH: a month interval literal, negated
                return Literal(pa.MonthDayNano((-inner.value.months, 0, 0)), inner.type)
            return self._call("NEGATE", [inner], node)
        if isinstance(node, exp.Not):
            inner = node.this
            return self._call("NOT", [self.bind(inner)], node)
        if isinstance(node, exp.Is):
            if isinstance(node.expression, exp.Null):
                return self._call("IS_NULL", [self.bind(node.this)], node)
            if isinstance(node.expression, exp.JSON):
                return self._is_json(node)
            if isinstance(node.expression, exp.Boolean):
                value = self.bind(node.this)
                want = bool(node.expression.this)
                eq = self._call("=", [value, Literal(want, pa.bool_())], node)
                return Call("COALESCE", (eq, Literal(False, pa.bool_())), pa.bool_())
            raise plan_error(f"unsupported IS expression '{node.sql()}'", node)
        if type(node) in _BINARY:
            return self._call(_BINARY[type(node)], [self.bind(node.this), self.bind(node.expression)], node)
        if isinstance(node, exp.Escape) and isinstance(node.this, exp.Like | exp.SimilarTo):
            return self._pattern_match(node.this, node.expression)
        if isinstance(node, exp.Like | exp.SimilarTo):
            return self._pattern_match(node, None)
        if isinstance(node, exp.ILike):
            lowered = [self._call("LOWER", [self.bind(x)], node) for x in (node.this, node.expression)]
            match = self._call("LIKE", lowered, node)
            return self._call("NOT", [match], node) if node.args.get("negate") else match
        if isinstance(node, exp.Between):
            value, low, high = (self.bind(n) for n in (node.this, node.args["low"], node.args["high"]))
            between = self._between(value, low, high, node)
            if node.args.get("symmetric"):
                # BETWEEN SYMMETRIC: either order of the bounds
                return self._call("OR", [between, self._between(value, high, low, node)], node)
            return between
        if isinstance(node, exp.Subquery | exp.Exists) or (isinstance(node, exp.In) and node.args.get("query")):
            raise plan_error("subqueries are supported in WHERE (IN, EXISTS and scalar ones, as conjuncts) and "
                             "as scalar values in a SELECT list without aggregates, not here", node)
        if isinstance(node, exp.In):
            args = [self.bind(node.this)] + [self.bind(x) for x in node.expressions]
            return self._call("IN", args, node)
        if isinstance(node, exp.Case):
            return self._case(node)
        if isinstance(node, exp.Cast | exp.TryCast):
            target = arrow_type(node.to)
            arg = self.bind(node.this)
            safe = isinstance(node, exp.TryCast)
            if isinstance(arg, Literal) and arg.value is None:
                return Literal(None, target)
            length, fixed = _char_length(node.to)
            return Cast(arg, target, safe, self.zone if is_ltz(arg.type) != is_ltz(target) else None, length, fixed)
        if isinstance(node, exp.Filter):
            if not is_aggregate(node.this):
                raise plan_error(
                    "FILTER (WHERE ...) only applies to an aggregate function, "
                    f"not to {node.this.sql()}",
                    node,
                )
            raise plan_error(
                f"{node.sql()} is not allowed here "
                "(only in the SELECT list or HAVING of an aggregating query)",
                node,
            )
        if isinstance(node, exp.Anonymous) and node.name.upper() == "JSON":
            raise plan_error("The JSON() function is currently only supported inside JSON_ARRAY() or as the VALUE "
                             "param of JSON_OBJECT()", node)
        if isinstance(node, _JSON_NODES) or (isinstance(node, exp.Anonymous) and node.name.upper() == "JSON_STRING"):
            return self._json(node)
        if isinstance(node, exp.Anonymous):
            _refuse_group_window_call(node)
        if isinstance(node, exp.Func):
            translated = translate_call(node)
            if translated is None:
                name = node.sql_name().upper()
                if name in NOT_SUPPORTED:
                    raise plan_error(f"{name} is not supported: {NOT_SUPPORTED[name]}", node)
                raise plan_error(f"unknown function '{node.sql_name()}' in '{node.sql()}'", node)
            name, arg_nodes = translated
            return self._call(name, [self.bind(a) for a in arg_nodes], node)
        raise plan_error(f"unsupported expression '{node.sql()}'", node)

    # ------------------------------------------------------------------ JSON functions
    def _is_json(self, node: exp.Is) -> Expr:
        spec = node.expression
        if spec.args.get("with_") or spec.args.get("unique"):
            raise plan_error(f"'{node.sql()}': IS JSON takes no WITH/WITHOUT UNIQUE KEYS in Flink", node)
        kind = spec.this or "VALUE"
        return self._call("$IS_JSON", [self.bind(node.this), Literal(kind, pa.string())], node)

    def _behaviour(self, clause: exp.Expression | None, default: str) -> tuple[Literal, Expr]:
        """A JSON function's ON EMPTY/ON ERROR clause as (its kind, its DEFAULT or a NULL)."""
        if not isinstance(clause, JsonBehavior):
            return Literal(default, pa.string()), Literal(None, pa.null())
        if clause.args["kind"] != "DEFAULT":
            return Literal(clause.args["kind"], pa.string()), Literal(None, pa.null())
        value = self.bind(clause.this)
        if referenced_columns(value):
            # Flink's code generator takes the DEFAULT as a literal (a column fails its planning)
            raise plan_error(f"JSON_VALUE's DEFAULT must be a constant, not '{clause.this.sql()}'", clause.this)
        return Literal("DEFAULT", pa.string()), value

    def json_text_of(self, value: Expr, node: exp.Expression) -> Expr:
        """JSON_STRING of a bound value: a JSON_OBJECT/JSON_ARRAY call's text is inserted as it is
        (Flink's raw node), any other value becomes its JSON."""
        raw = isinstance(value, Call) and value.name in _RAW_JSON
        return self._call("JSON_STRING", [value, Literal("r" if raw else "s", pa.string())], node)

    def objectagg_entry(self, key: Expr, text: Expr, node: exp.Expression) -> Expr:
        """JSON_OBJECTAGG's argument: the key and the value's JSON text as one '"key":value' column."""
        return self._call("$JSON_OBJECTAGG_ENTRY", [key, text], node)

    def _json(self, node: exp.Expression) -> Expr:
        def string(value: str) -> Literal:
            return Literal(value, pa.string())

        if isinstance(node, exp.Anonymous):  # JSON_STRING(x)
            if len(node.expressions) != 1:
                raise plan_error(f"JSON_STRING takes 1 argument, got {len(node.expressions)}", node)
            return self.json_text_of(self.bind(node.expressions[0]), node)
        if isinstance(node, FlinkJsonValue | FlinkJsonQuery | FlinkJsonExists):
            _check_path(node.args["path"])
        if isinstance(node, FlinkJsonValue):
            returning = _json_returning(node, "JSON_VALUE")
            empty = self._behaviour(node.args.get("on_empty"), "NULL")
            error = self._behaviour(node.args.get("on_error"), "NULL")
            args = [self.bind(node.this), self.bind(node.args["path"]), string(returning), *empty, *error]
            return self._call("JSON_VALUE", args, node)
        if isinstance(node, FlinkJsonQuery):
            returning = _json_returning(node, "JSON_QUERY")
            args = [self.bind(node.this), self.bind(node.args["path"]), string(returning),
                    string(node.args.get("wrapper") or "WITHOUT"),
                    self._behaviour(node.args.get("on_empty"), "NULL")[0],
                    self._behaviour(node.args.get("on_error"), "NULL")[0]]
            return self._call("JSON_QUERY", args, node)
        if isinstance(node, FlinkJsonExists):
            args = [self.bind(node.this), self.bind(node.args["path"]),
                    self._behaviour(node.args.get("on_error"), "FALSE")[0]]
            return self._call("JSON_EXISTS", args, node)
        if isinstance(node, FlinkJsonArray):
            values = [self._json_member(v) for v in node.expressions]
            flags = "".join("r" if isinstance(v, Call) and v.name in _RAW_JSON else "s" for v in values)
            return self._call("JSON_ARRAY", [string(node.args.get("on_null") or "ABSENT"), string(flags), *values], node)
        assert isinstance(node, FlinkJsonObject)
        pairs: list[Expr] = []
        flags = ""
        for pair in node.expressions:
            key = self.bind(pair.this)
            if (isinstance(key, Literal) and key.value is None) or referenced_columns(key):
                # Flink refuses a key that may be NULL; sqlstream knows no NOT NULL columns
                raise plan_error(f"a JSON_OBJECT key must be a constant that is not NULL: '{pair.this.sql()}'",
                                 pair.this)
            value = self._json_member(pair.expression)
            flags += "r" if isinstance(value, Call) and value.name in _RAW_JSON else "s"
            pairs += [key, value]
        return self._call("JSON_OBJECT", [string(node.args.get("on_null") or "NULL"), string(flags), *pairs], node)

    def _json_member(self, node: exp.Expression) -> Expr:
        """A JSON_ARRAY element or JSON_OBJECT value: JSON(text) is allowed here (only), as raw JSON."""
        if isinstance(node, exp.Anonymous) and node.name.upper() == "JSON":
            if len(node.expressions) != 1:
                raise plan_error(f"JSON takes 1 argument, got {len(node.expressions)}", node)
            return self._call("$JSON", [self.bind(node.expressions[0])], node)
        return self.bind(node)

    def _qualified_column(self, node: exp.Column) -> Expr:
        """``t.c``, or a ROW column's field: ``r.f``, ``t.r.f``, ``r.f.g`` (sqlglot reads the
        leading names as table, database and catalog).  As in Flink, a table qualifier wins."""
        try:
            return self.scope.resolve(node)
        except PlanError as unknown:
            parts = [p.name for p in node.parts]
            for qualified in (True, False):
                width = 2 if qualified else 1
                if len(parts) <= width:
                    continue
                column = exp.column(parts[width - 1], parts[0] if qualified else None)
                column.meta.update(node.meta)
                try:
                    value: Expr = self.scope.resolve(column)
                except PlanError:
                    continue
                for name in parts[width:]:
                    value = self._field(value, name, node)
                return value
            raise unknown from None

    def _field(self, row: Expr, name: str, node: exp.Expression) -> Expr:
        """``row.name``: a field of a ROW value (matched case-sensitively, then case-insensitively)."""
        if pa.types.is_struct(row.type):
            names = [f.name for f in row.type]
            if name not in names:
                folded = [n for n in names if n.lower() == name.lower()]
                name = folded[0] if len(folded) == 1 else name
        return self._call(FIELD, [row, Literal(name, pa.string())], node)

    def _bracket(self, node: exp.Bracket) -> Expr:
        """``MAP[k, v, ...]`` (sqlglot reads it as an index into a column MAP), ``a[i]``, ``m[k]``."""
        target = node.this
        if isinstance(target, exp.Column) and not target.table and not target.this.quoted and target.name.upper() == "MAP":
            return self._call("MAP", [self.bind(a) for a in node.expressions], node)
        if len(node.expressions) != 1:
            raise plan_error(f"'{node.sql()}' takes one index", node)
        container = self.bind(target)
        index = self.bind(node.expressions[0])
        if (pa.types.is_list(container.type) and isinstance(index, Literal) and isinstance(index.value, int)
                and index.value < 1):
            raise plan_error(f"Array element access needs an index starting at 1 but was {index.value}", node)
        if (pa.types.is_map(container.type) and index.type != container.type.key_type
                and is_string(index.type) == is_string(container.type.key_type)):
            index = coerce(index, container.type.key_type, zone=self.zone)
        item = self._call(ITEM, [container, index], node)
        default = _not_null_element_default(container)
        if default is None:
            return item
        return Call("COALESCE", (item, Literal(default, item.type)), item.type)

    def _between(self, value: Expr, low: Expr, high: Expr, node: exp.Expression) -> Expr:
        return self._call(
            "AND", [self._call(">=", [value, low], node), self._call("<=", [value, high], node)], node
        )

    def _pattern_match(self, node: exp.Like | exp.SimilarTo, escape: exp.Expression | None) -> Expr:
        """LIKE / SIMILAR TO with its ESCAPE character; sqlglot marks NOT LIKE with ``negate``."""
        args = [self.bind(node.this), self.bind(node.expression)]
        if escape is not None:
            args.append(self.bind(escape))
        match = self._call("LIKE" if isinstance(node, exp.Like) else "SIMILAR", args, node)
        return self._call("NOT", [match], node) if node.args.get("negate") else match

    def _literal(self, node: exp.Literal) -> Literal:
        text = node.this
        if node.is_string:
            return Literal(text, pa.string())
        try:
            value = int(text)
            return Literal(value, pa.int32() if -(2**31) <= value < 2**31 else pa.int64())
        except ValueError:
            pass
        if "e" in text.lower():  # 1.5e0 is an approximate numeric literal: DOUBLE
            return Literal(float(text), pa.float64())
        # an exact numeric literal is a DECIMAL of its digits: 2.50 is DECIMAL(3, 2), and one below 1
        # counts its leading zero, as Calcite types it: 0.1 is DECIMAL(2, 1), 0.125 DECIMAL(4, 3)
        number = Decimal(text)
        sign, digits, exponent = number.as_tuple()
        assert isinstance(exponent, int)
        scale = max(-exponent, 0)
        precision = max(len(digits), scale + 1)
        if precision > 38:
            raise plan_error(f"numeric literal {text} has more than 38 digits", node)
        return Literal(number, pa.decimal128(precision, scale))

    def _call(self, name: str, args: list[Expr], node: exp.Expression) -> Expr:
        fn = lookup(name)
        if fn is None and name.upper() in NOT_SUPPORTED:
            raise plan_error(f"{name.upper()} is not supported: {NOT_SUPPORTED[name.upper()]}", node)
        if fn is None:
            raise plan_error(f"unknown function '{name}'", node)
        if len(args) < fn.min_args or (fn.max_args is not None and len(args) > fn.max_args):
            expected = (
                f"{fn.min_args}" if fn.max_args == fn.min_args
                else f"at least {fn.min_args}" if fn.max_args is None
                else f"{fn.min_args} to {fn.max_args}"
            )
            raise plan_error(f"{name} takes {expected} arguments, got {len(args)}", node)
        types = [a.type for a in args]
        multiset = next((t for t in types if is_multiset(t)), None)
        if multiset is not None:
            # Flink's MULTISET (COLLECT's result) goes to CAST ... AS STRING and the output only; its
            # functions fail in Flink 2.3 (CARDINALITY: 'Expect an array or a map' at code generation)
            raise plan_error(f"{name} does not take a {sql_type_name(multiset)} value (sqlstream supports a MULTISET "
                             "in the output and in CAST(... AS STRING) only)", node)
        try:
            if fn.sees_constants:
                constants = [a.value if isinstance(a, Literal) else None for a in args]
                result = fn.infer(types, constants)  # type: ignore[call-arg]
            else:
                result = fn.infer(types)
        except ArgumentTypeError as e:
            raise plan_error(f"type mismatch in '{node.sql()}': {e}", node) from None
        if fn.coerce_args:
            target = types[0]
            for t in types[1:]:
                c = common_type(target, t)
                if c is None:
                    raise plan_error(
                        f"type mismatch in '{node.sql()}': cannot compare or combine "
                        + " and ".join(sql_type_name(t) for t in types),
                        node,
                    )
                target = c
            args = [coerce(a, target, zone=self.zone) for a in args]
        return Call(name.upper(), tuple(args), result, self.zone if fn.zoned else None)

    def _case(self, node: exp.Case) -> Expr:
        subject = node.this
        whens = []
        for arm in node.args.get("ifs") or []:
            cond_node = arm.this
            if subject is not None:
                cond = self._call("=", [self.bind(subject), self.bind(cond_node)], arm)
            else:
                cond = self.bind(cond_node)
            whens.append((cond, self.bind(arm.args["true"])))
        return self._make_case(whens, node.args.get("default"), node)

    def _make_case(self, whens: list[tuple[Expr, Expr]], default_node: exp.Expression | None, node: exp.Expression) -> Expr:
        default = self.bind(default_node) if default_node is not None else None
        values = [v for _, v in whens] + ([default] if default is not None else [])
        target = values[0].type
        for v in values[1:]:
            c = common_type(target, v.type)
            if c is None:
                raise plan_error(
                    "type mismatch in CASE: branches have types "
                    + ", ".join(sql_type_name(v.type) for v in values),
                    node,
                )
            target = c
        for cond, _ in whens:
            if not (pa.types.is_boolean(cond.type) or pa.types.is_null(cond.type)):
                raise plan_error(f"CASE condition must be BOOLEAN, got {sql_type_name(cond.type)}", node)
        if pa.types.is_null(target):
            target = pa.string()
        return Case(
            tuple((c, coerce(v, target, zone=self.zone)) for c, v in whens),
            None if default is None else coerce(default, target, zone=self.zone),
            target,
        )


# calls whose result a JSON constructor inserts as JSON, not as a string (Flink's raw nodes)
_RAW_JSON = ("JSON_OBJECT", "JSON_ARRAY", "$JSON")
_JSON_NODES = (FlinkJsonValue, FlinkJsonQuery, FlinkJsonExists, FlinkJsonObject, FlinkJsonArray)


def _check_path(path: exp.Expression) -> None:
    """A constant path is compiled at plan time: a syntax error, or a Jayway construct sqlstream
    does not evaluate, is refused at the path (Flink compiles it per row and returns the ON ERROR
    value instead)."""
    if isinstance(path, exp.Literal) and path.is_string:
        try:
            constant_path(path.name)
        except ArgumentTypeError as e:
            raise plan_error(str(e), path) from None


def _json_returning(node: exp.Expression, function: str) -> str:
    """The RETURNING type of JSON_VALUE (STRING, BOOLEAN, INT or DOUBLE, as Flink's code generator
    takes) or JSON_QUERY (STRING, or ARRAY for ARRAY<STRING>), by name."""
    returning = node.args.get("returning")
    if returning is None:
        return "STRING"
    if function == "JSON_QUERY" and returning.is_type(exp.DataType.Type.ARRAY):
        element = arrow_type(returning.expressions[0]) if returning.expressions else None
        if element != pa.string():
            name = returning.expressions[0].sql(dialect="flink") if returning.expressions else "?"
            raise plan_error(f"Unsupported array element type '{name}' for RETURNING ARRAY in JSON_QUERY() "
                             "(Flink takes ARRAY<STRING>)", returning)
        return "ARRAY"
    t = None if returning.is_type(exp.DataType.Type.CHAR) else arrow_type(returning)
    names = {pa.string(): "STRING"} if function == "JSON_QUERY" else {
        pa.string(): "STRING", pa.bool_(): "BOOLEAN", pa.int32(): "INT", pa.float64(): "DOUBLE"}
    if t not in names:
        raise plan_error(f"Unsupported type '{returning.sql(dialect='flink')}' for RETURNING in {function}() "
                         f"(Flink takes {', '.join(names.values())})", returning)
    return names[t]


def coerce(e: Expr, target: pa.DataType, *, zone: str) -> Expr:
    """``e`` cast to ``target`` (folding literals, so '2024-01-01' becomes a TIMESTAMP constant);
    between TIMESTAMP_LTZ and wall-clock time the cast reads the session zone ``zone``."""
    if e.type == target:
        return e
    if is_ltz(e.type) != is_ltz(target):
        return Cast(e, target, zone=zone)  # constant folding evaluates a literal's cast in the zone
    if isinstance(e, Literal):
        if e.value is None:
            return Literal(None, target)
        try:
            return Literal(pa.scalar(e.value, e.type).cast(target).as_py(), target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            if is_string(e.type):
                raise PlanError(
                    f"cannot read '{e.value}' as {sql_type_name(target)}"
                ) from None
            raise
    return Cast(e, target)


def is_aggregate(node: exp.Expression) -> bool:
    """A built-in aggregate call, or a call of a registered aggregate UDF."""
    if isinstance(node, AGGREGATES) or type(node) in GROUP_AGGREGATES:
        return True
    if isinstance(node, exp.Anonymous) and node.name.upper() in ("LISTAGG", "PERCENTILE", "COLLECT"):
        return True
    if isinstance(node, JSON_AGGREGATES):
        return True

    return isinstance(node, exp.Anonymous) and node.name.upper() in USER_AGGREGATES


def contains_aggregate(node: exp.Expression) -> bool:
    """Whether ``node`` calls an aggregate of its own query (not one inside a subquery)."""
    return any(is_aggregate(n) for n in node.walk(prune=lambda n: n is not node and isinstance(n, exp.Subquery | exp.Select)))


def column_ref(index: int, scope: Scope) -> ColumnRef:
    c = scope.columns[index]
    return ColumnRef(index, c.name, c.type)


def _refuse_group_window_call(node: exp.Anonymous) -> None:
    """A legacy group window function out of place: a clear error, not 'unknown function'.

    The aggregation binder consumes TUMBLE/HOP/SESSION(...) in GROUP BY and the matching
    TUMBLE_START/... above it; any call that reaches here is misplaced.
    """
    from sqlstream.planner.group_windows import AUXILIARIES, GROUP_WINDOWS

    name = node.name.upper()
    if name in GROUP_WINDOWS:
        params = ", ".join(("time_attribute", *GROUP_WINDOWS[name]))
        raise plan_error(
            f"the group window {name}({params}) is only allowed in GROUP BY; read its bounds with "
            f"{name}_START, {name}_END or {name}_ROWTIME",
            node,
        )
    if name in AUXILIARIES:
        kind = AUXILIARIES[name][0]
        params = ", ".join(("time_attribute", *GROUP_WINDOWS[kind]))
        raise plan_error(
            f"{name} needs the group window {kind}({params}) with the same arguments in GROUP BY",
            node,
        )


def _char_length(to: exp.DataType) -> tuple[int | None, bool]:
    """The n of a cast to VARCHAR(n) or CHAR(n) (None for STRING), and whether it pads (CHAR)."""
    kinds = {exp.DataType.Type.VARCHAR: False, exp.DataType.Type.NVARCHAR: False,
             exp.DataType.Type.CHAR: True, exp.DataType.Type.NCHAR: True}
    if to.this not in kinds:
        return None, False
    params = [p.this if isinstance(p, exp.DataTypeParam) else p for p in to.expressions]
    if not params:
        # Flink: CHAR is CHAR(1); a VARCHAR without a length is a STRING
        return (1, True) if kinds[to.this] else (None, False)
    try:
        return int(params[0].name), kinds[to.this]
    except (TypeError, ValueError):
        return None, kinds[to.this]


def _not_null_element_default(container: Expr) -> object | None:
    """What ``container[i]`` gives for a missing element when Flink types the elements NOT NULL, else None.

    Flink types ARRAY[...] of NOT NULL elements ARRAY<T NOT NULL> (MAP[...] of NOT NULL values
    MAP<K, V NOT NULL>); its generated element access then has no NULL to give for an index past the
    end, a missing key or a NULL index, and gives the primitive default of its code generator instead
    ('' for strings, -1 for numbers, FALSE). Only a constructor of non-NULL literals (or CASTs of
    them) is known NOT NULL here (sqlstream's types carry no nullability), and only the types with
    such a default count: the others (DECIMAL, temporal, nested) have none and stay NULL."""
    if not isinstance(container, Call) or container.name not in ("ARRAY", "MAP"):
        return None
    elements = container.args if container.name == "ARRAY" else container.args[1::2]
    if not all(_not_null_constant(e) for e in elements):
        return None
    t = container.type.value_type if container.name == "ARRAY" else container.type.item_type
    if is_string(t):
        return ""
    if pa.types.is_boolean(t):
        return False
    if pa.types.is_integer(t):
        return -1
    if pa.types.is_floating(t):
        return -1.0
    return None


def _not_null_constant(e: Expr) -> bool:
    """A non-NULL literal, or a CAST of one (Flink types a CAST NOT NULL when its operand is; not
    TRY_CAST, which can give NULL)."""
    while isinstance(e, Cast) and not e.safe:
        e = e.arg
    return isinstance(e, Literal) and e.value is not None
