"""A job manager started for a test (`sqlstream serve` in its own SQLSTREAM_HOME) and a REST client for it
that sends the token, as the CLI does; requests can override any header to play a hostile client."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


class Api:
    def __init__(self, home: Path, url: str, startup: str = "") -> None:
        self.home = home
        self.url = url
        self.startup = startup  # what the job manager printed before it listened (warnings)

    @property
    def token(self) -> str:
        return (self.home / "jobmanager.token").read_text().strip()

    @property
    def page_url(self) -> str:
        return f"{self.url}/?token={self.token}"

    def call(self, path: str, method: str = "GET", body: Any = None, headers: dict[str, str] | None = None,
             timeout: float = 60) -> tuple[int, Any]:
        """(status, JSON answer); ``headers`` replace the defaults (token, JSON content type), None drops one."""
        data = json.dumps(body).encode() if body is not None else None
        sent = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json", **(headers or {})}
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={k: v for k, v in sent.items() if v is not None})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())


def ignore_sigint_and_sigterm() -> None:
    """In a child before exec: what a shell that ignores SIGINT and SIGTERM (nohup, `trap '' INT TERM`) passes on."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def start_jobmanager(home: Path, *options: str, ignore_signals: bool = False) -> tuple[subprocess.Popen, Api]:
    """`sqlstream serve --port 0 <options>` in ``home``; returns once it listens.

    ``ignore_signals``: started with SIGINT and SIGTERM ignored, which its jobs inherit."""
    env = {**os.environ, "SQLSTREAM_HOME": str(home), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "sqlstream.frontend.cli", "serve", "--port", "0", *options],
                            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=ignore_sigint_and_sigterm if ignore_signals else None)
    startup = ""
    line = proc.stdout.readline()  # type: ignore[union-attr]
    while line.startswith("[WARN]"):
        startup += line
        line = proc.stdout.readline()  # type: ignore[union-attr]
    found = re.search(r"(https?://127\.0\.0\.1:\d+)/", line)
    if found is None:
        proc.kill()
        raise AssertionError(f"the job manager did not start: {line}{proc.stdout.read()}")  # type: ignore[union-attr]
    return proc, Api(home, found.group(1), startup)


def stop_jobmanager(home: Path) -> None:
    """Ends the job manager this test started (found by the pid it recorded)."""
    state = home / "jobmanager.json"
    if not state.exists():
        return
    pid = json.loads(state.read_text())["pid"]
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            # a job manager this test started is its child: once it exits it stays a zombie (which
            # signal 0 still reaches) until reaped, so reap it here
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:
            pass  # not our child: signal 0 tells whether it is still there
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
