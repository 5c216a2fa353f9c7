"""The vectorized INNER join of append-only inputs with its rows in RocksDB.

The columnar form (join_columnar.py) keeps both sides' rows as Arrow tables
in memory; the per-key form on rocksdb takes a Python step per row and key
(msgpack, a get and a put of the key's whole row list: benchmarks/README.md
has the figures).  Here
each side's rows are RocksDB entries read and written a batch at a time:

- rows: ``(key group, join key, seq) -> row`` in the side's column family,
  the key group and join key encoded column-wise by runtime.state.row_codec
  (equal keys, equal bytes; the key group leads, so each key group is one
  contiguous range as rescaling expects), the
  seq an 8-byte big-endian number counting the key's rows on that side; the
  row is every column of the input (and with a state TTL its write time),
  encoded the same way;
- heads: ``(key group, join key) -> (base, next, written)`` for each side in
  one entry: the side's live rows of the key are seqs ``base .. next-1``, the
  last of them written at ``written``.  A batch reads the heads of its
  distinct keys with ONE multi-get (in key order: RocksDB is fastest so),
  which gives both the other side's rows to read (ONE multi-get of exactly
  those rows, their keys built with Arrow, not per row in Python) and its own
  next seqs; then one WriteBatch stores its rows, one its keys' heads.

Rows are never rewritten (a key's seqs only grow), so a stored row is
written once and the entry counts stay exact without reading rows back.
The pairs, their residual condition and the output columns are the columnar
form's (join_columnar.joined_pairs, keyed_rows).  Output order: each incoming
row in its order with the stored rows of its key in the order they were
stored (Flink too emits a record's matches when it processes the record);
the columnar form orders by stored row first, which only reorders the rows
of one batch's output.

State TTL: a row (a side of a head) read after its TTL counts as absent; a
side of a key whose rows all expired starts again at ``base = next``; every
half TTL one scan of each side's rows and of the heads drops the expired
rows and the heads left without a live row (together: a head dropped while
rows of its key remained would hand out their seqs again).  Rows no later
row can match because of a watermark (horizons) stay until their TTL, as in
the per-key form.

Snapshots: the column families are keyed states of the backend's db, so its
incremental checkpoints carry them and a rescaled restore copies the
key-group ranges it owns.  Savepoints must be readable by every backend: the
rows are written by a savepoint-only ColumnarState as the table the
columnar form writes (the input's columns, ``$h``, ``$kg``, ``$t``), which
the hashmap form loads as it is and this form stores back (each key's rows
in table order, rebuilding the heads), and the rocksdb backend leaves the
column families out of its canonical file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

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
from sqlstream.runtime.state.base import RowsSavepointView
from sqlstream.runtime.state.rocksdb import RocksDBState, RocksDBStateBackend
from sqlstream.runtime.state.row_codec import RowCodec

# the keyed states (column families) of each side (left, right)
ROWS_STATES = ("join_rows_left", "join_rows_right")
# and of both sides' heads
HEADS_STATE = "join_heads"
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


class RocksDBJoinSide:
    """One input's stored rows as RocksDB entries ``(key group, join key, seq) -> row``."""

    def __init__(self, name: str, side: int, schema: pa.Schema, keys: tuple[int, ...], ttl_ms: int | None,
                 max_parallelism: int, backend: RocksDBStateBackend, clock: Clock = SYSTEM_CLOCK) -> None:
        self.names = schema.names
        self.keys = keys
        self.ttl_ms = ttl_ms
        self.max_parallelism = max_parallelism
        self.backend = backend
        self.clock = clock
        rows = backend.state(ROWS_STATES[side])
        assert isinstance(rows, RocksDBState)
        rows.canonical = False  # written to savepoints by self.state
        self.rows = rows
        self.state = RowsSavepointView(name, self.freeze)
        self.value_codec = RowCodec(list(schema.types) + ([pa.int64()] if ttl_ms is not None else []))

    @property
    def num_rows(self) -> int:
        """Rows stored (expired ones included until a sweep drops them)."""
        return len(self.rows)

    def read(self, prefixes: pa.BinaryArray, base: np.ndarray, counts: np.ndarray,
             now: int) -> tuple[np.ndarray, list[pa.Array]]:
        """(distinct key each row belongs to, the rows' columns) of the unexpired rows of the keys
        ``prefixes``, seqs ``base .. base+counts-1`` each: ONE multi-get, keys built with Arrow."""
        total = int(counts.sum())
        owner = np.repeat(np.arange(len(prefixes)), counts)
        seqs = np.repeat(base - (np.cumsum(counts) - counts), counts) + np.arange(total)
        row_keys = pc.binary_join_element_wise(prefixes.take(pa.array(owner)), _seq_bytes(seqs), b"")
        stored = _binary(self.rows.get_many(row_keys.to_pylist()))
        present = stored.is_valid().to_numpy(zero_copy_only=False)  # a sweep may have dropped some
        if not present.all():
            stored, owner = stored.filter(pa.array(present)), owner[present]
        _, columns = self.value_codec.decode(stored)
        if self.ttl_ms is None:
            return owner, columns
        fresh = columns[-1].to_numpy() > now - self.ttl_ms
        return owner[fresh], [c.filter(pa.array(fresh)) for c in columns[:-1]]

    def write(self, keys: pa.BinaryArray, seqs: np.ndarray, batch: pa.RecordBatch | pa.Table,
              times: np.ndarray) -> None:
        """Store rows (in key order) under their key bytes and seqs, in one WriteBatch."""
        row_keys = pc.binary_join_element_wise(keys, _seq_bytes(seqs), b"")
        columns = [batch.column(i) for i in range(len(self.names))]
        if self.ttl_ms is not None:
            columns.append(pa.array(times))
        values = self.value_codec.encode(columns)
        self.backend.write_rows(self.rows.name, row_keys.to_pylist(), values.to_pylist(), [], batch.num_rows)

    def sweep(self, now: int) -> None:
        """Delete the rows not written for longer than the TTL (one scan)."""
        assert self.ttl_ms is not None
        expired: list[bytes] = []
        for keys, values in self.rows.scan(CHUNK):
            times = self.value_codec.decode(_binary(values))[1][-1].to_numpy()
            expired += [keys[i] for i in np.flatnonzero(times <= now - self.ttl_ms)]
        self.backend.write_rows(self.rows.name, [], [], expired, 0)

    # ------------------------------------------------------------ snapshots
    def freeze(self) -> Callable[[], Iterator[pa.Table]]:
        """The rows as they are now (a frozen view of RocksDB's files, taken here), decoded into
        the columnar form's snapshot table a chunk at a time when the savepoint is written: the
        rows are never whole in memory."""
        view = self.backend.frozen_view()
        cutoff = None if self.ttl_ms is None else self.clock.time_ms() - self.ttl_ms

        def tables() -> Iterator[pa.Table]:
            for _, values in self.backend.scan_view(view, self.rows.name, CHUNK):
                table = self._snapshot_table(_binary(values), cutoff)
                if table is not None:
                    yield table

        return tables

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


class RocksDBInnerJoin:
    """Matches each batch against the other side's rows in RocksDB, then stores it."""

    def __init__(self, names: tuple[str, str], keys: tuple[tuple[int, ...], tuple[int, ...]], residual: Expr | None,
                 schemas: tuple[pa.Schema, pa.Schema], schema: pa.Schema, ttl_ms: tuple[int | None, int | None],
                 max_parallelism: int, backend: RocksDBStateBackend, clock: Clock = SYSTEM_CLOCK) -> None:
        self.keys = keys
        self.schema = schema
        self.predicate = Predicate(residual) if residual is not None else None
        self.max_parallelism = max_parallelism
        self.backend = backend
        self.clock = clock
        self.ttl_ms = ttl_ms
        self.sides = tuple(RocksDBJoinSide(names[i], i, schemas[i], keys[i], ttl_ms[i], max_parallelism, backend,
                                           clock) for i in range(2))
        heads = backend.state(HEADS_STATE)
        assert isinstance(heads, RocksDBState)
        heads.canonical = False  # rebuilt from the rows when a savepoint is restored
        self.heads = heads
        # the key types are one on both sides (core.joins.join_columnar_rows): one key encoding
        self.key_codec = RowCodec([schemas[0].field(k).type for k in keys[0]], key_group=True, keys=True)
        self.head_codec = RowCodec([pa.int64()] * 6)  # per side: base, next, written
        self.last_sweep = clock.time_ms()

    def _heads(self, raw_prefixes: list[bytes], now: int) -> tuple[int, list[np.ndarray], list[np.ndarray]]:
        """(how many of the keys have no head, the six head fields of each key, and per side
        whether the key's rows are live): an absent key's fields are 0; a side whose rows all
        expired starts again (base = next)."""
        stored = _binary(self.heads.get_many(raw_prefixes))
        found = stored.is_valid().to_numpy(zero_copy_only=False)
        m = len(raw_prefixes)
        fields = [np.zeros(m, np.int64) for _ in range(6)]
        if found.any():
            at = np.flatnonzero(found)
            for f, column in zip(fields, self.head_codec.decode(stored.filter(pa.array(found)))[1], strict=True):
                f[at] = column.to_numpy()
        live = []
        for side, ttl in enumerate(self.ttl_ms):
            base, nxt, written = fields[3 * side: 3 * side + 3]
            if ttl is not None:
                expired = written <= now - ttl
                base[expired] = nxt[expired]
            live.append(nxt > base)
        return int(m - found.sum()), fields, live

    def process(self, batch: pa.RecordBatch, side: int) -> pa.RecordBatch | None:
        """The joined rows of ``batch`` (arriving on ``side``) with the other side; then store it."""
        batch, hashes = keyed_rows(batch, self.keys[side])
        if batch.num_rows == 0:
            return None
        now = self.clock.time_ms()
        self._sweep(now)
        return self._add(batch, hashes, side, np.full(batch.num_rows, now, np.int64), now, match=True)

    def store(self, batch: pa.RecordBatch | pa.Table, side: int, written: np.ndarray | None = None) -> None:
        """Store rows without matching them (state restored from a savepoint or the per-key form);
        ``written``: their write times (default now)."""
        batch, hashes = keyed_rows(batch, self.keys[side])
        now = self.clock.time_ms()
        times = np.full(batch.num_rows, now, np.int64) if written is None else written
        if batch.num_rows:
            self._add(batch, hashes, side, times, now, match=False)

    def restore(self, side: int, tables: Iterable[pa.Table]) -> None:
        """Store the rows of the columnar form's snapshot tables of one side (a savepoint's,
        restored before the first batch, taken a batch at a time: never whole in memory), each
        key's rows in table order after those stored before."""
        names = self.sides[side].names
        for table in tables:
            for start in range(0, table.num_rows, CHUNK):
                chunk = table.slice(start, CHUNK)
                # restored under no TTL (or into none): restored rows count as written now
                written = chunk.column(TIME).to_numpy() if TIME in chunk.column_names else None
                self.store(chunk.select(names), side, written)

    def _add(self, batch: pa.RecordBatch | pa.Table, hashes: np.ndarray, side: int, times: np.ndarray, now: int,
             match: bool) -> pa.RecordBatch | None:
        """Match ``batch`` (no NULL keys) with the other side (when ``match``), then store it after
        its keys' rows: one multi-get of the heads for both, keys in key order."""
        n = batch.num_rows
        kgs = (hashes % np.uint64(self.max_parallelism)).astype(np.int64)
        encoded = self.key_codec.encode([batch.column(k) for k in self.keys[side]], kgs)
        order, starts, run = _runs(encoded)
        prefixes = encoded.take(pa.array(order[starts]))
        raw_prefixes = prefixes.to_pylist()
        absent, fields, live = self._heads(raw_prefixes, now)
        out = self._match(batch, side, prefixes, order, run, fields, live[1 - side], now) if match else None
        base, nxt, written = fields[3 * side: 3 * side + 3]
        seqs = nxt[run] + (np.arange(n) - starts[run])  # each row's seq, in key order
        sorted_times = times[order]
        self.sides[side].write(encoded.take(pa.array(order)), seqs, batch.take(pa.array(order)), sorted_times)
        nxt += np.diff(np.append(starts, n))
        written[:] = np.maximum(written, np.maximum.reduceat(sorted_times, starts))
        heads = self.head_codec.encode([pa.array(f) for f in fields])
        self.backend.write_rows(self.heads.name, raw_prefixes, heads.to_pylist(), [], absent)
        return out

    def _match(self, batch: pa.RecordBatch | pa.Table, side: int, prefixes: pa.BinaryArray, order: np.ndarray,
               run: np.ndarray, fields: list[np.ndarray], live: np.ndarray, now: int) -> pa.RecordBatch | None:
        """The joined rows: each incoming row in order, with its key's rows of the other side in
        the order they were stored."""
        other = 1 - side
        counts = np.where(live, fields[3 * other + 1] - fields[3 * other], 0)
        if not counts.any():
            return None
        owner, columns = self.sides[other].read(prefixes, fields[3 * other], counts, now)
        if len(owner) == 0:
            return None
        per_key = np.bincount(owner, minlength=len(prefixes))
        first = np.cumsum(per_key) - per_key
        key_of_row = np.empty(len(order), np.int64)
        key_of_row[order] = run
        pairs = per_key[key_of_row]
        n_pairs = int(pairs.sum())
        positions = np.repeat(np.arange(len(order)), pairs)
        picked = pa.array(np.repeat(first[key_of_row] - (np.cumsum(pairs) - pairs), pairs) + np.arange(n_pairs))
        theirs = [c.take(picked) for c in columns]
        return joined_pairs(batch.take(pa.array(positions)), theirs, side, self.keys, self.schema,
                            self.predicate, compare_keys=False)

    def _sweep(self, now: int) -> None:
        """Every half (shorter) TTL: drop expired rows, and heads whose sides have no unexpired row
        (in one go: a head dropped while rows of its key remained would give their seqs again)."""
        ttls = [t for t in self.ttl_ms if t is not None]
        if not ttls or now - self.last_sweep < min(ttls) / 2:
            return
        self.last_sweep = now
        for s in self.sides:
            if s.ttl_ms is not None:
                s.sweep(now)
        dead: list[bytes] = []
        for keys, values in self.heads.scan(CHUNK):
            fields = [c.to_numpy() for c in self.head_codec.decode(_binary(values))[1]]
            empty = np.ones(len(keys), bool)
            for side, ttl in enumerate(self.ttl_ms):
                base, nxt, written = fields[3 * side: 3 * side + 3]
                empty &= (nxt == base) | (written <= now - ttl if ttl is not None else False)
            dead += [keys[i] for i in np.flatnonzero(empty)]
        self.backend.write_rows(self.heads.name, [], [], dead, 0)
