"""The postgres sink: appends or upserts, at-least-once or exactly-once (see the package docstring)."""

from __future__ import annotations

import hashlib
import re
import uuid
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
from psycopg import sql

from sqlstream.core.errors import ConnectorError
from sqlstream.runtime.connectors.base import SinkContext, SinkWriter
from sqlstream.runtime.connectors.postgres.client import (
    PgTable,
    connect,
    describe,
    key_columns,
    names,
    pg_message,
)
from sqlstream.runtime.connectors.postgres.options import PostgresOptions
from sqlstream.runtime.elements import RowKind

_STAGE_GID = "_sqlstream_gid"
_STAGE_OP = "_sqlstream_op"
_UPSERT, _DELETE = "u", "d"


def _stage_parts(table_name: str) -> tuple[str, ...]:
    """The staging table of exactly-once upserts into ``table_name``: '<table>__sqlstream_stage' beside it."""
    parts = tuple(table_name.split("."))
    name = f"{parts[-1]}__sqlstream_stage"
    if len(name.encode()) > 63:  # PostgreSQL would truncate it, and two long names could meet
        name = f"{hashlib.sha1(parts[-1].encode()).hexdigest()[:16]}__sqlstream_stage"
    return (*parts[:-1], name)


def _of_gid(qualifier: str | None = None) -> sql.Composed:
    """'staged rows of gid %s with op %s' (parameters: gid, op)."""
    q = () if qualifier is None else (qualifier,)
    return sql.SQL("{} = %s AND {} = %s").format(sql.Identifier(*q, _STAGE_GID), sql.Identifier(*q, _STAGE_OP))


def _rows(batch: pa.RecordBatch) -> list[tuple]:
    return list(zip(*(c.to_pylist() for c in batch.columns), strict=True))


class PostgresSink(SinkWriter):
    """Appends or upserts one subtask's rows; see the module docstring for the guarantees."""

    def __init__(self, ctx: SinkContext) -> None:
        self._ctx = ctx
        self._table = ctx.table.name
        self._options = PostgresOptions.from_options(ctx.options, self._table)
        self._exactly_once = self._options.delivery_guarantee == "exactly-once"
        self._prefix = self._options.transaction_id_prefix or ""
        self._run = uuid.uuid4().hex
        self._own_gid = re.compile(rf"^{re.escape(self._prefix)}-{ctx.subtask_index}-[0-9a-f]{{32}}-(-?\d+)$")
        self._conn: psycopg.Connection | None = None  # writes; holds the checkpoint's open transaction
        self._ctl: psycopg.Connection | None = None  # COMMIT/ROLLBACK PREPARED, outside that transaction
        self._pg: PgTable | None = None
        self._columns: list[str] = []  # PostgreSQL names of the written columns, in ctx.schema order
        self._keys: tuple[str, ...] = ()
        self._key_index: list[int] = []
        self._stage: sql.Identifier | None = None  # exactly-once upsert: the staging table
        self._in_txn = False  # exactly-once append: rows written since the last prepare
        self._changes: dict[tuple, tuple[str, tuple]] = {}  # exactly-once upsert: key -> (op, row)
        self._settled = False  # predecessors' leftover transactions are cleaned up

    @property
    def _upsert(self) -> bool:
        return bool(self._keys)

    # -- opening ---------------------------------------------------------

    def open(self) -> None:
        if self._conn is not None:
            return
        opts, table = self._options, self._table
        conn = connect(opts, table)
        try:
            pg = describe(conn, opts.table_parts, table)
            self._columns = [pg.column(name, table) for name in self._ctx.schema.names]
            self._keys = key_columns(self._ctx.table, pg)
            missing = [k for k in self._keys if k not in self._columns]
            if missing:
                raise ConnectorError(
                    f"table '{table}': key column '{missing[0]}' of PostgreSQL table '{pg.name}' is not written "
                    f"by the query (it writes {', '.join(self._columns)})"
                )
            self._key_index = [self._columns.index(k) for k in self._keys]
            if self._ctx.updating and not self._upsert:
                raise ConnectorError(
                    f"table '{table}': PostgreSQL table '{pg.name}' has no primary key, so the postgres sink only "
                    "appends and cannot write the updates and deletes of this query; declare "
                    "PRIMARY KEY (...) NOT ENFORCED on columns that are a primary key or unique index there"
                )
            if self._exactly_once:
                self._check_prepared_transactions(conn)
                self._ctl = connect(opts, table)
                if self._upsert:
                    self._stage = self._ensure_stage(conn, pg)
        except BaseException:
            self.close()
            conn.close()
            raise
        self._pg = pg
        self._conn = conn

    def _check_prepared_transactions(self, conn: psycopg.Connection) -> None:
        limit = int(conn.execute("SHOW max_prepared_transactions").fetchone()[0])
        if limit <= 0:
            raise ConnectorError(
                f"table '{self._table}': 'sink.delivery-guarantee' = 'exactly-once' needs PostgreSQL's two-phase "
                f"commit, which the server at '{self._options.where}' has disabled "
                "(max_prepared_transactions = 0); set it to a few times the number of sink subtasks and restart it"
            )

    def _ensure_stage(self, conn: psycopg.Connection, pg: PgTable) -> sql.Identifier:
        """The staging table of exactly-once upserts; created (once, under a lock) if it is missing.

        Nothing is run against an existing one: DDL on it would wait for the
        prepared transactions of a predecessor, which are only rolled back later.
        """
        parts = _stage_parts(pg.name)
        stage = sql.Identifier(*parts)
        text = stage.as_string(conn)
        if conn.execute("SELECT to_regclass(%s)", (text,)).fetchone()[0] is None:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (text,))
                if conn.execute("SELECT to_regclass(%s)", (text,)).fetchone()[0] is None:
                    columns = sql.SQL(", ").join(
                        sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(pg.columns[c])) for c in self._columns
                    )
                    conn.execute(sql.SQL('CREATE TABLE {} ({} text NOT NULL, {} "char" NOT NULL, {})').format(
                        stage, sql.Identifier(_STAGE_GID), sql.Identifier(_STAGE_OP), columns))
                    conn.execute(sql.SQL("CREATE INDEX ON {} ({})").format(stage, sql.Identifier(_STAGE_GID)))
        have = describe(conn, parts, self._table).columns
        missing = [c for c in (_STAGE_GID, _STAGE_OP, *self._columns) if c not in have]
        if missing:
            raise ConnectorError(
                f"table '{self._table}': the staging table {text} lacks column '{missing[0]}' (made for other "
                "columns); drop it when no transaction of this sink is prepared"
            )
        return stage

    # -- writing ---------------------------------------------------------

    def write(self, batch: pa.RecordBatch, kinds: pa.Array | None) -> None:
        if not self._upsert and kinds is not None and pc.any(pc.not_equal(kinds, int(RowKind.INSERT))).as_py():
            raise ConnectorError(
                f"table '{self._table}': the postgres sink has no primary key to apply update or delete rows by; "
                "it only appends"
            )
        if batch.num_rows == 0:
            return
        self._settle()
        rows = _rows(batch)
        try:
            if self._upsert:
                ops = [int(RowKind.INSERT)] * len(rows) if kinds is None else kinds.to_pylist()
                changes = self._changes if self._exactly_once else {}
                self._reduce(rows, ops, changes)
                if not self._exactly_once:
                    self._upsert_now(changes)
            elif self._exactly_once:
                conn = self._connection()
                if not self._in_txn:
                    conn.execute("BEGIN")
                    self._in_txn = True
                self._copy(conn, self._target(), self._columns, rows)
            else:
                self._copy(self._connection(), self._target(), self._columns, rows)
        except psycopg.Error as e:
            raise ConnectorError(
                f"table '{self._table}': writing to PostgreSQL table '{self._target_name()}' failed: {pg_message(e)}"
            ) from None

    def _reduce(self, rows: list[tuple], ops: list[int], into: dict[tuple, tuple[str, tuple]]) -> None:
        """Keep the last change per key; -U rows are dropped (the +U after them replaces the row)."""
        index = self._key_index
        for row, op in zip(rows, ops, strict=True):
            if op == RowKind.UPDATE_BEFORE:
                continue
            into[tuple(row[i] for i in index)] = (_DELETE if op == RowKind.DELETE else _UPSERT, row)

    def _upsert_now(self, changes: dict[tuple, tuple[str, tuple]]) -> None:
        conn = self._connection()
        target, columns = self._target(), self._columns
        upserts = [row for op, row in changes.values() if op == _UPSERT]
        deletes = [key for key, (op, _) in changes.items() if op == _DELETE]
        values = sql.SQL(", ").join(sql.Placeholder() * len(columns))
        match = sql.SQL(" AND ").join(sql.SQL("{} = %s").format(sql.Identifier(k)) for k in self._keys)
        with conn.transaction(), conn.cursor() as cur:
            if upserts:
                cur.executemany(sql.SQL("INSERT INTO {} ({}) VALUES ({}) {}").format(
                    target, names(columns), values, self._on_conflict()), upserts)
            if deletes:
                cur.executemany(sql.SQL("DELETE FROM {} WHERE {}").format(target, match), deletes)

    def _on_conflict(self) -> sql.Composed:
        others = [c for c in self._columns if c not in self._keys]
        if not others:
            return sql.SQL("ON CONFLICT ({}) DO NOTHING").format(names(self._keys))
        assignments = sql.SQL(", ").join(sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(c)) for c in others)
        return sql.SQL("ON CONFLICT ({}) DO UPDATE SET {}").format(names(self._keys), assignments)

    @staticmethod
    def _copy(conn: psycopg.Connection, target: sql.Identifier, columns: list[str], rows: list[tuple]) -> None:
        with conn.cursor() as cur, cur.copy(sql.SQL("COPY {} ({}) FROM STDIN").format(target, names(columns))) as copy:
            for row in rows:
                copy.write_row(row)

    def _connection(self) -> psycopg.Connection:
        assert self._conn is not None, "open() first"
        return self._conn

    def _control(self) -> psycopg.Connection:
        assert self._ctl is not None, "open() an exactly-once sink first"
        return self._ctl

    def _target(self) -> sql.Identifier:
        assert self._pg is not None, "open() first"
        return self._pg.ident

    def _target_name(self) -> str:
        return self._options.table_name

    # -- checkpoints -----------------------------------------------------

    def _gid(self, checkpoint_id: int) -> str:
        return f"{self._prefix}-{self._ctx.subtask_index}-{self._run}-{checkpoint_id}"

    def prepare_commit(self, checkpoint_id: int) -> Any:
        """exactly-once: PREPARE TRANSACTION the checkpoint's rows, return the gid (None if it wrote none)."""
        if not self._exactly_once:
            return None  # at-least-once committed every batch as it was written
        self._settle()
        gid = self._gid(checkpoint_id)
        conn = self._connection()
        try:
            if self._upsert:
                if not self._changes:
                    return None
                assert self._stage is not None
                conn.execute("BEGIN")
                staged = [(gid, op, *row) for op, row in self._changes.values()]
                self._copy(conn, self._stage, [_STAGE_GID, _STAGE_OP, *self._columns], staged)
                self._changes = {}
            elif not self._in_txn:
                return None
            conn.execute(sql.SQL("PREPARE TRANSACTION {}").format(sql.Literal(gid)))
        except psycopg.Error as e:
            raise ConnectorError(
                f"table '{self._table}': preparing transaction '{gid}' on PostgreSQL table '{self._target_name()}' "
                f"failed: {pg_message(e)}"
            ) from None
        self._in_txn = False
        return gid

    def commit(self, committables: list[Any]) -> None:
        """COMMIT PREPARED each gid (then apply its staged rows, for upserts); gids already committed are skipped."""
        if not self._exactly_once:
            return
        self.open()
        ctl = self._control()
        for gid in committables:
            try:
                ctl.execute(sql.SQL("COMMIT PREPARED {}").format(sql.Literal(gid)))
            except psycopg.errors.UndefinedObject:
                pass  # no longer prepared: committed before (only prepared gids become committables)
            except psycopg.Error as e:
                raise ConnectorError(
                    f"table '{self._table}': COMMIT PREPARED '{gid}' failed: {pg_message(e)}"
                ) from None
            if self._upsert:
                self._apply(gid)

    def _apply(self, gid: str) -> None:
        """Move a committed gid's staged changes into the table, in one transaction; a no-op once done."""
        ctl, target, stage = self._control(), self._target(), self._stage
        assert stage is not None
        columns, keys = self._columns, self._keys
        match = sql.SQL(" AND ").join(
            sql.SQL("{} = {}").format(sql.Identifier("t", k), sql.Identifier("s", k)) for k in keys
        )
        try:
            with ctl.transaction():
                ctl.execute(sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {} WHERE {} ORDER BY {} {}").format(
                    target, names(columns), names(columns), stage, _of_gid(), names(keys), self._on_conflict()),
                    (gid, _UPSERT))
                ctl.execute(sql.SQL("DELETE FROM {} AS t USING {} AS s WHERE {} AND {}").format(
                    target, stage, _of_gid("s"), match), (gid, _DELETE))
                ctl.execute(sql.SQL("DELETE FROM {} WHERE {} = %s").format(stage, sql.Identifier(_STAGE_GID)), (gid,))
        except psycopg.Error as e:
            raise ConnectorError(
                f"table '{self._table}': applying the staged changes of '{gid}' to PostgreSQL table "
                f"'{self._target_name()}' failed: {pg_message(e)}"
            ) from None

    def _settle(self) -> None:
        """Before this writer's first statement: undo what predecessors left that no checkpoint kept.

        Runs after the restored committables were committed (see the module
        docstring), so what is still prepared, or staged, under this prefix and
        subtask belongs to checkpoints that never completed.
        """
        if self._settled or not self._exactly_once:
            return
        self._settled = True
        ctl = self._control()
        like = f"{self._prefix}-{self._ctx.subtask_index}-%".replace("_", r"\_")
        try:
            prepared = ctl.execute(
                "SELECT gid FROM pg_prepared_xacts WHERE database = current_database() AND gid LIKE %s", (like,)
            ).fetchall()
            for (gid,) in prepared:
                if self._own_gid.match(gid):
                    self._rollback(gid)
            if self._stage is not None:
                staged = ctl.execute(sql.SQL("SELECT DISTINCT {0} FROM {1} WHERE {0} LIKE %s").format(
                    sql.Identifier(_STAGE_GID), self._stage), (like,)).fetchall()
                stale = [gid for (gid,) in staged if self._own_gid.match(gid)]
                if stale:
                    ctl.execute(sql.SQL("DELETE FROM {} WHERE {} = ANY(%s)").format(
                        self._stage, sql.Identifier(_STAGE_GID)), (stale,))
        except psycopg.Error as e:
            raise ConnectorError(
                f"table '{self._table}': cleaning up the transactions of prefix '{self._prefix}' failed: "
                f"{pg_message(e)}"
            ) from None

    def _rollback(self, gid: str) -> None:
        try:
            self._control().execute(sql.SQL("ROLLBACK PREPARED {}").format(sql.Literal(gid)))
        except psycopg.errors.UndefinedObject:
            pass  # already gone

    def abort(self, committables: list[Any]) -> None:
        """ROLLBACK PREPARED gids that will never be committed."""
        if not self._exactly_once:
            return
        self.open()
        for gid in committables:
            self._rollback(gid)

    def close(self) -> None:
        """Disconnect: an open, unprepared transaction rolls back; prepared ones wait for commit or a successor."""
        for conn in (self._conn, self._ctl):
            if conn is not None:
                conn.close()
        self._conn = self._ctl = None
        self._in_txn = False
        self._changes = {}
