"""The 'kafka' connector: a topic read and written as csv, json, avro or raw messages.

Options follow Flink's Kafka SQL connector.  Differences, and why:

* ``scan.startup.mode`` defaults to ``earliest-offset`` (Flink: ``group-offsets``),
  so a table without 'properties.group.id' reads its topic; ``group-offsets``
  requires one.  Without a committed offset, ``group-offsets`` starts per
  'properties.auto.offset.reset' (earliest or latest; none, Flink's default,
  fails).  ``timestamp`` starts at the first record at or after
  'scan.startup.timestamp-millis' (the end where there is none).
  ``specific-offsets`` starts a partition it does not list at the group's
  committed offset, else at the earliest, as Flink's initializer does.
* 'avro-confluent' is refused: it needs a Confluent Schema Registry.
* ``scan.bounded.mode`` is ``unbounded`` or ``latest-offset``, which batch
  jobs and tests need: a partition ends at the high watermark of its first
  fetch response (taken while the reader opens), or earlier where
  read_committed reading reaches the end of the partition (an open
  transaction holds the stable end back).
* Keys, values and METADATA columns map to records as in Flink (see
  :mod:`.layout`), 'headers' included.  With a
  changelog format (``debezium-json``, ``canal-json``, ``maxwell-json``) the
  source emits their +I/-U/+U/-D rows and the sink writes update and delete
  rows as events.
* Partitions are assigned when the reader opens; partitions added later are
  not read until the job restarts.

Source.  Subtask ``i`` of ``n`` reads the partitions ``p`` with ``p % n == i``
through ``assign()`` at explicit offsets, with ``isolation.level =
read_committed``, auto-commit off and no group subscription.  The checkpoints
hold the positions (the source of truth, as in Flink's KafkaSource); when a
checkpoint completes, its positions are committed to 'properties.group.id'
(unless 'properties.commit.offsets.on.checkpoint' is false) so that lag tools
see progress.  Without a group id, the ``group.id`` librdkafka insists on is a
fixed dummy that is never joined or committed.
Each batch holds messages of one partition, named by :attr:`current_split`
(``'<topic>-<partition>'``) so watermarks can be kept per partition.  The
position is ``{partition: next offset}``.

Sink.  ``none`` and ``at-least-once`` produce as rows arrive (at-least-once
also flushes on every checkpoint).  ``exactly-once`` is a write-ahead design,
because librdkafka cannot resume a transaction that a crashed process left
open: rows are encoded into the checkpoint's committable (so they live in the
checkpoint state), and :meth:`KafkaSink.commit` writes each committable in
ONE Kafka transaction together with a marker record in a marker topic (key:
the transactional id, value: ``{"run": ..., "checkpoint": n}`` as JSON).  A
committable at or below the highest checkpoint marked for its transactional id
and run is skipped, which makes commit idempotent after a restore.
``init_transactions()`` at open fences a predecessor with the same
transactional id (``<prefix>-<subtask>``) and aborts its open transaction.

A *run* is one job execution: a fresh writer starts a new run, so running the
same job again with the same prefix writes its rows again, while a writer that
is handed restored committables of its own transactional id continues their
run (so a crash after the final commit does not write the replayed rows twice).
Continuing is only safe if checkpoint ids keep growing after a restore; if they
restart, the writer starts a new run.

Known gaps of the tansu broker (v0.6.0) this was tested against: records of
aborted transactions are returned to read_committed consumers (its Fetch
responses list no aborted transactions), so a writer that crashes inside
commit leaves its partial transaction visible; and ListOffsets(latest)
under-reports after a multi-record batch, which is why bounded reading takes
its end offsets from a fetch response (``scan.startup.mode = latest-offset``
still relies on ListOffsets); and ListOffsets by timestamp answers offset 0,
which the source corrects by skipping the records before the startup time.
"""

from sqlstream.runtime.connectors.base import Connector
from sqlstream.runtime.connectors.kafka.layout import METADATA
from sqlstream.runtime.connectors.kafka.options import (
    PROPERTIES,
    KafkaOptions,
    changelog_mode,
    validate_table,
)
from sqlstream.runtime.connectors.kafka.sink import KafkaSink
from sqlstream.runtime.connectors.kafka.source import KafkaSource

CONNECTOR = Connector(
    "kafka",
    options=(),
    options_type=KafkaOptions,
    create_source=KafkaSource,
    create_sink=KafkaSink,
    accepts_updates=False,
    prefixes=(PROPERTIES,),
    validate_extra=validate_table,
    metadata=METADATA,
    changelog=changelog_mode,
    description="a Kafka topic of csv, json, avro, raw or change-event messages (exactly-once sink through "
    "transactions)",
)

__all__ = ["CONNECTOR", "KafkaOptions", "KafkaSink", "KafkaSource"]
