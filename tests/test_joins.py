"""Joins over bounded out-of-order input, compared with DuckDB after applying the changelog."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from sqlstream.core.joins import IntervalBounds
from sqlstream.runtime.operators.interval_join import IntervalJoinOperator
from tests.conftest import duckdb_rows, rows, run_sql
from tests.harness import OperatorHarness

BASE = dt.datetime(2024, 1, 1)


def _csv(table: pa.Table, path: Path) -> None:
    with path.open("w") as f:
        for r in table.to_pylist():
            f.write(",".join(
                v.strftime("%Y-%m-%d %H:%M:%S.000") if isinstance(v, dt.datetime) else ("" if v is None else str(v))
                for v in r.values()) + "\n")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, pa.Table, pa.Table]:
    rng = random.Random(5)
    tmp = tmp_path_factory.mktemp("joins")
    orders = pa.table({
        "oid": pa.array(range(400), pa.int32()),
        "k": pa.array([rng.choice([*range(30), None]) for _ in range(400)], pa.int32()),
        "amt": pa.array([rng.randint(1, 100) for _ in range(400)], pa.int32()),
        "ts": pa.array([BASE + dt.timedelta(seconds=i * 3 + rng.randint(0, 4)) for i in range(400)], pa.timestamp("ms")),
    })
    pays = pa.table({
        "k": pa.array([rng.randint(0, 40) for _ in range(300)], pa.int32()),
        "v": pa.array([rng.randint(1, 9) for _ in range(300)], pa.int32()),
        "pts": pa.array([BASE + dt.timedelta(seconds=i * 4 + rng.randint(0, 4)) for i in range(300)], pa.timestamp("ms")),
    })
    _csv(orders, tmp / "o.csv")
    _csv(pays, tmp / "p.csv")
    ddl = f"""SET 'table.exec.batch-size' = '23'; SET 'parallelism.default' = '2';
CREATE TABLE o (oid INT, k INT, amt INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{tmp / "o.csv"}', 'format' = 'csv', 'csv.null-literal' = '');
CREATE TABLE p (k INT, v INT, pts TIMESTAMP(3), WATERMARK FOR pts AS pts - INTERVAL '5' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{tmp / "p.csv"}', 'format' = 'csv', 'csv.null-literal' = '');
"""
    return ddl, orders, pays


@pytest.mark.parametrize("kind", ["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL OUTER JOIN"])
def test_regular_join_with_residual_matches_duckdb(data, kind: str) -> None:
    ddl, orders, pays = data
    q = f"SELECT o.oid, o.k, p.v FROM o {kind} p ON o.k = p.k AND o.amt > p.v * 5"
    assert rows(run_sql(ddl + q + ";")) == duckdb_rows(q, o=orders, p=pays)


def test_comma_join_with_where_becomes_an_equi_join(data) -> None:
    ddl, orders, pays = data
    q = "SELECT o.oid, p.v FROM o, p WHERE o.k = p.k AND p.v > 4 AND o.amt < 50"
    assert rows(run_sql(ddl + q + ";")) == duckdb_rows(q, o=orders, p=pays)


def test_join_then_aggregate_consumes_outer_join_retractions(data) -> None:
    ddl, orders, pays = data
    q = "SELECT o.k, COUNT(*) AS n, SUM(p.v) AS s FROM o LEFT JOIN p ON o.k = p.k GROUP BY o.k"
    assert rows(run_sql(ddl + q + ";")) == duckdb_rows(q, o=orders, p=pays)


@pytest.mark.parametrize("kind", ["JOIN", "LEFT JOIN", "FULL JOIN"])
def test_interval_join_matches_duckdb(data, kind: str) -> None:
    ddl, orders, pays = data
    q = (f"SELECT o.oid, p.v, p.pts FROM o {kind} p ON o.k = p.k "
         "AND o.ts BETWEEN p.pts - INTERVAL '10' SECOND AND p.pts + INTERVAL '5' SECOND")
    assert rows(run_sql(ddl + q + ";")) == duckdb_rows(q, o=orders, p=pays)


def test_interval_join_is_planned_as_one_and_is_append_only(data) -> None:
    ddl, _, _ = data
    from sqlstream.frontend.session import Session

    text = Session().execute_script(ddl + """EXPLAIN SELECT o.oid FROM o JOIN p ON o.k = p.k
        AND o.ts BETWEEN p.pts - INTERVAL '1' HOUR AND p.pts;""")[-1].message
    assert "IntervalJoin" in text and "-3600000ms" in text and "[changelog]" not in text


@pytest.mark.parametrize("kind", ["JOIN", "LEFT JOIN", "FULL JOIN"])
def test_window_join_matches_duckdb(data, kind: str) -> None:
    ddl, orders, pays = data
    got = run_sql(ddl + f"""
        SELECT l.window_start, l.k, l.amt, r.v, r.window_start AS rws FROM
          (SELECT * FROM TABLE(TUMBLE(TABLE o, DESCRIPTOR(ts), INTERVAL '20' SECOND))) l
        {kind}
          (SELECT * FROM TABLE(TUMBLE(TABLE p, DESCRIPTOR(pts), INTERVAL '20' SECOND))) r
        ON l.window_start = r.window_start AND l.window_end = r.window_end AND l.k = r.k;""")
    expected = duckdb_rows(f"""
        WITH l AS (SELECT *, epoch_ms((epoch_ms(ts::TIMESTAMP) // 20000) * 20000) AS ws FROM o),
             r AS (SELECT *, epoch_ms((epoch_ms(pts::TIMESTAMP) // 20000) * 20000) AS ws FROM p)
        SELECT l.ws, l.k, l.amt, r.v, r.ws FROM l {kind} r ON l.ws = r.ws AND l.k = r.k""", o=orders, p=pays)
    assert rows(got) == expected


@pytest.mark.slow
def test_interval_join_state_stays_flat_over_a_million_events() -> None:
    schema = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("ms"))])
    out_schema = pa.schema(list(schema) + [pa.field("k2", pa.int64()), pa.field("ts2", pa.timestamp("ms"))])
    join = IntervalJoinOperator("INNER", (0,), (0,), None, IntervalBounds(1, 1, -2000, 0), schema, schema, out_schema)
    op = OperatorHarness(join, "hashmap", inputs=2, keep_output=False)
    rng = np.random.default_rng(0)
    sizes = []
    batch_rows, total = 10_000, 1_000_000
    for b in range(total // batch_rows // 2):
        t0 = b * batch_rows  # one event per ms per side
        for side in (0, 1):
            ts = t0 + np.arange(batch_rows) + rng.integers(0, 50, batch_rows)
            batch = pa.record_batch([pa.array(rng.integers(0, 100, batch_rows)), pa.array(ts).cast(pa.timestamp("ms"))], schema=schema)
            op.process_batch(batch, input_index=side)
        op.watermark(t0 + batch_rows - 100)
        sizes.append(join.state_rows())
    first, second = max(sizes[: len(sizes) // 2]), max(sizes[len(sizes) // 2:])
    assert second <= first * 1.1  # flat: no growth with the number of events
    assert second < 4 * batch_rows  # bounded by the interval (2 s) plus one batch per side


def test_a_using_column_is_one_column_first_in_select_star_and_each_side_answers_qualified() -> None:
    views = """CREATE TEMPORARY VIEW a AS SELECT * FROM (VALUES (1, 'x'), (3, 'y')) AS t(v, k);
        CREATE TEMPORARY VIEW b AS SELECT * FROM (VALUES ('x', 2)) AS t(k, w);
        """
    star = run_sql(views + "SELECT * FROM a LEFT JOIN b USING (k);")
    # Flink: root |-- k |-- v |-- w
    assert star.schema.names == ["k", "v", "w"]
    assert rows(star) == [("x", 1, 2), ("y", 3, None)]
    qualified = run_sql(views + "SELECT k, a.k, b.k FROM a JOIN b USING (k);")
    assert rows(qualified) == [("x", "x", "x")]
