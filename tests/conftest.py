"""Shared test helpers: run SQL through a session, compare with DuckDB as the oracle."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from sqlstream.frontend.session import Session
from sqlstream.runtime.elements import RowKind
from sqlstream.runtime.hashing import hash_columns


def run_sql(script: str, config: dict[str, str] | None = None) -> pa.Table:
    """The result of the script's last statement (a SELECT), with the changelog applied."""
    session = Session()
    session.config.update(config or {})
    results = session.execute_script(script)
    table = results[-1].table
    assert table is not None, "the last statement must be a SELECT"
    return apply_changelog(table)


def apply_changelog(table: pa.Table) -> pa.Table:
    """Materialize a changelog (+I/-U/+U/-D rows in column 'op') into its final rows."""
    if "op" not in table.column_names:
        return table
    data = table.drop_columns(["op"])
    ops = table.column("op").to_pylist()
    rows = list(zip(*(c.to_pylist() for c in data.columns), strict=True))
    live: list[tuple] = []
    for op, row in zip(ops, rows, strict=True):
        if op in (RowKind.INSERT, RowKind.UPDATE_AFTER):
            live.append(row)
        else:
            live.remove(row)  # raises if the engine retracted a row it never emitted
    columns = list(zip(*live, strict=True)) if live else [[] for _ in data.schema]
    return pa.Table.from_arrays([pa.array(list(c), f.type) for c, f in zip(columns, data.schema, strict=True)],
                                schema=data.schema)


def _norm(v: object) -> object:
    if isinstance(v, float):
        return None if math.isnan(v) else round(v, 6)
    if isinstance(v, Decimal):
        return round(float(v), 6)
    if isinstance(v, dt.datetime):
        return v.replace(tzinfo=None)
    return v


def rows(table: pa.Table) -> list[tuple]:
    """Rows as sorted tuples with floats rounded, for order-insensitive comparison."""
    columns = [c.to_pylist() for c in table.columns]  # by position: names may repeat
    out = [tuple(_norm(v) for v in r) for r in zip(*columns, strict=True)] if columns else []
    return sorted(out, key=lambda r: tuple((x is None, str(type(x)), x) for x in r))


def duckdb_rows(query: str, **tables: pa.Table) -> list[tuple]:
    con = duckdb.connect()
    for name, t in tables.items():
        con.register(name, t)
    return rows(con.sql(query).to_arrow_table())


@pytest.fixture
def session() -> Session:
    return Session()


def in_key_groups(batch: pa.RecordBatch, key_indexes: list[int] | tuple[int, ...], groups: range) -> np.ndarray:
    """Which rows of ``batch`` belong to ``groups``' key groups, as the hash exchange routes them."""
    kg = hash_columns([batch.column(k) for k in key_indexes]) % np.uint64(128)
    return np.isin(kg, np.array(groups))
