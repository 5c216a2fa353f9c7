"""Subqueries: IN / NOT IN / EXISTS / NOT EXISTS as semi and anti joins, scalar subqueries as joins
with their one row.  Expected rows are what Flink 2.3 gave on the same data (PyFlink, streaming mode,
parallelism 1, 'csv.null-literal' = '' on Flink's side)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sqlstream.core.errors import PlanError
from tests.conftest import rows, run_sql

L = "1,x,10\n2,y,20\n3,z,30\n,w,40\n4,,50\n2,y2,60\n"
R = "2,a\n4,b\n5,c\n2,d\n"
R_WITH_NULL = "2,a\n,b\n"
ALL_L = [(1, "x", 10), (2, "y", 20), (2, "y2", 60), (3, "z", 30), (4, None, 50), (None, "w", 40)]
IN_R = [(2, "y", 20), (2, "y2", 60), (4, None, 50)]

CASES = {
    "SELECT * FROM l WHERE k IN (SELECT k FROM r)": IN_R,
    "SELECT * FROM l WHERE k NOT IN (SELECT k FROM r)": [(1, "x", 10), (3, "z", 30)],
    # NOT IN is null-aware: one NULL in the subquery and no row can be shown to be outside it
    "SELECT * FROM l WHERE k NOT IN (SELECT k FROM rn)": [],
    # ... and over an empty subquery every row is, a NULL key included
    "SELECT * FROM l WHERE k NOT IN (SELECT k FROM e)": ALL_L,
    "SELECT * FROM l WHERE k IN (SELECT k FROM rn)": [(2, "y", 20), (2, "y2", 60)],
    "SELECT * FROM l WHERE EXISTS (SELECT 1 FROM r WHERE r.k = l.k)": IN_R,
    "SELECT * FROM l WHERE NOT EXISTS (SELECT 1 FROM r WHERE r.k = l.k)": [(1, "x", 10), (3, "z", 30), (None, "w", 40)],
    "SELECT * FROM l WHERE EXISTS (SELECT * FROM r WHERE r.k = l.k AND r.t > 'a')": IN_R,
    # a correlation that is no equality: the whole condition is the join's
    "SELECT * FROM l WHERE EXISTS (SELECT * FROM r WHERE r.k < l.k) AND v > 10": [(3, "z", 30), (4, None, 50)],
    "SELECT * FROM l WHERE EXISTS (SELECT * FROM e)": [],
    "SELECT * FROM l WHERE NOT EXISTS (SELECT * FROM e)": ALL_L,
    "SELECT * FROM l WHERE v > (SELECT AVG(v) FROM l)": [(2, "y2", 60), (4, None, 50), (None, "w", 40)],
    "SELECT s, (SELECT MAX(k) FROM r) AS m FROM l": [(s, 5) for s in ("w", "x", "y", "y2", "z", None)],
    "SELECT * FROM l WHERE k + 1 IN (SELECT k + 1 FROM r WHERE t <> 'd')": IN_R,
    "SELECT * FROM l WHERE k IN (SELECT k FROM r GROUP BY k HAVING COUNT(*) > 1)": [(2, "y", 20), (2, "y2", 60)],
    "SELECT k, COUNT(*) AS c FROM l WHERE k IN (SELECT k FROM r) GROUP BY k": [(2, 2), (4, 1)],
    # correlated scalar subqueries: an outer row without matches sees COUNT 0 and NULL for the others
    "SELECT s, (SELECT COUNT(*) FROM r WHERE r.k = l.k) AS n FROM l":
        [("x", 0), ("y", 2), ("z", 0), ("w", 0), (None, 1), ("y2", 2)],
    "SELECT s, (SELECT MAX(t) FROM r WHERE r.k = l.k AND t <> 'd') AS m FROM l":
        [("x", None), ("y", "a"), ("z", None), ("w", None), (None, "b"), ("y2", "a")],
    "SELECT s FROM l WHERE (SELECT COUNT(*) FROM r WHERE l.k = r.k) = 0": [("x",), ("z",), ("w",)],
}


def _script(tmp_path: Path, query: str) -> str:
    files = {"l": ("k INT, s STRING, v INT", L), "r": ("k INT, t STRING", R),
             "rn": ("k INT, t STRING", R_WITH_NULL), "e": ("k INT, t STRING", "")}
    ddl = []
    for name, (columns, data) in files.items():
        (tmp_path / f"{name}.csv").write_text(data)
        ddl.append(f"CREATE TABLE {name} ({columns}) WITH ('connector' = 'filesystem', "
                   f"'path' = '{tmp_path / (name + '.csv')}', 'format' = 'csv', 'csv.null-literal' = '');\n")
    return "".join(ddl) + query + ";"


@pytest.mark.parametrize("parallelism", ["1", "2"])
@pytest.mark.parametrize("query", list(CASES))
def test_subqueries_give_flinks_rows(query: str, parallelism: str, tmp_path: Path) -> None:
    # run_sql applies the changelog, failing on a retraction of a row never emitted
    result = run_sql(_script(tmp_path, query), {"parallelism.default": parallelism})
    assert sorted(rows(result), key=repr) == sorted(CASES[query], key=repr)


def test_in_and_not_exists_explain_as_semi_and_anti_joins_on_the_key(tmp_path: Path) -> None:
    from sqlstream.frontend.session import Session

    query = "EXPLAIN SELECT * FROM l WHERE k IN (SELECT k FROM r) AND NOT EXISTS (SELECT * FROM rn WHERE rn.k = l.v)"
    plan = Session().execute_script(_script(tmp_path, query))[-1].message
    assert "Join(SEMI, keys=[$0=$0])" in plan
    assert "Join(ANTI, keys=[$2=$0])" in plan


def test_a_subquery_under_or_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="conjuncts of WHERE"):
        run_sql(_script(tmp_path, "SELECT * FROM l WHERE s IN (SELECT t FROM r) OR v > 30"))


def test_a_scalar_subquery_that_may_return_many_rows_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="at most one row"):
        run_sql(_script(tmp_path, "SELECT * FROM l WHERE v > (SELECT k FROM r)"))


def test_a_correlated_scalar_subquery_explains_as_a_left_join_with_its_grouped_aggregate(tmp_path: Path) -> None:
    from sqlstream.frontend.session import Session

    query = "EXPLAIN SELECT s, (SELECT COUNT(*) FROM r WHERE r.k = l.k) AS n FROM l"
    plan = Session().execute_script(_script(tmp_path, query))[-1].message
    assert "Join(LEFT, keys=[$0=$0])" in plan
    assert "GroupAggregate(keys=[$0]" in plan


def test_a_correlated_scalar_subquery_related_by_other_than_equalities_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="only relate its rows to the outer query's by equalities"):
        run_sql(_script(tmp_path, "SELECT s, (SELECT MAX(t) FROM r WHERE r.k < l.k) AS m FROM l"))


def test_an_unknown_column_in_a_correlated_subquery_names_the_subquerys_columns(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="unknown column 'kk'"):
        run_sql(_script(tmp_path, "SELECT * FROM l WHERE EXISTS (SELECT * FROM r WHERE r.t = kk)"))
