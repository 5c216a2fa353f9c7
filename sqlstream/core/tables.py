"""Catalog objects: table and view definitions as plain data.

Expressions (computed columns, watermark) are kept as SQL text so that a
definition can be persisted and re-planned in a later session.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa


@dataclass(frozen=True)
class MetadataDef:
    """``METADATA [FROM 'key'] [VIRTUAL]`` of a metadata column (Flink's MetadataColumn)."""

    key: str | None = None  # the FROM key as written; None: the column name is the key
    virtual: bool = False  # read only: not part of the rows INSERT INTO writes

    def sql(self) -> str:
        """The clause as Flink's DESCRIBE and SHOW CREATE TABLE print it."""
        key = "" if self.key is None else f" FROM '{self.key}'"
        return f"METADATA{key}{' VIRTUAL' if self.virtual else ''}"


@dataclass(frozen=True)
class ColumnDef:
    name: str
    type: pa.DataType
    nullable: bool = True
    computed: str | None = None  # SQL text of `name AS expr`; not read from the connector
    metadata: MetadataDef | None = None  # a metadata column: read (and written) by the connector, not by its format

    @property
    def metadata_key(self) -> str | None:
        """The connector metadata this column holds (None for a physical or computed column)."""
        if self.metadata is None:
            return None
        return self.name if self.metadata.key is None else self.metadata.key


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
        """Columns the connector's format reads or writes (not computed, not metadata)."""
        return tuple(c for c in self.columns if c.computed is None and c.metadata is None)

    @property
    def physical_schema(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, c.type, c.nullable) for c in self.physical_columns])

    @property
    def metadata_columns(self) -> tuple[ColumnDef, ...]:
        return tuple(c for c in self.columns if c.metadata is not None)

    @property
    def source_columns(self) -> tuple[ColumnDef, ...]:
        """Columns a scan reads from the connector: physical and metadata ones, in declaration order."""
        return tuple(c for c in self.columns if c.computed is None)

    @property
    def source_schema(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, c.type, c.nullable) for c in self.source_columns])

    @property
    def persisted_columns(self) -> tuple[ColumnDef, ...]:
        """Columns INSERT INTO writes (Flink's persisted columns): physical and non-VIRTUAL metadata ones."""
        return tuple(
            c for c in self.columns if c.computed is None and (c.metadata is None or not c.metadata.virtual)
        )

    @property
    def persisted_schema(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, c.type, c.nullable) for c in self.persisted_columns])

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
