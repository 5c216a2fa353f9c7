"""The Python Table API: README examples run and equal their SQL spelling; results, types, errors."""

from __future__ import annotations

import datetime as dt
import re
import time
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from sqlstream import EnvironmentSettings, Session, Slide, TableEnvironment, Tumble, call, col, lit
from sqlstream.core.errors import PlanError, SqlStreamError
from sqlstream.frontend.session import Session as SqlSession
from sqlstream.frontend.table_api import Table
from sqlstream.runtime.elements import RowKind
from tests.conftest import apply_changelog, rows

ROOT = Path(__file__).resolve().parent.parent

ORDERS_DDL = """
CREATE TABLE orders (
    order_id INT, category STRING, quantity INT, price DOUBLE, order_time TIMESTAMP(3),
    WATERMARK FOR order_time AS order_time - INTERVAL '5' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'sql-examples/data/orders.csv', 'format' = 'csv');
"""
PRICES = "(VALUES ('a', 3.5), ('b', 2.0), ('a', 4.5), ('c', 1.0)) AS t (sku, price)"

# Every table a README example builds, and the SQL a user would write for it.
README_SQL = {
    "big_orders": "SELECT order_id, quantity * price AS revenue FROM orders WHERE quantity * price > 200",
    "items_per_category": "SELECT category, SUM(quantity) AS items, COUNT(order_id) AS orders FROM orders "
                          "GROUP BY category",
    "orders_per_minute": "SELECT window_start, window_end, category, COUNT(order_id) AS orders "
                         "FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(order_time), INTERVAL '1' MINUTE)) "
                         "GROUP BY window_start, window_end, category",
    "sliding_revenue": "SELECT window_end AS until, SUM(quantity * price) AS revenue "
                       "FROM TABLE(HOP(TABLE orders, DESCRIPTOR(order_time), INTERVAL '1' MINUTE, INTERVAL '2' MINUTE)) "
                       "GROUP BY window_start, window_end",
    "orders": "SELECT * FROM orders",
    "prices": f"SELECT sku, price FROM {PRICES}",
    "per_sku": f"SELECT sku, MAX(price) AS highest FROM {PRICES} WHERE price > 1.5 GROUP BY sku",
}


def readme_examples() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Python Table API", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


def sql_rows(sql: str) -> list[tuple]:
    table = SqlSession().execute_script(ORDERS_DDL + sql + ";")[-1].table
    assert table is not None
    return rows(apply_changelog(table))


def optimized(explained: str) -> str:
    return explained.split("== Optimized Logical Plan ==", 1)[1]


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the examples read sql-examples/data/ relative to the repository root


def test_every_readme_example_runs_and_matches_its_sql(capsys: pytest.CaptureFixture[str]) -> None:
    examples = readme_examples()
    assert len(examples) == 2
    tables: dict[str, Table] = {}
    for code in examples:
        namespace: dict = {}
        exec(compile(code, "README.md", "exec"), namespace)
        tables.update({k: v for k, v in namespace.items() if isinstance(v, Table)})
    assert sorted(tables) == sorted(README_SQL), "each README table needs its SQL here"
    for name, table in tables.items():
        expected = sql_rows(README_SQL[name])
        assert expected, name
        assert rows(table.to_arrow()) == expected, name
    out = capsys.readouterr().out
    assert "+I[" in out and "items" in out and "highest" in out


def test_the_table_api_builds_the_same_plan_as_sql() -> None:
    env = TableEnvironment.create(streaming=True)
    env.execute_sql(ORDERS_DDL)
    session = env.session
    orders = env.from_path("orders")
    cases = {
        "SELECT order_id, quantity * price AS revenue FROM orders WHERE quantity * price > 200":
            orders.where(col("quantity") * col("price") > 200)
                  .select(col("order_id"), (col("quantity") * col("price")).alias("revenue")),
        README_SQL["orders_per_minute"]:
            orders.window(Tumble.over(lit(1).minutes).on(col("order_time")).alias("w"))
                  .group_by(col("w"), col("category"))
                  .select(col("w").start, col("w").end, col("category"), col("order_id").count.alias("orders")),
        "SELECT category, COUNT(DISTINCT quantity) AS q FROM orders WHERE price > 10 GROUP BY category":
            orders.filter(col("price") > 10).group_by(col("category"))
                  .select(col("category"), col("quantity").count.distinct.alias("q")),
    }
    from sqlstream.core.sql.script import parse_one
    from sqlstream.planner import planner

    for sql, table in cases.items():
        assert table.explain() == planner.explain_text(session._roots(parse_one(sql))), sql
    # nested calls are subqueries, which the optimizer flattens into the same plan
    nested = orders.select(col("order_id"), col("quantity"), col("price")).where(col("quantity") > 2) \
        .select((col("price") * 2).alias("p2"))
    flat = "SELECT price * 2 AS p2 FROM orders WHERE quantity > 2"
    assert optimized(nested.explain()) == optimized(planner.explain_text(session._roots(parse_one(flat))))


def test_streaming_collect_is_a_changelog_and_batch_mode_gives_final_rows() -> None:
    query = "SELECT category, SUM(quantity) AS items FROM orders GROUP BY category"
    stream = TableEnvironment.create(streaming=True)
    stream.get_config().set("table.exec.batch-size", "50")
    stream.execute_sql(ORDERS_DDL)
    with stream.sql_query(query).execute().collect() as it:
        changelog = list(it)
    kinds = {r.get_row_kind() for r in changelog}
    assert {RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER} <= kinds
    live: list[tuple] = []
    for r in changelog:
        if r.get_row_kind() in (RowKind.INSERT, RowKind.UPDATE_AFTER):
            live.append(tuple(r))
        else:
            live.remove(tuple(r))
    expected = sql_rows(query)
    assert sorted(live) == expected

    batch = TableEnvironment.create(EnvironmentSettings.in_batch_mode())
    batch.execute_sql(ORDERS_DDL)
    final = list(batch.execute_sql(query).collect())
    assert sorted(tuple(r) for r in final) == expected
    assert {r.get_row_kind() for r in final} == {RowKind.INSERT}
    assert final[0].category == final[0]["category"] == final[0][0]


def test_closing_the_iterator_cancels_an_unbounded_query() -> None:
    env = TableEnvironment.create()
    env.execute_sql("CREATE TABLE gen (n BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '200')")
    started = time.monotonic()
    with env.from_path("gen").select(col("n")).execute().collect() as it:
        first = [next(it) for _ in range(5)]
    assert len(first) == 5 and time.monotonic() - started < 10


def test_from_arrow_keeps_values_and_types() -> None:
    data = pa.table({
        "k": pa.array(["a", "it's", None], pa.string()),
        "i8": pa.array([1, None, -3], pa.int8()),
        "big": pa.array([2**40, 1, None], pa.int64()),
        "f": pa.array([1.5, float("nan"), None], pa.float64()),
        "flag": pa.array([True, False, None]),
        "ts": pa.array([dt.datetime(2024, 1, 1, 0, 0, 1, 500000), None, dt.datetime(2024, 2, 29)], pa.timestamp("ms")),
        "ltz": pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.UTC), None, None], pa.timestamp("ms", tz="UTC")),
        "d": pa.array([Decimal("1.25"), None, Decimal("-3.50")], pa.decimal128(10, 2)),
        "day": pa.array([dt.date(2024, 1, 1), None, dt.date(1999, 12, 31)], pa.date32()),
        "odd name`": pa.array([1, 2, 3], pa.int32()),
    })
    env = TableEnvironment.create()
    table = env.from_arrow(data)
    assert table.get_schema().names == data.column_names and table.get_schema().types == data.schema.types
    out = table.to_arrow()
    assert out.schema.types == data.schema.types and out.column_names == data.column_names
    got, want = out.to_pylist(), data.to_pylist()
    assert [r["f"] != r["f"] for r in got] == [False, True, False]  # NaN survives
    for g, w in zip(got, want, strict=True):
        g.pop("f"), w.pop("f")
    assert got == want
    empty = env.from_arrow(data.slice(0, 0)).to_arrow()
    assert empty.num_rows == 0 and empty.schema.types == data.schema.types


def test_names_that_are_keywords_or_need_quoting() -> None:
    env = TableEnvironment.create()
    t = env.from_arrow(pa.table({"user": ["x", "y", "x"], "select": [1, 2, 3], "a b": [10, 20, 30]}))
    out = t.group_by(col("user")).select(col("user"), (col("select") + col("a b")).sum.alias("from")).to_arrow()
    assert rows(out) == [("x", 44), ("y", 22)]


def test_insert_runs_as_a_job_to_wait_for(tmp_path: Path) -> None:
    env = TableEnvironment.create()
    env.execute_sql(ORDERS_DDL)
    env.execute_sql(f"CREATE TABLE out (category STRING, n BIGINT) WITH "
                    f"('connector' = 'filesystem', 'path' = '{tmp_path}', 'format' = 'csv')")
    orders = env.from_path("orders")
    per_minute = orders.window(Tumble.over(lit(1).minutes).on(col("order_time")).alias("w")) \
        .group_by(col("w"), col("category")).select(col("category"), col("order_id").count.alias("n"))
    result = per_minute.execute_insert("out")
    result.wait(timeout=60)
    env.execute_sql(f"CREATE TABLE back (category STRING, n BIGINT) WITH "
                    f"('connector' = 'filesystem', 'path' = '{tmp_path}', 'format' = 'csv')")
    assert rows(env.from_path("back").to_arrow()) == rows(per_minute.to_arrow())


def test_session_windows_partition_by_the_group_keys() -> None:
    env = TableEnvironment.create()
    env.execute_sql("""CREATE TABLE clicks (`user` STRING, page STRING, ts TIMESTAMP(3),
        WATERMARK FOR ts AS ts - INTERVAL '3' SECOND)
        WITH ('connector' = 'filesystem', 'path' = 'sql-examples/data/clicks.jsonl', 'format' = 'json')""")
    sessions = env.from_path("clicks").window(Session.with_gap(lit(30).seconds).on(col("ts")).alias("s")) \
        .group_by(col("s"), col("user")).select(col("user"), col("s").start, col("page").count.alias("n"))
    sql = ("SELECT `user`, window_start, COUNT(page) AS n FROM TABLE(SESSION(TABLE clicks PARTITION BY `user`, "
           "DESCRIPTOR(ts), INTERVAL '30' SECOND)) GROUP BY window_start, window_end, `user`")
    assert rows(sessions.to_arrow()) == rows(env.sql_query(sql).to_arrow())
    assert "PARTITION BY `user`" in sessions.sql


def test_mistakes_are_reported_in_the_users_terms() -> None:
    env = TableEnvironment.create()
    env.execute_sql(ORDERS_DDL)
    orders = env.from_path("orders")
    with pytest.raises(PlanError, match="unknown column 'pricee'. Did you mean 'price'"):
        orders.select(col("pricee")).to_arrow()
    with pytest.raises(PlanError, match="refers to no window"):
        orders.group_by(col("category")).select(col("w").start)
    with pytest.raises(PlanError, match="grouped by its window"):
        orders.window(Slide.over(lit(2).minutes).every(lit(1).minutes).on(col("order_time")).alias("w")) \
            .group_by(col("category")).select(col("category"))
    with pytest.raises(PlanError, match="one statement"):
        env.execute_sql("SET 'a' = 'b'; SET 'c' = 'd';")
    with pytest.raises(SqlStreamError, match="does not exist"):
        env.from_path("nope")
    with pytest.raises(TypeError, match="truth value"):
        bool(col("a") > 1)
    rounded = orders.select(call("ROUND", col("price"), 0).alias("r")).to_arrow()
    assert rounded.num_rows == 500


def _plus_one(x: int | None) -> int | None:
    return None if x is None else x + 1


def test_python_functions_are_called_from_the_table_api_and_sql() -> None:
    from sqlstream.core.functions import udfs

    env = TableEnvironment.create()
    env.create_temporary_function("plus_one_tapi", _plus_one, pa.int64())
    try:
        t = env.from_arrow(pa.table({"x": pa.array([1, None, 41], pa.int64())}))
        env.create_temporary_view("xs", t)
        via_api = t.select(call("plus_one_tapi", col("x")).alias("y")).to_arrow()
        via_sql = env.sql_query("SELECT PLUS_ONE_TAPI(x) AS y FROM xs").to_arrow()
        assert via_api.column("y").to_pylist() == via_sql.column("y").to_pylist() == [2, None, 42]
        assert "plus_one_tapi" in [f.name for f in env.session.catalog.functions()]
    finally:
        udfs.unregister("plus_one_tapi")


def _lateral_env() -> tuple[TableEnvironment, Table]:
    from tests.udf_samples import Countdown, split_words

    env = TableEnvironment.create(streaming=True)
    env.create_temporary_function("split_words", split_words)
    env.create_temporary_function("countdown", Countdown())
    texts = env.from_arrow(pa.table({"id": pa.array([1, 2, 3], pa.int32()), "s": ["hello big world", None, "a b"],
                                     "n": pa.array([2, 0, None], pa.int32())}))
    env.create_temporary_view("texts", texts)
    return env, env.from_path("texts")


def test_join_lateral_joins_each_row_with_what_the_table_function_yields() -> None:
    env, texts = _lateral_env()
    joined = texts.join_lateral(call("split_words", col("s")).alias("word", "len")).select(col("id"), col("word"), col("len"))
    expected = rows(env.sql_query("SELECT id, word, len FROM texts, LATERAL TABLE(split_words(s)) AS w(word, len)").to_arrow())
    assert rows(joined.to_arrow()) == expected == [(1, "big", 3), (1, "hello", 5), (1, "world", 5), (3, "a", 1),
                                                   (3, "b", 1)]
    # without names the columns are the function's f0, f1, ...; a predicate keeps matching rows only
    unnamed = texts.join_lateral(call("split_words", col("s")), col("f1") > 3).select(col("id"), col("f0"))
    assert rows(unnamed.to_arrow()) == [(1, "hello"), (1, "world")]


def test_left_outer_join_lateral_keeps_rows_that_yield_nothing() -> None:
    env, texts = _lateral_env()
    joined = texts.left_outer_join_lateral(call("countdown", col("n")).alias("x")).select(col("id"), col("x"))
    expected = rows(env.sql_query("SELECT id, x FROM texts LEFT JOIN LATERAL TABLE(countdown(n)) AS c(x) ON TRUE").to_arrow())
    assert rows(joined.to_arrow()) == expected == [(1, 1), (1, 2), (2, None), (3, None)]
    with pytest.raises(PlanError, match="ON TRUE only"):
        texts.left_outer_join_lateral(call("countdown", col("n")).alias("x"), col("x") > 1).to_arrow()


def test_several_names_name_only_a_table_functions_columns() -> None:
    _, texts = _lateral_env()
    with pytest.raises(PlanError, match="only name a table function's columns"):
        texts.select(col("id").alias("a", "b")).to_arrow()
