"""Render result rows as Flink's SQL client does in tableau mode (a boxed table with an op column)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any, TextIO

import pyarrow as pa

from sqlstream.runtime.elements import RowKind

NULL = "<NULL>"


def format_value(value: Any, type_: pa.DataType) -> str:
    if value is None:
        return NULL
    if pa.types.is_list(type_) or pa.types.is_map(type_) or pa.types.is_struct(type_):
        return _nested(value, type_)
    if isinstance(value, dt.datetime):
        unit = getattr(type_, "unit", "ms")
        digits = {"s": 0, "ms": 3, "us": 6, "ns": 9}.get(unit, 3)
        text = value.strftime("%Y-%m-%d %H:%M:%S")
        if digits:
            text += "." + f"{value.microsecond:06d}"[:digits].ljust(digits, "0")
        return text
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float | Decimal):
        return str(value)
    return str(value)


def _nested(value: Any, type_: pa.DataType) -> str:
    """A nested value as the SQL client shows it, its CAST text: [a, NULL], {k=v}, (f1, f2)."""
    def part(v: Any, t: pa.DataType) -> str:
        return "NULL" if v is None else format_value(v, t)

    if pa.types.is_list(type_):
        return "[" + ", ".join(part(v, type_.value_type) for v in value) + "]"
    if pa.types.is_map(type_):
        return "{" + ", ".join(f"{part(k, type_.key_type)}={part(v, type_.item_type)}" for k, v in value) + "}"
    return "(" + ", ".join(part(value[f.name], f.type) for f in type_) + ")"


def _python_values(column: pa.Array | pa.ChunkedArray) -> list[Any]:
    """The column's values for format_value.  Nanosecond timestamps are printed by Arrow (all nine
    digits, as Flink prints a TIMESTAMP(9)): Python's datetime stops at microseconds."""
    t = column.type
    if pa.types.is_timestamp(t) and t.unit == "ns" and t.tz is None:
        return column.cast(pa.string()).to_pylist()
    return column.to_pylist()


def _width(f: pa.Field) -> int:
    t = f.type
    if pa.types.is_timestamp(t):
        base = 29 if t.unit == "ns" else 23  # a TIMESTAMP(9) shows its nine digits
    elif pa.types.is_integer(t):
        base = 11 if t.bit_width <= 32 else 20
    elif pa.types.is_boolean(t):
        base = 7
    elif pa.types.is_floating(t) or pa.types.is_decimal(t):
        base = 12
    else:
        base = 20
    return max(base, len(f.name))


class TableauPrinter:
    """Prints a header once, then each batch of rows as it arrives (a stream never 'ends')."""

    def __init__(self, schema: pa.Schema, out: TextIO, changelog: bool = True) -> None:
        self.schema = schema
        self.out = out
        self.changelog = changelog
        self.widths = [_width(f) for f in schema]
        self.rows = 0
        self.started = False

    def _line(self) -> str:
        parts = (["----"] if self.changelog else []) + ["-" * (w + 2) for w in self.widths]
        return "+" + "+".join(parts) + "+"

    def _row(self, op: str | None, cells: list[str]) -> str:
        shown = []
        for c, w in zip(cells, self.widths, strict=True):
            if len(c) > w:
                c = c[: w - 3] + "..."
            shown.append(f" {c.rjust(w)} ")
        head = [f" {op} "] if op is not None else []
        return "|" + "|".join(head + shown) + "|"

    def header(self) -> None:
        self.started = True
        print(self._line(), file=self.out)
        print(self._row("op" if self.changelog else None, list(self.schema.names)), file=self.out)
        print(self._line(), file=self.out)

    def write(self, batch: pa.RecordBatch | pa.Table, kinds: pa.Array | None) -> None:
        if not self.started:
            self.header()
        columns = [_python_values(c) for c in batch.columns]
        ops = kinds.to_pylist() if kinds is not None else [0] * batch.num_rows
        for r in range(batch.num_rows):
            cells = [format_value(col[r], f.type) for col, f in zip(columns, self.schema, strict=True)]
            print(self._row(RowKind(ops[r]).short if self.changelog else None, cells), file=self.out)
        self.rows += batch.num_rows
        self.out.flush()

    def finish(self) -> None:
        if not self.started:
            self.header()
        print(self._line(), file=self.out)
        print(f"Received a total of {self.rows} row{'s' if self.rows != 1 else ''}", file=self.out)
