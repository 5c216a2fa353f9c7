"""The local job manager: detached jobs, their live metrics, a REST API and a web page.

``sqlstream jobmanager`` (or ``sqlstream serve``, or started on demand by
``sqlstream run job.sql --detach``) listens on 127.0.0.1 only and records its
port in ``SQLSTREAM_HOME/jobmanager.json``.  Each submitted job runs as a
child ``sqlstream run`` process that the job manager supervises, rather than
as threads inside it: a job that fails, leaks memory or holds the GIL cannot
take the job manager or the other jobs down, a stuck job can be killed, and
the child reuses everything ``sqlstream run`` already does (the job registry,
SIGUSR1 savepoints, ``--restore``).  The child publishes its executor's public
status (``JobExecutor.status()``: per-operator counters, watermarks, queue fill,
checkpoint history) as ``status.json`` every half second (``--status-dir``, see
``status_publisher``), which the job manager reads and serves; it never looks
inside the child.

Per job, under ``SQLSTREAM_HOME/jobs/<id>/``: ``job.sql``, ``job.json`` (state),
``status.json`` and ``log`` (the child's stdout and stderr).

REST API (JSON):

* ``GET /jobs``: every job with state, uptime, records in/out, last checkpoint;
* ``GET /jobs/<id>``: the same plus, per operator (by node id, with its inputs and
  parallelism): records in/out and records/s, per-subtask figures, the watermark
  and its lag, input queue fill and time backpressured; the checkpoint history
  (trigger time, duration, size, state) with counts, and the physical plan;
* ``POST /jobs`` ``{"sql": ..., "name"?, "cwd"?, "restore"?, "allow_non_restored_state"?}``;
* ``POST /jobs/<id>/stop`` ``{"savepoint_dir"?}``: stop with a savepoint;
* ``POST /jobs/<id>/cancel``;
* ``GET /``: the web page (``sqlstream/frontend/web/index.html``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from sqlstream.catalog.persistent import parse_statements
from sqlstream.core import status as job_status
from sqlstream.core.errors import SqlStreamError
from sqlstream.core.home import home
from sqlstream.frontend.jobs import request_savepoint
from sqlstream.runtime.elements import MAX_WATERMARK

HOST = "127.0.0.1"
WEB_DIR = Path(__file__).resolve().parent / "web"
PACKAGE_ROOT = Path(__file__).resolve().parent.parent

RUNNING, FINISHED, FAILED, CANCELED = "RUNNING", "FINISHED", "FAILED", "CANCELED"


def state_file() -> Path:
    return home() / "jobmanager.json"


def job_dir(job_id: str) -> Path:
    return home() / "jobs" / job_id


def _write_json(path: Path, data: Any) -> None:
    """Atomically: a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------- the job manager


@dataclass
class JobRecord:
    id: str
    name: str
    cwd: str
    state: str = RUNNING
    started: float = field(default_factory=time.time)
    ended: float | None = None
    pid: int | None = None
    restore: str | None = None
    savepoint: str | None = None
    error: str | None = None
    requested: str | None = None  # 'stop' | 'cancel' once asked

    def __post_init__(self) -> None:
        # the two newest distinct statuses the job published: records/s are the change between them
        self._samples: tuple[job_status.JobStatus | None, job_status.JobStatus | None] = (None, None)
        self._samples_lock = threading.Lock()

    @property
    def dir(self) -> Path:
        return job_dir(self.id)

    def save(self) -> None:
        _write_json(self.dir / "job.json", asdict(self))

    def status(self) -> job_status.JobStatus | None:
        """The status the job process published last (None before its first)."""
        status = job_status.read_status(self.dir)
        with self._samples_lock:
            last = self._samples[1]
            if status is not None and (last is None or status.timestamp_ms > last.timestamp_ms):
                self._samples = (last, status)
        return status

    def final_state(self) -> str | None:
        """How the job process said its script ended, if it got to say so."""
        status = self.status()
        return status.state if status is not None and status.state in job_status.TERMINAL_STATES else None

    def summary(self, status: job_status.JobStatus | None = None) -> dict[str, Any]:
        status = status or self.status()
        end = self.ended or time.time()
        latest = status.latest_checkpoint if status is not None else None
        return {
            "id": self.id, "name": self.name, "state": self.state, "started": self.started, "ended": self.ended,
            "uptime_s": round(end - self.started, 1),
            "records_in": status.records_in if status is not None else 0,
            "records_out": status.records_out if status is not None else 0,
            "last_checkpoint": _checkpoint_json(latest) if latest is not None else None,
            "savepoint": self.savepoint, "error": self.error,
        }

    def detail(self) -> dict[str, Any]:
        status = self.status()
        out = self.summary(status)
        out.update({"cwd": self.cwd, "restore": self.restore, "log": str(self.dir / "log")})
        if status is None:
            out.update({"operators": [], "explain": "", "restarts": 0, "status_time_ms": None,
                        "checkpoints": {"completed": 0, "failed": 0, "history": [], "latest": None}})
            return out
        with self._samples_lock:
            previous, last = self._samples
        if last is None or last.timestamp_ms != status.timestamp_ms:
            previous = None  # a newer one was read meanwhile
        earlier = {op.node_id: op for op in previous.operators} if previous is not None else {}
        dt_s = (status.timestamp_ms - previous.timestamp_ms) / 1000 if previous is not None else 0.0
        operators = []
        for op in status.operators:
            before = earlier.get(op.node_id)
            entry = op.to_dict()
            entry["records_in_per_s"] = round((op.records_in - before.records_in) / dt_s, 1) if before and dt_s > 0 else 0.0
            entry["records_out_per_s"] = round((op.records_out - before.records_out) / dt_s, 1) if before and dt_s > 0 else 0.0
            mark = op.watermark
            entry["watermark_lag_ms"] = status.timestamp_ms - mark if mark is not None and mark != MAX_WATERMARK else None
            operators.append(entry)
        latest = status.latest_checkpoint
        out.update({
            "operators": operators, "explain": status.plan, "restarts": status.restarts,
            "status_time_ms": status.timestamp_ms,
            "checkpoints": {"completed": status.completed_checkpoints, "failed": status.failed_checkpoints,
                            "history": [_checkpoint_json(c) for c in status.checkpoints],
                            "latest": _checkpoint_json(latest) if latest is not None else None},
        })
        return out


def _checkpoint_json(checkpoint: job_status.CheckpointStatus) -> dict[str, Any]:
    """A checkpoint as REST shows it: its status, and when it completed (epoch seconds) if it did."""
    out = asdict(checkpoint)
    if checkpoint.duration_ms is not None:
        out["completed_at"] = (checkpoint.trigger_time_ms + checkpoint.duration_ms) / 1000
    return out


class JobManager:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.jobs: dict[str, JobRecord] = {}
        self.procs: dict[str, subprocess.Popen] = {}
        self.stop_event = threading.Event()
        self._recover()
        self.monitor = threading.Thread(target=self._monitor, name="job-monitor", daemon=True)
        self.monitor.start()

    def _recover(self) -> None:
        """Jobs of an earlier job manager: kept for the listing; ones still running are watched by pid."""
        root = home() / "jobs"
        for f in sorted(root.glob("*/job.json")) if root.exists() else []:
            data = _read_json(f)
            if not data:
                continue
            job = JobRecord(**data)
            if job.state == RUNNING and not _alive(job.pid):
                final = job.final_state()
                job.state = final or FAILED
                job.error = job.error or (None if final else "the job manager stopped while the job ran")
                job.ended = job.ended or time.time()
                job.save()
            self.jobs[job.id] = job

    # ------------------------------------------------------------ operations
    def submit(self, sql: str, name: str | None = None, cwd: str | None = None, restore: str | None = None,
               allow_non_restored_state: bool = False) -> JobRecord:
        parse_statements(sql)  # a syntax error is the submitter's, reported now with its location
        job = JobRecord(uuid.uuid4().hex[:12], name or "job.sql", cwd or os.getcwd(), restore=restore)
        job.dir.mkdir(parents=True, exist_ok=True)
        script = job.dir / "job.sql"
        script.write_text(sql)
        cmd = [sys.executable, "-m", "sqlstream.frontend.cli", "run", str(script), "--status-dir", str(job.dir)]
        if restore:
            cmd += ["--restore", restore]
        if allow_non_restored_state:
            cmd.append("--allow-non-restored-state")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH")) if p)
        with open(job.dir / "log", "ab") as log:
            proc = subprocess.Popen(cmd, cwd=job.cwd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        job.pid = proc.pid
        with self.lock:
            self.jobs[job.id] = job
            self.procs[job.id] = proc
            job.save()
        return job

    def get(self, job_id: str) -> JobRecord:
        with self.lock:
            job = self.jobs.get(job_id)
        if job is None:
            raise KeyError(job_id)
        return job

    def list(self) -> list[JobRecord]:
        with self.lock:
            return sorted(self.jobs.values(), key=lambda j: j.started)

    def _require_running(self, job_id: str) -> JobRecord:
        job = self.get(job_id)
        if job.state != RUNNING:
            raise SqlStreamError(f"job {job_id} is {job.state}, not RUNNING")
        return job

    def stop(self, job_id: str, savepoint_dir: str | None = None) -> str:
        """Stop with a savepoint (into ``savepoint_dir``, or the job's own folder): returns its path."""
        job = self._require_running(job_id)
        registry_id = self._registry_id(job)
        target = Path(savepoint_dir) if savepoint_dir else job.dir / "savepoints"
        job.requested = "stop"
        try:
            path = request_savepoint(registry_id, target, stop=True)
        except SqlStreamError:
            job.requested = None
            raise
        job.savepoint = str(path)
        job.save()
        return str(path)

    def cancel(self, job_id: str) -> None:
        job = self._require_running(job_id)
        job.requested = "cancel"
        job.save()
        if job.pid is not None and _alive(job.pid):
            os.kill(job.pid, signal.SIGINT)  # `sqlstream run` cancels its job on Ctrl-C

            def kill_if_stuck() -> None:
                deadline = time.monotonic() + 15
                while time.monotonic() < deadline and _alive(job.pid) and job.state == RUNNING:
                    time.sleep(0.1)
                if job.state == RUNNING and job.pid is not None and _alive(job.pid):
                    os.kill(job.pid, signal.SIGKILL)

            threading.Thread(target=kill_if_stuck, daemon=True).start()

    def _registry_id(self, job: JobRecord, timeout_s: float = 30) -> str:
        """The child's id in the job registry (which savepoint requests go to), from its status."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            status = job.status()
            if status is not None:
                return status.job_id
            if job.state != RUNNING:
                break
            time.sleep(0.05)
        raise SqlStreamError(f"job {job.id} has not started running yet")

    # ------------------------------------------------------------ supervision
    def _monitor(self) -> None:
        while not self.stop_event.wait(0.1):
            with self.lock:
                running = [j for j in self.jobs.values() if j.state == RUNNING]
            for job in running:
                proc = self.procs.get(job.id)
                code = proc.poll() if proc is not None else (None if _alive(job.pid) else -1)
                if code is not None:
                    self._ended(job, code)

    def _ended(self, job: JobRecord, code: int) -> None:
        final = job.final_state()
        if job.requested == "cancel":
            job.state = CANCELED
        elif job.requested == "stop" and code == 0:
            job.state = FINISHED
        elif code == 0:
            job.state = FINISHED
        elif code == -1 and final:
            job.state = final
        else:
            job.state = FAILED
            job.error = _last_error(job.dir / "log") or f"the job process exited with code {code}"
        job.ended = time.time()
        job.save()

    def shutdown(self) -> None:
        """Cancels the running jobs (they need a supervisor) and stops watching."""
        for job in self.list():
            if job.state == RUNNING:
                try:
                    self.cancel(job.id)
                except SqlStreamError:
                    continue
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(j.state == RUNNING for j in self.list()):
            time.sleep(0.1)
        self.stop_event.set()


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _last_error(log: Path) -> str | None:
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("[ERROR]"):
            return "\n".join(lines[i:])
    return lines[-1] if lines else None


# ---------------------------------------------------------------- HTTP


class _Handler(BaseHTTPRequestHandler):
    manager: JobManager
    server_version = "sqlstream-jobmanager"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Requests are not logged: the web page polls every two seconds."""

    def _send(self, status: int, body: Any, content_type: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._send(status, {"error": message})

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        if not length:
            return {}
        data = json.loads(self.rfile.read(length))
        if not isinstance(data, dict):
            raise ValueError("the request body must be a JSON object")
        return data

    def _parts(self) -> list[str]:
        return [p for p in self.path.split("?", 1)[0].split("/") if p]

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        parts = self._parts()
        try:
            if not parts or parts == ["index.html"]:
                self._send(200, (WEB_DIR / "index.html").read_bytes(), "text/html; charset=utf-8")
            elif parts == ["jobs"]:
                self._send(200, {"jobs": [j.summary() for j in self.manager.list()]})
            elif len(parts) == 2 and parts[0] == "jobs":
                self._send(200, self.manager.get(parts[1]).detail())
            else:
                self._error(404, f"no such resource: {self.path}")
        except KeyError as e:
            self._error(404, f"no job {e.args[0]}")

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        parts = self._parts()
        try:
            body = self._body()
            if parts == ["jobs"]:
                if not isinstance(body.get("sql"), str) or not body["sql"].strip():
                    self._error(400, "POST /jobs needs {\"sql\": \"...\"}")
                    return
                job = self.manager.submit(body["sql"], body.get("name"), body.get("cwd"), body.get("restore"),
                                          bool(body.get("allow_non_restored_state")))
                self._send(201, job.summary())
            elif len(parts) == 3 and parts[0] == "jobs" and parts[2] == "stop":
                path = self.manager.stop(parts[1], body.get("savepoint_dir"))
                self._send(200, {"id": parts[1], "savepoint": path})
            elif len(parts) == 3 and parts[0] == "jobs" and parts[2] == "cancel":
                self.manager.cancel(parts[1])
                self._send(202, {"id": parts[1], "state": "CANCELING"})
            else:
                self._error(404, f"no such resource: {self.path}")
        except KeyError as e:
            self._error(404, f"no job {e.args[0]}")
        except ValueError as e:
            self._error(400, f"bad request body: {e}")
        except SqlStreamError as e:
            self._error(409 if "not RUNNING" in str(e) else 400, str(e))


def serve(port: int = 0) -> int:
    """Runs the job manager in the foreground until SIGTERM or Ctrl-C."""
    existing = _read_json(state_file())
    if existing and _alive(existing.get("pid")) and existing.get("pid") != os.getpid() and _responds(existing["port"]):
        raise SqlStreamError(f"a job manager is already running on {HOST}:{existing['port']} (pid {existing['pid']})")
    manager = JobManager()
    handler = type("Handler", (_Handler,), {"manager": manager})
    server = ThreadingHTTPServer((HOST, port), handler)
    server.daemon_threads = True
    actual = server.server_address[1]
    home().mkdir(parents=True, exist_ok=True)
    _write_json(state_file(), {"pid": os.getpid(), "port": actual, "started": time.time()})
    print(f"[INFO] Job manager listening on http://{HOST}:{actual}/ (SQLSTREAM_HOME={home()})", flush=True)

    def stop(signum: int, frame: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        manager.shutdown()
        current = _read_json(state_file())
        if current and current.get("pid") == os.getpid():
            state_file().unlink(missing_ok=True)
    return 0


def _responds(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{HOST}:{port}/jobs", timeout=2) as r:
            return r.status == 200
    except (OSError, urllib.error.URLError):
        return False


# ---------------------------------------------------------------- client


class Client:
    """Talks to the local job manager; ``start=True`` launches one in the background if none runs."""

    def __init__(self, start: bool = False, timeout_s: float = 30) -> None:
        self.port = self._find()
        if self.port is None and start:
            self.port = self._launch(timeout_s)
        if self.port is None:
            raise SqlStreamError("no job manager is running; start one with `sqlstream jobmanager` "
                                 "or submit a job with `sqlstream run job.sql --detach`")

    @staticmethod
    def _find() -> int | None:
        info = _read_json(state_file())
        if info and _alive(info.get("pid")) and _responds(info["port"]):
            return int(info["port"])
        return None

    def _launch(self, timeout_s: float) -> int:
        home().mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH")) if p)
        with open(home() / "jobmanager.log", "ab") as log:
            subprocess.Popen([sys.executable, "-m", "sqlstream.frontend.cli", "jobmanager"], env=env, cwd=str(home()),
                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            port = self._find()
            if port is not None:
                return port
            time.sleep(0.1)
        raise SqlStreamError(f"the job manager did not start within {timeout_s:.0f} s; see {home() / 'jobmanager.log'}")

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None, timeout: float = 150) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            message = (_json_or_none(e.read()) or {}).get("error") or str(e)
            raise SqlStreamError(message) from None
        except urllib.error.URLError as e:
            raise SqlStreamError(f"the job manager at {self.url} does not answer: {e.reason}") from None

    def submit(self, sql: str, name: str, cwd: str, restore: str | None = None,
               allow_non_restored_state: bool = False) -> dict[str, Any]:
        return self._call("POST", "/jobs", {"sql": sql, "name": name, "cwd": cwd, "restore": restore,
                                            "allow_non_restored_state": allow_non_restored_state})

    def jobs(self) -> list[dict[str, Any]]:
        return self._call("GET", "/jobs")["jobs"]

    def job(self, job_id: str) -> dict[str, Any]:
        return self._call("GET", f"/jobs/{job_id}")

    def stop(self, job_id: str, savepoint_dir: str | None = None) -> str:
        return self._call("POST", f"/jobs/{job_id}/stop", {"savepoint_dir": savepoint_dir})["savepoint"]

    def cancel(self, job_id: str) -> None:
        self._call("POST", f"/jobs/{job_id}/cancel", {})


def _json_or_none(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


def format_jobs(jobs: list[dict[str, Any]], now: float | None = None) -> str:
    """The `sqlstream jobs` listing."""
    now = now or time.time()
    header = ("ID", "STATE", "UPTIME", "RECORDS IN", "RECORDS OUT", "LAST CHECKPOINT", "NAME")
    lines = [header]
    for j in jobs:
        up = int(j["uptime_s"])
        cp = j.get("last_checkpoint")
        last = f"#{cp['id']} ({cp['duration_ms']:.0f} ms, {max(now - cp['completed_at'], 0):.0f} s ago)" if cp else "-"
        lines.append((j["id"], j["state"], f"{up // 3600}:{up // 60 % 60:02d}:{up % 60:02d}", str(j["records_in"]),
                      str(j["records_out"]), last, j["name"]))
    widths = [max(len(r[i]) for r in lines) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in lines)
