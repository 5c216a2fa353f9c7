"""Non-windowed GROUP BY emits a changelog whose materialization equals DuckDB's answer."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest

from sqlstream.frontend.session import Session
from sqlstream.runtime.elements import RowKind
from tests.conftest import apply_changelog, duckdb_rows, rows, run_sql


@pytest.fixture
def orders(tmp_path: Path) -> tuple[str, pa.Table]:
    rng = random.Random(3)
    data = pa.table({
        "id": pa.array(range(1, 1201), pa.int32()),
        "cat": [rng.choice(["x", "y", "z", None]) for _ in range(1200)],
        "qty": pa.array([rng.randint(-3, 9) for _ in range(1200)], pa.int32()),
    })
    path = tmp_path / "orders.csv"
    with path.open("w") as f:
        for i, c, q in zip(*(c.to_pylist() for c in data.columns), strict=True):
            f.write(f"{i},{'' if c is None else c},{q}\n")
    ddl = f"""SET 'table.exec.batch-size' = '50';
        CREATE TABLE orders (id INT, cat STRING, qty INT)
        WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv', 'csv.null-literal' = '');"""
    return ddl, data


def test_group_by_changelog_materializes_to_duckdb_result(orders) -> None:
    ddl, data = orders
    got = run_sql(ddl + "SELECT cat, COUNT(*) AS n, SUM(qty) AS s, MIN(qty), MAX(qty), AVG(qty) FROM orders GROUP BY cat;")
    expected = duckdb_rows(
        "SELECT cat, COUNT(*), SUM(qty), MIN(qty), MAX(qty), CAST(TRUNC(SUM(qty) / COUNT(qty)) AS INT) FROM orders GROUP BY cat",
        orders=data,
    )
    assert rows(got) == expected


def test_group_by_emits_inserts_then_update_pairs(orders) -> None:
    ddl, _ = orders
    table = Session().execute_script(ddl + "SELECT cat, COUNT(*) AS n FROM orders GROUP BY cat;")[-1].table
    ops = table.column("op").to_pylist()
    assert ops.count(RowKind.INSERT) == 4  # x, y, z and NULL
    assert ops.count(RowKind.UPDATE_BEFORE) == ops.count(RowKind.UPDATE_AFTER) > 0
    # every -U is immediately followed by the +U of the same key
    cats = table.column("cat").to_pylist()
    for i, op in enumerate(ops):
        if op == RowKind.UPDATE_BEFORE:
            assert ops[i + 1] == RowKind.UPDATE_AFTER and cats[i + 1] == cats[i]


def test_aggregate_of_an_aggregate_consumes_retractions(orders) -> None:
    ddl, data = orders
    got = run_sql(ddl + """
        SELECT n, COUNT(*) AS cats FROM (SELECT cat, COUNT(*) AS n FROM orders WHERE qty > 5 GROUP BY cat) GROUP BY n;""")
    expected = duckdb_rows(
        "SELECT n, COUNT(*) FROM (SELECT cat, COUNT(*) AS n FROM orders WHERE qty > 5 GROUP BY cat) GROUP BY n",
        orders=data,
    )
    assert rows(got) == expected


def test_having_and_expressions_over_aggregates(orders) -> None:
    ddl, data = orders
    got = run_sql(ddl + """
        SELECT UPPER(cat) AS c, SUM(qty) * 2 AS twice FROM orders WHERE cat IS NOT NULL
        GROUP BY cat HAVING COUNT(*) > 10 AND SUM(qty) > 0;""")
    expected = duckdb_rows(
        "SELECT UPPER(cat), SUM(qty) * 2 FROM orders WHERE cat IS NOT NULL GROUP BY cat HAVING COUNT(*) > 10 AND SUM(qty) > 0",
        orders=data,
    )
    assert rows(got) == expected


def test_distinct_is_an_updating_aggregate(orders) -> None:
    ddl, data = orders
    got = run_sql(ddl + "SELECT DISTINCT cat, qty > 4 AS big FROM orders;")
    assert rows(got) == duckdb_rows("SELECT DISTINCT cat, qty > 4 FROM orders", orders=data)


def test_apply_changelog_rejects_a_retraction_of_an_unknown_row() -> None:
    table = pa.table({"a": [1], "op": pa.array([RowKind.DELETE], pa.int8())})
    with pytest.raises(ValueError):
        apply_changelog(table)
