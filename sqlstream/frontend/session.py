"""A session: a catalog, settings, and the execution of SQL statements.

The CLI, the shell and the Table API all go through :class:`Session`, so
every front-end plans and runs SQL the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from sqlstream.catalog.persistent import CatalogManager, FunctionDef, parse_statements
from sqlstream.core import config as config_keys
from sqlstream.core.aggregates import BUILT_INS
from sqlstream.core.config import setting
from sqlstream.core.errors import PlanError, SqlError
from sqlstream.core.functions import REGISTRY, udfs
from sqlstream.core.secrets import mask_options
from sqlstream.core.sql import dialect
from sqlstream.core.sql.script import Statement, parse_one
from sqlstream.core.tables import TableDef, ViewDef
from sqlstream.core.types import sql_type_name
from sqlstream.planner import ddl, planner
from sqlstream.planner.binder import QueryBinder
from sqlstream.planner.logical import Sink
from sqlstream.runtime.elements import Chunk
from sqlstream.runtime.executor import JobConfig, JobExecutor, JobResult, parse_parallelism

RowConsumer = Callable[[Chunk, pa.Schema], None]


@dataclass
class StatementResult:
    kind: str  # OK | TABLE | JOB
    message: str = ""
    table: pa.Table | None = None
    job: JobResult | None = None


@dataclass
class Session:
    catalog: CatalogManager = field(default_factory=CatalogManager)
    config: dict[str, str] = field(default_factory=dict)
    # the next job resumes from this checkpoint/savepoint (sqlstream run --restore)
    restore_from: str | None = None
    allow_non_restored_state: bool = False
    current_executor: JobExecutor | None = None

    # ---------------------------------------------------------------- entry points
    def execute_script(self, sql: str, on_rows: RowConsumer | None = None,
                       on_result: Callable[[Statement, StatementResult], None] | None = None) -> list[StatementResult]:
        """Run every statement of a script in order; errors carry the script's line and column."""
        results = []
        for stmt in parse_statements(sql):
            try:
                result = self.execute_statement(stmt.node, on_rows)
            except SqlError as e:
                if e.line is None:
                    e.line, e.col = stmt.line, stmt.col
                e.sql = sql
                e.args = (e.render(),)
                raise
            results.append(result)
            if on_result is not None:
                on_result(stmt, result)
        return results

    def execute_statement(self, node: exp.Expression, on_rows: RowConsumer | None = None) -> StatementResult:
        # catalogs and databases: CREATE/DROP/USE CATALOG|DATABASE, SHOW CATALOGS|DATABASES|CURRENT ...
        if isinstance(node, exp.Show):
            return self._show_like(node)
        shown = self.catalog.execute(node)
        if shown is not None:
            return StatementResult("TABLE", table=shown) if isinstance(shown, pa.Table) else StatementResult("OK", shown)
        if isinstance(node, exp.Create):
            return self._create(node)
        if isinstance(node, exp.Drop):
            return self._drop(node)
        if isinstance(node, exp.Describe):
            return self._describe(node)
        if isinstance(node, dialect.Explain):
            return StatementResult("OK", planner.explain_text(self._roots(node.this), self.config))
        if isinstance(node, exp.Set):
            return self._set(node)
        if isinstance(node, dialect.Reset):
            if node.this is None:
                self.config.clear()
            else:
                self.config.pop(node.this.name, None)
            return StatementResult("OK", "[INFO] Session property has been reset.")
        if isinstance(node, exp.Insert | dialect.StatementSet):
            return self.run(self._roots(node), on_rows)
        if isinstance(node, exp.Query):
            return self.run(self._roots(node), on_rows)
        raise PlanError(f"unsupported statement: {node.sql(dialect=dialect.Flink)[:80]}")

    # ---------------------------------------------------------------- planning
    def _roots(self, node: exp.Expression) -> list[Sink]:
        self._load_functions()
        if isinstance(node, dialect.StatementSet):
            return [planner.insert_plan(self.catalog, i, self.config) for i in node.expressions]
        if isinstance(node, exp.Insert):
            return [planner.insert_plan(self.catalog, node, self.config)]
        if isinstance(node, exp.Query):
            return [planner.select_plan(self.catalog, node, self.config)]
        raise PlanError(f"cannot plan '{node.sql(dialect=dialect.Flink)[:60]}'")

    def _load_functions(self) -> None:
        """Functions created in an earlier session (persistent catalogs) are imported on first use."""

        for fn in self.catalog.functions():
            if fn.name.upper() not in udfs.USER_SCALARS and fn.name.upper() not in udfs.USER_AGGREGATES:
                udfs.register(fn.name, udfs.load(fn.identifier))

    def run(self, roots: list[Sink], on_rows: RowConsumer | None = None) -> StatementResult:
        _, flow = planner.dataflow(roots, self.config)
        collected: list[pa.RecordBatch] = []
        kinds: list[pa.Array] = []
        schema = roots[0].schema

        def collect(chunk: Chunk) -> None:
            if on_rows is not None:
                on_rows(chunk, schema)
            else:
                collected.append(chunk.batch)
                kinds.append(chunk.kinds_or_inserts())

        # `sqlstream run --restore` wins over SET 'execution.savepoint.path', as Flink's -s over the key
        restore = self.restore_from or setting(self.config, "execution.savepoint.path")
        allow = self.allow_non_restored_state or setting(self.config, "execution.savepoint.ignore-unclaimed-state")
        executor = self._executor_class()(flow, JobConfig.from_settings(self.config), collect, restore=restore,
                                          allow_non_restored_state=allow)
        self.current_executor = executor
        try:
            job = executor.run()
        finally:
            self.current_executor = None
        if roots[0].table is None and on_rows is None:
            table = pa.Table.from_batches(collected, schema=schema) if collected else schema.empty_table()
            if kinds:
                table = table.append_column("op", pa.concat_arrays(kinds))
            return StatementResult("TABLE", table=table, job=job)
        return StatementResult("JOB", "[INFO] Job finished." if not job.cancelled else "[INFO] Job cancelled.", job=job)

    def _executor_class(self) -> type[JobExecutor]:
        """`SET 'execution.target'`: 'local' (threads in this process, the default) or 'ray' (actors on
        a Ray cluster, `'ray.address'`); Ray is an optional extra, imported only when chosen."""
        if setting(self.config, "execution.target") == "local":
            return JobExecutor
        from sqlstream.runtime.ray_executor import RayJobExecutor

        return RayJobExecutor

    # ---------------------------------------------------------------- DDL & meta
    def _create(self, node: exp.Create) -> StatementResult:
        kind = (node.args.get("kind") or "").upper()
        exists = bool(node.args.get("exists"))
        if kind == "TABLE":
            if node.expression is not None:
                raise PlanError("CREATE TABLE ... AS SELECT is not supported yet; CREATE TABLE then INSERT INTO")
            table = ddl.table_def(node, self.catalog)
            if exists and self.catalog.get(table.name) is not None:
                return StatementResult("OK", "[INFO] Table already exists, skipped.")
            ddl.validate_table(table)
            self.catalog.create(table, exists)
            return StatementResult("OK", "[INFO] Execute statement succeeded.")
        if kind == "VIEW":
            for prop in (node.args.get("properties") or exp.Properties()).expressions:
                if not isinstance(prop, exp.TemporaryProperty | exp.SchemaCommentProperty):
                    raise PlanError(f"CREATE VIEW takes no WITH options or other properties: {prop.sql(dialect=dialect.Flink)}")
            view = ddl.view_def(node)
            if exists and self.catalog.get(view.name) is not None:
                return StatementResult("OK", "[INFO] View already exists, skipped.")
            QueryBinder(self.catalog, self.config).bind_query(node.expression)  # fail now, not at first use
            self.catalog.create(view, exists)
            return StatementResult("OK", "[INFO] Execute statement succeeded.")
        if kind == "FUNCTION":
            name = node.this.name
            if exists and (name.upper() in udfs.USER_AGGREGATES or name.upper() in udfs.USER_SCALARS):
                return StatementResult("OK", "[INFO] Function already exists, skipped.")
            language = next((p.name for p in (node.args.get("properties") or exp.Properties()).expressions
                             if isinstance(p, exp.LanguageProperty)), "PYTHON")
            if language.upper() != "PYTHON":
                raise PlanError(f"LANGUAGE {language} is not supported; sqlstream functions are Python")
            udfs.register(name, udfs.load(node.expression.name))
            temporary = _has_temporary(node)
            self.catalog.create_function(FunctionDef(name, node.expression.name, "PYTHON", temporary), exists)
            return StatementResult("OK", "[INFO] Execute statement succeeded.")
        raise PlanError(f"CREATE {kind} is not supported")

    def _drop(self, node: exp.Drop) -> StatementResult:
        kind = (node.args.get("kind") or "").upper()
        if kind == "FUNCTION":
            for t in node.args.get("tables") or [node.this]:
                self.catalog.drop_function(t.name, bool(node.args.get("exists")))
                udfs.unregister(t.name)
            return StatementResult("OK", "[INFO] Execute statement succeeded.")
        cls = {"TABLE": TableDef, "VIEW": ViewDef}.get(kind)
        if cls is None:
            raise PlanError(f"DROP {kind} is not supported")
        if node.args.get("cascade") or node.args.get("purge") or node.args.get("constraints"):
            raise PlanError(f"DROP {kind} takes no CASCADE / PURGE: there is nothing that depends on a {kind.lower()}")
        for t in node.args.get("tables") or [node.this]:
            self.catalog.drop(t.name, cls, bool(node.args.get("exists")))
        return StatementResult("OK", "[INFO] Execute statement succeeded.")

    def _show_like(self, node: exp.Show) -> StatementResult:
        """SHOW ..., its rows filtered by ``LIKE 'pattern'`` (SQL LIKE: % and _, case-sensitive)."""
        if node.args.get("db") is not None:
            raise PlanError(f"SHOW {node.name} FROM <database> is not supported yet; USE the database first")
        shown = self.catalog.execute(node)
        if shown is None:
            result = self._show(node)
        else:
            result = StatementResult("TABLE", table=shown) if isinstance(shown, pa.Table) else StatementResult("OK", shown)
        like = node.args.get("like")
        if like is None:
            return result
        if result.table is None:
            raise PlanError(f"SHOW {node.name} takes no LIKE clause")
        names = result.table.column(0)
        return StatementResult("TABLE", table=result.table.filter(pc.match_like(names, like.name)))

    def _show(self, node: exp.Show) -> StatementResult:
        what = node.name.upper()
        if what == "TABLES":
            names = [t.name for t in self.catalog.tables()] + [v.name for v in self.catalog.views()]
            return StatementResult("TABLE", table=pa.table({"table name": sorted(names)}))
        if what == "VIEWS":
            return StatementResult("TABLE", table=pa.table({"view name": [v.name for v in self.catalog.views()]}))
        if what == "FUNCTIONS":
            # the scalar functions, the aggregates (Flink lists JSON_ARRAYAGG and JSON_OBJECTAGG by
            # their ..._ON_NULL names too) and the window functions OVER takes
            names = sorted({n for n in REGISTRY if n[0].isalpha()} | set(BUILT_INS) | {"LAG", "ROW_NUMBER"})
            return StatementResult("TABLE", table=pa.table({"function name": names}))
        if what == "CREATE TABLE":
            target = node.args["target"].name
            obj = self.catalog.require(target)
            return StatementResult("OK", show_create(obj))
        raise PlanError(f"SHOW {what} is not supported")

    def _describe(self, node: exp.Describe) -> StatementResult:
        name = node.this.name
        obj = self.catalog.require(name)
        if isinstance(obj, ViewDef):
            schema = QueryBinder(self.catalog).bind_query(parse_view(obj)).node.schema
            rows = [(f.name, sql_type_name(f.type), True, None, None, None) for f in schema]
        else:
            rows = []
            for c in obj.columns:
                wm = obj.watermark.expression if obj.watermark and obj.watermark.column.lower() == c.name.lower() else None
                extras = f"AS {c.computed}" if c.computed else (c.metadata.sql() if c.metadata else None)
                key = f"PRI({', '.join(obj.primary_key)})" if c.name in obj.primary_key else None
                rows.append((c.name, sql_type_name(c.type), c.nullable, key, extras, wm))
        cols = list(zip(*rows, strict=True)) if rows else [[]] * 6
        table = pa.table({
            "name": pa.array(cols[0], pa.string()),
            "type": pa.array(cols[1], pa.string()),
            "null": pa.array(cols[2], pa.bool_()),
            "key": pa.array(cols[3], pa.string()),
            "extras": pa.array(cols[4], pa.string()),
            "watermark": pa.array(cols[5], pa.string()),
        })
        return StatementResult("TABLE", table=table)

    def _set(self, node: exp.Set) -> StatementResult:
        items = node.expressions
        if not items:
            keys = sorted(self.config)
            shown = mask_options(self.config)
            return StatementResult("TABLE", table=pa.table({"key": keys, "value": [shown[k] for k in keys]}))
        warnings = []
        for item in items:
            eq = item.this
            if not isinstance(eq, exp.EQ):
                raise PlanError("SET expects 'key' = 'value'")
            key, value = eq.this.name, eq.expression.name
            if key == "parallelism.default":
                parse_parallelism(key, value)  # refused now rather than when a job starts
            warning = config_keys.validate(key, value)
            if warning is not None:
                warnings.append(f"[WARNING] {warning}\n")
            self.config[key] = value
        return StatementResult("OK", "".join(warnings) + "[INFO] Execute statement succeeded.")


def _has_temporary(node: exp.Create) -> bool:
    props = node.args.get("properties")
    return bool(node.args.get("temporary")) or bool(props) and any(
        isinstance(p, exp.TemporaryProperty) for p in props.expressions)


def parse_view(view: ViewDef) -> exp.Expression:
    return parse_one(view.query)


def show_create(obj: TableDef | ViewDef) -> str:
    if isinstance(obj, ViewDef):
        return f"CREATE VIEW `{obj.name}` AS\n{obj.query}"
    lines = []
    for c in obj.columns:
        if c.computed:
            lines.append(f"  `{c.name}` AS {c.computed}")
        else:
            metadata = f" {c.metadata.sql()}" if c.metadata else ""
            lines.append(f"  `{c.name}` {sql_type_name(c.type)}{'' if c.nullable else ' NOT NULL'}{metadata}")
    if obj.watermark:
        lines.append(f"  WATERMARK FOR `{obj.watermark.column}` AS {obj.watermark.expression}")
    if obj.primary_key:
        lines.append(f"  PRIMARY KEY ({', '.join(f'`{k}`' for k in obj.primary_key)}) NOT ENFORCED")
    options = ",\n".join(f"  '{k}' = '{v}'" for k, v in mask_options(obj.options).items())
    partitioned = ""
    if obj.partition_keys:  # Flink's SHOW CREATE TABLE puts it between the columns and WITH
        partitioned = f"\nPARTITIONED BY ({', '.join(f'`{k}`' for k in obj.partition_keys)})"
    return f"CREATE TABLE `{obj.name}` (\n" + ",\n".join(lines) + f"\n){partitioned} WITH (\n{options}\n)"
