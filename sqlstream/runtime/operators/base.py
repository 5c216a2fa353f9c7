"""The operator contract: the runtime calls these, operators never see threads or channels."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from sqlstream.runtime.clock import SYSTEM_CLOCK, Clock
from sqlstream.runtime.elements import Chunk, Watermark
from sqlstream.runtime.hashing import DEFAULT_MAX_PARALLELISM
from sqlstream.runtime.state.base import StateBackend

Output = list[Chunk | Watermark]


COMMIT_HISTORY = 1000  # commits a sink subtask remembers (about a quarter of an hour at one per second)


@dataclass(frozen=True)
class CommitTiming:
    """One commit of a sink's pre-committed output, for the commit latency after a checkpoint
    completes (its completion time is in the checkpoint's stats; the difference is the latency)."""

    checkpoint_id: int  # the completed checkpoint whose notification committed it
    end_ms: float  # epoch ms when the writer's commit returned
    duration_ms: float  # time spent in the writer's commit itself


@dataclass
class Metrics:
    records_in: int = 0
    records_out: int = 0
    late_records_dropped: int = 0
    extra: dict[str, int] = field(default_factory=dict)
    # a sink's recent commits, oldest first (bounded: a long job commits every checkpoint)
    commits: deque[CommitTiming] = field(default_factory=lambda: deque(maxlen=COMMIT_HISTORY))


@dataclass
class OperatorContext:
    name: str
    subtask_index: int = 0
    parallelism: int = 1
    metrics: Metrics = field(default_factory=Metrics)
    max_parallelism: int = DEFAULT_MAX_PARALLELISM
    # keyed operators keep their state here (hashmap or rocksdb); None for stateless ones
    state: StateBackend | None = None
    config: dict[str, str] = field(default_factory=dict)
    # processing time (PROCTIME() stamps, idle timeouts); tests pass a ManualClock
    clock: Clock = SYSTEM_CLOCK

    @property
    def keyed_state(self) -> StateBackend:
        if self.state is None:
            raise RuntimeError(f"{self.name} keeps keyed state but was given no state backend")
        return self.state


class Operator:
    """A stream operator.  All methods return the elements to emit downstream, in order."""

    name = "Operator"
    # True for operators that keep keyed state (the runtime gives them a state backend)
    keyed = False
    # True for operators that create event time (watermark assigners): the task then
    # forwards the watermarks they return instead of the ones arriving on their input.
    generates_watermarks = False

    def open(self, ctx: OperatorContext) -> None:
        self.ctx = ctx

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        raise NotImplementedError

    def on_watermark(self, timestamp: int) -> Output:
        """Event time reached ``timestamp`` on all inputs: fire what is due."""
        return []

    def on_processing_time(self, now_ms: int) -> Output:
        """The wall clock reached ``now_ms`` while no input arrived: a processing-time
        watermark assigner advances, so windows on ``PROCTIME()`` fire on an idle stream."""
        return []

    def output_watermark(self, timestamp: int) -> int:
        """The watermark to forward after on_watermark(timestamp): operators that emit rows
        older than their input watermark (interval joins) hold it back."""
        return timestamp

    def end_input(self) -> Output:
        """All inputs ended (after the final watermark); flush what is left."""
        return []

    def on_splits(self, assigned: tuple[str, ...], finished: frozenset[str]) -> Output:
        """The source splits feeding this chain: all assigned ones, and those read to their end.
        Only watermark generation needs them; called when the source opens and when a split ends."""
        return []

    def snapshot_state(self, checkpoint_id: int) -> Any:
        """Operator (non-keyed) state at a barrier; keyed state is snapshotted by the backend."""
        return None

    def restore_state(self, state: Any) -> None:  # noqa: B027 - stateless default
        """Reinstate the state returned by snapshot_state (keyed state is already restored)."""

    def notify_checkpoint_complete(self, checkpoint_id: int, final: bool = False) -> None:  # noqa: B027
        """Checkpoint ``checkpoint_id`` is complete everywhere (sinks commit here); ``final``: the job ended."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources."""
