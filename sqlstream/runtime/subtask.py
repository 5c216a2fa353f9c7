"""One parallel instance of an operator chain, running in its own thread.

A subtask reads (channel, element) pairs from one bounded inbound queue, so
a slow consumer blocks its producers (backpressure) instead of growing
memory.  Checkpoint barriers are aligned: once barrier n arrived on a
channel, that channel's later elements are held back until barrier n has
arrived on every channel that has not ended; then the chain snapshots, the
barrier goes downstream, and the held-back elements are replayed.  The
synchronous part of a snapshot only freezes state; files are written by a
background pool and the checkpoint is acknowledged when they are.
"""

from __future__ import annotations

import errno
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa

from sqlstream.core.errors import JobError
from sqlstream.core.status import SubtaskStatus
from sqlstream.runtime.checkpoint.coordinator import CheckpointCoordinator
from sqlstream.runtime.checkpoint.storage import file_digest, files_of, write_subtask_state
from sqlstream.runtime.clock import SYSTEM_CLOCK, Clock
from sqlstream.runtime.connectors.base import SourceReader
from sqlstream.runtime.elements import MIN_WATERMARK, Barrier, Chunk, Element, EndOfInput
from sqlstream.runtime.graph import Chain
from sqlstream.runtime.hashing import key_groups, subtask_for_key_groups
from sqlstream.runtime.operators.base import Metrics
from sqlstream.runtime.task import Task

POLL_S = 0.05
IDLE_SLEEP_S = 0.002
# how often an idle subtask tells its operators the wall clock (Flink's auto-watermark interval)
PROCESSING_TIME_TICK_S = 0.2


def os_failure(error: BaseException, doing: str) -> BaseException:
    """An OSError as a job error that says what was being done and why, a full disk named as such
    (not ``OSError: [Errno 28]``); it stays a JobError, so the restart strategy still applies."""
    if not isinstance(error, OSError):
        return error
    reason = "no space left on device (the disk is full)" if error.errno == errno.ENOSPC else (error.strerror or str(error))
    where = f" ('{error.filename}')" if error.filename else ""
    failure = JobError(f"{doing}: {reason}{where}")
    failure.__cause__ = error
    return failure


class Cancelled(Exception):
    """The job is stopping; unwinds a subtask thread blocked on a full queue."""


@dataclass
class OutputGate:
    """Sends a chain's output to one consumer chain, partitioned by the edge's mode."""

    mode: str
    keys: tuple[int, ...]
    targets: list[queue.Queue]
    channel: int  # this subtask's channel index at every target
    subtask_index: int
    max_parallelism: int
    stop: threading.Event
    clock: Clock = SYSTEM_CLOCK  # measures the time blocked (injected by tests)
    _next: int = field(default=0)
    # time blocked on a full channel, accumulated here on the data path: the status reports the
    # total, and its change between two statuses is the share of time backpressured
    backpressured_s: float = field(default=0.0)

    def _put(self, target: int, element: Element) -> None:
        q = self.targets[target]
        try:
            q.put_nowait((self.channel, element))
            return
        except queue.Full:
            pass
        waiting_since = self.clock.monotonic()
        try:
            while True:
                try:
                    q.put((self.channel, element), timeout=POLL_S)
                    return
                except queue.Full:
                    if self.stop.is_set():
                        raise Cancelled from None
        finally:
            self.backpressured_s += self.clock.monotonic() - waiting_since

    def emit(self, element: Element) -> None:
        n = len(self.targets)
        if not isinstance(element, Chunk):
            if self.mode == "forward":
                self._put(self.subtask_index, element)
            else:
                for t in range(n):
                    self._put(t, element)
            return
        if self.mode == "forward":
            self._put(self.subtask_index, element)
        elif self.mode == "global" or n == 1:
            self._put(0, element)
        elif self.mode == "rebalance":
            self._put(self._next % n, element)
            self._next += 1
        else:
            self._emit_hashed(element, n)

    def _emit_hashed(self, chunk: Chunk, n: int) -> None:
        batch = chunk.batch
        groups = key_groups([batch.column(k) for k in self.keys], self.max_parallelism)
        targets = subtask_for_key_groups(groups, n, self.max_parallelism)
        order = np.argsort(targets, kind="stable")
        sorted_targets = targets[order]
        bounds = np.searchsorted(sorted_targets, np.arange(n + 1))
        taken = batch.take(pa.array(order))
        kinds = None if chunk.kinds is None else chunk.kinds.take(pa.array(order))
        for t in range(n):
            lo, hi = int(bounds[t]), int(bounds[t + 1])
            if hi > lo:
                part_kinds = None if kinds is None else kinds.slice(lo, hi - lo)
                self._put(t, Chunk(taken.slice(lo, hi - lo), part_kinds, chunk.split))


class Subtask(threading.Thread):
    def __init__(
        self,
        chain: Chain,
        index: int,
        tasks: list[Task],
        reader: SourceReader | None,
        channel_inputs: list[int],
        coordinator: CheckpointCoordinator,
        snapshot_pool: Executor,
        on_failure: Callable[[BaseException], None],
        stop: threading.Event,
        restored: dict[str, Any] | None,
        inbound_capacity: int,
        source_metrics: Metrics | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        super().__init__(name=f"{chain.name} ({index + 1}/{chain.parallelism})", daemon=True)
        self.chain = chain
        self.index = index
        self.tasks = tasks
        self.reader = reader
        self.channel_inputs = channel_inputs  # channel -> logical input of the head operator
        self.inbound: queue.Queue = queue.Queue(maxsize=max(inbound_capacity, 1))
        self.control: queue.SimpleQueue = queue.SimpleQueue()
        self.outputs: list[OutputGate] = []
        self.coordinator = coordinator
        self.snapshot_pool = snapshot_pool
        self.on_failure = on_failure
        self.stop = stop
        self.restored = restored
        self.source_metrics = source_metrics or Metrics()
        self.finished = threading.Event()
        # set once the restored state is in place and before the first element: a restore's duration shows
        self.ready = threading.Event()
        self.is_sink = chain.nodes[-1].sink is not None
        # barrier alignment
        self.pending_barrier: Barrier | None = None
        self.blocked: set[int] = set()
        self.held: dict[int, deque] = {}
        self.replay: deque = deque()
        self.ended: set[int] = set()
        self.final_commit = threading.Event()
        self.notified = 0  # the newest checkpoint whose completion this subtask's operators have seen
        self.clock = clock  # processing time handed to the operators while idle
        self.last_tick = clock.monotonic()
        self.source_busy_s = 0.0  # time the reader spent producing batches (idle polls not counted)

    @property
    def key(self) -> tuple[str, int]:
        return (self.chain.uid, self.index)

    def status(self) -> dict[int, SubtaskStatus]:
        """This subtask's figures per physical node id of its chain.

        Called from other threads while the subtask runs: each figure is one attribute read,
        so a status is a consistent-enough sample without a lock on the data path.
        """
        nodes = self.chain.nodes
        first = 1 if self.reader is not None else 0
        out: dict[int, SubtaskStatus] = {}
        # downstream first: no operator is seen to have received more than its predecessor sent
        for pos in range(len(self.tasks) - 1, -1, -1):
            task = self.tasks[pos]
            m = task.ctx.metrics
            fed_by_network = pos == 0 and self.reader is None
            out[nodes[first + pos].id] = SubtaskStatus(
                self.index, m.records_in, m.records_out, m.late_records_dropped,
                task.watermark if task.watermark > MIN_WATERMARK else None,
                round(self.inbound.qsize() / self.inbound.maxsize, 3) if fed_by_network else None,
                busy_ms=round(task.busy_s * 1000, 1),
            )
        if self.reader is not None:
            m = self.source_metrics
            out[nodes[0].id] = SubtaskStatus(self.index, m.records_in, m.records_out, m.late_records_dropped,
                                             busy_ms=round(self.source_busy_s * 1000, 1))
        last = nodes[-1].id  # the chain's last operator sends over the network, so it waits for room
        out[last] = replace(out[last], backpressured_ms=round(sum(g.backpressured_s for g in self.outputs) * 1000, 1))
        return out

    # ------------------------------------------------------------ thread body
    def run(self) -> None:
        try:
            self._restore()
            self.ready.set()
            if self.reader is not None:
                self._run_source()
            else:
                self._run_operator()
        except Cancelled:
            pass
        except BaseException as e:  # noqa: BLE001 - reported to the job, which restarts or fails
            self.on_failure(os_failure(e, self.name))
        finally:
            self.finished.set()

    def _restore(self) -> None:
        state = self.restored
        if state is None:
            return
        for uid, task in zip(self.chain.node_uids, self.tasks_with_source_slot(), strict=True):
            if task is not None:
                task.operator.restore_state(state.get("operators", {}).get(uid))

    def tasks_with_source_slot(self) -> list[Task | None]:
        """One entry per chain node: None for the source node, which has a reader, not a task."""
        return ([None] if self.reader is not None else []) + list(self.tasks)

    def _run_source(self) -> None:
        reader = self.reader
        assert reader is not None
        finished: frozenset[str] | None = None
        while not self.stop.is_set():
            self._drain_control()
            if reader.finished_splits != finished:  # at the start, and when a split ends
                finished = reader.finished_splits
                self._announce_splits(reader.assigned_splits, finished)
            started = time.perf_counter()
            batch = reader.read_batch()
            if batch is not None and batch.num_rows:
                self.source_busy_s += time.perf_counter() - started
                self.source_metrics.records_out += batch.num_rows
                self._process(Chunk(batch, reader.current_kinds, reader.current_split))
            elif reader.finished:
                self._process(EndOfInput())
                self._finish()
                return
            elif batch is None:
                self._tick_processing_time()
                self.stop.wait(IDLE_SLEEP_S)

    def _run_operator(self) -> None:
        channels = len(self.channel_inputs)
        while not self.stop.is_set():
            self._drain_control()
            if self.replay:
                channel, element = self.replay.popleft()
            else:
                try:
                    channel, element = self.inbound.get(timeout=POLL_S)
                except queue.Empty:
                    self._tick_processing_time()
                    continue
            if channel in self.blocked:
                self.held.setdefault(channel, deque()).append(element)
                continue
            if isinstance(element, Barrier):
                self._on_barrier(channel, element)
                continue
            if isinstance(element, EndOfInput):
                self.ended.add(channel)
                self._process(element, channel)
                if self.pending_barrier is not None:
                    self._maybe_aligned()
                if len(self.ended) == channels:
                    self._finish()
                    return
                continue
            self._process(element, channel)

    # ------------------------------------------------------------ data path
    def _process(self, element: Element, channel: int = 0) -> None:
        """Push one element through the chain and out of its gates."""
        elements = [element]
        if self.reader is None and self.tasks:
            elements = self.tasks[0].receive(element, channel, self.channel_inputs[channel])
            self._push(elements, 1)
        else:
            self._push(elements, 0)

    def _push(self, elements: list[Element], start: int) -> None:
        """Push elements through the chain's tasks from position ``start`` on, then out of its gates."""
        for task in self.tasks[start:]:
            if not elements:
                return
            nxt: list[Element] = []
            for e in elements:
                nxt.extend(task.receive(e))
            elements = nxt
        for e in elements:
            for gate in self.outputs:
                gate.emit(e)

    def _announce_splits(self, assigned: tuple[str, ...], finished: frozenset[str]) -> None:
        """The chain's watermark generation learns every split the reader owns, before any delivers."""
        if not assigned:
            return
        for pos, task in enumerate(self.tasks):
            self._push(task.announce_splits(assigned, finished), pos + 1)

    def _tick_processing_time(self) -> None:
        """While idle, every PROCESSING_TIME_TICK_S, give each operator the wall clock."""
        if self.clock.monotonic() - self.last_tick < PROCESSING_TIME_TICK_S:
            return
        self.last_tick = self.clock.monotonic()
        now_ms = self.clock.time_ms()
        for pos, task in enumerate(self.tasks):
            self._push(task.advance_processing_time(now_ms), pos + 1)

    # ------------------------------------------------------------ checkpoints
    def _drain_control(self) -> None:
        while True:
            try:
                message = self.control.get_nowait()
            except queue.Empty:
                return
            kind = message[0]
            if kind == "trigger":  # sources only: inject a barrier
                _, n, savepoint = message
                self._checkpoint(Barrier(n, savepoint))
            elif kind == "complete":
                _, n, final = message
                if self.reader is not None:
                    self.reader.notify_checkpoint_complete(n)
                for task in self.tasks:
                    task.operator.notify_checkpoint_complete(n, final)
                self.notified = max(self.notified, n)
                if final:
                    self.final_commit.set()

    def _on_barrier(self, channel: int, barrier: Barrier) -> None:
        if self.pending_barrier is None or barrier.checkpoint_id > self.pending_barrier.checkpoint_id:
            if self.pending_barrier is not None:
                self._release()  # a newer barrier overtook an abandoned alignment
            self.pending_barrier = barrier
        elif barrier.checkpoint_id < self.pending_barrier.checkpoint_id:
            return  # a barrier of an abandoned checkpoint
        self.blocked.add(channel)
        self._maybe_aligned()

    def _maybe_aligned(self) -> None:
        barrier = self.pending_barrier
        assert barrier is not None
        if len(self.blocked | self.ended) < len(self.channel_inputs):
            return
        self._checkpoint(barrier)
        self._release()

    def _release(self) -> None:
        for channel in sorted(self.blocked):
            self.replay.extend((channel, e) for e in self.held.pop(channel, ()))
        self.blocked.clear()
        self.pending_barrier = None

    def _snapshot(self, checkpoint_id: int, canonical: bool) -> Callable[[Any], dict[str, Any]]:
        """Freeze the chain's state now; the returned function writes it (in the pool)."""
        operators: dict[str, Any] = {}
        keyed: dict[str, Any] = {}
        for uid, task in zip(self.chain.node_uids, self.tasks_with_source_slot(), strict=True):
            if task is None:
                continue
            operators[uid] = task.operator.snapshot_state(checkpoint_id)
            if task.ctx.state is not None:
                keyed[uid] = task.ctx.state.snapshot_all(checkpoint_id, canonical)
        position = None
        if self.reader is not None:
            position = self.reader.snapshot_position()
            self.reader.checkpoint_taken(checkpoint_id)

        def write(directory: Any) -> dict[str, Any]:
            handles = {}
            for uid, writer in keyed.items():
                d = directory / uid
                d.mkdir(parents=True, exist_ok=True)
                handles[uid] = writer(d)
            snapshot = {"state": write_subtask_state(directory, operators, position), "keyed": handles,
                        "parallelism": self.chain.parallelism}
            for path in files_of(snapshot):
                file_digest(path)  # hashed here, in the pool, not by the coordinator when it publishes
            return snapshot

        return write

    def _checkpoint(self, barrier: Barrier) -> None:
        n = barrier.checkpoint_id
        write = self._snapshot(n, barrier.is_savepoint)
        for gate in self.outputs:
            gate.emit(barrier)
        directory = self.coordinator.directory_for(n, self.chain.uid, self.index)

        def persist() -> None:
            try:
                self.coordinator.acknowledge(n, self.key, write(directory))
            except BaseException as e:  # noqa: BLE001 - a failed snapshot fails the job
                if self.coordinator.is_pending(n):
                    self.on_failure(os_failure(e, f"writing checkpoint {n} of {self.name} to '{directory}'"))
                # else: a newer checkpoint completed first and this one was abandoned (and pruned)

        self.snapshot_pool.submit(persist)

    def _finish(self) -> None:
        """All input processed: report the final state; a sink then waits for the final commit."""
        write = self._snapshot(-1, False)
        storage = self.coordinator.storage
        if storage is not None:
            snapshot = write(storage.finished_dir(self.chain.uid, self.index))
        else:
            snapshot = {"operators": {}, "keyed": {}, "source": None, "parallelism": self.chain.parallelism}
        self.coordinator.subtask_finished(self.key, snapshot)
        if self.is_sink:
            while not self.final_commit.is_set():
                if self.stop.is_set():
                    raise Cancelled
                self._drain_control()
                self.final_commit.wait(POLL_S)
