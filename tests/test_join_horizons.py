"""Regular joins forget stored rows that no later row can match (sqlstream/planner/horizons.py).

The rows of a window aggregation only ever arrive ahead of the watermark, so
a join condition that bounds a stored row's time by such a column (Nexmark
q7) lets the join drop rows the watermark has left behind: same results,
flat state.  Rows of any other input (a source, even one with a watermark:
a regular join still matches its late rows) keep everything.
"""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from sqlstream.core.joins import Horizon
from sqlstream.core.sql.script import parse_one
from sqlstream.frontend.session import Session
from sqlstream.planner.horizons import join_horizons
from sqlstream.planner.joins import analyze
from sqlstream.planner.logical import Join
from sqlstream.planner.optimizer import optimize
from sqlstream.planner.planner import select_plan
from sqlstream.runtime.operators.join import RegularJoinOperator
from tests.conftest import duckdb_rows, rows, run_sql
from tests.harness import OperatorHarness

BASE = dt.datetime(2024, 1, 1)
Q7 = """SELECT B.id, B.price, B.ts, B1.wend
FROM bids B JOIN (
  SELECT MAX(price) AS maxprice, window_end AS wend
  FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))
  GROUP BY window_start, window_end) B1
ON B.price = B1.maxprice
WHERE B.ts BETWEEN B1.wend - INTERVAL '10' SECOND AND B1.wend"""


def _bids(n: int, late: int, seed: int) -> tuple[pa.Table, list[bool]]:
    """Bids within 4 s of order (never late for a 5 s watermark delay), plus ``late`` bids a
    minute behind the rest, whose windows fired long before they arrive."""
    rng = random.Random(seed)
    ts = [i * 250 + rng.randint(0, 4000) for i in range(n)]
    is_late = [False] * n
    for _ in range(late):
        at = rng.randint(n // 2, n - 1)
        ts.insert(at, ts[at - 1] - 60_000 - rng.randint(0, 20_000))
        is_late.insert(at, True)
    table = pa.table({
        "id": pa.array(range(len(ts)), pa.int64()),
        # late bids bid the top price, so that they do meet window maxima
        "price": pa.array([40 if x else rng.randint(1, 40) for x in is_late], pa.int64()),
        "ts": pa.array([BASE + dt.timedelta(milliseconds=t) for t in ts], pa.timestamp("ms")),
    })
    return table, is_late


def _ddl(table: pa.Table, path: Path, parallelism: int) -> str:
    with path.open("w") as f:
        for r in table.to_pylist():
            f.write(f"{r['id']},{r['price']},{r['ts'].strftime('%Y-%m-%d %H:%M:%S.%f')[:-3]}\n")
    return f"""SET 'table.exec.batch-size' = '16'; SET 'parallelism.default' = '{parallelism}';
CREATE TABLE bids (id BIGINT, price BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv');
"""


def _expected(table: pa.Table, is_late: list[bool]) -> list[tuple]:
    """The window maxima without the late bids (the window aggregation drops them), joined with
    every bid, late ones included (a regular join keeps them)."""
    on_time = table.filter(pa.array([not x for x in is_late]))
    return duckdb_rows("""
        WITH w AS (SELECT epoch_ms((epoch_ms(ts::TIMESTAMP) // 10000) * 10000 + 10000) AS wend, MAX(price) AS maxprice
                   FROM on_time GROUP BY 1)
        SELECT b.id, b.price, b.ts, w.wend FROM bids b JOIN w ON b.price = w.maxprice
        WHERE b.ts BETWEEN w.wend - INTERVAL '10' SECOND AND w.wend""", on_time=on_time, bids=table)


@pytest.mark.parametrize(("parallelism", "late"), [(1, 12), (2, 0)])
def test_q7_shaped_join_with_a_horizon_matches_duckdb(tmp_path: Path, parallelism: int, late: int) -> None:
    table, is_late = _bids(600, late, seed=parallelism)
    got = rows(run_sql(_ddl(table, tmp_path / "bids.csv", parallelism) + Q7 + ";"))
    expected = _expected(table, is_late)
    assert got == expected
    late_ids = {i for i, x in enumerate(is_late) if x}
    assert not late or any(r[0] in late_ids for r in got)  # late bids still find their window


def _join(tmp_path: Path, sql: str) -> Join:
    session = Session()
    table, _ = _bids(10, 0, seed=0)
    session.execute_script(_ddl(table, tmp_path / "bids.csv", 1))
    plan = optimize(select_plan(session.catalog, parse_one(sql)))
    stack = [plan]
    while stack:
        node = stack.pop()
        if isinstance(node, Join):
            return node
        stack.extend(node.inputs)
    raise AssertionError("no join in the plan")


def _horizons(join: Join) -> tuple[Horizon | None, Horizon | None]:
    spec = analyze(join)
    return join_horizons(join.left, join.right, (spec.left_keys, spec.right_keys), spec.residual)


def test_the_side_bounded_by_a_window_end_gets_a_horizon_on_either_side(tmp_path: Path) -> None:
    join = _join(tmp_path, Q7)
    assert _horizons(join) == (Horizon(2, 1 - 10_000), None)
    swapped = _join(tmp_path, Q7.replace("FROM bids B JOIN (", "FROM (").replace(
        "GROUP BY window_start, window_end) B1", "GROUP BY window_start, window_end) B1 JOIN bids B"))
    left, right = _horizons(swapped)
    assert left is None and right is not None and right.offset == 1 - 10_000


def test_no_horizon_against_a_column_that_can_come_late(tmp_path: Path) -> None:
    # the other side is the source itself: its late rows still join, so nothing may be forgotten
    join = _join(tmp_path, """SELECT a.id FROM bids a JOIN (SELECT price, ts AS t2 FROM bids) b
        ON a.price = b.price WHERE a.ts BETWEEN b.t2 - INTERVAL '1' SECOND AND b.t2""")
    assert _horizons(join) == (None, None)


def test_stored_rows_behind_the_horizon_are_dropped_and_state_stays_flat() -> None:
    left = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("ms"))])
    right = pa.schema([("k", pa.int64()), ("wend", pa.timestamp("ms"))])
    out = pa.schema([*left, pa.field("k2", pa.int64()), pa.field("wend", pa.timestamp("ms"))])
    join = RegularJoinOperator("INNER", (0,), (0,), None, left, right, out, append_only=True,
                               horizons=(Horizon(1, -10_000), None), columnar=True)
    op = OperatorHarness(join, "hashmap", inputs=2, keep_output=False)
    rng = np.random.default_rng(0)
    stored = []
    for b in range(400):
        ts = b * 1000 + rng.integers(0, 1000, 1000)  # 1000 rows a second of event time
        op.process_batch(pa.record_batch([pa.array(rng.integers(0, 50, 1000)), pa.array(ts).cast(pa.timestamp("ms"))],
                                         schema=left), input_index=0)
        if b % 10 == 0:
            op.process_batch(pa.record_batch([pa.array([b]), pa.array([b * 1000]).cast(pa.timestamp("ms"))],
                                             schema=right), input_index=1)
        op.watermark(b * 1000 - 2000)
        assert join.columnar is not None
        stored.append(join.columnar.sides[0].num_rows)
    assert max(stored[200:]) <= max(stored[:200]) * 1.1  # flat
    assert max(stored) < 20 * 1000 + 2 * 65536  # the 10 s horizon plus the tables not yet all behind it
    assert join.columnar.sides[1].num_rows == 40  # the side without a horizon keeps every row


WINDOWS_JOIN = """SELECT l.price, l.n, r.m, l.wend FROM
  (SELECT price, COUNT(*) AS n, window_start AS wstart, window_end AS wend
   FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY price, window_start, window_end) l
JOIN
  (SELECT MAX(id) AS m, window_start AS wstart, window_end AS wend
   FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end) r
ON l.wend = r.wend"""


def test_equal_window_ends_bound_both_sides_of_a_join_of_window_aggregations(tmp_path: Path) -> None:
    # equal ends alone (not starts too) are no window join: a regular join, bounded by its horizons
    join = _join(tmp_path, WINDOWS_JOIN)
    assert analyze(join).window is None
    left, right = _horizons(join)
    assert left is not None and right is not None and left.offset == right.offset == 1
    assert join.left.schema.names[left.column] == join.right.schema.names[right.column] == "wend"
    table, _ = _bids(500, 0, seed=4)
    got = rows(run_sql(_ddl(table, tmp_path / "bids2.csv", 2) + WINDOWS_JOIN + ";"))
    assert got == duckdb_rows("""
        WITH t AS (SELECT *, epoch_ms((epoch_ms(ts::TIMESTAMP) // 10000) * 10000 + 10000) AS wend FROM bids)
        SELECT l.price, l.n, r.m, l.wend FROM
          (SELECT price, COUNT(*) AS n, wend FROM t GROUP BY price, wend) l
          JOIN (SELECT MAX(id) AS m, wend FROM t GROUP BY wend) r ON l.wend = r.wend""", bids=table)


def test_window_ends_in_a_zones_wall_clock_time_give_no_horizon(tmp_path: Path) -> None:
    """Windows on a TIMESTAMP_LTZ time attribute end in the session zone's wall-clock time, not on
    the watermark's scale (Los Angeles' are 8 hours behind it): bounding by them would drop rows
    that can still match, so the join keeps them, as it does in UTC only on TIMESTAMP."""
    session = Session()
    table, _ = _bids(10, 0, seed=0)
    session.execute_script(_ddl(table, tmp_path / "bids.csv", 1) + "SET 'table.local-time-zone' = 'America/Los_Angeles';")
    session.execute_script(f"""CREATE TABLE lb (id BIGINT, price BIGINT, ts TIMESTAMP(3),
        lt AS CAST(ts AS TIMESTAMP_LTZ(3)), WATERMARK FOR lt AS lt - INTERVAL '5' SECOND)
        WITH ('connector' = 'filesystem', 'path' = '{tmp_path / "bids.csv"}', 'format' = 'csv')""")
    sql = """SELECT B.id FROM lb B JOIN (SELECT MAX(price) AS maxprice, window_end AS wend
        FROM TABLE(TUMBLE(TABLE lb, DESCRIPTOR(lt), INTERVAL '10' SECOND)) GROUP BY window_start, window_end) B1
        ON B.price = B1.maxprice WHERE B.ts BETWEEN B1.wend - INTERVAL '10' SECOND AND B1.wend"""
    plan = optimize(select_plan(session.catalog, parse_one(sql), session.config))
    stack = [plan]
    while not isinstance(stack[-1], Join):
        stack.extend(stack.pop().inputs)
    assert _horizons(stack[-1]) == (None, None)
