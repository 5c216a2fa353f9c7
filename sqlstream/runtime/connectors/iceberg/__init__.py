"""The 'iceberg' connector: an Apache Iceberg table (pyiceberg) as a bounded source and an exactly-once sink.

Options follow Flink's Iceberg connector: ``catalog-name``, ``catalog-type``,
``uri``, ``warehouse``, ``catalog-database`` (default ``default_database``, the
database Flink's session starts in) and ``catalog-table`` (default: the table's own
name); for reading, ``snapshot-id`` or ``as-of-timestamp`` (milliseconds since the
epoch: the snapshot current then).
The one catalog type is ``sql``, pyiceberg's SQL catalog, whose ``uri`` is a
SQLAlchemy URL (``sqlite:////path/catalog.db``); Flink's ``hive``/``hadoop``/``rest``
are refused.  Columns are matched by name (exactly, else case-insensitively).

Sink.  Appends only: pyiceberg 0.12 writes no equality deletes, so an updating query
into an iceberg table is refused at plan time.  Rows are staged per checkpoint and
appended as one snapshot per completed checkpoint and sink subtask whose summary
carries ``sqlstream.app-id`` (``<run uuid>-<subtask>``) and ``sqlstream.checkpoint-id``;
a commit replayed after a restore finds its snapshot and is skipped (see
``runtime/connectors/lakehouse.py``).  A bounded job commits at the end of its input;
an unbounded one only on checkpoints.  A missing namespace and table are created from
the sink's columns: BOOLEAN, INT, BIGINT, FLOAT, DOUBLE, DECIMAL, STRING, BYTES, DATE,
ARRAY, MAP and ROW map to Iceberg's types of the same name, TINYINT and SMALLINT to
``int``, TIMESTAMP to ``timestamp``, TIMESTAMP_LTZ to ``timestamptz`` and TIME to
``time`` (Iceberg's are in microseconds), NOT NULL columns to required fields, and the
``PRIMARY KEY`` columns to the table's (required) identifier fields, as Flink's Iceberg
catalog does; the sink still appends (Flink's upsert mode needs equality deletes).

Source.  A bounded scan of the current snapshot (or the one ``snapshot-id`` /
``as-of-timestamp`` names), pinned when the
job starts: the position is the snapshot id and the rows returned.  Subtask ``i`` of
``n`` reads every ``n``-th data file in path order.
"""

from sqlstream.runtime.connectors.base import Connector
from sqlstream.runtime.connectors.iceberg.options import IcebergOptions, validate_table
from sqlstream.runtime.connectors.iceberg.sink import IcebergSink
from sqlstream.runtime.connectors.iceberg.source import IcebergSource

CONNECTOR = Connector(
    "iceberg",
    options=(),
    options_type=IcebergOptions,
    create_source=IcebergSource,
    create_sink=IcebergSink,
    validate_extra=validate_table,
    accepts_updates=False,
    description="an Apache Iceberg table in a SQL catalog (bounded scan; exactly-once appends)",
)

__all__ = ["CONNECTOR", "IcebergOptions", "IcebergSink", "IcebergSource"]
