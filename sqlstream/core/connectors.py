"""Connectors as the planner sees them: a name, an option schema, what the connector can do.

A connector is found by the name in ``'connector' = '...'`` among the ``sqlstream.connectors``
entry points, the way Flink finds table factories through Java's service loader: the planner
validates options and checks capabilities through :class:`ConnectorSpec` without depending on
the runtime code that implements sources and sinks (``sqlstream.runtime.connectors``), and a
connector from another distribution plugs in the same way.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Self

import pyarrow as pa

from sqlstream.core.durations import parse_duration_ms, parse_memory_size
from sqlstream.core.errors import ConnectorError
from sqlstream.core.tables import ColumnDef, TableDef
from sqlstream.core.types import sql_type_name

ENTRY_POINT_GROUP = "sqlstream.connectors"


@dataclass(frozen=True)
class Option:
    """One declared connector option.

    ``type`` is 'string', 'int', 'float', 'bool', 'duration' (Flink duration text, converted to
    milliseconds), 'memory' (Flink MemorySize text, converted to bytes) or 'list' (Flink's
    ';'-separated list, converted to a tuple of its non-empty, stripped items).
    """

    key: str
    type: str = "string"
    required: bool = False
    default: Any = None
    choices: tuple[str, ...] | None = None
    description: str = ""

    def convert(self, raw: str, table: str) -> Any:
        try:
            if self.type == "int":
                return int(raw)
            if self.type == "float":
                return float(raw)
            if self.type == "bool":
                if raw.lower() not in ("true", "false"):
                    raise ValueError("expected 'true' or 'false'")
                return raw.lower() == "true"
            if self.type == "duration":
                return parse_duration_ms(raw)
            if self.type == "memory":
                return parse_memory_size(raw)
            if self.type == "list":
                return tuple(item.strip() for item in raw.split(";") if item.strip())
        except ValueError as e:
            kind = "memory size" if self.type == "memory" else self.type
            raise ConnectorError(
                f"table '{table}': option '{self.key}' = '{raw}' is not a valid {kind}: {e}"
            ) from None
        if self.choices is not None and raw.lower() not in self.choices:
            raise ConnectorError(
                f"table '{table}': option '{self.key}' = '{raw}' must be one of {', '.join(self.choices)}"
            )
        return raw.lower() if self.choices is not None else raw


def option(
    key: str,
    type: str = "string",  # noqa: A002 - Option's field name
    *,
    required: bool = False,
    default: Any = None,
    choices: tuple[str, ...] | None = None,
    description: str = "",
) -> Any:
    """A field of a :class:`ConnectorOptions` dataclass that is the connector option ``key``.

    The field's :class:`Option` goes into the connector's schema, so the ``CREATE TABLE``
    check and the typed object the source and sink read are declared once.
    """
    declared = Option(key, type, required, default, choices, description)
    return field(default=default, metadata={"option": declared})


def option_group(options: tuple[Option, ...]) -> Any:
    """A field of a :class:`ConnectorOptions` dataclass holding several options as one mapping.

    The value maps each option's key to its validated value (its default if not given); a
    connector passes it on whole, as it does a format's options ('csv.*', 'json.*').
    """
    return field(default_factory=dict, metadata={"group": options})


class ConnectorOptions:
    """A connector's validated options as a frozen dataclass of Python values, one field per option.

    Subclasses are ``@dataclass(frozen=True)`` with fields made by :func:`option` (or
    :func:`option_group`); :attr:`ConnectorSpec.options_type` names the class, whose fields
    then are the connector's option schema.  :meth:`check` holds the rules that span several
    options; it runs when ``CREATE TABLE`` validates the table (so a bad combination fails
    there, naming the options) and again whenever a source or sink builds its options.
    """

    @classmethod
    def declared(cls) -> tuple[Option, ...]:
        """The options of the fields, in field order."""
        out: list[Option] = []
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if "option" in f.metadata:
                out.append(f.metadata["option"])
            out.extend(f.metadata.get("group", ()))
        return tuple(out)

    @classmethod
    def from_options(cls, options: Mapping[str, Any], table: str) -> Self:
        """The typed options of table ``table`` from its validated options (what ConnectorSpec.validate returns).

        Options absent from the mapping take their declared defaults.
        """
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if "option" in f.metadata:
                declared: Option = f.metadata["option"]
                values[f.name] = options.get(declared.key, declared.default)
            elif "group" in f.metadata:
                values[f.name] = {o.key: options.get(o.key, o.default) for o in f.metadata["group"]}
        typed = cls(**values)
        typed.check(table)
        return typed

    def check(self, table: str) -> None:
        """Rules across options; ConnectorError naming the options of table ``table`` otherwise."""


@dataclass(frozen=True)
class MetadataKey:
    """One metadata key a connector offers to ``METADATA`` columns (Flink's readable/writable metadata).

    ``refused`` (with ``type`` None) names a key Flink has that this engine cannot offer, and why.
    """

    type: pa.DataType | None
    writable: bool = False
    refused: str = ""


def _castable(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether values of ``source`` cast to ``target`` (Flink asks for an explicit cast to exist)."""
    if source == target:
        return True
    try:
        pa.array([], source).cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return False
    return True


@dataclass
class ConnectorSpec:
    """A connector's declared options and capabilities (the runtime's ``Connector`` adds factories)."""

    name: str
    options: tuple[Option, ...]
    accepts_updates: bool = False  # sink understands -U/+U/-D
    # ... and only applies them by the table's PRIMARY KEY (an updating query into a table
    # without one is refused at plan time)
    updates_need_primary_key: bool = False
    # option keys matched by prefix (datagen's 'fields.<name>.kind'); checked by validate_extra
    prefixes: tuple[str, ...] = ()
    validate_extra: Callable[[TableDef, dict[str, str]], None] | None = None
    description: str = ""
    # the connector reads and writes PARTITIONED BY tables (Flink's SupportsPartitioning)
    partitioned: bool = False
    # the typed options the connector's sources and sinks read; its fields join ``options``
    options_type: type[ConnectorOptions] | None = None
    # the changelog a table's source emits and its sink takes, when it depends on the table (its
    # format): 'insert-only', 'all' (+I/-U/+U/-D, a CDC format) or 'upsert' (+I/+U/-D by primary key)
    changelog: Callable[[TableDef], str] | None = None
    # metadata keys for METADATA columns; none: the connector refuses metadata columns
    metadata: Mapping[str, MetadataKey] = field(default_factory=dict)
    # the sink distributes its rows by the table's PRIMARY KEY itself, whatever
    # 'table.exec.sink.keyed-shuffle' says (Iceberg's FlinkSink keys rows by its equality fields)
    sink_keyed_by_primary_key: bool = False
    _by_key: dict[str, Option] = field(init=False, repr=False)

    @property
    def readable(self) -> bool:
        return False

    @property
    def writable(self) -> bool:
        return False

    @property
    def lookupable(self) -> bool:
        return False

    def changelog_mode(self, table: TableDef) -> str:
        """'insert-only', 'all' or 'upsert': the changes the table's source emits (Flink's ChangelogMode)."""
        return "insert-only" if self.changelog is None else self.changelog(table)

    def sink_accepts_updates(self, table: TableDef) -> bool:
        """Whether the table's sink takes -U/+U/-D rows: always, or through its changelog format."""
        return self.accepts_updates or self.changelog_mode(table) != "insert-only"

    def __post_init__(self) -> None:
        if self.options_type is not None:
            self.options = (*self.options_type.declared(), *self.options)
        self._by_key = {o.key: o for o in self.options}
        self._by_key["connector"] = Option("connector", required=True)
        # parallelism of this table's source / sink, independent of parallelism.default (Flink)
        if self.readable:
            self._by_key.setdefault("scan.parallelism", Option("scan.parallelism", "int"))
        if self.writable:
            self._by_key.setdefault("sink.parallelism", Option("sink.parallelism", "int"))

    def validate(self, table: TableDef) -> dict[str, Any]:
        """Check a table's WITH options against the declared schema; return them typed."""
        given = table.options
        if table.partition_keys and not self.partitioned:
            raise ConnectorError(
                f"table '{table.name}' is PARTITIONED BY ({', '.join(table.partition_keys)}), but connector "
                f"'{self.name}' has no partitions (the filesystem connector has); leave PARTITIONED BY out"
            )
        typed: dict[str, Any] = {}
        for key, raw in given.items():
            opt = self._by_key.get(key)
            if opt is None:
                if any(key.startswith(p) for p in self.prefixes):
                    continue
                known = sorted(self._by_key)
                close = difflib.get_close_matches(key, known, n=1)
                hint = f" Did you mean '{close[0]}'?" if close else ""
                raise ConnectorError(
                    f"table '{table.name}': unknown option '{key}' for connector '{self.name}'.{hint} "
                    f"Supported options: {', '.join(known)}"
                )
            typed[key] = opt.convert(raw, table.name)
        for key in ("scan.parallelism", "sink.parallelism"):
            if typed.get(key) is not None and typed[key] < 1:
                raise ConnectorError(f"table '{table.name}': option '{key}' must be at least 1")
        for opt in self.options:
            if opt.key not in typed:
                if opt.required:
                    raise ConnectorError(
                        f"table '{table.name}': connector '{self.name}' requires option '{opt.key}'"
                        + (f" ({opt.description})" if opt.description else "")
                    )
                typed[opt.key] = opt.default
        if self.options_type is not None:
            self.options_type.from_options(typed, table.name)
        for column in table.metadata_columns:
            self._metadata_key(table, column, writing=False)
        if self.validate_extra is not None:
            self.validate_extra(table, given)
        return typed

    def metadata_type(self, column: ColumnDef) -> pa.DataType:
        """The type the connector reads and writes metadata column ``column`` as (validate() has
        checked the key); the planner casts between it and the declared type, in the session zone."""
        found = self.metadata[column.metadata_key or ""]
        assert found.type is not None
        return found.type

    def check_writable_metadata(self, table: TableDef) -> None:
        """INSERT INTO ``table``: each persisted (non-VIRTUAL) metadata column must be writable."""
        for column in table.persisted_columns:
            if column.metadata is not None:
                self._metadata_key(table, column, writing=True)

    def _metadata_key(self, table: TableDef, column: ColumnDef, writing: bool) -> MetadataKey:
        """The metadata ``column`` reads (or writes); ConnectorError in Flink's words otherwise."""
        key = column.metadata_key or ""
        if not self.metadata:
            raise ConnectorError(
                f"Table '{table.name}' declares metadata columns, but connector '{self.name}' offers no "
                f"metadata. Therefore, metadata cannot be {'written to' if writing else 'read from'} the given table."
            )
        found = self.metadata.get(key)
        if found is not None and found.refused:
            raise ConnectorError(f"metadata column '{column.name}' of table '{table.name}': {found.refused}")
        usable = sorted(k for k, m in self.metadata.items() if not m.refused and (m.writable or not writing))
        if writing and not usable:
            raise ConnectorError(
                f"Table '{table.name}' declares persistable metadata columns, but connector '{self.name}' writes no "
                "metadata. If the column should not be persisted, it can be declared with the VIRTUAL keyword."
            )
        if found is None or (writing and not found.writable):
            hint = " Declare the column VIRTUAL to only read it." if found is not None else ""
            raise ConnectorError(
                f"Invalid metadata key '{key}' in column '{column.name}' of table '{table.name}'. Connector "
                f"'{self.name}' supports the following metadata keys for {'writing' if writing else 'reading'}: "
                f"{', '.join(usable)}.{hint}"
            )
        assert found.type is not None
        source, target = (column.type, found.type) if writing else (found.type, column.type)
        if not _castable(source, target):
            direction = "to" if writing else "from"
            raise ConnectorError(
                f"Invalid data type for metadata column '{column.name}' of table '{table.name}'. The column cannot "
                f"be declared as '{sql_type_name(column.type)}' because the type must be castable {direction} "
                f"metadata type '{sql_type_name(found.type)}'."
            )
        return found


@cache
def _entry_points() -> dict[str, EntryPoint]:
    return {ep.name.lower(): ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def connector_names() -> list[str]:
    return sorted(_entry_points())


@cache
def connector_spec(name: str) -> ConnectorSpec:
    """The connector called ``name``; a clear error naming the known ones otherwise."""
    if not name:
        raise ConnectorError("table has no 'connector' option; add e.g. WITH ('connector' = 'datagen')")
    found = _entry_points().get(name.lower())
    if found is None:
        known = connector_names()
        close = difflib.get_close_matches(name.lower(), known, n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        raise ConnectorError(f"unknown connector '{name}'.{hint} Available connectors: {', '.join(known)}")
    spec = found.load()
    if not isinstance(spec, ConnectorSpec):
        raise ConnectorError(f"connector '{name}' ({found.value}) is not a ConnectorSpec")
    return spec
