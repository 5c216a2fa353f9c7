"""Helpers the vectorized operators share that keep their rows as RocksDB entries (the join's and the
Top-N's, runtime/operators/join_rocksdb.py and rank_rocksdb.py).

- ``pack`` / ``unpack``: several encoded rows (runtime.state.row_codec) in one entry, each behind
  its 4-byte length, built and taken apart for a whole batch of entries at once: one entry per
  key read or written where one per row would cost a RocksDB call each (1 to 3 us in rocksdict);
- ``runs``: a batch's distinct encoded keys in key order (RocksDB's fastest order for multi-gets
  and writes), with each row's run;
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
    order = np.lexsort((at, owner))  # by value, then position in it
    owner, start, length, at = owner[order], start[order], length[order], at[order]
    ends = np.cumsum(length)
    gather = np.repeat(start - (ends - length), length) + np.arange(int(ends[-1]))
    out_offsets = np.r_[0, ends].astype(np.int32)
    rows = pa.Array.from_buffers(pa.binary(), len(owner), [None, pa.py_buffer(out_offsets), pa.py_buffer(data[gather])])
    return owner, at, rows


def runs(encoded: pa.BinaryArray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order sorting ``encoded`` stably, start of each run of equal keys in that order, run of
    each sorted row): the batch's distinct keys in key order."""
    order = pc.sort_indices(encoded).to_numpy().astype(np.int64)
    ordered = encoded.take(pa.array(order))
    n = len(order)
    change = np.ones(n, bool)
    if n > 1:
        change[1:] = pc.not_equal(ordered.slice(1), ordered.slice(0, n - 1)).to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(change)
    return order, starts, np.cumsum(change) - 1


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
