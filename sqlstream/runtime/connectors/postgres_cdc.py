"""The 'postgres-cdc' source (Flink CDC's): a PostgreSQL table's changes through a logical replication slot.

Options are Flink CDC's: 'hostname', 'port', 'username', 'password', 'database-name',
'schema-name', 'table-name', 'slot.name', 'decoding.plugin.name' (only 'pgoutput', the
plugin built into PostgreSQL), 'scan.startup.mode' ('initial' or 'latest-offset') and
'changelog-mode' ('all' or 'upsert').  A PRIMARY KEY NOT ENFORCED is required, as in
Flink CDC.  The server needs ``wal_level = logical``.

Reading.  The changes are decoded from the slot by ``pg_logical_slot_peek_binary_changes``
on an ordinary connection: ``peek`` leaves them in the slot, and the slot is moved on with
``pg_replication_slot_advance`` only when a checkpoint that holds the position completes
(:meth:`PostgresCdcSource.notify_checkpoint_complete`), so a change a restore may still
need is never released.  The pgoutput messages (Relation, Begin, Insert, Update, Delete,
Commit) of a transaction are collected and emitted when its Commit arrives; the position is
the end LSN of the last commit handed on, and a restore skips every transaction that ends
at or before it, so nothing is lost or emitted twice.  A TRUNCATE of the table fails the
job (its rows cannot be retracted one by one).  Changes are read under the publication
``dbz_publication`` (Debezium's default name), created FOR ALL TABLES when it is missing
(which takes a superuser; otherwise create it beforehand).

'changelog-mode' = 'all' emits +I/-U/+U/-D from the before- and after-images, so the
table needs ``REPLICA IDENTITY FULL`` (checked when the job starts).  'upsert' emits +I,
+U (the new image) and -D (the key) and the planner puts a ChangelogNormalize keyed by the
primary key after the source, which derives the before-images, as Flink plans it; there
the PRIMARY KEY must be the PostgreSQL table's replica identity (its primary key), which
is all a delete carries, and an update that changes the key is a -D of the old key
before the +U of the new one.

'scan.startup.mode' = 'initial' creates the slot through the replication protocol with
``EXPORT_SNAPSHOT`` and reads the table under that very snapshot (``SET TRANSACTION
SNAPSHOT`` in a REPEATABLE READ transaction): the snapshot holds exactly the changes before
the slot's consistent point and the slot exactly those after, so no change is seen twice or
missed, in either changelog mode.  The snapshot is emitted as one batch, so no checkpoint
falls inside it (a checkpoint taken before it records no position and a restore from it
starts over, dropping and re-creating the slot, which nothing has acknowledged yet; so
does a job started afresh with an existing slot of that name: the slot belongs to the table).
'latest-offset' creates the slot (or takes the existing one) and emits only later changes.

Values arrive as PostgreSQL's text output (the session's TimeZone is UTC) and are cast to
the declared column types by Arrow.

``peek`` decodes the slot from its confirmed position each time, so the work of a poll grows
with the changes since the last completed checkpoint (enable checkpointing: without it the
slot never moves on), and after a poll that found nothing new the slot is polled again only
after 'debezium.poll.interval.ms' (Debezium's option, 500 ms by default).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, get_args

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
from psycopg import sql

from sqlstream.core.connectors import ConnectorOptions, option
from sqlstream.core.errors import ConnectorError, DataError
from sqlstream.core.tables import TableDef
from sqlstream.runtime.connectors.base import Connector, SourceContext, SourceReader
from sqlstream.runtime.elements import RowKind

StartupMode = Literal["initial", "latest-offset"]
ChangelogMode = Literal["all", "upsert"]
PUBLICATION = "dbz_publication"
CONNECT_TIMEOUT_S = 10
_INSERT, _UPDATE_BEFORE, _UPDATE_AFTER, _DELETE = (int(k) for k in RowKind)
_UNCHANGED = object()  # pgoutput 'u': an unchanged TOASTed value the message leaves out

_PRIMARY_KEY_REQUIRED = (
    "'postgres-cdc' tables require a PRIMARY KEY (...) NOT ENFORCED: the key of the PostgreSQL table's rows, "
    "by which updates and deletes are applied"
)


@dataclass(frozen=True)
class PostgresCdcOptions(ConnectorOptions):
    """What a postgres-cdc source is configured with (Flink CDC's option names)."""

    hostname: str = option("hostname", required=True, description="IP address or hostname of the PostgreSQL server")
    port: int = option("port", "int", default=5432, description="port of the PostgreSQL server")
    username: str = option("username", required=True, description="user to connect as (needs REPLICATION)")
    password: str | None = option("password", description="password of the user")
    database_name: str = option("database-name", required=True, description="database of the table")
    schema_name: str = option("schema-name", required=True, description="schema of the table")
    table_name: str = option("table-name", required=True, description="the table whose changes are read")
    slot_name: str = option(
        "slot.name", required=True, description="the logical replication slot (one per table and job)"
    )
    decoding_plugin_name: str = option(
        "decoding.plugin.name", default="pgoutput", description="logical decoding plugin: pgoutput"
    )
    startup_mode: StartupMode = option(
        "scan.startup.mode",
        default="initial",
        choices=get_args(StartupMode),
        description="initial: the table's snapshot, then its changes; latest-offset: only changes from now on",
    )
    poll_interval_ms: int = option(
        "debezium.poll.interval.ms",
        "int",
        default=500,
        description="after a poll of the slot found no new change, wait this long before the next (Debezium's)",
    )
    changelog_mode: ChangelogMode = option(
        "changelog-mode",
        default="all",
        choices=get_args(ChangelogMode),
        description="all: +I/-U/+U/-D (needs REPLICA IDENTITY FULL); upsert: +I/+U/-D by primary key",
    )

    def check(self, table: str) -> None:
        if self.decoding_plugin_name.lower() != "pgoutput":
            raise ConnectorError(
                f"table '{table}': option 'decoding.plugin.name' = '{self.decoding_plugin_name}' is not supported; "
                "only 'pgoutput' (built into PostgreSQL 10 and later) is"
            )
        if self.poll_interval_ms < 0:
            raise ConnectorError(
                f"table '{table}': option 'debezium.poll.interval.ms' = '{self.poll_interval_ms}' must not be negative"
            )
        if not 0 < self.port < 65536:
            raise ConnectorError(f"table '{table}': option 'port' = '{self.port}' is not a TCP port")
        slot = self.slot_name
        if not slot or not all(c.islower() or c.isdigit() or c == "_" for c in slot) or len(slot) > 63:
            raise ConnectorError(
                f"table '{table}': option 'slot.name' = '{slot}' must be 1 to 63 lower-case letters, digits or '_' "
                "(PostgreSQL's rule for replication slot names)"
            )

    @property
    def where(self) -> str:
        return f"{self.hostname}:{self.port}/{self.database_name}"

    @property
    def qualified(self) -> str:
        return f"{self.schema_name}.{self.table_name}"


def _connect(options: PostgresCdcOptions, table: str, *, replication: bool = False) -> psycopg.Connection:
    """An autocommit connection (a walsender one with ``replication``); ConnectorError naming the server."""
    params: dict[str, Any] = {
        "host": options.hostname, "port": options.port, "user": options.username,
        "dbname": options.database_name, "connect_timeout": CONNECT_TIMEOUT_S, "application_name": "sqlstream-cdc",
    }
    if options.password:
        params["password"] = options.password
    if replication:
        params["replication"] = "database"
    try:
        conn = psycopg.connect(autocommit=True, **params)
    except psycopg.Error as e:
        raise ConnectorError(
            f"table '{table}': cannot connect to PostgreSQL at '{options.where}': {str(e).strip()}"
        ) from None
    if not replication:
        conn.execute("SET TIME ZONE 'UTC'")
    return conn


def _message(e: psycopg.Error) -> str:
    return (e.diag.message_primary or str(e)).strip()


# ---------------------------------------------------------------- pgoutput decoding (protocol version 1)
@dataclass
class _Relation:
    namespace: str
    name: str
    columns: list[str]


class _Reader:
    """Big-endian fields of one pgoutput message."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> Any:
        value = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value[0]

    def string(self) -> str:
        end = self.data.index(b"\0", self.pos)
        text = self.data[self.pos:end].decode()
        self.pos = end + 1
        return text

    def tuple_data(self) -> list[Any]:
        """TupleData: text values, None for NULL, _UNCHANGED for an unchanged TOASTed value."""
        values: list[Any] = []
        for _ in range(self.take(">h")):
            kind = self.take(">c")
            if kind == b"n":
                values.append(None)
            elif kind == b"u":
                values.append(_UNCHANGED)
            else:  # b"t" text (b"b" binary is only sent when asked for)
                size = self.take(">i")
                values.append(self.data[self.pos:self.pos + size].decode())
                self.pos += size
        return values


# ---------------------------------------------------------------- the source
class PostgresCdcSource(SourceReader):
    """Snapshot (startup mode 'initial'), then the slot's committed changes of the table; see the module docstring."""

    bounded = False

    def __init__(self, ctx: SourceContext) -> None:
        self._ctx = ctx
        self._table = ctx.table.name
        self._options = PostgresCdcOptions.from_options(ctx.options, self._table)
        if ctx.parallelism > 1:
            raise ConnectorError(
                f"table '{self._table}': a postgres-cdc source reads one replication slot and runs with parallelism 1; "
                f"set 'scan.parallelism' = '1' (it is {ctx.parallelism})"
            )
        self._schema = ctx.schema
        self._conn: psycopg.Connection | None = None
        self._lsn: int | None = None  # end LSN of the last commit handed on; None: nothing read yet
        self._relations: dict[int, _Relation] = {}
        self._kinds: pa.Array | None = None
        self._pending: dict[int, int] = {}  # checkpoint id -> its position, until it completes
        self._pg_columns: list[str] = []
        self._restored = False  # a restored position not yet checked against the slot
        self._next_poll = 0.0  # clock.monotonic() before which the slot is not polled again
        self._positions: dict[int, list[int]] = {}  # relation oid -> positions of the read columns
        self._key_positions: dict[int, list[int]] = {}  # relation oid -> positions of the primary key
        self._pg_key: list[str] = []

    # -- lifecycle
    def open(self) -> None:
        opts, table = self._options, self._table
        conn = _connect(opts, table)
        self._conn = conn
        level = conn.execute("SHOW wal_level").fetchone()[0]
        if level != "logical":
            raise ConnectorError(
                f"table '{table}': PostgreSQL at '{opts.where}' has wal_level = '{level}'; reading changes through a "
                "replication slot needs wal_level = logical (set it in postgresql.conf and restart the server)"
            )
        ident = sql.Identifier(opts.schema_name, opts.table_name)
        row = conn.execute(
            "SELECT c.oid, c.relreplident FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'p')",
            (opts.schema_name, opts.table_name),
        ).fetchone()
        if row is None:
            raise ConnectorError(
                f"table '{table}': PostgreSQL table '{opts.qualified}' does not exist in database '{opts.database_name}'"
            )
        oid, identity = row
        columns = [r[0] for r in conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            (oid,),
        ).fetchall()]
        self._pg_columns = [_match(c, columns, table, opts.qualified) for c in self._ctx.columns]
        self._pg_key = [_match(k, columns, table, opts.qualified) for k in self._ctx.table.primary_key]
        self._check_identity(conn, oid, identity)
        self._ident = ident
        if conn.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (PUBLICATION,)).fetchone() is None:
            try:
                conn.execute(sql.SQL("CREATE PUBLICATION {} FOR ALL TABLES").format(sql.Identifier(PUBLICATION)))
            except psycopg.Error as e:
                raise ConnectorError(
                    f"table '{table}': creating publication '{PUBLICATION}' failed: {_message(e)}"
                ) from None

    def _check_identity(self, conn: psycopg.Connection, oid: int, identity: str) -> None:
        """'all' needs before-images (REPLICA IDENTITY FULL); 'upsert' needs the key in every delete."""
        opts, table = self._options, self._table
        if identity == "f":
            return
        if opts.changelog_mode == "all":
            raise ConnectorError(
                f"table '{table}': 'changelog-mode' = 'all' needs the before-image of every update and delete, but "
                f"PostgreSQL table '{opts.qualified}' does not have REPLICA IDENTITY FULL; run ALTER TABLE "
                f"{opts.qualified} REPLICA IDENTITY FULL, or use 'changelog-mode' = 'upsert'"
            )
        key_cols = [r[0] for r in conn.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
            "WHERE i.indrelid = %s AND (i.indisreplident OR (%s = 'd' AND i.indisprimary))",
            (oid, identity),
        ).fetchall()]
        declared = {_match(k, list(self._pg_columns) + key_cols, table, opts.qualified)
                    for k in self._ctx.table.primary_key}
        if not key_cols or declared != set(key_cols):
            raise ConnectorError(
                f"table '{table}': PRIMARY KEY ({', '.join(self._ctx.table.primary_key)}) must be the replica identity "
                f"of PostgreSQL table '{opts.qualified}' ({', '.join(key_cols) or 'none'}), the only columns a delete "
                f"carries; or set REPLICA IDENTITY FULL on it"
            )

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None

    # -- reading
    @property
    def finished(self) -> bool:
        return False

    @property
    def current_kinds(self) -> pa.Array | None:
        return self._kinds

    def read_batch(self) -> pa.RecordBatch | None:
        if self._lsn is None:
            return self._start()
        if self._restored:
            self._check_restored()
        return self._changes()

    def _check_restored(self) -> None:
        """The slot must still hold every change after the restored position: none may be lost."""
        conn = self._conn
        assert conn is not None and self._lsn is not None
        opts = self._options
        existing = conn.execute(
            "SELECT plugin, database, active FROM pg_replication_slots WHERE slot_name = %s", (opts.slot_name,)
        ).fetchone()
        if existing is None:
            raise ConnectorError(
                f"table '{self._table}': replication slot '{opts.slot_name}' of the restored checkpoint does not exist "
                "(dropped?); its changes are gone: start the job afresh"
            )
        confirmed = self._confirmed(existing)
        if confirmed > self._lsn:
            raise ConnectorError(
                f"table '{self._table}': replication slot '{opts.slot_name}' was advanced to {_lsn_text(confirmed)}, "
                f"past the restored position {_lsn_text(self._lsn)} (a newer checkpoint completed); the changes in "
                "between are gone: restore from the newest checkpoint"
            )
        self._restored = False

    def _start(self) -> pa.RecordBatch | None:
        """Create the slot; with 'initial', read the table under the slot's exported snapshot."""
        opts, table = self._options, self._table
        conn = self._conn
        assert conn is not None, "open() first"
        existing = conn.execute(
            "SELECT plugin, database, active FROM pg_replication_slots WHERE slot_name = %s", (opts.slot_name,)
        ).fetchone()
        if existing is not None and opts.startup_mode == "latest-offset":
            self._lsn = self._confirmed(existing)
            return None
        if existing is not None:  # a slot no checkpoint of this job acknowledged: start it afresh
            self._drop_slot(existing)
        if opts.startup_mode == "latest-offset":
            try:
                lsn = conn.execute(
                    "SELECT lsn FROM pg_create_logical_replication_slot(%s, 'pgoutput')", (opts.slot_name,)
                ).fetchone()[0]
            except psycopg.Error as e:
                raise ConnectorError(f"table '{table}': creating replication slot failed: {_message(e)}") from None
            self._lsn = _lsn_int(lsn)
            return None
        replication = _connect(opts, table, replication=True)
        try:
            result = replication.pgconn.exec_(
                f'CREATE_REPLICATION_SLOT "{opts.slot_name}" LOGICAL pgoutput EXPORT_SNAPSHOT'.encode()
            )
            if result.status != psycopg.pq.ExecStatus.TUPLES_OK:
                raise ConnectorError(
                    f"table '{table}': creating replication slot '{opts.slot_name}' failed: "
                    f"{result.error_message.decode(errors='replace').strip()}"
                )
            consistent, snapshot = result.get_value(0, 1).decode(), result.get_value(0, 2).decode()
            batch = self._snapshot(snapshot)
        finally:
            replication.close()
        self._lsn = _lsn_int(consistent)
        self._kinds = None
        return batch

    def _confirmed(self, existing: tuple) -> int:
        conn = self._conn
        assert conn is not None
        plugin, database, _ = existing
        if plugin != "pgoutput" or database != self._options.database_name:
            raise ConnectorError(
                f"table '{self._table}': replication slot '{self._options.slot_name}' exists for plugin '{plugin}' "
                f"in database '{database}', not pgoutput in '{self._options.database_name}'"
            )
        lsn = conn.execute(
            "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = %s", (self._options.slot_name,)
        ).fetchone()[0]
        return _lsn_int(lsn)

    def _drop_slot(self, existing: tuple) -> None:
        conn = self._conn
        assert conn is not None
        self._confirmed(existing)  # the plugin and database checks
        if existing[2]:
            raise ConnectorError(
                f"table '{self._table}': replication slot '{self._options.slot_name}' is in use by another connection"
            )
        conn.execute("SELECT pg_drop_replication_slot(%s)", (self._options.slot_name,))

    def _snapshot(self, snapshot: str) -> pa.RecordBatch:
        """The table's rows under the exported snapshot, as one batch of inserts."""
        opts = self._options
        conn = _connect(opts, self._table)
        try:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(snapshot)))
                cols = sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c)) for c in self._pg_columns)
                rows = conn.execute(sql.SQL("SELECT {} FROM {}").format(cols, self._ident)).fetchall()
        except psycopg.Error as e:
            raise ConnectorError(
                f"table '{self._table}': reading the snapshot of PostgreSQL table '{opts.qualified}' failed: "
                f"{_message(e)}"
            ) from None
        finally:
            conn.close()
        return self._to_arrow([list(r) for r in rows], "the snapshot")

    def _changes(self) -> pa.RecordBatch | None:
        """The changes of the table in the transactions committed after the position."""
        conn = self._conn
        assert conn is not None and self._lsn is not None
        opts = self._options
        now = self._ctx.clock.monotonic()
        if now < self._next_poll:
            return None
        try:
            messages = conn.execute(
                "SELECT lsn, data FROM pg_logical_slot_peek_binary_changes(%s, NULL, NULL, "
                "'proto_version', '1', 'publication_names', %s)",
                (opts.slot_name, PUBLICATION),
            ).fetchall()
        except psycopg.Error as e:
            raise ConnectorError(
                f"table '{self._table}': reading replication slot '{opts.slot_name}' failed: {_message(e)}"
            ) from None
        rows: list[list[Any]] = []
        kinds: list[int] = []
        for lsn_end, changes in self._transactions(messages):
            if lsn_end <= self._lsn:
                continue  # handed on before (the slot is only advanced when a checkpoint completes)
            for kind, values in changes:
                kinds.append(kind)
                rows.append(values)
            self._lsn = lsn_end
        if not rows:
            self._next_poll = now + opts.poll_interval_ms / 1000
            return None
        batch = self._to_arrow(rows, "a change")
        self._kinds = pa.array(kinds, pa.int8())
        return batch

    def _transactions(self, messages: list[tuple]) -> Iterator[tuple[int, list[tuple[int, list[Any]]]]]:
        """(commit end LSN, [(row kind, values of the read columns)]) per transaction, the table's changes only."""
        changes: list[tuple[int, list[Any]]] = []
        for _, data in messages:
            msg = _Reader(bytes(data))
            tag = msg.take(">c")
            if tag == b"B":
                changes = []
            elif tag == b"C":
                msg.take(">b")
                msg.take(">q")
                yield msg.take(">q"), changes
                changes = []
            elif tag == b"R":
                oid = msg.take(">I")
                namespace, name = msg.string(), msg.string()
                msg.take(">b")
                columns = []
                for _ in range(msg.take(">h")):
                    msg.take(">b")
                    columns.append(msg.string())
                    msg.take(">I")
                    msg.take(">i")
                self._relations[oid] = _Relation(namespace, name, columns)
                self._positions.pop(oid, None)
                self._key_positions.pop(oid, None)
            elif tag in (b"I", b"U", b"D"):
                oid = msg.take(">I")
                relation = self._relations[oid]
                if (relation.namespace, relation.name) != (self._options.schema_name, self._options.table_name):
                    continue
                positions = self._positions.get(oid)
                if positions is None:
                    positions = self._positions[oid] = self._locate(relation, self._pg_columns)
                    self._key_positions[oid] = self._locate(relation, self._pg_key)
                changes.extend(self._change(tag, msg, relation, positions, self._key_positions[oid]))
            elif tag == b"T":
                count = msg.take(">i")
                msg.take(">b")
                oids = [msg.take(">I") for _ in range(count)]
                names = {(self._relations[o].namespace, self._relations[o].name) for o in oids if o in self._relations}
                if (self._options.schema_name, self._options.table_name) in names:
                    raise ConnectorError(
                        f"table '{self._table}': PostgreSQL table '{self._options.qualified}' was truncated; a "
                        "TRUNCATE cannot be read as row changes, restart the job with 'scan.startup.mode' = 'initial' "
                        "and a new 'slot.name'"
                    )
            # 'Y' (type), 'O' (origin) and 'M' (message) carry nothing this source reads

    def _locate(self, relation: _Relation, names: list[str]) -> list[int]:
        return [relation.columns.index(_match(c, relation.columns, self._table, self._options.qualified))
                for c in names]

    def _change(
        self, tag: bytes, msg: _Reader, relation: _Relation, positions: list[int], key: list[int]
    ) -> list[tuple[int, list[Any]]]:
        """The rows of one Insert, Update or Delete; an upsert whose key changed also deletes the old key."""

        def pick(values: list[Any], old: list[Any] | None) -> list[Any]:
            out = []
            for p in positions:
                value = values[p]
                if value is _UNCHANGED:
                    if old is None or old[p] is _UNCHANGED:
                        raise ConnectorError(
                            f"table '{self._table}': an update of PostgreSQL table '{self._options.qualified}' left "
                            f"the TOASTed column '{relation.columns[p]}' out; set REPLICA IDENTITY FULL on the table"
                        )
                    value = old[p]
                out.append(value)
            return out

        if tag == b"I":
            msg.take(">c")
            return [(_INSERT, pick(msg.tuple_data(), None))]
        if tag == b"D":
            msg.take(">c")
            return [(_DELETE, pick(msg.tuple_data(), None))]
        part = msg.take(">c")
        old = None
        if part in (b"K", b"O"):
            old = msg.tuple_data()
            msg.take(">c")
        values = msg.tuple_data()
        new = pick(values, old)
        if self._options.changelog_mode == "upsert":
            # 'K' comes only when the key changed; 'O' (REPLICA IDENTITY FULL) always
            if old is not None and any(old[p] != values[p] for p in key):
                return [(_DELETE, pick(old, None)), (_UPDATE_AFTER, new)]
            return [(_UPDATE_AFTER, new)]
        if old is None or part != b"O":
            raise ConnectorError(
                f"table '{self._table}': an update of PostgreSQL table '{self._options.qualified}' came without its "
                "before-image; 'changelog-mode' = 'all' needs REPLICA IDENTITY FULL"
            )
        return [(_UPDATE_BEFORE, pick(old, None)), (_UPDATE_AFTER, new)]

    def _to_arrow(self, rows: list[list[Any]], what: str) -> pa.RecordBatch:
        """Text values -> the declared column types (PostgreSQL's text output, cast by Arrow)."""
        arrays = []
        columns = list(zip(*rows, strict=True)) if rows else [() for _ in self._schema]
        for field, values in zip(self._schema, columns, strict=True):
            text = pa.array(values, pa.string())
            try:
                arrays.append(_cast(text, field.type))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise DataError(
                    f"table '{self._table}': column '{field.name}' of {what} of PostgreSQL table "
                    f"'{self._options.qualified}' does not convert to {field.type}: {e}"
                ) from None
        if not self._schema:
            return pa.RecordBatch.from_struct_array(pa.array([{}] * len(rows), pa.struct([])))
        return pa.RecordBatch.from_arrays(arrays, schema=self._schema)

    # -- checkpoints
    def snapshot_position(self) -> Any:
        return self._lsn

    def restore_position(self, position: Any) -> None:
        self._lsn = None if position is None else int(position)
        self._restored = self._lsn is not None

    def checkpoint_taken(self, checkpoint_id: int) -> None:
        if checkpoint_id >= 0 and self._lsn is not None:
            self._pending[checkpoint_id] = self._lsn

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Advance the slot to the position of the newest completed checkpoint: its changes are no longer needed."""
        done = [n for n in self._pending if n <= checkpoint_id]
        if not done or self._conn is None:
            return
        lsn = self._pending[max(done)]
        for n in done:
            del self._pending[n]
        try:
            self._conn.execute(
                "SELECT pg_replication_slot_advance(%s, %s::pg_lsn)", (self._options.slot_name, _lsn_text(lsn))
            )
        except psycopg.Error as e:
            raise ConnectorError(
                f"table '{self._table}': advancing replication slot '{self._options.slot_name}' failed: {_message(e)}"
            ) from None


def _cast(text: pa.Array, target: pa.DataType) -> pa.Array:
    """PostgreSQL text output -> ``target``: booleans are 't'/'f' (pgoutput) or 'true'/'false' (``::text``),
    timestamptz ends in '+00' (a UTC session)."""
    if pa.types.is_string(target) or pa.types.is_large_string(target):
        return text.cast(target)
    if pa.types.is_boolean(target):
        return pc.or_(pc.equal(text, "t"), pc.equal(text, "true"))
    if pa.types.is_timestamp(target):
        if target.tz is not None:
            text = pc.replace_substring_regex(text, r"\+00$", "")
        return text.cast(pa.timestamp(target.unit)).cast(target)
    return text.cast(target)


def _match(name: str, columns: list[str], table: str, pg_table: str) -> str:
    """The PostgreSQL column a declared column reads: exact match, else the only case-insensitive one."""
    if name in columns:
        return name
    folded = [c for c in columns if c.lower() == name.lower()]
    if len(folded) == 1:
        return folded[0]
    raise ConnectorError(
        f"table '{table}': column '{name}' is not a column of PostgreSQL table '{pg_table}' (columns: {', '.join(columns)})"
    )


def _lsn_int(lsn: str) -> int:
    high, low = lsn.split("/")
    return (int(high, 16) << 32) | int(low, 16)


def _lsn_text(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def changelog_mode(table: TableDef) -> str:
    """'all': +I/-U/+U/-D from the before-images; 'upsert': a ChangelogNormalize completes them."""
    return "upsert" if table.options.get("changelog-mode", "all").lower() == "upsert" else "all"


def validate_table(table: TableDef, given: dict[str, str]) -> None:
    """A PRIMARY KEY of physical columns, as Flink CDC requires."""
    if not table.primary_key:
        raise ConnectorError(f"table '{table.name}': {_PRIMARY_KEY_REQUIRED}")
    physical = table.physical_schema
    missing = [k for k in table.primary_key if physical.get_field_index(k) < 0]
    if missing:
        raise ConnectorError(f"table '{table.name}': the primary key column '{missing[0]}' is not a physical column")


CONNECTOR = Connector(
    "postgres-cdc",
    options=(),
    options_type=PostgresCdcOptions,
    create_source=PostgresCdcSource,
    validate_extra=validate_table,
    changelog=changelog_mode,
    description="a PostgreSQL table's snapshot and changes through a logical replication slot (pgoutput)",
)

__all__ = ["CONNECTOR", "PostgresCdcOptions", "PostgresCdcSource"]
