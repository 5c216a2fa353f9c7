"""GROUPING() and GROUPING_ID() over GROUPING SETS / ROLLUP / CUBE (and a plain GROUP BY), expressions
inside CUBE, and global aggregations with nothing to compute.  Expected rows and types are what Flink
2.3 gave on the same data (PyFlink, streaming mode, parallelism 1, 'csv.null-literal' = '')."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import rows, run_sql

L = "1,x,10\n2,y,20\n3,z,30\n,w,40\n4,,50\n2,y2,60\n"

CASES = {
    "SELECT k, s, GROUPING(k) AS gk, GROUPING(s) AS gs, GROUPING_ID(k, s) AS gid, COUNT(*) AS c "
    "FROM l GROUP BY CUBE(k, s)": [
        (1, "x", 0, 0, 0, 1), (1, None, 0, 1, 1, 1), (2, "y", 0, 0, 0, 1), (2, "y2", 0, 0, 0, 1),
        (2, None, 0, 1, 1, 2), (3, "z", 0, 0, 0, 1), (3, None, 0, 1, 1, 1), (4, None, 0, 0, 0, 1),
        (4, None, 0, 1, 1, 1), (None, "w", 0, 0, 0, 1), (None, "w", 1, 0, 2, 1), (None, "x", 1, 0, 2, 1),
        (None, "y", 1, 0, 2, 1), (None, "y2", 1, 0, 2, 1), (None, "z", 1, 0, 2, 1), (None, None, 0, 1, 1, 1),
        (None, None, 1, 0, 2, 1), (None, None, 1, 1, 3, 6)],
    "SELECT k, GROUPING(k) AS g FROM l GROUP BY ROLLUP(k)": [
        (1, 0), (2, 0), (3, 0), (4, 0), (None, 0), (None, 1)],
    "SELECT k IS NULL AS kn, COUNT(*) AS c FROM l GROUP BY CUBE(k IS NULL)": [(False, 5), (None, 6), (True, 1)],
    "SELECT k, GROUPING_ID(k) AS g FROM l GROUP BY GROUPING SETS ((k), ()) HAVING GROUPING(k) = 1": [(None, 1)],
    # the empty set is one global row even with no aggregate in the list
    "SELECT k, GROUPING_ID(k) AS g FROM l GROUP BY GROUPING SETS ((k), ())": [
        (1, 0), (2, 0), (3, 0), (4, 0), (None, 0), (None, 1)],
    "SELECT 1 AS g FROM l HAVING 1 = 1": [(1,)],
    "SELECT k, GROUPING(k) AS g, COUNT(*) AS c FROM l GROUP BY k": [(1, 0, 1), (2, 0, 2), (3, 0, 1), (4, 0, 1), (None, 0, 1)],
}


@pytest.mark.parametrize("parallelism", ["1", "2"])
@pytest.mark.parametrize("query", list(CASES))
def test_grouping_gives_flinks_rows(query: str, parallelism: str, tmp_path: Path) -> None:
    (tmp_path / "l.csv").write_text(L)
    ddl = (f"CREATE TABLE l (k INT, s STRING, v INT) WITH ('connector' = 'filesystem', "
           f"'path' = '{tmp_path / 'l.csv'}', 'format' = 'csv', 'csv.null-literal' = '');\n")
    result = run_sql(ddl + query + ";", {"parallelism.default": parallelism})
    assert sorted(rows(result), key=repr) == sorted(CASES[query], key=repr)
    if "GROUPING" in query:
        # GROUPING and GROUPING_ID are BIGINT, as in Flink
        assert "int64" in [str(t) for t in result.schema.types]
