"""CREATE TABLE / CREATE VIEW statements into catalog definitions.

Connector options are validated here, so an unknown connector, a misspelt
option or a missing required one fails at CREATE TABLE, before any job runs.
"""

from __future__ import annotations

from sqlglot import exp

from sqlstream.catalog.catalog import Catalog
from sqlstream.core.connectors import connector_spec
from sqlstream.core.errors import ConnectorError, PlanError
from sqlstream.core.sql import dialect
from sqlstream.core.sql.script import parse_one
from sqlstream.core.tables import ColumnDef, MetadataDef, TableDef, ViewDef, WatermarkDef
from sqlstream.core.types import arrow_type
from sqlstream.planner.scope import plan_error
from sqlstream.planner.surface import check_create_table


def table_def(create: exp.Create, catalog: Catalog | None = None) -> TableDef:
    """The table a CREATE TABLE defines; with ``LIKE source``, merged with ``source`` (``catalog``)."""
    check_create_table(create)
    schema = create.this
    like = _like_property(create)
    if not isinstance(schema, exp.Schema) and like is None:
        raise plan_error("CREATE TABLE needs a column list: CREATE TABLE t (col TYPE, ...) WITH (...)", create)
    name = schema.this.name if isinstance(schema, exp.Schema) else schema.name
    columns: list[ColumnDef] = []
    primary_key: tuple[str, ...] = ()
    for item in schema.expressions if isinstance(schema, exp.Schema) else []:
        if isinstance(item, exp.ColumnDef):
            computed = None
            metadata = None
            nullable = True
            for c in item.args.get("constraints") or []:
                kind = c.args.get("kind")
                if isinstance(kind, exp.ComputedColumnConstraint):
                    computed = kind.this.sql(dialect=dialect.Flink)
                elif isinstance(kind, exp.NotNullColumnConstraint) and not kind.args.get("allow_null"):
                    nullable = False
                elif isinstance(kind, exp.PrimaryKeyColumnConstraint):
                    _require_not_enforced(kind, item)
                    primary_key = (item.name,)
                elif isinstance(kind, dialect.MetadataColumnConstraint):
                    key = kind.this.name if isinstance(kind.this, exp.Expression) else None
                    metadata = MetadataDef(key, bool(kind.args.get("virtual")))
                elif not isinstance(kind, exp.CommentColumnConstraint | exp.NotNullColumnConstraint):
                    raise plan_error(f"column constraint '{c.sql(dialect=dialect.Flink)}' of '{item.name}' is not "
                                     "supported; Flink columns take NOT NULL, PRIMARY KEY NOT ENFORCED and COMMENT",
                                     item, item.name)
            if computed is None:
                if item.args.get("kind") is None:
                    raise plan_error(f"column '{item.name}' needs a type", item, item.name)
                try:
                    col_type = arrow_type(item.args["kind"])
                except PlanError as e:
                    if metadata is None:
                        raise
                    raise plan_error(f"metadata column '{item.name}' ({metadata.sql()}): unsupported SQL type "
                                     f"{item.args['kind'].sql(dialect=dialect.Flink)}", item, item.name) from e
            else:
                col_type = None
            columns.append(ColumnDef(item.name, col_type, nullable, computed, metadata))  # type: ignore[arg-type]
        elif isinstance(item, exp.PrimaryKey):
            _require_not_enforced(item, item)
            primary_key = tuple(e.name for e in item.expressions)
        elif isinstance(item, exp.Constraint) and len(item.expressions) == 1 and isinstance(
                item.expressions[0], exp.PrimaryKey):  # CONSTRAINT name PRIMARY KEY (...), as SHOW CREATE writes
            _require_not_enforced(item.expressions[0], item)
            primary_key = tuple(e.name for e in item.expressions[0].expressions)
        elif not isinstance(item, exp.WatermarkColumnConstraint):
            raise plan_error(f"'{item.sql(dialect=dialect.Flink)}' is not supported in CREATE TABLE; a table declares "
                             "columns, one PRIMARY KEY (...) NOT ENFORCED and one WATERMARK", item)
    wms = dialect.watermarks(create)
    watermarks = [WatermarkDef(wm.this.name, wm.expression.sql(dialect=dialect.Flink)) for wm in wms]
    options = dialect.table_options(create)
    if like is not None:
        columns, primary_key, watermarks, options = _merge_like(
            like, catalog, columns, primary_key, watermarks, options)
    names = [c.name.lower() for c in columns]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise plan_error(f"column '{dup}' is declared twice in table '{name}'", create)
    for k in primary_key:
        if k.lower() not in names:
            raise plan_error(f"PRIMARY KEY column '{k}' is not a column of '{name}'", create)
    if len(watermarks) > 1:
        raise plan_error("a table can declare only one WATERMARK", wms[-1] if wms else create)
    for node in wms:
        if any(isinstance(n, exp.Anonymous) and n.name.upper() == "SOURCE_WATERMARK" for n in node.expression.walk()):
            raise plan_error("WATERMARK ... AS SOURCE_WATERMARK() is not supported: no sqlstream source emits watermarks "
                             "of its own; declare WATERMARK FOR ts AS <expression>", node.expression)
    for wm in watermarks:
        if wm.column.lower() not in names:
            node = next((w.this for w in wms if w.this.name == wm.column), create)
            raise plan_error(f"WATERMARK column '{wm.column}' is not a column of table '{name}'", node, wm.column)
    temporary = bool(create.args.get("temporary")) or _has_property(create, exp.TemporaryProperty)
    partition_keys = _partition_keys(create, columns, name)
    table = TableDef(name, tuple(columns), options, watermarks[0] if watermarks else None, primary_key, temporary,
                     partition_keys)
    return _type_computed_columns(table, create)


def _partition_keys(create: exp.Create, columns: list[ColumnDef], name: str) -> tuple[str, ...]:
    """PARTITIONED BY (...): physical columns, each once, not all of them (Flink's checks)."""
    props = (create.args.get("properties") or exp.Properties()).expressions
    prop = next((p for p in props if isinstance(p, exp.PartitionedByProperty)), None)
    if prop is None:
        return ()
    by_name = {c.name.lower(): c for c in columns}
    keys: list[str] = []
    for e in prop.this.expressions if isinstance(prop.this, exp.Schema) else [prop.this]:
        if not isinstance(e, exp.Identifier | exp.Column):
            raise plan_error(f"PARTITIONED BY takes column names, not '{e.sql(dialect=dialect.Flink)}'", e)
        col = by_name.get(e.name.lower())
        if col is None:
            raise plan_error(f"partition column '{e.name}' is not a column of table '{name}'", e, e.name)
        if col.computed is not None:
            raise plan_error(f"partition column '{e.name}' of table '{name}' is a computed column; "
                             "partition columns must be physical", e, e.name)
        if col.name in keys:
            raise plan_error(f"partition column '{e.name}' is listed twice in PARTITIONED BY", e, e.name)
        keys.append(col.name)
    if len(keys) == len([c for c in columns if c.computed is None]):
        raise plan_error(f"table '{name}': every physical column is a partition column; the files would hold "
                         "no column", prop)
    return tuple(keys)


def _require_not_enforced(key: exp.Expression, node: exp.Expression) -> None:
    options = [o.sql() if isinstance(o, exp.Expression) else str(o) for o in key.args.get("options") or []]
    if not any(o.upper() == "NOT ENFORCED" for o in options):
        raise plan_error("Flink doesn't support ENFORCED mode for PRIMARY KEY constraint: Flink does not own the "
                         "data, so the only supported mode is NOT ENFORCED; write PRIMARY KEY (...) NOT ENFORCED", node)


def _like_property(create: exp.Create) -> exp.LikeProperty | None:
    props = create.args.get("properties")
    likes = [p for p in props.expressions if isinstance(p, exp.LikeProperty)] if props else []
    if len(likes) > 1:
        raise plan_error("a CREATE TABLE takes one LIKE clause", likes[1])
    return likes[0] if likes else None


# Flink's merging strategy per feature when a LIKE clause names none: INCLUDING ALL OVERWRITING OPTIONS.
_LIKE_DEFAULTS = {"CONSTRAINTS": "INCLUDING", "GENERATED": "INCLUDING", "OPTIONS": "OVERWRITING",
                  "WATERMARKS": "INCLUDING", "PARTITIONS": "INCLUDING", "METADATA": "INCLUDING"}
_NOT_OVERWRITABLE = ("ALL", "CONSTRAINTS", "PARTITIONS")


def like_strategies(like: exp.LikeProperty) -> dict[str, str]:
    """The merging strategy (INCLUDING, EXCLUDING, OVERWRITING) of each feature, as Flink computes it:
    the defaults, then the strategy given for ALL, then those given per feature."""
    given: dict[str, str] = {}
    for option in like.expressions:
        strategy, feature = option.this.name.upper(), option.args["value"].name.upper()
        if feature in given:
            raise plan_error("Each like option feature can be declared only once.", like)
        if strategy == "OVERWRITING" and feature in _NOT_OVERWRITABLE:
            raise plan_error(f"Illegal merging strategy 'OVERWRITING' for '{feature}' option.", like)
        given[feature] = strategy
    result = dict(_LIKE_DEFAULTS)
    if "ALL" in given:
        result = dict.fromkeys(_LIKE_DEFAULTS, given["ALL"])
    result.update({f: s for f, s in given.items() if f != "ALL"})
    return result


def _merge_like(
    like: exp.LikeProperty, catalog: Catalog | None, columns: list[ColumnDef], primary_key: tuple[str, ...],
    watermarks: list[WatermarkDef], options: dict[str, str],
) -> tuple[list[ColumnDef], tuple[str, ...], list[WatermarkDef], dict[str, str]]:
    """Flink's CREATE TABLE ... LIKE: the source's columns first (physical ones always, computed
    ones per GENERATED, metadata ones per METADATA), then the new ones; key, watermarks and options
    merged per strategy."""
    source_name = like.this.name
    source = catalog.get(source_name) if catalog is not None else None
    if source is None:
        raise plan_error(f"Source table '{source_name}' of the LIKE clause not found in the catalog",
                         like.this, source_name)
    if not isinstance(source, TableDef):
        raise plan_error(f"Source table '{source_name}' of the LIKE clause can not be a VIEW", like.this, source_name)
    strategy = like_strategies(like)

    merged = [c for c in source.columns
              if (c.computed is None or strategy["GENERATED"] != "EXCLUDING")
              and (c.metadata is None or strategy["METADATA"] != "EXCLUDING")]
    for c in columns:
        existing = next((i for i, m in enumerate(merged) if m.name.lower() == c.name.lower()), None)
        if existing is None:
            merged.append(c)
        elif c.computed is not None and merged[existing].computed is not None:
            if strategy["GENERATED"] == "INCLUDING":
                raise plan_error(f"A generated column named '{c.name}' already exists in the base table. "
                                 "You might want to specify EXCLUDING GENERATED or OVERWRITING GENERATED.", like)
            merged[existing] = c
        elif c.metadata is not None and merged[existing].metadata is not None:
            if strategy["METADATA"] == "INCLUDING":
                raise plan_error(f"A metadata column named '{c.name}' already exists in the base table. "
                                 "You might want to specify EXCLUDING METADATA or OVERWRITING METADATA.", like)
            merged[existing] = c
        else:
            raise plan_error(f"A column named '{c.name}' already exists in the base table.", like)

    key = primary_key
    if strategy["CONSTRAINTS"] == "INCLUDING" and source.primary_key:
        if primary_key:
            raise plan_error("The base table already has a primary key. You might want to specify "
                             "EXCLUDING CONSTRAINTS.", like)
        key = source.primary_key

    marks = list(watermarks)
    if source.watermark is not None and strategy["WATERMARKS"] != "EXCLUDING":
        own = {w.column.lower() for w in watermarks}
        if source.watermark.column.lower() not in own:
            marks.insert(0, source.watermark)
        elif strategy["WATERMARKS"] == "INCLUDING":
            raise plan_error(f"There already exists a watermark spec for column '{source.watermark.column}' in the "
                             "base table. You might want to specify EXCLUDING WATERMARKS or OVERWRITING WATERMARKS.",
                             like)

    merged_options = dict(options)
    if strategy["OPTIONS"] != "EXCLUDING":
        for k, v in source.options.items():
            if k in options and strategy["OPTIONS"] == "INCLUDING":
                raise plan_error(f"There already exists an option ['{k}' -> '{v}'] in the base table. "
                                 "You might want to specify EXCLUDING OPTIONS or OVERWRITING OPTIONS.", like)
        merged_options = {**source.options, **options}
    return merged, key, marks, merged_options


def _has_property(create: exp.Create, kind: type) -> bool:
    props = create.args.get("properties")
    return bool(props) and any(isinstance(p, kind) for p in props.expressions)


def _type_computed_columns(table: TableDef, create: exp.Create) -> TableDef:
    """Computed columns get their type by binding their expression over the physical columns."""
    if all(c.computed is None for c in table.columns):
        return table
    from sqlstream.planner.expr_binder import ExprBinder
    from sqlstream.planner.scope import Scope

    scope = Scope.of(table.source_schema)
    columns = []
    for c in table.columns:
        if c.computed is None:
            columns.append(c)
            continue
        try:
            # only the column's type is kept here, which no zone changes; queries bind it in theirs
            bound = ExprBinder(scope, zone="UTC").bind(parse_one(c.computed))
        except PlanError as e:
            raise PlanError(f"computed column '{c.name}' of table '{table.name}': {e.message}") from None
        columns.append(ColumnDef(c.name, bound.type, True, c.computed))
    return TableDef(table.name, tuple(columns), table.options, table.watermark, table.primary_key, table.temporary,
                    table.partition_keys)


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
