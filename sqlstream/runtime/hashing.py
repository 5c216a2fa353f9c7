"""Vectorized, process-independent hashing of key columns into key groups.

Keyed exchanges route a row to subtask ``key_group * parallelism //
max_parallelism`` (Flink's formula), so state can later be redistributed by
key group when the parallelism changes.  Hashes must be equal across
processes and runs (no Python ``hash``), and computed per column with numpy.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

DEFAULT_MAX_PARALLELISM = 128
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_NULL_HASH = np.uint64(0x5BD1E9955BD1E995)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer: spreads every input bit over the output."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        return x ^ (x >> np.uint64(31))


# position weights of _string_hash (odd splitmix64 values of a byte's position in its string),
# computed once and grown as longer strings come, up to _WEIGHTS_CACHED positions (a longer string
# computes its own)
_WEIGHTS = np.zeros(0, np.uint64)
_WEIGHTS_CACHED = 1 << 16


def _weights(length: int) -> np.ndarray:
    """The weights of byte positions 0 .. length-1 in a string."""
    global _WEIGHTS
    table = _WEIGHTS
    if len(table) < length:
        size = max(length, 2 * len(table), 64)
        with np.errstate(over="ignore"):
            table = _mix(np.arange(size, dtype=np.uint64) + _GOLDEN) | np.uint64(1)
        if size <= _WEIGHTS_CACHED:
            _WEIGHTS = table  # one assignment: a thread still reading the old table is fine
    return table[:length]


def _string_hash(arr: pa.Array) -> np.ndarray:
    """Per-string polynomial hash over the UTF-8 bytes: ``length * GOLDEN + sum(byte_i * w_i)``
    (mod 2^64), ``w_i`` the odd weight of position i.  Strings of one length (dates, codes) are
    rows of a byte matrix summed at once; others are summed with one reduceat over the data."""
    arr = arr.cast(pa.large_string()) if not pa.types.is_large_string(arr.type) else arr
    n = len(arr)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset: arr.offset + n + 1]
    data_buf = arr.buffers()[2]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    start, end = offsets[0], offsets[-1]
    data = data[start:end]
    lengths = np.diff(offsets)
    out = lengths.astype(np.uint64) * _GOLDEN
    if not len(data):
        return out
    width = int(lengths[0])
    if width * n == len(data) and (lengths == width).all():
        # every string `width` bytes: a (rows, width) matrix, weighted and summed per row
        with np.errstate(over="ignore"):
            out += data.reshape(n, width).astype(np.uint64) @ _weights(width)
        return out
    pos = np.arange(len(data), dtype=np.int64) - np.repeat(offsets[:-1] - start, lengths)
    with np.errstate(over="ignore"):
        weighted = data * _weights(int(lengths.max()))[pos]
    nonempty = lengths > 0
    starts = (offsets[:-1] - start)[nonempty]
    sums = np.add.reduceat(weighted, starts)
    with np.errstate(over="ignore"):
        out[nonempty] += sums
    return out


def hash_array(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        h = _string_hash(arr)
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
        h = _string_hash(arr.view(pa.large_string()) if pa.types.is_large_binary(t) else arr.cast(pa.large_binary()).view(pa.large_string()))
    elif pa.types.is_boolean(t):
        h = pc.fill_null(arr, False).cast(pa.uint64()).to_numpy(zero_copy_only=False)
    elif pa.types.is_floating(t):
        vals = pc.fill_null(arr.cast(pa.float64()), 0.0).to_numpy(zero_copy_only=False)
        vals = np.where(vals == 0.0, 0.0, vals)  # -0.0 and 0.0 are the same key
        h = vals.view(np.uint64)
    elif pa.types.is_decimal(t):
        h = _string_hash(arr.cast(pa.string()))
    else:
        # integers and temporal values: their int64 value (32-bit dates and times have no cast
        # to int64 of their own: they are read as the int32 they are stored as)
        if pa.types.is_date32(t) or pa.types.is_time32(t):
            arr = arr.view(pa.int32())
        h = pc.fill_null(arr.cast(pa.int64()), 0).to_numpy(zero_copy_only=False).view(np.uint64)
    with np.errstate(over="ignore"):
        h = _mix(h.astype(np.uint64, copy=False) + _GOLDEN)
    if arr.null_count:
        h = np.where(arr.is_null().to_numpy(zero_copy_only=False), _NULL_HASH, h)
    return h


def hash_columns(columns: list[pa.Array]) -> np.ndarray:
    """One 64-bit hash per row over the given key columns."""
    if not columns:
        raise ValueError("hash_columns needs at least one column")
    h = hash_array(columns[0])
    for c in columns[1:]:
        with np.errstate(over="ignore"):
            h = _mix(h * np.uint64(31) + hash_array(c))
    return h


def key_groups(columns: list[pa.Array], max_parallelism: int = DEFAULT_MAX_PARALLELISM) -> np.ndarray:
    """The key group (0 .. max_parallelism-1) of each row; rows of an empty key list go to group 0."""
    if not columns:
        return np.zeros(0, dtype=np.int64)
    return key_groups_of(hash_columns(columns), max_parallelism)


def key_groups_of(hashes: np.ndarray, max_parallelism: int, dtype: type = np.int64) -> np.ndarray:
    """The key group of each 64-bit key hash (hash_columns): int64 to compute with, int16 where
    snapshot tables store it."""
    return (hashes % np.uint64(max_parallelism)).astype(dtype)


def subtask_for_key_groups(groups: np.ndarray, parallelism: int, max_parallelism: int = DEFAULT_MAX_PARALLELISM) -> np.ndarray:
    return groups * parallelism // max_parallelism


def key_group_range(subtask: int, parallelism: int, max_parallelism: int = DEFAULT_MAX_PARALLELISM) -> range:
    """The key groups a subtask owns: the inverse of subtask_for_key_groups."""
    start = (subtask * max_parallelism + parallelism - 1) // parallelism
    end = ((subtask + 1) * max_parallelism + parallelism - 1) // parallelism
    return range(start, end)
