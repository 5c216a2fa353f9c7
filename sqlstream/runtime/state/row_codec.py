"""Rows of Arrow columns as bytes and back, a batch at a time, for state kept in a key-value store.

RocksDB stores bytes per key, while operators work on Arrow columns: building each row's bytes
in Python (the state codec, msgpack per value) costs microseconds per row and dominated the
per-key forms on rocksdb.  Here a batch's rows are encoded column-wise: every fixed-width part
of a row (an optional 2-byte big-endian key group, then per column a validity byte and either
the value's bytes or, for strings and binaries, their length) is one record of a packed numpy
structured dtype, filled one column at a time; the string bytes follow the record, appended by
Arrow's binary_join_element_wise.  Decoding gathers the records back with one fancy index (or a
plain view when every row has the same length) and the string bytes with another.

The encoding is deterministic, so equal keys give equal bytes and a RocksDB lookup by key works;
the key group comes first so each key group is one contiguous range (rescaling scans ranges).
Floating-point -0.0 is written as 0.0 when ``keys``: they are one key (as hashing.hash_array
has it).  NULL values are all-zero bytes behind a 0 validity byte.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

KEY_GROUP_FIELD = "kg"


def fixed_storage(t: pa.DataType) -> tuple[np.dtype, pa.DataType] | None:
    """(numpy dtype, Arrow type of the same layout) of a fixed-width type; None for strings and
    binaries (stored as length + bytes)."""
    if pa.types.is_integer(t) or pa.types.is_boolean(t) or (pa.types.is_floating(t) and t != pa.float16()):
        return np.dtype(t.to_pandas_dtype()), t
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return np.dtype(np.int32), pa.int32()
    if pa.types.is_timestamp(t) or pa.types.is_date64(t) or pa.types.is_time64(t) or pa.types.is_duration(t):
        return np.dtype(np.int64), pa.int64()
    return None


def _variable(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t)


def supported(t: pa.DataType) -> bool:
    """Whether RowCodec encodes values of type ``t``."""
    return fixed_storage(t) is not None or _variable(t)


def _plain(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


class RowCodec:
    """Encodes and decodes rows of columns of ``types`` (each ``supported``)."""

    def __init__(self, types: list[pa.DataType], key_group: bool = False, keys: bool = False) -> None:
        self.types = types
        self.key_group = key_group
        self.keys = keys
        fields: list[tuple[str, object]] = [(KEY_GROUP_FIELD, ">u2")] if key_group else []
        self.variable: list[int] = []
        for j, t in enumerate(types):
            if not supported(t):
                raise TypeError(f"no row encoding for type {t}")
            fields.append((f"v{j}", np.uint8))
            storage = fixed_storage(t)
            if storage is None:
                fields.append((f"l{j}", "<i4"))
                self.variable.append(j)
            else:
                fields.append((f"x{j}", storage[0].newbyteorder("<") if storage[0].itemsize > 1 else storage[0]))
        self.dtype = np.dtype(fields)  # packed: no padding between fields

    def encode(self, columns: list[pa.Array], key_groups: np.ndarray | None = None) -> pa.BinaryArray:
        """Each row's bytes (``key_groups``: the rows' key groups, when the codec has them)."""
        n = len(columns[0]) if columns else len(key_groups) if key_groups is not None else 0
        rec = np.zeros(n, self.dtype)
        if self.key_group:
            assert key_groups is not None
            rec[KEY_GROUP_FIELD] = key_groups
        tails = []
        for j, (col, t) in enumerate(zip(columns, self.types, strict=True)):
            col = _plain(col)
            if col.null_count:
                rec[f"v{j}"] = col.is_valid().to_numpy(zero_copy_only=False)
            else:
                rec[f"v{j}"] = 1
            storage = fixed_storage(t)
            if storage is None:
                data = pc.fill_null(col, "" if pa.types.is_string(t) or pa.types.is_large_string(t) else b"")
                data = data.cast(pa.binary())
                rec[f"l{j}"] = pc.binary_length(data).to_numpy(zero_copy_only=False)
                tails.append(data)
                continue
            dtype, physical = storage
            if physical != t:
                col = col.view(physical)
            values = pc.fill_null(col, False if pa.types.is_boolean(t) else 0).to_numpy(zero_copy_only=False)
            if self.keys and dtype.kind == "f":
                values = np.where(values == 0, 0, values)  # -0.0 is the key 0.0
            rec[f"x{j}"] = values
        width = self.dtype.itemsize
        # as a binary array (not fixed_size_binary, whose to_pylist is 50x slower)
        offsets = pa.py_buffer(np.arange(0, (n + 1) * width, width, dtype=np.int32))
        fixed = pa.Array.from_buffers(pa.binary(), n, [None, offsets, pa.py_buffer(rec)])
        return pc.binary_join_element_wise(fixed, *tails, b"") if tails else fixed

    def decode(self, rows: pa.Array) -> tuple[np.ndarray | None, list[pa.Array]]:
        """(key groups or None, columns) of rows encoded by ``encode`` (a binary array, no NULLs)."""
        n = len(rows)
        width = self.dtype.itemsize
        offsets = np.frombuffer(rows.buffers()[1], np.int32, n + 1, rows.offset * 4)
        buffer = rows.buffers()[2]
        data = np.frombuffer(buffer, np.uint8) if buffer is not None else np.zeros(0, np.uint8)
        starts = offsets[:-1]
        if not self.variable and n:
            rec = data[starts[0]: starts[0] + n * width].view(self.dtype)
        else:
            rec = data[starts[:, None] + np.arange(width)].reshape(-1).view(self.dtype)
        kgs = rec[KEY_GROUP_FIELD].astype(np.int64) if self.key_group else None
        columns = []
        position = starts.astype(np.int64) + width
        for j, t in enumerate(self.types):
            valid = rec[f"v{j}"] != 0
            mask = None if valid.all() else ~valid
            storage = fixed_storage(t)
            if storage is None:
                lengths = rec[f"l{j}"].astype(np.int64)
                ends = np.cumsum(lengths)
                out_offsets = np.concatenate([[0], ends]).astype(np.int32)
                base = pa.string() if pa.types.is_string(t) or pa.types.is_large_string(t) else pa.binary()
                bitmap = None if mask is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
                values = _gather_bytes(data, position, lengths, ends)
                arr = pa.Array.from_buffers(base, n, [bitmap, pa.py_buffer(out_offsets), pa.py_buffer(values)])
                columns.append(arr if base == t else arr.cast(t))
                position = position + lengths
                continue
            dtype, physical = storage
            values = np.ascontiguousarray(rec[f"x{j}"]).astype(dtype, copy=False)
            arr = pa.array(values, physical, mask=mask)
            columns.append(arr.view(t) if physical != t else arr)
        return kgs, columns

    def leading_lengths(self, rows: pa.Array) -> np.ndarray:
        """The length of the encoded row each of ``rows`` starts with (more bytes may follow it:
        a RocksDB key made of a row's key and a suffix).  An encoded row is never a prefix of
        another (equal fixed parts give equal string lengths), so the length is the row's."""
        n = len(rows)
        width = self.dtype.itemsize
        if not self.variable:
            return np.full(n, width, np.int64)
        starts = np.frombuffer(rows.buffers()[1], np.int32, n + 1, rows.offset * 4)[:-1]
        data = np.frombuffer(rows.buffers()[2], np.uint8)
        rec = data[starts[:, None] + np.arange(width)].reshape(-1).view(self.dtype)
        return width + sum(rec[f"l{j}"].astype(np.int64) for j in self.variable)


def split_at(rows: pa.Array, at: np.ndarray) -> tuple[pa.BinaryArray, pa.BinaryArray]:
    """(the first ``at[i]`` bytes of each row, the rest) of a binary array without NULLs."""
    n = len(rows)
    offsets = np.frombuffer(rows.buffers()[1], np.int32, n + 1, rows.offset * 4).astype(np.int64)
    buffer = rows.buffers()[2]
    data = np.frombuffer(buffer, np.uint8) if buffer is not None else np.zeros(0, np.uint8)
    starts, lengths = offsets[:-1], np.diff(offsets)
    out = []
    for first, size in ((starts, at), (starts + at, lengths - at)):
        ends = np.cumsum(size)
        values = _gather_bytes(data, first, size, ends)
        bounds = np.concatenate([[0], ends]).astype(np.int32)
        out.append(pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(bounds), pa.py_buffer(values)]))
    return out[0], out[1]


# bytes gathered per step: the gather index takes 4 or 8 bytes per byte moved, so long strings are
# moved in steps of this many bytes (a chunk of 65 k 1 kB strings would otherwise index 530 MB at
# once; at 4 MB steps a savepoint's 8 MB chunks still took ~100 MB of transient indexes)
GATHER_STEP = 1 << 20


def _gather_bytes(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The bytes data[starts[i]: starts[i] + lengths[i]] of every row i, one after the other
    (``ends``: the cumulative lengths), gathered by fancy indexes a step of rows at a time."""
    total = int(ends[-1]) if len(ends) else 0
    out = np.empty(total, np.uint8)
    out_starts = ends - lengths
    # the first row of each step: rows are whole in one step, steps of about GATHER_STEP bytes
    cuts = np.unique(np.searchsorted(ends, np.arange(GATHER_STEP, total, GATHER_STEP), side="right"))
    index_type = np.int32 if len(data) < 2**31 else np.int64
    for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), len(ends)], strict=True):
        if a >= b:
            continue
        low, high = int(out_starts[a]), int(ends[b - 1])
        index = np.repeat((starts[a:b] - out_starts[a:b]).astype(index_type), lengths[a:b])
        index += np.arange(low, high, dtype=index_type)
        out[low:high] = data[index]
    return out
