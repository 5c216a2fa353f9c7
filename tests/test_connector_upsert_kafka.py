"""Changelogs through Kafka against a real broker (tansu): the kafka connector with the changelog formats,
and the upsert-kafka connector (keys, tombstones, compaction to the latest row per key on reading)."""

from __future__ import annotations

import datetime
import json
import time
import types
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from sqlstream.core.errors import ConnectorError, DataError, PlanError
from sqlstream.core.tables import ColumnDef, TableDef
from sqlstream.core.types import parse_type
from sqlstream.frontend.session import Session
from sqlstream.runtime.clock import ManualClock
from sqlstream.runtime.connectors.base import SinkContext, SourceContext
from sqlstream.runtime.connectors.registry import get_connector
from sqlstream.runtime.elements import RowKind
from tests.conftest import run_sql
from tests.test_format_protobuf import MODULE as PB_MODULE
from tests.test_format_protobuf import pb as protobuf_classes  # noqa: F401 - a fixture: the message classes

pytest_plugins = ("tests.kafka_broker",)

UPSERT = get_connector("upsert-kafka")
INS, UB, UA, D = (int(k) for k in RowKind)


def new_topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the topic exists
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)
    return name


def messages(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) of every committed message, in partition order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "raw", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "enable.partition.eof": True})
    partitions = sorted(consumer.list_topics(timeout=5).topics[topic].partitions)
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    out: list[tuple[bytes | None, bytes | None]] = []
    done: set[int] = set()
    deadline = time.monotonic() + 10
    while len(done) < len(partitions):
        assert time.monotonic() < deadline
        for m in consumer.consume(100, 0.05):
            if m.error() is None:
                out.append((m.key(), m.value()))
            elif m.error().code() == KafkaError._PARTITION_EOF:
                done.add(m.partition())
    consumer.close()
    return out


def produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for key, value in records:
        producer.produce(topic, key=key, value=value, partition=0)
    assert producer.flush(10) == 0


def words(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / f"w-{uuid.uuid4().hex[:6]}.csv"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def rows(table: pa.Table) -> list[tuple]:
    return sorted(zip(*(c.to_pylist() for c in table.columns), strict=True))


def upsert_ddl(name: str, bootstrap: str, topic: str, extra: str = "") -> str:
    return f"""
        CREATE TABLE {name} (k STRING, c BIGINT, PRIMARY KEY (k) NOT ENFORCED)
        WITH ('connector' = 'upsert-kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{bootstrap}',
              'key.format' = 'json', 'value.format' = 'json', 'scan.bounded.mode' = 'latest-offset'{extra});
    """


@pytest.mark.parametrize("fmt", ["debezium-json", "canal-json", "maxwell-json"])
def test_changelog_format_round_trips_through_a_topic(kafka_broker: str, tmp_path: Path, fmt: str) -> None:
    topic = new_topic(kafka_broker)
    ddl = f"""
        CREATE TABLE cdc (k STRING, c BIGINT)
        WITH ('connector' = 'kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{kafka_broker}',
              'format' = '{fmt}', 'scan.bounded.mode' = 'latest-offset');
        CREATE TABLE src (k STRING) WITH ('connector' = 'filesystem', 'path' = '{words(tmp_path, "a", "b", "a")}',
                                          'format' = 'csv');
    """
    run_sql(ddl + "INSERT INTO cdc SELECT k, COUNT(*) FROM src GROUP BY k; SELECT 1;")
    assert rows(run_sql(ddl + "SELECT * FROM cdc;")) == [("a", 2), ("b", 1)]
    # A GROUP BY over the topic retracts the replaced counts: every word once, whatever its count was.
    assert rows(run_sql(ddl + "SELECT COUNT(*) AS words, SUM(c) AS total FROM cdc;")) == [(2, 3)]


def test_plain_kafka_sink_refuses_updates_naming_the_alternatives(kafka_broker: str) -> None:
    topic = new_topic(kafka_broker)
    with pytest.raises(PlanError, match="'upsert-kafka', or a changelog format such as 'format' = 'debezium-json'"):
        run_sql(f"""
            CREATE TABLE k (w STRING, c BIGINT)
            WITH ('connector' = 'kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{kafka_broker}',
                  'format' = 'json');
            INSERT INTO k SELECT w, COUNT(*) FROM (VALUES ('a'), ('a')) AS t(w) GROUP BY w;
            SELECT 1;
        """)


def test_malformed_envelope_in_a_topic_names_topic_partition_and_offset(kafka_broker: str) -> None:
    topic = new_topic(kafka_broker)
    good = json.dumps({"before": None, "after": {"k": "a", "c": 1}, "op": "c"}).encode()
    produce(kafka_broker, topic, [(None, good), (None, b'{"before": null, "after": {"k": "b"}, "op": "z"}')])
    ddl = f"""
        CREATE TABLE cdc (k STRING, c BIGINT)
        WITH ('connector' = 'kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{kafka_broker}',
              'format' = 'debezium-json', 'scan.bounded.mode' = 'latest-offset'{{}});
    """
    with pytest.raises(Exception, match=f"topic '{topic}' partition 0 offset 1: Unknown \"op\" value \"z\""):
        run_sql(ddl.format("") + "SELECT * FROM cdc;")
    lenient = ddl.format(", 'debezium-json.ignore-parse-errors' = 'true'")
    assert rows(run_sql(lenient + "SELECT * FROM cdc;")) == [("a", 1)]


def test_upsert_kafka_writes_keys_values_and_tombstones_and_reads_the_latest_row(
    kafka_broker: str, tmp_path: Path
) -> None:
    topic = new_topic(kafka_broker)
    changes = tmp_path / "changes.json"
    events = [
        {"before": None, "after": {"k": "a", "c": 1}, "op": "c"},
        {"before": None, "after": {"k": "b", "c": 5}, "op": "c"},
        {"before": {"k": "a", "c": 1}, "after": {"k": "a", "c": 2}, "op": "u"},
        {"before": {"k": "b", "c": 5}, "after": None, "op": "d"},
        {"before": None, "after": {"k": "c", "c": 7}, "op": "c"},
    ]
    changes.write_text("".join(json.dumps(e) + "\n" for e in events))
    ddl = upsert_ddl("u", kafka_broker, topic) + f"""
        CREATE TABLE changes (k STRING, c BIGINT, PRIMARY KEY (k) NOT ENFORCED)
        WITH ('connector' = 'filesystem', 'path' = '{changes}', 'format' = 'debezium-json');
    """
    run_sql(ddl + "INSERT INTO u SELECT * FROM changes; SELECT 1;")
    written = [(json.loads(k), None if v is None else json.loads(v)) for k, v in messages(kafka_broker, topic)]
    assert written == [
        ({"k": "a"}, {"k": "a", "c": 1}),
        ({"k": "b"}, {"k": "b", "c": 5}),
        ({"k": "a"}, {"k": "a", "c": 2}),  # the -U before it is superseded: no tombstone, as Flink writes it
        ({"k": "b"}, None),
        ({"k": "c"}, {"k": "c", "c": 7}),
    ]
    assert rows(run_sql(ddl + "SELECT * FROM u;")) == [("a", 2), ("c", 7)]
    # Downstream of the normalization, retractions remove what was counted: b and the old a are gone.
    assert rows(run_sql(ddl + "SELECT COUNT(*) AS n, SUM(c) AS total FROM u;")) == [(2, 9)]


@pytest.mark.parametrize("parallelism", ["1", "2"])
def test_upsert_source_compacts_raw_upserts_and_tombstones(kafka_broker: str, parallelism: str) -> None:
    topic = new_topic(kafka_broker)

    def kv(k: str, c: int | None) -> tuple[bytes, bytes | None]:
        key = json.dumps({"k": k}).encode()
        return key, None if c is None else json.dumps({"k": k, "c": c}).encode()

    produce(kafka_broker, topic, [
        kv("a", 1), kv("b", 1), kv("a", 3), kv("x", None),  # a tombstone of a key never written: nothing
        kv("b", None), kv("c", 4), kv("c", 4), kv("b", 6), (None, None),
    ])
    ddl = upsert_ddl("u", kafka_broker, topic)
    config = {"parallelism.default": parallelism}
    assert rows(run_sql(ddl + "SELECT * FROM u;", config)) == [("a", 3), ("b", 6), ("c", 4)]
    assert rows(run_sql(ddl + "SELECT c, COUNT(*) AS n FROM u GROUP BY c;", config)) == [(3, 1), (4, 1), (6, 1)]


def test_upsert_kafka_exactly_once_sink_commits_in_transactions(kafka_broker: str) -> None:
    topic = new_topic(kafka_broker)
    columns = (ColumnDef("k", parse_type("STRING")), ColumnDef("c", parse_type("BIGINT")))
    table = TableDef("u", columns, {
        "connector": "upsert-kafka", "topic": topic, "properties.bootstrap.servers": kafka_broker,
        "key.format": "json", "value.format": "json", "sink.delivery-guarantee": "exactly-once",
        "sink.transactional-id-prefix": f"p-{topic}",
    }, primary_key=("k",))
    schema = pa.schema([("k", pa.string()), ("c", pa.int64())])
    writer = UPSERT.create_sink(SinkContext(table, UPSERT.validate(table), schema, updating=True))
    writer.open()
    writer.write(pa.RecordBatch.from_pylist([{"k": "a", "c": 1}, {"k": "a", "c": 1}], schema=schema),
                 pa.array([INS, UB], pa.int8()))  # a -U not upserted again in its batch: a tombstone
    writer.write(pa.RecordBatch.from_pylist([{"k": "a", "c": 2}], schema=schema), pa.array([UA], pa.int8()))
    assert messages(kafka_broker, topic) == []  # nothing before the checkpoint commits
    committable = writer.prepare_commit(1)
    writer.commit([committable])
    writer.commit([committable])  # idempotent
    writer.close()
    assert [(k, v) for k, v in messages(kafka_broker, topic)] == [
        (b'{"k":"a"}', b'{"k":"a","c":1}'), (b'{"k":"a"}', None), (b'{"k":"a"}', b'{"k":"a","c":2}'),
    ]
    reader = UPSERT.create_source(SourceContext(
        TableDef("u", columns, {**table.options, "scan.bounded.mode": "latest-offset"}, primary_key=("k",)),
        UPSERT.validate(TableDef("u", columns, {**table.options, "scan.bounded.mode": "latest-offset"},
                                 primary_key=("k",))),
        ["k", "c"],
    ))
    reader.open()
    got: list[tuple[dict, int]] = []
    deadline = time.monotonic() + 10
    while not reader.finished:
        assert time.monotonic() < deadline
        batch = reader.read_batch()
        if batch is not None:
            got += list(zip(batch.to_pylist(), reader.current_kinds.to_pylist(), strict=True))
    reader.close()
    assert got == [({"k": "a", "c": 1}, INS), ({"k": "a", "c": None}, D), ({"k": "a", "c": 2}, INS)]


@pytest.mark.parametrize(
    ("ddl", "message"),
    [
        ("CREATE TABLE u (k STRING, c BIGINT) WITH ({opts})", "require to define a PRIMARY KEY constraint"),
        ("CREATE TABLE u (k STRING, c BIGINT, PRIMARY KEY (k) NOT ENFORCED) WITH ({opts}, 'key.csv.field-delimiter' = ';')",
         "applies to key format 'csv', but the table's 'key.format' is 'json'"),
        ("CREATE TABLE u (k STRING, c BIGINT, PRIMARY KEY (k) NOT ENFORCED) WITH ({opts}, 'value.fields-include' = 'NONE')",
         "must be one of all, except_key"),
        ("CREATE TABLE u (k STRING, c BIGINT, PRIMARY KEY (k) NOT ENFORCED) WITH ({opts}, 'key.fields-prefix' = 'k_')",
         "a key prefix is not allowed when option 'value.fields-include' is set to 'ALL'"),
        ("CREATE TABLE u (k STRING, c BIGINT, PRIMARY KEY (k) NOT ENFORCED) WITH ({opts}, 'key.fields-prefix' = 'k_', "
         "'value.fields-include' = 'EXCEPT_KEY')", "field 'k' is not prefixed"),
        ("CREATE TABLE u (k STRING, c BIGINT, PRIMARY KEY (k) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', "
         "'topic' = 't', 'properties.bootstrap.servers' = 'localhost:1', 'key.format' = 'debezium-json', "
         "'value.format' = 'json')",
         "'upsert-kafka' connector doesn't support 'debezium-json' as key format, because 'debezium-json' is not in "
         "insert-only mode."),
        ("CREATE TABLE u (k STRING, c BIGINT, PRIMARY KEY (k) NOT ENFORCED) WITH ({opts}, 'key.fields' = 'k')",
         "unknown option 'key.fields' for connector 'upsert-kafka'"),
    ],
)
def test_upsert_kafka_table_checks(ddl: str, message: str) -> None:
    opts = ("'connector' = 'upsert-kafka', 'topic' = 't', 'properties.bootstrap.servers' = 'localhost:1', "
            "'key.format' = 'json', 'value.format' = 'json'")
    with pytest.raises((ConnectorError, PlanError), match=message):
        run_sql(ddl.format(opts=opts) + "; SELECT * FROM u;")


def test_upsert_kafka_without_value_format_is_refused() -> None:
    with pytest.raises((ConnectorError, PlanError), match="requires option 'value.format'"):
        run_sql("""CREATE TABLE u (k STRING, PRIMARY KEY (k) NOT ENFORCED) WITH ('connector' = 'upsert-kafka',
                   'topic' = 't', 'properties.bootstrap.servers' = 'x:1', 'key.format' = 'json'); SELECT * FROM u;""")


def test_key_decoding_errors_name_the_message(kafka_broker: str) -> None:
    topic = new_topic(kafka_broker)
    produce(kafka_broker, topic, [(b"not json", None)])
    with pytest.raises(DataError, match=f"topic '{topic}' partition 0 offset 0 \\(key\\)"):
        run_sql(upsert_ddl("u", kafka_broker, topic) + "SELECT * FROM u;")


def test_planner_normalizes_an_upsert_source_by_its_key_even_when_the_key_is_not_selected() -> None:
    from sqlstream.frontend.session import Session

    session = Session()
    session.execute_script(upsert_ddl("u", "localhost:1", "t"))
    plan = session.execute_script("EXPLAIN SELECT SUM(c) FROM u;")[-1].message
    assert "Scan(table=u, connector=upsert-kafka, columns=[k, c], changelog=upsert)" in plan
    assert "ChangelogNormalize: ChangelogNormalize(key=[k])  (hash[$0] <- #0)" in plan


def test_upsert_kafka_except_key_keeps_the_key_out_of_the_value(kafka_broker: str) -> None:
    topic = new_topic(kafka_broker)
    ddl = f"""
        CREATE TABLE u (k STRING, c BIGINT, note STRING, PRIMARY KEY (k) NOT ENFORCED)
        WITH ('connector' = 'upsert-kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{kafka_broker}',
              'key.format' = 'csv', 'value.format' = 'json', 'value.fields-include' = 'EXCEPT_KEY',
              'scan.bounded.mode' = 'latest-offset');
    """
    run_sql(ddl + """INSERT INTO u SELECT w, COUNT(*), MAX(w) FROM (VALUES ('a'), ('b'), ('a')) AS t(w) GROUP BY w;
                     SELECT 1;""")
    written = messages(kafka_broker, topic)
    assert {k for k, _ in written} == {b"a", b"b"}
    assert all(v is None or b'"k"' not in v for _, v in written)
    assert rows(run_sql(ddl + "SELECT * FROM u;")) == [("a", 2, "a"), ("b", 1, "b")]
    assert rows(run_sql(ddl + "SELECT k FROM u;")) == [("a",), ("b",)]


def test_upsert_sink_writes_a_retraction_upserted_again_in_its_batch_as_the_upsert_only(kafka_broker: str) -> None:
    topic = new_topic(kafka_broker)
    columns = (ColumnDef("k", parse_type("STRING")), ColumnDef("c", parse_type("BIGINT")))
    table = TableDef("u", columns, {
        "connector": "upsert-kafka", "topic": topic, "properties.bootstrap.servers": kafka_broker,
        "key.format": "json", "value.format": "json",
    }, primary_key=("k",))
    schema = pa.schema([("k", pa.string()), ("c", pa.int64())])
    writer = UPSERT.create_sink(SinkContext(table, UPSERT.validate(table), schema, updating=True))
    writer.open()
    rows_in = [("a", 1), ("b", 1), ("a", 1), ("a", 2), ("b", 1), ("c", 3), ("c", 3)]
    writer.write(pa.RecordBatch.from_pylist([{"k": k, "c": c} for k, c in rows_in], schema=schema),
                 pa.array([INS, INS, UB, UA, D, INS, UB], pa.int8()))
    writer.prepare_commit(1)
    writer.close()
    assert messages(kafka_broker, topic) == [
        (b'{"k":"a"}', b'{"k":"a","c":1}'), (b'{"k":"b"}', b'{"k":"b","c":1}'), (b'{"k":"a"}', b'{"k":"a","c":2}'),
        (b'{"k":"b"}', None), (b'{"k":"c"}', b'{"k":"c","c":3}'), (b'{"k":"c"}', None),
    ]


def test_upsert_kafka_metadata_columns_are_written_and_read_as_kafkas(kafka_broker: str) -> None:
    """Flink's upsert-kafka offers the kafka connector's metadata: 'timestamp' and 'headers' are written with
    each upsert and tombstone, and read back with 'partition' and 'offset' (a tombstone's too)."""
    topic = new_topic(kafka_broker)
    ddl = f"""
        CREATE TABLE u (k STRING, c BIGINT, ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp',
                        h MAP<STRING, BYTES> METADATA FROM 'headers', `offset` BIGINT METADATA VIRTUAL,
                        PRIMARY KEY (k) NOT ENFORCED)
        WITH ('connector' = 'upsert-kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{kafka_broker}',
              'key.format' = 'json', 'value.format' = 'json', 'scan.bounded.mode' = 'latest-offset');
    """
    run_sql(ddl + """INSERT INTO u VALUES
        ('a', 1, TO_TIMESTAMP_LTZ(1700000000123, 3), MAP['trace', CAST('t-1' AS BYTES)]),
        ('b', 2, TO_TIMESTAMP_LTZ(1700000000456, 3), CAST(NULL AS MAP<STRING, BYTES>)); SELECT 1;""")
    consumer = Consumer({"bootstrap.servers": kafka_broker, "group.id": "raw"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = [(m.key(), m.value(), m.timestamp()[1], m.headers()) for m in consumer.consume(2, 10)]
    consumer.close()
    assert got == [(b'{"k":"a"}', b'{"k":"a","c":1}', 1700000000123, [("trace", b"t-1")]),
                   (b'{"k":"b"}', b'{"k":"b","c":2}', 1700000000456, None)]
    producer = Producer({"bootstrap.servers": kafka_broker})
    producer.produce(topic, key=b'{"k":"b"}', value=None, partition=0, timestamp=1700000000789,
                     headers=[("why", b"gone")])
    assert producer.flush(10) == 0
    result = run_sql(ddl + "SELECT k, c, ts, h, `offset` FROM u;")
    assert result.to_pylist() == [{"k": "a", "c": 1, "ts": datetime.datetime(2023, 11, 14, 22, 13, 20, 123000,
                                                                            tzinfo=datetime.UTC),
                                   "h": [("trace", b"t-1")], "offset": 0}]
    # the source itself: the tombstone is a deletion of its key carrying its own metadata
    session = Session()
    session.execute_script(ddl)
    tdef = session.catalog.get("u")
    assert isinstance(tdef, TableDef)
    reader = UPSERT.create_source(SourceContext(tdef, UPSERT.validate(tdef), ["k", "c", "h", "offset"]))
    reader.open()
    read: list[tuple[dict, int]] = []
    deadline = time.monotonic() + 10
    while not reader.finished:
        assert time.monotonic() < deadline
        batch = reader.read_batch()
        if batch is not None:
            read += list(zip(batch.to_pylist(), reader.current_kinds.to_pylist(), strict=True))
    reader.close()
    assert read == [({"k": "a", "c": 1, "h": [("trace", b"t-1")], "offset": 0}, INS),
                    ({"k": "b", "c": 2, "h": [], "offset": 1}, INS),
                    ({"k": "b", "c": None, "h": [("why", b"gone")], "offset": 2}, D)]


def test_upsert_kafka_protobuf_key_and_value(kafka_broker: str, protobuf_classes: types.ModuleType) -> None:  # noqa: F811
    """Flink allows any insert-only format for upsert-kafka's key and value, protobuf among them."""
    topic = new_topic(kafka_broker)
    event = f"{PB_MODULE}.Event"
    ddl = f"""
        CREATE TABLE u (plain INT, label STRING, PRIMARY KEY (plain) NOT ENFORCED)
        WITH ('connector' = 'upsert-kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{kafka_broker}',
              'key.format' = 'protobuf', 'key.protobuf.message-class-name' = '{event}',
              'value.format' = 'protobuf', 'value.protobuf.message-class-name' = '{event}',
              'scan.bounded.mode' = 'latest-offset');
    """
    run_sql(ddl + """INSERT INTO u SELECT n, MAX(w) FROM (VALUES (1, 'a'), (2, 'b'), (1, 'c')) AS t(n, w) GROUP BY n;
                     SELECT 1;""")
    pb = protobuf_classes
    written = messages(kafka_broker, topic)
    assert written and all(pb.Event.FromString(k).label == "" for k, _ in written)  # the key holds 'plain' only
    latest = {pb.Event.FromString(k).plain: v for k, v in written}
    assert {p: (pb.Event.FromString(v).plain, pb.Event.FromString(v).label) for p, v in latest.items()} == {
        1: (1, "c"), 2: (2, "b")}
    produce(kafka_broker, topic, [(pb.Event(plain=2).SerializeToString(), None)])  # a tombstone deletes key 2
    assert rows(run_sql(ddl + "SELECT * FROM u;")) == [(1, "c")]


def test_upsert_kafka_sink_buffer_keeps_the_last_change_per_key_until_full_due_or_checkpointed(
    kafka_broker: str,
) -> None:
    """Flink's sink.buffer-flush.max-rows / .interval (ReducingUpsertSink): one message per key and flush."""
    topic = new_topic(kafka_broker)
    columns = (ColumnDef("k", parse_type("STRING")), ColumnDef("c", parse_type("BIGINT")))
    table = TableDef("u", columns, {
        "connector": "upsert-kafka", "topic": topic, "properties.bootstrap.servers": kafka_broker,
        "key.format": "json", "value.format": "json", "sink.buffer-flush.max-rows": "3",
        "sink.buffer-flush.interval": "10 s",
    }, primary_key=("k",))
    schema = pa.schema([("k", pa.string()), ("c", pa.int64())])
    clock = ManualClock()
    writer = UPSERT.create_sink(SinkContext(table, UPSERT.validate(table), schema, updating=True, clock=clock))
    writer.open()

    def write(changes: list[tuple[str, int, int]]) -> None:
        writer.write(pa.RecordBatch.from_pylist([{"k": k, "c": c} for k, c, _ in changes], schema=schema),
                     pa.array([kind for _, _, kind in changes], pa.int8()))

    write([("a", 1, INS), ("a", 1, UB), ("a", 2, UA), ("b", 1, INS), ("b", 1, D)])  # two keys buffered
    writer.prepare_commit(1)  # a checkpoint writes the buffer: a's last row, b's tombstone
    write([("c", 1, INS), ("d", 1, INS), ("c", 1, UB), ("c", 5, UA)])
    assert len(messages(kafka_broker, topic)) == 2  # c and d wait: the buffer holds 2 of 3 keys
    clock.advance(10_000)
    write([("d", 7, UA)])  # the interval has passed since the last flush: written
    writer.write(pa.RecordBatch.from_pylist([{"k": "e", "c": 1}], schema=schema), None)
    writer.write(pa.RecordBatch.from_pylist([{"k": "f", "c": 1}, {"k": "g", "c": 1}], schema=schema), None)
    writer.prepare_commit(2)  # e, f and g filled the buffer (max-rows 3): written when full
    writer.close()
    assert messages(kafka_broker, topic) == [
        (b'{"k":"a"}', b'{"k":"a","c":2}'), (b'{"k":"b"}', None),
        (b'{"k":"c"}', b'{"k":"c","c":5}'), (b'{"k":"d"}', b'{"k":"d","c":7}'),
        (b'{"k":"e"}', b'{"k":"e","c":1}'), (b'{"k":"f"}', b'{"k":"f","c":1}'), (b'{"k":"g"}', b'{"k":"g","c":1}'),
    ]


def test_upsert_kafka_buffer_options_go_together() -> None:
    with pytest.raises((ConnectorError, PlanError), match="'sink.buffer-flush.max-rows' and 'sink.buffer-flush.interval' "
                                                         "must be set to be greater than zero together"):
        run_sql("""CREATE TABLE u (k STRING, PRIMARY KEY (k) NOT ENFORCED) WITH ('connector' = 'upsert-kafka',
                   'topic' = 't', 'properties.bootstrap.servers' = 'x:1', 'key.format' = 'json',
                   'value.format' = 'json', 'sink.buffer-flush.max-rows' = '10'); SELECT * FROM u;""")


def test_upsert_kafka_key_fields_prefix_names_the_key_columns_without_it_in_the_key(kafka_broker: str) -> None:
    topic = new_topic(kafka_broker)
    ddl = f"""
        CREATE TABLE u (k_id INT, name STRING, PRIMARY KEY (k_id) NOT ENFORCED)
        WITH ('connector' = 'upsert-kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{kafka_broker}',
              'key.format' = 'json', 'key.fields-prefix' = 'k_', 'value.format' = 'json',
              'value.fields-include' = 'EXCEPT_KEY', 'scan.bounded.mode' = 'latest-offset');
    """
    run_sql(ddl + "INSERT INTO u VALUES (1, 'one'), (2, 'two'), (1, 'uno'); SELECT 1;")
    assert messages(kafka_broker, topic) == [
        (b'{"id":1}', b'{"name":"one"}'), (b'{"id":2}', b'{"name":"two"}'), (b'{"id":1}', b'{"name":"uno"}')]
    assert rows(run_sql(ddl + "SELECT * FROM u;")) == [(1, "uno"), (2, "two")]
