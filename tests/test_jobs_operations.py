"""Operating jobs: one id for a job everywhere, one command family, cancel and stop that do not depend on
inherited signal dispositions, temporary checkpoints cleaned up, and what a job shows of itself
(Prometheus /metrics, the web page's throughput chart, backpressure, checkpoints and errors)."""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sqlstream.core.status import JobStatus, OperatorStatus, SubtaskStatus, read_status
from sqlstream.frontend.jobmanager import operator_rates
from sqlstream.runtime.checkpoint.coordinator import CheckpointCoordinator
from sqlstream.runtime.checkpoint.storage import CheckpointStorage
from sqlstream.runtime.clock import ManualClock
from sqlstream.runtime.elements import Watermark
from sqlstream.runtime.subtask import OutputGate
from tests.jobmanager_api import (
    ROOT,
    Api,
    ignore_sigint_and_sigterm,
    start_jobmanager,
    stop_jobmanager,
)
from tests.test_job_status import RunningJob, poll
from tests.test_jobs_detached import WINDOW_JOB, cli, wait_for

ENDLESS_JOB = """
SET 'execution.checkpointing.interval' = '100 ms';
CREATE TABLE gen (seq BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '500',
    'fields.seq.kind' = 'sequence', 'fields.seq.start' = '0', 'fields.seq.end' = '1000000000');
CREATE TABLE sink (seq BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT seq FROM gen;
"""


def scrape(api: Api, token: bool = True) -> tuple[int, dict[tuple[str, frozenset], float]]:
    """(status, {(sample name, labels): value}) of GET /metrics."""
    headers = {"Authorization": f"Bearer {api.token}"} if token else {}
    request = urllib.request.Request(api.url + "/metrics", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            assert r.headers["Content-Type"].startswith("text/plain; version=")
            text = r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, {}
    samples = {(s.name, frozenset(s.labels.items())): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    return 200, samples


def sample(samples: dict[tuple[str, frozenset], float], name: str, **labels: str) -> float | None:
    """The value of the one sample of ``name`` whose labels include ``labels``."""
    found = [v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= ls]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else None


@pytest.fixture(scope="module")
def jobmanager() -> Iterator[tuple[Path, Api]]:
    home = Path(tempfile.mkdtemp(prefix="sqlstream-ops-"))
    proc, api = start_jobmanager(home)
    try:
        yield home, api
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def running_job(jobmanager: tuple[Path, Api]) -> dict[str, Any]:
    """An unbounded windowed job with checkpoints and a few seconds of sampled rates."""
    _, api = jobmanager
    status, job = api.call("/jobs", "POST", {"sql": WINDOW_JOB, "name": "windows.sql"})
    assert status == 201

    def ready() -> dict | None:
        d = api.call(f"/jobs/{job['id']}")[1]
        return d if d["checkpoints"]["completed"] >= 2 and len(d["history"]) >= 3 else None

    return wait_for("checkpoints and sampled rates", ready, timeout=60)


@pytest.mark.slow
def test_a_detached_job_runs_and_saves_under_the_id_the_job_manager_gave_it(
        jobmanager: tuple[Path, Api], running_job: dict, tmp_path: Path) -> None:
    home, _ = jobmanager
    job_id = running_job["id"]
    entry = json.loads((home / "jobs" / f"{job_id}.json").read_text())  # the child's registry entry
    recorded = json.loads((home / "jobs" / job_id / "job.json").read_text())
    assert entry["id"] == job_id and entry["pid"] == recorded["pid"]
    published = read_status(home / "jobs" / job_id)
    assert published is not None and published.job_id == job_id
    for command in ("jobs", "list"):  # one listing, whichever name
        assert re.search(rf"^{job_id}\s+RUNNING", cli(home, command).stdout, re.M)
    saved = cli(home, "savepoint", job_id, str(tmp_path / "sp")).stdout
    path = Path(re.search(r"Savepoint completed: (\S+)", saved).group(1))  # type: ignore[union-attr]
    assert path.parent == tmp_path / "sp" and path.name.endswith(f"-{job_id}") and (path / "_metadata").is_file()


@pytest.mark.slow
def test_metrics_need_the_token_and_give_per_operator_records_rates_watermarks_time_and_checkpoints(
        jobmanager: tuple[Path, Api], running_job: dict) -> None:
    _, api = jobmanager
    job_id = running_job["id"]
    assert scrape(api, token=False) == (401, {})
    status, samples = scrape(api)
    assert status == 200
    assert sample(samples, "sqlstream_job_info", job_id=job_id, job_name="windows.sql", state="RUNNING") == 1
    assert sample(samples, "sqlstream_jobs", state="RUNNING") >= 1  # type: ignore[operator]

    def op(name: str, node: int) -> float | None:
        return sample(samples, name, job_id=job_id, operator_id=str(node))

    assert sample(samples, "sqlstream_operator_records_out_total", job_id=job_id, operator_id="0",
                  operator="Source") > 0  # type: ignore[operator]
    assert op("sqlstream_operator_records_out_per_second", 0) > 0  # type: ignore[operator]
    # counters of one status: the window received no more than the assigner sent
    assert 0 < op("sqlstream_operator_records_in_total", 3) <= op("sqlstream_operator_records_out_total", 2)  # type: ignore[operator]
    assert op("sqlstream_operator_watermark_milliseconds", 2) > 0  # type: ignore[operator]
    assert op("sqlstream_operator_watermark_lag_milliseconds", 2) > 0  # type: ignore[operator]
    assert op("sqlstream_operator_watermark_milliseconds", 1) is None  # before the assigner: no event time
    assert op("sqlstream_operator_busy_seconds_total", 3) > 0  # type: ignore[operator]
    assert 0 <= op("sqlstream_operator_busy_time_ms_per_second", 3) <= 1000  # type: ignore[operator]
    assert op("sqlstream_operator_backpressured_seconds_total", 2) >= 0  # type: ignore[operator]
    assert 0 <= op("sqlstream_operator_backpressured_time_ms_per_second", 2) <= 1000  # type: ignore[operator]
    assert sample(samples, "sqlstream_job_checkpoints_total", job_id=job_id, outcome="completed") >= 2  # type: ignore[operator]
    assert sample(samples, "sqlstream_job_last_checkpoint_duration_seconds", job_id=job_id) >= 0  # type: ignore[operator]
    assert sample(samples, "sqlstream_job_last_checkpoint_size_bytes", job_id=job_id) > 0  # type: ignore[operator]


@pytest.mark.slow
def test_the_page_charts_throughput_and_shows_busy_backpressure_checkpoints_in_human_units_and_errors(
        jobmanager: tuple[Path, Api], running_job: dict, tmp_path: Path) -> None:
    _, api = jobmanager
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("headless Chromium is not installed (apt-get install -y chromium); the page is untested")
    status, failing = api.call("/jobs", "POST", {"sql": "INSERT INTO nowhere SELECT 1;", "name": "broken.sql"})
    assert status == 201
    wait_for("the job to fail", lambda: api.call(f"/jobs/{failing['id']}")[1]["state"] == "FAILED")
    dom = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
         "--virtual-time-budget=4000", "--dump-dom", f"{api.page_url}#job={running_job['id']}"],
        capture_output=True, text=True, timeout=90,
    ).stdout
    assert f"Job {running_job['id']}" in dom
    chart = dom.split('id="throughput"', 1)[1].split("</svg>", 1)[0]
    lines = {op: points for points, op in re.findall(r'<polyline points="([^"]*)"[^>]*data-operator="([^"]+)"', chart)}
    assert sorted(lines) == ["#0 Source", "#1 Calc", "#2 WatermarkAssigner", "#3 WindowAggregate", "#4 Calc", "#5 Sink"]
    assert all(len(points.split()) >= 3 for points in lines.values()), lines  # over time: several samples
    assert re.search(r"#0 Source: \d+(\.\d k)?/s", dom)  # the legend gives the newest rate
    operators = dom.split('id="operators"', 1)[1].split("</table>", 1)[0]
    assert "<th>Busy</th><th>Backpressured</th>" in operators and "Input queue" not in operators
    assert len(re.findall(r'class="num backpressured"><span>\d+ %', operators)) == 6
    checkpoints = dom.split('id="checkpoints"', 1)[1].split("</table>", 1)[0]
    assert re.search(r'<td class="num">\d+ ms</td><td class="num">\d+(\.\d)? (KB|B)</td>', checkpoints), checkpoints
    # the failed job's error, in the job list
    assert re.search(rf"{failing['id']}</td>.*?sink table 'nowhere' does not exist", dom, re.S)


@pytest.mark.slow
def test_cancel_and_jobmanager_stop_work_when_sigint_and_sigterm_were_ignored_by_the_parent(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc, api = start_jobmanager(home, "--metrics-no-auth", ignore_signals=True)
    try:
        status, job = api.call("/jobs", "POST", {"sql": ENDLESS_JOB, "name": "endless.sql"})
        assert status == 201
        wait_for("a checkpoint", lambda: api.call(f"/jobs/{job['id']}")[1]["last_checkpoint"])
        # --metrics-no-auth: a scraper without the token gets the metrics, and nothing else
        assert scrape(api, token=False)[0] == 200
        assert api.call("/jobs", headers={"Authorization": None})[0] == 401
        started = time.monotonic()
        cli(home, "cancel", job["id"])
        wait_for("CANCELED", lambda: api.call(f"/jobs/{job['id']}")[1]["state"] == "CANCELED", timeout=30)
        assert time.monotonic() - started < 10  # not the SIGKILL of a job that ignored the request (15 s)
        final = read_status(home / "jobs" / job["id"])
        assert final is not None and final.state == "CANCELED"  # the job process itself said so: a clean end
        assert "[INFO] Cancelled." in (home / "jobs" / job["id"] / "log").read_text()
        # stopping the job manager is a request like any other: the token is required
        assert api.call("/jobmanager/shutdown", "POST", {}, headers={"Authorization": None})[0] == 401
        assert proc.poll() is None
        assert "stopped" in cli(home, "jobmanager", "stop").stdout
        assert proc.wait(timeout=30) == 0  # although it ignored SIGTERM from its parent's disposition
        assert not (home / "jobmanager.json").exists()
        assert "No job manager is running" in cli(home, "jobmanager", "stop").stdout
    finally:
        stop_jobmanager(home)
        if proc.poll() is None:
            proc.kill()


@pytest.mark.slow
def test_a_foreground_job_is_listed_and_cancelled_by_its_id_and_its_temporary_checkpoints_are_removed(
        tmp_path: Path) -> None:
    home, scratch = tmp_path / "home", tmp_path / "tmp"
    scratch.mkdir()
    script = tmp_path / "endless.sql"
    script.write_text(ENDLESS_JOB)  # checkpoints without a directory: a temporary one
    env = {**os.environ, "SQLSTREAM_HOME": str(home), "PYTHONPATH": str(ROOT), "TMPDIR": str(scratch)}
    proc = subprocess.Popen([sys.executable, "-m", "sqlstream.frontend.cli", "run", str(script)], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=ignore_sigint_and_sigterm)  # as from `nohup` or a script's `&`
    try:
        first = proc.stderr.readline()  # type: ignore[union-attr]
        job_id = re.search(r"Job id: ([0-9a-f]{12})", first).group(1)  # type: ignore[union-attr]
        wait_for("a checkpoint", lambda: any((d / "chk-1").exists() for d in scratch.glob("sqlstream-checkpoints-*")))
        # no job manager needed; its figures come from the status it publishes beside its registry entry
        listed = wait_for("records in the listing", lambda: re.search(
            rf"^{job_id}\s+RUNNING\s+\S+\s+([1-9]\d*)\s+\d+\s+#\d+", cli(home, "jobs").stdout, re.M))
        assert int(listed.group(1)) > 0
        assert "being cancelled" in cli(home, "cancel", job_id).stdout
        assert proc.wait(timeout=30) == 130
        assert "[INFO] Cancelled." in proc.stderr.read()  # type: ignore[union-attr]
        assert not list(scratch.glob("sqlstream-checkpoints-*"))
        assert not list((home / "jobs").iterdir())  # registry entry, cancel request and status folder: all gone
        again = cli(home, "cancel", job_id, check=False)
        assert again.returncode == 1 and f"no job {job_id}" in again.stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


class _WatchedClock(ManualClock):
    """A manual clock that says when it was first read: the gate reads it once it finds the channel full."""

    def __init__(self) -> None:
        super().__init__()
        self.read = threading.Event()

    def monotonic(self) -> float:
        self.read.set()
        return super().monotonic()


def test_backpressure_is_the_time_blocked_on_a_full_channel_accumulated_by_the_sender() -> None:
    clock, channel, stop = _WatchedClock(), queue.Queue(maxsize=1), threading.Event()
    gate = OutputGate("forward", (), [channel], 0, 0, 128, stop, clock)
    gate.emit(Watermark(1))  # there is room: no time blocked, the clock is not even read
    assert gate.backpressured_s == 0 and not clock.read.is_set()
    sender = threading.Thread(target=gate.emit, args=(Watermark(2),))
    sender.start()
    assert clock.read.wait(10)  # blocked on the full channel
    clock.advance(250)
    channel.get()  # the consumer takes one: the sender gets through
    sender.join(10)
    assert gate.backpressured_s == pytest.approx(0.25)
    assert [channel.get_nowait()[1].timestamp] == [2]


def _status(at_ms: int, busy: float, blocked: tuple[float, float], out: int) -> JobStatus:
    subtasks = tuple(SubtaskStatus(i, out, out, watermark=at_ms - 1500, backpressured_ms=b, busy_ms=busy)
                     for i, b in enumerate(blocked))
    return JobStatus("j", "RUNNING", 0, at_ms, (OperatorStatus(0, "Calc", "x", 2, (), subtasks),))


def test_rates_are_the_change_of_the_runtime_totals_between_two_statuses_per_second() -> None:
    before = _status(10_000, busy=100, blocked=(0, 1000), out=50)
    after = _status(12_000, busy=700, blocked=(800, 1200), out=250)
    [rates] = operator_rates(before, after)
    # per subtask ms/s, of the most blocked (busiest) subtask: (800 - 0) / 2 s, (700 - 100) / 2 s
    assert rates["backpressured_ms_per_s"] == 400.0 and rates["busy_ms_per_s"] == 300.0
    assert rates["records_out_per_s"] == rates["records_in_per_s"] == 200.0  # (2 x 250 - 2 x 50) / 2 s
    assert rates["watermark_lag_ms"] == 1500
    # the first status, or one after a restart reset the totals: no rate rather than a negative one
    assert operator_rates(None, after)[0]["backpressured_ms_per_s"] == 0.0
    assert operator_rates(after, _status(13_000, busy=0, blocked=(0, 0), out=0))[0]["busy_ms_per_s"] == 0.0


BACKPRESSURED_JOB = """
CREATE TEMPORARY FUNCTION slow_plus_one AS 'tests.udf_samples.slow_plus_one' LANGUAGE PYTHON;
SET 'table.exec.batch-size' = '100';
CREATE TABLE gen (k INT, v BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '20000',
    'fields.k.min' = '1', 'fields.k.max' = '20');
CREATE TABLE sink (k INT, n BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT k, slow_plus_one(n) FROM (SELECT k, COUNT(*) AS n FROM gen GROUP BY k);
"""


@pytest.mark.slow
def test_a_slow_operator_shows_as_busy_and_its_upstream_as_backpressured_steadily() -> None:
    job = RunningJob(BACKPRESSURED_JOB)
    try:
        first = poll("rows flowing", lambda: (s := job.executor.status()).records_in > 0 and s)
        samples = [first]
        for _ in range(3):  # three one-second windows: the share is steady, not flipping between 0 and 100 %
            samples.append(poll("a second later", lambda: (s := job.executor.status()).timestamp_ms
                                >= samples[-1].timestamp_ms + 1000 and s))
        for before, after in zip(samples, samples[1:], strict=False):
            rates = {op.kind: r for op, r in zip(after.operators, operator_rates(before, after), strict=True)}
            # the source's chain waits on the full channel to the aggregate, whose chain calls the slow function
            assert rates["Source"]["backpressured_ms_per_s"] > 500, rates
            assert rates["Calc"]["busy_ms_per_s"] > 500, rates
            assert rates["GroupAggregate"]["backpressured_ms_per_s"] == 0, rates
    finally:
        job.executor.cancel()
        job.thread.join(timeout=60)


def test_a_savepoint_is_never_subsumed_by_a_newer_checkpoint_as_in_flink(tmp_path: Path) -> None:
    keys = [("chain", 0)]
    notified: list[int] = []
    coordinator = CheckpointCoordinator(CheckpointStorage(tmp_path / "chk", 1), None, keys, lambda n, sp: None,
                                        lambda n, final: notified.append(n), {})
    savepoint = coordinator.trigger_checkpoint(savepoint_dir=tmp_path / "sp")  # 1
    checkpoint = coordinator.trigger_checkpoint()  # 2, completes first
    coordinator.acknowledge(2, keys[0], {"operators": {}})
    assert checkpoint.result(timeout=10) and not savepoint.done()  # `sqlstream savepoint` still waits for it
    coordinator.acknowledge(1, keys[0], {"operators": {}})
    assert savepoint.result(timeout=10) == tmp_path / "sp" and (tmp_path / "sp" / "_metadata").is_file()
    assert coordinator.latest_completed == 2 and notified == [2, 1]  # the latest never goes back
    checkpoints = coordinator.history.snapshot()[0]
    assert [(c.id, c.savepoint, c.state) for c in checkpoints] == [(1, True, "COMPLETED"), (2, False, "COMPLETED")]


@pytest.mark.slow
def test_stop_of_a_foreground_job_takes_a_savepoint_into_its_state_savepoints_dir_by_default(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    script = tmp_path / "endless.sql"
    script.write_text(ENDLESS_JOB.replace("SET 'execution.checkpointing.interval' = '100 ms';",
                                          f"SET 'execution.checkpointing.interval' = '100 ms';\n"
                                          f"SET 'state.checkpoints.dir' = '{tmp_path / 'chk'}';\n"
                                          f"SET 'state.savepoints.dir' = '{tmp_path / 'sp'}';"))
    env = {**os.environ, "SQLSTREAM_HOME": str(home), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "sqlstream.frontend.cli", "run", str(script)], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        job_id = re.search(r"Job id: ([0-9a-f]{12})", proc.stderr.readline()).group(1)  # type: ignore[union-attr]
        wait_for("a checkpoint", lambda: (tmp_path / "chk" / "chk-1").exists())
        stopped = cli(home, "stop", job_id).stdout
        path = Path(re.search(r"stopped with a savepoint: (\S+)", stopped).group(1))  # type: ignore[union-attr]
        assert path.parent == tmp_path / "sp" and path.name.endswith(f"-{job_id}")  # as Flink: no directory named
        assert (path / "_metadata").is_file()
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
