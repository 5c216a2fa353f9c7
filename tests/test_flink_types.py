"""Predicates, SUBSTRING, numeric types and casts as Flink 2.3 evaluates them.

Every expected value and type here was printed by PyFlink 2.3 (streaming mode, parallelism 1)
running the same expression over the same rows: Flink is the oracle, not our reading of its docs.
"""

from __future__ import annotations

import sys
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_functions import bind, run  # noqa: E402

from sqlstream.core.errors import DataError, ExpressionError, PlanError  # noqa: E402
from sqlstream.core.functions import udfs  # noqa: E402
from sqlstream.core.types import sql_type_name  # noqa: E402
from sqlstream.frontend.session import Session  # noqa: E402
from tests.conftest import rows, run_sql  # noqa: E402

NAMES = pa.array(["García", "Gómez", "Smith", None], pa.string())
INTS = pa.array([1, 2, 3, 2147483647], pa.int32())


def over_rows(sql: str) -> list:
    return run(sql, s=NAMES, i=INTS)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("s NOT LIKE 'G%'", [False, False, True, None]),
        ("s LIKE 'G%'", [True, True, False, None]),
        ("i NOT BETWEEN 2 AND 3", [True, False, False, True]),
        ("i BETWEEN SYMMETRIC 3 AND 1", [True, True, True, False]),
        ("i NOT BETWEEN SYMMETRIC 3 AND 1", [False, False, False, True]),
        ("i BETWEEN 3 AND 1", [False, False, False, False]),
        ("i NOT IN (1, 2)", [False, False, True, True]),
        ("s NOT IN ('Smith')", [True, True, False, None]),
        ("s SIMILAR TO 'G.*'", [True, True, False, None]),
        ("s NOT SIMILAR TO 'G.*'", [False, False, True, None]),
        ("s SIMILAR TO '(Sm|Go)%'", [False, False, True, None]),
        ("s LIKE 'G!%%' ESCAPE '!'", [False, False, False, None]),
        ("s NOT LIKE 'G_r%' ESCAPE '!'", [False, True, True, None]),
    ],
)
def test_negated_and_escaped_predicates_as_flink(sql: str, expected: list) -> None:
    assert over_rows(sql) == expected


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("'a%b' LIKE 'a!%b' ESCAPE '!'", True),
        ("'axb' LIKE 'a!%b' ESCAPE '!'", False),
        ("'a_b' LIKE 'a\\_b' ESCAPE '\\'", True),
        ("'axb' NOT LIKE 'a\\_b' ESCAPE '\\'", True),
        ("'ab' SIMILAR TO 'a|b'", False),
        ("'abc' SIMILAR TO '[a-c]+'", True),
        ("'a.c' LIKE 'a.c'", True),
        ("'abc' LIKE 'a.c'", False),
        ("'A' LIKE 'a'", False),
        ("'a*c' SIMILAR TO 'a*c'", False),
        # without ESCAPE a backslash is an ordinary character
        ("'a\\b' LIKE 'a\\b'", True),
    ],
)
def test_like_escape_and_similar_to_constants(sql: str, expected: bool) -> None:
    assert run(sql)[0] is expected


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SUBSTRING(s, -3)", ["cía", "mez", "ith", None]),
        ("SUBSTRING(s, -3, 2)", ["cí", "me", "it", None]),
        ("SUBSTRING(s FROM 2 FOR 3)", ["arc", "óme", "mit", None]),
        ("SUBSTRING(s, 0)", ["García", "Gómez", "Smith", None]),
        ("SUBSTRING(s, 0, 2)", ["Ga", "Gó", "Sm", None]),
        ("SUBSTRING(s, 2, 100)", ["arcía", "ómez", "mith", None]),
        ("SUBSTRING(s, 10)", ["", "", "", None]),
        ("SUBSTRING(s, -10)", ["", "", "", None]),
        ("SUBSTRING(s, -10, 3)", ["", "", "", None]),
        ("SUBSTRING(s, 2, 0)", ["", "", "", None]),
        ("SUBSTR(s, -2)", ["ía", "ez", "th", None]),
        ("SUBSTRING(s, CAST(NULL AS INT))", [None] * 4),
        ("SUBSTRING(s, 2, CAST(NULL AS INT))", [None] * 4),
        ("SUBSTRING(s, i)", ["García", "ómez", "ith", None]),
        ("SUBSTRING(s, 1, i)", ["G", "Gó", "Smi", None]),
    ],
)
def test_substring_positions_as_flink(sql: str, expected: list) -> None:
    assert over_rows(sql) == expected


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SUBSTRING('García', 2, -1)", None),
        ("SUBSTRING('García', -6, 2)", "Ga"),
        ("SUBSTRING('García', -7, 3)", ""),
        ("SUBSTRING('García', 7)", ""),
        ("SUBSTRING('García', 6)", "a"),
        ("SUBSTRING('', 1)", ""),
        ("SUBSTRING('abc' FROM 2)", "bc"),
    ],
)
def test_substring_edges_as_flink(sql: str, expected: str | None) -> None:
    assert run(sql)[0] == expected


VALUES = "(VALUES ('García'), ('Gómez'), ('Smith'), (CAST(NULL AS STRING))) AS t(s)"


@pytest.mark.parametrize("predicate", ["s NOT LIKE 'G%'", "s NOT SIMILAR TO 'G.*'"])
def test_negated_patterns_filter_in_where(predicate: str) -> None:
    assert rows(run_sql(f"SELECT s FROM {VALUES} WHERE {predicate};")) == [("Smith",)]


DECIMALS = pa.array([Decimal("1234.56"), Decimal("9999.99"), Decimal("0.01"), Decimal("8143.23")], pa.decimal128(10, 2))
BIGINTS = pa.array([2, 9223372036854775807, 5, -7], pa.int64())
DOUBLES = pa.array([1.5, -2.25, 0.0, None], pa.float64())


def numbers(sql: str) -> tuple[str, list]:
    """(Flink's name of the result type, the values) over the rows PyFlink was given."""
    columns = {"i": INTS, "d": DECIMALS, "b": BIGINTS, "f": DOUBLES}
    schema = pa.schema([(n, c.type) for n, c in columns.items()])
    return sql_type_name(bind(sql, schema).type), run(sql, **columns)


def dec(*values: str | None) -> list:
    return [None if v is None else Decimal(v) for v in values]


@pytest.mark.parametrize(
    ("sql", "type_name", "expected"),
    [
        # integer arithmetic keeps the type and wraps around as Java does
        ("i + 2147483647", "INT", [-2147483648, -2147483647, -2147483646, -2]),
        ("i * 2147483647", "INT", [2147483647, -2, 2147483645, 1]),
        ("i - (-2147483647)", "INT", [-2147483648, -2147483647, -2147483646, -2]),
        ("b + 1", "BIGINT", [3, -9223372036854775808, 6, -6]),
        ("CAST(i AS SMALLINT) + CAST(32767 AS SMALLINT)", "SMALLINT", [-32768, -32767, -32766, 32766]),
        ("CAST(i AS TINYINT) * CAST(100 AS TINYINT)", "TINYINT", [100, -56, 44, -100]),
        ("i + b", "BIGINT", [3, -9223372036854775807, 8, 2147483640]),
        ("i / 2", "INT", [0, 1, 1, 1073741823]),
        ("-7 / 2", "INT", [-3] * 4),
        ("-7 % 3", "INT", [-1] * 4),
        ("7 % -3", "INT", [1] * 4),
        ("-CAST(-2147483648 AS INT)", "INT", [-2147483648] * 4),
        ("ABS(CAST(-2147483648 AS INT))", "INT", [-2147483648] * 4),
        ("CAST(-2147483648 AS INT) / -1", "INT", [-2147483648] * 4),
        ("CAST(1e10 AS SMALLINT)", "SMALLINT", [-1] * 4),
        ("CAST(300 AS TINYINT)", "TINYINT", [44] * 4),
        ("CAST(CAST(1e20 AS DECIMAL(38,0)) AS INT)", "INT", [1661992960] * 4),
        # DECIMAL results as LogicalTypeMerging derives them
        ("d * d", "DECIMAL(21, 4)", dec("1524138.3936", "99999800.0001", "0.0001", "66312194.8329")),
        ("d / d", "DECIMAL(23, 13)", dec(*["1.0000000000000"] * 4)),
        ("d + d", "DECIMAL(11, 2)", dec("2469.12", "19999.98", "0.02", "16286.46")),
        ("d % d", "DECIMAL(10, 2)", dec(*["0.00"] * 4)),
        ("d / 2.0", "DECIMAL(15, 6)", dec("617.280000", "4999.995000", "0.005000", "4071.615000")),
        ("d * 2.0", "DECIMAL(13, 3)", dec("2469.120", "19999.980", "0.020", "16286.460")),
        ("d / 3", "DECIMAL(21, 13)", dec("411.5200000000000", "3333.3300000000000", "0.0033333333333", "2714.4100000000000")),
        ("d % 3", "DECIMAL(10, 2)", dec("1.56", "0.99", "0.01", "1.23")),
        ("d + 1", "DECIMAL(13, 2)", dec("1235.56", "10000.99", "1.01", "8144.23")),
        ("d * i", "DECIMAL(21, 2)", dec("1234.56", "19999.98", "0.03", "17487453258759.81")),
        ("d / i", "DECIMAL(21, 13)", dec("1234.5600000000000", "4999.9950000000000", "0.0033333333333", "0.0000037919870")),
        ("d % i", "DECIMAL(10, 2)", dec("0.56", "1.99", "0.01", "8143.23")),
        ("i % d", "DECIMAL(10, 2)", dec("1.00", "2.00", "0.00", "8034.01")),
        ("MOD(-d, 3)", "DECIMAL(10, 2)", dec("-1.56", "-0.99", "-0.01", "-1.23")),
        ("b * d", "DECIMAL(30, 2)", dec("2469.12", "92233628134827389522241.93", "0.05", "-57002.61")),
        ("b + 1.5", "DECIMAL(21, 1)", dec("3.5", "9223372036854775808.5", "6.5", "-5.5")),
        ("d + f", "DOUBLE", [1236.06, 9997.74, 0.01, None]),
        ("CAST(f AS FLOAT) + d", "DOUBLE", [1236.06, 9997.74, 0.01, None]),
        ("CAST(f AS FLOAT) + f", "FLOAT", [3.0, -4.5, 0.0, None]),
        ("CAST(f AS FLOAT) + CAST(i AS BIGINT)", "FLOAT", [2.5, -0.25, 3.0, None]),
        # over 38 digits the scale gives way, keeping at least 6 fraction digits
        ("CAST(d AS DECIMAL(38,10)) * CAST(d AS DECIMAL(38,10))", "DECIMAL(38, 6)",
         dec("1524138.393600", "99999800.000100", "0.000100", "66312194.832900")),
        ("CAST(d AS DECIMAL(38,10)) / CAST(d AS DECIMAL(38,10))", "DECIMAL(38, 6)", dec(*["1.000000"] * 4)),
        ("CAST(d AS DECIMAL(38,18)) + CAST(d AS DECIMAL(38,18))", "DECIMAL(38, 17)",
         dec("2469.12", "19999.98", "0.02", "16286.46")),
        ("CAST(d AS DECIMAL(38,0)) / 7", "DECIMAL(38, 6)", dec("176.428571", "1428.571429", "0.000000", "1163.285714")),
        ("CAST(d AS DECIMAL(20,2)) * CAST(d AS DECIMAL(20,2))", "DECIMAL(38, 4)",
         dec("1524138.3936", "99999800.0001", "0.0001", "66312194.8329")),
        ("CAST(d AS DECIMAL(38,10)) % CAST(d AS DECIMAL(10,3))", "DECIMAL(17, 10)", dec(*["0"] * 4)),
        ("CAST(d AS DECIMAL(10,2)) / CAST(3 AS DECIMAL(30,20))", "DECIMAL(38, 10)",
         dec("411.5200000000", "3333.3300000000", "0.0033333333", "2714.4100000000")),
        # literals: exact numerics are DECIMAL, with an exponent DOUBLE
        ("2.50", "DECIMAL(3, 2)", dec(*["2.50"] * 4)),
        ("123.456", "DECIMAL(6, 3)", dec(*["123.456"] * 4)),
        ("1.5e0", "DOUBLE", [1.5] * 4),
        # ROUND / TRUNCATE of a DECIMAL: findRoundDecimalType
        ("ROUND(d, 1)", "DECIMAL(10, 1)", dec("1234.6", "10000.0", "0.0", "8143.2")),
        ("TRUNCATE(d, 1)", "DECIMAL(10, 1)", dec("1234.5", "9999.9", "0.0", "8143.2")),
        ("ROUND(d, -2)", "DECIMAL(9, 0)", dec("1200", "10000", "0", "8100")),
        ("TRUNCATE(d, -2)", "DECIMAL(9, 0)", dec("1200", "9900", "0", "8100")),
        ("ROUND(d)", "DECIMAL(9, 0)", dec("1235", "10000", "0", "8143")),
        ("ROUND(d, 3)", "DECIMAL(10, 2)", dec("1234.56", "9999.99", "0.01", "8143.23")),
        ("ROUND(2.5, 0)", "DECIMAL(2, 0)", dec(*["3"] * 4)),
        ("ROUND(-2.5)", "DECIMAL(2, 0)", dec(*["-3"] * 4)),
        ("ROUND(9999.99, 1)", "DECIMAL(6, 1)", dec(*["10000.0"] * 4)),
        ("ROUND(CAST(9999.99 AS DECIMAL(6,2)), -4)", "DECIMAL(5, 0)", dec(*["10000"] * 4)),
        ("ROUND(i, -1)", "INT", [0, 0, 0, -2147483646]),
        ("ROUND(f, 1)", "DOUBLE", [1.5, -2.3, 0.0, None]),
        # casts: to an integer truncates (narrowing wraps), to a DECIMAL rounds HALF_UP, NULL on overflow
        ("CAST(d AS INT)", "INT", [1234, 9999, 0, 8143]),
        ("CAST(-2.7 AS INT)", "INT", [-2] * 4),
        ("CAST(f AS INT)", "INT", [1, -2, 0, None]),
        ("CAST(i AS TINYINT)", "TINYINT", [1, 2, 3, -1]),
        ("CAST(d AS DECIMAL(5,1))", "DECIMAL(5, 1)", dec("1234.6", None, "0.0", "8143.2")),
        ("CAST(d AS DECIMAL(3,0))", "DECIMAL(3, 0)", dec(None, None, "0", None)),
        ("CAST(f AS DECIMAL(5,2))", "DECIMAL(5, 2)", dec("1.50", "-2.25", "0.00", None)),
        ("CAST(i AS DECIMAL(3,0))", "DECIMAL(3, 0)", dec("1", "2", "3", None)),
    ],
)
def test_arithmetic_types_and_values_as_flink(sql: str, type_name: str, expected: list) -> None:
    assert numbers(sql) == (type_name, expected)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("CAST(TRUE AS STRING)", "TRUE"),
        ("CAST(FALSE AS STRING)", "FALSE"),
        ("CAST(1.0 AS STRING)", "1.0"),
        ("CAST(CAST(12345678.0 AS DOUBLE) AS STRING)", "1.2345678E7"),
        ("CAST(CAST(0.1 AS FLOAT) AS STRING)", "0.1"),
        ("CAST(CAST(1e20 AS DOUBLE) AS STRING)", "1.0E20"),
        ("CAST(CAST(1e-5 AS DOUBLE) AS STRING)", "1.0E-5"),
        ("CAST(CAST(100 AS DOUBLE) AS STRING)", "100.0"),
        ("CAST(CAST(0.001 AS DOUBLE) AS STRING)", "0.001"),
        ("CAST(CAST(1234567.0 AS DOUBLE) AS STRING)", "1234567.0"),
        ("CAST(1e300 * 1e300 AS STRING)", "Infinity"),
        ("CAST(CAST(1e-10 AS DOUBLE) AS STRING)", "1.0E-10"),
        ("CAST(CAST(1e7 AS DOUBLE) AS STRING)", "1.0E7"),
        ("CAST(CAST(9999999 AS DOUBLE) AS STRING)", "9999999.0"),
        ("CAST(CAST(1e7 AS FLOAT) AS STRING)", "1.0E7"),
        ("CAST(CAST(0.1 AS DOUBLE) + CAST(0.2 AS DOUBLE) AS STRING)", "0.30000000000000004"),
        ("CAST(CAST(1 AS DOUBLE)/3 AS STRING)", "0.3333333333333333"),
        ("CAST(CAST(1 AS FLOAT)/3 AS STRING)", "0.33333334"),
        ("CAST(CAST(0.5 AS DECIMAL(10,4)) AS STRING)", "0.5000"),
        ("CAST(CAST(-0.5 AS DECIMAL(10,0)) AS STRING)", "-1"),
        ("CAST(CAST('2024-01-01 10:00:00.5' AS TIMESTAMP(3)) AS STRING)", "2024-01-01 10:00:00.500"),
        ("CAST(CAST('2024-01-01 10:00:00' AS TIMESTAMP(3)) AS STRING)", "2024-01-01 10:00:00.000"),
        ("CAST(CAST('2024-01-01 10:00:00.123456' AS TIMESTAMP(6)) AS STRING)", "2024-01-01 10:00:00.123456"),
        ("CAST(CAST('2024-01-01 10:00:00.12' AS TIMESTAMP(6)) AS STRING)", "2024-01-01 10:00:00.120000"),
        ("CAST(DATE '2024-01-02' AS STRING)", "2024-01-02"),
        ("CAST(TIME '10:00:00' AS STRING)", "10:00:00"),
        ("CAST(CAST('10:00:01.5' AS TIME(3)) AS STRING)", "10:00:01.5"),
    ],
)
def test_cast_to_string_prints_as_flink(sql: str, expected: str) -> None:
    assert run(sql)[0] == expected


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("CAST(d AS STRING)", ["1234.56", "9999.99", "0.01", "8143.23"]),
        ("CAST(f AS STRING)", ["1.5", "-2.25", "0.0", None]),
        ("CAST(b AS STRING)", ["2", "9223372036854775807", "5", "-7"]),
        # a DECIMAL operand of DOUBLE arithmetic is read exactly (BigDecimal.doubleValue)
        ("d * 1.5e0", [1851.84, 14999.985, 0.015, 12214.845]),
    ],
)
def test_cast_columns_as_flink(sql: str, expected: list) -> None:
    assert numbers(sql)[1] == expected


AGG_ROWS = """(VALUES
 (1, CAST(1234.56 AS DECIMAL(10,2)), CAST(2 AS BIGINT), CAST(1.5 AS DOUBLE)),
 (2, CAST(9999.99 AS DECIMAL(10,2)), CAST(9223372036854775807 AS BIGINT), CAST(-2.25 AS DOUBLE)),
 (3, CAST(0.01 AS DECIMAL(10,2)), CAST(5 AS BIGINT), CAST(0.0 AS DOUBLE)),
 (2147483647, CAST(8143.23 AS DECIMAL(10,2)), CAST(-7 AS BIGINT), CAST(NULL AS DOUBLE))
) AS v(i, d, b, f)"""


def _final_row(query: str) -> tuple[list[str], tuple]:
    table = run_sql(query.replace("$T", AGG_ROWS) + ";")
    return [sql_type_name(f.type) for f in table.schema], tuple(c[-1].as_py() for c in table.columns)


@pytest.mark.parametrize(
    ("query", "types", "values"),
    [
        ("SELECT AVG(d), SUM(d), MIN(d), MAX(d), COUNT(d), AVG(i), SUM(i), AVG(b), SUM(b), AVG(f), SUM(f) FROM $T",
         ["DECIMAL(38, 6)", "DECIMAL(38, 2)", "DECIMAL(10, 2)", "DECIMAL(10, 2)", "BIGINT", "INT", "INT", "BIGINT",
          "BIGINT", "DOUBLE", "DOUBLE"],
         # SUM(i) wraps around in INT, AVG(i) divides the wrapped sum; the BIGINT sum wraps and comes back
         (Decimal("4844.447500"), Decimal("19377.79"), Decimal("0.01"), Decimal("9999.99"), 4, -536870910,
          -2147483643, 2305843009213693951, 9223372036854775807, -0.25, -0.75)),
        ("SELECT k, AVG(i), SUM(i), AVG(b), SUM(b) FROM (SELECT 1 AS k, * FROM $T) GROUP BY k",
         ["INT", "INT", "INT", "BIGINT", "BIGINT"], (1, -536870910, -2147483643, 2305843009213693951, 9223372036854775807)),
        ("SELECT AVG(CAST(i AS TINYINT)), SUM(CAST(i AS SMALLINT)), AVG(CAST(f AS FLOAT)), AVG(CAST(d AS DECIMAL(5,0))), "
         "SUM(CAST(d AS DECIMAL(20,10))), AVG(CAST(d AS DECIMAL(20,10))) FROM $T WHERE i < 100",
         ["TINYINT", "SMALLINT", "FLOAT", "DECIMAL(38, 6)", "DECIMAL(38, 10)", "DECIMAL(38, 10)"],
         (2, 6, -0.25, Decimal("3745.000000"), Decimal("11234.5600000000"), Decimal("3744.8533333333"))),
    ],
)
def test_aggregate_result_types_and_overflow_as_flink(query: str, types: list[str], values: tuple) -> None:
    assert _final_row(query) == (types, values)


def _insert_with_a_null(tmp_path: Path, setting: str = "") -> str:
    return (
        f"CREATE TABLE snk (a INT, b STRING NOT NULL) WITH ('connector' = 'filesystem', 'path' = '{tmp_path / 'out'}', "
        f"'format' = 'csv');\n{setting}\n"
        "INSERT INTO snk SELECT * FROM (VALUES (1, 'x'), (2, CAST(NULL AS STRING)), (3, 'z')) AS t(a, b);"
    )


def test_a_null_into_a_not_null_sink_column_fails_the_job_with_flinks_message(tmp_path: Path) -> None:
    # the message PyFlink 2.3 raised (EnforcerException) for the same write
    with pytest.raises(DataError) as error:
        Session().execute_script(_insert_with_a_null(tmp_path))
    assert str(error.value) == (
        "Column 'b' is NOT NULL, however, a null value is being written into it. You can set job configuration "
        "'table.exec.sink.not-null-enforcer'='DROP' to suppress this exception and drop such records silently.")


def test_not_null_enforcer_drop_drops_the_row_and_shows_in_explain(tmp_path: Path) -> None:
    setting = "SET 'table.exec.sink.not-null-enforcer' = 'DROP';"
    session = Session()
    session.execute_script(_insert_with_a_null(tmp_path, setting))
    written = "".join(f.read_text() for f in sorted((tmp_path / "out").rglob("*.csv")))
    assert sorted(written.splitlines()) == ["1,x", "3,z"]
    plan = session.execute_script(
        "EXPLAIN INSERT INTO snk SELECT * FROM (VALUES (1, 'x')) AS t(a, b);")[-1].message
    assert "ConstraintEnforcer: NotNullEnforcer(fields=[b]), not-null-enforcer=DROP" in plan


def test_not_null_enforcer_takes_only_error_or_drop(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="'table.exec.sink.not-null-enforcer': 'IGNORE' is not one of ERROR, DROP"):
        Session().execute_script(_insert_with_a_null(tmp_path, "SET 'table.exec.sink.not-null-enforcer' = 'IGNORE';"))


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        # Flink: java.lang.ArithmeticException: / by zero (INT), Division by zero (DECIMAL)
        ("10 / i", "/ by zero: evaluating (10 / i) on the row with i=0"),
        ("10 % i", "/ by zero: evaluating (10 % i) on the row with i=0"),
        ("1 + 10 / i", "/ by zero: evaluating (10 / i) on the row with i=0"),
        ("d / d", "Division by zero: evaluating (d / d) on the row with d=0.00"),
        ("CAST(s AS INT)", "evaluating CAST(s AS INT) on the row with s='García'"),
    ],
)
def test_runtime_errors_name_the_expression_and_the_row(sql: str, message: str) -> None:
    columns = {
        "i": pa.array([1, 0, 3], pa.int32()),
        "s": pa.array(["1", "García", None]),
        "d": pa.array([Decimal("1.5"), Decimal("0"), None], pa.decimal128(10, 2)),
    }
    with pytest.raises(ExpressionError) as error:
        run(sql, **columns)
    assert str(error.value).endswith(message)


def test_double_division_by_zero_is_infinity_or_nan() -> None:
    # PyFlink 2.3: CAST(1 AS DOUBLE) / 0 is Infinity, 0.0 / 0 is NaN (no error, unlike INT and DECIMAL)
    values = run("f / 0", f=pa.array([1.5, -2.25, 0.0, None]))
    assert values[:2] == [float("inf"), float("-inf")] and values[2] != values[2] and values[3] is None


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        # PyFlink 2.3 evaluates only the branch a row takes: no '/ by zero' from the guarded rows
        ("CASE WHEN i <> 2 THEN 10 / (i - 2) ELSE -1 END", [-10, -1, 10, 0]),
        ("CASE WHEN i = 2 THEN 0 ELSE 10 / (i - 2) END", [-10, 0, 10, 0]),
        ("IF(i <> 2, 10 / (i - 2), 0)", [-10, 0, 10, 0]),
    ],
)
def test_case_and_if_evaluate_only_the_branch_taken(sql: str, expected: list) -> None:
    assert run(sql, i=pa.array([1, 2, 3, 2147483647], pa.int32())) == expected


def test_a_branch_taken_still_fails_with_its_row() -> None:
    with pytest.raises(ExpressionError, match=r"/ by zero: evaluating \(10 / \(i - 2\)\) on the row with i=2"):
        run("CASE WHEN i = 2 THEN 10 / (i - 2) ELSE 0 END", i=pa.array([1, 2, 3], pa.int32()))


def test_a_udf_exception_names_the_call_and_the_row() -> None:
    def tenth_of(x: int) -> int:
        return 10 // x

    udfs.register("TENTH_OF", tenth_of, "INT")
    try:
        with pytest.raises(ExpressionError, match=r"ZeroDivisionError: .* evaluating TENTH_OF\(i\) on the row with i=0"):
            run("TENTH_OF(i)", i=pa.array([1, 0], pa.int32()))
    finally:
        udfs.unregister("TENTH_OF")


def test_a_double_beyond_the_long_range_saturates_at_long_max_as_java() -> None:
    # Flink 2.3: CAST(1e300 AS BIGINT) is 9223372036854775807 (reference case cast_double_to_bigint_out_of_range)
    from sqlstream.frontend.session import Session

    table = Session().execute_script(
        "SELECT CAST(d AS BIGINT) AS v FROM (VALUES (CAST(1e300 AS DOUBLE)), (CAST(-1e300 AS DOUBLE))) AS t(d);")[-1].table
    assert table.column("v").to_pylist() == [9223372036854775807, -9223372036854775808]
