"""The 'postgres' connector (also registered as 'jdbc'): a PostgreSQL table as source, sink and lookup.

Options follow Flink's JDBC connector: ``url`` (``postgresql://user@host:port/db``,
``postgres://...``, Flink's ``jdbc:postgresql://host:port/db`` or a libpq conninfo
``host=... dbname=...``), ``table-name`` (``name`` or ``schema.name``; names are
quoted, so they match exactly, as written), optional ``username``/``password``
(they override the URL's).  Column names match the PostgreSQL table's exactly
or, failing that, case-insensitively.  Sessions run with ``TimeZone = UTC``, so
TIMESTAMP and TIMESTAMP_LTZ values convert to and from ``timestamp`` and
``timestamptz`` columns without the server's zone getting in.

Sink.  With a key -- the table's ``PRIMARY KEY (...) NOT ENFORCED``, which must
be the primary key or a unique index of the PostgreSQL table, or else the
PostgreSQL table's own primary key -- the sink is an upsert sink, like Flink's:
``+I``/``+U`` rows are ``INSERT ... ON CONFLICT (key) DO UPDATE``, ``-D`` rows
delete by key and ``-U`` rows are dropped (the ``+U`` that follows replaces the
row); the changes of one flush are reduced to the last one per key.  So it takes
updating (changelog) input.  Without a key it appends with ``COPY`` and refuses
``-U``/``-D`` rows, and a query that updates is refused when the job opens the sink.

``sink.delivery-guarantee``:

* ``at-least-once`` (default): every batch is written and committed at once;
  a replay after a failure writes the replayed rows again (harmless for an
  upsert sink, duplicates for an appending one).
* ``exactly-once``: PostgreSQL two-phase commit, one transaction per checkpoint
  and subtask.  :meth:`PostgresSink.prepare_commit` ends it with ``PREPARE
  TRANSACTION '<prefix>-<subtask>-<run>-<checkpoint>'`` and returns that gid as
  the committable; :meth:`PostgresSink.commit` runs ``COMMIT PREPARED`` when the
  checkpoint completes, and again, idempotently, for the committables restored
  from a checkpoint: a gid that is no longer prepared was committed, because
  only gids whose ``PREPARE TRANSACTION`` succeeded become committables.
  ``<run>`` is new for every writer, so gids never collide across restarts.
  The server needs ``max_prepared_transactions`` > 0 (PostgreSQL's default is 0),
  and ``sink.transaction-id-prefix`` must be unique per job.

  Appending sinks insert into the table inside the prepared transaction.  An
  upsert sink cannot: the prepared transaction of checkpoint n keeps the row
  locks of the keys it wrote until it is committed, which happens on the sink's
  own thread when checkpoint n completes; if that thread then writes one of
  those keys for checkpoint n+1 first, it waits for itself forever.  So an
  exactly-once upsert sink reduces a checkpoint's changes in memory, stages them
  at ``prepare_commit`` into ``<table>__sqlstream_stage`` (created next to the
  table, lock-free inserts tagged with the gid) in the prepared transaction, and
  its commit is ``COMMIT PREPARED`` followed by one transaction that applies the
  gid's staged rows to the table and deletes them.  Both steps are idempotent,
  so a crash between them is repaired by committing the restored gid again.

  A writer's first ``write`` or ``prepare_commit`` comes after the runtime has
  committed the committables restored from the checkpoint (SinkOperator does
  that when it is restored, before any record arrives).  At that point every
  gid of this prefix and subtask that is still prepared belongs to a
  predecessor's checkpoint that never completed, so it is rolled back, and
  staged rows of such gids are deleted: their records are replayed.  Doing
  this lazily, rather than in ``open``, is what keeps the restored gids safe.
  (A restore with a different parallelism leaves the gids of dropped subtasks
  prepared; ``ROLLBACK PREPARED`` them by hand.)

Source.  Bounded: ``SELECT`` of the projected columns ordered by the key (or
``ctid`` without one) through a server-side cursor in a read-only
repeatable-read transaction.  Subtask ``i`` of ``n`` reads the rows whose
position in that order is ``i`` modulo ``n``.  The position is the number of
rows returned, so the table must not change while a job reads it (Flink's JDBC
source makes the same assumption).

Lookup (``FOR SYSTEM_TIME AS OF <proctime>`` joins).  :func:`create_lookup`
takes the :class:`~runtime.connectors.base.LookupContext` (the table, its
validated options, the key columns and the columns to return) and returns a
:data:`~runtime.connectors.base.LookupFunction`, ``lookup(keys: list[tuple]) ->
dict[tuple, list[tuple]]``: for each requested key tuple (values in key-column
order) that matches, the matching rows as tuples of Python values of the
requested columns in their order (psycopg's conversions: int, str, Decimal,
datetime, ...); keys that match nothing are absent, and a key with a NULL
never matches.  One query serves up to ``LOOKUP_CHUNK`` keys.  With
``lookup.cache.max-rows`` the answers, misses included, are cached per key
(least recently used out first) for ``lookup.cache.ttl`` after they were read
(no expiry without it) by the shared ``lookup_cache``.  A lost connection is
reopened and the query retried up to ``lookup.max-retries`` times.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from sqlstream.core.connectors import Option
from sqlstream.core.errors import ConnectorError, DataError
from sqlstream.core.tables import TableDef
from sqlstream.runtime.connectors.base import (
    Connector,
    LookupContext,
    LookupFunction,
    SinkContext,
    SinkWriter,
    SourceContext,
    SourceReader,
)
from sqlstream.runtime.connectors.lookup_cache import with_cache
from sqlstream.runtime.elements import RowKind

CONNECT_TIMEOUT_S = 10
# Keys per lookup query: well below PostgreSQL's 65535 bind parameters for composite keys.
LOOKUP_CHUNK = 1000
# A gid must stay below PostgreSQL's 200 bytes with '-<subtask>-<32 hex>-<checkpoint id>' added.
_PREFIX = re.compile(r"^[A-Za-z0-9_.:]{1,100}$")
_STAGE_GID = "_sqlstream_gid"
_STAGE_OP = "_sqlstream_op"
_UPSERT, _DELETE = "u", "d"
_APP = "sqlstream"


# ---------------------------------------------------------------------------
# connecting and describing the table


def _conninfo(url: str) -> str:
    """A libpq conninfo or URI from the option (Flink's 'jdbc:postgresql://...' loses its 'jdbc:')."""
    return url[len("jdbc:"):] if url.lower().startswith("jdbc:") else url


def _where(options: Mapping[str, Any]) -> str:
    """host:port/db of the url, for messages (never the password)."""
    params = conninfo_to_dict(_conninfo(options["url"]))
    return f"{params.get('host', 'localhost')}:{params.get('port', 5432)}/{params.get('dbname', '')}"


def _connect(options: Mapping[str, Any], table: str) -> psycopg.Connection:
    """An autocommit connection with TimeZone UTC; ConnectorError if the server cannot be reached."""
    extra = {k: options[o] for k, o in (("user", "username"), ("password", "password")) if options.get(o)}
    try:
        conn = psycopg.connect(
            _conninfo(options["url"]), autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
            application_name=_APP, **extra,
        )
    except psycopg.Error as e:
        raise ConnectorError(
            f"table '{table}': cannot connect to PostgreSQL at '{_where(options)}': {str(e).strip()}"
        ) from None
    conn.execute("SET TIME ZONE 'UTC'")
    return conn


def _parts(table_name: str) -> tuple[str, ...]:
    """'schema.name' or 'name' as identifier parts."""
    return tuple(table_name.split("."))


@dataclass(frozen=True)
class _PgTable:
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


def _describe(conn: psycopg.Connection, parts: tuple[str, ...], table: str) -> _PgTable:
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
    return _PgTable(
        ident, table_name, {name: typ for _, name, typ in attrs}, primary,
        tuple(frozenset(by_num[n] for n in cols) for _, cols in indexes),
    )


def _key_columns(table: TableDef, pg: _PgTable) -> tuple[str, ...]:
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


def _stage_parts(parts: tuple[str, ...]) -> tuple[str, ...]:
    """The staging table of exactly-once upserts into ``parts``: '<table>__sqlstream_stage' beside it."""
    name = f"{parts[-1]}__sqlstream_stage"
    if len(name.encode()) > 63:  # PostgreSQL would truncate it, and two long names could meet
        name = f"{hashlib.sha1(parts[-1].encode()).hexdigest()[:16]}__sqlstream_stage"
    return (*parts[:-1], name)


def _names(columns: Iterable[str], qualifier: str | None = None) -> sql.Composed:
    if qualifier is None:
        return sql.SQL(", ").join(sql.Identifier(c) for c in columns)
    return sql.SQL(", ").join(sql.Identifier(qualifier, c) for c in columns)


def _of_gid(qualifier: str | None = None) -> sql.Composed:
    """'staged rows of gid %s with op %s' (parameters: gid, op)."""
    q = () if qualifier is None else (qualifier,)
    return sql.SQL("{} = %s AND {} = %s").format(sql.Identifier(*q, _STAGE_GID), sql.Identifier(*q, _STAGE_OP))


def _rows(batch: pa.RecordBatch) -> list[tuple]:
    return list(zip(*(c.to_pylist() for c in batch.columns), strict=True))


def _pg_message(e: psycopg.Error) -> str:
    return (e.diag.message_primary or str(e)).strip()


# ---------------------------------------------------------------------------
# sink


class PostgresSink(SinkWriter):
    """Appends or upserts one subtask's rows; see the module docstring for the guarantees."""

    def __init__(self, ctx: SinkContext) -> None:
        opts = ctx.options
        self._ctx = ctx
        self._table = ctx.table.name
        self._exactly_once = opts["sink.delivery-guarantee"] == "exactly-once"
        self._prefix: str = opts.get("sink.transaction-id-prefix") or ""
        self._run = uuid.uuid4().hex
        self._own_gid = re.compile(rf"^{re.escape(self._prefix)}-{ctx.subtask_index}-[0-9a-f]{{32}}-(-?\d+)$")
        self._conn: psycopg.Connection | None = None  # writes; holds the checkpoint's open transaction
        self._ctl: psycopg.Connection | None = None  # COMMIT/ROLLBACK PREPARED, outside that transaction
        self._pg: _PgTable | None = None
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
        opts, table = self._ctx.options, self._table
        conn = _connect(opts, table)
        try:
            pg = _describe(conn, _parts(opts["table-name"]), table)
            self._columns = [pg.column(name, table) for name in self._ctx.schema.names]
            self._keys = _key_columns(self._ctx.table, pg)
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
                self._ctl = _connect(opts, table)
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
                f"commit, which the server at '{_where(self._ctx.options)}' has disabled "
                "(max_prepared_transactions = 0); set it to a few times the number of sink subtasks and restart it"
            )

    def _ensure_stage(self, conn: psycopg.Connection, pg: _PgTable) -> sql.Identifier:
        """The staging table of exactly-once upserts; created (once, under a lock) if it is missing.

        Nothing is run against an existing one: DDL on it would wait for the
        prepared transactions of a predecessor, which are only rolled back later.
        """
        parts = _stage_parts(_parts(pg.name))
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
        have = _describe(conn, parts, self._table).columns
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
                f"table '{self._table}': writing to PostgreSQL table '{self._target_name()}' failed: {_pg_message(e)}"
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
                    target, _names(columns), values, self._on_conflict()), upserts)
            if deletes:
                cur.executemany(sql.SQL("DELETE FROM {} WHERE {}").format(target, match), deletes)

    def _on_conflict(self) -> sql.Composed:
        others = [c for c in self._columns if c not in self._keys]
        if not others:
            return sql.SQL("ON CONFLICT ({}) DO NOTHING").format(_names(self._keys))
        assignments = sql.SQL(", ").join(sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(c)) for c in others)
        return sql.SQL("ON CONFLICT ({}) DO UPDATE SET {}").format(_names(self._keys), assignments)

    @staticmethod
    def _copy(conn: psycopg.Connection, target: sql.Identifier, columns: list[str], rows: list[tuple]) -> None:
        with conn.cursor() as cur, cur.copy(sql.SQL("COPY {} ({}) FROM STDIN").format(target, _names(columns))) as copy:
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
        return self._ctx.options["table-name"]

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
                f"failed: {_pg_message(e)}"
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
                    f"table '{self._table}': COMMIT PREPARED '{gid}' failed: {_pg_message(e)}"
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
                    target, _names(columns), _names(columns), stage, _of_gid(), _names(keys), self._on_conflict()),
                    (gid, _UPSERT))
                ctl.execute(sql.SQL("DELETE FROM {} AS t USING {} AS s WHERE {} AND {}").format(
                    target, stage, _of_gid("s"), match), (gid, _DELETE))
                ctl.execute(sql.SQL("DELETE FROM {} WHERE {} = %s").format(stage, sql.Identifier(_STAGE_GID)), (gid,))
        except psycopg.Error as e:
            raise ConnectorError(
                f"table '{self._table}': applying the staged changes of '{gid}' to PostgreSQL table "
                f"'{self._target_name()}' failed: {_pg_message(e)}"
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
                f"{_pg_message(e)}"
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


# ---------------------------------------------------------------------------
# source


def _order_by(table: TableDef, pg: _PgTable) -> sql.Composable:
    keys = _key_columns(table, pg)
    return _names(keys) if keys else sql.SQL("ctid")


class PostgresSource(SourceReader):
    """Reads this subtask's share of the table once; see the module docstring."""

    bounded = True

    def __init__(self, ctx: SourceContext) -> None:
        self._ctx = ctx
        self._table = ctx.table.name
        self._schema = ctx.schema
        self._conn: psycopg.Connection | None = None
        self._cursor: psycopg.ServerCursor | None = None
        self._returned = 0  # rows handed out: the position
        self._done = False

    def open(self) -> None:
        opts, table = self._ctx.options, self._table
        conn = _connect(opts, table)
        try:
            pg = _describe(conn, _parts(opts["table-name"]), table)
            columns = [pg.column(c, table) for c in self._ctx.columns]
            order = _order_by(self._ctx.table, pg)
            n, i = self._ctx.parallelism, self._ctx.subtask_index
            if n == 1:
                query = sql.SQL("SELECT {} FROM {} ORDER BY {} OFFSET {}").format(
                    _names(columns), pg.ident, order, sql.Literal(self._returned))
            else:
                rn = sql.Identifier("_sqlstream_rn")
                numbered = sql.SQL("row_number() OVER (ORDER BY {}) AS {}").format(order, rn)
                inner = sql.SQL(", ").join([*(sql.Identifier(c) for c in columns), numbered])
                query = sql.SQL("SELECT {} FROM (SELECT {} FROM {}) AS s WHERE ({} - 1) % {} = {} ORDER BY {} OFFSET {}").format(
                    _names(columns, "s"), inner, pg.ident, rn, sql.Literal(n), sql.Literal(i), rn,
                    sql.Literal(self._returned))
            conn.autocommit = False
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            conn.read_only = True
            cursor = conn.cursor(name=f"sqlstream_scan_{i}")
            cursor.execute(query)
        except psycopg.Error as e:
            conn.close()
            raise ConnectorError(
                f"table '{table}': reading PostgreSQL table '{opts['table-name']}' failed: {_pg_message(e)}"
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
                f"table '{self._table}': reading PostgreSQL table '{self._ctx.options['table-name']}' failed: "
                f"{_pg_message(e)}"
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
                    f"'{self._ctx.options['table-name']}' near row {self._returned + 1} does not convert "
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


# ---------------------------------------------------------------------------
# lookup


class PostgresLookup:
    """``lookup(keys) -> {key: [rows]}`` against the table; keys without a match are left out."""

    def __init__(self, ctx: LookupContext) -> None:
        self._ctx = ctx
        self._table = ctx.table.name
        self._retries: int = ctx.options["lookup.max-retries"]
        self._conn: psycopg.Connection | None = None
        self._query: Callable[[int], sql.Composed] | None = None

    def _connect(self) -> psycopg.Connection:
        conn = _connect(self._ctx.options, self._table)
        try:
            pg = _describe(conn, _parts(self._ctx.options["table-name"]), self._table)
            keys = [pg.column(k, self._table) for k in self._ctx.keys]
            columns = [pg.column(c, self._table) for c in self._ctx.columns]
        except BaseException:
            conn.close()
            raise
        one = sql.SQL("({})").format(sql.SQL(", ").join(sql.Placeholder() * len(keys)))
        self._query = lambda n: sql.SQL("SELECT {} FROM {} WHERE ({}) IN ({})").format(
            _names([*keys, *columns]), pg.ident, _names(keys), sql.SQL(", ").join([one] * n))
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
                    self._conn = self._connect()
                assert self._query is not None
                return self._conn.execute(self._query(len(keys)), params).fetchall()
            except psycopg.OperationalError as e:  # the connection broke: reconnect and ask again
                self.close()
                failures += 1
                if failures > self._retries:
                    raise ConnectorError(
                        f"table '{self._table}': lookup in PostgreSQL table '{self._ctx.options['table-name']}' "
                        f"failed {failures} times: {_pg_message(e)}"
                    ) from None
            except psycopg.Error as e:
                raise ConnectorError(
                    f"table '{self._table}': lookup in PostgreSQL table '{self._ctx.options['table-name']}' "
                    f"failed: {_pg_message(e)}"
                ) from None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None


def create_lookup(ctx: LookupContext) -> LookupFunction:
    """The lookup function of a lookup join, behind the cache of 'lookup.cache.max-rows' / '.ttl'."""
    o = ctx.options
    return with_cache(PostgresLookup(ctx), o.get("lookup.cache.max-rows"), o.get("lookup.cache.ttl"))


# ---------------------------------------------------------------------------
# options


def _validate(table: TableDef, given: dict[str, str]) -> None:
    """Checks that need more than one option, or more than a type."""
    name = table.name
    url = given.get("url", "")
    conninfo = _conninfo(url)
    scheme = conninfo.split("://", 1)[0].lower() if "://" in conninfo else None
    if scheme is not None and scheme not in ("postgresql", "postgres"):
        raise ConnectorError(
            f"table '{name}': option 'url' = '{url}' is not a PostgreSQL URL; expected "
            "'postgresql://user@host:port/db', 'jdbc:postgresql://host:port/db' or a conninfo 'host=... dbname=...'"
        )
    try:
        conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError as e:
        raise ConnectorError(f"table '{name}': option 'url' is not a valid PostgreSQL URL or conninfo: {e}") from None
    table_name = given.get("table-name", "")
    if not all(part.strip() for part in table_name.split(".")) or table_name.count(".") > 1:
        raise ConnectorError(
            f"table '{name}': option 'table-name' = '{table_name}' must be 'table' or 'schema.table'"
        )
    guarantee = given.get("sink.delivery-guarantee", "at-least-once").lower()
    prefix = given.get("sink.transaction-id-prefix")
    if guarantee == "exactly-once":
        if not prefix:
            raise ConnectorError(
                f"table '{name}': 'sink.delivery-guarantee' = 'exactly-once' requires option "
                "'sink.transaction-id-prefix' (unique per job, e.g. the job name)"
            )
        if not _PREFIX.match(prefix):
            raise ConnectorError(
                f"table '{name}': option 'sink.transaction-id-prefix' = '{prefix}' must be 1 to 100 letters, "
                "digits, '_', '.' or ':'"
            )
    # the typed values were checked before this runs, so int() succeeds
    max_rows = given.get("lookup.cache.max-rows")
    if max_rows is not None and int(max_rows) < 1:
        raise ConnectorError(
            f"table '{name}': option 'lookup.cache.max-rows' = '{max_rows}' must be at least 1 (omit it: no cache)"
        )
    retries = given.get("lookup.max-retries")
    if retries is not None and int(retries) < 0:
        raise ConnectorError(f"table '{name}': option 'lookup.max-retries' = '{retries}' must not be negative")


def _options() -> tuple[Option, ...]:
    return (
        Option("url", required=True, description="postgresql://user@host:port/db, jdbc:postgresql://... or a conninfo"),
        Option("table-name", required=True, description="the PostgreSQL table: 'name' or 'schema.name'"),
        Option("username", description="user name (overrides the url's)"),
        Option("password", description="password (overrides the url's)"),
        Option(
            "sink.delivery-guarantee",
            default="at-least-once",
            choices=("at-least-once", "exactly-once"),
            description="at-least-once (commit every batch) or exactly-once (two-phase commit per checkpoint)",
        ),
        Option(
            "sink.transaction-id-prefix",
            description="exactly-once: prefix of the prepared transactions' gids (unique per job)",
        ),
        Option("lookup.cache.max-rows", "int", description="lookup: cache up to this many keys (no cache without it)"),
        Option("lookup.cache.ttl", "duration", description="lookup: a cached key expires this long after it was read"),
        Option("lookup.max-retries", "int", default=3, description="lookup: reconnect this often when the connection fails"),
    )


CONNECTOR = Connector(
    "postgres",
    options=_options(),
    create_source=PostgresSource,
    create_sink=PostgresSink,
    create_lookup=create_lookup,
    accepts_updates=True,
    validate_extra=_validate,
    description="a PostgreSQL table (exactly-once sink through two-phase commit, upserts by primary key, lookups)",
)
