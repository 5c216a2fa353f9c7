"""Runs a dataflow in this process.

Sources are polled in turn; each batch is pushed depth-first through the
downstream tasks, so memory stays bounded by one batch per edge.  A bounded
job ends when every source has ended and the end has flowed to every sink,
which then commits.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from planner.physical import Dataflow, PhysicalNode, SinkSpec, SourceSpec
from runtime.connectors.base import SinkContext, SinkWriter, SourceContext, SourceReader
from runtime.connectors.collect import CollectWriter, TableReader
from runtime.elements import Chunk, Element, EndOfInput
from runtime.operators.base import Metrics, OperatorContext
from runtime.operators.sink import SinkOperator
from runtime.task import Task
from sqlstream.errors import JobError, SqlStreamError

IDLE_SLEEP_S = 0.005


def create_reader(spec: SourceSpec, subtask: int = 0, parallelism: int = 1, batch_size: int = 8192) -> SourceReader:
    if spec.values is not None:
        return TableReader(spec.values, batch_size)
    from runtime.connectors.registry import get_connector

    assert spec.table is not None
    connector = get_connector(spec.table.connector)
    assert connector.create_source is not None
    ctx = SourceContext(spec.table, spec.options, spec.columns, subtask, parallelism, batch_size)
    return connector.create_source(ctx)


def create_writer(spec: SinkSpec, collect: Callable[[Chunk], None] | None, subtask: int = 0, parallelism: int = 1) -> SinkWriter:
    if spec.table is None:
        if collect is None:
            raise JobError("a SELECT needs a client to collect its rows")
        return CollectWriter(collect)
    from runtime.connectors.registry import get_connector

    connector = get_connector(spec.table.connector)
    if connector.create_sink is None:
        raise JobError(f"table '{spec.table.name}' (connector '{spec.table.connector}') cannot be written to")
    return connector.create_sink(SinkContext(spec.table, spec.options, spec.schema, subtask, parallelism, spec.updating))


@dataclass
class JobResult:
    metrics: dict[str, Metrics] = field(default_factory=dict)
    cancelled: bool = False

    @property
    def late_records_dropped(self) -> int:
        return sum(m.late_records_dropped for m in self.metrics.values())


class LocalExecutor:
    def __init__(self, dataflow: Dataflow, collect: Callable[[Chunk], None] | None = None,
                 batch_size: int = 8192) -> None:
        self.dataflow = dataflow
        self.collect = collect
        self.batch_size = batch_size
        self.cancel_event = threading.Event()
        self.downstream: dict[int, list[tuple[int, int]]] = {n.id: [] for n in dataflow.nodes}
        for n in dataflow.nodes:
            for i, ex in enumerate(n.inputs):
                self.downstream[ex.upstream].append((n.id, i))
        self.tasks: dict[int, Task] = {}
        self.readers: dict[int, SourceReader] = {}
        self.metrics: dict[str, Metrics] = {}

    def cancel(self) -> None:
        self.cancel_event.set()

    def _label(self, node: PhysicalNode) -> str:
        return f"#{node.id} {node.name}"

    def _open(self) -> None:
        for node in self.dataflow.nodes:
            ctx = OperatorContext(self._label(node))
            self.metrics[ctx.name] = ctx.metrics
            if node.source is not None:
                reader = create_reader(node.source, batch_size=self.batch_size)
                reader.open()
                self.readers[node.id] = reader
                continue
            if node.sink is not None:
                operator = SinkOperator(create_writer(node.sink, self.collect))
            else:
                assert node.make_operator is not None
                operator = node.make_operator()
            self.tasks[node.id] = Task(operator, len(node.inputs), ctx)

    def _push(self, node_id: int, element: Element) -> None:
        for target, index in self.downstream[node_id]:
            try:
                outputs = self.tasks[target].receive(element, index)
            except SqlStreamError:
                raise
            except Exception as e:  # an operator bug or data it cannot handle: name the operator
                node = self.dataflow.nodes[target]
                raise JobError(f"operator {self._label(node)} ({node.detail}) failed: {type(e).__name__}: {e}") from e
            for out in outputs:
                self._push(target, out)

    def run(self) -> JobResult:
        self._open()
        active = dict(self.readers)
        try:
            while active and not self.cancel_event.is_set():
                progressed = False
                for node_id, reader in list(active.items()):
                    batch = reader.read_batch()
                    if batch is not None and batch.num_rows:
                        progressed = True
                        self.metrics[self._label(self.dataflow.nodes[node_id])].records_out += batch.num_rows
                        self._push(node_id, Chunk(batch))
                    elif reader.finished:
                        progressed = True
                        del active[node_id]
                        self._push(node_id, EndOfInput())
                if not progressed:
                    time.sleep(IDLE_SLEEP_S)
        finally:
            self._close()
        return JobResult(self.metrics, cancelled=self.cancel_event.is_set())

    def _close(self) -> None:
        for reader in self.readers.values():
            reader.close()
        for task in self.tasks.values():
            task.operator.close()
