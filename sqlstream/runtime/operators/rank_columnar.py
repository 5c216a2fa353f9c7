"""The vectorized form of the updating Top-N over an append-only input.

``ROW_NUMBER() OVER (PARTITION BY k ORDER BY s) <= N`` (and keep-last
deduplication, its N = 1 case) keeps, per partition, the rows that are in
its top N.  The per-key form (rank.py) merges each batch into a Python list
per partition; here the kept rows of every partition are one columnar store:
Arrow tables of rows, each with its partition-key hash and an arrival
sequence number (ties: the earlier arrival ranks first, or the later one for
keep-last deduplication), under a hash index from partition hash to rows.

A batch is handled as a whole: cut to the top N of each of its partitions
(one Arrow sort), the stored rows of those partitions gathered (binary
searches in the index, partition keys compared since hashes can collide),
old and new rows ranked together by one more sort, and the changes between
the old and new ranking of each partition emitted.  With the row number in
the output a changed position is ``-U``/``+U`` of that rank (``+I``/``-D``
when the top grows or shrinks), as in the per-key form; without it, rows
leaving the top are ``-D`` and rows entering it ``+I``.  Rows that stay are
not rewritten: only rows leaving are marked dead and rows entering appended;
dead rows are compacted away once they outnumber the live ones.

The ranking and the changelog (TopNRanking) are shared with the rocksdb
backend's form (rank_rocksdb.py), which keeps each partition's rows in a
RocksDB entry instead; ColumnarTopN is the hashmap backend's store, in memory.
Checkpoints see a ``ColumnarState`` whose frozen table is a copy of the live
rows (later batches change the liveness marks in place), with ``$kg`` for
rescaling; the rocksdb form writes savepoints in the same layout, and rank.py
converts to and from the per-key form on restore.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.runtime.clock import SYSTEM_CLOCK, Clock
from sqlstream.runtime.elements import RowKind
from sqlstream.runtime.hashing import hash_columns, key_groups_of
from sqlstream.runtime.operators.join_columnar import HashIndex
from sqlstream.runtime.operators.numbered_rows import NumberedRows
from sqlstream.runtime.state.base import ColumnarState

HASH, KEY_GROUP, SEQ, TIME = "$h", "$kg", "$seq", "$t"
COMPACT_MIN_DEAD = 4096
SortSpec = Sequence[tuple[int, bool, bool]]  # (column index, descending, nulls first)


class RankState(ColumnarState):
    """The backend's view of the store: a table of the live rows, built when the snapshot is
    written (the final snapshot of a job without checkpoint storage never builds it)."""

    def __init__(self, name: str, freeze: Callable[[], Callable[[], pa.Table | None]]) -> None:
        super().__init__(name)
        self._freeze = freeze

    def frozen(self) -> pa.Table | None:
        return self._freeze()()

    def freeze(self) -> Callable[[], pa.Table | None]:
        return self._freeze()


class TopNRanking:
    """The ranking of a batch together with a partition's kept rows, whatever holds them: both
    the in-memory store (ColumnarTopN) and the RocksDB one (rank_rocksdb.RocksDBTopN) rank and
    emit with this code, so both emit the same changelog."""

    def __init__(self, keys: list[int], sort: SortSpec, start: int, end: int, output_rank: bool,
                 newer_wins: bool, input_schema: pa.Schema, schema: pa.Schema, ttl_ms: int | None,
                 max_parallelism: int, clock: Clock = SYSTEM_CLOCK) -> None:
        self.keys = keys
        self.clock = clock  # processing time for the TTL (the state backend's)
        self.sort = list(sort)
        self.start, self.end = start, end
        self.output_rank = output_rank
        self.newer_wins = newer_wins
        self.input_schema = input_schema
        # stored columns by position: an input may repeat a name (q9's A.dateTime, B.dateTime)
        self.names = [f"c{i}" for i in range(len(input_schema))]
        self.schema = schema
        self.ttl_ms = ttl_ms
        self.max_parallelism = max_parallelism
        self.next_seq = 0

    def load(self, table: pa.Table) -> None:
        """Take over snapshot rows (the input's columns, ``$h``, ``$kg``, ``$seq``, and ``$t`` under a TTL)."""
        raise NotImplementedError

    def add_ranked(self, entries: list[tuple[int, tuple, tuple]]) -> None:
        """Take over per-key entries (key group, partition key, rows in rank order): a savepoint of
        the per-key form restored here.  Sequence numbers are made to reproduce each order."""
        rows = [row for _, _, ranked in entries for row in ranked]
        if not rows:
            return
        seqs = []
        for _, _, ranked in entries:
            n = len(ranked)
            steps = range(n - 1, -1, -1) if self.newer_wins else range(n)
            seqs += [self.next_seq + s for s in steps]
            self.next_seq += n
        columns = {n: pa.array([r[i] for r in rows], f.type)
                   for i, (n, f) in enumerate(zip(self.names, self.input_schema, strict=True))}
        keys = [columns[self.names[k]] for k in self.keys]
        hashes = hash_columns(keys) if keys else np.zeros(len(rows), np.uint64)
        columns[HASH] = pa.array(hashes)
        columns[KEY_GROUP] = pa.array(key_groups_of(hashes, self.max_parallelism, np.int16))
        columns[SEQ] = pa.array(seqs, pa.int64())
        self.load(pa.table(columns))

    def ranked(self, table: pa.Table) -> list[tuple[int, tuple, tuple]]:
        """Snapshot rows as per-key entries (key group, partition key, rows in rank order)."""
        names = self.names
        table = table.take(pc.sort_indices(table, sort_keys=self._sort_keys()))
        group, firsts = self._partitions(table)
        rows = list(zip(*(table.column(n).to_pylist() for n in names), strict=True))
        kgs = table.column(KEY_GROUP).to_pylist()
        bounds = np.r_[firsts, table.num_rows]
        return [(kgs[lo], tuple(rows[lo][k] for k in self.keys), tuple(rows[lo:hi]))
                for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]

    def _arrived(self, batch: pa.RecordBatch) -> pa.Table:
        """The batch's rows with ``$h``, ``$kg`` and ``$seq``, cut to the top of each of its partitions."""
        key_cols = [batch.column(k) for k in self.keys]
        hashes = hash_columns(key_cols) if key_cols else np.zeros(batch.num_rows, np.uint64)
        columns = {name: batch.column(i) for i, name in enumerate(self.names)}
        columns[HASH] = pa.array(hashes)
        columns[KEY_GROUP] = pa.array(key_groups_of(hashes, self.max_parallelism, np.int16))
        columns[SEQ] = pa.array(np.arange(self.next_seq, self.next_seq + batch.num_rows, dtype=np.int64))
        self.next_seq += batch.num_rows
        return self._top(pa.table(columns))

    def _rank(self, old: pa.Table, old_group: np.ndarray, arrived: pa.Table,
              group: np.ndarray) -> tuple[pa.Table, np.ndarray, np.ndarray, np.ndarray]:
        """(candidates: the stored rows then the arrived ones, their partition numbers, their ranks
        before and after the batch (-1: not ranked before))."""
        candidates = pa.concat_tables([old, arrived])  # not combined: its rows are taken, not scanned
        cand_group = np.concatenate([old_group, group])
        new_rank = self._ranks(candidates, cand_group)
        old_rank = np.full(candidates.num_rows, -1, np.int64)
        if old.num_rows:
            old_rank[: old.num_rows] = self._ranks(old, old_group)
        return candidates, cand_group, old_rank, new_rank

    def _top(self, table: pa.Table) -> pa.Table:
        """The first ``end`` rows of each partition of the batch, in partition then rank order."""
        order = pc.sort_indices(table, sort_keys=self._sort_keys()).to_numpy()
        # partitions found on the sorted key columns alone; the whole rows are gathered once, only
        # those in a top (a take and a filter of every column cost twice as much)
        _, firsts = self._partitions(table.select([HASH, *(self.names[k] for k in self.keys)]).take(order))
        group = np.repeat(np.arange(len(firsts)), np.diff(np.r_[firsts, table.num_rows]))
        position = np.arange(table.num_rows) - firsts[group]
        return table.take(pa.array(order[position < self.end]))

    def _sort_keys(self) -> list[tuple[str, str] | tuple[str, str, str]]:
        """(partition hash, partition keys, ORDER BY keys, arrival): partitions together, ranked."""
        names = self.names
        spec: list = [(HASH, "ascending")]
        spec += [(names[k], "ascending", "at_end") for k in self.keys]
        spec += [(names[i], "descending" if desc else "ascending", "at_start" if nf else "at_end")
                 for i, desc, nf in self.sort]
        spec.append((SEQ, "descending" if self.newer_wins else "ascending"))
        return spec

    def _partitions(self, table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        """For a table sorted by partition: each row's partition number and each partition's first row."""
        n = table.num_rows
        new = np.zeros(n, bool)
        if n:
            new[0] = True
        for name in [HASH, *(self.names[k] for k in self.keys)]:
            col = table.column(name).combine_chunks()
            if n > 1:
                a, b = col.slice(1), col.slice(0, n - 1)
                same = pc.or_(pc.fill_null(pc.equal(a, b), False), pc.and_(a.is_null(), b.is_null()))
                new[1:] |= ~same.to_numpy(zero_copy_only=False)
        return np.cumsum(new) - 1, np.flatnonzero(new)

    def _ranks(self, table: pa.Table, group: np.ndarray) -> np.ndarray:
        """0-based rank of each row within its partition number ``group``."""
        t = table.select([*self.names, SEQ]).append_column("$g", pa.array(group))
        order = pc.sort_indices(t, sort_keys=[("$g", "ascending"), *self._sort_keys()[1 + len(self.keys):]])
        order = order.to_numpy()
        sorted_group = group[order]
        firsts = np.flatnonzero(np.r_[True, sorted_group[1:] != sorted_group[:-1]]) if len(order) else order
        first_of = firsts[np.searchsorted(firsts, np.arange(len(order)), side="right") - 1]
        ranks = np.empty(len(order), np.int64)
        ranks[order] = np.arange(len(order)) - first_of
        return ranks

    def _changes(self, rows: pa.Table, group: np.ndarray, old_rank: np.ndarray,
                 new_rank: np.ndarray) -> tuple[pa.RecordBatch, pa.Array] | None:
        lo, hi = self.start - 1, self.end  # visible 0-based ranks
        was = (old_rank >= lo) & (old_rank < hi)
        now_visible = (new_rank >= lo) & (new_rank < hi)
        if self.output_rank:
            # entries (partition, rank, row, 0 old / 1 new) paired by (partition, rank)
            o, n = np.flatnonzero(was), np.flatnonzero(now_visible)
            part = np.concatenate([group[o], group[n]])
            rank = np.concatenate([old_rank[o], new_rank[n]])
            row = np.concatenate([o, n])
            side = np.concatenate([np.zeros(len(o), np.int8), np.ones(len(n), np.int8)])
            order = np.lexsort((side, rank, part))
            part, rank, row, side = part[order], rank[order], row[order], side[order]
            pair_next = np.r_[(part[1:] == part[:-1]) & (rank[1:] == rank[:-1]), False]  # old then its new
            paired_new = np.r_[False, pair_next[:-1]]
            same = np.zeros(len(row), bool)
            if pair_next.any():
                a, b = np.flatnonzero(pair_next), np.flatnonzero(pair_next) + 1
                same[a] = self._equal_rows(rows, row[a], row[b])
                same[b] = same[a]
            emit = ~same
            kinds = np.where(pair_next, RowKind.UPDATE_BEFORE,
                             np.where(paired_new, RowKind.UPDATE_AFTER,
                                      np.where(side == 0, RowKind.DELETE, RowKind.INSERT)))[emit]
            picked, ranks = row[emit], rank[emit] + 1
        else:
            gone, came = np.flatnonzero(was & ~now_visible), np.flatnonzero(now_visible & ~was)
            picked = np.concatenate([gone, came])
            kinds = np.concatenate([np.full(len(gone), RowKind.DELETE), np.full(len(came), RowKind.INSERT)])
            order = np.argsort(group[picked], kind="stable")  # per partition: its -D, then its +I
            picked, kinds, ranks = picked[order], kinds[order], None
        if len(picked) == 0:
            return None
        out = rows.select(self.names).take(pa.array(picked))
        columns = [out.column(i).combine_chunks() for i in range(out.num_columns)]
        if ranks is not None:
            columns.append(pa.array(ranks).cast(self.schema.field(len(columns)).type))
        return pa.RecordBatch.from_arrays(columns, schema=self.schema), pa.array(kinds.astype(np.int8))

    def _equal_rows(self, rows: pa.Table, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Whether rows a[i] and b[i] have equal values in every column (NULL equal to NULL)."""
        same = np.ones(len(a), bool)
        ta, tb = pa.array(a), pa.array(b)
        for name in self.names:
            col = rows.column(name)
            x, y = col.take(ta), col.take(tb)
            eq = pc.or_(pc.fill_null(pc.equal(x, y), False), pc.and_(x.is_null(), y.is_null()))
            same &= eq.to_numpy(zero_copy_only=False)
        return same


class ColumnarTopN(TopNRanking):
    """The kept rows of every partition of one Top-N subtask, in memory."""

    def __init__(self, name: str, keys: list[int], sort: SortSpec, start: int, end: int, output_rank: bool,
                 newer_wins: bool, input_schema: pa.Schema, schema: pa.Schema, ttl_ms: int | None,
                 max_parallelism: int, clock: Clock = SYSTEM_CLOCK) -> None:
        super().__init__(keys, sort, start, end, output_rank, newer_wins, input_schema, schema, ttl_ms,
                         max_parallelism, clock)
        self.state = RankState(name, self.freeze)
        self.rows = NumberedRows(pa.schema(
            [*zip(self.names, input_schema.types, strict=True),
             (HASH, pa.uint64()), (KEY_GROUP, pa.int16()), (SEQ, pa.int64())]))  # by row id
        self.live = np.zeros(0, bool)  # per row id
        # per row id: when its partition was last written; kept under a state TTL only
        self.written = np.zeros(0, np.int64)
        self.size = 0
        self.alive = 0
        self.index = HashIndex()

    # ------------------------------------------------------------ rows
    def _append(self, table: pa.Table, now: int) -> None:
        """Store rows (input columns plus $h, $kg, $seq) as live."""
        n = table.num_rows
        if n == 0:
            return
        first = self.size
        if first + n > len(self.live):
            capacity = max(first + n, 2 * len(self.live), 1024)
            self.live = np.concatenate([self.live[:first], np.zeros(capacity - first, bool)])
            if self.ttl_ms is not None:
                self.written = np.concatenate([self.written[:first], np.zeros(capacity - first, np.int64)])
        self.live[first:first + n] = True
        if self.ttl_ms is not None:
            self.written[first:first + n] = now
        self.size += n
        self.alive += n
        self.rows.append(table)
        ids = np.arange(first, first + n, dtype=np.int64)
        self.index.add(table.column(HASH).to_numpy(), ids, self._is_live if self.size > self.alive else None)

    def _is_live(self, ids: np.ndarray) -> np.ndarray:
        return self.live[ids]

    def _kill(self, ids: np.ndarray) -> None:
        ids = ids[self.live[ids]]
        self.live[ids] = False
        self.alive -= len(ids)

    def _rows(self, ids: np.ndarray) -> pa.Table:
        return self.rows.take(ids)

    def _expire(self, now: int) -> None:
        if self.ttl_ms is not None and self.alive:
            stale = np.flatnonzero(self.live[: self.size] & (self.written[: self.size] <= now - self.ttl_ms))
            self._kill(stale)

    def _compact(self) -> None:
        live = self.live[: self.size]
        rows = self.rows.filter(live) if self.alive else None
        written = self.written[: self.size][live] if self.ttl_ms is not None else None
        self.rows.reset(self.rows.schema.empty_table())
        self.size, self.alive = 0, 0
        self.live, self.written = np.zeros(0, bool), np.zeros(0, np.int64)
        self.index = HashIndex()
        if rows is not None:
            self._append(rows, 0)
            if written is not None:
                self.written[: len(written)] = written

    # ------------------------------------------------------------ a batch
    def process(self, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, pa.Array] | None:
        """Rank a batch into the kept rows; the changelog (rows, kinds) of the visible ranks."""
        if batch.num_rows == 0:
            return None
        now = self.clock.time_ms()
        self._expire(now)
        arrived = self._arrived(batch)
        group, firsts = self._partitions(arrived)
        old_ids, old_group = self._stored(arrived, firsts)
        old = self._rows(old_ids) if len(old_ids) else arrived.slice(0, 0)
        candidates, cand_group, old_rank, new_rank = self._rank(old, old_group, arrived, group)
        kept = new_rank < self.end
        # state: rows that fell out of the top die, rows that entered it are stored
        self._kill(old_ids[~kept[: len(old_ids)]])
        if self.ttl_ms is not None:
            staying = old_ids[kept[: len(old_ids)]]
            self.written[staying] = now
        self._append(candidates.slice(len(old_ids)).filter(pa.array(kept[len(old_ids):])), now)
        if self.size - self.alive > max(self.alive, COMPACT_MIN_DEAD):
            self._compact()
        return self._changes(candidates, cand_group, old_rank, new_rank)

    def _stored(self, arrived: pa.Table, firsts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row id, partition number) of the live stored rows of the batch's partitions."""
        if self.alive == 0 or len(firsts) == 0:
            empty = np.zeros(0, np.int64)
            return empty, empty
        probe = arrived.select([HASH, *(self.names[k] for k in self.keys)]).take(pa.array(firsts))
        positions, ids = self.index.probe(probe.column(HASH).to_numpy())
        ok = self.live[ids]
        positions, ids = positions[ok], ids[ok]
        if self.keys and len(ids):
            stored = self._rows(ids)
            same = np.ones(len(ids), bool)
            for k in self.keys:
                name = self.names[k]
                mine, theirs = probe.column(name).take(pa.array(positions)), stored.column(name)
                equal = pc.fill_null(pc.equal(mine, theirs), False)
                same &= pc.or_(equal, pc.and_(mine.is_null(), theirs.is_null())).to_numpy(zero_copy_only=False)
            positions, ids = positions[same], ids[same]
        order = np.argsort(ids, kind="stable")  # gather in storage order
        return ids[order], positions[order]

    # ------------------------------------------------------------ snapshots and the per-key form
    def table(self) -> pa.Table | None:
        """A copy of the live rows (the snapshot), with ``$t`` under a state TTL."""
        return self.freeze()()

    def freeze(self) -> Callable[[], pa.Table | None]:
        """table(), made later from a view taken now: the stored tables are never changed in place,
        so only the liveness marks (and write times), changed in place, are copied.  Building the
        table here would hold a second copy of every kept row on the processing path."""
        if self.alive == 0:
            return lambda: None
        rows, live = self.rows.view(), self.live[: self.size].copy()
        written = self.written[: self.size][live] if self.ttl_ms is not None else None

        def build() -> pa.Table:
            table = rows.filter(live)
            return table if written is None else table.append_column(TIME, pa.array(written))

        return build

    def load(self, table: pa.Table) -> None:
        """Take over snapshot rows (restored, or converted from the per-key form)."""
        if table.num_rows == 0:
            return
        written = table.column(TIME).to_numpy() if TIME in table.column_names else None
        rows = table.select([*self.names, HASH, KEY_GROUP, SEQ]).cast(self.rows.schema)
        first = self.size
        self._append(rows, self.clock.time_ms())
        if written is not None and self.ttl_ms is not None:
            self.written[first:first + rows.num_rows] = written
        self.next_seq = max(self.next_seq, int(pc.max(rows.column(SEQ)).as_py()) + 1)
