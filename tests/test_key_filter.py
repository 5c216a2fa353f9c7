"""The key filter of the RocksDB rows forms (sqlstream/runtime/state/key_filter.py): it must never
answer "absent" for a hash it was given (a stored key would be taken for a new one), keep false
positives rare while it has room, and stay within its memory cap however many keys come."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from sqlstream.runtime.hashing import hash_columns
from sqlstream.runtime.state.key_filter import HashFilter


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
