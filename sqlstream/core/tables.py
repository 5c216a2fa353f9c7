"""Catalog objects: table and view definitions as plain data.

Expressions (computed columns, watermark) are kept as SQL text so that a
definition can be persisted and re-planned in a later session.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa


@dataclass(frozen=True)
class ColumnDef:
    name: str
    type: pa.DataType
    nullable: bool = True
    computed: str | None = None  # SQL text of `name AS expr`; not read from the connector


@dataclass(frozen=True)
class WatermarkDef:
    """`WATERMARK FOR column AS expression`: the rowtime column and its watermark strategy."""

    column: str
    expression: str


@dataclass(frozen=True)
class TableDef:
    name: str
    columns: tuple[ColumnDef, ...]
    options: dict[str, str] = field(default_factory=dict)
    watermark: WatermarkDef | None = None
    primary_key: tuple[str, ...] = ()
    temporary: bool = False
    # PARTITIONED BY (...): columns whose values name the table's Hive-style directories (filesystem)
    partition_keys: tuple[str, ...] = ()

    @property
    def connector(self) -> str:
        return self.options.get("connector", "")

    @property
    def physical_columns(self) -> tuple[ColumnDef, ...]:
        """Columns the connector reads or writes (computed columns are derived)."""
        return tuple(c for c in self.columns if c.computed is None)

    @property
    def physical_schema(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, c.type, c.nullable) for c in self.physical_columns])

    @property
    def schema(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, c.type, c.nullable) for c in self.columns])

    def column(self, name: str) -> ColumnDef | None:
        lowered = name.lower()
        for c in self.columns:
            if c.name.lower() == lowered:
                return c
        return None


@dataclass(frozen=True)
class ViewDef:
    name: str
    query: str  # SQL text of the SELECT
    temporary: bool = False
