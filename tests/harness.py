"""One operator under test, run as a subtask runs it (in the spirit of Flink's
``OneInputStreamOperatorTestHarness``).

``OperatorHarness`` opens an operator (or a physical node's operator) the way
the executor does: a state backend for keyed operators, restored from a
snapshot when given one, an ``OperatorContext`` with a clock, and a ``Task``
in front (watermark alignment over the inputs, end of input, metrics).  Its
clock is a ``ManualClock`` unless the test passes another, so state TTL,
processing time and idle timeouts move only when the test advances them.
Everything the operator emits is collected, rows as changelog tuples.
"""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from sqlstream.core.physical import PhysicalNode
from sqlstream.planner.physical import Lowering
from sqlstream.runtime.clock import Clock, ManualClock
from sqlstream.runtime.elements import Chunk, Element, EndOfInput, RowKind, Watermark
from sqlstream.runtime.hashing import DEFAULT_MAX_PARALLELISM, key_group_range
from sqlstream.runtime.operators.base import Metrics, Operator, OperatorContext
from sqlstream.runtime.operators.registry import build_operator
from sqlstream.runtime.state import create_backend
from sqlstream.runtime.state.base import StateBackend
from sqlstream.runtime.state.rocksdb import RocksDBState
from sqlstream.runtime.task import Task


def planned_state(backend: str, config: Mapping[str, str] | None = None,
                  has_columnar_form: bool = True) -> tuple[int | None, bool]:
    """(state TTL in ms, columnar form) as the planner resolves them for an operator of a job on
    ``backend`` with ``config``: operators built by hand in tests take them as the plan gives them."""
    lowering = Lowering({**(config or {}), "state.backend.type": backend})
    return lowering.state_ttl_ms, lowering.columnar_state and has_columnar_form


@dataclass(frozen=True)
class Snapshot:
    """What a checkpoint or savepoint holds of one operator subtask."""

    keyed: Any | None  # the state backend's handle (None: the operator keeps no keyed state)
    operator: Any  # Operator.snapshot_state


def changelog(elements: Sequence[Element]) -> list[tuple]:
    """The rows among ``elements`` as (kind, *values) tuples, in order (columns by position:
    an output may repeat a name)."""
    out: list[tuple] = []
    for e in elements:
        if isinstance(e, Chunk):
            columns = [c.to_pylist() for c in e.batch.columns]
            kinds = e.kinds_or_inserts().to_pylist()
            out += [(RowKind(k), *r) for k, r in zip(kinds, zip(*columns, strict=True), strict=True)]
    return out


_fresh = itertools.count()


class OperatorHarness:
    """An opened operator with ``inputs`` inputs (one channel each), its state and its output."""

    def __init__(self, operator: Operator | PhysicalNode, backend: str | None = "hashmap",
                 clock: Clock | None = None, *, tmp: Path | None = None, key_groups: range | None = None,
                 config: Mapping[str, str] | None = None, inputs: int = 1,
                 max_parallelism: int = DEFAULT_MAX_PARALLELISM, subtask_index: int = 0,
                 parallelism: int = 1, restore: Snapshot | Sequence[Snapshot] | None = None,
                 name: str = "op", keep_output: bool = True) -> None:
        """``keep_output=False``: emitted elements are only returned, for long runs whose output
        the test does not read."""
        self.operator = build_operator(operator) if isinstance(operator, PhysicalNode) else operator
        self.clock = clock if clock is not None else ManualClock()
        self.tmp = tmp if tmp is not None else Path(tempfile.mkdtemp(prefix="harness-"))
        self.key_groups = key_groups if key_groups is not None else \
            key_group_range(subtask_index, parallelism, max_parallelism)
        snapshots = [restore] if isinstance(restore, Snapshot) else list(restore or [])
        state: StateBackend | None = None
        if self.operator.keyed:
            if backend is None:
                raise ValueError(f"{self.operator.name} keeps keyed state: give the harness a backend")
            state = create_backend(backend, self.key_groups, self.tmp / f"{backend}-{next(_fresh)}", self.clock)
            handles = [s.keyed for s in snapshots if s.keyed is not None]
            if handles:
                state.restore_all(handles)
        self.ctx = OperatorContext(name, subtask_index, parallelism, Metrics(), max_parallelism, state,
                                   dict(config or {}), self.clock)
        self.task = Task(self.operator, inputs, self.ctx)
        if restore is not None:
            # a subtask's own operator state; a subtask new after rescaling gets None and rebuilds
            # from its keyed state, as the executor does
            own = snapshots[0].operator if len(snapshots) == 1 else None
            self.operator.restore_state(own)
        self.keep_output = keep_output
        self.output: list[Element] = []
        self._taken = 0

    @property
    def state(self) -> StateBackend:
        return self.ctx.keyed_state

    @property
    def metrics(self) -> Metrics:
        return self.ctx.metrics

    # ------------------------------------------------------------ input
    def _collect(self, elements: list[Element]) -> list[Element]:
        if self.keep_output:
            self.output += elements
        return elements

    def process_chunk(self, chunk: Chunk, input_index: int = 0) -> list[Element]:
        """What the operator emits for ``chunk`` arriving on input ``input_index``."""
        return self._collect(self.task.receive(chunk, input_index, input_index))

    def process_batch(self, batch: pa.RecordBatch | pa.Table, kinds: Sequence[int] | pa.Array | None = None,
                      split: str | None = None, input_index: int = 0) -> list[Element]:
        """A batch of rows (all inserts unless ``kinds`` are given) from source split ``split``."""
        if isinstance(batch, pa.Table):
            batch = batch.combine_chunks().to_batches()[0] if batch.num_rows else \
                pa.RecordBatch.from_pylist([], schema=batch.schema)
        if kinds is not None and not isinstance(kinds, pa.Array):
            kinds = pa.array(list(kinds), pa.int8())
        return self.process_chunk(Chunk(batch, kinds, split), input_index)

    def watermark(self, timestamp: int, input_index: int | None = None) -> list[Element]:
        """Event time reaches ``timestamp`` on one input, or on all of them (None)."""
        channels = range(len(self.task.input_watermarks)) if input_index is None else [input_index]
        out: list[Element] = []
        for channel in channels:
            out += self.task.receive(Watermark(timestamp), channel)
        return self._collect(out)

    def end_input(self) -> list[Element]:
        """Every input ends: a final watermark, then end_input."""
        out: list[Element] = []
        for channel in range(len(self.task.ended)):
            out += self.task.receive(EndOfInput(), channel)
        return self._collect([e for e in out if not isinstance(e, EndOfInput)])

    def processing_time(self) -> list[Element]:
        """An idle subtask's tick: the operator learns the clock's time."""
        return self._collect(self.task.advance_processing_time(self.clock.time_ms()))

    def splits(self, assigned: Sequence[str], finished: frozenset[str] = frozenset()) -> list[Element]:
        """The source splits feeding the operator (announced by the chain's reader)."""
        return self._collect(self.task.announce_splits(tuple(assigned), finished))

    # ------------------------------------------------------------ output
    def changelog(self) -> list[tuple]:
        """Rows emitted so far, as (kind, *values) tuples."""
        return changelog(self.output)

    def take(self) -> list[tuple]:
        """Rows emitted since the last take()."""
        new = self.output[self._taken:]
        self._taken = len(self.output)
        return changelog(new)

    def watermarks(self) -> list[int]:
        """Watermarks emitted so far."""
        return [e.timestamp for e in self.output if isinstance(e, Watermark)]

    # ------------------------------------------------------------ checkpoints
    def snapshot(self, checkpoint_id: int = 1, canonical: bool = True, directory: Path | None = None) -> Snapshot:
        """A savepoint (``canonical``, any backend restores it) or a checkpoint, written at once."""
        operator = self.operator.snapshot_state(checkpoint_id)
        if self.ctx.state is None:
            return Snapshot(None, operator)
        directory = directory or self.tmp / f"snapshot-{next(_fresh)}"
        directory.mkdir(parents=True, exist_ok=True)
        return Snapshot(self.ctx.state.snapshot_all(checkpoint_id, canonical)(directory), operator)

    def close(self) -> None:
        self.operator.close()
        if self.ctx.state is not None:
            self.ctx.state.close()


def restored_into_halves(snapshot: Snapshot, make: Callable[[], Operator | PhysicalNode], backend: str,
                         clock: Clock | None = None, tmp: Path | None = None,
                         config: Mapping[str, str] | None = None,
                         max_parallelism: int = DEFAULT_MAX_PARALLELISM) -> Iterator[tuple[range, OperatorHarness]]:
    """``snapshot`` restored into two subtasks on ``backend`` that own the lower and the upper half
    of the key groups: a move to another backend and a rescale 1 -> 2.  Both rebuild from keyed
    state alone (restore_state(None)), as subtasks of a rescaled job whose operator state is per key."""
    for index in range(2):
        groups = key_group_range(index, 2, max_parallelism)
        harness = OperatorHarness(make(), backend, clock, tmp=tmp, key_groups=groups, config=config,
                                  max_parallelism=max_parallelism, restore=Snapshot(snapshot.keyed, None))
        yield groups, harness


def recorded_lookups(monkeypatch: pytest.MonkeyPatch, state: str | None = None) -> list[int]:
    """How many keys each RocksDB multi-get of the operators under test asks for (of keyed state
    ``state`` only, when given), appended as they call RocksDBState.get_many: whether a key filter
    spares the lookups it should."""
    asked: list[int] = []
    get_many = RocksDBState.get_many

    def recording(self: RocksDBState, raw_keys: list[bytes]) -> list[bytes | None]:
        if state is None or self.name == state:
            asked.append(len(raw_keys))
        return get_many(self, raw_keys)

    monkeypatch.setattr(RocksDBState, "get_many", recording)
    return asked
