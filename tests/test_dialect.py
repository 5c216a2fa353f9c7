"""The Flink dialect (planner.dialect) and script parsing (planner.script)."""

from __future__ import annotations

import logging

import pytest
import sqlglot
from sqlglot import exp

from sqlstream.core.errors import PlanError, SqlError
from sqlstream.core.sql.dialect import (
    Explain,
    Flink,
    MetadataColumnConstraint,
    Reset,
    StatementSet,
    WindowTVF,
    interval_months,
    interval_ms,
    position_of,
    table_options,
    watermarks,
)
from sqlstream.core.sql.script import Statement, parse_one, parse_script


def one(sql: str) -> exp.Expression:
    """The only statement of ``sql``."""
    statements = parse_script(sql)
    assert len(statements) == 1, statements
    return statements[0].node


def columns(create: exp.Create) -> dict[str, exp.ColumnDef]:
    return {c.name: c for c in create.this.expressions if isinstance(c, exp.ColumnDef)}


def tvf(sql: str) -> WindowTVF:
    node = one(sql).find(WindowTVF)
    assert node is not None
    return node


# ---------------------------------------------------------------------------
# CREATE TABLE
# ---------------------------------------------------------------------------

FULL_TABLE = """
CREATE TEMPORARY TABLE IF NOT EXISTS orders (
  id INT NOT NULL,
  product STRING,
  price DECIMAL(10, 2),
  total AS price * 2,
  ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND,
  PRIMARY KEY (id, product) NOT ENFORCED
) COMMENT 'all orders'
WITH ('connector' = 'datagen', 'rows-per-second' = '10')
"""


def test_create_table_structure() -> None:
    create = one(FULL_TABLE)
    assert isinstance(create, exp.Create)
    assert create.args["kind"] == "TABLE"
    assert create.args["exists"] is True
    schema = create.this
    assert isinstance(schema, exp.Schema)
    assert schema.this.name == "orders"
    props = create.args["properties"].expressions
    assert any(isinstance(p, exp.TemporaryProperty) for p in props)
    comment = next(p for p in props if isinstance(p, exp.SchemaCommentProperty))
    assert comment.this.name == "all orders"

    cols = columns(create)
    assert list(cols) == ["id", "product", "price", "total", "ts"]
    assert cols["id"].args["kind"].this == exp.DType.INT
    not_null = cols["id"].args["constraints"][0].args["kind"]
    assert isinstance(not_null, exp.NotNullColumnConstraint) and not not_null.args.get("allow_null")
    assert cols["product"].args["kind"].this == exp.DType.TEXT
    assert cols["price"].args["kind"].sql(dialect=Flink) == "DECIMAL(10, 2)"
    assert cols["total"].args.get("kind") is None
    computed = cols["total"].args["constraints"][0].args["kind"]
    assert isinstance(computed, exp.ComputedColumnConstraint)
    assert computed.this.sql(dialect=Flink) == "price * 2"
    assert cols["ts"].args["kind"].sql(dialect=Flink) == "TIMESTAMP(3)"

    (watermark,) = watermarks(create)
    assert watermark.this.name == "ts"
    assert watermark.expression.sql(dialect=Flink) == "ts - INTERVAL '5' SECOND"
    assert interval_ms(watermark.expression.expression) == 5000

    (pk,) = [e for e in schema.expressions if isinstance(e, exp.PrimaryKey)]
    assert [e.name for e in pk.expressions] == ["id", "product"]
    assert table_options(create) == {"connector": "datagen", "rows-per-second": "10"}
    option = create.args["properties"].expressions[-1]
    assert type(option) is exp.Property
    assert isinstance(option.this, exp.Literal) and isinstance(option.args["value"], exp.Literal)


def test_create_table_minimal_has_no_options_or_watermark() -> None:
    create = one("CREATE TABLE t (a INT)")
    assert table_options(create) == {}
    assert watermarks(create) == []
    assert not create.args.get("exists")


@pytest.mark.parametrize(
    ("type_sql", "dtype", "params"),
    [
        ("INT", exp.DType.INT, []),
        ("INTEGER", exp.DType.INT, []),
        ("BIGINT", exp.DType.BIGINT, []),
        ("TINYINT", exp.DType.TINYINT, []),
        ("SMALLINT", exp.DType.SMALLINT, []),
        ("STRING", exp.DType.TEXT, []),
        ("VARCHAR(20)", exp.DType.VARCHAR, ["20"]),
        ("CHAR(3)", exp.DType.CHAR, ["3"]),
        ("BOOLEAN", exp.DType.BOOLEAN, []),
        ("DOUBLE", exp.DType.DOUBLE, []),
        ("FLOAT", exp.DType.FLOAT, []),
        ("DECIMAL(12, 4)", exp.DType.DECIMAL, ["12", "4"]),
        ("DATE", exp.DType.DATE, []),
        ("TIME", exp.DType.TIME, []),
        ("TIMESTAMP(3)", exp.DType.TIMESTAMP, ["3"]),
        ("TIMESTAMP_LTZ(3)", exp.DType.TIMESTAMPLTZ, ["3"]),
        ("TIMESTAMP(3) WITH LOCAL TIME ZONE", exp.DType.TIMESTAMPLTZ, ["3"]),
        ("BYTES", exp.DType.VARBINARY, []),
    ],
)
def test_column_types(type_sql: str, dtype: exp.DType, params: list[str]) -> None:
    kind = columns(one(f"CREATE TABLE t (c {type_sql})"))["c"].args["kind"]
    assert kind.this == dtype
    assert [p.name for p in kind.expressions] == params


def test_nested_types() -> None:
    cols = columns(
        one("CREATE TABLE t (a ARRAY<INT>, m MAP<STRING, BIGINT>, r ROW<x INT, y ROW<z STRING>>)")
    )
    array = cols["a"].args["kind"]
    assert array.this == exp.DType.ARRAY and array.expressions[0].this == exp.DType.INT
    mapping = cols["m"].args["kind"]
    assert [e.this for e in mapping.expressions] == [exp.DType.TEXT, exp.DType.BIGINT]
    row = cols["r"].args["kind"]
    assert row.this == exp.DType.STRUCT
    assert [f.name for f in row.expressions] == ["x", "y"]
    assert row.expressions[1].args["kind"].this == exp.DType.STRUCT


def test_metadata_column() -> None:
    cols = columns(one("CREATE TABLE t (ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL)"))
    meta = cols["ts"].args["constraints"][0].args["kind"]
    assert isinstance(meta, MetadataColumnConstraint)
    assert meta.this.name == "timestamp"
    assert meta.args["virtual"] is True


def test_proctime_computed_column() -> None:
    computed = columns(one("CREATE TABLE t (a INT, pt AS PROCTIME())"))["pt"]
    kind = computed.args["constraints"][0].args["kind"]
    assert kind.this.sql(dialect=Flink) == "PROCTIME()"


# ---------------------------------------------------------------------------
# Other DDL and client statements
# ---------------------------------------------------------------------------


def test_create_view() -> None:
    create = one("CREATE TEMPORARY VIEW IF NOT EXISTS v (c1, c2) AS SELECT a, b FROM t")
    assert create.args["kind"] == "VIEW"
    assert create.args["exists"] is True
    assert create.this.this.name == "v"
    assert [c.name for c in create.this.expressions] == ["c1", "c2"]
    assert isinstance(create.expression, exp.Select)
    assert create.expression.sql(dialect=Flink) == "SELECT a, b FROM t"
    props = create.args["properties"].expressions
    assert any(isinstance(p, exp.TemporaryProperty) for p in props)


def test_create_view_without_columns() -> None:
    create = one("CREATE VIEW v AS SELECT 1 AS x")
    assert isinstance(create.this, exp.Table) and create.this.name == "v"
    assert not create.args.get("exists")


@pytest.mark.parametrize(
    ("sql", "kind", "exists"),
    [
        ("DROP TABLE IF EXISTS t", "TABLE", True),
        ("DROP TABLE t", "TABLE", False),
        ("DROP VIEW IF EXISTS t", "VIEW", True),
        ("DROP VIEW t", "VIEW", False),
    ],
)
def test_drop(sql: str, kind: str, exists: bool) -> None:
    drop = one(sql)
    assert isinstance(drop, exp.Drop)
    assert drop.kind == kind
    assert bool(drop.args.get("exists")) is exists
    assert [table.name for table in drop.args["tables"]] == ["t"]


@pytest.mark.parametrize("kind", ["TABLES", "VIEWS", "FUNCTIONS"])
def test_show_lists(kind: str) -> None:
    show = one(f"SHOW {kind}")
    assert isinstance(show, exp.Show)
    assert show.name == kind
    assert show.args.get("target") is None


def test_show_create_table() -> None:
    show = one("SHOW CREATE TABLE `my table`")
    assert isinstance(show, exp.Show)
    assert show.name == "CREATE TABLE"
    assert show.args["target"].name == "my table"


def test_show_tables_like() -> None:
    show = one("SHOW TABLES LIKE 'ord%'")
    assert show.name == "TABLES" and show.args["like"].name == "ord%"


@pytest.mark.parametrize("sql", ["DESCRIBE orders", "DESC orders"])
def test_describe(sql: str) -> None:
    describe = one(sql)
    assert isinstance(describe, exp.Describe)
    assert isinstance(describe.this, exp.Table) and describe.this.name == "orders"


def test_explain_select() -> None:
    explain = one("EXPLAIN SELECT a FROM t")
    assert isinstance(explain, Explain)
    assert isinstance(explain.this, exp.Select)
    assert explain.this.sql(dialect=Flink) == "SELECT a FROM t"


def test_explain_plan_for_insert() -> None:
    explain = one("EXPLAIN PLAN FOR INSERT INTO sink SELECT a FROM t")
    assert isinstance(explain.this, exp.Insert)
    assert explain.this.this.name == "sink"
    assert not explain.args.get("details")


def test_explain_details_and_statement_set() -> None:
    explain = one(
        "EXPLAIN CHANGELOG_MODE, ESTIMATED_COST STATEMENT SET BEGIN "
        "INSERT INTO a SELECT 1; INSERT INTO b SELECT 2; END"
    )
    assert [d.name for d in explain.args["details"]] == ["CHANGELOG_MODE", "ESTIMATED_COST"]
    assert isinstance(explain.this, StatementSet)
    assert [i.this.name for i in explain.this.expressions] == ["a", "b"]


def test_set_key_value() -> None:
    node = one("SET 'table.exec.mini-batch.enabled' = 'true'")
    assert isinstance(node, exp.Set)
    (item,) = node.expressions
    assert isinstance(item, exp.SetItem) and isinstance(item.this, exp.EQ)
    assert item.this.this.name == "table.exec.mini-batch.enabled"
    assert item.this.expression.name == "true"


def test_set_alone_lists() -> None:
    node = one("SET")
    assert isinstance(node, exp.Set) and node.expressions == []


def test_reset() -> None:
    node = one("RESET 'parallelism.default'")
    assert isinstance(node, Reset) and node.this.name == "parallelism.default"
    everything = one("RESET")
    assert isinstance(everything, Reset) and everything.this is None


# ---------------------------------------------------------------------------
# Windowing table-valued functions and intervals
# ---------------------------------------------------------------------------


def test_tumble() -> None:
    w = tvf("SELECT * FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))")
    assert w.kind == "TUMBLE"
    assert isinstance(w.table, exp.Table) and w.table.name == "bids"
    assert isinstance(w.time_col, exp.Column) and w.time_col.name == "ts"
    assert [interval_ms(e) for e in w.expressions] == [10_000]
    assert interval_ms(w.size) == 10_000
    assert w.offset is None and w.partition_by == [] and w.alias == ""
    assert isinstance(w.parent, exp.From)


def test_hop_is_slide_then_size() -> None:
    w = tvf(
        "SELECT * FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND, "
        "INTERVAL '10' MINUTE)) AS w"
    )
    assert w.kind == "HOP"
    assert [interval_ms(e) for e in w.expressions] == [5_000, 600_000]
    assert interval_ms(w.slide) == 5_000 and interval_ms(w.size) == 600_000
    assert w.alias == "w"


def test_cumulate_is_step_then_size() -> None:
    w = tvf(
        "SELECT * FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(ts), INTERVAL '2' MINUTE, "
        "INTERVAL '10' MINUTE))"
    )
    assert w.kind == "CUMULATE"
    assert interval_ms(w.step) == 120_000 and interval_ms(w.size) == 600_000


def test_session_partition_by_one_column() -> None:
    w = tvf("SELECT * FROM TABLE(SESSION(TABLE t PARTITION BY k, DESCRIPTOR(ts), INTERVAL '5' MINUTE))")
    assert w.kind == "SESSION"
    assert [c.name for c in w.partition_by] == ["k"]
    assert interval_ms(w.gap) == 300_000
    assert w.size is None


def test_session_partition_by_columns() -> None:
    w = tvf(
        "SELECT * FROM TABLE(SESSION(TABLE t PARTITION BY (k, j), DESCRIPTOR(ts), "
        "INTERVAL '1' HOUR)) s"
    )
    assert [c.name for c in w.partition_by] == ["k", "j"]
    assert all(isinstance(c, exp.Column) for c in w.partition_by)
    assert w.alias == "s"


def test_session_without_partition() -> None:
    w = tvf("SELECT * FROM TABLE(SESSION(TABLE t, DESCRIPTOR(ts), INTERVAL '30' SECOND))")
    assert w.partition_by == [] and interval_ms(w.gap) == 30_000


def test_named_arguments_in_any_order() -> None:
    w = tvf(
        "SELECT * FROM TABLE(TUMBLE(SIZE => INTERVAL '10' MINUTES, DATA => TABLE t, "
        "TIMECOL => DESCRIPTOR(ts)))"
    )
    assert w.table.name == "t" and w.time_col.name == "ts"
    assert [interval_ms(e) for e in w.expressions] == [600_000]


def test_named_hop_reorders_to_positional() -> None:
    w = tvf(
        "SELECT * FROM TABLE(HOP(DATA => TABLE t, TIMECOL => DESCRIPTOR(ts), "
        "SIZE => INTERVAL '1' HOUR, SLIDE => INTERVAL '15' MINUTE))"
    )
    assert [interval_ms(e) for e in w.expressions] == [900_000, 3_600_000]


def test_trailing_offset() -> None:
    w = tvf(
        "SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' DAY, "
        "INTERVAL '8' HOUR))"
    )
    assert [interval_ms(e) for e in w.expressions] == [86_400_000]
    assert interval_ms(w.offset) == 8 * 3_600_000


def test_window_tvf_in_join_with_qualified_table() -> None:
    select = one(
        "SELECT w.window_start FROM TABLE(TUMBLE(TABLE cat.db.t, DESCRIPTOR(ts), "
        "INTERVAL '1' SECOND)) AS w JOIN u ON w.k = u.k"
    )
    w = select.find(WindowTVF)
    assert w.table.name == "t" and w.table.db == "db" and w.table.catalog == "cat"
    (join,) = select.args["joins"]
    assert join.this.name == "u"


def test_window_tvf_as_join_right_side() -> None:
    select = one(
        "SELECT * FROM u JOIN TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' SECOND)) AS w "
        "ON w.k = u.k"
    )
    (join,) = select.args["joins"]
    assert isinstance(join.this, WindowTVF) and join.this.alias == "w"


def test_window_tvf_position_is_recorded() -> None:
    sql = "SELECT *\nFROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' SECOND))"
    assert position_of(tvf(sql)) == (2, 6)


@pytest.mark.parametrize(
    ("sql", "message", "token"),
    [
        ("TUMBLE(TABLE t, DESCRIPTOR(ts))", "TUMBLE is missing SIZE", "TUMBLE"),
        (
            "TUMBLE(TABLE t PARTITION BY k, DESCRIPTOR(ts), INTERVAL '1' SECOND)",
            "PARTITION BY is only allowed for SESSION",
            "TABLE",
        ),
        ("TUMBLE(TABLE (SELECT 1), DESCRIPTOR(ts), INTERVAL '1' SECOND)", "table name", "(S"),
        (
            "TUMBLE(DATA => TABLE t, TIMECOL => DESCRIPTOR(ts), WIDTH => INTERVAL '1' SECOND)",
            "TUMBLE has no parameter WIDTH",
            "WIDTH",
        ),
        (
            "TUMBLE(TABLE t, INTERVAL '1' SECOND, DESCRIPTOR(ts))",
            "TIMECOL must be DESCRIPTOR",
            "INTERVAL",
        ),
        (
            "SESSION(TABLE t, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '1' SECOND)",
            "too many arguments for SESSION",
            "INTERVAL '1' SECOND)",
        ),
    ],
)
def test_window_tvf_errors(sql: str, message: str, token: str) -> None:
    with pytest.raises(SqlError) as info:
        parse_script(f"SELECT * FROM TABLE({sql})")
    assert message in info.value.message
    # A token is named by a prefix of the text at its position, which locates it uniquely.
    assert token.startswith(info.value.token)
    assert info.value.line == 1
    assert info.value.col == len("SELECT * FROM TABLE(") + sql.index(token) + 1


@pytest.mark.parametrize(
    ("interval", "ms"),
    [
        ("INTERVAL '10' SECOND", 10_000),
        ("INTERVAL '10' SECONDS", 10_000),
        ("INTERVAL '1' MINUTE", 60_000),
        ("INTERVAL '3' MINUTES", 180_000),
        ("INTERVAL '1' HOUR", 3_600_000),
        ("INTERVAL '2' DAY", 172_800_000),
        ("INTERVAL '250' MILLISECOND", 250),
        ("INTERVAL '1.5' SECOND", 1_500),
        ("INTERVAL '-5' SECOND", -5_000),
        ("INTERVAL '1:30' MINUTE TO SECOND", 90_000),
        ("INTERVAL '2:15' HOUR TO MINUTE", 8_100_000),
        ("INTERVAL '1 02:00:03.5' DAY TO SECOND", 93_603_500),
    ],
)
def test_interval_ms(interval: str, ms: int) -> None:
    assert interval_ms(parse_one(interval)) == ms


@pytest.mark.parametrize(
    ("interval", "months"),
    [
        ("INTERVAL '14' MONTH", 14),
        ("INTERVAL '2' YEARS", 24),
        ("INTERVAL '1' QUARTER", 3),
        ("INTERVAL '-1-2' YEAR TO MONTH", -14),
        ("INTERVAL '1' DAY", None),
        ("INTERVAL '1:30' MINUTE TO SECOND", None),
    ],
)
def test_interval_months(interval: str, months: int | None) -> None:
    assert interval_months(parse_one(interval)) == months


def test_year_to_month_value_must_match() -> None:
    with pytest.raises(PlanError, match="does not match YEAR TO MONTH"):
        interval_months(parse_one("INTERVAL '1:2' YEAR TO MONTH"))


@pytest.mark.parametrize(
    ("interval", "message"),
    [
        ("INTERVAL '1' MONTH", "a year-month interval has no fixed length"),
        ("INTERVAL '1' YEAR", "a year-month interval has no fixed length"),
        ("INTERVAL '1-2' YEAR TO MONTH", "a year-month interval has no fixed length"),
        ("INTERVAL '1' QUARTER", "a year-month interval has no fixed length"),
        ("INTERVAL x SECOND", "must be a constant"),
        ("INTERVAL '1:xx' MINUTE TO SECOND", "does not match MINUTE TO SECOND"),
    ],
)
def test_interval_ms_errors(interval: str, message: str) -> None:
    node = parse_script(f"SELECT a,\n  {interval} FROM t")[0].node.expressions[1]
    with pytest.raises(PlanError) as info:
        interval_ms(node)
    assert message in info.value.message
    assert (info.value.line, info.value.col) == (2, 3)


def test_interval_ms_rejects_non_interval() -> None:
    with pytest.raises(PlanError, match="expected a constant INTERVAL"):
        interval_ms(parse_one("a + 1"))


# ---------------------------------------------------------------------------
# Queries and expressions the default dialect already knows
# ---------------------------------------------------------------------------


def test_insert_select() -> None:
    insert = one("INSERT INTO sink SELECT a FROM src")
    assert isinstance(insert, exp.Insert)
    assert insert.this.name == "sink"
    assert isinstance(insert.expression, exp.Select)


def test_insert_with_columns() -> None:
    insert = one("INSERT INTO sink (a, b) SELECT x, y FROM src")
    assert isinstance(insert.this, exp.Schema)
    assert insert.this.this.name == "sink"
    assert [c.name for c in insert.this.expressions] == ["a", "b"]


def test_insert_values() -> None:
    insert = one("INSERT INTO sink VALUES (1, 'a'), (2, 'b')")
    values = insert.expression
    assert isinstance(values, exp.Values)
    assert [[v.this for v in row.expressions] for row in values.expressions] == [
        ["1", "a"],
        ["2", "b"],
    ]


def test_temporal_join() -> None:
    select = one(
        "SELECT * FROM orders AS o JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.cur = r.cur"
    )
    (join,) = select.args["joins"]
    table = join.this
    assert table.name == "rates" and table.alias == "r"
    version = table.args["version"]
    assert isinstance(version, exp.Version)
    assert version.expression.sql(dialect=Flink) == "o.ts"
    assert join.args["on"].sql(dialect=Flink) == "o.cur = r.cur"


def test_row_number_over() -> None:
    window = one("SELECT ROW_NUMBER() OVER (PARTITION BY a ORDER BY ts DESC) AS rn FROM t").find(
        exp.Window
    )
    assert isinstance(window.this, exp.RowNumber)
    assert [p.name for p in window.args["partition_by"]] == ["a"]
    (order,) = window.args["order"].expressions
    assert order.this.name == "ts" and order.args["desc"] is True


def test_over_range_interval_frame() -> None:
    window = one(
        "SELECT SUM(x) OVER (PARTITION BY a ORDER BY ts "
        "RANGE BETWEEN INTERVAL '1' HOUR PRECEDING AND CURRENT ROW) FROM t"
    ).find(exp.Window)
    spec = window.args["spec"]
    assert spec.args["kind"] == "RANGE"
    assert interval_ms(spec.args["start"]) == 3_600_000
    assert spec.args["start_side"] == "PRECEDING"
    assert spec.args["end"] == "CURRENT ROW"


@pytest.mark.parametrize(
    ("sql", "node_type", "rendered"),
    [
        ("CAST(x AS TIMESTAMP(3))", exp.Cast, "CAST(x AS TIMESTAMP(3))"),
        ("TRY_CAST(x AS INT)", exp.TryCast, "TRY_CAST(x AS INT)"),
        ("a || b", exp.DPipe, "a || b"),
        ("CASE WHEN a > 1 THEN 'x' ELSE 'y' END", exp.Case, "CASE WHEN a > 1 THEN 'x' ELSE 'y' END"),
        ("name LIKE 'a%'", exp.Like, "name LIKE 'a%'"),
        ("SUBSTRING(s, 1, 2)", exp.Substring, "SUBSTRING(s, 1, 2)"),
        ("SUBSTRING(s FROM 1 FOR 2)", exp.Substring, "SUBSTRING(s, 1, 2)"),
        ("TO_TIMESTAMP_LTZ(x, 3)", exp.UnixToTime, "TO_TIMESTAMP_LTZ(x, 3)"),
        ("TIMESTAMPDIFF(SECOND, a, b)", exp.TimestampDiff, "TIMESTAMPDIFF(SECOND, a, b)"),
        ("TIMESTAMPADD(MINUTE, 5, ts)", exp.TimestampAdd, "TIMESTAMPADD(MINUTE, 5, ts)"),
        ("DATE_FORMAT(ts, 'yyyy-MM-dd')", exp.TimeToStr, "DATE_FORMAT(ts, 'yyyy-MM-dd')"),
        ("t.`my col`", exp.Column, "t.`my col`"),
    ],
)
def test_expressions(sql: str, node_type: type, rendered: str) -> None:
    node = one(f"SELECT {sql} FROM t").expressions[0]
    assert type(node) is node_type
    assert node.sql(dialect=Flink) == rendered


def test_substring_parts() -> None:
    node = one("SELECT SUBSTRING(s FROM 2 FOR 3) FROM t").expressions[0]
    assert node.this.name == "s"
    assert node.args["start"].this == "2" and node.args["length"].this == "3"


def test_timestampdiff_argument_order() -> None:
    node = one("SELECT TIMESTAMPDIFF(SECOND, a, b) FROM t").expressions[0]
    # Flink returns b - a: sqlglot's TimestampDiff is this - expression.
    assert node.this.name == "b" and node.expression.name == "a"
    assert node.unit.name == "SECOND"


def test_date_format_is_strftime() -> None:
    node = one("SELECT DATE_FORMAT(ts, 'yyyy-MM-dd HH:mm:ss') FROM t").expressions[0]
    assert node.args["format"].name == "%Y-%m-%d %H:%M:%S"


def test_to_timestamp_ltz_scale() -> None:
    node = one("SELECT TO_TIMESTAMP_LTZ(epoch_ms, 3) FROM t").expressions[0]
    assert node.this.name == "epoch_ms" and node.args["scale"].this == "3"
    assert node.args["target_type"].this == exp.DType.TIMESTAMPLTZ


def test_qualified_and_backtick_identifiers() -> None:
    select = one("SELECT o.id, `o`.`user name` FROM `cat`.`db`.`orders` AS o")
    first, second = select.expressions
    assert (first.table, first.name) == ("o", "id")
    assert (second.table, second.name) == ("o", "user name")
    assert second.this.args["quoted"] is True
    table = select.args["from_"].this
    assert (table.catalog, table.db, table.name, table.alias) == ("cat", "db", "orders", "o")


def test_identifiers_keep_case() -> None:
    column = one("SELECT MyCol FROM T").expressions[0]
    assert column.name == "MyCol"


def test_comments_are_ignored() -> None:
    select = one("-- leading\nSELECT a /* inline */ FROM t -- trailing\nWHERE a > 1")
    assert select.args["where"].this.sql(dialect=Flink) == "a > 1"


def test_union_all_and_cte() -> None:
    node = one("WITH c AS (SELECT a FROM t) SELECT a FROM c UNION ALL SELECT b FROM u")
    assert isinstance(node, exp.Union) and node.args["distinct"] is False
    (cte,) = node.args["with_"].expressions
    assert cte.alias == "c"


def test_grouping_sets_rollup_cube_having() -> None:
    (sets,) = one("SELECT a FROM t GROUP BY GROUPING SETS ((a), ())").args["group"].expressions
    assert isinstance(sets, exp.GroupingSets)
    assert [e.sql(dialect=Flink) for e in sets.expressions] == ["(a)", "()"]
    (rollup,) = one("SELECT a, b FROM t GROUP BY ROLLUP (a, b)").args["group"].expressions
    assert isinstance(rollup, exp.Rollup)
    assert [c.name for c in rollup.expressions] == ["a", "b"]
    (cube,) = one("SELECT a, b FROM t GROUP BY CUBE (a, b)").args["group"].expressions
    assert isinstance(cube, exp.Cube)
    assert [c.name for c in cube.expressions] == ["a", "b"]
    having = one("SELECT a, COUNT(*) FROM t GROUP BY a HAVING COUNT(*) > 2").args["having"]
    assert having.this.sql(dialect=Flink) == "COUNT(*) > 2"


def test_read_flink_by_name() -> None:
    node = sqlglot.parse_one("SELECT `a` FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), "
                             "INTERVAL '1' SECOND))", read="flink")
    assert isinstance(node.find(WindowTVF), WindowTVF)


# ---------------------------------------------------------------------------
# Statement sets
# ---------------------------------------------------------------------------


def test_execute_statement_set() -> None:
    node = one(
        "EXECUTE STATEMENT SET BEGIN\n"
        "  INSERT INTO a SELECT x FROM t;\n"
        "  INSERT INTO b SELECT CASE WHEN x > 1 THEN 1 END FROM t;\n"
        "END;"
    )
    assert isinstance(node, StatementSet)
    assert [type(i) for i in node.expressions] == [exp.Insert, exp.Insert]
    assert [i.this.name for i in node.expressions] == ["a", "b"]


def test_begin_statement_set() -> None:
    node = one("BEGIN STATEMENT SET;\nINSERT INTO a SELECT 1;\nINSERT INTO b VALUES (2);\nEND;")
    assert isinstance(node, StatementSet)
    assert [i.this.name for i in node.expressions] == ["a", "b"]


def test_statement_set_rejects_select() -> None:
    with pytest.raises(SqlError) as info:
        parse_script("EXECUTE STATEMENT SET BEGIN\nSELECT 1;\nEND;")
    assert "only INSERT statements" in info.value.message
    assert (info.value.line, info.value.col, info.value.token) == (2, 1, "SELECT")


def test_unclosed_statement_set() -> None:
    with pytest.raises(SqlError, match="not closed with END"):
        parse_script("EXECUTE STATEMENT SET BEGIN INSERT INTO a SELECT 1;")


# ---------------------------------------------------------------------------
# Scripts
# ---------------------------------------------------------------------------


def test_script_splitting_and_positions() -> None:
    sql = (
        "-- set up\n"
        "SET 'a' = 'x;y';\n"
        "  SELECT ';' AS s /* ; */ FROM t; ;\n"
        "\n"
        "/* a comment; with a semicolon */\n"
        "EXECUTE STATEMENT SET BEGIN INSERT INTO a SELECT 1; INSERT INTO b SELECT 2; END;\n"
        "SELECT 2 -- no final semicolon"
    )
    statements = parse_script(sql)
    assert [type(s.node) for s in statements] == [exp.Set, exp.Select, StatementSet, exp.Select]
    assert [(s.line, s.col) for s in statements] == [(2, 1), (3, 3), (6, 1), (7, 1)]
    assert statements[0].text == "SET 'a' = 'x;y'"
    assert statements[1].text == "SELECT ';' AS s /* ; */ FROM t"
    assert statements[2].text.startswith("EXECUTE STATEMENT SET BEGIN")
    assert statements[2].text.endswith("END")
    assert statements[3].text == "SELECT 2"
    assert statements[1].node.expressions[0].this.name == ";"


def test_statement_is_frozen_dataclass() -> None:
    statement = parse_script("SELECT 1")[0]
    assert isinstance(statement, Statement)
    with pytest.raises(AttributeError):
        statement.line = 5  # type: ignore[misc]


@pytest.mark.parametrize("sql", ["", "   \n", "-- nothing\n", ";;", "/* x */ ; -- y"])
def test_empty_scripts(sql: str) -> None:
    assert parse_script(sql) == []


def test_positions_in_trees_are_script_positions() -> None:
    statements = parse_script("SELECT 1;\n\nSELECT\n   b FROM t")
    column = statements[1].node.expressions[0]
    assert position_of(column) == (4, 4)


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


def test_error_on_line_three_of_script() -> None:
    sql = "SET 'a' = 'b';\nSELECT 1;\nSELECT a FORM t;\nSELECT 2;"
    with pytest.raises(SqlError) as info:
        parse_script(sql)
    error = info.value
    assert (error.line, error.col, error.token) == (3, 10, "FORM")
    assert "unexpected 'FORM'" in error.message and "FROM" in error.message
    assert error.sql == sql
    assert "\x1b" not in str(error)
    assert str(error).endswith("  SELECT a FORM t;\n           ^")


def test_error_deep_in_multiline_statement() -> None:
    sql = "CREATE TABLE t (\n  a INT,\n  b STRNG\n) WITH ('connector' = 'x');"
    with pytest.raises(SqlError) as info:
        parse_script(sql)
    assert (info.value.line, info.value.col, info.value.token) == (3, 5, "STRNG")
    assert "unknown data type 'STRNG'" in info.value.message


def test_misspelt_statement_keyword() -> None:
    with pytest.raises(SqlError) as info:
        parse_script("SELECT 1;\n  SELEC 1")
    assert (info.value.line, info.value.col, info.value.token) == (2, 3, "SELEC")
    assert "did you mean SELECT" in info.value.message


def test_unterminated_string() -> None:
    with pytest.raises(SqlError) as info:
        parse_script("SELECT 1;\nSELECT 'abc FROM t")
    assert (info.value.line, info.value.col) == (2, 8)
    assert "unterminated string" in info.value.message
    assert info.value.token.startswith("'abc")


def test_unterminated_comment() -> None:
    with pytest.raises(SqlError) as info:
        parse_script("SELECT 1 /* never closed")
    assert (info.value.line, info.value.col) == (1, 10)
    assert "unterminated comment" in info.value.message


def test_stray_close_paren() -> None:
    with pytest.raises(SqlError) as info:
        parse_script("SELECT a)\nFROM t")
    assert (info.value.line, info.value.col, info.value.token) == (1, 9, ")")
    assert "unexpected ')'" in info.value.message


def test_missing_close_paren() -> None:
    with pytest.raises(SqlError) as info:
        parse_script("SELECT (a + 1 FROM t")
    assert (info.value.line, info.value.col, info.value.token) == (1, 15, "FROM")
    assert info.value.message == "expected ')' but found 'FROM'"


def test_incomplete_statement() -> None:
    with pytest.raises(SqlError) as info:
        parse_script("SELECT * FROM t WHERE")
    assert info.value.token == "WHERE"
    assert "end of statement" in info.value.message and "WHERE condition" in info.value.message


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("CREATE TABLE t (a)", "column 'a' needs a data type"),
        ("SELECT FROM t", "expected a column or expression after SELECT"),
        ("INSERT INTO t", "expected a query or VALUES"),
        ("(1 + 2)", "expected a statement, found an expression"),
        ("CREATE TABLE t (ts TIMESTAMP(3), WATERMARK ts AS ts)", "expected FOR"),
        ("SET key", "expected a quoted configuration key"),
        ("SHOW TABLEZ", "expected TABLES"),
        ("EXPLAIN DROP TABLE t", "EXPLAIN needs a query"),
    ],
)
def test_invalid_statements(sql: str, message: str) -> None:
    with pytest.raises(SqlError, match=message):
        parse_script(sql)


@pytest.mark.parametrize(
    ("sql", "token"),
    [
        ("CALL my_proc()", "CALL"),
        ("DELETE FROM t", "DELETE"),
        ("CREATE CATALOG c WITH ('type' = 'x')", "CATALOG"),
        ("ALTER FUNCTION f AS 'x'", "FUNCTION"),
    ],
)
def test_unsupported_statements_are_errors_not_commands(
    sql: str, token: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING), pytest.raises(SqlError) as info:
        parse_script(sql)
    assert info.value.token == token
    assert "unsupported" in info.value.message
    assert not caplog.records


SUPPORTED = [
    FULL_TABLE,
    "CREATE VIEW v AS SELECT a FROM t",
    "DROP TABLE IF EXISTS t",
    "DROP VIEW v",
    "SHOW TABLES",
    "SHOW VIEWS",
    "SHOW FUNCTIONS",
    "SHOW CREATE TABLE t",
    "DESCRIBE t",
    "DESC t",
    "EXPLAIN SELECT 1",
    "EXPLAIN PLAN FOR INSERT INTO s SELECT 1",
    "SET 'k' = 'v'",
    "SET",
    "RESET 'k'",
    "RESET",
    "EXECUTE STATEMENT SET BEGIN INSERT INTO a SELECT 1; INSERT INTO b SELECT 2; END",
    "BEGIN STATEMENT SET; INSERT INTO a SELECT 1; END",
    "INSERT INTO t (a, b) SELECT 1, 2",
    "INSERT INTO t VALUES (1, 'x')",
    "SELECT * FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' MINUTE)) AS w",
    "SELECT * FROM TABLE(SESSION(TABLE t PARTITION BY (k, j), DESCRIPTOR(ts), INTERVAL '5' MINUTE))",
    "SELECT * FROM a JOIN b FOR SYSTEM_TIME AS OF a.ts AS r ON a.id = r.id",
    "SELECT SUM(x) OVER (PARTITION BY a ORDER BY ts RANGE BETWEEN INTERVAL '1' HOUR PRECEDING "
    "AND CURRENT ROW) FROM t",
    "SELECT TIMESTAMPDIFF(SECOND, a, b), DATE_FORMAT(ts, 'yyyy-MM-dd'), TO_TIMESTAMP_LTZ(x, 3) FROM t",
    "WITH c AS (SELECT 1 AS x) SELECT x FROM c UNION ALL SELECT 2",
    "SELECT a FROM t GROUP BY GROUPING SETS ((a), ())",
]


@pytest.mark.parametrize("sql", SUPPORTED)
def test_supported_statements_log_nothing(sql: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        (statement,) = parse_script(sql)
    assert not caplog.records
    assert statement.node.find(exp.Command) is None


@pytest.mark.parametrize("sql", SUPPORTED)
def test_flink_sql_round_trips(sql: str) -> None:
    node = one(sql)
    assert one(node.sql(dialect=Flink)) == node


# ---------------------------------------------------------------------------
# parse_one
# ---------------------------------------------------------------------------


def test_parse_one_statement_and_expressions() -> None:
    assert isinstance(parse_one("SELECT 1"), exp.Select)
    assert parse_one("a + 1").sql(dialect=Flink) == "a + 1"
    assert isinstance(parse_one("(a + 1) * 2"), exp.Mul)
    assert isinstance(parse_one("(SELECT 1) UNION (SELECT 2)"), exp.Union)
    watermark = parse_one("ts - INTERVAL '5' SECOND")
    assert interval_ms(watermark.expression) == 5000


def test_parse_one_errors() -> None:
    with pytest.raises(SqlError) as info:
        parse_one("SELEC 1")
    assert (info.value.line, info.value.col, info.value.token) == (1, 1, "SELEC")
    with pytest.raises(SqlError) as info:
        parse_one("SELECT 1; SELECT 2")
    assert (info.value.col, info.value.token) == (11, "SELECT")
    assert "single statement" in info.value.message
    with pytest.raises(SqlError) as info:
        parse_one("a +")
    assert (info.value.col, info.value.token) == (3, "+")
    with pytest.raises(SqlError, match="found nothing"):
        parse_one("  -- only a comment")
