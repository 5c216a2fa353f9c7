"""Barrier alignment on a two-input subtask: the channel that delivered barrier n waits.

Channel 0 (fast) delivers its barrier first; its later rows must be held
back, while the slow channel 1 keeps flowing, until barrier n arrives on
channel 1.  Then the snapshot holds exactly the pre-barrier rows of both
inputs, the barrier goes downstream, and the held rows follow.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa

from sqlstream.runtime.checkpoint.coordinator import CheckpointCoordinator
from sqlstream.runtime.elements import Barrier, Chunk, EndOfInput
from sqlstream.runtime.graph import Chain
from sqlstream.runtime.operators.base import Operator, OperatorContext, Output
from sqlstream.runtime.state.codec import decode
from sqlstream.runtime.subtask import OutputGate, Subtask
from sqlstream.runtime.task import Task


class Recorder(Operator):
    """Remembers the rows it saw; its snapshot is the list so far."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int]] = []

    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        self.seen += [(input_index, v) for v in chunk.batch.column(0).to_pylist()]
        return [chunk]

    def snapshot_state(self, checkpoint_id: int) -> Any:
        return list(self.seen)


def batch(*values: int) -> Chunk:
    return Chunk(pa.record_batch([pa.array(values, pa.int64())], names=["v"]))


class Node:
    def __init__(self, uid: str) -> None:
        self.id, self.name, self.detail, self.sink = 0, "Recorder", uid, None


def test_aligned_checkpoint_holds_back_the_channel_that_delivered_the_barrier(tmp_path: Path) -> None:
    acks: dict[int, Any] = {}
    chain = Chain("union", [Node("union")], ["union"], 1)  # type: ignore[list-item]
    coordinator = CheckpointCoordinator(None, None, [("union", 0)], lambda n, s: None, lambda n, f: None, {})
    coordinator.acknowledge = lambda n, key, snap: acks.__setitem__(n, snap)  # type: ignore[method-assign]
    coordinator.directory_for = lambda n, uid, i: tmp_path  # type: ignore[method-assign]
    recorder = Recorder()
    stop = threading.Event()
    pool = ThreadPoolExecutor(1)
    task = Task(recorder, 2, OperatorContext("union"))
    sub = Subtask(chain, 0, [task], None, [0, 1], coordinator, pool, lambda e: None, stop, None, 100)
    downstream: queue.Queue = queue.Queue()
    sub.outputs.append(OutputGate("forward", (), [downstream], 0, 0, 128, stop))
    for item in [
        (0, batch(1)), (1, batch(100)),
        (0, Barrier(1)),            # fast input reaches the barrier
        (0, batch(2)), (0, batch(3)),  # after its barrier: must wait
        (1, batch(101)),            # slow input still before its barrier: flows
        (1, Barrier(1)),            # alignment complete -> snapshot
        (1, batch(102)),
        (0, EndOfInput()), (1, EndOfInput()),
    ]:
        sub.inbound.put(item)
    sub.start()
    sub.join(timeout=10)
    pool.shutdown(wait=True)
    assert not sub.is_alive()
    # the snapshot contains everything before the barrier on both inputs, nothing after
    assert sorted(decode(acks[1]["state"].read_bytes())["operators"]["union"]) == [(0, 1), (1, 100), (1, 101)]
    out = []
    while not downstream.empty():
        _, e = downstream.get()
        out.append("B" if isinstance(e, Barrier) else e.batch.column(0).to_pylist()[0] if isinstance(e, Chunk) else None)
    out = [o for o in out if o is not None]
    assert out.index("B") == 3  # 1, 100, 101, then the barrier
    assert out[4:] == [2, 3, 102]  # held rows of the fast input are replayed first
    assert recorder.seen[-3:] == [(0, 2), (0, 3), (1, 102)]
