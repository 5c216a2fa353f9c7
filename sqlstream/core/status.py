"""A running job's status as plain data: per-operator counters, watermarks, queue fill, checkpoints.

The executor builds a ``JobStatus`` from counters its subtasks keep (keyed by
physical node id); a detached job process publishes it as ``status.json`` in
its job folder, which the job manager, ``sqlstream jobs`` and the REST API
read.  It is JSON (never pickle): a file another process wrote is data, not
code, and it stays readable by anything that speaks JSON.  Timestamps are
epoch milliseconds, as Flink's REST API gives them.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sqlstream.core.home import open_private

# job states, Flink's names
CREATED, RUNNING, RESTARTING, FINISHED, FAILED, CANCELED = (
    "CREATED", "RUNNING", "RESTARTING", "FINISHED", "FAILED", "CANCELED")
TERMINAL_STATES = frozenset({FINISHED, FAILED, CANCELED})

# checkpoint states: a pending checkpoint is IN_PROGRESS; one subsumed by a newer completed one, or
# pending when the job stopped, is ABORTED; one whose snapshot failed, or pending when the job failed, FAILED
IN_PROGRESS, COMPLETED, ABORTED = "IN_PROGRESS", "COMPLETED", "ABORTED"

STATUS_FILE = "status.json"


@dataclass(frozen=True)
class SubtaskStatus:
    """One parallel instance of an operator.

    ``watermark`` is the operator's event time (None until the first watermark);
    ``input_queue_fill`` (0..1) is how full the subtask's network input queue is, for the
    operator that heads a chain fed over the network (None elsewhere): a full queue means
    the operator cannot keep up.  ``backpressured_ms`` is the total time the subtask spent
    waiting for room in a downstream queue, counted on the operator that sends over the network.
    """

    index: int
    records_in: int
    records_out: int
    late_records_dropped: int = 0
    watermark: int | None = None
    input_queue_fill: float | None = None
    backpressured_ms: float = 0.0
    busy_ms: float = 0.0

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SubtaskStatus:
        return cls(**d)


@dataclass(frozen=True)
class InputEdge:
    """An input of an operator: the upstream node and how records are exchanged (forward, hash, ...)."""

    upstream: int
    mode: str


@dataclass(frozen=True)
class OperatorStatus:
    """One physical node: ``kind`` is the operator ("WindowAggregate"), ``name`` what it computes."""

    node_id: int
    kind: str
    name: str
    parallelism: int
    inputs: tuple[InputEdge, ...]
    subtasks: tuple[SubtaskStatus, ...]

    @property
    def label(self) -> str:
        return f"#{self.node_id} {self.kind}"

    @property
    def records_in(self) -> int:
        return sum(s.records_in for s in self.subtasks)

    @property
    def records_out(self) -> int:
        return sum(s.records_out for s in self.subtasks)

    @property
    def late_records_dropped(self) -> int:
        return sum(s.late_records_dropped for s in self.subtasks)

    @property
    def watermark(self) -> int | None:
        """The operator's low watermark: the minimum over its subtasks, None while any has none."""
        marks = [s.watermark for s in self.subtasks]
        return None if not marks or None in marks else min(m for m in marks if m is not None)

    @property
    def input_queue_fill(self) -> float | None:
        """The fullest subtask's input queue (the one holding the operator back)."""
        fills = [s.input_queue_fill for s in self.subtasks if s.input_queue_fill is not None]
        return max(fills) if fills else None

    @property
    def backpressured_ms(self) -> float:
        return sum(s.backpressured_ms for s in self.subtasks)

    @property
    def busy_ms(self) -> float:
        return sum(s.busy_ms for s in self.subtasks)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(label=self.label, records_in=self.records_in, records_out=self.records_out,
                   late_records_dropped=self.late_records_dropped, watermark=self.watermark,
                   input_queue_fill=self.input_queue_fill, backpressured_ms=self.backpressured_ms,
                   busy_ms=self.busy_ms)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OperatorStatus:
        return cls(d["node_id"], d["kind"], d["name"], d["parallelism"],
                   tuple(InputEdge(**e) for e in d["inputs"]),
                   tuple(SubtaskStatus.from_dict(s) for s in d["subtasks"]))


@dataclass(frozen=True)
class CheckpointStatus:
    """One checkpoint or savepoint; ``duration_ms`` and ``size_bytes`` are known once it completed."""

    id: int
    trigger_time_ms: int
    state: str
    savepoint: bool = False
    duration_ms: float | None = None
    size_bytes: int | None = None
    failure: str | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CheckpointStatus:
        return cls(**d)


@dataclass(frozen=True)
class JobStatus:
    """A job at one moment (``timestamp_ms``): its operators in plan order and its recent checkpoints.

    ``checkpoints`` is a bounded history, oldest first; ``completed_checkpoints`` and
    ``failed_checkpoints`` count all of them.  ``plan`` is the physical plan as EXPLAIN prints it.
    """

    job_id: str
    state: str
    start_time_ms: int
    timestamp_ms: int
    operators: tuple[OperatorStatus, ...] = ()
    checkpoints: tuple[CheckpointStatus, ...] = ()
    completed_checkpoints: int = 0
    failed_checkpoints: int = 0
    restarts: int = 0
    plan: str = ""
    error: str | None = None

    @property
    def records_in(self) -> int:
        """Records the sources read."""
        return sum(o.records_out for o in self.operators if o.kind == "Source")

    @property
    def records_out(self) -> int:
        """Records the sinks wrote."""
        return sum(o.records_in for o in self.operators if o.kind == "Sink")

    @property
    def latest_checkpoint(self) -> CheckpointStatus | None:
        done = [c for c in self.checkpoints if c.state == COMPLETED]
        return done[-1] if done else None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["operators"] = [o.to_dict() for o in self.operators]
        out.update(records_in=self.records_in, records_out=self.records_out)
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> JobStatus:
        return cls(
            d["job_id"], d["state"], d["start_time_ms"], d["timestamp_ms"],
            tuple(OperatorStatus.from_dict(o) for o in d.get("operators", ())),
            tuple(CheckpointStatus.from_dict(c) for c in d.get("checkpoints", ())),
            d.get("completed_checkpoints", 0), d.get("failed_checkpoints", 0), d.get("restarts", 0),
            d.get("plan", ""), d.get("error"),
        )

    @classmethod
    def from_json(cls, text: str) -> JobStatus:
        return cls.from_dict(json.loads(text))


def write_status(directory: Path, status: JobStatus) -> None:
    """Publish ``status.json`` atomically (temp file, then rename): a reader never sees half of it."""
    path = directory / STATUS_FILE
    tmp = directory / f".{STATUS_FILE}.{os.getpid()}.{threading.get_ident()}.tmp"
    with open_private(tmp, "w") as f:  # beside the job's SQL and log: the user's alone
        f.write(status.to_json())
    os.replace(tmp, path)


def read_status(directory: Path) -> JobStatus | None:
    """The status a job published in ``directory``; None before it published one."""
    try:
        return JobStatus.from_json((directory / STATUS_FILE).read_text())
    except FileNotFoundError:
        return None
