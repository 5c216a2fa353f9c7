"""Helpers the vectorized operators share that keep their rows as RocksDB entries (the join's and the
Top-N's, runtime/operators/join_rocksdb.py and rank_rocksdb.py).

- ``pack`` / ``unpack``: several encoded rows (runtime.state.row_codec) in one entry, each behind
  its 4-byte length, built and taken apart for a whole batch of entries at once: one entry per
  key read or written where one per row would cost a RocksDB call each (1 to 3 us in rocksdict);
- ``runs``: a batch's distinct encoded keys about in key order (RocksDB's fastest), with each
  row's group;
- ``frozen_tables``: a savepoint's table of rows from a frozen view of RocksDB's files, decoded a
  chunk at a time when the savepoint is written (the rows are never whole in memory), as the
  savepoint view (state.base.RowsSavepointView) asks for;
- ``sweep``: one scan of a state deleting the entries a TTL expired, a WriteBatch per chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.runtime.state.rocksdb import RocksDBState, RocksDBStateBackend

LENGTH_BYTES = 4


def binary(values: list[bytes | None]) -> pa.BinaryArray:
    """rocksdict's bytes (None: absent) as a binary array."""
    return pa.array(values, pa.binary())


def buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, data bytes) of a binary array."""
    offsets = np.frombuffer(arr.buffers()[1], np.int32, len(arr) + 1, arr.offset * 4).astype(np.int64)
    data = arr.buffers()[2]
    return offsets, (np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8))


def pack(rows: pa.BinaryArray, firsts: np.ndarray) -> pa.BinaryArray:
    """One value per entry: the encoded ``rows`` (sorted by entry; ``firsts``: each entry's first
    row), each behind its 4-byte length, the values cut zero-copy out of one buffer of all of them."""
    lengths = pc.binary_length(rows).to_numpy(zero_copy_only=False).astype("<u4")
    offsets = np.arange(0, (len(rows) + 1) * LENGTH_BYTES, LENGTH_BYTES, dtype=np.int32)
    prefixes = pa.Array.from_buffers(pa.binary(), len(rows), [None, pa.py_buffer(offsets), pa.py_buffer(lengths)])
    framed = pc.binary_join_element_wise(prefixes, rows, b"")
    frame_offsets, _ = buffers(framed)
    bounds = frame_offsets[np.r_[firsts, len(rows)]].astype(np.int32)
    return pa.Array.from_buffers(pa.binary(), len(firsts), [None, pa.py_buffer(bounds), framed.buffers()[2]])


def unpack(values: pa.BinaryArray) -> tuple[np.ndarray, np.ndarray, pa.BinaryArray]:
    """(value each row came from, its position in that value, the rows) of values made by ``pack``
    (no NULLs), each value's rows in order: one vectorized step per row position, over every value
    at once."""
    offsets, data = buffers(values)
    position, end = offsets[:-1].copy(), offsets[1:]
    owners, starts, lengths, steps = [], [], [], []
    active = np.flatnonzero(position < end)
    step = 0
    while len(active):
        at = position[active]
        length = data[at[:, None] + np.arange(LENGTH_BYTES)].reshape(-1).view("<u4").astype(np.int64)
        owners.append(active)
        starts.append(at + LENGTH_BYTES)
        lengths.append(length)
        steps.append(np.full(len(active), step))
        position[active] = at + LENGTH_BYTES + length
        active = active[position[active] < end[active]]
        step += 1
    if not owners:
        empty = np.zeros(0, np.int64)
        return empty, empty, binary([])
    owner, start, length, at = (np.concatenate(owners), np.concatenate(starts), np.concatenate(lengths),
                                np.concatenate(steps))
    order = np.argsort(start)  # by value, then position in it: the order of the bytes
    owner, start, length, at = owner[order], start[order], length[order], at[order]
    # every row and the gap behind it (the next row's length) as elements of one binary array over
    # the values' bytes: taking the rows copies each with one memcpy (a byte-wise numpy gather
    # costed 8 bytes of index per byte)
    bounds = np.empty(2 * len(start), np.int32)
    bounds[0::2], bounds[1::2] = start, start + length
    spans = pa.Array.from_buffers(pa.binary(), len(bounds) - 1, [None, pa.py_buffer(bounds), values.buffers()[2]])
    return owner, at, spans.take(pa.array(np.arange(0, len(bounds) - 1, 2)))


def runs(encoded: pa.BinaryArray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order grouping ``encoded``'s equal keys, each group's rows in their order; start of each
    group in that order; group of each ordered row): the batch's distinct keys, found by hashing,
    ordered by their first 8 bytes (the key group first).  RocksDB reads and writes keys about in
    their order at half the CPU of a random order (measured: a 1 M-key join's multi-gets and
    WriteBatches); a numeric sort of 8 bytes costs a fraction of sorting the whole byte strings.
    The distinct keys are ranked by those 8 bytes, then the rows sorted by one number unique to
    each (rank, row position): a plain numpy sort, a fifth of a two-key lexsort's time."""
    n = len(encoded)
    dictionary = pc.dictionary_encode(encoded)
    codes = dictionary.indices.to_numpy().astype(np.int64)
    distinct = dictionary.dictionary
    m = len(distinct)
    rank = np.empty(m, np.int64)
    rank[np.argsort(_head8(distinct))] = np.arange(m)
    bits = max(n, 1).bit_length()
    order = np.argsort((rank[codes] << bits) | np.arange(n))
    grouped = codes[order]
    change = np.ones(n, bool)
    change[1:] = grouped[1:] != grouped[:-1]
    return order, np.flatnonzero(change), np.cumsum(change) - 1


def _head8(keys: pa.BinaryArray) -> np.ndarray:
    """Each key's first 8 bytes (zeros past a shorter key's end: the shortest key's length is
    taken of all) as a big-endian number, so numeric order is about byte order."""
    n = len(keys)
    offsets, data = buffers(keys)
    lengths = np.diff(offsets)
    width = min(8, int(lengths.min())) if n else 0
    head = np.zeros((n, 8), np.uint8)
    if width and (lengths == lengths[0]).all():  # keys of one length (fixed-width columns): a strided view
        head[:, :width] = data[offsets[0]: offsets[0] + n * lengths[0]].reshape(n, lengths[0])[:, :width]
    elif width:
        head[:, :width] = data[offsets[:-1, None] + np.arange(width)]
    return head.view(">u8").reshape(-1)


def frozen_tables(backend: RocksDBStateBackend, names: list[str], chunk: int,
                  table_of: Callable[[str, pa.BinaryArray], pa.Table | None]) -> Callable[[], Iterator[pa.Table]]:
    """The tables ``table_of`` makes of the values of states ``names`` as they are now (a frozen view
    of RocksDB's files each, taken here: processing goes on meanwhile), scanned state by state in
    key order a ``chunk`` of entries at a time when the savepoint is written."""
    views = [(name, backend.frozen_view()) for name in names]

    def tables() -> Iterator[pa.Table]:
        for name, view in views:
            for _, values in backend.scan_view(view, name, chunk):
                table = table_of(name, binary(values))
                if table is not None:
                    yield table

    return tables


def sweep(backend: RocksDBStateBackend, state: RocksDBState, chunk: int,
          expired: Callable[[pa.BinaryArray], np.ndarray]) -> None:
    """Delete the entries of ``state`` whose values ``expired`` marks (one scan; a WriteBatch per
    chunk, so the keys to delete are never all in memory)."""
    for keys, values in state.scan(chunk):
        dead = np.flatnonzero(expired(binary(values)))
        if len(dead):
            backend.write_rows(state.name, [], [], [keys[i] for i in dead], 0)
