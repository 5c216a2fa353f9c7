"""The JSON functions' refusals, errors and formatting rules (their answers on data are pinned to Flink
2.3 by the reference group tests/flink_reference/cases/json.sql; the formatting values below are
Flink's, from the same PyFlink runs)."""

from __future__ import annotations

import pyarrow as pa
import pytest
import sqlglot

from sqlstream.core.aggregates import AggCall
from sqlstream.core.errors import DataError, SqlStreamError
from sqlstream.core.functions.json import double_text, dumps, parse
from sqlstream.core.sql.dialect import Flink
from sqlstream.runtime.aggregates import make
from tests.conftest import run_sql

DOCS = "(VALUES (1, '{\"a\":1,\"b\":[1,2]}', '$.a'), (2, '[1]', '$[0]')) AS t(id, doc, p)"
EVENTS = """CREATE TABLE ev (k STRING, v INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
            WITH ('connector' = 'datagen', 'number-of-rows' = '5');"""


@pytest.mark.parametrize(("path", "message", "column"), [
    ("$.a[", r"JSON path syntax error at offset 3 of '\$.a\[': '\[' has no closing '\]'", 24),
    ("$.a..b", r"the deep scan '\.\.' is not supported \(at offset 3\)", 24),
    ("$.a[?(@ > 1)]", r"the filter '\[\?\(\.\.\.\)\]' is not supported", 24),
    ("$.a.length()", r"the path function 'length\(\)' is not supported", 24),
    ("$['a','b']", r"several property names in one bracket is not supported", 24),
    ("$.a b", r"JSON path syntax error at offset 3 of '\$\.a b': unexpected ' '", 24),
])
def test_a_constant_path_is_checked_at_plan_time_pointing_at_the_path(path: str, message: str, column: int) -> None:
    with pytest.raises(SqlStreamError, match=message) as error:
        quoted = path.replace("'", "''")
        run_sql(f"SELECT JSON_VALUE(doc, '{quoted}') FROM {DOCS}")
    assert f"column {column}:" in str(error.value)


def test_a_path_column_with_an_unsupported_construct_fails_the_job_naming_it() -> None:
    with pytest.raises(SqlStreamError, match=r"JSON path '\$\.\.a': the deep scan"):
        run_sql("SELECT JSON_QUERY(doc, p) FROM (VALUES ('{\"a\":1}', '$..a')) AS t(doc, p)")


def test_a_path_column_that_is_malformed_gives_the_on_error_value_as_flinks_illegal_spec() -> None:
    table = run_sql("SELECT JSON_VALUE(doc, p DEFAULT 'bad path' ON ERROR) AS v, JSON_EXISTS(doc, p) AS e "
                    "FROM (VALUES ('{\"a\":1}', '$.a['), ('{\"a\":1}', '$.a')) AS t(doc, p)")
    assert table.to_pylist() == [{"v": "bad path", "e": False}, {"v": "1", "e": True}]


@pytest.mark.parametrize(("query", "message"), [
    ("SELECT JSON_VALUE(doc, '$.a' RETURNING DECIMAL(10, 2)) FROM {docs}",
     r"Unsupported type 'DECIMAL\(10, 2\)' for RETURNING in JSON_VALUE\(\)"),
    ("SELECT JSON_VALUE(doc, '$.a' RETURNING CHAR(3)) FROM {docs}", r"Unsupported type 'CHAR\(3\)'"),
    ("SELECT JSON_QUERY(doc, '$.b' RETURNING ARRAY<INT>) FROM {docs}",
     r"Unsupported array element type 'INT' for RETURNING ARRAY in JSON_QUERY\(\)"),
    ("SELECT JSON_QUERY(doc, '$.b' RETURNING INT) FROM {docs}", r"Unsupported type 'INT' for RETURNING in JSON_QUERY"),
    ("SELECT JSON_VALUE(doc, 'lax $.z' DEFAULT id ON EMPTY) FROM {docs}", r"DEFAULT must be a constant, not 'id'"),
    ("SELECT JSON_OBJECT(KEY doc VALUE 1) FROM {docs}", r"JSON_OBJECT key must be a constant that is not NULL"),
    ("SELECT JSON_OBJECT(KEY CAST(NULL AS STRING) VALUE 1) FROM {docs}", r"must be a constant that is not NULL"),
    ("SELECT JSON_OBJECT('a', 1) FROM {docs}", r"expected VALUE after the key in JSON_OBJECT"),
    ("SELECT JSON_VALUE(doc, '$.a' NULL ON EMPTY ERROR ON EMPTY) FROM {docs}", r"JSON_VALUE takes one ON EMPTY clause"),
    ("SELECT JSON_EXISTS(doc, '$.a' NULL ON ERROR) FROM {docs}", r"unexpected 'NULL' in JSON_EXISTS"),
    ("SELECT id IS JSON FROM {docs}", r"IS JSON's argument must be a character string, got INT"),
    ("SELECT JSON_VALUE(id, '$') FROM {docs}", r"JSON_VALUE's JSON argument must be a character string"),
    ("SELECT JSON_STRING(DATE '2024-01-02') FROM {docs}", r"type 'DATE' is not scalar or cannot be converted into JSON"),
    ("SELECT JSON_ARRAY(TIME '10:00:00') FROM {docs}", r"type 'TIME' is not scalar"),
    ("SELECT JSON(doc) FROM {docs}", r"The JSON\(\) function is currently only supported inside JSON_ARRAY\(\)"),
    ("SELECT JSON_STRING(JSON(doc)) FROM {docs}", r"The JSON\(\) function is currently only supported"),
    ("SELECT JSON_QUOTE(id) FROM {docs}", r"JSON_QUOTE's argument must be a character string, got INT"),
    ("SELECT JSON_ARRAYAGG(doc ORDER BY id) FROM {docs}", r"ORDER BY inside JSON_ARRAYAGG is not supported"),
])
def test_what_flink_refuses_or_sqlstream_does_not_run_is_refused_at_plan_time(query: str, message: str) -> None:
    with pytest.raises(SqlStreamError, match=message):
        run_sql(query.format(docs=DOCS))


@pytest.mark.parametrize(("window", "message"), [
    ("TABLE(HOP(TABLE ev, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '2' SECOND))",
     "JSON_ARRAYAGG cannot be used in a HOP window"),
    ("TABLE(CUMULATE(TABLE ev, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '2' SECOND))",
     "JSON_ARRAYAGG cannot be used in a CUMULATE window"),
    ("TABLE(SESSION(TABLE ev, DESCRIPTOR(ts), INTERVAL '1' SECOND))", "JSON_ARRAYAGG cannot be used in a SESSION window"),
])
def test_json_arrayagg_is_refused_in_windows_that_merge_accumulators(window: str, message: str) -> None:
    with pytest.raises(SqlStreamError, match=message):
        run_sql(f"{EVENTS} SELECT window_start, JSON_ARRAYAGG(k) FROM {window} GROUP BY window_start, window_end;")


def test_json_aggregates_are_refused_in_legacy_group_windows_and_over() -> None:
    with pytest.raises(SqlStreamError, match=r"JSON_OBJECTAGG in a legacy GROUP BY TUMBLE\(\.\.\.\) window"):
        run_sql(f"{EVENTS} SELECT JSON_OBJECTAGG(KEY k VALUE v) FROM ev GROUP BY TUMBLE(ts, INTERVAL '1' SECOND);")
    with pytest.raises(SqlStreamError, match="window function"):
        run_sql(f"{EVENTS} SELECT JSON_ARRAYAGG(k) OVER (ORDER BY ts ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM ev;")


def test_error_behaviours_fail_the_job_with_flinks_messages() -> None:
    with pytest.raises(SqlStreamError, match=r"No results for path: \$\['zz'\]"):
        run_sql(f"SELECT JSON_VALUE(doc, '$.zz' ERROR ON ERROR) FROM {DOCS}")
    with pytest.raises(SqlStreamError, match="Empty result of JSON_QUERY function is not allowed"):
        run_sql(f"SELECT JSON_QUERY(doc, 'lax $.zz' ERROR ON EMPTY) FROM {DOCS}")
    with pytest.raises(SqlStreamError, match="Strict jsonpath mode requires scalar value, and the actual value is: '\\[1, 2\\]'"):
        run_sql(f"SELECT JSON_VALUE(doc, '$.b' ERROR ON ERROR) FROM {DOCS} WHERE id = 1")
    with pytest.raises(SqlStreamError, match="Flink cannot cast to INT"):
        run_sql("SELECT JSON_VALUE('{\"a\":3000000000}', '$.a' RETURNING INT)")


def test_json_objectagg_fails_on_a_repeated_key_and_a_null_key() -> None:
    with pytest.raises(SqlStreamError, match="Key 'x' is already present"):
        run_sql("SELECT JSON_OBJECTAGG(KEY k VALUE v) FROM (VALUES ('x', 1), ('x', 2)) AS t(k, v)")
    with pytest.raises(SqlStreamError, match="Map views don't support null keys"):
        run_sql("SELECT JSON_OBJECTAGG(KEY k VALUE v) FROM (VALUES ('x', 1), (CAST(NULL AS STRING), 2)) AS t(k, v)")


@pytest.mark.parametrize(("value", "flink"), [
    (100.0, "100.0"), (1e7, "1.0E+7"), (12345678.9, "12345678.9"), (0.001, "0.001"), (0.0001, "0.00010"),
    (9999999.0, "9999999.0"), (1e-7, "1.0E-7"), (1e20, "1.0E+20"), (123456789012345678.0, "1.2345678901234568E+17"),
    (0.1 + 0.2, "0.30000000000000004"), (-0.0, "0.0"), (float(pa.scalar(0.1, pa.float32()).as_py()), "0.10000000149011612"),
    (float("nan"), '"NaN"'), (float("-inf"), '"-Infinity"'), (1e300, "1.0E+300"), (-1e-300, "-1.0E-300"),
])
def test_a_double_is_written_as_flinks_bigdecimal_of_its_java_text(value: float, flink: str) -> None:
    assert double_text(value) == flink


def test_json_text_is_written_as_jackson_writes_it() -> None:
    document = parse('{"é":1,"Z":2,"a":[1.50,1e2,-0.0,12345678901234567890],"😀":"\\u0001\\u001f\\n\\"/","\uffff":null}')
    assert dumps(document) == ('{"Z":2,"a":[1.50,1E+2,0.0,12345678901234567890],"é":1,"😀":"\\u0001\\u001F\\n\\"/",'
                               '"\uffff":null}')


@pytest.mark.parametrize(("text", "is_json"), [
    ("1 2", True), ("{\"a\":1} x", True), ("true}", True), ("  [ ] ", True), ("-0", True),
    ("1x", False), ("truex", False), ("1}", False), ("01", False), ("NaN", False), ("", False), ("[1,]", False),
    ("'a'", False), ('"\\x"', False),
])
def test_text_is_json_as_jacksons_reader_takes_its_first_value(text: str, is_json: bool) -> None:
    assert (type(parse(text)).__name__ != "_Invalid") is is_json


def test_json_aggregates_retract_as_flinks_functions() -> None:
    arrays = make(AggCall("JSON_ARRAYAGG_NULL_ON_NULL", 0, False, pa.string(), "a"), retracting=True)
    acc = arrays.create()
    arrays.merge(acc, [["1", None, "2", "1"], [1, 1, 1, 1]])
    arrays.merge(acc, [["1", None], [-1, -1]])
    assert arrays.result(acc) == "[2,1]"
    objects = make(AggCall("JSON_OBJECTAGG_NULL_ON_NULL", 0, False, pa.string(), "o"), retracting=True)
    acc = objects.create()
    objects.merge(acc, [['"b":1', '"a":"x"'], [1, 1]])
    objects.merge(acc, [['"b":1', '"c":2'], [-1, -1]])  # "c" is retracted before it arrives
    assert objects.result(acc) == '{"a":"x"}'
    other = objects.create()
    objects.merge(other, [['"c":2'], [1]])
    objects.merge_acc(acc, other)  # ... and cancelled when the accumulators merge
    assert objects.result(acc) == '{"a":"x"}'
    with pytest.raises(DataError, match="Key 'a' is already present"):
        objects.merge(acc, [['"a":1'], [1]])
    objects.merge(acc, [['"n":null', '"n":null', '"n":3'], [1, -1, 1]])  # a NULL value retracts too
    assert objects.result(acc) == '{"a":"x","n":3}'


def test_written_sql_parses_back_to_the_same_tree() -> None:
    for text in [
        "SELECT JSON_VALUE(s, 'lax $.a' RETURNING INT DEFAULT 1 ON EMPTY ERROR ON ERROR)",
        "SELECT JSON_QUERY(s, '$.a' WITH CONDITIONAL ARRAY WRAPPER EMPTY OBJECT ON ERROR)",
        "SELECT JSON_EXISTS(s, '$.a' UNKNOWN ON ERROR), s IS NOT JSON SCALAR",
        "SELECT JSON_OBJECT(KEY 'a' VALUE JSON_ARRAY(1, s NULL ON NULL) ABSENT ON NULL)",
        "SELECT JSON_OBJECTAGG(KEY k VALUE v ABSENT ON NULL), JSON_ARRAYAGG(v NULL ON NULL) FROM t",
    ]:
        written = sqlglot.parse_one(text, dialect=Flink).sql(dialect=Flink)
        assert sqlglot.parse_one(written, dialect=Flink).sql(dialect=Flink) == written
        assert sqlglot.parse_one(written, dialect=Flink) == sqlglot.parse_one(text, dialect=Flink)
