"""INTERSECT and EXCEPT, with and without ALL: the final rows Flink 2.3 gave on the same data
(PyFlink, streaming mode, parallelism 1, 'csv.null-literal' = '' on Flink's side)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import rows, run_sql

A = "1,x\n1,x\n1,x\n2,y\n,z\n,z\n3,\n"
B = "1,x\n2,y\n2,y\n,z\n4,w\n3,\n"
BOTH = [(1, "x"), (2, "y"), (3, None), (None, "z")]

CASES = {
    "SELECT * FROM a INTERSECT SELECT * FROM b": BOTH,
    # each row as often as on the side that has it fewer times
    "SELECT * FROM a INTERSECT ALL SELECT * FROM b": BOTH,
    "SELECT * FROM a EXCEPT SELECT * FROM b": [],
    # (1, x): 3 - 1, (NULL, z): 2 - 1, (2, y): 1 - 2 is none
    "SELECT * FROM a EXCEPT ALL SELECT * FROM b": [(1, "x"), (1, "x"), (None, "z")],
    "SELECT * FROM b EXCEPT SELECT * FROM a": [(4, "w")],
    "SELECT * FROM b EXCEPT ALL SELECT * FROM a": [(2, "y"), (4, "w")],
    # INTERSECT binds tighter than EXCEPT and UNION
    "SELECT k FROM a INTERSECT SELECT k FROM b EXCEPT SELECT 2": [(1,), (3,), (None,)],
    "SELECT 4 UNION SELECT k FROM a INTERSECT SELECT k FROM b": [(1,), (2,), (3,), (4,), (None,)],
    "SELECT k, v FROM a INTERSECT SELECT CAST(k AS BIGINT), v FROM b": BOTH,
    # two inputs on forward edges: each Union subtask hears one channel per input (it waited for two)
    "SELECT * FROM a UNION ALL SELECT * FROM b": [(1, "x")] * 4 + [(2, "y")] * 3 + [(3, None)] * 2 + [(4, "w")]
    + [(None, "z")] * 3,
}


def _script(tmp_path: Path, query: str) -> str:
    (tmp_path / "a.csv").write_text(A)
    (tmp_path / "b.csv").write_text(B)
    return "".join(
        f"CREATE TABLE {n} (k INT, v STRING) WITH ('connector' = 'filesystem', 'path' = '{tmp_path / (n + '.csv')}', "
        "'format' = 'csv', 'csv.null-literal' = '');\n" for n in "ab"
    ) + query + ";"


@pytest.mark.parametrize("parallelism", ["1", "2"])
@pytest.mark.parametrize("query", list(CASES))
def test_set_operations_give_flinks_rows(query: str, parallelism: str, tmp_path: Path) -> None:
    # run_sql applies the changelog, failing on a retraction of a row never emitted
    result = run_sql(_script(tmp_path, query), {"parallelism.default": parallelism})
    assert rows(result) == rows_sorted(CASES[query])


def test_a_common_type_is_taken_per_column(tmp_path: Path) -> None:
    result = run_sql(_script(tmp_path, "SELECT k, v FROM a INTERSECT SELECT CAST(k AS BIGINT), v FROM b"))
    assert [str(t) for t in result.schema.types] == ["int64", "string"]


def test_intersect_all_explains_as_a_count_per_row_and_replication(tmp_path: Path) -> None:
    from sqlstream.frontend.session import Session

    script = _script(tmp_path, "EXPLAIN SELECT * FROM a INTERSECT ALL SELECT * FROM b")
    plan = Session().execute_script(script)[-1].message
    assert "GroupAggregate(keys=[$0, $1], aggs=[SUM($2), SUM($3)])" in plan
    assert "ReplicateRows" in plan


def test_mismatched_column_counts_are_refused_by_name(tmp_path: Path) -> None:
    from sqlstream.core.errors import SqlStreamError

    with pytest.raises(SqlStreamError, match="EXCEPT inputs have 2 and 1 columns"):
        run_sql(_script(tmp_path, "SELECT * FROM a EXCEPT SELECT k FROM b"))


def rows_sorted(expected: list[tuple]) -> list[tuple]:
    return sorted(expected, key=lambda r: tuple((x is None, str(type(x)), x) for x in r))
