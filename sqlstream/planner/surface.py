"""Refuse, at plan time, every clause of a statement that the binder does not carry out.

sqlglot parses far more SQL than sqlstream plans (it knows many dialects), and the binder reads
only the parts of each node it handles: a clause it does not read would be silently dropped and
the query would run without it (``MATCH_RECOGNIZE`` returning the whole input, say).  So before
binding, every node of a statement is checked against the list of what is read; anything else is
refused by name, with the supported form where there is one.
"""

from __future__ import annotations

from sqlglot import exp

from sqlstream.core.sql import dialect
from sqlstream.planner.hints import STATE_TTL
from sqlstream.planner.scope import plan_error

# Select arguments the binder reads; each other one, when present, is refused below.
_SELECT_READ = {"with_", "expressions", "distinct", "from_", "joins", "where", "group", "having",
                "windows", "order", "limit", "offset", "hint", "kind", "match"}

# The clauses sqlglot knows that Flink SQL has no (supported) meaning for here: name and advice.
_SELECT_REFUSED: dict[str, str] = {
    "qualify": "QUALIFY is not supported; filter the window function's result in an outer query: "
               "SELECT * FROM (SELECT ..., ROW_NUMBER() OVER (...) AS rn FROM t) WHERE rn <= N",
    "laterals": "LATERAL VIEW is not Flink SQL; Flink expands arrays with CROSS JOIN UNNEST(...) and "
                "joins table functions with LATERAL TABLE(f(...))",
    "pivots": "PIVOT / UNPIVOT is not supported; aggregate with CASE: SUM(CASE WHEN k = 'a' THEN v END)",
    "sample": "TABLESAMPLE is not supported",
    "connect": "CONNECT BY is not supported",
    "prewhere": "PREWHERE is not supported; use WHERE",
    "distribute": "DISTRIBUTE BY is not supported",
    "sort": "SORT BY is not supported; use ORDER BY",
    "cluster": "CLUSTER BY is not supported",
    "locks": "FOR UPDATE / locking clauses are not supported",
    "settings": "SETTINGS is not supported; use SET 'key' = 'value'",
    "format": "FORMAT is not supported",
    "options": "OPTION (...) is not supported",
    "for_": "FOR XML / FOR JSON is not supported",
    "into": "SELECT ... INTO is not supported; use INSERT INTO t SELECT ...",
    "exclude": "SELECT * EXCLUDE (...) is not supported; list the columns",
    "operation_modifiers": "query modifiers are not supported",
}

_TABLE_REFUSED: dict[str, str] = {
    "pivots": _SELECT_REFUSED["pivots"],
    "sample": _SELECT_REFUSED["sample"],
    "laterals": _SELECT_REFUSED["laterals"],
    "partition": "PARTITION (...) on a table reference is not supported",
    "changes": "CHANGES (...) is not supported",
    "rows_from": "ROWS FROM (...) is not supported",
    "indexed": "INDEXED BY is not supported",
    "when": "AT / BEFORE time travel is not supported",
    "only": "ONLY is not supported",
    "ordinality": "WITH ORDINALITY is not supported",
    "format": "a FILE_FORMAT on a table reference is not supported",
    "pattern": "a PATTERN on a table reference is not supported",
    "system_time": "FOR SYSTEM_TIME on a table reference is only supported on the right side of a JOIN",
}

_JOIN_REFUSED: dict[str, str] = {
    "global_": "GLOBAL joins are not supported",
    "hint": "join hints are not supported",
    "match_condition": "ASOF joins (MATCH_CONDITION) are not supported",
    "nearest": "NEAREST joins are not supported",
    "directed": "directed joins are not supported",
    "pivots": _SELECT_REFUSED["pivots"],
    "expressions": "this join form is not supported",
}

_GROUP_REFUSED: dict[str, str] = {
    "rollup": "GROUP BY ... WITH ROLLUP is not Flink SQL; write GROUP BY ROLLUP (a, b)",
    "cube": "GROUP BY ... WITH CUBE is not Flink SQL; write GROUP BY CUBE (a, b)",
    "totals": "GROUP BY ... WITH TOTALS is not supported; add GROUPING SETS ((a, b), ())",
    "all": "GROUP BY ALL is not supported; list the grouping columns",
    "grouping_sets": "this GROUPING SETS form is not supported; write GROUP BY GROUPING SETS ((a), (b))",
}

# planner.match_recognize reads these parts of MATCH_RECOGNIZE (and refuses what it does not carry out)
_MATCH_RECOGNIZE_READ = {"partition_by", "order", "measures", "rows", "after", "pattern", "within", "subset", "define",
                         "alias"}
_SET_OPERATION_READ = {"this", "expression", "distinct", "with_", "order", "limit"}
_SUBQUERY_READ = {"this", "alias", "with_", "order", "limit"}

_INSERT_READ = {"this", "expression", "overwrite", "with_", "hint"}

_INSERT_REFUSED: dict[str, str] = {
    "partition": "INSERT ... PARTITION (...) is not supported: sqlstream has no partitioned tables yet",
    "conflict": "ON CONFLICT is not supported; declare a PRIMARY KEY on the sink for upserts",
    "returning": "RETURNING is not supported",
    "where": "INSERT ... WHERE is not supported; filter in the query",
    "ignore": "INSERT IGNORE is not supported",
    "by_name": "INSERT ... BY NAME is not supported; list the columns: INSERT INTO t (a, b) SELECT ...",
    "alternative": "INSERT OR REPLACE / INSERT OR IGNORE is not supported",
    "exists": "INSERT ... IF EXISTS is not supported",
    "stored": "INSERT ... STORED AS is not supported",
    "source": "INSERT ... SOURCE is not supported",
    "default": "INSERT ... DEFAULT VALUES is not supported",
    "using": "INSERT ... USING is not supported",
    "settings": "INSERT ... SETTINGS is not supported",
    "is_function": "INSERT INTO FUNCTION is not supported",
}

# CREATE TABLE properties the DDL reads.
_TABLE_PROPERTIES_READ = (exp.TemporaryProperty, exp.SchemaCommentProperty, exp.LikeProperty,
                          exp.PartitionedByProperty)

# Flink's query hints (SELECT /*+ ... */) that sqlstream does not carry out (STATE_TTL it does:
# planner.hints).
QUERY_HINTS = ("BROADCAST", "SHUFFLE_HASH", "SHUFFLE_MERGE", "NEST_LOOP", "LOOKUP")


def check_query(node: exp.Expression) -> None:
    """Raise a PlanError naming the first clause in a query that the binder would not carry out."""
    for n in node.walk():
        if isinstance(n, exp.Select):
            _check_select(n)
        elif isinstance(n, exp.Table):
            _check_table(n)
        elif isinstance(n, exp.Join):
            _check_args(n, _JOIN_REFUSED)
        elif isinstance(n, exp.Union | exp.Intersect | exp.Except):
            _check_set_operation(n)
        elif isinstance(n, exp.With) and n.args.get("recursive"):
            raise plan_error("WITH RECURSIVE is not supported", n)
        elif isinstance(n, exp.Subquery):
            _check_modifiers(n, _SUBQUERY_READ, "a parenthesised query")
        elif isinstance(n, exp.Lateral) and (not isinstance(n.parent, exp.Join) or n.args.get("view")):
            raise plan_error("LATERAL is supported as a join with a table function, [CROSS | LEFT] JOIN LATERAL "
                             "TABLE(f(...)); LATERAL subqueries and LATERAL VIEW are not", n)
        elif isinstance(n, exp.MatchRecognize):
            _check_modifiers(n, _MATCH_RECOGNIZE_READ, "MATCH_RECOGNIZE")
        elif isinstance(n, exp.Group):
            _check_args(n, _GROUP_REFUSED)
        elif isinstance(n, exp.WindowSpec) and n.args.get("exclude") is not None:
            raise plan_error("EXCLUDE in a window frame is not supported", n.args["exclude"])
        elif isinstance(n, exp.Window) and n.args.get("first") is not None:
            raise plan_error("KEEP (DENSE_RANK FIRST/LAST) is not supported", n)
        elif isinstance(n, exp.Ordered) and n.args.get("with_fill") is not None:
            raise plan_error("ORDER BY ... WITH FILL is not supported", n)
        elif isinstance(n, exp.Limit) and (n.args.get("offset") is not None or n.args.get("expressions")):
            raise plan_error("LIMIT m, n and LIMIT ... BY are not supported; use LIMIT n", n)


def check_insert(insert: exp.Insert) -> None:
    """The INSERT clauses beyond INTO [(columns)] <query>; OVERWRITE is checked by the planner."""
    _check_args(insert, _INSERT_REFUSED)
    unread = [k for k, v in insert.args.items() if v and k not in _INSERT_READ and k not in _INSERT_REFUSED]
    if unread:
        raise plan_error(f"INSERT clause '{unread[0]}' is not supported", insert)
    if insert.args.get("hint") is not None:
        raise plan_error(f"query hints are not supported: {_hint_names(insert.args['hint'])}", insert)


def check_create_table(create: exp.Create) -> None:
    """CREATE TABLE clauses the DDL does not read, refused by name."""
    if create.args.get("replace"):
        raise plan_error("CREATE OR REPLACE TABLE is not supported; DROP TABLE, then CREATE TABLE", create)
    for prop in (create.args.get("properties") or exp.Properties()).expressions:
        if type(prop) is exp.Property or isinstance(prop, _TABLE_PROPERTIES_READ):
            continue
        if isinstance(prop, exp.DistributedByProperty):
            raise plan_error("DISTRIBUTED BY is not supported yet; leave it out", prop)
        raise plan_error(f"'{prop.sql(dialect=dialect.Flink)}' is not supported in CREATE TABLE", prop)
    for arg in ("indexes", "clone", "clustered", "begin"):
        if create.args.get(arg):
            raise plan_error(f"CREATE TABLE clause '{arg}' is not supported", create)


def table_hint_options(table: exp.Table) -> dict[str, str]:
    """The dynamic table options of ``t /*+ OPTIONS('k' = 'v', ...) */``, later hints winning.

    OPTIONS is Flink's only table hint; any other is refused by name.
    """
    options: dict[str, str] = {}
    for hint in table.args.get("hints") or []:
        if not isinstance(hint, exp.Hint):
            raise plan_error(f"table hint '{hint.sql()}' is not supported", table)
        for item in hint.expressions:
            name = item.name.upper() if isinstance(item, exp.Anonymous | exp.Var) else item.sql()
            if name != "OPTIONS" or not isinstance(item, exp.Anonymous):
                raise plan_error(
                    f"table hint '{name}' is not supported; the only table hint is "
                    "OPTIONS('key' = 'value', ...)", table, table.name)
            for pair in item.expressions:
                if not (isinstance(pair, exp.EQ) and isinstance(pair.this, exp.Literal)
                        and pair.this.is_string and isinstance(pair.expression, exp.Literal)
                        and pair.expression.is_string):
                    raise plan_error("OPTIONS hint entries are 'key' = 'value' string literals", pair)
                options[pair.this.name] = pair.expression.name
    return options


def _check_select(sel: exp.Select) -> None:
    _check_args(sel, _SELECT_REFUSED)
    unread = [k for k, v in sel.args.items() if v and k not in _SELECT_READ and k not in _SELECT_REFUSED]
    if unread:
        raise plan_error(f"SELECT clause '{unread[0]}' is not supported", sel)
    distinct = sel.args.get("distinct")
    if distinct is not None and distinct.args.get("on") is not None:
        raise plan_error("DISTINCT ON (...) is not supported; deduplicate with ROW_NUMBER() OVER "
                         "(PARTITION BY ... ORDER BY ...) and WHERE rn = 1", distinct)
    if sel.args.get("kind"):
        raise plan_error(f"SELECT {sel.args['kind']} is not supported", sel)
    hint = sel.args.get("hint")
    if hint is not None and any(not (isinstance(e, exp.Anonymous) and e.name.upper() == STATE_TTL)
                                for e in hint.expressions):
        raise plan_error(f"query hints are not supported yet: {_hint_names(hint)}", sel)


def _check_table(table: exp.Table) -> None:
    _check_args(table, _TABLE_REFUSED)
    if table.args.get("joins"):
        raise plan_error("parenthesised joins are not supported; write the joins without parentheses", table)


def _check_set_operation(node: exp.Union | exp.Intersect | exp.Except) -> None:
    name = {exp.Union: "UNION", exp.Intersect: "INTERSECT", exp.Except: "EXCEPT"}[type(node)]
    if node.args.get("by_name") or node.args.get("side") or node.args.get("kind") or node.args.get("on"):
        raise plan_error(f"{name} BY NAME / CORRESPONDING is not supported; select the columns in order", node)
    _check_modifiers(node, _SET_OPERATION_READ, f"a {name}")


def _check_modifiers(node: exp.Expression, read: set[str], what: str) -> None:
    """The clauses sqlglot allows after a set operation or a parenthesised query."""
    for arg, value in node.args.items():
        if value and arg not in read:
            message = _SELECT_REFUSED.get(arg) or f"{arg.upper().rstrip('_')} after {what} is not supported"
            if arg == "offset":
                message = f"OFFSET after {what} is not supported; use LIMIT n"
            raise plan_error(message, value if isinstance(value, exp.Expression) else node)


def _check_args(node: exp.Expression, refused: dict[str, str]) -> None:
    for arg, message in refused.items():
        value = node.args.get(arg)
        if value:
            raise plan_error(message, value if isinstance(value, exp.Expression) else node)


def _hint_names(hint: exp.Expression) -> str:
    names = [e.name.upper() if isinstance(e, exp.Anonymous | exp.Var) else e.sql() for e in hint.expressions]
    known = [n for n in names if n in QUERY_HINTS]
    names = [n for n in names if n != STATE_TTL]
    detail = ", ".join(names)
    return detail + (" (a Flink query hint sqlstream does not apply; remove it)" if known else
                     " (not a Flink hint)")
