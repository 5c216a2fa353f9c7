"""The kafka connector's options, validated at ``CREATE TABLE`` and read as :class:`KafkaOptions`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

import pyarrow as pa

from sqlstream.core.connectors import ConnectorOptions, option, option_group
from sqlstream.core.errors import ConnectorError
from sqlstream.core.tables import TableDef
from sqlstream.runtime.formats import (
    CHANGELOG_FORMATS,
    FORMAT_NAMES,
    TextFormat,
    all_format_options,
    create_format,
)

MessageFormat = Literal["csv", "json", "debezium-json", "canal-json", "maxwell-json"]
KeyFormat = Literal["csv", "json"]
StartupMode = Literal["earliest-offset", "latest-offset", "specific-offsets"]
BoundedMode = Literal["unbounded", "latest-offset"]
DeliveryGuarantee = Literal["none", "at-least-once", "exactly-once"]
Partitioner = Literal["default", "fixed", "round-robin"]

MESSAGE_FORMATS: tuple[str, ...] = get_args(MessageFormat)
KEY_FORMATS: tuple[str, ...] = get_args(KeyFormat)
PROPERTIES = "properties."
_SPECIFIC_OFFSET = re.compile(r"^\s*partition\s*:\s*(\d+)\s*,\s*offset\s*:\s*(\d+)\s*$")
# Properties the connector sets itself; a user value would break its guarantees.
_RESERVED_PROPERTIES = {
    "transactional.id": "set 'sink.transactional-id-prefix' instead",
    "enable.auto.commit": "positions are kept in checkpoints, never committed to Kafka",
    "isolation.level": "the source reads committed records only (read_committed)",
}


def parse_specific_offsets(text: str, table: str) -> dict[int, int]:
    """'partition:0,offset:42;partition:1,offset:300' -> {0: 42, 1: 300}."""
    out: dict[int, int] = {}
    for part in text.split(";"):
        if not part.strip():
            continue
        m = _SPECIFIC_OFFSET.match(part)
        if m is None:
            raise ConnectorError(
                f"table '{table}': option 'scan.startup.specific-offsets' = '{text}' is invalid near "
                f"'{part.strip()}'; expected e.g. 'partition:0,offset:42;partition:1,offset:300'"
            )
        out[int(m.group(1))] = int(m.group(2))
    if not out:
        raise ConnectorError(f"table '{table}': option 'scan.startup.specific-offsets' lists no partition")
    return out


@dataclass(frozen=True)
class KafkaOptions(ConnectorOptions):
    """What a Kafka source or sink is configured with ('properties.*' client settings aside)."""

    topic: str = option("topic", required=True, description="the Kafka topic to read or write")
    bootstrap_servers: str = option(
        "properties.bootstrap.servers", required=True, description="Kafka brokers, e.g. 'localhost:9092'"
    )
    format: MessageFormat = option(
        "format",
        required=True,
        choices=MESSAGE_FORMATS,
        description="message format: csv, json, or a changelog format (debezium-json, canal-json, maxwell-json)",
    )
    format_options: Mapping[str, Any] = option_group(all_format_options())
    key_format: KeyFormat | None = option(
        "key.format", choices=KEY_FORMATS, description="sink: format of the message key (csv or json)"
    )
    key_fields: tuple[str, ...] = option(
        "key.fields", "list", default=(), description="sink: columns encoded into the message key, separated by ';'"
    )
    startup_mode: StartupMode = option(
        "scan.startup.mode",
        default="earliest-offset",
        choices=get_args(StartupMode),
        description="where a fresh source starts (no group offsets: the default is earliest-offset)",
    )
    specific_offsets_text: str | None = option(
        "scan.startup.specific-offsets",
        description="start offsets for 'specific-offsets', e.g. 'partition:0,offset:42;partition:1,offset:300'",
    )
    bounded_mode: BoundedMode = option(
        "scan.bounded.mode",
        default="unbounded",
        choices=get_args(BoundedMode),
        description="latest-offset: each partition stops at its end offset when reading starts",
    )
    idle_timeout_ms: int | None = option(
        "scan.watermark.idle-timeout",
        "duration",
        description="a partition without records for this long does not hold back the watermark",
    )
    delivery_guarantee: DeliveryGuarantee = option(
        "sink.delivery-guarantee",
        default="at-least-once",
        choices=get_args(DeliveryGuarantee),
        description="none, at-least-once (flush on checkpoints) or exactly-once (transactions)",
    )
    transactional_id_prefix: str | None = option(
        "sink.transactional-id-prefix",
        description="exactly-once: prefix of the transactional ids '<prefix>-<subtask>' (unique per job)",
    )
    partitioner: Partitioner = option(
        "sink.partitioner",
        default="default",
        choices=get_args(Partitioner),
        description="default: by key hash (sticky without key); fixed: one partition per subtask; round-robin",
    )
    commit_marker_topic: str | None = option(
        "sink.commit-marker-topic",
        description="exactly-once: topic of the commit markers (default '<topic>.__sqlstream_commits')",
    )

    @property
    def specific_offsets(self) -> dict[int, int]:
        """{partition: start offset} of 'specific-offsets' (empty otherwise); check() has parsed it once."""
        text = self.specific_offsets_text
        return {} if text is None else parse_specific_offsets(text, "")

    @property
    def marker_topic(self) -> str:
        """The topic of exactly-once commit markers."""
        return self.commit_marker_topic or f"{self.topic}.__sqlstream_commits"

    def check(self, table: str) -> None:
        if self.startup_mode == "specific-offsets" and self.specific_offsets_text is None:
            raise ConnectorError(
                f"table '{table}': 'scan.startup.mode' = 'specific-offsets' requires option "
                "'scan.startup.specific-offsets'"
            )
        if self.specific_offsets_text is not None:
            if self.startup_mode != "specific-offsets":
                raise ConnectorError(
                    f"table '{table}': 'scan.startup.specific-offsets' is only used with "
                    "'scan.startup.mode' = 'specific-offsets'"
                )
            parse_specific_offsets(self.specific_offsets_text, table)
        if self.delivery_guarantee == "exactly-once" and not (self.transactional_id_prefix or "").strip():
            raise ConnectorError(
                f"table '{table}': 'sink.delivery-guarantee' = 'exactly-once' requires option "
                "'sink.transactional-id-prefix' (unique per job, e.g. the job name)"
            )
        if bool(self.key_fields) != (self.key_format is not None):
            raise ConnectorError(f"table '{table}': options 'key.format' and 'key.fields' must be given together")


def text_format(
    name: str, schema: pa.Schema, options: Mapping[str, Any], columns: list[str] | None, table: str
) -> TextFormat:
    """A format that encodes and decodes single messages (csv or json)."""
    fmt = create_format(name, schema, options, columns, table)
    if not isinstance(fmt, TextFormat):
        raise ConnectorError(f"table '{table}': format '{name}' cannot encode single Kafka messages")
    return fmt


def client_properties(table: TableDef) -> dict[str, str]:
    """The table's 'properties.*' options as librdkafka settings."""
    return {k[len(PROPERTIES):]: v for k, v in table.options.items() if k.startswith(PROPERTIES)}


def check_properties(table: str, given: Mapping[str, str]) -> None:
    """Refuse 'properties.*' client settings the connector manages itself."""
    for key in given:
        if key.startswith(PROPERTIES) and key[len(PROPERTIES):] in _RESERVED_PROPERTIES:
            raise ConnectorError(
                f"table '{table}': option '{key}' is managed by the kafka connector: "
                f"{_RESERVED_PROPERTIES[key[len(PROPERTIES):]]}"
            )


def validate_table(table: TableDef, given: dict[str, str]) -> None:
    """Checks against the table and the options not typed: formats, reserved client properties, key columns."""
    name = table.name
    fmt = given.get("format", "").lower()
    for key in given:
        prefix = key.split(".", 1)[0]
        if prefix in FORMAT_NAMES and prefix != fmt:
            raise ConnectorError(
                f"table '{name}': option '{key}' applies to format '{prefix}', but the table's format is '{fmt}'"
            )
    check_properties(name, given)
    if given.get("csv.header", "false").lower() == "true":
        raise ConnectorError(f"table '{name}': 'csv.header' does not apply to Kafka messages (one record each)")
    schema = table.physical_schema
    key_fields = [f.strip() for f in given.get("key.fields", "").split(";") if f.strip()]
    missing = [f for f in key_fields if schema.get_field_index(f) < 0]
    if missing:
        raise ConnectorError(f"table '{name}': key field '{missing[0]}' is not a column of {schema.names}")
    declared = {o.key: o for o in all_format_options()}
    typed = {k: declared[k].convert(v, name) for k, v in given.items() if k in declared}
    # Building the formats checks their option values and the column types they support.
    text_format(fmt, schema, typed, None, name)
    key_format = given.get("key.format")
    if key_format is not None:
        text_format(key_format.lower(), pa.schema([schema.field(f) for f in key_fields]), {}, None, name)


def changelog_mode(table: TableDef) -> str:
    """'all' with a changelog format (the source emits, the sink writes +I/-U/+U/-D), else 'insert-only'."""
    return "all" if table.options.get("format", "").lower() in CHANGELOG_FORMATS else "insert-only"
