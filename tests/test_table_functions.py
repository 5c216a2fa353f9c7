"""Python table functions (PyFlink's udtf / TableFunction) joined to each row with LATERAL TABLE,
as Flink's correlate: CROSS JOIN, the comma join and LEFT JOIN ... ON TRUE."""

from __future__ import annotations

from pathlib import Path

import pytest

from sqlstream.core.errors import PlanError
from sqlstream.frontend.session import Session
from tests.conftest import rows, run_sql

FUNCTIONS = """
CREATE TEMPORARY FUNCTION split_words AS 'tests.udf_samples.split_words' LANGUAGE PYTHON;
CREATE TEMPORARY FUNCTION countdown AS 'tests.udf_samples.Countdown' LANGUAGE PYTHON;
CREATE TEMPORARY FUNCTION wrong_arity AS 'tests.udf_samples.wrong_arity' LANGUAGE PYTHON;
"""


def _script(tmp_path: Path, query: str, parallelism: int = 1) -> str:
    (tmp_path / "t.csv").write_text("1,hello big world,2\n2,,0\n3,one,\n4,a b,3\n")
    return (f"SET 'parallelism.default' = '{parallelism}';\n" + FUNCTIONS
            + f"CREATE TABLE t (id INT, s STRING, n INT) WITH ('connector' = 'filesystem', "
              f"'path' = '{tmp_path / 't.csv'}', 'format' = 'csv', 'csv.null-literal' = '');\n" + query + ";")


@pytest.mark.parametrize("parallelism", [1, 2])
@pytest.mark.parametrize("join", ["t, LATERAL TABLE(split_words(s)) AS w(word, len)",
                                  "t CROSS JOIN LATERAL TABLE(split_words(s)) AS w(word, len)",
                                  "t JOIN LATERAL TABLE(split_words(s)) AS w(word, len) ON TRUE"])
def test_each_row_joins_the_rows_its_function_yields(tmp_path: Path, join: str, parallelism: int) -> None:
    got = rows(run_sql(_script(tmp_path, f"SELECT id, word, len FROM {join}", parallelism)))
    assert got == sorted([(1, "hello", 5), (1, "big", 3), (1, "world", 5), (3, "one", 3), (4, "a", 1), (4, "b", 1)])


def test_left_join_keeps_rows_without_any_with_nulls(tmp_path: Path) -> None:
    got = rows(run_sql(_script(tmp_path, "SELECT id, x FROM t LEFT JOIN LATERAL TABLE(countdown(n)) AS c(x) ON TRUE")))
    assert got == sorted([(1, 2), (1, 1), (2, None), (3, None), (4, 3), (4, 2), (4, 1)], key=repr)


def test_default_column_names_and_a_condition_on_the_yielded_rows(tmp_path: Path) -> None:
    got = run_sql(_script(tmp_path, "SELECT id, f0, f1 FROM t, LATERAL TABLE(split_words(s)) WHERE f1 > 3"))
    assert rows(got) == [(1, "hello", 5), (1, "world", 5)]
    inner = rows(run_sql(_script(tmp_path, "SELECT id, word FROM t JOIN LATERAL TABLE(split_words(s)) "
                                           "AS w(word, len) ON w.len = 1")))
    assert inner == [(4, "a"), (4, "b")]


def test_aggregating_over_the_joined_rows(tmp_path: Path) -> None:
    got = rows(run_sql(_script(tmp_path, "SELECT id, COUNT(*) AS words, SUM(len) AS letters FROM t, "
                                         "LATERAL TABLE(split_words(s)) AS w(word, len) GROUP BY id")))
    assert got == [(1, 3, 13), (3, 1, 3), (4, 2, 2)]


def test_explain_shows_the_correlate(tmp_path: Path) -> None:
    plan = Session().execute_script(_script(tmp_path, "EXPLAIN SELECT id, word FROM t, "
                                                      "LATERAL TABLE(split_words(s)) AS w(word, len)"))[-1].message
    assert "Unnest(INNER, SPLIT_WORDS (TABLE FUNCTION)($1:s) AS (word, len))" in plan


@pytest.mark.parametrize(("query", "message"), [
    ("SELECT * FROM t, LATERAL TABLE(split_word(s))", "unknown table function 'SPLIT_WORD'. Did you mean 'SPLIT_WORDS'?"),
    ("SELECT * FROM t, LATERAL TABLE(split_words(s)) AS w(a)", "yields 2 column(s), but the alias names 1"),
    ("SELECT * FROM t LEFT JOIN LATERAL TABLE(split_words(s)) AS w(a, b) ON w.b > 1", "ON TRUE only"),
    ("SELECT * FROM t, LATERAL (SELECT 1) AS x", "LATERAL subqueries"),
])
def test_misuse_is_refused_at_plan_time(tmp_path: Path, query: str, message: str) -> None:
    with pytest.raises(PlanError, match=message.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
        run_sql(_script(tmp_path, query))


def test_a_function_yielding_rows_of_the_wrong_arity_fails_naming_it(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="table function WRONG_ARITY yielded 1 values"):
        run_sql(_script(tmp_path, "SELECT * FROM t, LATERAL TABLE(wrong_arity(s)) AS w(a, b)"))
