"""Aggregate FILTER clauses and Flink's legacy group windows, checked against DuckDB.

``agg(...) FILTER (WHERE c)`` feeds only rows where ``c`` is TRUE to the aggregate: the
events carry NULLs in the aggregated values and in the columns the conditions read, so
rows whose condition is NULL must be skipped like FALSE ones.  ``GROUP BY ...,
TUMBLE/HOP/SESSION(ts, ...)`` must give the rows of the windowing-TVF query it stands for,
and those of DuckDB's batch computation.  Events arrive out of order, within the
watermark delay, so no event is late and streaming results equal batch results.
"""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import pyarrow as pa
import pytest

from sqlstream.core.errors import PlanError
from sqlstream.frontend.session import Session
from tests.conftest import duckdb_rows, rows, run_sql

BASE = dt.datetime(2024, 3, 1, 12, 0, 0)
EPOCH = "epoch_ms(CAST(ts AS TIMESTAMP))"  # DuckDB 2.0 cannot take epoch_ms of TIMESTAMP_MS


def make_events(n: int, spacing_ms: list[int], seed: int, disorder_ms: int) -> pa.Table:
    """Events k, v, w, ts in arrival order: v and w NULL one time in six, key 'd' only ever
    with w NULL or negative (its filtered aggregates see no row at all)."""
    rng = random.Random(seed)
    events = []
    t = BASE
    for _ in range(n):
        t += dt.timedelta(milliseconds=rng.choice(spacing_ms))
        k = rng.choice(["a", "b", "c", "d"])
        v = None if rng.random() < 1 / 6 else rng.randint(-20, 60)
        w = None if rng.random() < 1 / 6 else rng.randint(-5, 9)
        if k == "d" and w is not None:
            w = -abs(w) - 1
        events.append((k, v, w, t))
    delays = [dt.timedelta(milliseconds=rng.randint(0, disorder_ms)) for _ in events]
    arrival = [e for _, e in sorted(zip(delays, events, strict=True), key=lambda p: p[1][3] + p[0])]
    return pa.table({
        "k": [e[0] for e in arrival],
        "v": pa.array([e[1] for e in arrival], pa.int32()),
        "w": pa.array([e[2] for e in arrival], pa.int32()),
        "ts": pa.array([e[3] for e in arrival], pa.timestamp("ms")),
    })


def source_ddl(events: pa.Table, path: Path, delay_s: int) -> str:
    with path.open("w") as f:
        for k, v, w, ts in zip(*(c.to_pylist() for c in events.columns), strict=True):
            cells = ["" if x is None else str(x) for x in (k, v, w)]
            f.write(",".join([*cells, ts.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]]) + "\n")
    return f"""
        SET 'table.exec.batch-size' = '89';
        CREATE TABLE events (
            k STRING, v INT, w INT, ts TIMESTAMP(3),
            WATERMARK FOR ts AS ts - INTERVAL '{delay_s}' SECOND
        ) WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv', 'csv.null-literal' = '');
    """


@pytest.fixture(scope="module")
def dense() -> pa.Table:
    """3000 events 137 ms apart (about 7 minutes), up to 4 s out of order."""
    return make_events(3000, [137], seed=5, disorder_ms=4000)


@pytest.fixture
def dense_ddl(tmp_path: Path, dense: pa.Table) -> str:
    return source_ddl(dense, tmp_path / "dense.csv", delay_s=5)


@pytest.fixture(scope="module")
def sparse() -> pa.Table:
    """Events with gaps around a 3 s session gap, so that sessions split and merge."""
    return make_events(800, [300, 800, 1500, 4000, 9000], seed=11, disorder_ms=2500)


@pytest.fixture
def sparse_ddl(tmp_path: Path, sparse: pa.Table) -> str:
    return source_ddl(sparse, tmp_path / "sparse.csv", delay_s=3)


# each aggregate with a condition that is NULL where w is NULL, and one that never is NULL
FILTERED = """
    COUNT(*) FILTER (WHERE w > 0), COUNT(v) FILTER (WHERE w > 0),
    COUNT(DISTINCT v) FILTER (WHERE w > 0), SUM(v) FILTER (WHERE w > 0),
    MIN(v) FILTER (WHERE w > 0), MAX(v) FILTER (WHERE w % 3 = 0),
    AVG(CAST(v AS DOUBLE)) FILTER (WHERE w > 0), COUNT(*) FILTER (WHERE v IS NULL),
    SUM(v), COUNT(DISTINCT v) FILTER (WHERE v < w OR w IS NULL)
"""


def test_filter_on_each_aggregate_in_group_by_matches_duckdb(
    dense_ddl: str, dense: pa.Table
) -> None:
    got = run_sql(dense_ddl + f"SELECT k, {FILTERED} FROM events GROUP BY k;")
    expected = duckdb_rows(f"SELECT k, {FILTERED} FROM events GROUP BY k", events=dense)
    assert rows(got) == expected
    d = next(r for r in expected if r[0] == "d")
    assert d[1] == 0 and d[4] is None  # key 'd': the filtered aggregates saw no row


def test_filter_with_expression_keys_and_in_having_matches_duckdb(
    dense_ddl: str, dense: pa.Table
) -> None:
    query = """
        SELECT UPPER(k) AS uk, w % 2 AS parity, COUNT(*) FILTER (WHERE v > 10) + 1 AS n,
               SUM(v) FILTER (WHERE w IN (1, 2, 3)) AS s
        FROM events
        GROUP BY UPPER(k), w % 2
        HAVING COUNT(*) FILTER (WHERE v > 10) BETWEEN 100 AND 150
            OR MIN(v) FILTER (WHERE w = 4) < -15"""
    got = run_sql(dense_ddl + query + ";")
    expected = duckdb_rows(query, events=dense)
    assert rows(got) == expected
    groups = duckdb_rows("SELECT DISTINCT UPPER(k), w % 2 FROM events", events=dense)
    assert 0 < len(expected) < len(groups)


def test_filter_on_a_grouping_key_in_grouping_sets_matches_duckdb(
    dense_ddl: str, dense: pa.Table
) -> None:
    # the total rows aggregate every input row: k keeps its value inside aggregates and FILTER
    query = """
        SELECT k, w % 2 AS parity, COUNT(*) FILTER (WHERE k = 'a') AS na,
               COUNT(DISTINCT k) AS keys, SUM(v) FILTER (WHERE k <> 'b' AND w > 0) AS s
        FROM events GROUP BY ROLLUP(k, w % 2)"""
    got = run_sql(dense_ddl + query + ";")
    expected = duckdb_rows(query, events=dense)
    assert rows(got) == expected
    total = next(r for r in expected if r[0] is None and r[1] is None)
    assert total[2] > 0 and total[3] == 4


def test_filter_in_tumble_window_aggregation_matches_duckdb(
    dense_ddl: str, dense: pa.Table
) -> None:
    got = run_sql(dense_ddl + f"""
        SELECT window_start, window_end, k, {FILTERED}
        FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
        GROUP BY window_start, window_end, k;""")
    expected = duckdb_rows(f"""
        SELECT epoch_ms(({EPOCH} // 10000) * 10000), epoch_ms(({EPOCH} // 10000 + 1) * 10000), k,
               {FILTERED}
        FROM events GROUP BY ALL""", events=dense)
    assert rows(got) == expected
    assert len(expected) > 100


def test_filter_in_session_window_aggregation_matches_duckdb(
    sparse_ddl: str, sparse: pa.Table
) -> None:
    got = run_sql(sparse_ddl + f"""
        SELECT window_start, window_end, k, {FILTERED}
        FROM TABLE(SESSION(TABLE events PARTITION BY k, DESCRIPTOR(ts), INTERVAL '3' SECOND))
        GROUP BY window_start, window_end, k;""")
    assert rows(got) == duckdb_sessions(f"k, {FILTERED}", sparse)


def duckdb_sessions(aggregates: str, events: pa.Table) -> list[tuple]:
    """Per key sessions with a 3 s gap, computed in DuckDB: start, end, then ``aggregates``."""
    return duckdb_rows(f"""
        WITH o AS (
            SELECT *, CASE WHEN {EPOCH} - lag({EPOCH}) OVER (PARTITION BY k ORDER BY ts) <= 3000
                      THEN 0 ELSE 1 END AS new_session FROM events
        ), s AS (SELECT *, SUM(new_session) OVER (PARTITION BY k ORDER BY ts) AS sid FROM o)
        SELECT MIN(ts), epoch_ms(MAX({EPOCH}) + 3000), {aggregates}
        FROM s GROUP BY k, sid""", events=events)


LEGACY_AGGS = "COUNT(*) AS n, SUM(v) AS s, MAX(v) AS hi, COUNT(DISTINCT w) AS dw"
DUCK_AGGS = "COUNT(*), SUM(v), MAX(v), COUNT(DISTINCT w)"


def test_legacy_tumble_equals_the_tvf_form_and_duckdb(dense_ddl: str, dense: pa.Table) -> None:
    legacy = run_sql(dense_ddl + f"""
        SELECT TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws,
               TUMBLE_END(ts, INTERVAL '10' SECOND) AS we,
               TUMBLE_ROWTIME(ts, INTERVAL '10' SECOND) AS wt, k, {LEGACY_AGGS}
        FROM events GROUP BY TUMBLE(ts, INTERVAL '10' SECOND), k;""")
    tvf = run_sql(dense_ddl + f"""
        SELECT window_start, window_end, window_time, k, {LEGACY_AGGS}
        FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
        GROUP BY window_start, window_end, window_time, k;""")
    expected = duckdb_rows(f"""
        SELECT epoch_ms(({EPOCH} // 10000) * 10000), epoch_ms(({EPOCH} // 10000 + 1) * 10000),
               epoch_ms(({EPOCH} // 10000 + 1) * 10000 - 1), k, {DUCK_AGGS}
        FROM events GROUP BY ALL""", events=dense)
    assert rows(legacy) == rows(tvf) == expected
    assert len(expected) > 100


def test_legacy_hop_takes_slide_then_size(dense_ddl: str, dense: pa.Table) -> None:
    legacy = run_sql(dense_ddl + f"""
        SELECT k, HOP_START(ts, INTERVAL '5' SECOND, INTERVAL '15' SECOND),
               HOP_END(ts, INTERVAL '5' SECOND, INTERVAL '15' SECOND),
               HOP_ROWTIME(ts, INTERVAL '5' SECOND, INTERVAL '15' SECOND), {LEGACY_AGGS}
        FROM events GROUP BY k, HOP(ts, INTERVAL '5' SECOND, INTERVAL '15' SECOND);""")
    tvf = run_sql(dense_ddl + f"""
        SELECT k, window_start, window_end, window_time, {LEGACY_AGGS}
        FROM TABLE(HOP(TABLE events, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '15' SECOND))
        GROUP BY k, window_start, window_end, window_time;""")
    expected = duckdb_rows(f"""
        WITH w AS (SELECT *, ({EPOCH} // 5000) * 5000 - j * 5000 AS ws FROM events, range(3) r(j))
        SELECT k, epoch_ms(ws), epoch_ms(ws + 15000), epoch_ms(ws + 14999), {DUCK_AGGS}
        FROM w GROUP BY ws, k""", events=dense)
    assert rows(legacy) == rows(tvf) == expected


def test_legacy_session_equals_the_partitioned_tvf_form_and_duckdb(
    sparse_ddl: str, sparse: pa.Table
) -> None:
    legacy = run_sql(sparse_ddl + f"""
        SELECT SESSION_START(ts, INTERVAL '3' SECOND), SESSION_END(ts, INTERVAL '3' SECOND), k,
               {LEGACY_AGGS},
               SESSION_ROWTIME(ts, INTERVAL '3' SECOND)
        FROM events GROUP BY k, SESSION(ts, INTERVAL '3' SECOND);""")
    tvf = run_sql(sparse_ddl + f"""
        SELECT window_start, window_end, k, {LEGACY_AGGS}, window_time
        FROM TABLE(SESSION(TABLE events PARTITION BY k, DESCRIPTOR(ts), INTERVAL '3' SECOND))
        GROUP BY window_start, window_end, window_time, k;""")
    expected = duckdb_sessions(f"k, {DUCK_AGGS}, epoch_ms(MAX({EPOCH}) + 2999)", sparse)
    assert rows(legacy) == rows(tvf) == expected
    assert len(expected) > 50


def test_legacy_window_with_filter_expression_keys_and_having(
    dense_ddl: str, dense: pa.Table
) -> None:
    got = run_sql(dense_ddl + """
        SELECT UPPER(k) AS uk,
               TUMBLE_END(ts, INTERVAL '30' SECOND) - INTERVAL '1' SECOND AS last_second,
               COUNT(*) FILTER (WHERE w > 0) AS n
        FROM events
        GROUP BY TUMBLE(ts, INTERVAL '30' SECOND), UPPER(k)
        HAVING SUM(v) FILTER (WHERE w > 0) > 100
           AND TUMBLE_START(ts, INTERVAL '30' SECOND) > TIMESTAMP '2024-03-01 12:01:00';""")
    expected = duckdb_rows(f"""
        SELECT UPPER(k), epoch_ms(({EPOCH} // 30000 + 1) * 30000 - 1000),
               COUNT(*) FILTER (WHERE w > 0)
        FROM events GROUP BY {EPOCH} // 30000, UPPER(k)
        HAVING SUM(v) FILTER (WHERE w > 0) > 100
           AND {EPOCH} // 30000 * 30000 > epoch_ms(TIMESTAMP '2024-03-01 12:01:00')""",
        events=dense)
    assert rows(got) == expected
    assert 0 < len(expected) < 4 * 14


def test_legacy_rowtime_is_a_time_attribute_for_a_later_group_window(
    dense_ddl: str, dense: pa.Table
) -> None:
    got = run_sql(dense_ddl + """
        SELECT k, TUMBLE_START(rt, INTERVAL '1' MINUTE) AS ws, SUM(n) AS n, MAX(hi) AS hi
        FROM (
            SELECT k, TUMBLE_ROWTIME(ts, INTERVAL '10' SECOND) AS rt, COUNT(*) AS n, MAX(v) AS hi
            FROM events GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND)
        )
        GROUP BY k, TUMBLE(rt, INTERVAL '1' MINUTE);""")
    expected = duckdb_rows(f"""
        SELECT k, epoch_ms(({EPOCH} // 60000) * 60000), COUNT(*), MAX(v)
        FROM events GROUP BY ALL""",
        events=dense)
    assert rows(got) == expected


# ------------------------------------------------------------------ errors


@pytest.fixture
def session(tmp_path: Path) -> Session:
    path = tmp_path / "e.csv"
    path.write_text("a,1,2,2024-03-01 12:00:01.000\n")
    s = Session()
    s.execute_script(f"""
        CREATE TABLE events (
            k STRING, v INT, w INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
        WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv', 'csv.null-literal' = '');
        CREATE TABLE plain (k STRING, ts TIMESTAMP(3))
        WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv', 'csv.null-literal' = '');""")
    return s


def plan_error(session: Session, query: str, at: str) -> PlanError:
    """The error of a one-line query, which must be located at the first occurrence of ``at``."""
    with pytest.raises(PlanError) as raised:
        session.execute_script(query + ";")
    error = raised.value
    assert (error.line, error.col) == (1, query.index(at) + 1), error.message
    return error


def test_group_window_over_a_column_without_watermark_is_refused(session: Session) -> None:
    query = "SELECT COUNT(*) FROM plain GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)"
    error = plan_error(session, query, "ts,")
    assert "time attribute" in error.message and "TUMBLE" in error.message


def test_group_window_over_a_column_that_is_not_the_time_attribute_is_refused(
    session: Session,
) -> None:
    query = "SELECT COUNT(*) FROM events GROUP BY k, SESSION(v, INTERVAL '1' MINUTE)"
    error = plan_error(session, query, "v,")
    assert "time attribute" in error.message and "SESSION" in error.message


def test_window_start_without_its_group_window_is_refused(session: Session) -> None:
    query = "SELECT k, TUMBLE_START(ts, INTERVAL '1' MINUTE), COUNT(*) FROM events GROUP BY k"
    error = plan_error(session, query, "TUMBLE_START")
    assert "needs the group window TUMBLE(time_attribute, size)" in error.message


def test_window_end_of_another_window_is_refused(session: Session) -> None:
    error = plan_error(session, "SELECT HOP_END(ts, INTERVAL '1' MINUTE, INTERVAL '2' MINUTE) "
                       "FROM events GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)", "HOP_END")
    assert "needs a HOP group window" in error.message


def test_window_start_with_other_intervals_is_refused(session: Session) -> None:
    error = plan_error(session, "SELECT SESSION_START(ts, INTERVAL '2' MINUTE) "
                       "FROM events GROUP BY SESSION(ts, INTERVAL '1' MINUTE)", "SESSION_START")
    assert "does not match the group window SESSION(ts, INTERVAL '1' MINUTE)" in error.message


def test_group_window_in_the_select_list_is_refused(session: Session) -> None:
    error = plan_error(session, "SELECT TUMBLE(ts, INTERVAL '1' MINUTE), COUNT(*) "
                       "FROM events GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)", "TUMBLE")
    assert "only allowed in GROUP BY" in error.message and "TUMBLE_START" in error.message


def test_two_group_windows_are_refused(session: Session) -> None:
    query = ("SELECT COUNT(*) FROM events GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE), "
             "HOP(ts, INTERVAL '1' MINUTE, INTERVAL '2' MINUTE)")
    error = plan_error(session, query, "HOP")
    assert "one group window" in error.message


def test_hop_size_must_be_a_multiple_of_the_slide(session: Session) -> None:
    query = "SELECT COUNT(*) FROM events GROUP BY HOP(ts, INTERVAL '2' MINUTE, INTERVAL '3' MINUTE)"
    error = plan_error(session, query, "HOP")
    assert "integral multiple of the slide" in error.message


def test_aggregate_in_a_filter_condition_is_refused(session: Session) -> None:
    query = "SELECT k, COUNT(*) FILTER (WHERE v > MAX(w)) FROM events GROUP BY k"
    error = plan_error(session, query, "MAX")
    assert "not allowed in the FILTER condition of COUNT" in error.message


def test_filter_condition_must_be_boolean(session: Session) -> None:
    error = plan_error(session, "SELECT SUM(v) FILTER (WHERE w + 1) FROM events", "w + 1")
    assert "FILTER condition must be BOOLEAN" in error.message


def test_filter_on_a_scalar_function_is_refused(session: Session) -> None:
    error = plan_error(session, "SELECT UPPER(k) FILTER (WHERE v > 1) FROM events", "UPPER")
    assert "only applies to an aggregate function" in error.message
