"""PostgreSQL plumbing shared by the postgres source, sink and lookup: connecting, the table's catalog entry."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import psycopg
from psycopg import sql

from sqlstream.core.errors import ConnectorError
from sqlstream.core.tables import TableDef
from sqlstream.runtime.connectors.postgres.options import PostgresOptions

CONNECT_TIMEOUT_S = 10
_APP = "sqlstream"


def connect(options: PostgresOptions, table: str) -> psycopg.Connection:
    """An autocommit connection with TimeZone UTC; ConnectorError if the server cannot be reached."""
    extra = {k: v for k, v in (("user", options.username), ("password", options.password)) if v}
    try:
        conn = psycopg.connect(
            options.conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S, application_name=_APP, **extra
        )
    except psycopg.Error as e:
        raise ConnectorError(
            f"table '{table}': cannot connect to PostgreSQL at '{options.where}': {str(e).strip()}"
        ) from None
    conn.execute("SET TIME ZONE 'UTC'")
    return conn


@dataclass(frozen=True)
class PgTable:
    """What the catalog says about the PostgreSQL table."""

    ident: sql.Identifier
    name: str  # dotted, as in 'table-name', for messages
    columns: dict[str, str]  # column -> type, as format_type() spells it, in table order
    primary_key: tuple[str, ...]
    unique_keys: tuple[frozenset[str], ...]  # primary key and unique indexes usable by ON CONFLICT

    def column(self, name: str, table: str) -> str:
        """The PostgreSQL column a sqlstream column maps to: exact match, else the only case-insensitive one."""
        if name in self.columns:
            return name
        folded = [c for c in self.columns if c.lower() == name.lower()]
        if len(folded) == 1:
            return folded[0]
        raise ConnectorError(
            f"table '{table}': column '{name}' is not a column of PostgreSQL table '{self.name}' "
            f"(columns: {', '.join(self.columns)})"
        )


def describe(conn: psycopg.Connection, parts: tuple[str, ...], table: str) -> PgTable:
    ident = sql.Identifier(*parts)
    table_name = ".".join(parts)
    oid = conn.execute("SELECT to_regclass(%s)::oid", (ident.as_string(conn),)).fetchone()[0]
    if oid is None:
        db = conn.info.dbname
        raise ConnectorError(f"table '{table}': PostgreSQL table '{table_name}' does not exist in database '{db}'")
    attrs = conn.execute(
        "SELECT attnum, attname, format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped ORDER BY attnum", (oid,)
    ).fetchall()
    by_num = {num: name for num, name, _ in attrs}
    indexes = conn.execute(
        "SELECT indisprimary, indkey::int2[] FROM pg_index "
        "WHERE indrelid = %s AND indisunique AND indpred IS NULL AND indexprs IS NULL", (oid,)
    ).fetchall()
    primary = next((tuple(by_num[n] for n in cols) for is_pk, cols in indexes if is_pk), ())
    return PgTable(
        ident, table_name, {name: typ for _, name, typ in attrs}, primary,
        tuple(frozenset(by_num[n] for n in cols) for _, cols in indexes),
    )


def key_columns(table: TableDef, pg: PgTable) -> tuple[str, ...]:
    """The upsert key in PostgreSQL names: the DDL's primary key (checked), else the table's own."""
    if not table.primary_key:
        return pg.primary_key
    keys = tuple(pg.column(k, table.name) for k in table.primary_key)
    if frozenset(keys) not in pg.unique_keys:
        known = "; ".join(f"({', '.join(sorted(k))})" for k in pg.unique_keys) or "none"
        raise ConnectorError(
            f"table '{table.name}': PRIMARY KEY ({', '.join(table.primary_key)}) is not the primary key or a "
            f"unique index of PostgreSQL table '{pg.name}', which an upsert (ON CONFLICT) needs; "
            f"its unique keys: {known}"
        )
    return keys


def names(columns: Iterable[str], qualifier: str | None = None) -> sql.Composed:
    if qualifier is None:
        return sql.SQL(", ").join(sql.Identifier(c) for c in columns)
    return sql.SQL(", ").join(sql.Identifier(qualifier, c) for c in columns)


def pg_message(e: psycopg.Error) -> str:
    return (e.diag.message_primary or str(e)).strip()
