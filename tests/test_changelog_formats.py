"""Changelog formats (debezium-json, canal-json, maxwell-json): decoding envelopes into +I/-U/+U/-D,
writing updates as events, the planner treating such a source as updating, and malformed events."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pytest

from sqlstream.core.errors import DataError, PlanError
from sqlstream.core.types import parse_type
from sqlstream.runtime.elements import RowKind
from sqlstream.runtime.formats import create_format, split_row_kinds, with_row_kinds
from tests.conftest import run_sql

INS, UB, UA, D = (int(k) for k in RowKind)
SCHEMA = pa.schema([("id", pa.int32()), ("name", pa.string()), ("v", pa.int64())])

DEBEZIUM = [
    {"before": None, "after": {"id": 1, "name": "a", "v": 10}, "op": "c"},
    {"before": None, "after": {"id": 2, "name": "b", "v": 20}, "op": "r"},
    {"before": {"id": 1, "name": "a", "v": 10}, "after": {"id": 1, "name": "a", "v": 15}, "op": "u"},
    {"before": {"id": 2, "name": "b", "v": 20}, "after": None, "op": "d"},
]
CANAL = [  # Canal writes every value as a string
    {"data": [{"id": "1", "name": "a", "v": "10"}, {"id": "2", "name": "b", "v": "20"}], "old": None,
     "database": "db", "table": "t", "type": "INSERT"},
    {"data": [{"id": "1", "name": "a", "v": "15"}], "old": [{"v": "10"}], "database": "db", "table": "t",
     "type": "UPDATE"},
    {"data": None, "database": "db", "table": "t", "type": "CREATE", "isDdl": True},
    {"data": [{"id": "2", "name": "b", "v": "20"}], "old": None, "database": "db", "table": "t", "type": "DELETE"},
    {"data": [{"id": "9", "name": "z", "v": "90"}], "old": None, "database": "db", "table": "other",
     "type": "INSERT"},
]
MAXWELL = [
    {"database": "db", "table": "t", "type": "insert", "data": {"id": 1, "name": "a", "v": 10}},
    {"database": "db", "table": "t", "type": "insert", "data": {"id": 2, "name": "b", "v": 20}},
    {"database": "db", "table": "t", "type": "update", "data": {"id": 1, "name": "a", "v": 15}, "old": {"v": 10}},
    {"database": "db", "table": "t", "type": "delete", "data": {"id": 2, "name": "b", "v": 20}},
]
CHANGES = [((1, "a", 10), INS), ((2, "b", 20), INS), ((1, "a", 10), UB), ((1, "a", 15), UA), ((2, "b", 20), D)]
EVENTS = {"debezium-json": DEBEZIUM, "canal-json": CANAL, "maxwell-json": MAXWELL}


def write_events(path: Path, events: list[dict]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def changes(batches: list[pa.RecordBatch]) -> list[tuple[tuple, int]]:
    out = []
    for b in batches:
        rows, kinds = split_row_kinds(b)
        assert kinds is not None
        out += list(zip((tuple(r.values()) for r in rows.to_pylist()), kinds.to_pylist(), strict=True))
    return out


@pytest.mark.parametrize("fmt", list(EVENTS))
def test_events_decode_into_row_kinds(tmp_path: Path, fmt: str) -> None:
    path = write_events(tmp_path / "e.json", EVENTS[fmt])
    got = changes(list(create_format(fmt, SCHEMA, {}, None, "t").read_file(str(path))))
    expected = CHANGES + ([((9, "z", 90), INS)] if fmt == "canal-json" else [])
    assert got == expected


@pytest.mark.parametrize("fmt", list(EVENTS))
def test_slow_path_decodes_like_the_vectorized_one(tmp_path: Path, fmt: str) -> None:
    # A number where other events hold a string makes Arrow reject the block: Python's json decodes it.
    events = [*EVENTS[fmt], EVENTS[fmt][0]]
    text = "".join(json.dumps(e) + "\n" for e in events)
    mixed = text.replace('"v": 10}', '"v": "10"}', 1) if fmt != "canal-json" else text.replace('"10"', "10", 1)
    assert mixed != text
    fast = changes(list(create_format(fmt, SCHEMA, {}, None, "t").read_file(str(write_events(tmp_path / "a", events)))))
    (tmp_path / "b").write_text(mixed)
    slow = changes(list(create_format(fmt, SCHEMA, {}, None, "t").read_file(str(tmp_path / "b"))))
    assert slow == fast


def test_canal_include_filters_database_and_table(tmp_path: Path) -> None:
    path = write_events(tmp_path / "e.json", CANAL)
    fmt = create_format("canal-json", SCHEMA, {"canal-json.table.include": "t", "canal-json.database.include": "d.*"},
                        None, "t")
    assert changes(list(fmt.read_file(str(path)))) == CHANGES


def test_canal_update_keeps_unlisted_fields_and_a_listed_null(tmp_path: Path) -> None:
    event = {"data": [{"id": "1", "name": "a", "v": "15"}], "old": [{"name": None}], "type": "UPDATE"}
    path = write_events(tmp_path / "e.json", [event])
    got = changes(list(create_format("canal-json", SCHEMA, {}, None, "t").read_file(str(path))))
    assert got == [((1, None, 15), UB), ((1, "a", 15), UA)]


def test_debezium_schema_include_reads_the_payload(tmp_path: Path) -> None:
    path = write_events(tmp_path / "e.json", [{"schema": {"type": "struct"}, "payload": e} for e in DEBEZIUM])
    fmt = create_format("debezium-json", SCHEMA, {"debezium-json.schema-include": True}, None, "t")
    assert changes(list(fmt.read_file(str(path)))) == CHANGES
    with pytest.raises(DataError, match=r"line 1: no \"op\" .*'debezium-json.schema-include' = 'true'"):
        list(create_format("debezium-json", SCHEMA, {}, None, "t").read_file(str(path)))


@pytest.mark.parametrize(
    ("fmt", "event", "message"),
    [
        ("debezium-json", {"before": None, "after": {"id": 2}, "op": "x"}, 'Unknown "op" value "x"'),
        ("debezium-json", {"before": None, "after": {"id": 2}, "op": "u"},
         'The "before" field of UPDATE message is null'),
        ("canal-json", {"data": [{"id": "2"}], "type": "TRUNCATE"}, 'Unknown "type" value "TRUNCATE"'),
        ("maxwell-json", {"data": {"id": 2}, "type": "update"}, 'the "old" field of an update is null'),
        ("maxwell-json", {"data": {"id": "x"}, "type": "insert"}, "field 'id': cannot parse 'x' as INT"),
    ],
)
def test_malformed_event_names_the_file_and_line_or_is_skipped(
    tmp_path: Path, fmt: str, event: dict, message: str
) -> None:
    good = EVENTS[fmt][0]
    path = tmp_path / "e.json"
    path.write_text(json.dumps(good) + "\n" + json.dumps(event) + "\n" + json.dumps(good) + "\n")
    with pytest.raises(DataError, match=f"{path} line 2: " + message.replace("(", r"\(")):
        list(create_format(fmt, SCHEMA, {}, None, "t").read_file(str(path)))
    lenient = create_format(fmt, SCHEMA, {f"{fmt}.ignore-parse-errors": True}, None, "t")
    got = changes(list(lenient.read_file(str(path))))
    assert lenient.parse_errors == 1
    assert len(got) == 2 * (2 if fmt == "canal-json" else 1)


def test_messages_name_their_location_and_skip_tombstones() -> None:
    fmt = create_format("debezium-json", SCHEMA, {}, None, "t")
    good = json.dumps(DEBEZIUM[0]).encode()
    batch = fmt.decode_messages([good, b"", good], lambda i: f"offset {i}")
    assert batch.num_rows == 2
    with pytest.raises(DataError, match="offset 1"):
        fmt.decode_messages([good, b'{"op": "c", "after": 1}'], lambda i: f"offset {i}")


@pytest.mark.parametrize(
    ("fmt", "insert", "delete"),
    [
        ("debezium-json", '{"before":null,"after":{"id":1,"name":"a","v":2},"op":"c"}',
         '{"before":{"id":1,"name":"a","v":2},"after":null,"op":"d"}'),
        ("canal-json", '{"data":[{"id":1,"name":"a","v":2}],"type":"INSERT"}',
         '{"data":[{"id":1,"name":"a","v":2}],"type":"DELETE"}'),
        ("maxwell-json", '{"data":{"id":1,"name":"a","v":2},"type":"insert"}',
         '{"data":{"id":1,"name":"a","v":2},"type":"delete"}'),
    ],
)
def test_encoding_writes_additions_and_deletions_as_flink_does(fmt: str, insert: str, delete: str) -> None:
    """Flink writes +I/+U as creations/inserts and -U/-D as deletions."""
    f = create_format(fmt, SCHEMA, {}, None, "t")
    rows = pa.RecordBatch.from_pylist([{"id": 1, "name": "a", "v": 2}] * 4, schema=SCHEMA)
    lines = f.encode_lines(with_row_kinds(rows, pa.array([INS, UB, UA, D], pa.int8()))).to_pylist()
    assert lines == [insert, delete, insert, delete]
    decoded = changes([f.decode_messages([line.encode() for line in lines], str)])
    assert [k for _, k in decoded] == [INS, D, INS, D]


@pytest.mark.parametrize("fmt", list(EVENTS))
def test_group_by_over_a_changelog_source_retracts(tmp_path: Path, fmt: str) -> None:
    path = write_events(tmp_path / "e.json", EVENTS[fmt])
    result = run_sql(f"""
        CREATE TABLE s (id INT, name STRING, v BIGINT)
        WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = '{fmt}');
        SELECT name, SUM(v) AS total, COUNT(*) AS n FROM s GROUP BY name;
    """)
    expected = [("a", 15, 1)] + ([("z", 90, 1)] if fmt == "canal-json" else [])
    assert sorted(zip(*(c.to_pylist() for c in result.columns), strict=True)) == expected


@pytest.mark.parametrize("fmt", list(EVENTS))
def test_updating_query_round_trips_through_changelog_files(tmp_path: Path, fmt: str) -> None:
    result = run_sql(f"""
        CREATE TABLE snk (k STRING, c BIGINT, ts TIMESTAMP(3))
        WITH ('connector' = 'filesystem', 'path' = '{tmp_path}/out', 'format' = '{fmt}');
        CREATE TABLE src (k STRING) WITH ('connector' = 'filesystem', 'path' = '{tmp_path}/in.csv', 'format' = 'csv');
        INSERT INTO snk SELECT k, COUNT(*), TIMESTAMP '2024-01-01 00:00:01.500' FROM src GROUP BY k;
        SELECT * FROM snk;
    """.replace("{tmp_path}/in.csv", str(_csv(tmp_path))))
    got = sorted(zip(*(c.to_pylist() for c in result.columns), strict=True))
    ts = dt.datetime(2024, 1, 1, 0, 0, 1, 500000)
    assert got == [("a", 3, ts), ("b", 1, ts)]


def _csv(tmp_path: Path) -> Path:
    path = tmp_path / "in.csv"
    path.write_text("a\nb\na\na\n")
    return path


def test_plain_json_sink_still_refuses_updates(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="changelog format such as 'format' = 'debezium-json'"):
        run_sql(f"""
            CREATE TABLE snk (k STRING, c BIGINT) WITH ('connector' = 'filesystem', 'path' = '{tmp_path}', 'format' = 'json');
            INSERT INTO snk SELECT k, COUNT(*) FROM (VALUES ('a')) AS t(k) GROUP BY k;
            SELECT * FROM snk;
        """)


def test_changelog_formats_refuse_array_columns() -> None:
    from sqlstream.core.errors import ConnectorError

    with pytest.raises(ConnectorError, match="does not support column 'xs' of type ARRAY"):
        create_format("debezium-json", pa.schema([("xs", parse_type("ARRAY<INT>"))]), {}, None, "t")


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_changelog_normalize_turns_upserts_into_a_full_changelog(backend: str) -> None:
    from sqlstream.runtime.operators.changelog_normalize import ChangelogNormalizeOperator
    from tests.harness import OperatorHarness, changelog

    schema = pa.schema([("k", pa.string()), ("c", pa.int64())])
    h = OperatorHarness(ChangelogNormalizeOperator([0]), backend)
    batch = pa.RecordBatch.from_pylist(
        [{"k": "a", "c": 1}, {"k": "x", "c": None}, {"k": "a", "c": 1}, {"k": "a", "c": 2}, {"k": "b", "c": 5},
         {"k": "a", "c": None}, {"k": "a", "c": 3}],
        schema=schema,
    )
    out = h.process_batch(batch, [INS, D, UA, UA, INS, D, UA])
    by_key = sorted(changelog(out), key=lambda r: r[1])  # order within a key is what matters
    assert by_key == [
        (RowKind.INSERT, "a", 1), (RowKind.UPDATE_BEFORE, "a", 1), (RowKind.UPDATE_AFTER, "a", 2),
        (RowKind.DELETE, "a", 2), (RowKind.INSERT, "a", 3), (RowKind.INSERT, "b", 5),
    ]
    # the kept rows survive a savepoint restored on the other backend: the next upsert of b retracts 5
    other = "rocksdb" if backend == "hashmap" else "hashmap"
    restored = OperatorHarness(ChangelogNormalizeOperator([0]), other, restore=h.snapshot())
    more = restored.process_batch(pa.RecordBatch.from_pylist([{"k": "b", "c": 6}], schema=schema), [UA])
    assert changelog(more) == [(RowKind.UPDATE_BEFORE, "b", 5), (RowKind.UPDATE_AFTER, "b", 6)]
    h.close()
    restored.close()


def test_canal_events_of_several_rows_keep_their_order_and_empty_ones_add_none(tmp_path: Path) -> None:
    events = [
        {"data": [], "type": "INSERT"},
        {"data": [{"id": "1", "name": "a", "v": "1"}, {"id": "2", "name": "b", "v": "2"}], "type": "INSERT"},
        {"data": [{"id": "1", "name": "a", "v": "5"}, {"id": "2", "name": "b", "v": "6"}],
         "old": [{"v": "1"}, {"v": "2"}], "type": "UPDATE"},
    ]
    got = changes(list(create_format("canal-json", SCHEMA, {}, None, "t").read_file(
        str(write_events(tmp_path / "e.json", events)))))
    assert got == [((1, "a", 1), INS), ((2, "b", 2), INS), ((1, "a", 1), UB), ((1, "a", 5), UA),
                   ((2, "b", 2), UB), ((2, "b", 6), UA)]
    only_empty = write_events(tmp_path / "empty.json", [events[0]])
    assert changes(list(create_format("canal-json", SCHEMA, {}, None, "t").read_file(str(only_empty)))) == []


@pytest.mark.parametrize("fmt", list(EVENTS))
def test_filesystem_source_restored_mid_file_continues_with_the_same_changes(tmp_path: Path, fmt: str) -> None:
    """The position counts decoded rows, so an update's -U/+U pair split across batches resumes exactly."""
    from sqlstream.core.tables import ColumnDef, TableDef
    from sqlstream.runtime.connectors.base import SourceContext
    from sqlstream.runtime.connectors.registry import get_connector

    fs = get_connector("filesystem")
    path = write_events(tmp_path / "e.json", EVENTS[fmt])
    table = TableDef("t", tuple(ColumnDef(f.name, f.type) for f in SCHEMA),
                     {"connector": "filesystem", "path": str(path), "format": fmt})

    def reader(position: object = None):  # noqa: ANN202 - a SourceReader
        r = fs.create_source(SourceContext(table, fs.validate(table), list(SCHEMA.names), batch_size=3))
        if position is not None:
            r.restore_position(position)
        r.open()
        return r

    def take(r, limit: int | None = None) -> list[tuple[tuple, int]]:  # noqa: ANN001
        out: list[tuple[tuple, int]] = []
        while not r.finished and (limit is None or len(out) < limit):
            batch = r.read_batch()
            if batch is not None:
                out += list(zip((tuple(x.values()) for x in batch.to_pylist()), r.current_kinds.to_pylist(),
                                strict=True))
        return out

    everything = take(reader())
    first = reader()
    head = take(first, 3)
    rest = take(reader(first.snapshot_position()))
    assert head + rest == everything
    assert [k for _, k in everything[2:4]] == [UB, UA]  # the pair the restore splits


@pytest.mark.parametrize(("ttl", "repeat"), [(None, []), (60_000, [(RowKind.UPDATE_BEFORE, "n", None),
                                                                   (RowKind.UPDATE_AFTER, "n", None)])])
def test_changelog_normalize_drops_an_unchanged_row_only_without_state_ttl(ttl: int | None, repeat: list) -> None:
    from sqlstream.runtime.operators.changelog_normalize import ChangelogNormalizeOperator
    from tests.harness import OperatorHarness, changelog

    schema = pa.schema([("k", pa.string()), ("c", pa.int64())])
    h = OperatorHarness(ChangelogNormalizeOperator([0], ttl), "hashmap")
    first = h.process_batch(pa.RecordBatch.from_pylist([{"k": "n", "c": None}], schema=schema), [INS])
    again = h.process_batch(pa.RecordBatch.from_pylist([{"k": "n", "c": None}], schema=schema), [UA])
    assert changelog(first) == [(RowKind.INSERT, "n", None)]
    assert changelog(again) == repeat  # NULL equals NULL: the row is unchanged
    h.close()
