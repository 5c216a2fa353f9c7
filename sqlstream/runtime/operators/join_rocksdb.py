"""The vectorized INNER join of append-only inputs with its rows in RocksDB.

The columnar form (join_columnar.py) keeps both sides' rows as Arrow tables
in memory; the per-key form on rocksdb takes a Python step per row and key
(msgpack, a get and a put of the key's whole row list), 20x slower.  Here
each side's rows are RocksDB entries read and written a batch at a time:

- rows: ``(key group, join key, seq) -> row`` in the side's column family,
  the key group and join key encoded column-wise by runtime.state.row_codec
  (equal keys, equal bytes; the encoding is prefix-free, and the key group
  leads so each key group is one contiguous range as rescaling expects), the
  seq an 8-byte big-endian number counting the key's rows; the row is every
  column of the input (and with a state TTL its write time), encoded the
  same way;
- heads: ``(key group, join key) -> (base, next, written)``: the key's live
  rows are seqs ``base .. next-1`` and the last of them was written at
  ``written``.  A probe is ONE multi-get of the other side's heads for the
  batch's distinct keys, then ONE multi-get of the rows they name (their
  keys built with Arrow, not per row in Python); storing a batch is one
  multi-get of its own heads and one WriteBatch each for rows and heads.

Rows are never rewritten (a key's seqs only grow), so a stored row is
written once and the entry counts stay exact without reading rows back.
The pairs, their residual condition and the output columns are the columnar
form's (join_columnar.joined_pairs).  Output order: each incoming row in its
order with the stored rows of its key in the order they arrived (Flink's
order: a record's matches as it is processed); the columnar form orders by
stored row first, which only reorders rows of one append-only batch.

State TTL: a row (a head) read after its TTL counts as absent; a key whose
head expired starts again at ``base = next``; every half TTL one scan of
each side drops the expired rows and heads (a head outlives none of its
rows, so both go in the same sweep).  Rows no later row can match because
of a watermark (horizons) stay until their TTL, as in the per-key form.

Snapshots: both column families are keyed states of the backend's db, so its
incremental checkpoints carry them and a rescaled restore copies the
key-group ranges it owns.  Savepoints must be readable by every backend: the
rows are written by a savepoint-only ColumnarState as the table the
columnar form writes (the input's columns, ``$h``, ``$kg``, ``$t``), which
the hashmap form loads as it is and this form stores back (each key's rows
in table order), and the rocksdb backend leaves both column families out of
its canonical file.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.evaluator import Predicate
from sqlstream.core.expressions import Expr
from sqlstream.runtime.clock import SYSTEM_CLOCK, Clock
from sqlstream.runtime.hashing import hash_columns
from sqlstream.runtime.operators.join_columnar import (
    HASH,
    KEY_GROUP,
    TIME,
    joined_pairs,
    keyed_rows,
)
from sqlstream.runtime.state.base import ColumnarState
from sqlstream.runtime.state.rocksdb import RocksDBState, RocksDBStateBackend
from sqlstream.runtime.state.row_codec import RowCodec

# the keyed states (column families) of each side (left, right)
ROWS_STATES = ("join_rows_left", "join_rows_right")
HEADS_STATES = ("join_heads_left", "join_heads_right")
SEQ_BYTES = 8
# entries read from RocksDB (savepoints, TTL sweeps) or stored into it at a time: bounds memory
CHUNK = 65536


def _binary(values: list[bytes | None]) -> pa.BinaryArray:
    return pa.array(values, pa.binary())


def _seq_bytes(seqs: np.ndarray) -> pa.BinaryArray:
    """Each seq as 8 big-endian bytes (byte order is numeric order), as a binary array."""
    raw = seqs.astype(">u8")
    offsets = np.arange(0, (len(seqs) + 1) * SEQ_BYTES, SEQ_BYTES, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), len(seqs), [None, pa.py_buffer(offsets), pa.py_buffer(raw)])


def _runs(encoded: pa.BinaryArray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order sorting ``encoded`` stably, start of each run of equal keys in that order, run of
    each sorted row): the batch's distinct keys, in key order (RocksDB's fastest order)."""
    order = pc.sort_indices(encoded).to_numpy()
    ordered = encoded.take(pa.array(order))
    n = len(order)
    change = np.ones(n, bool)
    if n > 1:
        change[1:] = pc.not_equal(ordered.slice(1), ordered.slice(0, n - 1)).to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(change)
    return order, starts, np.cumsum(change) - 1


class RowsJoinState(ColumnarState):
    """The savepoint view of one side's rows: a table as the columnar form writes it."""

    savepoint_only = True

    def __init__(self, name: str, store: RocksDBJoinSide) -> None:
        super().__init__(name)
        self.store = store

    def frozen(self) -> pa.Table | None:
        return self.store.freeze()()

    def freeze(self) -> Callable[[], pa.Table | None]:
        # read now (RocksDB changes with the next batch); decoded when the savepoint is written
        return self.store.freeze()


class RocksDBJoinSide:
    """One input's stored rows as RocksDB entries (see the module docstring)."""

    def __init__(self, name: str, side: int, schema: pa.Schema, keys: tuple[int, ...], ttl_ms: int | None,
                 max_parallelism: int, backend: RocksDBStateBackend, clock: Clock = SYSTEM_CLOCK) -> None:
        self.side = side
        self.names = schema.names
        self.types = schema.types
        self.keys = keys
        self.ttl_ms = ttl_ms
        self.max_parallelism = max_parallelism
        self.backend = backend
        self.clock = clock
        rows, heads = backend.state(ROWS_STATES[side]), backend.state(HEADS_STATES[side])
        assert isinstance(rows, RocksDBState) and isinstance(heads, RocksDBState)
        rows.canonical = heads.canonical = False  # written to savepoints by self.state
        self.rows, self.heads = rows, heads
        self.state = RowsJoinState(name, self)
        self.key_codec = RowCodec([self.types[k] for k in keys], key_group=True, keys=True)
        self.value_codec = RowCodec(list(self.types) + ([pa.int64()] if ttl_ms is not None else []))
        self.head_codec = RowCodec([pa.int64()] * 3)
        self.last_sweep = clock.time_ms()

    @property
    def num_rows(self) -> int:
        """Rows stored (expired ones included until a sweep drops them)."""
        return len(self.rows)

    def encode_keys(self, batch: pa.RecordBatch, hashes: np.ndarray, keys: tuple[int, ...]) -> pa.BinaryArray:
        """The (key group, join key) bytes of rows of ``batch`` whose join key is columns ``keys``."""
        kgs = (hashes % np.uint64(self.max_parallelism)).astype(np.int64)
        return self.key_codec.encode([batch.column(k) for k in keys], kgs)

    def read_heads(self, stored: pa.BinaryArray, now: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(base, next, live) of the stored heads ``stored`` (NULL: absent) of some keys: an absent
        key is (0, 0, False); one whose rows all expired starts again, (next, next, False)."""
        found = stored.is_valid().to_numpy(zero_copy_only=False)
        m = len(stored)
        base, nxt = np.zeros(m, np.int64), np.zeros(m, np.int64)
        live = found.copy()
        if found.any():
            _, (b, n, written) = self.head_codec.decode(stored.filter(pa.array(found)))
            at = np.flatnonzero(found)
            base[at], nxt[at] = b.to_numpy(), n.to_numpy()
            if self.ttl_ms is not None:
                expired = at[written.to_numpy() <= now - self.ttl_ms]
                base[expired] = nxt[expired]
                live[expired] = False
        return base, nxt, live

    # ------------------------------------------------------------ probing
    def probe(self, encoded: pa.BinaryArray, now: int) -> tuple[np.ndarray, pa.RecordBatch] | None:
        """(row of ``encoded`` each pair comes from, the stored rows paired with them) for every
        incoming key ``encoded`` (with key group) against this side's unexpired rows: each
        incoming row in order, with its key's rows in the order they were stored."""
        if self.num_rows == 0:
            return None
        order, starts, run = _runs(encoded)
        prefixes = encoded.take(pa.array(order[starts]))
        base, nxt, live = self.read_heads(_binary(self.heads.get_many(prefixes.to_pylist())), now)
        counts = np.where(live, nxt - base, 0)
        total = int(counts.sum())
        if total == 0:
            return None
        owner = np.repeat(np.arange(len(starts)), counts)  # the distinct key of each row read
        seqs = np.repeat(base - (np.cumsum(counts) - counts), counts) + np.arange(total)
        row_keys = pc.binary_join_element_wise(prefixes.take(pa.array(owner)), _seq_bytes(seqs), b"")
        stored = _binary(self.rows.get_many(row_keys.to_pylist()))
        present = stored.is_valid().to_numpy(zero_copy_only=False)  # a sweep may have dropped some
        if not present.all():
            stored, owner = stored.filter(pa.array(present)), owner[present]
        _, columns = self.value_codec.decode(stored)
        if self.ttl_ms is not None:
            fresh = columns[-1].to_numpy() > now - self.ttl_ms
            columns = [c.filter(pa.array(fresh)) for c in columns[:-1]]
            owner = owner[fresh]
        if len(owner) == 0:
            return None
        # pairs: each incoming row (in batch order) with the rows read for its key
        per_key = np.bincount(owner, minlength=len(starts))
        first = np.cumsum(per_key) - per_key
        key_of_row = np.empty(len(order), np.int64)
        key_of_row[order] = run
        pairs = per_key[key_of_row]
        n_pairs = int(pairs.sum())
        if n_pairs == 0:
            return None
        positions = np.repeat(np.arange(len(order)), pairs)
        picked = np.repeat(first[key_of_row] - (np.cumsum(pairs) - pairs), pairs) + np.arange(n_pairs)
        theirs = pa.RecordBatch.from_arrays([c.take(pa.array(picked)) for c in columns[: len(self.names)]],
                                            names=self.names)
        return positions, theirs

    # ------------------------------------------------------------ storing
    def append(self, batch: pa.RecordBatch | pa.Table, hashes: np.ndarray, written: np.ndarray | int) -> None:
        """Store rows (without NULL join keys) after the rows of their keys; ``written``: their write
        time (a restored row keeps its own)."""
        n = batch.num_rows
        if n == 0:
            return
        encoded = self.encode_keys(batch, hashes, self.keys)
        order, starts, run = _runs(encoded)
        prefixes = encoded.take(pa.array(order[starts]))
        raw_prefixes = prefixes.to_pylist()
        stored_heads = _binary(self.heads.get_many(raw_prefixes))
        new_heads = stored_heads.null_count
        base, nxt, _ = self.read_heads(stored_heads, self.clock.time_ms())
        seqs = nxt[run] + (np.arange(n) - starts[run])  # each row's seq, in key order
        times = np.broadcast_to(np.asarray(written, np.int64), n)[order]
        row_keys = pc.binary_join_element_wise(encoded.take(pa.array(order)), _seq_bytes(seqs), b"")
        columns = [c.take(pa.array(order)) for c in (batch.column(i) for i in range(len(self.names)))]
        if self.ttl_ms is not None:
            columns.append(pa.array(times))
        values = self.value_codec.encode(columns)
        self.backend.write_rows(self.rows.name, row_keys.to_pylist(), values.to_pylist(), [], n)
        counts = np.diff(np.append(starts, n))
        last = np.maximum.reduceat(times, starts)
        heads = self.head_codec.encode([pa.array(base), pa.array(nxt + counts), pa.array(last)])
        self.backend.write_rows(self.heads.name, raw_prefixes, heads.to_pylist(), [], new_heads)

    def sweep(self, now: int) -> None:
        """Delete the rows and heads not written for longer than the TTL (at most every half TTL)."""
        assert self.ttl_ms is not None
        if now - self.last_sweep < self.ttl_ms / 2:
            return
        self.last_sweep = now
        cutoff = now - self.ttl_ms
        for state, codec in ((self.rows, self.value_codec), (self.heads, self.head_codec)):
            expired: list[bytes] = []
            for keys, values in state.scan(CHUNK):
                times = codec.decode(_binary(values))[1][-1].to_numpy()
                expired += [keys[i] for i in np.flatnonzero(times <= cutoff)]
            self.backend.write_rows(state.name, [], [], expired, 0)

    # ------------------------------------------------------------ snapshots and restores
    def freeze(self) -> Callable[[], pa.Table | None]:
        """The rows read now (as Arrow binary arrays, a chunk at a time), decoded into the columnar
        form's snapshot table later."""
        chunks = [_binary(values) for _, values in self.rows.scan(CHUNK)]
        cutoff = None if self.ttl_ms is None else self.clock.time_ms() - self.ttl_ms

        def table() -> pa.Table | None:
            tables = [t for t in (self._snapshot_table(values, cutoff) for values in chunks) if t is not None]
            return pa.concat_tables(tables) if tables else None

        return table

    def _snapshot_table(self, values: pa.Array, cutoff: int | None) -> pa.Table | None:
        _, columns = self.value_codec.decode(values)
        if cutoff is not None:
            fresh = pa.array(columns[-1].to_numpy() > cutoff)
            columns = [c.filter(fresh) for c in columns]
        if len(columns[0]) == 0:
            return None
        out = dict(zip(self.names, columns, strict=False))
        keys = [columns[k] for k in self.keys]
        hashes = hash_columns(keys) if keys else np.zeros(len(columns[0]), np.uint64)
        out[HASH] = pa.array(hashes)
        out[KEY_GROUP] = pa.array((hashes % np.uint64(self.max_parallelism)).astype(np.int16))
        if cutoff is not None:
            out[TIME] = columns[-1]
        return pa.table(out)

    def load(self, table: pa.Table) -> None:
        """Store the rows of a snapshot table (the columnar form's, restored or converted)."""
        for start in range(0, table.num_rows, CHUNK):
            chunk = table.slice(start, CHUNK).combine_chunks()
            keys = [chunk.column(self.names[k]) for k in self.keys]
            hashes = hash_columns(keys) if keys else np.zeros(chunk.num_rows, np.uint64)
            # restored under another TTL setting (or without one): restored rows count as written now
            written = chunk.column(TIME).to_numpy() if TIME in chunk.column_names else self.clock.time_ms()
            self.append(chunk.select(self.names), hashes, written)


class RocksDBInnerJoin:
    """Matches each batch against the other side's rows in RocksDB, then stores it."""

    def __init__(self, names: tuple[str, str], keys: tuple[tuple[int, ...], tuple[int, ...]], residual: Expr | None,
                 schemas: tuple[pa.Schema, pa.Schema], schema: pa.Schema, ttl_ms: tuple[int | None, int | None],
                 max_parallelism: int, backend: RocksDBStateBackend, clock: Clock = SYSTEM_CLOCK) -> None:
        self.keys = keys
        self.schema = schema
        self.predicate = Predicate(residual) if residual is not None else None
        self.clock = clock
        self.sides = tuple(RocksDBJoinSide(names[i], i, schemas[i], keys[i], ttl_ms[i], max_parallelism, backend,
                                           clock) for i in range(2))

    def process(self, batch: pa.RecordBatch, side: int) -> pa.RecordBatch | None:
        """The joined rows of ``batch`` (arriving on ``side``) with the other side; then store it."""
        batch, hashes = keyed_rows(batch, self.keys[side])
        if batch.num_rows == 0:
            return None
        now = self.clock.time_ms()
        for s in self.sides:
            if s.ttl_ms is not None:
                s.sweep(now)
        other = self.sides[1 - side]
        out = None
        if other.num_rows:
            # this side's key bytes in the other side's key order: the key types are the same
            found = other.probe(other.encode_keys(batch, hashes, self.keys[side]), now)
            if found is not None:
                positions, theirs = found
                out = joined_pairs(batch.take(pa.array(positions)), theirs.columns, side, self.keys,
                                   self.schema, self.predicate, compare_keys=False)
        self.sides[side].append(batch, hashes, now)
        return out

    def store(self, batch: pa.RecordBatch, side: int) -> None:
        """Store rows without matching them (state taken over from the per-key form)."""
        batch, hashes = keyed_rows(batch, self.keys[side])
        self.sides[side].append(batch, hashes, self.clock.time_ms())
