"""RANK() and DENSE_RANK() as OVER aggregates: OVER (PARTITION BY k ORDER BY <rowtime>) on streams.

Flink runs them over the default frame (RANGE UNBOUNDED PRECEDING) as the watermark passes the
rows, and its streaming OVER aggregation gives both the frame's row count (its rank functions get
no order key to compare): rows with equal timestamps (peers) rank alike, and a tie of three at the
start of a key ranks 3, by RANK and DENSE_RANK alike (cases/over.sql pins Flink's answers for one
firing).  These tests pin the running count across firings, a snapshot restored on another
backend, and the planner's refusals.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from sqlstream.core.aggregates import AggCall
from sqlstream.core.errors import PlanError
from sqlstream.frontend.session import Session
from sqlstream.runtime.operators.over_agg import OverAggOperator
from tests.harness import OperatorHarness

INPUT = pa.schema([("k", pa.int32()), ("ts", pa.timestamp("ms"))])
CALLS = [AggCall("RANK", None, False, pa.int64(), "r"), AggCall("DENSE_RANK", None, False, pa.int64(), "dr"),
         AggCall("COUNT", None, False, pa.int64(), "c")]
OUTPUT = pa.schema(list(INPUT) + [pa.field(c.name, c.type) for c in CALLS])


def _operator() -> OverAggOperator:
    return OverAggOperator([0], 1, "RANGE", None, CALLS, OUTPUT)


def _rows(seed: int, n: int) -> list[tuple[int, int]]:
    """(k, ts ms) in time order, many timestamps shared by several rows of a key."""
    rng = random.Random(seed)
    return sorted(((rng.randrange(3), rng.randrange(1, n // 2)) for _ in range(n)), key=lambda r: r[1])


def _expected(rows: list[tuple[int, int]]) -> list[tuple[int, int, int, int, int]]:
    out = []
    for k, t in rows:
        times = [u for j, u in rows if j == k]
        frame = sum(u <= t for u in times)
        out.append((k, t, frame, frame, frame))
    return sorted(out)


def _feed(harness: OperatorHarness, rows: list[tuple[int, int]], watermark: int) -> list[tuple]:
    if rows:
        k, t = zip(*rows, strict=True)
        harness.process_batch(pa.record_batch([pa.array(k, pa.int32()), pa.array(t, pa.timestamp("ms"))],
                                              schema=INPUT))
    harness.watermark(watermark)
    return [(k, int(ts.timestamp() * 1000), r, dr, c) for _, k, ts, r, dr, c in harness.take()]


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_peers_rank_alike_across_firings_and_a_restore(backend: str) -> None:
    rows = _rows(3, 90)
    harness = OperatorHarness(_operator())
    out: list[tuple] = []
    # each firing takes every row up to a timestamp, so peers are never split between firings
    cut_times = sorted({t for _, t in rows})[::4]
    done = 0
    for n, cut in enumerate(cut_times):
        batch = [r for r in rows[done:] if r[1] <= cut]
        done += len(batch)
        out += _feed(harness, batch, cut)
        if n == len(cut_times) // 2:
            harness = OperatorHarness(_operator(), backend, restore=harness.snapshot())
    out += _feed(harness, rows[done:], rows[-1][1])
    assert sorted(out) == _expected(rows)


def _plan(sql: str) -> None:
    session = Session()
    session.execute_script("""CREATE TABLE t (k INT, v INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
        WITH ('connector' = 'datagen', 'number-of-rows' = '5')""")
    session.execute_script(f"EXPLAIN {sql}")


@pytest.mark.parametrize(("sql", "message"), [
    ("SELECT RANK() OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM t",
     "RANK takes no ROWS/RANGE frame"),
    ("SELECT DENSE_RANK() OVER (PARTITION BY k ORDER BY v) FROM t", "ORDER BY the time attribute ascending"),
    ("SELECT PERCENT_RANK() OVER (PARTITION BY k ORDER BY ts) FROM t", "window function PERCENT_RANK is not supported in OVER on streams"),
])
def test_rank_refusals_name_the_construct(sql: str, message: str) -> None:
    with pytest.raises(PlanError, match=message):
        _plan(sql)
