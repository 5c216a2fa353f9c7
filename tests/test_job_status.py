"""JobExecutor.status(): the public view of a running job that the job manager and REST API show.

Counters come from the subtasks by physical node id, checkpoints from the
coordinator's bounded history; the status survives a JSON round trip and is
published atomically as status.json.  Waiting is polling with a deadline.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sqlstream.core.status import (
    ABORTED,
    COMPLETED,
    FAILED,
    FINISHED,
    IN_PROGRESS,
    RUNNING,
    JobStatus,
    read_status,
    write_status,
)
from sqlstream.core.udf import udf
from sqlstream.frontend.session import Session
from sqlstream.runtime.checkpoint.coordinator import HISTORY_SIZE, CheckpointCoordinator
from sqlstream.runtime.checkpoint.storage import CheckpointStorage
from sqlstream.runtime.elements import MAX_WATERMARK
from sqlstream.runtime.executor import JobExecutor

ROWS = 3000

EVENT_TIME_JOB = """
SET 'parallelism.default' = '2';
SET 'execution.checkpointing.interval' = '{interval}';
SET 'state.checkpoints.dir' = '{chk}';
SET 'table.exec.batch-size' = '50';
CREATE TABLE clicks (user_id INT, seq BIGINT, ts AS TO_TIMESTAMP_LTZ(seq * 10, 3),
    WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'datagen', 'rows-per-second' = '{rate}', 'fields.user_id.min' = '1',
      'fields.user_id.max' = '5', 'fields.seq.kind' = 'sequence', 'fields.seq.start' = '0',
      'fields.seq.end' = '{last}');
CREATE TABLE sink (window_start TIMESTAMP(3), user_id INT, n BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT window_start, user_id, COUNT(*) FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts),
    INTERVAL '1' SECOND)) GROUP BY window_start, window_end, user_id;
"""

PROCESSING_TIME_JOB = """
SET 'table.exec.batch-size' = '50';
CREATE TABLE gen (seq BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '1000',
    'fields.seq.kind' = 'sequence', 'fields.seq.start' = '0', 'fields.seq.end' = '999');
CREATE TABLE sink (seq BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT seq + 1 FROM gen WHERE seq >= 0;
"""


FAIL_AT = 300

FAILING_JOB = """
SET 'execution.checkpointing.interval' = '50 ms';
SET 'execution.checkpointing.max-concurrent-checkpoints' = '2';
SET 'state.checkpoints.dir' = '{chk}';
SET 'table.exec.batch-size' = '20';
CREATE TEMPORARY FUNCTION fail_at AS 'tests.test_job_status.fail_at' LANGUAGE PYTHON;
CREATE TABLE gen (seq BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '2000',
    'fields.seq.kind' = 'sequence', 'fields.seq.start' = '0', 'fields.seq.end' = '1000000');
CREATE TABLE sink (seq BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT fail_at(seq, '{gate}') FROM gen;
"""


@udf(result_type="BIGINT")
def fail_at(seq: int, gate: str) -> int:
    """At row FAIL_AT: say so (file ``blocked``), hold the subtask until the test writes ``release``, then fail."""
    if seq == FAIL_AT:
        (Path(gate) / "blocked").touch()
        deadline = time.monotonic() + 60
        while not (Path(gate) / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        raise RuntimeError("injected failure")
    return seq


def poll(what: str, check: Callable[[], Any], timeout_s: float = 60) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


class RunningJob:
    """A script run by a session in a thread, with a handle on its executor once it exists."""

    def __init__(self, script: str) -> None:
        self.session = Session()
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, args=(script,), daemon=True)
        self.thread.start()
        self.executor: JobExecutor = poll("the executor", lambda: self.session.current_executor or self.errors)
        assert not self.errors, self.errors

    def _run(self, script: str) -> None:
        try:
            self.session.execute_script(script)
        except BaseException as e:  # noqa: BLE001 - asserted by the test
            self.errors.append(e)

    def join(self) -> JobStatus:
        self.thread.join(timeout=120)
        assert not self.thread.is_alive() and not self.errors, self.errors
        return self.executor.status()


def event_time_job(tmp_path: Path, rate: int, interval: str = "1 h") -> RunningJob:
    return RunningJob(EVENT_TIME_JOB.format(interval=interval, chk=tmp_path / "chk", rate=rate, last=ROWS - 1))


def by_kind(status: JobStatus) -> dict[str, list]:
    out: dict[str, list] = {}
    for op in status.operators:
        out.setdefault(op.kind, []).append(op)
    return out


def test_a_running_bounded_job_counts_per_operator_and_the_counts_add_up_to_the_rows(tmp_path: Path) -> None:
    job = event_time_job(tmp_path, rate=2000)
    running = poll("rows flowing", lambda: (s := job.executor.status()).state == RUNNING
                   and by_kind(s)["WindowAggregate"][0].records_in > 0 and s)
    assert [op.label for op in running.operators] == [
        "#0 Source", "#1 Calc", "#2 WatermarkAssigner", "#3 WindowAggregate", "#4 Calc", "#5 Sink"]
    ops = {op.node_id: op for op in running.operators}
    assert all(op.parallelism == 2 and len(op.subtasks) == 2 for op in running.operators)
    assert [s.index for s in ops[3].subtasks] == [0, 1]
    assert ops[0].records_out == sum(s.records_out for s in ops[0].subtasks) > 0
    assert running.records_in == ops[0].records_out
    # one sample is read downstream first: no operator received more than its input had sent
    for op in running.operators:
        for edge in op.inputs:
            assert op.records_in <= ops[edge.upstream].records_out, (op.label, edge)
    # the hash exchange feeds the window operator's queues; the chained operators have none
    assert all(s.input_queue_fill is not None and 0 <= s.input_queue_fill <= 1 for s in ops[3].subtasks)
    assert all(s.input_queue_fill is None for op in (ops[0], ops[1], ops[2], ops[4]) for s in op.subtasks)
    assert ops[2].backpressured_ms >= 0 and ops[0].backpressured_ms == 0

    final = job.join()
    assert final.state == FINISHED and final.error is None and final.job_id == running.job_id
    ops = {op.node_id: op for op in final.operators}
    assert ops[0].records_out == ROWS
    assert ops[1].records_in == ops[1].records_out == ops[2].records_in == ops[2].records_out == ROWS
    assert ops[3].records_in == ROWS  # both window subtasks together: the hash exchange lost nothing
    assert ops[3].records_out == ops[4].records_in == ops[5].records_in == final.records_out > 0
    windows = ROWS * 10 // 1000  # seq * 10 ms: 30 one-second windows, 5 users each
    assert final.records_out == windows * 5


def test_an_event_time_job_reports_watermarks_and_a_processing_time_job_none(tmp_path: Path) -> None:
    job = event_time_job(tmp_path, rate=1500)
    status = poll("a watermark at the window operator",
                  lambda: (s := job.executor.status()).state == RUNNING and s.operators[3].watermark is not None and s)
    ops = {op.node_id: op for op in status.operators}
    assert ops[0].watermark is None and ops[1].watermark is None  # before the watermark assigner
    assert ops[2].watermark is not None and ops[3].watermark <= max(s.watermark for s in ops[2].subtasks)
    assert ops[3].watermark == min(s.watermark for s in ops[3].subtasks)
    assert -1000 <= ops[3].watermark < ROWS * 10  # event time minus the 1 s delay
    final = job.join()
    assert all(op.watermark == MAX_WATERMARK for op in final.operators[2:])  # the end of input

    job = RunningJob(PROCESSING_TIME_JOB)
    status = poll("rows at the sink", lambda: (s := job.executor.status()).state == RUNNING and s.records_out > 0 and s)
    assert all(op.watermark is None for op in status.operators)
    job.join()


def test_checkpoints_are_listed_with_trigger_time_duration_and_size(tmp_path: Path) -> None:
    job = event_time_job(tmp_path, rate=1000, interval="100 ms")
    started_ms = time.time_ns() // 1_000_000
    status = poll("checkpoints", lambda: (s := job.executor.status()).completed_checkpoints >= 3 and s)
    done = [c for c in status.checkpoints if c.state == COMPLETED]
    assert len(done) >= 3 and status.latest_checkpoint == done[-1]
    assert [c.id for c in status.checkpoints] == sorted(c.id for c in status.checkpoints)
    for c in done:
        assert c.trigger_time_ms >= started_ms - 1000 and c.duration_ms is not None and c.duration_ms >= 0
        assert c.size_bytes is not None and c.size_bytes > 0 and not c.savepoint and c.failure is None
    final = poll("more checkpoints than the history keeps",
                 lambda: (s := job.executor.status()).completed_checkpoints > HISTORY_SIZE + 2 and s)
    assert len(final.checkpoints) == HISTORY_SIZE and final.checkpoints[0].id > 1
    job.executor.cancel()
    ended = job.join()
    assert all(c.state in (COMPLETED, ABORTED) for c in ended.checkpoints)  # none left in progress
    assert ended.completed_checkpoints >= final.completed_checkpoints and ended.failed_checkpoints == 0


def test_a_checkpoint_in_progress_when_the_job_fails_is_failed_and_the_job_reports_its_error(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    gate.mkdir()
    job = RunningJob(FAILING_JOB.format(chk=tmp_path / "chk", gate=gate))
    poll("the subtask held at the failing row", lambda: (gate / "blocked").exists())
    before = max((c.id for c in job.executor.status().checkpoints), default=0)
    # the one subtask is held, so a checkpoint triggered now cannot complete (two may be in flight:
    # one pending since before the hold does not keep the next from being triggered)
    held = poll("a checkpoint triggered while the subtask is held", lambda: next(
        (c for c in job.executor.status().checkpoints if c.id > before and c.state == IN_PROGRESS), None))
    (gate / "release").touch()
    job.thread.join(timeout=60)
    assert job.errors and "injected failure" in str(job.errors[0])
    status = job.executor.status()
    assert status.state == FAILED and status.error is not None and "injected failure" in status.error
    entry = next(c for c in status.checkpoints if c.id == held.id)
    assert entry.state == FAILED and entry.failure is not None and "injected failure" in entry.failure
    assert entry.duration_ms is None and entry.size_bytes is None
    assert status.failed_checkpoints >= 1 and IN_PROGRESS not in {c.state for c in status.checkpoints}
    assert {op.kind: op.records_out for op in status.operators}["Source"] >= FAIL_AT


def test_a_checkpoint_subsumed_by_a_newer_one_is_aborted(tmp_path: Path) -> None:
    keys = [("chain", 0)]
    coordinator = CheckpointCoordinator(CheckpointStorage(tmp_path, 1), None, keys, lambda n, sp: None,
                                        lambda n, final: None, {})
    first, second = coordinator.trigger_checkpoint(), coordinator.trigger_checkpoint()
    assert [c.state for c in coordinator.history.snapshot()[0]] == [IN_PROGRESS, IN_PROGRESS]
    coordinator.acknowledge(2, keys[0], {"operators": {}})
    assert second.result(timeout=10) and first.cancelled()
    checkpoints, completed, failed = coordinator.history.snapshot()
    assert [(c.id, c.state) for c in checkpoints] == [(1, ABORTED), (2, COMPLETED)]
    assert checkpoints[0].failure == "subsumed by checkpoint 2" and (completed, failed) == (1, 0)


def test_the_status_round_trips_through_json_and_is_published_atomically(tmp_path: Path) -> None:
    job = event_time_job(tmp_path, rate=3000, interval="100 ms")
    poll("a checkpoint", lambda: job.executor.status().completed_checkpoints)
    status = job.join()
    assert JobStatus.from_json(status.to_json()) == status
    assert read_status(tmp_path) is None
    write_status(tmp_path, status)
    assert read_status(tmp_path) == status
    assert [p.name for p in tmp_path.iterdir() if p.is_file()] == ["status.json"]  # no temp file left


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SQLSTREAM_HOME", str(tmp_path / "home"))
