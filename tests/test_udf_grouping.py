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
