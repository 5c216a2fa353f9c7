"""The vectorized INNER join of append-only inputs: in memory on hashmap
(sqlstream/runtime/operators/join_columnar.py), as RocksDB rows on rocksdb (join_rocksdb.py).

Both must give exactly the rows of the per-key join and of DuckDB, never match
rows whose keys merely share a hash, expire rows after the state TTL, and carry
their state through savepoints onto the other backend and another parallelism,
and (rocksdb) through an incremental checkpoint onto two subtasks.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sqlstream.core.errors import JobError
from sqlstream.core.expressions import Call, ColumnRef
from sqlstream.frontend.session import Session
from sqlstream.planner.physical import Lowering
from sqlstream.runtime.checkpoint.storage import completed_ids
from sqlstream.runtime.clock import ManualClock
from sqlstream.runtime.hashing import _GOLDEN, _M1, _M2, hash_columns
from sqlstream.runtime.operators import join_rocksdb
from sqlstream.runtime.operators.join import RegularJoinOperator
from sqlstream.runtime.operators.join_columnar import ColumnarInnerJoin, HashIndex, keyed_rows
from sqlstream.runtime.operators.join_rocksdb import RocksDBInnerJoin
from sqlstream.runtime.state.row_codec import RowCodec
from sqlstream.runtime.state.rows_store import runs
from tests.conftest import duckdb_rows, in_key_groups, rows, run_sql
from tests.fault_harness import ROWS, Job, committed, job_script, run_with_kills
from tests.harness import OperatorHarness, planned_state, recorded_lookups, restored_into_halves
from tests.test_savepoints import _run_until_savepoint

LEFT = pa.schema([("s", pa.string()), ("k", pa.int64()), ("x", pa.int64())])
RIGHT = pa.schema([("k", pa.int64()), ("s", pa.string()), ("y", pa.int64())])
OUT = pa.schema([*LEFT, *[pa.field(f"r_{f.name}", f.type) for f in RIGHT]])
# ON l.s = r.s AND l.k = r.k AND l.x > r.y
RESIDUAL = Call(">", (ColumnRef(2, "x", pa.int64()), ColumnRef(5, "r_y", pa.int64())), pa.bool_())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 40), max_size=30), min_size=1, max_size=25),
       st.lists(st.integers(0, 45), max_size=50))
def test_hash_index_probe_returns_every_row_with_an_equal_hash(batches: list[list[int]], queries: list[int]) -> None:
    index = HashIndex()
    stored: list[int] = []
    for b in batches:
        ids = np.arange(len(stored), len(stored) + len(b), dtype=np.int64)
        index.add(np.array(b, np.uint64), ids)
        stored += b
    positions, ids = index.probe(np.array(queries, np.uint64))
    got = Counter(zip(positions.tolist(), ids.tolist(), strict=True))
    want = Counter((p, i) for p, q in enumerate(queries) for i, h in enumerate(stored) if h == q)
    assert got == want
    assert len(index.runs) <= int(np.log2(max(len(stored), 1))) + 2  # merged into O(log n) runs


def test_hash_index_merges_and_prunes_leave_dropped_rows_out() -> None:
    index = HashIndex()
    index.add(np.array([5, 5, 7], np.uint64), np.array([0, 1, 2]))
    index.add(np.array([5, 7, 9], np.uint64), np.array([3, 4, 5]), alive=lambda ids: ids >= 1)  # id 0 dropped
    assert len(index.runs) == 1
    _, ids = index.probe(np.array([5], np.uint64))
    assert sorted(ids.tolist()) == [1, 3]
    index.prune(lambda ids: ids % 2 == 1)
    _, ids = index.probe(np.array([5, 7, 9], np.uint64))
    assert sorted(ids.tolist()) == [1, 3, 5]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["", "a", "ab", "abcdefgh", "abcdefgi", "ü" * 5, None])),
                max_size=60), st.booleans())
def test_runs_group_equal_keys_in_row_order_about_in_key_order(keys: list[tuple[int, str | None]],
                                                               sliced: bool) -> None:
    """rows_store.runs (the rocksdb join's and Top-N's batch order): equal key bytes form one run,
    its rows in batch order, runs ordered by their first 8 bytes (the key group first)."""
    codec = RowCodec([pa.string()], key_group=True, keys=True)
    encoded = codec.encode([pa.array([s for _, s in keys], pa.string())], np.array([g for g, _ in keys], np.int64))
    if sliced and len(encoded) > 2:
        encoded = encoded.slice(1, len(encoded) - 2)  # an array with an offset
    order, starts, run = runs(encoded)
    values = encoded.to_pylist()
    assert sorted(order.tolist()) == list(range(len(values)))
    bounds = [*starts.tolist(), len(values)]
    groups = [order[a:b].tolist() for a, b in zip(bounds, bounds[1:], strict=False)]
    assert run.tolist() == [i for i, g in enumerate(groups) for _ in g]
    assert all(g == sorted(g) and len({values[i] for i in g}) == 1 for g in groups)
    firsts = [values[g[0]] for g in groups]
    assert len(set(firsts)) == len(firsts)  # one run per distinct key
    width = min((len(v) for v in values), default=0)
    heads = [v[:min(8, width)] for v in firsts]
    assert heads == sorted(heads)


def _batch(schema: pa.Schema, rows_: list[tuple]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([r[i] for r in rows_], f.type) for i, f in enumerate(schema)],
                                      schema=schema)


def _inputs(seed: int, n_batches: int = 30) -> list[tuple[int, pa.RecordBatch]]:
    """Batches for both sides with string/int keys, NULL keys and repeated keys."""
    rng = random.Random(seed)
    out = []
    for _ in range(n_batches):
        side = rng.randint(0, 1)
        n = rng.randint(0, 40)
        rs = [(rng.choice(["a", "b", "ü", "", None]), rng.choice([1, 2, 3, None]), rng.randint(0, 9)) for _ in range(n)]
        if side == 0:
            out.append((0, _batch(LEFT, rs)))
        else:
            out.append((1, _batch(RIGHT, [(k, s, v) for s, k, v in rs])))
    return out


KEYS = ((0, 1), (1, 0))


def _join(backend: str, config: dict[str, str] | None = None, per_key: bool = False) -> RegularJoinOperator:
    """The join as a job on ``backend`` with ``config`` plans it (``per_key``: the per-key form, the
    reference)."""
    ttl, _ = planned_state(backend, config)
    columnar = not per_key and Lowering({**(config or {}), "state.backend.type": backend}).join_columnar(
        "INNER", True, (LEFT, RIGHT), KEYS)
    return RegularJoinOperator("INNER", *KEYS, RESIDUAL, LEFT, RIGHT, OUT, append_only=True,
                               state_ttl_ms=(ttl, ttl), columnar=columnar)


def _operator(backend: str, tmp_path: Path, config: dict[str, str] | None = None,
              clock: ManualClock | None = None, per_key: bool = False) -> OperatorHarness:
    h = OperatorHarness(_join(backend, config, per_key), backend, clock, tmp=tmp_path, config=config, inputs=2)
    form = None if per_key else ColumnarInnerJoin if backend == "hashmap" else RocksDBInnerJoin
    assert type(h.operator.columnar) is type(None) if form is None else isinstance(h.operator.columnar, form)
    return h


def _run(op: OperatorHarness, inputs: list[tuple[int, pa.RecordBatch]]) -> Counter:
    op.take()
    for side, batch in inputs:
        op.process_batch(batch, input_index=side)
    out = op.take()
    assert all(kind == 0 for kind, *_ in out)  # append-only output
    return Counter(tuple(row) for _, *row in out)


@pytest.mark.parametrize("inline", [0, 1, 2])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_vectorized_forms_emit_the_rows_of_the_per_key_form(seed: int, inline: int, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """On rocksdb with a key's first ``inline`` rows of each side in its head, the others in entries."""
    monkeypatch.setattr(join_rocksdb, "INLINE_ROWS", inline)
    inputs = _inputs(seed)
    got = _run(_operator("hashmap", tmp_path), inputs)
    assert got == _run(_operator("rocksdb", tmp_path, per_key=True), inputs)
    assert got == _run(_operator("rocksdb", tmp_path), inputs)
    assert sum(got.values()) > 20  # the inputs do join


def _inverse_mix(h: int) -> int:
    """Undo hashing._mix (splitmix64's finalizer is a bijection)."""
    mask = (1 << 64) - 1

    def unshift(x: int, s: int) -> int:
        y = x
        for _ in range(64 // s + 1):
            y = x ^ (y >> s)
        return y

    h = unshift(h, 31)
    h = (h * pow(int(_M2), -1, 1 << 64)) & mask
    h = unshift(h, 27)
    h = (h * pow(int(_M1), -1, 1 << 64)) & mask
    return unshift(h, 30)


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_keys_with_colliding_hashes_do_not_match(backend: str, tmp_path: Path) -> None:
    def h(v: int) -> int:  # hashing.hash_array of one BIGINT value
        return int(hash_columns([pa.array([v], pa.int64())])[0])

    # (1, 2) and (3, y) hash alike when h(y) = h(2) + 31 * (h(1) - h(3))
    target = (h(2) + 31 * (h(1) - h(3))) % (1 << 64)
    y = (_inverse_mix(target) - int(_GOLDEN)) % (1 << 64)
    y = y - (1 << 64) if y >= 1 << 63 else y
    pair = [pa.array([1, 3], pa.int64()), pa.array([2, y], pa.int64())]
    assert hash_columns(pair)[0] == hash_columns(pair)[1]

    schema = pa.schema([("a", pa.int64()), ("b", pa.int64())])
    out = pa.schema([*schema, pa.field("a2", pa.int64()), pa.field("b2", pa.int64())])
    op = OperatorHarness(RegularJoinOperator("INNER", (0, 1), (0, 1), None, schema, schema, out, append_only=True,
                                             columnar=True), backend, tmp=tmp_path, inputs=2)
    op.process_batch(pa.RecordBatch.from_arrays([pa.array([1]), pa.array([2])], schema=schema), input_index=0)
    op.process_batch(pa.RecordBatch.from_arrays(pair, schema=schema), input_index=1)
    assert op.changelog() == [(0, 1, 2, 1, 2)]


@pytest.mark.parametrize(("first", "second", "canonical"), [
    ("hashmap", "rocksdb", True), ("rocksdb", "hashmap", True), ("hashmap", "hashmap", True),
    ("rocksdb", "rocksdb", True), ("rocksdb", "rocksdb", False), ("rocksdb-per-key", "rocksdb", True),
    ("rocksdb", "rocksdb-per-key", True)])
def test_join_state_moves_through_a_snapshot_to_another_backend_and_parallelism(
        first: str, second: str, canonical: bool, tmp_path: Path) -> None:
    """Savepoints (``canonical``) between every pair of forms, and rocksdb's incremental checkpoint."""
    inputs = _inputs(7, 40)
    expected = _run(_operator("hashmap", tmp_path), inputs)
    before, after = inputs[:25], inputs[25:]
    old = _operator(first.removesuffix("-per-key"), tmp_path, per_key=first.endswith("-per-key"))
    got = _run(old, before)
    backend, per_key = second.removesuffix("-per-key"), second.endswith("-per-key")
    # resume on two subtasks, each fed the rows of its key groups (as the hash exchange would)
    for groups, new in restored_into_halves(old.snapshot(canonical=canonical), lambda: _join(backend, None, per_key),
                                            backend, tmp=tmp_path):
        mine = [(side, batch.filter(pa.array(in_key_groups(batch, (0, 1) if side == 0 else (1, 0), groups))))
                for side, batch in after]
        got += _run(new, mine)
    assert got == expected


@pytest.mark.parametrize(("backend", "per_key"), [("hashmap", False), ("rocksdb", False), ("rocksdb", True)])
def test_state_ttl_expires_stored_rows(backend: str, per_key: bool, tmp_path: Path) -> None:
    clock = ManualClock()
    op = _operator(backend, tmp_path, config={"table.exec.state.ttl": "300 ms"}, clock=clock, per_key=per_key)
    left = _batch(LEFT, [("a", 1, 9)])
    right = _batch(RIGHT, [(1, "a", 0)])
    joined = (0, "a", 1, 9, 1, "a", 0)
    op.process_batch(left, input_index=0)
    clock.advance(299)
    assert op.process_batch(right, input_index=1) and op.take() == [joined]  # the left row, 299 ms old
    clock.advance(1)
    op.process_batch(right, input_index=1)
    assert op.take() == []  # the left row expired 300 ms after it was written
    op.process_batch(left, input_index=0)  # the right rows are fresh: written 1 ms and 0 ms ago
    assert op.take() == [joined, joined]


@pytest.mark.parametrize("inline", [0, 1, 2])
@pytest.mark.parametrize("seed", [4, 5])
def test_rocksdb_rows_expire_as_the_columnar_rows_do(seed: int, inline: int, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Under a state TTL, with time moving between batches, both vectorized forms match alike, also
    across a savepoint (onto the other backend: rows keep their write times), whatever part of a
    key's rows its head holds."""
    monkeypatch.setattr(join_rocksdb, "INLINE_ROWS", inline)
    config = {"table.exec.state.ttl": "120 ms"}
    rng = random.Random(seed)
    inputs = _inputs(seed, 60)
    steps = [rng.choice([0, 0, 10, 40, 90]) for _ in inputs]
    got = []
    for first, second in (("hashmap", "hashmap"), ("rocksdb", "rocksdb"), ("rocksdb", "hashmap"),
                          ("hashmap", "rocksdb")):
        clock = ManualClock()
        op = _operator(first, tmp_path, config=config, clock=clock)
        out: Counter = Counter()
        for i, ((side, batch), step) in enumerate(zip(inputs, steps, strict=True)):
            if i == 30:
                op = OperatorHarness(_join(second, config), second, clock, tmp=tmp_path, config=config, inputs=2,
                                     restore=op.snapshot())
            clock.advance(step)
            out += _run(op, [(side, batch)])
        got.append(out)
    assert got[0] == got[1] == got[2] == got[3]
    assert 0 < sum(got[0].values()) < sum(_run(_operator("hashmap", tmp_path), inputs).values())  # some expired


# (rows past the inline ones on the left, on the right, heads) after each step, by INLINE_ROWS
SWEPT = {0: [(3, 0, 2), (4, 0, 2), (1, 2, 2), (2, 2, 2), (1, 0, 1)],
         1: [(1, 0, 2), (2, 0, 2), (1, 0, 2), (1, 0, 2), (0, 0, 1)]}


@pytest.mark.parametrize("inline", [0, 1])
def test_rocksdb_rows_expire_are_swept_and_their_key_starts_again(inline: int, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows in their own entries (inline 0) and a key's first row in its head (inline 1) alike."""
    monkeypatch.setattr(join_rocksdb, "INLINE_ROWS", inline)
    clock = ManualClock()
    op = _operator("rocksdb", tmp_path, config={"table.exec.state.ttl": "300 ms"}, clock=clock)
    join = op.operator.columnar
    left, right = join.sides
    expected = iter(SWEPT[inline])

    def stored() -> tuple[int, int, int]:
        return left.num_rows, right.num_rows, len(join.heads)

    op.process_batch(_batch(LEFT, [("a", 1, 9), ("a", 1, 8), ("b", 2, 9)]), input_index=0)
    assert stored() == next(expected)
    clock.advance(150)  # half the TTL: the next batch sweeps, nothing has expired yet
    op.process_batch(_batch(LEFT, [("b", 2, 7)]), input_index=0)
    assert stored() == next(expected)
    clock.advance(200)  # the first three rows and key ("a", 1) expired, ("b", 2) lives on with one row
    op.process_batch(_batch(RIGHT, [(1, "a", 0), (2, "b", 0)]), input_index=1)
    assert op.take() == [(0, "b", 2, 7, 2, "b", 0)]
    assert stored() == next(expected)  # the sweep left one head; the right rows wrote both again
    op.process_batch(_batch(LEFT, [("a", 1, 5)]), input_index=0)  # ("a", 1) starts again
    assert op.take() == [(0, "a", 1, 5, 1, "a", 0)]
    assert stored() == next(expected)
    clock.advance(300)  # everything expired: the next sweep drops every row and head
    op.process_batch(_batch(LEFT, [("c", 3, 1)]), input_index=0)
    assert stored() == next(expected)


@pytest.mark.parametrize("second", ["hashmap", "rocksdb"])
def test_rocksdb_rows_are_saved_and_restored_a_chunk_at_a_time(second: str, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(join_rocksdb, "CHUNK", 7)
    inputs = _inputs(5, 40)
    expected = _run(_operator("hashmap", tmp_path), inputs)
    old = _operator("rocksdb", tmp_path)
    got = _run(old, inputs[:25])
    assert sum(s.num_rows for s in old.operator.columnar.sides) > 3 * 7
    new = OperatorHarness(_join(second), second, tmp=tmp_path, inputs=2, restore=old.snapshot())
    assert got + _run(new, inputs[25:]) == expected


def test_rocksdb_rows_resume_from_an_incremental_checkpoint_on_the_same_key_groups(tmp_path: Path) -> None:
    """The checkpoint's db becomes the new subtask's as it is (heads and rows, nothing rewritten)."""
    inputs = _inputs(9, 40)
    expected = _run(_operator("hashmap", tmp_path), inputs)
    old = _operator("rocksdb", tmp_path)
    got = _run(old, inputs[:25])
    stored = [s.num_rows for s in old.operator.columnar.sides]
    new = OperatorHarness(_join("rocksdb"), "rocksdb", tmp=tmp_path, inputs=2, restore=old.snapshot(canonical=False))
    assert [s.num_rows for s in new.operator.columnar.sides] == stored
    assert got + _run(new, inputs[25:]) == expected


def test_rocksdb_plans_the_rows_form_for_simple_types_and_keys_of_one_type(tmp_path: Path) -> None:
    rocksdb = Lowering({"state.backend.type": "rocksdb"})
    assert rocksdb.join_columnar("INNER", True, (LEFT, RIGHT), KEYS)
    assert not rocksdb.join_columnar("LEFT", True, (LEFT, RIGHT), KEYS)
    assert not rocksdb.join_columnar("INNER", False, (LEFT, RIGHT), KEYS)
    decimal = pa.schema([*RIGHT, ("d", pa.decimal128(10, 2))])
    assert not rocksdb.join_columnar("INNER", True, (LEFT, decimal), KEYS)
    narrow = pa.schema([("k", pa.int32()), *list(RIGHT)[1:]])
    assert not rocksdb.join_columnar("INNER", True, (LEFT, narrow), KEYS)  # BIGINT = INT keys
    # a plan made for hashmap with a column the rows cannot hold is refused on rocksdb by name
    out = pa.schema([*OUT, pa.field("d", pa.decimal128(10, 2))])
    planned = RegularJoinOperator("INNER", *KEYS, None, LEFT, decimal, out, append_only=True, columnar=True)
    with pytest.raises(JobError, match="rocksdb state backend holds only"):
        OperatorHarness(planned, "rocksdb", tmp=tmp_path, inputs=2)


JOB_SCHEMA = pa.schema([("a", pa.int64()), ("b", pa.int64())])


@pytest.mark.slow
@pytest.mark.parametrize("second", ["rocksdb", "hashmap"])
def test_a_rocksdb_join_job_stops_with_a_savepoint_and_resumes(second: str, tmp_path: Path) -> None:
    """The job at parallelism 2 through its checkpoints and a stop-with-savepoint, resumed on either
    backend: the committed output is every pair exactly once."""
    out = tmp_path / "out"

    def script(backend: str, chk: Path) -> str:
        return job_script(chk, f"'connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv'", "a BIGINT, b BIGINT",
                          "SELECT l.seq, r.seq * 2 FROM gen AS l JOIN gen AS r ON l.seq = r.seq",
                          backend=backend, parallelism=2, rate=12_000)

    savepoint = _run_until_savepoint(script("rocksdb", tmp_path / "chk"), tmp_path, 1.2, JOB_SCHEMA)
    assert 0 < committed(out, JOB_SCHEMA).num_rows < ROWS
    Session(restore_from=str(savepoint)).execute_script(script(second, tmp_path / "chk2"))
    assert rows(committed(out, JOB_SCHEMA)) == [(i, 2 * i) for i in range(ROWS)]


@pytest.mark.slow
def test_a_rocksdb_join_job_killed_and_restored_from_incremental_checkpoints_commits_each_pair_once(
        tmp_path: Path) -> None:
    out, chk = tmp_path / "out", tmp_path / "chk"  # the Job's checkpoint directory: restores read it
    script = job_script(chk, f"'connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv'",
                        "a BIGINT, b BIGINT", "SELECT l.seq, r.seq * 2 FROM gen AS l JOIN gen AS r ON l.seq = r.seq",
                        backend="rocksdb", parallelism=2, rate=8_000)
    job = Job(tmp_path, script)
    assert job.chk == chk
    # 7.5 s of rows: each run killed by 3.5 s leaves at least 4 s of them for the next one (at
    # 12 k rows/s the second run could finish before its kill)
    run = run_with_kills(job, seed=5, kills=2, alive_s=(2.5, 3.5))
    assert run.kills == 2 and completed_ids(chk)
    assert rows(committed(out, JOB_SCHEMA)) == [(i, 2 * i) for i in range(ROWS)]


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, pa.Table, pa.Table]:
    rng = random.Random(11)
    tmp = tmp_path_factory.mktemp("columnar_join")
    a = pa.table({"id": pa.array(range(600), pa.int64()),
                  "name": pa.array([rng.choice(["x", "y", "zz", None]) for _ in range(600)]),
                  "k": pa.array([rng.choice([*range(20), None]) for _ in range(600)], pa.int32()),
                  "v": pa.array([rng.randint(0, 50) for _ in range(600)], pa.int64())})
    b = pa.table({"name": pa.array([rng.choice(["x", "y", "w", None]) for _ in range(500)]),
                  "k": pa.array([rng.choice([*range(25), None]) for _ in range(500)], pa.int32()),
                  "w": pa.array([rng.randint(0, 50) for _ in range(500)], pa.int64())})
    for name, t in (("a", a), ("b", b)):
        with (tmp / f"{name}.csv").open("w") as f:
            for r in t.to_pylist():
                f.write(",".join("" if v is None else str(v) for v in r.values()) + "\n")
    ddl = f"""SET 'table.exec.batch-size' = '37'; SET 'parallelism.default' = '2';
CREATE TABLE a (id BIGINT, name STRING, k INT, v BIGINT) WITH ('connector' = 'filesystem', 'path' = '{tmp / "a.csv"}', 'format' = 'csv', 'csv.null-literal' = '');
CREATE TABLE b (name STRING, k INT, w BIGINT) WITH ('connector' = 'filesystem', 'path' = '{tmp / "b.csv"}', 'format' = 'csv', 'csv.null-literal' = '');
"""
    return ddl, a, b


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
@pytest.mark.parametrize("query", [
    "SELECT a.id, a.name, b.w FROM a JOIN b ON a.name = b.name AND a.k = b.k WHERE a.v > b.w",
    "SELECT a.id, b.w FROM a, b WHERE a.k = b.k AND a.v + b.w < 40",
    "SELECT a.id, b.w FROM a JOIN b ON a.v < b.w - 45",  # no equi-key: every pair is a candidate
])
def test_inner_joins_of_append_only_tables_match_duckdb(tables, query: str, backend: str) -> None:
    """At parallelism 2, on both backends (each in its vectorized form: the plan says which)."""
    ddl, a, b = tables
    ddl = f"SET 'state.backend.type' = '{backend}';\n" + ddl
    assert "state=columnar" in Session().execute_script(ddl + "EXPLAIN " + query + ";")[-1].message
    assert rows(run_sql(ddl + query + ";")) == duckdb_rows(query, a=a, b=b)


def test_rocksdb_join_column_families_compact_at_more_level0_files(tmp_path: Path) -> None:
    """The join's per-column-family compaction setting reaches RocksDB (its OPTIONS file records it)."""
    op = _operator("rocksdb", tmp_path)
    backend = op.operator.columnar.backend
    latest = max(backend.db_path.glob("OPTIONS-*"), key=lambda p: int(p.name.split("-")[1]))
    sections = latest.read_text().split("[CFOptions ")
    for name in [join_rocksdb.HEADS_STATE, *join_rocksdb.ROWS_STATES]:
        section = next(s for s in sections if s.startswith(f'"state\\:{name}"'))  # ':' escaped
        assert "level0_file_num_compaction_trigger=12" in section
    default = next(s for s in sections if s.startswith('"default"'))
    assert "level0_file_num_compaction_trigger=4" in default  # the backend's other families keep RocksDB's


# ------------------------------------------------------------ the rocksdb form's key filter

def _keyed_inputs(seed: int, n_batches: int) -> list[tuple[int, pa.RecordBatch]]:
    """Batches of both sides over many keys: about half of each batch's keys new, the others keys
    seen before on either side (some more than once in a batch)."""
    rng = random.Random(seed)
    seen: list[int] = []
    out = []
    for _ in range(n_batches):
        side = rng.randint(0, 1)
        ids = []
        for _ in range(rng.randint(20, 80)):
            if seen and rng.random() < 0.5:
                ids.append(rng.choice(seen))
            else:
                ids.append(len(seen))
                seen.append(len(seen))
        rs = [(f"s{j % 5}", j, rng.randint(0, 9)) for j in ids]
        out.append((side, _batch(LEFT, rs) if side == 0 else _batch(RIGHT, [(k, s, v) for s, k, v in rs])))
    return out


def _restored(old: OperatorHarness, how: str, tmp_path: Path, config: dict[str, str] | None = None,
              clock: ManualClock | None = None) -> list[tuple[range | None, OperatorHarness]]:
    """``old``'s state on rocksdb again: through a savepoint or a checkpoint (RocksDB's files),
    onto one subtask or two (a rescale: each owns half the key groups, None: all)."""
    snapshot = old.snapshot(canonical=how.startswith("savepoint"))
    if how.endswith("halves"):
        return list(restored_into_halves(snapshot, lambda: _join("rocksdb", config), "rocksdb", clock=clock,
                                         tmp=tmp_path, config=config))
    return [(None, OperatorHarness(_join("rocksdb", config), "rocksdb", clock, tmp=tmp_path, config=config, inputs=2,
                                   restore=snapshot))]


def _mine(batch: pa.RecordBatch, side: int, groups: range | None) -> pa.RecordBatch:
    return batch if groups is None else batch.filter(pa.array(in_key_groups(batch, KEYS[side], groups)))


@pytest.mark.parametrize("how", ["savepoint", "savepoint-halves", "checkpoint", "checkpoint-halves"])
def test_rocksdb_join_with_its_key_filter_emits_the_rows_of_hashmap_across_restores(
        how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys new, repeated and stored before a restore match as on hashmap: the filter spares the
    lookups of keys never stored, and knows the restored ones (after a restore of RocksDB's files it
    rebuilds from a scan of the heads, CHUNK keys a batch, every key looked up until then)."""
    monkeypatch.setattr(join_rocksdb, "CHUNK", 64)
    asked = recorded_lookups(monkeypatch, join_rocksdb.HEADS_STATE)
    inputs = _keyed_inputs(3, 40)
    expected = _run(_operator("hashmap", tmp_path), inputs)
    old = _operator("rocksdb", tmp_path)
    got = _run(old, inputs[:20])
    keys = sum(len(set(b.column(KEYS[side][1]).to_pylist())) for side, b in inputs[:20])
    assert 0 < sum(asked) < 0.75 * keys  # about each key's first batch is spared
    for groups, new in _restored(old, how, tmp_path):
        join = new.operator.columnar
        assert isinstance(join, RocksDBInnerJoin)
        assert len(join.heads) > 2 * 64  # a rebuild takes several batches
        got += _run(new, [(side, _mine(batch, side, groups)) for side, batch in inputs[20:]])
        assert join.stored_keys.rebuild_from is None and join.stored_keys.in_step  # scanned through
        asked.clear()
        fresh = [(0, _mine(_batch(LEFT, [("n", 10_000 + i, 1) for i in range(300)]), 0, groups))]
        assert _run(new, fresh) == Counter()
        assert sum(asked) < 30  # new keys are not looked up
    assert got == expected
    assert sum(expected.values()) > 200


@pytest.mark.parametrize("how", ["none", "savepoint", "checkpoint"])
def test_rocksdb_join_keys_recurring_after_their_ttl_match_as_on_hashmap(how: str, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys expire, are swept (their heads deleted: the filter keeps them, so they are looked up and
    found absent) and recur, also after a restore; both backends emit the same rows."""
    asked = recorded_lookups(monkeypatch, join_rocksdb.HEADS_STATE)
    config = {"table.exec.state.ttl": "100 ms"}
    inputs = _keyed_inputs(8, 60)
    # recurring keys: the batches again, later
    inputs = inputs + inputs[:30]
    steps = [random.Random(8).choice([0, 5, 20, 60]) for _ in inputs]
    got = []
    heads_seen = []
    for backend in ("hashmap", "rocksdb"):
        clock = ManualClock()
        op = _operator(backend, tmp_path, config=config, clock=clock)
        out: Counter = Counter()
        for i, ((side, batch), step) in enumerate(zip(inputs, steps, strict=True)):
            if i == 45 and backend == "rocksdb" and how != "none":
                ((_, op),) = _restored(op, how, tmp_path, config, clock)
            clock.advance(step)
            out += _run(op, [(side, batch)])
            if backend == "rocksdb":
                heads_seen.append(len(op.operator.columnar.heads))
        got.append(out)
    assert got[0] == got[1]
    assert 0 < sum(got[0].values()) < sum(_run(_operator("hashmap", tmp_path), inputs).values())  # some expired
    assert min(heads_seen[40:]) < max(heads_seen[:40])  # heads were swept
    assert sum(asked) > 0


def test_rocksdb_join_looks_up_only_the_heads_its_filter_may_hold(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A 1:1 join: each key's first row (on either side) is not looked up, its second is, once."""
    asked = recorded_lookups(monkeypatch, join_rocksdb.HEADS_STATE)
    op = _operator("rocksdb", tmp_path)
    reference = _operator("hashmap", tmp_path)
    left = [(0, _batch(LEFT, [("a", k, 9) for k in range(i, i + 500)])) for i in range(0, 1000, 500)]
    right = [(1, _batch(RIGHT, [(k, "a", 0) for k in range(i, i + 500)])) for i in range(0, 2000, 500)]
    assert _run(op, left) == _run(reference, left) == Counter()
    assert sum(asked) < 0.05 * 1000
    asked.clear()
    want = _run(reference, right)
    assert _run(op, right) == want and sum(want.values()) == 1000
    # the stored keys' 1000 heads, and of the 1000 new keys only the filter's false positives
    assert sum(asked[:2]) == 1000 and sum(asked[2:]) < 0.05 * 1000
    assert len(op.operator.columnar.heads) == 2000


def test_rocksdb_join_key_filter_rebuilds_the_hashes_rows_are_looked_up_by(tmp_path: Path) -> None:
    """The hashes the filter rebuilds from the heads' key bytes are the key hashes of the rows (a
    key it rebuilt otherwise would be taken for a new one and lose its rows): every key type,
    -0.0 (the key 0.0), NaN and the empty string included."""
    schema = pa.schema([("f", pa.float64()), ("t", pa.timestamp("us", "UTC")), ("b", pa.bool_()),
                        ("d", pa.date32()), ("s", pa.string()), ("x", pa.binary()), ("i", pa.int32())])
    keys = tuple(range(len(schema)))
    out = pa.schema([*schema, *[pa.field(f"r_{f.name}", f.type) for f in schema]])
    join = OperatorHarness(RegularJoinOperator("INNER", keys, keys, None, schema, schema, out, append_only=True,
                                               columnar=True), "rocksdb", tmp=tmp_path, inputs=2).operator.columnar
    assert isinstance(join, RocksDBInnerJoin)
    batch = pa.RecordBatch.from_arrays([
        pa.array([-0.0, 0.0, float("nan"), float("inf"), 1.5]),
        pa.array([0, 1, -1, 10**15, 7], pa.timestamp("us", "UTC")),
        pa.array([True, False, True, False, True]),
        pa.array([0, 1, -1, 20000, 3], pa.date32()),
        pa.array(["", "a", "ü", "long string " * 5, "b"]),
        pa.array([b"", b"\0", b"\xff", b"x" * 40, b"y"]),
        pa.array([0, -1, 2**31 - 1, 5, -(2**31)], pa.int32())], schema=schema)
    _, hashes = keyed_rows(batch, keys)
    encoded = join.key_codec.encode(batch.columns, (hashes % np.uint64(128)).astype(np.int64))
    assert (join._key_hashes(encoded) == hashes).all()
