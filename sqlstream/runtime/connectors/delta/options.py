"""The delta connector's options (Flink's Delta connector names), validated at ``CREATE TABLE``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pyarrow as pa

from sqlstream.core.connectors import ConnectorOptions, option
from sqlstream.core.errors import ConnectorError
from sqlstream.core.tables import TableDef
from sqlstream.runtime.connectors.lakehouse import refuse_types, require


@dataclass(frozen=True)
class DeltaOptions(ConnectorOptions):
    """What a Delta source or sink is configured with."""

    table_path: str = option(
        "table-path", required=True, description="the Delta table's directory: a local path or file:// URI"
    )
    version_as_of: int | None = option(
        "versionAsOf", "int", description="source: read this version of the table instead of the latest"
    )
    timestamp_as_of: str | None = option(
        "timestampAsOf",
        description="source: read the latest version committed at or before this time, "
        "ISO-8601 such as '2024-05-01 10:00:00' (UTC unless it has an offset)",
    )

    def check(self, table: str) -> None:
        if not self.table_path.strip():
            raise ConnectorError(f"table '{table}': option 'table-path' must not be empty")
        if self.version_as_of is not None and self.version_as_of < 0:
            raise ConnectorError(
                f"table '{table}': option 'versionAsOf' = '{self.version_as_of}' must not be negative"
            )
        if self.timestamp_as_of is not None:
            if self.version_as_of is not None:
                raise ConnectorError(f"table '{table}': options 'versionAsOf' and 'timestampAsOf' exclude each other")
            self.as_of_time(table)

    def as_of_time(self, table: str) -> datetime | None:
        """'timestampAsOf' as an aware datetime (UTC when it names no offset)."""
        if self.timestamp_as_of is None:
            return None
        try:
            when = datetime.fromisoformat(self.timestamp_as_of.strip())
        except ValueError:
            raise ConnectorError(
                f"table '{table}': option 'timestampAsOf' = '{self.timestamp_as_of}' is not an ISO-8601 timestamp "
                "such as '2024-05-01 10:00:00'"
            ) from None
        return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _no_delta_type(t: pa.DataType) -> bool:
    """Delta Lake has no time of day and no interval types (delta-rs refuses them when it creates a table)."""
    return pa.types.is_time(t) or pa.types.is_duration(t) or pa.types.is_interval(t)


def validate_table(table: TableDef, given: dict[str, str]) -> None:
    """The library is installed and every column has a Delta type:
    a TIME column fails at CREATE TABLE, not when a job writes."""
    require("deltalake", table, "delta")
    refuse_types(table, _no_delta_type, "Delta Lake")
