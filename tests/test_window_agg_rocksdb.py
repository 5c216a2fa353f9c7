"""The window aggregation's partials as RocksDB rows (window_agg_rocksdb.py) against the other forms.

On the hashmap backend the partials are Arrow tables in memory, on rocksdb one
entry per (window, key) merged a batch at a time, or per (slice, key) for HOP and
CUMULATE.  Both must emit exactly what the per-key form (the reference) emits, for
TUMBLE, HOP and CUMULATE, with late rows, at parallelism 1 and 2, and across
savepoints (to either backend), incremental checkpoints (also those written before
slicing) and rescaling.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from sqlstream.core.aggregates import AggCall
from sqlstream.core.errors import JobError
from sqlstream.core.windows import WindowSpec
from sqlstream.planner.physical import Lowering
from sqlstream.runtime.elements import MAX_WATERMARK
from sqlstream.runtime.operators import window_agg_rocksdb
from sqlstream.runtime.operators.window_agg import WindowAggOperator
from sqlstream.runtime.operators.window_agg_columnar import ColumnarWindowAggregates
from sqlstream.runtime.operators.window_agg_rocksdb import (
    ROWS_STATE,
    SLICES_STATE,
    RocksDBWindowAggregates,
)
from sqlstream.runtime.state.base import SnapshotFormatError
from sqlstream.runtime.state.rocksdb import RocksDBState
from tests.conftest import in_key_groups, rows, run_sql
from tests.harness import OperatorHarness, Snapshot, restored_into_halves
from tests.test_filter_and_group_windows import make_events, source_ddl

SECOND = 1000
INPUT = pa.schema([("ts", pa.timestamp("ms")), ("k", pa.string()), ("g", pa.int32()), ("v", pa.int64()),
                   ("f", pa.float64()), ("s", pa.string()), ("b", pa.bool_()), ("z", pa.timestamp("ms", "UTC")),
                   ("d", pa.date32())])
KEYS = [1, 2]
AGGS = [AggCall("COUNT", None, False, pa.int64(), "n"), AggCall("SUM", 3, False, pa.int64(), "sv"),
        AggCall("AVG", 4, False, pa.float64(), "af"), AggCall("MIN", 5, False, pa.string(), "mins"),
        AggCall("MAX", 3, False, pa.int64(), "maxv"), AggCall("COUNT", 4, False, pa.int64(), "nf"),
        AggCall("SUM", 2, False, pa.int32(), "sg"), AggCall("MIN", 6, False, pa.bool_(), "minb"),
        AggCall("MAX", 6, False, pa.bool_(), "maxb"), AggCall("MIN", 7, False, pa.timestamp("ms", "UTC"), "minz"),
        AggCall("MAX", 8, False, pa.date32(), "maxd")]
DISTINCT = [AggCall("COUNT", 3, True, pa.int64(), "dv")]
SPECS = {"tumble": WindowSpec("TUMBLE", 0, size_ms=10 * SECOND),
         "hop": WindowSpec("HOP", 0, size_ms=30 * SECOND, slide_ms=10 * SECOND),
         "cumulate": WindowSpec("CUMULATE", 0, size_ms=30 * SECOND, step_ms=10 * SECOND)}
OUTPUTS: list[str | int] = ["window_start", "window_end", *KEYS]

Event = tuple[str, pa.RecordBatch | int]


def _schema(aggs: list[AggCall]) -> pa.Schema:
    return pa.schema([pa.field("window_start", pa.timestamp("ms")), pa.field("window_end", pa.timestamp("ms")),
                      *(INPUT.field(k) for k in KEYS), *(pa.field(a.name, a.type) for a in aggs)])


def _window_agg(backend: str, spec: str, aggs: list[AggCall] = AGGS, per_key: bool = False) -> WindowAggOperator:
    """The operator as the planner lowers it for a job on ``backend`` (``per_key``: the reference)."""
    schema = _schema(aggs)
    key_types = [schema.field(i).type for i, o in enumerate(OUTPUTS) if isinstance(o, int)]
    columnar = not per_key and Lowering({"state.backend.type": backend}).window_agg_columnar(aggs, key_types)
    return WindowAggOperator(SPECS[spec], OUTPUTS, aggs, schema, columnar=columnar)


def _operator(backend: str, spec: str, tmp: Path, key_groups: range = range(128), per_key: bool = False,
              restore: Snapshot | None = None, aggs: list[AggCall] = AGGS) -> OperatorHarness:
    h = OperatorHarness(_window_agg(backend, spec, aggs, per_key), backend, tmp=tmp, key_groups=key_groups,
                        restore=restore)
    form = None if per_key else RocksDBWindowAggregates if backend == "rocksdb" else ColumnarWindowAggregates
    assert type(h.operator.columnar) is form if form else h.operator.columnar is None
    return h


def _events(seed: int, batches: int = 24, keys: int = 40) -> list[Event]:
    """Batches of rows around an advancing event time (some behind the watermark: late), each
    followed by a watermark; floats are halves, so every summation order gives the same sum."""
    rng = np.random.default_rng(seed)
    out: list[Event] = []
    for b in range(batches):
        n = 150
        ts = (b * 4 * SECOND + rng.integers(-12 * SECOND, 4 * SECOND, n)).clip(0)
        key = rng.integers(0, keys, n)
        batch = pa.RecordBatch.from_arrays([
            pa.array(ts, pa.timestamp("ms")),
            pa.array([None if k == 7 else f"k{k % 13}" for k in key], pa.string()),
            pa.array(key % 3, pa.int32()),
            pa.array(np.where(rng.random(n) < 0.1, None, rng.integers(-2**62, 2**62, n)).tolist(), pa.int64()),
            pa.array(np.where(rng.random(n) < 0.2, None, rng.integers(-40, 40, n) / 2).tolist(), pa.float64()),
            pa.array([None if x < 0.1 else f"s{int(x * 1000)}" for x in rng.random(n)], pa.string()),
            pa.array([None if x < 0.2 else x < 0.6 for x in rng.random(n)], pa.bool_()),
            pa.array(np.where(rng.random(n) < 0.1, None, rng.integers(-10**12, 10**12, n)).tolist(), pa.int64())
            .cast(pa.timestamp("ms", "UTC")),
            pa.array(np.where(rng.random(n) < 0.1, None, rng.integers(-1000, 20000, n)).tolist(), pa.int32())
            .cast(pa.date32()),
        ], schema=INPUT)
        out += [("batch", batch), ("watermark", b * 4 * SECOND - 6 * SECOND)]
    return out


def _mine(events: list[Event], groups: range) -> list[Event]:
    """The rows of ``groups``' key groups, as the hash exchange routes them."""
    return [(kind, e.filter(pa.array(in_key_groups(e, KEYS, groups))) if kind == "batch" else e)
            for kind, e in events]


def _fired(h: OperatorHarness, events: list[Event]) -> list[list[tuple]]:
    out = []
    for kind, e in events:
        if kind == "batch":
            h.process_batch(e)
        else:
            h.watermark(e)
            got = h.take()
            out.append(sorted((tuple(r[1:]) for r in got), key=str))
    return out


ALL = _events(3) + [("watermark", MAX_WATERMARK)]


@pytest.mark.parametrize("spec", SPECS)
def test_every_form_fires_the_same_windows_with_late_rows_dropped(spec: str, tmp_path: Path) -> None:
    reference = _operator("rocksdb", spec, tmp_path, per_key=True)
    want = _fired(reference, ALL)
    assert sum(len(w) for w in want) > 200 and reference.metrics.late_records_dropped > 50
    for backend in ("hashmap", "rocksdb"):
        h = _operator(backend, spec, tmp_path)
        assert _fired(h, ALL) == want
        assert h.metrics.late_records_dropped == reference.metrics.late_records_dropped
        assert h.state.num_entries() == 0  # every window fired: nothing left in RocksDB
        if backend == "rocksdb":  # the fired ranges are deleted, the slices' markers with them
            assert list(h.state.states[ROWS_STATE].cf.keys()) == list(h.state.states[SLICES_STATE].cf.keys()) == []
        h.close()


def test_a_window_aggregation_without_aggregates_keeps_its_keys(tmp_path: Path) -> None:
    # GROUP BY window_start, window_end, k, g with no aggregate: the entries have empty values
    want = _fired(_operator("rocksdb", "hop", tmp_path, per_key=True, aggs=[]), ALL)
    assert sum(len(w) for w in want) > 200
    assert _fired(_operator("rocksdb", "hop", tmp_path, aggs=[]), ALL) == want


@pytest.mark.parametrize("spec", SPECS)
def test_two_subtasks_fire_what_the_reference_fires_for_their_key_groups(spec: str, tmp_path: Path) -> None:
    for groups in (range(0, 64), range(64, 128)):
        mine = _mine(ALL, groups)
        want = _fired(_operator("rocksdb", spec, tmp_path, groups, per_key=True), mine)
        assert sum(len(w) for w in want) > 50
        assert _fired(_operator("rocksdb", spec, tmp_path, groups), mine) == want


def test_the_partials_are_rocksdb_entries_not_tables_in_memory(tmp_path: Path) -> None:
    h = _operator("rocksdb", "tumble", tmp_path)
    _fired(h, ALL[:20])
    rows_form = h.operator.columnar
    assert isinstance(rows_form, RocksDBWindowAggregates) and rows_form.slicing is None
    assert len(h.state.states[ROWS_STATE]) > 30 and h.state.columnar_states["partials"].tables == []
    # only window ends are kept in memory, a few per watermark lag
    assert 0 < len(rows_form.ends) <= 3 and rows_form.min_end() == min(rows_form.ends)


@pytest.mark.parametrize("spec", ["hop", "cumulate"])
def test_hop_and_cumulate_keep_one_entry_per_slice_and_key(spec: str, tmp_path: Path) -> None:
    # a row is written to its one slice, not to its size/slide windows: with nothing fired yet,
    # fewer entries than the (window, key)s the hashmap form holds, and no whole-window entry
    h, hashmap = _operator("rocksdb", spec, tmp_path), _operator("hashmap", spec, tmp_path)
    batches = [e for e in ALL[:20] if e[0] == "batch"]
    _fired(h, batches)
    _fired(hashmap, batches)
    rows_form = h.operator.columnar
    assert isinstance(rows_form, RocksDBWindowAggregates) and rows_form.slicing is SPECS[spec]
    hashmap_windows = hashmap.state.columnar_states["partials"].frozen()
    assert hashmap_windows is not None
    windows = hashmap.operator.columnar.combine(hashmap_windows).num_rows
    slices = len(h.state.states[SLICES_STATE]) - len(rows_form.marked)
    assert len(h.state.states[ROWS_STATE]) == 0 and 30 < slices and slices * 1.4 < windows
    # in memory: the slice ends and the unfired windows' ends, not keys
    assert 0 < len(rows_form.slice_ends) <= len(rows_form.pending) <= 10
    assert rows_form.min_end() == min(rows_form.pending) == min(rows_form.slice_ends)
    # once windows fired, each key group's fired-through watermark is an entry after its slices
    assert not rows_form.marked
    _fired(h, ALL[20:24])
    assert 0 < len(rows_form.marked) == len(rows_form.slice_kgs)


@pytest.mark.parametrize("spec", ["hop", "cumulate"])
def test_a_rocksdb_savepoint_holds_the_windows_the_hashmap_form_holds(spec: str, tmp_path: Path) -> None:
    # the slices are expanded to their unfired windows and merged, a key group at a time, in key
    # order: the hashmap form's table, each (window, key) once
    tables = {}
    for backend in ("hashmap", "rocksdb"):
        h = _operator(backend, spec, tmp_path)
        _fired(h, ALL[:20])
        (path,) = h.snapshot().keyed["columnar"].values()
        with pa.OSFile(str(path)) as source:
            table = pa.ipc.open_file(source).read_all()
        tables[backend] = table
    merged = _operator("hashmap", spec, tmp_path).operator.columnar.combine(tables["hashmap"])
    columns = tables["rocksdb"].column_names
    assert tables["rocksdb"].num_rows == merged.num_rows > 100
    assert sorted(tables["rocksdb"].to_pylist(), key=str) == sorted(merged.select(columns).to_pylist(), key=str)


@pytest.mark.parametrize(("first", "second"), [("hashmap", "rocksdb"), ("rocksdb", "hashmap"), ("rocksdb", "rocksdb")])
@pytest.mark.parametrize("spec", ["tumble", "hop", "cumulate"])
def test_state_moves_through_a_savepoint_to_another_backend_and_two_subtasks(
        first: str, second: str, spec: str, tmp_path: Path) -> None:
    before, after = ALL[:24], ALL[24:]
    old = _operator(first, spec, tmp_path)
    _fired(old, before)
    watermark = before[-1][1]
    assert isinstance(watermark, int)
    for groups, new in restored_into_halves(old.snapshot(), lambda: _window_agg(second, spec), second, tmp=tmp_path):
        reference = _operator("rocksdb", spec, tmp_path, groups, per_key=True)
        _fired(reference, _mine(before, groups))
        want = _fired(reference, _mine(after, groups))
        new.watermark(watermark)  # a rescaled subtask learns the watermark from its inputs again
        assert new.take() == []  # every window due at it had fired before the savepoint
        assert sum(len(w) for w in want) > 50 and _fired(new, _mine(after, groups)) == want


@pytest.mark.parametrize("first", ["hashmap", "rocksdb"])
def test_a_savepoint_is_restored_a_chunk_at_a_time(first: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # hashmap's partials hold a (window, key) once per batch that had it, in no order: chunks merge
    # into what earlier chunks wrote; the rows form's are in key order, each chunk's keys all new,
    # and are restored a file batch at a time
    monkeypatch.setattr(window_agg_rocksdb, "CHUNK", 50)
    gets = 0
    real_get_many = RocksDBState.get_many

    def counted(self: RocksDBState, keys: list[bytes]) -> list[bytes | None]:
        nonlocal gets
        gets += 1
        return real_get_many(self, keys)

    before, after = ALL[:24], ALL[24:]
    old = _operator(first, "hop", tmp_path)
    _fired(old, before)
    if first == "hashmap":
        assert len(old.state.columnar_states["partials"].tables) > 1  # not compacted: keys repeat
    savepoint = old.snapshot()
    if first == "rocksdb":
        # written as read from a frozen view: the file holds the chunks as record batches
        (path,) = savepoint.keyed["columnar"].values()
        with pa.OSFile(str(path)) as source:
            reader = pa.ipc.open_file(source)
            sizes = [reader.get_batch(i).num_rows for i in range(reader.num_record_batches)]
        assert len(sizes) > 2 and max(sizes) <= 50
    monkeypatch.setattr(RocksDBState, "get_many", counted)
    new = _operator("rocksdb", "hop", tmp_path, restore=savepoint)
    # restored windows stay whole-window entries (a window's partial cannot be split into slices)
    assert len(new.state.states[ROWS_STATE]) > 100 and len(new.state.states[SLICES_STATE]) == 0
    if first == "rocksdb":
        assert sum(sizes) == len(new.state.states[ROWS_STATE])
    assert (gets > 0) == (first == "hashmap")
    assert _fired(new, after) == _fired(old, after)


def _halves_fire_as_the_per_key_form(checkpoint: Snapshot, spec: str, before: list[Event], after: list[Event],
                                     tmp_path: Path, sliced: bool = False) -> None:
    """``checkpoint`` (of the rows form after ``before``) restored onto two subtasks: each half fires
    the windows of ``after`` in its key groups as the per-key form fed the same rows does (``sliced``:
    the halves hold slices once restored)."""
    for groups, new in restored_into_halves(checkpoint, lambda: _window_agg("rocksdb", spec), "rocksdb",
                                            tmp=tmp_path):
        if sliced:
            assert isinstance(new.operator.columnar, RocksDBWindowAggregates) and new.operator.columnar.slice_ends
        reference = _operator("rocksdb", spec, tmp_path, groups, per_key=True)
        _fired(reference, _mine(before, groups))
        want = _fired(reference, _mine(after, groups))
        new.watermark(before[-1][1])  # type: ignore[arg-type]
        assert sum(len(w) for w in want) > 50 and _fired(new, _mine(after, groups)) == want


@pytest.mark.parametrize("spec", ["hop", "cumulate"])
def test_rocksdb_rows_rescale_from_an_incremental_checkpoint(spec: str, tmp_path: Path) -> None:
    # a checkpoint of the rows is RocksDB's own column family (no table is written); a rescaled
    # restore copies the key-group ranges it owns and finds its window ends by seeking
    before, after = ALL[:24], ALL[24:]
    old = _operator("rocksdb", spec, tmp_path)
    _fired(old, before)
    checkpoint = old.snapshot(canonical=False)
    assert checkpoint.keyed["columnar"] == {} and checkpoint.keyed["keyed"]["states"][SLICES_STATE] > 50
    # the same key groups: the db is taken over whole, with the operator's watermark
    whole = _operator("rocksdb", spec, tmp_path, restore=checkpoint)
    reference = _operator("rocksdb", spec, tmp_path, per_key=True)
    _fired(reference, before)
    assert _fired(whole, after) == _fired(reference, after)
    _halves_fire_as_the_per_key_form(checkpoint, spec, before, after, tmp_path, sliced=True)


def test_a_per_key_savepoint_is_taken_over_by_the_rows_form(tmp_path: Path) -> None:
    before, after = ALL[:24], ALL[24:]
    old = _operator("rocksdb", "hop", tmp_path, per_key=True)
    _fired(old, before)
    snapshot = old.snapshot()
    new = _operator("rocksdb", "hop", tmp_path, restore=snapshot)
    assert len(new.state.states["windows"]) == 0 and len(new.state.states[ROWS_STATE]) > 50
    assert _fired(new, after) == _fired(old, after)


def test_rocksdb_plans_the_rows_form_without_count_distinct_and_for_simple_keys() -> None:
    rocksdb = Lowering({"state.backend.type": "rocksdb"})
    assert rocksdb.window_agg_columnar(AGGS, [pa.string(), pa.int32()])
    assert not rocksdb.window_agg_columnar(AGGS + DISTINCT, [pa.string()])
    assert not rocksdb.window_agg_columnar(AGGS, [pa.decimal128(10, 2)])
    assert not rocksdb.window_agg_columnar([AggCall("SUM", 3, False, pa.decimal128(10, 2), "d")], [])


def test_a_plan_for_hashmap_with_count_distinct_is_refused_on_rocksdb(tmp_path: Path) -> None:
    planned = _window_agg("hashmap", "tumble", AGGS + DISTINCT)
    assert planned.columnar_form
    with pytest.raises(JobError, match="COUNT\\(DISTINCT\\)"):
        OperatorHarness(planned, "rocksdb", tmp=tmp_path)


@pytest.mark.parametrize("seed, window", [
    (5, "HOP(TABLE events, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '15' SECOND)"),
    (6, "CUMULATE(TABLE events, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '20' SECOND)"),
], ids=["hop", "cumulate"])
def test_a_sliced_window_query_gives_the_same_rows_on_both_backends(seed: int, window: str, tmp_path: Path) -> None:
    ddl = source_ddl(make_events(3000, [137], seed=seed, disorder_ms=4000), tmp_path / "events.csv", delay_s=5)
    query = ddl + f"""
        SELECT window_start, window_end, k, COUNT(*), SUM(v), MIN(v), MAX(w), AVG(CAST(v AS DOUBLE))
        FROM TABLE({window})
        GROUP BY window_start, window_end, k;"""
    got = {backend: rows(run_sql(query, {"state.backend.type": backend, "parallelism.default": "2"}))
           for backend in ("hashmap", "rocksdb")}
    assert len(got["hashmap"]) > 100 and got["hashmap"] == got["rocksdb"]


@pytest.mark.parametrize("spec", ["hop", "cumulate"])
def test_a_checkpoint_of_whole_windows_written_before_slicing_restores(
        spec: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the layout before slicing (every window of a row an entry of window_rows, as the rows form
    # wrote them until slices came): its windows stay whole until they fire, merged with the
    # slices of the rows after the restore, at the same key groups and rescaled
    before, after = ALL[:24], ALL[24:]
    with monkeypatch.context() as m:
        m.setattr(window_agg_rocksdb, "slice_size", lambda spec: None)
        old = _operator("rocksdb", spec, tmp_path)
        _fired(old, before)
        checkpoint = old.snapshot(canonical=False)
    assert checkpoint.keyed["keyed"]["states"][SLICES_STATE] == 0 < checkpoint.keyed["keyed"]["states"][ROWS_STATE]
    reference = _operator("rocksdb", spec, tmp_path, per_key=True)
    _fired(reference, before)
    whole = _operator("rocksdb", spec, tmp_path, restore=checkpoint)
    assert len(whole.state.states[ROWS_STATE]) > 50
    assert _fired(whole, after) == _fired(reference, after)
    assert whole.state.num_entries() == 0
    _halves_fire_as_the_per_key_form(checkpoint, spec, before, after, tmp_path)


def test_slices_restored_into_windows_that_are_not_sliced_are_refused(tmp_path: Path) -> None:
    # a HOP job's checkpoint restored into a TUMBLE window aggregation: its slices cannot be read
    old = _operator("rocksdb", "hop", tmp_path)
    _fired(old, ALL[:10])
    checkpoint = old.snapshot(canonical=False)
    with pytest.raises(SnapshotFormatError, match="slices"):
        _operator("rocksdb", "tumble", tmp_path, restore=checkpoint)


@pytest.mark.parametrize("spec", ["hop", "cumulate"])
def test_slices_fire_and_count_right_when_a_firing_reads_many_chunks(
        spec: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a firing gathers its key groups' slices into CHUNK-sized tables across key groups; each
    # key group read gets its delete-range, so the state's entry count stays the entries it holds
    monkeypatch.setattr(window_agg_rocksdb, "CHUNK", 7)
    reference = _operator("rocksdb", spec, tmp_path, per_key=True)
    h = _operator("rocksdb", spec, tmp_path)
    slices = h.state.states[SLICES_STATE]
    for event in ALL:
        assert _fired(h, [event]) == _fired(reference, [event])
        assert len(slices) == sum(1 for _ in slices.cf.keys())
    assert h.state.num_entries() == 0


@pytest.mark.parametrize("kind", ["HOP", "CUMULATE", "TUMBLE"])
def test_slices_on_a_zoned_time_attribute_fire_as_the_hashmap_form_over_both_clock_changes(
        kind: str, tmp_path: Path) -> None:
    # slices are wall-clock panes like the windows (and TUMBLE's whole windows too): over the nights Los Angeles turns its clocks
    # forward and back, each watermark fires what the hashmap form fires: every window whose fire
    # time passed, as Flink's timers (one per window) fire; across the skipped hour a later window
    # end may fire earlier (WindowClock.fire_times), and a window over the repeated hour waits for
    # its second pass
    zone = "America/Los_Angeles"
    ltz = pa.timestamp("ms", "UTC")
    spec = WindowSpec(kind, 0, size_ms=2 * 3_600_000 if kind != "TUMBLE" else 1_800_000,
                      slide_ms=1_800_000 if kind == "HOP" else 0, step_ms=1_800_000 if kind == "CUMULATE" else 0,
                      zone=zone)
    schema = pa.schema([pa.field("window_start", pa.timestamp("ms")), pa.field("window_end", pa.timestamp("ms")),
                        pa.field("k", pa.int64()), pa.field("n", pa.int64()), pa.field("s", pa.int64())])
    aggs = [AggCall("COUNT", None, False, pa.int64(), "n"), AggCall("SUM", 2, False, pa.int64(), "s")]
    rng = np.random.default_rng(7)
    events: list[Event] = []
    for night in ("2026-03-08T06:00:00", "2026-10-31T23:00:00"):  # UTC: the LA nights of both changes
        start = int(np.datetime64(night, "ms").astype(np.int64))
        for b in range(36):  # 6 hours in 10-minute steps, rows up to 20 minutes behind
            ts = start + b * 600_000 + rng.integers(-1_200_000, 600_000, 40)
            batch = pa.record_batch([pa.array(ts, pa.int64()).cast(ltz), pa.array(rng.integers(0, 5, 40)),
                                     pa.array(rng.integers(0, 100, 40))], names=["lt", "k", "v"])
            events += [("batch", batch), ("watermark", int(start + b * 600_000 - 300_000))]
    events.append(("watermark", MAX_WATERMARK))
    got = {}
    for backend, columnar in (("hashmap", True), ("rocksdb", True)):
        h = OperatorHarness(WindowAggOperator(spec, ["window_start", "window_end", 1], aggs, schema,
                                              columnar=columnar), backend, tmp=tmp_path)
        if backend == "rocksdb":  # TUMBLE: whole windows, a window being one slice
            assert isinstance(h.operator.columnar, RocksDBWindowAggregates)
            assert h.operator.columnar.slicing is (None if kind == "TUMBLE" else spec)
        got[backend] = _fired(h, events)
    assert sum(len(w) for w in got["hashmap"]) > 100 and got["rocksdb"] == got["hashmap"]


@pytest.mark.parametrize("kind", ["HOP", "CUMULATE"])
def test_slices_of_windows_with_an_offset_fire_as_the_per_key_form(kind: str, tmp_path: Path) -> None:
    # an offset moves the slices with the windows (Flink's HOP/CUMULATE offset argument)
    spec = WindowSpec(kind, 0, size_ms=30 * SECOND, slide_ms=10 * SECOND if kind == "HOP" else 0,
                      step_ms=10 * SECOND if kind == "CUMULATE" else 0, offset_ms=3 * SECOND)
    got = {}
    for per_key in (True, False):
        h = OperatorHarness(WindowAggOperator(spec, OUTPUTS, AGGS, _schema(AGGS), columnar=not per_key), "rocksdb",
                            tmp=tmp_path)
        assert per_key or (isinstance(h.operator.columnar, RocksDBWindowAggregates) and h.operator.columnar.slicing)
        got[per_key] = _fired(h, ALL)
    assert sum(len(w) for w in got[True]) > 200 and got[False] == got[True]
    assert any(r[0].second % 10 == 3 for w in got[True] for r in w)  # window starts at :03, :13, ...
