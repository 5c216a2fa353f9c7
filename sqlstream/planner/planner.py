"""From a bound query to an executable dataflow: INSERT targets, optimization, lowering."""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
from sqlglot import exp

from sqlstream.catalog.catalog import Catalog
from sqlstream.core.config import setting
from sqlstream.core.connectors import connector_spec
from sqlstream.core.expressions import ColumnRef, Expr, Literal
from sqlstream.core.physical import Dataflow
from sqlstream.core.tables import TableDef
from sqlstream.core.types import is_numeric, sql_type_name
from sqlstream.planner.binder import QueryBinder, with_hint_options
from sqlstream.planner.changelog import check_sink
from sqlstream.planner.expr_binder import ExprBinder, coerce
from sqlstream.planner.logical import LogicalNode, Project, Sink, explain
from sqlstream.planner.optimizer import optimize
from sqlstream.planner.optimizer.constant_folding import fold
from sqlstream.planner.physical import Lowering
from sqlstream.planner.scope import Scope, plan_error
from sqlstream.planner.surface import check_insert


def _assignable(source: pa.DataType, target: pa.DataType) -> bool:
    if source == target or pa.types.is_null(source):
        return True
    if is_numeric(source) and is_numeric(target):
        return True
    if pa.types.is_timestamp(source) and pa.types.is_timestamp(target):
        return True
    if pa.types.is_string(target) and pa.types.is_string(source):
        return True
    if pa.types.is_list(source) and pa.types.is_list(target):
        return _assignable(source.value_type, target.value_type)
    if pa.types.is_map(source) and pa.types.is_map(target):
        return _assignable(source.key_type, target.key_type) and _assignable(source.item_type, target.item_type)
    if pa.types.is_struct(source) and pa.types.is_struct(target):
        # a ROW is assigned field by field, by position (ROW(a, b) has fields EXPR$0, EXPR$1)
        return source.num_fields == target.num_fields and all(
            _assignable(f.type, g.type) for f, g in zip(source, target, strict=True))
    return False


def insert_plan(catalog: Catalog, insert: exp.Insert, settings: Mapping[str, str] | None = None) -> Sink:
    """The logical plan of INSERT INTO t [(cols)] <query>, cast to the sink's column types."""
    check_insert(insert)
    target = insert.this
    columns_node = None
    if isinstance(target, exp.Schema):
        columns_node = target.expressions
        target = target.this
    obj = catalog.get(target.name)
    if obj is None:
        raise plan_error(f"sink table '{target.name}' does not exist", target, target.name)
    if not isinstance(obj, TableDef):
        raise plan_error(f"'{target.name}' is a view; INSERT INTO needs a table", target, target.name)
    if insert.args.get("overwrite"):
        # Flink overwrites only in batch mode (filesystem sinks); sqlstream runs streaming only
        raise plan_error(
            f"INSERT OVERWRITE is not supported in streaming mode ('Streaming mode not support overwrite.' in Flink) "
            f"(execution.runtime-mode = '{setting(settings or {}, 'execution.runtime-mode')}'); "
            "Flink only overwrites in batch mode. Use INSERT INTO", insert)
    obj = with_hint_options(obj, target, settings or {})
    if obj.metadata_columns:
        connector_spec(obj.connector).check_writable_metadata(obj)
    static = _static_partition(obj, target, settings or {})
    query = insert.expression
    rel = QueryBinder(catalog, settings).bind_query(query)
    node = rel.node
    # the query produces the persisted columns the static partition does not fix (Flink's rule)
    sink_cols = [c for c in obj.persisted_columns if c.name.lower() not in static]
    produced = list(node.schema)
    if columns_node:
        named = [c.name.lower() for c in columns_node]
        unknown = [c.name for c in columns_node if obj.column(c.name) is None]
        if unknown:
            raise plan_error(f"sink table '{obj.name}' has no column '{unknown[0]}'", insert, unknown[0])
        fixed = [c.name for c in columns_node if c.name.lower() in static]
        if fixed:
            raise plan_error(f"INSERT INTO {obj.name}: column '{fixed[0]}' has a static value in PARTITION (...) and "
                             "cannot also be in the column list", insert, fixed[0])
        if len(named) != len(produced):
            raise plan_error(
                f"INSERT INTO {obj.name} lists {len(named)} columns but the query produces {len(produced)}", insert
            )
        source_for = {n: i for i, n in enumerate(named)}
    else:
        if len(produced) != len(sink_cols):
            raise plan_error(
                f"INSERT INTO {obj.name}: the query produces {len(produced)} columns but the table has "
                f"{len(sink_cols)} ({', '.join(c.name for c in sink_cols)})",
                query,
            )
        source_for = {c.name.lower(): i for i, c in enumerate(sink_cols)}
    exprs: list[Expr] = []
    for c in obj.persisted_columns:
        if c.name.lower() in static:
            exprs.append(static[c.name.lower()])
            continue
        i = source_for.get(c.name.lower())
        if i is None:
            exprs.append(Literal(None, c.type if c.metadata is None else connector_spec(obj.connector).metadata_type(c)))
            continue
        f = produced[i]
        if not _assignable(f.type, c.type):
            raise plan_error(
                f"INSERT INTO {obj.name}: column '{c.name}' is {sql_type_name(c.type)} but the query produces "
                f"{sql_type_name(f.type)} ('{f.name}'); add a CAST",
                query,
            )
        zone = setting(settings or {}, "table.local-time-zone")
        expr = coerce(ColumnRef(i, f.name, f.type), c.type, zone=zone)
        if c.metadata is not None:  # the connector writes it in its metadata type (Flink casts it so)
            expr = coerce(expr, connector_spec(obj.connector).metadata_type(c), zone=zone)
        exprs.append(expr)
    names = [c.name for c in obj.persisted_columns]
    identity = all(isinstance(e, ColumnRef) and e.index == k for k, e in enumerate(exprs)) and len(exprs) == len(produced)
    if not identity or node.schema.names != names:
        node = Project(node, exprs, names)
    return Sink(node, obj)


def _static_partition(table: TableDef, target: exp.Expression, settings: Mapping[str, str]) -> dict[str, Expr]:
    """``INSERT INTO t PARTITION (k = literal, ...)``: partition column (lower case) -> its value,
    a literal of the column's type."""
    spec = target.args.get("partition") if isinstance(target, exp.Table) else None
    if spec is None:
        return {}
    if not table.partition_keys:
        raise plan_error(f"INSERT INTO {table.name} PARTITION (...): table '{table.name}' is not partitioned "
                         "(no PARTITIONED BY)", spec)
    keys = {k.lower(): k for k in table.partition_keys}
    out: dict[str, Expr] = {}
    for item in spec.expressions:
        if not isinstance(item, exp.EQ) or not isinstance(item.this, exp.Column):
            raise plan_error("PARTITION (...) takes column = literal pairs", item)
        name = item.this.name
        if name.lower() not in keys:
            raise plan_error(f"INSERT INTO {table.name} PARTITION (...): '{name}' is not a partition column of "
                             f"'{table.name}' ({', '.join(table.partition_keys)})", item, name)
        if name.lower() in out:
            raise plan_error(f"partition column '{name}' is given twice in PARTITION (...)", item, name)
        if not isinstance(item.expression, exp.Literal | exp.Null):
            raise plan_error(f"the value of partition column '{name}' must be a literal", item.expression)
        col = table.column(name)
        assert col is not None
        bound = ExprBinder(Scope.of(pa.schema([])), zone="UTC").bind(item.expression)
        value = fold(coerce(bound, col.type, zone=setting(settings, "table.local-time-zone")))
        if not isinstance(value, Literal):
            raise plan_error(f"the value of partition column '{name}' cannot be a {sql_type_name(col.type)}",
                             item.expression)
        out[name.lower()] = value
    return out


def select_plan(catalog: Catalog, query: exp.Expression, settings: Mapping[str, str] | None = None) -> Sink:
    rel = QueryBinder(catalog, settings).bind_query(query)
    return Sink(rel.node, None)


def dataflow(roots: list[Sink], settings: Mapping[str, str] | None = None) -> tuple[list[LogicalNode], Dataflow]:
    """Optimize each root and lower them all into one dataflow (a statement set is one job);
    ``settings`` (the session's SET keys) decide state TTL and state forms."""
    optimized = [optimize(r) for r in roots]
    lowering = Lowering(settings)
    for r in optimized:
        check_sink(r, settings)  # type: ignore[arg-type]
        lowering.lower(r)
    return optimized, Dataflow(lowering.nodes)


def explain_text(roots: list[Sink], settings: Mapping[str, str] | None = None) -> str:
    optimized, flow = dataflow(roots, settings)
    parts = ["== Abstract Syntax Tree ==", *[explain(r) for r in roots], "",
             "== Optimized Logical Plan ==", *[explain(r) for r in optimized], "",
             "== Physical Dataflow ==", flow.explain()]
    return "\n".join(parts)
