"""Flink 2.3 (FLIP-558): an updating query into an upsert sink whose changes are keyed by other columns than
the sink's PRIMARY KEY is refused without ON CONFLICT, naming both keys.

Each case's outcome (accepted or refused, and the upsert key named) was checked on PyFlink 2.3 with the same
statements and blackhole sinks (a debezium-json filesystem sink takes -U rows: not an upsert sink).
"""

from __future__ import annotations

import re

import pytest

from sqlstream.core.errors import PlanError
from sqlstream.frontend.session import Session

TABLES = """
CREATE TABLE src (a INT, b INT, v INT, pt AS PROCTIME()) WITH ('connector' = 'datagen');
CREATE TABLE src2 (a INT, w INT) WITH ('connector' = 'datagen');
CREATE TABLE pa (a INT, x BIGINT, PRIMARY KEY (a) NOT ENFORCED) WITH ('connector' = 'blackhole');
CREATE TABLE pab (a INT, b INT, x BIGINT, PRIMARY KEY (a, b) NOT ENFORCED) WITH ('connector' = 'blackhole');
CREATE TABLE pb (a INT, b INT, x BIGINT, PRIMARY KEY (b) NOT ENFORCED) WITH ('connector' = 'blackhole');
CREATE TABLE pk1 (k INT, x BIGINT, PRIMARY KEY (k) NOT ENFORCED) WITH ('connector' = 'blackhole');
CREATE TABLE parn (a INT, v INT, rn BIGINT, PRIMARY KEY (a, rn) NOT ENFORCED) WITH ('connector' = 'blackhole');
CREATE TABLE pa3 (a INT, v INT, w INT, PRIMARY KEY (a) NOT ENFORCED) WITH ('connector' = 'blackhole');
CREATE TABLE dbz (a INT, x BIGINT, PRIMARY KEY (a) NOT ENFORCED)
  WITH ('connector' = 'filesystem', 'path' = '/nonexistent/dbz', 'format' = 'debezium-json');
CREATE TABLE cdc (a INT, x BIGINT) WITH ('connector' = 'filesystem', 'path' = '/nonexistent/cdc',
  'format' = 'debezium-json');
CREATE TABLE cdc_pk (a INT, x BIGINT, PRIMARY KEY (a) NOT ENFORCED) WITH ('connector' = 'filesystem',
  'path' = '/nonexistent/cdc', 'format' = 'debezium-json');
"""
TOP = "(SELECT *, ROW_NUMBER() OVER (PARTITION BY a ORDER BY {order}) AS rn FROM src)"

ACCEPTED = {
    "group key is the primary key": "INSERT INTO pa SELECT a, COUNT(*) FROM src GROUP BY a",
    "group keys are the primary key": "INSERT INTO pab SELECT a, b, COUNT(*) FROM src GROUP BY a, b",
    "group key within the primary key": "INSERT INTO pab SELECT a, MAX(b), COUNT(*) FROM src GROUP BY a",
    "a global aggregate's one row": "INSERT INTO pk1 SELECT 1, COUNT(*) FROM src",
    "filtered": "INSERT INTO pa SELECT a, c FROM (SELECT a, COUNT(*) AS c FROM src GROUP BY a) WHERE c > 1",
    "top-1 per partition": f"INSERT INTO pa3 SELECT a, v, 0 FROM {TOP.format(order='v DESC')} WHERE rn = 1",
    "top-3 with its rank number": f"INSERT INTO parn SELECT a, v, rn FROM {TOP.format(order='v DESC')} WHERE rn <= 3",
    "keep-last deduplication": f"INSERT INTO pa3 SELECT a, v, 0 FROM {TOP.format(order='pt DESC')} WHERE rn = 1",
    "join of two aggregates on their keys": "INSERT INTO pa SELECT x.a, x.c + y.s FROM "
    "(SELECT a, COUNT(*) AS c FROM src GROUP BY a) x JOIN "
    "(SELECT a, CAST(SUM(w) AS BIGINT) AS s FROM src2 GROUP BY a) y ON x.a = y.a",
    "a retract sink (debezium-json)": "INSERT INTO dbz SELECT MAX(b), COUNT(*) FROM src GROUP BY a",
    "a changelog source keyed as the sink": "INSERT INTO pa SELECT a, x FROM cdc_pk WHERE x > 1",
}
REFUSED = {
    "group key is not the primary key": ("INSERT INTO pb SELECT a, MAX(b), COUNT(*) FROM src GROUP BY a", "[a]"),
    "group keys wider than the primary key": ("INSERT INTO pb SELECT a, b, COUNT(*) FROM src GROUP BY a, b", "[a, b]"),
    "group key projected away": ("INSERT INTO pk1 SELECT MAX(b), COUNT(*) FROM src GROUP BY a", ""),
    "top-3 without its rank number": (
        f"INSERT INTO pa3 SELECT a, v, 0 FROM {TOP.format(order='v DESC')} WHERE rn <= 3", ""),
    "aggregate joined with a table without key": (
        "INSERT INTO pa SELECT x.a, x.c FROM (SELECT a, COUNT(*) AS c FROM src GROUP BY a) x "
        "JOIN src2 ON x.a = src2.a", ""),
    "outer join of tables without key": (
        "INSERT INTO pa3 SELECT src.a, src.v, src2.w FROM src LEFT JOIN src2 ON src.a = src2.a", ""),
    "a changelog source without key": ("INSERT INTO pa SELECT * FROM cdc", "none"),
    "union of aggregates": (
        "INSERT INTO pa SELECT a, COUNT(*) FROM src GROUP BY a UNION ALL SELECT a, COUNT(*) FROM src2 GROUP BY a", ""),
}


def explain(sql: str, settings: str = "") -> str:
    session = Session()
    session.execute_script(TABLES + settings)
    return session.execute_script(f"EXPLAIN {sql};")[-1].message


@pytest.mark.parametrize("sql", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_a_query_keyed_within_the_primary_key_is_accepted(sql: str) -> None:
    assert "== Physical Dataflow ==" in explain(sql)


@pytest.mark.parametrize(("sql", "upsert_key"), REFUSED.values(), ids=REFUSED.keys())
def test_a_query_keyed_otherwise_is_refused_naming_both_keys(sql: str, upsert_key: str) -> None:
    with pytest.raises(PlanError, match=r"The query has an upsert key that differs from the primary key of the sink "
                                        rf"table '\w+'. Primary key: \[\w+\], upsert key: {re.escape(upsert_key)}\. "
                                        r".*Please specify an ON CONFLICT clause"):
        explain(sql)


def test_upsert_materialize_none_writes_the_changes_as_they_arrive() -> None:
    sql = REFUSED["group key is not the primary key"][0]
    assert "== Physical Dataflow ==" in explain(sql, "SET 'table.exec.sink.upsert-materialize' = 'NONE';")


def test_without_require_on_conflict_flink_would_materialize_which_is_refused() -> None:
    sql = REFUSED["group key is not the primary key"][0]
    with pytest.raises(PlanError, match="Flink materializes the sink's input here \\(SinkUpsertMaterializer\\)"):
        explain(sql, "SET 'table.exec.sink.require-on-conflict' = 'false';")


@pytest.mark.parametrize(("value", "message"), [
    ("FORCE", "'FORCE' materializes the input of every upsert sink"),
    ("SOMETIMES", "'SOMETIMES' is not one of AUTO, NONE, FORCE"),
])
def test_upsert_materialize_values(value: str, message: str) -> None:
    with pytest.raises(PlanError, match=message):
        Session().execute_script(f"SET 'table.exec.sink.upsert-materialize' = '{value}';")
