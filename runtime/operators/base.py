"""The operator contract: the runtime calls these, operators never see threads or channels."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runtime.elements import Chunk, Watermark

Output = list[Chunk | Watermark]


@dataclass
class Metrics:
    records_in: int = 0
    records_out: int = 0
    late_records_dropped: int = 0
    extra: dict[str, int] = field(default_factory=dict)


@dataclass
class OperatorContext:
    name: str
    subtask_index: int = 0
    parallelism: int = 1
    metrics: Metrics = field(default_factory=Metrics)


class Operator:
    """A stream operator.  All methods return the elements to emit downstream, in order."""

    name = "Operator"
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

    def end_input(self) -> Output:
        """All inputs ended (after the final watermark); flush what is left."""
        return []

    def snapshot_state(self) -> Any:
        return None

    def restore_state(self, state: Any) -> None:  # noqa: B027 - stateless default
        """Reinstate the state returned by snapshot_state."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources."""
