"""The 'delta' connector: a Delta Lake table (delta-rs) as a bounded source and an exactly-once sink.

Options follow Flink's Delta connector: ``table-path`` (the table's directory, a local
path or ``file://`` URI) and, for reading, ``versionAsOf`` or ``timestampAsOf`` (the
latest version committed at or before an ISO-8601 time, UTC unless it has an offset).  Columns are matched by
name (exactly, else case-insensitively).

Sink.  Rows are staged per checkpoint and committed as one Delta version per completed
checkpoint and sink subtask, carrying the application transaction ``txn`` (appId
``<run uuid>-<subtask>``, version = the checkpoint id) and ``sqlstream.app-id`` /
``sqlstream.checkpoint-id`` in the commit info; a commit replayed after a restore
finds its ``txn`` in the log and is skipped (see ``runtime/connectors/lakehouse.py``).
A bounded job commits at the end of its input; an unbounded one only on checkpoints, so
it needs ``execution.checkpointing.interval``.  Without a ``PRIMARY KEY`` the sink
appends (and the planner refuses an updating query); with ``PRIMARY KEY (...) NOT
ENFORCED`` every commit is a ``MERGE`` on the key of the checkpoint's last change per
key: ``-D`` deletes the key's row, ``+I``/``+U`` insert or replace it (``-U`` rows
are dropped: the ``+U`` after them replaces the row).  A missing table is created
from the sink's columns: BOOLEAN, TINYINT..BIGINT, FLOAT, DOUBLE, DECIMAL, STRING,
BYTES, DATE, TIMESTAMP (as ``timestamp_ntz``), TIMESTAMP_LTZ (as ``timestamp``),
ARRAY, MAP and ROW map to Delta's types of the same meaning, timestamps in
microseconds; TIME has no Delta type and is refused.

Source.  A bounded scan of the latest version (or the one ``versionAsOf`` /
``timestampAsOf`` names), pinned when the job
starts: the position is the version and the rows returned.  Subtask ``i`` of ``n``
reads every ``n``-th data file in path order.
"""

from sqlstream.runtime.connectors.base import Connector
from sqlstream.runtime.connectors.delta.options import DeltaOptions, validate_table
from sqlstream.runtime.connectors.delta.sink import DeltaSink
from sqlstream.runtime.connectors.delta.source import DeltaSource

CONNECTOR = Connector(
    "delta",
    options=(),
    options_type=DeltaOptions,
    create_source=DeltaSource,
    create_sink=DeltaSink,
    validate_extra=validate_table,
    accepts_updates=True,
    updates_need_primary_key=True,
    description="a Delta Lake table (bounded scan; exactly-once appends, or MERGE by primary key)",
)

__all__ = ["CONNECTOR", "DeltaOptions", "DeltaSink", "DeltaSource"]
