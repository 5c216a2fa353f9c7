"""OVER aggregates, Top-N, deduplication, window Top-N and ORDER BY / LIMIT on streams.

Input is bounded and out of order within the watermark delay, so no row is
late and the streaming result (after applying its changelog) must equal
DuckDB running the same SQL in batch.  Runs use small batches and one and two
parallel subtasks.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from sqlstream.core.aggregates import AggCall
from sqlstream.core.errors import PlanError
from sqlstream.frontend.session import Session
from sqlstream.runtime.elements import MAX_WATERMARK, Chunk, RowKind, Watermark
from sqlstream.runtime.operators.base import Operator, OperatorContext
from sqlstream.runtime.operators.over_agg import OverAggOperator
from sqlstream.runtime.operators.rank import (
    DeduplicateFirstOperator,
    TopNOperator,
    WindowRankOperator,
)
from tests.conftest import duckdb_rows, rows, run_sql
from tests.harness import OperatorHarness, planned_state

BASE = dt.datetime(2024, 3, 1, 12, 0, 0)
DELAY_S = 4


def _events(n: int = 1500, seed: int = 17) -> pa.Table:
    """Unique timestamps (so ROWS frames and tie-breaks are deterministic), some NULL values, shuffled."""
    rng = random.Random(seed)
    events = []
    t = BASE
    for _ in range(n):
        t += dt.timedelta(milliseconds=rng.choice([1, 40, 250, 900, 2500]))
        v = None if rng.random() < 0.05 else rng.randint(-30, 100)
        events.append((rng.choice("abcde"), v, t))
    arrival = sorted(events, key=lambda e: e[2] + dt.timedelta(milliseconds=rng.randint(0, DELAY_S * 1000 - 1)))
    return pa.table({
        "k": [e[0] for e in arrival],
        "v": pa.array([e[1] for e in arrival], pa.int32()),
        "ts": pa.array([e[2] for e in arrival], pa.timestamp("ms")),
    })


def _write_csv(table: pa.Table, path: Path) -> None:
    with path.open("w") as f:
        for k, v, ts in zip(*(c.to_pylist() for c in table.columns), strict=True):
            f.write(f"{k},{'' if v is None else v},{ts.strftime('%Y-%m-%d %H:%M:%S.%f')[:-3]}\n")


def _ddl(path: Path, parallelism: int = 1, batch_size: int = 37, name: str = "e") -> str:
    return f"""
        SET 'table.exec.batch-size' = '{batch_size}';
        SET 'parallelism.default' = '{parallelism}';
        CREATE TABLE {name} (k STRING, v INT, ts TIMESTAMP(3),
            WATERMARK FOR ts AS ts - INTERVAL '{DELAY_S}' SECOND)
        WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv', 'csv.null-literal' = '');
    """


@pytest.fixture(scope="module")
def events() -> pa.Table:
    return _events()


@pytest.fixture(scope="module")
def csv_path(tmp_path_factory: pytest.TempPathFactory, events: pa.Table) -> Path:
    path = tmp_path_factory.mktemp("over") / "e.csv"
    _write_csv(events, path)
    return path


def _check(csv_path: Path, events: pa.Table, query: str, parallelism: int = 1, oracle: str | None = None,
           minimum: int = 1) -> None:
    got = rows(run_sql(_ddl(csv_path, parallelism) + query + ";"))
    expected = duckdb_rows(oracle or query, e=events)
    assert got == expected
    assert len(expected) >= minimum


def _explain(csv_path: Path, query: str) -> str:
    message = Session().execute_script(_ddl(csv_path) + "EXPLAIN " + query + ";")[-1].message
    assert message is not None
    return message


# ------------------------------------------------------------------ OVER aggregates

AGGS = ("COUNT(*) OVER w AS n, COUNT(v) OVER w AS nv, SUM(v) OVER w AS s, MIN(v) OVER w AS lo, "
        "MAX(v) OVER w AS hi, AVG(CAST(v AS DOUBLE)) OVER w AS a")
FRAMES = [
    "RANGE BETWEEN INTERVAL '10' SECOND PRECEDING AND CURRENT ROW",
    "RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW",
    "ROWS BETWEEN 4 PRECEDING AND CURRENT ROW",
    "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW",
    "",  # ORDER BY alone: RANGE UNBOUNDED PRECEDING
]


@pytest.mark.parametrize("parallelism", [1, 2])
@pytest.mark.parametrize("frame", FRAMES)
def test_over_aggregates_match_duckdb(csv_path: Path, events: pa.Table, frame: str, parallelism: int) -> None:
    query = f"SELECT k, v, ts, {AGGS} FROM e WINDOW w AS (PARTITION BY k ORDER BY ts {frame})"
    _check(csv_path, events, query, parallelism, minimum=len(events))


def test_inline_over_windows_without_partition_and_integer_avg(csv_path: Path, events: pa.Table) -> None:
    w = "OVER (ORDER BY ts ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)"
    query = f"SELECT ts, v, SUM(v) {w} AS s, MAX(k) {w} AS hi, AVG(v) {w} + 1 AS a FROM e"
    # Flink: AVG of an INT is an INT, truncated toward zero
    oracle = f"SELECT ts, v, SUM(v) {w}, MAX(k) {w}, CAST(trunc(AVG(v) {w}) AS INT) + 1 FROM e"
    _check(csv_path, events, query, 2, oracle)


def test_over_with_expressions_and_star(csv_path: Path, events: pa.Table) -> None:
    query = ("SELECT *, SUM(v * 2) OVER (PARTITION BY UPPER(k) ORDER BY ts "
             "RANGE BETWEEN INTERVAL '3' SECOND PRECEDING AND CURRENT ROW) AS s2 FROM e WHERE v > 0")
    _check(csv_path, events, query, 2)


def test_range_frames_include_rows_with_the_same_timestamp(tmp_path: Path) -> None:
    rng = random.Random(3)
    events = [(rng.choice("ab"), rng.randint(0, 9), BASE + dt.timedelta(seconds=i // 3)) for i in range(400)]
    rng.shuffle(events)  # disorder up to the whole input: the watermark delay covers it
    table = pa.table({"k": [e[0] for e in events], "v": pa.array([e[1] for e in events], pa.int32()),
                      "ts": pa.array([e[2] for e in events], pa.timestamp("ms"))})
    path = tmp_path / "ties.csv"
    _write_csv(table, path)
    ddl = _ddl(path, batch_size=16).replace(f"INTERVAL '{DELAY_S}' SECOND", "INTERVAL '1' HOUR")
    query = ("SELECT k, v, ts, SUM(v) OVER w AS s, COUNT(*) OVER w AS n FROM e "
             "WINDOW w AS (PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL '2' SECOND PRECEDING AND CURRENT ROW)")
    assert rows(run_sql(ddl + query + ";")) == duckdb_rows(query, e=table)


def test_over_rows_wait_for_the_watermark_and_late_rows_are_dropped(tmp_path: Path) -> None:
    path = tmp_path / "late.csv"
    path.write_text(
        "a,1,2024-03-01 12:00:01.000\n"
        "a,2,2024-03-01 12:00:03.000\n"
        "a,4,2024-03-01 12:00:10.000\n"  # watermark -> 12:00:09: the first two rows are emitted
        "a,8,2024-03-01 12:00:02.000\n"  # late
        "a,16,2024-03-01 12:00:09.500\n"
    )
    session = Session()
    result = session.execute_script(_ddl(path, batch_size=1).replace(f"'{DELAY_S}' SECOND", "'1' SECOND") + """
        SELECT v, SUM(v) OVER (PARTITION BY k ORDER BY ts
            RANGE BETWEEN INTERVAL '7' SECOND PRECEDING AND CURRENT ROW) AS s FROM e;""")[-1]
    assert result.table is not None and result.job is not None
    assert result.table.column("op").to_pylist() == [RowKind.INSERT] * 4
    # emitted in timestamp order; 12:00:09.5 sees 12:00:03 but not 12:00:01
    assert list(zip(result.table.column("v").to_pylist(), result.table.column("s").to_pylist(),
                    strict=True)) == [(1, 1), (2, 3), (16, 18), (4, 22)]
    assert result.job.late_records_dropped == 1


def test_over_aggregate_plan_is_append_only_and_keeps_the_time_attribute(csv_path: Path, events: pa.Table) -> None:
    text = _explain(csv_path, "SELECT k, ts, COUNT(*) OVER (PARTITION BY k ORDER BY ts) AS n FROM e")
    assert "OverAggregate(partition=[$0]" in text and "hash[$0]" in text and "[changelog]" not in text
    # a window aggregation downstream of the OVER aggregate: ts is still a time attribute
    query = """CREATE VIEW o AS SELECT k, ts,
            COUNT(*) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS n FROM e;
        SELECT window_start, k, SUM(n) AS total FROM TABLE(TUMBLE(TABLE o, DESCRIPTOR(ts), INTERVAL '30' SECOND))
        GROUP BY window_start, window_end, k"""
    got = rows(run_sql(_ddl(csv_path, 2) + query + ";"))
    expected = duckdb_rows("""SELECT epoch_ms((epoch_ms(ts::TIMESTAMP) // 30000) * 30000), k, SUM(n) FROM (
        SELECT k, ts, COUNT(*) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS n
        FROM e) GROUP BY ALL""", e=events)
    assert got == expected


# ------------------------------------------------------------------ Top-N and deduplication

TOP_N = "SELECT {outer} FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY {order}) AS rn FROM e) WHERE {cond}"


@pytest.mark.parametrize("parallelism", [1, 2])
@pytest.mark.parametrize("cond", ["rn <= 3", "rn < 3", "rn = 1", "rn BETWEEN 2 AND 4", "3 >= rn AND v > 10"])
@pytest.mark.parametrize("outer", ["*", "k, v, ts"])
def test_top_n_matches_duckdb(csv_path: Path, events: pa.Table, cond: str, outer: str, parallelism: int) -> None:
    query = TOP_N.format(outer=outer, order="v DESC NULLS LAST, ts", cond=cond)
    _check(csv_path, events, query, parallelism, minimum=3)


@pytest.mark.parametrize("parallelism", [1, 2])
@pytest.mark.parametrize(("order", "cond"), [("v DESC NULLS LAST, ts", "rn <= 3"), ("ts DESC", "rn = 1")])
def test_top_n_and_keep_last_dedup_with_rows_in_rocksdb_match_duckdb(csv_path: Path, events: pa.Table, order: str,
                                                                     cond: str, parallelism: int) -> None:
    """On rocksdb the vectorized Top-N keeps its rows in RocksDB (rank_rocksdb.py)."""
    query = TOP_N.format(outer="*", order=order, cond=cond)
    got = rows(run_sql("SET 'state.backend.type' = 'rocksdb';" + _ddl(csv_path, parallelism) + query + ";"))
    expected = duckdb_rows(query, e=events)
    assert got == expected and len(expected) >= 3


@pytest.mark.parametrize("order", ["v NULLS FIRST, ts DESC", "v, ts DESC", "k, v DESC, ts"])
def test_top_n_orderings(csv_path: Path, events: pa.Table, order: str) -> None:
    query = TOP_N.format(outer="*", order=order, cond="rn <= 4")
    # Flink sorts NULL first in ascending order: spell that out for DuckDB
    oracle = TOP_N.format(outer="*", order=order.replace("v, ", "v NULLS FIRST, "), cond="rn <= 4")
    _check(csv_path, events, query, 2, oracle, minimum=4)


def test_top_n_through_cte_view_and_global(csv_path: Path, events: pa.Table) -> None:
    cte = ("WITH r AS (SELECT k, v, ts, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC NULLS LAST, ts) AS rn "
           "FROM e) SELECT k, v, rn FROM r WHERE rn <= 2")
    _check(csv_path, events, cte, 2, minimum=10)
    got = rows(run_sql(_ddl(csv_path) + """
        CREATE VIEW ranked AS SELECT *, ROW_NUMBER() OVER (ORDER BY v DESC NULLS LAST, ts) AS rn FROM e;
        SELECT v, ts FROM ranked WHERE rn <= 5;"""))
    expected = duckdb_rows("SELECT v, ts FROM (SELECT *, ROW_NUMBER() OVER (ORDER BY v DESC NULLS LAST, ts) AS rn "
                           "FROM e) WHERE rn <= 5", e=events)
    assert got == expected


def test_top_n_over_an_updating_aggregate(csv_path: Path, events: pa.Table) -> None:
    query = """SELECT * FROM (
        SELECT k, m, n, ROW_NUMBER() OVER (ORDER BY n DESC, k, m NULLS FIRST) AS rn
        FROM (SELECT k, v % 7 AS m, COUNT(*) AS n FROM e GROUP BY k, v % 7)) WHERE rn <= 4"""
    _check(csv_path, events, query, 2, minimum=4)


@pytest.mark.parametrize("parallelism", [1, 2])
def test_deduplication_keep_first_is_append_only(csv_path: Path, events: pa.Table, parallelism: int) -> None:
    query = TOP_N.format(outer="k, v, ts", order="ts", cond="rn = 1").replace("PARTITION BY k", "PARTITION BY k, v % 3")
    text = _explain(csv_path, query)
    assert "Deduplicate(" in text and "keep=first" in text and "[changelog]" not in text
    result = Session().execute_script(_ddl(csv_path, parallelism) + query + ";")[-1]
    assert result.table is not None
    assert set(result.table.column("op").to_pylist()) == {RowKind.INSERT}
    assert rows(result.table.drop_columns(["op"])) == duckdb_rows(query, e=events)


@pytest.mark.parametrize("parallelism", [1, 2])
def test_deduplication_keep_last_updates(csv_path: Path, events: pa.Table, parallelism: int) -> None:
    query = TOP_N.format(outer="*", order="ts DESC", cond="rn = 1")
    assert "keep=last" in _explain(csv_path, query)
    _check(csv_path, events, query, parallelism, minimum=5)


def test_top_n_changelog_with_and_without_row_number(tmp_path: Path) -> None:
    path = tmp_path / "small.csv"
    path.write_text("a,5,2024-03-01 12:00:01.000\n"
                    "a,7,2024-03-01 12:00:02.000\n"
                    "a,6,2024-03-01 12:00:03.000\n"
                    "a,1,2024-03-01 12:00:04.000\n")
    ddl = _ddl(path, batch_size=1)
    with_rank = Session().execute_script(ddl + TOP_N.format(outer="v, rn", order="v DESC", cond="rn <= 2") + ";")
    table = with_rank[-1].table
    assert table is not None
    changes = list(zip([RowKind(o).short for o in table.column("op").to_pylist()],
                       table.column("v").to_pylist(), table.column("rn").to_pylist(), strict=True))
    assert changes == [("+I", 5, 1),
                       ("-U", 5, 1), ("+U", 7, 1), ("+I", 5, 2),
                       ("-U", 5, 2), ("+U", 6, 2)]
    without = Session().execute_script(ddl + TOP_N.format(outer="v", order="v DESC", cond="rn <= 2") + ";")
    table = without[-1].table
    assert table is not None
    assert list(zip([RowKind(o).short for o in table.column("op").to_pylist()], table.column("v").to_pylist(),
                    strict=True)) == [("+I", 5), ("+I", 7), ("-D", 5), ("+I", 6)]


def test_top_n_into_an_append_only_sink_is_refused(csv_path: Path, tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="append-only"):
        Session().execute_script(_ddl(csv_path) + f"""
            CREATE TABLE out (k STRING, v INT, ts TIMESTAMP(3), rn BIGINT)
            WITH ('connector' = 'filesystem', 'path' = '{tmp_path / "out"}', 'format' = 'csv', 'csv.null-literal' = '');
            INSERT INTO out {TOP_N.format(outer="*", order="v", cond="rn <= 2")};""")


# ------------------------------------------------------------------ window Top-N / deduplication

def _tumble_oracle(size_ms: int) -> str:
    start = f"(epoch_ms(ts::TIMESTAMP) // {size_ms}) * {size_ms}"
    return (f"SELECT *, epoch_ms({start}) AS window_start, epoch_ms({start} + {size_ms}) AS window_end, "
            f"epoch_ms({start} + {size_ms - 1}) AS window_time FROM e")


@pytest.mark.parametrize("parallelism", [1, 2])
@pytest.mark.parametrize(("order", "cond"), [("v DESC NULLS LAST, ts", "rn <= 3"), ("ts", "rn = 1"),
                                             ("ts DESC", "rn = 1"), ("v NULLS FIRST, ts", "rn BETWEEN 2 AND 3")])
def test_window_top_n_over_tumble(csv_path: Path, events: pa.Table, order: str, cond: str, parallelism: int) -> None:
    inner = "TABLE(TUMBLE(TABLE e, DESCRIPTOR(ts), INTERVAL '20' SECOND))"
    template = ("SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, k "
                "ORDER BY {order}) AS rn FROM {inner}) WHERE {cond}")
    query = template.format(order=order, inner=inner, cond=cond)
    text = _explain(csv_path, query)
    assert "WindowRank(" in text and "[changelog]" not in text
    oracle = template.format(order=order, inner=f"({_tumble_oracle(20000)})", cond=cond)
    _check(csv_path, events, query, parallelism, oracle, minimum=50)


def test_window_top_n_over_hop(csv_path: Path, events: pa.Table) -> None:
    query = """SELECT window_start, window_end, k, v, rn FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY v DESC NULLS LAST, ts) AS rn
        FROM TABLE(HOP(TABLE e, DESCRIPTOR(ts), INTERVAL '10' SECOND, INTERVAL '30' SECOND))) WHERE rn <= 2"""
    oracle = """SELECT epoch_ms(ws), epoch_ms(ws + 30000), k, v, rn FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY ws ORDER BY v DESC NULLS LAST, ts) AS rn FROM (
            SELECT *, (epoch_ms(ts::TIMESTAMP) // 10000) * 10000 - j * 10000 AS ws FROM e, range(3) r(j)))
        WHERE rn <= 2"""
    _check(csv_path, events, query, 2, oracle, minimum=50)


@pytest.mark.parametrize("parallelism", [1, 2])
def test_window_top_n_over_a_window_aggregation(csv_path: Path, events: pa.Table, parallelism: int) -> None:
    query = """SELECT * FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY total DESC, k) AS rn
        FROM (SELECT window_start, window_end, k, SUM(v) AS total, COUNT(*) AS n
              FROM TABLE(TUMBLE(TABLE e, DESCRIPTOR(ts), INTERVAL '30' SECOND))
              GROUP BY window_start, window_end, k)) WHERE rn <= 2"""
    oracle = f"""SELECT * FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY total DESC, k) AS rn
        FROM (SELECT window_start, window_end, k, SUM(v) AS total, COUNT(*) AS n FROM ({_tumble_oracle(30000)})
              GROUP BY ALL)) WHERE rn <= 2"""
    _check(csv_path, events, query, parallelism, oracle, minimum=20)


def test_window_top_n_late_rows_are_dropped(tmp_path: Path) -> None:
    path = tmp_path / "late.csv"
    path.write_text("a,1,2024-03-01 12:00:01.000\n"
                    "a,2,2024-03-01 12:00:12.000\n"  # watermark 12:00:11: window [0 s, 10 s) fires
                    "a,9,2024-03-01 12:00:05.000\n"  # late
                    "a,3,2024-03-01 12:00:13.000\n")
    result = Session().execute_script(_ddl(path, batch_size=1).replace(f"'{DELAY_S}' SECOND", "'1' SECOND") + """
        SELECT v, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY v DESC) AS rn
        FROM TABLE(TUMBLE(TABLE e, DESCRIPTOR(ts), INTERVAL '10' SECOND))) WHERE rn <= 1;""")[-1]
    assert result.table is not None and result.job is not None
    assert rows(result.table.drop_columns(["op"])) == [(1, 1), (3, 1)]
    assert result.job.late_records_dropped == 1


# ------------------------------------------------------------------ ORDER BY / LIMIT

def _emitted(csv_path: Path, query: str, parallelism: int = 2) -> list[tuple]:
    table = run_sql(_ddl(csv_path, parallelism) + query + ";")
    return [tuple(r.values()) for r in table.to_pylist()]


def test_order_by_time_attribute_emits_sorted_rows(csv_path: Path, events: pa.Table) -> None:
    query = "SELECT ts, k, v FROM e WHERE v > 20 ORDER BY ts, k DESC"
    got = _emitted(csv_path, query)
    con_rows = duckdb_rows(query, e=events)  # as a set ...
    assert sorted(got, key=lambda r: (r[0], r[1])) == sorted(con_rows, key=lambda r: (r[0], r[1]))
    assert [r[0] for r in got] == sorted(r[0] for r in got)  # ... and in time order


@pytest.mark.parametrize("limit", [0, 1, 25])
def test_order_by_time_with_limit(csv_path: Path, events: pa.Table, limit: int) -> None:
    query = f"SELECT ts, v FROM e ORDER BY ts LIMIT {limit}"
    got = _emitted(csv_path, query)
    expected = [tuple(r.values()) for r in duckdb_query(query, events)]
    assert got == expected


def duckdb_query(query: str, events: pa.Table) -> list[dict]:
    import duckdb

    con = duckdb.connect()
    con.register("e", events)
    return con.sql(query).to_arrow_table().to_pylist()


@pytest.mark.parametrize("parallelism", [1, 2])
def test_order_by_another_column_with_limit_is_a_global_top_n(csv_path: Path, events: pa.Table,
                                                              parallelism: int) -> None:
    # Flink's streaming sort-limit: the top rows of the whole result, updated as they change
    _check(csv_path, events, "SELECT k, v, ts FROM e WHERE v IS NOT NULL ORDER BY v DESC, ts LIMIT 5", parallelism)
    _check(csv_path, events, "SELECT k, v, ts FROM e ORDER BY v NULLS FIRST, k, ts LIMIT 3", parallelism)
    # over an updating result as well
    _check(csv_path, events, "SELECT k, COUNT(*) AS n FROM e GROUP BY k ORDER BY n DESC, k LIMIT 2", parallelism)
    assert "Rank(rows 1..5, partition=[]" in _explain(csv_path, "SELECT * FROM e ORDER BY v DESC LIMIT 5")


@pytest.mark.parametrize("parallelism", [1, 2])
def test_row_number_without_a_condition_numbers_rows_in_time_order(csv_path: Path, events: pa.Table,
                                                                   parallelism: int) -> None:
    query = "SELECT k, v, ts, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts) AS rn FROM e"
    _check(csv_path, events, query, parallelism, minimum=1000)
    assert "OverAggregate" in _explain(csv_path, query)


def test_limit_takes_the_first_rows(csv_path: Path, events: pa.Table) -> None:
    got = _emitted(csv_path, "SELECT k, v, ts FROM e WHERE k = 'a' LIMIT 7")
    assert len(got) == 7
    assert set(got) <= set(rows(events))
    assert "Limit(limit=7)" in _explain(csv_path, "SELECT * FROM e LIMIT 7")
    fetched = _emitted(csv_path, "SELECT k FROM e FETCH FIRST 3 ROWS ONLY")
    assert len(fetched) == 3


# ------------------------------------------------------------------ plan errors

ERRORS = [
    ("SELECT SUM(v) OVER (PARTITION BY k ORDER BY v) FROM e", "ORDER BY the time attribute ascending"),
    ("SELECT SUM(v) OVER (ORDER BY ts DESC) FROM e", "ORDER BY the time attribute ascending"),
    ("SELECT SUM(v) OVER (ORDER BY ts ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM e", "FOLLOWING"),
    ("SELECT SUM(v) OVER (ORDER BY ts RANGE BETWEEN 3 PRECEDING AND CURRENT ROW) FROM e", "takes an INTERVAL"),
    ("SELECT SUM(v) OVER (PARTITION BY k ORDER BY ts), COUNT(*) OVER (ORDER BY ts) FROM e", "must be the same"),
    ("SELECT LEAD(v) OVER (ORDER BY ts) FROM e", "LEAD is not supported on streams"),
    ("SELECT COUNT(DISTINCT v) OVER (ORDER BY ts) FROM e", "DISTINCT"),
    ("SELECT SUM(v) OVER w FROM e WINDOW w2 AS (ORDER BY ts)", "unknown window 'w'"),
    ("SELECT k, SUM(v), SUM(v) OVER (ORDER BY ts) FROM e GROUP BY k", "'v' is neither grouped nor aggregated"),
    ("SELECT *, SUM(n) OVER (ORDER BY k) FROM (SELECT k, COUNT(*) AS n FROM e GROUP BY k)", "append-only input"),
    ("SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v) AS rn FROM e", "WHERE rn <= N"),
    ("SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts DESC) AS rn FROM e", "WHERE rn <= N"),
    (TOP_N.format(outer="*", order="v", cond="rn > 3"), "WHERE rn <= N"),
    (TOP_N.format(outer="*", order="v", cond="rn <= 0"), "selects no rows"),
    ("SELECT * FROM e ORDER BY v", "only by its time attribute ascending first (ORDER BY ts"),
    ("SELECT * FROM e ORDER BY v", "(ORDER BY v LIMIT n)"),
    ("SELECT * FROM e ORDER BY ts DESC", "ROW_NUMBER() OVER"),
    ("SELECT k, COUNT(*) AS n FROM e GROUP BY k ORDER BY n", "updating result"),
    ("SELECT k, COUNT(*) AS n FROM e GROUP BY k LIMIT 3", "updating result"),
    ("SELECT * FROM e ORDER BY ts LIMIT 3 OFFSET 1", "OFFSET is not supported"),
    ("SELECT * FROM e ORDER BY UPPER(k)", "columns of the query's result"),
    ("SELECT k FROM e ORDER BY ts", "select the columns it sorts by"),
]


@pytest.mark.parametrize(("query", "message"), ERRORS)
def test_plan_errors(csv_path: Path, query: str, message: str) -> None:
    with pytest.raises(PlanError) as info:
        _explain(csv_path, query)
    assert message in str(info.value)


# ------------------------------------------------------------------ checkpoints

SCHEMA = pa.schema([("k", pa.string()), ("v", pa.int32()), ("ts", pa.timestamp("ms"))])


def _elements(events: pa.Table, batch: int = 50) -> list[Chunk | Watermark]:
    out: list[Chunk | Watermark] = []
    ts = events.column("ts").cast(pa.int64()).to_numpy()
    for start in range(0, events.num_rows, batch):
        piece = events.slice(start, batch).to_batches()[0]
        out.append(Chunk(piece))
        out.append(Watermark(int(ts[: start + batch].max()) - DELAY_S * 1000))
    out.append(Watermark(MAX_WATERMARK))
    return out


def _run(make: Callable[[str], Operator], elements: list[Chunk | Watermark], backend: str, tmp: Path,
         cut: int | None) -> list[tuple]:
    """Feed elements to a fresh operator; at ``cut``, snapshot and continue on a restored copy."""
    h = OperatorHarness(make(backend), backend, tmp=tmp)
    out: list[tuple] = []
    for i, e in enumerate(elements):
        if i == cut:
            h = OperatorHarness(make(backend), backend, tmp=tmp, restore=h.snapshot())
        h.process_chunk(e) if isinstance(e, Chunk) else h.watermark(e.timestamp)
        out += h.take()
    return out


def _over(backend: str = "hashmap") -> Operator:
    aggs = [AggCall("SUM", 1, False, pa.int64(), "s"), AggCall("MIN", 1, False, pa.int32(), "lo")]
    schema = pa.schema(list(SCHEMA) + [pa.field("s", pa.int64()), pa.field("lo", pa.int32())])
    return OverAggOperator([0], 2, "RANGE", 5000, aggs, schema)


def _dedup(backend: str = "hashmap") -> Operator:
    return DeduplicateFirstOperator([0], 2, True, pa.schema(list(SCHEMA) + [pa.field("rn", pa.int64())]))


def _top(backend: str = "hashmap") -> Operator:
    return TopNOperator([0], [(1, True, False), (2, False, True)], 1, 3, True, False, False,
                        pa.schema(list(SCHEMA) + [pa.field("rn", pa.int64())]), *planned_state(backend))


def _window_top(backend: str = "hashmap") -> Operator:
    schema = pa.schema(list(SCHEMA) + [pa.field("we", pa.timestamp("ms")), pa.field("rn", pa.int64())])
    return _WindowEnds(WindowRankOperator([3, 0], 3, [(1, True, False), (2, False, True)], 1, 2, True, False, schema))


class _WindowEnds(Operator):
    """Adds a 10 s tumbling window end column in front of a window Top-N, as the window TVF would."""

    keyed = True

    def __init__(self, inner: WindowRankOperator) -> None:
        self.inner = inner

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        self.inner.open(ctx)

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> list:
        ts = chunk.batch.column(2).cast(pa.int64()).to_numpy()
        end = pa.array((ts // 10000 + 1) * 10000).cast(pa.timestamp("ms"))
        batch = pa.RecordBatch.from_arrays([*chunk.batch.columns, end], names=[*chunk.batch.schema.names, "we"])
        return self.inner.process_batch(Chunk(batch))

    def on_watermark(self, timestamp: int) -> list:
        return self.inner.on_watermark(timestamp)

    def snapshot_state(self, checkpoint_id: int) -> object:
        return self.inner.snapshot_state(checkpoint_id)

    def restore_state(self, state: object) -> None:
        self.inner.restore_state(state)


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
@pytest.mark.parametrize("make", [_over, _dedup, _top, _window_top], ids=["over", "dedup", "topn", "window-topn"])
def test_snapshot_and_restore_mid_stream_gives_the_same_output(
        events: pa.Table, tmp_path: Path, make: Callable[[], Operator], backend: str) -> None:
    table = pa.Table.from_batches(events.to_batches(), SCHEMA)
    elements = _elements(table)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    uninterrupted = _run(make, elements, backend, tmp_path / "a", None)
    restored = _run(make, elements, backend, tmp_path / "b", len(elements) // 2 + 1)
    assert restored == uninterrupted
    assert len(uninterrupted) >= 5


def test_over_state_keeps_only_rows_inside_the_frame() -> None:
    op = OperatorHarness(_over(), "hashmap")
    store = op.state
    rng = np.random.default_rng(1)
    schema = SCHEMA
    sizes = []
    for b in range(200):
        ts = b * 1000 + np.sort(rng.integers(0, 1000, 100))
        batch = pa.record_batch([pa.array(rng.choice(["a", "b", "c"], 100)), pa.array(rng.integers(0, 9, 100),
                                 pa.int32()), pa.array(ts).cast(pa.timestamp("ms"))], schema=schema)
        op.process_batch(batch)
        op.watermark(b * 1000 - 2000)
        retained = sum(len(f[0]) for _, _, f in store.state("frames").items())
        sizes.append(retained)
    # a 5 s RANGE keeps about 5 s of rows (500) however long the stream runs
    assert max(sizes[100:]) <= 700
    op.watermark(MAX_WATERMARK)
    assert len(store.state("frames")) == 0 and len(store.state("waiting")) == 0
