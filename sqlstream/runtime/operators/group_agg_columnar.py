"""The vectorized form of the non-windowed GROUP BY: accumulators in numpy columns, one slot per key.

The per-key form (group_agg.py) costs a Python step per key and batch, which
is the hot path of every updating aggregation (Nexmark q4).  Here each key of
the subtask owns a *slot*: a position in numpy arrays holding its row count,
its accumulators, its 64-bit key hash, key group and (with a state TTL) the
time it was last written; its key values are kept in Arrow tables covering
slot ranges.  A batch, pre-aggregated per key by one Arrow group-by, is looked
up in a hash index (join_columnar.HashIndex: sorted runs of hash and slot)
with binary searches, and candidates whose hashes are equal get their keys
compared, since hashes can collide (NULL is a key value like any other).  Then
accumulators are merged, results computed and compared, state written and the
changelog built, each as one numpy or Arrow operation over the batch's keys.

The last emitted row of a key is not stored: it is the result of the key's
stored accumulators (every batch that changes them either emits the new
result or leaves an equal one), so it is recomputed for the keys of a batch.

COUNT(DISTINCT x) over an append-only input keeps, per aggregate, the
(slot, value) pairs it has counted (DistinctValues): the values as Arrow
tables, the slots in numpy, and a hash table (open addressing in numpy
arrays: there are millions of pairs, and a lookup there is a random read or
two where the sorted runs of HashIndex cost a binary search each) over a
hash of both.  The batch's distinct values per group come with its
pre-aggregation (Arrow's "distinct" hash aggregate); they are looked up as
pairs, candidates with an equal hash get slot and value compared, and the
new pairs are stored and counted per group into the COUNT accumulator.
NULL is never a value here.  A retracting input would need a count per
value, so it keeps the per-key form.

It serves COUNT, COUNT(*), SUM, AVG, MIN and MAX over an append-only input,
also COUNT(DISTINCT) of any type there, and COUNT, SUM and AVG over a
retracting one, over integers and floats (MIN and MAX also strings,
binaries, booleans and temporal values): what it can compute exactly as the
per-key form does, which takes SUM/AVG over decimals, aggregate UDFs, MIN/MAX
over retractions (and MIN/MAX(DISTINCT)).  The emitted changelog is row for
row the per-key form's: groups in the order of their first row in the
batch, ``-U`` then ``+U`` of a key adjacent, ``+I`` for a new key, ``-D`` when
a retraction empties a key, nothing for a key whose result did not change.

The hashmap backend runs it as here, its state in memory; the rocksdb backend
runs group_agg_rocksdb.py, which keeps each key's accumulators in a RocksDB
entry and shares this module's GroupAccumulators (merge, results, changelog,
snapshot-table columns), so both forms emit the same rows and save the same
table.  Checkpoints of this form see
it as a ``ColumnarState`` whose frozen table is a copy of the live slots (so
later in-place updates never reach a snapshot being written), with a ``$kg``
column for rescaling and a list column of each key's COUNT(DISTINCT) values;
group_agg.py converts to and from the per-key form on restore (its Python
sets of values included), so savepoints move between backends.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.aggregates import AggCall
from sqlstream.runtime.clock import SYSTEM_CLOCK, Clock
from sqlstream.runtime.elements import RowKind
from sqlstream.runtime.hashing import _mix, hash_array, hash_columns, key_groups_of
from sqlstream.runtime.operators.join_columnar import HashIndex
from sqlstream.runtime.operators.numbered_rows import NumberedRows
from sqlstream.runtime.state.base import ColumnarState

HASH, KEY_GROUP, LIVE, COUNT, TIME = "$h", "$kg", "$live", "$n", "$t"
# dead slots (deleted or expired keys) are compacted away once they outnumber the live ones
COMPACT_MIN_DEAD = 4096
# per group of a batch: nothing, -D, -U/+U, +I
_NONE, _DELETE, _UPDATE, _INSERT = 0, 1, 2, 3
_ROWS_EMITTED = np.array([0, 1, 2, 1], np.int64)


def _storage(t: pa.DataType) -> tuple[np.dtype, pa.DataType] | None:
    """(numpy dtype, Arrow type of the same layout) that hold MIN/MAX values of type ``t``, if any."""
    if pa.types.is_integer(t) or pa.types.is_boolean(t) or (pa.types.is_floating(t) and t != pa.float16()):
        return np.dtype(t.to_pandas_dtype()), t
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return np.dtype(np.int32), pa.int32()
    if pa.types.is_timestamp(t) or pa.types.is_date64(t) or pa.types.is_time64(t) or pa.types.is_duration(t):
        return np.dtype(np.int64), pa.int64()
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return np.dtype(object), t
    return None


def _plain(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def _numbers(arr: pa.Array | pa.ChunkedArray, dtype: Any) -> np.ndarray:
    """A numeric partial as numpy, NULL as 0 (a sum or count of nothing)."""
    arr = _plain(arr)
    return pc.fill_null(arr, 0).to_numpy(zero_copy_only=False).astype(dtype, copy=False)


def _values(arr: pa.Array | pa.ChunkedArray, t: pa.DataType) -> tuple[np.ndarray, np.ndarray]:
    """MIN/MAX values of type ``t`` as (numpy values in their storage dtype, valid mask)."""
    storage = _storage(t)
    assert storage is not None
    dtype, physical = storage
    arr = _plain(arr)
    valid = arr.is_valid().to_numpy(zero_copy_only=False)
    if dtype.kind == "O":
        return arr.to_numpy(zero_copy_only=False).astype(object, copy=False), valid
    if physical != t:
        arr = arr.view(physical)
    zero = False if pa.types.is_boolean(t) else 0
    return pc.fill_null(arr, zero).to_numpy(zero_copy_only=False).astype(dtype, copy=False), valid


def _arrow(values: np.ndarray, valid: np.ndarray, t: pa.DataType) -> pa.Array:
    """The inverse of ``_values``."""
    storage = _storage(t)
    assert storage is not None
    _, physical = storage
    arr = pa.array(values, physical, mask=~valid)
    return arr.view(t) if physical != t else arr


def _value_hashes(values: pa.Array) -> np.ndarray:
    """hashing.hash_array of COUNT(DISTINCT) values; dates and times as their integers (which
    hash_array cannot cast)."""
    storage = _storage(values.type)
    if storage is not None and storage[1] != values.type:
        values = values.view(storage[1])
    return hash_array(values)


def _hash_is_exact(t: pa.DataType) -> bool:
    """Whether equal value hashes mean equal values: hash_array is a bijection of int64, which
    holds integers (but uint64), booleans and temporal values; not of floats, text or decimals."""
    storage = _storage(t)
    return storage is not None and storage[0].kind in "biu" and storage[0] != np.uint64


def _pair_hashes(slots: np.ndarray, values: pa.Array) -> np.ndarray:
    """One hash per (slot, value) pair, combined as hashing.hash_columns combines columns."""
    with np.errstate(over="ignore"):
        return _mix(slots.astype(np.uint64) * np.uint64(31) + _value_hashes(values))


def _stable_order(keys: np.ndarray) -> np.ndarray:
    """np.argsort(keys, kind="stable") of integers in [0, 2^32), in two passes of 16 bits: numpy
    radix-sorts 16-bit integers, several times faster than it sorts wider ones."""
    order = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    if len(keys) and keys.max() >= 1 << 16:
        order = order[np.argsort((keys[order] >> 16).astype(np.uint16), kind="stable")]
    return order


def _lists(pairs: np.ndarray, values: NumberedRows | None, slots: np.ndarray) -> pa.ListArray:
    """The values of each of these slots (ascending), given the slot of each pair (``pairs``) and
    the pairs' values in that order (None: no value was ever stored)."""
    ids = None
    if len(slots) and slots[-1] == len(slots) - 1:  # slots 0 .. n-1: a pair's position is its slot
        at = pairs
        mine = at < len(slots)
        if not mine.all():
            ids = np.flatnonzero(mine)
    else:
        at = np.searchsorted(slots, pairs)
        mine = at < len(slots)
        mine[mine] = slots[at[mine]] == pairs[mine]
        ids = np.flatnonzero(mine)
    if ids is not None:
        at = at[ids]
    counts = np.bincount(at, minlength=len(slots))
    offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
    if values is None:
        return pa.ListArray.from_arrays(offsets, pa.array([], pa.null()))
    order = _stable_order(at)
    if ids is not None:
        order = ids[order]
    return pa.ListArray.from_arrays(offsets, _plain(values.all().column(0)).take(pa.array(order)))


class _HashTable:
    """Ids by 64-bit hash: open addressing over numpy arrays (hash, id), probed one round at a time
    for all keys of a batch, with triangular steps (1, 2, 3, ...: they reach every entry of a table
    whose size is a power of 2), grown twofold past 3/4 full, never deleted from (compaction builds
    a new one).  A key costs a random read or two where HashIndex's sorted runs cost a binary
    search per run: Nexmark q16 (23 M pairs) took 14.8 s on 10 M events instead of 26.8 s, for
    12 bytes per entry (16 to 32 per pair) instead of 16 per pair."""

    MAX_LOAD = 0.75

    def __init__(self) -> None:
        self.hashes = np.zeros(1024, np.uint64)
        self.ids = np.full(1024, -1, np.int32)  # -1: free

    def reserve(self, n: int) -> None:
        """Room for ``n`` keys in all."""
        capacity = len(self.ids)
        if n <= capacity * self.MAX_LOAD:
            return
        while n > capacity * self.MAX_LOAD:
            capacity *= 2
        used = self.ids >= 0
        hashes, ids = self.hashes[used], self.ids[used]
        self.hashes, self.ids = np.zeros(capacity, np.uint64), np.full(capacity, -1, np.int32)
        self.insert(hashes, ids)

    def _home(self, hashes: np.ndarray) -> np.ndarray:
        return (hashes & np.uint64(len(self.ids) - 1)).astype(np.int64)

    def find(self, hashes: np.ndarray, same: Callable[[np.ndarray, np.ndarray], np.ndarray]
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Which keys are stored: each key's probe goes on until ``same(keys, ids)`` (key positions,
        stored ids of an equal hash: which are the same key) says yes or a free entry ends it.
        Returns (found, entry, step): for the keys not found, where their probe ended (see insert)."""
        mask = len(self.ids) - 1
        entry, step = self._home(hashes), np.zeros(len(hashes), np.int64)
        found = np.zeros(len(hashes), bool)
        pending = np.arange(len(hashes))
        while len(pending):
            at = entry[pending]
            ids = self.ids[at]
            free = ids < 0
            hit = ~free & (self.hashes[at] == hashes[pending])
            if hit.any():
                found[pending[hit]] = same(pending[hit], ids[hit])
            pending = pending[~free & ~found[pending]]
            step[pending] += 1
            entry[pending] = (entry[pending] + step[pending]) & mask
        return found, entry, step

    def insert(self, hashes: np.ndarray, ids: np.ndarray, entry: np.ndarray | None = None,
               step: np.ndarray | None = None) -> None:
        """Add keys (none of them stored), each at the first free entry of its probe from ``entry``
        at ``step`` (find's, for the keys it did not find; default: from their home entries)."""
        mask = len(self.ids) - 1
        if entry is None or step is None:
            entry, step = self._home(hashes), np.zeros(len(hashes), np.int64)
        placed = np.zeros(len(hashes), bool)
        pending = np.arange(len(hashes))
        while len(pending):
            at = entry[pending]
            free = pending[self.ids[at] < 0]
            # keys wanting the same entry: one write lands, that key has it, the others go on
            self.ids[entry[free]] = ids[free]
            won = free[self.ids[entry[free]] == ids[free]]
            self.hashes[entry[won]] = hashes[won]
            placed[won] = True
            pending = pending[~placed[pending]]
            step[pending] += 1
            entry[pending] = (entry[pending] + step[pending]) & mask


class DistinctValues:
    """The (slot, value) pairs one COUNT(DISTINCT x) has counted; x is never NULL here.

    Pair j has its slot in ``slots[j]`` (int32) and its value in row j of ``values``; ``table``
    maps the hash of (slot, value) to pair ids.  A batch's distinct pairs are looked up there and
    the stored ones with an equal hash compared: slots always, values where hashes can collide
    (_hash_is_exact).  Only an append-only input comes here, so a pair is never taken back: the
    count of a slot is the number of its pairs.  Pairs of deleted slots stay (``dead`` counts
    them) until a compaction.
    """

    def __init__(self) -> None:
        # known from the first values: a batch's, or a restored table's
        self.value_type: pa.DataType | None = None
        self.exact = False
        self.values: NumberedRows | None = None
        self.slots = np.zeros(0, np.int32)
        self.size = 0
        self.dead = 0
        self.table = _HashTable()

    def add(self, slots: np.ndarray, values: pa.Array) -> np.ndarray:
        """Store the pairs not stored yet (the given ones are distinct); which of them were new."""
        if len(slots) == 0:
            return np.ones(0, bool)
        values = self._typed(values)
        hashes = _pair_hashes(slots, values)

        def same(positions: np.ndarray, ids: np.ndarray) -> np.ndarray:
            equal = self.slots[ids] == slots[positions]
            if not self.exact and equal.any():
                assert self.values is not None
                stored = _plain(self.values.take(ids[equal]).column(0))
                values_equal = pc.equal(values.take(pa.array(positions[equal])), stored)
                equal[equal] = pc.fill_null(values_equal, False).to_numpy(zero_copy_only=False)
            return equal

        self.table.reserve(self.size + len(slots))
        found, entry, step = self.table.find(hashes, same)
        new = ~found
        self._store(slots[new], values.filter(pa.array(new)), hashes[new], entry[new], step[new])
        return new

    def extend(self, slots: np.ndarray, values: pa.Array) -> None:
        """Store pairs known to be new (restored)."""
        if len(slots):
            values = self._typed(values)
            self.table.reserve(self.size + len(slots))
            self._store(slots, values, _pair_hashes(slots, values))

    def _typed(self, values: pa.Array) -> pa.Array:
        if self.value_type is None:
            self.value_type = values.type
            self.exact = _hash_is_exact(values.type)
            self.values = NumberedRows(pa.schema([("v", values.type)]))
        return values if values.type == self.value_type else values.cast(self.value_type)

    def _store(self, slots: np.ndarray, values: pa.Array, hashes: np.ndarray,
               entry: np.ndarray | None = None, step: np.ndarray | None = None) -> None:
        """Append new pairs (the table has room: reserve); ``entry``, ``step``: see _HashTable.insert."""
        n = len(slots)
        if n == 0:
            return
        assert self.values is not None
        if self.size + n > len(self.slots):
            grown = np.zeros(max(self.size + n, 2 * len(self.slots), 1024), np.int32)
            grown[: self.size] = self.slots[: self.size]
            self.slots = grown
        self.slots[self.size: self.size + n] = slots
        self.values.append(pa.table({"v": values}))
        self.table.insert(hashes, np.arange(self.size, self.size + n, dtype=np.int32), entry, step)
        self.size += n

    def compact(self, remap: np.ndarray) -> None:
        """Keep the pairs of the slots that ``remap`` (old slot -> new slot, -1: gone) keeps, under
        their new slots; the index is rebuilt."""
        slots = remap[self.slots[: self.size]]
        keep = np.flatnonzero(slots >= 0)
        self.slots, self.size, self.dead, self.table = np.zeros(0, np.int32), 0, 0, _HashTable()
        if self.values is not None:
            values = _plain(self.values.take(keep).column(0))
            self.values.reset(self.values.schema.empty_table())
            self.extend(slots[keep], values)

    def lists(self, slots: np.ndarray) -> pa.ListArray:
        """Each of these slots' values (``slots`` ascending): the per-key form's sets."""
        return _lists(self.slots[: self.size], self.values, slots)

    def frozen_lists(self) -> Callable[[np.ndarray], pa.ListArray]:
        """lists(), later, of the pairs stored now: slots are only appended to (compaction makes
        new arrays) and values are immutable tables, so views suffice."""
        pairs, values = self.slots[: self.size], None if self.values is None else self.values.view()
        return lambda slots: _lists(pairs, values, slots)


class GroupState(ColumnarState):
    """The backend's view of the columnar group state: a table of the live slots."""

    def __init__(self, name: str, store: ColumnarGroupAggregates) -> None:
        super().__init__(name)
        self.store = store

    def frozen(self) -> pa.Table | None:
        return self.store.table()

    def freeze(self) -> Callable[[], pa.Table | None]:
        return self.store.freeze()


class GroupAccumulators(ABC):
    """What both columnar forms of the GROUP BY share (group_agg_rocksdb.py keeps its keys in
    RocksDB): the accumulator columns, merging a batch's partials into them, the results, which
    groups changed and the changelog, all as numpy/Arrow operations over a batch's groups; and the
    snapshot table's accumulator columns.

    Accumulator columns per aggregate ``i`` (also the columns of the snapshot
    table): COUNT ``c{i}``; SUM and AVG ``s{i}`` (the sum: int64 over integers,
    float64 over floats) and ``n{i}`` (the count of non-NULL values, which
    decides whether the result is NULL); MIN and MAX ``m{i}`` (with ``v{i}``,
    whether it holds a value, in memory; a nullable column in the table).
    COUNT(DISTINCT) keeps its count in ``c{i}`` and its values in ``distinct[i]``;
    the snapshot table holds them as a list column ``d{i}`` (the count is its length).
    """

    def __init__(self, aggs: list[AggCall], key_types: list[pa.DataType], ttl_ms: int | None,
                 max_parallelism: int, clock: Clock = SYSTEM_CLOCK) -> None:
        self.aggs = aggs
        self.clock = clock  # processing time for the TTL (the state backend's)
        # as in PreAggregator.grouped's table: k0 the key hash, k1 ... the group keys
        self.key_names = [f"k{i + 1}" for i in range(len(key_types))]
        self.key_types = key_types
        self.ttl_ms = ttl_ms
        self.max_parallelism = max_parallelism
        self.dtypes: dict[str, Any] = {HASH: np.uint64, KEY_GROUP: np.int16, LIVE: bool, COUNT: np.int64}
        if ttl_ms is not None:
            self.dtypes[TIME] = np.int64
        for i, a in enumerate(aggs):
            if a.function == "COUNT":
                self.dtypes[f"c{i}"] = np.int64
            elif a.function in ("SUM", "AVG"):
                self.dtypes[f"s{i}"] = np.int64 if pa.types.is_integer(a.type) else np.float64
                self.dtypes[f"n{i}"] = np.int64
            else:
                storage = _storage(a.type)
                assert storage is not None
                self.dtypes[f"m{i}"], self.dtypes[f"v{i}"] = storage[0], bool
        self.acc_names = [n for n in self.dtypes if n not in (HASH, KEY_GROUP, LIVE, TIME)]

    @abstractmethod
    def load(self, table: pa.Table) -> None:
        """Add the keys of a snapshot table (restored, or converted from the per-key form)."""

    def _merge(self, old: dict[str, np.ndarray], grouped: pa.Table, layout: list[list[str]],
               added: dict[int, np.ndarray]) -> dict[str, np.ndarray]:
        """Old accumulators plus the batch's partials (``layout``: per function its partial columns,
        the hidden row count first), as the per-key functions of runtime/aggregates.py merge them;
        ``added``: what COUNT(DISTINCT)s add (_count_distinct)."""
        new = {COUNT: old[COUNT] + _numbers(grouped.column(layout[0][0]), np.int64)}
        for i, a in enumerate(self.aggs):
            names = layout[i + 1]
            if a.distinct:
                new[f"c{i}"] = old[f"c{i}"] + added[i]
            elif a.function == "COUNT":
                new[f"c{i}"] = old[f"c{i}"] + _numbers(grouped.column(names[0]), np.int64)
            elif a.function in ("SUM", "AVG"):
                s = f"s{i}"
                new[s] = old[s] + _numbers(grouped.column(names[0]), self.dtypes[s])
                new[f"n{i}"] = old[f"n{i}"] + _numbers(grouped.column(names[1]), np.int64)
            else:
                values, valid = _values(grouped.column(names[0]), a.type)
                current, has = old[f"m{i}"], old[f"v{i}"]
                # min(acc, v) / max(acc, v) in Python keep acc unless v is strictly better
                better = np.zeros(len(valid), bool)
                both = np.flatnonzero(valid & has)
                if len(both):
                    pick = np.less if a.function == "MIN" else np.greater
                    better[both] = pick(values[both], current[both])
                take = valid & (~has | better)
                new[f"m{i}"] = np.where(take, values, current)
                new[f"v{i}"] = has | valid
        return new

    def _results(self, accs: dict[str, np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each aggregate's (values, valid) before the cast to its SQL type: what the per-key form
        compares (a SUM of FLOAT is compared as the double it is summed in)."""
        out = []
        for i, a in enumerate(self.aggs):
            if a.function == "COUNT":
                c = accs[f"c{i}"]
                out.append((c, np.ones(len(c), bool)))
            elif a.function == "SUM":
                out.append((accs[f"s{i}"], accs[f"n{i}"] != 0))
            elif a.function == "AVG":
                total, count = accs[f"s{i}"], accs[f"n{i}"]
                valid = count != 0
                divisor = np.where(valid, count, 1)
                if pa.types.is_integer(a.type):  # the sum wrapped into the type, truncated toward zero
                    total = total.astype(a.type.to_pandas_dtype()).astype(np.int64)
                    q = np.abs(total) // divisor
                    out.append((np.where(total >= 0, q, -q), valid))
                else:
                    out.append((total / divisor, valid))
            else:
                out.append((accs[f"m{i}"], accs[f"v{i}"]))
        return out

    def _result_array(self, i: int, values: np.ndarray, valid: np.ndarray) -> pa.Array:
        a = self.aggs[i]
        if a.function in ("MIN", "MAX"):
            return _arrow(values, valid, a.type)
        # an integer SUM wraps around in its type (Flink's SUM(INT) is INT)
        return pa.array(values, mask=~valid).cast(a.type, safe=not pa.types.is_integer(a.type))

    def _codes(self, found: np.ndarray, alive: np.ndarray, old_results: list[tuple[np.ndarray, np.ndarray]],
               new_results: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        """What each group of a batch emits (_NONE, _DELETE, _UPDATE, _INSERT), given whether it
        was stored, whether it has rows left and its results before and after."""
        changed = np.zeros(len(found), bool)
        for (ov, ovalid), (nv, nvalid) in zip(old_results, new_results, strict=True):
            changed |= ovalid != nvalid
            both = np.flatnonzero(ovalid & nvalid)
            if len(both):
                changed[both] |= ov[both] != nv[both]
        code = np.full(len(found), _NONE, np.int8)
        code[found & ~alive] = _DELETE
        code[found & alive & changed] = _UPDATE
        code[~found & alive] = _INSERT
        return code

    def _changelog(self, code: np.ndarray, keys: list[pa.Array], old_results: list[tuple[np.ndarray, np.ndarray]],
                   new_results: list[tuple[np.ndarray, np.ndarray]]) -> tuple[list[pa.Array], np.ndarray] | None:
        """Rows per group in group order: -D old; -U old, +U new; +I new."""
        counts = _ROWS_EMITTED[code]
        total = int(counts.sum())
        if total == 0:
            return None
        group = np.repeat(np.arange(len(code)), counts)
        first = np.repeat(np.cumsum(counts) - counts, counts)
        second = np.arange(total) > first  # the +U of a pair
        kind = code[group]
        use_old = (kind == _DELETE) | ((kind == _UPDATE) & ~second)
        kinds = np.select([kind == _DELETE, kind == _INSERT, second],
                          [RowKind.DELETE, RowKind.INSERT, RowKind.UPDATE_AFTER], RowKind.UPDATE_BEFORE)
        taken = pa.array(group)
        columns = [k.take(taken) for k in keys]
        for i, ((ov, ovalid), (nv, nvalid)) in enumerate(zip(old_results, new_results, strict=True)):
            values = np.where(use_old, ov[group], nv[group])
            valid = np.where(use_old, ovalid[group], nvalid[group])
            columns.append(self._result_array(i, values, valid))
        return columns, kinds.astype(np.int8)

    def _table_values(self, table: pa.Table) -> dict[str, np.ndarray]:
        """The accumulator columns (numpy, as in memory) of a snapshot table's rows."""
        values: dict[str, np.ndarray] = {COUNT: _numbers(table.column(COUNT), np.int64)}
        for i, a in enumerate(self.aggs):
            if a.distinct:
                values[f"c{i}"] = _numbers(pc.list_value_length(table.column(f"d{i}")), np.int64)
            elif a.function in ("MIN", "MAX"):
                values[f"m{i}"], values[f"v{i}"] = _values(table.column(f"m{i}"), a.type)
            else:
                for name in (f"c{i}",) if a.function == "COUNT" else (f"s{i}", f"n{i}"):
                    values[name] = _numbers(table.column(name), self.dtypes[name])
        return values

    def add_accumulators(self, entries: list[tuple[int, tuple, Any]], input_schema: pa.Schema) -> None:
        """Take over per-key entries ((key group, key, (accumulators, last row))): a savepoint of
        the per-key form (rocksdb) restored where the columnar form runs.  Python per key, once.
        ``input_schema`` types the values of COUNT(DISTINCT)s (Python sets in the per-key form)."""
        if not entries:
            return
        keys = [pa.array([key[j] for _, key, _ in entries], t) for j, t in enumerate(self.key_types)]
        accs = [value[0] for _, _, value in entries]
        out: dict[str, pa.Array] = {
            HASH: pa.array(hash_columns(keys) if keys else np.zeros(len(entries), np.uint64)),
            **dict(zip(self.key_names, keys, strict=True)),
            COUNT: pa.array([acc[0][0] for acc in accs], pa.int64()),
        }
        for i, a in enumerate(self.aggs):
            column = [acc[i + 1] for acc in accs]
            if a.distinct:
                assert a.arg is not None
                out[f"d{i}"] = pa.array([list(c[0]) for c in column], pa.list_(input_schema.field(a.arg).type))
            elif a.function == "COUNT":
                out[f"c{i}"] = pa.array([c[0] for c in column], pa.int64())
            elif a.function in ("SUM", "AVG"):
                sums = [0 if c[0] is None else c[0] for c in column]
                out[f"s{i}"] = pa.array(sums, pa.int64() if self.dtypes[f"s{i}"] == np.int64 else pa.float64())
                out[f"n{i}"] = pa.array([c[1] for c in column], pa.int64())
            else:
                out[f"m{i}"] = pa.array([c[0] for c in column], a.type)
        self.load(pa.table(out))

class ColumnarGroupAggregates(GroupAccumulators):
    """The keys, row counts and accumulators of one group aggregation subtask, in columnar form
    (numpy columns by slot, see GroupAccumulators)."""

    def __init__(self, name: str, aggs: list[AggCall], key_types: list[pa.DataType], ttl_ms: int | None,
                 max_parallelism: int, clock: Clock = SYSTEM_CLOCK) -> None:
        super().__init__(aggs, key_types, ttl_ms, max_parallelism, clock)
        self.state = GroupState(name, self)
        self.columns = {name: np.zeros(0, dtype) for name, dtype in self.dtypes.items()}
        self.distinct = {i: DistinctValues() for i, a in enumerate(aggs) if a.distinct}
        self.size = 0  # slots in use, live or dead
        self.live = 0
        self.keys = NumberedRows(pa.schema(list(zip(self.key_names, key_types, strict=True))))  # by slot
        self.index = HashIndex()
        self.last_sweep = clock.time_ms()

    # ------------------------------------------------------------ slots
    def _alive(self, slots: np.ndarray) -> np.ndarray:
        return self.columns[LIVE][slots]

    def _reserve(self, size: int) -> None:
        capacity = len(self.columns[HASH])
        if size <= capacity:
            return
        capacity = max(size, 2 * capacity, 1024)
        for name, old in self.columns.items():
            grown = np.full(capacity, None, object) if old.dtype.kind == "O" else np.zeros(capacity, old.dtype)
            grown[: self.size] = old[: self.size]
            self.columns[name] = grown

    def _append(self, hashes: np.ndarray, keys: pa.Table | None, values: dict[str, np.ndarray],
                written: np.ndarray | int) -> None:
        """New live slots for keys not stored yet (``keys``: their k0.. columns, None without group
        keys); ``values``: every accumulator column."""
        n = len(hashes)
        if n == 0:
            return
        start = self.size
        self._reserve(start + n)
        at = slice(start, start + n)
        cols = self.columns
        cols[HASH][at] = hashes
        cols[KEY_GROUP][at] = key_groups_of(hashes, self.max_parallelism, np.int16)
        cols[LIVE][at] = True
        if TIME in cols:
            cols[TIME][at] = written
        for name, v in values.items():
            cols[name][at] = v
        self.size += n
        self.live += n
        if keys is not None:
            self.keys.append(keys)
        dead = self.size - self.live
        self.index.add(hashes, np.arange(start, start + n, dtype=np.int64), self._alive if dead else None)

    def _kill(self, slots: np.ndarray) -> None:
        """Delete the keys of these slots (they stay dead until the next compaction)."""
        slots = np.unique(slots)
        slots = slots[self.columns[LIVE][slots]]
        self.columns[LIVE][slots] = False
        self.live -= len(slots)
        for i, d in self.distinct.items():
            d.dead += int(self.columns[f"c{i}"][slots].sum())

    def _keys(self, slots: np.ndarray) -> pa.Table:
        """The key values of these slots, in their order."""
        return self.keys.take(slots)

    def _compact(self) -> None:
        """Drop dead slots: renumber the live ones and rebuild the index."""
        keep = np.flatnonzero(self.columns[LIVE][: self.size])
        if self.key_names:
            self.keys.reset(self._keys(keep))
        remap = np.full(self.size, -1, np.int64)
        remap[keep] = np.arange(len(keep))
        for d in self.distinct.values():
            d.compact(remap)
        self.columns = {name: arr[keep] for name, arr in self.columns.items()}
        self.size = self.live = len(keep)
        self.index = HashIndex()
        if len(keep):
            self.index.add(self.columns[HASH], np.arange(len(keep), dtype=np.int64))

    def _sweep(self, now: int) -> None:
        """Drop keys not written for longer than the TTL (at most every half TTL: one pass over all)."""
        assert self.ttl_ms is not None
        if now - self.last_sweep < self.ttl_ms / 2:
            return
        self.last_sweep = now
        expired = self.columns[LIVE][: self.size] & (self.columns[TIME][: self.size] <= now - self.ttl_ms)
        self._kill(np.flatnonzero(expired))

    def _find(self, hashes: np.ndarray, keys: list[pa.Array], now: int) -> np.ndarray:
        """The live slot of each key (-1: not stored, or expired, which then is dropped)."""
        slots = np.full(len(hashes), -1, np.int64)
        if self.live == 0:
            return slots
        positions, ids = self.index.probe(hashes)
        ok = self._alive(ids)
        if self.ttl_ms is not None:
            expired = ok & (self.columns[TIME][ids] <= now - self.ttl_ms)
            self._kill(ids[expired])
            ok &= ~expired
        positions, ids = positions[ok], ids[ok]
        if keys and len(ids):
            stored = self._keys(ids)
            same = np.ones(len(ids), bool)
            for i, k in enumerate(keys):
                mine, theirs = k.take(pa.array(positions)), stored.column(i)
                equal = pc.fill_null(pc.equal(mine, theirs), False).to_numpy(zero_copy_only=False)
                both_null = pc.and_(mine.is_null(), theirs.is_null()).to_numpy(zero_copy_only=False)
                same &= equal | both_null
            positions, ids = positions[same], ids[same]
        slots[positions] = ids
        return slots

    # ------------------------------------------------------------ accumulators and results
    def _gather(self, slots: np.ndarray, found: np.ndarray) -> dict[str, np.ndarray]:
        """Accumulator columns for a batch's groups: the stored values where ``found``, else empty."""
        out = {}
        for name in self.acc_names:
            arr = self.columns[name]
            column = np.full(len(slots), None, object) if arr.dtype.kind == "O" else np.zeros(len(slots), arr.dtype)
            column[found] = arr[slots[found]]
            out[name] = column
        return out

    def _count_distinct(self, grouped: pa.Table, layout: list[list[str]], slots: np.ndarray) -> dict[int, np.ndarray]:
        """Per COUNT(DISTINCT): how many values each group of the batch adds to its count, i.e.
        how many of its (slot, value) pairs are new (which are stored).  The input is append-only
        (supports()), so every group is stored after the batch: a new one (slot -1) at the slot
        _append will give it."""
        if not self.distinct:
            return {}
        target = slots.copy()
        new_keys = np.flatnonzero(slots < 0)
        target[new_keys] = self.size + np.arange(len(new_keys))
        added = {}
        for i, d in self.distinct.items():
            lists = _plain(grouped.column(layout[i + 1][0]))  # per group its distinct non-NULL values
            lengths = _numbers(pc.list_value_length(lists), np.int64)
            group = np.repeat(np.arange(len(lengths)), lengths)
            new = d.add(target[group], _plain(lists.flatten()))
            added[i] = np.bincount(group[new], minlength=len(lengths))
        return added

    # ------------------------------------------------------------ a batch
    def process(self, grouped: pa.Table, layout: list[list[str]]) -> tuple[list[pa.Array], np.ndarray] | None:
        """Merge a batch pre-aggregated by PreAggregator.grouped on (key hash, *keys), which are its
        columns k0, k1, ...; the changelog's columns and row kinds."""
        m = grouped.num_rows
        if m == 0:
            return None
        now = self.clock.time_ms()
        if self.ttl_ms is not None:
            self._sweep(now)
        keys = [_plain(grouped.column(n)) for n in self.key_names]
        hashes = _plain(grouped.column("k0")).to_numpy()
        slots = self._find(hashes, keys, now)
        found = slots >= 0
        added = self._count_distinct(grouped, layout, slots)
        old = self._gather(slots, found)
        new = self._merge(old, grouped, layout, added)
        old_results, new_results = self._results(old), self._results(new)
        alive = new[COUNT] > 0
        code = self._codes(found, alive, old_results, new_results)
        # state: write the kept keys in place, drop the emptied ones, append the new ones
        kept = found & alive
        at = slots[kept]
        for name, values in new.items():
            self.columns[name][at] = values[kept]
        if TIME in self.columns:
            self.columns[TIME][at] = now
        self._kill(slots[found & ~alive])
        inserted = ~found & alive
        if inserted.any():
            key_table = grouped.select(self.key_names).filter(pa.array(inserted)) if keys else None
            self._append(hashes[inserted], key_table, {name: values[inserted] for name, values in new.items()}, now)
        if self.size - self.live > max(self.live, COMPACT_MIN_DEAD):
            self._compact()
        else:
            for d in self.distinct.values():
                # a few dead keys may hold most pairs: drop them, the slots staying as they are
                if d.dead > max(d.size - d.dead, COMPACT_MIN_DEAD):
                    d.compact(np.where(self.columns[LIVE][: self.size], np.arange(self.size), -1))
        return self._changelog(code, keys, old_results, new_results)

    # ------------------------------------------------------------ snapshots and restores
    def _unexpired(self) -> np.ndarray:
        """The slots of live keys written within the TTL (expired ones may not be swept yet)."""
        live = self.columns[LIVE][: self.size]
        if self.ttl_ms is not None:
            live = live & (self.columns[TIME][: self.size] > self.clock.time_ms() - self.ttl_ms)
        return np.flatnonzero(live)

    def table(self) -> pa.Table | None:
        """A copy of the live keys and accumulators, with ``$kg`` for rescaling (the snapshot)."""
        return self.freeze()()

    def freeze(self) -> Callable[[], pa.Table | None]:
        """The snapshot table, made later (when the snapshot is written, in the background) from a
        view taken now: the accumulators, changed in place, are copied; the key and DISTINCT
        values, immutable, are not (the pairs' values are most of the state)."""
        keep = self._unexpired()
        if len(keep) == 0:
            return lambda: None
        cols = self.columns
        accs: dict[str, pa.Array] = {HASH: pa.array(cols[HASH][keep]), KEY_GROUP: pa.array(cols[KEY_GROUP][keep]),
                                     COUNT: pa.array(cols[COUNT][keep])}
        lists: dict[str, Callable[[np.ndarray], pa.ListArray]] = {}
        for i, a in enumerate(self.aggs):
            if a.distinct:
                lists[f"d{i}"] = self.distinct[i].frozen_lists()
            elif a.function in ("MIN", "MAX"):
                accs[f"m{i}"] = _arrow(cols[f"m{i}"][keep], cols[f"v{i}"][keep], a.type)
            else:
                for name in (f"c{i}",) if a.function == "COUNT" else (f"s{i}", f"n{i}"):
                    accs[name] = pa.array(cols[name][keep])
        if TIME in cols:
            accs[TIME] = pa.array(cols[TIME][keep])
        keys = self.keys.view()

        def table() -> pa.Table:
            out = {HASH: accs[HASH], KEY_GROUP: accs[KEY_GROUP]}
            if self.key_names:
                key_table = keys.take(keep)
                out.update({name: key_table.column(name) for name in self.key_names})
            out.update({name: column for name, column in accs.items() if name not in out})
            out.update({name: later(keep) for name, later in lists.items()})
            return pa.table(out)

        return table

    def load(self, table: pa.Table) -> None:
        """Add the keys of a snapshot table (restored, or converted from the per-key form)."""
        if table.num_rows == 0:
            return
        table = table.combine_chunks()
        values = self._table_values(table)
        # restored under another TTL setting: restored keys count as written now
        written = table.column(TIME).to_numpy() if TIME in table.column_names else self.clock.time_ms()
        keys = table.select(self.key_names) if self.key_names else None
        start = self.size
        self._append(table.column(HASH).to_numpy(), keys, values, written)
        for i, d in self.distinct.items():
            lists = _plain(table.column(f"d{i}"))
            if lists.type.value_type != pa.null():  # a snapshot without values has no type for them
                slots = np.repeat(np.arange(start, start + table.num_rows), values[f"c{i}"])
                d.extend(slots, _plain(lists.flatten()))

    def accumulators(self) -> list[tuple[int, tuple, Any]]:
        """All keys as per-key entries (key group, key, (accumulators, last row)): a columnar
        savepoint restored on rocksdb.  Python per key, once."""
        keep = self._unexpired()
        if len(keep) == 0:
            return []
        accs = {name: arr[keep] for name, arr in self.columns.items()}
        keys = self._keys(keep).to_pylist() if self.key_names else [{}] * len(keep)
        results = [self._result_array(i, v, ok) if a.function in ("MIN", "MAX") else pa.array(v, mask=~ok)
                   for i, (a, (v, ok)) in enumerate(zip(self.aggs, self._results(accs), strict=True))]
        columns: list[list[Any]] = [accs[COUNT].tolist()]
        for i, a in enumerate(self.aggs):
            if a.distinct:
                columns.append([set(values) for values in self.distinct[i].lists(keep).to_pylist()])
            elif a.function == "COUNT":
                columns.append(accs[f"c{i}"].tolist())
            elif a.function in ("SUM", "AVG"):
                columns += [accs[f"s{i}"].tolist(), accs[f"n{i}"].tolist()]
            else:
                columns.append(_arrow(accs[f"m{i}"], accs[f"v{i}"], a.type).to_pylist())
        results_py = [r.to_pylist() for r in results]
        kgs = accs[KEY_GROUP].tolist()
        out = []
        for r in range(len(keep)):
            key = tuple(keys[r].values())
            acc: list[list[Any]] = [[columns[0][r]]]
            c = 1
            for a in self.aggs:
                if a.function in ("SUM", "AVG"):
                    acc.append([columns[c][r], columns[c + 1][r]])
                    c += 2
                else:
                    acc.append([columns[c][r]])
                    c += 1
            out.append((kgs[r], key, (acc, key + tuple(res[r] for res in results_py))))
        return out
