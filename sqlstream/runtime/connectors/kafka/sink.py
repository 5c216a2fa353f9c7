"""The kafka sink: none, at-least-once, or exactly-once through transactions with commit markers.

See the package docstring for the design.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Callable
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import (
    OFFSET_BEGINNING,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from sqlstream.core.errors import ConnectorError
from sqlstream.runtime.connectors.base import SinkContext, SinkWriter, conform
from sqlstream.runtime.connectors.kafka.client import (
    LOG,
    METADATA_TIMEOUT_S,
    POLL_TIMEOUT_S,
    TXN_TIMEOUT_S,
    ClientErrors,
    base_config,
    cluster_metadata,
    read_committed_consumer,
    topic_partitions,
)
from sqlstream.runtime.connectors.kafka.layout import Headers
from sqlstream.runtime.connectors.kafka.options import (
    KafkaOptions,
    client_properties,
    record_layout,
)
from sqlstream.runtime.elements import RowKind
from sqlstream.runtime.formats import CHANGELOG_FORMATS

# the messages of a batch of rows: keys, values, timestamps (epoch ms, 0: the producer's time), headers
Records = tuple[list[bytes | None], list[bytes | None], list[int], list[Headers | None]]


def _order(checkpoint_id: int) -> float:
    """Commit order of a checkpoint id: a negative id is the final pre-commit of a bounded job."""
    return math.inf if checkpoint_id < 0 else float(checkpoint_id)


# librdkafka settings this sink uses unless the table sets them ('properties.*'): a 1 ms linger
# (librdkafka's default waits 5 ms for more messages). Measured with a plain producer against
# tansu: 1 ms sends as many messages per second as 5 ms, 0 ms 15-40 % fewer (a request per few
# messages); so a record waits at most 1 ms here.
LATENCY_DEFAULTS = {"linger.ms": 1}


class KafkaSink(SinkWriter):
    """Writes rows as messages of one topic; see the package docstring for the guarantees."""

    upsert: ClassVar[bool] = False  # upsert-kafka's sink: the key columns are the PRIMARY KEY

    def __init__(self, ctx: SinkContext) -> None:
        self._ctx = ctx
        self._table = ctx.table.name
        options = self.read_options(ctx)
        self._topic = options.topic
        self._bootstrap = options.bootstrap_servers
        self._guarantee = options.delivery_guarantee
        self._layout = record_layout(options, ctx.table, upsert=self.upsert)
        self._format = self._layout.value
        self._partitioner = options.partitioner
        self._next_partition = ctx.subtask_index  # round-robin: subtasks start apart
        self._prefix = options.transactional_id_prefix or ""
        self._txid = f"{self._prefix}-{ctx.subtask_index}"
        self._marker_topic = options.marker_topic
        self._errors = ClientErrors()
        self._producer: Producer | None = None
        self._partitions = 0
        self._delivery_error: KafkaError | None = None
        # exactly-once state
        # (partition or -1, key, value, timestamp in epoch ms or 0 for the producer's time, headers or None)
        self._buffer: list[tuple[int, bytes | None, bytes | None, int, Headers | None]] = []
        self._run = uuid.uuid4().hex
        self._run_floor = -math.inf  # highest checkpoint order known in the run continued from a restore
        self._prepared = False
        # (transactional id, run) -> highest committed checkpoint order, from the marker topic
        self._committed: dict[tuple[str, str], float] = {}
        # read lazily, at the first commit: a predecessor of another subtask killed mid-commit can hold
        # the marker topic's stable end back until its transaction times out, and open() must not wait
        self._markers_loaded = False

    @classmethod
    def read_options(cls, ctx: SinkContext) -> KafkaOptions:
        """The typed options (a connector built on this sink, upsert-kafka, maps its own)."""
        return KafkaOptions.from_options(ctx.options, ctx.table.name)

    @property
    def exactly_once(self) -> bool:
        return self._guarantee == "exactly-once"

    # -- opening ---------------------------------------------------------

    def open(self) -> None:
        """Connect; in exactly-once mode also fence predecessors and learn what was committed."""
        if self._producer is not None:
            return
        config: dict[str, Any] = {
            **base_config(self._bootstrap, self._errors),
            **LATENCY_DEFAULTS,
            **client_properties(self._ctx.table),
        }
        if self.exactly_once:
            config["transactional.id"] = self._txid
        producer = Producer(config)
        md = cluster_metadata(producer, self._errors, self._bootstrap, self._table)
        self._partitions = len(topic_partitions(md, self._topic, self._bootstrap, self._table))
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
        admin = AdminClient({**base_config(self._bootstrap, self._errors), **client_properties(self._ctx.table)})
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
        errors = ClientErrors()
        consumer = read_committed_consumer(self._bootstrap, client_properties(self._ctx.table), errors)
        try:
            md = cluster_metadata(consumer, errors, self._bootstrap, self._table)
            partitions = topic_partitions(md, self._marker_topic, self._bootstrap, self._table)
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
                for m in consumer.consume(num_messages=1000, timeout=POLL_TIMEOUT_S):
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
        if batch.num_rows == 0:
            return
        assert self._producer is not None, "open() first"
        batch = conform(batch, self._ctx.schema)
        self._send(self._encode(batch, kinds))

    def _send(self, records: Records) -> None:
        """Produce encoded messages (exactly-once: keep them for the checkpoint's transaction)."""
        assert self._producer is not None, "open() first"
        keys, values, timestamps, headers = records
        partitions = self._assign_partitions(len(values))
        if self.exactly_once:
            self._buffer.extend(zip(partitions, keys, values, timestamps, headers, strict=True))
            return
        for partition, key, value, timestamp, header in zip(partitions, keys, values, timestamps, headers, strict=True):
            self._produce(self._topic, value, key, partition, self._on_delivery, timestamp, header)
        self._producer.poll(0)
        self._check_delivery()

    def _encode(self, batch: pa.RecordBatch, kinds: pa.Array | None) -> Records:
        """The messages (keys, values, timestamps in epoch ms or 0, headers) of the rows: one per row here;
        a changelog format writes update and delete rows as events."""
        if (
            self._format.name not in CHANGELOG_FORMATS
            and kinds is not None
            and pc.any(pc.not_equal(kinds, int(RowKind.INSERT))).as_py()
        ):
            raise ConnectorError(
                f"table '{self._table}': the kafka sink is append-only and cannot write update or delete rows; "
                "use the 'upsert-kafka' connector or a changelog format such as 'format' = 'debezium-json'"
            )
        keys, values, timestamps = self._layout.encode(batch, kinds)
        return keys, values, timestamps, self._layout.headers(batch) or [None] * len(values)

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
        value: bytes | None,
        key: bytes | None,
        partition: int,
        on_delivery: Callable[[KafkaError | None, Message], None] | None = None,
        timestamp: int = 0,
        headers: Headers | None = None,
    ) -> None:
        """Produce one message (``timestamp`` 0: the current time), waiting for room while librdkafka's queue is full."""
        assert self._producer is not None
        deadline = time.monotonic() + TXN_TIMEOUT_S
        extra: dict[str, Any] = {} if on_delivery is None else {"on_delivery": on_delivery}
        if headers:
            extra["headers"] = headers
        while True:
            try:
                self._producer.produce(topic, value=value, key=key, partition=partition, timestamp=timestamp, **extra)
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
        the client's partitioner, key bytes or None, value bytes or None,
        timestamp in epoch milliseconds or 0 for the producer's current time,
        record headers or None).
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
            # older checkpoints hold no timestamp, or no headers
            for partition, key, value, *stamp_and_headers in c["records"]:
                self._produce(c["topic"], value, key, partition, None, *stamp_and_headers)
            self._produce(self._marker_topic, marker, c["transactional_id"].encode(), -1)
            producer.commit_transaction(TXN_TIMEOUT_S)
        except KafkaException as e:
            err = e.args[0]
            if err.txn_requires_abort():
                try:
                    producer.abort_transaction(TXN_TIMEOUT_S)
                except KafkaException as abort_error:
                    LOG.warning("aborting Kafka transaction '%s' failed: %s", self._txid, abort_error)
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
