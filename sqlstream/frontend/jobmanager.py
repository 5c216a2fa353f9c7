"""The local job manager: detached jobs, their live metrics, a REST API and a web page.

``sqlstream jobmanager`` (or ``sqlstream serve``, or started on demand by
``sqlstream run job.sql --detach``) listens on 127.0.0.1 only and records its
port in ``SQLSTREAM_HOME/jobmanager.json``.  Each submitted job runs as a
child ``sqlstream run`` process that the job manager supervises, rather than
as threads inside it: a job that fails, leaks memory or holds the GIL cannot
take the job manager or the other jobs down, a stuck job can be killed, and
the child reuses everything ``sqlstream run`` already does (the job registry,
SIGUSR1 savepoints, ``--restore``).  The child writes a metrics file every
half second (``--metrics-file``), which the job manager serves.

Per job, under ``SQLSTREAM_HOME/jobs/<id>/``: ``job.sql``, ``job.json`` (state),
``metrics.json`` and ``log`` (the child's stdout and stderr).

REST API (JSON):

* ``GET /jobs``: every job with state, uptime, records in/out, last checkpoint;
* ``GET /jobs/<id>``: the same plus per-operator records and records/s, watermarks
  and their lag, input queue fill per operator chain (a backpressure proxy),
  checkpoint durations and sizes, and the physical plan as nodes and edges;
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
from sqlstream.core.errors import SqlStreamError
from sqlstream.core.home import home
from sqlstream.frontend.jobs import request_savepoint

HOST = "127.0.0.1"
WEB_DIR = Path(__file__).resolve().parent / "web"
PACKAGE_ROOT = Path(__file__).resolve().parent.parent
METRICS_INTERVAL_S = 0.5

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


# ---------------------------------------------------------------- in the job process


class MetricsReporter:
    """Writes the running job's metrics to a JSON file periodically (in the ``sqlstream run`` child)."""

    def __init__(self, session: Any, path: Path, registry_id: str, interval_s: float = METRICS_INTERVAL_S) -> None:
        self.session = session
        self.path = path
        self.registry_id = registry_id
        self.interval_s = interval_s
        self.stop_event = threading.Event()
        self.previous: dict[str, tuple[float, int, int]] = {}  # operator -> (time, in, out)
        self.checkpoints: dict[int, dict[str, Any]] = {}
        self.executor: Any = None
        self.thread = threading.Thread(target=self._loop, name="metrics-reporter", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _loop(self) -> None:
        while not self.stop_event.wait(self.interval_s):
            self.write()

    def write(self, final_state: str | None = None) -> None:
        executor = self.session.current_executor or self.executor
        self.executor = executor
        data = {"registry_id": self.registry_id, "pid": os.getpid(), "time": time.time(),
                "final_state": final_state}
        if executor is not None:
            data.update(self.snapshot(executor))
        _write_json(self.path, data)

    def close(self, final_state: str) -> None:
        self.stop_event.set()
        self.thread.join(timeout=5)
        self.write(final_state)

    def snapshot(self, executor: Any) -> dict[str, Any]:
        from sqlstream.runtime.elements import MIN_WATERMARK
        from sqlstream.runtime.subtask import Subtask

        now = time.time()
        nodes = executor.flow.nodes
        chain_of = {n.id: c for c in executor.chains for n in c.nodes}
        plan = [
            {"id": n.id, "name": n.name, "detail": n.detail, "parallelism": chain_of[n.id].parallelism,
             "chain": chain_of[n.id].uid, "inputs": [{"upstream": e.upstream, "mode": e.mode} for e in n.inputs],
             "source": n.source is not None, "sink": n.sink is not None}
            for n in nodes
        ]
        operators = []
        records_in = records_out = 0
        by_id = {n.id: n for n in nodes}
        for label, m in executor.summed_metrics().items():
            node_id = int(label.split()[0].lstrip("#"))
            t0, in0, out0 = self.previous.get(label, (now, m.records_in, m.records_out))
            dt = now - t0
            operators.append({
                "id": node_id, "name": label, "records_in": m.records_in, "records_out": m.records_out,
                "records_in_per_s": round((m.records_in - in0) / dt, 1) if dt > 0 else 0.0,
                "records_out_per_s": round((m.records_out - out0) / dt, 1) if dt > 0 else 0.0,
                "late_records_dropped": m.late_records_dropped,
            })
            self.previous[label] = (now, m.records_in, m.records_out)
            node = by_id.get(node_id)
            if node is not None and node.source is not None:
                records_in += m.records_out
            if node is not None and node.sink is not None:
                records_out += m.records_in
        chains = []
        subtasks = [t for t in threading.enumerate() if isinstance(t, Subtask)
                    and any(t.chain is c for c in executor.chains)]
        for c in executor.chains:
            mine = [t for t in subtasks if t.chain is c]
            fills = [t.inbound.qsize() / t.inbound.maxsize for t in mine if t.reader is None and t.inbound.maxsize]
            marks = [t.tasks[-1].watermark for t in mine if t.tasks and t.tasks[-1].watermark > MIN_WATERMARK]
            watermark = min(marks) if marks else None
            chains.append({
                "uid": c.uid, "name": c.name, "parallelism": c.parallelism, "nodes": [n.id for n in c.nodes],
                "input_queue_fill": round(max(fills), 2) if fills else None,
                "watermark": watermark,
                "watermark_lag_ms": int(now * 1000) - watermark if watermark is not None else None,
            })
        coordinator = executor.coordinator
        for stats in list(coordinator.completed) if coordinator is not None else []:
            self.checkpoints.setdefault(stats.checkpoint_id, {
                "id": stats.checkpoint_id, "duration_ms": round(stats.duration_s * 1000, 1),
                "size_bytes": stats.size_bytes, "completed_at": now,
            })
        history = [self.checkpoints[k] for k in sorted(self.checkpoints)][-20:]
        return {
            "plan": plan, "explain": executor.flow.explain(), "operators": operators, "chains": chains,
            "records_in": records_in, "records_out": records_out,
            "checkpoints": {"completed": len(self.checkpoints), "history": history,
                            "latest": history[-1] if history else None},
        }


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

    @property
    def dir(self) -> Path:
        return job_dir(self.id)

    def save(self) -> None:
        _write_json(self.dir / "job.json", asdict(self))

    def metrics(self) -> dict[str, Any]:
        return _read_json(self.dir / "metrics.json") or {}

    def summary(self) -> dict[str, Any]:
        m = self.metrics()
        end = self.ended or time.time()
        return {
            "id": self.id, "name": self.name, "state": self.state, "started": self.started, "ended": self.ended,
            "uptime_s": round(end - self.started, 1), "records_in": m.get("records_in", 0),
            "records_out": m.get("records_out", 0),
            "last_checkpoint": (m.get("checkpoints") or {}).get("latest"),
            "savepoint": self.savepoint, "error": self.error,
        }

    def detail(self) -> dict[str, Any]:
        m = self.metrics()
        out = self.summary()
        out.update({
            "cwd": self.cwd, "restore": self.restore, "log": str(self.dir / "log"),
            "plan": m.get("plan", []), "explain": m.get("explain", ""), "operators": m.get("operators", []),
            "chains": m.get("chains", []), "checkpoints": m.get("checkpoints", {"completed": 0, "history": []}),
            "metrics_time": m.get("time"),
        })
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
                final = job.metrics().get("final_state")
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
        cmd = [sys.executable, "-m", "sqlstream.frontend.cli", "run", str(script), "--metrics-file", str(job.dir / "metrics.json")]
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
        """The child's id in the job registry (which savepoint requests go to), from its metrics file."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            rid = job.metrics().get("registry_id")
            if rid:
                return rid
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
        final = job.metrics().get("final_state")
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
