"""The 'blackhole' connector: a sink that discards its input (for benchmarks and tests)."""

from __future__ import annotations

import pyarrow as pa

from sqlstream.runtime.connectors.base import Connector, SinkContext, SinkWriter


class BlackholeSink(SinkWriter):
    """Discards rows; counts them so that a benchmark can check how many arrived."""

    def __init__(self, ctx: SinkContext) -> None:
        self.rows_written = 0

    def write(self, batch: pa.RecordBatch, kinds: pa.Array | None) -> None:
        self.rows_written += batch.num_rows


CONNECTOR = Connector(
    "blackhole",
    options=(),
    create_sink=BlackholeSink,
    accepts_updates=True,
    partitioned=True,  # Flink's BlackHoleTableSink supports partitioning (and discards the rows)
    description="discards all rows",
)
