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

HOP and CUMULATE windows are kept as slices, as Flink's SliceSharedWindowAggProcessor
does: a row lies in size/slide windows but in one slice (the slide- or step-long pane
ending at its first window end; the size is a multiple of it, Flink refuses other sizes
at plan time), so each batch reads and writes one entry per (slice, key) instead of
size/slide.  Slices live in their own column family (``window_slices``,
keyed ``key group | slice end | slice start and group keys``); when windows are due their
slices (one range per key group) are read, expanded to the due windows and merged by the
columnar form's group-by, and a slice is deleted (one delete-range per key group) once the
last window it belongs to fired.  Which windows fired is kept per key group in the state
itself (an entry after the key group's slices, ``key group | max end``, holding the last
firing watermark), so a checkpoint restored or rescaled without the operator's watermark
still never fires a window twice.  ``window_rows`` keeps whole-window entries: TUMBLE (a
window is one slice), cascaded windows, and windows restored from a savepoint (a window's
partial cannot be split into slices: it stays an entry of its own, merged with the slices
of the rows that came after, until it fires).  A checkpoint written before slicing holds
only ``window_rows``, which restores as such.  Savepoints still hold windows (the hashmap
form's table): the slices are expanded to their unfired windows and merged, a key group at
a time, in key order.

COUNT(DISTINCT) keeps the per-key form on rocksdb (its values per window and
key would need an entry per value): core.aggregates.window_agg_columnar_rows.
SESSION windows keep their own operator.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from rocksdict import ReadOptions

from sqlstream.core.aggregates import AggCall
from sqlstream.core.windows import WindowSpec
from sqlstream.runtime.operators.window_agg_columnar import ColumnarWindowAggregates
from sqlstream.runtime.state.base import ColumnarState, RowsSavepointView, SnapshotFormatError
from sqlstream.runtime.state.rocksdb import RocksDBState, RocksDBStateBackend
from sqlstream.runtime.state.row_codec import RowCodec
from sqlstream.runtime.windows import (
    WindowClock,
    slice_size,
    slice_windows,
    window_starts,
)

# the keyed state (column family) holding the (window, key) entries
ROWS_STATE = "window_rows"
# the keyed state holding the (slice, key) entries of HOP and CUMULATE windows
SLICES_STATE = "window_slices"
# the columnar state name savepoints carry the partials under (the columnar form's)
PARTIALS = "partials"
# entries read from RocksDB (savepoints) or restored into it at a time: bounds the Python objects
CHUNK = 65536
_PREFIX = np.dtype([("kg", ">u2"), ("end", ">u8")])
_SIGN = np.uint64(1 << 63)  # flipped so that negative ends sort before positive ones bytewise
_FLIP = 1 << 63
_MASK = (1 << 64) - 1  # a negative end as its two's complement
_LOWEST = -(1 << 63)
UTC_CLOCK = WindowClock(None)  # windows on TIMESTAMP: bounds and watermarks on one scale
_HIGHEST = (1 << 63) - 1  # the end of a key group's marker entry in the slices (after every slice)


def _prefixes(kgs: np.ndarray, ends: np.ndarray) -> pa.BinaryArray:
    """Each row's key prefix (key group, window end) as binary values."""
    n = len(kgs)
    rec = np.empty(n, _PREFIX)
    rec["kg"] = kgs
    rec["end"] = ends.astype(np.int64).view(np.uint64) ^ _SIGN
    offsets = pa.py_buffer(np.arange(0, (n + 1) * _PREFIX.itemsize, _PREFIX.itemsize, dtype=np.int32))
    return pa.Array.from_buffers(pa.binary(), n, [None, offsets, pa.py_buffer(rec)])


def _bound(kg: int, end: int) -> bytes:
    """The first possible key of window end ``end`` in key group ``kg`` (as _prefixes encodes it;
    plain Python: a firing asks it twice per key group)."""
    return kg.to_bytes(2, "big") + ((end & _MASK) ^ _FLIP).to_bytes(8, "big")


def _end_of(key: bytes) -> int:
    """The window end of a stored key."""
    flipped = int.from_bytes(key[2:10], "big") ^ _FLIP
    return flipped - (1 << 64) if flipped >= 1 << 63 else flipped


class RocksDBWindowAggregates(ColumnarWindowAggregates):
    """The window aggregation state of one subtask as RocksDB entries ((window or slice, key) -> partials)."""

    def __init__(self, aggs: list[AggCall], key_types: list[pa.DataType], backend: RocksDBStateBackend,
                 window: WindowSpec | None = None, clock: WindowClock = UTC_CLOCK) -> None:
        """``window``: the windows rows are assigned to here (None: cascaded, each row brings its
        window); HOP and CUMULATE windows of several slices are then kept as slices."""
        super().__init__(aggs, len(key_types), ColumnarState(PARTIALS), [])
        self.partials = RowsSavepointView(PARTIALS, self.freeze)
        self.backend = backend
        self.clock = clock
        self.slicing = window if window is not None and slice_size(window) is not None else None
        self.rows = self._state(ROWS_STATE)
        self.slices = self._state(SLICES_STATE)
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
        self.columns = [*self.keys, *(name for name, _ in self.stored)]  # of every table read back
        self.merge_of = dict(self.merges)
        self.value_codec = RowCodec([t for _, t in self.stored])
        self.ends: set[int] = set()  # window ends that hold whole-window entries
        self.kgs: set[int] = set()  # key groups that may hold whole-window entries
        self.slice_ends: set[int] = set()  # slice ends that hold entries
        self.slice_kgs: set[int] = set()  # key groups that may hold slices
        self.pending: set[int] = set()  # ends of the windows with state that have not fired
        # per key group (from the backend's first): the watermark windows fired through (a window
        # of a slice fires once: the marker entries keep this across restores and rescaling)
        self.fired_through = np.full(len(backend.key_groups), _LOWEST, np.int64)
        self.marked: set[int] = set()  # key groups with a marker entry
        self._recover()

    def _state(self, name: str) -> RocksDBState:
        state = self.backend.state(name)
        assert isinstance(state, RocksDBState)
        state.canonical = False  # written to savepoints by self.partials
        return state

    def _recover(self) -> None:
        """Find the window and slice ends and key groups of restored entries, and each key group's
        fired-through watermark: per key group one seek per window or slice."""
        base = self.backend.key_groups.start
        for state, ends, kgs in ((self.rows, self.ends, self.kgs), (self.slices, self.slice_ends, self.slice_kgs)):
            if len(state) == 0:
                continue
            it = state.cf.iter(ReadOptions())
            for kg in self.backend.key_groups:
                prefix = kg.to_bytes(2, "big")
                it.seek(_bound(kg, _LOWEST))
                while it.valid() and it.key()[:2] == prefix:
                    end = _end_of(it.key())
                    if end == _HIGHEST:  # a slices marker: the key group's last firing watermark
                        self.fired_through[kg - base] = int.from_bytes(it.value(), "big", signed=True)
                        self.marked.add(kg)
                        break
                    ends.add(end)
                    kgs.add(kg)
                    it.seek(_bound(kg, end + 1))
            del it
        self.pending.update(self.ends)
        if self.slice_ends and self.slicing is None:
            raise SnapshotFormatError(
                "the restored window aggregation state holds HOP or CUMULATE slices, but this window "
                "aggregation's windows are not made of slices: the state belongs to another query")
        if self.slicing is not None and self.slice_ends:
            _, window_ends = slice_windows(self.slicing, np.fromiter(self.slice_ends, np.int64))
            fired = min(int(self.fired_through[kg - base]) for kg in self.slice_kgs)
            unfired = window_ends[self.clock.fire_times(window_ends) > fired]
            self.pending.update(np.unique(unfired).tolist())

    # ------------------------------------------------------------ merging
    def add(self, keys: list[pa.Array], batch: pa.RecordBatch) -> None:
        """Pre-aggregate rows assigned to windows, or to slices (``slicing``), into their entries."""
        table = self.pre_aggregate(self._inputs(keys, batch))
        self._write(table, None, SLICES_STATE if self.slicing is not None else ROWS_STATE)

    def _append(self, state: ColumnarState, table: pa.Table) -> None:
        """Merge partials, one row per (window, key), into the stored entries."""
        self._write(table, None, ROWS_STATE)

    def _encoded_keys(self, table: pa.Table) -> pa.Array:
        """The RocksDB keys of a partials table's rows."""
        kgs = table.column("$kg").to_numpy().astype(np.int64)
        ends = table.column("$end").cast(pa.int64()).to_numpy()
        tails = self.key_codec.encode([table.column("$start").cast(pa.int64()),
                                       *(table.column(f"k{i}").cast(t) for i, t in enumerate(self.key_types))])
        return pc.binary_join_element_wise(_prefixes(kgs, ends), tails, b"")

    def _write(self, table: pa.Table, above: bytes | None, name: str) -> bytes | None:
        """Merge partials, one row per (window or slice, key), into the entries of state ``name``;
        ``above``: every stored key is at most this one (None: unknown), so keys beyond it need
        not be looked up.  Returns the greatest key written."""
        m = table.num_rows
        if m == 0:
            return None
        state = self.rows if name == ROWS_STATE else self.slices
        encoded = self._encoded_keys(table)
        # read and written in key order: neighbouring keys share memtable nodes and SST blocks
        order = pc.sort_indices(encoded)
        raw_keys = encoded.take(order).to_pylist()
        table = table.take(order)
        if above is not None and raw_keys[0] > above:
            stored = pa.nulls(m, pa.binary())  # all new: a restore in key order skips the multi-get
        else:
            stored = pa.array(state.get_many(raw_keys), pa.binary())
        found = stored.is_valid()
        new = [table.column(name).cast(t).combine_chunks() for name, t in self.stored]
        existing = m - stored.null_count
        if existing and self.stored:
            old = self._decode_values(stored.filter(found))
            new = [pc.replace_with_mask(column, found, self._merge(name, before, column.filter(found)))
                   for (name, _), before, column in zip(self.stored, old, new, strict=True)]
        values = self.value_codec.encode(new).to_pylist() if self.stored else [b""] * m
        self.backend.write_rows(name, raw_keys, values, [], m - existing)
        ends = np.unique(table.column("$end").cast(pa.int64()).to_numpy())
        kgs = np.unique(table.column("$kg").to_numpy()).tolist()
        if name == ROWS_STATE:
            self.ends.update(ends.tolist())
            self.kgs.update(kgs)
            self.pending.update(ends.tolist())
        else:
            assert self.slicing is not None
            fresh = np.array([e for e in ends.tolist() if e not in self.slice_ends], np.int64)
            if len(fresh):  # on time: none of a new slice's windows has fired
                self.pending.update(np.unique(slice_windows(self.slicing, fresh)[1]).tolist())
                self.slice_ends.update(fresh.tolist())
            self.slice_kgs.update(kgs)
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
        """Merge restored partials tables (possibly several rows per (window, key)), a chunk at a
        time, as whole-window entries.

        Into empty state, a chunk whose keys all sort after every key written before holds only
        new keys: this form's savepoints are in key order, so their restore looks nothing up."""
        high = b"" if len(self.rows) == 0 else None  # the greatest key stored, when known
        for table in tables:
            for start in range(0, table.num_rows, CHUNK):
                last = self._write(self.combine(table.slice(start, CHUNK)), high, ROWS_STATE)
                if high is not None and last is not None:
                    high = max(high, last)

    def compact(self) -> None:
        """Nothing to compact: every batch is merged into its entries as it comes."""

    def min_end(self) -> int | None:
        return min(self.pending) if self.pending else None

    # ------------------------------------------------------------ firing
    def fire(self, watermark: int, clock: WindowClock) -> tuple[pa.Table, list[pa.Array]] | None:
        """The windows that fire at ``watermark`` and their results; their whole-window entries,
        and the slices whose last window fired, are deleted."""
        due = [end for end in self.pending if clock.fire_time(end) <= watermark]
        if not due:
            return None
        self.pending.difference_update(due)
        # every due window ends before ``limit``; not every end before it is due: across a skipped
        # hour of a zone (clocks turned forward) a later end may fire earlier (WindowClock.fire_times)
        limit = max(due) + 1
        tables = [self._fire_windows(due, limit)]
        if self.slice_ends:
            tables.append(self._fire_slices(limit, watermark, clock))
        self._mark(watermark)
        tables = [t for t in tables if t is not None and t.num_rows]
        if not tables:
            return None
        fired = tables[0] if len(tables) == 1 and self.slicing is None else self.combine(pa.concat_tables(tables))
        fired = fired.sort_by([("$end", "ascending"), ("$start", "ascending")])
        return fired, self.results(fired, watermark, clock)

    def _fire_windows(self, due: list[int], limit: int) -> pa.Table | None:
        """The whole-window entries of the ``due`` windows (all ending before ``limit``), deleted."""
        ends = sorted(self.ends.intersection(due))
        if not ends:
            return None
        chunks: list[tuple[pa.Array, pa.Array]] = []
        ranges: list[tuple[bytes, bytes]] = []
        for kg in sorted(self.kgs):
            before = len(chunks)
            chunks += [(pa.array(k, pa.binary()), pa.array(v, pa.binary()))
                       for k, v in self.rows.scan_range(_bound(kg, ends[0]), _bound(kg, limit), CHUNK)]
            if len(chunks) > before:
                ranges += [(_bound(kg, end), _bound(kg, end + 1)) for end in ends]
        self.ends.difference_update(ends)
        if not self.ends:
            self.kgs.clear()
        if not chunks:
            return None
        scanned = pa.concat_tables([self._table(k, v) for k, v in chunks])
        fired = scanned.filter(pc.is_in(scanned.column("$end"), pa.array(ends, pa.int64())))
        self.backend.delete_ranges(ROWS_STATE, ranges, fired.num_rows)
        return fired

    def _fire_slices(self, limit: int, watermark: int, clock: WindowClock) -> pa.Table | None:
        """The slices of the windows due at ``watermark`` (all of them end before ``limit``),
        expanded to those windows; the slices whose last window is among them are deleted."""
        assert self.slicing is not None
        chunks: list[tuple[pa.Array, pa.Array]] = []
        scanned: list[int] = []
        keys: list[bytes] = []
        values: list[bytes] = []
        for kg in sorted(self.slice_kgs):
            # a key group's slices are often few: gathered into CHUNK-sized tables across key groups
            found = False
            for k, v in self.slices.scan_range(_bound(kg, _LOWEST), _bound(kg, limit), CHUNK):
                found = True
                keys += k
                values += v
                if len(keys) >= CHUNK:
                    chunks.append((pa.array(keys, pa.binary()), pa.array(values, pa.binary())))
                    keys, values = [], []
            if found:
                scanned.append(kg)
        if keys:
            chunks.append((pa.array(keys, pa.binary()), pa.array(values, pa.binary())))
        slices = pa.concat_tables([self._table(k, v) for k, v in chunks]) if chunks else None
        # a slice is done once every window it belongs to fired (its last window's end need not
        # fire last: across a skipped hour a later end may fire earlier)
        ends = np.fromiter(self.slice_ends, np.int64, len(self.slice_ends))
        index, window_ends = slice_windows(self.slicing, ends)
        last_fire = np.full(len(ends), _LOWEST, np.int64)
        np.maximum.at(last_fire, index, clock.fire_times(window_ends))
        expired = np.sort(ends[last_fire <= watermark])
        if len(expired):
            removed = 0
            if slices is not None:
                removed = int(np.count_nonzero(np.isin(slices.column("$end").to_numpy(), expired)))
            self.backend.delete_ranges(SLICES_STATE, [(_bound(kg, s), _bound(kg, s + 1))
                                                      for kg in scanned for s in expired.tolist()], removed)
            self.slice_ends.difference_update(expired.tolist())
        if slices is None:
            return None
        return self._expand(slices, self.fired_through, watermark)

    def _expand(self, slices: pa.Table, fired: np.ndarray, watermark: int | None) -> pa.Table:
        """Slices as rows of the windows they belong to that have not fired in their key group
        (``fired``: the watermark each key group fired through) and fire at ``watermark`` (None:
        all of them)."""
        assert self.slicing is not None
        index, window_ends = slice_windows(self.slicing, slices.column("$end").to_numpy())
        fire_times = self.clock.fire_times(window_ends)
        mask = fire_times > fired[slices.column("$kg").to_numpy()[index] - self.backend.key_groups.start]
        if watermark is not None:
            mask &= fire_times <= watermark
        window_ends = window_ends[mask]
        rows = slices.take(pa.array(index[mask]))
        rows = rows.set_column(0, "$end", pa.array(window_ends))
        return rows.set_column(1, "$start", pa.array(window_starts(self.slicing, window_ends)))

    def _mark(self, watermark: int) -> None:
        """Every key group fired through ``watermark``: kept in the marker entry of each key group
        with slices; once no slice is left, the markers go too (nothing fired remains)."""
        np.maximum(self.fired_through, watermark, out=self.fired_through)
        if self.slice_ends:
            kgs = sorted(self.slice_kgs)
            value = watermark.to_bytes(8, "big", signed=True)
            self.backend.write_rows(SLICES_STATE, [_bound(kg, _HIGHEST) for kg in kgs], [value] * len(kgs), [],
                                    len(self.slice_kgs - self.marked))
            self.marked.update(kgs)
        else:
            if self.marked:
                self.backend.write_rows(SLICES_STATE, [], [], [_bound(kg, _HIGHEST) for kg in sorted(self.marked)], 0)
            self.marked.clear()
            self.slice_kgs.clear()

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
        """The state as it is now (frozen views of RocksDB's files, taken here) as the columnar
        form's table of windows, decoded a chunk at a time when the savepoint is written: the state
        is never whole in memory, so a savepoint of a state larger than memory can be written.
        Slices become the rows of their unfired windows, merged and in key order a key group at a
        time."""
        rows_view = self.backend.frozen_view() if len(self.rows) else None
        slices_view = self.backend.frozen_view() if len(self.slices) else None
        fired = self.fired_through.copy()

        def tables() -> Iterator[pa.Table]:
            if rows_view is not None:
                for keys, values in self.backend.scan_view(rows_view, ROWS_STATE, CHUNK):
                    yield self._table(pa.array(keys, pa.binary()), pa.array(values, pa.binary()))
            if slices_view is not None:
                yield from self._slice_windows(self.backend.scan_view(slices_view, SLICES_STATE, CHUNK), fired)

        return tables

    def _slice_windows(self, chunks: Iterator[tuple[list[bytes], list[bytes]]],
                       fired: np.ndarray) -> Iterator[pa.Table]:
        """The unfired windows of scanned slices (in key order), a key group at a time (its slices
        are contiguous): expanded and merged, and given in key order.  In memory: one key group's
        slices and windows."""
        held: list[pa.Table] = []  # the slices of the key group being read
        held_kg = -1
        for keys, values in chunks:
            raw_keys = pa.array(keys, pa.binary())
            entry = pc.not_equal(pc.binary_length(raw_keys), _PREFIX.itemsize)  # not a marker
            table = self._table(raw_keys.filter(entry), pa.array(values, pa.binary()).filter(entry))
            kgs = table.column("$kg").to_numpy()
            bounds = [0, *(np.flatnonzero(np.diff(kgs)) + 1).tolist(), len(kgs)]
            for start, stop in itertools.pairwise(bounds):
                if stop == start:
                    continue
                if int(kgs[start]) != held_kg and held:
                    yield from self._merged_windows(held, fired)
                    held = []
                held.append(table.slice(start, stop - start))
                held_kg = int(kgs[start])
        if held:
            yield from self._merged_windows(held, fired)

    def _merged_windows(self, slices: list[pa.Table], fired: np.ndarray) -> Iterator[pa.Table]:
        """A key group's slices as their unfired windows' merged partials, in key order."""
        merged = self.combine(self._expand(pa.concat_tables(slices), fired, None)).select(self.columns)
        merged = merged.take(pc.sort_indices(self._encoded_keys(merged)))
        for start in range(0, merged.num_rows, CHUNK):
            yield merged.slice(start, CHUNK)
