"""Property: over any event stream that is out of order by less than the watermark delay,
streaming queries give exactly DuckDB's batch answer.

Hypothesis draws the events (keys, values with NULLs, timestamps), the disorder
of their arrival, the batch size and the parallelism; the stream is written to
a CSV file and read back by four representative queries: a tumbling window
aggregation, a non-windowed GROUP BY (a changelog), a Top-N and an OVER
aggregate.  Updating results are compared after applying their changelog.
"""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sqlstream.frontend.session import Session
from tests.conftest import apply_changelog, duckdb_rows, rows

BASE = dt.datetime(2024, 5, 1, 8, 0, 0)
DELAY_MS = 2000

# (key, value, ms after the previous event, arrival delay below the watermark delay)
EVENTS = st.lists(
    st.tuples(st.sampled_from("abcd"), st.none() | st.integers(-50, 50), st.integers(1, 2500),
              st.integers(0, DELAY_MS - 1)),
    min_size=1, max_size=250,
)

STREAMING = {
    "tumble": """SELECT window_start, window_end, k, COUNT(*) AS n, SUM(v) AS s, MAX(v) AS hi
        FROM TABLE(TUMBLE(TABLE e, DESCRIPTOR(ts), INTERVAL '5' SECOND)) GROUP BY window_start, window_end, k""",
    "group_by": "SELECT k, COUNT(*) AS n, SUM(v) AS s, MIN(v) AS lo FROM e GROUP BY k",
    "top_n": """SELECT k, v, ts, rn FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC NULLS LAST, ts) AS rn FROM e) WHERE rn <= 2""",
    "over": """SELECT k, v, ts, SUM(v) OVER w AS s, COUNT(*) OVER w AS n, MIN(v) OVER w AS lo FROM e
        WINDOW w AS (PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL '3' SECOND PRECEDING AND CURRENT ROW)""",
}
ORACLE = dict(STREAMING, tumble="""
    SELECT epoch_ms((epoch_ms(ts::TIMESTAMP) // 5000) * 5000), epoch_ms((epoch_ms(ts::TIMESTAMP) // 5000) * 5000 + 5000),
           k, COUNT(*), SUM(v), MAX(v)
    FROM e GROUP BY ALL""")


def _stream(events: list[tuple[str, int | None, int, int]]) -> pa.Table:
    """Event times from the gaps (unique, increasing), arrival order by time plus each event's delay."""
    t = 0
    timed = []
    for i, (k, v, gap, delay) in enumerate(events):
        t += gap
        timed.append((t + delay, i, k, v, t))
    timed.sort()
    return pa.table({
        "k": [e[2] for e in timed],
        "v": pa.array([e[3] for e in timed], pa.int32()),
        "ts": pa.array([BASE + dt.timedelta(milliseconds=e[4]) for e in timed], pa.timestamp("ms")),
    })


@pytest.mark.slow
@settings(max_examples=10, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(events=EVENTS, batch_size=st.sampled_from([1, 7, 64, 8192]), parallelism=st.sampled_from([1, 2]))
def test_streaming_queries_equal_the_batch_answer(events: list[tuple[str, int | None, int, int]],
                                                  batch_size: int, parallelism: int) -> None:
    table = _stream(events)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events.csv"
        with path.open("w") as f:
            for k, v, ts in zip(*(c.to_pylist() for c in table.columns), strict=True):
                f.write(f"{k},{'' if v is None else v},{ts.strftime('%Y-%m-%d %H:%M:%S.%f')[:-3]}\n")
        script = f"""
            SET 'table.exec.batch-size' = '{batch_size}';
            SET 'parallelism.default' = '{parallelism}';
            CREATE TABLE e (k STRING, v INT, ts TIMESTAMP(3),
                WATERMARK FOR ts AS ts - INTERVAL '{DELAY_MS}' MILLISECOND)
            WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv', 'csv.null-literal' = '');
        """ + "".join(q + ";\n" for q in STREAMING.values())
        results = Session().execute_script(script)[-len(STREAMING):]
    for (name, oracle), result in zip(ORACLE.items(), results, strict=True):
        assert result.table is not None
        assert result.job is not None and result.job.late_records_dropped == 0, name
        assert rows(apply_changelog(result.table)) == duckdb_rows(oracle, e=table), name
