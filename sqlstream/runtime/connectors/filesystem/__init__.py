"""The 'filesystem' connector: csv / json / parquet files in a file or directory.

METADATA columns read Flink's 'file.path', 'file.name', 'file.size' and
'file.modification-time' of the file a row comes from ('file.path' is the
absolute local path, or the object's URI on a store).

With a changelog format (debezium-json, canal-json, maxwell-json) the source
emits the events' +I/-U/+U/-D rows and the sink writes update and delete rows
as events.

Source: a file, or every visible file under a directory (recursively, names
starting with '.' or '_' are hidden, like Flink), read in name order.  The
position is "which files are done, and how many rows of the current one were
returned", so a restored reader re-decodes the current file and skips exactly
those rows.  With ``source.monitor-interval`` the source is unbounded and
rescans the directory for new files; files must then appear atomically (write
elsewhere or under a hidden name, then rename), as this sink does.

Sink: two-phase commit.  Rows go to hidden in-progress part files; a
checkpoint's ``prepare_commit`` closes them and ``commit`` renames them to
their visible names, so readers never see a partial or uncommitted file.
In-progress files of a killed attempt that no completed checkpoint holds are
deleted once the job restored from that checkpoint has committed it, as Flink's
FileSink cleans up: their names end with ``.<lineage>.inprogress``, where the
lineage is a fresh id for a new writer and is inherited by a restored one (every
committable carries it), and the restored writer deletes the in-progress files of
its lineage that are not its own.

Partitioned tables (``PARTITIONED BY (dt, hr)``) are Hive-style directories
``dt=2024-03-01/hr=10/`` whose files leave the partition columns out, as Flink's
(partitions.py).  The sink splits each batch by partition with one Arrow group-by
and commits a partition (a ``_SUCCESS`` file) once its commit trigger fires; the
source derives the partition columns from the directory names and lists only the
partitions the WHERE clause's conditions on them keep.  Each sink subtask commits the
partitions it wrote (Flink has one committer for all): with parallel sinks, a success
file can appear a moment before another subtask's files of the same checkpoint, unless
``sink.shuffle-by-partition.enable`` routes each partition to one subtask.
"""

from sqlstream.runtime.connectors.base import Connector
from sqlstream.runtime.connectors.filesystem.options import (
    FileSystemOptions,
    changelog_mode,
    validate_table,
)
from sqlstream.runtime.connectors.filesystem.sink import FileSystemSink
from sqlstream.runtime.connectors.filesystem.source import METADATA, FileSystemSource

CONNECTOR = Connector(
    "filesystem",
    options=(),
    options_type=FileSystemOptions,
    create_source=FileSystemSource,
    create_sink=FileSystemSink,
    accepts_updates=False,
    validate_extra=validate_table,
    metadata=METADATA,
    changelog=changelog_mode,
    partitioned=True,
    description="csv, json lines, parquet, avro, raw, orc or change-event (debezium/canal/maxwell json) files in a "
    "file or directory",
)

__all__ = ["CONNECTOR", "FileSystemOptions", "FileSystemSink", "FileSystemSource"]
