"""The vectorized non-windowed GROUP BY (sqlstream/runtime/operators/group_agg_columnar.py).

On the hashmap backend GROUP BY runs in columnar form, on the rocksdb backend
the same form with its state as RocksDB rows (group_agg_rocksdb.py, its
COUNT(DISTINCT) values an entry each); the per-key form (group_agg.py) is the reference.  All must
emit the same changelog row for row, never merge keys whose hashes merely collide, carry
their state through savepoints onto the other backend and another
parallelism, expire keys after the state TTL, and materialize to DuckDB's
GROUP BY.  COUNT(DISTINCT) over an append-only input runs columnar too, its
values kept as (slot, value) pairs under a hash index.
"""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from sqlstream.core.aggregates import AggCall, group_agg_columnar
from sqlstream.core.errors import JobError
from sqlstream.frontend.session import Session
from sqlstream.planner.physical import Lowering
from sqlstream.runtime.clock import Clock, ManualClock
from sqlstream.runtime.elements import RowKind
from sqlstream.runtime.hashing import _GOLDEN, _NULL_HASH, _mix, hash_array, hash_columns
from sqlstream.runtime.operators import group_agg_rocksdb
from sqlstream.runtime.operators.group_agg import COLUMNAR_STATE, GroupAggOperator
from sqlstream.runtime.operators.group_agg_columnar import (
    DistinctValues,
    _pair_hashes,
    _stable_order,
)
from sqlstream.runtime.operators.group_agg_rocksdb import RocksDBGroupAggregates
from tests.conftest import apply_changelog, duckdb_rows, in_key_groups, rows, run_sql
from tests.harness import (
    OperatorHarness,
    Snapshot,
    planned_state,
    recorded_lookups,
    restored_into_halves,
)
from tests.test_join_columnar import _inverse_mix

INSERT, U_BEFORE, U_AFTER, DELETE = RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE

# input: three keys of mixed types, then values
INPUT = pa.schema([("k1", pa.int64()), ("k2", pa.string()), ("k3", pa.timestamp("ms")),
                   ("v", pa.int64()), ("f", pa.float64()), ("s", pa.string()), ("d", pa.date32()),
                   ("b", pa.bool_()), ("t", pa.timestamp("ms"))])
KEYS = [0, 1, 2]
APPEND_AGGS = [
    AggCall("COUNT", None, False, pa.int64(), "n"), AggCall("COUNT", 3, False, pa.int64(), "nv"),
    AggCall("SUM", 3, False, pa.int64(), "sv"), AggCall("AVG", 3, False, pa.int64(), "av"),
    AggCall("MIN", 3, False, pa.int64(), "minv"), AggCall("MAX", 5, False, pa.string(), "maxs"),
    AggCall("MIN", 2, False, pa.timestamp("ms"), "mint"), AggCall("SUM", 4, False, pa.float64(), "sf"),
    AggCall("AVG", 4, False, pa.float64(), "af"), AggCall("MAX", 4, False, pa.float64(), "maxf"),
    AggCall("MAX", 6, False, pa.date32(), "maxd"), AggCall("MIN", 7, False, pa.bool_(), "minb"),
]
RETRACT_AGGS = [a for a in APPEND_AGGS if a.function in ("COUNT", "SUM", "AVG")]
# COUNT(DISTINCT) of every value type (BIGINT, VARCHAR, TIMESTAMP, DATE, DOUBLE, BOOLEAN) next to others
DISTINCT_AGGS = [
    AggCall("COUNT", None, False, pa.int64(), "n"), AggCall("COUNT", 3, True, pa.int64(), "dv"),
    AggCall("COUNT", 5, True, pa.int64(), "ds"), AggCall("COUNT", 8, True, pa.int64(), "dt"),
    AggCall("SUM", 3, False, pa.int64(), "sv"), AggCall("COUNT", 6, True, pa.int64(), "dd"),
    AggCall("COUNT", 4, True, pa.int64(), "df"), AggCall("COUNT", 7, True, pa.int64(), "db"),
    AggCall("MAX", 5, False, pa.string(), "maxs"), AggCall("COUNT", 3, False, pa.int64(), "nv"),
]


def _schema(aggs: list[AggCall]) -> pa.Schema:
    return pa.schema([*(INPUT.field(k) for k in KEYS), *(pa.field(a.name, a.type) for a in aggs)])


def _group_agg(backend: str, aggs: list[AggCall], retracting: bool, config: dict[str, str] | None = None,
               keys: list[int] = KEYS, schema: pa.Schema | None = None, per_key: bool = False) -> GroupAggOperator:
    """The operator as a job on ``backend`` with ``config`` plans it (``per_key``: the per-key form,
    the reference)."""
    schema = schema or _schema(aggs)
    ttl_ms, _ = planned_state(backend, config)
    lowering = Lowering({**(config or {}), "state.backend.type": backend})
    key_types = [schema.field(i).type for i in range(len(keys))]
    columnar = not per_key and lowering.group_agg_columnar(aggs, retracting, key_types, list(INPUT.types))
    return GroupAggOperator(keys, aggs, schema, retracting, ttl_ms, columnar)


def _operator(backend: str, tmp_path: Path, aggs: list[AggCall], retracting: bool,
              key_groups: range = range(128), config: dict[str, str] | None = None,
              keys: list[int] = KEYS, schema: pa.Schema | None = None,
              clock: Clock | None = None, per_key: bool = False) -> OperatorHarness:
    h = OperatorHarness(_group_agg(backend, aggs, retracting, config, keys, schema, per_key), backend, clock,
                        tmp=tmp_path, key_groups=key_groups, config=config)
    # the columnar form runs on both backends (on rocksdb its state as rows)
    columnar = not per_key
    assert (h.operator.columnar is not None) == columnar
    assert isinstance(h.operator.columnar, RocksDBGroupAggregates) == (columnar and backend == "rocksdb")
    return h


Batch = tuple[pa.RecordBatch, list[int] | None]


def _changes(op: OperatorHarness, inputs: list[Batch]) -> list[tuple]:
    """The changelog emitted for ``inputs`` as (kind, *row) tuples, in order."""
    op.take()
    for batch, kinds in inputs:
        op.process_batch(batch, kinds)
    return op.take()


def _tuples(batch: pa.RecordBatch | pa.Table) -> list[tuple]:
    return list(zip(*(c.to_pylist() for c in batch.columns), strict=True))


def _batch(rows_: list[tuple], schema: pa.Schema = INPUT) -> pa.RecordBatch:
    """Rows as a batch; columns a row leaves out at its end are NULL."""
    columns = [pa.array([r[i] if i < len(r) else None for r in rows_], f.type) for i, f in enumerate(schema)]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _row(rng: random.Random, keys: int) -> tuple:
    """A row over ``keys`` possible keys (NULL parts included), with NULL values now and then."""
    k = rng.randrange(keys)
    return (None if k % 11 == 0 else k % 7, None if k % 13 == 0 else f"c{k % 5}é",
            None if k % 17 == 0 else dt.datetime(2024, 1, 1) + dt.timedelta(seconds=k // 35),
            rng.choice([None, *range(-5, 20)]), rng.choice([None, 0.1, 2.5, -1.25, 1e10]),
            rng.choice([None, "", "a", "b", "zz", "ü"]), rng.choice([None, dt.date(2024, 2, 29), dt.date(1999, 1, 1)]),
            rng.choice([None, True, False]))


def _append_only(seed: int, batches: int = 30, keys: int = 200) -> list[Batch]:
    rng = random.Random(seed)
    return [(_batch([_row(rng, keys) for _ in range(rng.randint(0, 60))]), None) for _ in range(batches)]


def _distinct_row(rng: random.Random, keys: int) -> tuple:
    """A row whose values repeat (few of each type, NULL among them; -0.0 and 0.0 are one)."""
    return (*_row(rng, keys)[:3], rng.choice([None, *range(30)]), rng.choice([None, 0.0, -0.0, 1.5, 2.5]),
            rng.choice([None, "", *(f"s{j}é" for j in range(12))]),
            rng.choice([None, dt.date(2024, 2, 29), dt.date(1999, 1, 1), dt.date(1970, 1, 1)]),
            rng.choice([None, True, False]),
            rng.choice([None, *(dt.datetime(2024, 1, 1, 12) + dt.timedelta(milliseconds=j) for j in range(8))]))


def _distinct_input(seed: int, batches: int = 30, keys: int = 60, rows_: int = 60) -> list[Batch]:
    rng = random.Random(seed)
    return [(_batch([_distinct_row(rng, keys) for _ in range(rng.randint(0, rows_))]), None)
            for _ in range(batches)]


def _retracting(seed: int, batches: int = 40, keys: int = 120) -> list[Batch]:
    """Inserts, deletes of earlier rows and -U/+U pairs replacing one, as an upstream aggregate emits."""
    rng = random.Random(seed)
    live: list[tuple] = []
    out: list[Batch] = []
    for _ in range(batches):
        rows_, kinds = [], []
        for _ in range(rng.randint(0, 50)):
            action = rng.random()
            if action < 0.5 or not live:
                row = _row(rng, keys)
                live.append(row)
                rows_.append(row)
                kinds.append(rng.choice([INSERT, U_AFTER]))
            elif action < 0.75:
                row = live.pop(rng.randrange(len(live)))
                rows_.append(row)
                kinds.append(rng.choice([DELETE, U_BEFORE]))
            else:
                i = rng.randrange(len(live))
                old, new = live[i], live[i][:3] + _row(rng, keys)[3:]
                live[i] = new
                rows_ += [old, new]
                kinds += [U_BEFORE, U_AFTER]
        out.append((_batch(rows_), kinds))
    return out


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_an_update_pair_of_one_key_in_one_batch_moves_sum_and_avg(backend: str, tmp_path: Path) -> None:
    # -U 3 / +U 5 of one group count 0 together but move the sum by 2 (the upstream MAX rose)
    schema = pa.schema([("c", pa.string()), ("s", pa.int64()), ("a", pa.int64())])
    aggs = [AggCall("SUM", 1, False, pa.int64(), "s"), AggCall("AVG", 1, False, pa.int64(), "a")]
    op = _operator(backend, tmp_path, aggs, True, keys=[0], schema=schema)
    first = pa.record_batch([pa.array(["x"]), pa.array([3], pa.int64())], names=["c", "v"])
    update = pa.record_batch([pa.array(["x", "x"]), pa.array([3, 5], pa.int64())], names=["c", "v"])
    assert _changes(op, [(first, None), (update, [U_BEFORE, U_AFTER])]) == [
        (INSERT, "x", 3, 3), (U_BEFORE, "x", 3, 3), (U_AFTER, "x", 5, 5)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_columnar_changelog_equals_the_per_key_changelog_on_append_only_input(seed: int, tmp_path: Path) -> None:
    inputs = _append_only(seed)
    got = _changes(_operator("hashmap", tmp_path, APPEND_AGGS, False), inputs)
    assert got == _changes(_operator("rocksdb", tmp_path, APPEND_AGGS, False, per_key=True), inputs)
    assert got == _changes(_operator("rocksdb", tmp_path, APPEND_AGGS, False), inputs)
    kinds = {c[0] for c in got}
    assert kinds == {INSERT, U_BEFORE, U_AFTER}


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_columnar_changelog_equals_the_per_key_changelog_on_retracting_input(seed: int, tmp_path: Path) -> None:
    inputs = _retracting(seed)
    got = _changes(_operator("hashmap", tmp_path, RETRACT_AGGS, True), inputs)
    assert got == _changes(_operator("rocksdb", tmp_path, RETRACT_AGGS, True, per_key=True), inputs)
    assert got == _changes(_operator("rocksdb", tmp_path, RETRACT_AGGS, True), inputs)
    assert {c[0] for c in got} == {INSERT, U_BEFORE, U_AFTER, DELETE}


def test_unsupported_aggregates_keep_the_per_key_form(tmp_path: Path) -> None:
    # COUNT(DISTINCT) of a retracting input would need a count per value
    distinct = [AggCall("COUNT", 3, True, pa.int64(), "d")]
    decimal = [AggCall("SUM", 3, False, pa.decimal128(20, 2), "d")]
    for aggs, retracting in ((distinct, True), (decimal, False), (APPEND_AGGS, True)):
        assert not group_agg_columnar(aggs, retracting)
        assert planned_state("hashmap", None, group_agg_columnar(aggs, retracting)) == (None, False)


def test_rocksdb_plans_the_rows_form_for_keys_and_distinct_values_of_simple_types() -> None:
    rocksdb = Lowering({"state.backend.type": "rocksdb"})
    keys = [INPUT.field(k).type for k in KEYS]
    inputs = list(INPUT.types)
    assert rocksdb.group_agg_columnar(APPEND_AGGS, False, keys, inputs)
    assert rocksdb.group_agg_columnar(RETRACT_AGGS, True, [], inputs)
    assert rocksdb.group_agg_columnar(DISTINCT_AGGS, False, keys, inputs)
    decimal = [*inputs[:3], pa.decimal128(10, 2), *inputs[4:]]  # COUNT(DISTINCT v) of DECIMAL values
    assert not rocksdb.group_agg_columnar(DISTINCT_AGGS, False, keys, decimal)
    assert rocksdb.group_agg_columnar(RETRACT_AGGS, True, keys, decimal)  # no DISTINCT: v's type does not matter
    assert not rocksdb.group_agg_columnar(RETRACT_AGGS, True, [pa.decimal128(10, 2)], inputs)
    assert not rocksdb.group_agg_columnar(APPEND_AGGS, True, keys, inputs)  # MIN/MAX over retractions
    assert Lowering({}).group_agg_columnar(DISTINCT_AGGS, False, [pa.decimal128(10, 2)], decimal)  # hashmap


def test_a_plan_for_hashmap_with_count_distinct_of_decimals_is_refused_on_rocksdb(tmp_path: Path) -> None:
    # the rows form encodes COUNT(DISTINCT) values of simple types only: a plan made for hashmap
    # must not run silently wrong on rocksdb; its first values are refused, naming the aggregate
    schema = pa.schema([("k", pa.int64()), ("d", pa.decimal128(10, 2))])
    aggs = [AggCall("COUNT", 1, True, pa.int64(), "dd")]
    lowering = Lowering({"state.backend.type": "hashmap"})
    assert lowering.group_agg_columnar(aggs, False, [pa.int64()], list(schema.types))
    out = pa.schema([("k", pa.int64()), ("dd", pa.int64())])
    planned = GroupAggOperator([0], aggs, out, False, None, True)
    op = OperatorHarness(planned, "rocksdb", tmp=tmp_path)
    with pytest.raises(JobError, match="COUNT\\(DISTINCT\\) of decimal"):
        op.process_batch(pa.RecordBatch.from_arrays([pa.array([1]), pa.array([Decimal("0.50")], pa.decimal128(10, 2))],
                                                    schema=schema), None)


def test_many_deletes_compact_the_state_and_keys_come_back(tmp_path: Path) -> None:
    keys = [(i, f"k{i}", None) for i in range(6000)]
    add = (_batch([(*k, 1, None, None) for k in keys]), [INSERT] * len(keys))
    remove = (_batch([(*k, 1, None, None) for k in keys]), [DELETE] * len(keys))
    back = (_batch([(*k, 2, None, None) for k in keys[::2]]), [INSERT] * (len(keys) // 2))
    inputs = [add, remove, back, remove]
    columnar = _operator("hashmap", tmp_path, RETRACT_AGGS, True)
    got = _changes(columnar, inputs)
    assert got == _changes(_operator("rocksdb", tmp_path, RETRACT_AGGS, True, per_key=True), inputs)
    rows_form = _operator("rocksdb", tmp_path, RETRACT_AGGS, True)
    assert got == _changes(rows_form, inputs)
    assert rows_form.operator.columnar is not None and rows_form.operator.columnar.live == 0  # deleted in RocksDB
    # 6000 -D, then 3000 +I, then 3000 -D (the other half was never there)
    assert [sum(1 for c in got if c[0] == k) for k in (INSERT, DELETE)] == [9000, 9000]
    store = columnar.operator.columnar
    assert store is not None and store.live == 0 and store.size < 6000  # dead slots were compacted
    assert store.table() is None


def test_keys_with_colliding_hashes_stay_apart(tmp_path: Path) -> None:
    def h(v: int) -> int:  # hashing.hash_array of one BIGINT value
        return int(hash_columns([pa.array([v], pa.int64())])[0])

    def signed(u: int) -> int:
        return u - (1 << 64) if u >= 1 << 63 else u

    # (1, 2) and (3, y) hash alike when h(y) = h(2) + 31 * (h(1) - h(3)); NULL and z alike when h(z) is NULL's
    y = signed((_inverse_mix((h(2) + 31 * (h(1) - h(3))) % (1 << 64)) - int(_GOLDEN)) % (1 << 64))
    z = signed((_inverse_mix(int(_NULL_HASH)) - int(_GOLDEN)) % (1 << 64))
    pair = [pa.array([1, 3], pa.int64()), pa.array([2, y], pa.int64())]
    assert hash_columns(pair)[0] == hash_columns(pair)[1]
    assert hash_columns([pa.array([None, z], pa.int64())]).tolist() == [int(_NULL_HASH)] * 2

    schema = pa.schema([("a", pa.int64()), ("b", pa.int64())])
    out = pa.schema([*schema, pa.field("n", pa.int64())])
    aggs = [AggCall("COUNT", None, False, pa.int64(), "n")]
    for backend in ("hashmap", "rocksdb"):
        op = _operator(backend, tmp_path, aggs, False, keys=[0, 1], schema=out)
        inputs = [(_batch([(1, 2), (3, y)], schema), None), (_batch([(3, y), (None, 9), (z, 9)], schema), None),
                  (_batch([(None, 9), (1, 2)], schema), None)]
        assert _changes(op, inputs) == [
            (INSERT, 1, 2, 1), (INSERT, 3, y, 1),
            (U_BEFORE, 3, y, 1), (U_AFTER, 3, y, 2), (INSERT, None, 9, 1), (INSERT, z, 9, 1),
            (U_BEFORE, None, 9, 1), (U_AFTER, None, 9, 2), (U_BEFORE, 1, 2, 1), (U_AFTER, 1, 2, 2)]


def _mine(inputs: list[Batch], groups: range) -> list[Batch]:
    """The rows of ``groups``' key groups, as the hash exchange would route them."""
    out = []
    for batch, kinds in inputs:
        mask = in_key_groups(batch, KEYS, groups)
        out.append((batch.filter(pa.array(mask)), None if kinds is None else np.array(kinds)[mask].tolist()))
    return out


CASES = {"append": (APPEND_AGGS, False), "retract": (RETRACT_AGGS, True), "distinct": (DISTINCT_AGGS, False)}


def _case_input(case: str) -> list[Batch]:
    return {"append": lambda: _append_only(8, 40), "retract": lambda: _retracting(8),
            "distinct": lambda: _distinct_input(8, 40)}[case]()


@pytest.mark.parametrize(("first", "second"), [("hashmap", "rocksdb"), ("rocksdb", "hashmap"), ("hashmap", "hashmap"),
                                               ("rocksdb", "rocksdb")])
@pytest.mark.parametrize("case", CASES)
def test_state_moves_through_a_savepoint_to_another_backend_and_parallelism(
        first: str, second: str, case: str, tmp_path: Path) -> None:
    aggs, retracting = CASES[case]
    inputs = _case_input(case)
    before, after = inputs[:20], inputs[20:]
    old = _operator(first, tmp_path, aggs, retracting)
    _changes(old, before)
    # resume on two subtasks: each emits exactly what a per-key operator fed the rows of its key
    # groups from the start emits
    for groups, new in restored_into_halves(old.snapshot(), lambda: _group_agg(second, aggs, retracting),
                                            second, tmp=tmp_path):
        assert (new.operator.columnar is not None) == new.operator.columnar_form
        assert (COLUMNAR_STATE in new.state.columnar_states) == new.operator.columnar_form
        reference = _operator("rocksdb", tmp_path, aggs, retracting, key_groups=groups, per_key=True)
        _changes(reference, _mine(before, groups))
        want = _changes(reference, _mine(after, groups))
        assert len(want) > 20 and _changes(new, _mine(after, groups)) == want


@pytest.mark.parametrize("case", CASES)
def test_rocksdb_rows_rescale_from_an_incremental_checkpoint(case: str, tmp_path: Path) -> None:
    # a checkpoint (not a savepoint) of the rows form is RocksDB's own: the rows are in its column
    # family (no table is written), and a rescaled restore takes the key-group ranges it owns
    aggs, retracting = CASES[case]
    inputs = _case_input(case)
    before, after = inputs[:20], inputs[20:]
    old = _operator("rocksdb", tmp_path, aggs, retracting)
    _changes(old, before)
    checkpoint = old.snapshot(canonical=False)
    assert checkpoint.keyed["columnar"] == {} and checkpoint.keyed["keyed"]["states"]["group_rows"] > 50
    for groups, new in restored_into_halves(checkpoint, lambda: _group_agg("rocksdb", aggs, retracting),
                                            "rocksdb", tmp=tmp_path):
        assert isinstance(new.operator.columnar, RocksDBGroupAggregates)
        reference = _operator("rocksdb", tmp_path, aggs, retracting, key_groups=groups, per_key=True)
        _changes(reference, _mine(before, groups))
        want = _changes(reference, _mine(after, groups))
        assert len(want) > 20 and _changes(new, _mine(after, groups)) == want


@pytest.mark.parametrize("case", ["append", "distinct"])
@pytest.mark.parametrize("second", ["hashmap", "rocksdb"])
def test_rocksdb_rows_are_saved_and_restored_a_chunk_at_a_time(second: str, case: str, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # savepoint scans and restores go CHUNK rows at a time (with their COUNT(DISTINCT) values, a
    # range of their own column family per chunk); many small chunks lose and repeat nothing
    monkeypatch.setattr(group_agg_rocksdb, "CHUNK", 7)
    aggs, retracting = CASES[case]
    inputs = _case_input(case)
    old = _operator("rocksdb", tmp_path, aggs, retracting)
    reference = _operator("rocksdb", tmp_path, aggs, retracting, per_key=True)
    _changes(old, inputs[:20])
    _changes(reference, inputs[:20])
    saved = old.snapshot().keyed
    # written as read: the savepoint file holds the chunks as record batches, never one whole table
    (path,) = saved["columnar"].values()
    with pa.OSFile(str(path)) as source:
        reader = pa.ipc.open_file(source)
        sizes = [reader.get_batch(i).num_rows for i in range(reader.num_record_batches)]
    assert len(sizes) > 1 and max(sizes) <= 7 and sum(sizes) == len(reference.operator.groups)
    loaded: list[int] = []
    load = group_agg_rocksdb.RocksDBGroupAggregates.load

    def recording(self: group_agg_rocksdb.RocksDBGroupAggregates, table: pa.Table) -> None:
        loaded.append(table.num_rows)
        load(self, table)

    monkeypatch.setattr(group_agg_rocksdb.RocksDBGroupAggregates, "load", recording)
    restored = OperatorHarness(_group_agg(second, aggs, retracting), second, tmp=tmp_path,
                               restore=Snapshot(saved, None))
    if second == "rocksdb":  # read back as written: a batch of the file at a time, never the whole table
        assert len(loaded) == len(sizes) and max(loaded) <= 7
    assert restored.operator.columnar is not None and restored.operator.columnar.live == len(reference.operator.groups)
    want = _changes(reference, inputs[20:])
    assert len(want) > 20 and _changes(restored, inputs[20:]) == want


def _asked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Records how many keys each multi-get of the rows form asks RocksDB for."""
    return recorded_lookups(monkeypatch)


def test_rocksdb_rows_look_up_only_keys_the_filter_may_hold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # keys never stored skip their RocksDB lookup (a Bloom filter over the key hashes); stored
    # keys, and keys deleted since (a Bloom filter cannot forget them), are looked up
    asked = _asked(monkeypatch)
    aggs = RETRACT_AGGS
    op = _operator("rocksdb", tmp_path, aggs, True)
    reference = _operator("rocksdb", tmp_path, aggs, True, per_key=True)
    fresh = [(_batch([(k, "a", None, k) for k in range(i, i + 500)]), None) for i in range(0, 5000, 500)]
    want = _changes(reference, fresh)
    assert _changes(op, fresh) == want and len(want) == 5000
    assert sum(asked) < 0.05 * 5000
    asked.clear()
    again = [(_batch([(k, "a", None, k) for k in range(0, 5000, 2)]), [DELETE] * 2500)]
    again.append((_batch([(k, "a", None, 1) for k in range(0, 5000)]), None))
    want = _changes(reference, again)
    assert _changes(op, again) == want
    assert asked == [2500, 5000]


def test_rocksdb_rows_restored_whole_rebuild_their_filter_over_several_batches(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # RocksDB's files restored as they are (same key groups, a checkpoint): the filter knows none of
    # their keys, so every key is looked up until a scan of the stored keys, CHUNK keys per batch,
    # has put them in it; then only keys the filter may hold are
    monkeypatch.setattr(group_agg_rocksdb, "CHUNK", 16)
    asked = _asked(monkeypatch)
    aggs, retracting = CASES["append"]
    inputs = _case_input("append")
    old = _operator("rocksdb", tmp_path, aggs, retracting)
    reference = _operator("rocksdb", tmp_path, aggs, retracting, per_key=True)
    _changes(old, inputs[:20])
    _changes(reference, inputs[:20])
    checkpoint = old.snapshot(canonical=False)
    restored = OperatorHarness(_group_agg("rocksdb", aggs, retracting), "rocksdb", tmp=tmp_path, restore=checkpoint)
    store = restored.operator.columnar
    assert isinstance(store, RocksDBGroupAggregates) and store.live > 16 * 3
    want = _changes(reference, inputs[20:])
    asked.clear()
    assert len(want) > 20 and _changes(restored, inputs[20:]) == want
    assert store.stored_keys.rebuild_from is None  # scanned through
    new_keys = [(_batch([(10_000 + k, "n", None, k) for k in range(300)]), None)]
    asked.clear()
    assert _changes(restored, new_keys) == _changes(reference, new_keys)
    assert sum(asked) < 30


def test_rocksdb_rows_with_ttl_move_through_a_savepoint_to_two_subtasks(tmp_path: Path) -> None:
    # the rows' last-write times travel in the savepoint table: keys expire on the new subtasks
    # exactly when the per-key form expires them
    ttl = {"table.exec.state.ttl": "300 ms"}
    aggs, retracting = CASES["append"]
    inputs = _append_only(10, 40)
    clock = ManualClock()
    old = _operator("rocksdb", tmp_path, aggs, retracting, config=ttl, clock=clock)
    reference = _operator("rocksdb", tmp_path, aggs, retracting, config=ttl, clock=clock, per_key=True)
    for i, step in enumerate(inputs[:20]):
        clock.advance(40 if i % 3 else 0)
        assert _changes(old, [step]) == _changes(reference, [step])
    snapshot = old.snapshot()
    for groups, new in restored_into_halves(snapshot, lambda: _group_agg("rocksdb", aggs, retracting, ttl),
                                            "rocksdb", clock=clock, tmp=tmp_path, config=ttl):
        per_key = OperatorHarness(_group_agg("rocksdb", aggs, retracting, ttl, per_key=True), "rocksdb", clock,
                                  tmp=tmp_path, key_groups=groups, config=ttl,
                                  restore=Snapshot(reference.snapshot().keyed, None))
        got, want = [], []
        for step in inputs[20:]:
            clock.advance(60)
            got += _changes(new, _mine([step], groups))
            want += _changes(per_key, _mine([step], groups))
        assert len(want) > 20 and got == want
        assert any(c[0] == INSERT for c in want[len(want) // 2:])  # keys expired and came back


@pytest.mark.parametrize("case", ["append", "distinct"])
def test_a_snapshot_is_not_changed_by_later_batches(case: str, tmp_path: Path) -> None:
    aggs, _ = CASES[case]
    inputs = _append_only(9, 30, keys=80) if case == "append" else _distinct_input(9, 30)
    op = _operator("hashmap", tmp_path, aggs, False)
    _changes(op, inputs[:15])
    write = op.state.snapshot_all(1)  # frozen now, written after more batches
    continued = _changes(op, inputs[15:])
    directory = tmp_path / "chk"
    directory.mkdir()
    restored = OperatorHarness(_group_agg("hashmap", aggs, False), "hashmap", tmp=tmp_path,
                               restore=Snapshot(write(directory), None))
    assert continued and _changes(restored, inputs[15:]) == continued


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_state_ttl_expires_keys_and_a_returning_key_starts_fresh(backend: str, tmp_path: Path) -> None:
    clock = ManualClock()
    op = _operator(backend, tmp_path, RETRACT_AGGS, True, config={"table.exec.state.ttl": "300 ms"}, clock=clock)
    a, b = (1, "a", None, 5, 1.0, None), (2, "b", None, 7, 2.0, None)
    aggs_of = {a: (1, 1, 5, 5, 1.0, 1.0), b: (1, 1, 7, 7, 2.0, 2.0)}
    assert _changes(op, [(_batch([a, b]), None)]) == [(INSERT, *a[:3], *aggs_of[a]), (INSERT, *b[:3], *aggs_of[b])]
    clock.advance(200)
    assert _changes(op, [(_batch([b]), None)])[1] == (U_AFTER, *b[:3], 2, 2, 14, 7, 4.0, 2.0)  # b written again
    clock.advance(99)
    # a, 299 ms unwritten, is still there
    assert _changes(op, [(_batch([a]), None)])[1] == (U_AFTER, *a[:3], 2, 2, 10, 5, 2.0, 1.0)
    clock.advance(201)
    # b expired, 300 ms after its last write (Flink: expiration <= now): it comes back as a new key
    assert _changes(op, [(_batch([a, b]), None)]) == [
        (U_BEFORE, *a[:3], 2, 2, 10, 5, 2.0, 1.0), (U_AFTER, *a[:3], 3, 3, 15, 5, 3.0, 1.0),
        (INSERT, *b[:3], *aggs_of[b])]
    clock.advance(300)
    # a retraction of an expired key finds nothing to retract
    assert _changes(op, [(_batch([a]), [DELETE])]) == []
    if op.operator.columnar is not None:
        op.process_batch(_batch([(3, "c", None, 1, 1.0, None)]))  # a write sweeps expired keys
        assert op.operator.columnar.live == 1


@pytest.mark.parametrize("first", ["hashmap", "rocksdb"])
@pytest.mark.parametrize("second", ["hashmap", "rocksdb"])
def test_expired_keys_are_left_out_of_a_savepoint(first: str, second: str, tmp_path: Path) -> None:
    ttl = {"table.exec.state.ttl": "300 ms"}
    aggs = [AggCall("COUNT", None, False, pa.int64(), "n")]
    a, b = (1, "a", None, 5, 1.0, None), (2, "b", None, 7, 2.0, None)
    clock = ManualClock()
    op = _operator(first, tmp_path, aggs, False, config=ttl, clock=clock)
    _changes(op, [(_batch([a]), None)])
    clock.advance(200)
    _changes(op, [(_batch([b]), None)])
    clock.advance(100)  # a expired (300 ms unwritten) but not swept yet; b is 100 ms old
    restored = OperatorHarness(_group_agg(second, aggs, False, ttl), second, clock, tmp=tmp_path, config=ttl,
                               restore=Snapshot(op.snapshot().keyed, None))
    assert _changes(restored, [(_batch([a, b]), None)]) == [
        (INSERT, *a[:3], 1), (U_BEFORE, *b[:3], 1), (U_AFTER, *b[:3], 2)]


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_a_global_aggregate_without_keys(backend: str, tmp_path: Path) -> None:
    schema = pa.schema([pa.field("n", pa.int64()), pa.field("sv", pa.int64())])
    aggs = [AggCall("COUNT", None, False, pa.int64(), "n"), AggCall("SUM", 3, False, pa.int64(), "sv")]
    op = _operator(backend, tmp_path, aggs, True, keys=[], schema=schema)
    rows_ = [(1, "a", None, 5, None, None), (2, "b", None, None, None, None)]
    assert _changes(op, [(_batch(rows_), None), (_batch(rows_), [DELETE, DELETE]), (_batch(rows_[1:]), None)]) == [
        (INSERT, 2, 5), (DELETE, 2, 5), (INSERT, 1, None)]


# ---------------------------------------------------------------- COUNT(DISTINCT)


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_count_distinct_changelog_equals_the_per_key_changelog(seed: int, tmp_path: Path) -> None:
    inputs = _distinct_input(seed)
    got = _changes(_operator("hashmap", tmp_path, DISTINCT_AGGS, False), inputs)
    assert got == _changes(_operator("rocksdb", tmp_path, DISTINCT_AGGS, False, per_key=True), inputs)
    assert {c[0] for c in got} == {INSERT, U_BEFORE, U_AFTER}


def test_count_distinct_alone_over_many_keys(tmp_path: Path) -> None:
    aggs = [AggCall("COUNT", 3, True, pa.int64(), "dv"), AggCall("COUNT", 5, True, pa.int64(), "ds")]
    inputs = _distinct_input(14, batches=12, keys=20000, rows_=4000)
    columnar = _operator("hashmap", tmp_path, aggs, False)
    got = _changes(columnar, inputs)
    assert got == _changes(_operator("rocksdb", tmp_path, aggs, False, per_key=True), inputs)
    store = columnar.operator.columnar
    assert store is not None and store.live > 5000
    # each pair stored once: a key's count is its number of pairs
    assert [store.distinct[i].size for i in (0, 1)] == [int(store.columns[f"c{i}"].sum()) for i in (0, 1)]


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_count_distinct_skips_null_and_counts_a_value_once_per_key(backend: str, tmp_path: Path) -> None:
    schema = pa.schema([("c", pa.string()), ("x", pa.int64())])
    out = pa.schema([("c", pa.string()), ("n", pa.int64()), ("d", pa.int64())])
    aggs = [AggCall("COUNT", None, False, pa.int64(), "n"), AggCall("COUNT", 1, True, pa.int64(), "d")]
    op = _operator(backend, tmp_path, aggs, False, keys=[0], schema=out)
    inputs = [(_batch([("a", None), ("b", 1), ("a", None)], schema), None),
              (_batch([("a", 1), ("b", 1), ("b", 2), ("a", None)], schema), None),
              (_batch([("a", 2), ("b", 2), ("a", 1)], schema), None)]
    assert _changes(op, inputs) == [
        (INSERT, "a", 2, 0), (INSERT, "b", 1, 1),
        (U_BEFORE, "a", 2, 0), (U_AFTER, "a", 4, 1), (U_BEFORE, "b", 1, 1), (U_AFTER, "b", 3, 2),
        (U_BEFORE, "a", 4, 1), (U_AFTER, "a", 6, 2), (U_BEFORE, "b", 3, 2), (U_AFTER, "b", 4, 2)]


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_a_global_count_distinct(backend: str, tmp_path: Path) -> None:
    schema = pa.schema([pa.field("n", pa.int64()), pa.field("dv", pa.int64())])
    aggs = [AggCall("COUNT", None, False, pa.int64(), "n"), AggCall("COUNT", 3, True, pa.int64(), "dv")]
    op = _operator(backend, tmp_path, aggs, False, keys=[], schema=schema)
    inputs = [(_batch([(1, "a", None, 5), (2, "b", None, None)]), None), (_batch([(3, "a", None, 5)]), None),
              (_batch([(1, "c", None, 6)]), None)]
    assert _changes(op, inputs) == [(INSERT, 2, 1), (U_BEFORE, 2, 1), (U_AFTER, 3, 1),
                                    (U_BEFORE, 3, 1), (U_AFTER, 4, 2)]


def test_distinct_values_are_listed_per_slot(tmp_path: Path) -> None:
    # the snapshot's lists: every slot from 0 on, a prefix of them, any ascending subset; slots past
    # 16 bits (grouped in two radix passes)
    rng = np.random.default_rng(5)
    for top in (50, 70000):
        pairs = sorted({(int(s), int(v)) for s, v in zip(rng.integers(0, top, 3000), rng.integers(-99, 99, 3000),
                                                         strict=True)})
        shuffled = [pairs[i] for i in rng.permutation(len(pairs))]
        slots = np.array([s for s, _ in shuffled])
        values = pa.array([v for _, v in shuffled], pa.int64())
        store = DistinctValues()
        for part in np.array_split(np.arange(len(pairs)), 7):  # several value tables
            assert store.add(slots[part], values.take(pa.array(part))).all()
        assert store.size == len(pairs) and not store.add(slots, values).any()
        per_slot: dict[int, list[int]] = {}
        for s, v in pairs:
            per_slot.setdefault(s, []).append(v)
        for wanted in (np.arange(top), np.arange(top // 2), np.unique(rng.integers(0, top, 40))):
            got = store.lists(wanted).to_pylist()
            assert [sorted(g) for g in got] == [per_slot.get(w, []) for w in wanted.tolist()]
    keys = rng.integers(0, 1 << 31, 100000)
    assert np.array_equal(_stable_order(keys), np.argsort(keys, kind="stable"))


def _lll(basis: list[list[int]]) -> list[list[int]]:
    """Lenstra-Lenstra-Lovasz lattice basis reduction (delta 3/4), exact over the rationals."""
    b = [list(v) for v in basis]
    n = len(b)
    mu = [[Fraction(0)] * n for _ in range(n)]
    norms: list[Fraction] = []
    orthogonal: list[list[Fraction]] = []
    for i in range(n):
        v = [Fraction(x) for x in b[i]]
        for j in range(i):
            mu[i][j] = sum(x * y for x, y in zip(b[i], orthogonal[j], strict=True)) / norms[j]
            v = [x - mu[i][j] * y for x, y in zip(v, orthogonal[j], strict=True)]
        orthogonal.append(v)
        norms.append(sum(x * x for x in v))

    def reduce(k: int, j: int) -> None:
        q = round(mu[k][j])
        if q:
            b[k] = [x - q * y for x, y in zip(b[k], b[j], strict=True)]
            mu[k][j] -= q
            for i in range(j):
                mu[k][i] -= q * mu[j][i]

    k = 1
    while k < n:
        reduce(k, k - 1)
        if norms[k] < (Fraction(3, 4) - mu[k][k - 1] ** 2) * norms[k - 1]:
            m = mu[k][k - 1]
            b[k], b[k - 1] = b[k - 1], b[k]
            for j in range(k - 1):
                mu[k][j], mu[k - 1][j] = mu[k - 1][j], mu[k][j]
            total = norms[k] + m * m * norms[k - 1]
            mu[k][k - 1] = m * norms[k - 1] / total
            norms[k] = norms[k - 1] * norms[k] / total
            norms[k - 1] = total
            for i in range(k + 1, n):
                t = mu[i][k]
                mu[i][k] = mu[i][k - 1] - m * t
                mu[i][k - 1] = t + mu[k][k - 1] * mu[i][k]
            k = max(k - 1, 1)
        else:
            for j in range(k - 2, -1, -1):
                reduce(k, j)
            k += 1
    return b


def _colliding_strings(length: int = 12) -> tuple[str, str]:
    """Two ASCII strings with one hashing.hash_array: _string_hash adds up byte i times an odd
    weight w_i, so strings whose bytes differ by d with sum(d_i * w_i) = 0 mod 2^64 collide; LLL
    finds a short d in the lattice of all such d (basis: 2^64 e_0 and e_i - w_i / w_0 e_0)."""
    m = 1 << 64
    with np.errstate(over="ignore"):
        w = [int(x) for x in _mix(np.arange(length, dtype=np.uint64) + _GOLDEN) | np.uint64(1)]
    inverse = pow(w[0], -1, m)
    basis = [[m] + [0] * (length - 1)]
    basis += [[-w[i] * inverse % m] + [int(i == j) for j in range(1, length)] for i in range(1, length)]
    d = min((v for v in _lll(basis) if any(v)), key=lambda v: max(map(abs, v)))
    assert max(map(abs, d)) <= 47  # printable ASCII around "O"
    return "".join(chr(79 + max(x, 0)) for x in d), "".join(chr(79 + max(-x, 0)) for x in d)


def test_count_distinct_tells_values_and_keys_with_colliding_hashes_apart(tmp_path: Path) -> None:
    # VARCHAR x and y hash alike: the pairs (slot 0, x) and (slot 0, y) collide and their values are
    # compared; BIGINT 5 and z: (slot 0, 5) and (slot 1, z) collide and their slots are compared
    x, y = _colliding_strings()
    assert x != y and hash_array(pa.array([x, y])).tolist() == [hash_array(pa.array([x]))[0]] * 2
    vh = int(hash_array(pa.array([5], pa.int64()))[0])
    z = (_inverse_mix((vh - 31) % (1 << 64)) - int(_GOLDEN)) % (1 << 64)
    z = z - (1 << 64) if z >= 1 << 63 else z
    assert len(set(_pair_hashes(np.array([0, 0]), pa.array([x, y])).tolist())) == 1
    assert len(set(_pair_hashes(np.array([0, 1]), pa.array([5, z], pa.int64())).tolist())) == 1

    schema = pa.schema([("c", pa.string()), ("s", pa.string()), ("v", pa.int64())])
    out = pa.schema([("c", pa.string()), ("ds", pa.int64()), ("dv", pa.int64())])
    aggs = [AggCall("COUNT", 1, True, pa.int64(), "ds"), AggCall("COUNT", 2, True, pa.int64(), "dv")]
    for backend in ("hashmap", "rocksdb"):
        op = _operator(backend, tmp_path, aggs, False, keys=[0], schema=out)
        inputs = [(_batch([("a", x, 5)], schema), None), (_batch([("b", x, z)], schema), None),
                  (_batch([("a", y, 5)], schema), None),
                  # y and z again: found past the pair their hash collides with
                  (_batch([("a", x, z), ("b", y, 5), ("a", y, 5), ("b", x, z)], schema), None)]
        assert _changes(op, inputs) == [
            (INSERT, "a", 1, 1), (INSERT, "b", 1, 1), (U_BEFORE, "a", 1, 1), (U_AFTER, "a", 2, 1),
            (U_BEFORE, "a", 2, 1), (U_AFTER, "a", 2, 2), (U_BEFORE, "b", 1, 1), (U_AFTER, "b", 2, 2)]


def _restored(backend: str, snapshot: Snapshot, aggs: list[AggCall], tmp: Path) -> OperatorHarness:
    """A rescaled subtask: keyed state only (its operators rebuild from it)."""
    return OperatorHarness(_group_agg(backend, aggs, False), backend, tmp=tmp,
                           restore=Snapshot(snapshot.keyed, None))


def test_per_key_state_restored_for_the_columnar_form_is_checkpointed_before_the_first_batch(
        tmp_path: Path) -> None:
    # the per-key entries of a rocksdb savepoint wait for the first batch (the Arrow type of the
    # DISTINCT values): a checkpoint taken before it must hold them
    inputs = _distinct_input(15, 30)
    reference = _operator("rocksdb", tmp_path, DISTINCT_AGGS, False, per_key=True)
    _changes(reference, inputs[:15])
    waiting = _restored("hashmap", reference.snapshot(), DISTINCT_AGGS, tmp_path)
    assert waiting.operator.columnar is not None and waiting.operator.columnar.live == 0
    restored = _restored("hashmap", waiting.snapshot(), DISTINCT_AGGS, tmp_path)
    want = _changes(reference, inputs[15:])
    assert len(want) > 20 and _changes(restored, inputs[15:]) == want
    assert restored.operator.columnar is not None and len(restored.operator.groups) == 0


def test_per_key_rocksdb_state_is_taken_over_by_the_rocksdb_rows_form(tmp_path: Path) -> None:
    # a checkpoint of the per-key form (a job planned before, or with other aggregates) restored
    # where the rows form runs: the entries move into the rows at the first batch
    inputs = _append_only(16, 30)
    reference = _operator("rocksdb", tmp_path, APPEND_AGGS, False, per_key=True)
    _changes(reference, inputs[:15])
    restored = OperatorHarness(_group_agg("rocksdb", APPEND_AGGS, False), "rocksdb", tmp=tmp_path,
                               restore=Snapshot(reference.snapshot(canonical=False).keyed, None))
    want = _changes(reference, inputs[15:])
    assert len(want) > 20 and _changes(restored, inputs[15:]) == want
    store = restored.operator.columnar
    assert isinstance(store, RocksDBGroupAggregates) and len(restored.operator.groups) == 0
    assert store.live == len(reference.operator.groups)


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_state_ttl_expires_the_distinct_values_of_a_key(backend: str, tmp_path: Path) -> None:
    ttl = {"table.exec.state.ttl": "300 ms"}
    aggs = [AggCall("COUNT", None, False, pa.int64(), "n"), AggCall("COUNT", 3, True, pa.int64(), "dv"),
            AggCall("COUNT", 5, True, pa.int64(), "ds")]
    clock = ManualClock()
    op = _operator(backend, tmp_path, aggs, False, config=ttl, clock=clock)
    a, b = (1, "a", None), (2, "b", None)
    assert _changes(op, [(_batch([(*a, 1, None, "x"), (*a, 2, None, "x"), (*b, 1, None, "y")]), None)]) == [
        (INSERT, *a, 2, 2, 1), (INSERT, *b, 1, 1, 1)]
    clock.advance(200)
    assert _changes(op, [(_batch([(*b, 2, None, "y")]), None)]) == [
        (U_BEFORE, *b, 1, 1, 1), (U_AFTER, *b, 2, 2, 1)]
    clock.advance(100)
    # a expired (300 ms unwritten): it starts with no values; b (100 ms) keeps its
    assert _changes(op, [(_batch([(*a, 2, None, "x"), (*b, 1, None, "z")]), None)]) == [
        (INSERT, *a, 1, 1, 1), (U_BEFORE, *b, 2, 2, 1), (U_AFTER, *b, 3, 2, 2)]
    if op.operator.columnar is not None:  # a's old values are out of snapshots
        table = op.operator.columnar.table()
        assert table is not None
        assert sorted(zip(table.column("k2").to_pylist(), table.column("d1").to_pylist(),
                          table.column("d2").to_pylist(), strict=True)) == [
            ("a", [2], ["x"]), ("b", [1, 2], ["y", "z"])]
    store = op.operator.columnar
    if isinstance(store, RocksDBGroupAggregates):
        # one RocksDB entry per value: a's expired ones went when it came back; a sweep takes the rest
        assert store.pairs is not None and len(store.pairs) == 6 == sum(len(k) for k, _ in store.pairs.scan())
        clock.advance(400)
        c = (3, "c", None)
        assert _changes(op, [(_batch([(*c, 7, None, "w")]), None)]) == [(INSERT, *c, 1, 1, 1)]
        assert store.live == 1 and len(store.pairs) == 2 == sum(len(k) for k, _ in store.pairs.scan())


def test_expired_keys_are_compacted_away_with_their_distinct_values(tmp_path: Path) -> None:
    ttl = {"table.exec.state.ttl": "300 ms"}
    aggs = [AggCall("COUNT", None, False, pa.int64(), "n"), AggCall("COUNT", 3, True, pa.int64(), "dv"),
            AggCall("COUNT", 5, True, pa.int64(), "ds")]
    clock = ManualClock()
    ops = [_operator(backend, tmp_path, aggs, False, config=ttl, clock=clock) for backend in ("hashmap", "rocksdb")]

    def step(batch: pa.RecordBatch) -> list[tuple]:
        columnar, per_key = (_changes(op, [(batch, None)]) for op in ops)
        assert columnar == per_key
        return columnar

    keys = [(i, f"k{i}", None) for i in range(6000)]
    assert len(step(_batch([(*k, v, None, f"s{v}") for k in keys for v in (1, 2)]))) == 6000
    store = ops[0].operator.columnar
    assert store is not None and [store.distinct[i].size for i in (1, 2)] == [12000, 12000]
    clock.advance(300)
    assert step(_batch([(-1, "new", None, 7, None, "s")])) == [(INSERT, -1, "new", None, 1, 1, 1)]
    # the sweep killed 6000 keys, more than are live: slots and values were compacted
    assert store.size == 1 and [store.distinct[i].size for i in (1, 2)] == [1, 1]
    back = step(_batch([(*k, 3, None, "t") for k in keys[:100]] + [(-1, "new", None, 8, None, "s")]))
    assert sorted(back) == sorted([(INSERT, *k, 1, 1, 1) for k in keys[:100]]
                                  + [(U_BEFORE, -1, "new", None, 1, 1, 1), (U_AFTER, -1, "new", None, 2, 2, 1)])


def test_a_dead_key_holding_most_distinct_values_is_compacted_away(tmp_path: Path) -> None:
    ttl = {"table.exec.state.ttl": "300 ms"}
    aggs = [AggCall("COUNT", None, False, pa.int64(), "n"), AggCall("COUNT", 3, True, pa.int64(), "dv")]
    clock = ManualClock()
    ops = [_operator(backend, tmp_path, aggs, False, config=ttl, clock=clock) for backend in ("hashmap", "rocksdb")]

    def step(rows_: list[tuple]) -> list[tuple]:
        columnar, per_key = (_changes(op, [(_batch(rows_), None)]) for op in ops)
        assert columnar == per_key
        return columnar

    a, b = (1, "a", None), (2, "b", None)
    assert step([(*a, v) for v in range(5000)] + [(*b, 1)]) == [(INSERT, *a, 5000, 5000), (INSERT, *b, 1, 1)]
    clock.advance(200)
    assert step([(*b, 2)]) == [(U_BEFORE, *b, 1, 1), (U_AFTER, *b, 2, 2)]
    clock.advance(200)
    # a expired and was swept: one dead slot of two, but 5000 dead values of 5002 (b's stay)
    assert step([(*b, 2)]) == [(U_BEFORE, *b, 2, 2), (U_AFTER, *b, 3, 2)]
    store = ops[0].operator.columnar
    assert store is not None and (store.size, store.live) == (2, 1)
    distinct = store.distinct[1]
    assert (distinct.size, distinct.dead) == (2, 0)
    assert step([(*a, v) for v in (0, 1, 2, 1)] + [(*b, 3)]) == [
        (INSERT, *a, 4, 3), (U_BEFORE, *b, 3, 2), (U_AFTER, *b, 4, 3)]


# ---------------------------------------------------------------- SQL, against DuckDB


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, pa.Table]:
    rng = random.Random(21)
    n = 3000
    data = pa.table({
        "id": pa.array(range(n), pa.int64()),
        "user_id": pa.array([rng.choice([*range(400), None]) for _ in range(n)], pa.int64()),
        "cat": pa.array([rng.choice(["x", "y", "zz", "ü", None]) for _ in range(n)]),
        "ts": pa.array([dt.datetime(2024, 1, 1, rng.randint(0, 3)) if rng.random() > 0.05 else None
                        for _ in range(n)], pa.timestamp("ms")),
        "price": pa.array([rng.choice([*range(-20, 500), None]) for _ in range(n)], pa.int64()),
        "w": pa.array([rng.choice([0.5, 1.25, -3.0, None]) for _ in range(n)], pa.float64()),
    })
    path = tmp_path_factory.mktemp("group_agg") / "events.csv"
    with path.open("w") as f:
        for r in _tuples(data):
            f.write(",".join("" if v is None else v.strftime("%Y-%m-%d %H:%M:%S") if isinstance(v, dt.datetime)
                             else str(v) for v in r) + "\n")
    ddl = f"""CREATE TABLE events (id BIGINT, user_id BIGINT, cat STRING, ts TIMESTAMP(3), price BIGINT, w DOUBLE)
        WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv', 'csv.null-literal' = '');"""
    return ddl, data


QUERIES = [
    # NULL keys and values, many keys per batch, a key of three types
    ("SELECT user_id, cat, ts, COUNT(*) AS n, COUNT(price) AS np, SUM(price) AS s, MIN(price) AS lo, "
     "MAX(cat) AS hi, AVG(w) AS aw, MAX(ts) AS last FROM events GROUP BY user_id, cat, ts",
     "SELECT user_id, cat, ts, COUNT(*), COUNT(price), SUM(price), MIN(price), MAX(cat), AVG(w), MAX(ts) "
     "FROM events GROUP BY user_id, cat, ts"),
    # integer AVG truncates, SUM/AVG of no non-NULL value is NULL
    ("SELECT cat, AVG(price) AS a, SUM(w) AS s FROM events WHERE price IS NULL OR price > 400 GROUP BY cat",
     "SELECT cat, CAST(TRUNC(SUM(price) / COUNT(price)) AS BIGINT), SUM(w) FROM events "
     "WHERE price IS NULL OR price > 400 GROUP BY cat"),
    # stacked like Nexmark q4: an AVG over the updating MAX per (user, category)
    ("SELECT cat, AVG(top) AS a, COUNT(*) AS n, SUM(top) AS s FROM "
     "(SELECT user_id, cat, MAX(price) AS top FROM events GROUP BY user_id, cat) GROUP BY cat",
     "SELECT cat, CAST(TRUNC(SUM(top) / COUNT(top)) AS BIGINT), COUNT(*), SUM(top) FROM "
     "(SELECT user_id, cat, MAX(price) AS top FROM events GROUP BY user_id, cat) GROUP BY cat"),
    # an aggregate of a count: keys leave groups (-D) as their counts grow
    ("SELECT n, COUNT(*) AS users FROM (SELECT user_id, COUNT(*) AS n FROM events GROUP BY user_id) GROUP BY n",
     "SELECT n, COUNT(*) FROM (SELECT user_id, COUNT(*) AS n FROM events GROUP BY user_id) GROUP BY n"),
    ("SELECT COUNT(*) AS n, SUM(price) AS s, MAX(w) AS m FROM events",
     "SELECT COUNT(*), SUM(price), MAX(w) FROM events"),
]
# COUNT(DISTINCT) with FILTER (as Nexmark q15/q16) next to plain aggregates, over NULL values and keys
DISTINCT_QUERIES = [
    ("SELECT cat, ts, COUNT(*) AS n, COUNT(DISTINCT user_id) AS users, "
     "COUNT(DISTINCT user_id) FILTER (WHERE price < 100) AS cheap, COUNT(*) FILTER (WHERE price < 100) AS nc, "
     "COUNT(DISTINCT price) AS prices, COUNT(DISTINCT w) AS ws, SUM(price) AS s FROM events GROUP BY cat, ts",
     "SELECT cat, ts, COUNT(*), COUNT(DISTINCT user_id), COUNT(DISTINCT user_id) FILTER (WHERE price < 100), "
     "COUNT(*) FILTER (WHERE price < 100), COUNT(DISTINCT price), COUNT(DISTINCT w), SUM(price) "
     "FROM events GROUP BY cat, ts"),
    ("SELECT COUNT(DISTINCT user_id) AS users, COUNT(DISTINCT cat) FILTER (WHERE w > 0) AS cats, "
     "COUNT(DISTINCT ts) AS times FROM events",
     "SELECT COUNT(DISTINCT user_id), COUNT(DISTINCT cat) FILTER (WHERE w > 0), COUNT(DISTINCT ts) FROM events"),
]
QUERIES += DISTINCT_QUERIES


@pytest.mark.parametrize(("query", "oracle"), QUERIES)
@pytest.mark.parametrize(("parallelism", "batch_size", "backend"),
                         [(1, 64, "hashmap"), (2, 7, "hashmap"), (2, 1000, "hashmap"), (1, 64, "rocksdb"),
                          (2, 7, "rocksdb")])
def test_group_by_materializes_to_duckdb_result(events, query: str, oracle: str, parallelism: int,
                                               batch_size: int, backend: str) -> None:
    ddl, data = events
    settings = (f"SET 'parallelism.default' = '{parallelism}'; SET 'table.exec.batch-size' = '{batch_size}';"
                f"SET 'state.backend.type' = '{backend}';")
    got = run_sql(settings + ddl + query + ";")
    expected = duckdb_rows(oracle, events=data)
    assert expected and rows(got) == expected


@pytest.mark.parametrize(("query", "oracle"), [*QUERIES[2:4], DISTINCT_QUERIES[0]])
def test_sql_changelog_is_the_same_on_both_backends(events, query: str, oracle: str) -> None:
    ddl, data = events
    tables = []
    for backend in ("hashmap", "rocksdb"):
        script = f"SET 'state.backend.type' = '{backend}'; SET 'table.exec.batch-size' = '50';" + ddl + query + ";"
        tables.append(Session().execute_script(script)[-1].table)
    hashmap, rocksdb = tables
    assert hashmap.num_rows > len(duckdb_rows(oracle, events=data))  # updates and retractions happened
    assert _tuples(hashmap) == _tuples(rocksdb)
    assert rows(apply_changelog(hashmap)) == duckdb_rows(oracle, events=data)


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_group_by_and_join_on_date_and_time_keys(tmp_path: Path, backend: str) -> None:
    # 32-bit dates and times are hashed as the int32 they are stored as (they have no int64 cast)
    rng = random.Random(3)
    rows_ = [(dt.date(2024, 1, rng.randint(1, 5)), dt.time(rng.randint(0, 2), 30), rng.randint(1, 9)) for _ in range(300)]
    path = tmp_path / "d.csv"
    path.write_text("".join(f"{d.isoformat()},{t.isoformat()},{v}\n" for d, t, v in rows_))
    table = pa.table({"d": pa.array([r[0] for r in rows_]), "t": pa.array([r[1] for r in rows_], pa.time32("s")),
                      "v": pa.array([r[2] for r in rows_], pa.int64())})
    ddl = (f"SET 'table.exec.batch-size' = '17'; SET 'state.backend.type' = '{backend}';"
           f"CREATE TABLE dt (d DATE, t TIME(0), v BIGINT) WITH ('connector' = 'filesystem', 'path' = '{path}', "
           "'format' = 'csv');")
    grouped = "SELECT d, t, COUNT(*) AS n, SUM(v) AS s FROM dt GROUP BY d, t"
    assert rows(run_sql(ddl + grouped + ";")) == duckdb_rows(grouped, dt=table)
    joined = "SELECT a.d, a.v, b.v FROM dt a JOIN dt b ON a.d = b.d AND a.t = b.t WHERE a.v > b.v + 6"
    assert rows(run_sql(ddl + joined + ";")) == duckdb_rows(joined, dt=table)
