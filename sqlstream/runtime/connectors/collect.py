"""In-process sinks and sources: results handed to the client, literal rows read as a table.

Not user-facing connectors (no 'connector' name): the planner uses them for
a top-level SELECT and for VALUES.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from sqlstream.runtime.connectors.base import DEFAULT_BATCH_SIZE, SinkWriter, SourceReader
from sqlstream.runtime.elements import Chunk


class CollectWriter(SinkWriter):
    """Passes every chunk to ``consumer`` (the shell's result view, the Table API, the CLI)."""

    def __init__(self, consumer: Callable[[Chunk], None]) -> None:
        self.consumer = consumer

    def write(self, batch: pa.RecordBatch, kinds: pa.Array | None) -> None:
        self.consumer(Chunk(batch, kinds))


class TableReader(SourceReader):
    """Reads an in-memory Arrow table in batches; the position is the row offset."""

    bounded = True

    def __init__(self, table: pa.Table, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        self.batches = table.to_batches(max_chunksize=batch_size)
        self.next = 0

    def read_batch(self) -> pa.RecordBatch | None:
        if self.next >= len(self.batches):
            return None
        batch = self.batches[self.next]
        self.next += 1
        return batch

    @property
    def finished(self) -> bool:
        return self.next >= len(self.batches)

    def snapshot_position(self) -> Any:
        return {"batch": self.next}

    def restore_position(self, position: Any) -> None:
        self.next = position["batch"]
