"""State stays bounded where Flink's does: a MATCH_RECOGNIZE with WITHIN, and a SEMI join with state
TTL, each fed 1e6 rows over keys that come and go, keep a number of state entries that does not grow
with the rows fed (asserted on the backend's entry count, sampled after every batch).

The keys rotate: each batch draws its keys from a window that moves on by half its width, so every
key is fed for two batches and then never again.  State that only a key's own next row would clean
up (a partial match waiting for the key's next row, a join row read only by its own key) therefore
piles up unless it is dropped by time: WITHIN at the watermark, TTL in processing time (Flink's
background cleanup).  Time is injected: watermarks and a ManualClock advance with the batches.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from sqlstream.core.sql.script import parse_one
from sqlstream.frontend.session import Session
from sqlstream.planner.planner import dataflow, select_plan
from sqlstream.runtime.clock import ManualClock
from sqlstream.runtime.operators.semi_join import SemiAntiJoinOperator
from tests.harness import OperatorHarness

ROWS = 1_000_000
BATCH = 20_000
KEYS = 2_000  # keys of one batch: a window that moves on by KEYS // 2 per batch
BATCH_MS = 1_000  # event time (MATCH_RECOGNIZE) or processing time (join) one batch spans


def _keys(rng: np.random.Generator, batch: int) -> np.ndarray:
    return batch * (KEYS // 2) + rng.integers(0, KEYS, BATCH)


def _assert_flat(entries: list[int]) -> None:
    # bounded by the keys fed within the last few batches (a few KEYS), while the keys ever fed
    # grow to ROWS / BATCH * KEYS / 2 = 50 000: no growth with the rows fed
    assert max(entries) < 3 * KEYS, entries
    later = entries[len(entries) // 2:]
    assert max(later) <= 1.2 * max(entries[3:len(entries) // 2]), entries


@pytest.mark.slow
def test_match_recognize_within_keeps_its_state_flat() -> None:
    session = Session()
    session.execute_script("CREATE TABLE t (k BIGINT, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) "
                           "WITH ('connector' = 'datagen');")
    query = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.v AS a, LAST(B.v) AS b "
             "ONE ROW PER MATCH PATTERN (A B{2}) WITHIN INTERVAL '2' SECOND "
             "DEFINE A AS A.v % 2 = 0, B AS B.v % 3 > 0) AS r")
    _, flow = dataflow([select_plan(session.catalog, parse_one(query))], {})
    harness = OperatorHarness(next(n for n in flow.nodes if n.name == "MatchRecognize"), keep_output=False)
    schema = pa.schema([("k", pa.int64()), ("v", pa.int64()), ("ts", pa.timestamp("ms"))])
    rng = np.random.default_rng(7)
    matches = 0

    def feed():  # noqa: ANN202 - a generator of entry counts
        nonlocal matches
        for b in range(ROWS // BATCH):
            ts = b * BATCH_MS + np.arange(BATCH) * BATCH_MS // BATCH
            batch = pa.record_batch([pa.array(_keys(rng, b)), pa.array(rng.integers(0, 100, BATCH)),
                                     pa.array(ts, pa.timestamp("ms"))], schema=schema)
            harness.process_batch(batch)
            out = harness.watermark((b + 1) * BATCH_MS - 1)
            matches += sum(e.batch.num_rows for e in out if hasattr(e, "batch"))
            yield harness.state.num_entries()

    entries = list(feed())  # the backend's entry count after each batch
    assert matches > ROWS // 100  # the pattern does match: the state holds real partial matches
    _assert_flat(entries)


@pytest.mark.slow
def test_semi_join_with_state_ttl_keeps_its_state_flat() -> None:
    left = pa.schema([("k", pa.int64()), ("x", pa.int64())])
    right = pa.schema([("k", pa.int64()), ("y", pa.int64())])
    clock = ManualClock()
    ttl = 2 * BATCH_MS
    harness = OperatorHarness(SemiAntiJoinOperator(False, (0,), (0,), None, left, right, state_ttl_ms=(ttl, ttl)),
                              clock=clock, inputs=2, keep_output=False)
    rng = np.random.default_rng(11)
    emitted = 0

    def feed():  # noqa: ANN202 - a generator of entry counts
        nonlocal emitted
        for b in range(ROWS // BATCH):
            keys = _keys(rng, b)
            half = BATCH // 2
            harness.process_batch(pa.record_batch([pa.array(keys[:half]), pa.array(np.arange(half))],
                                                  schema=left), input_index=0)
            out = harness.process_batch(pa.record_batch([pa.array(keys[half:]), pa.array(np.arange(half))],
                                                        schema=right), input_index=1)
            emitted += sum(e.batch.num_rows for e in out if hasattr(e, "batch"))
            clock.advance(BATCH_MS)
            yield harness.state.num_entries()

    entries = list(feed())  # the backend's entry count after each batch
    assert emitted > ROWS // 10  # rows of keys both sides saw do join
    _assert_flat(entries)
