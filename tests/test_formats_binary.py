"""The avro, raw and orc formats: round trips through files and messages, Flink's encodings, bad input."""

from __future__ import annotations

import datetime as dt
import io
from decimal import Decimal
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.orc as orc
import pytest

from sqlstream.core.errors import ConnectorError, DataError
from sqlstream.core.types import parse_type
from sqlstream.runtime.formats import create_format
from tests.test_formats import SCHEMA, sample_batch, write_read

# sample_batch's columns without TIMESTAMP_LTZ, which the legacy Avro timestamp mapping (the default) has not
NO_LTZ = [n for n in SCHEMA.names if n != "ltz"]


@pytest.mark.parametrize(
    ("fmt", "options", "columns"),
    [
        ("avro", {}, NO_LTZ),
        ("avro", {"avro.timestamp_mapping.legacy": False, "avro.codec": "deflate"}, SCHEMA.names),
        ("avro", {"avro.codec": "null"}, NO_LTZ),
        ("orc", {}, SCHEMA.names),
    ],
)
def test_file_round_trip(tmp_path: Path, fmt: str, options: dict, columns: list[str]) -> None:
    batch = sample_batch().select(columns)
    _, table = write_read(tmp_path, fmt, batch, options)
    assert table.equals(pa.Table.from_batches([batch]))


@pytest.mark.parametrize("fmt", ["avro", "orc"])
def test_projection_and_skip_rows(tmp_path: Path, fmt: str) -> None:
    batch = sample_batch().select(NO_LTZ)
    path, table = write_read(tmp_path, fmt, batch, columns=["ts", "id"])
    assert table.schema.names == ["ts", "id"] and table.column("id").to_pylist() == [1, None, 3, 4, 5]
    reader = create_format(fmt, batch.schema, {}, ["id"], "t")
    rest = pa.Table.from_batches(list(reader.read_file(str(path), skip_rows=3)), schema=reader.output_schema)
    assert rest.column("id").to_pylist() == [4, 5]
    empty = create_format(fmt, batch.schema, {}, [], "t")
    assert sum(b.num_rows for b in empty.read_file(str(path))) == 5


def test_avro_file_schema_is_flinks_mapping(tmp_path: Path) -> None:
    schema = pa.schema([
        pa.field("id", parse_type("INT"), nullable=False), ("ts", parse_type("TIMESTAMP(3)")),
        ("amount", parse_type("DECIMAL(10, 2)")), ("day", parse_type("DATE")), ("t", parse_type("TIME")),
        ("b", parse_type("BYTES")), ("us", parse_type("TIMESTAMP(6)")),
    ])
    path, _ = write_read(tmp_path, "avro", pa.RecordBatch.from_pylist([], schema=schema))
    with open(path, "rb") as f:
        reader = fastavro.reader(f)
        assert reader.codec == "snappy"  # Flink's default 'avro.codec'
        fields = {x["name"]: x["type"] for x in reader.writer_schema["fields"]}
    assert fields["id"] == "int"  # NOT NULL: no union
    assert fields["ts"] == ["null", {"type": "long", "logicalType": "timestamp-millis"}]
    assert fields["amount"] == ["null", {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}]
    assert fields["day"][1]["logicalType"] == "date" and fields["t"][1]["logicalType"] == "time-millis"
    assert fields["b"] == ["null", "bytes"] and fields["us"][1]["logicalType"] == "timestamp-micros"
    local = create_format("avro", schema, {"avro.timestamp_mapping.legacy": False}, None, "t")
    assert local._schema_json["fields"][1]["type"][1]["logicalType"] == "local-timestamp-millis"


def test_avro_file_written_elsewhere_is_read_by_field_name(tmp_path: Path) -> None:
    writer_schema = {"type": "record", "name": "x", "fields": [
        {"name": "extra", "type": "string"}, {"name": "name", "type": "string"}, {"name": "id", "type": "long"}]}
    path = tmp_path / "x.avro"
    with open(path, "wb") as f:
        fastavro.writer(f, writer_schema, [{"extra": "e", "name": "a", "id": 7}])
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    table = pa.Table.from_batches(list(create_format("avro", schema, {}, None, "t").read_file(str(path))))
    assert table.to_pylist() == [{"id": 7, "name": "a"}]
    missing = pa.schema([("id", pa.int64()), ("price", pa.float64())])
    with pytest.raises(DataError, match=r"x\.avro has no field 'price'"):
        list(create_format("avro", missing, {}, None, "t").read_file(str(path)))


def test_avro_file_value_of_another_type_names_file_and_record(tmp_path: Path) -> None:
    path = tmp_path / "x.avro"
    with open(path, "wb") as f:
        fastavro.writer(f, {"type": "record", "name": "x", "fields": [{"name": "id", "type": "long"}]},
                        [{"id": 1}, {"id": 1 << 40}])
    with pytest.raises(DataError, match=r"x\.avro record 1"):
        list(create_format("avro", pa.schema([("id", pa.int32())]), {}, None, "t").read_file(str(path)))


def test_avro_messages_round_trip_and_are_schemaless_binary() -> None:
    batch = sample_batch().select(NO_LTZ)
    f = create_format("avro", batch.schema, {}, None, "t")
    messages = f.encode_messages(batch)
    assert f.decode_messages(messages, str).equals(batch)
    # Avro binary without any header: fastavro decodes it with the schema alone
    first = fastavro.schemaless_reader(io.BytesIO(messages[0]), f._parsed, None)
    assert first["id"] == 1 and first["amount"] == Decimal("12.30")
    assert f.decode_messages([None, messages[0]], str).num_rows == 1  # tombstones carry no row


def test_avro_json_encoding_of_messages() -> None:
    schema = pa.schema([pa.field("id", pa.int32(), nullable=False), ("name", pa.string()), ("ts", parse_type("TIMESTAMP(3)"))])
    f = create_format("avro", schema, {"avro.encoding": "json"}, None, "t")
    batch = pa.RecordBatch.from_pylist(
        [{"id": 1, "name": "a\nb", "ts": dt.datetime(1970, 1, 1, 0, 0, 1)}, {"id": 2, "name": None, "ts": None}],
        schema=schema)
    messages = f.encode_messages(batch)
    # Avro's JSON encoding: a union value names its branch
    assert messages == [b'{"id":1,"name":{"string":"a\\nb"},"ts":{"long":1000}}', b'{"id":2,"name":null,"ts":null}']
    assert f.decode_messages(messages, str).equals(batch)
    with pytest.raises(DataError, match="offset 0 does not match"):
        f.decode_messages([b'{"id": "x"}'], lambda i: f"offset {i}")
    with pytest.raises(DataError, match="expected one JSON-encoded record, got 2"):
        f.decode_messages([messages[0] + b"\n" + messages[1]], str)


def test_avro_message_not_matching_the_schema() -> None:
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    f = create_format("avro", schema, {}, None, "t")
    good = f.encode_messages(pa.RecordBatch.from_pylist([{"id": 1, "name": "x"}], schema=schema))[0]
    where = lambda i: f"topic 'in' partition 0 offset {i + 40}"  # noqa: E731
    with pytest.raises(DataError, match="topic 'in' partition 0 offset 41 does not match"):
        f.decode_messages([good, good[:2]], where)
    with pytest.raises(DataError, match="offset 40 .*left over"):
        f.decode_messages([good + b"\x02"], where)
    lenient = create_format("avro", schema, {"format.ignore-parse-errors": True}, None, "t")
    assert lenient.decode_messages([good, b"\x09", good], where).num_rows == 2 and lenient.parse_errors == 1


def test_avro_refuses_what_flink_cannot_map() -> None:
    with pytest.raises(ConnectorError, match="timestamp_mapping.legacy"):
        create_format("avro", pa.schema([("t", parse_type("TIMESTAMP_LTZ(3)"))]), {}, None, "t")
    with pytest.raises(ConnectorError, match="microsecond"):
        create_format("avro", pa.schema([("t", parse_type("TIMESTAMP(9)"))]), {}, None, "t")
    with pytest.raises(ConnectorError, match="Schema Registry"):
        create_format("avro-confluent", pa.schema([("a", pa.int32())]), {}, None, "t")


@pytest.mark.parametrize(
    ("sql_type", "values", "options", "first"),
    [
        ("STRING", ["héllo", None, ""], {}, "héllo".encode()),
        ("STRING", ["héllo"], {"raw.charset": "ISO-8859-1"}, b"h\xe9llo"),
        ("BYTES", [b"\x00\xff", None], {}, b"\x00\xff"),
        ("INT", [258, None, -1], {}, b"\x00\x00\x01\x02"),
        ("INT", [258], {"raw.endianness": "little-endian"}, b"\x02\x01\x00\x00"),
        ("BIGINT", [1], {}, b"\x00" * 7 + b"\x01"),
        ("SMALLINT", [-2], {}, b"\xff\xfe"),
        ("TINYINT", [5], {}, b"\x05"),
        ("DOUBLE", [1.5], {}, b"\x3f\xf8" + b"\x00" * 6),
        ("FLOAT", [1.5], {}, b"\x3f\xc0\x00\x00"),
        ("BOOLEAN", [True, False, None], {}, b"\x01"),
    ],
)
def test_raw_messages(sql_type: str, values: list, options: dict, first: bytes) -> None:
    schema = pa.schema([("v", parse_type(sql_type))])
    f = create_format("raw", schema, options, None, "t")
    batch = pa.RecordBatch.from_pydict({"v": values}, schema=schema)
    messages = f.encode_messages(batch)
    assert messages[0] == first
    assert [m is None for m in messages] == [v is None for v in values]  # NULL is a null message
    assert f.decode_messages(messages, str).equals(batch)


def test_raw_bad_input() -> None:
    f = create_format("raw", pa.schema([("v", pa.int32())]), {}, None, "t")
    with pytest.raises(DataError, match="offset 8 has 3 bytes, but a INT takes 4"):
        f.decode_messages([b"\x00\x00\x00\x01", b"abc"], lambda i: f"offset {i + 7}")
    text = create_format("raw", pa.schema([("v", pa.string())]), {}, None, "t")
    assert text.decode_messages([b"a\xffb"], str).column(0).to_pylist() == ["a\ufffdb"]  # as Java decodes it
    with pytest.raises(ConnectorError, match="only supports single physical column"):
        create_format("raw", pa.schema([("a", pa.int32()), ("b", pa.int32())]), {}, None, "t")
    with pytest.raises(ConnectorError, match="doesn't supports 'DATE' as column type"):
        create_format("raw", pa.schema([("d", pa.date32())]), {}, None, "t")
    with pytest.raises(ConnectorError, match="not a known charset"):
        create_format("raw", pa.schema([("v", pa.string())]), {"raw.charset": "nope"}, None, "t")


def test_raw_file_is_one_value_per_line(tmp_path: Path) -> None:
    schema = pa.schema([("line", pa.string())])
    batch = pa.RecordBatch.from_pydict({"line": ["a", "b c", "", "d"]}, schema=schema)
    path, table = write_read(tmp_path, "raw", batch)
    assert path.read_bytes() == b"a\nb c\n\nd\n"
    assert table.column(0).to_pylist() == ["a", "b c", "", "d"]
    reader = create_format("raw", schema, {}, None, "t")
    assert [b.column(0).to_pylist() for b in reader.read_file(str(path), skip_rows=2)] == [["", "d"]]
    ints = pa.RecordBatch.from_pydict({"v": [258, -1]}, schema=pa.schema([("v", pa.int32())]))
    (tmp_path / "ints").mkdir()
    path, table = write_read(tmp_path / "ints", "raw", ints)
    assert path.read_bytes() == b"\x00\x00\x01\x02\n\xff\xff\xff\xff\n"  # as Flink 2.3 writes them
    assert table.column(0).to_pylist() == [258, -1]
    writer = create_format("raw", schema, {}, None, "t").open_writer(str(tmp_path / "nulls"), schema)
    with pytest.raises(DataError, match="cannot write a NULL value to file"):
        writer.write(pa.RecordBatch.from_pydict({"line": ["a", None]}, schema=schema))
    writer.close()


@pytest.mark.parametrize("fmt", ["avro", "orc"])
def test_file_without_rows(tmp_path: Path, fmt: str) -> None:
    path, table = write_read(tmp_path, fmt, sample_batch().select(NO_LTZ).slice(0, 0))
    assert table.num_rows == 0 and path.stat().st_size > 0


@pytest.mark.parametrize(("options", "expected"), [({}, "ZLIB"), ({"orc.compress": "none"}, "UNCOMPRESSED"),
                                                   ({"orc.compress": "zstd"}, "ZSTD")])
def test_orc_compression(tmp_path: Path, options: dict, expected: str) -> None:
    path, table = write_read(tmp_path, "orc", sample_batch().select(NO_LTZ), options)
    assert orc.ORCFile(str(path)).compression == expected and table.num_rows == 5


def test_orc_refuses_time_and_reads_other_types_by_cast(tmp_path: Path) -> None:
    with pytest.raises(ConnectorError, match="format 'orc' does not support column 't' of type TIME"):
        create_format("orc", pa.schema([("t", parse_type("TIME"))]), {}, None, "t")
    schema = pa.schema([("id", pa.int64()), ("ts", parse_type("TIMESTAMP(3)"))])
    batch = pa.RecordBatch.from_pylist([{"id": 1, "ts": dt.datetime(2024, 1, 1, 0, 0, 0, 5000)}], schema=schema)
    path, _ = write_read(tmp_path, "orc", batch)
    narrow = create_format("orc", pa.schema([("id", pa.int32())]), {}, None, "t")
    assert pa.Table.from_batches(list(narrow.read_file(str(path)))).column(0).to_pylist() == [1]
    with pytest.raises(DataError, match=r"ORC file .*data\.orc: column 'id' of type BIGINT cannot be read as DATE"):
        list(create_format("orc", pa.schema([("id", pa.date32())]), {}, None, "t").read_file(str(path)))
