"""The iceberg connector's options (Flink's Iceberg connector names), validated at ``CREATE TABLE``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import pyarrow as pa

from sqlstream.core.connectors import ConnectorOptions, option
from sqlstream.core.errors import ConnectorError
from sqlstream.core.tables import TableDef
from sqlstream.runtime.connectors.lakehouse import refuse_types, require

CatalogType = Literal["sql"]


@dataclass(frozen=True)
class IcebergOptions(ConnectorOptions):
    """What an Iceberg source or sink is configured with: the catalog, and the table in it."""

    catalog_name: str = option("catalog-name", required=True, description="the catalog's name")
    catalog_type: CatalogType = option(
        "catalog-type",
        required=True,
        choices=get_args(CatalogType),
        description="sql: pyiceberg's SQL catalog (e.g. on SQLite)",
    )
    uri: str = option(
        "uri", required=True, description="the catalog database, a SQLAlchemy URL such as 'sqlite:////path/catalog.db'"
    )
    warehouse: str | None = option(
        "warehouse", description="where new tables' files go: a local path or file:// URI"
    )
    catalog_database: str = option(
        "catalog-database",
        default="default_database",
        description="the namespace (database) of the table in the catalog (Flink's default: its current database)",
    )
    catalog_table: str | None = option(
        "catalog-table", description="the table's name in the catalog (default: the table's own name)"
    )
    snapshot_id: int | None = option(
        "snapshot-id", "int", description="source: read this snapshot instead of the current one"
    )
    as_of_timestamp: int | None = option(
        "as-of-timestamp", "int",
        description="source: read the snapshot that was current at this time, in milliseconds since the epoch",
    )
    upsert_enabled: bool = option(
        "write.upsert.enabled", "bool", default=False,
        description="sink: every row replaces the row of its PRIMARY KEY (also inserts; Flink's upsert mode)",
    )

    def check(self, table: str) -> None:
        for key, value in (("catalog-name", self.catalog_name), ("uri", self.uri),
                           ("catalog-database", self.catalog_database)):
            if not value.strip():
                raise ConnectorError(f"table '{table}': option '{key}' must not be empty")
        if "://" not in self.uri:
            raise ConnectorError(
                f"table '{table}': option 'uri' = '{self.uri}' is not a SQLAlchemy URL; "
                "expected e.g. 'sqlite:////path/catalog.db'"
            )

        if self.snapshot_id is not None and self.as_of_timestamp is not None:
            raise ConnectorError(f"table '{table}': options 'snapshot-id' and 'as-of-timestamp' exclude each other")

    def identifier(self, table: str) -> tuple[str, str]:
        """(namespace, name) of the table in the catalog."""
        return self.catalog_database, self.catalog_table or table


def _no_iceberg_type(t: pa.DataType) -> bool:
    """Iceberg has no interval types."""
    return pa.types.is_duration(t) or pa.types.is_interval(t)


def validate_table(table: TableDef, given: dict[str, str]) -> None:
    """The library is installed and every column has an Iceberg type:
    an INTERVAL column fails at CREATE TABLE, not when a job writes."""
    require("pyiceberg", table, "iceberg")
    if given.get("write.upsert.enabled", "false").strip().lower() == "true" and not table.primary_key:
        raise ConnectorError(f"table '{table.name}': Equality field columns shouldn't be empty when configuring to use "
                             "UPSERT data stream ('write.upsert.enabled' needs a PRIMARY KEY (...) NOT ENFORCED).")
    refuse_types(table, _no_iceberg_type, "Iceberg")
