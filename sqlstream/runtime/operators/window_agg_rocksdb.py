"""The vectorized window aggregation with its partials in RocksDB: Arrow speed, memory bounded by RocksDB.

The columnar form (window_agg_columnar.py) keeps every (window, key)'s
partial aggregates as Arrow tables in memory, so a 1-hour HOP over millions
of keys cannot have its memory bounded; the per-key form on rocksdb takes a
Python step per (window, key) and batch.  Here one RocksDB entry per
(window, key) holds its merged partials, and each batch, pre-aggregated by
the columnar form's own Arrow group-by (ColumnarWindowAggregates.add), is
merged with a handful of calls over all its (window, key)s:

- the key is ``key group (2 bytes, big-endian) | window end (8 bytes,
  big-endian, sign bit flipped) | window start and group keys`` (the last part
  by runtime.state.row_codec).  Each key group is one contiguous range (the
  rescaling restore copies ranges), and inside it the windows are in end
  order, so the windows due at a watermark are one range per key group: a
  range scan reads them and a delete-range drops them;
- the batch's keys are sorted (RocksDB is 2-4x faster read and written in
  key order), looked up with ONE multi-get, the stored partials decoded by
  the row codec and merged element-wise with the batch's (sum, min, max as
  the columnar form's merges), encoded again and written with ONE WriteBatch;
- firing turns the scanned rows back into the columnar form's merged table
  and computes the results with its code (ColumnarWindowAggregates.results).

In memory stay only the window ends that hold state and the key groups that
were written (to know which ranges to scan): windows, not keys.  After a
restore both are found by seeking, per key group, from one window end to the
next (no entry is read beyond the first of each window).

Snapshots: the entries live in a column family of the backend's db (keyed
state ``window_rows``), so its incremental checkpoints carry them and a
rescaled restore copies the key-group ranges it owns.  Savepoints must be
readable by every backend: the state's ColumnarState (``partials``,
``savepoint_only``) writes the table the columnar form writes ($end, $start,
$kg, keys, partials), which the hashmap form restores as it is and this form
merges back into RocksDB.  Both ways go a chunk at a time: the savepoint reads a
frozen view of RocksDB's files when it is written (in key order, so its restore
into empty state looks no key up), a restore takes the file a batch at a time.

COUNT(DISTINCT) keeps the per-key form on rocksdb (its values per window and
key would need an entry per value): core.aggregates.window_agg_columnar_rows.
SESSION windows keep their own operator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from rocksdict import ReadOptions

from sqlstream.core.aggregates import AggCall
from sqlstream.runtime.operators.window_agg_columnar import ColumnarWindowAggregates
from sqlstream.runtime.state.base import ColumnarState, RowsSavepointView
from sqlstream.runtime.state.rocksdb import RocksDBState, RocksDBStateBackend
from sqlstream.runtime.state.row_codec import RowCodec
from sqlstream.runtime.windows import WindowClock

# the keyed state (column family) holding the (window, key) entries
ROWS_STATE = "window_rows"
# the columnar state name savepoints carry the partials under (the columnar form's)
PARTIALS = "partials"
# entries read from RocksDB (savepoints) or restored into it at a time: bounds the Python objects
CHUNK = 65536
_PREFIX = np.dtype([("kg", ">u2"), ("end", ">u8")])
_SIGN = np.uint64(1 << 63)  # flipped so that negative ends sort before positive ones bytewise
_LOWEST = -(1 << 63)


def _prefixes(kgs: np.ndarray, ends: np.ndarray) -> pa.BinaryArray:
    """Each row's key prefix (key group, window end) as binary values."""
    n = len(kgs)
    rec = np.empty(n, _PREFIX)
    rec["kg"] = kgs
    rec["end"] = ends.astype(np.int64).view(np.uint64) ^ _SIGN
    offsets = pa.py_buffer(np.arange(0, (n + 1) * _PREFIX.itemsize, _PREFIX.itemsize, dtype=np.int32))
    return pa.Array.from_buffers(pa.binary(), n, [None, offsets, pa.py_buffer(rec)])


def _bound(kg: int, end: int) -> bytes:
    """The first possible key of window end ``end`` in key group ``kg``."""
    return _prefixes(np.array([kg]), np.array([end], np.int64))[0].as_py()


def _end_of(key: bytes) -> int:
    """The window end of a stored key."""
    flipped = np.frombuffer(key, ">u8", 1, 2).astype(np.uint64) ^ _SIGN
    return int(flipped.view(np.int64)[0])


class RocksDBWindowAggregates(ColumnarWindowAggregates):
    """The window aggregation state of one subtask as RocksDB entries ((window, key) -> partials)."""

    def __init__(self, aggs: list[AggCall], key_types: list[pa.DataType], backend: RocksDBStateBackend) -> None:
        super().__init__(aggs, len(key_types), ColumnarState(PARTIALS), [])
        self.partials = RowsSavepointView(PARTIALS, self.freeze)
        self.backend = backend
        rows = backend.state(ROWS_STATE)
        assert isinstance(rows, RocksDBState)
        rows.canonical = False  # written to savepoints by self.partials
        self.rows = rows
        self.key_codec = RowCodec([pa.int64(), *key_types], keys=True)
        self.key_types = key_types
        # the stored partial columns, as the columnar form names them, in the types it computes
        self.stored: list[tuple[str, pa.DataType]] = []
        for i, a in enumerate(aggs):
            if a.function == "COUNT":
                self.stored.append((f"p{i}", pa.int64()))
            elif a.function in ("SUM", "AVG"):
                self.stored += [(f"p{i}", pa.int64() if pa.types.is_integer(a.type) else pa.float64()),
                                (f"n{i}", pa.int64())]
            else:
                self.stored.append((f"p{i}", a.type))
        self.merge_of = dict(self.merges)
        self.value_codec = RowCodec([t for _, t in self.stored])
        self.ends: set[int] = set()  # window ends that hold entries
        self.kgs: set[int] = set()  # key groups that may hold entries
        self._recover()

    def _recover(self) -> None:
        """Find the window ends and key groups of restored entries: per key group one seek per window."""
        if len(self.rows) == 0:
            return
        it = self.rows.cf.iter(ReadOptions())
        for kg in self.backend.key_groups:
            prefix = kg.to_bytes(2, "big")
            it.seek(_bound(kg, _LOWEST))
            while it.valid() and it.key()[:2] == prefix:
                end = _end_of(it.key())
                self.ends.add(end)
                self.kgs.add(kg)
                if end == (1 << 63) - 1:
                    break
                it.seek(_bound(kg, end + 1))
        del it

    # ------------------------------------------------------------ merging
    def _append(self, state: ColumnarState, table: pa.Table) -> None:
        """Merge partials, one row per (window, key), into the stored entries."""
        self._write(table, None)

    def _write(self, table: pa.Table, above: bytes | None) -> bytes | None:
        """Merge partials, one row per (window, key), into the stored entries; ``above``: every
        stored key is at most this one (None: unknown), so keys beyond it need not be looked up.
        Returns the greatest key written."""
        m = table.num_rows
        if m == 0:
            return None
        kgs = table.column("$kg").to_numpy().astype(np.int64)
        ends = table.column("$end").cast(pa.int64()).to_numpy()
        tails = self.key_codec.encode([table.column("$start").cast(pa.int64()),
                                       *(table.column(f"k{i}").cast(t) for i, t in enumerate(self.key_types))])
        encoded = pc.binary_join_element_wise(_prefixes(kgs, ends), tails, b"")
        # read and written in key order: neighbouring keys share memtable nodes and SST blocks
        order = pc.sort_indices(encoded)
        raw_keys = encoded.take(order).to_pylist()
        table = table.take(order)
        if above is not None and raw_keys[0] > above:
            stored = pa.nulls(m, pa.binary())  # all new: a restore in key order skips the multi-get
        else:
            stored = pa.array(self.rows.get_many(raw_keys), pa.binary())
        found = stored.is_valid()
        new = [table.column(name).cast(t).combine_chunks() for name, t in self.stored]
        existing = m - stored.null_count
        if existing and self.stored:
            old = self._decode_values(stored.filter(found))
            new = [pc.replace_with_mask(column, found, self._merge(name, before, column.filter(found)))
                   for (name, _), before, column in zip(self.stored, old, new, strict=True)]
        values = self.value_codec.encode(new).to_pylist() if self.stored else [b""] * m
        self.backend.write_rows(ROWS_STATE, raw_keys, values, [], m - existing)
        self.ends.update(np.unique(ends).tolist())
        self.kgs.update(np.unique(kgs).tolist())
        return raw_keys[-1]

    def _merge(self, name: str, old: pa.Array, new: pa.Array) -> pa.Array:
        """Stored and new partials of the same (window, key)s merged as the columnar form's group-by
        merges them (an integer sum wraps around, MIN/MAX skip NULLs)."""
        how = self.merge_of[name]
        if how == "sum":
            return pc.add(old, new)
        pick = pc.min_element_wise if how == "min" else pc.max_element_wise
        t = old.type
        # Arrow's element-wise min/max have no kernel for booleans and zoned timestamps: compared as
        # the integers they hold (FALSE < TRUE, instants in order)
        storage = pa.int8() if pa.types.is_boolean(t) else pa.int64() if pa.types.is_timestamp(t) and t.tz else None
        if storage is None:
            return pick(old, new)
        return pick(old.cast(storage), new.cast(storage)).cast(t)

    def _decode_values(self, raw_values: pa.Array) -> list[pa.Array]:
        """The partial columns of stored values (none: a window aggregation without aggregates
        stores empty values, its keys are all it keeps)."""
        return self.value_codec.decode(raw_values)[1] if self.stored else []

    def load(self, tables: Iterable[pa.Table]) -> None:
        """Merge restored partials tables (possibly several rows per (window, key)), a chunk at a time.

        Into empty state, a chunk whose keys all sort after every key written before holds only
        new keys: this form's savepoints are in key order, so their restore looks nothing up."""
        high = b"" if len(self.rows) == 0 else None  # the greatest key stored, when known
        for table in tables:
            for start in range(0, table.num_rows, CHUNK):
                last = self._write(self.combine(table.slice(start, CHUNK)), high)
                if high is not None and last is not None:
                    high = max(high, last)

    def compact(self) -> None:
        """Nothing to compact: every batch is merged into its entries as it comes."""

    def min_end(self) -> int | None:
        return min(self.ends) if self.ends else None

    # ------------------------------------------------------------ firing
    def fire(self, watermark: int, clock: WindowClock) -> tuple[pa.Table, list[pa.Array]] | None:
        """The entries of windows that fire at ``watermark`` (deleted) and their results."""
        due = [end for end in self.ends if clock.fire_time(end) <= watermark]
        if not due:
            return None
        # fire times grow with the window end: every stored end up to the last due one is due
        limit = max(due) + 1
        chunks: list[tuple[pa.Array, pa.Array]] = []
        ranges: list[tuple[bytes, bytes]] = []
        for kg in sorted(self.kgs):
            low, high = _bound(kg, _LOWEST), _bound(kg, limit)
            before = len(chunks)
            chunks += [(pa.array(k, pa.binary()), pa.array(v, pa.binary()))
                       for k, v in self.rows.scan_range(low, high, CHUNK)]
            if len(chunks) > before:
                ranges.append((low, high))
        self.ends.difference_update(due)
        if not self.ends:
            self.kgs.clear()
        if not chunks:
            return None
        fired = pa.concat_tables([self._table(k, v) for k, v in chunks])
        self.backend.delete_ranges(ROWS_STATE, ranges, fired.num_rows)
        fired = fired.sort_by([("$end", "ascending"), ("$start", "ascending")])
        return fired, self.results(fired, watermark, clock)

    # ------------------------------------------------------------ entries as tables
    def _table(self, raw_keys: pa.Array, raw_values: pa.Array) -> pa.Table:
        """Entries as the columnar form's merged partials table."""
        n = len(raw_keys)
        offsets = np.frombuffer(raw_keys.buffers()[1], np.int32, n + 1, raw_keys.offset * 4)
        data = np.frombuffer(raw_keys.buffers()[2], np.uint8)
        prefix = data[offsets[:-1, None] + np.arange(_PREFIX.itemsize)].reshape(-1).view(_PREFIX)
        ends = (prefix["end"].astype(np.uint64) ^ _SIGN).view(np.int64)
        _, keys = self.key_codec.decode(pc.binary_slice(raw_keys, _PREFIX.itemsize, 2**31 - 1))
        values = self._decode_values(raw_values)
        columns = {"$end": pa.array(ends), "$start": keys[0], "$kg": pa.array(prefix["kg"].astype(np.int64))}
        columns.update({f"k{i}": column for i, column in enumerate(keys[1:])})
        columns.update({name: column for (name, _), column in zip(self.stored, values, strict=True)})
        return pa.table(columns)

    def freeze(self) -> Callable[[], Iterator[pa.Table]]:
        """The entries as they are now (a frozen view of RocksDB's files, taken here), decoded into
        the columnar form's table a chunk at a time when the savepoint is written: the state is never
        whole in memory, so a savepoint of a state larger than memory can be written."""
        view = self.backend.frozen_view()

        def tables() -> Iterator[pa.Table]:
            for keys, values in self.backend.scan_view(view, ROWS_STATE, CHUNK):
                yield self._table(pa.array(keys, pa.binary()), pa.array(values, pa.binary()))

        return tables
