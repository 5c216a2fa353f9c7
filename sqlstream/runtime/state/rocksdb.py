"""The 'rocksdb' backend: keyed state on local disk, in the line of Flink's EmbeddedRocksDBStateBackend.

One RocksDB instance per operator subtask, one column family per named
state (``state:<name>``), so a state can be scanned or counted without
touching the others.  Keys are the 2-byte big-endian key group followed by
the key tuple in the state codec (msgpack, data only): RocksDB orders keys
bytewise, so every key group is one contiguous range and a rescaled restore
scans exactly the groups it owns.  Values are encoded by the same codec;
rocksdict runs in raw mode so it never guesses a type (its default mode would
pickle).  Nothing is cached in Python, so state may exceed memory.

Checkpoints are incremental.  The synchronous part flushes the memtables and
hard-links the live files into a staging checkpoint; the writer later copies
SST files (immutable, uniquely named within one db) into a folder shared by
all checkpoints of this backend and copies only the small files (MANIFEST,
CURRENT, OPTIONS, WAL) into the checkpoint's own directory.  The shared
folder is ``<shared_dir>/<backend id>``: the runtime points ``shared_dir`` at
the checkpoint root's ``shared/`` (without it, ``<directory>/../shared``).  Every
backend instance has a fresh id: a restored db numbers new SSTs like the db it
came from (which may still be running), so sharing a folder with it could mix
two different files under one name; the first checkpoint after a restore is
therefore a full one (Flink's NO_CLAIM restore mode does the same).  A shared
file is deleted once no retained checkpoint lists it (CheckpointStorage).

Savepoints scan the frozen staging checkpoint state by state, in key-group
order, into the canonical format in bounded batches; their restore writes
batch by batch.  Neither holds more than a batch, so a state larger than
memory can be saved and restored.  RocksDB's own memory follows Flink's
options (RocksDBMemory): by default bounded per slot; its tuning options
(compaction, compression, blocks, bloom filters, background jobs, logs) are
Flink's too (RocksDBTuning), on every db and column family opened.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from rocksdict import (
    AccessType,
    BlockBasedOptions,
    Cache,
    Checkpoint,
    DBCompactionStyle,
    DBCompressionType,
    Options,
    Rdict,
    ReadOptions,
    WriteBatch,
    WriteBufferManager,
    WriteOptions,
)

from sqlstream.core.config import setting
from sqlstream.runtime.clock import SYSTEM_CLOCK, Clock
from sqlstream.runtime.state.base import (
    BATCH_BYTES,
    BATCH_ENTRIES,
    CANONICAL_FILE,
    CanonicalWriter,
    KeyedState,
    SnapshotFormatError,
    SnapshotWriter,
    StateBackend,
    read_canonical_batches,
)
from sqlstream.runtime.state.base import KG_BYTES as _KG_BYTES
from sqlstream.runtime.state.base import kg_prefix as _kg_prefix
from sqlstream.runtime.state.codec import decode, encode

FORMAT = "rocksdb"
_CF_PREFIX = "state:"  # keeps state names clear of RocksDB's own 'default' column family


def encode_key(kg: int, key: tuple) -> bytes:
    """Key group prefix + encoded key: identical bytes for equal keys (the codec is deterministic)."""
    return _kg_prefix(kg) + encode(key)


def decode_key(raw: bytes) -> tuple[int, tuple]:
    return int.from_bytes(raw[:_KG_BYTES], "big"), decode(raw[_KG_BYTES:])


# Flink's PredefinedOptions: the options each profile sets, as option text; an option set itself wins
PREDEFINED_OPTIONS: dict[str, dict[str, str]] = {
    "default": {},
    "spinning_disk_optimized": {
        "state.backend.rocksdb.compaction.style": "LEVEL",
        "state.backend.rocksdb.compaction.level.use-dynamic-size": "true",
        "state.backend.rocksdb.thread.num": "4",
        "state.backend.rocksdb.files.open": "-1",
    },
    "spinning_disk_optimized_high_mem": {
        "state.backend.rocksdb.block.cache-size": "256 mb",
        "state.backend.rocksdb.block.blocksize": "128 kb",
        "state.backend.rocksdb.compaction.level.use-dynamic-size": "true",
        "state.backend.rocksdb.thread.num": "4",
        "state.backend.rocksdb.compaction.level.max-size-level-base": "1 gb",
        "state.backend.rocksdb.files.open": "-1",
        "state.backend.rocksdb.writebuffer.count": "4",
        "state.backend.rocksdb.writebuffer.number-to-merge": "3",
        "state.backend.rocksdb.compaction.level.target-file-size-base": "256 mb",
        "state.backend.rocksdb.writebuffer.size": "64 mb",
        "state.backend.rocksdb.use-bloom-filter": "true",
    },
    "flash_ssd_optimized": {
        "state.backend.rocksdb.thread.num": "4",
        "state.backend.rocksdb.files.open": "-1",
    },
}


def _tuned(settings: Mapping[str, str], key: str) -> Any:
    """A RocksDB option's value as Flink picks it: the one set, else the predefined profile's, else
    the default (RocksDBResourceContainer.internalGetOption)."""
    if key not in settings:
        profile = PREDEFINED_OPTIONS[setting(settings, "state.backend.rocksdb.predefined-options")]
        if key in profile:
            return setting({key: profile[key]}, key)
    return setting(settings, key)


class RocksDBMemory:
    """The memory the RocksDB instances of one slot may take, by Flink's options.

    A slot is a subtask index: as with Flink's slot sharing, subtask i of
    every operator runs in slot i.  Bounded (``memory.managed``, the default,
    with the slot's share of ``taskmanager.memory.managed.size``, or
    ``memory.fixed-per-slot``): every instance of the slot shares one LRU
    block cache and one write buffer manager that charges memtables to that
    cache, sized as Flink's RocksDBMemoryControllerUtils does (cache capacity
    (3 - r) / 3 of the budget, memtables 2r / 3 of it, r =
    ``memory.write-buffer-ratio``), so the slot's RocksDB memory stays near the
    budget however many states and operators it holds.  Unbounded: each
    column family has a block cache of ``block.cache-size`` of its own.
    Either way a column family keeps up to ``writebuffer.count`` memtables of
    ``writebuffer.size``.

    An operator that keeps a key filter in Python next to its RocksDB rows
    (state.key_filter.HashFilter) caps it at ``filter_bytes``, a quarter of the
    slot's budget (unbounded: of one column family's cache and memtables), so
    that memory too follows these options.
    """

    def __init__(self, budget: int | None = None, write_buffer_ratio: float = 0.5,
                 block_cache_size: int = 8 << 20, write_buffer_size: int = 64 << 20,
                 write_buffer_count: int = 2) -> None:
        self.budget = budget
        self.block_cache_size = block_cache_size
        self.write_buffer_size = write_buffer_size
        self.write_buffer_count = write_buffer_count
        self.filter_bytes = (budget if budget is not None else block_cache_size + write_buffer_size * write_buffer_count) // 4
        self.cache: Cache | None = None
        self.write_buffers: WriteBufferManager | None = None
        if budget is not None:
            self.cache = Cache(int(budget * (3 - write_buffer_ratio) / 3))
            self.write_buffers = WriteBufferManager.new_write_buffer_manager_with_cache(
                int(2 * budget * write_buffer_ratio / 3), False, self.cache)

    @classmethod
    def from_settings(cls, settings: Mapping[str, str], slots: int) -> RocksDBMemory:
        """One slot's memory from the job's settings; ``slots`` share the managed memory evenly."""
        fixed = setting(settings, "state.backend.rocksdb.memory.fixed-per-slot")
        if fixed is not None:
            budget = fixed
        elif setting(settings, "state.backend.rocksdb.memory.managed"):
            budget = setting(settings, "taskmanager.memory.managed.size") // max(1, slots)
        else:
            budget = None
        return cls(budget, setting(settings, "state.backend.rocksdb.memory.write-buffer-ratio"),
                   _tuned(settings, "state.backend.rocksdb.block.cache-size"),
                   _tuned(settings, "state.backend.rocksdb.writebuffer.size"),
                   _tuned(settings, "state.backend.rocksdb.writebuffer.count"))

    def usage(self) -> int | None:
        """Bytes the slot's shared cache holds now (memtables charged to it included); None if unbounded."""
        return None if self.cache is None else self.cache.get_usage()


_COMPACTION_STYLES = {"level": DBCompactionStyle.level, "universal": DBCompactionStyle.universal,
                      "fifo": DBCompactionStyle.fifo}
_COMPRESSION_TYPES = {
    "no_compression": DBCompressionType.none, "snappy_compression": DBCompressionType.snappy,
    "zlib_compression": DBCompressionType.zlib, "bzlib2_compression": DBCompressionType.bz2,
    "lz4_compression": DBCompressionType.lz4, "lz4hc_compression": DBCompressionType.lz4hc,
    "zstd_compression": DBCompressionType.zstd,
}


@dataclass(frozen=True)
class RocksDBTuning:
    """RocksDB's tuning options by Flink's names (RocksDBConfigurableOptions, over a predefined
    profile), applied to every db and column family as Flink's RocksDBResourceContainer applies them.
    The memory options (write buffers, block cache) are RocksDBMemory's.  The defaults are the config
    keys' (from_settings): Flink's but for ``bloom_filter``: sqlstream always had SST bloom filters
    (10 bits per key, full filters), and its operators' lookups of new keys lean on them."""

    background_jobs: int  # thread.num
    max_open_files: int  # files.open
    log_dir: str | None  # log.dir (None: the db's own directory)
    log_max_file_size: int  # log.max-file-size
    log_file_num: int  # log.file-num
    compaction_style: str  # compaction.style, lower case
    dynamic_level_bytes: bool  # compaction.level.use-dynamic-size
    target_file_size_base: int  # compaction.level.target-file-size-base
    max_bytes_for_level_base: int  # compaction.level.max-size-level-base
    compression_per_level: tuple[str, ...]  # compression.per.level, lower case
    write_buffers_to_merge: int  # writebuffer.number-to-merge
    block_size: int  # block.blocksize
    metadata_block_size: int  # block.metadata-blocksize
    bloom_filter: bool  # use-bloom-filter
    bloom_bits_per_key: float  # bloom-filter.bits-per-key
    bloom_block_based: bool  # bloom-filter.block-based-mode

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> RocksDBTuning:
        return cls(
            background_jobs=_tuned(settings, "state.backend.rocksdb.thread.num"),
            max_open_files=_tuned(settings, "state.backend.rocksdb.files.open"),
            log_dir=_tuned(settings, "state.backend.rocksdb.log.dir"),
            log_max_file_size=_tuned(settings, "state.backend.rocksdb.log.max-file-size"),
            log_file_num=_tuned(settings, "state.backend.rocksdb.log.file-num"),
            compaction_style=_tuned(settings, "state.backend.rocksdb.compaction.style"),
            dynamic_level_bytes=_tuned(settings, "state.backend.rocksdb.compaction.level.use-dynamic-size"),
            target_file_size_base=_tuned(settings, "state.backend.rocksdb.compaction.level.target-file-size-base"),
            max_bytes_for_level_base=_tuned(settings, "state.backend.rocksdb.compaction.level.max-size-level-base"),
            compression_per_level=_tuned(settings, "state.backend.rocksdb.compression.per.level"),
            write_buffers_to_merge=_tuned(settings, "state.backend.rocksdb.writebuffer.number-to-merge"),
            block_size=_tuned(settings, "state.backend.rocksdb.block.blocksize"),
            metadata_block_size=_tuned(settings, "state.backend.rocksdb.block.metadata-blocksize"),
            bloom_filter=_tuned(settings, "state.backend.rocksdb.use-bloom-filter"),
            bloom_bits_per_key=_tuned(settings, "state.backend.rocksdb.bloom-filter.bits-per-key"),
            bloom_block_based=_tuned(settings, "state.backend.rocksdb.bloom-filter.block-based-mode"),
        )

    def apply(self, opts: Options, table: BlockBasedOptions) -> None:
        """Set these options on a db's (or column family's) options and its block-based table's."""
        opts.set_max_background_jobs(self.background_jobs)
        opts.set_max_open_files(self.max_open_files)
        if self.log_dir is not None:
            opts.set_db_log_dir(self.log_dir)
        opts.set_max_log_file_size(self.log_max_file_size)
        opts.set_keep_log_file_num(self.log_file_num)
        opts.set_compaction_style(_COMPACTION_STYLES[self.compaction_style]())
        opts.set_compression_per_level([_COMPRESSION_TYPES[c]() for c in self.compression_per_level])
        opts.set_level_compaction_dynamic_level_bytes(self.dynamic_level_bytes)
        opts.set_target_file_size_base(self.target_file_size_base)
        opts.set_max_bytes_for_level_base(self.max_bytes_for_level_base)
        opts.set_min_write_buffer_number_to_merge(self.write_buffers_to_merge)
        table.set_block_size(self.block_size)
        table.set_metadata_block_size(self.metadata_block_size)
        if self.bloom_filter:
            table.set_bloom_filter(self.bloom_bits_per_key, self.bloom_block_based)


def _options(memory: RocksDBMemory, tuning: RocksDBTuning) -> Options:
    """Raw mode (bytes in, bytes out), the slot's memory options and the job's tuning options (by
    default with bloom filters, so most 'is this key new?' checks skip disk)."""
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.create_missing_column_families(True)
    opts.set_write_buffer_size(memory.write_buffer_size)
    opts.set_max_write_buffer_number(memory.write_buffer_count)
    table = BlockBasedOptions()
    tuning.apply(opts, table)
    if memory.cache is not None and memory.write_buffers is not None:
        opts.set_write_buffer_manager(memory.write_buffers)
        table.set_block_cache(memory.cache)
        # Flink also keeps index and filter blocks in the cache (with a high-priority pool rocksdict
        # cannot set); here, with memtables charged to the same cache, that cost ~40% more CPU per
        # get+put once the state outgrew the memtables (measured), so they stay with the table
        # readers: bloom-filter.bits-per-key / 8 bytes per key (1.25 by default) outside the bound
    else:
        table.set_block_cache(Cache(memory.block_cache_size))
    opts.set_block_based_table_factory(table)
    # a bloom filter over the memtable's keys too: a batch's new keys (multi-get misses) skip its skip list
    # (sqlstream's own, not a Flink option: use-bloom-filter is about SST files)
    opts.set_memtable_prefix_bloom_ratio(0.1)
    opts.set_memtable_whole_key_filtering(True)
    return opts


def _write_options() -> WriteOptions:
    # like Flink: durability comes from checkpoints, a WAL would only slow every put down
    wo = WriteOptions()
    wo.disable_wal = True
    return wo


def _open(path: Path, memory: RocksDBMemory, tuning: RocksDBTuning, read_only: bool = False) -> Rdict:
    """Open a db with every column family it has; RocksDB refuses to open one with any left out."""
    existing = Rdict.list_cf(str(path)) if (path / "CURRENT").exists() else []
    families = {name: _options(memory, tuning) for name in existing}
    access = AccessType.read_only() if read_only else AccessType.read_write()
    return Rdict(str(path), _options(memory, tuning), column_families=families, access_type=access)


_SWEEP_MIN_WRITES = 256  # a small state is swept no more often than every this many writes


class RocksDBState(KeyedState):
    """One named state in its own column family; the entry count is kept here so ``len`` is O(1)."""

    # entries in the state codec, as savepoints hold them; a vectorized operator's rows (its own
    # row encoding, e.g. the GROUP BY of group_agg_rocksdb.py) are not: it writes them to
    # savepoints as a table itself, and sets this False so they are not written twice
    canonical = True

    def __init__(self, name: str, ttl_ms: int | None, cf: Rdict, count: int, clock: Clock = SYSTEM_CLOCK) -> None:
        super().__init__(name, ttl_ms, clock)
        self._bind(cf, count)

    # whether its reader filters its own lookups (keep_own_filter)
    own_filter = False

    def _bind(self, cf: Rdict, count: int) -> None:
        """Point this state at a (new) column family, e.g. after the db was replaced by a restore."""
        self.cf = cf
        self.cf.set_write_options(_write_options())
        if self.own_filter:
            self._drop_memtable_filter()
        self.count = count
        self.writes_to_sweep = max(count, _SWEEP_MIN_WRITES)  # writes left until the next sweep

    def keep_own_filter(self) -> None:
        """Its reader keeps a filter of the keys it stored (state.key_filter), or otherwise knows
        which keys are stored (the rocksdb join's rows past a key's head), and looks up only the
        keys that may be there, nearly all found: the memtables' bloom filter, which only answers
        'absent' sooner, would just cost every insert (15 % of the rocksdb GROUP BY's CPU, measured)."""
        self.own_filter = True
        self._drop_memtable_filter()

    def _drop_memtable_filter(self) -> None:
        # a mutable option: memtables created from now on have no bloom filter
        self.cf.set_options({"memtable_prefix_bloom_size_ratio": "0"})

    def _expire(self, cutoff: int) -> None:
        # Flink's RocksDB drops expired entries when it compacts; here a sweep over the state once
        # it has taken as many writes as it held entries after the last sweep (amortized O(1) a
        # write) drops them
        self.writes_to_sweep -= 1
        if self.writes_to_sweep > 0:
            return
        for raw_key, raw_value in self.cf.items():
            if decode(raw_value)[1] <= cutoff:
                self.cf.delete(raw_key)
                self.count -= 1
        self.writes_to_sweep = max(self.count, _SWEEP_MIN_WRITES)

    def _exists(self, raw_key: bytes) -> bool:
        # key_may_exist answers 'no' from memtable and bloom filters without IO for most new keys
        return self.cf.key_may_exist(raw_key) and self.cf.get(raw_key) is not None

    def _get(self, kg: int, key: tuple) -> Any | None:
        raw = self.cf.get(encode_key(kg, key))
        return None if raw is None else decode(raw)

    def _put(self, kg: int, key: tuple, value: Any) -> None:
        self.put_raw(encode_key(kg, key), encode(value))

    def put_raw(self, raw_key: bytes, raw_value: bytes) -> None:
        """Store already-encoded bytes: a rescaling restore copies entries without decoding them."""
        if not self._exists(raw_key):
            self.count += 1
        self.cf.put(raw_key, raw_value)

    def put_new_raw(self, raw_keys: list[bytes], raw_values: list[bytes]) -> None:
        """Store entries known not to be in the state yet (a restore into an empty backend) in one
        write batch: no lookup per key, and the count grows by their number."""
        batch = WriteBatch(raw_mode=True)
        batch.set_default_column_family(self.cf.get_column_family_handle(_CF_PREFIX + self.name))
        for raw_key, raw_value in zip(raw_keys, raw_values, strict=True):
            batch.put(raw_key, raw_value)
        self.cf.write(batch)
        self.count += len(raw_keys)

    def delete(self, kg: int, key: tuple) -> None:
        raw_key = encode_key(kg, key)
        if self._exists(raw_key):
            self.cf.delete(raw_key)
            self.count -= 1

    def _items(self) -> Iterator[tuple[int, tuple, Any]]:
        # a RocksDB iterator reads a consistent view, so callers may write while iterating
        for raw_key, raw_value in self.cf.items():
            kg, key = decode_key(raw_key)
            yield kg, key, decode(raw_value)

    def __len__(self) -> int:
        return self.count

    def get_many(self, raw_keys: list[bytes]) -> list[bytes | None]:
        """The stored bytes of many keys (None: absent), in one RocksDB multi-get."""
        return self.cf.get(raw_keys)

    def scan(self, chunk: int = 65536) -> Iterator[tuple[list[bytes], list[bytes]]]:
        """Every (key, value) of the state, in key order, as lists of up to ``chunk`` keys and
        values (one consistent iterator; a caller turns each into Arrow before the next)."""
        return _chunked(self.cf.items(), chunk)

    def keys_from(self, low: bytes, limit: int) -> list[bytes]:
        """Up to ``limit`` keys ``>= low``, in key order (keys only: the values are not copied)."""
        return list(islice(self.cf.keys(from_key=low), limit))

    def scan_range(self, low: bytes, high: bytes, chunk: int = 65536) -> Iterator[tuple[list[bytes], list[bytes]]]:
        """The (key, value)s with ``low <= key < high`` as ``scan`` gives them; the scan stops at
        the first key from ``high`` on.  No iterate upper bound: with one (ReadOptions'
        set_iterate_upper_bound) a window aggregation's firing scans ran on into the next key groups
        under load, intermittently (the bound is most likely freed while rocksdict's iterator uses
        it, which could as well end a scan early)."""
        return _chunked(self.cf.items(from_key=low), chunk, high)


def _chunked(items: Iterator[tuple[bytes, bytes]], chunk: int,
             high: bytes | None = None) -> Iterator[tuple[list[bytes], list[bytes]]]:
    """``items`` in lists of up to ``chunk``, up to (not including) key ``high`` if given."""
    keys: list[bytes] = []
    values: list[bytes] = []
    for raw_key, raw_value in items:
        if high is not None and raw_key >= high:
            break
        keys.append(raw_key)
        values.append(raw_value)
        if len(keys) == chunk:
            yield keys, values
            keys, values = [], []
    if keys:
        yield keys, values


class RocksDBStateBackend(StateBackend):
    name = FORMAT

    def __init__(self, key_groups: range, local_dir: Path | None = None, clock: Clock = SYSTEM_CLOCK,
                 memory: RocksDBMemory | None = None, tuning: RocksDBTuning | None = None) -> None:
        super().__init__(key_groups, local_dir, clock)
        # without a slot's memory (a backend on its own): Flink's defaults, one slot
        self.memory = memory if memory is not None else RocksDBMemory.from_settings({}, 1)
        self.tuning = tuning if tuning is not None else RocksDBTuning.from_settings({})
        if local_dir is not None:
            local_dir.mkdir(parents=True, exist_ok=True)
        # a fresh directory per subtask: several backends may share one local_dir
        self.root = Path(tempfile.mkdtemp(prefix="rocksdb-", dir=local_dir))
        # names this backend's shared SST folder: SST numbers are unique only within one db
        self.backend_id = uuid.uuid4().hex
        self.db_path = self.root / "db"
        self.db: Rdict | None = _open(self.db_path, self.memory, self.tuning)
        self._snapshots = 0

    def _live_db(self) -> Rdict:
        if self.db is None:
            raise RuntimeError("the rocksdb state backend is closed")
        return self.db

    def _create(self, name: str, ttl_ms: int | None) -> KeyedState:
        cf = self._live_db().create_column_family(_CF_PREFIX + name, _options(self.memory, self.tuning))
        return RocksDBState(name, ttl_ms, cf, 0, self.clock)

    def _states(self) -> dict[str, RocksDBState]:
        return self.states  # type: ignore[return-value]  # _create only makes RocksDBState

    def write_rows(self, name: str, keys: list[bytes], values: list[bytes], deletes: list[bytes],
                   added: int) -> None:
        """Put and delete many encoded entries of a state in one WriteBatch (one write into the
        memtable instead of one per key); ``added``: how many of the put keys were absent (the
        deleted ones must be present), which keeps the entry count."""
        st = self._states()[name]
        batch = WriteBatch(raw_mode=True)
        batch.set_default_column_family(self._live_db().get_column_family_handle(_CF_PREFIX + name))
        if len(keys) != len(values):
            raise ValueError(f"{len(keys)} keys for {len(values)} values")
        # map() calls the builtin put per key without a Python loop body (a third faster)
        deque(map(batch.put, keys, values), maxlen=0)
        deque(map(batch.delete, deletes), maxlen=0)
        self._live_db().write(batch, _write_options())
        st.count += added - len(deletes)

    def delete_ranges(self, name: str, ranges: list[tuple[bytes, bytes]], removed: int) -> None:
        """Delete the entries of a state in key ranges [low, high) with one WriteBatch (a range
        tombstone each, not a delete per key); ``removed``: how many entries the ranges held."""
        st = self._states()[name]
        batch = WriteBatch(raw_mode=True)
        family = self._live_db().get_column_family_handle(_CF_PREFIX + name)
        for low, high in ranges:
            # named: rocksdict's delete_range ignores set_default_column_family (it would hit 'default')
            batch.delete_range(low, high, family)
        self._live_db().write(batch, _write_options())
        st.count -= removed

    # ---- snapshots

    def _freeze_db(self, name: str) -> Path:
        """The db as it is now, as a RocksDB checkpoint (hard-linked files) under ``staging/``."""
        db = self._live_db()
        # the WAL is off, so everything must be in SST files before the checkpoint links them
        db.flush()
        for st in self._states().values():
            st.cf.flush()
        self._snapshots += 1
        staging = self.root / "staging" / f"{name}-{self._snapshots}"
        staging.parent.mkdir(exist_ok=True)
        Checkpoint(db).create_checkpoint(str(staging))
        return staging

    def frozen_view(self) -> Path:
        """A consistent view of the states now, for scan_view on another thread while processing
        goes on (the files are hard links: nothing is copied); deleted by the scan or with the backend."""
        return self._freeze_db("view")

    def scan_view(self, view: Path, name: str, chunk: int) -> Iterator[tuple[list[bytes], list[bytes]]]:
        """Every (key, value) of state ``name`` in a frozen view, in key order, as lists of up to
        ``chunk`` entries or BATCH_BYTES (long values: a chunk's bytes stay bounded too); the view
        is deleted once scanned."""
        db = _open(view, self.memory, self.tuning, read_only=True)
        try:
            cf = db.get_column_family(_CF_PREFIX + name)
            try:
                read = ReadOptions()
                read.fill_cache(False)  # a scan of a snapshot: its blocks would only evict the live state's
                keys: list[bytes] = []
                values: list[bytes] = []
                size = 0
                for raw_key, raw_value in cf.items(read_opt=read):
                    keys.append(raw_key)
                    values.append(raw_value)
                    size += len(raw_key) + len(raw_value)
                    if len(keys) == chunk or size >= BATCH_BYTES:
                        yield keys, values
                        keys, values, size = [], [], 0
                if keys:
                    yield keys, values
            finally:
                cf.close()
        finally:
            db.close()
            shutil.rmtree(view, ignore_errors=True)

    def scan_view_range(self, view: Path, name: str, low: bytes, high: bytes) -> list[bytes]:
        """The keys ``low <= key < high`` of state ``name`` in a frozen view that scan_view is
        scanning (the keys of one state that go with a chunk of another's, in the same view)."""
        db = _open(view, self.memory, self.tuning, read_only=True)
        try:
            cf = db.get_column_family(_CF_PREFIX + name)
            try:
                read = ReadOptions()
                read.fill_cache(False)
                read.set_iterate_upper_bound(high)
                return list(cf.keys(from_key=low, read_opt=read))
            finally:
                cf.close()
        finally:
            db.close()

    def snapshot(self, checkpoint_id: int, canonical: bool = False) -> SnapshotWriter:
        staging = self._freeze_db(f"chk-{checkpoint_id}")
        counts = {name: len(st) for name, st in self._states().items()}
        in_codec = {name for name, st in self._states().items() if st.canonical}
        key_groups = (self.key_groups.start, self.key_groups.stop)

        def write(directory: Path) -> dict[str, Any]:
            try:
                directory.mkdir(parents=True, exist_ok=True)
                if canonical:
                    return _write_canonical_from(staging, {n: c for n, c in counts.items() if n in in_codec}, directory,
                                                 self.memory, self.tuning)
                return self._write_incremental(staging, directory, counts, key_groups, checkpoint_id)
            finally:
                shutil.rmtree(staging, ignore_errors=True)

        return write

    def _write_incremental(
        self,
        staging: Path,
        directory: Path,
        counts: dict[str, int],
        key_groups: tuple[int, int],
        checkpoint_id: int,
    ) -> dict[str, Any]:
        """Copy SSTs not yet in the shared folder, and all small files into ``directory``."""
        shared = (self.shared_dir or directory.parent / "shared") / self.backend_id
        shared.mkdir(parents=True, exist_ok=True)
        copied = 0
        shared_files: list[Path] = []
        private_files: list[Path] = []
        for f in sorted(staging.iterdir()):
            if f.suffix == ".sst":
                target = shared / f.name
                if not target.exists():
                    # copy under a temporary name so an existing name always means a complete file,
                    # even if two checkpoints of this backend are written at once
                    partial = shared / f".{f.name}.{uuid.uuid4().hex}.partial"
                    shutil.copyfile(f, partial)
                    os.replace(partial, target)
                    copied += f.stat().st_size
                shared_files.append(target)
            else:
                shutil.copyfile(f, directory / f.name)
                copied += f.stat().st_size
                private_files.append(directory / f.name)
        return {
            "format": FORMAT,
            "checkpoint_id": checkpoint_id,
            "backend_id": self.backend_id,
            "key_groups": key_groups,
            "states": counts,
            "shared_files": shared_files,
            "private_files": private_files,
            "bytes_copied": copied,
        }

    # ---- restore

    def restore(self, handles: list[Any]) -> None:
        for handle in handles:
            if handle.get("format") not in (FORMAT, "canonical"):
                raise SnapshotFormatError(
                    f"the rocksdb state backend cannot restore a '{handle.get('format')}' snapshot; "
                    "take a savepoint (canonical format) to switch state backends"
                )
        own = (self.key_groups.start, self.key_groups.stop)
        if (
            len(handles) == 1
            and handles[0]["format"] == FORMAT
            and tuple(handles[0]["key_groups"]) == own
            and self.num_entries() == 0
        ):
            self._restore_whole(handles[0])
            return
        fresh = self.num_entries() == 0
        for handle in handles:
            if handle["format"] == "canonical":
                self._restore_canonical_raw(handle, fresh)
            else:
                self._restore_key_groups(handle, fresh)

    def _restore_canonical_raw(self, handle: dict[str, Any], fresh: bool) -> None:
        """A savepoint's entries are codec bytes already, as this backend stores them: no decoding.

        Batch by batch, so the restore of a savepoint larger than memory holds
        one batch.  Into a ``fresh`` backend (nothing in it before the restore:
        the savepoint's keys are unique, old subtasks' key groups disjoint) a
        batch goes in as one RocksDB write batch, with no lookup per key."""
        for batch in read_canonical_batches(handle, self.key_groups):
            kgs = batch.column("kg").to_numpy().astype(">u2")
            prefixes = pa.FixedSizeBinaryArray.from_buffers(
                pa.binary(_KG_BYTES), len(kgs), [None, pa.py_buffer(kgs.tobytes())])
            keys = pc.binary_join_element_wise(prefixes.cast(pa.binary()), batch.column("key"), b"").to_pylist()
            values = batch.column("value").to_pylist()
            names = batch.column("state")
            for name in pc.unique(names).to_pylist():
                target: RocksDBState = self.state(name)  # type: ignore[assignment]
                rows = np.flatnonzero(pc.equal(names, name).to_numpy(zero_copy_only=False))
                if fresh:
                    target.put_new_raw([keys[i] for i in rows], [values[i] for i in rows])
                else:
                    for i in rows:
                        target.put_raw(keys[i], values[i])

    def _restore_whole(self, handle: dict[str, Any]) -> None:
        """Same key groups: the old db becomes this one, with no entry read or rewritten."""
        self._close_db()
        shutil.rmtree(self.db_path, ignore_errors=True)
        _rebuild(handle, self.db_path)
        db = self.db = _open(self.db_path, self.memory, self.tuning)
        for name, count in handle["states"].items():
            cf = db.get_column_family(_CF_PREFIX + name)
            st = self._states().get(name)
            if st is None:
                self.states[name] = RocksDBState(name, None, cf, count, self.clock)
            else:
                st._bind(cf, count)
        for name, st in self._states().items():
            if name not in handle["states"]:
                st._bind(db.create_column_family(_CF_PREFIX + name, _options(self.memory, self.tuning)), 0)

    def _restore_key_groups(self, handle: dict[str, Any], fresh: bool) -> None:
        """Rescaling: scan only the key-group range this backend shares with the old subtask; into a
        ``fresh`` backend in bounded write batches, as a savepoint's restore."""
        start = max(self.key_groups.start, handle["key_groups"][0])
        stop = min(self.key_groups.stop, handle["key_groups"][1])
        if start >= stop:
            return
        scratch = self.root / "restore" / uuid.uuid4().hex
        _rebuild(handle, scratch)
        old = _open(scratch, self.memory, self.tuning, read_only=True)
        try:
            end = _kg_prefix(stop)  # stop <= 32768 still fits in the prefix
            for name in handle["states"]:
                target: RocksDBState = self.state(name)  # type: ignore[assignment]
                source = old.get_column_family(_CF_PREFIX + name)
                keys: list[bytes] = []
                values: list[bytes] = []
                for raw_key, raw_value in source.items(from_key=_kg_prefix(start)):
                    if raw_key[:_KG_BYTES] >= end:
                        break
                    if not fresh:
                        target.put_raw(raw_key, raw_value)
                        continue
                    keys.append(raw_key)
                    values.append(raw_value)
                    if len(keys) >= BATCH_ENTRIES:
                        target.put_new_raw(keys, values)
                        keys, values = [], []
                if keys:
                    target.put_new_raw(keys, values)
                source.close()
        finally:
            old.close()
            shutil.rmtree(scratch, ignore_errors=True)

    # ---- lifecycle

    def _close_db(self) -> None:
        # every column family handle keeps RocksDB open, so all of them go before the db itself
        if self.db is None:
            return
        for st in self._states().values():
            st.cf.close()
        self.db.close()
        self.db = None

    def close(self) -> None:
        """Close the db and delete its local files: the checkpoints hold everything worth keeping."""
        self._close_db()
        shutil.rmtree(self.root, ignore_errors=True)


def _rebuild(handle: dict[str, Any], target: Path) -> None:
    """Assemble a db directory from a checkpoint by copying, so the checkpoint stays usable."""
    target.mkdir(parents=True)
    for path in [*handle["shared_files"], *handle["private_files"]]:
        shutil.copyfile(path, target / Path(path).name)


def _write_canonical_from(staging: Path, names: dict[str, int], directory: Path,
                          memory: RocksDBMemory, tuning: RocksDBTuning) -> dict[str, Any]:
    """Read the frozen checkpoint and write the backend-independent savepoint format.

    Each state is scanned in key order, so in key-group order, and written in
    bounded batches: the savepoint of a state larger than memory never holds
    more than one batch.  Keys and values already are codec bytes: they are
    copied as they are, nothing decoded."""
    db = _open(staging, memory, tuning, read_only=True)
    writer = CanonicalWriter(directory / CANONICAL_FILE)
    try:
        for name in names:
            cf = db.get_column_family(_CF_PREFIX + name)
            try:
                # a scan of a whole snapshot: its blocks would only push the live state's out of a cache
                read = ReadOptions()
                read.fill_cache(False)
                writer.write_state(name, cf.items(read_opt=read))
            finally:
                cf.close()
    except BaseException:
        writer.abort()
        raise
    finally:
        db.close()
    return writer.close()
