"""The kafka source: this subtask's partitions of a topic, read committed (see the package docstring)."""

from __future__ import annotations

import time
from typing import Any, ClassVar

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from sqlstream.core.errors import ConnectorError
from sqlstream.runtime.connectors.base import SourceContext, SourceReader
from sqlstream.runtime.connectors.kafka.client import (
    LOG,
    METADATA_TIMEOUT_S,
    POLL_TIMEOUT_S,
    ClientErrors,
    cluster_metadata,
    read_committed_consumer,
    topic_partitions,
)
from sqlstream.runtime.connectors.kafka.options import (
    KafkaOptions,
    client_properties,
    commits_on_checkpoint,
    record_layout,
)
from sqlstream.runtime.formats import Locate, split_row_kinds


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


# librdkafka settings this source uses unless the table sets them ('properties.*'). A short fetch
# wait: a broker that answers a fetch only when the wait is over (tansu does, whatever
# fetch.min.bytes says) holds each record half of it on average (100 ms: p50 about 29 ms, 5 ms:
# 2.8 ms, benchmarks/latency.py); with a backlog fetches come back full at once, so throughput
# does not change. It also bounds how long open() waits for the first fetch of an idle partition.
LATENCY_DEFAULTS = {"fetch.wait.max.ms": 5}


class KafkaSource(SourceReader):
    """Reads this subtask's partitions of one topic; see the package docstring."""

    upsert: ClassVar[bool] = False  # upsert-kafka's source: tombstones are deletions of their key

    def __init__(self, ctx: SourceContext) -> None:
        self._ctx = ctx
        self._table = ctx.table.name
        options = self.read_options(ctx)
        self._topic = options.topic
        self._bootstrap = options.bootstrap_servers
        self._layout = record_layout(options, ctx.table, ctx.columns, self.upsert)
        self._format = self._layout.value
        self._startup = options.startup_mode
        self._specific = options.specific_offsets
        self._startup_ms = options.startup_timestamp_ms
        self._properties = client_properties(ctx.table)
        if self._properties.get("auto.offset.reset", "").lower() == "none":  # Flink's spelling of librdkafka's
            self._properties["auto.offset.reset"] = "error"
        # offsets are committed to the group when checkpoints complete, unless turned off (as in Flink)
        self._group = self._properties.get("group.id")
        self._commit = self._group is not None and commits_on_checkpoint(ctx.table)
        self._taken: dict[int, dict[int, int]] = {}  # checkpoint id -> positions, until it completes
        self.bounded = options.bounded_mode == "latest-offset"
        self._errors = ClientErrors()
        self._consumer: Consumer | None = None
        self._partitions: list[int] = []
        self._positions: dict[int, int] = {}  # partition -> next offset to return
        self._restored: dict[int, int] = {}
        self._end: dict[int, int] = {}  # bounded mode: partition -> high watermark when reading began
        self._done: set[int] = set()  # bounded mode: partitions read up to their end
        # Consumed but not yet returned: partition -> (messages, end-of-partition offset seen after them).
        self._pending: dict[int, tuple[list[Message], int | None]] = {}
        self._split: str | None = None
        self._seeking: set[int] = set()  # 'timestamp' mode: partitions not yet at the startup time
        self._kinds: pa.Array | None = None  # RowKinds of the last batch (a changelog format)

    @classmethod
    def read_options(cls, ctx: SourceContext) -> KafkaOptions:
        """The typed options (a connector built on this source, upsert-kafka, maps its own)."""
        return KafkaOptions.from_options(ctx.options, ctx.table.name)

    def open(self) -> None:
        consumer = read_committed_consumer(
            self._bootstrap, {**LATENCY_DEFAULTS, "on_commit": self._on_commit, **self._properties}, self._errors
        )
        self._consumer = consumer
        md = cluster_metadata(consumer, self._errors, self._bootstrap, self._table)
        everything = topic_partitions(md, self._topic, self._bootstrap, self._table)
        ctx = self._ctx
        self._partitions = [p for p in everything if p % ctx.parallelism == ctx.subtask_index]
        fresh = [p for p in self._partitions if p not in self._restored]
        if self._startup == "timestamp":
            self._seeking = set(fresh)
        found: dict[int, int] = {}
        if self._startup in ("group-offsets", "timestamp"):
            found = self._lookup_start(fresh)
        elif self._startup == "specific-offsets" and self._group is not None:
            # as Flink's specified-offsets initializer: unlisted partitions resume from the group's offsets
            found = self._lookup_start([p for p in fresh if p not in self._specific])
        for p in self._partitions:
            low, high = _watermarks(consumer, self._topic, p, self._table)
            self._positions[p] = self._start_offset(p, low, high, found.get(p, -1))
        consumer.assign([TopicPartition(self._topic, p, self._positions[p]) for p in self._partitions])
        if self.bounded:
            self._await_end_offsets()

    def _lookup_start(self, partitions: list[int]) -> dict[int, int]:
        """The group's committed offsets (timestamp mode: the first offset at or after the time).

        -1 where there is none.
        """
        assert self._consumer is not None
        if not partitions:
            return {}
        try:
            if self._startup != "timestamp":
                asked = [TopicPartition(self._topic, p) for p in partitions]
                answer = self._consumer.committed(asked, timeout=METADATA_TIMEOUT_S)
            else:
                asked = [TopicPartition(self._topic, p, self._startup_ms) for p in partitions]
                answer = self._consumer.offsets_for_times(asked, timeout=METADATA_TIMEOUT_S)
        except KafkaException as e:
            what = f"the offsets of consumer group '{self._group}'" if self._startup != "timestamp" else (
                f"the offsets at timestamp {self._startup_ms}")
            raise ConnectorError(
                f"table '{self._table}': cannot read {what} for topic '{self._topic}': {e.args[0].str()}"
            ) from None
        return {tp.partition: tp.offset if tp.offset >= 0 else -1 for tp in answer}

    def _start_offset(self, partition: int, low: int, high: int, found: int) -> int:
        """Where a partition starts: a restored position, else per 'scan.startup.mode' (``found``: the
        group's committed offset or the offset for the startup timestamp, -1 for none)."""
        if partition in self._restored:
            return self._restored[partition]
        if self._startup == "latest-offset":
            return high
        if self._startup == "specific-offsets" and partition in self._specific:
            return self._specific[partition]
        if self._startup == "timestamp":
            return found if found >= 0 else high  # no record at or after the timestamp: the end
        if self._startup == "group-offsets" and found < 0:
            reset = self._properties.get("auto.offset.reset", "error").lower()
            if reset in ("earliest", "smallest", "beginning"):
                return low
            if reset in ("latest", "largest", "end"):
                return high
            raise ConnectorError(
                f"table '{self._table}': consumer group '{self._group}' has no committed offset for topic "
                f"'{self._topic}' partition {partition}, and 'properties.auto.offset.reset' is '{reset}' "
                "(set it to 'earliest' or 'latest' to start without one, as in Flink)"
            )
        if self._startup == "group-offsets":
            return found
        if self._startup == "specific-offsets" and found >= 0:
            return found  # a partition it does not list, with a committed group offset
        return low  # earliest-offset, and partitions specific-offsets does not list (nor the group)

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
        # What the consumer hands over may hold no row (an end-of-partition event, a record
        # filtered out): poll again within the budget rather than return None, for which the
        # subtask would sleep before the next call while a record may be arriving.
        deadline = time.monotonic() + POLL_TIMEOUT_S
        while True:
            if not self._pending:
                self._fill(deadline - time.monotonic())
            while self._pending:
                partition = next(iter(self._pending))
                messages, eof = self._pending.pop(partition)
                batch = self._take(partition, messages, eof)
                if batch is not None:
                    return batch
            if self.finished or time.monotonic() >= deadline:
                return None

    def _fill(self, timeout_s: float) -> None:
        """What the consumer holds now (up to a batch), grouped by partition in arrival order.

        consume() with a timeout waits for a whole batch or the timeout, so a record arriving
        at a low rate would wait that long: take what is there without waiting, and when there
        is nothing, wait up to ``timeout_s`` for the first message only (poll returns as it arrives).
        """
        consumer = self._consumer
        assert consumer is not None, "open() first"
        batch = self._ctx.batch_size
        messages = consumer.consume(num_messages=batch, timeout=0)
        if not messages:
            first = consumer.poll(max(timeout_s, 0.0))
            if first is None:
                return
            messages = [first, *consumer.consume(num_messages=batch - 1, timeout=0)] if batch > 1 else [first]
        for m in messages:
            partition = m.partition()
            messages, eof = self._pending.get(partition, ([], None))
            err = m.error()
            if err is None:
                messages.append(m)
            elif err.code() == KafkaError._PARTITION_EOF:
                eof = m.offset()
            elif err.retriable():
                LOG.debug("topic '%s' partition %s: %s", self._topic, partition, err.str())
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
        kinds: pa.Array | None = None
        if messages:
            after = messages[-1].offset() + 1
            if partition in self._seeking:
                messages = self._skip_earlier(partition, messages)
            if messages:
                offsets = [m.offset() for m in messages]
                topic = self._topic
                batch, kinds = self._decode(
                    messages, lambda i: f"topic '{topic}' partition {partition} offset {offsets[i]}"
                )
            self._positions[partition] = after
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
        self._kinds = kinds
        return batch

    def _skip_earlier(self, partition: int, messages: list[Message]) -> list[Message]:
        """'timestamp' mode: drop the records before the first one at or after the startup time.

        The broker's ListOffsets answer already points there; this also holds where a broker
        answers by record batch or not at all (tansu answers offset 0 for every timestamp).
        """
        for i, m in enumerate(messages):
            if m.timestamp()[1] >= (self._startup_ms or 0):
                self._seeking.discard(partition)
                return messages[i:]
        return []

    def _decode(self, messages: list[Message], where: Locate) -> tuple[pa.RecordBatch, pa.Array | None]:
        """The rows of one partition's messages and their RowKinds (None: inserts)."""
        return split_row_kinds(self._layout.decode(messages, where))

    @property
    def current_kinds(self) -> pa.Array | None:
        return self._kinds

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
        return self._format.parse_errors + self._layout.key_parse_errors

    def snapshot_position(self) -> Any:
        return dict(self._positions)

    def restore_position(self, position: Any) -> None:
        """Resume at ``{partition: next offset}``; partitions it does not list start per scan.startup.mode."""
        self._restored = {int(p): int(o) for p, o in (position or {}).items()}

    def checkpoint_taken(self, checkpoint_id: int) -> None:
        """Remember the positions the checkpoint holds, to commit them to the group once it completes."""
        if self._commit:
            self._taken[checkpoint_id] = dict(self._positions)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Commit the checkpoint's positions to 'properties.group.id' (asynchronously, as Flink's KafkaSource
        does) so that lag tools see progress; the checkpoints stay the source of truth for restores."""
        position = self._taken.get(checkpoint_id)
        self._taken = {k: v for k, v in self._taken.items() if k > checkpoint_id}
        if not self._commit or self._consumer is None or not position:
            return
        offsets = [TopicPartition(self._topic, p, o) for p, o in position.items()]
        try:
            self._consumer.commit(offsets=offsets, asynchronous=True)
        except KafkaException as e:  # a failed commit only delays what lag tools see, as in Flink
            LOG.warning("table '%s': committing offsets of checkpoint %s to group '%s' failed: %s",
                        self._table, checkpoint_id, self._group, e.args[0].str())

    def _on_commit(self, err: KafkaError | None, _partitions: list[TopicPartition]) -> None:
        if err is not None:
            LOG.warning("table '%s': committing offsets to group '%s' failed: %s", self._table, self._group, err.str())

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        self._pending = {}
