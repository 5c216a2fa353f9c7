"""The Iceberg catalog and table of a sqlstream table, and how sqlstream's types map to Iceberg's."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import pyarrow as pa

from sqlstream.core.errors import ConnectorError
from sqlstream.runtime.connectors.iceberg.options import IcebergOptions

if TYPE_CHECKING:  # pyiceberg is the optional 'iceberg' extra: imported where it is used
    from pyiceberg.catalog import Catalog
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table

_ATTEMPTS = 3
T = TypeVar("T")


def catalog(options: IcebergOptions, table: str) -> Catalog:
    """The catalog the options name (only 'sql' is offered: pyiceberg's SQL catalog)."""
    from pyiceberg.catalog.sql import SqlCatalog

    properties = {"uri": options.uri}
    if options.warehouse:
        warehouse = options.warehouse
        properties["warehouse"] = warehouse if "://" in warehouse else f"file://{os.path.abspath(warehouse)}"
    return _retried(
        lambda: SqlCatalog(options.catalog_name, **properties),
        f"table '{table}': cannot open Iceberg catalog '{options.catalog_name}' at '{options.uri}'",
    )


def create(cat: Catalog, options: IcebergOptions, table: str, schema: Schema) -> Table:
    """The table, created (with its namespace) if it does not exist."""
    namespace, name = options.identifier(table)

    def create_if_missing() -> Table:
        cat.create_namespace_if_not_exists(namespace)
        return cat.create_table_if_not_exists((namespace, name), schema=schema)

    return _retried(create_if_missing, f"table '{table}': cannot create {describe(options, table)}")


def _retried(step: Callable[[], T], failure: str) -> T:
    """``step``, tried again when it fails: opening a SQL catalog creates its tables, and creating a
    namespace or table inserts rows, each after checking that they are missing, so sink subtasks
    doing it at once collide ('table iceberg_tables already exists', a UNIQUE constraint); the next
    attempt finds what the other one made.  The last failure is a ConnectorError."""
    for _ in range(_ATTEMPTS - 1):
        try:
            return step()
        except Exception:  # noqa: BLE001, S112 - SQLAlchemy, driver and pyiceberg errors share no base
            continue
    try:
        return step()
    except Exception as e:  # noqa: BLE001 - as above
        raise ConnectorError(f"{failure}: {e}") from None


def describe(options: IcebergOptions, table: str) -> str:
    namespace, name = options.identifier(table)
    return f"Iceberg table '{namespace}.{name}' of catalog '{options.catalog_name}'"


def load(cat: Catalog, options: IcebergOptions, table: str) -> Table:
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    try:
        return cat.load_table(options.identifier(table))
    except (NoSuchTableError, NoSuchNamespaceError):
        raise ConnectorError(f"table '{table}': {describe(options, table)} does not exist") from None


def iceberg_type(t: pa.DataType) -> pa.DataType:
    """The Arrow type pyiceberg turns into the Iceberg type of a column of type ``t``.

    Iceberg keeps timestamps and times in microseconds and has no 8- or 16-bit integers;
    every other type of sqlstream's has an Iceberg type of the same name.
    """
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", t.tz)
    if pa.types.is_time(t):
        return pa.time64("us")
    if pa.types.is_int8(t) or pa.types.is_int16(t):
        return pa.int32()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(t.value_field.with_type(iceberg_type(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(t.key_field.with_type(iceberg_type(t.key_type)), t.item_field.with_type(iceberg_type(t.item_type)))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(iceberg_type(f.type)) for f in t])
    return t


def iceberg_schema(schema: pa.Schema, primary_key: tuple[str, ...]) -> Schema:
    """The Iceberg schema of a new table with ``schema``'s columns; the PRIMARY KEY columns become its
    identifier fields (required, as Flink's Iceberg catalog makes them)."""
    from pyiceberg.catalog import Catalog
    from pyiceberg.schema import Schema, assign_fresh_schema_ids

    keys = {k.lower() for k in primary_key}
    arrow = pa.schema([
        f.with_type(iceberg_type(f.type)).with_nullable(f.nullable and f.name.lower() not in keys) for f in schema
    ])
    fresh = assign_fresh_schema_ids(Catalog._convert_schema_if_needed(arrow))
    ids = [fresh.find_field(f.name).field_id for f in schema if f.name.lower() in keys]
    return Schema(*fresh.fields, identifier_field_ids=ids)
