"""Local job registry: running `sqlstream run` processes, found by id, asked for savepoints or to cancel.

A job writes ``<home>/jobs/<id>.json`` while it runs.  The id is the one the
job manager gave a detached job (``sqlstream run --job-id``), so its folder,
its savepoints and every command name the job the same way; a job run in the
foreground draws its own.  ``sqlstream savepoint <id>`` drops a request file
and sends SIGUSR1; the job takes the savepoint (and stops, if asked) and
writes the result next to the request.  A cancel is a file too
(``<id>.cancel``), which the job polls: it does not depend on how the job's
parent left SIGINT and SIGTERM (a job started from a shell that ignores them,
``nohup`` or a non-interactive ``&``, still cancels).
``SQLSTREAM_HOME`` (default ``~/.sqlstream``) says where the registry lives.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlstream.core.errors import SqlStreamError
from sqlstream.core.home import home, private_dir, write_private
from sqlstream.runtime.fs import is_remote

CANCEL_POLL_S = 0.1


def valid_id(job_id: str) -> bool:
    """Ids name files in the registry: letters and digits only, so that none reaches outside it."""
    return 0 < len(job_id) <= 64 and job_id.isascii() and job_id.isalnum()


def jobs_dir() -> Path:
    return private_dir(home() / "jobs")


class RegisteredJob:
    """The running process's entry in the registry; removed when the job ends."""

    def __init__(self, script: str, job_id: str | None = None) -> None:
        if job_id is not None and not valid_id(job_id):
            raise SqlStreamError(f"job id '{job_id}' is not 1 to 64 letters and digits")
        self.id = job_id or uuid.uuid4().hex[:12]
        self.file = jobs_dir() / f"{self.id}.json"
        self.cancel_file = jobs_dir() / f"{self.id}.cancel"  # see request_cancel
        write_private(self.file, json.dumps({"id": self.id, "pid": os.getpid(), "script": script, "started": time.time()}))
        self._closed = threading.Event()
        self._previous_handlers: dict[int, Any] = {}

    def install_cancel_handlers(self, poll_s: float = CANCEL_POLL_S) -> None:
        """Cancel on Ctrl-C, SIGTERM or a cancel file, whatever dispositions the parent left.

        Python leaves SIGINT ignored if its parent ignored it (and SIGTERM kills at once by
        default), so both are set here: either raises KeyboardInterrupt in the main thread,
        which is how `sqlstream run` cancels its job; a second SIGTERM kills as usual.  A
        thread polls the cancel file `request_cancel` writes and interrupts the main thread
        the same way (a signal aimed at it, which also wakes a blocking wait).
        """
        main = threading.main_thread().ident
        assert main is not None

        def on_term(signum: int, frame: Any) -> None:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            raise KeyboardInterrupt

        self._previous_handlers = {sig: signal.signal(sig, handler) for sig, handler in
                                   ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, on_term))}

        def watch() -> None:
            while not self._closed.wait(poll_s):
                if self.cancel_file.exists():
                    self.cancel_file.unlink(missing_ok=True)
                    signal.pthread_kill(main, signal.SIGINT)

        threading.Thread(target=watch, name="cancel-watch", daemon=True).start()

    def install_savepoint_handler(self, take_savepoint: Callable[[str | None, bool], Path | str]) -> None:
        def handler(signum: int, frame: Any) -> None:
            request = jobs_dir() / f"{self.id}.savepoint-request"
            if not request.exists():
                return
            spec = json.loads(request.read_text())
            request.unlink()

            def work() -> None:
                try:
                    path = take_savepoint(spec.get("dir"), bool(spec.get("stop")))
                    answer = {"path": str(path)}
                except Exception as e:  # noqa: BLE001 - reported to the requesting client
                    answer = {"error": str(e)}
                # whole or not at all: the requester polls for the file
                tmp = jobs_dir() / f".{self.id}.savepoint-result.tmp"
                write_private(tmp, json.dumps(answer))
                os.replace(tmp, jobs_dir() / f"{self.id}.savepoint-result")

            threading.Thread(target=work, daemon=True).start()

        signal.signal(signal.SIGUSR1, handler)

    def close(self) -> None:
        self._closed.set()
        for sig, handler in self._previous_handlers.items():  # as they were (`sqlstream run` called in-process)
            signal.signal(sig, handler)
        self.file.unlink(missing_ok=True)
        self.cancel_file.unlink(missing_ok=True)


def list_jobs() -> list[dict[str, Any]]:
    out = []
    for f in sorted(jobs_dir().glob("*.json")):
        info = _entry(f)
        if info is None or not alive(info["pid"]):
            f.unlink(missing_ok=True)  # the process is gone (or never finished writing a readable entry)
            _remove_status_folder(f.with_suffix(""))
            continue
        out.append(info)
    return out


def _remove_status_folder(folder: Path) -> None:
    """The status folder a killed foreground job left; a job manager's job folder (it holds more) stays."""
    (folder / "status.json").unlink(missing_ok=True)
    try:
        folder.rmdir()
    except OSError:
        pass  # not there, or not only a status


def _entry(path: Path) -> dict[str, Any] | None:
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) and isinstance(info.get("pid"), int) and "id" in info else None


def alive(pid: int | None) -> bool:
    """Whether process ``pid`` exists (a process of another user counts)."""
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _absolute(directory: str | Path | None) -> str | None:
    """A local directory made absolute (the job runs elsewhere); a URI or None as it is."""
    if directory is None or is_remote(directory):
        return None if directory is None else str(directory)
    return str(Path(directory).resolve())


def running_entry(job_id: str) -> dict[str, Any] | None:
    """The registry entry of job ``job_id`` if its process runs (a stale entry is removed)."""
    entry = jobs_dir() / f"{job_id}.json" if valid_id(job_id) else None
    info = _entry(entry) if entry is not None else None
    if info is None or not alive(info["pid"]):
        if entry is not None:
            entry.unlink(missing_ok=True)
        return None
    return info


def _running(job_id: str) -> dict[str, Any]:
    info = running_entry(job_id)
    if info is None:
        known = ", ".join(j["id"] for j in list_jobs()) or "none"
        raise SqlStreamError(f"no running job '{job_id}' (running jobs: {known})")
    return info


def request_cancel(job_id: str, started: bool = True) -> None:
    """Asks job ``job_id`` to cancel: it polls for the request, from its start on.

    A job that is not running is a clear error, unless ``started`` is False: the job
    manager's child may not have registered yet, and finds the request when it does.
    """
    if started:
        _running(job_id)
    elif not valid_id(job_id):
        raise SqlStreamError(f"job id '{job_id}' is not 1 to 64 letters and digits")
    write_private(jobs_dir() / f"{job_id}.cancel", "")


def request_savepoint(job_id: str, directory: str | Path | None, stop: bool, timeout_s: float = 120) -> str:
    """Asks the running job ``job_id`` for a savepoint under ``directory`` (a local path, a store's
    URI, or None: the job's state.savepoints.dir); a job that is gone is a clear error."""
    pid = _running(job_id)["pid"]
    result = jobs_dir() / f"{job_id}.savepoint-result"
    result.unlink(missing_ok=True)
    write_private(jobs_dir() / f"{job_id}.savepoint-request", json.dumps({"dir": _absolute(directory), "stop": stop}))
    try:
        os.kill(pid, signal.SIGUSR1)
    except ProcessLookupError:
        raise SqlStreamError(f"job '{job_id}' ended before it could take a savepoint") from None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not result.exists() and not alive(pid) and not result.exists():  # (it may answer, then exit)
            raise SqlStreamError(f"job '{job_id}' ended before it completed a savepoint")
        if result.exists():
            answer = json.loads(result.read_text())
            result.unlink(missing_ok=True)
            if "error" in answer:
                raise SqlStreamError(f"savepoint failed: {answer['error']}")
            return str(answer["path"])
        time.sleep(0.05)
    raise SqlStreamError(f"job '{job_id}' did not complete a savepoint within {timeout_s:.0f} s")
