"""Kafka client plumbing shared by the kafka source and sink: configs, error callbacks, metadata."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import ClusterMetadata

from sqlstream.core.errors import ConnectorError

LOG = logging.getLogger("sqlstream.runtime.connectors.kafka")

# Reaching the cluster (metadata, offsets, the marker topic) fails after this long, not never.
METADATA_TIMEOUT_S = 10.0
# Budget for transactional calls and flushes, which wait for broker acknowledgements.
TXN_TIMEOUT_S = 30.0
# read_batch blocks at most this long when nothing is buffered.
POLL_TIMEOUT_S = 0.05
# librdkafka requires a group.id for a consumer; this one is never joined nor committed to.
_DUMMY_GROUP = "sqlstream-no-group"


class ClientErrors:
    """librdkafka's asynchronous client errors (served by poll/consume/list_topics), kept for checks."""

    def __init__(self) -> None:
        self.brokers_down: KafkaError | None = None
        self.fatal: KafkaError | None = None

    def __call__(self, err: KafkaError) -> None:
        if err.code() == KafkaError._ALL_BROKERS_DOWN:
            self.brokers_down = err
        elif err.fatal():
            self.fatal = err
        LOG.debug("kafka client error: %s", err)


def base_config(bootstrap: str, errors: ClientErrors) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "error_cb": errors, "logger": LOG}


def cluster_metadata(
    client: Consumer | Producer, errors: ClientErrors, bootstrap: str, table: str
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


def topic_partitions(md: ClusterMetadata, topic: str, bootstrap: str, table: str) -> list[int]:
    meta = md.topics.get(topic)
    if meta is None:
        raise ConnectorError(f"table '{table}': Kafka topic '{topic}' does not exist on '{bootstrap}'")
    if meta.error is not None:
        raise ConnectorError(f"table '{table}': Kafka topic '{topic}' on '{bootstrap}': {meta.error.str()}")
    return sorted(meta.partitions)


def read_committed_consumer(bootstrap: str, properties: Mapping[str, str], errors: ClientErrors) -> Consumer:
    """A consumer for assign() at explicit offsets that reports partition ends; it commits only when told to."""
    config: dict[str, Any] = {
        **base_config(bootstrap, errors),
        "group.id": _DUMMY_GROUP,
        "auto.offset.reset": "error",
        **properties,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
    }
    return Consumer(config)
