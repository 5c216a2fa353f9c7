"""The Iceberg catalog and table of a sqlstream table, and how sqlstream's types map to Iceberg's."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pyarrow as pa

from sqlstream.core.errors import ConnectorError
from sqlstream.runtime.connectors.iceberg.options import IcebergOptions

if TYPE_CHECKING:  # pyiceberg is the optional 'iceberg' extra: imported where it is used
    from pyiceberg.catalog import Catalog
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table


def catalog(options: IcebergOptions, table: str) -> Catalog:
    """The catalog the options name (only 'sql' is offered: pyiceberg's SQL catalog)."""
    from pyiceberg.catalog.sql import SqlCatalog

    properties = {"uri": options.uri}
    if options.warehouse:
        warehouse = options.warehouse
        properties["warehouse"] = warehouse if "://" in warehouse else f"file://{os.path.abspath(warehouse)}"
    try:
        return SqlCatalog(options.catalog_name, **properties)
    except Exception as e:  # noqa: BLE001 - SQLAlchemy and driver errors have no common base to name
        raise ConnectorError(
            f"table '{table}': cannot open Iceberg catalog '{options.catalog_name}' at '{options.uri}': {e}"
        ) from None


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
