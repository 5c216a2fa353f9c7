"""The 'duckdb' connector: a table in a DuckDB database file, for scans and lookup joins.

Lookups are vectorized: the keys a batch needs are registered as one Arrow
table and joined with the dimension table in a single DuckDB query.  The
scan source reads the projected columns in batches, ordered by rowid so a
restored reader can skip exactly what it returned.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from sqlstream.core.connectors import Option
from sqlstream.core.errors import ConnectorError
from sqlstream.runtime.connectors.base import (
    Connector,
    LookupContext,
    LookupFunction,
    SourceContext,
    SourceReader,
)
from sqlstream.runtime.connectors.lookup_cache import with_cache


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _connect(table: str, path: str) -> duckdb.DuckDBPyConnection:
    if not Path(path).exists():
        raise ConnectorError(f"table '{table}': DuckDB database '{path}' does not exist")
    try:
        return duckdb.connect(path, read_only=True)
    except duckdb.Error as e:
        raise ConnectorError(f"table '{table}': cannot open DuckDB database '{path}': {e}") from None


class DuckDBSource(SourceReader):
    bounded = True

    def __init__(self, ctx: SourceContext) -> None:
        self.ctx = ctx
        self.offset = 0
        self.done = False
        self.con: duckdb.DuckDBPyConnection | None = None

    def open(self) -> None:
        o = self.ctx.options
        self.con = _connect(self.ctx.table.name, o["path"])
        cols = ", ".join(_quote(c) for c in self.ctx.columns)
        # rows are split among subtasks by rowid, and read in rowid order
        query = (f"SELECT {cols} FROM {_quote(o['table-name'])} "
                 f"WHERE rowid % {self.ctx.parallelism} = {self.ctx.subtask_index} ORDER BY rowid OFFSET {self.offset}")
        try:
            self.reader = self.con.sql(query).to_arrow_reader(self.ctx.batch_size)
        except duckdb.Error as e:
            raise ConnectorError(f"table '{self.ctx.table.name}': {e}") from None

    def read_batch(self) -> pa.RecordBatch | None:
        try:
            batch = self.reader.read_next_batch()
        except StopIteration:
            self.done = True
            return None
        self.offset += batch.num_rows
        return batch.cast(self.ctx.schema) if batch.schema != self.ctx.schema else batch

    @property
    def finished(self) -> bool:
        return self.done

    def snapshot_position(self) -> Any:
        return {"offset": self.offset}

    def restore_position(self, position: Any) -> None:
        self.offset = position["offset"]

    def close(self) -> None:
        if self.con is not None:
            self.con.close()


def create_lookup(ctx: LookupContext) -> LookupFunction:
    o = ctx.options
    con = _connect(ctx.table.name, o["path"])
    key_types = [ctx.table.physical_schema.field(k).type for k in ctx.keys]
    cols = ", ".join(f"d.{_quote(c)}" for c in ctx.keys + ctx.columns)
    on = " AND ".join(f"d.{_quote(k)} = q.{_quote(k)}" for k in ctx.keys)
    query = f"SELECT {cols} FROM {_quote(o['table-name'])} d JOIN probe q ON {on}"
    width = len(ctx.keys)

    def lookup(keys: list[tuple]) -> dict[tuple, list[tuple]]:
        probe = pa.table({k: pa.array([key[i] for key in keys], t) for i, (k, t) in enumerate(zip(ctx.keys, key_types, strict=True))})
        con.register("probe", probe)
        try:
            result = con.sql(query).to_arrow_table()
        finally:
            con.unregister("probe")
        out: dict[tuple, list[tuple]] = {}
        columns = [c.to_pylist() for c in result.columns]
        for row in zip(*columns, strict=True):
            out.setdefault(tuple(row[:width]), []).append(tuple(row[width:]))
        return out

    return with_cache(lookup, o.get("lookup.cache.max-rows"), o.get("lookup.cache.ttl"), ctx.clock)


CONNECTOR = Connector(
    "duckdb",
    options=(
        Option("path", required=True, description="the DuckDB database file"),
        Option("table-name", required=True, description="the table in that database"),
        Option("lookup.cache.max-rows", "int", description="cache up to this many keys of lookups"),
        Option("lookup.cache.ttl", "duration", description="how long a cached lookup stays valid"),
    ),
    create_source=DuckDBSource,
    create_lookup=create_lookup,
    description="a DuckDB table: bounded scans and lookup joins",
)
