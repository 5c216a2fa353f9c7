"""Keyed state backends: the same contract on 'hashmap' and 'rocksdb', plus RocksDB's own promises.

Snapshots, rescaling and savepoints are what make state survive failures
and parallelism changes, so each is checked by restoring into a fresh
backend, never by looking at files.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from sqlstream.runtime.clock import SYSTEM_CLOCK, Clock, ManualClock
from sqlstream.runtime.state import BACKENDS, base, create_backend
from sqlstream.runtime.state.base import SnapshotFormatError, StateBackend
from sqlstream.runtime.state.codec import encode

MAX_PARALLELISM = 128


@pytest.fixture
def backends(tmp_path: Path):
    """Makes backends under tmp_path and closes them all after the test."""
    made: list[StateBackend] = []

    def make(kind: str, key_groups: range = range(MAX_PARALLELISM), clock: Clock = SYSTEM_CLOCK) -> StateBackend:
        backend = create_backend(kind, key_groups, tmp_path / "local", clock)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


def checkpoint(backend: StateBackend, root: Path, checkpoint_id: int, canonical: bool = False) -> Any:
    """Snapshot and write at once, as a checkpoint coordinator would.

    Each subtask gets its own directory directly under the checkpoint root, so the
    rocksdb backend's shared SST folder (``<directory>/../shared``) is one per root.
    """
    directory = root / f"chk-{checkpoint_id}-kg-{backend.key_groups.start}-{backend.key_groups.stop}"
    directory.mkdir(parents=True, exist_ok=True)
    return backend.snapshot(checkpoint_id, canonical)(directory)


def contents(backend: StateBackend, name: str = "s") -> dict[tuple[int, tuple], Any]:
    return {(kg, key): value for kg, key, value in backend.state(name).items()}


KEYS: list[tuple] = [
    (1,),
    ("a", 2),
    (1.5, None),
    (True, "x"),
    (dt.datetime(2024, 5, 1, 12, 30), Decimal("10.25")),
    (("nested", 1), (2.0, None)),
    (dt.date(2024, 1, 1), -7),
]


@pytest.mark.parametrize("kind", BACKENDS)
def test_put_get_delete_items_len(kind: str, backends) -> None:
    backend = backends(kind)
    st = backend.state("s")
    for i, key in enumerate(KEYS):
        st.put(i * 17 % MAX_PARALLELISM, key, {"n": i, "tags": [key]})
    assert len(st) == len(KEYS)
    for i, key in enumerate(KEYS):
        assert st.get(i * 17 % MAX_PARALLELISM, key) == {"n": i, "tags": [key]}
    assert st.get(0, ("missing",)) is None
    assert st.get(1, KEYS[0]) is None  # same key, other key group: another entry

    st.put(0, KEYS[0], "overwritten")
    assert st.get(0, KEYS[0]) == "overwritten"
    assert len(st) == len(KEYS)  # overwriting is not a new entry
    st.delete(0, KEYS[0])
    st.delete(0, KEYS[0])  # deleting twice, or a key never put, changes nothing
    st.delete(5, ("never",))
    assert st.get(0, KEYS[0]) is None
    assert len(st) == len(KEYS) - 1

    expected = {(i * 17 % MAX_PARALLELISM, key): {"n": i, "tags": [key]} for i, key in enumerate(KEYS)}
    del expected[(0, KEYS[0])]
    assert contents(backend) == expected

    other = backend.state("other")
    other.put(3, ("a", 2), 1)
    assert len(other) == 1 and len(st) == len(KEYS) - 1  # named states do not share entries
    assert backend.num_entries() == len(KEYS)


@pytest.mark.parametrize("kind", BACKENDS)
def test_equal_keys_built_differently_are_one_entry(kind: str, backends) -> None:
    # the same string object twice vs two equal strings: pickle's memo would encode these differently
    word = "shared-word"
    copy = "".join(["shared-", "word"])
    assert copy is not word
    st = backends(kind).state("s")
    st.put(7, (word, word), 1)
    st.put(7, (word, copy), 2)
    assert len(st) == 1
    assert st.get(7, (copy, copy)) == 2


def test_rocksdb_items_are_in_key_group_order(backends) -> None:
    st = backends("rocksdb").state("s")
    for kg in (90, 3, 127, 0, 64, 3):
        st.put(kg, (f"k{kg}",), kg)
    st.put(3, ("another",), 3)
    assert [kg for kg, _, _ in st.items()] == [0, 3, 3, 64, 90, 127]


@pytest.mark.parametrize("kind", BACKENDS)
def test_snapshot_is_isolated_from_later_changes(kind: str, backends, tmp_path: Path) -> None:
    backend = backends(kind)
    st = backend.state("s")
    for i in range(1000):
        st.put(i % MAX_PARALLELISM, (i,), f"v{i}")
    writer = backend.snapshot(1)

    # the writer runs on another thread while processing goes on, as in an asynchronous checkpoint
    directory = tmp_path / "chk" / "chk-1-op"
    directory.mkdir(parents=True)
    result: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: result.update(handle=writer(directory)))
    thread.start()
    for i in range(0, 1000, 2):
        st.put(i % MAX_PARALLELISM, (i,), "changed")
    for i in range(1, 1000, 4):
        st.delete(i % MAX_PARALLELISM, (i,))
    for i in range(1000, 1500):
        st.put(i % MAX_PARALLELISM, (i,), "new")
    thread.join()

    expected = {(i % MAX_PARALLELISM, (i,)): f"v{i}" for i in range(1000)}
    for register_first in (False, True):  # restoring must leave the checkpoint usable for the next restore
        restored = backends(kind)
        if register_first:  # an operator may register its states before the restore
            early = restored.state("s")
            restored.state("extra")
        restored.restore([result["handle"]])
        assert contents(restored) == expected
        assert len(restored.state("s")) == 1000
        restored.state("s").put(0, (0,), "after restore")
        if register_first:
            assert restored.state("s") is early and early.get(0, (0,)) == "after restore"
            restored.state("extra").put(2, ("y",), 2)
            assert restored.state("extra").get(2, ("y",)) == 2
    assert st.get(0, (0,)) == "changed"  # and the running backend is untouched by the restores
    assert len(st) == 1000 - 250 + 500


@pytest.mark.parametrize("kind", BACKENDS)
def test_restore_across_key_group_ranges(kind: str, backends, tmp_path: Path) -> None:
    halves = [range(0, 64), range(64, 128)]
    expected: dict[tuple[int, tuple], Any] = {}
    expected_counts: dict[tuple[int, tuple], Any] = {}
    handles = []
    for half in halves:
        old = backends(kind, half)
        for i in range(2000):
            kg = half.start + i % len(half)
            old.state("s").put(kg, (f"user-{i}", i), [i, kg])
            expected[(kg, (f"user-{i}", i))] = [i, kg]
            if i % 3 == 0:
                old.state("counts").put(kg, (i,), i)
                expected_counts[(kg, (i,))] = i
        handles.append(checkpoint(old, tmp_path / "chk", 1))

    whole = backends(kind, range(0, 128))
    whole.restore(handles)
    assert contents(whole) == expected
    assert contents(whole, "counts") == expected_counts
    assert len(whole.state("s")) == len(expected)

    quarters = [range(q * 32, (q + 1) * 32) for q in range(4)]
    seen = 0
    for quarter in quarters:
        part = backends(kind, quarter)
        part.restore(handles)
        mine = {k: v for k, v in expected.items() if k[0] in quarter}
        assert contents(part) == mine
        assert len(part.state("s")) == len(mine)
        assert contents(part, "counts") == {k: v for k, v in expected_counts.items() if k[0] in quarter}
        seen += len(mine)
    assert seen == len(expected)

    # scaling back in: the four quarters' checkpoints restore into one backend again
    quarter_handles = []
    for q, quarter in enumerate(quarters):
        part = backends(kind, quarter)
        part.restore(handles)
        quarter_handles.append(checkpoint(part, tmp_path / "chk", 2 + q))
    merged = backends(kind, range(0, 128))
    merged.restore(quarter_handles)
    assert contents(merged) == expected


@pytest.mark.parametrize(("source", "target"), [("hashmap", "rocksdb"), ("rocksdb", "hashmap")])
def test_canonical_savepoint_switches_backend(source: str, target: str, backends, tmp_path: Path) -> None:
    old = backends(source)
    expected = {}
    for i, key in enumerate(KEYS * 50):
        kg, full_key = i % MAX_PARALLELISM, (*key, i)
        old.state("s").put(kg, full_key, (i, str(key)))
        expected[(kg, full_key)] = (i, str(key))
    old.state("ttl", ttl_ms=60_000).put(5, ("k",), "fresh")
    savepoint = checkpoint(old, tmp_path / "savepoints", 1, canonical=True)
    assert savepoint["format"] == "canonical"

    new = backends(target)
    new.restore([savepoint])
    assert contents(new) == expected
    assert len(new.state("s")) == len(expected)

    # a savepoint also rescales: the upper half of the key groups only
    upper = backends(target, range(64, 128))
    upper.restore([savepoint])
    assert contents(upper) == {k: v for k, v in expected.items() if k[0] >= 64}


def _batches(path: Path) -> list[pa.RecordBatch]:
    with pa.OSFile(str(path)) as source:
        reader = pa.ipc.open_file(source)
        return [reader.get_batch(i) for i in range(reader.num_record_batches)]


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_savepoint_is_written_and_restored_in_bounded_batches(kind: str, backends, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "BATCH_ENTRIES", 100)
    monkeypatch.setattr(base, "BATCH_BYTES", 20_000)
    old = backends(kind)
    expected: dict[str, dict[tuple[int, tuple], Any]] = {"s": {}, "big": {}}
    for i in range(1050):
        kg = i * 37 % MAX_PARALLELISM
        old.state("s").put(kg, (i, "k"), f"v{i}")
        expected["s"][(kg, (i, "k"))] = f"v{i}"
    for i in range(40):
        old.state("big").put(i % MAX_PARALLELISM, (i,), bytes([i]) * 6000)
        expected["big"][(i % MAX_PARALLELISM, (i,))] = bytes([i]) * 6000
    savepoint = checkpoint(old, tmp_path / "savepoints", 1, canonical=True)

    batches = _batches(savepoint["file"])
    assert sum(b.num_rows for b in batches) == 1090
    assert max(b.num_rows for b in batches) <= 100  # the entry bound
    for b in batches:  # the byte bound: a batch ends with the entry that reaches it
        sizes = [len(k) + len(v) + 2 for k, v in zip(b.column("key").to_pylist(), b.column("value").to_pylist(),
                                                     strict=True)]
        assert sum(sizes[:-1]) < 20_000
        assert len(set(b.column("state").to_pylist())) == 1  # a batch holds one state's entries
    # the handle names each batch's key-group range, so a restore skips the batches outside its own
    assert savepoint["batch_key_groups"] == [[min(b.column("kg").to_pylist()), max(b.column("kg").to_pylist())]
                                             for b in batches]
    if kind == "rocksdb":  # each state scanned in key order: key groups ascending
        for name in expected:
            kgs = [kg for b in batches if b.column("state")[0].as_py() == name for kg in b.column("kg").to_pylist()]
            assert kgs == sorted(kgs)
    # a batch whose range misses the restore's key groups is not read at all
    assert list(base.read_canonical_batches({**savepoint, "batch_key_groups": [[200, 300]] * len(batches)},
                                            range(128))) == []

    for target in BACKENDS:  # read back batch by batch into either backend, rescaled
        part = backends(target, range(32, 96))
        part.restore([savepoint])
        for name, entries in expected.items():
            mine = {k: v for k, v in entries.items() if 32 <= k[0] < 96}
            assert contents(part, name) == mine
            assert len(part.state(name)) == len(mine)


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_savepoint_written_whole_by_an_earlier_version_still_restores(kind: str, backends, tmp_path: Path) -> None:
    # before streaming: one batch holding every state's entries, and a handle without batch ranges
    entries = [("s", i % MAX_PARALLELISM, (i,), f"v{i}") for i in range(300)] + [("t", 5, ("x",), [1, 2])]
    table = pa.table({"state": [e[0] for e in entries], "kg": pa.array([e[1] for e in entries], pa.int32()),
                      "key": pa.array([encode(e[2]) for e in entries], pa.binary()),
                      "value": pa.array([encode(e[3]) for e in entries], pa.binary())})
    path = tmp_path / "keyed-state.arrow"
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    part = backends(kind, range(0, 64))
    part.restore([{"format": "canonical", "file": path}])
    assert contents(part) == {(kg, key): v for name, kg, key, v in entries if name == "s" and kg < 64}
    assert contents(part, "t") == {(5, ("x",)): [1, 2]}


@pytest.mark.parametrize("kind", BACKENDS)
def test_columnar_state_is_written_and_restored_in_bounded_batches(kind: str, backends, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "BATCH_ENTRIES", 64)
    old = backends(kind)
    old.columnar("w").tables.append(pa.table({"$kg": pa.array([i % MAX_PARALLELISM for i in range(1000)], pa.int32()),
                                              "x": range(1000)}))
    directory = tmp_path / "chk-1"
    directory.mkdir()
    handle = old.snapshot_all(1)(directory)
    assert max(b.num_rows for b in _batches(handle["columnar"]["w"])) <= 64

    lower = backends(kind, range(0, 64))
    lower.restore_all([handle])
    table = lower.take_columnar("w")
    assert table is not None
    assert sorted(table.column("x").to_pylist()) == [i for i in range(1000) if i % MAX_PARALLELISM < 64]


@pytest.mark.parametrize("kind", BACKENDS)
def test_ttl_expires_an_entry_ttl_ms_after_its_last_write(kind: str, backends) -> None:
    clock = ManualClock()
    backend = backends(kind, clock=clock)
    st = backend.state("s", ttl_ms=50)
    st.put(1, ("old",), "a")
    st.put(2, ("rewritten",), "b")
    st.put(4, ("read",), "d")
    clock.advance(30)
    st.put(2, ("rewritten",), "b2")  # a write restarts its TTL
    clock.advance(19)
    assert st.get(1, ("old",)) == "a"  # 49 ms old
    assert st.get(4, ("read",)) == "d"  # a read does not restart it (Flink's OnCreateAndWrite)
    clock.advance(1)
    st.put(3, ("fresh",), "c")
    assert st.get(1, ("old",)) is None  # 50 ms old: expired, as Flink's 'expiration <= now'
    assert sorted(st.items()) == [(2, ("rewritten",), "b2"), (3, ("fresh",), "c")]
    assert len(st) == 2  # expired entries are removed once seen
    clock.advance(30)
    assert st.get(2, ("rewritten",)) is None and st.get(3, ("fresh",)) == "c"


def test_hashmap_ttl_drops_expired_entries_of_keys_never_read_again(backends) -> None:
    """Flink's heap backend cleans expired entries in the background (incremental cleanup): a key
    written once and never read again must not stay forever.  Each write drops them here."""
    clock = ManualClock()
    st = backends("hashmap", clock=clock).state("s", ttl_ms=50)
    for i in range(1000):
        st.put(i % 128, (i,), i)
        clock.advance(1)
    assert len(st) == 50  # the keys written in the last 50 ms: nothing read them
    st.put(950 % 128, (950,), "again")  # the oldest entry, rewritten at 1000 just before it expires
    assert len(st) == 50
    clock.advance(10)
    st.put(1, ("new",), 0)  # at 1010: the entries written at 951..960 go, the rewritten one stays
    assert len(st) == 41 and st.get(950 % 128, (950,)) == "again"


def test_rocksdb_ttl_sweeps_expired_entries_of_keys_never_read_again(backends) -> None:
    """Flink's RocksDB drops expired entries at compaction; here a sweep every so many writes."""
    clock = ManualClock()
    st = backends("rocksdb", clock=clock).state("s", ttl_ms=50)
    for i in range(10_000):
        st.put(i % 128, (i,), i)
        clock.advance(1)
    assert 50 <= len(st) <= 50 + 256  # at most the writes since the last sweep besides the live ones
    assert len(list(st.items())) == 49  # read at 10 000 ms: the writes of 9951..9999 are live


def test_rocksdb_checkpoints_are_incremental(backends, tmp_path: Path) -> None:
    backend = backends("rocksdb")
    st = backend.state("s")
    for i in range(50_000):
        st.put(i % MAX_PARALLELISM, (i,), f"value-{i}" * 10)
    first = checkpoint(backend, tmp_path / "chk", 1)
    for i in range(50_000, 50_100):
        st.put(i % MAX_PARALLELISM, (i,), f"value-{i}" * 10)
    second = checkpoint(backend, tmp_path / "chk", 2)

    assert first["format"] == "rocksdb" and first["key_groups"] == (0, 128)
    assert set(first["shared_files"]) <= set(second["shared_files"])  # the second reuses the first's SSTs
    assert second["bytes_copied"] * 20 < first["bytes_copied"], (first["bytes_copied"], second["bytes_copied"])

    restored = backends("rocksdb")
    restored.restore([second])
    assert len(restored.state("s")) == 50_100
    assert restored.state("s").get(50_099 % MAX_PARALLELISM, (50_099,)) == "value-50099" * 10
    older = backends("rocksdb")
    older.restore([first])  # the first checkpoint still restores after the second shared its files
    assert len(older.state("s")) == 50_000
    assert older.state("s").get(50_099 % MAX_PARALLELISM, (50_099,)) is None


def _rss_mb() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 2**20


@pytest.mark.slow
def test_rocksdb_holds_a_large_state(backends) -> None:
    backend = backends("rocksdb")
    st = backend.state("big")
    n = 300_000
    rng = random.Random(11)
    before = _rss_mb()
    for i in range(n):
        st.put(i % MAX_PARALLELISM, (i, "k"), rng.randbytes(1000))  # incompressible: ~300 MB on disk
    # the entries live on disk, not in Python: memory grows by RocksDB's buffers, not by the data
    assert _rss_mb() - before < 200
    assert len(st) == n
    rng = random.Random(11)
    values = [rng.randbytes(1000) for _ in range(3)]
    for i in range(3):
        assert st.get(i % MAX_PARALLELISM, (i, "k")) == values[i]
    for i in range(0, n, 3):
        st.delete(i % MAX_PARALLELISM, (i, "k"))
    assert len(st) == n - n // 3
    assert sum(1 for _ in st.items()) == n - n // 3


def test_rocksdb_checkpoint_into_hashmap_needs_a_savepoint(backends, tmp_path: Path) -> None:
    old = backends("rocksdb")
    old.state("s").put(1, (1,), 1)
    handle = checkpoint(old, tmp_path / "chk", 1)
    with pytest.raises(SnapshotFormatError, match="savepoint"):
        backends("hashmap").restore([handle])
    with pytest.raises(SnapshotFormatError, match="savepoint"):
        backends("rocksdb").restore([{"format": "mystery"}])


def test_rocksdb_close_deletes_local_files(tmp_path: Path) -> None:
    backend = create_backend("rocksdb", range(MAX_PARALLELISM), tmp_path / "local")
    backend.state("s").put(1, (1,), 1)
    assert any((tmp_path / "local").iterdir())
    backend.close()
    assert not any((tmp_path / "local").iterdir())


def test_a_jobs_rocksdb_works_in_state_backend_rocksdb_localdir(tmp_path: Path) -> None:
    """Flink's state.backend.rocksdb.localdir: the job's dbs are made there (and removed at its end)."""
    from sqlstream.frontend.session import Session

    localdir = tmp_path / "rocksdb-local"
    result = Session().execute_script(f"""
        SET 'state.backend.type' = 'rocksdb';
        SET 'state.backend.rocksdb.localdir' = '{localdir}';
        CREATE TABLE gen (k BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '100',
                                          'fields.k.min' = '0', 'fields.k.max' = '4');
        SELECT k, COUNT(*) AS n FROM gen GROUP BY k;
    """)[-1]
    assert result.table is not None and result.table.num_rows > 0
    assert localdir.is_dir() and not any(localdir.iterdir())
