"""Detached jobs: the job manager, its CLI, its REST API and its web page.

The lifecycle test goes through the command line as a user would: submit a
job (which starts the job manager), watch it checkpoint, stop it with a
savepoint, resume from the savepoint, and check that the committed output of
the two runs is exactly the generated sequence: no loss, no duplicates.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from sqlstream.core.status import read_status
from tests.jobmanager_api import ROOT, Api, start_jobmanager, stop_jobmanager

ROWS = 8000

SEQUENCE_JOB = """
SET 'execution.checkpointing.interval' = '300 ms';
SET 'state.checkpoints.dir' = '{chk}';
SET 'table.exec.batch-size' = '100';
CREATE TABLE gen (seq BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '1000',
    'fields.seq.kind' = 'sequence', 'fields.seq.start' = '0', 'fields.seq.end' = '{last}');
CREATE TABLE out (seq BIGINT, doubled BIGINT) WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv');
INSERT INTO out SELECT seq, seq * 2 FROM gen;
"""

WINDOW_JOB = """
SET 'execution.checkpointing.interval' = '200 ms';
SET 'parallelism.default' = '2';
CREATE TABLE clicks (user_id INT, seq BIGINT, ts AS TO_TIMESTAMP_LTZ(seq * 10, 3),
    WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'datagen', 'rows-per-second' = '2000', 'fields.user_id.min' = '1', 'fields.user_id.max' = '5',
      'fields.seq.kind' = 'sequence', 'fields.seq.start' = '0', 'fields.seq.end' = '1000000000');
CREATE TABLE sink (window_start TIMESTAMP(3), user_id INT, n BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT window_start, user_id, COUNT(*) FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts),
    INTERVAL '1' SECOND)) GROUP BY window_start, window_end, user_id;
"""


def cli(home: Path, *args: str, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "SQLSTREAM_HOME": str(home), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "sqlstream.frontend.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd or ROOT, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def wait_for(what: str, check: Any, timeout: float = 40) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def committed(out: Path) -> list[tuple[int, int]]:
    files = [p for p in out.glob("*") if not p.name.startswith((".", "_")) and p.stat().st_size] if out.exists() else []
    if not files:
        return []
    names = ", ".join(f"'{p}'" for p in files)
    return duckdb.sql(f"SELECT seq, doubled FROM read_csv([{names}], header = false, "
                      "columns = {'seq': 'BIGINT', 'doubled': 'BIGINT'}) ORDER BY seq").fetchall()


def test_detached_job_stop_with_savepoint_and_resume_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    home, out, chk = tmp_path / "home", tmp_path / "out", tmp_path / "chk"
    script = tmp_path / "job.sql"
    script.write_text(SEQUENCE_JOB.format(chk=chk, out=out, last=ROWS - 1))
    try:
        submitted = cli(home, "run", str(script), "--detach").stdout
        job_id = re.search(r"JobID ([0-9a-f]{12})", submitted).group(1)  # type: ignore[union-attr]
        url = re.search(r"(http://127\.0\.0\.1:\d+)/", submitted).group(1)  # type: ignore[union-attr]
        api = Api(home, url)
        assert re.search(rf"Web page: {url}/\?token={api.token}$", submitted, re.M)
        wait_for("a checkpoint", lambda: api.call(f"/jobs/{job_id}")[1]["last_checkpoint"])
        line = next(x for x in cli(home, "jobs").stdout.splitlines() if x.startswith(job_id))
        assert re.search(r"RUNNING\s+0:00:\d\d\s+\d+\s+\d+\s+#\d+ \(\d+ ms, \d+ s ago\)\s+\S*job.sql", line), line
        stopped = cli(home, "stop", job_id, "--savepoint", str(tmp_path / "savepoints")).stdout
        savepoint = re.search(r"savepoint: (\S+)", stopped).group(1)  # type: ignore[union-attr]
        assert Path(savepoint).is_dir() and Path(savepoint).parent == tmp_path / "savepoints"
        wait_for("the stopped job to finish", lambda: api.call(f"/jobs/{job_id}")[1]["state"] == "FINISHED")
        first = committed(out)
        assert 0 < len(first) < ROWS, "stopped mid-way"
        assert len({s for s, _ in first}) == len(first) and all(d == 2 * s for s, d in first)
        assert (home / "jobs" / job_id / "log").read_text().count("[INFO]") >= 1

        resumed = cli(home, "run", str(script), "--detach", "--restore", savepoint).stdout
        resumed_id = re.search(r"JobID ([0-9a-f]{12})", resumed).group(1)  # type: ignore[union-attr]
        wait_for("the resumed job to finish", lambda: api.call(f"/jobs/{resumed_id}")[1]["state"] == "FINISHED",
                 timeout=60)
        assert committed(out) == [(s, 2 * s) for s in range(ROWS)]
        # the resumed run read only what the first had not committed
        listing = cli(home, "jobs").stdout
        read = int(re.search(rf"{resumed_id}\s+FINISHED\s+\S+\s+(\d+)", listing).group(1))  # type: ignore[union-attr]
        assert read == ROWS - len(first)
    finally:
        stop_jobmanager(home)


@pytest.fixture(scope="module")
def jobmanager() -> Iterator[tuple[Path, Api]]:
    """A job manager started with `sqlstream serve`, and a client of its REST API."""
    home = Path(tempfile.mkdtemp(prefix="sqlstream-jm-"))
    proc, api = start_jobmanager(home)
    try:
        yield home, api
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def running_job(jobmanager: tuple[Path, Api]) -> Iterator[dict[str, Any]]:
    """An unbounded windowed job, submitted over REST, with live metrics and a checkpoint or two."""
    _, api = jobmanager
    status, job = api.call("/jobs", "POST", {"sql": WINDOW_JOB, "name": "windows.sql"})
    assert status == 201 and job["state"] == "RUNNING"

    def metrics() -> dict | None:
        _, d = api.call(f"/jobs/{job['id']}")
        rates = [o["records_out_per_s"] for o in d["operators"] if o["kind"] == "Source"]
        return d if d["checkpoints"]["completed"] >= 2 and rates and rates[0] > 0 else None

    yield wait_for("live metrics", metrics)


def test_rest_api_reports_live_metrics_and_the_plan(jobmanager: tuple[Path, Api], running_job: dict) -> None:
    home, api = jobmanager
    d = running_job
    assert d["state"] == "RUNNING" and d["name"] == "windows.sql" and d["uptime_s"] > 0
    # what the job process published in its folder, read the way the job manager reads it
    published = read_status(home / "jobs" / d["id"])
    assert published is not None and published.state == "RUNNING" and published.timestamp_ms >= d["status_time_ms"]
    assert [op.node_id for op in published.operators] == [o["node_id"] for o in d["operators"]] == list(range(6))
    assert not (home / "jobs" / d["id"] / "metrics.json").exists()
    assert [o["kind"] for o in d["operators"]] == ["Source", "Calc", "WatermarkAssigner", "WindowAggregate", "Calc",
                                                   "Sink"]
    ops = {o["node_id"]: o for o in d["operators"]}
    window = ops[3]
    assert window["label"] == "#3 WindowAggregate" and window["name"].startswith("WindowAggregate(TUMBLE(")
    assert window["inputs"] == [{"upstream": 2, "mode": "hash"}] and window["parallelism"] == 2
    assert "WindowAggregate" in d["explain"]
    assert ops[0]["records_out"] > 0 and ops[0]["records_out_per_s"] > 0
    assert ops[0]["records_out"] == sum(s["records_out"] for s in ops[0]["subtasks"]) == d["records_in"]
    history = d["checkpoints"]["history"]
    completed = [c for c in history if c["state"] == "COMPLETED"]
    assert len(completed) >= 2 and all(c["duration_ms"] >= 0 and c["size_bytes"] > 0 for c in completed)
    assert all(c["state"] in ("COMPLETED", "IN_PROGRESS", "ABORTED") for c in history)
    assert d["last_checkpoint"] == d["checkpoints"]["latest"] == completed[-1]
    assert d["checkpoints"]["completed"] >= 2 and d["checkpoints"]["failed"] == 0
    fills = [s["input_queue_fill"] for s in window["subtasks"]]
    assert len(fills) == 2 and all(f is not None and 0 <= f <= 1 for f in fills) and window["input_queue_fill"] == max(fills)
    assignor = ops[2]
    assert assignor["watermark"] is not None and assignor["watermark_lag_ms"] > 0
    assert assignor["backpressured_ms"] >= 0 and ops[1]["watermark"] is None
    status, listing = api.call("/jobs")
    assert status == 200 and d["id"] in [j["id"] for j in listing["jobs"]]


def test_rest_api_errors(jobmanager: tuple[Path, Api]) -> None:
    _, api = jobmanager
    assert api.call("/jobs/nope") == (404, {"error": "no job nope"})
    status, body = api.call("/jobs", "POST", {"sql": "SELEC 1;"})
    assert status == 400 and "line 1, column 1 near 'SELEC'" in body["error"]
    assert api.call("/jobs", "POST", {})[0] == 400
    status, body = api.call("/jobs", "POST", {"sql": "INSERT INTO nowhere SELECT 1;"})
    assert status == 201
    failed = wait_for("the job to fail", lambda: (j := api.call(f"/jobs/{body['id']}")[1])["state"] == "FAILED" and j)
    assert "sink table 'nowhere' does not exist" in failed["error"]
    assert api.call(f"/jobs/{body['id']}/cancel", "POST", {})[0] == 409


def test_the_web_page_shows_running_jobs_and_their_dataflow(jobmanager: tuple[Path, Api], running_job: dict,
                                                            tmp_path: Path) -> None:
    _, api = jobmanager
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("headless Chromium is not installed (apt-get install -y chromium); the page is untested")
    dom = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
         "--virtual-time-budget=4000", "--dump-dom", api.page_url],
        capture_output=True, text=True, timeout=90,
    ).stdout
    assert running_job["id"] in dom
    assert "RUNNING" in dom
    graph = dom.split('id="graph"', 1)[1].split("</svg>", 1)[0]
    assert "#3 WindowAggregate" in graph and "hash" in graph
    assert 'id="operators"' in dom and "#0 Source" in dom


def test_cancel_ends_a_job_as_canceled(jobmanager: tuple[Path, Api], running_job: dict) -> None:
    home, api = jobmanager
    listing = cli(home, "jobs").stdout
    assert re.search(rf"{running_job['id']}\s+RUNNING", listing)
    assert "cancelled" in cli(home, "cancel", running_job["id"]).stdout
    wait_for("CANCELED", lambda: api.call(f"/jobs/{running_job['id']}")[1]["state"] == "CANCELED")
    again = cli(home, "cancel", running_job["id"], check=False)
    assert again.returncode == 1 and "is CANCELED, not RUNNING" in again.stderr
