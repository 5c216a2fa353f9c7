"""The same SQL jobs on Ray (`SET 'execution.target' = 'ray'`): one actor per subtask.

A local Ray is started in-process once for the module (2 CPUs, no
dashboard) and shut down at its end; the tests are skipped when Ray is not
installed.  They check that Ray gives the local runtime's output row for row,
that killing an actor mid-job restores from the last completed checkpoint
with exactly-once output in the 2PC file sink, and that a savepoint taken at
parallelism 2 restores at 4.  Parallelism stays at 1-2 (4 for the rescaled
aggregation) to keep the number of actors small on a 2-core machine.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sqlstream.core.errors import SqlStreamError
from sqlstream.core.status import COMPLETED, FINISHED, IN_PROGRESS, RUNNING
from sqlstream.frontend.session import Session, StatementResult
from sqlstream.runtime.checkpoint import storage as chk_storage
from tests.conftest import rows
from tests.fault_harness import ROWS, committed, expected_rows, file_job_script

RAY = "SET 'execution.target' = 'ray';\n"


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'sqlstream[ray]'")
    ray.init(num_cpus=2, include_dashboard=False, logging_level="warning")
    yield ray
    ray.shutdown()


class Background:
    """A script run by a Session in a thread, so a test can act on its running executor."""

    def __init__(self, script: str) -> None:
        self.script = script
        self.session = Session()
        self.results: list[StatementResult] = []
        self.errors: list[BaseException] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.results = self.session.execute_script(self.script)
        except BaseException as e:  # noqa: BLE001 - surfaced by result()
            self.errors.append(e)
        finally:
            self.done.set()

    def running_executor(self, timeout: float = 60) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            executor = self.session.current_executor
            if executor is not None and executor.running.is_set():
                return executor
            assert not self.done.is_set(), self.errors
            time.sleep(0.02)
        raise AssertionError("the job did not start")

    def result(self, timeout: float = 120) -> StatementResult:
        assert self.done.wait(timeout), "the job did not finish"
        assert not self.errors, self.errors
        return self.results[-1]


def wait_for(condition: Any, timeout: float = 60, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_without_ray_the_error_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    with pytest.raises(SqlStreamError, match=r"pip install 'sqlstream\[ray\]'"):
        Session().execute_script(RAY + "SELECT 1 AS x;")


def test_an_unknown_target_is_refused() -> None:
    with pytest.raises(SqlStreamError, match="'execution.target': 'yarn' is not one of local, ray"):
        Session().execute_script("SET 'execution.target' = 'yarn'; SELECT 1 AS x;")


@pytest.mark.slow
def test_windowed_job_gives_the_local_output_on_ray(ray_cluster: Any, tmp_path: Path) -> None:
    local_out, ray_out = tmp_path / "local", tmp_path / "ray"
    Session().execute_script(file_job_script(local_out, tmp_path / "chk-local", "hashmap", 2))
    result = Session().execute_script(RAY + file_job_script(ray_out, tmp_path / "chk-ray", "hashmap", 2))[-1]
    expected = expected_rows()
    assert rows(committed(local_out)) == expected
    assert rows(committed(ray_out)) == expected
    assert result.job is not None and result.job.checkpoints, "checkpoints were taken on Ray"
    assert result.job.metrics["#0 Source"].records_out == ROWS


@pytest.mark.slow
def test_a_select_reaches_the_client_from_the_sink_actor(ray_cluster: Any) -> None:
    script = """
CREATE TABLE gen (seq BIGINT, ts AS TO_TIMESTAMP_LTZ(seq * 10, 3), WATERMARK FOR ts AS ts)
WITH ('connector' = 'datagen', 'rows-per-second' = '1000000',
      'fields.seq.kind' = 'sequence', 'fields.seq.start' = '0', 'fields.seq.end' = '19999');
SELECT window_start, seq % 3 AS k, COUNT(*) AS n, SUM(seq) AS s
FROM TABLE(TUMBLE(TABLE gen, DESCRIPTOR(ts), INTERVAL '1' SECOND))
GROUP BY window_start, window_end, seq % 3;
"""
    settings = "SET 'parallelism.default' = '2';\nSET 'table.exec.batch-size' = '1000';\n"
    local = Session().execute_script(settings + script)[-1].table
    remote = Session().execute_script(RAY + settings + script)[-1].table
    assert local is not None and remote is not None
    assert remote.num_rows == 600
    assert rows(remote) == rows(local)


@pytest.mark.slow
@pytest.mark.parametrize("victim", ["WindowAggregate", "Source"])
def test_a_killed_actor_restores_from_the_last_checkpoint_exactly_once(
        ray_cluster: Any, tmp_path: Path, victim: str) -> None:
    out, chk = tmp_path / "out", tmp_path / "chk"
    restarts = """
SET 'restart-strategy.type' = 'fixed-delay';
SET 'restart-strategy.fixed-delay.attempts' = '3';
SET 'restart-strategy.fixed-delay.delay' = '200 ms';
"""
    job = Background(RAY + restarts + file_job_script(out, chk, "hashmap", 2))
    executor = job.running_executor()
    wait_for(lambda: chk_storage.completed_ids(chk), what="a completed checkpoint")
    key = next(k for k in executor.actors
               if victim in next(c.name for c in executor.chains if c.uid == k[0]) and k[1] == 0)
    assert not job.done.is_set(), "the job should still be processing when the actor is killed"
    ray_cluster.kill(executor.actors[key], no_restart=True)
    result = job.result()
    assert result.job is not None and result.job.restarts >= 1
    # the last attempt resumed from a checkpoint: its sources did not start from the first row
    assert result.job.metrics["#0 Source"].records_out < ROWS
    assert rows(committed(out)) == expected_rows()


@pytest.mark.slow
def test_rescale_from_parallelism_2_to_4_through_a_savepoint_on_ray(ray_cluster: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    script = RAY + file_job_script(out, tmp_path / "chk", "hashmap", 2).replace(
        "'fields.seq.kind' = 'sequence'", "'scan.parallelism' = '2', 'fields.seq.kind' = 'sequence'")
    first = Background(script)
    executor = first.running_executor()
    wait_for(lambda: committed(out).num_rows > 0, what="committed output")
    savepoint = executor.stop_with_savepoint(tmp_path / "sp", timeout_s=60)
    assert first.result().job.cancelled
    partial = rows(committed(out))
    expected = expected_rows()
    assert 0 < len(partial) < len(expected)
    rescaled = script.replace("'parallelism.default' = '2'", "'parallelism.default' = '4'").replace(
        str(tmp_path / "chk"), str(tmp_path / "chk4"))
    Session(restore_from=str(savepoint)).execute_script(rescaled)
    assert rows(committed(out)) == expected
    # the restored job's final checkpoint lists 4 aggregation subtasks and the sources' 2
    _, metadata = chk_storage.load(tmp_path / "chk4")
    per_chain: dict[str, int] = {}
    for uid, _ in metadata["subtasks"]:
        per_chain[uid] = per_chain.get(uid, 0) + 1
    assert sorted(per_chain.values()) == [2, 4]


@pytest.mark.slow
def test_the_status_on_ray_counts_per_operator_and_lists_the_checkpoints(ray_cluster: Any, tmp_path: Path) -> None:
    job = Background(RAY + file_job_script(tmp_path / "out", tmp_path / "chk", "hashmap", 2))
    executor = job.running_executor()
    wait_for(lambda: executor.status().completed_checkpoints >= 1 and executor.status().records_in > 0,
             what="figures and a checkpoint from the actors")
    running = executor.status()
    assert running.state == RUNNING and [op.kind for op in running.operators][:2] == ["Source", "Calc"]
    assert all(len(op.subtasks) == op.parallelism == 2 for op in running.operators)
    assert job.result().job is not None
    final = executor.status()
    ops = {op.kind: op for op in final.operators}
    assert final.state == FINISHED and ops["Source"].records_out == ops["WindowAggregate"].records_in == ROWS
    assert ops["WindowAggregate"].watermark is not None and ops["WindowAggregate"].backpressured_ms >= 0
    done = [c for c in final.checkpoints if c.state == COMPLETED]
    # a checkpoint taken once every window has fired holds no state: its size may be 0
    assert done and all(c.size_bytes is not None and c.duration_ms is not None for c in done)
    assert any(c.size_bytes for c in done)
    assert IN_PROGRESS not in {c.state for c in final.checkpoints}
