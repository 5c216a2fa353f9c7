"""Checkpoint storage: verified restores, fallback past a corrupt checkpoint, movable savepoints, clean-up.

The jobs are real (datagen -> tumbling window -> 2PC filesystem sink); the
committed output must always equal DuckDB's answer exactly, so a fallback
to an older checkpoint is only correct if the commits made after it are
undone before its rows are written again.
"""

from __future__ import annotations

import json
import pickle
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sqlstream.frontend.session import Session
from sqlstream.runtime.checkpoint.coordinator import CheckpointCoordinator, CheckpointTimeout
from sqlstream.runtime.checkpoint.storage import (
    COMMITS,
    METADATA,
    CheckpointError,
    CheckpointStorage,
    completed_ids,
    read_checkpoint,
    referenced_files,
    write_metadata,
    write_subtask_state,
)
from sqlstream.runtime.executor import JobConfig, JobResult
from sqlstream.runtime.state import create_backend
from tests.conftest import duckdb_rows, rows
from tests.fault_harness import committed

ROWS = 8000


def job_script(out: Path, chk: Path, backend: str, interval: str = "1 h", rate: int = 2500,
               retained: int = 3) -> str:
    return f"""
SET 'execution.checkpointing.interval' = '{interval}';
SET 'state.checkpoints.dir' = '{chk}';
SET 'state.checkpoints.num-retained' = '{retained}';
SET 'state.backend.type' = '{backend}';
SET 'table.exec.batch-size' = '100';
CREATE TABLE gen (
    seq BIGINT,
    ts AS TO_TIMESTAMP_LTZ(seq * 20, 3),
    WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH (
    'connector' = 'datagen', 'rows-per-second' = '{rate}',
    'fields.seq.kind' = 'sequence', 'fields.seq.start' = '0', 'fields.seq.end' = '{ROWS - 1}'
);
CREATE TABLE out (window_start TIMESTAMP(3), k BIGINT, n BIGINT, s BIGINT)
WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv');
INSERT INTO out
SELECT window_start, seq % 7 AS k, COUNT(*) AS n, SUM(seq) AS s
FROM TABLE(TUMBLE(TABLE gen, DESCRIPTOR(ts), INTERVAL '2' SECOND))
GROUP BY window_start, window_end, seq % 7;
"""


def expected_rows() -> list[tuple]:
    return duckdb_rows(f"""
        SELECT epoch_ms((seq * 20 // 2000) * 2000), seq % 7, COUNT(*), SUM(seq)
        FROM range({ROWS}) r(seq) GROUP BY ALL""")


class Running:
    """A job run in a background thread, with its executor at hand."""

    def __init__(self, script: str, restore: str | None = None) -> None:
        self.session = Session(restore_from=restore)
        self.errors: list[BaseException] = []
        self.results: list[Any] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(script,), daemon=True)
        self.thread.start()
        self.executor = self._wait(lambda: self.session.current_executor, "the job to start")
        self._wait(lambda: self.executor.running.is_set(), "the job to run")

    def _run(self, script: str) -> None:
        try:
            self.results = self.session.execute_script(script)
        except BaseException as e:  # noqa: BLE001 - surfaced by the test
            self.errors.append(e)
        finally:
            self.done.set()

    def _wait(self, condition: Callable[[], Any], what: str) -> Any:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.errors:
                raise self.errors[0]
            value = condition()
            if value:
                return value
            time.sleep(0.01)
        raise AssertionError(f"timed out waiting for {what}")

    def checkpoint(self) -> Path:
        """A checkpoint taken now, once every sink has committed it."""
        path = self.executor.coordinator.trigger_checkpoint().result(timeout=60)
        self.executor._await_notified(self.executor.coordinator.latest_completed, 30)
        return path

    def checkpoint_until_output(self, out: Path) -> None:
        """Checkpoints (each commits what the sink staged) until some windows have been committed."""
        self._wait(lambda: self.checkpoint() and committed_rows(out), "committed output")

    def crash(self) -> None:
        """Stop without a final checkpoint or commit, as a killed process would."""
        self.executor.cancel()
        assert self.done.wait(60)
        assert not self.errors, self.errors


def run_to_end(script: str, restore: str | None = None) -> JobResult:
    results = Session(restore_from=restore).execute_script(script)
    job = results[-1].job
    assert job is not None
    return job


def committed_rows(out: Path) -> int:
    return committed(out).num_rows


def two_checkpoints_then_crash(tmp: Path, backend: str) -> tuple[Path, Path, int]:
    """A job that takes checkpoints a and b, its sink committing output at each, then crashes.

    Returns (output dir, checkpoint root, id of b)."""
    out, chk = tmp / "out", tmp / "chk"
    job = Running(job_script(out, chk, backend))
    job.checkpoint_until_output(out)
    job.checkpoint()
    at_a = committed_rows(out)
    job._wait(lambda: job.executor.live_subtasks[0].source_metrics.records_out > 2500, "more input")
    b = job.checkpoint()
    assert committed_rows(out) > at_a, "the sink should have committed output at the newer checkpoint"
    job.crash()
    return out, chk, int(b.name.split("-")[1])


# ------------------------------------------------------------------ foreign content

class _Payload:
    """Unpickling this creates a file: the stand-in for any code a pickle may run."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (Path.touch, (self.marker,))


@pytest.mark.parametrize("layout", ["savepoint", "checkpoint root"])
def test_a_pickle_metadata_is_refused_and_never_runs(tmp_path: Path, layout: str) -> None:
    proof = tmp_path / "pickle-ran"
    pickle.loads(pickle.dumps(_Payload(proof)))  # noqa: S301 - the payload really runs under pickle
    assert proof.exists()

    marker = tmp_path / "payload-ran"
    target = tmp_path / "sp" if layout == "savepoint" else tmp_path / "root" / "chk-7"
    target.mkdir(parents=True)
    (target / METADATA).write_bytes(pickle.dumps(_Payload(marker)))
    out = tmp_path / "out"
    restore = target if layout == "savepoint" else target.parent
    with pytest.raises(CheckpointError, match="not sqlstream checkpoint metadata"):
        run_to_end(job_script(out, tmp_path / "chk", "hashmap", rate=100_000), restore=str(restore))
    assert not marker.exists()
    assert not out.exists() or not any(out.iterdir())  # nothing ran


def test_metadata_that_parses_but_was_changed_is_refused(tmp_path: Path) -> None:
    out, chk = tmp_path / "out", tmp_path / "chk"
    job = Running(job_script(out, chk, "hashmap"))
    path = job.checkpoint()
    job.crash()
    doc = json.loads((path / METADATA).read_text())
    doc["max_parallelism"] = 256  # valid JSON, plausible content, not what was written
    (path / METADATA).write_text(json.dumps(doc))
    with pytest.raises(CheckpointError, match="checksum"):
        run_to_end(job_script(out, chk, "hashmap"), restore=str(path))


# ------------------------------------------------------------------ fallback past a corrupt checkpoint

def _corrupt(path: Path, how: str) -> None:
    data = path.read_bytes()
    if not data:  # an empty file (RocksDB's unused WAL) can only grow
        path.write_bytes(b"\x00")
    elif how == "truncate":
        path.write_bytes(data[: len(data) // 2])
    else:
        middle = len(data) // 2
        path.write_bytes(data[:middle] + bytes([data[middle] ^ 0x5A]) + data[middle + 1:])


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_a_corrupt_newest_checkpoint_falls_back_to_the_previous_one_exactly_once(tmp_path: Path, backend: str) -> None:
    work = tmp_path / "work"
    out, chk, newest = two_checkpoints_then_crash(work, backend)
    assert sorted(completed_ids(chk))[-2:] == [newest - 1, newest]
    journal = list((chk / COMMITS).rglob(f"*-{newest}"))
    assert journal, "the commit at the newest checkpoint is journaled"
    pristine = tmp_path / "pristine"
    shutil.copytree(work, pristine)
    files = sorted(p.relative_to(chk / f"chk-{newest}") for p in (chk / f"chk-{newest}").rglob("*") if p.is_file())
    assert Path(METADATA) in files and len(files) >= 3
    expected = expected_rows()
    for i, rel in enumerate(files):
        how = "truncate" if i % 2 == 0 else "flip"
        shutil.rmtree(work)
        shutil.copytree(pristine, work)  # the same paths: sink committables name them
        _corrupt(chk / f"chk-{newest}" / rel, how)
        # the rest of the input at full speed (the rate is no part of the operators' identity)
        job = run_to_end(job_script(out, chk, backend, rate=1_000_000), restore=str(chk))
        assert rows(committed(out)) == expected, f"{how} {rel}: output not exactly once"
        assert any(f"checkpoint {newest} skipped" in w for w in job.restore_warnings), (rel, job.restore_warnings)
        assert not (chk / f"chk-{newest}").exists()  # it never becomes valid again


def test_every_checkpoint_corrupt_is_an_error_naming_each(tmp_path: Path) -> None:
    out, chk, newest = two_checkpoints_then_crash(tmp_path, "hashmap")
    for n in completed_ids(chk):
        _corrupt(chk / f"chk-{n}" / METADATA, "truncate")
    with pytest.raises(CheckpointError, match=f"checkpoint {newest} skipped.*checkpoint {newest - 1} skipped"):
        run_to_end(job_script(out, chk, "hashmap"), restore=str(chk))


# ------------------------------------------------------------------ savepoints move

@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_a_moved_savepoint_restores(tmp_path: Path, backend: str) -> None:
    out = tmp_path / "out"
    job = Running(job_script(out, tmp_path / "chk", backend))
    job.checkpoint_until_output(out)
    savepoint = job.executor.stop_with_savepoint(tmp_path / "first" / "sp")
    assert job.done.wait(60) and not job.errors
    partial = committed_rows(out)
    assert 0 < partial < len(expected_rows())

    doc = json.loads((savepoint / METADATA).read_text())
    assert doc["format"] == "sqlstream-checkpoint" and doc["version"] == 1
    assert all(not rel.startswith("..") and not Path(rel).is_absolute() for rel in doc["files"])
    moved = tmp_path / "elsewhere" / "renamed"
    moved.parent.mkdir()
    shutil.move(savepoint, moved)
    shutil.rmtree(tmp_path / "first")
    shutil.rmtree(tmp_path / "chk")  # a savepoint needs nothing of the checkpoint root
    run_to_end(job_script(out, tmp_path / "chk2", "rocksdb" if backend == "hashmap" else "hashmap"),
               restore=str(moved))
    assert rows(committed(out)) == expected_rows()


def test_a_moved_checkpoint_root_restores_with_its_shared_rocksdb_files(tmp_path: Path) -> None:
    out, chk, newest = two_checkpoints_then_crash(tmp_path, "rocksdb")
    doc = json.loads((chk / f"chk-{newest}" / METADATA).read_text())
    assert any(rel.startswith("../shared/") for rel in doc["files"])  # incremental: SSTs live beside it
    moved = tmp_path / "moved" / "checkpoints"
    moved.parent.mkdir()
    shutil.move(chk, moved)
    job = run_to_end(job_script(out, tmp_path / "chk2", "rocksdb", rate=1_000_000), restore=str(moved))
    assert not job.restore_warnings
    assert rows(committed(out)) == expected_rows()


# ------------------------------------------------------------------ concurrency, timeout, clean-up

def test_a_10_ms_interval_on_rocksdb_keeps_one_checkpoint_in_flight_and_leaves_nothing_behind(tmp_path: Path) -> None:
    out, chk = tmp_path / "out", tmp_path / "chk"
    job = run_to_end(job_script(out, chk, "rocksdb", interval="10 ms", rate=4000, retained=2))
    assert rows(committed(out)) == expected_rows()
    assert len(job.checkpoints) >= 5
    assert job.peak_checkpoints_in_flight == 1
    kept = sorted(completed_ids(chk))
    assert 1 <= len(kept) <= 2
    # by number: 'chk-100' sorts before 'chk-99' as text (seen when a loaded machine took 100 checkpoints)
    assert sorted(int(d.name.removeprefix("chk-")) for d in chk.iterdir() if d.name.startswith("chk-")) == kept
    referenced: set[Path] = set()
    for n in kept:
        referenced |= referenced_files(chk / f"chk-{n}")
    for sub in ("shared", "finished"):
        left = {p for p in (chk / sub).rglob("*") if p.is_file()} if (chk / sub).exists() else set()
        assert left <= referenced, f"unreferenced {sub} files left: {sorted(left - referenced)[:3]}"
        assert all(any(d.iterdir()) for d in (chk / sub).rglob("*") if d.is_dir())


def _coordinator(tmp_path: Path, **options: Any) -> tuple[CheckpointCoordinator, list[int]]:
    triggered: list[int] = []
    coordinator = CheckpointCoordinator(CheckpointStorage(tmp_path / "chk"), 10, [("a", 0)],
                                        lambda n, s: triggered.append(n), lambda n, f: None, {}, **options)
    return coordinator, triggered


def test_a_checkpoint_past_its_timeout_is_aborted_and_its_files_removed(tmp_path: Path) -> None:
    coordinator, _ = _coordinator(tmp_path, timeout_ms=50)
    future = coordinator.trigger_checkpoint()
    d = coordinator.directory_for(1, "a", 0)
    (d / "partial").write_bytes(b"half a snapshot")
    coordinator.abort_expired()
    assert not future.done()  # not yet expired
    coordinator.pending[1].started -= 1.0  # one second ago, well past 50 ms
    coordinator.abort_expired()
    with pytest.raises(CheckpointTimeout, match="checkpoint 1 expired"):
        future.result()
    assert coordinator.aborted == [1] and not (tmp_path / "chk" / "chk-1").exists()
    # a subtask that finishes writing after the abort: its files go as it acknowledges
    d.mkdir(parents=True)
    (d / "late").write_bytes(b"late")
    coordinator.acknowledge(1, ("a", 0), {})
    assert not (tmp_path / "chk" / "chk-1").exists()


def test_a_late_acknowledgement_does_not_remove_a_checkpoint_being_published(tmp_path: Path) -> None:
    """A finished subtask's final snapshot completes checkpoint 1 while its own write for 1 is still
    in the snapshot pool; that write's acknowledgement lands while 1 is being published.  It used to
    remove chk-1 then (its metadata not written yet): the publication failed with FileNotFoundError."""
    storage = CheckpointStorage(tmp_path / "chk")
    keys = [("a", 0), ("b", 0)]
    coordinator = CheckpointCoordinator(storage, 10, keys, lambda n, s: None, lambda n, f: None, {})
    publish = storage.complete

    def complete_after_the_late_ack(checkpoint_id: int, metadata: dict[str, Any], written: Any = None) -> Path:
        late = coordinator.directory_for(checkpoint_id, "b", 0)
        (late / "late").write_bytes(b"b's own snapshot of checkpoint 1")
        coordinator.acknowledge(checkpoint_id, ("b", 0), {})
        return publish(checkpoint_id, metadata, written)

    storage.complete = complete_after_the_late_ack  # type: ignore[method-assign]
    future = coordinator.trigger_checkpoint()
    (coordinator.directory_for(1, "a", 0) / "state").write_bytes(b"a's snapshot")
    coordinator.acknowledge(1, ("a", 0), {})
    coordinator.subtask_finished(("b", 0), {})  # b's final snapshot stands for it: 1 completes
    assert future.result(timeout=5) == tmp_path / "chk" / "chk-1"
    assert completed_ids(tmp_path / "chk") == [1]
    assert (tmp_path / "chk" / "chk-1" / "a-0" / "state").exists()


def test_max_concurrent_checkpoints_and_min_pause_gate_the_periodic_trigger(tmp_path: Path) -> None:
    coordinator, _ = _coordinator(tmp_path, max_concurrent=1, min_pause_ms=60_000)
    assert coordinator.may_trigger(0.01)
    coordinator.trigger_checkpoint()
    coordinator.last_trigger -= 10  # the interval passed long ago, but one is in flight
    assert not coordinator.may_trigger(0.01)
    coordinator.acknowledge(1, ("a", 0), {})  # completes
    assert coordinator.latest_completed == 1
    assert not coordinator.may_trigger(0.01)  # min-pause since it ended
    coordinator.last_end -= 61
    assert coordinator.may_trigger(0.01)

    two, _ = _coordinator(tmp_path / "two", max_concurrent=2)
    two.trigger_checkpoint()
    two.last_trigger -= 10
    assert two.may_trigger(0.01)
    two.trigger_checkpoint()
    two.last_trigger -= 10
    assert not two.may_trigger(0.01) and two.peak_in_flight == 2


def test_the_checkpointing_options_are_flinks() -> None:
    config = JobConfig.from_settings({
        "execution.checkpointing.max-concurrent-checkpoints": "3",
        "execution.checkpointing.min-pause": "500 ms",
        "execution.checkpointing.timeout": "2 min",
    })
    assert (config.max_concurrent_checkpoints, config.min_pause_ms, config.checkpoint_timeout_ms) == (3, 500, 120_000)
    default = JobConfig.from_settings({})
    assert (default.max_concurrent_checkpoints, default.min_pause_ms, default.checkpoint_timeout_ms) == (1, 0, 600_000)


def test_checkpoints_and_savepoints_pending_when_the_attempt_ends_leave_no_files(tmp_path: Path) -> None:
    coordinator, _ = _coordinator(tmp_path)
    checkpoint = coordinator.trigger_checkpoint()
    (coordinator.directory_for(1, "a", 0) / "part").write_bytes(b"x")
    savepoint = coordinator.trigger_checkpoint(savepoint_dir=tmp_path / "sp")
    (coordinator.directory_for(2, "a", 0) / "part").write_bytes(b"x")
    assert coordinator.seal() is None  # the attempt ends with nothing completed
    assert checkpoint.cancelled() and savepoint.cancelled()
    assert not (tmp_path / "sp").exists() and not (tmp_path / "chk" / "chk-1").exists()


def test_a_savepoint_brings_in_a_finished_subtasks_rocksdb_files_and_restores_after_a_move(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path / "chk")
    backend = create_backend("rocksdb", range(128), tmp_path / "local")
    try:
        backend.shared_dir = storage.root / "shared"
        for i in range(500):
            backend.state("s").put(i % 128, (i,), f"v{i}")
        finished = storage.finished_dir("chain", 0)  # a subtask that ended: its final, incremental snapshot
        keyed = backend.snapshot(1)(finished / "op")
    finally:
        backend.close()
    snapshot = {"state": write_subtask_state(finished, {"op": None}, None), "keyed": {"op": {"keyed": keyed}},
                "parallelism": 1}
    savepoint = tmp_path / "sp"
    savepoint.mkdir()
    write_metadata(savepoint, {"checkpoint_id": 3, "subtasks": {("chain", 0): snapshot}}, self_contained=True)
    shutil.rmtree(tmp_path / "chk")
    moved = tmp_path / "elsewhere"
    shutil.move(savepoint, moved)
    restored = read_checkpoint(moved)
    handle = restored["subtasks"][("chain", 0)]["keyed"]["op"]["keyed"]
    assert all(Path(p).is_relative_to(moved) for p in [*handle["shared_files"], *handle["private_files"]])
    again = create_backend("rocksdb", range(128), tmp_path / "local2")
    try:
        again.restore([handle])
        assert {key: v for _, key, v in again.state("s").items()} == {(i,): f"v{i}" for i in range(500)}
    finally:
        again.close()


def test_shared_rocksdb_files_no_retained_checkpoint_names_are_deleted_as_checkpoints_are_subsumed(
        tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path / "chk", retained=2)
    backend = create_backend("rocksdb", range(128), tmp_path / "local")
    shared = storage.root / "shared" / backend.backend_id  # type: ignore[attr-defined]
    handles: dict[int, dict[str, Any]] = {}
    expected: dict[int, dict[tuple, str]] = {}
    ever: set[Path] = set()
    live: dict[tuple, str] = {}
    try:
        backend.shared_dir = storage.root / "shared"
        st = backend.state("s")
        for n in range(1, 8):
            for i in range(n * 1000, n * 1000 + 3000):  # overwrites half of what the last round wrote
                st.put(i % 128, (i,), f"v{n}-{i}" * 10)
                live[(i,)] = f"v{n}-{i}" * 10
            if n % 3 == 0:  # compaction rewrites the db: the SSTs of earlier checkpoints leave it
                st.cf.compact_range(None, None)  # type: ignore[attr-defined]
            directory = storage.subtask_dir(n, "chain", 0)
            handles[n] = backend.snapshot(n)(directory / "op")
            expected[n] = dict(live)
            storage.complete(n, {"checkpoint_id": n, "subtasks": {("chain", 0): {"keyed": {"op": handles[n]}}}})
            ever |= set(handles[n]["shared_files"])
            retained = [m for m in handles if m > n - 2]
            named = {Path(p) for m in retained for p in handles[m]["shared_files"]}
            assert {p for p in shared.iterdir() if p.is_file()} == named, f"after checkpoint {n}"
            assert sorted(completed_ids(storage.root)) == retained
    finally:
        backend.close()
    assert len(ever) > len(named)  # files were shared, then deleted once no retained checkpoint named them

    oldest = read_checkpoint(storage.checkpoint_dir(6))  # the oldest retained one still restores
    again = create_backend("rocksdb", range(128), tmp_path / "local2")
    try:
        again.restore([oldest["subtasks"][("chain", 0)]["keyed"]["op"]])
        assert {key: v for _, key, v in again.state("s").items()} == expected[6]
    finally:
        again.close()
