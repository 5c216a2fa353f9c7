"""Temporal joins (event time, versioned table) and lookup joins (a DuckDB dimension table)."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from sqlstream.core.errors import SqlStreamError
from sqlstream.frontend.session import Session
from tests.conftest import duckdb_rows, rows, run_sql
from tests.test_joins import _csv

BASE = dt.datetime(2024, 1, 1)


@pytest.fixture
def tables(tmp_path: Path) -> tuple[str, pa.Table, pa.Table]:
    rng = random.Random(9)
    orders = pa.table({
        "oid": pa.array(range(500), pa.int32()),
        "cur": [rng.choice(["EUR", "USD", "JPY", "CHF"]) for _ in range(500)],
        "amt": pa.array([rng.randint(1, 100) for _ in range(500)], pa.int32()),
        "ts": pa.array([BASE + dt.timedelta(seconds=i * 2 + rng.randint(0, 3)) for i in range(500)], pa.timestamp("ms")),
    })
    rates = pa.table({
        "cur": [rng.choice(["EUR", "USD", "JPY"]) for _ in range(120)],
        "rate": pa.array([rng.randint(50, 150) for _ in range(120)], pa.int32()),
        "rts": pa.array([BASE + dt.timedelta(seconds=i * 8 + rng.randint(0, 3)) for i in range(120)], pa.timestamp("ms")),
    })
    _csv(orders, tmp_path / "orders.csv")
    _csv(rates, tmp_path / "rates.csv")
    ddl = f"""SET 'table.exec.batch-size' = '31'; SET 'parallelism.default' = '2';
CREATE TABLE orders (oid INT, cur STRING, amt INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '4' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{tmp_path / "orders.csv"}', 'format' = 'csv');
CREATE TABLE rates (cur STRING, rate INT, rts TIMESTAMP(3), WATERMARK FOR rts AS rts - INTERVAL '4' SECOND,
    PRIMARY KEY (cur) NOT ENFORCED)
WITH ('connector' = 'filesystem', 'path' = '{tmp_path / "rates.csv"}', 'format' = 'csv');
"""
    return ddl, orders, rates


@pytest.mark.parametrize("kind", ["JOIN", "LEFT JOIN"])
def test_temporal_join_picks_the_version_valid_at_event_time(tables, kind: str) -> None:
    ddl, orders, rates = tables
    got = run_sql(ddl + f"""
        SELECT o.oid, o.cur, o.amt * r.rate AS price FROM orders AS o
        {kind} rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.cur = r.cur;""")
    asof = "ASOF LEFT JOIN" if kind == "LEFT JOIN" else "ASOF JOIN"
    expected = duckdb_rows(f"""
        SELECT o.oid, o.cur, o.amt * r.rate FROM orders o {asof} rates r ON o.cur = r.cur AND o.ts >= r.rts""",
        orders=orders, rates=rates)
    assert rows(got) == expected


def test_temporal_join_needs_a_versioned_table(tables) -> None:
    ddl, _, _ = tables
    ddl = ddl.replace(",\n    PRIMARY KEY (cur) NOT ENFORCED", "")
    with pytest.raises(SqlStreamError, match="versioned table"):
        Session().execute_script(ddl + "SELECT o.oid FROM orders AS o JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.cur = r.cur;")


@pytest.fixture
def dim(tmp_path: Path) -> Path:
    path = tmp_path / "dim.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE customers (id INTEGER, name VARCHAR, tier INTEGER)")
    con.execute("INSERT INTO customers SELECT i, 'c' || i, i % 3 FROM range(0, 40) t(i)")
    con.close()
    return path


@pytest.mark.parametrize("kind", ["JOIN", "LEFT JOIN"])
def test_lookup_join_against_a_duckdb_table(tmp_path: Path, dim: Path, kind: str) -> None:
    rng = random.Random(2)
    clicks = pa.table({"cid": pa.array([rng.randint(0, 60) for _ in range(300)], pa.int32()),
                       "n": pa.array(range(300), pa.int32())})
    _csv(clicks, tmp_path / "clicks.csv")
    got = run_sql(f"""SET 'table.exec.batch-size' = '40';
        CREATE TABLE clicks (cid INT, n INT, pt AS PROCTIME())
        WITH ('connector' = 'filesystem', 'path' = '{tmp_path / "clicks.csv"}', 'format' = 'csv');
        CREATE TABLE customers (id INT, name STRING, tier INT)
        WITH ('connector' = 'duckdb', 'path' = '{dim}', 'table-name' = 'customers',
              'lookup.cache.max-rows' = '100', 'lookup.cache.ttl' = '10 min');
        SELECT c.n, c.cid, d.name FROM clicks AS c
        {kind} customers FOR SYSTEM_TIME AS OF c.pt AS d ON c.cid = d.id AND d.tier > 0;""")
    con = duckdb.connect(str(dim), read_only=True)
    con.register("clicks", clicks)
    expected = rows(con.sql(f"SELECT c.n, c.cid, d.name FROM clicks c {kind} customers d ON c.cid = d.id AND d.tier > 0").to_arrow_table())
    assert rows(got) == expected


def test_lookup_on_a_table_without_lookup_support_is_refused(tables) -> None:
    ddl, _, _ = tables
    with pytest.raises(SqlStreamError, match="cannot be looked up"):
        Session().execute_script(ddl.replace("oid INT,", "oid INT, pt AS PROCTIME(),") +
                                 "SELECT o.oid FROM orders AS o JOIN rates FOR SYSTEM_TIME AS OF o.pt AS r ON o.cur = r.cur;")
