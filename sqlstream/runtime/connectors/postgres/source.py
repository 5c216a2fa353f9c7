"""The postgres source: one bounded scan of the table, split among subtasks (see the package docstring)."""

from __future__ import annotations

from typing import Any

import psycopg
import pyarrow as pa
from psycopg import sql

from sqlstream.core.errors import ConnectorError, DataError
from sqlstream.core.tables import TableDef
from sqlstream.runtime.connectors.base import SourceContext, SourceReader
from sqlstream.runtime.connectors.postgres.client import (
    PgTable,
    connect,
    describe,
    key_columns,
    names,
    pg_message,
)
from sqlstream.runtime.connectors.postgres.options import PostgresOptions


def _order_by(table: TableDef, pg: PgTable) -> sql.Composable:
    keys = key_columns(table, pg)
    return names(keys) if keys else sql.SQL("ctid")


class PostgresSource(SourceReader):
    """Reads this subtask's share of the table once; see the module docstring."""

    bounded = True

    def __init__(self, ctx: SourceContext) -> None:
        self._ctx = ctx
        self._table = ctx.table.name
        self._options = PostgresOptions.from_options(ctx.options, self._table)
        self._schema = ctx.schema
        self._conn: psycopg.Connection | None = None
        self._cursor: psycopg.ServerCursor | None = None
        self._returned = 0  # rows handed out: the position
        self._done = False

    def open(self) -> None:
        opts, table = self._options, self._table
        conn = connect(opts, table)
        try:
            pg = describe(conn, opts.table_parts, table)
            columns = [pg.column(c, table) for c in self._ctx.columns]
            order = _order_by(self._ctx.table, pg)
            n, i = self._ctx.parallelism, self._ctx.subtask_index
            if n == 1:
                query = sql.SQL("SELECT {} FROM {} ORDER BY {} OFFSET {}").format(
                    names(columns), pg.ident, order, sql.Literal(self._returned))
            else:
                rn = sql.Identifier("_sqlstream_rn")
                numbered = sql.SQL("row_number() OVER (ORDER BY {}) AS {}").format(order, rn)
                inner = sql.SQL(", ").join([*(sql.Identifier(c) for c in columns), numbered])
                query = sql.SQL("SELECT {} FROM (SELECT {} FROM {}) AS s WHERE ({} - 1) % {} = {} ORDER BY {} OFFSET {}").format(
                    names(columns, "s"), inner, pg.ident, rn, sql.Literal(n), sql.Literal(i), rn,
                    sql.Literal(self._returned))
            conn.autocommit = False
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            conn.read_only = True
            cursor = conn.cursor(name=f"sqlstream_scan_{i}")
            cursor.execute(query)
        except psycopg.Error as e:
            conn.close()
            raise ConnectorError(
                f"table '{table}': reading PostgreSQL table '{opts.table_name}' failed: {pg_message(e)}"
            ) from None
        except BaseException:
            conn.close()
            raise
        self._conn, self._cursor = conn, cursor

    def read_batch(self) -> pa.RecordBatch | None:
        if self._done:
            return None
        assert self._cursor is not None, "open() first"
        size = self._ctx.batch_size
        try:
            rows = self._cursor.fetchmany(size)
        except psycopg.Error as e:
            raise ConnectorError(
                f"table '{self._table}': reading PostgreSQL table '{self._options.table_name}' failed: "
                f"{pg_message(e)}"
            ) from None
        if len(rows) < size:
            self._done = True
        if not rows:
            return None
        batch = self._to_arrow(rows)
        self._returned += len(rows)
        return batch

    def _to_arrow(self, rows: list[tuple]) -> pa.RecordBatch:
        if not self._schema:  # no column wanted: the rows still count
            return pa.RecordBatch.from_struct_array(pa.array([{}] * len(rows), pa.struct([])))
        arrays = []
        for field, values in zip(self._schema, zip(*rows, strict=True), strict=True):
            try:
                arrays.append(pa.array(values, type=field.type))
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
                raise DataError(
                    f"table '{self._table}': column '{field.name}' of PostgreSQL table "
                    f"'{self._options.table_name}' near row {self._returned + 1} does not convert "
                    f"to {field.type}: {e}"
                ) from None
        return pa.RecordBatch.from_arrays(arrays, schema=self._schema)

    @property
    def finished(self) -> bool:
        return self._done

    def snapshot_position(self) -> Any:
        return self._returned

    def restore_position(self, position: Any) -> None:
        """Skip the rows a previous reader returned (the table is assumed unchanged)."""
        self._returned = int(position or 0)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = self._cursor = None
