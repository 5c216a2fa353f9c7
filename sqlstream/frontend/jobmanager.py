"""The local job manager: detached jobs, their live metrics, a REST API and a web page.

``sqlstream jobmanager`` (or ``sqlstream serve``, or started on demand by
``sqlstream run job.sql --detach``) listens on 127.0.0.1 by default and records
its address in ``SQLSTREAM_HOME/jobmanager.json``.  Each submitted job runs as a
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
  and its lag, input queue fill, busy and backpressured time (totals, and ms/s
  between the two newest statuses); the checkpoint history (trigger time,
  duration, size, state) with counts, and the physical plan;
* ``POST /jobs`` ``{"sql": ..., "name"?, "cwd"?, "restore"?, "allow_non_restored_state"?}``;
* ``POST /jobs/<id>/stop`` ``{"savepoint_dir"?}``: stop with a savepoint;
* ``POST /jobs/<id>/cancel``;
* ``POST /jobmanager/shutdown``: stop the job manager (``sqlstream jobmanager stop``);
* ``GET /metrics``: Prometheus' text format (``sqlstream.frontend.metrics``); it needs
  the token too, as a bearer token, unless started with ``--metrics-no-auth``;
* ``GET /``: the web page (``sqlstream/frontend/web/index.html``).

A job's id is the one given here: the child runs under it (``--job-id``), so its
registry entry, savepoints, status and every command (``jobs``, ``stop``,
``cancel``, ``savepoint``) name it the same way.

Anyone who can submit SQL can run code as this user (CREATE FUNCTION imports
Python from the job's directory), so every request must carry the token kept
in ``SQLSTREAM_HOME/jobmanager.token`` (0600), as Jupyter does:
``Authorization: Bearer <token>``, or the cookie that opening
``/?token=<token>`` sets for the web page (HttpOnly, SameSite=Strict).  A Host
header that does not name this server (DNS rebinding), a foreign Origin, a
POST that is not ``application/json`` (a cross-site form), an oversized or
slow body are refused before anything runs.  Job files are private to the
user (dirs 0700, files 0600).
"""

from __future__ import annotations

import dataclasses
import hmac
import ipaddress
import json
import os
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from http.cookies import CookieError, SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from sqlstream.catalog.persistent import parse_statements
from sqlstream.core import status as job_status
from sqlstream.core.errors import SqlStreamError
from sqlstream.core.home import home, open_private, private_dir
from sqlstream.core.secrets import redact
from sqlstream.frontend import metrics
from sqlstream.frontend.jobs import (
    alive,
    jobs_dir,
    request_cancel,
    request_savepoint,
    running_entry,
)
from sqlstream.runtime.elements import MAX_WATERMARK

HOST = "127.0.0.1"
WEB_DIR = Path(__file__).resolve().parent / "web"
PACKAGE_ROOT = Path(__file__).resolve().parent.parent

RUNNING, FINISHED, FAILED, CANCELED = "RUNNING", "FINISHED", "FAILED", "CANCELED"
HISTORY_SAMPLES = 300  # rates kept per job: five minutes at the monitor's one sample a second
HISTORY_FIGURES = ("records_in_per_s", "records_out_per_s", "busy_ms_per_s", "backpressured_ms_per_s")
SAMPLE_INTERVAL_S = 1.0  # how often the monitor reads a running job's status, for its history


def state_file() -> Path:
    return home() / "jobmanager.json"


def job_dir(job_id: str) -> Path:
    return home() / "jobs" / job_id


def _write_json(path: Path, data: Any) -> None:
    """Atomically: a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open_private(tmp, "w") as f:
        f.write(json.dumps(data))
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
        # per-operator rates over time, for the page's throughput chart: one entry per status read
        self._history: deque[dict[str, Any]] = deque(maxlen=HISTORY_SAMPLES)

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
                if last is not None and status.operators:
                    rates = operator_rates(last, status)
                    self._history.append({"time_ms": status.timestamp_ms, "operators": {
                        str(op.node_id): {k: r[k] for k in HISTORY_FIGURES}
                        for op, r in zip(status.operators, rates, strict=True)}})
        return status

    def history(self) -> list[dict[str, Any]]:
        """Rates per operator (by node id) at each status read, oldest first (the last few minutes)."""
        with self._samples_lock:
            return list(self._history)

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

    def samples(self) -> tuple[job_status.JobStatus | None, job_status.JobStatus | None]:
        """(the status before the newest, the newest) of those read so far: rates are their difference."""
        self.status()
        with self._samples_lock:
            return self._samples

    def detail(self) -> dict[str, Any]:
        status = self.status()
        out = self.summary(status)
        out.update({"cwd": self.cwd, "restore": self.restore, "log": str(self.dir / "log")})
        if status is None:
            out.update({"operators": [], "history": [], "explain": "", "restarts": 0, "status_time_ms": None,
                        "checkpoints": {"completed": 0, "failed": 0, "history": [], "latest": None}})
            return out
        with self._samples_lock:
            previous, last = self._samples
        if last is None or last.timestamp_ms != status.timestamp_ms:
            previous = None  # a newer one was read meanwhile
        operators = [dict(op.to_dict(), **rates) for op, rates in zip(status.operators, operator_rates(previous, status),
                                                                      strict=True)]
        latest = status.latest_checkpoint
        out.update({
            "operators": operators, "history": self.history(), "explain": status.plan, "restarts": status.restarts,
            "status_time_ms": status.timestamp_ms,
            "checkpoints": {"completed": status.completed_checkpoints, "failed": status.failed_checkpoints,
                            "history": [_checkpoint_json(c) for c in status.checkpoints],
                            "latest": _checkpoint_json(latest) if latest is not None else None},
        })
        return out


def operator_rates(previous: job_status.JobStatus | None, status: job_status.JobStatus) -> list[dict[str, Any]]:
    """Per operator of ``status``: records/s, busy and backpressured ms/s, watermark lag, from two statuses.

    Rates are the change of the runtime's running totals between ``previous`` and ``status``
    over the time between them (0 without a previous one).  Busy and backpressured time are per
    subtask (0..1000 ms/s, Flink's ``busyTimeMsPerSecond`` and ``backPressuredTimeMsPerSecond``)
    and given for the operator's busiest, most blocked subtask: the one holding the job back.
    """
    earlier = {op.node_id: op for op in previous.operators} if previous is not None else {}
    dt_s = (status.timestamp_ms - previous.timestamp_ms) / 1000 if previous is not None else 0.0
    out = []
    for op in status.operators:
        before = earlier.get(op.node_id)
        if before is not None and dt_s > 0:
            old = {s.index: s for s in before.subtasks}

            def per_s(now: float, then: float) -> float:
                return round(max(now - then, 0) / dt_s, 1)

            busy = [per_s(s.busy_ms, old[s.index].busy_ms) for s in op.subtasks if s.index in old]
            blocked = [per_s(s.backpressured_ms, old[s.index].backpressured_ms) for s in op.subtasks if s.index in old]
            rates = {"records_in_per_s": per_s(op.records_in, before.records_in),
                     "records_out_per_s": per_s(op.records_out, before.records_out),
                     "busy_ms_per_s": min(max(busy, default=0.0), 1000.0),
                     "backpressured_ms_per_s": min(max(blocked, default=0.0), 1000.0)}
        else:
            rates = {"records_in_per_s": 0.0, "records_out_per_s": 0.0, "busy_ms_per_s": 0.0,
                     "backpressured_ms_per_s": 0.0}
        mark = op.watermark
        rates["watermark_lag_ms"] = status.timestamp_ms - mark if mark is not None and mark != MAX_WATERMARK else None
        out.append(rates)
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
        names = {f.name for f in dataclasses.fields(JobRecord)}
        for f in sorted(root.glob("*/job.json")) if root.exists() else []:
            data = _read_json(f)
            if not isinstance(data, dict) or not isinstance(data.get("id"), str):
                continue
            try:
                job = JobRecord(**{k: v for k, v in data.items() if k in names})
            except TypeError:
                continue  # not one of ours, or from an incompatible version: not listed
            if not isinstance(job.name, str):
                job.name = json.dumps(job.name)
            if job.state == RUNNING and not alive(job.pid):
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
        for d in (home(), home() / "jobs", job.dir):
            private_dir(d)
        script = job.dir / "job.sql"
        with open_private(script, "w") as f:
            f.write(sql)
        (jobs_dir() / f"{job.id}.cancel").unlink(missing_ok=True)
        # the child runs under this id: its registry entry, savepoints and status all say job.id
        cmd = [sys.executable, "-m", "sqlstream.frontend.cli", "run", str(script), "--status-dir", str(job.dir),
               "--job-id", job.id]
        if restore:
            cmd += ["--restore", restore]
        if allow_non_restored_state:
            cmd.append("--allow-non-restored-state")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH")) if p)
        with open_private(job.dir / "log", "ab") as log:
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
        self._await_registered(job)
        target = savepoint_dir if savepoint_dir else job.dir / "savepoints"
        job.requested = "stop"
        try:
            path = request_savepoint(job.id, target, stop=True)
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
        if job.pid is not None and alive(job.pid):
            # a file the child polls, not a signal: its SIGINT may be ignored (inherited from our parent)
            request_cancel(job.id, started=False)

            def kill_if_stuck() -> None:
                deadline = time.monotonic() + 15
                while time.monotonic() < deadline and alive(job.pid) and job.state == RUNNING:
                    time.sleep(0.1)
                if job.state == RUNNING and job.pid is not None and alive(job.pid):
                    os.kill(job.pid, signal.SIGKILL)

            threading.Thread(target=kill_if_stuck, daemon=True).start()

    def _await_registered(self, job: JobRecord, timeout_s: float = 30) -> None:
        """Until the child has registered under the job's id (and can take savepoint requests)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if running_entry(job.id) is not None:
                return
            if job.state != RUNNING:
                break
            time.sleep(0.05)
        raise SqlStreamError(f"job {job.id} has not started running yet")

    # ------------------------------------------------------------ supervision
    def _monitor(self) -> None:
        sampled = 0.0
        while not self.stop_event.wait(0.1):
            with self.lock:
                running = [j for j in self.jobs.values() if j.state == RUNNING]
            if time.monotonic() - sampled >= SAMPLE_INTERVAL_S:
                sampled = time.monotonic()
                for job in running:
                    job.status()  # the history grows whether or not anyone is looking
            for job in running:
                proc = self.procs.get(job.id)
                code = proc.poll() if proc is not None else (None if alive(job.pid) else -1)
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


def _last_error(log: Path) -> str | None:
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("[ERROR]"):
            return redact("\n".join(lines[i:]))
    return redact(lines[-1]) if lines else None


# ---------------------------------------------------------------- HTTP

LOOPBACK_NAMES = ("127.0.0.1", "localhost")
MAX_CONTENT_LENGTH = 1024 * 1024
REQUEST_TIMEOUT_S = 10.0
REQUEST_QUEUE_SIZE = 128  # pending connections: a burst of submissions is queued, not reset


def token_file() -> Path:
    return home() / "jobmanager.token"


def access_token() -> str:
    """This SQLSTREAM_HOME's job manager token, created on first use in a file only its owner can read.

    A token file that others can read is refused rather than used: whoever can
    read it can run code as this user through the job manager.
    """
    path = token_file()
    private_dir(home())
    try:
        with open_private(path, "x") as f:  # exclusive: two processes starting at once agree on one token
            f.write(secrets.token_urlsafe(32))
    except FileExistsError:
        pass
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise SqlStreamError(f"the job manager token file {path} can be read by others (mode {mode:o}); "
                             f"run `chmod 600 {path}`")
    token = path.read_text().strip()
    if len(token) < 16:
        raise SqlStreamError(f"the job manager token in {path} is missing or shorter than 16 characters")
    return token


@dataclass
class ServerOptions:
    """Where and how the job manager listens (Flink's ``rest.*`` options, as ``sqlstream serve`` flags).

    Outside loopback the REST API can submit code to run as this user: it is
    only reachable with the token, and the token should travel over TLS.
    """

    bind_address: str = "127.0.0.1"  # rest.bind-address
    address: str | None = None  # rest.address: the host name clients use (checked against Host headers)
    port: int = 0  # rest.port; 0 picks a free one
    max_content_length: int = MAX_CONTENT_LENGTH  # rest.server.max-content-length
    request_timeout_s: float = REQUEST_TIMEOUT_S  # for a request's headers and body to arrive
    ssl_cert: str | None = None  # PEM certificate chain: serve HTTPS
    ssl_key: str | None = None  # PEM private key of ssl_cert
    metrics_auth: bool = True  # GET /metrics needs the token too (Prometheus sends it as a bearer token)

    def __post_init__(self) -> None:
        if self.request_timeout_s <= 0:
            raise SqlStreamError(f"the request timeout must be positive, not {self.request_timeout_s:g} s")
        if self.max_content_length < 0:
            raise SqlStreamError(f"the largest request body must be 0 bytes or more, not {self.max_content_length}")

    @property
    def loopback(self) -> bool:
        if self.bind_address == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.bind_address).is_loopback
        except ValueError:
            return False

    @property
    def scheme(self) -> str:
        return "https" if self.ssl_cert else "http"

    def host_names(self) -> set[str]:
        """Names a client may put in the Host header (with the port): the bound address, loopback, ``address``."""
        names = set(LOOPBACK_NAMES) | {self.bind_address}
        if self.address:
            names.add(self.address)
        if self.bind_address in ("0.0.0.0", ""):
            names |= {socket.gethostname(), socket.getfqdn()}
        return {n.lower() for n in names if n}


class BadRequest(Exception):
    """A request the handler answers with ``status`` and a JSON error (naming the field when one is at fault)."""

    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.field = field


def _field(body: dict[str, Any], name: str, kind: type, required: bool = False) -> Any:
    value = body.get(name)
    if value is None:
        if required:
            raise BadRequest(400, f"field '{name}' is required", name)
        return None
    if not isinstance(value, kind):
        raise BadRequest(400, f"field '{name}' must be a {'boolean' if kind is bool else 'string'}, "
                              f"not {type(value).__name__}", name)
    return value


def _only(body: dict[str, Any], allowed: tuple[str, ...]) -> None:
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise BadRequest(400, f"unknown field '{unknown[0]}' (expected: {', '.join(allowed) or 'none'})", unknown[0])


class _Handler(BaseHTTPRequestHandler):
    """Every request is checked, in this order: Host (403), Origin (403), token (401); then a POST's
    Content-Type (415), size (413, 411 without a length) and arrival within the timeout (408)."""

    manager: JobManager
    options: ServerOptions
    token: str
    metrics_registry: metrics.CollectorRegistry
    server_version = "sqlstream-jobmanager"

    def setup(self) -> None:
        self.timeout = self.options.request_timeout_s  # socket timeout: a silent client frees its thread
        super().setup()
        if isinstance(self.request, ssl.SSLSocket):
            self.request.do_handshake()  # here, in this request's thread and under its timeout

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Requests are not logged: the web page polls every two seconds."""

    @property
    def cookie_name(self) -> str:
        # cookies are shared across ports of a host: one name per job manager port
        return f"sqlstream-token-{self.server.server_address[1]}"

    def _send(self, status: int, body: Any, content_type: str = "application/json",
              headers: dict[str, str] | None = None) -> None:
        # any text a job published (errors, plans) may quote its SQL: secret option values are hidden
        data = body if isinstance(body, bytes) else json.dumps(_redacted(body)).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")  # no other site frames the page
        self.send_header("Referrer-Policy", "no-referrer")  # the token URL is not passed on
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, field: str | None = None) -> None:
        self._send(status, {"error": message, **({"field": field} if field else {})})

    # ------------------------------------------------------------ checks
    def _check_host(self) -> None:
        """DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1 still sends its own Host."""
        host = (self.headers.get("Host") or "").strip().lower()
        port = str(self.server.server_address[1])
        name, _, given_port = host.rpartition(":")
        if given_port != port or name not in self.options.host_names():
            raise BadRequest(403, f"Host '{host}' is not this job manager's address")

    def _check_origin(self) -> None:
        """Cross-origin requests (another page's script) are refused; same-origin ones name this server."""
        origin = self.headers.get("Origin")
        if origin is not None and origin.lower() != f"{self.options.scheme}://{self.headers['Host'].strip().lower()}":
            raise BadRequest(403, f"cross-origin request from '{origin}' refused")

    def _authorized(self) -> bool:
        given = None
        auth = self.headers.get("Authorization") or ""
        if auth.lower().startswith("bearer "):
            given = auth[7:].strip()
        else:
            cookie = SimpleCookie()
            try:
                cookie.load(self.headers.get("Cookie") or "")
            except CookieError:
                return False
            if self.cookie_name in cookie:
                given = cookie[self.cookie_name].value
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def _guard(self) -> None:
        self._check_host()
        self._check_origin()

    def _body(self) -> dict[str, Any]:
        """The JSON object a POST carries, read whole within the request timeout and the size limit."""
        ctype = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        if ctype != "application/json":
            raise BadRequest(415, f"Content-Type must be application/json, not '{ctype or 'none'}'")
        if self.headers.get("Transfer-Encoding"):
            raise BadRequest(411, "send the body with a Content-Length, not a Transfer-Encoding")
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise BadRequest(400, "Content-Length is not a number") from None
        if length < 0:
            raise BadRequest(400, "Content-Length is negative")
        if length > self.options.max_content_length:
            raise BadRequest(413, f"request body of {length} bytes is over the limit of "
                                  f"{self.options.max_content_length} bytes")
        if not length:
            return {}
        deadline = time.monotonic() + self.options.request_timeout_s
        chunks, left = [], length
        try:
            while left:
                if time.monotonic() > deadline:
                    raise TimeoutError
                chunk = self.rfile.read1(min(left, 65536))
                if not chunk:
                    raise BadRequest(400, f"request body ended after {length - left} of {length} bytes")
                chunks.append(chunk)
                left -= len(chunk)
        except TimeoutError:
            raise BadRequest(408, f"request body did not arrive within {self.options.request_timeout_s:g} s") from None
        try:
            data = json.loads(b"".join(chunks))
        except ValueError as e:
            raise BadRequest(400, f"request body is not JSON: {e}") from None
        if not isinstance(data, dict):
            raise BadRequest(400, "request body must be a JSON object")
        return data

    def _discard_input(self, limit_s: float = 2.0, limit_bytes: int = 64 * 1024 * 1024) -> None:
        """After refusing a body unread: a client still sending it would get a reset instead of the answer
        if the socket closed with data pending, so the answer is flushed and the rest read and dropped,
        for at most ``limit_s`` seconds and ``limit_bytes`` bytes (a lingering close)."""
        self.wfile.flush()
        try:
            self.connection.shutdown(socket.SHUT_WR)
            deadline, dropped = time.monotonic() + limit_s, 0
            while time.monotonic() < deadline and dropped < limit_bytes:
                self.connection.settimeout(max(deadline - time.monotonic(), 0.01))
                chunk = self.rfile.read1(65536)
                if not chunk:
                    break
                dropped += len(chunk)
        except OSError:
            pass  # the client has gone: nothing left to protect

    def _parts(self) -> list[str]:
        return [urllib.parse.unquote(p) for p in urllib.parse.urlsplit(self.path).path.split("/") if p]

    def _answer(self, route: Callable[[], None]) -> None:
        try:
            self._guard()
            route()
        except BadRequest as e:
            if e.status in (408, 411, 413):
                self.close_connection = True  # the rest of the body is not read
            self._error(e.status, str(e), e.field)
            if e.status in (411, 413):
                self._discard_input()
        except KeyError as e:
            self._error(404, f"no job {e.args[0]}")
        except SqlStreamError as e:
            self._error(409 if "not RUNNING" in str(e) else 400, str(e))
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as e:  # noqa: BLE001 - one bad request must not take the job manager down
            print(f"[ERROR] {self.command} {self.path}: {type(e).__name__}: {redact(str(e))}", file=sys.stderr, flush=True)
            self._error(500, f"internal error: {type(e).__name__}")

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._answer(self._get)

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self._answer(self._post)

    def _get(self) -> None:
        parts = self._parts()
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        if not parts and "token" in query:
            # the page's URL: the token becomes a cookie the page's own requests carry, then leaves the address bar
            given = query["token"][0]
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                raise BadRequest(401, "wrong token")
            secure = "; Secure" if self.options.ssl_cert else ""
            self._send(303, b"", "text/plain", {
                "Location": "/",
                "Set-Cookie": f"{self.cookie_name}={given}; Path=/; HttpOnly; SameSite=Strict{secure}",
            })
            return
        if parts == ["metrics"] and not self.options.metrics_auth:  # `--metrics-no-auth`: scraped without the token
            self._send(200, metrics.exposition(self.metrics_registry), metrics.CONTENT_TYPE)
            return
        if not self._authorized():
            if not parts:
                self._send(401, (WEB_DIR / "unauthorized.html").read_bytes(), "text/html; charset=utf-8")
                return
            raise BadRequest(401, "missing or wrong token: send 'Authorization: Bearer <token>' "
                                  f"(the token is in {token_file()})")
        if not parts or parts == ["index.html"]:
            self._send(200, (WEB_DIR / "index.html").read_bytes(), "text/html; charset=utf-8")
        elif parts == ["metrics"]:
            self._send(200, metrics.exposition(self.metrics_registry), metrics.CONTENT_TYPE)
        elif parts == ["jobs"]:
            self._send(200, {"jobs": [j.summary() for j in self.manager.list()]})
        elif len(parts) == 2 and parts[0] == "jobs":
            self._send(200, self.manager.get(parts[1]).detail())
        else:
            raise BadRequest(404, f"no such resource: {self._path_only()}")

    def _path_only(self) -> str:
        return urllib.parse.urlsplit(self.path).path

    def _post(self) -> None:
        if not self._authorized():
            raise BadRequest(401, "missing or wrong token: send 'Authorization: Bearer <token>' "
                                  f"(the token is in {token_file()})")
        parts = self._parts()
        body = self._body()
        if parts == ["jobs"]:
            _only(body, ("sql", "name", "cwd", "restore", "allow_non_restored_state"))
            sql = _field(body, "sql", str, required=True)
            if not sql.strip():
                raise BadRequest(400, "field 'sql' is empty", "sql")
            cwd = _field(body, "cwd", str)
            if cwd is not None and not Path(cwd).is_dir():
                raise BadRequest(400, f"field 'cwd': '{cwd}' is not an existing directory", "cwd")
            job = self.manager.submit(sql, _field(body, "name", str), cwd, _field(body, "restore", str),
                                      bool(_field(body, "allow_non_restored_state", bool)))
            self._send(201, job.summary())
        elif len(parts) == 3 and parts[0] == "jobs" and parts[2] == "stop":
            _only(body, ("savepoint_dir",))
            path = self.manager.stop(parts[1], _field(body, "savepoint_dir", str))
            self._send(200, {"id": parts[1], "savepoint": path})
        elif len(parts) == 3 and parts[0] == "jobs" and parts[2] == "cancel":
            _only(body, ())
            self.manager.cancel(parts[1])
            self._send(202, {"id": parts[1], "state": "CANCELING"})
        elif parts == ["jobmanager", "shutdown"]:
            _only(body, ())
            self._send(202, {"pid": os.getpid(), "state": "STOPPING"})
            # as SIGTERM does: serve() then cancels the running jobs and removes jobmanager.json
            threading.Thread(target=self.server.shutdown, daemon=True).start()
        else:
            raise BadRequest(404, f"no such resource: {self._path_only()}")


def _redacted(value: Any) -> Any:
    """``value`` (a JSON answer) with :func:`redact` applied to every string in it."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redacted(v) for v in value]
    return value


class _Server(ThreadingHTTPServer):
    request_queue_size = REQUEST_QUEUE_SIZE
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that drops its connection or fails the TLS handshake is not worth a traceback."""
        error = sys.exc_info()[1]
        if not isinstance(error, OSError):
            super().handle_error(request, client_address)


def make_server(manager: JobManager, options: ServerOptions, token: str) -> ThreadingHTTPServer:
    """The HTTP(S) server of ``manager``, bound but not yet serving."""
    handler = type("Handler", (_Handler,), {"manager": manager, "options": options, "token": token,
                                            "metrics_registry": metrics.registry_for(manager)})
    server = _Server((options.bind_address, options.port), handler)
    if options.ssl_cert:
        if not options.ssl_key:
            server.server_close()
            raise SqlStreamError("--ssl-cert needs --ssl-key (the certificate's private key, PEM)")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(options.ssl_cert, options.ssl_key)
        except (OSError, ssl.SSLError) as e:
            server.server_close()
            raise SqlStreamError(f"cannot load the TLS certificate and key: {e}") from None
        # the handshake happens in the request's thread, under its timeout, not in the accepting loop
        server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    return server


def serve(options: ServerOptions | None = None) -> int:
    """Runs the job manager in the foreground until SIGTERM or Ctrl-C."""
    options = options or ServerOptions()
    existing = _read_json(state_file())
    if existing and alive(existing.get("pid")) and existing.get("pid") != os.getpid() and _responds(existing):
        raise SqlStreamError(f"a job manager is already running at {existing.get('url')} (pid {existing['pid']})")
    token = access_token()
    if not options.loopback and not options.ssl_cert:
        print(f"[WARN] The job manager listens on {options.bind_address} without TLS: its token and jobs cross "
              "the network in clear text; give it --ssl-cert and --ssl-key", file=sys.stderr, flush=True)
    if not options.loopback and not options.metrics_auth:
        print(f"[WARN] GET /metrics is served without the token on {options.bind_address}: anyone who reaches it "
              "sees the jobs' names and figures", file=sys.stderr, flush=True)
    manager = JobManager()
    try:
        server = make_server(manager, options, token)
    except BaseException:
        manager.stop_event.set()
        raise
    actual = server.server_address[1]
    client_host = options.address or (HOST if options.bind_address in ("0.0.0.0", "") else options.bind_address)
    url = f"{options.scheme}://{client_host}:{actual}"
    _write_json(state_file(), {"pid": os.getpid(), "port": actual, "url": url, "ssl_cert": options.ssl_cert,
                               "started": time.time()})
    print(f"[INFO] Job manager listening on {url}/ (SQLSTREAM_HOME={home()})", flush=True)
    print(f"[INFO] Web page: {url}/?token={token}", flush=True)

    def stop(signum: int, frame: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C stops it, even if our parent ignored SIGINT
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


def _responds(info: dict[str, Any]) -> bool:
    try:
        Client.at(info).jobs(timeout=2)
    except (SqlStreamError, OSError):
        return False
    return True


# ---------------------------------------------------------------- client


class ApiError(SqlStreamError):
    """The job manager's answer to a request it refused: its message, and the HTTP status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class Client:
    """Talks to this SQLSTREAM_HOME's job manager with its token; ``start=True`` launches one if none runs."""

    def __init__(self, start: bool = False, timeout_s: float = 30) -> None:
        info = self._find()
        if info is None and start:
            info = self._launch(timeout_s)
        if info is None:
            raise SqlStreamError("no job manager is running; start one with `sqlstream jobmanager` "
                                 "or submit a job with `sqlstream run job.sql --detach`")
        self._connect(info)

    @classmethod
    def at(cls, info: dict[str, Any]) -> Client:
        """A client of the job manager that ``info`` (its ``jobmanager.json``) describes."""
        client = cls.__new__(cls)
        client._connect(info)
        return client

    def _connect(self, info: dict[str, Any]) -> None:
        self.port = int(info["port"])
        self.url = str(info.get("url") or f"http://{HOST}:{self.port}")
        self.token = access_token()
        cert = info.get("ssl_cert")
        self.context = ssl.create_default_context(cafile=cert) if cert else None

    @property
    def page_url(self) -> str:
        """The web page's address, with the token that logs the browser in."""
        return f"{self.url}/?token={self.token}"

    @staticmethod
    def _find() -> dict[str, Any] | None:
        info = _read_json(state_file())
        if isinstance(info, dict) and alive(info.get("pid")) and isinstance(info.get("port"), int) and _responds(info):
            return info
        return None

    def _launch(self, timeout_s: float) -> dict[str, Any]:
        private_dir(home())
        access_token()  # created now, so that the job manager and this client read the same one
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH")) if p)
        with open_private(home() / "jobmanager.log", "ab") as log:
            subprocess.Popen([sys.executable, "-m", "sqlstream.frontend.cli", "jobmanager"], env=env, cwd=str(home()),
                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            info = self._find()
            if info is not None:
                return info
            time.sleep(0.1)
        raise SqlStreamError(f"the job manager did not start within {timeout_s:.0f} s; see {home() / 'jobmanager.log'}")

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None, timeout: float = 150) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.token}"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=self.context) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            answer = _json_or_none(e.read())
            message = (answer.get("error") if isinstance(answer, dict) else None) or str(e)
            raise ApiError(message, e.code) from None
        except urllib.error.URLError as e:
            raise SqlStreamError(f"the job manager at {self.url} does not answer: {e.reason}") from None
        except (OSError, ValueError) as e:
            raise SqlStreamError(f"the job manager at {self.url} does not answer: {e}") from None

    def submit(self, sql: str, name: str, cwd: str, restore: str | None = None,
               allow_non_restored_state: bool = False) -> dict[str, Any]:
        return self._call("POST", "/jobs", {"sql": sql, "name": name, "cwd": cwd, "restore": restore,
                                            "allow_non_restored_state": allow_non_restored_state})

    def jobs(self, timeout: float = 150) -> list[dict[str, Any]]:
        return self._call("GET", "/jobs", timeout=timeout)["jobs"]

    def job(self, job_id: str) -> dict[str, Any]:
        return self._call("GET", f"/jobs/{urllib.parse.quote(job_id, safe='')}")

    def stop(self, job_id: str, savepoint_dir: str | None = None) -> str:
        return self._call("POST", f"/jobs/{urllib.parse.quote(job_id, safe='')}/stop",
                          {"savepoint_dir": savepoint_dir})["savepoint"]

    def cancel(self, job_id: str) -> None:
        self._call("POST", f"/jobs/{urllib.parse.quote(job_id, safe='')}/cancel", {})

    @classmethod
    def running(cls) -> Client | None:
        """A client of this SQLSTREAM_HOME's job manager if one runs, else None (nothing is started)."""
        info = cls._find()
        return cls.at(info) if info is not None else None

    def knows(self, job_id: str) -> bool:
        """Whether ``job_id`` is one of the job manager's (detached) jobs."""
        try:
            self.job(job_id)
        except ApiError as e:
            if e.status == 404:
                return False
            raise
        return True

    def shutdown(self, timeout_s: float = 60) -> None:
        """Stops the job manager (which cancels its running jobs) and waits until its process has ended."""
        pid = self._call("POST", "/jobmanager/shutdown", {})["pid"]

        def running() -> bool:  # its last act is to remove its jobmanager.json (a zombie still "exists")
            info = _read_json(state_file())
            return alive(pid) and isinstance(info, dict) and info.get("pid") == pid

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and running():
            time.sleep(0.1)
        if running():
            raise SqlStreamError(f"the job manager (pid {pid}) did not stop within {timeout_s:.0f} s")


def _json_or_none(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


def foreground_summary(entry: dict[str, Any]) -> dict[str, Any]:
    """A job running in the foreground (``sqlstream run``, from the job registry) as ``sqlstream jobs`` lists it,
    with the figures of the status it publishes beside its registry entry."""
    started = entry.get("started") if isinstance(entry.get("started"), int | float) else time.time()
    status = job_status.read_status(jobs_dir() / str(entry["id"]))
    latest = status.latest_checkpoint if status is not None else None
    return {"id": entry["id"], "name": entry.get("script"), "state": RUNNING, "uptime_s": time.time() - started,
            "records_in": status.records_in if status is not None else 0,
            "records_out": status.records_out if status is not None else 0,
            "last_checkpoint": _checkpoint_json(latest) if latest is not None else None}


def format_jobs(jobs: list[dict[str, Any]], now: float | None = None) -> str:
    """The `sqlstream jobs` listing."""
    now = now or time.time()
    header = ("ID", "STATE", "UPTIME", "RECORDS IN", "RECORDS OUT", "LAST CHECKPOINT", "NAME")
    lines = [header]
    for j in jobs:
        up = int(j.get("uptime_s") or 0)
        cp = j.get("last_checkpoint")
        last = f"#{cp['id']} ({cp['duration_ms']:.0f} ms, {max(now - cp['completed_at'], 0):.0f} s ago)" if cp else "-"
        lines.append((_cell(j.get("id")), _cell(j.get("state")), f"{up // 3600}:{up // 60 % 60:02d}:{up % 60:02d}",
                      _cell(j.get("records_in")), _cell(j.get("records_out")), last, _cell(j.get("name"))))
    widths = [max(len(r[i]) for r in lines) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in lines)


def _cell(value: Any) -> str:
    """One line of printable text, whatever a job's name holds (newlines, escapes, a JSON object)."""
    text = value if isinstance(value, str) else json.dumps(value)
    return "".join(c if c.isprintable() else "?" for c in text)
