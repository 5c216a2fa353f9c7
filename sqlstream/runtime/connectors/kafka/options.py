"""The kafka connector's options, validated at ``CREATE TABLE`` and read as :class:`KafkaOptions`."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from sqlstream.core.connectors import ConnectorOptions, Option, option, option_group
from sqlstream.core.errors import ConnectorError
from sqlstream.core.tables import TableDef
from sqlstream.runtime.connectors.kafka.layout import RecordLayout
from sqlstream.runtime.formats import (
    CHANGELOG_FORMATS,
    FORMAT_NAMES,
    GENERIC_OPTIONS,
    all_format_options,
)

MessageFormat = Literal[
    "csv", "json", "avro", "raw", "protobuf", "avro-confluent", "debezium-json", "canal-json", "maxwell-json"
]
# a Kafka message key's formats (and upsert-kafka's values): those whose messages are rows, not changes
KafkaKeyFormat = Literal["csv", "json", "avro", "raw", "protobuf", "avro-confluent"]
StartupMode = Literal["earliest-offset", "latest-offset", "group-offsets", "timestamp", "specific-offsets"]
FieldsInclude = Literal["all", "except_key"]
BoundedMode = Literal["unbounded", "latest-offset"]
DeliveryGuarantee = Literal["none", "at-least-once", "exactly-once"]
Partitioner = Literal["default", "fixed", "round-robin"]

MESSAGE_FORMATS: tuple[str, ...] = get_args(MessageFormat)
KAFKA_KEY_FORMATS: tuple[str, ...] = get_args(KafkaKeyFormat)
PROPERTIES = "properties."
# A KafkaSource setting given among the client properties, as in Flink; not passed to librdkafka.
COMMIT_ON_CHECKPOINT = "properties.commit.offsets.on.checkpoint"
_SPECIFIC_OFFSET = re.compile(r"^\s*partition\s*:\s*(\d+)\s*,\s*offset\s*:\s*(\d+)\s*$")
# Properties the connector sets itself; a user value would break its guarantees.
_RESERVED_PROPERTIES = {
    "transactional.id": "set 'sink.transactional-id-prefix' instead",
    "enable.auto.commit": "positions are kept in checkpoints and committed to 'properties.group.id' when one completes",
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


KEY = "key."
VALUE = "value."


def _prefixed(prefix: str) -> tuple[Option, ...]:
    """The formats' own options under ``prefix``, as Flink spells a key or value format's options.

    Without defaults: an option not given is left to the format (and never overrides an unprefixed one).
    """
    return tuple(
        dataclasses.replace(o, key=prefix + o.key, default=None) for o in all_format_options() if o not in GENERIC_OPTIONS
    )


KEY_FORMAT_OPTIONS = _prefixed(KEY)  # 'key.json.ignore-parse-errors', ...
VALUE_FORMAT_OPTIONS = _prefixed(VALUE)  # with 'value.format': 'value.json.fail-on-missing-field', ...


@dataclass(frozen=True)
class KafkaTopicOptions(ConnectorOptions):
    """The options the 'kafka' and 'upsert-kafka' connectors share, declared once (Flink's
    KafkaConnectorOptions, which both table factories read): the topic, how keys and values split
    the columns, bounded reading, and the sink's delivery."""

    topic: str = option("topic", required=True, description="the Kafka topic to read or write")
    bootstrap_servers: str = option(
        "properties.bootstrap.servers", required=True, description="Kafka brokers, e.g. 'localhost:9092'"
    )
    value_format_options: Mapping[str, Any] = option_group(VALUE_FORMAT_OPTIONS)
    key_format_options: Mapping[str, Any] = option_group(KEY_FORMAT_OPTIONS)
    key_fields_prefix: str = option(
        "key.fields-prefix", default="", description="prefix of the key columns' names that the key format drops"
    )
    value_fields_include: FieldsInclude = option(
        "value.fields-include",
        default="all",
        choices=get_args(FieldsInclude),
        description="ALL: the value holds every physical column; EXCEPT_KEY: all but the key fields",
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
    commit_marker_topic: str | None = option(
        "sink.commit-marker-topic",
        description="exactly-once: topic of the commit markers (default '<topic>.__sqlstream_commits')",
    )


@dataclass(frozen=True)
class KafkaOptions(KafkaTopicOptions):
    """What a Kafka source or sink is configured with ('properties.*' client settings aside)."""

    format: MessageFormat | None = option(
        "format",
        choices=MESSAGE_FORMATS,
        description="value format: csv, json, avro, raw, protobuf, or a changelog format (debezium-json, canal-json, "
        "maxwell-json); or 'value.format'",
    )
    format_options: Mapping[str, Any] = option_group(all_format_options())
    value_format: MessageFormat | None = option(
        "value.format", choices=MESSAGE_FORMATS, description="the value format, when not given as 'format'"
    )
    key_format: KafkaKeyFormat | None = option(
        "key.format", choices=KAFKA_KEY_FORMATS, description="format of the message key: csv, json, avro, raw or protobuf"
    )
    key_fields: tuple[str, ...] = option(
        "key.fields", "list", default=(), description="columns held by the message key, separated by ';'"
    )
    startup_mode: StartupMode = option(
        "scan.startup.mode",
        default="earliest-offset",
        choices=get_args(StartupMode),
        description="where a fresh source starts (default earliest-offset, Flink's is group-offsets)",
    )
    startup_timestamp_ms: int | None = option(
        "scan.startup.timestamp-millis",
        "int",
        description="'timestamp' mode: start at the first record with a timestamp at or after this (epoch ms)",
    )
    specific_offsets_text: str | None = option(
        "scan.startup.specific-offsets",
        description="start offsets for 'specific-offsets', e.g. 'partition:0,offset:42;partition:1,offset:300'",
    )
    partitioner: Partitioner = option(
        "sink.partitioner",
        default="default",
        choices=get_args(Partitioner),
        description="default: by key hash (sticky without key); fixed: one partition per subtask; round-robin",
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

    @property
    def message_format(self) -> str:
        """The value format, given as 'format' or as 'value.format' (check() has made sure of one)."""
        return self.format or self.value_format or ""

    @property
    def message_format_options(self) -> dict[str, Any]:
        """The value format's options, given unprefixed or (with 'value.format') prefixed with 'value.'."""
        prefixed = {k[len(VALUE):]: v for k, v in self.value_format_options.items() if v is not None}
        return {**self.format_options, **prefixed}

    def check(self, table: str) -> None:
        if (self.format is None) == (self.value_format is None):
            raise ConnectorError(
                f"table '{table}': connector 'kafka' requires option 'format' (or 'value.format'), exactly one of them"
            )
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
        if self.key_fields_prefix and self.value_fields_include == "all":
            raise ConnectorError(
                f"table '{table}': a key prefix is not allowed when option 'value.fields-include' is set to 'ALL'. "
                "Set it to 'EXCEPT_KEY' instead to avoid field overlaps."
            )
        unprefixed = [f for f in self.key_fields if not f.startswith(self.key_fields_prefix)]
        if unprefixed:
            raise ConnectorError(
                f"table '{table}': all fields in 'key.fields' must be prefixed with '{self.key_fields_prefix}' when "
                f"option 'key.fields-prefix' is set but field '{unprefixed[0]}' is not prefixed."
            )
        if (self.startup_mode == "timestamp") != (self.startup_timestamp_ms is not None):
            raise ConnectorError(
                f"table '{table}': 'scan.startup.mode' = 'timestamp' and option 'scan.startup.timestamp-millis' "
                "go together"
            )


def record_layout(
    options: KafkaOptions, table: TableDef, columns: list[str] | None = None, upsert: bool = False
) -> RecordLayout:
    """How the table's rows map to Kafka records (``columns``: what a source produces; None for a sink;
    ``upsert``: an upsert-kafka table's, whose tombstones are read as deletions of their key)."""
    return RecordLayout(
        table,
        options.message_format,
        options.message_format_options,
        options.key_format,
        {k[len(KEY):]: v for k, v in options.key_format_options.items() if v is not None},
        options.key_fields,
        options.key_fields_prefix,
        options.value_fields_include == "except_key",
        columns,
        upsert,
    )


def client_properties(table: TableDef) -> dict[str, str]:
    """The table's 'properties.*' options as librdkafka settings (without those Flink's KafkaSource reads itself)."""
    return {
        k[len(PROPERTIES):]: v
        for k, v in table.options.items()
        if k.startswith(PROPERTIES) and k != COMMIT_ON_CHECKPOINT
    }


def commits_on_checkpoint(table: TableDef) -> bool:
    """Flink's KafkaSource property 'commit.offsets.on.checkpoint' (default true)."""
    return table.options.get(COMMIT_ON_CHECKPOINT, "true").strip().lower() == "true"


def check_properties(table: str, given: Mapping[str, str]) -> None:
    """Refuse 'properties.*' client settings the connector manages itself."""
    for key in given:
        if key.startswith(PROPERTIES) and key[len(PROPERTIES):] in _RESERVED_PROPERTIES:
            raise ConnectorError(
                f"table '{table}': option '{key}' is managed by the kafka connector: "
                f"{_RESERVED_PROPERTIES[key[len(PROPERTIES):]]}"
            )


def check_given_options(name: str, given: Mapping[str, str]) -> None:
    """The checks of table ``name``'s options as written that 'kafka' and 'upsert-kafka' share: each
    format option belongs to the format chosen for its side, no reserved client property."""
    fmt = (given.get("format") or given.get("value.format") or "").lower()
    key_fmt = given.get("key.format", "").lower()
    for key in given:
        prefix = key.split(".", 1)[0]
        if prefix in FORMAT_NAMES and "value.format" in given:
            raise ConnectorError(
                f"table '{name}': option '{key}' goes with 'format'; with 'value.format' write '{VALUE}{key}'"
            )
        if prefix in FORMAT_NAMES and prefix != fmt:
            raise ConnectorError(
                f"table '{name}': option '{key}' applies to format '{prefix}', but the table's format is '{fmt}'"
            )
        for side, chosen in ((KEY, key_fmt), (VALUE, fmt)):
            side_prefix = key[len(side):].split(".", 1)[0] if key.startswith(side) else ""
            if side_prefix in FORMAT_NAMES and side_prefix != chosen:
                raise ConnectorError(
                    f"table '{name}': option '{key}' applies to {side[:-1]} format '{side_prefix}', but the table's "
                    f"'{side}format' is '{chosen or '(none)'}'"
                )
        if key.startswith(VALUE) and key[len(VALUE):].split(".", 1)[0] in FORMAT_NAMES and "value.format" not in given:
            raise ConnectorError(f"table '{name}': option '{key}' needs 'value.format' (with 'format', write it unprefixed)")
    check_properties(name, given)
    if given.get(COMMIT_ON_CHECKPOINT, "true").strip().lower() not in ("true", "false"):
        raise ConnectorError(f"table '{name}': option '{COMMIT_ON_CHECKPOINT}' must be 'true' or 'false'")
    for header in ("csv.header", "key.csv.header", "value.csv.header"):
        if given.get(header, "false").lower() == "true":
            raise ConnectorError(f"table '{name}': '{header}' does not apply to Kafka messages (one record each)")


def validate_table(table: TableDef, given: dict[str, str]) -> None:
    """Checks against the table and the options not typed: formats, reserved client properties, key columns."""
    name = table.name
    check_given_options(name, given)
    schema = table.physical_schema
    key_fields = [f.strip() for f in given.get("key.fields", "").split(";") if f.strip()]
    missing = [f for f in key_fields if schema.get_field_index(f) < 0]
    if missing:
        raise ConnectorError(f"table '{name}': key field '{missing[0]}' is not a physical column of {schema.names}")
    if given.get("properties.group.id") is None and given.get("scan.startup.mode", "").lower() == "group-offsets":
        raise ConnectorError(f"table '{name}': 'scan.startup.mode' = 'group-offsets' requires 'properties.group.id'")
    # Building the formats checks their option values and the column types they support.
    declared = {o.key: o for o in KafkaOptions.declared()}
    typed = {k: declared[k].convert(v, name) for k, v in given.items() if k in declared}
    record_layout(KafkaOptions.from_options(typed, name), table)


def changelog_mode(table: TableDef) -> str:
    """'all' with a changelog format (the source emits, the sink writes +I/-U/+U/-D), else 'insert-only'."""
    value_format = table.options.get("format") or table.options.get("value.format") or ""
    return "all" if value_format.lower() in CHANGELOG_FORMATS else "insert-only"
