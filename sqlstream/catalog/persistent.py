"""Catalogs and databases: the in-memory ``default_catalog`` and persistent ``sqlstream`` catalogs.

Flink resolves a name in the current catalog and database; temporary
objects live in the session only and shadow permanent ones of the same name.
A ``sqlstream`` catalog keeps its databases, tables, views and functions in
an embedded SQLite file (``<path>/catalog.sqlite``, by default under
``SQLSTREAM_HOME/catalogs/<name>``), so a later session that creates the
catalog again over the same path sees them.  SQLite is in the standard
library and safe for several processes sharing one file; every lookup reads
the file, so two sessions never see stale definitions.

Definitions are stored as JSON with SQL type names (``sql_type_name``) and
SQL text for computed columns, watermarks and view queries, the same form
that DESCRIBE and SHOW CREATE TABLE print.

:class:`CatalogManager` presents the current database with the interface of
:class:`catalog.catalog.Catalog` (``get``, ``create``, ``drop``, ...), which
is what the binder and planner use, and executes the catalog statements
(``CREATE CATALOG``, ``USE``, ``CREATE DATABASE``, ``SHOW CATALOGS`` ...).
"""

from __future__ import annotations

import difflib
import json
import re
import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from sqlglot import exp
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from sqlstream.catalog.catalog import Catalog, CatalogObject
from sqlstream.core.errors import CatalogError, SqlError
from sqlstream.core.home import home
from sqlstream.core.sql import dialect
from sqlstream.core.sql.script import Statement, line_col, parse_script
from sqlstream.core.tables import ColumnDef, MetadataDef, TableDef, ViewDef, WatermarkDef
from sqlstream.core.types import parse_type, sql_type_name

DEFAULT_CATALOG = "default_catalog"
DEFAULT_DATABASE = "default_database"


@dataclass(frozen=True)
class FunctionDef:
    """``CREATE FUNCTION name AS 'identifier' [LANGUAGE ...]``: a function known by where its code is."""

    name: str
    identifier: str  # e.g. 'my_udfs.normalize' for a Python function
    language: str = "PYTHON"
    temporary: bool = False


# ---------------------------------------------------------------- serialization


def _type_text(t: pa.DataType) -> str:
    return sql_type_name(t)


def _parse_type_text(text: str) -> pa.DataType:
    # DESCRIBE spells binary as BYTES, which the type parser does not read back
    return parse_type(re.sub(r"\bBYTES\b", "VARBINARY", text))


def object_to_json(obj: CatalogObject) -> str:
    if isinstance(obj, ViewDef):
        return json.dumps({"kind": "VIEW", "name": obj.name, "query": obj.query})
    return json.dumps({
        "kind": "TABLE",
        "name": obj.name,
        "columns": [
            {"name": c.name, "type": _type_text(c.type), "nullable": c.nullable, "computed": c.computed,
             "metadata": None if c.metadata is None else {"key": c.metadata.key, "virtual": c.metadata.virtual}}
            for c in obj.columns
        ],
        "options": obj.options,
        "watermark": None if obj.watermark is None else
        {"column": obj.watermark.column, "expression": obj.watermark.expression},
        "primary_key": list(obj.primary_key),
        "partition_keys": list(obj.partition_keys),
    })


def object_from_json(text: str) -> CatalogObject:
    d = json.loads(text)
    if d["kind"] == "VIEW":
        return ViewDef(d["name"], d["query"])
    columns = tuple(
        ColumnDef(c["name"], _parse_type_text(c["type"]), c["nullable"], c["computed"],
                  None if c.get("metadata") is None else MetadataDef(c["metadata"]["key"], c["metadata"]["virtual"]))
        for c in d["columns"]
    )
    wm = d["watermark"]
    watermark = None if wm is None else WatermarkDef(wm["column"], wm["expression"])
    return TableDef(d["name"], columns, dict(d["options"]), watermark, tuple(d["primary_key"]),
                    partition_keys=tuple(d.get("partition_keys", ())))


# ---------------------------------------------------------------- catalogs


class CatalogBackend(ABC):
    """One catalog: named databases, each holding tables, views and functions."""

    def __init__(self, name: str, default_database: str) -> None:
        self.name = name
        self.default_database = default_database

    @abstractmethod
    def databases(self) -> list[str]: ...

    @abstractmethod
    def create_database(self, name: str, if_not_exists: bool) -> None: ...

    @abstractmethod
    def drop_database(self, name: str, if_exists: bool, cascade: bool) -> None: ...

    @abstractmethod
    def get(self, database: str, name: str) -> CatalogObject | None: ...

    @abstractmethod
    def objects(self, database: str) -> list[CatalogObject]: ...

    @abstractmethod
    def put(self, database: str, obj: CatalogObject) -> None:
        """Stores a new object; the caller has checked that the name is free."""

    @abstractmethod
    def delete(self, database: str, name: str) -> None: ...

    @abstractmethod
    def get_function(self, database: str, name: str) -> FunctionDef | None: ...

    @abstractmethod
    def functions(self, database: str) -> list[FunctionDef]: ...

    @abstractmethod
    def put_function(self, database: str, fn: FunctionDef) -> None: ...

    @abstractmethod
    def delete_function(self, database: str, name: str) -> None: ...

    def has_database(self, name: str) -> bool:
        return name.lower() in (d.lower() for d in self.databases())

    def require_database(self, name: str) -> str:
        """The database's stored spelling; a CatalogError naming the known ones otherwise."""
        for d in self.databases():
            if d.lower() == name.lower():
                return d
        raise CatalogError(
            f"database '{name}' does not exist in catalog '{self.name}' "
            f"(databases: {', '.join(self.databases()) or 'none'})"
        )

    def describe(self) -> str:
        return self.name


class InMemoryCatalog(CatalogBackend):
    """Flink's generic in-memory catalog: gone when the session ends."""

    def __init__(self, name: str, default_database: str = DEFAULT_DATABASE) -> None:
        super().__init__(name, default_database)
        self._dbs: dict[str, tuple[str, Catalog, dict[str, FunctionDef]]] = {}
        self.create_database(default_database, False)

    def databases(self) -> list[str]:
        return sorted(spelled for spelled, _, _ in self._dbs.values())

    def create_database(self, name: str, if_not_exists: bool) -> None:
        if name.lower() in self._dbs:
            if if_not_exists:
                return
            raise CatalogError(f"database '{name}' already exists in catalog '{self.name}'")
        self._dbs[name.lower()] = (name, Catalog(), {})

    def drop_database(self, name: str, if_exists: bool, cascade: bool) -> None:
        entry = self._dbs.get(name.lower())
        if entry is None:
            if if_exists:
                return
            self.require_database(name)
        assert entry is not None
        if not cascade and (entry[1].names() or entry[2]):
            raise CatalogError(f"database '{name}' is not empty; use DROP DATABASE {name} CASCADE")
        del self._dbs[name.lower()]

    def _db(self, database: str) -> tuple[str, Catalog, dict[str, FunctionDef]]:
        self.require_database(database)
        return self._dbs[database.lower()]

    def get(self, database: str, name: str) -> CatalogObject | None:
        return self._db(database)[1].get(name)

    def objects(self, database: str) -> list[CatalogObject]:
        store = self._db(database)[1]
        return [*store.tables(), *store.views()]

    def put(self, database: str, obj: CatalogObject) -> None:
        self._db(database)[1].create(obj)

    def delete(self, database: str, name: str) -> None:
        store = self._db(database)[1]
        obj = store.require(name)
        store.drop(name, type(obj))

    def get_function(self, database: str, name: str) -> FunctionDef | None:
        return self._db(database)[2].get(name.lower())

    def functions(self, database: str) -> list[FunctionDef]:
        return sorted(self._db(database)[2].values(), key=lambda f: f.name)

    def put_function(self, database: str, fn: FunctionDef) -> None:
        self._db(database)[2][fn.name.lower()] = fn

    def delete_function(self, database: str, name: str) -> None:
        self._db(database)[2].pop(name.lower(), None)


class SqliteCatalog(CatalogBackend):
    """A catalog persisted in ``<path>/catalog.sqlite``."""

    SCHEMA = """
        CREATE TABLE IF NOT EXISTS databases (name TEXT NOT NULL PRIMARY KEY COLLATE NOCASE);
        CREATE TABLE IF NOT EXISTS relations (
            database TEXT NOT NULL COLLATE NOCASE, name TEXT NOT NULL COLLATE NOCASE,
            definition TEXT NOT NULL, PRIMARY KEY (database, name));
        CREATE TABLE IF NOT EXISTS functions (
            database TEXT NOT NULL COLLATE NOCASE, name TEXT NOT NULL COLLATE NOCASE,
            identifier TEXT NOT NULL, language TEXT NOT NULL, PRIMARY KEY (database, name));
    """

    def __init__(self, name: str, path: Path, default_database: str = DEFAULT_DATABASE) -> None:
        super().__init__(name, default_database)
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.file = path / "catalog.sqlite"
        with self._connect() as con:
            con.executescript(self.SCHEMA)
            con.execute("INSERT OR IGNORE INTO databases (name) VALUES (?)", (default_database,))

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A connection per operation: sessions in other threads and processes share the file."""
        try:
            with closing(sqlite3.connect(self.file, timeout=30)) as con, con:
                yield con
        except sqlite3.DatabaseError as e:
            raise CatalogError(f"catalog '{self.name}' at {self.file}: {e}") from None

    def describe(self) -> str:
        return f"{self.name} ({self.file})"

    def databases(self) -> list[str]:
        with self._connect() as con:
            return sorted(r[0] for r in con.execute("SELECT name FROM databases"))

    def create_database(self, name: str, if_not_exists: bool) -> None:
        with self._connect() as con:
            cur = con.execute("INSERT OR IGNORE INTO databases (name) VALUES (?)", (name,))
        if cur.rowcount == 0 and not if_not_exists:
            raise CatalogError(f"database '{name}' already exists in catalog '{self.name}'")

    def drop_database(self, name: str, if_exists: bool, cascade: bool) -> None:
        if not self.has_database(name):
            if if_exists:
                return
            self.require_database(name)
        with self._connect() as con:
            used = con.execute(
                "SELECT (SELECT COUNT(*) FROM relations WHERE database = ?) + "
                "(SELECT COUNT(*) FROM functions WHERE database = ?)", (name, name)
            ).fetchone()[0]
            if used and not cascade:
                raise CatalogError(f"database '{name}' is not empty; use DROP DATABASE {name} CASCADE")
            con.execute("DELETE FROM relations WHERE database = ?", (name,))
            con.execute("DELETE FROM functions WHERE database = ?", (name,))
            con.execute("DELETE FROM databases WHERE name = ?", (name,))

    def get(self, database: str, name: str) -> CatalogObject | None:
        with self._connect() as con:
            row = con.execute(
                "SELECT definition FROM relations WHERE database = ? AND name = ?", (database, name)
            ).fetchone()
        return None if row is None else object_from_json(row[0])

    def objects(self, database: str) -> list[CatalogObject]:
        self.require_database(database)
        with self._connect() as con:
            rows = con.execute("SELECT definition FROM relations WHERE database = ? ORDER BY name", (database,))
            return [object_from_json(r[0]) for r in rows]

    def put(self, database: str, obj: CatalogObject) -> None:
        database = self.require_database(database)
        try:
            with self._connect() as con:
                con.execute("INSERT INTO relations (database, name, definition) VALUES (?, ?, ?)",
                            (database, obj.name, object_to_json(obj)))
        except sqlite3.IntegrityError:
            raise CatalogError(f"'{obj.name}' already exists in {self.name}.{database}") from None

    def delete(self, database: str, name: str) -> None:
        with self._connect() as con:
            con.execute("DELETE FROM relations WHERE database = ? AND name = ?", (database, name))

    def get_function(self, database: str, name: str) -> FunctionDef | None:
        with self._connect() as con:
            row = con.execute("SELECT name, identifier, language FROM functions WHERE database = ? AND name = ?",
                              (database, name)).fetchone()
        return None if row is None else FunctionDef(*row)

    def functions(self, database: str) -> list[FunctionDef]:
        with self._connect() as con:
            rows = con.execute("SELECT name, identifier, language FROM functions WHERE database = ? ORDER BY name",
                               (database,))
            return [FunctionDef(*r) for r in rows]

    def put_function(self, database: str, fn: FunctionDef) -> None:
        database = self.require_database(database)
        with self._connect() as con:
            con.execute("INSERT OR REPLACE INTO functions (database, name, identifier, language) VALUES (?, ?, ?, ?)",
                        (database, fn.name, fn.identifier, fn.language))

    def delete_function(self, database: str, name: str) -> None:
        with self._connect() as con:
            con.execute("DELETE FROM functions WHERE database = ? AND name = ?", (database, name))


def default_catalog_path(name: str) -> Path:
    return home() / "catalogs" / name


def create_catalog(name: str, options: dict[str, str]) -> CatalogBackend:
    """A catalog from ``CREATE CATALOG name WITH (...)`` options."""
    kind = options.get("type", "").lower()
    database = options.get("default-database", DEFAULT_DATABASE)
    known = {"type", "path", "default-database"}
    unknown = sorted(set(options) - known)
    if unknown:
        close = difflib.get_close_matches(unknown[0], sorted(known), n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise CatalogError(f"catalog '{name}': unknown option '{unknown[0]}'{hint} (options: {', '.join(sorted(known))})")
    if kind == "sqlstream":
        path = Path(options["path"]).expanduser() if options.get("path") else default_catalog_path(name)
        return SqliteCatalog(name, path, database)
    if kind == "generic_in_memory":
        if "path" in options:
            raise CatalogError(f"catalog '{name}': a 'generic_in_memory' catalog has no 'path'")
        return InMemoryCatalog(name, database)
    raise CatalogError(
        f"catalog '{name}': 'type' must be 'sqlstream' (persistent) or 'generic_in_memory', got '{kind or 'nothing'}'"
    )


# ---------------------------------------------------------------- the session's view


class CatalogManager:
    """The session's catalogs, its current catalog and database, and its temporary objects.

    It offers :class:`~catalog.catalog.Catalog`'s interface over the current
    database, so the binder and planner resolve names the way Flink does
    without knowing about catalogs.
    """

    def __init__(self) -> None:
        self.catalogs: dict[str, CatalogBackend] = {DEFAULT_CATALOG: InMemoryCatalog(DEFAULT_CATALOG)}
        self.current_catalog = DEFAULT_CATALOG
        self.current_database = DEFAULT_DATABASE
        # temporary objects per (catalog, database), in memory only
        self._temporary: dict[tuple[str, str], Catalog] = {}
        self._temporary_functions: dict[tuple[str, str], dict[str, FunctionDef]] = {}

    # ------------------------------------------------------------ namespaces
    @property
    def current(self) -> CatalogBackend:
        return self.catalogs[self.current_catalog]

    def _key(self) -> tuple[str, str]:
        return (self.current_catalog.lower(), self.current_database.lower())

    def _temp(self) -> Catalog:
        return self._temporary.setdefault(self._key(), Catalog())

    def catalog_named(self, name: str) -> CatalogBackend:
        for key, cat in self.catalogs.items():
            if key.lower() == name.lower():
                return cat
        raise CatalogError(f"catalog '{name}' does not exist (catalogs: {', '.join(sorted(self.catalogs))})")

    def register_catalog(self, catalog: CatalogBackend, if_not_exists: bool = False) -> None:
        if any(k.lower() == catalog.name.lower() for k in self.catalogs):
            if if_not_exists:
                return
            raise CatalogError(f"catalog '{catalog.name}' already exists")
        self.catalogs[catalog.name] = catalog

    def drop_catalog(self, name: str, if_exists: bool = False) -> None:
        if not any(k.lower() == name.lower() for k in self.catalogs):
            if if_exists:
                return
            self.catalog_named(name)
        if name.lower() == self.current_catalog.lower():
            raise CatalogError(f"cannot drop catalog '{name}': it is the current catalog; USE CATALOG another first")
        key = next(k for k in self.catalogs if k.lower() == name.lower())
        del self.catalogs[key]

    def use_catalog(self, name: str) -> None:
        cat = self.catalog_named(name)
        self.current_catalog = cat.name
        self.current_database = cat.default_database

    def use_database(self, name: str, catalog: str | None = None) -> None:
        cat = self.catalog_named(catalog) if catalog else self.current
        database = cat.require_database(name)
        self.current_catalog = cat.name
        self.current_database = database

    # ------------------------------------------------------------ the Catalog interface
    def create(self, obj: CatalogObject, if_not_exists: bool = False) -> None:
        """Temporary objects stay in this session; permanent ones go to the current catalog."""
        if obj.temporary:
            self._temp().create(obj, if_not_exists)
            return
        if self.current.get(self.current_database, obj.name) is not None:
            if if_not_exists:
                return
            kind = "table" if isinstance(obj, TableDef) else "view"
            raise CatalogError(f"{kind} '{obj.name}' already exists in {self.current_catalog}.{self.current_database}")
        self.current.put(self.current_database, obj)

    def drop(self, name: str, kind: type, if_exists: bool = False) -> None:
        """Drops the temporary object of that name if there is one (it shadows), else the permanent one."""
        temp = self._temp()
        if isinstance(temp.get(name), kind):
            temp.drop(name, kind)
            return
        obj = self.current.get(self.current_database, name)
        if not isinstance(obj, kind):
            if if_exists:
                return
            what = "table" if kind is TableDef else "view"
            raise CatalogError(f"{what} '{name}' does not exist{self._hint(name)}")
        self.current.delete(self.current_database, name)

    def get(self, name: str) -> CatalogObject | None:
        temp = self._temp().get(name)
        if temp is not None:
            return temp
        return self.current.get(self.current_database, name)

    def require(self, name: str) -> CatalogObject:
        obj = self.get(name)
        if obj is None:
            raise CatalogError(f"table or view '{name}' does not exist{self._hint(name)}")
        return obj

    def _objects(self) -> list[CatalogObject]:
        temp = self._temp()
        shadowed = {o.name.lower() for o in [*temp.tables(), *temp.views()]}
        permanent = [o for o in self.current.objects(self.current_database) if o.name.lower() not in shadowed]
        return sorted([*temp.tables(), *temp.views(), *permanent], key=lambda o: o.name)

    def _hint(self, name: str) -> str:
        names = {o.name.lower(): o.name for o in self._objects()}
        close = difflib.get_close_matches(name.lower(), list(names), n=1)
        return f"; did you mean '{names[close[0]]}'?" if close else ""

    def tables(self) -> list[TableDef]:
        return [o for o in self._objects() if isinstance(o, TableDef)]

    def views(self) -> list[ViewDef]:
        return [o for o in self._objects() if isinstance(o, ViewDef)]

    def names(self) -> list[str]:
        return [o.name for o in self._objects()]

    # ------------------------------------------------------------ functions
    def create_function(self, fn: FunctionDef, if_not_exists: bool = False) -> None:
        if self.get_function(fn.name) is not None and if_not_exists:
            return
        if fn.temporary:
            self._temporary_functions.setdefault(self._key(), {})[fn.name.lower()] = fn
        else:
            self.current.put_function(self.current_database, fn)

    def drop_function(self, name: str, if_exists: bool = False) -> None:
        temps = self._temporary_functions.get(self._key(), {})
        if name.lower() in temps:
            del temps[name.lower()]
        elif self.current.get_function(self.current_database, name) is not None:
            self.current.delete_function(self.current_database, name)
        elif not if_exists:
            raise CatalogError(f"function '{name}' does not exist in {self.current_catalog}.{self.current_database}")

    def get_function(self, name: str) -> FunctionDef | None:
        temp = self._temporary_functions.get(self._key(), {}).get(name.lower())
        return temp or self.current.get_function(self.current_database, name)

    def functions(self) -> list[FunctionDef]:
        temps = self._temporary_functions.get(self._key(), {})
        permanent = [f for f in self.current.functions(self.current_database) if f.name.lower() not in temps]
        return sorted([*temps.values(), *permanent], key=lambda f: f.name)

    # ------------------------------------------------------------ statements
    def execute(self, node: exp.Expression) -> pa.Table | str | None:
        """Runs a catalog statement: rows to show, a message, or None if ``node`` is not one."""
        ok = "[INFO] Execute statement succeeded."
        if isinstance(node, CatalogStatement):
            if node.action == "CREATE":
                self.register_catalog(create_catalog(node.name, node.options), node.exists)
            else:
                self.drop_catalog(node.name, node.exists)
            return ok
        if isinstance(node, exp.Use):
            kind = node.args.get("kind")
            target = node.this
            if kind is not None and kind.name.upper() == "CATALOG":
                self.use_catalog(target.name)
            else:
                self.use_database(target.name, target.args.get("db") and target.args["db"].name)
            return ok
        if isinstance(node, exp.Create | exp.Drop) and (node.args.get("kind") or "").upper() == "DATABASE":
            targets = [node.this] if isinstance(node, exp.Create) else (node.args.get("tables") or [node.this])
            for target in targets:
                db = target.args.get("db")
                cat = self.catalog_named(db.name) if db is not None else self.current
                exists = bool(node.args.get("exists"))
                if isinstance(node, exp.Create):
                    cat.create_database(target.name, exists)
                    continue
                if cat is self.current and target.name.lower() == self.current_database.lower():
                    raise CatalogError(f"cannot drop database '{target.name}': it is the current database")
                cat.drop_database(target.name, exists, bool(node.args.get("cascade")))
            return ok
        if isinstance(node, exp.Show):
            what = node.name.upper()
            if what == "CATALOGS":
                return pa.table({"catalog name": sorted(self.catalogs)})
            if what == "DATABASES":
                return pa.table({"database name": self.current.databases()})
            if what == "CURRENT CATALOG":
                return pa.table({"current catalog name": [self.current_catalog]})
            if what == "CURRENT DATABASE":
                return pa.table({"current database name": [self.current_database]})
        return None


# ---------------------------------------------------------------- CREATE / DROP CATALOG


class CatalogStatement(exp.Expression):
    """``CREATE CATALOG [IF NOT EXISTS] c WITH (...)`` or ``DROP CATALOG [IF EXISTS] c``.

    The Flink dialect does not parse these yet, so they are recognised from
    their tokens before the rest of a script is parsed.
    """

    arg_types = {"action": True, "name": True, "options": False, "exists": False}

    @property
    def action(self) -> str:
        return self.args["action"]

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.args["name"]

    @property
    def options(self) -> dict[str, str]:
        return self.args.get("options") or {}

    @property
    def exists(self) -> bool:
        return bool(self.args.get("exists"))


def parse_statements(sql: str) -> list[Statement]:
    """``parse_script`` plus CREATE/DROP CATALOG, every statement located in the whole script.

    Catalog statements are blanked out of the text (newlines kept, so line
    and column numbers do not move) before the rest is parsed as usual.
    """
    try:
        tokens = dialect.Flink().tokenize(sql)
    except TokenError:
        return parse_script(sql)  # which reports the tokenizer's error in its own words
    catalog_stmts: list[Statement] = []
    masked = list(sql)
    for chunk in dialect.split_statements(tokens):
        words = [t.text.upper() for t in chunk[:2]]
        if len(words) == 2 and words[0] in ("CREATE", "DROP") and words[1] == "CATALOG":
            start, end = chunk[0].start, chunk[-1].end
            catalog_stmts.append(_catalog_statement(chunk, sql))
            for i in range(start, end + 1):
                if masked[i] != "\n":
                    masked[i] = " "
    if not catalog_stmts:
        return parse_script(sql)
    rest = parse_script("".join(masked))
    return sorted([*catalog_stmts, *rest], key=lambda s: (s.line, s.col))


def _catalog_statement(chunk: list[Token], sql: str) -> Statement:
    line, col = line_col(sql, chunk[0].start)
    text = sql[chunk[0].start : chunk[-1].end + 1]

    def fail(message: str, token: Token) -> SqlError:
        at_line, at_col = line_col(sql, token.start)
        return SqlError(message, at_line, at_col, token.text, sql)

    action = chunk[0].text.upper()
    pos = 2
    exists = False
    guard = ("IF", "NOT", "EXISTS") if action == "CREATE" else ("IF", "EXISTS")
    if [t.text.upper() for t in chunk[pos : pos + len(guard)]] == list(guard):
        exists, pos = True, pos + len(guard)
    if pos >= len(chunk):
        raise fail("expected a catalog name", chunk[-1])
    name_token = chunk[pos]
    if name_token.token_type not in (TokenType.VAR, TokenType.IDENTIFIER) and not name_token.text.isidentifier():
        raise fail(f"expected a catalog name but found '{name_token.text}'", name_token)
    pos += 1
    options: dict[str, str] = {}
    if action == "CREATE":
        if pos >= len(chunk) or chunk[pos].token_type != TokenType.WITH:
            raise fail("expected WITH ('type' = '...') after the catalog name", chunk[min(pos, len(chunk) - 1)])
        options, pos = _options(chunk, pos + 1, fail)
    if pos < len(chunk):
        raise fail(f"unexpected '{chunk[pos].text}'", chunk[pos])
    node = CatalogStatement(action=action, name=name_token.text, options=options, exists=exists)
    return Statement(node, text, line, col)


def _options(chunk: list[Token], pos: int, fail: Any) -> tuple[dict[str, str], int]:
    """Reads ``( 'k' = 'v' [, ...] )`` starting at ``chunk[pos]``."""
    if pos >= len(chunk) or chunk[pos].token_type != TokenType.L_PAREN:
        raise fail("expected '(' after WITH", chunk[min(pos, len(chunk) - 1)])
    pos += 1
    options: dict[str, str] = {}
    while True:
        part = chunk[pos : pos + 3]
        if (len(part) < 3 or part[0].token_type != TokenType.STRING or part[1].token_type != TokenType.EQ
                or part[2].token_type != TokenType.STRING):
            raise fail("expected 'key' = 'value' in the catalog options", chunk[min(pos, len(chunk) - 1)])
        options[part[0].text] = part[2].text
        pos += 3
        if pos < len(chunk) and chunk[pos].token_type == TokenType.COMMA:
            pos += 1
            continue
        if pos < len(chunk) and chunk[pos].token_type == TokenType.R_PAREN:
            return options, pos + 1
        raise fail("expected ',' or ')' in the catalog options", chunk[min(pos, len(chunk) - 1)])
