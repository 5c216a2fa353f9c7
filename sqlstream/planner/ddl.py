"""CREATE TABLE / CREATE VIEW statements into catalog definitions.

Connector options are validated here, so an unknown connector, a misspelt
option or a missing required one fails at CREATE TABLE, before any job runs.
"""

from __future__ import annotations

from sqlglot import exp

from sqlstream.core.connectors import connector_spec
from sqlstream.core.errors import ConnectorError, PlanError
from sqlstream.core.sql import dialect
from sqlstream.core.sql.script import parse_one
from sqlstream.core.tables import ColumnDef, TableDef, ViewDef, WatermarkDef
from sqlstream.core.types import arrow_type
from sqlstream.planner.scope import plan_error


def table_def(create: exp.Create) -> TableDef:
    schema = create.this
    if not isinstance(schema, exp.Schema):
        raise plan_error("CREATE TABLE needs a column list: CREATE TABLE t (col TYPE, ...) WITH (...)", create)
    name = schema.this.name
    columns: list[ColumnDef] = []
    primary_key: tuple[str, ...] = ()
    for item in schema.expressions:
        if isinstance(item, exp.ColumnDef):
            computed = None
            nullable = True
            for c in item.args.get("constraints") or []:
                kind = c.args.get("kind")
                if isinstance(kind, exp.ComputedColumnConstraint):
                    computed = kind.this.sql(dialect=dialect.Flink)
                elif isinstance(kind, exp.NotNullColumnConstraint) and not kind.args.get("allow_null"):
                    nullable = False
                elif isinstance(kind, exp.PrimaryKeyColumnConstraint):
                    primary_key = (item.name,)
                elif isinstance(kind, dialect.MetadataColumnConstraint):
                    raise plan_error("METADATA columns are not supported yet", item)
            if computed is None:
                if item.args.get("kind") is None:
                    raise plan_error(f"column '{item.name}' needs a type", item, item.name)
                col_type = arrow_type(item.args["kind"])
            else:
                col_type = None
            columns.append(ColumnDef(item.name, col_type, nullable, computed))  # type: ignore[arg-type]
        elif isinstance(item, exp.PrimaryKey):
            primary_key = tuple(e.name for e in item.expressions)
    names = [c.name.lower() for c in columns]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise plan_error(f"column '{dup}' is declared twice in table '{name}'", create)
    for k in primary_key:
        if k.lower() not in names:
            raise plan_error(f"PRIMARY KEY column '{k}' is not a column of '{name}'", create)
    wms = dialect.watermarks(create)
    if len(wms) > 1:
        raise plan_error("a table can declare only one WATERMARK", wms[1])
    watermark = None
    if wms:
        wm = wms[0]
        col = wm.this.name
        if col.lower() not in names:
            raise plan_error(f"WATERMARK column '{col}' is not a column of table '{name}'", wm.this, col)
        watermark = WatermarkDef(col, wm.expression.sql(dialect=dialect.Flink))
    temporary = bool(create.args.get("temporary")) or _has_property(create, exp.TemporaryProperty)
    table = TableDef(name, tuple(columns), dialect.table_options(create), watermark, primary_key, temporary)
    return _type_computed_columns(table, create)


def _has_property(create: exp.Create, kind: type) -> bool:
    props = create.args.get("properties")
    return bool(props) and any(isinstance(p, kind) for p in props.expressions)


def _type_computed_columns(table: TableDef, create: exp.Create) -> TableDef:
    """Computed columns get their type by binding their expression over the physical columns."""
    if all(c.computed is None for c in table.columns):
        return table
    from sqlstream.planner.expr_binder import ExprBinder
    from sqlstream.planner.scope import Scope

    scope = Scope.of(table.physical_schema)
    columns = []
    for c in table.columns:
        if c.computed is None:
            columns.append(c)
            continue
        try:
            bound = ExprBinder(scope).bind(parse_one(c.computed))
        except PlanError as e:
            raise PlanError(f"computed column '{c.name}' of table '{table.name}': {e.message}") from None
        columns.append(ColumnDef(c.name, bound.type, True, c.computed))
    return TableDef(table.name, tuple(columns), table.options, table.watermark, table.primary_key, table.temporary)


def validate_table(table: TableDef) -> None:
    """Check the connector exists and accepts these options (raises ConnectorError)."""

    if "connector" not in table.options:
        raise ConnectorError(
            f"table '{table.name}' has no 'connector' option; add WITH ('connector' = '...')"
        )
    connector_spec(table.connector).validate(table)


def view_def(create: exp.Create) -> ViewDef:
    target = create.this
    name = target.this.name if isinstance(target, exp.Schema) else target.name
    query = create.expression
    if query is None:
        raise plan_error("CREATE VIEW needs AS SELECT ...", create)
    if isinstance(target, exp.Schema) and target.expressions:
        cols = ", ".join(f"`{c.name}`" for c in target.expressions)
        text = f"SELECT * FROM ({query.sql(dialect=dialect.Flink)}) AS `{name}` ({cols})"
    else:
        text = query.sql(dialect=dialect.Flink)
    temporary = bool(create.args.get("temporary")) or _has_property(create, exp.TemporaryProperty)
    return ViewDef(name, text, temporary)
