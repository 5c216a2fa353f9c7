"""The operator harness (tests/harness.py) on an operator as a planned job builds it.

A GROUP BY planned with 'table.exec.state.ttl' is built from its physical
node, run on the harness's manual clock, expired exactly at the TTL, and
carried through a savepoint into two subtasks that own half the key groups.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from sqlstream.core.sql.script import parse_one
from sqlstream.frontend.session import Session
from sqlstream.planner.planner import dataflow, select_plan
from sqlstream.runtime.clock import ManualClock
from sqlstream.runtime.elements import RowKind
from tests.conftest import in_key_groups
from tests.harness import OperatorHarness, restored_into_halves

INSERT, U_BEFORE, U_AFTER = RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_a_planned_group_aggregate_expires_keys_on_the_harness_clock_and_rescales(backend: str, tmp_path: Path) -> None:
    settings = {"table.exec.state.ttl": "1 s", "state.backend.type": backend}
    session = Session()
    session.execute_script("CREATE TABLE t (k INT, v BIGINT) WITH ('connector' = 'datagen')")
    _, flow = dataflow([select_plan(session.catalog, parse_one("SELECT k, COUNT(*) AS n FROM t GROUP BY k"))], settings)
    node = next(n for n in flow.nodes if n.name == "GroupAggregate")
    upstream = next(n for n in flow.nodes if n.id == node.inputs[0].upstream)

    def batch(*keys: int) -> pa.RecordBatch:
        columns = {"k": pa.array(keys, pa.int32()), "v": pa.array([0] * len(keys), pa.int64())}
        return pa.record_batch([columns[f.name] for f in upstream.schema], schema=upstream.schema)

    clock = ManualClock()
    h = OperatorHarness(node, backend, clock, tmp=tmp_path, config=settings)
    h.process_batch(batch(1, 2))
    assert h.take() == [(INSERT, 1, 1), (INSERT, 2, 1)]
    clock.advance(999)
    h.process_batch(batch(1))
    assert h.take() == [(U_BEFORE, 1, 1), (U_AFTER, 1, 2)]
    clock.advance(1)
    h.process_batch(batch(1, 2))  # 2 was written 1 s ago: expired, it starts over
    assert h.take() == [(U_BEFORE, 1, 2), (U_AFTER, 1, 3), (INSERT, 2, 1)]

    resumed = []
    for groups, half in restored_into_halves(h.snapshot(), lambda: node, backend, clock, tmp_path, settings):
        rows = batch(1, 2)
        half.process_batch(rows.filter(pa.array(in_key_groups(rows, node.inputs[0].keys, groups))))
        resumed += half.take()
    assert sorted(resumed) == [(U_BEFORE, 1, 3), (U_BEFORE, 2, 1), (U_AFTER, 1, 4), (U_AFTER, 2, 2)]
