"""The vectorized Top-N over an append-only input, its rows in memory on hashmap
(sqlstream/runtime/operators/rank_columnar.py) and in RocksDB on rocksdb (rank_rocksdb.py).

Both must emit what the per-key form emits: with the row number, the same
changes of every rank of every batch; without it, changes that leave the same
rows in the result.  The two vectorized forms emit the very same changelog.
Their state must move through savepoints to every other form and another
parallelism, and (rocksdb) through an incremental checkpoint.
"""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from sqlstream.core.errors import JobError
from sqlstream.planner.physical import Lowering
from sqlstream.runtime.clock import ManualClock
from sqlstream.runtime.elements import RowKind
from sqlstream.runtime.operators import rank_rocksdb
from sqlstream.runtime.operators.rank import TopNOperator
from sqlstream.runtime.operators.rank_columnar import ColumnarTopN
from sqlstream.runtime.operators.rank_rocksdb import RocksDBTopN
from sqlstream.runtime.state.rows_store import pack, unpack
from tests.conftest import in_key_groups
from tests.harness import OperatorHarness, Snapshot, planned_state, restored_into_halves

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


def _top_n(form: str, start: int, end: int, output_rank: bool, newer_wins: bool,
           sort: list[tuple[int, bool, bool]], config: dict[str, str] | None = None) -> TopNOperator:
    """The operator as a job on backend ``form`` with ``config`` plans it; ``rocksdb-per-key``: the
    per-key form on rocksdb (the reference)."""
    backend = form.removesuffix("-per-key")
    schema = pa.schema(list(SCHEMA) + ([pa.field("rn", pa.int64())] if output_rank else []))
    ttl, _ = planned_state(backend, config)
    columnar = form == backend and Lowering({**(config or {}), "state.backend.type": backend}).rank_columnar(
        False, SCHEMA)
    return TopNOperator([0, 1], sort, start, end, output_rank, False, newer_wins, schema, ttl, columnar)


FORMS = {"hashmap": ColumnarTopN, "rocksdb": RocksDBTopN, "rocksdb-per-key": type(None)}


def _operator(form: str, tmp: Path, start: int, end: int, output_rank: bool, newer_wins: bool,
              sort: list[tuple[int, bool, bool]], config: dict[str, str] | None = None,
              clock: ManualClock | None = None, restore: Snapshot | None = None) -> OperatorHarness:
    h = OperatorHarness(_top_n(form, start, end, output_rank, newer_wins, sort, config), form.removesuffix("-per-key"),
                        clock, tmp=tmp, config=config, restore=restore)
    assert type(h.operator.columnar) is FORMS[form]
    return h


def _feed(op: OperatorHarness, batches: list[pa.RecordBatch]) -> list[Counter]:
    """The changes of each batch, as a multiset of (kind, row)."""
    return [Counter(changes) for changes in _changelog(op, batches)]


def _changelog(op: OperatorHarness, batches: list[pa.RecordBatch]) -> list[list[tuple]]:
    """The changes of each batch, (kind, row) in the order emitted."""
    out = []
    for b in batches:
        op.take()
        op.process_batch(b)
        out.append([(kind, tuple(row)) for kind, *row in op.take()])
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
def test_vectorized_top_n_forms_emit_what_the_per_key_form_emits(tmp_path: Path, seed: int, start: int, end: int,
                                                                 output_rank: bool, newer_wins: bool, sort: list) -> None:
    batches = _batches(seed)
    shape = (start, end, output_rank, newer_wins, sort)
    in_memory = _changelog(_operator("hashmap", tmp_path, *shape), batches)
    in_rocksdb = _changelog(_operator("rocksdb", tmp_path, *shape), batches)
    assert in_rocksdb == in_memory  # the same changes in the same order, batch by batch
    got, want = [Counter(c) for c in in_memory], _feed(_operator("rocksdb-per-key", tmp_path, *shape), batches)
    if output_rank:
        assert got == want  # every batch: the same changes of the same ranks
    assert _materialize(got) == _materialize(want)
    assert sum(_materialize(want).values()) > 5


@pytest.mark.parametrize(("first", "second", "canonical"), [
    ("hashmap", "rocksdb", True), ("rocksdb", "hashmap", True), ("hashmap", "hashmap", True),
    ("rocksdb", "rocksdb", True), ("rocksdb", "rocksdb", False), ("rocksdb-per-key", "rocksdb", True),
    ("rocksdb", "rocksdb-per-key", True), ("hashmap", "rocksdb-per-key", True)])
@pytest.mark.parametrize("shape", [SHAPES[1], SHAPES[2], SHAPES[3]])
def test_top_n_state_moves_through_a_snapshot_to_another_form_and_parallelism(
        tmp_path: Path, first: str, second: str, canonical: bool, shape: tuple) -> None:
    """Savepoints (``canonical``) between the forms, and rocksdb's incremental checkpoint; rescaled 1 -> 2."""
    batches = _batches(5)
    before, after = batches[:20], batches[20:]
    expected = _materialize(_feed(_operator("hashmap", tmp_path, *shape), batches))
    old = _operator(first, tmp_path, *shape)
    changes = _feed(old, before)
    for groups, new in restored_into_halves(old.snapshot(canonical=canonical), lambda: _top_n(second, *shape),
                                            second.removesuffix("-per-key"), tmp=tmp_path):
        assert type(new.operator.columnar) is FORMS[second]
        # the rows of this subtask's key groups, as the hash exchange would send them
        mine = [b.filter(pa.array(in_key_groups(b, [0, 1], groups))) for b in after]
        changes += _feed(new, mine)
    assert _materialize(changes) == expected


def test_rocksdb_top_n_resumes_from_a_checkpoint_with_the_changelog_of_an_uninterrupted_run(tmp_path: Path) -> None:
    """Arrivals after an incremental restore (whose seq counter starts over) still rank after the
    stored rows they tie with (keep-last deduplication: the newer row replaces an equal one)."""
    shape = SHAPES[2]
    batches = _batches(6)
    expected = _changelog(_operator("hashmap", tmp_path, *shape), batches)
    old = _operator("rocksdb", tmp_path, *shape)
    got = _changelog(old, batches[:20])
    partitions = old.operator.columnar.partitions
    new = _operator("rocksdb", tmp_path, *shape, restore=old.snapshot(canonical=False))
    assert new.operator.columnar.partitions == partitions
    assert got + _changelog(new, batches[20:]) == expected


@pytest.mark.parametrize("second", ["hashmap", "rocksdb"])
def test_rocksdb_top_n_rows_are_saved_and_restored_a_chunk_at_a_time(second: str, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rank_rocksdb, "CHUNK", 3)  # partitions of up to 4 rows straddle the chunks
    shape = SHAPES[4]
    batches = _batches(7)
    expected = _changelog(_operator("hashmap", tmp_path, *shape), batches)
    old = _operator("rocksdb", tmp_path, *shape)
    got = _changelog(old, batches[:20])
    assert old.operator.columnar.partitions > 3
    new = _operator(second, tmp_path, *shape, restore=old.snapshot())
    assert got + _changelog(new, batches[20:]) == expected


def test_packed_rows_come_back_per_value_in_order() -> None:
    rows = pa.array([b"a", b"", b"ccc", b"dd", b"e", b"ffff"], pa.binary())
    values = pack(rows, np.array([0, 1, 4]))
    assert len(values) == 3
    owner, position, back = unpack(values.take(pa.array([2, 0, 1])))
    assert owner.tolist() == [0, 0, 1, 2, 2, 2]
    assert position.tolist() == [0, 1, 0, 0, 1, 2]
    assert back.to_pylist() == [b"e", b"ffff", b"a", b"", b"ccc", b"dd"]


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb", "rocksdb-per-key"])
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


def test_rocksdb_plans_the_rows_form_for_append_only_inputs_of_simple_types(tmp_path: Path) -> None:
    rocksdb = Lowering({"state.backend.type": "rocksdb"})
    assert rocksdb.rank_columnar(False, SCHEMA)
    assert not rocksdb.rank_columnar(True, SCHEMA)  # an updating input keeps the per-key form
    decimal = pa.schema([*SCHEMA, ("d", pa.decimal128(10, 2))])
    assert not rocksdb.rank_columnar(False, decimal)
    assert Lowering({"state.backend.type": "hashmap"}).rank_columnar(False, decimal)
    # a plan made for hashmap with a column the rows cannot hold is refused on rocksdb by name
    planned = TopNOperator([0, 1], [(2, True, False)], 1, 3, False, False, False, decimal, None, True)
    with pytest.raises(JobError, match="rocksdb state backend holds only"):
        OperatorHarness(planned, "rocksdb", tmp=tmp_path)


@pytest.mark.parametrize("seed", [4, 5])
def test_rocksdb_top_n_rows_expire_as_the_in_memory_rows_do(seed: int, tmp_path: Path) -> None:
    """Under a state TTL, with time moving between batches, both vectorized forms emit the same
    changelog, also across a savepoint onto the other backend (rows keep their write times)."""
    config = {"table.exec.state.ttl": "120 ms"}
    shape = SHAPES[0]
    rng = random.Random(seed)
    batches = _batches(seed, 60)
    steps = [rng.choice([0, 0, 10, 40, 90]) for _ in batches]
    got = []
    for first, second in (("hashmap", "hashmap"), ("rocksdb", "rocksdb"), ("rocksdb", "hashmap"),
                          ("hashmap", "rocksdb")):
        clock = ManualClock()
        op = _operator(first, tmp_path, *shape, config=config, clock=clock)
        out = []
        for i, (batch, step) in enumerate(zip(batches, steps, strict=True)):
            if i == 30:
                op = _operator(second, tmp_path, *shape, config=config, clock=clock, restore=op.snapshot())
            clock.advance(step)
            out += _changelog(op, [batch])
        got.append(out)
    assert got[0] == got[1] == got[2] == got[3]
    untimed = _changelog(_operator("hashmap", tmp_path, *shape), batches)
    assert got[0] != untimed  # some partitions expired and started over


def test_rocksdb_top_n_entries_whose_rows_expired_are_swept(tmp_path: Path) -> None:
    clock = ManualClock()
    op = _operator("rocksdb", tmp_path, 1, 2, True, False, [(2, True, False)],
                   config={"table.exec.state.ttl": "300 ms"}, clock=clock)
    store = op.operator.columnar

    def batch(rows: list[tuple[str, int]]) -> pa.RecordBatch:
        return pa.RecordBatch.from_arrays([pa.array([k for k, _ in rows]), pa.array([1] * len(rows), pa.int32()),
                                           pa.array([v for _, v in rows]),
                                           pa.array([BASE] * len(rows)).cast(pa.timestamp("ms"))], schema=SCHEMA)

    op.process_batch(batch([("a", 5), ("a", 4), ("b", 1)]))
    assert store.partitions == 2
    clock.advance(150)  # half the TTL: the next batch sweeps, nothing has expired yet
    op.process_batch(batch([("b", 2)]))
    assert store.partitions == 2
    clock.advance(200)  # "a" expired (written 350 ms ago), "b" was written 200 ms ago
    op.take()
    op.process_batch(batch([("c", 1)]))
    assert store.partitions == 2  # "a" swept, "c" added
    op.process_batch(batch([("a", 3)]))  # "a" starts over: its old rows are gone
    assert op.take()[-1:] == [(RowKind.INSERT, "a", 1, 3, BASE, 1)]
    assert store.partitions == 3


@pytest.mark.parametrize("output_rank", [True, False])
def test_a_top_n_without_partition_keys_ranks_alike_in_memory_and_in_rocksdb(tmp_path: Path,
                                                                            output_rank: bool) -> None:
    schema = pa.schema(list(SCHEMA) + ([pa.field("rn", pa.int64())] if output_rank else []))

    def changelog(backend: str) -> list[list[tuple]]:
        op = TopNOperator([], [(2, True, False)], 1, 3, output_rank, False, False, schema, None, True)
        h = OperatorHarness(op, backend, tmp=tmp_path)
        assert type(h.operator.columnar) is FORMS[backend]
        return _changelog(h, _batches(8))

    in_memory = changelog("hashmap")
    assert changelog("rocksdb") == in_memory
    assert sum(len(c) for c in in_memory) > 3


@pytest.mark.parametrize(("second", "canonical"), [("rocksdb", True), ("rocksdb", False), ("hashmap", True)])
def test_two_rocksdb_top_n_subtasks_restore_into_one(tmp_path: Path, second: str, canonical: bool) -> None:
    """A rescale 2 -> 1: both subtasks' partitions end up in the one subtask's store."""
    shape = SHAPES[0]
    batches = _batches(9)
    before, after = batches[:20], batches[20:]
    expected = _materialize(_feed(_operator("hashmap", tmp_path, *shape), batches))
    changes: list[Counter] = []
    snapshots = []
    for groups, half in restored_into_halves(_operator("rocksdb", tmp_path, *shape).snapshot(),
                                             lambda: _top_n("rocksdb", *shape), "rocksdb", tmp=tmp_path):
        changes += _feed(half, [b.filter(pa.array(in_key_groups(b, [0, 1], groups))) for b in before])
        snapshots.append(half.snapshot(canonical=canonical))
    merged = OperatorHarness(_top_n(second, *shape), second, tmp=tmp_path,
                             restore=[Snapshot(s.keyed, None) for s in snapshots])
    assert type(merged.operator.columnar) is FORMS[second]
    changes += _feed(merged, after)
    assert _materialize(changes) == expected
