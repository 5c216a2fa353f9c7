"""What every connector implements.

A connector module defines one :class:`Connector`: its option schema (a
:class:`~sqlstream.core.connectors.ConnectorSpec`, checked at ``CREATE TABLE`` time, so a
typo fails before the job starts), a source factory and/or a sink factory, and is listed
under the ``sqlstream.connectors`` entry points in pyproject.toml.  Sources hand out Arrow record batches and can
report and restore their read position (for checkpoints); sinks receive
chunks and, if transactional, pre-commit on a checkpoint and commit when it
completes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from sqlstream.core.connectors import ConnectorSpec
from sqlstream.core.expressions import Expr
from sqlstream.core.tables import TableDef
from sqlstream.runtime.clock import SYSTEM_CLOCK, Clock

# rows per source batch (table.exec.batch-size).  benchmarks/nexmark/run.py --batch-size measured
# q0/q1/q5/q7 1.3-1.5x faster at 32768 than at 8192 (the fixed cost of each Arrow call is
# spread over more rows), for +15 MB peak RSS; throttled and streaming sources emit what they
# have without waiting for a batch to fill, so a larger batch adds no latency.
DEFAULT_BATCH_SIZE = 32768


@dataclass
class SourceContext:
    """What a source subtask is given: its table, the columns to read, its share of the work."""

    table: TableDef
    options: dict[str, Any]  # validated, typed
    columns: list[str]  # physical and metadata columns to produce, in this order (projection pushdown)
    subtask_index: int = 0
    parallelism: int = 1
    batch_size: int = DEFAULT_BATCH_SIZE
    # processing time for throttles and generated timestamps; tests pass a ManualClock
    clock: Clock = SYSTEM_CLOCK
    # the job's SET keys, for what a connector reaches beyond its table (e.g. s3.* of file systems)
    settings: Mapping[str, str] = field(default_factory=dict)
    # WHERE conditions on the table's partition columns only, reading them in PARTITIONED BY order:
    # a partitioned source skips (does not list) the partitions it rejects
    partition_filter: Expr | None = None

    @property
    def schema(self) -> pa.Schema:
        full = self.table.source_schema
        return pa.schema([full.field(c) for c in self.columns])


@dataclass
class LookupContext:
    """What a lookup join asks of a dimension table: rows by key, these columns."""

    table: TableDef
    options: dict[str, Any]
    keys: list[str]  # the table's columns the join condition equates with the probe side
    columns: list[str]  # the columns to return, in this order
    # processing time for lookup.cache.ttl; tests pass a ManualClock
    clock: Clock = SYSTEM_CLOCK


# keys (tuples in LookupContext.keys order) -> the matching rows (tuples in .columns order)
LookupFunction = Callable[[list[tuple]], dict[tuple, list[tuple]]]


@dataclass
class SinkContext:
    table: TableDef
    options: dict[str, Any]
    schema: pa.Schema  # the rows the query produces, named as the sink's columns
    subtask_index: int = 0
    parallelism: int = 1
    updating: bool = False  # the input carries -U/+U/-D rows
    # the job's SET keys, for what a connector reaches beyond its table (e.g. s3.* of file systems)
    settings: Mapping[str, str] = field(default_factory=dict)
    # processing time (rolling intervals, partition commit triggers); tests pass a ManualClock
    clock: Clock = SYSTEM_CLOCK


class SourceReader(ABC):
    """Reads one subtask's share of a table as Arrow batches."""

    bounded: bool = True

    def open(self) -> None:  # noqa: B027 - optional hook
        """Acquire files, connections; called once before the first read."""

    @abstractmethod
    def read_batch(self) -> pa.RecordBatch | None:
        """The next batch, or None if nothing is available right now (unbounded) or at the end."""

    @property
    @abstractmethod
    def finished(self) -> bool:
        """True once a bounded source has returned its last batch."""

    @property
    def current_split(self) -> str | None:
        """The split (file, partition) the last batch came from, for per-split watermarks."""
        return None

    @property
    def current_kinds(self) -> pa.Array | None:
        """The RowKinds (int8) of the last batch returned; None: all inserts (an append-only source)."""
        return None

    @property
    def assigned_splits(self) -> tuple[str, ...]:
        """The splits this reader owns, once opened, named as :attr:`current_split` names them.

        Each holds event time back from the start, before it delivers anything (Flink's
        watermark is the minimum over all assigned splits), until it finishes or goes idle.
        Empty when the reader is one stream.
        """
        return ()

    @property
    def finished_splits(self) -> frozenset[str]:
        """Assigned splits read to their end (bounded reading): they no longer hold event time back."""
        return frozenset()

    @abstractmethod
    def snapshot_position(self) -> Any:
        """The read position (plain data: the state codec writes it); replay resumes exactly after the last batch returned."""

    @abstractmethod
    def restore_position(self, position: Any) -> None:
        """Resume from a position returned by snapshot_position (called before open)."""

    def checkpoint_taken(self, checkpoint_id: int) -> None:  # noqa: B027 - optional hook
        """:meth:`snapshot_position` was just called for checkpoint ``checkpoint_id``.

        A source that acknowledges what it read to its server (a replication slot) remembers
        here which position belongs to which checkpoint, and acknowledges it only in
        :meth:`notify_checkpoint_complete`, so nothing a restore may still need is released.
        """

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:  # noqa: B027 - optional hook
        """Checkpoint ``checkpoint_id`` (and every earlier one) is complete; called on the reader's thread."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources."""


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` with the sink table's schema: columns of another type (an INT into a BIGINT
    column) cast to the declared one, the table's column names."""
    if batch.schema.equals(schema):
        return batch
    arrays = [col if col.type == f.type else col.cast(f.type) for col, f in zip(batch.columns, schema, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


class SinkWriter(ABC):
    """Writes one subtask's share of the result.

    Exactly-once sinks stage writes and make them visible only in
    :meth:`commit`, which runs after the checkpoint whose id
    :meth:`prepare_commit` received has completed.
    """

    def open(self) -> None:  # noqa: B027 - optional hook
        """Prepare for writing."""

    @abstractmethod
    def write(self, batch: pa.RecordBatch, kinds: pa.Array | None) -> None:
        """Write rows; ``kinds`` holds a RowKind per row for updating streams, else None."""

    def prepare_commit(self, checkpoint_id: int) -> Any:
        """Flush and stage what was written since the last call; return a committable of plain data
        (numbers, strings, bytes, tuples, lists, dicts: the state codec writes it into the checkpoint)."""
        return None

    def commit(self, committables: list[Any]) -> None:  # noqa: B027 - optional hook
        """Make the staged writes visible (idempotent: may be called again after a restore)."""

    def restore_committed(self, committables: list[Any]) -> None:  # noqa: B027 - optional hook
        """A restore: ``committables`` are the restored checkpoint's, in checkpoint order (committed
        right after), for writers that carry more than files in them (pending partitions)."""

    def on_watermark(self, timestamp: int) -> None:  # noqa: B027 - optional hook
        """Event time reached ``timestamp`` (partition-time commit triggers)."""

    def end_input(self) -> None:  # noqa: B027 - optional hook
        """The input ended: the next pre-commit is the last (everything pending is due)."""

    def rollback(self, committables: list[Any]) -> bool:
        """Undo the commit of ``committables``: recovery fell back to a checkpoint taken before they
        were staged (the newer one was corrupt), and the restored job writes their rows again.
        False when the sink's commits are final (a committed transaction stays), so those rows may
        appear twice; recovery reports that."""
        return False

    def abort(self, committables: list[Any]) -> None:  # noqa: B027 - optional hook
        """Discard staged writes that will never be committed.

        The committer (SinkOperator) calls it when an attempt ends, failed or cancelled, with
        the committables of checkpoints that did not complete: no restore commits them.
        """

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources."""


@dataclass
class Connector(ConnectorSpec):
    """A connector's option schema (what the planner validates) with its runtime factories."""

    create_source: Callable[[SourceContext], SourceReader] | None = None
    create_sink: Callable[[SinkContext], SinkWriter] | None = None
    create_lookup: Callable[[LookupContext], LookupFunction] | None = None  # lookup joins

    @property
    def readable(self) -> bool:
        return self.create_source is not None

    @property
    def writable(self) -> bool:
        return self.create_sink is not None

    @property
    def lookupable(self) -> bool:
        return self.create_lookup is not None
