"""Windows over processing time: a ``PROCTIME()`` column as the time attribute (Nexmark q12).

The column is the wall clock, stamped per batch, so the rows cannot be predicted;
what can be pinned is that every row is counted once, in a window of the declared
size aligned to it, that the windows lie within the run's wall-clock span, and that
a slow source spreads its rows over several windows.  A view that projects
``PROCTIME()`` keeps its event-time attribute for the windows that use that one.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from sqlstream import TableEnvironment
from sqlstream.core.errors import PlanError
from sqlstream.core.expressions import ColumnRef
from sqlstream.frontend.session import Session
from sqlstream.runtime.clock import ManualClock
from sqlstream.runtime.connectors import nexmark
from sqlstream.runtime.elements import Chunk, Watermark
from sqlstream.runtime.operators.watermark import WatermarkAssigner
from tests.conftest import run_sql
from tests.harness import OperatorHarness
from tests.test_nexmark_queries import EVENTS, TPS, engine_rows, nexmark_rows

MS = dt.timedelta(milliseconds=1)
LTZ = pa.timestamp("ms", tz="UTC")


@pytest.fixture(scope="module")
def bids() -> pa.Table:
    """The bids among the events the Nexmark query tests run on."""
    cfg = nexmark.NexmarkConfig(first_event_rate=TPS)
    return pa.Table.from_batches([nexmark.generate(cfg, "bid", np.arange(EVENTS))])


def wall_clock() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def check_windows(windows: list[tuple[dt.datetime, dt.datetime]], size: dt.timedelta,
                  started: dt.datetime, ended: dt.datetime) -> None:
    """Each window is ``size`` long, aligned to ``size`` and overlaps the run's wall-clock span."""
    for start, end in windows:
        assert end - start == size
        assert (start - dt.datetime(1970, 1, 1)) % size == dt.timedelta(0)
        assert start <= ended and end > started - size


def test_q12_counts_every_bid_once_in_ten_second_processing_time_windows(bids: pa.Table) -> None:
    started = wall_clock()
    got = engine_rows("q12")
    ended = wall_clock()
    per_bidder: Counter[int] = Counter()
    for bidder, count, _, _ in got:
        per_bidder[bidder] += count
    assert per_bidder == Counter(bids.column("bidder").to_pylist())
    assert sum(per_bidder.values()) < EVENTS  # bids only, not persons or auctions
    # one row per bidder and window
    assert len({(b, s) for b, _, s, _ in got}) == len(got)
    check_windows([(s, e) for _, _, s, e in got], dt.timedelta(seconds=10), started, ended)


DATAGEN = """
    CREATE TABLE slow (k INT, v INT) WITH (
        'connector' = 'datagen', 'rows-per-second' = '400', 'number-of-rows' = '1000',
        'fields.k.min' = '1', 'fields.k.max' = '3'
    );
    CREATE VIEW slow_p AS SELECT k, v, PROCTIME() AS p FROM slow;
"""


def test_a_slow_source_spreads_over_several_wall_clock_windows() -> None:
    started = wall_clock()
    result = run_sql(DATAGEN + """
        SELECT window_start, window_end, COUNT(*) AS n
        FROM TABLE(TUMBLE(TABLE slow_p, DESCRIPTOR(p), INTERVAL '1' SECOND))
        GROUP BY window_start, window_end;
    """)
    ended = wall_clock()
    starts = result.column("window_start").to_pylist()
    ends = result.column("window_end").to_pylist()
    assert sum(result.column("n").to_pylist()) == 1000
    assert len(set(starts)) == len(starts) >= 2  # 2.5 s of rows at 400 rows/s
    check_windows([(s.replace(tzinfo=None), e.replace(tzinfo=None)) for s, e in zip(starts, ends, strict=True)],
                  dt.timedelta(seconds=1), started, ended)


def test_legacy_group_window_on_a_proctime_column() -> None:
    result = run_sql(DATAGEN + """
        SELECT k, TUMBLE_START(p, INTERVAL '1' SECOND) AS ws, COUNT(*) AS n
        FROM slow_p GROUP BY k, TUMBLE(p, INTERVAL '1' SECOND);
    """)
    assert sum(result.column("n").to_pylist()) == 1000
    assert set(result.column("k").to_pylist()) == {1, 2, 3}
    assert len(set(result.column("ws").to_pylist())) >= 2


def test_a_view_with_proctime_keeps_its_event_time_attribute(bids: pa.Table) -> None:
    got = nexmark_rows("""
        CREATE VIEW B AS SELECT *, PROCTIME() AS p_time FROM bid;
        SELECT window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE B, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
        GROUP BY window_start, window_end
    """)
    bid_times = bids.column("dateTime").cast(pa.int64()).to_numpy()
    starts, counts = np.unique(bid_times // 10_000 * 10_000, return_counts=True)
    expected = [(dt.datetime(1970, 1, 1) + int(s) * MS, int(c)) for s, c in zip(starts, counts, strict=True)]
    assert got == expected


def test_current_timestamp_is_not_a_time_attribute() -> None:
    with pytest.raises(PlanError, match="must be a time attribute") as err:
        run_sql(DATAGEN + """
            CREATE VIEW now_v AS SELECT k, CURRENT_TIMESTAMP AS c FROM slow;
            SELECT window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE now_v, DESCRIPTOR(c), INTERVAL '1' SECOND))
            GROUP BY window_start, window_end;
        """)
    assert "PROCTIME()" in str(err.value)


def test_explain_shows_the_proctime_watermark() -> None:
    session = Session()
    session.execute_script(DATAGEN)
    text = session.execute_script("""
        EXPLAIN SELECT window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE slow_p, DESCRIPTOR(p), INTERVAL '1' SECOND))
        GROUP BY window_start, window_end;
    """)[0].message
    assert "proctime=p" in text


def proctime_assigner(clock: ManualClock) -> OperatorHarness:
    return OperatorHarness(WatermarkAssigner(ColumnRef(0, "p", LTZ), proctime=True), None, clock)


def stamped_by(op: OperatorHarness, ms: int, split: str) -> tuple[list[int], list[int]]:
    """The column values and the watermarks the assigner emits for a two-row batch stamped ``ms``."""
    out = op.process_batch(pa.record_batch([pa.array([ms, ms], LTZ)], names=["p"]), split=split)
    values = [v for e in out if isinstance(e, Chunk) for v in e.batch.column(0).cast(pa.int64()).to_pylist()]
    return values, [e.timestamp for e in out if isinstance(e, Watermark)]


def test_proctime_assigner_is_the_clock_for_every_split() -> None:
    """Stamps from upstream are replaced by the assigner's own clock, which only moves forward:
    a batch stamped before the watermark (a tick while it was in flight) must not come out late."""
    clock = ManualClock()
    op = proctime_assigner(clock)
    now = clock.time_ms()
    assert stamped_by(op, 0, "p0") == ([now, now], [now])
    # a quiet split is no reason to hold processing time back, and each stamp is past the last
    # watermark, even when the clock has not moved
    assert stamped_by(op, 0, "p1") == ([now + 1, now + 1], [now + 1])
    clock.advance(250)
    assert stamped_by(op, now - 10_000, "p0") == ([now + 250] * 2, [now + 250])


def test_idle_processing_time_advances_the_watermark() -> None:
    clock = ManualClock()
    op = proctime_assigner(clock)
    now = clock.time_ms()
    clock.advance(10_000)
    assert op.processing_time() == [Watermark(now + 10_000)]  # an idle subtask's tick
    assert op.operator.on_processing_time(now + 5_000) == []  # processing time never goes back
    values, marks = stamped_by(op, now, "p0")
    # the clock has not moved past the watermark the tick set: the batch goes 1 ms past it
    assert values == [now + 10_001] * 2 and marks == [now + 10_001]


def test_event_time_assigner_ignores_the_wall_clock() -> None:
    op = OperatorHarness(WatermarkAssigner(ColumnRef(0, "p", LTZ)), None)
    op.clock.advance(10_000)
    assert op.processing_time() == []


def test_a_window_on_an_idle_stream_fires_on_the_wall_clock(tmp_path: Path) -> None:
    """A monitored directory whose only file has been read is idle: its processing-time window
    must still be emitted once the clock passes the window's end, with no further input."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("".join(f"{i % 3},{i}\n" for i in range(50)))
    env = TableEnvironment.create()
    env.execute_sql(f"""
        CREATE TABLE watched (k INT, v INT) WITH (
            'connector' = 'filesystem', 'path' = '{tmp_path / "in"}', 'format' = 'csv',
            'source.monitor-interval' = '100 ms')""")
    env.execute_sql("CREATE VIEW watched_p AS SELECT k, v, PROCTIME() AS p FROM watched")
    query = env.sql_query("""
        SELECT k, COUNT(*) AS n, SUM(v) AS s
        FROM TABLE(TUMBLE(TABLE watched_p, DESCRIPTOR(p), INTERVAL '1' SECOND))
        GROUP BY k, window_start, window_end""")
    got: list[tuple] = []

    def read_three() -> None:
        with query.execute().collect() as it:
            got.extend(tuple(next(it)) for _ in range(3))

    reader = threading.Thread(target=read_three, daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert not reader.is_alive(), f"the window did not fire on an idle stream (rows so far: {got})"
    assert sorted(got) == [(k, sum(1 for i in range(50) if i % 3 == k), sum(i for i in range(50) if i % 3 == k))
                           for k in range(3)]
