"""The 'kafka' connector: a topic read and written as csv or json messages.

Options follow Flink's Kafka SQL connector.  Differences, and why:

* ``scan.startup.mode`` defaults to ``earliest-offset`` (Flink: ``group-offsets``):
  this engine keeps read positions in its checkpoints and never uses consumer
  groups, so there are no group offsets to start from.
* ``scan.bounded.mode`` is ``unbounded`` or ``latest-offset``, which batch
  jobs and tests need: a partition ends at the high watermark of its first
  fetch response (taken while the reader opens), or earlier where
  read_committed reading reaches the end of the partition (an open
  transaction holds the stable end back).
* Only ``csv`` and ``json`` values; ``key.format``/``key.fields`` give the sink
  a message key (the value still holds every column, Flink's
  ``value.fields-include = ALL``); the source ignores keys.
* Partitions are assigned when the reader opens; partitions added later are
  not read until the job restarts.

Source.  Subtask ``i`` of ``n`` reads the partitions ``p`` with ``p % n == i``
through ``assign()`` at explicit offsets, with ``isolation.level =
read_committed``, auto-commit off and no group subscription (the ``group.id``
librdkafka insists on is a fixed dummy that is never joined or committed).
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
still relies on ListOffsets).
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic

from sqlstream.core.connectors import Option
from sqlstream.core.errors import ConnectorError
from sqlstream.core.tables import TableDef
from sqlstream.runtime.connectors.base import (
    Connector,
    SinkContext,
    SinkWriter,
    SourceContext,
    SourceReader,
)
from sqlstream.runtime.elements import RowKind
from sqlstream.runtime.formats import FORMAT_NAMES, TextFormat, all_format_options, create_format

_LOG = logging.getLogger(__name__)

MESSAGE_FORMATS: tuple[str, ...] = ("csv", "json")
# Reaching the cluster (metadata, offsets, the marker topic) fails after this long, not never.
METADATA_TIMEOUT_S = 10.0
# Budget for transactional calls and flushes, which wait for broker acknowledgements.
TXN_TIMEOUT_S = 30.0
# read_batch blocks at most this long when nothing is buffered.
_POLL_TIMEOUT_S = 0.05
# librdkafka requires a group.id for a consumer; this one is never joined nor committed to.
_DUMMY_GROUP = "sqlstream-no-group"
_PROPERTIES = "properties."
_SPECIFIC_OFFSET = re.compile(r"^\s*partition\s*:\s*(\d+)\s*,\s*offset\s*:\s*(\d+)\s*$")
# Properties the connector sets itself; a user value would break its guarantees.
_RESERVED_PROPERTIES = {
    "transactional.id": "set 'sink.transactional-id-prefix' instead",
    "enable.auto.commit": "positions are kept in checkpoints, never committed to Kafka",
    "isolation.level": "the source reads committed records only (read_committed)",
}


def parse_specific_offsets(text: str, table: str) -> dict[int, int]:
    """'partition:0,offset:42;partition:1,offset:300' -> {0: 42, 1: 300}."""
    out: dict[int, int] = {}
    for part in text.split(";"):
        if not part.strip():
            continue
        m = _SPECIFIC_OFFSET.match(part)
        if m is None:
            raise ConnectorError(
                f"table '{table}': option 'scan.startup.specific-offsets' = '{text}' is invalid near "
                f"'{part.strip()}'; expected e.g. 'partition:0,offset:42;partition:1,offset:300'"
            )
        out[int(m.group(1))] = int(m.group(2))
    if not out:
        raise ConnectorError(f"table '{table}': option 'scan.startup.specific-offsets' lists no partition")
    return out


def _key_fields(text: str | None) -> list[str]:
    return [f.strip() for f in (text or "").split(";") if f.strip()]


def _format_options(options: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in options.items() if "." in k and k.split(".", 1)[0] in (*FORMAT_NAMES, "format")}


def _text_format(
    name: str, schema: pa.Schema, options: Mapping[str, Any], columns: list[str] | None, table: str
) -> TextFormat:
    fmt = create_format(name, schema, options, columns, table)
    if not isinstance(fmt, TextFormat):
        raise ConnectorError(f"table '{table}': format '{name}' cannot encode single Kafka messages")
    return fmt


def _client_properties(table: TableDef) -> dict[str, str]:
    """The table's 'properties.*' options as librdkafka settings."""
    return {k[len(_PROPERTIES):]: v for k, v in table.options.items() if k.startswith(_PROPERTIES)}


def _order(checkpoint_id: int) -> float:
    """Commit order of a checkpoint id: a negative id is the final pre-commit of a bounded job."""
    return math.inf if checkpoint_id < 0 else float(checkpoint_id)


def _validate(table: TableDef, given: dict[str, str]) -> None:
    """Checks that need more than one option."""
    name = table.name
    fmt = given.get("format", "").lower()
    for key in given:
        prefix = key.split(".", 1)[0]
        if prefix in FORMAT_NAMES and prefix != fmt:
            raise ConnectorError(
                f"table '{name}': option '{key}' applies to format '{prefix}', but the table's format is '{fmt}'"
            )
        if key.startswith(_PROPERTIES) and key[len(_PROPERTIES):] in _RESERVED_PROPERTIES:
            raise ConnectorError(
                f"table '{name}': option '{key}' is managed by the kafka connector: "
                f"{_RESERVED_PROPERTIES[key[len(_PROPERTIES):]]}"
            )
    if given.get("csv.header", "false").lower() == "true":
        raise ConnectorError(f"table '{name}': 'csv.header' does not apply to Kafka messages (one record each)")
    mode = given.get("scan.startup.mode", "earliest-offset").lower()
    offsets = given.get("scan.startup.specific-offsets")
    if mode == "specific-offsets" and offsets is None:
        raise ConnectorError(
            f"table '{name}': 'scan.startup.mode' = 'specific-offsets' requires option 'scan.startup.specific-offsets'"
        )
    if offsets is not None:
        if mode != "specific-offsets":
            raise ConnectorError(
                f"table '{name}': 'scan.startup.specific-offsets' is only used with "
                "'scan.startup.mode' = 'specific-offsets'"
            )
        parse_specific_offsets(offsets, name)
    guarantee = given.get("sink.delivery-guarantee", "at-least-once").lower()
    if guarantee == "exactly-once" and not given.get("sink.transactional-id-prefix", "").strip():
        raise ConnectorError(
            f"table '{name}': 'sink.delivery-guarantee' = 'exactly-once' requires option "
            "'sink.transactional-id-prefix' (unique per job, e.g. the job name)"
        )
    schema = table.physical_schema
    key_fields = _key_fields(given.get("key.fields"))
    key_format = given.get("key.format")
    if bool(key_fields) != (key_format is not None):
        raise ConnectorError(f"table '{name}': options 'key.format' and 'key.fields' must be given together")
    missing = [f for f in key_fields if schema.get_field_index(f) < 0]
    if missing:
        raise ConnectorError(f"table '{name}': key field '{missing[0]}' is not a column of {schema.names}")
    declared = {o.key: o for o in all_format_options()}
    typed = {k: declared[k].convert(v, name) for k, v in given.items() if k in declared}
    # Building the formats checks their option values and the column types they support.
    _text_format(fmt, schema, typed, None, name)
    if key_format is not None:
        _text_format(key_format.lower(), pa.schema([schema.field(f) for f in key_fields]), {}, None, name)


class _ClientErrors:
    """librdkafka's asynchronous client errors (served by poll/consume/list_topics), kept for checks."""

    def __init__(self) -> None:
        self.brokers_down: KafkaError | None = None
        self.fatal: KafkaError | None = None

    def __call__(self, err: KafkaError) -> None:
        if err.code() == KafkaError._ALL_BROKERS_DOWN:
            self.brokers_down = err
        elif err.fatal():
            self.fatal = err
        _LOG.debug("kafka client error: %s", err)


def _base_config(bootstrap: str, errors: _ClientErrors) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "error_cb": errors, "logger": _LOG}


def _cluster_metadata(
    client: Consumer | Producer, errors: _ClientErrors, bootstrap: str, table: str
) -> ClusterMetadata:
    """All topics' metadata, or ConnectorError within METADATA_TIMEOUT_S.

    Listing all topics (not one by name) matters: a metadata request naming a
    missing topic makes brokers with auto-creation (tansu does) create it.
    """
    deadline = time.monotonic() + METADATA_TIMEOUT_S
    while True:
        try:
            return client.list_topics(timeout=min(0.5, max(deadline - time.monotonic(), 0.01)))
        except KafkaException as e:
            client.poll(0)  # serves the error callback; nothing is assigned yet, so no message is lost
            if errors.brokers_down is not None or time.monotonic() >= deadline:
                cause = errors.brokers_down or e.args[0]
                raise ConnectorError(
                    f"table '{table}': cannot reach the Kafka brokers at '{bootstrap}': {cause.str()}"
                ) from None


def _topic_partitions(md: ClusterMetadata, topic: str, bootstrap: str, table: str) -> list[int]:
    meta = md.topics.get(topic)
    if meta is None:
        raise ConnectorError(f"table '{table}': Kafka topic '{topic}' does not exist on '{bootstrap}'")
    if meta.error is not None:
        raise ConnectorError(f"table '{table}': Kafka topic '{topic}' on '{bootstrap}': {meta.error.str()}")
    return sorted(meta.partitions)


def _watermarks(consumer: Consumer, topic: str, partition: int, table: str) -> tuple[int, int]:
    """(first offset, end offset) of a partition; with read_committed the end is the last stable offset."""
    try:
        low, high = consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=METADATA_TIMEOUT_S, cached=False
        )
    except KafkaException as e:
        raise ConnectorError(
            f"table '{table}': cannot read the offsets of topic '{topic}' partition {partition}: {e.args[0].str()}"
        ) from None
    return low, high


def _read_committed_consumer(bootstrap: str, properties: Mapping[str, str], errors: _ClientErrors) -> Consumer:
    """A consumer for assign() at explicit offsets that never commits and reports partition ends."""
    config: dict[str, Any] = {
        **_base_config(bootstrap, errors),
        "group.id": _DUMMY_GROUP,
        "auto.offset.reset": "error",
        **properties,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
    }
    return Consumer(config)


class KafkaSource(SourceReader):
    """Reads this subtask's partitions of one topic; see the module docstring."""

    def __init__(self, ctx: SourceContext) -> None:
        opts = ctx.options
        self._ctx = ctx
        self._table = ctx.table.name
        self._topic: str = opts["topic"]
        self._bootstrap: str = opts["properties.bootstrap.servers"]
        self._format = _text_format(
            opts["format"], ctx.table.physical_schema, _format_options(opts), ctx.columns, self._table
        )
        self._startup: str = opts["scan.startup.mode"]
        offsets = opts.get("scan.startup.specific-offsets")
        self._specific = {} if offsets is None else parse_specific_offsets(offsets, self._table)
        self.bounded = opts["scan.bounded.mode"] == "latest-offset"
        self._errors = _ClientErrors()
        self._consumer: Consumer | None = None
        self._partitions: list[int] = []
        self._positions: dict[int, int] = {}  # partition -> next offset to return
        self._restored: dict[int, int] = {}
        self._end: dict[int, int] = {}  # bounded mode: partition -> high watermark when reading began
        self._done: set[int] = set()  # bounded mode: partitions read up to their end
        # Consumed but not yet returned: partition -> (messages, end-of-partition offset seen after them).
        self._pending: dict[int, tuple[list[Message], int | None]] = {}
        self._split: str | None = None

    def open(self) -> None:
        # A short fetch wait bounds how long open() waits for the first fetch of an idle partition.
        consumer = _read_committed_consumer(
            self._bootstrap, {"fetch.wait.max.ms": 100, **_client_properties(self._ctx.table)}, self._errors
        )
        self._consumer = consumer
        md = _cluster_metadata(consumer, self._errors, self._bootstrap, self._table)
        everything = _topic_partitions(md, self._topic, self._bootstrap, self._table)
        ctx = self._ctx
        self._partitions = [p for p in everything if p % ctx.parallelism == ctx.subtask_index]
        for p in self._partitions:
            low, high = _watermarks(consumer, self._topic, p, self._table)
            self._positions[p] = self._start_offset(p, low, high)
        consumer.assign([TopicPartition(self._topic, p, self._positions[p]) for p in self._partitions])
        if self.bounded:
            self._await_end_offsets()

    def _start_offset(self, partition: int, low: int, high: int) -> int:
        if partition in self._restored:
            return self._restored[partition]
        if self._startup == "latest-offset":
            return high
        if self._startup == "specific-offsets" and partition in self._specific:
            return self._specific[partition]
        return low  # earliest-offset, and partitions specific-offsets does not list

    def _await_end_offsets(self) -> None:
        """Fix each partition's end at the high watermark of its first fetch response.

        That is Flink's "latest offset when consumption of the partition starts".
        It is taken from a fetch rather than from ListOffsets because tansu's
        ListOffsets answers the base offset + 1 of a partition's last record batch,
        too low when that batch holds several records.
        """
        assert self._consumer is not None
        deadline = time.monotonic() + METADATA_TIMEOUT_S
        while True:
            for p in self._partitions:
                if p not in self._end:
                    _low, high = self._consumer.get_watermark_offsets(TopicPartition(self._topic, p), cached=True)
                    if high >= 0:
                        self._end[p] = high
            if len(self._end) == len(self._partitions):
                return
            if time.monotonic() > deadline:
                raise ConnectorError(
                    f"table '{self._table}': no fetch response from '{self._bootstrap}' for topic "
                    f"'{self._topic}' within {METADATA_TIMEOUT_S:.0f} s"
                )
            time.sleep(0.005)

    def read_batch(self) -> pa.RecordBatch | None:
        if self._errors.fatal is not None:
            raise ConnectorError(
                f"table '{self._table}': Kafka consumer of topic '{self._topic}' failed: {self._errors.fatal.str()}"
            )
        if not self._pending:
            self._fill()
        while self._pending:
            partition = next(iter(self._pending))
            messages, eof = self._pending.pop(partition)
            batch = self._take(partition, messages, eof)
            if batch is not None:
                return batch
        return None

    def _fill(self) -> None:
        """One consume() call, grouped by partition in arrival order."""
        assert self._consumer is not None, "open() first"
        for m in self._consumer.consume(num_messages=self._ctx.batch_size, timeout=_POLL_TIMEOUT_S):
            partition = m.partition()
            messages, eof = self._pending.get(partition, ([], None))
            err = m.error()
            if err is None:
                messages.append(m)
            elif err.code() == KafkaError._PARTITION_EOF:
                eof = m.offset()
            elif err.retriable():
                _LOG.debug("topic '%s' partition %s: %s", self._topic, partition, err.str())
                continue
            else:
                raise ConnectorError(
                    f"table '{self._table}': reading topic '{self._topic}' partition {partition} "
                    f"from '{self._bootstrap}' failed: {err.str()}"
                )
            self._pending[partition] = (messages, eof)

    def _take(self, partition: int, messages: list[Message], eof: int | None) -> pa.RecordBatch | None:
        """Decode one partition's consumed messages and advance its position past them."""
        end = self._end.get(partition)
        if end is not None:
            messages = [m for m in messages if m.offset() < end]
        batch = None
        if messages:
            offsets = [m.offset() for m in messages]
            topic = self._topic
            batch = self._format.decode_messages(
                [m.value() or b"" for m in messages],
                lambda i: f"topic '{topic}' partition {partition} offset {offsets[i]}",
            )
            self._positions[partition] = offsets[-1] + 1
        if eof is not None:
            # Transaction markers may follow the last record: the end-of-partition offset skips them.
            self._positions[partition] = max(self._positions[partition], eof if end is None else min(eof, end))
        # Reaching the end of the partition also ends it: with read_committed, an open transaction
        # stops reading below the high watermark until it completes.
        if end is not None and (eof is not None or self._positions[partition] >= end):
            self._finish(partition)
        if batch is None or batch.num_rows == 0:
            return None
        self._split = self._split_name(partition)
        return batch

    def _finish(self, partition: int) -> None:
        if partition in self._done:
            return
        self._done.add(partition)
        assert self._consumer is not None
        self._consumer.pause([TopicPartition(self._topic, partition)])

    @property
    def finished(self) -> bool:
        return (
            self.bounded
            and self._consumer is not None
            and not self._pending
            and len(self._done) == len(self._partitions)
        )

    @property
    def current_split(self) -> str | None:
        return self._split

    @property
    def assigned_splits(self) -> tuple[str, ...]:
        return tuple(self._split_name(p) for p in self._partitions)

    @property
    def finished_splits(self) -> frozenset[str]:
        return frozenset(self._split_name(p) for p in self._done)

    def _split_name(self, partition: int) -> str:
        return f"{self._topic}-{partition}"

    @property
    def parse_errors(self) -> int:
        """Malformed messages skipped so far (with ignore-parse-errors)."""
        return self._format.parse_errors

    def snapshot_position(self) -> Any:
        return dict(self._positions)

    def restore_position(self, position: Any) -> None:
        """Resume at ``{partition: next offset}``; partitions it does not list start per scan.startup.mode."""
        self._restored = {int(p): int(o) for p, o in (position or {}).items()}

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        self._pending = {}


class KafkaSink(SinkWriter):
    """Writes rows as messages of one topic; see the module docstring for the guarantees."""

    def __init__(self, ctx: SinkContext) -> None:
        opts = ctx.options
        self._ctx = ctx
        self._table = ctx.table.name
        self._topic: str = opts["topic"]
        self._bootstrap: str = opts["properties.bootstrap.servers"]
        self._guarantee: str = opts["sink.delivery-guarantee"]
        self._format = _text_format(opts["format"], ctx.schema, _format_options(opts), None, self._table)
        self._key_fields = _key_fields(opts.get("key.fields"))
        self._key_format: TextFormat | None = None
        if self._key_fields:
            key_schema = pa.schema([ctx.schema.field(f) for f in self._key_fields])
            self._key_format = _text_format(opts["key.format"], key_schema, {}, None, self._table)
        self._partitioner: str = opts["sink.partitioner"]
        self._next_partition = ctx.subtask_index  # round-robin: subtasks start apart
        self._prefix: str = opts.get("sink.transactional-id-prefix") or ""
        self._txid = f"{self._prefix}-{ctx.subtask_index}"
        self._marker_topic: str = opts.get("sink.commit-marker-topic") or f"{self._topic}.__sqlstream_commits"
        self._errors = _ClientErrors()
        self._producer: Producer | None = None
        self._partitions = 0
        self._delivery_error: KafkaError | None = None
        # exactly-once state
        self._buffer: list[tuple[int, bytes | None, bytes]] = []  # (partition or -1, key, value)
        self._run = uuid.uuid4().hex
        self._run_floor = -math.inf  # highest checkpoint order known in the run continued from a restore
        self._prepared = False
        # (transactional id, run) -> highest committed checkpoint order, from the marker topic
        self._committed: dict[tuple[str, str], float] = {}
        # read lazily, at the first commit: a predecessor of another subtask killed mid-commit can hold
        # the marker topic's stable end back until its transaction times out, and open() must not wait
        self._markers_loaded = False

    @property
    def exactly_once(self) -> bool:
        return self._guarantee == "exactly-once"

    # -- opening ---------------------------------------------------------

    def open(self) -> None:
        """Connect; in exactly-once mode also fence predecessors and learn what was committed."""
        if self._producer is not None:
            return
        config: dict[str, Any] = {
            **_base_config(self._bootstrap, self._errors),
            **_client_properties(self._ctx.table),
        }
        if self.exactly_once:
            config["transactional.id"] = self._txid
        producer = Producer(config)
        md = _cluster_metadata(producer, self._errors, self._bootstrap, self._table)
        self._partitions = len(_topic_partitions(md, self._topic, self._bootstrap, self._table))
        if self.exactly_once:
            if self._marker_topic not in md.topics:
                self._create_marker_topic()
            try:
                producer.init_transactions(TXN_TIMEOUT_S)
            except KafkaException as e:
                raise ConnectorError(
                    f"table '{self._table}': cannot initialize Kafka transactions for transactional id "
                    f"'{self._txid}' on '{self._bootstrap}': {e.args[0].str()}"
                ) from None
        self._producer = producer

    def _create_marker_topic(self) -> None:
        admin = AdminClient({**_base_config(self._bootstrap, self._errors), **_client_properties(self._ctx.table)})
        future = admin.create_topics([NewTopic(self._marker_topic, 1, -1)])[self._marker_topic]
        try:
            future.result(METADATA_TIMEOUT_S)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:  # another subtask was first
                raise ConnectorError(
                    f"table '{self._table}': cannot create the commit marker topic '{self._marker_topic}': "
                    f"{e.args[0].str()}"
                ) from None

    def _load_markers(self) -> None:
        """Learn what this prefix's transactional ids committed, from the marker topic.

        Runs after init_transactions(), so no transaction of ours is open.  The
        topic is read up to the high watermark of the first fetch, and with
        read_committed that waits until other subtasks' transactions open at
        that point are complete, so a marker written just before is never missed.
        """
        errors = _ClientErrors()
        consumer = _read_committed_consumer(self._bootstrap, _client_properties(self._ctx.table), errors)
        try:
            md = _cluster_metadata(consumer, errors, self._bootstrap, self._table)
            partitions = _topic_partitions(md, self._marker_topic, self._bootstrap, self._table)
            consumer.assign([TopicPartition(self._marker_topic, p, OFFSET_BEGINNING) for p in partitions])
            reached = dict.fromkeys(partitions, 0)
            ends: dict[int, int] = {}
            deadline = time.monotonic() + TXN_TIMEOUT_S
            while True:
                for p in partitions:
                    if p not in ends:
                        _low, high = consumer.get_watermark_offsets(
                            TopicPartition(self._marker_topic, p), cached=True
                        )
                        if high >= 0:
                            ends[p] = high
                if len(ends) == len(partitions) and all(reached[p] >= ends[p] for p in partitions):
                    return
                if time.monotonic() > deadline:
                    raise ConnectorError(
                        f"table '{self._table}': reading the commit marker topic '{self._marker_topic}' "
                        f"did not finish within {TXN_TIMEOUT_S:.0f} s (a transaction of another writer "
                        "may be left open)"
                    )
                for m in consumer.consume(num_messages=1000, timeout=_POLL_TIMEOUT_S):
                    reached[m.partition()] = max(reached[m.partition()], self._marker(m))
        finally:
            consumer.close()

    def _marker(self, m: Message) -> int:
        """Take one consumed marker-topic message; returns the offset read up to."""
        err = m.error()
        if err is None:
            self._record_marker(m)
            return m.offset() + 1
        if err.code() == KafkaError._PARTITION_EOF or err.retriable():
            return m.offset()
        raise ConnectorError(
            f"table '{self._table}': reading the commit marker topic '{self._marker_topic}' failed: {err.str()}"
        )

    def _record_marker(self, m: Message) -> None:
        key = (m.key() or b"").decode(errors="replace")
        if not key.startswith(f"{self._prefix}-"):
            return
        try:
            marker = json.loads(m.value() or b"")
            run, order = str(marker["run"]), _order(int(marker["checkpoint"]))
        except (ValueError, KeyError, TypeError):
            raise ConnectorError(
                f"table '{self._table}': the commit marker topic '{self._marker_topic}' holds a record that is "
                f"not a commit marker at partition {m.partition()} offset {m.offset()}: {m.value()!r:.80}"
            ) from None
        if order > self._committed.get((key, run), -math.inf):
            self._committed[(key, run)] = order

    # -- writing ---------------------------------------------------------

    def _conform(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        schema = self._ctx.schema
        if batch.schema.equals(schema):
            return batch
        arrays = [col if col.type == f.type else col.cast(f.type) for col, f in zip(batch.columns, schema, strict=True)]
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    def _assign_partitions(self, rows: int) -> list[int]:
        """Target partition per row; -1 leaves the choice to librdkafka (key hash, or sticky if no key)."""
        if self._partitioner == "fixed":
            return [self._ctx.subtask_index % self._partitions] * rows
        if self._partitioner == "round-robin":
            start = self._next_partition
            self._next_partition = (start + rows) % self._partitions
            return [(start + i) % self._partitions for i in range(rows)]
        return [-1] * rows

    def write(self, batch: pa.RecordBatch, kinds: pa.Array | None) -> None:
        if kinds is not None and pc.any(pc.not_equal(kinds, int(RowKind.INSERT))).as_py():
            raise ConnectorError(
                f"table '{self._table}': the kafka sink is append-only and cannot write update or delete rows"
            )
        if batch.num_rows == 0:
            return
        assert self._producer is not None, "open() first"
        batch = self._conform(batch)
        values = self._format.encode_messages(batch)
        keys: list[bytes | None]
        if self._key_format is not None:
            keys = self._key_format.encode_messages(batch.select(self._key_fields))
        else:
            keys = [None] * batch.num_rows
        partitions = self._assign_partitions(batch.num_rows)
        if self.exactly_once:
            self._buffer.extend(zip(partitions, keys, values, strict=True))
            return
        for partition, key, value in zip(partitions, keys, values, strict=True):
            self._produce(self._topic, value, key, partition, self._on_delivery)
        self._producer.poll(0)
        self._check_delivery()

    def _on_delivery(self, err: KafkaError | None, _msg: Message) -> None:
        if err is not None and self._delivery_error is None:
            self._delivery_error = err

    def _check_delivery(self) -> None:
        err = self._delivery_error or self._errors.fatal
        if err is not None:
            raise ConnectorError(
                f"table '{self._table}': writing to Kafka topic '{self._topic}' failed: {err.str()}"
            )

    def _produce(
        self,
        topic: str,
        value: bytes,
        key: bytes | None,
        partition: int,
        on_delivery: Callable[[KafkaError | None, Message], None] | None = None,
    ) -> None:
        """Produce one message, waiting for room while librdkafka's queue is full."""
        assert self._producer is not None
        deadline = time.monotonic() + TXN_TIMEOUT_S
        while True:
            try:
                if on_delivery is None:
                    self._producer.produce(topic, value=value, key=key, partition=partition)
                else:
                    self._producer.produce(topic, value=value, key=key, partition=partition, on_delivery=on_delivery)
                return
            except BufferError:
                if time.monotonic() > deadline:
                    raise ConnectorError(
                        f"table '{self._table}': Kafka producer queue for topic '{topic}' stayed full "
                        f"for {TXN_TIMEOUT_S:.0f} s"
                    ) from None
                self._producer.poll(0.1)

    def _flush(self) -> None:
        assert self._producer is not None
        left = self._producer.flush(TXN_TIMEOUT_S)
        self._check_delivery()
        if left:
            raise ConnectorError(
                f"table '{self._table}': {left} messages to Kafka topic '{self._topic}' were not acknowledged "
                f"within {TXN_TIMEOUT_S:.0f} s"
            )

    # -- checkpoints -----------------------------------------------------

    def prepare_commit(self, checkpoint_id: int) -> Any:
        """at-least-once: flush; exactly-once: hand the checkpoint's encoded rows over as its committable.

        The committable is a plain dict (picklable): topic, transactional_id,
        subtask, run, checkpoint and records, a list of (partition or -1 for
        the client's partitioner, key bytes or None, value bytes).
        """
        if not self.exactly_once:
            if self._guarantee == "at-least-once" and self._producer is not None:
                self._flush()
            return None
        if _order(checkpoint_id) <= self._run_floor:
            # Checkpoint ids restarted after the restore: continuing the old run would skip new rows.
            self._run = uuid.uuid4().hex
            self._run_floor = -math.inf
        self._prepared = True
        records, self._buffer = self._buffer, []
        return {
            "topic": self._topic,
            "transactional_id": self._txid,
            "subtask": self._ctx.subtask_index,
            "run": self._run,
            "checkpoint": checkpoint_id,
            "records": records,
        }

    def commit(self, committables: list[Any]) -> None:
        """Write each not yet committed committable in one transaction with its marker, in checkpoint order."""
        if not self.exactly_once:
            return
        self.open()  # after a restore, commit may come before open
        if not self._markers_loaded:
            self._load_markers()
            self._markers_loaded = True
        for c in sorted((c for c in committables if c is not None), key=lambda c: _order(c["checkpoint"])):
            self._continue_run(c)
            done = (c["transactional_id"], c["run"])
            order = _order(c["checkpoint"])
            if self._committed.get(done, -math.inf) >= order:
                continue
            if c["records"]:
                self._transact(c)
            self._committed[done] = order

    def _continue_run(self, c: dict[str, Any]) -> None:
        """Before its first pre-commit, a writer given its own restored committables continues their run."""
        if self._prepared or c["transactional_id"] != self._txid:
            return
        if c["run"] != self._run:
            self._run = c["run"]
            self._run_floor = -math.inf
        self._run_floor = max(self._run_floor, _order(c["checkpoint"]))

    def _transact(self, c: dict[str, Any]) -> None:
        producer = self._producer
        assert producer is not None
        marker = json.dumps({"run": c["run"], "checkpoint": c["checkpoint"]}).encode()
        try:
            producer.begin_transaction()
            for partition, key, value in c["records"]:
                self._produce(c["topic"], value, key, partition)
            self._produce(self._marker_topic, marker, c["transactional_id"].encode(), -1)
            producer.commit_transaction(TXN_TIMEOUT_S)
        except KafkaException as e:
            err = e.args[0]
            if err.txn_requires_abort():
                try:
                    producer.abort_transaction(TXN_TIMEOUT_S)
                except KafkaException as abort_error:
                    _LOG.warning("aborting Kafka transaction '%s' failed: %s", self._txid, abort_error)
            raise ConnectorError(
                f"table '{self._table}': committing checkpoint {c['checkpoint']} to Kafka topic '{c['topic']}' "
                f"(transactional id '{self._txid}') failed: {err.str()}"
            ) from None

    def abort(self, committables: list[Any]) -> None:
        """Nothing to undo: an exactly-once committable reaches Kafka only inside its commit transaction."""

    def close(self) -> None:
        """Deliver what at-least-once/none produced; exactly-once rows not pre-committed are dropped."""
        if self._producer is not None and not self.exactly_once:
            self._flush()
        self._producer = None
        self._buffer = []


def _options() -> tuple[Option, ...]:
    return (
        Option("topic", required=True, description="the Kafka topic to read or write"),
        Option(
            "properties.bootstrap.servers", required=True, description="Kafka brokers, e.g. 'localhost:9092'"
        ),
        Option("format", required=True, choices=MESSAGE_FORMATS, description="message format: csv or json"),
        *all_format_options(),
        Option("key.format", choices=MESSAGE_FORMATS, description="sink: format of the message key (csv or json)"),
        Option("key.fields", description="sink: columns encoded into the message key, separated by ';'"),
        Option(
            "scan.startup.mode",
            default="earliest-offset",
            choices=("earliest-offset", "latest-offset", "specific-offsets"),
            description="where a fresh source starts (no group offsets: the default is earliest-offset)",
        ),
        Option(
            "scan.startup.specific-offsets",
            description="start offsets for 'specific-offsets', e.g. 'partition:0,offset:42;partition:1,offset:300'",
        ),
        Option(
            "scan.bounded.mode",
            default="unbounded",
            choices=("unbounded", "latest-offset"),
            description="latest-offset: each partition stops at its end offset when reading starts",
        ),
        Option(
            "scan.watermark.idle-timeout",
            "duration",
            description="a partition without records for this long does not hold back the watermark",
        ),
        Option(
            "sink.delivery-guarantee",
            default="at-least-once",
            choices=("none", "at-least-once", "exactly-once"),
            description="none, at-least-once (flush on checkpoints) or exactly-once (transactions)",
        ),
        Option(
            "sink.transactional-id-prefix",
            description="exactly-once: prefix of the transactional ids '<prefix>-<subtask>' (unique per job)",
        ),
        Option(
            "sink.partitioner",
            default="default",
            choices=("default", "fixed", "round-robin"),
            description="default: by key hash (sticky without key); fixed: one partition per subtask; round-robin",
        ),
        Option(
            "sink.commit-marker-topic",
            description="exactly-once: topic of the commit markers (default '<topic>.__sqlstream_commits')",
        ),
    )


CONNECTOR = Connector(
    "kafka",
    options=_options(),
    create_source=KafkaSource,
    create_sink=KafkaSink,
    accepts_updates=False,
    prefixes=(_PROPERTIES,),
    validate_extra=_validate,
    description="a Kafka topic of csv or json messages (exactly-once sink through transactions)",
)
