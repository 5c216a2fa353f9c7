"""Subqueries, planned as Flink plans them: no nested-loop evaluation, only joins.

- ``x [NOT] IN (SELECT y ...)`` and ``[NOT] EXISTS (SELECT ...)``, as conjuncts of a WHERE clause,
  become SEMI (ANTI) joins of the query's rows with the subquery's (logical.SemiJoin), keyed on
  the equalities between them.  A correlated subquery's conditions on the outer row (those naming
  outer columns) become the join condition, the rest stay in the subquery.  ``NOT IN`` is
  null-aware, as in SQL: a row is dropped when the comparison with any subquery row is TRUE or
  NULL, so a NULL in the subquery empties the result.
- A scalar subquery in WHERE or in a non-aggregating SELECT list, ``(SELECT MAX(y) FROM r)``,
  becomes a LEFT join with its one row (NULL while it has none); the planner accepts the ones that
  cannot return more than one row (an aggregate without GROUP BY), where Flink fails at run time.
- A correlated one, ``(SELECT MAX(y) FROM r WHERE r.k = t.k)``, is decorrelated as Flink does: its
  aggregates grouped by the subquery's side of each correlating equality, LEFT joined on those
  equalities, and the item computed over the joined aggregates, so an outer row without matches
  sees the aggregates of no rows (COUNT 0, the others NULL).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
from sqlglot import exp

from sqlstream.core.errors import PlanError
from sqlstream.core.expressions import Call, ColumnRef, Expr, Literal
from sqlstream.planner.expr_binder import ExprBinder, contains_aggregate, is_aggregate
from sqlstream.planner.joins import conjoin
from sqlstream.planner.logical import Filter, Join, Project, SemiJoin
from sqlstream.planner.scope import Scope, ScopeColumn, plan_error

if TYPE_CHECKING:
    from sqlstream.planner.binder import QueryBinder, Relation


def and_parts(node: exp.Expression) -> list[exp.Expression]:
    """The conjuncts of a boolean expression (AND of ANDs, parentheses dropped)."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return and_parts(node.this) + and_parts(node.expression)
    return [node]


def _subquery_predicate(node: exp.Expression) -> tuple[exp.Expression, bool] | None:
    """(the IN or EXISTS node, negated) if ``node`` is one with a subquery, else None."""
    negated = False
    while isinstance(node, exp.Not | exp.Paren):
        negated ^= isinstance(node, exp.Not)
        node = node.this
    if isinstance(node, exp.Exists) or (isinstance(node, exp.In) and node.args.get("query") is not None):
        return node, negated
    return None


def _has_subquery_predicate(node: exp.Expression) -> bool:
    return any(isinstance(n, exp.Exists) or (isinstance(n, exp.In) and n.args.get("query") is not None)
               for n in node.walk())


def bind_where(binder: QueryBinder, rel: Relation, where: exp.Expression) -> Relation:
    """``rel`` filtered by a WHERE condition, its subqueries planned as joins."""
    from sqlstream.planner.binder import Relation, require_boolean

    plain: list[exp.Expression] = []
    semis: list[tuple[exp.Expression, bool]] = []
    for part in and_parts(where):
        found = _subquery_predicate(part)
        if found is not None:
            semis.append(found)
        elif _has_subquery_predicate(part):
            raise plan_error("IN and EXISTS subqueries are supported as conjuncts of WHERE (joined by AND), "
                             f"not inside OR, CASE or other expressions: '{part.sql()[:80]}'", part)
        else:
            plain.append(part)
    width = len(rel.node.schema)
    if plain:
        wide, conditions = with_scalar_subqueries(binder, rel, plain)
        pred = ExprBinder(wide.scope, zone=binder.zone).bind(exp.and_(*conditions) if len(conditions) > 1 else conditions[0])
        require_boolean(pred, where, "WHERE")
        node = Filter(wide.node, pred)
        if len(wide.node.schema) > width:
            # the scalar subqueries' columns served the condition only
            keep = [ColumnRef(i, rel.scope.columns[i].name, rel.scope.columns[i].type) for i in range(width)]
            node = Project(node, keep, [f.name for f in rel.node.schema], None)
        rel = Relation(node, rel.scope)
    for predicate, negated in semis:
        rel = _semi_join(binder, rel, predicate, negated)
    return rel


def _simple(sel: exp.Expression) -> bool:
    """A SELECT whose rows are its FROM's rows filtered: its WHERE may be split."""
    return (isinstance(sel, exp.Select) and (sel.args.get("from_") or sel.args.get("from")) is not None
            and not any(sel.args.get(k) for k in ("group", "having", "distinct", "limit", "order", "with_", "with"))
            and not any(contains_aggregate(i) or any(isinstance(n, exp.Window) for n in i.walk())
                        for i in sel.expressions))


def _resolves(scope: Scope, column: exp.Column) -> bool:
    try:
        scope.resolve(column)
    except PlanError:
        return False
    return True


def _correlated(node: exp.Expression, inner: Scope, outer: Scope) -> bool:
    """Whether ``node`` names a column of the outer query (one the subquery's FROM does not have)."""
    for column in node.find_all(exp.Column):
        if isinstance(column.this, exp.Star) or _resolves(inner, column):
            continue
        if _resolves(outer, column):
            return True
        inner.resolve(column)  # raises the unknown-column error, naming the subquery's columns
    return False


def _semi_join(binder: QueryBinder, rel: Relation, predicate: exp.Expression, negated: bool) -> Relation:
    from sqlstream.planner.binder import Relation

    query = predicate.args["query"] if isinstance(predicate, exp.In) else predicate.this
    sel = query.this if isinstance(query, exp.Subquery) else query
    width = len(rel.node.schema)
    correlated: list[exp.Expression] = []
    items: list[Expr]
    if _simple(sel):
        right = binder.bind_from_and_joins(sel)
        where = sel.args.get("where")
        parts = and_parts(where.this) if where is not None else []
        correlated = [p for p in parts if _correlated(p, right.scope, rel.scope)]
        local = [p for p in parts if all(p is not c for c in correlated)]
        if local:
            right = bind_where(binder, right, exp.and_(*local) if len(local) > 1 else local[0])
        items = [] if isinstance(predicate, exp.Exists) else _in_items(sel, right, binder.zone)
        if any(not isinstance(e, ColumnRef) for e in items):
            # computed IN items become columns of the subquery's side, so that they can be join keys
            names = [c.name for c in right.scope.columns]
            extra = [f"$in{i}" for i in range(len(items))]
            refs = [ColumnRef(i, c.name, c.type) for i, c in enumerate(right.scope.columns)]
            node = Project(right.node, refs + items, names + extra, None)
            scope = Scope(right.scope.columns + [ScopeColumn(None, n, e.type) for n, e in zip(extra, items, strict=True)])
            items = [ColumnRef(len(refs) + i, n, e.type) for i, (n, e) in enumerate(zip(extra, items, strict=True))]
            right = Relation(node, scope)
    else:
        right = binder.bind_query(sel)
        items = [ColumnRef(i, f.name, f.type) for i, f in enumerate(right.node.schema)]

    def resolve(node: exp.Expression) -> Expr | None:
        # inside the subquery its own columns come first, then the outer query's
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            if _resolves(right.scope, node):
                ref = right.scope.resolve(node)
                return ColumnRef(width + ref.index, ref.name, ref.type)
            return rel.scope.resolve(node)
        return None

    both = Scope(rel.scope.columns + right.scope.columns)
    conditions = [ExprBinder(both, resolve, zone=binder.zone).bind(c) for c in correlated]
    if isinstance(predicate, exp.In):
        outer = predicate.this.expressions if isinstance(predicate.this, exp.Tuple) else [predicate.this]
        if len(outer) != len(items):
            raise plan_error(f"IN compares {len(outer)} value(s) with a subquery of {len(items)} column(s)", predicate)
        binder_ = ExprBinder(both, zone=binder.zone)
        equal = [binder_._call("=", [ExprBinder(rel.scope, zone=binder.zone).bind(o),
                                     ColumnRef(width + i.index, i.name, i.type)], predicate)
                 for o, i in zip(outer, items, strict=True)]
        if negated:
            # NOT IN drops a row when the comparison with any subquery row is TRUE or NULL
            matches = conjoin(equal)
            assert matches is not None
            equal = [Call("COALESCE", (matches, Literal(True, pa.bool_())), pa.bool_())]
        conditions = equal + conditions
    return Relation(SemiJoin(rel.node, right.node, negated, conjoin(conditions)), rel.scope)


def _in_items(sel: exp.Select, right: Relation, zone: str) -> list[Expr]:
    """The subquery's SELECT items over its rows, for IN."""
    binder = ExprBinder(right.scope, zone=zone)
    items = []
    for item in sel.expressions:
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
            items.extend(ColumnRef(i, c.name, c.type) for i, c in enumerate(right.scope.columns)
                         if not c.name.startswith("$"))
            continue
        items.append(binder.bind(item.this if isinstance(item, exp.Alias) else item))
    return items


def with_scalar_subqueries(binder: QueryBinder, rel: Relation, nodes: list[exp.Expression]
                           ) -> tuple[Relation, list[exp.Expression]]:
    """``rel`` with one more column per scalar subquery in ``nodes`` (a LEFT join with the
    subquery's one row), and ``nodes`` reading those columns instead."""
    from sqlstream.planner.binder import Relation

    state = {"rel": rel}

    def swap(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.Subquery) or isinstance(node.parent, exp.In | exp.Exists):
            return node
        sel = node.this
        if not (isinstance(sel, exp.Select) and not sel.args.get("group")
                and any(contains_aggregate(i) for i in sel.expressions)):
            raise plan_error("a scalar subquery must return at most one row: sqlstream runs those that aggregate "
                             "without GROUP BY (e.g. (SELECT MAX(x) FROM t)); for others use a JOIN", node)
        if len(sel.expressions) != 1:
            raise plan_error(f"a scalar subquery returns one column, this one {len(sel.expressions)}", node)
        correlated = _correlation(binder, sel, state["rel"])
        if correlated is not None:
            return _decorrelated(binder, state, sel, *correlated, node)
        sub = binder.bind_query(sel)
        current = state["rel"]
        name = f"$scalar{len(current.scope.columns)}"
        column = ScopeColumn(None, name, sub.node.schema.field(0).type)
        state["rel"] = Relation(Join(current.node, sub.node, "LEFT", None), Scope(current.scope.columns + [column]))
        return exp.column(exp.to_identifier(name, quoted=True))

    swapped = [n.copy().transform(swap) for n in nodes]
    return state["rel"], swapped


def _correlation(binder: QueryBinder, sel: exp.Select, outer: Relation
                 ) -> tuple[list[tuple[exp.Expression, exp.Expression]], list[exp.Expression]] | None:
    """For a scalar subquery whose WHERE names outer columns: its correlating equalities as
    (subquery side, outer side) pairs, and its other conjuncts; None for an uncorrelated one."""
    from_ = sel.args.get("from_") or sel.args.get("from")
    where = sel.args.get("where")
    if from_ is None or where is None:
        return None
    inner = binder.bind_from_and_joins(sel).scope
    pairs: list[tuple[exp.Expression, exp.Expression]] = []
    local: list[exp.Expression] = []
    for part in and_parts(where.this):
        if not _correlated(part, inner, outer.scope):
            local.append(part)
            continue
        sides = (part.this, part.expression) if isinstance(part, exp.EQ) else ()
        inner_side = [s for s in sides if not _correlated(s, inner, outer.scope) and s.find(exp.Column)]
        outer_side = [s for s in sides if all(not _resolves(inner, c) for c in s.find_all(exp.Column))]
        if len(sides) != 2 or len(inner_side) != 1 or len(outer_side) != 1 or inner_side[0] is outer_side[0]:
            raise plan_error("a correlated scalar subquery may only relate its rows to the outer query's by "
                             f"equalities (subquery column = outer column), not by '{part.sql()[:80]}'", part)
        pairs.append((inner_side[0], outer_side[0]))
    if not pairs:
        return None
    if any(sel.args.get(k) for k in ("having", "distinct", "limit", "order", "with_", "with")) or sel.args.get("joins"):
        raise plan_error("a correlated scalar subquery is supported as one aggregate over one table filtered by "
                         "equalities with the outer query, e.g. (SELECT MAX(x) FROM t WHERE t.k = o.k)", sel)
    return pairs, local


def _decorrelated(binder: QueryBinder, state: dict[str, Relation], sel: exp.Select,
                  pairs: list[tuple[exp.Expression, exp.Expression]], local: list[exp.Expression],
                  node: exp.Expression) -> exp.Expression:
    """The correlated scalar subquery ``sel`` as a LEFT join of the outer rows with its aggregates
    grouped by the correlation keys; returns its item over the joined aggregate columns."""
    from sqlstream.planner.binder import Relation

    current = state["rel"]
    prefix = f"$scalar{len(current.scope.columns)}_"
    item = sel.expressions[0]
    item = (item.this if isinstance(item, exp.Alias) else item).copy()
    aggregates = [n for n in item.walk(prune=lambda n: is_aggregate(n) or isinstance(n, exp.Subquery))
                  if is_aggregate(n)]
    grouped = sel.copy()
    grouped.set("where", exp.Where(this=exp.and_(*local)) if local else None)
    keys = [inner.copy() for inner, _ in pairs]
    grouped.set("expressions", [exp.alias_(k, f"{prefix}k{i}", quoted=True) for i, k in enumerate(keys)]
                + [exp.alias_(a.copy(), f"{prefix}a{j}", quoted=True) for j, a in enumerate(aggregates)])
    grouped.set("group", exp.Group(expressions=[k.copy() for k in keys]))
    sub = binder.bind_query(grouped)
    width = len(current.scope.columns)
    columns = [ScopeColumn(None, f.name, f.type) for f in sub.node.schema]
    outer_binder = ExprBinder(current.scope, zone=binder.zone)
    both = ExprBinder(Scope(current.scope.columns + columns), zone=binder.zone)
    condition = conjoin([
        both._call("=", [outer_binder.bind(outer), ColumnRef(width + i, columns[i].name, columns[i].type)], node)
        for i, (_, outer) in enumerate(pairs)])
    state["rel"] = Relation(Join(current.node, sub.node, "LEFT", condition), Scope(current.scope.columns + columns))

    def joined(n: exp.Expression) -> exp.Expression:
        if not any(n is a for a in aggregates):
            return n
        j = next(i for i, a in enumerate(aggregates) if a is n)
        ref = exp.column(exp.to_identifier(f"{prefix}a{j}", quoted=True))
        # an outer row no subquery row matches sees the aggregate of no rows: COUNT 0, others NULL
        return exp.func("COALESCE", ref, exp.Literal.number(0)) if isinstance(n, exp.Count) else ref

    return item.transform(joined, copy=False)
