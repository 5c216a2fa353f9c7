"""The filesystem connector's options, validated at ``CREATE TABLE`` and read as :class:`FileSystemOptions`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlstream.core.connectors import ConnectorOptions, option, option_group
from sqlstream.core.errors import ConnectorError
from sqlstream.core.tables import TableDef
from sqlstream.runtime.formats import (
    CHANGELOG_FORMATS,
    FORMAT_NAMES,
    all_format_options,
    create_format,
)
from sqlstream.runtime.fs import StorageError, check_path


@dataclass(frozen=True)
class FileSystemOptions(ConnectorOptions):
    """What a filesystem source or sink is configured with; sizes in bytes, intervals in milliseconds."""

    path: str = option("path", required=True, description="a file or directory: a local path or a file://, s3://, gs://, abfs:// or hdfs:// URI")
    format: str = option(
        "format",
        required=True,
        choices=FORMAT_NAMES,
        description="csv, json, parquet, avro, raw, orc, or a changelog format: debezium-json, canal-json, maxwell-json",
    )
    format_options: Mapping[str, Any] = option_group(all_format_options())
    monitor_interval_ms: int | None = option(
        "source.monitor-interval",
        "duration",
        description="rescan the directory for new files this often (the source becomes unbounded)",
    )
    rolling_file_size: int | None = option(
        "sink.rolling-policy.file-size", "memory", description="start a new part file at this size, e.g. '128MB'"
    )

    def check(self, table: str) -> None:
        try:
            check_path(self.path)
        except StorageError as e:
            raise ConnectorError(f"table '{table}': option 'path': {e}") from None
        if self.rolling_file_size is not None and self.rolling_file_size <= 0:
            raise ConnectorError(
                f"table '{table}': option 'sink.rolling-policy.file-size' = '{self.rolling_file_size}' is invalid: "
                "must be positive"
            )


def validate_table(table: TableDef, given: dict[str, str]) -> None:
    """Checks against the table: format options match the format, which supports the table's columns."""
    fmt = given.get("format", "").lower()
    for key in given:
        prefix = key.split(".", 1)[0]
        if prefix in FORMAT_NAMES and prefix != fmt:
            raise ConnectorError(
                f"table '{table.name}': option '{key}' applies to format '{prefix}', "
                f"but the table's format is '{fmt}'"
            )
    declared = {o.key: o for o in all_format_options()}
    typed = {k: declared[k].convert(v, table.name) for k, v in given.items() if k in declared}
    # Building the format checks its option values and the column types it supports.
    create_format(fmt, table.physical_schema, typed, None, table.name)


def changelog_mode(table: TableDef) -> str:
    """'all' for a changelog format (the source emits, the sink writes +I/-U/+U/-D), else 'insert-only'."""
    return "all" if table.options.get("format", "").lower() in CHANGELOG_FORMATS else "insert-only"
