"""Windowed aggregations over out-of-order bounded input equal DuckDB's batch answer.

Events are shuffled within a bound smaller than the watermark delay, so no
event is late and the streaming result must equal the batch result exactly.
"""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import pyarrow as pa
import pytest

from sqlstream.core.aggregates import AggCall, window_agg_columnar
from sqlstream.core.windows import WindowSpec
from sqlstream.runtime.elements import Chunk
from sqlstream.runtime.operators.window_agg import WindowAggOperator
from tests.conftest import duckdb_rows, rows, run_sql
from tests.harness import OperatorHarness, Snapshot, planned_state

BASE = dt.datetime(2024, 3, 1, 12, 0, 0)
DELAY_S = 5  # watermark delay; disorder stays below it


def make_events(n: int = 3000, seed: int = 7, disorder_ms: int = 4000) -> pa.Table:
    rng = random.Random(seed)
    events = []
    for i in range(n):
        ts = BASE + dt.timedelta(milliseconds=i * 137)
        events.append((rng.choice(["a", "b", "c", "d"]), rng.randint(-50, 100), ts))
    # out of order: each event moves back by up to disorder_ms in arrival order
    keyed = [(e[2] + dt.timedelta(milliseconds=rng.randint(0, disorder_ms)), e) for e in events]
    keyed.sort(key=lambda p: p[0])
    ordered = [e for _, e in keyed]
    return pa.table({
        "k": [e[0] for e in ordered],
        "v": pa.array([e[1] for e in ordered], pa.int32()),
        "ts": pa.array([e[2] for e in ordered], pa.timestamp("ms")),
    })


def write_csv(table: pa.Table, path: Path) -> None:
    with path.open("w") as f:
        for k, v, ts in zip(*(c.to_pylist() for c in table.columns), strict=True):
            f.write(f"{k},{v},{ts.strftime('%Y-%m-%d %H:%M:%S.%f')[:-3]}\n")


@pytest.fixture(scope="module")
def events() -> pa.Table:
    return make_events()


@pytest.fixture
def source_ddl(tmp_path: Path, events: pa.Table) -> str:
    path = tmp_path / "events.csv"
    write_csv(events, path)
    return f"""
        SET 'table.exec.batch-size' = '97';
        CREATE TABLE events (
            k STRING, v INT, ts TIMESTAMP(3),
            WATERMARK FOR ts AS ts - INTERVAL '{DELAY_S}' SECOND
        ) WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv');
    """


AGGS = "COUNT(*) AS n, SUM(v) AS s, MIN(v) AS lo, MAX(v) AS hi, COUNT(DISTINCT v) AS d, AVG(CAST(v AS DOUBLE)) AS a"
DUCK_AGGS = "COUNT(*), SUM(v), MIN(v), MAX(v), COUNT(DISTINCT v), AVG(CAST(v AS DOUBLE))"
EPOCH = "epoch_ms(CAST(ts AS TIMESTAMP))"  # DuckDB 2.0 cannot take epoch_ms of TIMESTAMP_MS


def test_tumble_matches_duckdb(source_ddl: str, events: pa.Table) -> None:
    got = run_sql(source_ddl + f"""
        SELECT window_start, window_end, k, {AGGS}
        FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
        GROUP BY window_start, window_end, k;""")
    expected = duckdb_rows(f"""
        SELECT epoch_ms(({EPOCH} // 10000) * 10000) AS ws,
               epoch_ms(({EPOCH} // 10000 + 1) * 10000) AS we, k, {DUCK_AGGS}
        FROM events GROUP BY ALL""", events=events)
    assert rows(got) == expected
    assert len(expected) > 100


def test_hop_matches_duckdb(source_ddl: str, events: pa.Table) -> None:
    got = run_sql(source_ddl + f"""
        SELECT window_start, window_end, k, {AGGS}
        FROM TABLE(HOP(TABLE events, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '15' SECOND))
        GROUP BY window_start, window_end, k;""")
    expected = duckdb_rows(f"""
        WITH w AS (
            SELECT *, ({EPOCH} // 5000) * 5000 - j * 5000 AS ws FROM events, range(3) r(j)
        )
        SELECT epoch_ms(ws), epoch_ms(ws + 15000), k, {DUCK_AGGS}
        FROM w GROUP BY ws, k""", events=events)
    assert rows(got) == expected


def test_cumulate_matches_duckdb(source_ddl: str, events: pa.Table) -> None:
    got = run_sql(source_ddl + f"""
        SELECT window_start, window_end, k, {AGGS}
        FROM TABLE(CUMULATE(TABLE events, DESCRIPTOR(ts), INTERVAL '4' SECOND, INTERVAL '20' SECOND))
        GROUP BY window_start, window_end, k;""")
    expected = duckdb_rows(f"""
        WITH w AS (
            SELECT *, ({EPOCH} // 20000) * 20000 AS ws,
                   ({EPOCH} // 20000) * 20000 + i * 4000 AS we
            FROM events, range(1, 6) r(i)
            WHERE ({EPOCH} // 20000) * 20000 + i * 4000 > {EPOCH}
        )
        SELECT epoch_ms(ws), epoch_ms(we), k, {DUCK_AGGS}
        FROM w GROUP BY ws, we, k""", events=events)
    assert rows(got) == expected


def test_session_matches_duckdb(tmp_path: Path) -> None:
    # sparse events so that sessions (gap 3 s) really split and merge out of order; a row exactly one
    # gap after the previous still joins its session, as Flink merges touching windows
    rng = random.Random(11)
    events_list = []
    t = BASE
    for _ in range(800):
        t += dt.timedelta(milliseconds=rng.choice([300, 800, 1500, 4000, 9000]))
        events_list.append((rng.choice(["a", "b", "c"]), rng.randint(0, 9), t))
    arrival = sorted(events_list, key=lambda e: e[2] + dt.timedelta(milliseconds=rng.randint(0, 2500)))
    events = pa.table({
        "k": [e[0] for e in arrival],
        "v": pa.array([e[1] for e in arrival], pa.int32()),
        "ts": pa.array([e[2] for e in arrival], pa.timestamp("ms")),
    })
    path = tmp_path / "s.csv"
    write_csv(events, path)
    got = run_sql(f"""
        SET 'table.exec.batch-size' = '50';
        CREATE TABLE events (k STRING, v INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '3' SECOND)
        WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv');
        SELECT window_start, window_end, k, COUNT(*) AS n, SUM(v) AS s, MAX(v) AS hi
        FROM TABLE(SESSION(TABLE events PARTITION BY k, DESCRIPTOR(ts), INTERVAL '3' SECOND))
        GROUP BY window_start, window_end, k;""")
    expected = duckdb_rows("""
        WITH o AS (
            SELECT *, CASE WHEN epoch_ms(ts::TIMESTAMP) - lag(epoch_ms(ts::TIMESTAMP)) OVER (PARTITION BY k ORDER BY ts) <= 3000
                      THEN 0 ELSE 1 END AS new_session FROM events
        ), s AS (SELECT *, SUM(new_session) OVER (PARTITION BY k ORDER BY ts) AS sid FROM o)
        SELECT MIN(ts), epoch_ms(MAX(epoch_ms(ts::TIMESTAMP)) + 3000), k, COUNT(*), SUM(v), MAX(v)
        FROM s GROUP BY k, sid""", events=events)
    assert rows(got) == expected
    assert len(expected) > 50


def test_late_events_are_dropped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "late.csv"
    path.write_text(
        "a,1,2024-03-01 12:00:01.000\n"
        "a,2,2024-03-01 12:00:12.000\n"  # watermark -> 12:00:11: window [0, 10) fires
        "a,4,2024-03-01 12:00:03.000\n"  # late: its window already fired
        "a,8,2024-03-01 12:00:13.000\n"
    )
    from sqlstream.frontend.session import Session

    session = Session()
    session.config["table.exec.batch-size"] = "1"
    results = session.execute_script(f"""
        CREATE TABLE e (k STRING, v INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
        WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv');
        SELECT window_start, k, SUM(v) AS s, COUNT(*) AS n
        FROM TABLE(TUMBLE(TABLE e, DESCRIPTOR(ts), INTERVAL '10' SECOND))
        GROUP BY window_start, window_end, k;""")
    result = results[-1]
    assert rows(result.table.drop_columns(["op"])) == [
        (dt.datetime(2024, 3, 1, 12, 0, 0), "a", 1, 1),
        (dt.datetime(2024, 3, 1, 12, 0, 10), "a", 10, 2),
    ]
    assert result.job.late_records_dropped == 1


def test_window_state_from_a_rocksdb_savepoint_keeps_its_types_on_hashmap(tmp_path: Path) -> None:
    # per-key accumulators taken over as columnar partials carry Python's types (INT keys as BIGINT,
    # timestamps in microseconds) until the first batch's partials say the real ones
    schema = pa.schema([("k", pa.int32()), ("ts", pa.timestamp("ms"))])
    aggs = [AggCall("COUNT", 1, True, pa.int64(), "n"), AggCall("MAX", 1, False, pa.timestamp("ms"), "m")]
    out = pa.schema([("k", pa.int32()), ("window_end", pa.timestamp("ms")), ("n", pa.int64()),
                     ("m", pa.timestamp("ms"))])
    window = WindowSpec("TUMBLE", 1, size_ms=10_000)

    def batch(second: int) -> Chunk:
        times = [dt.datetime(2024, 1, 1, 0, 0, second, ms * 1000) for ms in (1, 2, 1)]
        return Chunk(pa.RecordBatch.from_arrays([pa.array([1, 2, 1], pa.int32()),
                                                 pa.array(times, pa.timestamp("ms"))], schema=schema))

    def operator(backend: str, restored: Snapshot | None = None) -> OperatorHarness:
        op = WindowAggOperator(window, [0, "window_end"], aggs, out,
                               columnar=planned_state(backend, None, window_agg_columnar(aggs))[1])
        return OperatorHarness(op, backend, tmp=tmp_path, restore=restored)

    first = operator("rocksdb")
    for second in range(3):
        first.process_chunk(batch(second))
    resumed = operator("hashmap", Snapshot(first.snapshot().keyed, None))
    for second in range(3, 5):
        resumed.process_chunk(batch(second))
    fired = [r for c in resumed.watermark(10**13) if isinstance(c, Chunk) for r in c.batch.to_pylist()]
    end = dt.datetime(2024, 1, 1, 0, 0, 10)
    assert sorted(fired, key=lambda r: r["k"]) == [
        {"k": 1, "window_end": end, "n": 5, "m": dt.datetime(2024, 1, 1, 0, 0, 4, 1000)},
        {"k": 2, "window_end": end, "n": 5, "m": dt.datetime(2024, 1, 1, 0, 0, 4, 2000)}]
