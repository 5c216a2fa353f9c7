"""Keyed state: what an operator keeps per key, partitioned by key group.

Every entry lives in a key group, so a snapshot can be split by key group
and restored into a different parallelism.  Values are treated as
immutable once put (operators copy before they change one), which lets the
heap backend freeze a snapshot by copying dictionaries, not values, and
serialize it asynchronously while processing goes on.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.errors import SqlStreamError
from sqlstream.core.state_backends import STATE_BACKENDS
from sqlstream.runtime.clock import SYSTEM_CLOCK, Clock
from sqlstream.runtime.state.codec import decode, encode

# writes a frozen snapshot under a directory and returns its handle: plain data, files as Paths
SnapshotWriter = Callable[[Path], Any]


class SnapshotFormatError(SqlStreamError):
    """A snapshot was written by a backend that cannot be read by this one."""


class KeyedState(ABC):
    """One named state: (key group, key) -> value, with optional time-to-live.

    TTL counts processing time on ``clock`` (the backend's), so tests expire state by
    advancing a manual clock rather than by sleeping."""

    def __init__(self, name: str, ttl_ms: int | None, clock: Clock = SYSTEM_CLOCK) -> None:
        self.name = name
        self.ttl_ms = ttl_ms
        self.clock = clock

    @abstractmethod
    def _get(self, kg: int, key: tuple) -> Any | None: ...

    @abstractmethod
    def _put(self, kg: int, key: tuple, value: Any) -> None: ...

    @abstractmethod
    def delete(self, kg: int, key: tuple) -> None: ...

    @abstractmethod
    def _items(self) -> Iterator[tuple[int, tuple, Any]]: ...

    @abstractmethod
    def __len__(self) -> int: ...

    # TTL wraps values as (value, last write ms); Flink's state TTL is processing time, and an
    # entry written at t is expired from t + ttl on (TtlUtils.expired: expiration <= now)
    def get(self, kg: int, key: tuple) -> Any | None:
        stored = self._get(kg, key)
        if stored is None or self.ttl_ms is None:
            return stored
        value, touched = stored
        if self.clock.time_ms() - touched >= self.ttl_ms:
            self.delete(kg, key)
            return None
        return value

    def put(self, kg: int, key: tuple, value: Any) -> None:
        if self.ttl_ms is None:
            self._put(kg, key, value)
            return
        now = self.clock.time_ms()
        self._put(kg, key, (value, now))
        self._expire(now - self.ttl_ms)

    def _expire(self, cutoff: int) -> None:  # noqa: B027 - optional hook
        """Drop entries last written at or before ``cutoff`` that the backend finds cheaply, so that
        keys never read again do not stay forever (Flink cleans expired state in the background:
        incrementally on the heap backend, in compaction on RocksDB).  Without it an expired entry
        goes when it is next read or listed."""

    def items(self) -> Iterator[tuple[int, tuple, Any]]:
        if self.ttl_ms is None:
            yield from self._items()
            return
        cutoff = self.clock.time_ms() - self.ttl_ms
        for kg, key, (value, touched) in list(self._items()):
            if touched <= cutoff:
                self.delete(kg, key)
            else:
                yield kg, key, value


CANONICAL_FILE = "keyed-state.arrow"
_CANONICAL_SCHEMA = pa.schema([("state", pa.string()), ("kg", pa.int32()), ("key", pa.binary()), ("value", pa.binary())])
KG_BYTES = 2  # a key group as a key prefix: max parallelism is 32768, so two big-endian bytes
# a canonical snapshot is written and read in record batches of at most this many entries or
# bytes, so neither a savepoint nor its restore ever holds more than one batch of the state
BATCH_ENTRIES = 65_536
BATCH_BYTES = 8 << 20


def kg_prefix(kg: int) -> bytes:
    """The key group as the first bytes of a stored key: bytewise order is key-group order."""
    return kg.to_bytes(KG_BYTES, "big")


class CanonicalWriter:
    """The backend-independent snapshot format, written as the entries come.

    One Arrow IPC file, a row per entry: the state's name, the key group, the
    key and the stored value as codec bytes (rocksdb writes its bytes as they
    are, nothing decoded).  Entries are taken as (key-group-prefixed key, value)
    bytes, the way the rocksdb backend stores them, and written in record
    batches of bounded size, so the memory a snapshot takes does not grow with
    the state: a state larger than memory can be saved.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.batch_entries = BATCH_ENTRIES
        self.batch_bytes = BATCH_BYTES
        self._sink = pa.OSFile(str(path), "wb")
        self._writer = pa.ipc.new_file(self._sink, _CANONICAL_SCHEMA)
        self.entries = 0
        self.batch_key_groups: list[list[int]] = []  # [lowest, highest] key group of each batch

    def write_state(self, name: str, entries: Iterable[tuple[bytes, bytes]]) -> None:
        """Every (key-group-prefixed key, value) of one state, as rocksdb stores them, in batches."""
        keys: list[bytes] = []
        values: list[bytes] = []
        size = 0
        for key, value in entries:
            keys.append(key)
            values.append(value)
            size += len(key) + len(value)
            if len(keys) >= self.batch_entries or size >= self.batch_bytes:
                self._write_prefixed(name, keys, values)
                keys, values, size = [], [], 0
        if keys:
            self._write_prefixed(name, keys, values)

    def write_entries(self, name: str, entries: Iterable[tuple[int, bytes, bytes]]) -> None:
        """Every (key group, key, value) of one state, as the heap backend has them, in batches."""
        kgs: list[int] = []
        keys: list[bytes] = []
        values: list[bytes] = []
        size = 0
        for kg, key, value in entries:
            kgs.append(kg)
            keys.append(key)
            values.append(value)
            size += len(key) + len(value)
            if len(keys) >= self.batch_entries or size >= self.batch_bytes:
                self._write_batch(name, np.array(kgs, np.int32), pa.array(keys, pa.binary()), values)
                kgs, keys, values, size = [], [], [], 0
        if keys:
            self._write_batch(name, np.array(kgs, np.int32), pa.array(keys, pa.binary()), values)

    def _write_prefixed(self, name: str, keys: list[bytes], values: list[bytes]) -> None:
        raw = pa.array(keys, pa.binary())
        # the key group is the first two bytes of every key: read from the data buffer at each offset
        offsets = np.frombuffer(raw.buffers()[1], np.int32, len(raw))
        data = np.frombuffer(raw.buffers()[2], np.uint8)
        kgs = data[offsets].astype(np.int32) * 256 + data[offsets + 1]
        # the stop is given: pyarrow 26's binary_slice fails on an open one ("Negative buffer resize")
        longest = pc.max(pc.binary_length(raw)).as_py()
        self._write_batch(name, kgs, pc.binary_slice(raw, KG_BYTES, longest), values)

    def _write_batch(self, name: str, kgs: np.ndarray, keys: pa.Array, values: list[bytes]) -> None:
        batch = pa.record_batch([pa.repeat(pa.scalar(name, pa.string()), len(keys)), pa.array(kgs, pa.int32()),
                                 keys, pa.array(values, pa.binary())], schema=_CANONICAL_SCHEMA)
        self._writer.write_batch(batch)
        self.entries += len(keys)
        self.batch_key_groups.append([int(kgs.min()), int(kgs.max())])

    def close(self) -> dict[str, Any]:
        """Finish the file; its handle, with each batch's key-group range: a restore reads only the
        batches that hold its key groups (rocksdb writes each state in key-group order, so a rescaled
        restore reads about its share of the file)."""
        self._writer.close()
        self._sink.close()
        return {"format": "canonical", "file": self.path, "batch_key_groups": self.batch_key_groups}

    def abort(self) -> None:
        """Close the file after a failure: it is left incomplete and never named by a handle."""
        with contextlib.suppress(pa.ArrowException, OSError):
            self._writer.close()
        self._sink.close()


def write_canonical(path: Path, entries: dict[str, dict[tuple[int, tuple], Any]]) -> dict[str, Any]:
    """{state name: {(key group, key): stored value}} in the canonical format, encoded batch by batch."""
    writer = CanonicalWriter(path)
    try:
        for name, data in entries.items():
            writer.write_entries(name, ((kg, encode(key), encode(value)) for (kg, key), value in data.items()))
    except BaseException:
        writer.abort()
        raise
    return writer.close()


def read_canonical_batches(handle: dict[str, Any], key_groups: range) -> Iterator[pa.RecordBatch]:
    """The canonical snapshot's entries in ``key_groups``, one bounded record batch at a time.

    The file is read, not memory-mapped, batch by batch: a restore holds one
    batch of the snapshot, whatever its size (the address space too)."""
    ranges = handle.get("batch_key_groups")  # absent in savepoints of older versions: every batch is read
    with pa.OSFile(str(handle["file"])) as source:
        reader = pa.ipc.open_file(source)
        for i in range(reader.num_record_batches):
            if ranges is not None and (ranges[i][1] < key_groups.start or ranges[i][0] >= key_groups.stop):
                continue
            batch = reader.get_batch(i)
            kg = batch.column("kg")
            mine = batch.filter(pc.and_(pc.greater_equal(kg, key_groups.start), pc.less(kg, key_groups.stop)))
            if mine.num_rows:
                yield mine


def read_canonical_encoded(handle: dict[str, Any], key_groups: range) -> Iterator[tuple[str, int, bytes, bytes]]:
    """(state, key group, key bytes, value bytes) of the entries in ``key_groups``, batch by batch."""
    for batch in read_canonical_batches(handle, key_groups):
        columns = [batch.column(c).to_pylist() for c in ("state", "kg", "key", "value")]
        yield from zip(*columns, strict=True)


# a columnar state's frozen rows: one table, or tables produced one at a time (a state read from
# disk as the snapshot is written, never whole in memory), or None when it is empty
FrozenTables = pa.Table | Iterable[pa.Table] | None


def _write_tables(path: Path, tables: FrozenTables) -> bool:
    """Write the rows into one Arrow IPC file in bounded batches (restores read it batch by batch);
    whether there were any (no file otherwise)."""
    parts = [tables] if isinstance(tables, pa.Table) else (tables or [])
    sink = writer = None
    try:
        for table in parts:
            if not table.num_rows:
                continue
            if writer is None:
                sink = pa.OSFile(str(path), "wb")
                writer = pa.ipc.new_file(sink, table.schema)
            writer.write_table(table, max_chunksize=BATCH_ENTRIES)
    finally:
        if writer is not None:
            writer.close()
        if sink is not None:
            sink.close()
    return writer is not None


class ColumnarState:
    """Keyed state kept as Arrow tables with a ``$kg`` (key group) column, for vectorized operators.

    Window aggregation keeps its partial aggregates this way so that merging
    and firing are Arrow group-bys, not a Python step per key.  It lives in
    memory, except where an operator keeps the rows in the backend's keyed
    state (``savepoint_only``: the rocksdb GROUP BY and window aggregation) and
    this is only their savepoint view; snapshots write it as Arrow IPC and a
    restore keeps the rows of the subtask's key groups.
    """

    # True for a state whose rows the backend's keyed state holds (RocksDB's GROUP BY rows): the
    # backend's own checkpoints carry them, so only savepoints (canonical) write the table
    savepoint_only = False

    def __init__(self, name: str) -> None:
        self.name = name
        self._tables: list[pa.Table] = []
        # restored files not read yet, with the key groups to keep: an operator that stores the rows
        # elsewhere (RocksDB) takes them batch by batch (restored_tables); ``tables`` reads them whole
        self._pending: list[tuple[Path, range]] = []

    @property
    def tables(self) -> list[pa.Table]:
        if self._pending:
            self._tables = list(self.restored_tables())  # which takes (empties) the list it starts from
        return self._tables

    @tables.setter
    def tables(self, tables: list[pa.Table]) -> None:
        self._tables = tables

    def restore_file(self, path: Path, key_groups: range) -> None:
        """Rows of a snapshot file to restore (those of ``key_groups``), read when first needed."""
        self._pending.append((path, key_groups))

    def restored_tables(self) -> Iterator[pa.Table]:
        """Take the state's rows, restored files read a batch at a time as they are taken: a
        restore into RocksDB never holds more than a batch of them."""
        pending, self._pending = self._pending, []
        tables, self._tables = self._tables, []
        yield from tables
        for path, key_groups in pending:
            with pa.OSFile(str(path)) as source:
                reader = pa.ipc.open_file(source)
                for i in range(reader.num_record_batches):
                    batch = reader.get_batch(i)
                    kg = batch.column("$kg")
                    mine = batch.filter(pc.and_(pc.greater_equal(kg, key_groups.start), pc.less(kg, key_groups.stop)))
                    if mine.num_rows:
                        yield pa.Table.from_batches([mine])

    def frozen(self) -> pa.Table | None:
        # tables are never changed in place, so the list copy is a consistent view
        tables = [t for t in self.tables if t.num_rows]
        return pa.concat_tables(tables) if tables else None

    def freeze(self) -> Callable[[], FrozenTables]:
        """The state now, as a table made when the snapshot is written: a state whose table is
        costly to build takes a cheap consistent view here and builds it off the processing path
        (or never: the final snapshot of a job without checkpoint storage is not written); a
        state larger than memory gives its table in parts."""
        table = self.frozen()
        return lambda: table


class RowsSavepointView(ColumnarState):
    """The savepoint view of rows an operator keeps in RocksDB (its GROUP BY, join or window rows):
    written as the table the operator's columnar (hashmap) form writes, so that savepoints move
    between backends; checkpoints leave it out, the rows' column family is in them."""

    savepoint_only = True

    def __init__(self, name: str, freeze: Callable[[], Callable[[], Iterator[pa.Table]]]) -> None:
        super().__init__(name)
        self._freeze = freeze

    def frozen(self) -> pa.Table | None:
        tables = list(self._freeze()())
        return pa.concat_tables(tables) if tables else None

    def freeze(self) -> Callable[[], Iterator[pa.Table]]:
        # a view taken now (RocksDB changes with the next batch); read and decoded when the savepoint is written
        return self._freeze()


class StateBackend(ABC):
    """The keyed state of one operator subtask."""

    name = "abstract"

    @property
    def supports_columnar(self) -> bool:
        """Whether Arrow tables can be kept beside keyed state (the vectorized operator forms)."""
        return STATE_BACKENDS[self.name].columnar

    def __init__(self, key_groups: range, local_dir: Path | None = None, clock: Clock = SYSTEM_CLOCK) -> None:
        self.key_groups = key_groups
        self.local_dir = local_dir
        # processing time for TTL: of keyed states and of the columnar stores operators keep beside them
        self.clock = clock
        self.states: dict[str, KeyedState] = {}
        # where incremental snapshots keep files shared between checkpoints (the checkpoint root's)
        self.shared_dir: Path | None = None
        self.columnar_states: dict[str, ColumnarState] = {}

    def columnar(self, name: str) -> ColumnarState:
        st = self.columnar_states.get(name)
        if st is None:
            st = self.columnar_states[name] = ColumnarState(name)
        return st

    def snapshot_all(self, checkpoint_id: int, canonical: bool = False) -> SnapshotWriter:
        """Keyed and columnar state: the backend's own snapshot plus Arrow files for columnar state."""
        keyed = self.snapshot(checkpoint_id, canonical)
        columnar = {name: st.freeze() for name, st in self.columnar_states.items() if canonical or not st.savepoint_only}

        def write(directory: Path) -> Any:
            files = {}
            for name, frozen in columnar.items():
                path = directory / f"columnar-{name}.arrow"
                if _write_tables(path, frozen()):
                    files[name] = path
            return {"keyed": keyed(directory), "columnar": files}

        return write

    def restore_all(self, handles: list[Any]) -> None:
        """Restore what snapshot_all wrote (from one or more old subtasks)."""
        self.restore([h["keyed"] for h in handles])
        for h in handles:
            for name, path in h.get("columnar", {}).items():
                self.columnar(name).restore_file(path, self.key_groups)

    def take_columnar(self, name: str) -> pa.Table | None:
        """Remove a columnar state and return its rows: a columnar snapshot restored where the
        operator keeps the per-key form (rocksdb) is converted once, then forgotten."""
        st = self.columnar_states.pop(name, None)
        return None if st is None else st.frozen()

    def state(self, name: str, ttl_ms: int | None = None) -> KeyedState:
        st = self.states.get(name)
        if st is None:
            st = self.states[name] = self._create(name, ttl_ms)
        else:
            st.ttl_ms = ttl_ms  # a state restored before its operator declared it gets its TTL now
        return st

    @abstractmethod
    def _create(self, name: str, ttl_ms: int | None) -> KeyedState: ...

    @abstractmethod
    def snapshot(self, checkpoint_id: int, canonical: bool = False) -> SnapshotWriter:
        """Freeze the current state (synchronous, cheap); the returned writer persists it later.

        ``canonical`` (savepoints) writes the backend-independent format that
        every backend can restore; otherwise the backend may use its own.
        """

    @abstractmethod
    def restore(self, handles: list[Any]) -> None:
        """Load entries of this subtask's key groups from the handles of one or more old subtasks."""

    def _restore_canonical(self, handle: Any) -> None:
        for name, kg, key, value in read_canonical_encoded(handle, self.key_groups):
            self.state(name)._put(kg, decode(key), decode(value))

    def num_entries(self) -> int:
        return sum(len(s) for s in self.states.values())

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release files and memory."""
