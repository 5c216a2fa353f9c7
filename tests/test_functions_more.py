"""PRINTF, ENCODE and DECODE: each expression gave this value in Flink 2.3 (PyFlink, streaming
mode; probed one SELECT at a time); the reference group functions_more pins the same over tables."""

from __future__ import annotations

import pytest

from sqlstream import TableEnvironment
from sqlstream.core.errors import SqlStreamError
from sqlstream.frontend.session import Session

CASES = [
    ("PRINTF('%s|%d', 'a', 42)", "a|42"),
    ("PRINTF('%5.2f', 3.14159)", None),  # a DECIMAL is a DecimalData to the formatter: %f fails
    ("PRINTF('%5.2f', CAST(3.14159 AS DOUBLE))", " 3.14"),
    ("PRINTF('%x|%X|%o', 255, 255, 8)", "ff|FF|10"),
    ("PRINTF('%-6s|%6s|%%|%n|', 'ab', 'cd')", "ab    |    cd|%|\n|"),
    ("PRINTF('%d', 3.5)", None),
    ("PRINTF('%s', 3.5)", "3.5"),
    ("PRINTF('%s', TRUE)", "true"),
    ("PRINTF('%s %s', 'a')", None),
    ("PRINTF('%q', 1)", None),
    ("PRINTF('no args')", "no args"),
    ("PRINTF('%b', CAST(NULL AS INT))", "false"),
    ("PRINTF('%d', CAST(NULL AS INT))", "null"),
    ("PRINTF('%s', CAST(NULL AS STRING))", "null"),
    ("PRINTF(CAST(NULL AS STRING), 1)", None),
    ("PRINTF('%05d|%+d|%,d|% d|%(d', 42, 42, 1234567, 42, -42)", "00042|+42|1,234,567| 42|(42)"),
    ("PRINTF('%e|%.3e|%g|%10.4f|%-10.1f|', CAST(12345.678 AS DOUBLE), CAST(12345.678 AS DOUBLE), "
     "CAST(12345.678 AS DOUBLE), CAST(2.5 AS DOUBLE), CAST(2.5 AS DOUBLE))", "1.234568e+04|1.235e+04|12345.7|    2.5000|2.5       |"),
    ("PRINTF('%s', DATE '2024-01-02')", "19724"),  # a DATE is its day number to the formatter
    ("PRINTF('%s', TIMESTAMP '2024-01-02 03:04:05.123')", "2024-01-02T03:04:05.123"),
    ("PRINTF('%2$s %1$s', 'a', 'b')", "b a"),
    ("PRINTF('%c', 'x')", None),
    ("PRINTF('%.2s', 'abcdef')", "ab"),
    ("PRINTF('%S', 'abc')", "ABC"),
    # Java rounds the shortest decimal digits half up (C would give 0.1, 2 for 0.15, 2.5)
    ("PRINTF('%.1f', CAST(0.05 AS DOUBLE))", "0.1"),
    ("PRINTF('%.1f', CAST(0.15 AS DOUBLE))", "0.2"),
    ("PRINTF('%.0f', CAST(2.5 AS DOUBLE))", "3"),
    ("PRINTF('%.2f', CAST(1 AS INT))", None),
    ("PRINTF('%x', -1)", "ffffffff"),
    ("PRINTF('%x', CAST(-1 AS BIGINT))", "ffffffffffffffff"),
    ("PRINTF('%x', CAST(-1 AS TINYINT))", "ff"),
    ("PRINTF('%s', CAST(1.10 AS DECIMAL(5,2)))", "1.10"),
    ("ENCODE('héllo', 'US-ASCII')", b"h?llo"),
    ("ENCODE('héllo', 'ISO-8859-1')", b"h\xe9llo"),
    ("ENCODE('a', 'UTF-16BE')", b"\x00a"),
    ("ENCODE('a', 'UTF-16LE')", b"a\x00"),
    ("ENCODE('a', 'UTF-16')", b"\xfe\xffa"[:2] + b"\x00a"),
    ("ENCODE('a', 'utf8')", b"a"),
    ("ENCODE(CAST(NULL AS STRING), 'UTF-8')", None),
    ("ENCODE('a', CAST(NULL AS STRING))", None),
    ("DECODE(ENCODE('é', 'UTF-8'), 'UTF-8')", "é"),
    ("DECODE(ENCODE('é', 'ISO-8859-1'), 'UTF-8')", "\ufffd"),
    ("DECODE(ENCODE('a', 'UTF-16BE'), 'UTF-16')", "a"),
]


@pytest.mark.parametrize(("expression", "value"), CASES, ids=[c[0] for c in CASES])
def test_function_gives_flinks_value(expression: str, value: object) -> None:
    table = Session().execute_script(f"SELECT {expression} AS v;")[-1].table
    assert table.column(0).to_pylist() == [value]


def test_printf_formats_each_row_of_a_column() -> None:
    rows = "(VALUES (1, 'a'), (-20, CAST(NULL AS STRING)), (CAST(NULL AS INT), 'c')) AS t(n, s)"
    table = Session().execute_script(f"SELECT PRINTF('%4d:%s', n, s) AS v FROM {rows};")[-1].table
    assert sorted(table.column(0).to_pylist()) == sorted(["   1:a", " -20:null", "null:c"])


@pytest.mark.parametrize(("expression", "refusal"), [
    ("PRINTF('%h', 'abc')", "%h"),
    ("PRINTF('%tY', 1)", "date/time conversion"),
    ("PRINTF('%s', ARRAY[1, 2])", "cannot format a ARRAY"),
])
def test_printf_refuses_at_plan_time_what_only_a_jvm_prints(expression: str, refusal: str) -> None:
    with pytest.raises(SqlStreamError, match=refusal):
        Session().execute_script(f"EXPLAIN SELECT {expression};")


def test_an_unknown_charset_fails_the_job_naming_it() -> None:
    # Flink fails too (UnsupportedCharsetException)
    with pytest.raises(SqlStreamError, match="unsupported charset 'bogus'"):
        Session().execute_script("SELECT ENCODE(s, 'bogus') FROM (VALUES ('a')) AS t(s);")


def _rows(sql: str) -> list[dict]:
    """The final rows of a bounded query (an updating result's changelog applied)."""
    return TableEnvironment.create(streaming=True).sql_query(sql.rstrip(";")).to_arrow().to_pylist()


def test_percentile_interpolates_between_the_sorted_values_as_flink() -> None:
    rows = _rows("SELECT PERCENTILE(x, 0.5) AS a, PERCENTILE(x, 0) AS b, PERCENTILE(x, 1) AS c, "
                 "PERCENTILE(x, ARRAY[0.25, 0.5]) AS d, PERCENTILE(x, 0.5, f) AS e "
                 "FROM (VALUES (1, 1), (5, 2), (3, 1), (CAST(NULL AS INT), 1)) AS t(x, f);")
    assert rows == [{"a": 3.0, "b": 1.0, "c": 5.0, "d": [2.0, 3.0], "e": 4.0}]


def test_percentile_skips_null_and_non_positive_frequencies() -> None:
    assert _rows("SELECT PERCENTILE(x, 0.5, f) AS p FROM (VALUES (1, 0), (2, CAST(NULL AS INT)), (3, 2)) AS t(x, f);") \
        == [{"p": 3.0}]
    assert _rows("SELECT PERCENTILE(x, 0.5, -1) AS p FROM (VALUES (1), (2)) AS t(x);") == [{"p": None}]


def test_percentile_of_decimals_and_floats_is_a_double() -> None:
    assert _rows("SELECT PERCENTILE(CAST(x AS DECIMAL(5, 2)), 0.5) AS a, PERCENTILE(CAST(x AS DOUBLE), 0.3) AS b "
                 "FROM (VALUES (1), (2), (4)) AS t(x);") == [{"a": 2.0, "b": 1.6}]


def test_percentile_over_an_updating_input_retracts() -> None:
    rows = _rows("SELECT k, PERCENTILE(x, 0.5) AS p FROM (SELECT k, SUM(v) AS x FROM (VALUES ('a', 1, 1), ('a', 2, 1), "
                 "('b', 3, 2), ('b', 4, 2)) AS t(g, v, k) GROUP BY g, k) GROUP BY k;")
    assert sorted(rows, key=lambda r: r["k"]) == [{"k": 1, "p": 3.0}, {"k": 2, "p": 7.0}]


@pytest.mark.parametrize(("expression", "refusal"), [
    ("PERCENTILE(x, 1.5)", "between 0.0 and 1.0"),
    ("PERCENTILE(x, CAST(NULL AS DOUBLE))", "between 0.0 and 1.0"),
    ("PERCENTILE(x, y)", "must be a constant"),
    ("PERCENTILE(CAST(x AS STRING), 0.5)", "numeric value"),
])
def test_percentile_refuses_what_flink_refuses_at_plan_time(expression: str, refusal: str) -> None:
    with pytest.raises(SqlStreamError, match=refusal):
        _rows(f"SELECT {expression} FROM (VALUES (1, 0.5), (2, 0.5)) AS t(x, y);")


def test_array_agg_distinct_and_ignore_nulls() -> None:
    rows = _rows("SELECT k, ARRAY_AGG(DISTINCT s) AS a, ARRAY_AGG(s IGNORE NULLS) AS b, ARRAY_AGG(s RESPECT NULLS) AS c, "
                 "ARRAY_AGG(DISTINCT s IGNORE NULLS) AS d FROM (VALUES (1, 'a'), (1, 'b'), (1, 'a'), (1, CAST(NULL AS STRING)), "
                 "(2, CAST(NULL AS STRING))) AS t(k, s) GROUP BY k;")
    assert sorted(rows, key=lambda r: r["k"]) == [
        {"k": 1, "a": ["a", "b", None], "b": ["a", "b", "a"], "c": ["a", "b", "a", None], "d": ["a", "b"]},
        {"k": 2, "a": [None], "b": None, "c": [None], "d": None},
    ]


def test_array_agg_distinct_over_an_updating_input_drops_a_value_whose_count_falls_to_zero() -> None:
    # k=1 counts 1, then 2: the value 1 is still there from k=2; then k=2's row goes to 2 as well
    rows = _rows("SELECT ARRAY_AGG(DISTINCT x) AS a FROM (SELECT k, COUNT(*) AS x FROM (VALUES (1), (2), (1), (2)) AS t(k) "
                 "GROUP BY k);")
    assert rows == [{"a": [2]}]


def test_filter_on_array_agg_skips_rows_but_keeps_null_values() -> None:
    rows = _rows("SELECT ARRAY_AGG(x) FILTER (WHERE x > 1) AS a, ARRAY_AGG(DISTINCT x) FILTER (WHERE x IS NULL OR x > 2) "
                 "AS b FROM (VALUES (1), (2), (3), (CAST(NULL AS INT)), (3)) AS t(x);")
    assert rows == [{"a": [2, 3, 3], "b": [3, None]}]
    # Flink's validator refuses FILTER after IGNORE NULLS (FILTER must be applied to aggregate function)
    with pytest.raises(SqlStreamError, match="cannot follow ARRAY_AGG"):
        _rows("SELECT ARRAY_AGG(x IGNORE NULLS) FILTER (WHERE x > 1) FROM (VALUES (1), (2)) AS t(x);")


def test_collect_is_a_multiset_of_the_non_null_values() -> None:
    rows = _rows("SELECT k, COLLECT(s) AS c, COLLECT(DISTINCT s) AS d, CAST(COLLECT(s) AS STRING) AS t "
                 "FROM (VALUES (1, 'a'), (1, 'b'), (1, 'a'), (2, CAST(NULL AS STRING))) AS t(k, s) GROUP BY k;")
    assert sorted(rows, key=lambda r: r["k"]) == [
        {"k": 1, "c": [("a", 2), ("b", 1)], "d": [("a", 1), ("b", 1)], "t": "{a=2, b=1}"},
        {"k": 2, "c": [], "d": [], "t": "{}"},  # only NULLs: an empty MULTISET, not NULL (as Flink)
    ]
    schema = TableEnvironment.create(streaming=True).sql_query(
        "SELECT COLLECT(x) AS c FROM (VALUES (1)) AS t(x)").get_schema()
    assert str(schema.field("c").type) == "map<int32, uint32>"  # how sqlstream marks MULTISET<INT>


def test_collect_over_an_updating_input_counts_retractions() -> None:
    rows = _rows("SELECT CAST(COLLECT(x) AS STRING) AS c FROM (SELECT k, COUNT(*) AS x FROM (VALUES (1), (2), (1)) "
                 "AS t(k) GROUP BY k);")
    assert rows in ([{"c": "{1=1, 2=1}"}], [{"c": "{2=1, 1=1}"}])


def test_a_multiset_goes_to_no_function() -> None:
    # Flink 2.3 fails too (CARDINALITY: 'Expect an array or a map' at code generation)
    with pytest.raises(SqlStreamError, match="CARDINALITY does not take a MULTISET<INT>"):
        _rows("SELECT CARDINALITY(COLLECT(x)) FROM (VALUES (1)) AS t(x);")


@pytest.mark.parametrize(("expression", "reason"), [
    ("TYPEOF(1)", "carry neither NOT NULL nor CHAR/VARCHAR lengths"),
    ("PARSE_JSON('1')", "VARIANT"),
    ("BITMAP_TO_STRING(BITMAP_BUILD(ARRAY[1]))", "BITMAP type"),
    ("OBJECT_OF('x', 'a', 1)", "structured types"),
    ("JSON_ARRAYAGG_ABSENT_ON_NULL(1)", "internal name of JSON_ARRAYAGG"),
])
def test_flink_functions_sqlstream_does_not_run_are_refused_with_the_reason(expression: str, reason: str) -> None:
    with pytest.raises(SqlStreamError, match=f"is not supported: .*{reason}"):
        Session().execute_script(f"EXPLAIN SELECT {expression};")


def test_source_watermark_is_refused_where_the_table_is_created() -> None:
    with pytest.raises(SqlStreamError, match=r"SOURCE_WATERMARK\(\) is not supported"):
        Session().execute_script("CREATE TABLE w (ts TIMESTAMP(3), WATERMARK FOR ts AS SOURCE_WATERMARK()) "
                                 "WITH ('connector' = 'datagen');")


def test_translate3_is_translate_under_the_name_flinks_function_list_gives_it() -> None:
    assert _rows("SELECT TRANSLATE3('abc', 'a', 'x') AS t;") == [{"t": "xbc"}]  # as Flink 2.3


@pytest.mark.parametrize("fmt", ["%-3s|%%|%n|%b|%.1s|%3d", "%s:%s:%s:%s", "%B %5b %-6d|", "%S %,d %x %.2f"])
def test_a_constant_format_on_whole_columns_gives_what_a_row_at_a_time_gives(fmt: str) -> None:
    # a constant format runs on Arrow kernels where its specifiers allow; the same format read
    # from a column (CASE keeps it from being a constant) is formatted a row at a time
    rows = ("(VALUES ('ab', 1, TRUE, CAST(2.5 AS DOUBLE)), ('ÄÖÜ straße', -1234, FALSE, CAST(-0.125 AS DOUBLE)), "
            "(CAST(NULL AS STRING), CAST(NULL AS INT), CAST(NULL AS BOOLEAN), CAST(NULL AS DOUBLE))) AS t(s, n, b, d)")
    args = {"%-3s|%%|%n|%b|%.1s|%3d": "s, s, s, n", "%s:%s:%s:%s": "s, n, b, d", "%B %5b %-6d|": "b, s, n",
            "%S %,d %x %.2f": "s, n, n, d"}[fmt]
    got = _rows(f"SELECT PRINTF('{fmt}', {args}) AS c, PRINTF(CASE WHEN s IS NULL OR s <> '' THEN '{fmt}' END, "
                f"{args}) AS r FROM {rows};")
    assert [r["c"] for r in got] == [r["r"] for r in got]
    assert any(r["c"] is not None for r in got)


def test_a_multiset_column_in_a_table_is_refused_naming_it() -> None:
    with pytest.raises(SqlStreamError, match="MULTISET columns are not supported"):
        Session().execute_script("CREATE TABLE p (c MULTISET<INT>) WITH ('connector' = 'print');")


def test_the_new_aggregates_keep_their_accumulators_in_rocksdb_at_parallelism_2() -> None:
    query = ("SELECT c, PERCENTILE(n, ARRAY[0.5, 0.9]) AS p, COLLECT(n) AS m, "
             "ARRAY_SORT(ARRAY_AGG(DISTINCT n)) AS d, CARDINALITY(ARRAY_AGG(n IGNORE NULLS)) AS k "
             "FROM (SELECT k, COUNT(*) AS c, MAX(v) AS n FROM (VALUES (1, 5), (2, 7), (1, 5), (3, CAST(NULL AS INT)), "
             "(2, 1), (4, 7), (4, 2), (5, 9)) AS t(k, v) GROUP BY k) GROUP BY c")
    env = TableEnvironment.create(streaming=True)

    def final_rows() -> list[dict]:
        # a MULTISET's entries come in arrival order, which two subtasks interleave: sorted here
        got = [{**r, "m": sorted(r["m"])} for r in env.sql_query(query).to_arrow().to_pylist()]
        return sorted(got, key=lambda r: r["c"])

    heap = final_rows()
    env.execute_sql("SET 'state.backend.type' = 'rocksdb'")
    env.execute_sql("SET 'parallelism.default' = '2'")
    assert final_rows() == heap
    # k = 1, 2, 4 count 2 with maxima 5, 7, 7; k = 3 and 5 count 1 with maxima NULL and 9
    assert heap == [{"c": 1, "p": [9.0, 9.0], "m": [(9, 1)], "d": [None, 9], "k": 1},
                    {"c": 2, "p": [7.0, 7.0], "m": [(5, 1), (7, 2)], "d": [5, 7], "k": 3}]
