"""In a detached job's process: its status published as ``status.json`` for the job manager.

``sqlstream run --status-dir DIR`` (how the job manager starts a job) writes
the status every half second, atomically, into the job's folder; the job
manager reads it from there (``sqlstream.core.status.read_status``) and never
looks inside the process.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from sqlstream.core.status import CREATED, RUNNING, JobStatus, write_status

STATUS_INTERVAL_S = 0.5


class StatusPublisher:
    """Publishes the job's status as ``status.json`` periodically (in the ``sqlstream run`` child).

    The status is the current executor's (``JobExecutor.status()``), presented as the job
    process's: its id is the process's id in the job registry (which savepoint requests go
    to), its start time the process's, and its state the process's (RUNNING between the
    statements of a script, then how the script ended).
    """

    def __init__(self, session: Any, directory: Path, job_id: str, interval_s: float = STATUS_INTERVAL_S) -> None:
        self.session = session
        self.directory = directory
        self.job_id = job_id
        self.interval_s = interval_s
        self.start_time_ms = time.time_ns() // 1_000_000
        self.stop_event = threading.Event()
        self.executor: Any = None  # the newest executor: its figures stay until the next statement's
        self.thread = threading.Thread(target=self._loop, name="status-publisher", daemon=True)

    def start(self) -> None:
        self.publish()
        self.thread.start()

    def _loop(self) -> None:
        while not self.stop_event.wait(self.interval_s):
            self.publish()

    def status(self, final_state: str | None = None) -> JobStatus:
        current = self.session.current_executor
        self.executor = current or self.executor
        if self.executor is None:
            return JobStatus(self.job_id, final_state or CREATED, self.start_time_ms, time.time_ns() // 1_000_000)
        status = self.executor.status()
        state = final_state or (status.state if current is not None else RUNNING)
        return replace(status, job_id=self.job_id, state=state, start_time_ms=self.start_time_ms)

    def publish(self, final_state: str | None = None) -> None:
        write_status(self.directory, self.status(final_state))

    def close(self, final_state: str) -> None:
        self.stop_event.set()
        self.thread.join(timeout=5)
        self.publish(final_state)
