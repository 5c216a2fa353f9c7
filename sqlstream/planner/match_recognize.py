"""Binding MATCH_RECOGNIZE (Flink's row pattern recognition) into a logical MatchRecognize node.

What is carried out: PARTITION BY columns, ORDER BY the time attribute (event time, or a PROCTIME()
column) ascending, a PATTERN
of variables in sequence with quantifiers (``+ * ? {n} {n,} {n,m}``, reluctant ``+? *? {n,}? {n,m}?``), DEFINE conditions
over the current row and the match so far (FIRST/LAST(v.col[, n]), v.col, PREV(v.col, 0), aggregates),
MEASURES (FINAL or not) over FIRST/LAST(v.col[, n])/v.col, COUNT/SUM/AVG/MIN/MAX
of a variable's rows, MATCH_ROWTIME() and MATCH_PROCTIME(), SUBSET (as Flink 2.3 runs it: see
_subsets), WITHIN, ONE ROW PER MATCH and the four AFTER MATCH SKIP forms.
Everything else of the clause is refused here by name, with Flink's reason where Flink 2.3 refuses it
too (alternation, groups, PERMUTE, exclusion, PREV/NEXT offsets, CLASSIFIER, MATCH_NUMBER, RUNNING,
ALL ROWS PER MATCH), so no part of a query is silently dropped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pyarrow as pa
from sqlglot import exp

from sqlstream.core.expressions import Call, ColumnRef, Expr
from sqlstream.core.functions.arithmetic import avg_type, sum_type
from sqlstream.core.functions.temporal import TIMESTAMP_LTZ_3
from sqlstream.core.physical import PatternTerm
from sqlstream.core.sql.dialect import interval_ms
from sqlstream.core.types import sql_type_name
from sqlstream.planner.expr_binder import ExprBinder
from sqlstream.planner.logical import LogicalNode, MatchRecognize
from sqlstream.planner.proctime import with_proctime_attribute
from sqlstream.planner.scope import Scope, plan_error

# Flink's NFACompiler: a pattern may not end in a greedy quantifier
_GREEDY_LAST = ("Greedy quantifiers are not allowed as the last element of a Pattern yet. Finish your "
                "pattern with either a simple variable or reluctant quantifier.")
_TOKEN = re.compile(r"\s*(?:(?P<var>[A-Za-z_][A-Za-z0-9_]*|`[^`]+`)(?P<q>\+\??|\*\??|\?\??|\{[^}]*\}\??)?"
                    r"|(?P<other>\S+))")
# what of the PATTERN syntax is refused, with Flink's reason where it refuses it too
_PATTERN_SYNTAX = {"|": "alternation (|) in PATTERN is not supported: Currently, CEP doesn't support branching "
                        "patterns.",
                   "(": "grouping with parentheses in PATTERN is not supported: Group patterns are not supported yet.",
                   ")": "grouping with parentheses in PATTERN is not supported: Group patterns are not supported yet.",
                   "{-": "exclusion {- ... -} in PATTERN is not supported: Currently, CEP doesn't support '{-' '-}' "
                         "patterns.",
                   "^": "the anchor ^ in PATTERN is not supported", "$": "the anchor $ in PATTERN is not supported"}
_AGGREGATES = {exp.Count: "COUNT", exp.Sum: "SUM", exp.Avg: "AVG", exp.Min: "MIN", exp.Max: "MAX"}
# functions of the clause Flink 2.3 refuses, with its reason
_UNSUPPORTED_CALLS = {"CLASSIFIER": "Flink 2.3 does not support CLASSIFIER() (Unsupported call: CLASSIFIER())",
                      "MATCH_NUMBER": "Flink 2.3 does not support MATCH_NUMBER() (No match found for function "
                                      "signature MATCH_NUMBER())",
                      "RUNNING": "Flink 2.3 does not support RUNNING (only FINAL) semantics",
                      "FINAL": "FINAL applies to a whole measure (MEASURES FINAL expr AS name)"}


def parse_pattern(text: str, at: exp.Expression) -> list[tuple[str, int, int | None, bool]]:
    """The PATTERN (sqlglot keeps it as raw text) as (variable, min, max, reluctant) terms in sequence."""
    terms: list[tuple[str, int, int | None, bool]] = []
    if re.search(r"\bPERMUTE\s*\(", text, re.IGNORECASE):
        raise plan_error("MATCH_RECOGNIZE: PERMUTE in PATTERN is not supported: Currently, CEP doesn't support "
                         "PERMUTE patterns.", at)
    for m in _TOKEN.finditer(text):
        other = m.group("other")
        if other is not None:
            what = _PATTERN_SYNTAX.get(other[:2]) or _PATTERN_SYNTAX.get(other[:1], f"'{other}' in PATTERN is not "
                                                                                "supported")
            raise plan_error(f"MATCH_RECOGNIZE: {what}", at)
        name = m.group("var").strip("`")
        q = m.group("q") or ""
        reluctant = len(q) > 1 and q.endswith("?")
        if q == "??":
            raise plan_error("Reluctant optional variables are not supported yet.", at)  # Flink's words
        q = q[:-1] if reluctant else q
        if q in ("", "+", "*", "?"):
            lo, hi = {"": (1, 1), "+": (1, None), "*": (0, None), "?": (0, 1)}[q]
        else:
            body = re.fullmatch(r"\{\s*(\d*)\s*(,?)\s*(\d*)\s*\}", q)
            if body is None or (not body.group(1) and not body.group(2)):
                raise plan_error(f"MATCH_RECOGNIZE: invalid quantifier {name}{q}", at)
            lo = int(body.group(1) or 0)
            hi = lo if not body.group(2) else (int(body.group(3)) if body.group(3) else None)
            if hi is not None and (hi < lo or hi == 0):
                raise plan_error(f"MATCH_RECOGNIZE: invalid quantifier {name}{q}", at)
            if lo == 0 and hi is not None and hi > 1:
                # Flink translates it to times(0, n), which its Pattern API rejects when the job starts
                raise plan_error(f"MATCH_RECOGNIZE: the quantifier {name}{q} is not supported: Flink repeats from 0 "
                                 "only as ? or * (The from should be a positive number greater than 0.)", at)
        if any(t[0] == name for t in terms):
            raise plan_error(f"MATCH_RECOGNIZE: the pattern variable {name} appears twice in PATTERN: Pattern "
                             "variables must be unique.", at)
        terms.append((name, lo, hi, reluctant))
    if not terms:
        raise plan_error("MATCH_RECOGNIZE: the PATTERN is empty", at)
    for (before, b_lo, b_hi, b_reluctant), (name, lo, _, _) in zip(terms, terms[1:], strict=False):
        # Flink's Pattern.optional() refuses to follow a greedy pattern (the job fails to start)
        if lo == 0 and b_lo != b_hi and (b_lo, b_hi) != (0, 1) and not b_reluctant:
            raise plan_error(f"MATCH_RECOGNIZE: {name} may match no row right after the greedy {before}: Optional "
                             "pattern cannot be preceded by greedy pattern", at)
    _, lo, hi, reluctant = terms[-1]
    if lo != hi and not reluctant:
        raise plan_error(_GREEDY_LAST, at)
    if lo == 0:
        raise plan_error("MATCH_RECOGNIZE: a pattern ending in a variable that may match no row is not "
                         "supported yet", at)
    return terms


def _skip(text: str | None, variables: list[str], at: exp.Expression) -> tuple[str, int]:
    """AFTER MATCH SKIP ...; without the clause, SKIP TO NEXT ROW (Calcite's default, so Flink's)."""
    if text is None:
        return ("TO NEXT ROW", -1)
    words = text.split()
    rest = " ".join(words[3:]).upper()
    if rest in ("PAST LAST ROW", "TO NEXT ROW"):
        return (rest, -1)
    m = re.fullmatch(r"TO (FIRST |LAST )?(\S+)", " ".join(words[3:]), re.IGNORECASE)
    if m is None:
        raise plan_error(f"MATCH_RECOGNIZE: '{text}' is not supported", at)
    name = m.group(2).strip("`")
    if name not in variables:
        raise plan_error(f"MATCH_RECOGNIZE: AFTER MATCH SKIP to the unknown pattern variable {name}", at)
    return ("TO FIRST" if (m.group(1) or "").strip().upper() == "FIRST" else "TO LAST", variables.index(name))


def bind_match_recognize(source: LogicalNode, scope: Scope, node: exp.MatchRecognize, zone: str,
                         ) -> tuple[MatchRecognize, Scope]:
    """The MatchRecognize node over ``source`` (its columns in ``scope``) and its output scope,
    qualified by the clause's alias."""
    if source.updating:
        raise plan_error("MATCH_RECOGNIZE over an updating (changelog) input is not supported; Flink "
                         "supports only append-only input", node)
    partition_keys = [_column(scope.resolve(c), c) for c in node.args.get("partition_by") or []]
    order = node.args.get("order")
    ordered = order.expressions if order is not None else []
    if ordered and isinstance(ordered[0].this, exp.Column):
        # ORDER BY a PROCTIME() column: it becomes the time attribute, stamped with the wall clock
        # as the rows arrive, so rows are matched in arrival order as soon as the clock passes them
        # (Flink's CepOperator in processing time)
        first = scope.resolve(ordered[0].this)
        if isinstance(first, ColumnRef):
            source = with_proctime_attribute(source, first.index)
    rowtime = source.rowtime
    if rowtime is None or not ordered or ordered[0].args.get("desc") \
            or not isinstance(ordered[0].this, exp.Column) or scope.resolve(ordered[0].this).index != rowtime:
        raise plan_error("MATCH_RECOGNIZE must be ordered by the input's time attribute first, ascending "
                         "(ORDER BY <rowtime or PROCTIME() column> [, other columns])", order or node)
    # further ORDER BY columns order the rows of equal times (as Flink's CepOperator sorts them)
    tie_order = [(_column(scope.resolve(o.this), o) if isinstance(o.this, exp.Column) else _column(None, o),
                  bool(o.args.get("desc")), bool(o.args.get("nulls_first"))) for o in ordered[1:]]
    rows = node.args.get("rows")
    if rows is not None and rows.name.upper().split() != ["ONE", "ROW", "PER", "MATCH"]:
        raise plan_error(f"MATCH_RECOGNIZE: {rows.name} is not supported; only ONE ROW PER MATCH (Flink: All rows "
                         "per match mode is not supported yet.)", rows)
    pattern_node = node.args.get("pattern")
    terms = parse_pattern(pattern_node.name if pattern_node is not None else "", node)
    variables = [t[0] for t in terms]
    after = node.args.get("after")
    skip = _skip(after.name if after is not None else None, variables, after or node)
    unions = _subsets(node, variables)

    width = len(source.schema)
    input_scope = Scope.of(source.schema)
    navigations: list[tuple[str, int, int, int]] = []
    navigation_types: list[pa.DataType] = []
    defines: list[Expr | None] = [None] * len(variables)
    for d in node.args.get("define") or []:
        name = d.alias
        if name in variables:
            defines[variables.index(name)] = _bind_define(d.this, name, variables, unions, input_scope, navigations,
                                                          navigation_types, width, zone)
        else:
            # Flink validates the DEFINE of a name the PATTERN does not have, then ignores it
            _bind_define(d.this, name, [*variables, name], unions, input_scope, [], [], width, zone)

    primitives: list[tuple[str, int, int, int]] = []
    primitive_types: list[pa.DataType] = []
    measures: list[Expr] = []
    names: list[str] = []
    rowtime_measure: int | None = None
    for m in node.args.get("measures") or []:
        # ONE ROW PER MATCH evaluates every measure over the final match: FINAL changes nothing
        if (m.args.get("window_frame") or "").upper() == "RUNNING":
            raise plan_error(f"MATCH_RECOGNIZE: RUNNING in MEASURES is not supported: {_UNSUPPORTED_CALLS['RUNNING']}",
                             m)
        item = m.this
        if not isinstance(item, exp.Alias):
            raise plan_error("MATCH_RECOGNIZE: every measure needs a name (MEASURES expr AS name)", item)
        bound = _bind_measure(item.this, variables, unions, input_scope, rowtime, primitives, primitive_types, zone)
        if isinstance(item.this, exp.Anonymous) and item.this.name.upper() == "MATCH_ROWTIME":
            rowtime_measure = len(measures)
        if item.alias in names:
            raise plan_error(f"MATCH_RECOGNIZE: two measures are named {item.alias}", item)
        if item.alias in [scope.columns[k].name for k in partition_keys]:
            raise plan_error(f"MATCH_RECOGNIZE: the measure {item.alias} has the name of a PARTITION BY column: "
                             f"Columns ambiguously defined: {{{item.alias}}}", item)
        measures.append(bound)
        names.append(item.alias)
    if not measures and not partition_keys:
        raise plan_error("MATCH_RECOGNIZE needs MEASURES or PARTITION BY: its output has no column", node)
    out = MatchRecognize(
        source, partition_keys, rowtime, tuple(variables),
        tuple(PatternTerm(i, lo, hi, r) for i, (_, lo, hi, r) in enumerate(terms)),
        tuple(defines), tuple(navigations), tuple(navigation_types), tuple(primitives), tuple(primitive_types), tuple(measures), tuple(names),
        skip, rowtime_measure, _within(node), tie_order)
    return out, Scope.of(out.schema, node.alias or None)


def _subsets(node: exp.MatchRecognize, variables: list[str]) -> list[str]:
    """The names SUBSET declares.  Flink 2.3 accepts SUBSET but reads a union variable's rows under
    its own name, which no row of a match carries: in MEASURES a union variable has no rows (its
    FIRST/LAST are NULL, its COUNT 0), and DEFINE cannot name it.  So only the names are kept."""
    names: list[str] = []
    for declared in node.args.get("subset") or []:
        name = declared.alias
        for member in declared.this.expressions:
            if member.name not in variables:
                raise plan_error(f"MATCH_RECOGNIZE: SUBSET {name} names {member.name}, which is not a variable of "
                                 "the PATTERN (Flink: Unknown pattern)", member)
        if name in variables or name in names:
            raise plan_error(f"MATCH_RECOGNIZE: SUBSET {name}: the name is taken by a pattern variable or another "
                             "SUBSET", declared)
        names.append(name)
    return names


def _within(node: exp.MatchRecognize) -> int | None:
    """WITHIN INTERVAL '...' in milliseconds (a constant day-time interval, as Flink requires)."""
    within = node.args.get("within")
    if within is None:
        return None
    ms = interval_ms(within)
    if ms <= 0:
        raise plan_error("MATCH_RECOGNIZE: WITHIN needs a positive interval", within)
    return ms


def _column(ref: Expr | None, at: exp.Expression) -> int:
    if not isinstance(ref, ColumnRef):
        raise plan_error("MATCH_RECOGNIZE: PARTITION BY and ORDER BY take columns", at)
    return ref.index


def _refuse_call(node: exp.Expression, clause: str) -> None:
    if isinstance(node, exp.Anonymous) and node.name.upper() in _UNSUPPORTED_CALLS:
        name = node.name.upper()
        raise plan_error(f"MATCH_RECOGNIZE: {name} in {clause} is not supported: {_UNSUPPORTED_CALLS[name]}", node)


def _navigation(n: exp.Expression, variables: list[str], scope: Scope, clause: str, unions: Sequence[str] = (),
                ) -> tuple[str, int, int, int, ColumnRef] | None:
    """FIRST(v.col [, n]), LAST(v.col [, n]), v.col (LAST(v.col, 0)) or PREV/NEXT(v.col, 0) (the
    same: Calcite reads v.col as PREV(v.col, 0)) as (kind, variable or -1 for all rows, input column,
    offset, the column); None for other nodes.  A SUBSET variable (of ``unions``, MEASURES only) is
    numbered after the pattern's.  Other PREV and NEXT offsets are refused as Flink refuses them: it
    supports logical offsets (FIRST/LAST) only."""
    if isinstance(n, exp.Anonymous) and n.name.upper() in ("PREV", "NEXT"):
        if clause == "MEASURES":
            raise plan_error(f"MATCH_RECOGNIZE: cannot use PREV/NEXT in MEASURES: {n.sql()}", n)
        args = n.expressions
        if len(args) == 2 and isinstance(args[1], exp.Literal) \
                and args[1].is_int and int(args[1].name) == 0 and isinstance(args[0], exp.Column):
            return _navigation(args[0], variables, scope, clause, unions)
        raise plan_error("Flink does not support physical offsets within partition.", n)
    _refuse_call(n, clause)
    if isinstance(n, exp.Column) and not isinstance(n.this, exp.Star):
        col, kind, offset = n, "LAST", 0
    elif isinstance(n, exp.First | exp.Last):
        col, kind = n.this, "FIRST" if isinstance(n, exp.First) else "LAST"
        off = n.args.get("expression")
        if off is not None and not (isinstance(off, exp.Literal) and off.is_int):
            raise plan_error(f"MATCH_RECOGNIZE: the offset of {n.sql()} must be a constant integer of 0 or more", n)
        offset = int(off.name) if off is not None else 0
        if not isinstance(col, exp.Column) or isinstance(col.this, exp.Star):
            raise plan_error(f"MATCH_RECOGNIZE: {n.sql()} takes a column (v.col)", n)
    else:
        return None
    names = [*variables, *unions]
    if col.table and col.table not in names:
        raise plan_error(f"MATCH_RECOGNIZE: {col.table} in {n.sql()} is not a variable of the PATTERN", col)
    if col.table in unions and clause == "DEFINE":
        raise plan_error(f"MATCH_RECOGNIZE: the SUBSET variable {col.table} in {n.sql()} cannot be read in "
                         "DEFINE (Flink: Table not found), only in MEASURES", col)
    ref = scope.resolve(exp.column(col.name))
    return kind, (names.index(col.table) if col.table else -1), ref.index, offset, ref


def _aggregate(n: exp.Expression, variables: list[str], scope: Scope, clause: str, unions: Sequence[str] = (),
               ) -> tuple[tuple[str, int, int, int], pa.DataType] | None:
    """COUNT/SUM/AVG/MIN/MAX(v.col) or COUNT(*) over the rows of the match (of variable v) as
    ((function, variable or -1, input column or -1, 0), result type as Flink types it)."""
    if type(n) not in _AGGREGATES:
        return None
    function = _AGGREGATES[type(n)]
    if function == "COUNT" and isinstance(n.this, exp.Star):
        return ("COUNT", -1, -1, 0), pa.int64()
    if isinstance(n.this, exp.Distinct):
        raise plan_error(f"MATCH_RECOGNIZE: {function}(DISTINCT ...) is not supported", n)
    arg = n.this
    if not isinstance(arg, exp.Column) or isinstance(arg.this, exp.Star):
        raise plan_error(f"MATCH_RECOGNIZE: {n.sql()} takes a column (v.col) here", n)
    _, variable, column, _, ref = _navigation(arg, variables, scope, clause, unions)
    t = ref.type
    if function in ("SUM", "AVG") and not (pa.types.is_integer(t) or pa.types.is_floating(t)
                                           or pa.types.is_decimal(t)):
        raise plan_error(f"{function} needs a numeric argument, got {sql_type_name(t)}", n)
    return (function, variable, column, 0), {"COUNT": pa.int64(), "SUM": sum_type(t), "AVG": avg_type(t)}.get(function, t)


def _bind_define(cond: exp.Expression, name: str, variables: list[str], unions: list[str], scope: Scope,
                 navigations: list[tuple[str, int, int, int]], types: list[pa.DataType], width: int,
                 zone: str) -> Expr:
    """A DEFINE condition over the current row (columns 0..width-1) followed by one column per
    navigation into the match so far (FIRST/LAST of a variable's rows, or an aggregate of them,
    registered in ``navigations`` with their ``types``).  The current row counts as a row of
    ``name``; ``name.col`` and an unqualified ``col`` are the current row's."""
    own = variables.index(name)

    def navigation(key: tuple[str, int, int, int], t: pa.DataType, shown: str) -> ColumnRef:
        if key not in navigations:
            navigations.append(key)
            types.append(t)
        return ColumnRef(width + navigations.index(key), shown, t)

    def intercept(node: exp.Expression) -> Expr | None:
        aggregate = _aggregate(node, variables, scope, "DEFINE", unions)
        if aggregate is not None:
            return navigation(aggregate[0], aggregate[1], node.sql())
        nav = _navigation(node, variables, scope, "DEFINE", unions)
        if nav is None:
            return None
        kind, variable, column, offset, ref = nav
        if kind == "LAST" and offset == 0 and variable in (own, -1):
            return ref  # the current row
        return navigation((kind, variable, column, offset), ref.type, node.sql())

    bound = ExprBinder(scope, intercept, zone=zone).bind(cond)
    if not (pa.types.is_boolean(bound.type) or pa.types.is_null(bound.type)):
        raise plan_error(f"MATCH_RECOGNIZE: the DEFINE of {name} must be a condition, not "
                         f"{sql_type_name(bound.type)}", cond)
    return bound


def _bind_measure(node: exp.Expression, variables: list[str], unions: list[str], scope: Scope, rowtime: int,
                  primitives: list[tuple[str, int, int, int]], types: list[pa.DataType], zone: str) -> Expr:
    """A measure as an expression over primitives of the match (each registered once):
    navigations (FIRST/LAST, variable, column, offset), aggregates (function, variable, column, 0).
    MATCH_PROCTIME() is PROCTIME() evaluated when the match is emitted, as Flink's.  MATCH_ROWTIME()
    is Flink's timestamp of the match: the time of the row whose processing emitted it (its last
    row, unless an earlier-started partial match held it back) or the watermark that did, as a
    TIMESTAMP(3) (an instant's UTC wall clock for a TIMESTAMP_LTZ time attribute: Flink keeps its
    milliseconds); MATCH_ROWTIME(time attribute) the same, of that column's type."""

    def primitive(key: tuple[str, int, int, int], t: pa.DataType, shown: str) -> ColumnRef:
        # the same primitive read as another type (MATCH_ROWTIME() of a TIMESTAMP_LTZ) is another
        i = next((j for j, (k, u) in enumerate(zip(primitives, types, strict=True)) if k == key and u == t), None)
        if i is None:
            i = len(primitives)
            primitives.append(key)
            types.append(t)
        return ColumnRef(i, shown, t)

    def intercept(n: exp.Expression) -> Expr | None:
        if isinstance(n, exp.Anonymous) and n.name.upper() == "MATCH_ROWTIME":
            time_type = scope.columns[rowtime].type
            if not n.expressions:
                return primitive(("ROWTIME", -1, rowtime, 0), pa.timestamp("ms"), "MATCH_ROWTIME()")
            arg = n.expressions[0]
            ref = scope.resolve(arg) if isinstance(arg, exp.Column) and len(n.expressions) == 1 else None
            if not isinstance(ref, ColumnRef) or ref.index != rowtime:
                shown = sql_type_name(ref.type) if isinstance(ref, ColumnRef) else arg.sql()
                raise plan_error(f"MATCH_RECOGNIZE: the function MATCH_ROWTIME requires argument to be a row time "
                                 f"attribute type, but is '{shown}'", n)
            return primitive(("ROWTIME", -1, rowtime, 0), pa.timestamp("ms", time_type.tz), n.sql())
        if isinstance(n, exp.Anonymous) and n.name.upper() == "MATCH_PROCTIME":
            if n.expressions:
                raise plan_error("MATCH_RECOGNIZE: MATCH_PROCTIME() takes no argument", n)
            return Call("PROCTIME", (), TIMESTAMP_LTZ_3)
        nav = _navigation(n, variables, scope, "MEASURES", unions)
        if nav is not None:
            kind, variable, column, offset, ref = nav
            return primitive((kind, variable, column, offset), ref.type, n.sql())
        aggregate = _aggregate(n, variables, scope, "MEASURES", unions)
        if aggregate is not None:
            return primitive(aggregate[0], aggregate[1], n.sql())
        return None

    # every column is a primitive, caught by ``intercept``: the scope itself is empty
    return ExprBinder(Scope([]), intercept, zone=zone).bind(node)
