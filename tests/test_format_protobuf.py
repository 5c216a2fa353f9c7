"""The 'protobuf' format as Flink's: Kafka messages of a protobuf message class, type mapping, NULLs and defaults,
parse errors, and the checks at CREATE TABLE.

The message classes are built here from FileDescriptorProtos (no protoc needed) and put into a module the
format imports by name, as it would import a generated ``_pb2`` module.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from sqlstream.core.errors import ConnectorError, DataError
from sqlstream.frontend.session import Session
from tests.conftest import run_sql
from tests.test_connector_kafka import new_topic, produce_raw
from tests.test_kafka_records import kafka_with

pytest_plugins = ("tests.kafka_broker",)

MODULE = "sqlstream_test_pb2"
F = descriptor_pb2.FieldDescriptorProto


def _field(name: str, number: int, kind: int, label: int = F.LABEL_OPTIONAL, type_name: str = "",
           default: str | None = None, proto3_optional: bool = False) -> F:
    field = F(name=name, number=number, type=kind, label=label)
    if type_name:
        field.type_name = type_name
    if default is not None:
        field.default_value = default
    if proto3_optional:
        field.proto3_optional = True
    return field


def _order_file() -> descriptor_pb2.FileDescriptorProto:
    """proto2: message Order { ... } with every type Flink maps, an enum, a nested message, a repeated and a map."""
    f = descriptor_pb2.FileDescriptorProto(name="sqlstream_test_order.proto", package="sqlstream.test",
                                           syntax="proto2")
    status = f.enum_type.add(name="Status")
    status.value.add(name="NEW", number=0)
    status.value.add(name="SHIPPED", number=1)
    order = f.message_type.add(name="Order")
    line = order.nested_type.add(name="Line")
    line.field.extend([_field("sku", 1, F.TYPE_STRING), _field("n", 2, F.TYPE_INT32)])
    entry = order.nested_type.add(name="CountsEntry")
    entry.options.map_entry = True
    entry.field.extend([_field("key", 1, F.TYPE_STRING), _field("value", 2, F.TYPE_INT64)])
    order.field.extend([
        _field("id", 1, F.TYPE_INT64),
        _field("name", 2, F.TYPE_STRING),
        _field("payload", 3, F.TYPE_BYTES),
        _field("price", 4, F.TYPE_DOUBLE),
        _field("ratio", 5, F.TYPE_FLOAT),
        _field("paid", 6, F.TYPE_BOOL),
        _field("qty", 7, F.TYPE_SINT32),
        _field("big", 8, F.TYPE_UINT32),
        _field("status", 9, F.TYPE_ENUM, type_name=".sqlstream.test.Status"),
        _field("status_code", 10, F.TYPE_ENUM, type_name=".sqlstream.test.Status"),
        _field("first", 11, F.TYPE_MESSAGE, type_name=".sqlstream.test.Order.Line"),
        _field("lines", 12, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".sqlstream.test.Order.Line"),
        _field("tags", 13, F.TYPE_STRING, F.LABEL_REPEATED),
        _field("counts", 14, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".sqlstream.test.Order.CountsEntry"),
        _field("defaulted", 15, F.TYPE_INT32, default="7"),
    ])
    return f


def _event_file() -> descriptor_pb2.FileDescriptorProto:
    """proto3: message Event { int32 plain = 1; optional int32 maybe = 2; string label = 3; }"""
    f = descriptor_pb2.FileDescriptorProto(name="sqlstream_test_event.proto", package="sqlstream.test3",
                                           syntax="proto3")
    event = f.message_type.add(name="Event")
    event.field.extend([
        _field("plain", 1, F.TYPE_INT32),
        _field("maybe", 2, F.TYPE_INT32, proto3_optional=True),
        _field("label", 3, F.TYPE_STRING),
    ])
    event.oneof_decl.add(name="_maybe")
    event.field[1].oneof_index = 0
    return f


@pytest.fixture(scope="module")
def pb() -> Iterator[types.ModuleType]:
    """A module holding the message classes Order and Event, importable as MODULE."""
    pool = descriptor_pool.DescriptorPool()
    for f in (_order_file(), _event_file()):
        pool.Add(f)
    module = types.ModuleType(MODULE)
    module.Order = message_factory.GetMessageClass(pool.FindMessageTypeByName("sqlstream.test.Order"))
    module.Event = message_factory.GetMessageClass(pool.FindMessageTypeByName("sqlstream.test3.Event"))
    sys.modules[MODULE] = module
    yield module
    del sys.modules[MODULE]


ORDER_COLUMNS = """
    id BIGINT, name STRING, payload BYTES, price DOUBLE, ratio FLOAT, paid BOOLEAN, qty INT, big INT,
    status STRING, status_code INT, `first` ROW<sku STRING, n INT>, lines ARRAY<ROW<sku STRING, n INT>>,
    tags ARRAY<STRING>, counts MAP<STRING, BIGINT>, defaulted INT
"""


def protobuf_table(bootstrap: str, topic: str, columns: str = ORDER_COLUMNS, message: str = "Order",
                   **options: str) -> str:
    opts = {"format": "protobuf", "protobuf.message-class-name": f"{MODULE}.{message}", **options}
    return f"CREATE TABLE t ({columns}) WITH ({kafka_with(bootstrap, topic, **opts)})"


def messages(bootstrap: str, topic: str, cls: Any) -> list[Any]:
    from tests.test_connector_kafka import committed_messages
    return [cls.FromString(v) for _p, v in committed_messages(bootstrap, topic)]


def test_round_trip_through_kafka_with_flinks_type_mapping(kafka_broker: str, pb: types.ModuleType) -> None:
    topic = new_topic(kafka_broker, 1)
    result = run_sql(f"""
        {protobuf_table(kafka_broker, topic, **{'protobuf.write-null-string-literal': 'N/A'})};
        INSERT INTO t VALUES
          (1, 'a', CAST('xy' AS BYTES), 2.5, CAST(0.5 AS FLOAT), TRUE, -3, -1, 'SHIPPED', 1,
           ROW('s1', 4), ARRAY[ROW('s2', 5), ROW('s3', CAST(NULL AS INT))], ARRAY['x', CAST(NULL AS STRING)],
           MAP['k', CAST(9 AS BIGINT)], 8),
          (2, CAST(NULL AS STRING), CAST(NULL AS BYTES), CAST(NULL AS DOUBLE), CAST(NULL AS FLOAT),
           CAST(NULL AS BOOLEAN), CAST(NULL AS INT), CAST(NULL AS INT), 'NO-SUCH-STATUS', 5,
           CAST(NULL AS ROW<sku STRING, n INT>), CAST(NULL AS ARRAY<ROW<sku STRING, n INT>>),
           CAST(NULL AS ARRAY<STRING>), CAST(NULL AS MAP<STRING, BIGINT>), CAST(NULL AS INT));
        SELECT * FROM t;
    """)
    written = messages(kafka_broker, topic, pb.Order)
    assert written[0].big == 4294967295  # INT -1 keeps its bits in the uint32 field
    assert written[0].status == 1 and written[0].qty == -3
    assert list(written[0].tags) == ["x", "N/A"]  # a NULL element is the null string literal
    assert not written[1].HasField("name") and not written[1].HasField("first")  # NULL: the field is unset
    assert written[1].HasField("status") and written[1].status == 0  # an unknown enum name: the first value
    assert result.to_pylist() == [
        {"id": 1, "name": "a", "payload": b"xy", "price": 2.5, "ratio": 0.5, "paid": True, "qty": -3, "big": -1,
         "status": "SHIPPED", "status_code": 1, "first": {"sku": "s1", "n": 4},
         "lines": [{"sku": "s2", "n": 5}, {"sku": "s3", "n": None}], "tags": ["x", "N/A"],
         "counts": [("k", 9)], "defaulted": 8},
        {"id": 2, "name": None, "payload": None, "price": None, "ratio": None, "paid": None, "qty": None,
         "big": None, "status": "NEW", "status_code": 0, "first": None, "lines": None, "tags": None,
         "counts": None, "defaulted": None},
    ]


@pytest.mark.parametrize(("read_defaults", "expected"), [
    ("false", {"id": 5, "name": None, "status": None, "first": None, "lines": None, "counts": None,
               "defaulted": None}),
    ("true", {"id": 5, "name": "", "status": "NEW", "first": {"sku": "", "n": 0}, "lines": [], "counts": [],
              "defaulted": 7}),
])
def test_unset_fields_read_as_null_or_as_defaults(
    kafka_broker: str, pb: types.ModuleType, read_defaults: str, expected: dict[str, Any]
) -> None:
    topic = new_topic(kafka_broker, 1)
    produce_raw(kafka_broker, topic, [(0, pb.Order(id=5).SerializeToString())])
    result = run_sql(f"""
        {protobuf_table(kafka_broker, topic, **{'protobuf.read-default-values': read_defaults})};
        SELECT id, name, status, `first`, lines, counts, defaulted FROM t;
    """)
    assert result.to_pylist() == [expected]


def test_proto3_scalars_without_presence_read_their_value(kafka_broker: str, pb: types.ModuleType) -> None:
    topic = new_topic(kafka_broker, 1)
    produce_raw(kafka_broker, topic, [(0, pb.Event(plain=0).SerializeToString()),
                                      (0, pb.Event(plain=3, maybe=0, label="x").SerializeToString())])
    result = run_sql(f"""
        {protobuf_table(kafka_broker, topic, 'plain INT, maybe INT, label STRING', 'Event')};
        SELECT * FROM t;
    """)
    # proto3 'optional' has presence (NULL when unset); plain proto3 scalars cannot tell unset from default
    assert result.to_pylist() == [{"plain": 0, "maybe": None, "label": ""}, {"plain": 3, "maybe": 0, "label": "x"}]


def test_a_message_that_does_not_parse_fails_or_is_skipped(kafka_broker: str, pb: types.ModuleType) -> None:
    topic = new_topic(kafka_broker, 1)
    produce_raw(kafka_broker, topic, [(0, pb.Order(id=1).SerializeToString()), (0, b"\x0a\xff\xff"),
                                      (0, pb.Order(id=3).SerializeToString())])
    with pytest.raises(DataError, match=f"topic '{topic}' partition 0 offset 1 does not parse as sqlstream.test.Order"):
        run_sql(f"{protobuf_table(kafka_broker, topic, 'id BIGINT')}; SELECT * FROM t")
    result = run_sql(f"""
        {protobuf_table(kafka_broker, topic, 'id BIGINT', **{'protobuf.ignore-parse-errors': 'true'})};
        SELECT * FROM t;
    """)
    assert result.column("id").to_pylist() == [1, 3]


def test_key_format_protobuf(kafka_broker: str, pb: types.ModuleType) -> None:
    topic = new_topic(kafka_broker, 1)
    options = kafka_with(kafka_broker, topic, **{
        "key.format": "protobuf", "key.protobuf.message-class-name": f"{MODULE}.Event", "key.fields": "plain",
        "value.format": "json", "value.fields-include": "EXCEPT_KEY"})
    result = run_sql(f"""
        CREATE TABLE t (plain INT, v STRING) WITH ({options});
        INSERT INTO t VALUES (4, 'four');
        SELECT * FROM t;
    """)
    assert result.to_pylist() == [{"plain": 4, "v": "four"}]


@pytest.mark.parametrize(("columns", "options", "error"), [
    ("id BIGINT, nope INT", {}, "Column nope does not exist in definition of proto class sqlstream.test.Order"),
    ("id INT", {}, r"LONG\(protobuf\) is not compatible with INT"),
    ("status BOOLEAN", {}, r"ENUM\(protobuf\) is not compatible with BOOLEAN"),
    ("`first` STRING", {}, "is a message and needs a ROW column"),
    ("tags STRING", {}, "needs a column of type ARRAY"),
    ("counts MAP<STRING, INT>", {}, r"LONG\(protobuf\) is not compatible with INT"),
    ("id BIGINT", {"protobuf.message-class-name": f"{MODULE}.Nope"}, "is not an importable protobuf message class"),
    ("id BIGINT", {"protobuf.message-class-name": ""}, "requires 'protobuf.message-class-name'"),
])
def test_create_table_checks_the_columns_against_the_message(
    pb: types.ModuleType, columns: str, options: dict[str, str], error: str
) -> None:
    with pytest.raises(ConnectorError, match=error):
        Session().execute_script(protobuf_table("127.0.0.1:1", "x", columns, **options))


def test_filesystem_refuses_protobuf_as_flink(tmp_path: Any, pb: types.ModuleType) -> None:
    with pytest.raises(ConnectorError, match="The 'protobuf' format is not supported for the 'filesystem' connector"):
        Session().execute_script(f"""CREATE TABLE f (id BIGINT) WITH ('connector' = 'filesystem',
            'path' = '{tmp_path}', 'format' = 'protobuf', 'protobuf.message-class-name' = '{MODULE}.Order')""")
