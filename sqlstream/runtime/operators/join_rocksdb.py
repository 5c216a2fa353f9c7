"""The vectorized INNER join of append-only inputs with its rows in RocksDB.

The columnar form (join_columnar.py) keeps both sides' rows as Arrow tables
in memory; the per-key form on rocksdb takes a Python step per row and key
(msgpack, a get and a put of the key's whole row list: benchmarks/README.md
has the figures).  Here each key's rows are RocksDB entries read and written
a batch at a time, and since rocksdict costs 1 to 3 us per entry read or
written, a key's first rows live in its head entry:

- heads: ``(key group, join key) -> header, inline rows`` in one column
  family for both sides, the key group and join key encoded column-wise by
  runtime.state.row_codec (equal keys, equal bytes; the key group leads, so
  each key group is one contiguous range as rescaling expects).  The value
  is packed rows (runtime.state.rows_store.pack): first the header, per side
  ``(base, next, written)`` (the side's live rows of the key are seqs
  ``base .. next-1``, the last of them written at ``written``), then the
  side's rows of seqs below INLINE_ROWS from ``base`` on, left then right;
  each row is every column of its input (and with a state TTL its write
  time), encoded by the row codec;
- rows: ``(key group, join key, seq) -> row`` in the side's column family for
  the seqs from INLINE_ROWS on (the seq an 8-byte big-endian number).

A batch reads the heads of its distinct keys with ONE multi-get (in key
order: RocksDB is fastest so), but for the keys a Bloom filter over the key
hashes whose head was ever written (state.key_filter.StoredKeys, in numpy)
says were never stored, which have no head (looking up an absent key costs
RocksDB 1 to 2 us).  The heads give the other side's first rows, the other
side's further rows to read (ONE multi-get of exactly those, their keys
built with Arrow, not per row in Python) and its own next seqs; then one
WriteBatch stores its rows past the inline ones and one its keys' heads,
rewritten with their inline rows (the stored rows' bytes as they were, the
new ones appended).  A 1:1 join thus costs a put of one entry per row and a
get per key (its second row's); INLINE_ROWS bounds what a key's head
rewrite copies.  Rows are never rewritten elsewhere (a key's seqs only
grow), so the entry counts stay exact without reading rows back.  The pairs, their residual condition and the
output columns are the columnar form's (join_columnar.joined_pairs,
keyed_rows).  Output order: each incoming row in its order with the stored
rows of its key in the order they were stored (Flink too emits a record's
matches when it processes the record); the columnar form orders by stored
row first, which only reorders the rows of one batch's output.

State TTL: a row read after its TTL counts as absent; a side of a key whose
rows all expired starts again at ``base = next`` (its inline rows leave the
head with the key's next write); every half TTL one scan of each side's rows
and of the heads drops the expired rows and the heads left without a live
row (together: a head dropped while rows of its key remained would hand out
their seqs again).  Rows no later row can match because of a watermark
(horizons) stay until their TTL, as in the per-key form.

Snapshots: the column families are keyed states of the backend's db, so its
incremental checkpoints carry them and a rescaled restore copies the
key-group ranges it owns.  The key filter is in no snapshot: heads stored
around it (a restore of RocksDB's files, a rescaling copy) make it rebuild
from a scan of the heads' keys, a chunk per batch, every key looked up until
then; a savepoint's restore stores its rows through the filter.  Savepoints must be readable by every backend: the
rows are written by a savepoint-only view (state.base.RowsSavepointView) as
the table the columnar form writes (the input's columns, ``$h``, ``$kg``,
``$t``): the side's inline rows from the heads, then its other rows, so each
key's rows stay in their order; the hashmap form loads it as it is and this
form stores it back (each key's rows in table order, rebuilding the heads),
and the rocksdb backend leaves the column families out of its canonical file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.evaluator import Predicate
from sqlstream.core.expressions import Expr
from sqlstream.runtime.clock import SYSTEM_CLOCK, Clock
from sqlstream.runtime.hashing import hash_columns, key_groups_of
from sqlstream.runtime.operators.join_columnar import (
    HASH,
    KEY_GROUP,
    TIME,
    joined_pairs,
    keyed_rows,
)
from sqlstream.runtime.state.base import RowsSavepointView
from sqlstream.runtime.state.key_filter import StoredKeys
from sqlstream.runtime.state.rocksdb import RocksDBState, RocksDBStateBackend
from sqlstream.runtime.state.row_codec import RowCodec
from sqlstream.runtime.state.rows_store import binary, frozen_tables, pack, runs, sweep, unpack

# the keyed states (column families) of each side's rows past the inline ones (left, right)
ROWS_STATES = ("join_rows_left", "join_rows_right")
# and of both sides' heads
HEADS_STATE = "join_heads"
SEQ_BYTES = 8
# rows of each side kept in a key's head entry (seqs below this): a 1:1 join then reads and writes
# one entry per row; a key's head rewrite copies at most twice this many rows
INLINE_ROWS = 2
# entries read from RocksDB (savepoints, TTL sweeps) or stored into it at a time: bounds memory
CHUNK = 65536
# a head's header: per side base, next, written
HEADER = RowCodec([pa.int64()] * 6)
# the join's column families compact once 12 files are in level 0, not 4: their keys are spread
# over the whole key space (the key group leads), so every level-0 compaction rewrites the whole
# bottom level; at 2 M keys a side this halved compaction's bytes and cut the job's CPU by 15 %
# (measured), the lookups' few extra bloom-filter checks included.  Mutable options, so they are
# set on the column families as this operator opens them (after any restore) and need nothing of
# the backend's shared options.  Only under the LEVEL compaction style (Flink's default): another
# style set with state.backend.rocksdb.compaction.style runs as RocksDB runs it.
COMPACTION_OPTIONS = {"level0_file_num_compaction_trigger": "12", "level0_slowdown_writes_trigger": "36",
                      "level0_stop_writes_trigger": "48"}


def _compact_later(state: RocksDBState, backend: RocksDBStateBackend) -> None:
    """COMPACTION_OPTIONS on one of the join's column families, under the LEVEL style."""
    if backend.tuning.compaction_style == "level":
        state.cf.set_options(COMPACTION_OPTIONS)


def _seq_bytes(seqs: np.ndarray) -> pa.BinaryArray:
    """Each seq as 8 big-endian bytes (byte order is numeric order), as a binary array."""
    raw = seqs.astype(">u8")
    offsets = np.arange(0, (len(seqs) + 1) * SEQ_BYTES, SEQ_BYTES, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), len(seqs), [None, pa.py_buffer(offsets), pa.py_buffer(raw)])


@dataclass
class Heads:
    """Stored heads taken apart: the six header fields of each head (0 where none), and its
    inline rows (the head each belongs to, its side and seq, its encoded bytes), in head order,
    each head's rows by side and seq."""

    fields: list[np.ndarray]
    owner: np.ndarray
    side: np.ndarray
    seq: np.ndarray
    rows: pa.BinaryArray

    def keep(self, mask: np.ndarray) -> None:
        """Keep the inline rows of ``mask``."""
        if not mask.all():
            self.owner, self.side, self.seq = self.owner[mask], self.side[mask], self.seq[mask]
            self.rows = self.rows.filter(pa.array(mask))


def parse_heads(values: pa.BinaryArray, at: np.ndarray, m: int) -> Heads:
    """The heads ``values`` (no NULLs) of the keys ``at`` among ``m`` keys."""
    owner, position, parts = unpack(values)
    header = position == 0
    fields = [np.zeros(m, np.int64) for _ in range(6)]
    if header.any():
        for f, column in zip(fields, HEADER.decode(parts.filter(pa.array(header)))[1], strict=True):
            f[at[owner[header]]] = column.to_numpy()
    owner, position = at[owner[~header]], position[~header] - 1
    # the left side's inline rows come first: seqs base .. min(next, INLINE_ROWS) - 1
    left = np.clip(np.minimum(fields[1], INLINE_ROWS) - fields[0], 0, None)[owner]
    side = (position >= left).astype(np.int64)
    seq = np.where(side == 0, fields[0][owner] + position, fields[3][owner] + position - left)
    return Heads(fields, owner, side, seq, parts.filter(pa.array(~header)))


class RocksDBJoinSide:
    """One input's stored rows: the first ones in the heads, the others as RocksDB entries
    ``(key group, join key, seq) -> row``."""

    def __init__(self, name: str, side: int, schema: pa.Schema, keys: tuple[int, ...], ttl_ms: int | None,
                 max_parallelism: int, backend: RocksDBStateBackend, clock: Clock = SYSTEM_CLOCK) -> None:
        self.side = side
        self.names = schema.names
        self.keys = keys
        self.ttl_ms = ttl_ms
        self.max_parallelism = max_parallelism
        self.backend = backend
        self.clock = clock
        rows = backend.state(ROWS_STATES[side])
        assert isinstance(rows, RocksDBState)
        rows.canonical = False  # written to savepoints by self.state
        _compact_later(rows, backend)
        # its lookups are of seqs the heads say were stored (all found but for swept ones): the
        # memtables' bloom filter would only cost every insert
        rows.keep_own_filter()
        self.rows = rows
        self.state = RowsSavepointView(name, self.freeze)
        self.value_codec = RowCodec(list(schema.types) + ([pa.int64()] if ttl_ms is not None else []))

    @property
    def num_rows(self) -> int:
        """Rows stored past the inline ones (expired ones included until a sweep drops them)."""
        return len(self.rows)

    def encode(self, batch: pa.RecordBatch | pa.Table, times: np.ndarray) -> pa.BinaryArray:
        """The rows' bytes: every column (and under a TTL the write time)."""
        columns = [batch.column(i) for i in range(len(self.names))]
        if self.ttl_ms is not None:
            columns.append(pa.array(times))
        return self.value_codec.encode(columns)

    def decode(self, rows: pa.BinaryArray, cutoff: int | None) -> tuple[np.ndarray, list[pa.Array]]:
        """(which rows were written after ``cutoff``, their columns: the input's [and $t])."""
        _, columns = self.value_codec.decode(rows)
        fresh = np.ones(len(rows), bool) if cutoff is None else columns[-1].to_numpy() > cutoff
        if not fresh.all():
            mask = pa.array(fresh)
            columns = [c.filter(mask) for c in columns]
        return fresh, columns

    def cutoff(self, now: int) -> int | None:
        return None if self.ttl_ms is None else now - self.ttl_ms

    def read(self, prefixes: pa.BinaryArray, base: np.ndarray, counts: np.ndarray,
             now: int) -> tuple[np.ndarray, list[pa.Array]]:
        """(distinct key each row belongs to, the rows' input columns) of the unexpired rows of the
        keys ``prefixes``, seqs ``base .. base+counts-1`` each: ONE multi-get, keys built with Arrow."""
        total = int(counts.sum())
        owner = np.repeat(np.arange(len(prefixes)), counts)
        seqs = np.repeat(base - (np.cumsum(counts) - counts), counts) + np.arange(total)
        row_keys = pc.binary_join_element_wise(prefixes.take(pa.array(owner)), _seq_bytes(seqs), b"")
        stored = binary(self.rows.get_many(row_keys.to_pylist()))
        present = stored.is_valid().to_numpy(zero_copy_only=False)  # a sweep may have dropped some
        if not present.all():
            stored, owner = stored.filter(pa.array(present)), owner[present]
        fresh, columns = self.decode(stored, self.cutoff(now))
        return owner[fresh], columns[:len(self.names)]

    def write(self, keys: pa.BinaryArray, seqs: np.ndarray, rows: pa.BinaryArray) -> None:
        """Store encoded rows (about in key order) under their key bytes and seqs, in one WriteBatch."""
        row_keys = pc.binary_join_element_wise(keys, _seq_bytes(seqs), b"")
        self.backend.write_rows(self.rows.name, row_keys.to_pylist(), rows.to_pylist(), [], len(rows))

    def sweep(self, now: int) -> None:
        """Delete the rows not written for longer than the TTL (one scan)."""
        cutoff = self.cutoff(now)
        sweep(self.backend, self.rows, CHUNK, lambda values: ~self.decode(values, cutoff)[0])

    # ------------------------------------------------------------ snapshots
    def freeze(self) -> Callable[[], Iterator[pa.Table]]:
        """The rows as they are now (frozen views of RocksDB's files, taken here), decoded into the
        columnar form's snapshot table a chunk at a time when the savepoint is written: the inline
        rows of every head first, then the others (each key's rows in their order)."""
        cutoff = self.cutoff(self.clock.time_ms())

        def table_of(state: str, values: pa.BinaryArray) -> pa.Table | None:
            if state == HEADS_STATE:
                heads = parse_heads(values, np.arange(len(values)), len(values))
                values = heads.rows.filter(pa.array(heads.side == self.side))
            return self._snapshot_table(values, cutoff)

        return frozen_tables(self.backend, [HEADS_STATE, self.rows.name], CHUNK, table_of)

    def _snapshot_table(self, values: pa.BinaryArray, cutoff: int | None) -> pa.Table | None:
        _, columns = self.decode(values, cutoff)
        if len(columns[0]) == 0:
            return None
        out = dict(zip(self.names, columns, strict=False))
        keys = [columns[k] for k in self.keys]
        hashes = hash_columns(keys) if keys else np.zeros(len(columns[0]), np.uint64)
        out[HASH] = pa.array(hashes)
        out[KEY_GROUP] = pa.array(key_groups_of(hashes, self.max_parallelism, np.int16))
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
        _compact_later(heads, backend)
        self.heads = heads
        # the key types are one on both sides (core.joins.join_columnar_rows): one key encoding
        self.key_codec = RowCodec([schemas[0].field(k).type for k in keys[0]], key_group=True, keys=True)
        # the keys whose head was ever written, by hash: a key surely never stored has no head and
        # skips its lookup (a 1:1 join's first row of each key)
        self.stored_keys = StoredKeys(heads, backend.memory.filter_bytes, CHUNK, self._key_hashes)
        self.last_sweep = clock.time_ms()

    def _key_hashes(self, raw_prefixes: pa.BinaryArray) -> np.ndarray:
        """The key hashes (hashing.hash_columns, as keyed_rows gives them) of heads' keys."""
        _, columns = self.key_codec.decode(raw_prefixes)
        return hash_columns(columns) if columns else np.zeros(len(raw_prefixes), np.uint64)

    def _heads(self, raw_prefixes: list[bytes], key_hashes: np.ndarray,
               now: int) -> tuple[np.ndarray, Heads, list[np.ndarray]]:
        """(which of the keys have a head, their heads, and per side whether the key's rows are
        live): a side whose rows all expired starts again (base = next) without its inline rows.
        Only the keys the filter may hold are looked up (one multi-get, in key order)."""
        m = len(raw_prefixes)
        maybe = self.stored_keys.may_contain(key_hashes)
        if maybe.all():
            stored = binary(self.heads.get_many(raw_prefixes))
            found = stored.is_valid().to_numpy(zero_copy_only=False)
        else:
            ask = np.flatnonzero(maybe)
            stored = binary(self.heads.get_many(list(map(raw_prefixes.__getitem__, ask.tolist()))) if len(ask) else [])
            found = np.zeros(m, bool)
            found[ask] = stored.is_valid().to_numpy(zero_copy_only=False)
        if stored.null_count:
            stored = stored.filter(stored.is_valid())
        heads = parse_heads(stored, np.flatnonzero(found), m)
        live = []
        for side, ttl in enumerate(self.ttl_ms):
            base, nxt, written = heads.fields[3 * side: 3 * side + 3]
            if ttl is not None:
                expired = written <= now - ttl
                base[expired] = nxt[expired]
                heads.keep(~(expired[heads.owner] & (heads.side == side)))
            live.append(nxt > base)
        return found, heads, live

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
        its keys' rows: one multi-get of the heads for both, keys about in key order."""
        n = batch.num_rows
        kgs = key_groups_of(hashes, self.max_parallelism)
        encoded = self.key_codec.encode([batch.column(k) for k in self.keys[side]], kgs)
        order, starts, run = runs(encoded)
        prefixes = encoded.take(pa.array(order[starts]))
        raw_prefixes = prefixes.to_pylist()
        key_hashes = hashes[order[starts]]
        found, heads, live = self._heads(raw_prefixes, key_hashes, now)
        out = self._match(batch, side, prefixes, order, run, heads, live[1 - side], now) if match else None
        base, nxt, written = heads.fields[3 * side: 3 * side + 3]
        seqs = nxt[run] + (np.arange(n) - starts[run])  # each row's seq, in the order of the runs
        sorted_times = times[order]
        rows = self.sides[side].encode(batch.take(pa.array(order)), sorted_times)
        inline = seqs < INLINE_ROWS
        if not inline.all():
            further = pa.array(~inline)
            self.sides[side].write(encoded.take(pa.array(order)).filter(further), seqs[~inline], rows.filter(further))
        nxt += np.diff(np.append(starts, n))
        written[:] = np.maximum(written, np.maximum.reduceat(sorted_times, starts))
        # each head: its header, then its inline rows by side and seq (the stored ones' bytes as they
        # were), placed by slot (header 0, a row 1 + side * INLINE_ROWS + seq: seq < INLINE_ROWS)
        m = len(raw_prefixes)
        width = 1 + 2 * INLINE_ROWS
        slots = np.concatenate([np.arange(m) * width, heads.owner * width + 1 + heads.side * INLINE_ROWS + heads.seq,
                                run[inline] * width + 1 + side * INLINE_ROWS + seqs[inline]])
        parts = pa.concat_arrays([HEADER.encode([pa.array(f) for f in heads.fields]), heads.rows,
                                  rows.filter(pa.array(inline))])
        dense = np.full(m * width, -1, np.int64)
        dense[slots] = np.arange(len(slots))
        layout = dense[dense >= 0]
        values = pack(parts.take(pa.array(layout)), np.flatnonzero(layout < m))
        before = len(self.heads)
        self.backend.write_rows(self.heads.name, raw_prefixes, values.to_pylist(), [], int(m - found.sum()))
        self.stored_keys.wrote(key_hashes[~found], before)
        return out

    def _match(self, batch: pa.RecordBatch | pa.Table, side: int, prefixes: pa.BinaryArray, order: np.ndarray,
               run: np.ndarray, heads: Heads, live: np.ndarray, now: int) -> pa.RecordBatch | None:
        """The joined rows: each incoming row in order, with its key's rows of the other side in
        the order they were stored (the inline ones, then the others)."""
        other = 1 - side
        theirs = self.sides[other]
        base, nxt = heads.fields[3 * other], heads.fields[3 * other + 1]
        first_further = np.maximum(base, INLINE_ROWS)
        counts = np.where(live, np.maximum(nxt - first_further, 0), 0)
        mine = heads.side == other
        fresh, columns = theirs.decode(heads.rows.filter(pa.array(mine)), theirs.cutoff(now))
        owner, columns = heads.owner[mine][fresh], columns[:len(theirs.names)]
        if counts.any():
            further_owner, further = theirs.read(prefixes, first_further, counts, now)
            if len(owner) == 0:
                owner, columns = further_owner, further
            elif len(further_owner):
                # each key's inline rows before its others: a stable sort by key
                by_key = pa.array(np.argsort(np.concatenate([owner, further_owner]), kind="stable"))
                owner = np.concatenate([owner, further_owner])[by_key.to_numpy()]
                columns = [pa.concat_arrays([a, b]).take(by_key) for a, b in zip(columns, further, strict=True)]
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
        return joined_pairs(batch.take(pa.array(positions)), [c.take(picked) for c in columns], side, self.keys,
                            self.schema, self.predicate, compare_keys=False)

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

        def dead(values: pa.BinaryArray) -> np.ndarray:
            fields = parse_heads(values, np.arange(len(values)), len(values)).fields
            empty = np.ones(len(values), bool)
            for side, ttl in enumerate(self.ttl_ms):
                base, nxt, written = fields[3 * side: 3 * side + 3]
                empty &= (nxt == base) | (written <= now - ttl if ttl is not None else False)
            return empty

        heads = len(self.heads)
        sweep(self.backend, self.heads, CHUNK, dead)
        self.stored_keys.deleted(heads)  # a swept key stays in the filter: looked up, found absent
