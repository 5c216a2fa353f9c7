"""STDDEV_POP/SAMP, VAR_POP/SAMP, LISTAGG, FIRST_VALUE and LAST_VALUE in GROUP BY, over append-only and
updating inputs.  Expected rows and types are what Flink 2.3 gave on the same data (PyFlink, streaming
mode, parallelism 1, 'csv.null-literal' = '')."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from sqlstream.core.errors import PlanError
from tests.conftest import rows, run_sql

L = "1,x,10\n2,y,20\n2,,25\n3,z,30\n,w,40\n1,xx,\n2,y2,60\n1,,7\n3,z,31\n"
COUNTS = "(SELECT k, COUNT(*) AS c FROM l GROUP BY k)"

CASES = {
    # over INT: computed exactly, truncated back to INT, as Flink's reduction to SUM/COUNT and cast
    "SELECT k, STDDEV_POP(v) AS a, STDDEV_SAMP(v) AS b, VAR_POP(v) AS c, VAR_SAMP(v) AS d FROM l GROUP BY k": (
        ["int32"] * 5, [(1, 1, 2, 2, 4), (2, 17, 21, 316, 475), (3, 0, 0, 0, 0), (None, 0, None, 0, None)]),
    "SELECT k, STDDEV_POP(CAST(v AS DOUBLE)) AS a, STDDEV_SAMP(CAST(v AS DOUBLE)) AS b, "
    "VAR_POP(CAST(v AS DOUBLE)) AS c, VAR_SAMP(CAST(v AS DOUBLE)) AS d FROM l GROUP BY k": (
        ["int32"] + ["double"] * 4,
        [(1, 1.5, 2.1213203435596424, 2.25, 4.5), (2, 17.795130420052185, 21.79449471770337, 316.6666666666667, 475.0),
         (3, 0.5, 0.7071067811865476, 0.25, 0.5), (None, 0.0, None, 0.0, None)]),
    "SELECT k, VAR_SAMP(CAST(v AS DECIMAL(10, 2))) AS d, STDDEV_POP(CAST(v AS DECIMAL(10, 2))) AS e FROM l GROUP BY k": (
        ["int32", "decimal128(38, 6)", "decimal128(38, 6)"],
        [(1, Decimal("4.500000"), Decimal("1.500000")), (2, Decimal("475.000000"), Decimal("17.795130")),
         (3, Decimal("0.500000"), Decimal("0.500000")), (None, None, Decimal("0.000000"))]),
    "SELECT k, LISTAGG(s) AS a, LISTAGG(s, '|') AS b FROM l GROUP BY k": (
        ["int32", "string", "string"], [(1, "x,xx", "x|xx"), (2, "y,y2", "y|y2"), (3, "z,z", "z|z"), (None, "w", "w")]),
    # NULLs are skipped
    "SELECT k, FIRST_VALUE(s) AS a, LAST_VALUE(s) AS b, FIRST_VALUE(v) AS c, LAST_VALUE(v) AS d FROM l GROUP BY k": (
        ["int32", "string", "string", "int32", "int32"],
        [(1, "x", "xx", 10, 7), (2, "y", "y2", 20, 60), (3, "z", "z", 30, 31), (None, "w", "w", 40, 40)]),
    "SELECT STDDEV_SAMP(v) AS a, LISTAGG(s) AS b, FIRST_VALUE(s) AS c, LAST_VALUE(s) AS d FROM l": (
        ["int32", "string", "string", "string"], [(16, "x,y,z,w,xx,y2,z", "x", "z")]),
    # over an updating input a retraction removes its value
    f"SELECT c, LISTAGG(CAST(k AS STRING)) AS ks FROM {COUNTS} GROUP BY c": (
        ["int64", "string"], [(1, None), (2, "3"), (3, "2,1")]),
    f"SELECT c, VAR_POP(k) AS vk, LAST_VALUE(k) AS lk, FIRST_VALUE(k) AS fk FROM {COUNTS} GROUP BY c": (
        ["int64", "int32", "int32", "int32"], [(1, None, None, None), (2, 0, 3, 3), (3, 0, 1, 2)]),
}


def _ddl(tmp_path: Path) -> str:
    (tmp_path / "l.csv").write_text(L)
    return (f"CREATE TABLE l (k INT, s STRING, v INT) WITH ('connector' = 'filesystem', "
            f"'path' = '{tmp_path / 'l.csv'}', 'format' = 'csv', 'csv.null-literal' = '');\n")


@pytest.mark.parametrize("query", list(CASES))
def test_aggregate_gives_flinks_rows_and_types(query: str, tmp_path: Path) -> None:
    # one row per batch: the order in which updates reach LISTAGG/FIRST_VALUE/LAST_VALUE is then
    # Flink's row-at-a-time order (with larger batches an upstream aggregation emits each batch's
    # updates per key, so the order of values over an updating input may differ)
    result = run_sql(_ddl(tmp_path) + query + ";", {"table.exec.batch-size": "1"})
    types, expected = CASES[query]
    assert [str(t) for t in result.schema.types] == types
    assert sorted(rows(result), key=repr) == sorted(rows_of(expected), key=repr)


def rows_of(expected: list[tuple]) -> list[tuple]:
    import pyarrow as pa

    columns = list(zip(*expected, strict=True))
    return rows(pa.table({f"c{i}": list(c) for i, c in enumerate(columns)}))


@pytest.mark.parametrize("parallelism", ["1", "2"])
def test_statistics_agree_across_batch_sizes_and_parallelism(parallelism: str, tmp_path: Path) -> None:
    query = next(iter(CASES))
    result = run_sql(_ddl(tmp_path) + query + ";", {"parallelism.default": parallelism})
    assert sorted(rows(result), key=repr) == sorted(rows_of(CASES[query][1]), key=repr)


def test_listagg_takes_a_constant_separator(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="optional constant separator"):
        run_sql(_ddl(tmp_path) + "SELECT LISTAGG(s, s) FROM l;")


def test_statistics_in_over_truncate_at_each_step_as_flinks_reduction(tmp_path: Path) -> None:
    # Flink reduces them in OVER to SUM(x*x), SUM(x), COUNT(x) and an expression in x's type: for
    # 3, 3, 1 VAR_POP is (19 - 49 / 3) / 3 = (19 - 16) / 3 = 1 (GROUP BY's exact variance, 8/9, gives 0),
    # VAR_SAMP divides by COUNT - 1 (NULL for one row), STDDEV takes POWER(.., 0.5) cast back
    (tmp_path / "o.csv").write_text("1,3,2024-01-01 00:00:01\n1,3,2024-01-01 00:00:02\n1,1,2024-01-01 00:00:03\n"
                                    "2,,2024-01-01 00:00:04\n2,5,2024-01-01 00:00:05\n")
    ddl = (f"CREATE TABLE o (k INT, v INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH ('connector' = "
           f"'filesystem', 'path' = '{tmp_path / 'o.csv'}', 'format' = 'csv', 'csv.null-literal' = '');\n")
    result = run_sql(ddl + "SELECT k, v, VAR_POP(v) OVER w AS vp, VAR_SAMP(v) OVER w AS vs, STDDEV_POP(v) OVER w AS sp, "
                     "VAR_SAMP(CAST(v AS DOUBLE)) OVER w AS vd, STDDEV_SAMP(CAST(v AS DECIMAL(10, 2))) OVER w AS sd "
                     "FROM o WINDOW w AS (PARTITION BY k ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW);")
    assert [str(t) for t in result.schema.types][2:] == ["int32", "int32", "int32", "double", "decimal128(38, 6)"]
    # DECIMAL(38, 6): 49.000000 / 3 = 16.333333, (19 - 16.333333) / 2 = 1.333334 (HALF_UP), its root 1.154701
    assert rows(result) == rows_of([
        (1, 3, 0, None, 0, None, None), (1, 3, 0, 0, 0, 0.0, Decimal("0.000000")),
        (1, 1, 1, 1, 1, 4 / 3, Decimal("1.154701")),
        (2, None, None, None, None, None, None), (2, 5, 0, None, 0, None, None)])
    bounded = run_sql(ddl + "SELECT v, VAR_POP(v) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 1 PRECEDING AND "
                      "CURRENT ROW) AS vp FROM o WHERE k = 1;")
    assert rows(bounded) == rows_of([(3, 0), (3, 0), (1, 1)])  # (9 + 1 - 16 / 2) / 2 = 1
