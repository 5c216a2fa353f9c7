"""ARRAY, MAP and ROW: their DDL types, the json and parquet formats, constructors, element access,
the collection functions and UNNEST (the Flink reference group ``nested`` pins Flink's answers;
these pin the edge cases and the parts Flink cannot be asked about: parquet, retractions through
UNNEST, checkpointed state)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pytest

from sqlstream.core.errors import ConnectorError, DataError, PlanError
from sqlstream.core.expressions import ColumnRef
from sqlstream.core.functions import lookup
from sqlstream.core.functions.collections import ITEM
from sqlstream.core.physical import PhysicalNode
from sqlstream.core.sql.script import parse_one
from sqlstream.core.types import parse_type, sql_type_name
from sqlstream.frontend.session import Session
from sqlstream.frontend.tableau import NULL, format_value
from sqlstream.planner.logical import Filter, Unnest
from sqlstream.planner.planner import dataflow, select_plan
from sqlstream.runtime.connectors.print_sink import value_text as print_text
from sqlstream.runtime.elements import Chunk, RowKind
from sqlstream.runtime.formats import create_format
from sqlstream.runtime.operators.unnest import UnnestOperator
from tests.conftest import in_key_groups, run_sql
from tests.harness import OperatorHarness, restored_into_halves

DOCS = [
    {"id": 1, "tags": ["a", "b"], "attrs": {"x": 1, "y": 2}, "info": {"name": "Ann", "addr": {"city": "Berlin"}},
     "items": [{"sku": "p1", "qty": 2}, {"sku": "p2", "qty": 5}]},
    {"id": 2, "tags": [], "attrs": {}, "info": {"name": None, "addr": None}, "items": []},
    {"id": 3, "tags": None, "attrs": None, "info": None, "items": None},
    {"id": 4, "tags": ["ü", None], "attrs": {"ü": None}, "info": {"name": "Zoë", "addr": {"city": None}},
     "items": [None, {"sku": "p3", "qty": None}]},
]
COLUMNS = ("id INT, tags ARRAY<STRING>, attrs MAP<STRING, INT>, info ROW<name STRING, addr ROW<city STRING>>, "
           "items ARRAY<ROW<sku STRING, qty INT>>")


def _docs(tmp_path: Path, name: str = "docs") -> str:
    path = tmp_path / f"{name}.json"
    path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in DOCS), encoding="utf-8")
    return (f"CREATE TABLE {name} ({COLUMNS}) WITH ('connector' = 'filesystem', 'path' = '{path}', "
            "'format' = 'json');\n")


def _rows(table: pa.Table) -> list[tuple]:
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)


def test_nested_column_types_parse_and_print_as_flink() -> None:
    t = parse_type("ROW<name STRING, tags ARRAY<INT>, m MAP<STRING, ROW(a BIGINT)>>")
    assert t == pa.struct([("name", pa.string()), ("tags", pa.list_(pa.int32())),
                           ("m", pa.map_(pa.string(), pa.struct([("a", pa.int64())])))])
    assert sql_type_name(t) == "ROW<`name` STRING, `tags` ARRAY<INT>, `m` MAP<STRING, ROW<`a` BIGINT>>>"
    with pytest.raises(PlanError, match="repeats a field name"):
        parse_type("ROW<a INT, A STRING>")


def test_json_reads_arrays_maps_rows_with_nulls_and_unicode(tmp_path: Path) -> None:
    table = run_sql(_docs(tmp_path) + "SELECT * FROM docs;")
    got = {r["id"]: r for r in table.to_pylist()}
    assert got[1]["attrs"] == [("x", 1), ("y", 2)]
    assert got[4]["tags"] == ["ü", None] and got[4]["attrs"] == [("ü", None)]
    assert got[4]["items"] == [None, {"sku": "p3", "qty": None}]
    assert got[2]["info"] == {"name": None, "addr": None} and got[3]["info"] is None


def test_json_map_value_of_the_wrong_kind_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"m": {"a": 1}}\n{"m": [1]}\n', encoding="utf-8")
    ddl = f"CREATE TABLE b (m MAP<STRING, INT>) WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'json');"
    with pytest.raises(Exception, match=r"line 2.*expected an object, got an array"):
        run_sql(ddl + "SELECT * FROM b;")


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_nested_values_round_trip_through_a_sink(tmp_path: Path, fmt: str) -> None:
    sink = (f"CREATE TABLE out ({COLUMNS}) WITH ('connector' = 'filesystem', 'path' = '{tmp_path / 'out'}', "
            f"'format' = '{fmt}');\n")
    run_sql(_docs(tmp_path) + sink + "INSERT INTO out SELECT * FROM docs;\nSELECT * FROM docs;")
    again = run_sql(_docs(tmp_path) + sink + "SELECT * FROM out;")
    original = run_sql(_docs(tmp_path) + "SELECT * FROM docs;")
    assert _rows(again) == _rows(original)


def test_json_writes_rows_as_objects_and_maps_with_their_keys() -> None:
    schema = pa.schema([("r", parse_type("ROW<a INT, b ARRAY<STRING>>")), ("m", parse_type("MAP<INT, STRING>"))])
    batch = pa.RecordBatch.from_pylist([{"r": {"a": 1, "b": ["x", None]}, "m": [(1, "é"), (2, None)]},
                                        {"r": None, "m": None}], schema=schema)
    lines = create_format("json", schema, {}, None, "t").encode_lines(batch).to_pylist()
    assert lines == ['{"r":{"a":1,"b":["x",null]},"m":{"1":"é","2":null}}', '{"r":null,"m":null}']


def test_csv_refuses_map_columns_as_flink() -> None:
    with pytest.raises(ConnectorError, match="format 'csv' does not support column 'c' of type MAP"):
        create_format("csv", pa.schema([("c", parse_type("MAP<STRING, INT>"))]), {}, None, "t")


@pytest.mark.parametrize("null_literal", ["", "N"])
def test_csv_array_and_row_fields_round_trip_through_the_element_delimiter(tmp_path: Path, null_literal: str) -> None:
    schema = pa.schema([("a", parse_type("ARRAY<INT>")), ("r", parse_type("ROW<x STRING, y DOUBLE>"))])
    batch = pa.RecordBatch.from_pylist([{"a": [1, None, 3], "r": {"x": "p, q", "y": 1.5}},
                                        {"a": [], "r": {"x": None, "y": None}}], schema=schema)
    options = {"csv.null-literal": null_literal, "csv.array-element-delimiter": "|"}
    fmt = create_format("csv", schema, options, None, "t")
    # an empty ARRAY is an empty field, NULL elements and fields the null literal
    assert fmt.encode_lines(batch).to_pylist() == [f'1|{null_literal}|3,"p, q|1.5"', f",{null_literal}|{null_literal}"]
    path = tmp_path / "a.csv"
    path.write_text("\n".join(fmt.encode_lines(batch).to_pylist()) + "\n", encoding="utf-8")
    table = pa.Table.from_batches(list(fmt.read_file(str(path))))
    assert table.column("a").to_pylist() == [[1, None, 3], []]
    assert table.column("r").to_pylist() == [{"x": "p, q", "y": 1.5}, {"x": None, "y": None}]


def test_csv_empty_element_of_a_number_array_is_an_error_without_a_null_literal(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text("1;2\n3;\n", encoding="utf-8")
    fmt = create_format("csv", pa.schema([("a", parse_type("ARRAY<INT>"))]), {}, None, "t")
    with pytest.raises(DataError, match=r"line 2: column 'a': cannot parse '3;'"):
        list(fmt.read_file(str(path)))


def test_element_access_is_one_based_and_null_past_the_end(tmp_path: Path) -> None:
    table = run_sql(_docs(tmp_path) + "SELECT id, tags[1] AS a, tags[2] AS b, tags[3] AS c, attrs['y'] AS y, "
                    "info.addr.city AS city, docs.info.name AS name, items[2].sku AS sku FROM docs;")
    assert _rows(table) == sorted([(1, "a", "b", None, 2, "Berlin", "Ann", "p2"),
                                   (2, None, None, None, None, None, None, None),
                                   (3, None, None, None, None, None, None, None),
                                   (4, "ü", None, None, None, None, "Zoë", "p3")], key=repr)


def test_missing_element_of_a_constructor_of_literals_is_flinks_primitive_default(tmp_path: Path) -> None:
    # Flink types ARRAY[<non-NULL literals>] ARRAY<T NOT NULL> (MAP[...]'s values alike): a missing
    # element, a missing key or a NULL index gives its code generator's default, not NULL (probed on
    # Flink 2.3); elements from a nullable column keep NULL
    table = run_sql(_docs(tmp_path) + "SELECT id, ARRAY['p', 'q'][id] AS s, ARRAY[10, 20][id] AS i, "
                    "ARRAY[TRUE, FALSE][id] AS b, ARRAY[1.5e0, 2.5e0][id] AS d, MAP['x', 1.5e0][tags[1]] AS m, "
                    "ARRAY[10, 20][CAST(NULL AS INT)] AS n, ARRAY[id, 2][3] AS c, ARRAY[CAST(1 AS BIGINT), 2][id] AS l, "
                    "ARRAY[TRY_CAST('x' AS INT)][id] AS t FROM docs;")
    assert _rows(table) == sorted([(1, "p", 10, True, 1.5, -1.0, -1, None, 1, None),
                                   (2, "q", 20, False, 2.5, -1.0, -1, None, 2, None),
                                   (3, "", -1, False, -1.0, -1.0, -1, None, -1, None),
                                   (4, "", -1, False, -1.0, -1.0, -1, None, -1, None)], key=repr)


def test_constant_index_below_one_is_refused_as_flink_does(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="Array element access needs an index starting at 1 but was 0"):
        run_sql(_docs(tmp_path) + "SELECT tags[0] FROM docs;")
    item = lookup(ITEM).kernel  # a computed index below 1 gives NULL, as in Flink
    assert item(pa.array([[1], [2], [3]], pa.list_(pa.int32())), pa.array([-2, 0, 1])).to_pylist() == [None, None, 3]


def test_map_access_takes_the_last_entry_of_a_key() -> None:
    m = lookup("MAP").kernel(pa.scalar("a"), pa.array([1, 2]), pa.scalar("a"), pa.array([3, 4]))
    assert lookup(ITEM).kernel(m, pa.scalar("a")).to_pylist() == [3, 4]


def test_collection_functions_on_sliced_arrays_with_null_lists() -> None:
    arr = pa.array([[9], [1, None, 1, 2], None, [], [5, 5]], pa.list_(pa.int32())).slice(1)
    assert lookup("CARDINALITY").kernel(arr).to_pylist() == [4, None, 0, 2]
    assert lookup("ARRAY_DISTINCT").kernel(arr).to_pylist() == [[1, None, 2], None, [], [5]]
    assert lookup("ARRAY_CONTAINS").kernel(arr, pa.scalar(2)).to_pylist() == [True, None, False, False]
    assert lookup("ARRAY_CONTAINS").kernel(arr, pa.scalar(None, pa.int32())).to_pylist() == [True, None, False, False]
    m = pa.array([[("z", 1)], [("b", 2), ("a", None)], None], pa.map_(pa.string(), pa.int32())).slice(1)
    assert lookup("MAP_KEYS").kernel(m).to_pylist() == [["b", "a"], None]
    assert lookup("MAP_VALUES").kernel(m).to_pylist() == [[2, None], None]


def test_element_fails_on_more_than_one_element() -> None:
    element = lookup("ELEMENT").kernel
    assert element(pa.array([[7], [], None], pa.list_(pa.int32()))).to_pylist() == [7, None, None]
    with pytest.raises(DataError, match="Array has more than one element"):
        element(pa.array([[1, 2]], pa.list_(pa.int32())))


def test_cast_of_nested_values_to_string_is_flinks_text(tmp_path: Path) -> None:
    table = run_sql(_docs(tmp_path) + "SELECT id, CAST(tags AS STRING) AS t, CAST(info AS STRING) AS i, "
                    "CAST(attrs AS STRING) AS m FROM docs WHERE id IN (1, 4);")
    assert _rows(table) == sorted([(1, "[a, b]", "(Ann, (Berlin))", "{x=1, y=2}"), (4, "[ü, NULL]", "(Zoë, (NULL))", "{ü=NULL}")], key=repr)


def test_unnest_expands_arrays_maps_and_rows(tmp_path: Path) -> None:
    ddl = _docs(tmp_path)
    arrays = run_sql(ddl + "SELECT id, t, n FROM docs CROSS JOIN UNNEST(tags) WITH ORDINALITY AS u(t, n);")
    assert _rows(arrays) == sorted([(1, "a", 1), (1, "b", 2), (4, None, 2), (4, "ü", 1)], key=repr)
    maps = run_sql(ddl + "SELECT id, k, v FROM docs, UNNEST(attrs) AS u(k, v);")
    assert _rows(maps) == sorted([(1, "x", 1), (1, "y", 2), (4, "ü", None)], key=repr)
    rows = run_sql(ddl + "SELECT id, sku, qty FROM docs CROSS JOIN UNNEST(items) AS u(sku, qty);")
    assert _rows(rows) == sorted([(1, "p1", 2), (1, "p2", 5), (4, "p3", None)], key=repr)  # a NULL ROW element is skipped
    left = run_sql(ddl + "SELECT id, t FROM docs LEFT JOIN UNNEST(tags) AS u(t) ON TRUE;")
    assert sorted(left.column("id").to_pylist()) == [1, 1, 2, 3, 4, 4]


@pytest.mark.parametrize(("sql", "message"), [
    ("SELECT x FROM docs CROSS JOIN UNNEST(id) AS u(x)", "UNNEST needs an ARRAY or a MAP, got INT for 'id'"),
    ("SELECT x FROM docs CROSS JOIN UNNEST(attrs) AS u(x)", "UNNEST of MAP<STRING, INT> gives 2 column(s)"),
    ("SELECT x FROM docs LEFT JOIN UNNEST(tags) AS u(x) ON x = 'a'", "ON TRUE only"),
    ("SELECT tags, COUNT(*) FROM docs GROUP BY tags", "keying rows by the ARRAY<STRING> column 'tags'"),
    ("SELECT id FROM docs WHERE tags < tags", "ARRAY, MAP and ROW values only compare with = and <>"),
    ("SELECT info.nope FROM docs", "has no field 'nope'"),
    ("SELECT tags['a'] FROM docs", "an ARRAY index must be an integer"),
    ("SELECT id FROM (SELECT id, ROW_NUMBER() OVER (PARTITION BY id ORDER BY tags) AS rn FROM docs) WHERE rn = 1",
     "ORDER BY the ARRAY<STRING> column 'tags' is not supported"),
    ("SELECT LAST_VALUE(info) FROM docs", "LAST_VALUE over ROW<"),
])
def test_misuse_is_refused_at_plan_time_with_its_position(tmp_path: Path, sql: str, message: str) -> None:
    with pytest.raises(PlanError, match=re.escape(message)) as e:
        run_sql(_docs(tmp_path) + sql + ";")
    assert "line 2" in str(e.value)


def test_unnest_repeats_row_kinds_so_retractions_withdraw_the_same_rows() -> None:
    schema = pa.schema([("k", pa.int32()), ("a", pa.list_(pa.int32()))])
    out_schema = pa.schema([*schema, ("x", pa.int32()), ("n", pa.int32())])
    op = UnnestOperator(ColumnRef(1, "a", schema.field(1).type), True, True, out_schema)
    batch = pa.RecordBatch.from_pylist([{"k": 1, "a": [5, 6]}, {"k": 1, "a": [5, 6]}, {"k": 2, "a": None}],
                                       schema=schema)
    kinds = pa.array([RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.INSERT], pa.int8())
    (chunk,) = op.process_batch(Chunk(batch, kinds))
    assert chunk.kinds.to_pylist() == [RowKind.INSERT] * 2 + [RowKind.UPDATE_BEFORE] * 2 + [RowKind.INSERT]
    assert chunk.batch.column("x").to_pylist() == [5, 6, 5, 6, None]
    assert chunk.batch.column("n").to_pylist() == [1, 2, 1, 2, None]


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_aggregates_over_elements_and_unnested_values_keep_keyed_state(tmp_path: Path, backend: str) -> None:
    query = ("SELECT info.name AS name, MAX(items[1].qty) AS q, SUM(CARDINALITY(tags)) AS n FROM docs "
             "GROUP BY info.name;")
    table = run_sql(_docs(tmp_path) + query, {"state.backend.type": backend})
    assert _rows(table) == sorted([("Ann", 2, 2), ("Zoë", None, 2), (None, None, 0)], key=repr)


@pytest.mark.parametrize(("backend", "restored_on"), [("hashmap", "rocksdb"), ("rocksdb", "hashmap")])
def test_join_state_holding_nested_values_survives_a_savepoint_and_a_backend_change(
        tmp_path: Path, backend: str, restored_on: str) -> None:
    """A regular join keeps its left rows, nested columns and all, in keyed state: a savepoint of them
    restores on the other backend into two subtasks, and the rows joined later carry the values."""
    session = Session()
    for name, columns in (("l", f"k INT, {COLUMNS}"), ("r", "k INT, v INT")):
        (tmp_path / name).mkdir()
        session.execute_script(f"CREATE TABLE {name} ({columns}) WITH ('connector' = 'filesystem', "
                               f"'path' = '{tmp_path / name}', 'format' = 'json')")
    query = parse_one("SELECT l.k, l.tags, l.attrs, l.info, l.items, r.v FROM l JOIN r ON l.k = r.k")

    def planned(on: str) -> tuple[PhysicalNode, list[pa.Schema]]:
        """The join as a job on backend ``on`` plans it (the state form follows the backend)."""
        _, flow = dataflow([select_plan(session.catalog, query)], {"state.backend.type": on})
        join = next(n for n in flow.nodes if n.name == "Join")
        return join, [next(n for n in flow.nodes if n.id == e.upstream).schema for e in join.inputs]

    settings = {"state.backend.type": backend}
    node, (left_schema, right_schema) = planned(backend)
    restored_node, _ = planned(restored_on)
    left = pa.RecordBatch.from_pylist([{"k": i % 3, **d} for i, d in enumerate(DOCS)], schema=left_schema)
    h = OperatorHarness(node, backend, tmp=tmp_path / "run", config=settings, inputs=2)
    h.process_batch(left, input_index=0)
    snapshot = h.snapshot()
    right = pa.RecordBatch.from_pylist([{"k": 0, "v": 10}, {"k": 1, "v": 11}], schema=right_schema)
    joined = []
    for groups, half in restored_into_halves(snapshot, lambda: restored_node, restored_on, tmp=tmp_path / "restored",
                                             config={"state.backend.type": restored_on}):
        half.process_batch(right.filter(pa.array(in_key_groups(right, node.inputs[1].keys, groups))), input_index=1)
        joined += half.take()
    expected = [(RowKind.INSERT, i % 3, d["tags"], None if d["attrs"] is None else list(d["attrs"].items()),
                 d["info"], d["items"], i % 3, 10 + i % 3) for i, d in enumerate(DOCS) if i % 3 < 2]
    assert sorted(joined, key=repr) == sorted(expected, key=repr)


def test_print_sink_and_sql_client_show_nested_values_as_text() -> None:
    t = parse_type("ROW<a ARRAY<INT>, m MAP<STRING, DOUBLE>>")
    arr = pa.array([{"a": [1, None], "m": [("k", 1.0)]}, None, {"a": None, "m": []}], t)
    assert print_text(arr).to_pylist() == ["([1, null], {k=1.0})", "null", "(null, {})"]
    assert [format_value(v, t) for v in arr.to_pylist()] == ["([1, NULL], {k=1.0})", NULL, "(NULL, {})"]


def test_unnest_without_column_names_names_them_as_flink(tmp_path: Path) -> None:
    ddl = _docs(tmp_path)
    assert run_sql(ddl + "SELECT * FROM docs CROSS JOIN UNNEST(tags) WITH ORDINALITY;").column_names[-2:] == [
        "EXPR$0", "ORDINALITY"]
    assert run_sql(ddl + "SELECT * FROM docs CROSS JOIN UNNEST(attrs);").column_names[-2:] == ["KEY", "VALUE"]
    assert run_sql(ddl + "SELECT * FROM docs CROSS JOIN UNNEST(items);").column_names[-2:] == ["sku", "qty"]
    assert run_sql("SELECT * FROM UNNEST(ARRAY[1, 2]) AS t(x);").column("x").to_pylist() == [1, 2]


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_top_n_passes_nested_columns_through_its_state(tmp_path: Path, backend: str) -> None:
    query = ("SELECT id, tags, attrs FROM (SELECT id, tags, attrs, ROW_NUMBER() OVER (PARTITION BY info.name IS NULL "
             "ORDER BY id DESC) AS rn FROM docs) WHERE rn <= 2;")
    table = run_sql(_docs(tmp_path) + query, {"state.backend.type": backend})
    assert _rows(table) == sorted([(4, ["ü", None], [("ü", None)]), (1, ["a", "b"], [("x", 1), ("y", 2)]),
                                   (3, None, None), (2, [], [])], key=repr)


def test_array_functions_keep_null_rows_apart_from_their_other_arguments() -> None:
    """A NULL array row has no elements, while a constant argument has one for every row: the
    results stay aligned (ARRAY_CONCAT/APPEND) and sliced inputs are read from their offset."""
    arr = pa.array([["x"], ["a", "b", "c"], None, [], [None, "d"]], pa.list_(pa.string())).slice(1)
    z = pa.scalar(["z"], pa.list_(pa.string()))
    assert lookup("ARRAY_CONCAT").kernel(arr, z).to_pylist() == [["a", "b", "c", "z"], None, ["z"], [None, "d", "z"]]
    assert lookup("ARRAY_PREPEND").kernel(arr, pa.scalar("f")).to_pylist() == [
        ["f", "a", "b", "c"], None, ["f"], ["f", None, "d"]]
    assert lookup("ARRAY_REVERSE").kernel(arr).to_pylist() == [["c", "b", "a"], None, [], ["d", None]]
    assert lookup("ARRAY_POSITION").kernel(arr, pa.scalar("c")).to_pylist() == [3, None, 0, 0]
    assert lookup("ARRAY_REMOVE").kernel(arr, pa.scalar(None, pa.string())).to_pylist() == [
        ["a", "b", "c"], None, [], ["d"]]
    assert lookup("ARRAY_JOIN").kernel(arr, pa.scalar("-"), pa.scalar("?")).to_pylist() == ["a-b-c", None, "", "?-d"]
    assert lookup("ARRAY_MAX").kernel(arr).to_pylist() == ["c", None, None, "d"]
    slice_ = lookup("ARRAY_SLICE").kernel
    assert slice_(arr, pa.scalar(-2), pa.scalar(-1)).to_pylist() == [["b", "c"], None, [], [None, "d"]]
    assert slice_(arr, pa.scalar(0), pa.scalar(1)).to_pylist() == [["a"], None, [], [None]]
    assert slice_(arr, pa.scalar(3, pa.int32())).to_pylist() == [["c"], None, [], []]


def test_map_from_arrays_needs_arrays_of_one_length() -> None:
    keys = pa.array([["a", "b"], None, ["c"]], pa.list_(pa.string()))
    values = pa.array([[1, 2], [3], [4]], pa.list_(pa.int32()))
    assert lookup("MAP_FROM_ARRAYS").kernel(keys, values).to_pylist() == [[("a", 1), ("b", 2)], None, [("c", 4)]]
    with pytest.raises(DataError, match="same length"):
        lookup("MAP_FROM_ARRAYS").kernel(keys, pa.array([[1], [3], [4]], pa.list_(pa.int32())))


def test_nested_values_compare_by_value_with_null_elements_equal(tmp_path: Path) -> None:
    query = ("SELECT id, tags = ARRAY['ü', CAST(NULL AS STRING)] AS t, attrs <> MAP['y', 2, 'x', 1] AS m, "
             "info = (CAST('Ann' AS STRING), ROW('Berlin')) AS i, (1, 'a') = ROW(1, 'a') AS c FROM docs;")
    table = run_sql(_docs(tmp_path) + query)
    assert _rows(table) == sorted([(1, False, False, True, True), (2, False, True, False, True),
                                   (3, None, None, None, True), (4, True, True, False, True)], key=repr)


def test_json_maps_convert_column_wise_and_name_a_bad_value(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text('{"m": {"a": 1, "b": 2.5}, "n": {"k": [1, null]}}\n{"m": {"c": "3"}, "n": null}\n'
                    '{"m": {"d": "x"}}\n', encoding="utf-8")
    schema = pa.schema([("m", parse_type("MAP<STRING, DOUBLE>")), ("n", parse_type("MAP<STRING, ARRAY<INT>>"))])
    lenient = create_format("json", schema, {"json.ignore-parse-errors": "true"}, None, "t")
    table = pa.Table.from_batches(list(lenient.read_file(str(path))))
    assert table.column("m").to_pylist() == [[("a", 1.0), ("b", 2.5)], [("c", 3.0)]]
    assert table.column("n").to_pylist() == [[("k", [1, None])], None]
    with pytest.raises(DataError, match=r"line 3: field 'm': cannot parse"):
        list(create_format("json", schema, {}, None, "t").read_file(str(path)))


def test_set_functions_and_sort_on_null_rows_and_null_elements() -> None:
    a = pa.array([["b", "a", "b", None], None, [], ["x", None]], pa.list_(pa.string()))
    b = pa.scalar(["b", "z", None], pa.list_(pa.string()))
    assert lookup("ARRAY_UNION").kernel(a, b).to_pylist() == [["b", "a", None, "z"], None, ["b", "z", None],
                                                             ["x", None, "b", "z"]]
    assert lookup("ARRAY_INTERSECT").kernel(a, b).to_pylist() == [["b", None], None, [], [None]]
    assert lookup("ARRAY_EXCEPT").kernel(a, b).to_pylist() == [["a"], None, [], ["x"]]
    sort = lookup("ARRAY_SORT").kernel
    assert sort(a).to_pylist() == [[None, "a", "b", "b"], None, [], [None, "x"]]
    assert sort(a, pa.scalar(False)).to_pylist() == [["b", "b", "a", None], None, [], ["x", None]]
    m = pa.array([[("a", 1), ("b", 2)], None, []], pa.map_(pa.string(), pa.int32()))
    assert lookup("MAP_UNION").kernel(m, pa.scalar([("b", 20), ("c", 3)], m.type)).to_pylist() == [
        [("a", 1), ("b", 20), ("c", 3)], None, [("b", 20), ("c", 3)]]


def test_str_to_map_splits_at_regular_expressions_and_the_last_pair_wins() -> None:
    to_map = lookup("STR_TO_MAP").kernel
    assert to_map(pa.array(["a=1,b=2,a=3", "", None, "p==q", "x,,y=1"])).to_pylist() == [
        [("b", "2"), ("a", "3")], [], None, [("p", "=q")], [("x", None), ("", None), ("y", "1")]]
    assert to_map(pa.scalar("x:1|y:2"), pa.scalar(r"\|"), pa.scalar(":")).as_py() == [("x", "1"), ("y", "2")]


def test_regexp_extract_all_finds_every_match_of_a_group() -> None:
    extract = lookup("REGEXP_EXTRACT_ALL").kernel
    texts = pa.array(["Hello World", "", None])
    assert extract(texts, pa.scalar("([a-z])([a-z]+)")).to_pylist() == [["e", "o"], [], None]
    assert extract(texts, pa.scalar("([a-z])([a-z]+)"), pa.scalar(0)).to_pylist() == [["ello", "orld"], [], None]
    assert extract(texts, pa.scalar("(a)"), pa.scalar(3)).to_pylist() == [None, None, None]  # no such group


def test_conditions_on_the_unnested_rows_columns_are_pushed_below_unnest(tmp_path: Path) -> None:
    session = Session()
    session.execute_script(_docs(tmp_path))
    query = parse_one("SELECT id, t FROM docs CROSS JOIN UNNEST(tags) AS u(t) WHERE t <> 'a' AND id > 1")
    (optimized,), _ = dataflow([select_plan(session.catalog, query)])
    node = optimized
    while not isinstance(node, Unnest):
        node = node.inputs[0]
    assert isinstance(node.input, Filter) and "id" in str(node.input.predicate)
    assert "t <> 'a'" not in str(node.input.predicate)
    assert _rows(run_sql(_docs(tmp_path) + "SELECT id, t FROM docs CROSS JOIN UNNEST(tags) AS u(t) "
                         "WHERE t <> 'a' AND id > 1;")) == [(4, "ü")]  # NULL <> 'a' is not TRUE


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_array_agg_keeps_nulls_and_withdraws_retracted_values(tmp_path: Path, backend: str) -> None:
    query = ("SELECT n, ARRAY_AGG(k) AS ks FROM (SELECT info.name IS NULL AS k, COUNT(*) AS n FROM docs "
             "GROUP BY info.name IS NULL) GROUP BY n;")
    table = run_sql(_docs(tmp_path) + query, {"state.backend.type": backend})
    # the counts move 1 -> 2 for both keys: each retraction removes the value its insertion added
    assert [(n, sorted(ks)) for n, ks in _rows(table)] == [(2, [False, True])]
    nulls = run_sql(_docs(tmp_path) + "SELECT ARRAY_AGG(items[1].qty) AS q FROM docs;", {"state.backend.type": backend})
    assert sorted(nulls.column("q").to_pylist()[0], key=repr) == sorted([2, None, None, None], key=repr)


def test_cast_of_an_array_of_rows_renames_the_fields_by_position() -> None:
    # an ARRAY of ROW literals has fields EXPR$0, EXPR$1; the cast (and an INSERT into a column of the declared
    # type) takes them by position, as Flink does, instead of matching names and reading NULLs
    result = run_sql("SELECT CAST(ARRAY[ROW('a', 5), ROW('b', CAST(NULL AS INT))] AS ARRAY<ROW<sku STRING, n INT>>) "
                     "AS lines, CAST(CAST(NULL AS ARRAY<ROW<x STRING, y INT>>) AS ARRAY<ROW<sku STRING, n INT>>) AS none")
    assert result.to_pylist() == [{"lines": [{"sku": "a", "n": 5}, {"sku": "b", "n": None}], "none": None}]


def test_cast_of_a_map_of_rows_renames_the_fields_by_position() -> None:
    result = run_sql("SELECT CAST(MAP['k', ROW('a', 1), 'j', CAST(NULL AS ROW<p STRING, q INT>)] "
                     "AS MAP<STRING, ROW<x STRING, y INT>>) AS m")
    assert result.to_pylist() == [{"m": [("k", {"x": "a", "y": 1}), ("j", None)]}]
