"""Lookups in a PostgreSQL table for lookup joins (see the package docstring)."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
from psycopg import sql

from sqlstream.core.errors import ConnectorError
from sqlstream.runtime.connectors.base import LookupContext, LookupFunction
from sqlstream.runtime.connectors.lookup_cache import with_cache
from sqlstream.runtime.connectors.postgres.client import connect, describe, names, pg_message
from sqlstream.runtime.connectors.postgres.options import PostgresOptions

# Keys per lookup query: well below PostgreSQL's 65535 bind parameters for composite keys.
LOOKUP_CHUNK = 1000


class PostgresLookup:
    """``lookup(keys) -> {key: [rows]}`` against the table; keys without a match are left out."""

    def __init__(self, ctx: LookupContext) -> None:
        self._ctx = ctx
        self._table = ctx.table.name
        self.options = PostgresOptions.from_options(ctx.options, self._table)  # read by create_lookup
        self._retries = self.options.lookup_max_retries
        self._conn: psycopg.Connection | None = None
        self._query: Callable[[int], sql.Composed] | None = None

    def connect(self) -> psycopg.Connection:
        conn = connect(self.options, self._table)
        try:
            pg = describe(conn, self.options.table_parts, self._table)
            keys = [pg.column(k, self._table) for k in self._ctx.keys]
            columns = [pg.column(c, self._table) for c in self._ctx.columns]
        except BaseException:
            conn.close()
            raise
        one = sql.SQL("({})").format(sql.SQL(", ").join(sql.Placeholder() * len(keys)))
        self._query = lambda n: sql.SQL("SELECT {} FROM {} WHERE ({}) IN ({})").format(
            names([*keys, *columns]), pg.ident, names(keys), sql.SQL(", ").join([one] * n))
        return conn

    def __call__(self, keys: list[tuple]) -> dict[tuple, list[tuple]]:
        wanted = list(dict.fromkeys(k for k in keys if None not in k))  # NULL never equals anything
        width = len(self._ctx.keys)
        out: dict[tuple, list[tuple]] = {}
        for start in range(0, len(wanted), LOOKUP_CHUNK):
            for row in self._fetch(wanted[start:start + LOOKUP_CHUNK]):
                out.setdefault(tuple(row[:width]), []).append(tuple(row[width:]))
        return out

    def _fetch(self, keys: list[tuple]) -> list[tuple]:
        params = [v for key in keys for v in key]
        failures = 0
        while True:
            try:
                if self._conn is None:
                    self._conn = self.connect()
                assert self._query is not None
                return self._conn.execute(self._query(len(keys)), params).fetchall()
            except psycopg.OperationalError as e:  # the connection broke: reconnect and ask again
                self.close()
                failures += 1
                if failures > self._retries:
                    raise ConnectorError(
                        f"table '{self._table}': lookup in PostgreSQL table '{self.options.table_name}' "
                        f"failed {failures} times: {pg_message(e)}"
                    ) from None
            except psycopg.Error as e:
                raise ConnectorError(
                    f"table '{self._table}': lookup in PostgreSQL table '{self.options.table_name}' "
                    f"failed: {pg_message(e)}"
                ) from None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None


def create_lookup(ctx: LookupContext) -> LookupFunction:
    """The lookup function of a lookup join, behind the cache of 'lookup.cache.max-rows' / '.ttl'."""
    lookup = PostgresLookup(ctx)
    return with_cache(lookup, lookup.options.lookup_cache_max_rows, lookup.options.lookup_cache_ttl_ms, ctx.clock)
