"""The filesystem connector's options, validated at ``CREATE TABLE`` and read as :class:`FileSystemOptions`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pyarrow as pa

from sqlstream.core.connectors import ConnectorOptions, option, option_group
from sqlstream.core.errors import ConnectorError
from sqlstream.core.tables import TableDef
from sqlstream.runtime.formats import (
    CHANGELOG_FORMATS,
    FORMAT_NAMES,
    all_format_options,
    create_format,
)
from sqlstream.runtime.formats.protobuf import FILESYSTEM_REFUSAL as PROTOBUF_FILES_REFUSED
from sqlstream.runtime.fs import StorageError, check_path


@dataclass(frozen=True)
class FileSystemOptions(ConnectorOptions):
    """What a filesystem source or sink is configured with; sizes in bytes, intervals in milliseconds."""

    path: str = option("path", required=True, description="a file or directory: a local path or a file://, s3://, gs://, abfs:// or hdfs:// URI")
    format: str = option(
        "format",
        required=True,
        choices=FORMAT_NAMES,
        description="csv, json, parquet, avro, raw, orc (protobuf is refused, as in Flink), or a changelog format: debezium-json, canal-json, maxwell-json",
    )
    format_options: Mapping[str, Any] = option_group(all_format_options())
    monitor_interval_ms: int | None = option(
        "source.monitor-interval",
        "duration",
        description="rescan the directory for new files this often (the source becomes unbounded)",
    )
    rolling_file_size: int = option(
        "sink.rolling-policy.file-size", "memory", default=128 * 1024 * 1024,
        description="start a new part file at this size (Flink: 128MB)",
    )
    rollover_interval_ms: int = option(
        "sink.rolling-policy.rollover-interval",
        "duration",
        default=30 * 60_000,
        description="close a part file once it has been open this long, checked every check-interval (Flink: 30 min)",
    )
    inactivity_interval_ms: int = option(
        "sink.rolling-policy.inactivity-interval",
        "duration",
        default=30 * 60_000,
        description="close a part file that has taken no rows this long, checked every check-interval (Flink: 30 min)",
    )
    check_interval_ms: int = option(
        "sink.rolling-policy.check-interval",
        "duration",
        default=60_000,
        description="how often open part files are checked against the rollover and inactivity intervals "
        "(Flink: 1 min)",
    )
    default_partition_name: str = option(
        "partition.default-name",
        default="__DEFAULT_PARTITION__",
        description="the directory name of a NULL or empty partition value",
    )
    shuffle_by_partition: bool = option(
        "sink.shuffle-by-partition.enable", "bool", default=False,
        description="route rows by their partition columns so that one sink subtask writes each partition",
    )
    commit_trigger: str = option(
        "sink.partition-commit.trigger",
        default="process-time",
        choices=("process-time", "partition-time"),
        description="when a partition is committed: by processing time, or by the watermark passing the "
        "time extracted from its values",
    )
    commit_delay_ms: int = option(
        "sink.partition-commit.delay", "duration", default=0,
        description="a partition is committed this long after its creation (process-time) or its time (partition-time)",
    )
    commit_policy_text: str = option(
        "sink.partition-commit.policy.kind", default="",
        description="what committing a partition does, comma-separated as in Flink: 'success-file' writes a "
        "success file into it",
    )
    success_file_name: str = option(
        "sink.partition-commit.success-file.name", default="_SUCCESS",
        description="the success file's name",
    )
    watermark_time_zone: str = option(
        "sink.partition-commit.watermark-time-zone", default="UTC",
        description="the zone of the partition times the watermark (UTC epoch) is compared with",
    )
    time_extractor_kind: str = option(
        "partition.time-extractor.kind", default="default", choices=("default",),
        description="how a partition's time is read from its values",
    )
    timestamp_pattern: str | None = option(
        "partition.time-extractor.timestamp-pattern",
        description="the partition time built from the values, e.g. '$dt $hr:00:00' (default: the first value)",
    )
    timestamp_formatter: str = option(
        "partition.time-extractor.timestamp-formatter", default="yyyy-MM-dd HH:mm:ss",
        description="the Java DateTimeFormatter pattern the timestamp-pattern's text is parsed with",
    )

    @property
    def commit_policy(self) -> tuple[str, ...]:
        """The policy kinds, from Flink's comma-separated list."""
        return tuple(k.strip() for k in self.commit_policy_text.split(",") if k.strip())

    def check(self, table: str) -> None:
        try:
            check_path(self.path)
        except StorageError as e:
            raise ConnectorError(f"table '{table}': option 'path': {e}") from None
        for kind in self.commit_policy:
            if kind == "metastore":
                raise ConnectorError(
                    f"table '{table}': option 'sink.partition-commit.policy.kind' = 'metastore' needs a Hive "
                    "metastore, which sqlstream has not; use 'success-file'"
                )
            if kind == "custom":
                raise ConnectorError(
                    f"table '{table}': option 'sink.partition-commit.policy.kind' = 'custom' (a Java "
                    "PartitionCommitPolicy class) is not supported; use 'success-file'"
                )
            if kind != "success-file":
                raise ConnectorError(
                    f"table '{table}': option 'sink.partition-commit.policy.kind' = '{kind}' must be "
                    "'success-file', 'metastore' or 'custom'"
                )
        try:
            ZoneInfo(self.watermark_time_zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConnectorError(
                f"table '{table}': option 'sink.partition-commit.watermark-time-zone' = "
                f"'{self.watermark_time_zone}' is not a time zone id"
            ) from None
        try:
            java_to_strptime(self.timestamp_formatter)
        except ValueError as e:
            raise ConnectorError(
                f"table '{table}': option 'partition.time-extractor.timestamp-formatter' = "
                f"'{self.timestamp_formatter}': {e}"
            ) from None
        for key, value in (("sink.rolling-policy.file-size", self.rolling_file_size),
                           ("sink.rolling-policy.rollover-interval", self.rollover_interval_ms),
                           ("sink.rolling-policy.inactivity-interval", self.inactivity_interval_ms),
                           ("sink.rolling-policy.check-interval", self.check_interval_ms)):
            if value <= 0:
                raise ConnectorError(f"table '{table}': option '{key}' = '{value}' is invalid: must be positive")


_JAVA_FIELDS = (("yyyy", "%Y"), ("MM", "%m"), ("dd", "%d"), ("HH", "%H"), ("mm", "%M"), ("ss", "%S"))


def java_to_strptime(pattern: str) -> str:
    """A Java DateTimeFormatter pattern of year, month, day, hour, minute and second fields as
    a strptime format; other letters are refused (they would silently parse something else)."""
    out, i = [], 0
    while i < len(pattern):
        for java, py in _JAVA_FIELDS:
            if pattern.startswith(java, i):
                out.append(py)
                i += len(java)
                break
        else:
            ch = pattern[i]
            if ch.isalpha():
                raise ValueError(f"pattern letter '{ch}' is not supported (yyyy, MM, dd, HH, mm and ss are)")
            out.append("%%" if ch == "%" else ch)
            i += 1
    return "".join(out)


_PARTITION_ONLY = ("partition.", "sink.partition-commit.")


def validate_table(table: TableDef, given: dict[str, str]) -> None:
    """Checks against the table: format options match the format, which supports the table's columns;
    partition options need partition columns, and a timestamp pattern names only them."""
    if not table.partition_keys:
        extra = next((k for k in given if k.startswith(_PARTITION_ONLY)), None)
        if extra is not None:
            raise ConnectorError(f"table '{table.name}': option '{extra}' needs a partitioned table "
                                 "(PARTITIONED BY (...))")
    pattern = given.get("partition.time-extractor.timestamp-pattern")
    if pattern is not None:
        keys = {k.lower() for k in table.partition_keys}
        for ref in re.findall(r"\$(\w+)", pattern):
            if ref.lower() not in keys:
                raise ConnectorError(
                    f"table '{table.name}': option 'partition.time-extractor.timestamp-pattern' = '{pattern}' "
                    f"names '${ref}', which is not a partition column ({', '.join(table.partition_keys)})"
                )
    for key in table.partition_keys:
        col = table.column(key)
        assert col is not None
        if not _partition_type_ok(col.type):
            raise ConnectorError(
                f"table '{table.name}': partition column '{key}' has a type a directory name cannot hold "
                "here (use STRING, an integer type or BOOLEAN; Flink writes a DATE as its day number)"
            )
    fmt = given.get("format", "").lower()
    if fmt == "protobuf":  # as Flink's PbFileFormatFactory: files of protobuf messages have no standard framing
        raise ConnectorError(f"table '{table.name}': {PROTOBUF_FILES_REFUSED}")
    if table.partition_keys and fmt in CHANGELOG_FORMATS:
        raise ConnectorError(f"table '{table.name}': a partitioned table cannot use the changelog format '{fmt}' "
                             "here (its update rows would have to move between partitions); use csv, json or parquet")
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
    data = pa.schema([f for f in table.physical_schema if f.name not in table.partition_keys])
    create_format(fmt, data, typed, None, table.name)


def _partition_type_ok(t: pa.DataType) -> bool:
    """Types whose text in a directory name is the same here and in Flink (a DOUBLE or a TIMESTAMP
    is printed differently by Java; Flink 2.3 writes a DATE as its day number, 'd=19783', and
    cannot read it back, so such a partition would not be Flink's directory)."""
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t) or pa.types.is_boolean(t)


def changelog_mode(table: TableDef) -> str:
    """'all' for a changelog format (the source emits, the sink writes +I/-U/+U/-D), else 'insert-only'."""
    return "all" if table.options.get("format", "").lower() in CHANGELOG_FORMATS else "insert-only"
