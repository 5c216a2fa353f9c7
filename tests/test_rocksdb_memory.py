"""RocksDB's memory options, by Flink's names: checked when set, and in effect on the databases.

Each option is observed on RocksDB itself (memtable sizes, files flushed,
the shared cache's usage), not on the objects that carry it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from sqlstream.core.errors import PlanError
from sqlstream.frontend.session import Session
from sqlstream.runtime.state import BackendFactory, StateBackend
from sqlstream.runtime.state.rocksdb import RocksDBStateBackend
from tests.conftest import apply_changelog, rows

MB = 1 << 20


@pytest.fixture
def backends():
    """Makes rocksdb backends, closing them after the test: ``backends(settings)`` or, for backends of
    one job, ``backends(factory, slot)``."""
    made: list[StateBackend] = []

    def make(settings: dict[str, str] | BackendFactory, slot: int = 0) -> RocksDBStateBackend:
        factory = settings if isinstance(settings, BackendFactory) else BackendFactory("rocksdb", settings, 1)
        backend = factory.create(range(128), slot)
        made.append(backend)
        assert isinstance(backend, RocksDBStateBackend)
        return backend

    yield make
    for backend in made:
        backend.close()


def fill(backend: RocksDBStateBackend, megabytes: int, name: str = "s") -> None:
    st = backend.state(name)
    for i in range(megabytes * 1024):
        st.put(i % 128, (i,), os.urandom(1000))  # incompressible: the bytes reach RocksDB as they are


def memtable_bytes(backend: RocksDBStateBackend, name: str = "s") -> int:
    return backend.state(name).cf.property_int_value("rocksdb.cur-size-all-mem-tables")  # type: ignore[attr-defined]


def flushed_bytes(backend: RocksDBStateBackend, name: str = "s") -> int:
    """The bytes of a state's SST files: what its memtables flushed so far."""
    return backend.state(name).cf.property_int_value("rocksdb.total-sst-files-size")  # type: ignore[attr-defined]


def settle(backend: RocksDBStateBackend, *names: str) -> None:
    """Wait for the flushes RocksDB runs in the background (slow on a loaded machine) to finish."""
    deadline = time.monotonic() + 60
    props = ("rocksdb.mem-table-flush-pending", "rocksdb.num-running-flushes")
    while any(backend.state(n).cf.property_int_value(p) for n in names for p in props):  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, "RocksDB's flushes did not finish"
        time.sleep(0.01)


def test_writebuffer_size_and_count_bound_the_memtables(backends) -> None:
    default = backends({"state.backend.rocksdb.memory.managed": "false"})
    fill(default, 8)
    assert flushed_bytes(default) == 0 and memtable_bytes(default) > 8 * MB  # 64 mb memtables: nothing flushed

    small = backends({"state.backend.rocksdb.memory.managed": "false",
                      "state.backend.rocksdb.writebuffer.size": "256 kb",
                      "state.backend.rocksdb.writebuffer.count": "3"})
    fill(small, 8)
    settle(small, "s")
    assert flushed_bytes(small) > 4 * MB
    assert memtable_bytes(small) <= 3 * 300 * 1024


def cache_capacity(backend: RocksDBStateBackend) -> int:
    return backend.state("s").cf.property_int_value("rocksdb.block-cache-capacity")  # type: ignore[attr-defined]


def test_block_cache_capacity_follows_the_options(backends) -> None:
    # unbounded: each column family's own cache of block.cache-size
    assert cache_capacity(backends({"state.backend.rocksdb.memory.managed": "false",
                                    "state.backend.rocksdb.block.cache-size": "3 mb"})) == 3 * MB
    assert cache_capacity(backends({"state.backend.rocksdb.memory.managed": "false"})) == 8 * MB  # Flink's default
    # bounded: the shared cache holds (3 - r) / 3 of the budget, r the write buffer ratio (Flink's sizing)
    assert cache_capacity(backends({})) == int(128 * MB * 2.5 / 3)
    assert cache_capacity(backends({"state.backend.rocksdb.memory.fixed-per-slot": "30 mb",
                                    "state.backend.rocksdb.memory.write-buffer-ratio": "0.2"})) == int(30 * MB * 2.8 / 3)
    # the block cache size does not apply to bounded memory
    assert cache_capacity(backends({"state.backend.rocksdb.block.cache-size": "3 mb"})) == int(128 * MB * 2.5 / 3)


def test_fixed_per_slot_bounds_the_shared_cache_that_memtables_are_charged_to(backends) -> None:
    # memtables of 1 mb: each memtable's bloom filter (a tenth of its size) is charged to the cache too
    bounded = backends({"state.backend.rocksdb.memory.fixed-per-slot": "4 mb",
                        "state.backend.rocksdb.writebuffer.size": "1 mb"})
    fill(bounded, 4, "a")
    fill(bounded, 4, "b")
    settle(bounded, "a", "b")
    assert bounded.memory.budget == 4 * MB
    usage = bounded.memory.usage()
    # the write buffer manager flushed memtables to stay near the budget (not strictly below it: the
    # cache's capacity is soft, as in Flink), far below the 8 mb written, which unbounded memtables would hold
    assert usage is not None and 0 < usage <= 2 * bounded.memory.budget
    assert flushed_bytes(bounded, "a") > 0 and flushed_bytes(bounded, "b") > 0

    unbounded = backends({"state.backend.rocksdb.memory.managed": "false"})
    assert unbounded.memory.usage() is None and unbounded.memory.budget is None


def test_managed_memory_is_split_between_slots_and_shared_within_one(backends) -> None:
    job = BackendFactory("rocksdb", {}, 4)
    first = backends(job, 0)
    second = backends(job, 0)  # another operator's backend in the same slot
    other = backends(job, 1)
    assert first.memory is second.memory and first.memory is not other.memory
    assert first.memory.budget == 128 * MB // 4  # Flink's local execution: 128 mb managed memory
    fill(first, 2)
    shared = first.memory.usage()
    assert shared is not None and shared > MB
    assert (other.memory.usage() or 0) < shared / 4  # slot 1's cache holds none of slot 0's memtables
    fill(second, 2, "t")
    assert (first.memory.usage() or 0) > shared

    sized = backends(BackendFactory("rocksdb", {"taskmanager.memory.managed.size": "64 mb"}, 2))
    assert sized.memory.budget == 32 * MB
    fixed = backends(BackendFactory("rocksdb", {"taskmanager.memory.managed.size": "64 mb",
                                                "state.backend.rocksdb.memory.fixed-per-slot": "10 mb"}, 2))
    assert fixed.memory.budget == 10 * MB  # fixed-per-slot wins over managed memory, as in Flink


@pytest.mark.parametrize(("key", "value", "message"), [
    ("state.backend.rocksdb.memory.managed", "yes", "'yes' is not a boolean"),
    ("state.backend.rocksdb.memory.fixed-per-slot", "lots", "'lots' is not a memory size"),
    ("state.backend.rocksdb.memory.write-buffer-ratio", "1.5", "must lie strictly between 0 and 1"),
    ("state.backend.rocksdb.block.cache-size", "8 parsecs", "is not a memory size"),
    ("state.backend.rocksdb.writebuffer.size", "-1", "is not a memory size"),
    ("state.backend.rocksdb.writebuffer.count", "0", "must be at least 1"),
])
def test_bad_memory_option_values_are_refused(key: str, value: str, message: str) -> None:
    with pytest.raises(PlanError, match=message):
        Session().execute_script(f"SET '{key}' = '{value}'")


def test_a_misspelt_memory_option_is_refused_with_did_you_mean() -> None:
    with pytest.raises(PlanError, match="did you mean 'state.backend.rocksdb.writebuffer.size'"):
        Session().execute_script("SET 'state.backend.rocksdb.writebuffer.sise' = '1 mb'")
    with pytest.raises(PlanError, match="did you mean 'state.backend.rocksdb.memory.fixed-per-slot'"):
        Session().execute_script("SET 'state.backend.rocksdb.memory.fixed-per-slots' = '1 mb'")


def test_a_job_gives_each_slot_its_memory_from_the_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    created: list[tuple[int, RocksDBStateBackend]] = []
    create = BackendFactory.create

    def recording(self: BackendFactory, key_groups: range, slot: int, local_dir: Path | None = None) -> StateBackend:
        backend = create(self, key_groups, slot, local_dir)
        created.append((slot, backend))  # type: ignore[arg-type]
        return backend

    monkeypatch.setattr(BackendFactory, "create", recording)
    session = Session()
    result = session.execute_script("""
SET 'state.backend.type' = 'rocksdb';
SET 'parallelism.default' = '2';
SET 'state.backend.rocksdb.memory.fixed-per-slot' = '24 mb';
SET 'state.backend.rocksdb.writebuffer.size' = '1 mb';
CREATE TABLE gen (seq BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '3000',
    'fields.seq.kind' = 'sequence', 'fields.seq.start' = '0', 'fields.seq.end' = '2999');
SELECT k, COUNT(*) AS n FROM (SELECT seq % 5 AS k FROM gen) GROUP BY k;
""")[-1]
    assert rows(apply_changelog(result.table)) == [(k, 600) for k in range(5)]
    assert sorted(slot for slot, _ in created) == [0, 1]
    for _, backend in created:
        assert backend.memory.budget == 24 * MB and backend.memory.write_buffer_size == MB
    assert created[0][1].memory is not created[1][1].memory


def _memtable_bloom_ratio(backend: RocksDBStateBackend, state: str) -> float:
    """The memtable bloom ratio RocksDB runs a state's column family with (its latest OPTIONS file)."""
    latest = max(backend.db_path.glob("OPTIONS-*"), key=lambda p: int(p.name.split("-")[1]))
    section = latest.read_text().split(f'[CFOptions "state\\:{state}"]')[1].split("[")[0]
    (line,) = [x for x in section.splitlines() if x.strip().startswith("memtable_prefix_bloom_size_ratio=")]
    return float(line.split("=")[1])


def test_a_state_filtering_its_own_lookups_runs_without_a_memtable_bloom_filter_after_a_restore_too(
        backends, tmp_path: Path) -> None:
    # the GROUP BY rows keep their own key filter: the memtables' bloom filter would only cost inserts;
    # other states keep it, and a restore that reopens the db keeps the choice
    backend = backends({})
    rows, other = backend.state("rows"), backend.state("other")
    rows.keep_own_filter()
    rows.put(3, ("k",), 1)
    other.put(3, ("k",), 1)
    assert _memtable_bloom_ratio(backend, "rows") == 0 and _memtable_bloom_ratio(backend, "other") > 0
    handle = backend.snapshot(1)(tmp_path / "chk-1")
    restored = backends({})
    restored.state("rows").keep_own_filter()
    restored.restore([handle])
    assert restored.state("rows").get(3, ("k",)) == 1
    assert _memtable_bloom_ratio(restored, "rows") == 0 and _memtable_bloom_ratio(restored, "other") > 0
