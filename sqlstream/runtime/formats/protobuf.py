"""Protobuf format, following Flink's 'protobuf' format: a Kafka message is one serialized message.

Flink names a generated Java class in 'protobuf.message-class-name'; here it is
a generated (or ``message_factory``-built) Python message class given by its
import path, ``'package.module.Message'`` (a nested message
``'package.module.Outer.Inner'``; Flink's ``$`` for an inner class is read as
``.``).  The module must be importable where the job runs.

Columns match message fields by name (a column the message lacks is an error
at CREATE TABLE, as in Flink); the types must match as Flink's
PbSchemaValidationUtils asks: string STRING/CHAR/VARCHAR, bool BOOLEAN, bytes
BYTES/BINARY/VARBINARY, (s/u)int32 and (s)fixed32 INT, (s/u)int64 and
(s)fixed64 BIGINT, float FLOAT, double DOUBLE, an enum a string type (its
value's name) or TINYINT/SMALLINT/INT/BIGINT (its number), a message ROW, a
repeated field ARRAY and a map MAP.  Unsigned values keep their bits (Java has
no unsigned int: uint32 4294967295 reads as INT -1).

Reading ('protobuf.read-default-values' false, the default): a field with
presence (proto2 optional, proto3 ``optional``, messages, oneof members) that
is not set reads as NULL, and an empty repeated or map field as NULL, as
Flink's generated code checks ``has<Field>()`` / ``get<Field>Count() > 0``; a
proto3 scalar without presence reads its value (its default when absent).
With the option true every field reads its value, defaults included.

Writing: a NULL column leaves the field unset; protobuf has no NULL inside a
repeated or map field, so a NULL element, key or value is written as its
type's default (0, false, empty bytes, the enum's first value, an empty
message) or, for strings, as 'protobuf.write-null-string-literal' (default
''), as in Flink.  An enum column's text or number that names no enum value
writes the enum's first value, as in Flink.  Of the fields of one oneof the
last non-NULL column set wins.

A message that does not parse is an error naming its topic, partition and
offset, or is skipped with 'protobuf.ignore-parse-errors'.  The 'filesystem'
connector refuses the format, as Flink does (there is no standard framing for
files of protobuf messages).  Protobuf is a row format and the library parses
message by message; the per-message work is a parse plus closures built once
per table from the descriptor.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from sqlstream.core.connectors import Option
from sqlstream.core.errors import ConnectorError, DataError
from sqlstream.core.types import sql_type_name
from sqlstream.runtime.formats import (
    CONVERSION_ERRORS,
    Locate,
    MessageFormat,
    ignore_parse_errors,
    make_batch,
)

OPTIONS: tuple[Option, ...] = (
    Option(
        "protobuf.message-class-name",
        description="import path of the Python protobuf message class, e.g. 'orders_pb2.Order'",
    ),
    Option("protobuf.ignore-parse-errors", "bool", description="skip messages that do not parse instead of failing"),
    Option(
        "protobuf.read-default-values",
        "bool",
        default=False,
        description="read unset fields as their defaults instead of NULL",
    ),
    Option(
        "protobuf.write-null-string-literal",
        default="",
        description="the string written for a NULL element of a repeated or map field",
    ),
)

FILESYSTEM_REFUSAL = "The 'protobuf' format is not supported for the 'filesystem' connector."

Reader = Callable[[Any], Any]
Writer = Callable[[Any], Any]


def _protobuf() -> tuple[Any, Any]:
    """(google.protobuf.descriptor, google.protobuf.message), imported when a protobuf table is first used."""
    try:
        from google.protobuf import descriptor, message
    except ImportError:
        raise ConnectorError("the 'protobuf' format needs protobuf: pip install 'sqlstream[protobuf]'") from None
    return descriptor, message


def message_class(path: str, table: str) -> Any:
    """The message class at import path ``path`` ('module.Message', 'module.Outer.Inner')."""
    _descriptor, message = _protobuf()
    parts = path.replace("$", ".").split(".")
    found: Any = None
    for split in range(len(parts) - 1, 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        try:
            for name in parts[split:]:
                found = getattr(found, name)
        except AttributeError:
            found = None
        break
    if not (isinstance(found, type) and issubclass(found, message.Message) and hasattr(found, "DESCRIPTOR")):
        raise ConnectorError(
            f"table '{table}': 'protobuf.message-class-name' = '{path}' is not an importable protobuf message class "
            "(give the import path of a generated class, e.g. 'orders_pb2.Order')"
        )
    return found


# -- the schema check (Flink's PbSchemaValidationUtils) ------------------------------------------

def _java_type(fd: Any) -> str:
    """Flink's name of the Java type of a field (what its error messages say)."""
    d, _m = _protobuf()
    f = d.FieldDescriptor
    if fd.type == f.TYPE_BYTES:
        return "BYTE_STRING"
    return {
        f.CPPTYPE_BOOL: "BOOLEAN", f.CPPTYPE_DOUBLE: "DOUBLE", f.CPPTYPE_FLOAT: "FLOAT", f.CPPTYPE_ENUM: "ENUM",
        f.CPPTYPE_STRING: "STRING", f.CPPTYPE_INT32: "INT", f.CPPTYPE_UINT32: "INT", f.CPPTYPE_INT64: "LONG",
        f.CPPTYPE_UINT64: "LONG", f.CPPTYPE_MESSAGE: "MESSAGE",
    }[fd.cpp_type]


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _is_bytes(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)


_SIMPLE_MATCH: dict[str, Callable[[pa.DataType], bool]] = {
    "BOOLEAN": pa.types.is_boolean,
    "BYTE_STRING": _is_bytes,
    "DOUBLE": lambda t: t == pa.float64(),
    "FLOAT": lambda t: t == pa.float32(),
    "ENUM": lambda t: _is_text(t) or t in (pa.int8(), pa.int16(), pa.int32(), pa.int64()),
    "STRING": _is_text,
    "INT": lambda t: t == pa.int32(),
    "LONG": lambda t: t == pa.int64(),
}


def _is_map(fd: Any) -> bool:
    return fd.message_type is not None and fd.message_type.GetOptions().map_entry


def _check_fields(descriptor: Any, fields: Sequence[pa.Field], table: str) -> None:
    for f in fields:
        fd = descriptor.fields_by_name.get(f.name)
        if fd is None:
            raise ConnectorError(f"table '{table}': Column {f.name} does not exist in definition of proto class "
                                 f"{descriptor.full_name} (fields: {', '.join(descriptor.fields_by_name)}).")
        _check_field(fd, f.type, table)


def _check_field(fd: Any, t: pa.DataType, table: str) -> None:
    def expect(what: str) -> None:
        raise ConnectorError(f"table '{table}': protobuf field '{fd.full_name}' needs a column of type {what}, "
                             f"not {sql_type_name(t)}")

    if _is_map(fd):
        if not pa.types.is_map(t):
            expect("MAP")
        _check_simple(fd.message_type.fields_by_name["key"], t.key_type, table)
        _check_field(fd.message_type.fields_by_name["value"], t.item_type, table)
    elif fd.is_repeated:
        if not (pa.types.is_list(t) or pa.types.is_large_list(t)):
            expect("ARRAY")
        _check_element(fd, t.value_type, table)
    else:
        _check_element(fd, t, table)


def _check_element(fd: Any, t: pa.DataType, table: str) -> None:
    if fd.message_type is None:
        _check_simple(fd, t, table)
    elif not pa.types.is_struct(t):
        raise ConnectorError(f"table '{table}': protobuf field '{fd.full_name}' is a message and needs a ROW column, "
                             f"not {sql_type_name(t)}")
    else:
        _check_fields(fd.message_type, list(t), table)


def _check_simple(fd: Any, t: pa.DataType, table: str) -> None:
    java = _java_type(fd)
    if java not in _SIMPLE_MATCH:
        raise ConnectorError(f"table '{table}': Unsupported protobuf java type: {java} (field '{fd.full_name}')")
    if not _SIMPLE_MATCH[java](t):
        raise ConnectorError(f"table '{table}': Protobuf field type does not match column type, {java}(protobuf) "
                             f"is not compatible with {sql_type_name(t)} (field '{fd.full_name}')")


# -- reading: message -> Python values of the column types ---------------------------------------

def _signed(bits: int) -> Reader:
    """An unsigned field's value with its bits kept in a signed integer of ``bits`` (Java's int/long)."""
    half, whole = 1 << (bits - 1), 1 << bits
    return lambda v: v - whole if v >= half else v


def _scalar_reader(fd: Any, t: pa.DataType) -> Reader | None:
    """How one value of a non-message field becomes a column value (None: as it is)."""
    d, _m = _protobuf()
    f = d.FieldDescriptor
    if fd.cpp_type == f.CPPTYPE_ENUM:
        if _is_text(t):
            names = {v.number: v.name for v in fd.enum_type.values}
            return lambda v: names.get(v, "UNRECOGNIZED")
        return None
    if fd.cpp_type == f.CPPTYPE_UINT32:
        return _signed(32)
    if fd.cpp_type == f.CPPTYPE_UINT64:
        return _signed(64)
    return None


def _element_reader(fd: Any, t: pa.DataType, defaults: bool) -> Reader | None:
    if fd.message_type is not None:
        return _message_reader(fd.message_type, list(t), defaults)
    return _scalar_reader(fd, t)


def _field_reader(fd: Any, t: pa.DataType, defaults: bool) -> Reader:
    """Column value of field ``fd`` of a message (see the module docstring for NULLs)."""
    name = fd.name
    if _is_map(fd):
        key = _scalar_reader(fd.message_type.fields_by_name["key"], t.key_type)
        value = _element_reader(fd.message_type.fields_by_name["value"], t.item_type, defaults)

        def read_map(m: Any) -> Any:
            entries = getattr(m, name)
            if not entries and not defaults:
                return None
            return [(k if key is None else key(k), v if value is None else value(v)) for k, v in entries.items()]
        return read_map
    if fd.is_repeated:
        element = _element_reader(fd, t.value_type, defaults)

        def read_list(m: Any) -> Any:
            items = getattr(m, name)
            if not items and not defaults:
                return None
            return list(items) if element is None else [element(v) for v in items]
        return read_list
    element = _element_reader(fd, t, defaults)
    if fd.has_presence and not defaults:
        if element is None:
            return lambda m: getattr(m, name) if m.HasField(name) else None
        return lambda m: element(getattr(m, name)) if m.HasField(name) else None
    if element is None:
        return lambda m: getattr(m, name)
    return lambda m: element(getattr(m, name))


def _message_reader(descriptor: Any, fields: Sequence[pa.Field], defaults: bool) -> Reader:
    """A message -> a dict of ``fields``' values."""
    readers = [(f.name, _field_reader(descriptor.fields_by_name[f.name], f.type, defaults)) for f in fields]
    return lambda m: {name: read(m) for name, read in readers}


# -- writing: Python values of the column types -> message fields ---------------------------------

def _unsigned(bits: int) -> Writer:
    """A signed column value as the unsigned field value with the same bits."""
    whole = 1 << bits
    return lambda v: v + whole if v < 0 else v


def _scalar_writer(fd: Any, t: pa.DataType) -> Writer | None:
    """How a column value becomes the value of a non-message field (None: as it is)."""
    d, _m = _protobuf()
    f = d.FieldDescriptor
    if fd.cpp_type == f.CPPTYPE_ENUM:
        first = fd.enum_type.values[0].number
        if _is_text(t):
            numbers = {v.name: v.number for v in fd.enum_type.values}
            return lambda v: numbers.get(v, first)
        known = {v.number for v in fd.enum_type.values}
        return lambda v: v if v in known else first
    if fd.cpp_type == f.CPPTYPE_UINT32:
        return _unsigned(32)
    if fd.cpp_type == f.CPPTYPE_UINT64:
        return _unsigned(64)
    return None


def _default(fd: Any, null_string: str) -> Any:
    """What a NULL element, key or value of a non-message field is written as (Flink's table of defaults)."""
    d, _m = _protobuf()
    f = d.FieldDescriptor
    if fd.type == f.TYPE_STRING:
        return null_string
    if fd.type == f.TYPE_BYTES:
        return b""
    if fd.cpp_type == f.CPPTYPE_ENUM:
        return fd.enum_type.values[0].number
    if fd.cpp_type == f.CPPTYPE_BOOL:
        return False
    if fd.cpp_type in (f.CPPTYPE_FLOAT, f.CPPTYPE_DOUBLE):
        return 0.0
    return 0


def _scalar_value(fd: Any, t: pa.DataType, null_string: str) -> Writer:
    """A column element (maybe NULL) -> the field value (its default for NULL)."""
    convert = _scalar_writer(fd, t)
    default = _default(fd, null_string)
    if convert is None:
        return lambda v: default if v is None else v
    return lambda v: default if v is None else convert(v)


def _field_writer(fd: Any, t: pa.DataType, null_string: str) -> Callable[[Any, Any], None]:
    """Sets field ``fd`` of a message from a non-NULL column value."""
    name = fd.name
    if _is_map(fd):
        key_fd, value_fd = fd.message_type.fields_by_name["key"], fd.message_type.fields_by_name["value"]
        key = _scalar_value(key_fd, t.key_type, null_string)
        if value_fd.message_type is not None:
            fill = _message_writer(value_fd.message_type, list(t.item_type), null_string)

            def write_message_map(m: Any, entries: Any) -> None:
                target = getattr(m, name)
                for k, v in entries:
                    entry = target[key(k)]
                    entry.SetInParent()
                    if v is not None:
                        fill(entry, v)
            return write_message_map
        value = _scalar_value(value_fd, t.item_type, null_string)

        def write_map(m: Any, entries: Any) -> None:
            target = getattr(m, name)
            for k, v in entries:
                target[key(k)] = value(v)
        return write_map
    if fd.is_repeated:
        if fd.message_type is not None:
            fill = _message_writer(fd.message_type, list(t.value_type), null_string)

            def write_messages(m: Any, items: Any) -> None:
                target = getattr(m, name)
                for item in items:
                    added = target.add()
                    if item is not None:
                        fill(added, item)
            return write_messages
        element = _scalar_value(fd, t.value_type, null_string)
        return lambda m, items: getattr(m, name).extend([element(v) for v in items])
    if fd.message_type is not None:
        fill = _message_writer(fd.message_type, list(t), null_string)

        def write_message(m: Any, v: Any) -> None:
            target = getattr(m, name)
            target.SetInParent()
            fill(target, v)
        return write_message
    convert = _scalar_writer(fd, t)
    if convert is None:
        return lambda m, v: setattr(m, name, v)
    return lambda m, v: setattr(m, name, convert(v))


def _message_writer(descriptor: Any, fields: Sequence[pa.Field], null_string: str) -> Callable[[Any, dict], None]:
    """Sets a message's fields from a dict of ``fields``' values; NULL leaves a field unset."""
    writers = [(f.name, _field_writer(descriptor.fields_by_name[f.name], f.type, null_string)) for f in fields]

    def fill(m: Any, row: dict[str, Any]) -> None:
        for name, write in writers:
            value = row[name]
            if value is not None:
                write(m, value)
    return fill


class ProtobufFormat(MessageFormat):
    """Serialized messages of one protobuf message class, one per Kafka message."""

    name = "protobuf"

    def __init__(
        self, schema: pa.Schema, options: Mapping[str, Any], columns: Sequence[str] | None, table: str
    ) -> None:
        self.schema = schema
        self.table = table
        self.columns = list(schema.names if columns is None else columns)
        self.output_schema = pa.schema([schema.field(c) for c in self.columns])
        self.parse_errors = 0
        path = options.get("protobuf.message-class-name")
        if not path:
            raise ConnectorError(f"table '{table}': format 'protobuf' requires 'protobuf.message-class-name'")
        self._class = message_class(path, table)
        descriptor = self._class.DESCRIPTOR
        _check_fields(descriptor, list(schema), table)
        self._read = _message_reader(descriptor, list(self.output_schema), bool(options.get("protobuf.read-default-values")))
        self._fill = _message_writer(descriptor, list(schema), options.get("protobuf.write-null-string-literal") or "")
        self.ignore_errors = ignore_parse_errors(options, "protobuf")
        self._decode_error = _protobuf()[1].DecodeError

    def decode_messages(self, messages: Sequence[bytes | None], where: Locate) -> pa.RecordBatch:
        rows: list[dict[str, Any]] = []
        kept: list[int] = []
        for i, data in enumerate(messages):
            if data is None:  # a tombstone: Flink's deserializer returns no row
                continue
            try:
                message = self._class.FromString(data)
            except self._decode_error as e:
                if self.ignore_errors:
                    self.parse_errors += 1
                    continue
                raise DataError(f"protobuf message in {where(i)} does not parse as "
                                f"{self._class.DESCRIPTOR.full_name}: {e}") from None
            rows.append(self._read(message))
            kept.append(i)
        if not self.columns:
            return make_batch([], self.output_schema, len(rows))
        try:
            return pa.RecordBatch.from_pylist(rows, schema=self.output_schema)
        except CONVERSION_ERRORS as e:  # an enum number out of a TINYINT/SMALLINT column's range
            raise DataError(f"protobuf messages in {where(kept[0])} and after do not fit the table's columns: "
                            f"{e}") from None

    def encode_messages(self, batch: pa.RecordBatch) -> list[bytes | None]:
        out: list[bytes | None] = []
        for row in batch.to_pylist():
            message = self._class()
            self._fill(message, row)
            out.append(message.SerializeToString())
        return out
