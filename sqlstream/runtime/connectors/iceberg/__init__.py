"""The 'iceberg' connector: an Apache Iceberg table (pyiceberg) as a bounded source and an exactly-once sink.

Options follow Flink's Iceberg connector: ``catalog-name``, ``catalog-type``,
``uri``, ``warehouse``, ``catalog-database`` (default ``default_database``, the
database Flink's session starts in) and ``catalog-table`` (default: the table's own
name); for reading, ``snapshot-id`` or ``as-of-timestamp`` (milliseconds since the
epoch: the snapshot current then).
The one catalog type is ``sql``, pyiceberg's SQL catalog, whose ``uri`` is a
SQLAlchemy URL (``sqlite:////path/catalog.db``); Flink's ``hive``/``hadoop``/``rest``
are refused.  Columns are matched by name (exactly, else case-insensitively).

Sink.  Rows are staged per checkpoint and committed once per completed checkpoint and
sink subtask; every snapshot of the commit carries ``sqlstream.app-id`` (``<run
uuid>-<subtask>``), ``sqlstream.checkpoint-id`` and ``sqlstream.commit-id`` (one commit
can make several snapshots); a commit replayed after a restore finds its snapshot and is
skipped (see ``runtime/connectors/lakehouse.py``).  Without a PRIMARY KEY the sink
appends, and an updating query is refused at plan time.  With one (the table's
identifier fields) it takes an updating query as Flink's Iceberg sink does: of a
checkpoint's changes the last one per key counts, a -D deletes the key's rows and a
+I/+U replaces them.  pyiceberg writes no equality deletes (Flink writes them), so the
changes are applied copy-on-write in one transaction: ``Transaction.delete`` of the
deleted keys, then ``Transaction.upsert`` (data files holding a changed key are
rewritten; readers see no delete files).  A checkpoint of inserts only is appended, as
Flink appends +I rows, unless ``write.upsert.enabled`` (Flink's upsert mode, which needs
the PRIMARY KEY) makes each row replace its key's.  A bounded job commits at the end of
its input; an unbounded one only on checkpoints.  A missing namespace and table are
created from the sink's columns: BOOLEAN, INT, BIGINT, FLOAT, DOUBLE, DECIMAL, STRING,
BYTES, DATE, ARRAY, MAP and ROW map to Iceberg's types of the same name, TINYINT and
SMALLINT to ``int``, TIMESTAMP to ``timestamp``, TIMESTAMP_LTZ to ``timestamptz`` and
TIME to ``time`` (Iceberg's are in microseconds), NOT NULL columns to required fields,
and the ``PRIMARY KEY`` columns to the table's (required) identifier fields, as Flink's
Iceberg catalog does.

Rows into a table with a PRIMARY KEY reach the sink hash-partitioned by it at any
parallelism, as Iceberg's FlinkSink keys them by the equality fields (write.distribution-mode
'none', the default, and an unpartitioned table): two sink subtasks never write, delete or
rewrite rows of one key in the same checkpoint.

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
    accepts_updates=True,
    updates_need_primary_key=True,
    sink_keyed_by_primary_key=True,
    description="an Apache Iceberg table in a SQL catalog (bounded scan; exactly-once appends, or changes applied "
    "by primary key)",
)

__all__ = ["CONNECTOR", "IcebergOptions", "IcebergSink", "IcebergSource"]
