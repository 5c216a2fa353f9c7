"""The optimizer's rewrites are visible in EXPLAIN and keep results unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from sqlstream.core.errors import PlanError
from sqlstream.core.sql.script import parse_one
from sqlstream.frontend.session import Session
from sqlstream.planner.logical import Filter, Project, Scan, WindowAggregate
from sqlstream.planner.optimizer import optimize
from sqlstream.planner.planner import select_plan
from tests.conftest import run_sql


@pytest.fixture
def session(tmp_path: Path) -> Session:
    p = tmp_path / "t.csv"
    p.write_text("".join(f"{i},n{i % 7},{i * 1.5},2024-01-01 00:00:{i % 60:02d}.000\n" for i in range(200)))
    s = Session()
    s.execute_script(f"""CREATE TABLE t (id INT, name STRING, price DOUBLE, ts TIMESTAMP(3),
        WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
        WITH ('connector' = 'filesystem', 'path' = '{p}', 'format' = 'csv');""")
    return s


def _plan(session: Session, sql: str):
    return optimize(select_plan(session.catalog, parse_one(sql)))


def _nodes(node):
    yield node
    for i in node.inputs:
        yield from _nodes(i)


def test_projection_pruning_reads_only_needed_columns(session: Session) -> None:
    plan = _plan(session, "SELECT UPPER(name) FROM (SELECT id, name, price FROM t) WHERE price > 10")
    scan = next(n for n in _nodes(plan) if isinstance(n, Scan))
    assert scan.columns == ["name", "price", "ts"]  # ts: the watermark needs it


def test_filter_is_pushed_below_projection_and_constants_folded(session: Session) -> None:
    plan = _plan(session, "SELECT p2 FROM (SELECT price * 2 AS p2, id FROM t) WHERE p2 > 10 + 5")
    nodes = list(_nodes(plan))
    filt = next(n for n in nodes if isinstance(n, Filter))
    assert "15" in str(filt.predicate) and "*" in str(filt.predicate)
    assert nodes.index(filt) > nodes.index(next(n for n in nodes if isinstance(n, Project)))


def test_window_tvf_and_group_by_fuse_into_a_window_aggregate(session: Session) -> None:
    plan = _plan(session, """SELECT window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECOND))
        WHERE id > 3 GROUP BY window_start, window_end""")
    agg = next(n for n in _nodes(plan) if isinstance(n, WindowAggregate))
    assert agg.window.kind == "TUMBLE" and agg.window.size_ms == 10_000
    assert any(isinstance(n, Filter) for n in _nodes(agg.input))


def test_explain_prints_logical_and_physical_plans(session: Session) -> None:
    text = session.execute_script("EXPLAIN SELECT name, COUNT(*) FROM t WHERE id > 1 GROUP BY name;")[0].message
    assert "== Optimized Logical Plan ==" in text and "== Physical Dataflow ==" in text
    assert "GroupAggregate" in text and "hash[" in text


def test_pushdown_keeps_results(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"
    p.write_text("".join(f"{i},{i % 5}\n" for i in range(100)))
    ddl = f"CREATE TABLE t (a INT, b INT) WITH ('connector' = 'filesystem', 'path' = '{p}', 'format' = 'csv');"
    got = run_sql(ddl + "SELECT x FROM (SELECT a + b AS x, b FROM t) WHERE b = 2 AND x > 50;")
    assert sorted(got.column("x").to_pylist()) == sorted(a + a % 5 for a in range(100) if a % 5 == 2 and a + 2 > 50)


def test_union_all_and_cte(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"
    p.write_text("".join(f"{i}\n" for i in range(10)))
    ddl = f"CREATE TABLE t (a INT) WITH ('connector' = 'filesystem', 'path' = '{p}', 'format' = 'csv');"
    got = run_sql(ddl + """WITH lo AS (SELECT a FROM t WHERE a < 3), hi AS (SELECT a * 10 AS a FROM t WHERE a > 7)
        SELECT a FROM lo UNION ALL SELECT a FROM hi;""")
    assert sorted(got.column("a").to_pylist()) == [0, 1, 2, 80, 90]


def test_views_are_expanded(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"
    p.write_text("".join(f"{i}\n" for i in range(10)))
    got = run_sql(f"""CREATE TABLE t (a INT) WITH ('connector' = 'filesystem', 'path' = '{p}', 'format' = 'csv');
        CREATE VIEW evens AS SELECT a FROM t WHERE a % 2 = 0;
        SELECT a FROM evens WHERE a > 2;""")
    assert sorted(got.column("a").to_pylist()) == [4, 6, 8]


def test_is_distinct_from_treats_nulls_as_equal() -> None:
    got = run_sql("""SELECT a IS DISTINCT FROM b AS d, a IS NOT DISTINCT FROM b AS nd
        FROM (VALUES (1, 1), (1, CAST(NULL AS INT)), (CAST(NULL AS INT), CAST(NULL AS INT))) AS t(a, b);""")
    assert list(zip(got.column("d").to_pylist(), got.column("nd").to_pylist(), strict=True)) == [
        (False, True), (True, False), (False, True)]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MONTH))"
        " GROUP BY window_start, window_end",
        "SELECT window_start, COUNT(*) FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '1' DAY,"
        " INTERVAL '1-0' YEAR TO MONTH)) GROUP BY window_start, window_end",
    ],
)
def test_month_interval_window_sizes_are_refused(session: Session, sql: str) -> None:
    with pytest.raises(PlanError, match="year-month interval has no fixed length"):
        _plan(session, sql)


def test_month_interval_watermark_expression_is_accepted_as_in_flink(tmp_path: Path) -> None:
    # Flink plans WATERMARK FOR ts AS ts - INTERVAL '1' MONTH (an expression, not a fixed delay)
    p = tmp_path / "w.csv"
    p.write_text("1,2024-03-31 10:00:00.000\n2,2024-04-01 10:00:00.000\n")
    got = run_sql(f"""CREATE TABLE w (id INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' MONTH)
        WITH ('connector' = 'filesystem', 'path' = '{p}', 'format' = 'csv');
        SELECT id, ts + INTERVAL '1' MONTH AS m FROM w;""")
    assert [str(v) for v in got.column("m").to_pylist()] == ["2024-04-30 10:00:00", "2024-05-01 10:00:00"]


def test_timestamp_plus_month_interval_runs_end_to_end() -> None:
    got = run_sql("""SELECT d + INTERVAL '1' MONTH AS m, d - INTERVAL '1-1' YEAR TO MONTH AS y
        FROM (VALUES (DATE '2024-01-31'), (DATE '2024-03-31')) AS t(d);""")
    assert [str(v) for v in got.column("m").to_pylist()] == ["2024-02-29", "2024-04-30"]
    assert [str(v) for v in got.column("y").to_pylist()] == ["2022-12-31", "2023-02-28"]
