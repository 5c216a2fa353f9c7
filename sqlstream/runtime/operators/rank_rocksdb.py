"""The vectorized Top-N over an append-only input with its kept rows in RocksDB.

The in-memory form (rank_columnar.ColumnarTopN) keeps every partition's top N
as Arrow tables, so its state must fit in memory; the per-key form on rocksdb
takes a Python step per partition and batch (msgpack of the partition's rows,
a get and a put each).  Here one RocksDB entry per partition holds its kept
rows (at most N), and a batch is read and written with a handful of calls:

- key: ``(key group, partition key)`` encoded column-wise by
  runtime.state.row_codec (2-byte key group first, so each key group is one
  contiguous range as rescaling expects);
- value: the partition's kept rows one after another, each a 4-byte length
  and the row encoded by the row codec (every input column, the arrival
  ``$seq`` that breaks ties, and under a state TTL the write time ``$t``), in
  the order the in-memory form stores them (the rows that stayed, then those
  that entered): both forms then emit the same changelog in the same order;
- a batch, cut to the top N of each of its partitions (the shared ranking's
  one sort), reads its partitions' entries with ONE multi-get in key order
  (RocksDB's fastest), decodes every row of them with one row-codec call
  (the rows are cut out of the values with at most N vectorized steps, one
  row of every partition each), ranks old and new rows together and emits the
  changes with the in-memory form's own code (rank_columnar.TopNRanking), and
  writes the partitions whose rows changed with ONE WriteBatch, their values
  cut zero-copy out of one encoded array of all their rows.

Tie order needs each arrival's ``$seq`` above those of the rows it meets; the
counter is not checkpointed (it is not keyed state), so a batch whose stored
rows carry higher seqs (restored from a checkpoint) moves its own above them.

State TTL: a row read after its TTL counts as absent; a batch rewrites every
row of its partitions with the time now (the in-memory form renews the rows
that stay); every half TTL one scan drops the entries whose rows all expired,
and savepoints leave expired rows out.

Snapshots: the entries live in a column family of the backend's db (keyed
state ``rank_rows``), so the backend's incremental checkpoints carry them and a
rescaled restore copies the key-group ranges it owns.  Savepoints are written
by a savepoint-only ColumnarState as the table the in-memory form writes
(input columns, ``$h``, ``$kg``, ``$seq``, ``$t``) from a frozen view, a chunk
at a time, and restored a table at a time: the state is never whole in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.runtime.clock import SYSTEM_CLOCK, Clock
from sqlstream.runtime.hashing import hash_columns, key_groups_of
from sqlstream.runtime.operators.rank_columnar import (
    HASH,
    KEY_GROUP,
    SEQ,
    TIME,
    SortSpec,
    TopNRanking,
)
from sqlstream.runtime.state.base import ColumnarState
from sqlstream.runtime.state.rocksdb import RocksDBState, RocksDBStateBackend
from sqlstream.runtime.state.row_codec import RowCodec
from sqlstream.runtime.state.rows_store import binary, frozen_tables, pack, runs, sweep, unpack

# the keyed state (column family) holding the partitions' rows
ROWS_STATE = "rank_rows"
# entries read from RocksDB (savepoints, TTL sweeps) or rows restored into it at a time: bounds memory
CHUNK = 65536


class RowsRankState(ColumnarState):
    """The savepoint view of the rows: a table as the in-memory form writes it."""

    savepoint_only = True

    def __init__(self, name: str, store: RocksDBTopN) -> None:
        super().__init__(name)
        self.store = store

    def frozen(self) -> pa.Table | None:
        tables = list(self.store.freeze()())
        return pa.concat_tables(tables) if tables else None

    def freeze(self) -> Callable[[], Iterator[pa.Table]]:
        # a view taken now (RocksDB changes with the next batch); read and decoded when the savepoint is written
        return self.store.freeze()


class RocksDBTopN(TopNRanking):
    """The kept rows of every partition of one Top-N subtask as RocksDB entries (partition -> rows)."""

    def __init__(self, name: str, keys: list[int], sort: SortSpec, start: int, end: int, output_rank: bool,
                 newer_wins: bool, input_schema: pa.Schema, schema: pa.Schema, ttl_ms: int | None,
                 max_parallelism: int, backend: RocksDBStateBackend, clock: Clock = SYSTEM_CLOCK) -> None:
        super().__init__(keys, sort, start, end, output_rank, newer_wins, input_schema, schema, ttl_ms,
                         max_parallelism, clock)
        self.backend = backend
        rows = backend.state(ROWS_STATE)
        assert isinstance(rows, RocksDBState)
        rows.canonical = False  # written to savepoints by self.state
        self.rows = rows
        self.state = RowsRankState(name, self)
        self.key_codec = RowCodec([input_schema.field(k).type for k in keys], key_group=True, keys=True)
        self.value_codec = RowCodec([*input_schema.types, pa.int64()] + ([pa.int64()] if ttl_ms is not None else []))
        self.last_sweep = clock.time_ms()

    @property
    def partitions(self) -> int:
        """Entries stored (expired ones included until a sweep drops them)."""
        return len(self.rows)

    # ------------------------------------------------------------ encoding
    def _keys(self, table: pa.Table, rows: np.ndarray | None = None) -> pa.BinaryArray:
        """The entry keys of ``table``'s rows (all, or those at ``rows``)."""
        if rows is not None:
            table = table.take(pa.array(rows))
        kgs = key_groups_of(table.column(HASH).to_numpy(), self.max_parallelism)
        return self.key_codec.encode([table.column(self.names[k]) for k in self.keys], kgs)

    def _decode(self, values: pa.BinaryArray, cutoff: int | None) -> tuple[np.ndarray, list[pa.Array]]:
        """(value each row came from, the rows' columns: input columns, $seq, [$t]) of the rows of
        stored values not written at or before ``cutoff``."""
        owner, _, rows = unpack(values)
        _, columns = self.value_codec.decode(rows)
        if cutoff is not None and len(owner):
            fresh = columns[-1].to_numpy() > cutoff
            if not fresh.all():
                mask = pa.array(fresh)
                owner, columns = owner[fresh], [c.filter(mask) for c in columns]
        return owner, columns

    def _encode(self, table: pa.Table, written: np.ndarray | int) -> pa.BinaryArray:
        columns = [table.column(n) for n in [*self.names, SEQ]]
        if self.ttl_ms is not None:
            columns.append(pa.array(np.broadcast_to(np.asarray(written, np.int64), table.num_rows)))
        return self.value_codec.encode(columns)

    def _cutoff(self, now: int) -> int | None:
        return None if self.ttl_ms is None else now - self.ttl_ms

    # ------------------------------------------------------------ a batch
    def process(self, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, pa.Array] | None:
        """Rank a batch into the kept rows; the changelog (rows, kinds) of the visible ranks."""
        if batch.num_rows == 0:
            return None
        now = self.clock.time_ms()
        self._sweep(now)
        arrived = self._arrived(batch)
        group, firsts = self._partitions(arrived)
        encoded = self._keys(arrived, firsts)
        order = pc.sort_indices(encoded).to_numpy().astype(np.int64)  # partitions in key order (RocksDB's fastest)
        raw_keys = encoded.take(pa.array(order)).to_pylist()
        stored = binary(self.rows.get_many(raw_keys))
        existed = stored.is_valid().to_numpy(zero_copy_only=False)
        owner, columns = self._decode(stored.filter(pa.array(existed)), self._cutoff(now))
        old_group = order[np.flatnonzero(existed)[owner]]  # each stored row's partition number
        seqs = columns[len(self.names)]
        if len(seqs):
            # arrivals rank after the rows they meet: above their seqs, which a restore may have set
            top, low = int(pc.max(seqs).as_py()), int(pc.min(arrived.column(SEQ)).as_py())
            if top >= low:
                arrived = arrived.set_column(arrived.schema.get_field_index(SEQ), SEQ,
                                             pc.add(arrived.column(SEQ), top + 1 - low))
                self.next_seq += top + 1 - low
        old = self._old_rows(arrived, firsts, old_group, columns)
        candidates, cand_group, old_rank, new_rank = self._rank(old, old_group, arrived, group)
        kept = new_rank < self.end
        # the partitions whose kept rows change: one an arrival entered (a row leaves only for one);
        # under a TTL every partition of the batch, whose rows count as written now
        changed = np.zeros(len(firsts), bool)
        changed[cand_group[old.num_rows:][kept[old.num_rows:]]] = True
        if self.ttl_ms is not None:
            changed[:] = True
        self._write(candidates, cand_group, kept, order, raw_keys, existed, changed, now)
        return self._changes(candidates, cand_group, old_rank, new_rank)

    def _old_rows(self, arrived: pa.Table, firsts: np.ndarray, old_group: np.ndarray,
                  columns: list[pa.Array]) -> pa.Table:
        """The stored rows (decoded ``columns``, partition numbers ``old_group``) as a table like ``arrived``."""
        if len(old_group) == 0:
            return arrived.slice(0, 0)
        heads = pa.array(firsts[old_group])
        out = dict(zip(self.names, columns, strict=False))
        out[HASH] = arrived.column(HASH).take(heads)
        out[KEY_GROUP] = arrived.column(KEY_GROUP).take(heads)
        out[SEQ] = columns[len(self.names)]
        return pa.table(out, schema=arrived.schema)

    def _write(self, candidates: pa.Table, cand_group: np.ndarray, kept: np.ndarray, order: np.ndarray,
               raw_keys: list[bytes], existed: np.ndarray, changed: np.ndarray, now: int) -> None:
        """Store the kept rows of the ``changed`` partitions (numbers; ``order``: them in key order,
        as ``raw_keys`` and ``existed`` are), in candidate order, with one WriteBatch."""
        position = np.empty(len(order), np.int64)
        position[order] = np.arange(len(order))
        rows = np.flatnonzero(kept & changed[cand_group])
        if len(rows) == 0:
            return
        parts = position[cand_group[rows]]
        by_key = np.argsort(parts, kind="stable")  # partitions in key order, each's rows in candidate order
        rows, parts = rows[by_key], parts[by_key]
        firsts = np.flatnonzero(np.r_[True, parts[1:] != parts[:-1]])
        values = pack(self._encode(candidates.take(pa.array(rows)), now), firsts).to_pylist()
        at = parts[firsts]
        self.backend.write_rows(ROWS_STATE, [raw_keys[i] for i in at], values, [], int((~existed[at]).sum()))

    def _sweep(self, now: int) -> None:
        """Delete the entries whose rows all expired (at most every half TTL: one scan)."""
        if self.ttl_ms is None or now - self.last_sweep < self.ttl_ms / 2:
            return
        self.last_sweep = now

        def expired(values: pa.BinaryArray) -> np.ndarray:
            owner, columns = self._decode(values, None)
            latest = np.full(len(values), np.iinfo(np.int64).min, np.int64)
            np.maximum.at(latest, owner, columns[-1].to_numpy())
            return latest <= now - self.ttl_ms

        sweep(self.backend, self.rows, CHUNK, expired)

    # ------------------------------------------------------------ snapshots and restores
    def freeze(self) -> Callable[[], Iterator[pa.Table]]:
        """The rows as they are now (a frozen view of RocksDB's files, taken here), decoded into the
        in-memory form's snapshot table a chunk of entries at a time when the savepoint is written."""
        cutoff = self._cutoff(self.clock.time_ms())
        return frozen_tables(self.backend, [ROWS_STATE], CHUNK, lambda _, values: self._snapshot_table(values, cutoff))

    def _snapshot_table(self, values: pa.BinaryArray, cutoff: int | None) -> pa.Table | None:
        _, columns = self._decode(values, cutoff)
        if len(columns[0]) == 0:
            return None
        out = dict(zip(self.names, columns, strict=False))
        keys = [columns[k] for k in self.keys]
        hashes = hash_columns(keys) if keys else np.zeros(len(columns[0]), np.uint64)
        out[HASH] = pa.array(hashes)
        out[KEY_GROUP] = pa.array(key_groups_of(hashes, self.max_parallelism, np.int16))
        out[SEQ] = columns[len(self.names)]
        if self.ttl_ms is not None:
            out[TIME] = columns[-1]
        return pa.table(out)

    def load(self, table: pa.Table) -> None:
        """Store snapshot rows (restored, or converted from the per-key form) after the rows stored
        for their partitions, a chunk at a time."""
        for start in range(0, table.num_rows, CHUNK):
            self._load(table.slice(start, CHUNK).combine_chunks())

    def _load(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        now = self.clock.time_ms()
        # restored under no TTL (or into none): restored rows count as written now
        written = table.column(TIME).to_numpy() if TIME in table.column_names else now
        hashes = table.column(HASH).cast(pa.uint64())
        table = table.set_column(table.schema.get_field_index(HASH), HASH, hashes)
        encoded = self._keys(table)
        order, starts, run = runs(encoded)  # stable: each partition's rows in table order
        raw_keys = encoded.take(pa.array(order[starts])).to_pylist()
        stored = binary(self.rows.get_many(raw_keys))
        existed = stored.is_valid().to_numpy(zero_copy_only=False)
        owner, _, old_rows = unpack(stored.filter(pa.array(existed)))
        new_rows = self._encode(table.take(pa.array(order)), written if np.ndim(written) == 0 else written[order])
        rows = pa.concat_arrays([old_rows, new_rows])
        parts = np.concatenate([np.flatnonzero(existed)[owner], run])
        by_key = np.argsort(parts, kind="stable")  # the stored rows of a partition first
        parts = parts[by_key]
        firsts = np.flatnonzero(np.r_[True, parts[1:] != parts[:-1]])
        values = pack(rows.take(pa.array(by_key)), firsts).to_pylist()
        self.backend.write_rows(ROWS_STATE, raw_keys, values, [], int((~existed).sum()))
        self.next_seq = max(self.next_seq, int(pc.max(table.column(SEQ)).as_py()) + 1)
