"""hashing._string_hash: its fast forms (strings of one length as a byte matrix, the position
weights from a table) give exactly the hashes of the plain per-byte formula, which key groups,
and so checkpoints and savepoints, depend on."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from sqlstream.runtime import hashing
from sqlstream.runtime.hashing import _GOLDEN, _mix, _string_hash, hash_array, hash_columns


def _reference(values: list[str | None]) -> list[int]:
    """The hash of each string, byte by byte in Python (a NULL's bytes are none)."""
    m = 1 << 64
    out = []
    for v in values:
        data = b"" if v is None else v.encode()
        with np.errstate(over="ignore"):
            w = _mix(np.arange(len(data), dtype=np.uint64) + _GOLDEN) | np.uint64(1)
        h = len(data) * int(_GOLDEN) + sum(b * int(x) for b, x in zip(data, w, strict=True))
        out.append(h % m)
    return out


CASES = [
    ["2020-01-01", "2020-01-02", "2021-12-31"],  # one length
    ["a", "bb", "", "ccc", "dddd"],  # several, an empty one
    ["", "", ""],  # all empty
    ["ab", None, "cd"],  # a NULL among strings of one length
    ["élan", "übel", "x"],  # multi-byte characters
    ["same"] * 5,
    ["x" * 70, "y" * 70],  # longer than the first weights table
    ["z" * 300, "", "w"],
]


def test_string_hash_matches_the_per_byte_formula() -> None:
    for values in CASES:
        for t in (pa.string(), pa.large_string()):
            arr = pa.array(values, t)
            assert _string_hash(arr).tolist() == _reference(values), values
            # a slice starts inside the buffers
            assert _string_hash(arr.slice(1)).tolist() == _reference(values[1:]), values


def test_string_hash_of_random_strings() -> None:
    rng = np.random.default_rng(7)
    alphabet = np.array(list("abcdefghijklmnopqrstuvwxyz0123456789-/ éß"))
    for width in (None, 1, 8, 10, 23):
        lengths = rng.integers(0, 40, 300) if width is None else np.full(300, width)
        values = ["".join(rng.choice(alphabet, k)) for k in lengths]
        assert _string_hash(pa.array(values)).tolist() == _reference(values)


def test_a_longer_string_than_the_cached_table_is_hashed_the_same() -> None:
    values = ["q" * (hashing._WEIGHTS_CACHED + 5), "r"]
    assert _string_hash(pa.array(values)).tolist() == _reference(values)
    assert len(hashing._WEIGHTS) <= hashing._WEIGHTS_CACHED


def test_key_hashes_of_strings_and_their_nulls() -> None:
    # hash_array mixes the string hashes and puts a NULL at its own hash, whatever its bytes
    values = ["2020-01-01", None, "2020-01-02"]
    h = hash_array(pa.array(values))
    with np.errstate(over="ignore"):
        expected = _mix(np.array(_reference(values), np.uint64) + _GOLDEN)
    assert h[0] == expected[0] and h[2] == expected[2] and h[1] == hashing._NULL_HASH
    pair = hash_columns([pa.array([1, 2, 3], pa.int64()), pa.array(values)])
    assert len(set(pair.tolist())) == 3
