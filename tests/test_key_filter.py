"""The key filter of the RocksDB rows forms (sqlstream/runtime/state/key_filter.py): it must never
answer "absent" for a hash it was given (a stored key would be taken for a new one), keep false
positives rare while it has room, and stay within its memory cap however many keys come."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from sqlstream.runtime.clock import ManualClock
from sqlstream.runtime.hashing import hash_columns
from sqlstream.runtime.state import create_backend
from sqlstream.runtime.state.key_filter import HashFilter, StoredKeys
from sqlstream.runtime.state.rocksdb import RocksDBState


def _hashes(start: int, n: int, key_groups: int = 128, mine: range = range(128)) -> np.ndarray:
    """Key hashes of the keys start.. as hash_columns gives them, of the key groups ``mine`` only
    (one subtask's: their low bits are far from uniform)."""
    h = hash_columns([pa.array(np.arange(start, start + n, dtype=np.int64))])
    return h[np.isin(h % np.uint64(key_groups), np.array(list(mine), np.uint64))]


def test_every_added_hash_is_found_across_growth_and_false_positives_stay_rare() -> None:
    f = HashFilter(64 << 20)
    added = _hashes(0, 600_000, mine=range(0, 64))
    for start in range(0, len(added), 10_000):
        f.add(added[start: start + 10_000])
    assert len(f.parts) > 1  # grew past its first part
    assert f.may_contain(added).all()
    fresh = _hashes(1_000_000, 300_000, mine=range(0, 64))
    assert f.may_contain(fresh).mean() < 0.05


def test_a_capped_filter_keeps_its_memory_and_still_finds_every_hash() -> None:
    cap = 256 << 10
    f = HashFilter(cap)
    added = _hashes(0, 1_000_000)
    for start in range(0, len(added), 50_000):
        f.add(added[start: start + 50_000])
    assert f.nbytes <= cap
    assert f.may_contain(added).all()
    # full beyond its design: more false positives, never a false negative
    assert 0.05 < f.may_contain(_hashes(2_000_000, 100_000)).mean() < 1


def test_an_empty_filter_finds_nothing() -> None:
    assert not HashFilter(1 << 20).may_contain(_hashes(0, 1000)).any()


def test_stored_keys_follow_writes_and_rebuild_after_entries_written_around_them(tmp_path: Path) -> None:
    """StoredKeys (the rocksdb GROUP BY's and join's): keys written through it are found at once;
    entries that arrive around it (here put_new_raw, as a restore copies them) make it answer
    "maybe" for every key while it scans the state, a chunk per probe, and then know them."""
    backend = create_backend("rocksdb", range(128), tmp_path / "db", ManualClock())
    state = backend.state("rows")
    assert isinstance(state, RocksDBState)

    def key(i: int) -> bytes:
        return i.to_bytes(8, "big")

    def hashes_of(raw: pa.BinaryArray) -> np.ndarray:
        return hash_columns([pa.array([int.from_bytes(k, "big") for k in raw.to_pylist()], pa.int64())])

    def h(ids: range) -> np.ndarray:
        return hash_columns([pa.array(list(ids), pa.int64())])

    keys = StoredKeys(state, 1 << 20, 100, hashes_of)
    assert not keys.may_contain(h(range(1000))).any()
    before = len(state)
    backend.write_rows("rows", [key(i) for i in range(500)], [b""] * 500, [], 500)
    keys.wrote(h(range(500)), before)
    assert keys.in_step and keys.may_contain(h(range(500))).all()
    assert keys.may_contain(h(range(10_000, 20_000))).mean() < 0.05
    before = len(state)
    backend.write_rows("rows", [], [], [key(i) for i in range(100)], 0)
    keys.deleted(before)
    assert keys.in_step and keys.may_contain(h(range(100))).all()  # a Bloom filter keeps deleted keys
    state.put_new_raw([key(i) for i in range(1000, 1250)], [b""] * 250)  # around the filter
    assert not keys.in_step
    probes = 0
    while True:
        maybe = keys.may_contain(h(range(2000, 2100)))
        probes += 1
        if keys.rebuild_from is None:
            break
        assert maybe.all()  # still scanning: every key may be stored
    assert probes == 7  # 650 keys scanned 100 a probe
    assert keys.may_contain(h(range(100, 500))).all() and keys.may_contain(h(range(1000, 1250))).all()
    assert keys.may_contain(h(range(10_000, 20_000))).mean() < 0.05
    backend.close()
