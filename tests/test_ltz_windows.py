"""Windows on a TIMESTAMP_LTZ time attribute, aligned in the session zone as Flink aligns them.

The reference group tz_windows pins the final rows down against Flink; what a bounded run cannot
show is when a window fires.  Here the operators are driven watermark by watermark over the
night Los Angeles turns its clocks back (2026-11-01: 01:00-02:00 happens twice) and the one it
turns them forward (2026-03-08: 02:00-03:00 does not exist): a window is assigned on wall-clock
time, so the hour window [01:00, 02:00) holds both passes of the hour and fires only after the
second (Flink's TimeWindowUtil.toEpochMillsForTimer takes the later instant), while its
window_time is the earlier instant of 01:59:59.999 (toEpochMills).
"""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa
import pytest

from sqlstream.core.aggregates import AggCall
from sqlstream.core.windows import WindowSpec, window_column_types
from sqlstream.runtime.elements import Chunk
from sqlstream.runtime.operators.session_agg import SessionWindowAggOperator
from sqlstream.runtime.operators.window_agg import WindowAggOperator
from sqlstream.runtime.operators.window_tvf import WindowTVFOperator
from sqlstream.runtime.windows import WindowClock
from tests.harness import OperatorHarness

LA = "America/Los_Angeles"
LTZ = pa.timestamp("ms", tz="UTC")
HOUR = 3_600_000


def utc_ms(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp() * 1000)


def wall_ms(text: str) -> int:
    """Wall-clock time as epoch ms on the UTC scale (how window bounds are held)."""
    return utc_ms(text)


def la_ms(text: str, fold: int = 0) -> int:
    """An instant given as Los Angeles wall-clock time (``fold=1``: the second pass of a repeated hour)."""
    return int(dt.datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(LA), fold=fold).timestamp() * 1000)


def test_the_clock_reads_both_passes_of_a_repeated_hour_as_one_wall_clock_hour() -> None:
    clock = WindowClock(LA)
    first, second = la_ms("2026-11-01 01:30"), la_ms("2026-11-01 01:30", fold=1)
    assert second - first == HOUR
    assert clock.local(np.array([first, second])).tolist() == [wall_ms("2026-11-01 01:30")] * 2
    end = np.array([wall_ms("2026-11-01 02:00")])
    assert clock.fire_times(end).tolist() == [la_ms("2026-11-01 01:59:59.999", fold=1)]
    assert clock.window_times(end).tolist() == [la_ms("2026-11-01 01:59:59.999")]


def test_a_window_ending_in_the_skipped_hour_fires_an_hour_later_as_java_time_shifts_it() -> None:
    clock = WindowClock(LA)
    ends = np.array([wall_ms("2026-03-08 02:00"), wall_ms("2026-03-08 03:00")])
    # 01:59:59.999 is still PST; 02:59:59.999 does not exist and becomes 03:59:59.999 PDT
    assert clock.fire_times(ends).tolist() == [la_ms("2026-03-08 01:59:59.999"), la_ms("2026-03-08 03:59:59.999")]


def test_windows_on_timestamp_keep_the_epoch_scale() -> None:
    clock = WindowClock(None)
    ts = np.array([utc_ms("2026-11-01 01:30")])
    assert clock.local(ts).tolist() == ts.tolist()
    assert clock.fire_times(ts).tolist() == (ts - 1).tolist()
    spec = WindowSpec("TUMBLE", 0, size_ms=HOUR)
    assert window_column_types(spec, pa.timestamp("ms")) == (pa.timestamp("ms"),) * 3
    zoned = WindowSpec("TUMBLE", 0, size_ms=HOUR, zone=LA)
    assert window_column_types(zoned, LTZ) == (pa.timestamp("ms"), pa.timestamp("ms"), LTZ)


def rows(*instants: int) -> pa.RecordBatch:
    return pa.record_batch([pa.array(list(instants), pa.int64()).cast(LTZ)], names=["lt"])


def fired(out: list) -> list[tuple]:
    return [tuple(r.values()) for e in out if isinstance(e, Chunk) for r in e.batch.to_pylist()]


def hour_counts(columnar: bool, backend: str) -> OperatorHarness:
    spec = WindowSpec("TUMBLE", 0, size_ms=HOUR, zone=LA)
    schema = pa.schema([pa.field(n, t) for n, t in zip(("ws", "we", "wt"), window_column_types(spec, LTZ), strict=True)]
                       + [pa.field("c", pa.int64())])
    count = AggCall("COUNT", None, False, pa.int64(), "c")
    return OperatorHarness(WindowAggOperator(spec, ["window_start", "window_end", "window_time"], [count], schema,
                                             columnar=columnar), backend)


@pytest.mark.parametrize(("columnar", "backend"), [(False, "hashmap"), (True, "hashmap"), (True, "rocksdb")],
                         ids=["per-key", "columnar", "rocksdb-rows"])
def test_the_repeated_hour_window_fires_after_its_second_pass(columnar: bool, backend: str) -> None:
    op = hour_counts(columnar, backend)
    op.process_batch(rows(la_ms("2026-11-01 00:30"), la_ms("2026-11-01 01:30")))
    assert fired(op.watermark(la_ms("2026-11-01 00:59:59.999"))) == [
        (dt.datetime(2026, 11, 1, 0), dt.datetime(2026, 11, 1, 1), dt.datetime(2026, 11, 1, 7, 59, 59, 999000,
                                                                                  tzinfo=dt.UTC), 1)]
    # the first pass of 01:59:59.999 does not fire [01:00, 02:00): the hour comes again
    assert fired(op.watermark(la_ms("2026-11-01 01:59:59.999"))) == []
    op.process_batch(rows(la_ms("2026-11-01 01:10", fold=1), la_ms("2026-11-01 01:50", fold=1)))
    assert op.metrics.late_records_dropped == 0
    out = fired(op.watermark(la_ms("2026-11-01 01:59:59.999", fold=1)))
    # window_time is the earlier instant of 01:59:59.999 (PDT, 08:59:59.999 UTC)
    assert out == [(dt.datetime(2026, 11, 1, 1), dt.datetime(2026, 11, 1, 2),
                    dt.datetime(2026, 11, 1, 8, 59, 59, 999000, tzinfo=dt.UTC), 3)]
    # now a row of that wall-clock hour is late
    op.process_batch(rows(la_ms("2026-11-01 01:55", fold=1)))
    assert op.metrics.late_records_dropped == 1


def test_a_zoned_tvf_tags_rows_with_wall_clock_bounds_and_an_instant_window_time() -> None:
    spec = WindowSpec("TUMBLE", 0, size_ms=HOUR, zone=LA)
    schema = pa.schema([pa.field("lt", LTZ)] + [pa.field(n, t) for n, t in zip(
        ("window_start", "window_end", "window_time"), window_column_types(spec, LTZ), strict=True)])
    op = OperatorHarness(WindowTVFOperator(spec, schema), None)
    out = fired(op.process_batch(rows(la_ms("2026-11-01 01:30", fold=1))))
    assert out == [(dt.datetime(2026, 11, 1, 9, 30, tzinfo=dt.UTC), dt.datetime(2026, 11, 1, 1),
                    dt.datetime(2026, 11, 1, 2), dt.datetime(2026, 11, 1, 8, 59, 59, 999000, tzinfo=dt.UTC))]


def test_sessions_are_cut_on_wall_clock_time() -> None:
    """01:45 PDT and 01:00 PST are 15 minutes apart in real time but 45 minutes back on the wall
    clock: with a 20-minute gap they are two sessions, as in Flink (which merges on local ms)."""
    spec = WindowSpec("SESSION", 0, gap_ms=20 * 60_000, zone=LA)
    schema = pa.schema([pa.field(n, t) for n, t in zip(("ws", "we"), window_column_types(spec, LTZ)[:2], strict=True)]
                       + [pa.field("c", pa.int64())])
    op = OperatorHarness(SessionWindowAggOperator(spec, ["window_start", "window_end"],
                                                  [AggCall("COUNT", None, False, pa.int64(), "c")], schema))
    op.process_batch(rows(la_ms("2026-11-01 01:45"), la_ms("2026-11-01 01:00", fold=1)))
    assert sorted(fired(op.watermark(la_ms("2026-11-01 03:00")))) == [
        (dt.datetime(2026, 11, 1, 1, 0), dt.datetime(2026, 11, 1, 1, 20), 1),
        (dt.datetime(2026, 11, 1, 1, 45), dt.datetime(2026, 11, 1, 2, 5), 1)]
