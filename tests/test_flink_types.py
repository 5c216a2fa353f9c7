"""Predicates, SUBSTRING, numeric types and casts as Flink 2.3 evaluates them.

Every expected value and type here was printed by PyFlink 2.3 (streaming mode, parallelism 1)
running the same expression over the same rows: Flink is the oracle, not our reading of its docs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_functions import run  # noqa: E402

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
