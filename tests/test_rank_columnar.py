"""The vectorized Top-N over an append-only input (sqlstream/runtime/operators/rank_columnar.py).

It must emit what the per-key form emits (which the rocksdb backend still
runs): with the row number, the same changes of every rank of every batch;
without it, changes that leave the same rows in the result.  Its state must
move through savepoints to the other backend and another parallelism.
"""

from __future__ import annotations

import datetime as dt
import random
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from sqlstream.runtime.elements import Chunk, RowKind
from sqlstream.runtime.operators.base import OperatorContext
from sqlstream.runtime.operators.rank import TopNOperator
from sqlstream.runtime.state import create_backend
from tests.conftest import in_key_groups, planned_state, savepoint_into_halves

SCHEMA = pa.schema([("k", pa.string()), ("g", pa.int32()), ("v", pa.int64()), ("ts", pa.timestamp("ms"))])
BASE = dt.datetime(2024, 3, 1)


def _batches(seed: int, n_batches: int = 40) -> list[pa.RecordBatch]:
    """Rows over few partitions (NULL one included), with repeated and NULL sort values."""
    rng = random.Random(seed)
    out = []
    for b in range(n_batches):
        n = rng.randint(0, 30)
        rows = [(rng.choice(["a", "b", "c", None]), rng.choice([1, 2, None]), rng.choice([*range(8), None]),
                 BASE + dt.timedelta(seconds=b * 10 + rng.randint(0, 3))) for _ in range(n)]
        out.append(pa.RecordBatch.from_arrays([pa.array([r[i] for r in rows], f.type) for i, f in enumerate(SCHEMA)],
                                              schema=SCHEMA))
    return out


def _operator(backend: str, tmp: Path, start: int, end: int, output_rank: bool, newer_wins: bool,
              sort: list[tuple[int, bool, bool]], groups: range = range(128),
              config: dict[str, str] | None = None) -> TopNOperator:
    schema = pa.schema(list(SCHEMA) + ([pa.field("rn", pa.int64())] if output_rank else []))
    op = TopNOperator([0, 1], sort, start, end, output_rank, False, newer_wins, schema,
                      *planned_state(backend, config))
    op.open(OperatorContext("rank", state=create_backend(backend, groups, tmp / f"{backend}-{time.monotonic_ns()}"),
                            config=config or {}))
    return op


def _feed(op: TopNOperator, batches: list[pa.RecordBatch]) -> list[Counter]:
    """The changes of each batch, as a multiset of (kind, row)."""
    out = []
    for b in batches:
        changes: Counter = Counter()
        for chunk in op.process_batch(Chunk(b)):
            kinds = chunk.kinds_or_inserts().to_pylist()
            changes.update(zip(kinds, zip(*(c.to_pylist() for c in chunk.batch.columns), strict=True), strict=True))
        out.append(changes)
    return out


def _materialize(changes: list[Counter]) -> Counter:
    live: Counter = Counter()
    for batch in changes:
        for (kind, row), n in sorted(batch.items(), key=lambda item: item[0][0] in (RowKind.INSERT, RowKind.UPDATE_AFTER)):
            if kind in (RowKind.INSERT, RowKind.UPDATE_AFTER):
                live[row] += n
            else:
                live[row] -= n
                assert live[row] >= 0, f"retracted a row never emitted: {row}"
    return +live


SHAPES = [
    (1, 3, True, False, [(2, True, False)]),  # top 3 by v DESC NULLS LAST
    (2, 4, True, False, [(2, False, True), (3, True, False)]),  # ranks 2..4 by v NULLS FIRST, ts DESC
    (1, 1, True, True, [(3, True, False)]),  # keep-last deduplication
    (1, 2, False, False, [(2, True, True)]),  # no row number: -D/+I of rows
    (1, 5, False, False, [(3, False, False), (2, False, False)]),
]


@pytest.mark.parametrize(("start", "end", "output_rank", "newer_wins", "sort"), SHAPES)
@pytest.mark.parametrize("seed", [1, 2])
def test_columnar_top_n_emits_what_the_per_key_form_emits(tmp_path: Path, seed: int, start: int, end: int,
                                                          output_rank: bool, newer_wins: bool, sort: list) -> None:
    batches = _batches(seed)
    columnar = _operator("hashmap", tmp_path, start, end, output_rank, newer_wins, sort)
    per_key = _operator("rocksdb", tmp_path, start, end, output_rank, newer_wins, sort)
    assert columnar.columnar is not None and per_key.columnar is None
    got, want = _feed(columnar, batches), _feed(per_key, batches)
    if output_rank:
        assert got == want  # every batch: the same changes of the same ranks
    assert _materialize(got) == _materialize(want)
    assert sum(_materialize(want).values()) > 5


@pytest.mark.parametrize(("first", "second"), [("hashmap", "rocksdb"), ("rocksdb", "hashmap"), ("hashmap", "hashmap")])
def test_top_n_state_moves_through_a_savepoint_to_another_backend_and_parallelism(
        tmp_path: Path, first: str, second: str) -> None:
    start, end, output_rank, newer_wins, sort = SHAPES[1]
    batches = _batches(5)
    before, after = batches[:20], batches[20:]
    expected = _materialize(_feed(_operator("hashmap", tmp_path, start, end, output_rank, newer_wins, sort), batches))
    old = _operator(first, tmp_path, start, end, output_rank, newer_wins, sort)
    changes = _feed(old, before)
    for groups, state in savepoint_into_halves(old, second, tmp_path):
        schema = pa.schema(list(SCHEMA) + [pa.field("rn", pa.int64())])
        new = TopNOperator([0, 1], sort, start, end, output_rank, False, newer_wins, schema,
                           *planned_state(second))
        new.open(OperatorContext("rank", state=state))
        new.restore_state(None)
        assert (new.columnar is not None) == (second == "hashmap")
        # the rows of this subtask's key groups, as the hash exchange would send them
        mine = [b.filter(pa.array(in_key_groups(b, [0, 1], groups))) for b in after]
        changes += _feed(new, mine)
    assert _materialize(changes) == expected


def test_partitions_past_the_state_ttl_start_over(tmp_path: Path) -> None:
    op = _operator("hashmap", tmp_path, 1, 1, True, False, [(2, True, False)], config={"table.exec.state.ttl": "300 ms"})
    row = pa.RecordBatch.from_arrays([pa.array(["a"]), pa.array([1], pa.int32()), pa.array([5]),
                                      pa.array([BASE]).cast(pa.timestamp("ms"))], schema=SCHEMA)
    lower = pa.RecordBatch.from_arrays([pa.array(["a"]), pa.array([1], pa.int32()), pa.array([3]),
                                        pa.array([BASE]).cast(pa.timestamp("ms"))], schema=SCHEMA)
    assert [dict(c) for c in _feed(op, [row])] == [{(RowKind.INSERT, ("a", 1, 5, BASE, 1)): 1}]
    assert _feed(op, [lower]) == [Counter()]  # 3 does not beat 5
    time.sleep(0.4)
    # the partition expired: 3 is its first row again
    assert [dict(c) for c in _feed(op, [lower])] == [{(RowKind.INSERT, ("a", 1, 3, BASE, 1)): 1}]


def test_rows_that_leave_the_top_are_compacted_away(tmp_path: Path) -> None:
    op = _operator("hashmap", tmp_path, 1, 2, True, False, [(2, True, False)])
    rng = np.random.default_rng(3)
    for _ in range(200):  # 50 partitions, rising values: every batch replaces the tops
        keys = rng.integers(0, 50, 500)
        batch = pa.RecordBatch.from_arrays([pa.array([f"p{k}" for k in keys]), pa.array(keys.astype(np.int32)),
                                            pa.array(rng.integers(0, 10**9, 500)),
                                            pa.array(np.full(500, 0)).cast(pa.timestamp("ms"))], schema=SCHEMA)
        op.process_batch(Chunk(batch))
    assert op.columnar is not None
    assert op.columnar.alive == 100  # the top 2 of 50 partitions
    assert op.columnar.size <= 100 + max(100, 4096)  # dead rows do not pile up
