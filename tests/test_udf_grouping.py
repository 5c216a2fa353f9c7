"""Python UDFs (scalar, vectorized, aggregate) and GROUPING SETS / ROLLUP / CUBE, against DuckDB."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest

from sqlstream.core.errors import SqlStreamError
from sqlstream.frontend.session import Session
from tests.conftest import duckdb_rows, rows, run_sql
from tests.test_joins import _csv

FUNCTIONS = """
CREATE TEMPORARY FUNCTION IF NOT EXISTS plus_one AS 'tests.udf_samples.plus_one' LANGUAGE PYTHON;
CREATE TEMPORARY FUNCTION IF NOT EXISTS shout AS 'tests.udf_samples.shout';
CREATE TEMPORARY FUNCTION IF NOT EXISTS half AS 'tests.udf_samples.half';
CREATE TEMPORARY FUNCTION IF NOT EXISTS sum_sq AS 'tests.udf_samples.SumOfSquares';
"""


@pytest.fixture
def data(tmp_path: Path) -> tuple[str, pa.Table]:
    rng = random.Random(4)
    t = pa.table({
        "a": [rng.choice(["x", "y", None]) for _ in range(300)],
        "b": pa.array([rng.randint(0, 3) for _ in range(300)], pa.int32()),
        "v": pa.array([rng.choice([*range(10), None]) for _ in range(300)], pa.int32()),
    })
    _csv(t, tmp_path / "t.csv")
    ddl = f"""SET 'table.exec.batch-size' = '41';
CREATE TABLE t (a STRING, b INT, v INT) WITH ('connector' = 'filesystem', 'path' = '{tmp_path / "t.csv"}', 'format' = 'csv', 'csv.null-literal' = '');"""
    return ddl, t


def test_scalar_udfs_per_row_and_vectorized(data) -> None:
    ddl, t = data
    got = run_sql(ddl + FUNCTIONS + "SELECT plus_one(v), shout(a, 2), half(b) FROM t WHERE plus_one(b) > 1;")
    assert rows(got) == duckdb_rows(
        "SELECT v + 1, UPPER(a) || '!!', b / 2.0 FROM t WHERE b + 1 > 1", t=t)


def test_aggregate_udf_in_group_by_and_windows(data) -> None:
    ddl, t = data
    got = run_sql(ddl + FUNCTIONS + "SELECT a, sum_sq(v) AS s, COUNT(*) FROM t GROUP BY a;")
    assert rows(got) == duckdb_rows("SELECT a, COALESCE(SUM(v * v), 0), COUNT(*) FROM t GROUP BY a", t=t)


def test_udf_errors(data) -> None:
    ddl, _ = data
    with pytest.raises(SqlStreamError, match="result type"):
        Session().execute_script("CREATE FUNCTION f AS 'tests.udf_samples.not_a_udf';")
    with pytest.raises(SqlStreamError, match="cannot load"):
        Session().execute_script("CREATE FUNCTION g AS 'tests.nowhere.g';")
    with pytest.raises(SqlStreamError, match="built-in"):
        Session().execute_script("CREATE FUNCTION upper AS 'tests.udf_samples.plus_one';")


@pytest.mark.parametrize("grouping", ["GROUPING SETS ((a, b), (a), ())", "ROLLUP (a, b)", "CUBE (a, b)"])
def test_grouping_sets_match_duckdb(data, grouping: str) -> None:
    ddl, t = data
    q = f"SELECT a, b, COUNT(*) AS n, SUM(v) AS s FROM t GROUP BY {grouping}"
    assert rows(run_sql(ddl + q + ";")) == duckdb_rows(q, t=t)


def test_cube_with_having(data) -> None:
    ddl, t = data
    q = "SELECT a, b, SUM(v) AS s FROM t GROUP BY CUBE (a, b) HAVING SUM(v) > 50"
    assert rows(run_sql(ddl + q + ";")) == duckdb_rows(q, t=t)


WEIGHTED = "CREATE TEMPORARY FUNCTION IF NOT EXISTS wavg AS 'tests.udf_samples.WeightedAverage' LANGUAGE PYTHON;\n"
# DuckDB's form of WeightedAverage: rows with both arguments, NULL when their weights sum to 0
DUCK_WAVG = ("SUM(CASE WHEN v IS NOT NULL AND b IS NOT NULL THEN v * b END) / "
             "NULLIF(SUM(CASE WHEN v IS NOT NULL AND b IS NOT NULL THEN b END), 0)")


def test_aggregate_udf_takes_several_columns_in_group_by(data) -> None:
    ddl, t = data
    got = run_sql(ddl + WEIGHTED + "SELECT a, wavg(v, b + 1) AS w FROM t GROUP BY a;")
    assert rows(got) == duckdb_rows(f"SELECT a, {DUCK_WAVG.replace('b', '(b + 1)')} FROM t GROUP BY a", t=t)


def test_several_column_aggregate_udf_over_an_updating_input_retracts(data) -> None:
    ddl, t = data
    got = run_sql(ddl + WEIGHTED + "SELECT b, wavg(n, b) AS w FROM (SELECT a, b, COUNT(v) AS n FROM t GROUP BY a, b) "
                  "GROUP BY b;")
    inner = "SELECT a, b, COUNT(v) AS v FROM t GROUP BY a, b"
    assert rows(got) == duckdb_rows(f"SELECT b, {DUCK_WAVG} FROM ({inner}) GROUP BY b", t=t)


@pytest.fixture
def timed(tmp_path: Path) -> tuple[str, pa.Table]:
    rng = random.Random(9)
    n = 200
    t = pa.table({
        "b": pa.array([rng.randint(1, 3) for _ in range(n)], pa.int32()),
        "v": pa.array([rng.choice([*range(10), None]) for _ in range(n)], pa.int32()),
        # seconds apart with gaps, in order: sessions of a 5 s gap break where the gap is longer
        "ts": pa.array([1_700_000_000_000 + i * 1000 + (i // 17) * 20_000 for i in range(n)], pa.timestamp("ms")),
    })
    _csv(t, tmp_path / "timed.csv")
    ddl = f"""SET 'table.exec.batch-size' = '23';
CREATE TABLE timed (b INT, v INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH ('connector' = 'filesystem',
  'path' = '{tmp_path / "timed.csv"}', 'format' = 'csv', 'csv.null-literal' = '');"""
    return ddl, t


@pytest.mark.parametrize(("window", "duck_window"), [
    ("TUMBLE(TABLE timed, DESCRIPTOR(ts), INTERVAL '10' SECOND)", "time_bucket(INTERVAL '10 seconds', ts)"),
    ("SESSION(TABLE timed, DESCRIPTOR(ts), INTERVAL '5' SECOND)", None),
])
def test_several_column_aggregate_udf_in_window_tvfs(timed, window: str, duck_window: str | None) -> None:
    ddl, t = timed
    got = run_sql(ddl + WEIGHTED + f"SELECT window_start, wavg(v, b) AS w, COUNT(*) AS n FROM TABLE({window}) "
                  "GROUP BY window_start, window_end;")
    # a session is each run of 17 rows 1 s apart (a 21 s gap after it): it starts every 37 s
    bucket = duck_window or "epoch_ms(CAST((epoch_ms(CAST(ts AS TIMESTAMP)) - 1700000000000) // 37000 * 37000 + 1700000000000 AS BIGINT))"
    assert rows(got) == duckdb_rows(f"SELECT {bucket} AS s, {DUCK_WAVG}, COUNT(*) FROM t GROUP BY s", t=t)


def test_several_column_aggregate_udf_registered_through_the_table_api(data) -> None:
    from sqlstream import TableEnvironment, call, col
    from tests.udf_samples import WeightedAverage

    ddl, t = data
    env = TableEnvironment.create(streaming=True)
    env.execute_sql(ddl.split(";\n")[1])
    env.create_temporary_function("wavg_api", WeightedAverage())
    got = env.from_path("t").group_by(col("a")).select(col("a"), call("wavg_api", col("v"), col("b"))).to_arrow()
    assert rows(got) == duckdb_rows(f"SELECT a, {DUCK_WAVG} FROM t GROUP BY a", t=t)


@pytest.mark.parametrize(("frame", "duck_frame"), [
    ("", "RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"),
    ("ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW", "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"),
    ("ROWS BETWEEN 3 PRECEDING AND CURRENT ROW", "ROWS BETWEEN 3 PRECEDING AND CURRENT ROW"),
    ("RANGE BETWEEN INTERVAL '4' SECOND PRECEDING AND CURRENT ROW",
     "RANGE BETWEEN INTERVAL 4 SECOND PRECEDING AND CURRENT ROW"),
])
def test_several_column_aggregate_udf_in_over(timed, frame: str, duck_frame: str) -> None:
    ddl, t = timed
    got = run_sql(ddl + WEIGHTED + f"SELECT b, v, ts, wavg(v, b) OVER (PARTITION BY b ORDER BY ts {frame}) AS w "
                  "FROM timed;")
    window = f"OVER (PARTITION BY b ORDER BY ts {duck_frame})"
    duck = DUCK_WAVG.replace(") /", f") {window} /").replace("), 0)", f") {window}, 0)")
    assert rows(got) == duckdb_rows(f"SELECT b, v, ts, {duck} FROM t", t=t)


def test_aggregate_udf_over_an_unbounded_frame_keeps_its_accumulator_in_rocksdb_at_parallelism_2(timed) -> None:
    ddl, t = timed
    settings = "SET 'state.backend.type' = 'rocksdb';\nSET 'parallelism.default' = '2';\n"
    got = run_sql(settings + ddl + WEIGHTED + "SELECT b, v, ts, wavg(v, b) OVER (PARTITION BY b ORDER BY ts) AS w "
                  "FROM timed;")
    window = "OVER (PARTITION BY b ORDER BY ts)"
    duck = DUCK_WAVG.replace(") /", f") {window} /").replace("), 0)", f") {window}, 0)")
    assert rows(got) == duckdb_rows(f"SELECT b, v, ts, {duck} FROM t", t=t)


def test_a_session_window_needs_an_aggregate_udf_with_merge(timed) -> None:
    ddl, _ = timed
    register = "CREATE TEMPORARY FUNCTION IF NOT EXISTS last_pair AS 'tests.udf_samples.LastPair';\n"
    with pytest.raises(SqlStreamError, match=r"LAST_PAIR \(LastPair\) does not implement merge"):
        run_sql(ddl + register + "SELECT last_pair(v, b) FROM TABLE(SESSION(TABLE timed, DESCRIPTOR(ts), "
                "INTERVAL '5' SECOND)) GROUP BY window_start, window_end;")
    got = run_sql(ddl + register + "SELECT window_start, last_pair(v, b) AS p FROM TABLE(TUMBLE(TABLE timed, "
                  "DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end;")
    assert got.num_rows > 0 and all("/" in p for p in got.column("p").to_pylist())
