"""Non-windowed GROUP BY (runtime/operators/group_agg.py): its changelog and its state."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pytest

from planner.logical import AggCall
from runtime.elements import Chunk, RowKind
from runtime.operators.base import OperatorContext
from runtime.operators.group_agg import GroupAggOperator
from runtime.state import create_backend

U_BEFORE, U_AFTER = RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER


def _operator(backend: str, tmp_path: Path, keys: list[int], aggs: list[AggCall], schema: pa.Schema,
              retracting: bool, key_groups: range = range(128),
              config: dict[str, str] | None = None) -> GroupAggOperator:
    op = GroupAggOperator(keys, aggs, schema, retracting)
    state = create_backend(backend, key_groups, tmp_path / f"{backend}-{key_groups.start}-{time.monotonic_ns()}")
    op.open(OperatorContext("group", state=state, config=config or {}))
    return op


def _changes(op: GroupAggOperator, batch: pa.RecordBatch, kinds: list[int] | None = None) -> list[tuple]:
    """The emitted changelog of one batch as (kind, *row) tuples, in order."""
    chunk = Chunk(batch, None if kinds is None else pa.array(kinds, pa.int8()))
    out = []
    for c in op.process_batch(chunk):
        ks = c.kinds.to_pylist() if c.kinds is not None else [RowKind.INSERT] * c.num_rows
        out += [(k, *r.values()) for k, r in zip(ks, c.batch.to_pylist(), strict=True)]
    return out


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_an_update_pair_of_one_key_in_one_batch_moves_sum_and_avg(backend: str, tmp_path: Path) -> None:
    # -U 3 / +U 5 of one group count 0 together but move the sum by 2 (the upstream MAX rose)
    schema = pa.schema([("c", pa.string()), ("s", pa.int64()), ("a", pa.int64())])
    aggs = [AggCall("SUM", 1, False, pa.int64(), "s"), AggCall("AVG", 1, False, pa.int64(), "a")]
    op = _operator(backend, tmp_path, [0], aggs, schema, retracting=True)
    first = pa.record_batch([pa.array(["x"]), pa.array([3], pa.int64())], names=["c", "v"])
    assert _changes(op, first) == [(RowKind.INSERT, "x", 3, 3)]
    update = pa.record_batch([pa.array(["x", "x"]), pa.array([3, 5], pa.int64())], names=["c", "v"])
    assert _changes(op, update, [U_BEFORE, U_AFTER]) == [(U_BEFORE, "x", 3, 3), (U_AFTER, "x", 5, 5)]
