"""Bind a parsed query (sqlglot AST) into a logical plan.

Resolves tables, views and columns against the catalog, types every
expression, recognises windowing TVFs and fuses ``GROUP BY window_start,
window_end`` over them into a window aggregation.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

import pyarrow as pa
from sqlglot import exp

from sqlstream.catalog.catalog import Catalog
from sqlstream.core.aggregates import AggCall
from sqlstream.core.config import setting
from sqlstream.core.connectors import connector_spec
from sqlstream.core.durations import parse_duration_ms
from sqlstream.core.errors import PlanError
from sqlstream.core.expressions import Cast, ColumnRef, Expr, Literal, referenced_columns
from sqlstream.core.functions import common_type
from sqlstream.core.functions.arithmetic import avg_type, sum_type
from sqlstream.core.functions.udfs import USER_AGGREGATES, USER_TABLE_FUNCTIONS, table_function_call
from sqlstream.core.sql import dialect, script
from sqlstream.core.tables import TableDef, ViewDef
from sqlstream.core.types import is_ltz, is_multiset, is_nested, multiset_of, sql_type_name
from sqlstream.core.udf import implements_merge
from sqlstream.core.windows import WINDOW_COLUMNS, WindowSpec
from sqlstream.planner.expr_binder import (
    GROUP_AGGREGATES,
    ExprBinder,
    coerce,
    contains_aggregate,
    is_aggregate,
)
from sqlstream.planner.group_windows import (
    GroupWindow,
    auxiliary,
    bind_group_window,
    group_window_kind,
    window_spec,
)
from sqlstream.planner.hints import check_keys, input_name, state_ttl_hint
from sqlstream.planner.joins import conjoin, equi_keys
from sqlstream.planner.logical import (
    Aggregate,
    ChangelogNormalize,
    Filter,
    Join,
    LogicalNode,
    LookupJoin,
    Project,
    Scan,
    TemporalJoin,
    Union,
    Unnest,
    Values,
    WatermarkAssign,
    WindowAggregate,
    WindowTVF,
)
from sqlstream.planner.optimizer.constant_folding import fold
from sqlstream.planner.proctime import with_proctime_attribute
from sqlstream.planner.scope import USING, Scope, ScopeColumn, plan_error
from sqlstream.planner.set_operations import coerced_inputs, intersect_or_except
from sqlstream.planner.subqueries import bind_where, with_scalar_subqueries
from sqlstream.planner.surface import check_query, table_hint_options


@dataclass
class Relation:
    node: LogicalNode
    scope: Scope


@dataclass
class WindowGrouping:
    """What a GROUP BY over windowed rows aggregates: see QueryBinder._window_grouping."""

    window: WindowSpec
    input: LogicalNode  # the aggregation's input
    scope: Scope  # its columns, as the GROUP BY and aggregate arguments name them
    # per grouping key: the window column it is, all three for a legacy group window
    # (GROUP BY TUMBLE(ts, size)), or None for a plain key
    roles: list[str | tuple[str, ...] | None]
    input_window: tuple[int, int] | None  # cascaded: the input's window_start and window_end columns


def _parse_expression(text: str) -> exp.Expression:
    return script.parse_one(text)


class QueryBinder:
    def __init__(self, catalog: Catalog, settings: Mapping[str, str] | None = None) -> None:
        self.catalog = catalog
        self.settings = settings or {}
        self.zone: str = setting(self.settings, "table.local-time-zone")
        self.ctes: list[dict[str, exp.Expression]] = []
        self._depth = 0

    # ---------------------------------------------------------------- queries
    def bind_query(self, node: exp.Expression) -> Relation:
        """The relation of a query; clauses the binder does not carry out are refused first."""
        if self._depth == 0:
            check_query(node)
        self._depth += 1
        try:
            return self._bind_query_with(node)
        finally:
            self._depth -= 1

    def _bind_query_with(self, node: exp.Expression) -> Relation:
        with_ = node.args.get("with_") or node.args.get("with")
        if with_ is not None:
            frame = {cte.alias_or_name.lower(): cte.this for cte in with_.expressions}
            self.ctes.append(frame)
            try:
                return self._bind_query_body(node)
            finally:
                self.ctes.pop()
        return self._bind_query_body(node)

    def _bind_query_body(self, node: exp.Expression) -> Relation:
        if isinstance(node, exp.Subquery):
            return self._ordered(self.bind_query(node.this), node)
        if isinstance(node, exp.Union):
            return self._ordered(self._bind_union(node), node)
        if isinstance(node, exp.Select):
            return self._bind_select(node)
        if isinstance(node, exp.Values):
            return self._bind_values(node)
        if isinstance(node, exp.Intersect | exp.Except):
            out = intersect_or_except(self.bind_query(node.this).node, self.bind_query(node.expression).node, node,
                                      self.zone)
            return self._ordered(Relation(out, Scope.of(out.schema)), node)
        raise plan_error(f"unsupported query '{node.sql()[:60]}'", node)

    def _ordered(self, rel: Relation, node: exp.Expression) -> Relation:
        """ORDER BY / LIMIT after a set operation or a parenthesised query: over its whole result."""
        order, limit = node.args.get("order"), node.args.get("limit")
        if order is None and limit is None:
            return rel
        from sqlstream.planner.over import bind_order_limit

        out = bind_order_limit(rel.node, order, limit, self.zone)
        return Relation(out, Scope.of(out.schema))

    def _bind_union(self, node: exp.Union) -> Relation:
        children = coerced_inputs(self.bind_query(node.this).node, self.bind_query(node.expression).node, node,
                                  self.zone)
        flat: list[LogicalNode] = []
        for c in children:
            flat.extend(c.children if isinstance(c, Union) else [c])
        out: LogicalNode = Union(flat)
        if node.args.get("distinct"):
            out = _distinct(out)
        return Relation(out, Scope.of(out.schema))

    def _bind_values(self, node: exp.Values) -> Relation:
        rows = []
        empty = Scope([])
        for tup in node.expressions:
            # constant expressions (CAST(NULL AS INT), -1, 'a' || 'b') are computed here
            row = [fold(ExprBinder(empty, zone=self.zone).bind(v)) for v in tup.expressions]
            for v, src in zip(row, tup.expressions, strict=True):
                if not isinstance(v, Literal):
                    raise plan_error("VALUES only takes constants", src)
            rows.append(row)
        width = len(rows[0])
        if any(len(r) != width for r in rows):
            raise plan_error("all VALUES rows must have the same number of columns", node)
        types = []
        for i in range(width):
            t = rows[0][i].type
            for r in rows[1:]:
                c = common_type(t, r[i].type)
                if c is None:
                    raise plan_error(f"VALUES column {i + 1} mixes incompatible types", node)
                t = c
            types.append(pa.string() if pa.types.is_null(t) else t)
        names = [f"EXPR${i}" for i in range(width)]
        alias = node.args.get("alias")
        if alias is not None and alias.columns:
            names = [c.name for c in alias.columns]
        arrays = [
            pa.array([coerce(r[i], types[i], zone=self.zone).value for r in rows], types[i]) for i in range(width)
        ]
        table = pa.Table.from_arrays(arrays, names=names)
        return Relation(Values(table), Scope.of(table.schema, node.alias or None))

    # ------------------------------------------------------------------ FROM
    def _bind_from(self, node: exp.Expression) -> Relation:
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier | exp.Var | str):
            return self._bind_table_ref(node)
        if isinstance(node, exp.Subquery):
            rel = self.bind_query(node.this)
            alias = node.alias or None
            if alias and node.args.get("alias") is not None and node.args["alias"].columns:
                rel = _rename(rel, [c.name for c in node.args["alias"].columns], node)
            return Relation(rel.node, rel.scope.requalified(alias) if alias else Scope.of(rel.node.schema))
        if isinstance(node, dialect.WindowTVF):
            return self._bind_window_tvf(node)
        if isinstance(node, exp.Values):
            return self._bind_values(node)
        if isinstance(node, exp.Unnest):
            # FROM UNNEST(constant collection): unnested over one row of no columns
            # (its one column unnamed in the scope: the collection cannot read it)
            one = Relation(Values(pa.table({"$one": pa.array([0], pa.int32())})), Scope([]))
            rel = self._bind_unnest(one, node, False, None, node)
            exprs: list[Expr] = [ColumnRef(i + 1, c.name, c.type) for i, c in enumerate(rel.scope.columns)]
            return Relation(Project(rel.node, exprs, [c.name for c in rel.scope.columns]), rel.scope)
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Expression):
            return self._bind_from(node.this)
        raise plan_error(f"unsupported FROM item '{node.sql()[:60]}'", node)

    def bind_from_and_joins(self, sel: exp.Select, ttls: dict[str, int] | None = None) -> Relation:
        """The rows of a SELECT's FROM clause and its joins, their columns qualified by table;
        ``ttls``: the SELECT's STATE_TTL hint (planner.hints), applied to its regular joins."""
        from_ = sel.args.get("from_") or sel.args.get("from")
        rel = self._bind_from(from_.this)
        match = sel.args.get("match")
        if match is not None:
            from sqlstream.planner.match_recognize import bind_match_recognize

            if sel.args.get("joins"):
                raise plan_error("MATCH_RECOGNIZE in a FROM clause with joins is not supported; match in a "
                                 "subquery and join its result", match)
            rel = Relation(*bind_match_recognize(rel.node, rel.scope, match, self.zone))
        ttls = ttls or {}
        left_name = input_name(from_.this)
        for join in sel.args.get("joins") or []:
            right_name = input_name(join.this)
            rel = self._bind_join(rel, join, (ttls.get(left_name or ""), ttls.get(right_name or "")))
            left_name = None  # the next join's left input is this join, which no hint key names
        return rel

    def _bind_table_ref(self, node: exp.Table) -> Relation:
        name = node.name
        alias = node.alias or name
        if node.args.get("version") is not None:
            raise plan_error("FOR SYSTEM_TIME AS OF is only supported on the right side of a JOIN "
                             "(a lookup join or an event-time temporal join)", node.args["version"])
        for frame in reversed(self.ctes):
            if name.lower() in frame:
                if node.args.get("hints"):
                    raise plan_error(f"'{name}' is a WITH query; hints can only be applied to tables", node, name)
                rel = self.bind_query(frame[name.lower()])
                return Relation(rel.node, rel.scope.requalified(alias))
        obj = self.catalog.get(name)
        if obj is None:
            known = self.catalog.names()
            hint = f" Known tables: {', '.join(known)}" if known else " No tables are defined yet."
            raise plan_error(f"table or view '{name}' does not exist.{hint}", node, name)
        if isinstance(obj, ViewDef):
            if node.args.get("hints"):
                raise plan_error(f"view '{name}' cannot be enriched with new options; hints can only be "
                                 "applied to tables", node, name)
            rel = self.bind_query(script.parse_one(obj.query))
            return Relation(rel.node, rel.scope.requalified(alias))
        rel = self.table_relation(with_hint_options(obj, node, self.settings), alias)
        alias_node = node.args.get("alias")
        if alias_node is not None and alias_node.columns:  # FROM t AS x (c1, c2, ...) renames the columns
            rel = _rename(rel, [c.name for c in alias_node.columns], node)
            rel = Relation(rel.node, rel.scope.requalified(alias))
        return rel

    def table_relation(self, table: TableDef, alias: str | None = None) -> Relation:
        """Scan a table, derive its computed columns, and assign its watermark."""

        connector = connector_spec(table.connector)
        if not connector.readable:
            raise PlanError(f"table '{table.name}' (connector '{table.connector}') can only be written to, not read")
        physical = [c.name for c in table.source_columns]
        changelog = connector.changelog_mode(table)
        # metadata columns come from the connector in its metadata types and are cast to the declared
        # ones in the session zone, as Flink's planner casts them (TIMESTAMP_LTZ 'timestamp' into TIMESTAMP)
        read = tuple(
            dataclasses.replace(c, type=connector.metadata_type(c)) if c.metadata is not None else c
            for c in table.columns
        )
        scanned = dataclasses.replace(table, columns=read) if read != table.columns else table
        node: LogicalNode = Scan(scanned, physical, changelog)
        if changelog == "upsert":
            if not table.primary_key:
                raise PlanError(
                    f"table '{table.name}' (connector '{table.connector}') is an upsert source and needs a "
                    "PRIMARY KEY: declare PRIMARY KEY (...) NOT ENFORCED"
                )
            computed = [k for k in table.primary_key if k not in physical]
            if computed:
                raise PlanError(f"table '{table.name}': the primary key column '{computed[0]}' is not a physical column")
            node = ChangelogNormalize(node, [physical.index(k) for k in table.primary_key])
        if read != table.columns:
            casts = [coerce(ColumnRef(i, c.name, r.type), c.type, zone=self.zone)
                     for i, (c, r) in enumerate(zip(table.source_columns,
                                                    (r for r in read if r.computed is None), strict=True))]
            node = Project(node, casts, physical)
        if any(c.computed is not None for c in table.columns):
            phys_scope = Scope.of(node.schema)
            exprs: list[Expr] = []
            for c in table.columns:
                if c.computed is None:
                    i = physical.index(c.name)
                    exprs.append(ColumnRef(i, c.name, c.type))
                else:
                    exprs.append(ExprBinder(phys_scope, zone=self.zone).bind(_parse_expression(c.computed)))
            node = Project(node, exprs, [c.name for c in table.columns])
        if table.watermark is not None:
            names = node.schema.names
            lowered = [n.lower() for n in names]
            wm_col = table.watermark.column.lower()
            if wm_col not in lowered:
                raise PlanError(f"table '{table.name}': WATERMARK column '{table.watermark.column}' is not a column")
            index = lowered.index(wm_col)
            ts_type = node.schema.field(index).type
            if pa.types.is_timestamp(ts_type) and ts_type.unit == "s":
                # Flink takes a rowtime of precision 0 to 3; the runtime keeps event time in ms
                node = _rowtime_in_ms(node, index)
                ts_type = node.schema.field(index).type
            if not (pa.types.is_timestamp(ts_type) and ts_type.unit == "ms"):
                raise PlanError(
                    f"table '{table.name}': the rowtime column '{names[index]}' must be TIMESTAMP(p) or "
                    f"TIMESTAMP_LTZ(p) with a precision p from 0 to 3, got {sql_type_name(ts_type)}"
                )
            wm_expr = ExprBinder(Scope.of(node.schema), zone=self.zone).bind(_parse_expression(table.watermark.expression))
            if not pa.types.is_timestamp(wm_expr.type):
                raise PlanError(
                    f"table '{table.name}': the WATERMARK expression must be a TIMESTAMP, got {sql_type_name(wm_expr.type)}"
                )
            idle = table.options.get("scan.watermark.idle-timeout")
            # 0 disables idleness detection, as in Flink
            node = WatermarkAssign(node, index, coerce(wm_expr, ts_type, zone=self.zone), (parse_duration_ms(idle) if idle else 0) or None)
        return Relation(node, Scope.of(node.schema, alias or table.name))

    def _bind_window_tvf(self, tvf: dialect.WindowTVF) -> Relation:
        inner = self._bind_from(tvf.table)
        time_ref = inner.scope.resolve(tvf.time_col)
        inner = Relation(with_proctime_attribute(inner.node, time_ref.index), inner.scope)
        rowtime = inner.node.rowtime
        if rowtime is None or time_ref.index != rowtime:
            raise plan_error(
                f"the time column '{tvf.time_col.name}' of {tvf.kind} must be a time attribute "
                "(a column with a WATERMARK declared on its table, or a PROCTIME() column)",
                tvf.time_col,
                tvf.time_col.name,
            )
        ms = [dialect.interval_ms(i) for i in tvf.expressions]
        if tvf.offset is not None:
            ms.append(dialect.interval_ms(tvf.offset))
        partition = tuple(inner.scope.resolve(c).index for c in tvf.partition_by)
        spec = self._zoned(window_spec(tvf.kind, rowtime, ms, tvf, partition), inner.node)
        out = WindowTVF(inner.node, spec)
        qualifier = tvf.alias or None
        cols = list(inner.scope.columns) + [
            ScopeColumn(qualifier or (inner.scope.columns[0].qualifier if inner.scope.columns else None), n, f.type)
            for n, f in zip(WINDOW_COLUMNS, list(out.schema)[-3:], strict=True)
        ]
        scope = Scope(cols)
        if qualifier:
            scope = scope.requalified(qualifier)
        return Relation(out, scope)

    def _bind_join(self, left: Relation, join: exp.Join,
                   ttls: tuple[int | None, int | None] = (None, None)) -> Relation:
        side = (join.args.get("side") or "").upper()
        kind = (join.args.get("kind") or "").upper()
        if join.args.get("method") or kind in ("SEMI", "ANTI") or join.args.get("natural"):
            raise plan_error(f"{join.sql(dialect=dialect.Flink).split(' ')[0]} joins are not supported", join)
        if isinstance(join.this, exp.Table) and join.this.args.get("version") is not None:
            return self._bind_temporal_join(left, join, side)
        if isinstance(join.this, exp.Unnest):
            on, using = join.args.get("on"), join.args.get("using")
            if using or side not in ("", "INNER", "LEFT"):
                raise plan_error(f"{side or 'this'} JOIN UNNEST is not supported; use CROSS JOIN UNNEST or LEFT "
                                 "JOIN UNNEST(...) ON TRUE", join)
            return self._bind_unnest(left, join.this, side == "LEFT", on, join)
        if isinstance(join.this, exp.Lateral):
            on, using = join.args.get("on"), join.args.get("using")
            if using or side not in ("", "INNER", "LEFT"):
                raise plan_error(f"{side or 'this'} JOIN LATERAL TABLE is not supported; use CROSS JOIN LATERAL "
                                 "TABLE(...) or LEFT JOIN LATERAL TABLE(...) ON TRUE", join)
            return self._bind_lateral_table(left, join.this, side == "LEFT", on, join)
        right = self._bind_from(join.this)
        scope = Scope(left.scope.columns + right.scope.columns)
        width = len(left.node.schema)
        condition: Expr | None = None
        on, using = join.args.get("on"), join.args.get("using")
        if on is not None:
            condition = ExprBinder(scope, zone=self.zone).bind(on)
            require_boolean(condition, on, "JOIN ON")
        elif using:
            parts = []
            merged: set[int] = set()
            for ident in using:
                lref = left.scope.resolve(exp.column(ident.name))
                rref = right.scope.resolve(exp.column(ident.name))
                parts.append(ExprBinder(scope, zone=self.zone)._call(
                    "=", [lref, ColumnRef(width + rref.index, rref.name, rref.type)], join))
                merged.add(width + rref.index)
            condition = conjoin(parts)
            if side in ("", "INNER", "LEFT"):
                # a USING column is one column: unqualified (and in SELECT *) it is the left's, whose
                # value it has in every output row of these joins; t.col still names either side
                scope = Scope([ScopeColumn(c.qualifier, f"{USING}{c.name}", c.type) if i in merged else c
                               for i, c in enumerate(scope.columns)])
        elif side:
            raise plan_error(f"{side} JOIN needs an ON condition", join)
        node = Join(left.node, right.node, side or "INNER", condition, ttls)
        return Relation(node, scope)

    def _bind_unnest(self, left: Relation, unnest: exp.Unnest, outer: bool, on: exp.Expression | None,
                     join: exp.Expression) -> Relation:
        """``[CROSS] JOIN UNNEST(c) [WITH ORDINALITY] AS t(...)`` or ``LEFT JOIN ... ON TRUE`` (``outer``;
        Flink's correlate): the collection ``c`` is an expression over the left side's columns."""
        if len(unnest.expressions) != 1:
            raise plan_error("UNNEST takes one ARRAY or MAP", unnest)
        arg = unnest.expressions[0]
        collection = ExprBinder(left.scope, zone=self.zone).bind(arg)
        t = collection.type
        if not (pa.types.is_list(t) or pa.types.is_map(t)):
            raise plan_error(f"UNNEST needs an ARRAY or a MAP, got {sql_type_name(t)} for '{arg.sql(dialect=dialect.Flink)}'",
                             arg)
        if outer and not (isinstance(on, exp.Boolean) and on.this is True):
            raise plan_error("LEFT JOIN UNNEST(...) takes the condition ON TRUE only", on or join)
        width = 2 if pa.types.is_map(t) else (t.value_type.num_fields if pa.types.is_struct(t.value_type) else 1)
        offset = unnest.args.get("offset")
        ordinality = bool(offset)
        alias = unnest.args.get("alias")
        names = [c.name for c in alias.columns] if alias is not None else []
        if isinstance(offset, exp.Expression):
            names.append(offset.name)
        if not names:
            # Flink's default names: the ROW's fields, EXPR$0 for a scalar, KEY and VALUE for a MAP
            names = (["KEY", "VALUE"] if pa.types.is_map(t)
                     else [f.name for f in t.value_type] if pa.types.is_struct(t.value_type) else ["EXPR$0"])
            names += ["ORDINALITY"] if ordinality else []
        if len(names) != width + ordinality:
            raise plan_error(f"UNNEST of {sql_type_name(t)} gives {width + ordinality} column(s), but the alias "
                             f"names {len(names)}", alias or unnest)
        qualifier = alias.name if alias is not None and alias.name else None
        return self._correlate(left, Unnest(left.node, collection, names, ordinality, outer), qualifier, on)

    def _correlate(self, left: Relation, unnested: Unnest, qualifier: str | None,
                   on: exp.Expression | None) -> Relation:
        """The left rows joined with the rows an Unnest derives from each, filtered by an inner
        join's condition (``ON TRUE`` keeps them all)."""
        extra = [ScopeColumn(qualifier, f.name, f.type) for f in unnested.element_fields]
        node: LogicalNode = unnested
        scope = Scope(left.scope.columns + extra)
        if on is not None and not unnested.left and not (isinstance(on, exp.Boolean) and on.this is True):
            condition = ExprBinder(scope, zone=self.zone).bind(on)
            require_boolean(condition, on, "JOIN ON")
            node = Filter(node, condition)
        return Relation(node, scope)

    def _bind_lateral_table(self, left: Relation, lateral: exp.Lateral, outer: bool, on: exp.Expression | None,
                            join: exp.Expression) -> Relation:
        """``[CROSS] JOIN LATERAL TABLE(f(x)) [AS t(a, b)]`` or ``LEFT JOIN ... ON TRUE``: each left row
        joined with the rows the Python table function yields for it (Flink's correlate). The
        function's rows come as one ARRAY<ROW<...>> per left row (core.functions.udfs), unnested."""
        call = lateral.this
        if not (isinstance(call, exp.Anonymous) and call.name.upper() == "TABLE" and len(call.expressions) == 1
                and isinstance(call.expressions[0], exp.Func)):
            raise plan_error("LATERAL takes a table function call, LATERAL TABLE(f(...)); LATERAL subqueries are "
                             "not supported", lateral)
        fn = call.expressions[0]
        name = fn.name.upper() if isinstance(fn, exp.Anonymous) else fn.sql_name()
        types = USER_TABLE_FUNCTIONS.get(name)
        if types is None:
            known = sorted(USER_TABLE_FUNCTIONS)
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" Did you mean '{close[0]}'?" if close else (
                f" Table functions: {', '.join(known)}" if known else
                " Register one with CREATE FUNCTION ... LANGUAGE PYTHON (a @udtf generator or a TableFunction)")
            raise plan_error(f"unknown table function '{name}'.{hint}", fn)
        if outer and not (isinstance(on, exp.Boolean) and on.this is True):
            raise plan_error("LEFT JOIN LATERAL TABLE(...) takes the condition ON TRUE only, as in Flink", on or join)
        binder = ExprBinder(left.scope, zone=self.zone)
        args = [binder.bind(a) for a in (fn.expressions if isinstance(fn, exp.Anonymous) else fn.args.values())
                if isinstance(a, exp.Expression)]
        rows = binder._call(table_function_call(name), args, fn)
        alias = lateral.args.get("alias")
        names = [c.name for c in alias.columns] if alias is not None and alias.columns else \
            [f"f{i}" for i in range(len(types))]
        if len(names) != len(types):
            raise plan_error(f"table function {name} yields {len(types)} column(s), but the alias names "
                             f"{len(names)}", alias)
        qualifier = alias.name if alias is not None and alias.name else None
        return self._correlate(left, Unnest(left.node, rows, names, False, outer), qualifier, on)

    def _bind_temporal_join(self, left: Relation, join: exp.Join, side: str) -> Relation:
        """FOR SYSTEM_TIME AS OF: a lookup join (processing time) or a temporal join (event time)."""

        table_node = join.this
        version = table_node.args["version"]
        if side not in ("", "LEFT"):
            raise plan_error(f"{side} JOIN is not supported with FOR SYSTEM_TIME AS OF; use INNER or LEFT", join)
        kind = side or "INNER"
        as_of = ExprBinder(left.scope, zone=self.zone).bind(version.expression)
        if not isinstance(as_of, ColumnRef):
            raise plan_error("FOR SYSTEM_TIME AS OF needs a time column of the left table", version)
        obj = self.catalog.get(table_node.name)
        if not isinstance(obj, TableDef):
            raise plan_error(f"FOR SYSTEM_TIME AS OF needs a table, '{table_node.name}' is not one", table_node)
        obj = with_hint_options(obj, table_node, self.settings)
        alias = table_node.alias or obj.name
        on = join.args.get("on")
        if on is None:
            raise plan_error("a temporal join needs an ON condition equating the join keys", join)
        width = len(left.node.schema)
        if as_of.index == left.node.rowtime:
            right = self.table_relation(obj, alias)
            if not obj.primary_key or right.node.rowtime is None:
                raise plan_error(
                    f"'{obj.name}' must be a versioned table (a PRIMARY KEY and a WATERMARK) for an "
                    "event-time temporal join", table_node, table_node.name)
            scope = Scope(left.scope.columns + right.scope.columns)
            condition = ExprBinder(scope, zone=self.zone).bind(on)
            left_keys, right_keys, rest = equi_keys(condition, width)
            pk = [right.node.schema.get_field_index(k) for k in obj.primary_key]
            if sorted(right_keys) != sorted(pk):
                raise plan_error(
                    f"the temporal join must equate the primary key of '{obj.name}' "
                    f"({', '.join(obj.primary_key)}) with columns of the left table", on)
            node = TemporalJoin(left.node, right.node, kind, left_keys, right_keys, conjoin(rest))
            return Relation(node, scope)
        connector = connector_spec(obj.connector)
        if not connector.lookupable:
            raise plan_error(
                f"'{obj.name}' (connector '{obj.connector}') cannot be looked up; a lookup join needs a "
                "lookup connector such as 'duckdb' or 'postgres', or use the event-time column for a "
                "temporal join", table_node, table_node.name)
        dim_scope = Scope.of(obj.physical_schema, alias)
        scope = Scope(left.scope.columns + dim_scope.columns)
        condition = ExprBinder(scope, zone=self.zone).bind(on)
        left_keys, right_keys, rest = equi_keys(condition, width)
        if not left_keys:
            raise plan_error("a lookup join needs an equality between a left column and a column of the table", on)
        names = obj.physical_schema.names
        node = LookupJoin(left.node, obj, kind, [(lk, names[rk]) for lk, rk in zip(left_keys, right_keys, strict=True)],
                          list(names), conjoin(rest))
        return Relation(node, scope)

    # ---------------------------------------------------------------- SELECT
    def _bind_select(self, sel: exp.Select) -> Relation:
        group = sel.args.get("group")
        sets = _grouping_sets(group) if group is not None else None
        if sets is None and group is not None and sel.find(exp.Grouping, exp.GroupingId) is not None:
            sets = [list(group.expressions)]  # GROUPING(k) of a plain GROUP BY: one set, where it is 0
        if sets is not None:
            return self._bind_grouping_sets(sel, sets)
        from_ = sel.args.get("from_") or sel.args.get("from")
        ttls = state_ttl_hint(sel)
        agg_ttl: int | None = None
        if from_ is None:
            rel = Relation(Values(pa.table({"dummy": pa.array([0], pa.int32())})), Scope([]))
            rel = Relation(rel.node, Scope([ScopeColumn(None, "$dummy", pa.int32())]))
        else:
            joins = sel.args.get("joins") or []
            if ttls:
                check_keys(ttls, [input_name(from_.this)] + [input_name(j.this) for j in joins], sel.args["hint"])
            rel = self.bind_from_and_joins(sel, ttls)
            # a GROUP BY over one named input keeps its groups for that input's STATE_TTL
            agg_ttl = None if joins else ttls.get(input_name(from_.this) or "")
        where = sel.args.get("where")
        if where is not None:
            if contains_aggregate(where.this):
                raise plan_error("aggregate functions are not allowed in WHERE; use HAVING", where.this)
            rel = bind_where(self, rel, where.this)
            from sqlstream.planner.over import absorb_rank_filter

            # WHERE rn <= N over a ROW_NUMBER() subquery makes it a Top-N (planner.over)
            rel = Relation(absorb_rank_filter(rel.node), rel.scope)
        if sel.args.get("offset") is not None:
            raise plan_error("OFFSET is not supported on streaming queries; use LIMIT n, or Top-N with "
                             "ROW_NUMBER() and WHERE rn BETWEEN m AND n", sel.args["offset"])
        group = sel.args.get("group")
        having = sel.args.get("having")
        items = sel.expressions
        aggregating = (
            group is not None
            or having is not None
            or any(contains_aggregate(i) for i in items)
        )
        from sqlstream.planner.over import group_aggregate_calls, over_aggregated

        windowed = any(isinstance(n, exp.Window) for i in items for n in i.walk())
        if windowed and (group is not None or having is not None or any(group_aggregate_calls(i) for i in items)):
            # OVER windows see the GROUP BY's rows: aggregate first, then rank or window the result
            return self._bind_select(over_aggregated(sel))
        if any(isinstance(n, exp.Window) for i in items for n in i.walk()):
            from sqlstream.planner.over import bind_window_items

            # OVER aggregates and ROW_NUMBER (Top-N, deduplication) are bound in planner.over
            # (before aggregates: SUM(x) OVER (...) contains an aggregate but does not group)
            out = bind_window_items(self, rel, items)
        elif aggregating:
            out = self._bind_aggregate(sel, rel, group, having, items, agg_ttl)
        else:
            rel, items = with_scalar_subqueries(self, rel, items)
            exprs, names = self._bind_items(items, rel.scope, ExprBinder(rel.scope, zone=self.zone))
            rowtime = _rowtime_through(exprs, rel.node.rowtime)
            out = Project(rel.node, exprs, names, rowtime)
        if sel.args.get("distinct") is not None:
            out = _distinct(out, agg_ttl)
        if sel.args.get("order") is not None or sel.args.get("limit") is not None:
            from sqlstream.planner.over import bind_order_limit

            out = bind_order_limit(out, sel.args.get("order"), sel.args.get("limit"), self.zone)
        return Relation(out, Scope.of(out.schema))

    def _bind_grouping_sets(self, sel: exp.Select, sets: list[list[exp.Expression]]) -> Relation:
        """GROUPING SETS / ROLLUP / CUBE as the UNION ALL of one aggregation per set.

        Each branch groups by its set; the other grouping columns read as typed NULLs,
        as in Flink's expansion.
        """
        all_keys: dict[str, exp.Expression] = {}
        for s in sets:
            for k in s:
                # a group window is no column that can read as NULL
                if group_window_kind(k) is None:
                    all_keys.setdefault(k.sql(dialect=dialect.Flink), k)
        probe = sel.copy()
        probe.set("group", None)
        probe.set("having", None)
        probe.set("expressions", [k.copy() for k in all_keys.values()])
        key_types = dict(zip(all_keys, [f.type for f in self._bind_select(probe).node.schema], strict=True))
        branches: list[LogicalNode] = []
        for s in sets:
            present = {k.sql(dialect=dialect.Flink) for k in s}

            def null_out(node: exp.Expression, present: set[str] = present) -> exp.Expression:
                if isinstance(node, exp.Grouping | exp.GroupingId):
                    return _grouping_id(node, present)
                if is_aggregate(node) or isinstance(node, exp.Filter):
                    # aggregates read the input rows, where every key has its value; a copy
                    # (not the node itself) stops the transform from descending into them
                    return node.copy()
                text = node.sql(dialect=dialect.Flink)
                if text in key_types and text not in present and not isinstance(node, exp.Alias):
                    to = exp.DataType.build(sql_type_name(key_types[text]), dialect=dialect.Flink)
                    return exp.Cast(this=exp.Null(), to=to)
                return node

            branch = sel.copy()
            # the empty set () is a global aggregation even with no aggregate in the list
            branch.set("group", exp.Group(expressions=[k.copy() for k in s]))
            branch.set("expressions", [_keep_name(i, i.copy().transform(null_out)) for i in sel.expressions])
            if sel.args.get("having") is not None:
                branch.set("having", exp.Having(this=sel.args["having"].this.copy().transform(null_out)))
            branches.append(self._bind_select(branch).node)
        first = branches[0].schema
        out: LogicalNode = Union([
            b if b.schema.names == first.names else Project(
                b, [ColumnRef(i, f.name, f.type) for i, f in enumerate(b.schema)], first.names)
            for b in branches
        ])
        return Relation(out, Scope.of(out.schema))

    def _bind_items(
        self, items: list[exp.Expression], scope: Scope, binder: ExprBinder
    ) -> tuple[list[Expr], list[str]]:
        exprs: list[Expr] = []
        names: list[str] = []
        for item in items:
            star_qualifier = _star(item)
            if star_qualifier is not None:
                matched = False
                order = list(range(len(scope.columns)))
                if star_qualifier == "":
                    # SELECT * over JOIN ... USING: the USING columns first, as Flink (Calcite) expands it
                    twins = {c.name[len(USING):].lower() for c in scope.columns if c.name.startswith(USING)}
                    order.sort(key=lambda i: scope.columns[i].name.lower() not in twins)
                for i in order:
                    c = scope.columns[i]
                    if c.name.startswith("$"):
                        continue
                    if star_qualifier == "" or (c.qualifier or "").lower() == star_qualifier.lower():
                        exprs.append(ColumnRef(i, c.name, c.type))
                        names.append(c.name)
                        matched = True
                if not matched:
                    raise plan_error(f"'{item.sql()}' matches no columns", item)
                continue
            node = item.this if isinstance(item, exp.Alias) else item
            bound = binder.bind(node)
            if pa.types.is_null(bound.type):
                bound = coerce(bound, pa.string(), zone=self.zone)
            exprs.append(bound)
            names.append(_item_name(item, len(names)))
        return exprs, names

    def _bind_aggregate(
        self,
        sel: exp.Select,
        rel: Relation,
        group: exp.Group | None,
        having: exp.Having | None,
        items: list[exp.Expression],
        state_ttl_ms: int | None = None,
    ) -> LogicalNode:
        key_nodes: list[exp.Expression] = []
        if group is not None:
            key_nodes = list(group.expressions)
        for k in key_nodes:
            if contains_aggregate(k):
                raise plan_error("aggregate functions are not allowed in GROUP BY", k)
        filter_conditions: list[exp.Expression] = []
        items = [_inline_filters(i, filter_conditions) for i in items]
        having_node = None if having is None else _inline_filters(having.this, filter_conditions)
        agg_nodes: list[exp.Expression] = []
        seen: set[str] = set()
        for src in [*items, *([having_node] if having_node is not None else [])]:
            for n in src.walk():
                if is_aggregate(n) and n.sql() not in seen:
                    for inner in (a for arg in n.iter_expressions() for a in arg.walk()):
                        if is_aggregate(inner):
                            raise plan_error("aggregate functions cannot be nested", inner)
                    seen.add(n.sql())
                    agg_nodes.append(n)

        rel, group_window = self._group_window(rel, key_nodes)
        if group_window is not None:
            roles_of_keys: list[str | tuple[str, ...] | None] = [
                WINDOW_COLUMNS if k is group_window.call else None for k in key_nodes
            ]
            windowed = WindowGrouping(group_window.window, rel.node, rel.scope, roles_of_keys, None)
        else:
            windowed = self._window_grouping(rel, key_nodes)
        if windowed is not None:
            input_node, input_scope, roles = windowed.input, windowed.scope, windowed.roles
        else:
            input_node, input_scope = rel.node, rel.scope
            roles = [None] * len(key_nodes)
            if isinstance(_strip_filters(rel.node), WindowTVF) and _strip_filters(rel.node).window.kind == "SESSION":
                raise plan_error(
                    "a SESSION window must be aggregated with GROUP BY window_start, window_end",
                    group or sel,
                )

        binder = ExprBinder(input_scope, zone=self.zone)
        for condition in filter_conditions:
            require_boolean(binder.bind(condition), condition, "FILTER")
        pre_exprs: list[Expr] = [ColumnRef(i, c.name, c.type) for i, c in enumerate(input_scope.columns)]
        pre_names = [c.name for c in input_scope.columns]

        def column_of(e: Expr) -> int:
            if isinstance(e, ColumnRef):
                return e.index
            pre_exprs.append(e)
            pre_names.append(f"$expr{len(pre_exprs)}")
            return len(pre_exprs) - 1

        key_cols: list[int | str] = []
        key_names: list[str] = []
        # the output column of each grouping key, by its text and (plain columns) by name
        key_lookup: dict[str, int] = {}
        key_columns: dict[str, int] = {}
        window_output = 0  # a legacy group window's outputs: window_start, window_end, window_time
        for node, role in zip(key_nodes, roles, strict=True):
            if isinstance(role, tuple):
                window_output = len(key_cols)
                key_cols.extend(role)
                key_names.extend(role)
                continue
            key_lookup[node.sql()] = len(key_cols)
            if isinstance(node, exp.Column):
                key_columns[node.name.lower()] = len(key_cols)
            key_cols.append(column_of(binder.bind(node)) if role is None else role)
            key_names.append(node.alias_or_name if isinstance(node, exp.Column) else f"$key{len(key_names)}")

        aggs: list[AggCall] = []
        for i, n in enumerate(agg_nodes):
            call = self._agg_call(n, binder, column_of, f"$agg{i}")
            if call.arg is not None and (call.function != "COUNT" or call.distinct) and is_nested(pre_exprs[call.arg].type):
                # the aggregates' kernels and state take scalars; aggregate an element or field instead
                what = f"{call.function}(DISTINCT ...)" if call.distinct else call.function
                raise plan_error(f"{what} over {sql_type_name(pre_exprs[call.arg].type)} values is not supported; "
                                 "aggregate its elements or fields", n)
            aggs.append(call)
        if not key_cols and not aggs:
            # a global aggregation with nothing to compute still has its one row (SELECT 1 ... HAVING,
            # the () set of GROUPING SETS): a COUNT(*) that nothing reads carries it
            aggs.append(AggCall("COUNT", None, False, pa.int64(), "$rows"))

        _refuse_window_aggregates(aggs, None if windowed is None else windowed.window, group_window is not None,
                                group or sel)
        if len(pre_exprs) > len(input_scope.columns):
            input_node = Project(input_node, pre_exprs, pre_names, input_node.rowtime)

        if windowed is not None:
            agg_node: LogicalNode = WindowAggregate(input_node, windowed.window, key_cols, key_names, aggs,
                                                    windowed.input_window)
        else:
            agg_node = Aggregate(input_node, [int(k) for k in key_cols], aggs, key_names, state_ttl_ms)

        # expressions above the aggregate see group keys and aggregate results only
        agg_lookup = {n.sql(): len(key_cols) + i for i, n in enumerate(agg_nodes)}
        out_schema = agg_node.schema

        def intercept(node: exp.Expression) -> Expr | None:
            text = node.sql()
            index = key_lookup.get(text)
            if group_window is not None and auxiliary(node) is not None:
                assert isinstance(node, exp.Anonymous)
                role = group_window.check_auxiliary(node, input_scope)
                index = window_output + WINDOW_COLUMNS.index(role)
            if index is None:
                index = agg_lookup.get(text)
            if index is None and isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
                index = key_columns.get(node.name.lower())
                if index is None:
                    input_scope.resolve(node)  # unknown column: the resolver's error
                    raise plan_error(
                        f"column '{node.sql()}' must appear in GROUP BY or be used in an aggregate function",
                        node,
                        node.name,
                    )
            if index is None:
                return None
            f = out_schema.field(index)
            return ColumnRef(index, f.name, f.type)

        post = ExprBinder(Scope.of(out_schema), intercept, zone=self.zone)
        out: LogicalNode = agg_node
        if having_node is not None:
            pred = post.bind(having_node)
            require_boolean(pred, having_node, "HAVING")
            out = Filter(out, pred)
        if any(_star(i) is not None for i in items):
            raise plan_error("SELECT * cannot be used with GROUP BY; list the columns", sel)
        exprs, names = self._bind_items(items, Scope.of(out_schema), post)
        return Project(out, exprs, names, _rowtime_through(exprs, out.rowtime))

    def _group_window(
        self, rel: Relation, key_nodes: list[exp.Expression]
    ) -> tuple[Relation, GroupWindow | None]:
        """The legacy group window (TUMBLE/HOP/SESSION(ts, ...)) among the grouping keys, if any,
        and the input, with its PROCTIME() column made the time attribute when the window is on it."""
        calls = [k for k in key_nodes if group_window_kind(k) is not None]
        if not calls:
            return rel, None
        if len(calls) > 1:
            first, second = (c.sql(dialect=dialect.Flink) for c in calls[:2])
            raise plan_error(
                f"GROUP BY takes one group window, found {first} and {second}", calls[1]
            )
        assert isinstance(calls[0], exp.Anonymous)
        time = calls[0].expressions[0] if calls[0].expressions else None
        if isinstance(time, exp.Column):
            rel = Relation(with_proctime_attribute(rel.node, rel.scope.resolve(time).index), rel.scope)
        window = bind_group_window(calls[0], rel.scope, rel.node.rowtime)
        return rel, dataclasses.replace(window, window=self._zoned(window.window, rel.node))

    def _zoned(self, spec: WindowSpec, node: LogicalNode) -> WindowSpec:
        """Flink aligns windows on a TIMESTAMP_LTZ time attribute (a PROCTIME() column too) in the
        session zone; on TIMESTAMP they are aligned on the wall-clock values as they are."""
        if is_ltz(node.schema.field(spec.time_index).type):
            return dataclasses.replace(spec, zone=self.zone)
        return spec

    def _window_grouping(self, rel: Relation, key_nodes: list[exp.Expression]) -> WindowGrouping | None:
        """GROUP BY window_start, window_end, ... over windowed rows: how to build the window aggregation.

        Directly over a windowing TVF (through WHERE filters on its input columns) the TVF
        fuses into the aggregation, which assigns the windows itself.  Over any other input whose
        window properties say that two grouping columns are the window_start and
        window_end of one window (a window aggregation's output, renamed or not), the
        aggregation is cascaded: it takes each row's window from those columns.
        """
        fused = self._fused_window_grouping(rel, key_nodes)
        windows = rel.node.window_properties
        if fused is not None or not windows or rel.node.updating:
            return fused
        indexes = [rel.scope.resolve(k).index if isinstance(k, exp.Column) else None for k in key_nodes]
        for window in windows:
            roles = [None if i is None else window.role(i) for i in indexes]
            if {"window_start", "window_end"} <= set(roles):
                assert window.start is not None and window.end is not None
                return WindowGrouping(window.window, rel.node, rel.scope, roles, (window.start, window.end))
        return None

    def _fused_window_grouping(self, rel: Relation, key_nodes: list[exp.Expression]) -> WindowGrouping | None:
        filters: list[Expr] = []
        node = rel.node
        while isinstance(node, Filter):
            filters.append(node.predicate)
            node = node.input
        if not isinstance(node, WindowTVF):
            return None
        width = len(node.input.schema)
        roles: list[str | None] = []
        for k in key_nodes:
            role = None
            if isinstance(k, exp.Column):
                ref = rel.scope.resolve(k)
                if ref.index >= width:
                    role = WINDOW_COLUMNS[ref.index - width]
            roles.append(role)
        if not ({"window_start", "window_end"} <= {r for r in roles if r}):
            return None
        if any(i >= width for pred in filters for i in referenced_columns(pred)):
            if node.window.kind == "SESSION":  # sessions only exist once merged by the aggregation
                raise PlanError(
                    "a WHERE condition on window_start/window_end/window_time of a SESSION window before "
                    "the window aggregation is not supported; filter after aggregating (HAVING) instead"
                )
            return None  # a WHERE on the window columns needs them computed first: cascaded, not fused
        base = node.input
        for pred in reversed(filters):
            base = Filter(base, pred)
        return WindowGrouping(node.window, base, Scope(rel.scope.columns[:width]), roles, None)

    def _agg_call(self, node: exp.Expression, binder: ExprBinder, column_of, name: str) -> AggCall:
        if isinstance(node, dialect.JSON_AGGREGATES):
            return _json_aggregate_call(node, binder, column_of, name)
        if type(node) in GROUP_AGGREGATES or (isinstance(node, exp.Anonymous) and node.name.upper() == "LISTAGG"):
            return _group_aggregate_call(node, binder, column_of, name)
        if isinstance(node, exp.Anonymous) and node.name.upper() == "PERCENTILE":
            return _percentile_call(node, binder, column_of, name)
        if isinstance(node, exp.Anonymous) and node.name.upper() == "COLLECT":
            return _collect_call(node, binder, column_of, name)
        if isinstance(node, exp.Anonymous):  # an aggregate UDF

            udaf = USER_AGGREGATES[node.name.upper()]
            if any(isinstance(a, exp.Distinct) for a in node.expressions):
                raise plan_error(f"DISTINCT is not supported in the aggregate function {node.name}", node)
            columns = [column_of(binder.bind(a)) for a in node.expressions]
            # accumulate(acc, a, b, ...) takes the columns in order: the first is the call's
            # argument, the others its extra_args
            return AggCall(udaf.name, columns[0] if columns else None, False, udaf.result_type, name,
                           extra_args=tuple(columns[1:]))
        function = {exp.Count: "COUNT", exp.Sum: "SUM", exp.Min: "MIN", exp.Max: "MAX", exp.Avg: "AVG"}[type(node)]
        arg_node = node.this
        distinct = False
        if isinstance(arg_node, exp.Distinct):
            distinct = True
            if len(arg_node.expressions) != 1:
                raise plan_error(f"{function}(DISTINCT ...) takes exactly one argument", node)
            arg_node = arg_node.expressions[0]
        if function == "COUNT" and (arg_node is None or isinstance(arg_node, exp.Star)):
            return AggCall("COUNT", None, False, pa.int64(), name)
        if arg_node is None:
            raise plan_error(f"{function} needs an argument", node)
        arg = binder.bind(arg_node)
        t = arg.type
        if function == "COUNT":
            out = pa.int64()
        elif function in ("SUM", "AVG"):
            if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)):
                raise plan_error(f"{function} needs a numeric argument, got {sql_type_name(t)}", node)
            # Flink's LogicalTypeMerging: SUM(INT) is INT (wrapping around), AVG(INT) is INT,
            # SUM(DECIMAL(p, s)) is DECIMAL(38, s), AVG(DECIMAL(p, s)) is DECIMAL(38, max(6, s))
            out = sum_type(t) if function == "SUM" else avg_type(t)
        else:
            out = t
        return AggCall(function, column_of(arg), distinct, out, name)


def _group_aggregate_call(node: exp.Expression, binder: ExprBinder, column_of, name: str) -> AggCall:  # noqa: ANN001
    """STDDEV_*/VAR_*, FIRST_VALUE/LAST_VALUE, ARRAY_AGG and LISTAGG(x [, separator]), typed as
    Flink types them."""
    if isinstance(node, exp.Anonymous):
        function, args = "LISTAGG", list(node.expressions)
    else:
        function, args = GROUP_AGGREGATES[type(node)], [node.this]
    distinct = False
    if function == "ARRAY_AGG" and args and isinstance(args[0], exp.Distinct) and len(args[0].expressions) == 1:
        distinct, args = True, [args[0].expressions[0]]
    if not args or args[0] is None or isinstance(args[0], exp.Distinct):
        raise plan_error(f"{function} takes a value{'' if args and args[0] is not None else ''}, without DISTINCT", node)
    condition: tuple[int, ...] = ()
    if node.args.get("filtered"):  # ARRAY_AGG(CASE WHEN c THEN x END) from ... FILTER (WHERE c)
        when = args[0].args["ifs"][0]
        args = [when.args["true"]]
        condition = (column_of(binder.bind(when.this)),)
    arg = binder.bind(args[0])
    t = arg.type
    separator = None
    if function == "LISTAGG":
        if len(args) > 2 or (len(args) == 2 and not (isinstance(args[1], exp.Literal) and args[1].is_string)):
            raise plan_error("LISTAGG takes a STRING value and an optional constant separator string", node)
        if not (pa.types.is_string(t) or pa.types.is_null(t)):
            raise plan_error(f"LISTAGG needs a STRING argument, got {sql_type_name(t)}", node)
        separator = args[1].name if len(args) == 2 else None
        out = pa.string()
    elif function in ("FIRST_VALUE", "LAST_VALUE"):
        out = t
    elif function == "ARRAY_AGG":
        out = pa.list_(pa.string() if pa.types.is_null(t) else t)
    else:
        if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)):
            raise plan_error(f"{function} needs a numeric argument, got {sql_type_name(t)}", node)
        # Flink reduces them to SUM and COUNT and casts back: integers stay the argument's type,
        # DECIMAL(p, s) becomes DECIMAL(38, max(6, s)) as AVG does
        out = avg_type(t) if pa.types.is_decimal(t) else t
    return AggCall(function, column_of(arg), distinct, out, name, separator,
                   ignore_nulls=bool(node.args.get("nulls_excluded")) if function == "ARRAY_AGG" else False,
                   extra_args=condition)


def _collect_call(node: exp.Anonymous, binder: ExprBinder, column_of, name: str) -> AggCall:  # noqa: ANN001
    """COLLECT([DISTINCT] x): Flink's MULTISET<type of x> of the non-NULL values."""
    args = list(node.expressions)
    distinct = len(args) == 1 and isinstance(args[0], exp.Distinct) and len(args[0].expressions) == 1
    if distinct:
        args = [args[0].expressions[0]]
    if len(args) != 1 or isinstance(args[0], exp.Distinct):
        raise plan_error("COLLECT takes one value: COLLECT([DISTINCT] x)", node)
    arg = binder.bind(args[0])
    if is_multiset(arg.type):
        raise plan_error("COLLECT of MULTISET values is not supported", node)
    element = pa.string() if pa.types.is_null(arg.type) else arg.type
    return AggCall("COLLECT", column_of(arg), distinct, multiset_of(element), name)


def _percentile_call(node: exp.Anonymous, binder: ExprBinder, column_of, name: str) -> AggCall:  # noqa: ANN001
    """PERCENTILE(value, percentage | ARRAY[percentage, ...] [, frequency]) as Flink types it: a
    numeric value, percentages in [0, 1] (constants here: Flink takes the first row's), an integer
    frequency; DOUBLE, or ARRAY<DOUBLE> for an array of percentages."""
    args = list(node.expressions)
    if not 2 <= len(args) <= 3 or any(isinstance(a, exp.Distinct) for a in args):
        raise plan_error("PERCENTILE takes (value, percentage [, frequency]) without DISTINCT", node)
    value = binder.bind(args[0])
    if not (pa.types.is_integer(value.type) or pa.types.is_floating(value.type) or pa.types.is_decimal(value.type)):
        raise plan_error(f"PERCENTILE needs a numeric value, got {sql_type_name(value.type)}", node)
    percentage = fold(binder.bind(args[1]))
    if not isinstance(percentage, Literal):
        raise plan_error("PERCENTILE's percentage must be a constant (or an ARRAY of constants)", args[1])
    many = isinstance(percentage.value, list)
    values = percentage.value if many else [percentage.value]
    if not values or any(isinstance(v, bool) or not isinstance(v, int | float | Decimal) or not 0 <= v <= 1
                         for v in values):
        raise plan_error("PERCENTILE's percentage must be a number between 0.0 and 1.0 (or an ARRAY of them), "
                         f"got {args[1].sql(dialect=dialect.Flink)}", args[1])
    extra: tuple[int, ...] = ()
    if len(args) == 3:
        frequency = binder.bind(args[2])
        if not (pa.types.is_integer(frequency.type) or pa.types.is_null(frequency.type)):
            raise plan_error(f"PERCENTILE's frequency must be an integer, got {sql_type_name(frequency.type)}", args[2])
        extra = (column_of(frequency),)
    out = pa.list_(pa.float64()) if many else pa.float64()
    return AggCall("PERCENTILE", column_of(value), False, out, name, extra_args=extra,
                   percentages=tuple(float(v) for v in values))


def _json_aggregate_call(node: exp.Expression, binder: ExprBinder, column_of, name: str) -> AggCall:  # noqa: ANN001
    """JSON_ARRAYAGG(v [ABSENT|NULL ON NULL]) and JSON_OBJECTAGG([KEY] k VALUE v [NULL|ABSENT ON NULL])
    as Flink's JSON_ARRAYAGG_ABSENT_ON_NULL, ... functions: as Flink's WrapJsonAggFunctionArgumentsRule
    does, the value reaches the aggregate as its JSON text (JSON_STRING), and JSON_OBJECTAGG's key
    with it, in one '"key":value' column."""
    text = binder.json_text_of(binder.bind(node.this if isinstance(node, dialect.FlinkJsonArrayAgg) else node.expression), node)
    if isinstance(node, dialect.FlinkJsonArrayAgg):
        on_null = node.args.get("on_null") or "ABSENT"
        return AggCall(f"JSON_ARRAYAGG_{on_null}_ON_NULL", column_of(text), False, pa.string(), name)
    key = binder.bind(node.this)
    if isinstance(key, Literal) and key.value is None:
        raise plan_error(f"a JSON_OBJECTAGG key must not be NULL: '{node.this.sql()}'", node.this)
    entry = binder.objectagg_entry(key, text, node)
    on_null = node.args.get("on_null") or "NULL"
    return AggCall(f"JSON_OBJECTAGG_{on_null}_ON_NULL", column_of(entry), False, pa.string(), name)


def _refuse_window_aggregates(aggs: list[AggCall], window: WindowSpec | None, legacy: bool, at: exp.Expression) -> None:
    """Where Flink 2.3 cannot run its JSON aggregates: JSON_ARRAYAGG has no merge, which HOP,
    CUMULATE and SESSION windows need; a legacy GROUP BY TUMBLE/HOP/SESSION window passes their
    arguments unwrapped (JSON_ARRAYAGG gives [a,b] unquoted, JSON_OBJECTAGG fails).  Also
    ARRAY_AGG(DISTINCT x) in a window: Flink's window aggregation builds that array from its
    distinct values' hash map (reference case functions_more.array_agg_distinct_window), an order
    sqlstream does not reproduce.  And an aggregate UDF without ``merge`` in a SESSION window, whose
    sessions merge their accumulators."""
    for a in aggs:
        udaf = USER_AGGREGATES.get(a.function)
        if window is not None and window.kind == "SESSION" and udaf is not None \
                and not implements_merge(udaf.implementation):
            raise plan_error(f"aggregate function {a.function} ({type(udaf.implementation).__name__}) does not implement "
                             "merge(accumulator, other), which a SESSION window needs", at)
    if window is not None and any(a.function == "ARRAY_AGG" and a.distinct for a in aggs):
        raise plan_error("ARRAY_AGG(DISTINCT ...) in a window aggregation is not supported: Flink orders the "
                         "array by its hash map of the distinct values there", at)
    json_aggs = [a for a in aggs if a.function.startswith(("JSON_ARRAYAGG", "JSON_OBJECTAGG"))]
    if not json_aggs or window is None:
        return
    what = "JSON_ARRAYAGG" if json_aggs[0].function.startswith("JSON_ARRAYAGG") else "JSON_OBJECTAGG"
    if legacy:
        raise plan_error(f"{what} in a legacy GROUP BY {window.kind}(...) window is not supported (Flink 2.3 "
                         "does not give JSON there); use the window table function TABLE("
                         f"{window.kind}(...)) instead", at)
    arrayagg = any(a.function.startswith("JSON_ARRAYAGG") for a in json_aggs)
    if arrayagg and window.kind in ("HOP", "CUMULATE", "SESSION"):
        raise plan_error(f"JSON_ARRAYAGG cannot be used in a {window.kind} window: Flink's JSON_ARRAYAGG has no "
                         "merge method, which the window needs", at)


def _grouping_id(node: exp.Grouping | exp.GroupingId, present: set[str]) -> exp.Expression:
    """GROUPING(a, b, ...) / GROUPING_ID(...) in a branch grouping by ``present``: a BIGINT with one
    bit per argument, the first the most significant, set where the argument is not grouped by."""
    value = 0
    for arg in node.expressions:
        value = value << 1 | (arg.sql(dialect=dialect.Flink) not in present)
    return exp.Cast(this=exp.Literal.number(value), to=exp.DataType.build("BIGINT"))


def with_hint_options(table: TableDef, node: exp.Table, settings: Mapping[str, str]) -> TableDef:
    """The table with its ``/*+ OPTIONS(...) */`` dynamic options merged over its WITH options,
    validated by its connector as CREATE TABLE would (``table.dynamic-table-options.enabled``)."""
    options = table_hint_options(node)
    if not options:
        return table
    if not setting(settings, "table.dynamic-table-options.enabled"):
        raise plan_error("the OPTIONS hint is allowed only when the config option "
                         "'table.dynamic-table-options.enabled' is set to true", node, node.name)
    hinted = dataclasses.replace(table, options={**table.options, **options})
    connector_spec(hinted.connector).validate(hinted)
    return hinted


def _grouping_sets(group: exp.Group) -> list[list[exp.Expression]] | None:
    """The grouping sets a GROUP BY with GROUPING SETS / ROLLUP / CUBE stands for, else None."""
    options_per_item: list[list[list[exp.Expression]]] = []
    expanded = False
    for e in group.expressions:
        if isinstance(e, exp.GroupingSets):
            expanded = True
            opts = []
            for x in e.expressions:
                if isinstance(x, exp.Tuple):
                    opts.append(list(x.expressions))
                elif isinstance(x, exp.Paren):
                    opts.append([x.this])
                else:
                    opts.append([x])
            options_per_item.append(opts)
        elif isinstance(e, exp.Rollup):
            expanded = True
            items = list(e.expressions)
            options_per_item.append([items[:i] for i in range(len(items), -1, -1)])
        elif isinstance(e, exp.Cube):
            expanded = True
            items = list(e.expressions)
            subsets = [[items[j] for j in range(len(items)) if mask >> j & 1] for mask in range(2 ** len(items) - 1, -1, -1)]
            options_per_item.append(subsets)
        else:
            options_per_item.append([[e]])
    if not expanded:
        return None
    sets: list[list[exp.Expression]] = [[]]
    for opts in options_per_item:
        sets = [a + b for a in sets for b in opts]
    return sets


def _inline_filters(node: exp.Expression, conditions: list[exp.Expression]) -> exp.Expression:
    """``agg(x) FILTER (WHERE c)`` as ``agg(CASE WHEN c THEN x END)``, collecting each ``c``.

    Aggregates skip NULL arguments, so only rows where ``c`` is TRUE reach the aggregate
    (``COUNT(*)`` counts ``CASE WHEN c THEN 1 END``): every aggregation path, vectorized or not,
    serves FILTER unchanged.  Aggregate UDFs see NULL arguments, so FILTER is refused on them.
    """

    def inline(n: exp.Expression) -> exp.Expression:
        if not isinstance(n, exp.Filter):
            return n
        agg, condition = n.this, n.expression.this
        if not is_aggregate(agg):
            raise plan_error(
                f"FILTER (WHERE ...) only applies to an aggregate function, not to {agg.sql()}", n
            )
        if isinstance(agg, exp.Anonymous):
            raise plan_error(
                f"FILTER (WHERE ...) is not supported on the aggregate function {agg.name}", n
            )
        if isinstance(agg, exp.ArrayAgg) and agg.args.get("nulls_excluded"):
            raise plan_error("FILTER (WHERE ...) cannot follow ARRAY_AGG(... IGNORE NULLS) (Flink: FILTER must be "
                             "applied to aggregate function)", n)
        name = agg.sql_name()
        for inner in condition.walk():
            if is_aggregate(inner):
                raise plan_error(
                    f"aggregate functions are not allowed in the FILTER condition of {name}", inner
                )
        conditions.append(condition)
        agg = agg.copy()
        arg = agg.this
        holder, slot = (arg, "expressions") if isinstance(arg, exp.Distinct) else (agg, "this")
        values = list(arg.expressions) if isinstance(arg, exp.Distinct) else [arg]
        if len(values) != 1 or (values[0] is None and not isinstance(agg, exp.Count)):
            return agg  # malformed: _agg_call names the problem
        value = values[0]
        if value is None or isinstance(value, exp.Star):  # COUNT(*)
            value = exp.Literal.number(1)
        case = exp.Case(ifs=[exp.If(this=condition.copy(), true=value.copy())])
        holder.set(slot, [case] if slot == "expressions" else case)
        if isinstance(agg, exp.ArrayAgg):
            # ARRAY_AGG keeps NULLs: it reads the CASE's value and condition apart and skips the
            # rows whose condition is not TRUE (_group_aggregate_call)
            agg.set("filtered", True)
        return agg

    return node.transform(inline)


def _keep_name(original: exp.Expression, rewritten: exp.Expression) -> exp.Expression:
    """A SELECT item keeps its output name when a grouping column inside it became NULL."""
    if isinstance(original, exp.Alias) or not isinstance(original, exp.Column):
        return rewritten
    return exp.alias_(rewritten, original.name) if not isinstance(rewritten, exp.Column) else rewritten


def _strip_filters(node: LogicalNode) -> LogicalNode:
    while isinstance(node, Filter):
        node = node.input
    return node


def _rowtime_in_ms(node: LogicalNode, index: int) -> LogicalNode:
    """``node`` with its column ``index`` (a TIMESTAMP(0)) cast to TIMESTAMP(3): the same instants,
    at the precision event time runs at."""
    schema = node.schema
    exprs: list[Expr] = [ColumnRef(i, f.name, f.type) for i, f in enumerate(schema)]
    target = pa.timestamp("ms", schema.field(index).type.tz)
    exprs[index] = Cast(exprs[index], target)
    return Project(node, exprs, list(schema.names))


def _distinct(node: LogicalNode, state_ttl_ms: int | None = None) -> LogicalNode:
    schema = node.schema
    agg = Aggregate(node, list(range(len(schema))), [], list(schema.names), state_ttl_ms)
    return agg


def _rename(rel: Relation, names: list[str], node: exp.Expression) -> Relation:
    schema = rel.node.schema
    if len(names) != len(schema):
        raise plan_error(f"alias lists {len(names)} columns but the query has {len(schema)}", node)
    exprs: list[Expr] = [ColumnRef(i, f.name, f.type) for i, f in enumerate(schema)]
    out = Project(rel.node, exprs, names, rel.node.rowtime)
    return Relation(out, Scope.of(out.schema))


def _star(item: exp.Expression) -> str | None:
    """'' for '*', the qualifier for 't.*', None otherwise."""
    if isinstance(item, exp.Star):
        return ""
    if isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
        return item.table or ""
    return None


def _item_name(item: exp.Expression, position: int) -> str:
    if isinstance(item, exp.Alias):
        return item.alias
    if isinstance(item, exp.Column):
        return item.name
    return f"EXPR${position}"


def require_boolean(pred: Expr, node: exp.Expression, clause: str) -> None:
    if not (pa.types.is_boolean(pred.type) or pa.types.is_null(pred.type)):
        raise plan_error(f"{clause} condition must be BOOLEAN, got {sql_type_name(pred.type)}", node)


def _rowtime_through(exprs: list[Expr], rowtime: int | None) -> int | None:
    if rowtime is None:
        return None
    for i, e in enumerate(exprs):
        if isinstance(e, ColumnRef) and e.index == rowtime:
            return i
    return None
