"""LAG(x [, offset [, default]]) OVER (PARTITION BY k ORDER BY <rowtime>) on streams.

Flink runs LAG as an aggregate over the default frame (RANGE UNBOUNDED PRECEDING), so rows with
equal timestamps all read the value ``offset`` rows before the last of them, and a non-NULL
default makes the result NOT NULL. The reference suite (cases/over_lag.sql) pins those answers;
these tests pin the operator's state: the last ``offset`` values per key survive a snapshot,
restored on another backend and split over two subtasks by key group, and the planner's refusals.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from sqlstream.core.aggregates import AggCall
from sqlstream.core.errors import PlanError
from sqlstream.frontend.session import Session
from sqlstream.runtime.hashing import DEFAULT_MAX_PARALLELISM
from sqlstream.runtime.operators.keyed import key_group_column
from sqlstream.runtime.operators.over_agg import OverAggOperator
from tests.harness import OperatorHarness, restored_into_halves

INPUT = pa.schema([("k", pa.int32()), ("v", pa.int32()), ("ts", pa.timestamp("ms"))])
CALLS = [
    AggCall("LAG", 1, False, pa.int32(), "lag1", offset=1),
    AggCall("SUM", 1, False, pa.int32(), "s"),
    AggCall("LAG", 1, False, pa.int32(), "lag3", offset=3, default=-7),
]
OUTPUT = pa.schema(list(INPUT) + [pa.field(c.name, c.type) for c in CALLS])


def _operator() -> OverAggOperator:
    return OverAggOperator([0], 2, "RANGE", None, CALLS, OUTPUT)


def _rows(seed: int, n: int) -> list[tuple[int, int | None, int]]:
    """(k, v, ts ms): distinct timestamps per key, some NULL values."""
    rng = random.Random(seed)
    times = rng.sample(range(1, 10 * n), n)
    return [(rng.randrange(6), None if rng.random() < 0.2 else rng.randrange(-50, 50), t) for t in times]


def _batch(rows: list[tuple[int, int | None, int]]) -> pa.RecordBatch:
    k, v, t = zip(*rows, strict=True)
    return pa.record_batch([pa.array(k, pa.int32()), pa.array(v, pa.int32()), pa.array(t, pa.timestamp("ms"))],
                           schema=INPUT)


def _expected(rows: list[tuple[int, int | None, int]]) -> list[tuple]:
    """Per key in time order: the value 1 and 3 rows back (3 back: -7 past the start, -1 for a NULL)."""
    out = []
    by_key: dict[int, list[tuple[int, int | None, int]]] = {}
    for r in sorted(rows, key=lambda r: r[2]):
        seen = by_key.setdefault(r[0], [])
        seen.append(r)
        total = sum(x[1] for x in seen if x[1] is not None) if any(x[1] is not None for x in seen) else None
        lag1 = seen[-2][1] if len(seen) > 1 else None
        lag3 = (-1 if seen[-4][1] is None else seen[-4][1]) if len(seen) > 3 else -7
        out.append((r[0], r[1], r[2], lag1, total, lag3))
    return sorted(out, key=lambda r: (r[2], r[0]))


def _emitted(harness: OperatorHarness) -> list[tuple]:
    return [(k, v, int(ts.timestamp() * 1000) if ts is not None else None, a, b, c)
            for _, k, v, ts, a, b, c in harness.take()]


def _feed(harness: OperatorHarness, rows: list[tuple[int, int | None, int]], watermark: int) -> list[tuple]:
    harness.process_batch(_batch(rows))
    harness.watermark(watermark)
    return _emitted(harness)


def test_lag_reads_the_values_offset_rows_back_per_key_across_firings() -> None:
    rows = _rows(1, 60)
    rows.sort(key=lambda r: r[2])
    harness = OperatorHarness(_operator())
    out = []
    for i in range(0, 60, 7):  # several firings: the history carries over between them
        out += _feed(harness, rows[i:i + 7], rows[min(i + 6, 59)][2])
    assert sorted(out, key=lambda r: (r[2], r[0])) == _expected(rows)


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_lag_history_survives_snapshot_restore_and_rescaling(backend: str) -> None:
    rows = sorted(_rows(2, 80), key=lambda r: r[2])
    first, second = rows[:40], rows[40:]
    old = OperatorHarness(_operator())
    before = _feed(old, first, first[-1][2])
    snapshot = old.snapshot()

    restored = OperatorHarness(_operator(), backend, restore=snapshot)
    after = _feed(restored, second, second[-1][2])
    assert sorted(before + after, key=lambda r: (r[2], r[0])) == _expected(rows)

    halves = []
    groups_of = key_group_column(_batch(second), [0], DEFAULT_MAX_PARALLELISM).to_pylist()
    for groups, harness in restored_into_halves(snapshot, _operator, backend):
        mine = [r for r, g in zip(second, groups_of, strict=True) if g in groups]
        assert mine, "each half owns some of the keys"
        halves += _feed(harness, mine, second[-1][2])
    assert sorted(before + halves, key=lambda r: (r[2], r[0])) == _expected(rows)


def _plan(sql: str) -> str:
    session = Session()
    session.execute_script("CREATE TABLE t (k INT, v INT, s STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) "
                           "WITH ('connector' = 'datagen');")
    return session.execute_script(f"EXPLAIN {sql};")[0].message


def test_explain_shows_lag_with_offset_and_default() -> None:
    plan = _plan("SELECT k, LAG(v, 2, -1) OVER (PARTITION BY k ORDER BY ts) AS p FROM t")
    assert "LAG($1, 2, -1)" in plan


@pytest.mark.parametrize(("sql", "message"), [
    ("SELECT LEAD(v) OVER (PARTITION BY k ORDER BY ts) FROM t", "LEAD is not supported on streams"),
    ("SELECT LAG(v) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM t",
     "LAG takes no ROWS/RANGE frame"),
    ("SELECT LAG(v, 1, 1.5) OVER (PARTITION BY k ORDER BY ts) FROM t", "explicitly cast the default"),
    ("SELECT LAG(v, k) OVER (PARTITION BY k ORDER BY ts) FROM t", "constant non-negative offset"),
    ("SELECT LAG(v, 1, k) OVER (PARTITION BY k ORDER BY ts) FROM t", "constant default"),
])
def test_lag_refusals_name_the_construct(sql: str, message: str) -> None:
    with pytest.raises(PlanError, match=message):
        _plan(sql)


def test_first_and_last_value_skip_nulls_across_firings_and_a_restore() -> None:
    calls = [AggCall("FIRST_VALUE", 1, False, pa.int32(), "f"), AggCall("LAST_VALUE", 1, False, pa.int32(), "l"),
             AggCall("LAG", 1, False, pa.int32(), "p", offset=1)]
    schema = pa.schema(list(INPUT) + [pa.field(c.name, c.type) for c in calls])

    def make() -> OverAggOperator:
        return OverAggOperator([0], 2, "RANGE", None, calls, schema)

    harness = OperatorHarness(make())
    out = _feed(harness, [(0, None, 1)], 1) + _feed(harness, [(0, 5, 2), (0, None, 3)], 3)
    restored = OperatorHarness(make(), restore=harness.snapshot())
    # two peers at 4: both see the frame up to the last of them, LAG included
    out += _feed(restored, [(0, 7, 4), (0, None, 4)], 4) + _feed(restored, [(0, None, 5)], 5)
    assert out == [(0, None, 1, None, None, None), (0, 5, 2, 5, 5, None), (0, None, 3, 5, 5, 5),
                   (0, 7, 4, 5, 7, 7), (0, None, 4, 5, 7, 7), (0, None, 5, 5, 7, None)]


@pytest.mark.parametrize("kind", ["ROWS", "RANGE"])
def test_unbounded_double_sums_add_each_row_in_turn_per_key_as_flink(kind: str) -> None:
    # Flink's accumulator adds a key's rows one at a time, so 1e16 + 1 + 1 - 1e16 is 0.0 (each 1 is
    # lost to rounding); what other keys' rows contribute, or the order of a firing, must not show
    schema = pa.schema([("k", pa.int32()), ("v", pa.float64()), ("ts", pa.timestamp("ms"))])
    calls = [AggCall("SUM", 1, False, pa.float64(), "s"), AggCall("AVG", 1, False, pa.float64(), "a")]
    output = pa.schema(list(schema) + [pa.field(c.name, c.type) for c in calls])
    harness = OperatorHarness(OverAggOperator([0], 2, kind, None, calls, output))
    rows = [(1, 0.1, 1), (0, 1e16, 2), (1, 0.2, 3), (0, 1.0, 4), (1, None, 5), (0, 1.0, 6), (1, 0.3, 7),
            (0, -1e16, 8), (1, 1e20, 9), (0, 0.7, 10), (1, -1e20, 11)]
    emitted = []
    for part, watermark in ((rows[:5], 5), (rows[5:], 11)):
        k, v, t = zip(*part, strict=True)
        harness.process_batch(pa.record_batch([pa.array(k, pa.int32()), pa.array(v, pa.float64()),
                                               pa.array(t, pa.timestamp("ms"))], schema=schema))
        harness.watermark(watermark)
        emitted += [(k, v, s, a) for _, k, v, _, s, a in harness.take()]
    expected = []
    totals: dict[int, tuple[float | None, int]] = {}
    for k, v, _ in rows:
        total, count = totals.get(k, (None, 0))
        if v is not None:
            total, count = (v if total is None else total + v), count + 1
        totals[k] = (total, count)
        expected.append((k, v, total, None if total is None else total / count))
    assert emitted == expected
    assert totals[0][0] == 0.7 and totals[1][0] == 0.0  # the order shows: exact sums are 2.7 and 0.6


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_bounded_range_double_sums_retract_on_one_running_accumulator_per_key(backend: str) -> None:
    # Flink's RANGE frame retracts rows from its accumulator as they leave (oldest first) and keeps
    # the accumulator, with the bits rounding left in it, when the frame is empty: 1e16 + 1 is 1e16,
    # retracting 1e16 and 1 leaves -1, so the frame holding only 5.0 sums to 4.0 (probed on Flink 2.3
    # with RocksDB, whose map of timestamps iterates in time order)
    schema = pa.schema([("k", pa.int32()), ("v", pa.float64()), ("ts", pa.timestamp("ms"))])
    calls = [AggCall("SUM", 1, False, pa.float64(), "s"), AggCall("COUNT", 1, False, pa.int64(), "c")]
    output = pa.schema(list(schema) + [pa.field(c.name, c.type) for c in calls])

    def make() -> OverAggOperator:
        return OverAggOperator([0], 2, "RANGE", 30_000, calls, output)

    def feed(harness: OperatorHarness, rows: list[tuple[int, float, int]], watermark: int) -> list[tuple]:
        k, v, t = zip(*rows, strict=True)
        harness.process_batch(pa.record_batch([pa.array(k, pa.int32()), pa.array(v, pa.float64()),
                                               pa.array(t, pa.timestamp("ms"))], schema=schema))
        harness.watermark(watermark)
        return [(k, v, s, c) for _, k, v, _, s, c in harness.take()]

    harness = OperatorHarness(make(), backend)
    # key 0 fires twice and its frame empties by the watermark in between (across a restore);
    # key 1 gets the same rows later, in one firing
    out = feed(harness, [(0, 1e16, 1), (0, 1.0, 2)], 2)
    assert out == [(0, 1e16, 1e16, 1), (0, 1.0, 1e16, 2)]
    harness.watermark(50_000)
    restored = OperatorHarness(make(), backend, restore=harness.snapshot())
    out = feed(restored, [(0, 5.0, 60_000), (1, 1e16, 50_001), (1, 1.0, 50_002), (1, 5.0, 90_000),
                          (1, 0.25, 90_000)], 90_000)
    assert out == [(1, 1e16, 1e16, 1), (1, 1.0, 1e16, 2), (0, 5.0, 4.0, 1), (1, 5.0, 4.25, 2), (1, 0.25, 4.25, 2)]


@pytest.mark.parametrize(("preceding", "sums"), [(1, [1e16, 1e16, 1.0, 1.0, 0.5]), (2, [1e16, 1e16, 1e16, 1.0, 0.5])])
@pytest.mark.parametrize("split", [5, 2, 3])
def test_bounded_rows_double_sums_retract_then_add_each_row_as_flink(preceding: int, sums: list[float],
                                                                     split: int) -> None:
    # Flink 2.3 (probed): each row first retracts the row `preceding` + 1 before it, then adds itself,
    # on one accumulator: 1e16, 1, 1, 1, 0.5 over ROWS 1 PRECEDING sum to 1e16, 1e16, 1, 1, 0.5;
    # the same across firings (split: the rows of the first one) and a restore
    schema = pa.schema([("k", pa.int32()), ("v", pa.float64()), ("ts", pa.timestamp("ms"))])
    calls = [AggCall("SUM", 1, False, pa.float64(), "s")]
    output = pa.schema(list(schema) + [pa.field(c.name, c.type) for c in calls])

    def make() -> OverAggOperator:
        return OverAggOperator([0], 2, "ROWS", preceding, calls, output)

    values = [1e16, 1.0, 1.0, 1.0, 0.5]
    harness = OperatorHarness(make())
    emitted = []
    for part in (range(split), range(split, 5)):
        if not len(part):
            continue
        harness.process_batch(pa.record_batch([pa.array([7] * len(part), pa.int32()),
                                               pa.array([values[i] for i in part], pa.float64()),
                                               pa.array([i + 1 for i in part], pa.timestamp("ms"))], schema=schema))
        harness.watermark(part[-1] + 1)
        emitted += [s for *_, s in harness.take()]
        harness = OperatorHarness(make(), restore=harness.snapshot())
    assert emitted == sums
