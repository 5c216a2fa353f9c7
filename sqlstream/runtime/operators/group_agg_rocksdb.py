"""The vectorized non-windowed GROUP BY with its state in RocksDB: Arrow speed, memory bounded by RocksDB.

The columnar form (group_agg_columnar.py) keeps every key's accumulators in
numpy columns, so its state must fit in memory; the per-key form on rocksdb
takes a Python step per key and batch (msgpack, a get and a put each), 20-40x
slower.  Here one RocksDB entry per key holds the key's accumulators, and a
batch, pre-aggregated per key by one Arrow group-by exactly as the columnar
form's, is read and written with a handful of calls over all its keys:

- the keys are encoded column-wise by runtime.state.row_codec (2-byte key
  group prefix, so each key group is one contiguous range as the rescaling
  restore expects, then the key columns: fixed-width values as their bytes,
  strings length-prefixed, a validity byte per column);
- they are sorted (one Arrow sort: RocksDB is 2-4x faster read and written in
  key order, neighbouring keys sharing skip-list nodes and SST blocks) and
  looked up with ONE multi-get, but for the keys a Bloom filter over the key
  hashes (state.key_filter.StoredKeys, in numpy) says were never stored: a
  lookup of an absent key costs RocksDB 1.5-2 us (its memtables' and every L0
  file's filter probed), half a new key's cost; the values found become one Arrow
  binary array whose buffer the row codec decodes into accumulator columns
  (the accumulators, a nullable column per MIN/MAX, and with a state TTL the
  time of the last write);
- the merge, the results, which keys changed and the changelog are the
  columnar form's own code (GroupAccumulators), so both emit the same rows;
- the new accumulators are encoded the same way and written with one
  WriteBatch, emptied keys deleted in it.

The filter is not in snapshots: the keys this object writes go into it,
and when entries arrive around it (a restore of RocksDB's files, a rescaling
copy: another column family, or an entry count it did not leave) it is rebuilt
from a scan of the stored keys, a chunk per batch, every key being looked up
until the scan is through.  Its memory is capped by the slot's RocksDB memory
options (RocksDBMemory.filter_bytes); past the cap it answers "maybe" more often.

Python still touches each key twice (the list of key bytes handed to the
multi-get, and a put into the WriteBatch): rocksdict takes Python lists, not
buffers.  Nothing else is per key, and nothing is kept in Python between
batches, so memory is RocksDB's (memtables and block cache).

Snapshots: the entries live in a column family of the backend's db (keyed
state ``group_rows``), so the backend's incremental checkpoints carry them
and a rescaled restore copies the key-group ranges it owns.  Savepoints must
be readable by every backend, and these bytes are not the state codec's: the
state is written by its ColumnarState (``savepoint_only``) as the same table
the columnar form writes (``$h``, ``$kg``, keys, accumulators), which the
hashmap form loads as it is and this form encodes back into RocksDB; the
rocksdb backend leaves the column family out of its canonical file.

State TTL: an entry read after its TTL counts as absent (and is overwritten or
deleted by the batch); every half TTL one scan drops the expired entries (the
hashmap form sweeps as often), and savepoints leave them out.

COUNT(DISTINCT x) (an append-only input, as in the columnar form) keeps its
count in the key's entry and each counted value as an entry of its own, in a
second column family (``group_distinct``): the key's bytes, the aggregate's
index, the value row-encoded, so a key's values are one contiguous range
right after the key.  A batch's distinct values per group come with its
pre-aggregation; only those of stored keys are looked up (one multi-get),
a new key's being all new; the new ones are counted and written in one
WriteBatch.  A key found expired has its values deleted with a range
tombstone before the batch's are written (so are those of the keys a sweep
drops).  A savepoint chunk's values are the range from its first key to past
its last, split back into key and value and gathered into the table's d{i}
lists (row_codec.split_at); a restore writes them back from the lists.
Values of types the row encoding lacks (decimals) keep the per-key form
(core.aggregates.group_agg_columnar_rows).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.aggregates import AggCall, row_encodable
from sqlstream.core.errors import JobError
from sqlstream.runtime.clock import SYSTEM_CLOCK, Clock
from sqlstream.runtime.hashing import hash_columns, key_groups_of
from sqlstream.runtime.operators.group_agg_columnar import (
    COUNT,
    HASH,
    KEY_GROUP,
    TIME,
    GroupAccumulators,
    _arrow,
    _numbers,
    _plain,
    _values,
)
from sqlstream.runtime.state.base import RowsSavepointView
from sqlstream.runtime.state.key_filter import StoredKeys
from sqlstream.runtime.state.rocksdb import RocksDBState, RocksDBStateBackend
from sqlstream.runtime.state.row_codec import RowCodec, split_at

# the keyed state (column family) holding the rows
ROWS_STATE = "group_rows"
# the keyed state holding each COUNT(DISTINCT)'s (key, value) pairs: the key's row key, the aggregate's
# index (a byte), the value row-encoded; an empty value (the count is in the key's row)
PAIRS_STATE = "group_distinct"
# above every aggregate index: a key's pairs are the range [row key, row key + PAIRS_END)
PAIRS_END = b"\xff"
# rows read from RocksDB (savepoints, TTL sweeps) or restored into it at a time: bounds the Python
# objects alive at once
CHUNK = 65536


class RocksDBGroupAggregates(GroupAccumulators):
    """The GROUP BY state of one subtask as RocksDB entries (key bytes -> accumulator bytes)."""

    def __init__(self, name: str, aggs: list[AggCall], key_types: list[pa.DataType], ttl_ms: int | None,
                 max_parallelism: int, backend: RocksDBStateBackend, clock: Clock = SYSTEM_CLOCK) -> None:
        super().__init__(aggs, key_types, ttl_ms, max_parallelism, clock)
        self.backend = backend
        rows = backend.state(ROWS_STATE)
        assert isinstance(rows, RocksDBState)
        rows.canonical = False  # written to savepoints by self.state
        self.rows = rows
        self.state = RowsSavepointView(name, self.freeze)
        self.key_codec = RowCodec(key_types, key_group=True, keys=True)
        # the stored columns: a MIN/MAX as one nullable column of its type (m{i} and v{i} in memory)
        self.stored: list[tuple[str, pa.DataType]] = [(COUNT, pa.int64())]
        for i, a in enumerate(aggs):
            if a.function in ("MIN", "MAX"):
                self.stored.append((f"m{i}", a.type))
            elif a.function == "COUNT":
                self.stored.append((f"c{i}", pa.int64()))
            else:
                self.stored.append((f"s{i}", pa.from_numpy_dtype(self.dtypes[f"s{i}"])))
                self.stored.append((f"n{i}", pa.int64()))
        if ttl_ms is not None:
            self.stored.append((TIME, pa.int64()))
        self.value_codec = RowCodec([t for _, t in self.stored])
        self.last_sweep = clock.time_ms()
        # the keys written, by hash: new keys skip their RocksDB lookup
        self.stored_keys = StoredKeys(rows, backend.memory.filter_bytes, CHUNK, self._key_hashes)
        self.distinct = [i for i, a in enumerate(aggs) if a.distinct]
        self.pairs: RocksDBState | None = None
        if self.distinct:
            pairs = backend.state(PAIRS_STATE)
            assert isinstance(pairs, RocksDBState)
            pairs.canonical = False  # in savepoints as the table's d{i} lists
            self.pairs = pairs
        # per COUNT(DISTINCT) the encoding of its values, made when their type is first seen
        self.value_codecs: dict[int, RowCodec] = {}

    @property
    def live(self) -> int:
        """Entries stored (expired ones included until a sweep drops them)."""
        return len(self.rows)

    # ------------------------------------------------------------ encoding
    def _encode_values(self, accs: dict[str, np.ndarray], written: np.ndarray | int) -> pa.BinaryArray:
        n = len(accs[COUNT])
        columns = []
        for name, t in self.stored:
            if name == TIME:
                columns.append(pa.array(np.broadcast_to(np.asarray(written, np.int64), n)))
            elif name.startswith("m"):
                columns.append(_arrow(accs[name], accs[f"v{name[1:]}"], t))
            else:
                columns.append(pa.array(accs[name]))
        return self.value_codec.encode(columns)

    def _decode_values(self, stored: pa.Array) -> dict[str, np.ndarray]:
        """Accumulator columns (and TIME) of encoded values."""
        _, columns = self.value_codec.decode(stored)
        out: dict[str, np.ndarray] = {}
        for (name, t), column in zip(self.stored, columns, strict=True):
            if name.startswith("m"):
                out[name], out[f"v{name[1:]}"] = _values(column, t)
            else:
                out[name] = _numbers(column, self.dtypes[name])
        return out

    def _key_groups(self, hashes: np.ndarray) -> np.ndarray:
        return key_groups_of(hashes, self.max_parallelism)

    # ------------------------------------------------------------ a batch
    def process(self, grouped: pa.Table, layout: list[list[str]]) -> tuple[list[pa.Array], np.ndarray] | None:
        """Merge a batch pre-aggregated by PreAggregator.grouped on (key hash, *keys), which are its
        columns k0, k1, ...; the changelog's columns and row kinds (the columnar form's)."""
        m = grouped.num_rows
        if m == 0:
            return None
        now = self.clock.time_ms()
        if self.ttl_ms is not None:
            self._sweep(now)
        keys = [_plain(grouped.column(n)) for n in self.key_names]
        hashes = _plain(grouped.column("k0")).to_numpy()
        encoded = self.key_codec.encode(keys, self._key_groups(hashes))
        # RocksDB is read and written in key order: neighbouring keys share the memtable's skip
        # list nodes and SST blocks (2-4x faster than the batch's hash order)
        order = pc.sort_indices(encoded).to_numpy()
        raw_keys = encoded.take(order).to_pylist()
        stored = self._lookup(raw_keys, order, self.stored_keys.may_contain(hashes)[order])
        existed = stored.is_valid().to_numpy(zero_copy_only=False)
        old = {name: (np.full(m, None, object) if np.dtype(dtype).kind == "O" else np.zeros(m, dtype))
               for name, dtype in self.dtypes.items() if name in self.acc_names}
        found = existed.copy()
        stale_pairs = 0
        if existed.any():
            at = np.flatnonzero(existed)
            values = self._decode_values(stored.filter(pa.array(existed)))
            if self.ttl_ms is not None:
                fresh = values[TIME] > now - self.ttl_ms  # expired entries count as absent
                found[at[~fresh]] = False
                stale_pairs = sum(int(values[f"c{i}"][~fresh].sum()) for i in self.distinct)
                at, values = at[fresh], {name: v[fresh] for name, v in values.items()}
            for name in self.acc_names:
                old[name][at] = values[name]
        added: dict[int, np.ndarray] = {}
        if self.distinct:
            # an expired key's pairs go (its returning values are new), before the batch's are written
            stale = np.flatnonzero(existed & ~found)
            self._drop_pairs([encoded[int(j)].as_py() for j in stale], stale_pairs)
            added = self._count_distinct(grouped, layout, encoded, found)
        new = self._merge(old, grouped, layout, added)
        old_results, new_results = self._results(old), self._results(new)
        alive = new[COUNT] > 0
        code = self._codes(found, alive, old_results, new_results)
        # positions in key order of the keys to write and to delete
        put = np.flatnonzero(alive[order])
        gone = np.flatnonzero((existed & ~alive)[order])
        rows = order[put]
        values = self._encode_values({n: v[rows] for n, v in new.items()}, now).to_pylist()
        put_keys = raw_keys if len(put) == m else [raw_keys[i] for i in put]  # mostly every key lives on
        added = alive & ~existed
        before = len(self.rows)
        self.backend.write_rows(ROWS_STATE, put_keys, values, [raw_keys[i] for i in gone], int(added.sum()))
        self.stored_keys.wrote(hashes[added], before)
        return self._changelog(code, keys, old_results, new_results)

    # ------------------------------------------------------------ COUNT(DISTINCT)
    def _value_codec(self, i: int, t: pa.DataType) -> RowCodec:
        codec = self.value_codecs.get(i)
        if codec is None:
            if not row_encodable(t):
                raise JobError(f"COUNT(DISTINCT) of {t} values has no row encoding for the rocksdb state backend; "
                               "run the job on the hashmap state backend")
            codec = self.value_codecs[i] = RowCodec([t], keys=True)  # -0.0 is the value 0.0
        return codec

    def _pair_keys(self, i: int, row_keys: pa.Array, values: pa.Array) -> pa.BinaryArray:
        """The pair entries' keys of aggregate ``i``: each value's key row, the index, the value."""
        encoded = self._value_codec(i, values.type).encode([values])
        return pc.binary_join_element_wise(row_keys, pa.scalar(bytes([i]), pa.binary()), encoded, b"")

    def _count_distinct(self, grouped: pa.Table, layout: list[list[str]], row_keys: pa.Array,
                        found: np.ndarray) -> dict[int, np.ndarray]:
        """Per COUNT(DISTINCT): how many values each group adds to its count (its new pairs, which
        are stored).  Only the pairs of stored keys are looked up: a new key's are all new.  The
        input is append-only (group_agg_columnar), so every group lives on after the batch."""
        assert self.pairs is not None
        added: dict[int, np.ndarray] = {}
        puts: list[pa.Array] = []
        m = len(found)
        for i in self.distinct:
            lists = _plain(grouped.column(layout[i + 1][0]))  # per group its distinct non-NULL values
            lengths = _numbers(pc.list_value_length(lists), np.int64)
            group = np.repeat(np.arange(m), lengths)
            if len(group) == 0:
                added[i] = np.zeros(m, np.int64)
                continue
            keys = self._pair_keys(i, row_keys.take(pa.array(group)), _plain(lists.flatten()))
            new = np.ones(len(group), bool)
            ask = np.flatnonzero(found[group])
            if len(ask):
                got = pa.array(self.pairs.get_many(keys.take(pa.array(ask)).to_pylist()), pa.binary())
                new[ask] = got.is_null().to_numpy(zero_copy_only=False)
            added[i] = np.bincount(group[new], minlength=m)
            puts.append(keys.filter(pa.array(new)))
        if puts:
            keys = pa.concat_arrays(puts)
            keys = keys.take(pc.sort_indices(keys)).to_pylist()  # in key order, as the rows
            self.backend.write_rows(PAIRS_STATE, keys, [b""] * len(keys), [], len(keys))
        return added

    def _drop_pairs(self, row_keys: list[bytes], count: int) -> None:
        """Delete the pairs of keys (``count``: how many they are, their COUNT(DISTINCT)s' sum)."""
        if row_keys:
            self.backend.delete_ranges(PAIRS_STATE, [(k, k + PAIRS_END) for k in row_keys], count)

    def _lists(self, raw_keys: pa.Array, pair_keys: list[bytes]) -> dict[str, pa.Array]:
        """The d{i} list columns of rows (``raw_keys``, in key order) from their pairs' keys."""
        n = len(raw_keys)
        pairs = pa.array(pair_keys, pa.binary())
        heads, rests = split_at(pairs, self.key_codec.leading_lengths(pairs))
        row = _numbers(pc.index_in(heads, value_set=raw_keys), np.int64)
        index, values = split_at(rests, np.ones(len(rests), np.int64))
        which = np.frombuffer(index.buffers()[2], np.uint8, len(index)) if len(index) else np.zeros(0, np.uint8)
        out: dict[str, pa.Array] = {}
        for i in self.distinct:
            mine = np.flatnonzero(which == i)
            codec = self.value_codecs.get(i)
            if codec is None:  # no value seen yet (nor restored): there are none
                assert len(mine) == 0
                out[f"d{i}"] = pa.array([[]] * n, pa.list_(pa.null()))
                continue
            (column,) = codec.decode(values.take(pa.array(mine)))[1]
            # pairs come in key order, so the rows' values are consecutive, in row order
            offsets = np.concatenate([[0], np.cumsum(np.bincount(row[mine], minlength=n))]).astype(np.int32)
            out[f"d{i}"] = pa.ListArray.from_arrays(pa.array(offsets), column)
        return out

    def _lookup(self, raw_keys: list[bytes], order: np.ndarray, maybe: np.ndarray) -> pa.BinaryArray:
        """The stored values of the batch's keys (``raw_keys``: in key order, ``order`` their batch
        positions) in batch order, NULL if absent; only the ``maybe`` ones (in key order) are
        looked up in RocksDB, the others are surely absent."""
        m = len(raw_keys)
        if maybe.all():
            got = pa.array(self.rows.get_many(raw_keys), pa.binary())
            back = np.empty(m, np.int64)
            back[order] = np.arange(m)
            return got.take(pa.array(back))
        ask = np.flatnonzero(maybe)
        got = pa.array(self.rows.get_many([raw_keys[i] for i in ask]) if len(ask) else [], pa.binary())
        back = np.full(m, -1, np.int64)
        back[order[ask]] = np.arange(len(ask))
        return got.take(pa.array(back, mask=back < 0))  # a NULL index gives NULL: not stored

    # ------------------------------------------------------------ the key filter
    def _key_hashes(self, raw_keys: pa.BinaryArray) -> np.ndarray:
        """The key hashes (hashing.hash_columns, as the batches' ``k0``) of stored keys' bytes."""
        _, columns = self.key_codec.decode(raw_keys)
        return hash_columns(columns) if columns else np.zeros(len(raw_keys), np.uint64)

    def _sweep(self, now: int) -> None:
        """Delete entries not written for longer than the TTL (at most every half TTL: one scan)."""
        assert self.ttl_ms is not None
        if now - self.last_sweep < self.ttl_ms / 2:
            return
        self.last_sweep = now
        expired: list[bytes] = []
        pairs = 0
        for keys, values in self.rows.scan(CHUNK):
            accs = self._decode_values(pa.array(values, pa.binary()))
            gone = np.flatnonzero(accs[TIME] <= now - self.ttl_ms)
            expired += [keys[i] for i in gone]
            pairs += sum(int(accs[f"c{i}"][gone].sum()) for i in self.distinct)
        before = len(self.rows)
        self.backend.write_rows(ROWS_STATE, [], [], expired, 0)
        if self.distinct:
            self._drop_pairs(expired, pairs)
        self.stored_keys.deleted(before)  # deleted keys stay in the filter: looked up, found absent

    # ------------------------------------------------------------ snapshots and restores
    def table(self) -> pa.Table | None:
        """The unexpired entries as the columnar form's snapshot table."""
        tables = list(self.freeze()())
        return pa.concat_tables(tables) if tables else None

    def freeze(self) -> Callable[[], Iterator[pa.Table]]:
        """The entries as they are now (a frozen view of RocksDB's files, taken here), decoded
        into the snapshot table a chunk at a time when the savepoint is written: the state is
        never whole in memory, so a savepoint of a state larger than memory can be written."""
        view = self.backend.frozen_view()
        cutoff = None if self.ttl_ms is None else self.clock.time_ms() - self.ttl_ms

        def tables() -> Iterator[pa.Table]:
            for keys, values in self.backend.scan_view(view, ROWS_STATE, CHUNK):
                # a chunk's pairs: from its first key to past its last key's (pair keys extend row keys)
                pairs = (self.backend.scan_view_range(view, PAIRS_STATE, keys[0], keys[-1] + PAIRS_END)
                         if self.distinct else [])
                table = self._snapshot_table(pa.array(keys, pa.binary()), pa.array(values, pa.binary()), cutoff,
                                             pairs)
                if table is not None:
                    yield table

        return tables

    def _snapshot_table(self, raw_keys: pa.Array, raw_values: pa.Array, cutoff: int | None,
                        pair_keys: list[bytes]) -> pa.Table | None:
        kgs, key_columns = self.key_codec.decode(raw_keys)
        lists = self._lists(raw_keys, pair_keys) if self.distinct else {}
        assert kgs is not None
        accs = self._decode_values(raw_values)
        keep = np.ones(len(raw_keys), bool) if cutoff is None else accs[TIME] > cutoff
        if not keep.any():
            return None
        mask = pa.array(keep)
        key_columns = [c.filter(mask) for c in key_columns]
        accs = {name: v[keep] for name, v in accs.items()}
        hashes = hash_columns(key_columns) if key_columns else np.zeros(int(keep.sum()), np.uint64)
        out: dict[str, pa.Array] = {HASH: pa.array(hashes), KEY_GROUP: pa.array(kgs[keep].astype(np.int16))}
        out.update(zip(self.key_names, key_columns, strict=True))
        for name, t in self.stored:
            out[name] = _arrow(accs[name], accs[f"v{name[1:]}"], t) if name.startswith("m") else pa.array(accs[name])
        out.update({name: column.filter(mask) for name, column in lists.items()})
        return pa.table(out)

    def load(self, table: pa.Table) -> None:
        """Write the keys of a snapshot table (restored, or converted from the per-key form)."""
        # a table holds each key once: into empty rows every key is new, nothing need be looked up
        fresh = len(self.rows) == 0
        for start in range(0, table.num_rows, CHUNK):  # bounded memory: a restore may hold millions
            self._load(table.slice(start, CHUNK).combine_chunks(), fresh)

    def _load_pairs(self, table: pa.Table, row_keys: pa.Array, fresh: bool) -> None:
        """Write the pairs of a snapshot table's d{i} lists (``row_keys``: its rows' keys)."""
        assert self.pairs is not None or not self.distinct
        puts: list[pa.Array] = []
        for i in self.distinct:
            lists = _plain(table.column(f"d{i}"))
            if lists.type.value_type == pa.null():  # a snapshot without values has no type for them
                continue
            lengths = _numbers(pc.list_value_length(lists), np.int64)
            puts.append(self._pair_keys(i, row_keys.take(pa.array(np.repeat(np.arange(len(lists)), lengths))),
                                        _plain(lists.flatten())))
        if not puts:
            return
        keys = pa.concat_arrays(puts)
        keys = keys.take(pc.sort_indices(keys)).to_pylist()
        assert self.pairs is not None
        absent = len(keys) if fresh else pa.array(self.pairs.get_many(keys), pa.binary()).null_count
        self.backend.write_rows(PAIRS_STATE, keys, [b""] * len(keys), [], absent)

    def _load(self, table: pa.Table, fresh: bool) -> None:
        values = self._table_values(table)
        # restored under another TTL setting: restored keys count as written now
        written = table.column(TIME).to_numpy() if TIME in table.column_names else self.clock.time_ms()
        keys = [_plain(table.column(n)) for n in self.key_names]
        # the key group from the hash, as the columnar form has it (a converted table has no $kg)
        hashes = _plain(table.column(HASH)).to_numpy()
        kgs = self._key_groups(hashes)
        encoded = self.key_codec.encode(keys, kgs)
        order = pc.sort_indices(encoded).to_numpy()  # written in key order, as process writes
        raw_keys = encoded.take(order).to_pylist()
        # otherwise some may be stored already: the entry count must stay exact (the filter tells
        # most of the surely absent ones, as in process: a restore's keys are all new)
        absent = len(raw_keys) if fresh else len(raw_keys) - int(self._lookup(
            raw_keys, order, self.stored_keys.may_contain(hashes)[order]).is_valid().to_numpy(zero_copy_only=False).sum())
        raw_values = self._encode_values(values, written).take(pa.array(order)).to_pylist()
        before = len(self.rows)
        self.backend.write_rows(ROWS_STATE, raw_keys, raw_values, [], absent)
        self.stored_keys.wrote(hashes, before)
        self._load_pairs(table, encoded, fresh)
