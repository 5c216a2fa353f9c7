"""Kafka records <-> rows as in Flink: avro and raw values, keys, METADATA columns, startup modes, group offsets."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from sqlstream.catalog.persistent import object_from_json, object_to_json
from sqlstream.core.errors import ConnectorError, DataError, PlanError
from sqlstream.core.tables import ColumnDef, MetadataDef, TableDef
from sqlstream.core.types import parse_type
from sqlstream.frontend.session import Session, show_create
from sqlstream.runtime.connectors.base import SourceContext
from tests.conftest import run_sql
from tests.test_connector_kafka import KAFKA, committed_messages, drain, new_topic, produce_raw

pytest_plugins = ("tests.kafka_broker",)

UTC = dt.UTC


def kafka_with(bootstrap: str, topic: str, **options: str) -> str:
    opts = {"connector": "kafka", "topic": topic, "properties.bootstrap.servers": bootstrap,
            "scan.bounded.mode": "latest-offset", **options}
    return ", ".join(f"'{k}' = '{v}'" for k, v in opts.items())


def keyed_messages(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes | None, int]]:
    """(key, value, timestamp ms) of every message of partition 0."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-raw", "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[bytes | None, bytes | None, int]] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        done = False
        for m in consumer.consume(100, 0.05):
            if m.error() is None:
                out.append((m.key(), m.value(), m.timestamp()[1]))
            else:
                done = True
        if done:
            break
    consumer.close()
    return out


@pytest.mark.parametrize(
    ("fmt", "columns", "values", "expected"),
    [
        ("avro", "id INT, name STRING, amount DECIMAL(10, 2), ts TIMESTAMP(3), day DATE",
         "(1, 'a', 1.25, TIMESTAMP '2024-01-01 00:00:01.500', DATE '2024-02-29'), "
         "(2, CAST(NULL AS STRING), CAST(NULL AS DECIMAL(10, 2)), CAST(NULL AS TIMESTAMP(3)), CAST(NULL AS DATE))",
         [(1, "a", "1.25", "2024-01-01 00:00:01.500000", "2024-02-29"), (2, None, None, None, None)]),
        ("raw", "line STRING", "('hello'), ('wörld')", [("hello",), ("wörld",)]),
    ],
)
def test_avro_and_raw_round_trip_through_kafka(
    kafka_broker: str, fmt: str, columns: str, values: str, expected: list[tuple]
) -> None:
    topic = new_topic(kafka_broker, 1)
    result = run_sql(f"""
        CREATE TABLE t ({columns}) WITH ({kafka_with(kafka_broker, topic, format=fmt)});
        INSERT INTO t VALUES {values};
        SELECT * FROM t;
    """)
    rows = [tuple(None if v is None else str(v) if not isinstance(v, (int, str)) else v for v in r.values())
            for r in result.to_pylist()]
    assert sorted(rows, key=str) == sorted(expected, key=str)
    if fmt == "raw":
        assert sorted(v for _p, v in committed_messages(kafka_broker, topic)) == [b"hello", "wörld".encode()]


def test_avro_message_not_matching_the_schema_names_topic_partition_and_offset(kafka_broker: str) -> None:
    topic = new_topic(kafka_broker, 1)
    # id 1 (union branch 1, then 1), name "a"; then a truncated record
    produce_raw(kafka_broker, topic, [(0, b"\x02\x02\x02a"), (0, b"\x02")])
    with pytest.raises(DataError, match=f"topic '{topic}' partition 0 offset 1 does not match"):
        run_sql(f"CREATE TABLE t (id INT, name STRING NOT NULL) WITH ({kafka_with(kafka_broker, topic, format='avro')});"
                "SELECT * FROM t")


def test_avro_confluent_is_refused() -> None:
    with pytest.raises(ConnectorError, match="Confluent Schema Registry"):
        Session().execute_script(
            f"CREATE TABLE t (id INT) WITH ({kafka_with('127.0.0.1:1', 'x', format='avro-confluent')})")


def test_metadata_columns_read_and_timestamp_written(kafka_broker: str) -> None:
    topic = new_topic(kafka_broker, 1)
    result = run_sql(f"""
        CREATE TABLE t (
            id INT,
            event_time TIMESTAMP_LTZ(3) METADATA FROM 'timestamp',
            part INT METADATA FROM 'partition' VIRTUAL,
            `offset` BIGINT METADATA VIRTUAL,
            src STRING METADATA FROM 'topic' VIRTUAL,
            kind STRING METADATA FROM 'timestamp-type' VIRTUAL,
            epoch INT METADATA FROM 'leader-epoch' VIRTUAL
        ) WITH ({kafka_with(kafka_broker, topic, format='json')});
        INSERT INTO t VALUES (1, TO_TIMESTAMP_LTZ(1700000000123, 3)), (2, TO_TIMESTAMP_LTZ(1700000000456, 3));
        SELECT id, event_time, part, `offset`, src, kind, epoch FROM t;
    """)
    consumer = Consumer({"bootstrap.servers": kafka_broker, "group.id": "test-raw"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    epochs = [m.leader_epoch() for m in consumer.consume(2, 10)]
    consumer.close()
    assert result.column("epoch").to_pylist() == epochs
    result = result.drop_columns(["epoch"])
    assert result.to_pylist() == [
        {"id": 1, "event_time": dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC), "part": 0, "offset": 0,
         "src": topic, "kind": "CreateTime"},
        {"id": 2, "event_time": dt.datetime(2023, 11, 14, 22, 13, 20, 456000, tzinfo=UTC), "part": 0, "offset": 1,
         "src": topic, "kind": "CreateTime"},
    ]
    # the value holds the physical column only; the timestamp is the record's
    assert [(v, ts) for _k, v, ts in keyed_messages(kafka_broker, topic)] == [
        (b'{"id":1}', 1700000000123), (b'{"id":2}', 1700000000456)]


def test_metadata_column_errors(kafka_broker: str) -> None:
    session = Session()
    session.execute_script(f"""
        CREATE TABLE t (id INT, `offset` BIGINT METADATA)
        WITH ({kafka_with(kafka_broker, 'x', format='json')})""")
    with pytest.raises(ConnectorError, match="Invalid metadata key 'offset' .* for writing: headers, timestamp.*VIRTUAL"):
        session.execute_script("INSERT INTO t VALUES (1, 2)")
    with pytest.raises(ConnectorError, match="Invalid metadata key 'nope' .* for reading: headers, leader-epoch, offset"):
        session.execute_script(f"CREATE TABLE u (id INT, n INT METADATA FROM 'nope') WITH "
                               f"({kafka_with(kafka_broker, 'x', format='json')})")
    with pytest.raises(ConnectorError, match="castable from metadata type 'MAP<STRING, BYTES>'"):
        session.execute_script(f"CREATE TABLE u (id INT, headers INT METADATA) WITH "
                               f"({kafka_with(kafka_broker, 'x', format='json')})")
    with pytest.raises(ConnectorError, match="castable from metadata type 'TIMESTAMP_LTZ.3.'"):
        session.execute_script(f"CREATE TABLE u (id INT, ts BOOLEAN METADATA FROM 'timestamp') WITH "
                               f"({kafka_with(kafka_broker, 'x', format='json')})")
    described = session.execute_script("DESCRIBE t")[-1].table
    assert described.column("extras").to_pylist() == [None, "METADATA"]


def headers_of(bootstrap: str, topic: str) -> list[list[tuple[str, bytes | None]] | None]:
    """The record headers of every message of partition 0, as the Kafka client returns them."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-raw"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = [m.headers() for m in consumer.consume(100, 5) if m.error() is None]
    consumer.close()
    return out


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_headers_metadata_written_and_read(kafka_broker: str, guarantee: str) -> None:
    topic = new_topic(kafka_broker, 1)
    options = kafka_with(kafka_broker, topic, format="json", **{
        "sink.delivery-guarantee": guarantee, "sink.transactional-id-prefix": f"h-{topic}"})
    result = run_sql(f"""
        CREATE TABLE t (id INT, headers MAP<STRING, BYTES> METADATA) WITH ({options});
        INSERT INTO t VALUES (1, MAP['trace', CAST('t-1' AS BYTES), 'empty', CAST('' AS BYTES),
                                  'gone', CAST(NULL AS BYTES)]),
                              (2, CAST(NULL AS MAP<STRING, BYTES>));
        SELECT id, headers FROM t;
    """)
    # a NULL map writes no headers, a NULL value no header (as Flink's sink)
    assert headers_of(kafka_broker, topic) == [[("trace", b"t-1"), ("empty", b"")], None]
    assert result.to_pylist() == [
        {"id": 1, "headers": [("trace", b"t-1"), ("empty", b"")]},
        {"id": 2, "headers": []},  # never NULL: a record without headers reads as an empty map, as in Flink
    ]


def test_headers_metadata_keeps_the_last_value_of_a_repeated_key(kafka_broker: str) -> None:
    topic = new_topic(kafka_broker, 1)
    producer = Producer({"bootstrap.servers": kafka_broker})
    producer.produce(topic, value=b'{"id": 1}', partition=0, headers=[("a", b"1"), ("b", None), ("a", b"2")])
    producer.flush(10)
    result = run_sql(f"""
        CREATE TABLE t (id INT, h MAP<STRING, BYTES> METADATA FROM 'headers' VIRTUAL)
        WITH ({kafka_with(kafka_broker, topic, format='json')});
        SELECT id, h['a'] AS a, h['b'] AS b, CARDINALITY(h) AS n FROM t;
    """)
    assert result.to_pylist() == [{"id": 1, "a": b"2", "b": None, "n": 2}]


def test_key_fields_with_prefix_round_trip(kafka_broker: str) -> None:
    topic = new_topic(kafka_broker, 1)
    result = run_sql(f"""
        CREATE TABLE t (k_id INT, name STRING, amount DOUBLE) WITH ({kafka_with(
            kafka_broker, topic, format='avro', **{
                'key.format': 'json', 'key.fields': 'k_id', 'key.fields-prefix': 'k_',
                'value.fields-include': 'EXCEPT_KEY'})});
        INSERT INTO t VALUES (7, 'seven', 7.5), (8, 'eight', CAST(NULL AS DOUBLE));
        SELECT name, k_id FROM t;
    """)
    assert result.to_pylist() == [{"name": "seven", "k_id": 7}, {"name": "eight", "k_id": 8}]
    keys = [k for k, _v, _ts in keyed_messages(kafka_broker, topic)]
    assert [json.loads(k) for k in keys] == [{"id": 7}, {"id": 8}]  # the key format's names drop the prefix


def test_key_format_options(kafka_broker: str) -> None:
    topic = new_topic(kafka_broker, 1)
    result = run_sql(f"""
        CREATE TABLE t (a INT, b STRING, v DOUBLE) WITH ({kafka_with(
            kafka_broker, topic, **{'value.format': 'json', 'value.json.fail-on-missing-field': 'true',
                'key.format': 'csv', 'key.fields': 'a;b', 'key.csv.field-delimiter': '|',
                'key.csv.null-literal': 'N', 'value.fields-include': 'EXCEPT_KEY'})});
        INSERT INTO t VALUES (1, 'x', 0.5), (2, CAST(NULL AS STRING), 1.5);
        SELECT * FROM t;
    """)
    assert result.to_pylist() == [{"a": 1, "b": "x", "v": 0.5}, {"a": 2, "b": None, "v": 1.5}]
    assert [k for k, _v, _ts in keyed_messages(kafka_broker, topic)] == [b"1|x", b"2|N"]
    with pytest.raises(ConnectorError, match="applies to key format 'json', but the table's 'key.format' is 'csv'"):
        options = kafka_with(kafka_broker, topic, format="json", **{
            "key.format": "csv", "key.fields": "a", "key.json.ignore-parse-errors": "true"})
        Session().execute_script(f"CREATE TABLE u (a INT) WITH ({options})")


def test_raw_key_and_avro_json_value_with_all_fields(kafka_broker: str) -> None:
    topic = new_topic(kafka_broker, 1)
    result = run_sql(f"""
        CREATE TABLE t (k STRING, v BIGINT) WITH ({kafka_with(
            kafka_broker, topic, format='avro', **{'avro.encoding': 'json', 'key.format': 'raw', 'key.fields': 'k'})});
        INSERT INTO t VALUES ('a', 1), ('b', CAST(NULL AS BIGINT));
        SELECT * FROM t;
    """)
    assert result.to_pylist() == [{"k": "a", "v": 1}, {"k": "b", "v": None}]
    # 'ALL': the value holds the key field too
    assert [(k, v) for k, v, _ts in keyed_messages(kafka_broker, topic)] == [
        (b"a", b'{"k":{"string":"a"},"v":{"long":1}}'), (b"b", b'{"k":{"string":"b"},"v":null}')]


def test_key_fields_read_from_records_without_keys_are_null(kafka_broker: str) -> None:
    topic = new_topic(kafka_broker, 1)
    producer = Producer({"bootstrap.servers": kafka_broker})
    producer.produce(topic, key=b'{"id": 1}', value=b'{"name": "a"}', partition=0)
    producer.produce(topic, value=b'{"name": "b"}', partition=0)
    producer.produce(topic, key=b'{"id": 3}', value=None, partition=0)  # a tombstone: no row
    producer.produce(topic, key=b'{"id": 4}', value=b'{"name": "d"}', partition=0)
    assert producer.flush(10) == 0
    result = run_sql(f"""
        CREATE TABLE t (id INT, name STRING, `offset` BIGINT METADATA VIRTUAL) WITH ({kafka_with(
            kafka_broker, topic, format='json', **{
                'key.format': 'json', 'key.fields': 'id', 'value.fields-include': 'EXCEPT_KEY'})});
        SELECT * FROM t;
    """)
    assert result.to_pylist() == [{"id": 1, "name": "a", "offset": 0}, {"id": None, "name": "b", "offset": 1},
                                  {"id": 4, "name": "d", "offset": 3}]


GROUP_COLUMNS = (ColumnDef("id", parse_type("INT")),
                 ColumnDef("o", parse_type("BIGINT"), metadata=MetadataDef("offset", True)))


def group_source(bootstrap: str, topic: str, group: str, **options: str):
    t = TableDef("t", GROUP_COLUMNS, {"connector": "kafka", "topic": topic, "properties.bootstrap.servers": bootstrap,
                                      "format": "json", "properties.group.id": group, **options})
    reader = KAFKA.create_source(SourceContext(t, KAFKA.validate(t), ["id", "o"]))
    reader.open()
    return reader


def committed(bootstrap: str, topic: str, group: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    got = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    consumer.close()
    return [tp.offset for tp in got]


def test_group_offsets_committed_when_a_checkpoint_completes_and_used_at_startup(kafka_broker: str) -> None:
    topic = new_topic(kafka_broker, 2)
    produce_raw(kafka_broker, topic, [(p, json.dumps({"id": p * 10 + i}).encode()) for p in (0, 1) for i in range(3)])
    reader = group_source(kafka_broker, topic, "g1", **{"scan.bounded.mode": "latest-offset"})
    assert len(drain(reader)) == 6
    reader.snapshot_position()
    reader.checkpoint_taken(1)
    assert committed(kafka_broker, topic, "g1", 2) == [-1001, -1001]  # nothing before the checkpoint completes
    reader.notify_checkpoint_complete(1)
    deadline = time.monotonic() + 10
    while committed(kafka_broker, topic, "g1", 2) != [3, 3]:
        assert time.monotonic() < deadline, "the group's offsets were not committed"
        reader.read_batch()  # serves the commit's callback
    reader.close()
    produce_raw(kafka_broker, topic, [(1, b'{"id": 13}')])
    again = group_source(kafka_broker, topic, "g1", **{"scan.startup.mode": "group-offsets",
                                                       "scan.bounded.mode": "latest-offset"})
    assert drain(again) == [{"id": 13, "o": 3}]
    with pytest.raises(ConnectorError, match="consumer group 'g2' has no committed offset"):
        group_source(kafka_broker, topic, "g2", **{"scan.startup.mode": "group-offsets"})
    fallback = group_source(kafka_broker, topic, "g2", **{"scan.startup.mode": "group-offsets",
                                                          "properties.auto.offset.reset": "earliest",
                                                          "scan.bounded.mode": "latest-offset"})
    assert len(drain(fallback)) == 7
    # specific-offsets: a partition it does not list resumes from the group's offset (Flink's initializer)
    specific = group_source(kafka_broker, topic, "g1", **{"scan.startup.mode": "specific-offsets",
                                                          "scan.startup.specific-offsets": "partition:0,offset:1",
                                                          "scan.bounded.mode": "latest-offset"})
    assert sorted(r["id"] for r in drain(specific)) == [1, 2, 13]
    off = group_source(kafka_broker, topic, "g3", **{"properties.commit.offsets.on.checkpoint": "false",
                                                     "scan.bounded.mode": "latest-offset"})
    assert len(drain(off)) == 7
    off.snapshot_position()
    off.checkpoint_taken(1)
    off.notify_checkpoint_complete(1)
    off.close()  # a commit made would be flushed by closing
    assert committed(kafka_broker, topic, "g3", 2) == [-1001, -1001]


def test_group_offsets_committed_by_a_running_job(kafka_broker: str, tmp_path: Path) -> None:
    topic = new_topic(kafka_broker, 1)
    produce_raw(kafka_broker, topic, [(0, json.dumps({"id": i}).encode()) for i in range(5)])
    session = Session()
    errors: list[BaseException] = []
    script = f"""
        SET 'execution.checkpointing.interval' = '100 ms';
        SET 'execution.checkpointing.dir' = '{tmp_path}';
        CREATE TABLE t (id INT) WITH ('connector' = 'kafka', 'topic' = '{topic}', 'format' = 'json',
            'properties.bootstrap.servers' = '{kafka_broker}', 'properties.group.id' = 'job-group');
        CREATE TABLE out (id INT) WITH ('connector' = 'blackhole');
        INSERT INTO out SELECT * FROM t;
    """

    def run() -> None:
        try:
            session.execute_script(script)
        except BaseException as e:  # noqa: BLE001 - the cancellation below ends the job with an error
            errors.append(e)

    job = threading.Thread(target=run, daemon=True)
    job.start()
    deadline = time.monotonic() + 60
    while committed(kafka_broker, topic, "job-group", 1) != [5]:
        assert time.monotonic() < deadline, f"no offsets committed by the job: {errors}"
        time.sleep(0.1)  # checkpoints complete on the job's own schedule
    executor = session.current_executor
    assert executor is not None
    executor.cancel()
    job.join(60)
    assert not job.is_alive()


def test_timestamp_startup_mode(kafka_broker: str) -> None:
    topic = new_topic(kafka_broker, 1)
    producer = Producer({"bootstrap.servers": kafka_broker})
    for i, ts in enumerate([1000, 2000, 3000]):
        producer.produce(topic, value=json.dumps({"id": i}).encode(), partition=0, timestamp=ts)
    assert producer.flush(10) == 0
    # tansu answers offset 0 to every ListOffsets-by-timestamp request: the records before the
    # first one at or after the time are skipped by the source, as a correct answer would start there
    reader = group_source(kafka_broker, topic, "g", **{"scan.startup.mode": "timestamp",
                                                       "scan.startup.timestamp-millis": "1500",
                                                       "scan.bounded.mode": "latest-offset"})
    assert drain(reader) == [{"id": 1, "o": 1}, {"id": 2, "o": 2}]


def test_raw_null_value_is_a_tombstone_and_reads_as_null(kafka_broker: str) -> None:
    topic = new_topic(kafka_broker, 1)
    result = run_sql(f"""
        CREATE TABLE t (v BIGINT) WITH ({kafka_with(kafka_broker, topic, format='raw')});
        INSERT INTO t VALUES (CAST(NULL AS BIGINT)), (258);
        SELECT * FROM t;
    """)
    assert result.column("v").to_pylist() == [None, 258]
    assert [v for _k, v, _ts in keyed_messages(kafka_broker, topic)] == [None, b"\x00" * 6 + b"\x01\x02"]


def test_metadata_schema_of_a_table() -> None:
    t = TableDef("t", (*GROUP_COLUMNS, ColumnDef("ts", parse_type("TIMESTAMP_LTZ(3)"), metadata=MetadataDef("timestamp"))),
                 {})
    assert t.physical_schema.names == ["id"]
    assert t.source_schema.names == ["id", "o", "ts"]
    assert t.persisted_schema.names == ["id", "ts"]
    assert pa.types.is_timestamp(t.persisted_schema.field("ts").type)


def test_metadata_columns_survive_show_create_the_persistent_catalog_and_like() -> None:
    session = Session()
    session.execute_script(f"""
        CREATE TABLE base (id INT, ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp', `offset` BIGINT METADATA VIRTUAL)
        WITH ({kafka_with('127.0.0.1:1', 'x', format='json')});
        CREATE TABLE copy (extra STRING) LIKE base;
        CREATE TABLE plain (extra STRING) LIKE base (EXCLUDING METADATA);
    """)
    base = session.catalog.require("base")
    assert object_from_json(object_to_json(base)) == base
    text = show_create(base)
    assert "`ts` TIMESTAMP_LTZ(3) METADATA FROM 'timestamp'," in text and "`offset` BIGINT METADATA VIRTUAL" in text
    assert [c.metadata for c in session.catalog.require("copy").columns] == [
        None, MetadataDef("timestamp"), MetadataDef(None, True), None]
    assert [c.name for c in session.catalog.require("plain").columns] == ["id", "extra"]
    with pytest.raises(PlanError, match="metadata column named 'ts' already exists"):
        session.execute_script("CREATE TABLE clash (ts TIMESTAMP_LTZ(3) METADATA) LIKE base")


def test_event_time_from_the_record_timestamp(kafka_broker: str) -> None:
    topic = new_topic(kafka_broker, 1)
    producer = Producer({"bootstrap.servers": kafka_broker})
    for i, ts in enumerate([1_000, 2_500, 9_000, 11_000]):
        producer.produce(topic, value=json.dumps({"id": i}).encode(), partition=0, timestamp=ts)
    assert producer.flush(10) == 0
    result = run_sql(f"""
        CREATE TABLE t (
            id INT,
            ts TIMESTAMP(3) METADATA FROM 'timestamp',
            WATERMARK FOR ts AS ts
        ) WITH ({kafka_with(kafka_broker, topic, format='json')});
        SELECT window_start, COUNT(*) AS n
        FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND))
        GROUP BY window_start, window_end;
    """, {"table.local-time-zone": "Asia/Kolkata"})
    # the record's TIMESTAMP_LTZ time is cast to TIMESTAMP in the session zone (UTC+05:30), as Flink casts it
    start = dt.datetime(1970, 1, 1, 5, 30)
    assert sorted(result.to_pylist(), key=lambda r: r["window_start"]) == [
        {"window_start": start, "n": 2},
        {"window_start": start + dt.timedelta(seconds=5), "n": 1},
        {"window_start": start + dt.timedelta(seconds=10), "n": 1},
    ]


def test_timestamp_metadata_written_from_a_wall_clock_column_in_the_session_zone(kafka_broker: str) -> None:
    topic = new_topic(kafka_broker, 1)
    session = Session()
    session.config["table.local-time-zone"] = "Asia/Kolkata"
    session.execute_script(f"""
        CREATE TABLE t (id INT, ts TIMESTAMP(3) METADATA FROM 'timestamp')
        WITH ({kafka_with(kafka_broker, topic, format='json')});
        INSERT INTO t VALUES (1, TIMESTAMP '1970-01-01 05:30:01.000');
        INSERT INTO t (id) VALUES (2);
    """)
    (_k, first, stamp), (_k2, second, now) = keyed_messages(kafka_broker, topic)
    assert (first, stamp) == (b'{"id":1}', 1000)
    assert second == b'{"id":2}' and abs(now - time.time() * 1000) < 600_000  # no value: the producer's time


def test_exactly_once_sink_writes_the_timestamp_metadata(kafka_broker: str) -> None:
    topic = new_topic(kafka_broker, 1)
    session = Session()
    session.execute_script(f"""
        CREATE TABLE t (id INT, ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp')
        WITH ({kafka_with(kafka_broker, topic, format='json', **{
            'sink.delivery-guarantee': 'exactly-once', 'sink.transactional-id-prefix': f'eo-{topic}'})});
        INSERT INTO t VALUES (1, TO_TIMESTAMP_LTZ(5000, 3)), (2, TO_TIMESTAMP_LTZ(6000, 3));
    """)
    assert [(v, ts) for _k, v, ts in keyed_messages(kafka_broker, topic)] == [(b'{"id":1}', 5000), (b'{"id":2}', 6000)]
