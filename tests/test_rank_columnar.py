"""The vectorized Top-N over an append-only input (sqlstream/runtime/operators/rank_columnar.py).

It must emit what the per-key form emits (which the rocksdb backend still
runs): with the row number, the same changes of every rank of every batch;
without it, changes that leave the same rows in the result.  Its state must
move through savepoints to the other backend and another parallelism.
"""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from sqlstream.runtime.clock import ManualClock
from sqlstream.runtime.elements import RowKind
from sqlstream.runtime.operators.rank import TopNOperator
from tests.conftest import in_key_groups
from tests.harness import OperatorHarness, planned_state, restored_into_halves

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


def _top_n(backend: str, start: int, end: int, output_rank: bool, newer_wins: bool,
           sort: list[tuple[int, bool, bool]], config: dict[str, str] | None = None) -> TopNOperator:
    """The operator as a job on ``backend`` with ``config`` plans it."""
    schema = pa.schema(list(SCHEMA) + ([pa.field("rn", pa.int64())] if output_rank else []))
    return TopNOperator([0, 1], sort, start, end, output_rank, False, newer_wins, schema,
                        *planned_state(backend, config))


def _operator(backend: str, tmp: Path, start: int, end: int, output_rank: bool, newer_wins: bool,
              sort: list[tuple[int, bool, bool]], config: dict[str, str] | None = None,
              clock: ManualClock | None = None) -> OperatorHarness:
    return OperatorHarness(_top_n(backend, start, end, output_rank, newer_wins, sort, config), backend, clock,
                           tmp=tmp, config=config)


def _feed(op: OperatorHarness, batches: list[pa.RecordBatch]) -> list[Counter]:
    """The changes of each batch, as a multiset of (kind, row)."""
    out = []
    for b in batches:
        op.take()
        op.process_batch(b)
        out.append(Counter((kind, tuple(row)) for kind, *row in op.take()))
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
    assert columnar.operator.columnar is not None and per_key.operator.columnar is None
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
    for groups, new in restored_into_halves(old.snapshot(), lambda: _top_n(second, start, end, output_rank, newer_wins, sort),
                                            second, tmp=tmp_path):
        assert (new.operator.columnar is not None) == (second == "hashmap")
        # the rows of this subtask's key groups, as the hash exchange would send them
        mine = [b.filter(pa.array(in_key_groups(b, [0, 1], groups))) for b in after]
        changes += _feed(new, mine)
    assert _materialize(changes) == expected


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_partitions_past_the_state_ttl_start_over(backend: str, tmp_path: Path) -> None:
    clock = ManualClock()
    op = _operator(backend, tmp_path, 1, 1, True, False, [(2, True, False)], config={"table.exec.state.ttl": "300 ms"},
                   clock=clock)
    row = pa.RecordBatch.from_arrays([pa.array(["a"]), pa.array([1], pa.int32()), pa.array([5]),
                                      pa.array([BASE]).cast(pa.timestamp("ms"))], schema=SCHEMA)
    lower = pa.RecordBatch.from_arrays([pa.array(["a"]), pa.array([1], pa.int32()), pa.array([3]),
                                        pa.array([BASE]).cast(pa.timestamp("ms"))], schema=SCHEMA)
    assert [dict(c) for c in _feed(op, [row])] == [{(RowKind.INSERT, ("a", 1, 5, BASE, 1)): 1}]
    assert _feed(op, [lower]) == [Counter()]  # 3 does not beat 5
    clock.advance(300)
    # the partition expired 300 ms after its last write: 3 is its first row again
    assert [dict(c) for c in _feed(op, [lower])] == [{(RowKind.INSERT, ("a", 1, 3, BASE, 1)): 1}]


def test_rows_that_leave_the_top_are_compacted_away(tmp_path: Path) -> None:
    op = _operator("hashmap", tmp_path, 1, 2, True, False, [(2, True, False)])
    rng = np.random.default_rng(3)
    for _ in range(200):  # 50 partitions, rising values: every batch replaces the tops
        keys = rng.integers(0, 50, 500)
        batch = pa.RecordBatch.from_arrays([pa.array([f"p{k}" for k in keys]), pa.array(keys.astype(np.int32)),
                                            pa.array(rng.integers(0, 10**9, 500)),
                                            pa.array(np.full(500, 0)).cast(pa.timestamp("ms"))], schema=SCHEMA)
        op.process_batch(batch)
    store = op.operator.columnar
    assert store is not None
    assert store.alive == 100  # the top 2 of 50 partitions
    assert store.size <= 100 + max(100, 4096)  # dead rows do not pile up


def test_a_snapshot_holds_the_rows_of_its_time_and_is_built_only_when_written(tmp_path: Path) -> None:
    op = _operator("hashmap", tmp_path, 1, 2, True, False, [(2, True, False)])
    rng = np.random.default_rng(4)

    def feed(n_batches: int) -> None:
        for _ in range(n_batches):  # rising values: tops replaced, dead rows compacted away
            keys = rng.integers(0, 5000, 2000)
            op.process_batch(pa.RecordBatch.from_arrays(
                [pa.array([f"p{k}" for k in keys]), pa.array(keys.astype(np.int32)),
                 pa.array(rng.integers(0, 10**9, 2000)), pa.array(np.full(2000, 0)).cast(pa.timestamp("ms"))],
                schema=SCHEMA))

    feed(30)
    store = op.operator.columnar
    assert store is not None
    expected = store.table()
    assert expected is not None and expected.num_rows == store.alive
    allocated = pa.total_allocated_bytes()
    build = store.state.freeze()
    # freezing copies the liveness marks, not the kept rows
    assert pa.total_allocated_bytes() - allocated < expected.nbytes / 10
    size_then = store.size
    feed(30)
    assert store.size < size_then  # compacted since: the view keeps the tables of its time
    frozen = build()
    assert frozen is not None
    assert frozen.sort_by("$seq").to_pylist() == expected.sort_by("$seq").to_pylist()
