"""Connector options as typed dataclasses: one declaration for the CREATE TABLE check and the typed object.

Each connector's frozen options dataclass (KafkaOptions, PostgresOptions, FileSystemOptions)
is built from the validated WITH options; its fields are the connector's option schema, and
its cross-option rules fail at CREATE TABLE, naming the option.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from sqlstream.core.connectors import ConnectorOptions, Option, option
from sqlstream.core.errors import ConnectorError
from sqlstream.core.tables import ColumnDef, TableDef
from sqlstream.core.types import parse_type
from sqlstream.frontend.session import Session
from sqlstream.runtime.connectors.filesystem import FileSystemOptions
from sqlstream.runtime.connectors.kafka import KafkaOptions
from sqlstream.runtime.connectors.postgres import PostgresOptions
from sqlstream.runtime.connectors.registry import get_connector

COLUMNS = (ColumnDef("id", parse_type("INT")), ColumnDef("name", parse_type("STRING")))


def typed(name: str, options: dict[str, str], kind: type[ConnectorOptions]) -> ConnectorOptions:
    """The typed options of a table of connector ``name``, as its source or sink builds them."""
    table = TableDef("t", COLUMNS, {"connector": name, **options})
    return kind.from_options(get_connector(name).validate(table), table.name)


@pytest.mark.parametrize(
    ("name", "kind"),
    [("kafka", KafkaOptions), ("postgres", PostgresOptions), ("jdbc", PostgresOptions),
     ("filesystem", FileSystemOptions)],
)
def test_the_dataclass_fields_are_the_connector_option_schema(name: str, kind: type[ConnectorOptions]) -> None:
    spec = get_connector(name)
    assert spec.options_type is kind
    declared = [o.key for o in kind.declared()]
    assert declared == [o.key for o in spec.options]  # nothing declared twice, nothing besides
    assert len(set(declared)) == len(declared)


def test_kafka_options_parse_to_python_values() -> None:
    opts = typed("kafka", {
        "topic": "orders", "properties.bootstrap.servers": "b:9092", "format": "JSON",
        "scan.startup.mode": "specific-offsets", "scan.startup.specific-offsets": "partition:0,offset:42;partition:3,offset:7",
        "scan.watermark.idle-timeout": "5 s", "key.format": "csv", "key.fields": "id; name;",
        "sink.delivery-guarantee": "exactly-once", "sink.transactional-id-prefix": "job",
        "json.ignore-parse-errors": "true",
    }, KafkaOptions)
    assert isinstance(opts, KafkaOptions)
    assert opts.topic == "orders" and opts.bootstrap_servers == "b:9092"
    assert opts.format == "json"  # choices are case-insensitive, kept lower-case
    assert opts.startup_mode == "specific-offsets" and opts.specific_offsets == {0: 42, 3: 7}
    assert opts.idle_timeout_ms == 5000
    assert opts.key_format == "csv" and opts.key_fields == ("id", "name")
    assert opts.delivery_guarantee == "exactly-once" and opts.transactional_id_prefix == "job"
    assert opts.format_options["json.ignore-parse-errors"] is True
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.topic = "other"  # type: ignore[misc]


def test_kafka_defaults() -> None:
    opts = typed("kafka", {"topic": "orders", "properties.bootstrap.servers": "b:9092", "format": "csv"}, KafkaOptions)
    assert isinstance(opts, KafkaOptions)
    assert (opts.startup_mode, opts.bounded_mode, opts.delivery_guarantee, opts.partitioner) == (
        "earliest-offset", "unbounded", "at-least-once", "default")
    assert opts.specific_offsets == {} and opts.key_fields == () and opts.key_format is None
    assert opts.idle_timeout_ms is None and opts.transactional_id_prefix is None
    assert opts.marker_topic == "orders.__sqlstream_commits"
    assert opts.format_options["csv.field-delimiter"] == ","


def test_postgres_options_parse_to_python_values_and_defaults() -> None:
    opts = typed("postgres", {
        "url": "jdbc:postgresql://db.example:5433/shop?user=u&password=secret", "table-name": "sales.orders",
        "lookup.cache.max-rows": "100", "lookup.cache.ttl": "1 min",
    }, PostgresOptions)
    assert isinstance(opts, PostgresOptions)
    assert opts.conninfo == "postgresql://db.example:5433/shop?user=u&password=secret"
    assert opts.table_parts == ("sales", "orders")
    assert opts.where == "db.example:5433/shop"  # for messages: never the password
    assert opts.lookup_cache_max_rows == 100 and opts.lookup_cache_ttl_ms == 60_000
    assert opts.lookup_max_retries == 3 and opts.delivery_guarantee == "at-least-once"
    assert opts.username is None and opts.transaction_id_prefix is None


def test_filesystem_options_parse_to_python_values_and_defaults(tmp_path: Path) -> None:
    opts = typed("filesystem", {
        "path": str(tmp_path), "format": "csv", "source.monitor-interval": "500 ms",
        "sink.rolling-policy.file-size": "64MB", "csv.field-delimiter": ";",
    }, FileSystemOptions)
    assert isinstance(opts, FileSystemOptions)
    assert opts.path == str(tmp_path) and opts.format == "csv"
    assert opts.monitor_interval_ms == 500
    assert opts.rolling_file_size == 64 * 1024 * 1024
    assert opts.format_options["csv.field-delimiter"] == ";"
    plain = typed("filesystem", {"path": str(tmp_path), "format": "parquet"}, FileSystemOptions)
    assert isinstance(plain, FileSystemOptions)
    # Flink's defaults: no monitoring (a bounded source), part files rolled at 128 MB
    assert plain.monitor_interval_ms is None and plain.rolling_file_size == 128 * 1024 * 1024


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("filesystem", {"format": "csv", "sink.rolling-policy.file-size": "lots"},
         "option 'sink.rolling-policy.file-size' = 'lots' is not a valid memory size"),
        ("filesystem", {"format": "csv", "sink.rolling-policy.file-size": "0 kb"},
         "option 'sink.rolling-policy.file-size' = '0' is invalid: must be positive"),
        ("kafka", {"topic": "o", "properties.bootstrap.servers": "b", "format": "csv", "key.fields": "id"},
         "options 'key.format' and 'key.fields' must be given together"),
        ("kafka", {"topic": "o", "properties.bootstrap.servers": "b", "format": "csv",
                   "scan.startup.specific-offsets": "partition:0,offset:1"},
         "'scan.startup.specific-offsets' is only used with 'scan.startup.mode' = 'specific-offsets'"),
        ("postgres", {"url": "postgresql://h/db", "table-name": "t", "lookup.max-retries": "-1"},
         "option 'lookup.max-retries' = '-1' must not be negative"),
        ("postgres", {"url": "mysql://h/db", "table-name": "t"}, "option 'url' = 'mysql://h/db' is not a PostgreSQL URL"),
        ("postgres", {"url": "postgresql://h/db", "table-name": "a.b.c"}, "option 'table-name' = 'a.b.c' must be"),
    ],
)
def test_a_wrong_value_fails_at_create_table_naming_the_option(
    tmp_path: Path, name: str, options: dict[str, str], message: str
) -> None:
    with_path = {"path": str(tmp_path), **options} if name == "filesystem" else options
    with_clause = ", ".join(f"'{k}' = '{v}'" for k, v in {"connector": name, **with_path}.items())
    session = Session()
    with pytest.raises(ConnectorError, match=f"^table 't': {message}"):
        session.execute_script(f"CREATE TABLE t (id INT, name STRING) WITH ({with_clause})")
    assert [t.name for t in session.catalog.tables()] == []  # refused: the table was not created


def test_option_types_convert_and_name_the_option_when_they_cannot() -> None:
    assert Option("o", "memory").convert("64 kb", "t") == 64 * 1024
    assert Option("o", "memory").convert("1024", "t") == 1024
    assert Option("o", "list").convert(" a ;b;; c ", "t") == ("a", "b", "c")
    assert Option("o", "duration").convert("2 min", "t") == 120_000
    with pytest.raises(ConnectorError, match="^table 't': option 'o' = '1 parsec' is not a valid memory size"):
        Option("o", "memory").convert("1 parsec", "t")


def test_a_connector_options_class_is_declared_by_its_fields() -> None:
    @dataclasses.dataclass(frozen=True)
    class Sample(ConnectorOptions):
        size: int = option("size", "int", required=True)
        mode: str = option("mode", default="fast", choices=("fast", "slow"))
        period_ms: int | None = option("period", "duration")

        def check(self, table: str) -> None:
            if self.size > 10 and self.mode == "fast":
                raise ConnectorError(f"table '{table}': option 'size' = '{self.size}' is too big for 'mode' = 'fast'")

    assert [(o.key, o.type, o.required, o.default) for o in Sample.declared()] == [
        ("size", "int", True, None), ("mode", "string", False, "fast"), ("period", "duration", False, None)]
    assert Sample.from_options({"size": 3}, "t") == Sample(size=3, mode="fast", period_ms=None)
    with pytest.raises(ConnectorError, match="option 'size' = '11' is too big"):
        Sample.from_options({"size": 11}, "t")
