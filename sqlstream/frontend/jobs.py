"""Local job registry: running `sqlstream run` processes, found by id, asked for savepoints.

A job writes ``<home>/jobs/<id>.json`` while it runs.  ``sqlstream
savepoint <id>`` drops a request file and sends SIGUSR1; the job takes the
savepoint (and stops, if asked) and writes the result next to the request.
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
from sqlstream.core.home import home


def jobs_dir() -> Path:
    d = home() / "jobs"
    d.mkdir(parents=True, exist_ok=True)
    return d


class RegisteredJob:
    """The running process's entry in the registry; removed when the job ends."""

    def __init__(self, script: str) -> None:
        self.id = uuid.uuid4().hex[:12]
        self.file = jobs_dir() / f"{self.id}.json"
        self.file.write_text(json.dumps({"id": self.id, "pid": os.getpid(), "script": script, "started": time.time()}))

    def install_savepoint_handler(self, take_savepoint: Callable[[Path, bool], Path]) -> None:
        def handler(signum: int, frame: Any) -> None:
            request = jobs_dir() / f"{self.id}.savepoint-request"
            if not request.exists():
                return
            spec = json.loads(request.read_text())
            request.unlink()

            def work() -> None:
                result = jobs_dir() / f"{self.id}.savepoint-result"
                try:
                    path = take_savepoint(Path(spec["dir"]), bool(spec.get("stop")))
                    result.write_text(json.dumps({"path": str(path)}))
                except Exception as e:  # noqa: BLE001 - reported to the requesting client
                    result.write_text(json.dumps({"error": str(e)}))

            threading.Thread(target=work, daemon=True).start()

        signal.signal(signal.SIGUSR1, handler)

    def close(self) -> None:
        self.file.unlink(missing_ok=True)


def list_jobs() -> list[dict[str, Any]]:
    out = []
    for f in sorted(jobs_dir().glob("*.json")):
        info = json.loads(f.read_text())
        try:
            os.kill(info["pid"], 0)
        except OSError:
            f.unlink(missing_ok=True)  # the process is gone
            continue
        out.append(info)
    return out


def request_savepoint(job_id: str, directory: Path, stop: bool, timeout_s: float = 120) -> Path:
    entry = jobs_dir() / f"{job_id}.json"
    if not entry.exists():
        known = ", ".join(j["id"] for j in list_jobs()) or "none"
        raise SqlStreamError(f"no running job '{job_id}' (running jobs: {known})")
    info = json.loads(entry.read_text())
    result = jobs_dir() / f"{job_id}.savepoint-result"
    result.unlink(missing_ok=True)
    (jobs_dir() / f"{job_id}.savepoint-request").write_text(
        json.dumps({"dir": str(directory.resolve()), "stop": stop})
    )
    os.kill(info["pid"], signal.SIGUSR1)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if result.exists():
            answer = json.loads(result.read_text())
            result.unlink(missing_ok=True)
            if "error" in answer:
                raise SqlStreamError(f"savepoint failed: {answer['error']}")
            return Path(answer["path"])
        time.sleep(0.05)
    raise SqlStreamError(f"job '{job_id}' did not complete a savepoint within {timeout_s:.0f} s")
