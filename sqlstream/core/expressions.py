"""Bound, typed scalar expressions: what the binder produces from sqlglot nodes.

Every node carries its Arrow result type, so type errors surface at plan time
and the runtime evaluator only dispatches kernels.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

import pyarrow as pa

from sqlstream.core.types import sql_type_name

_INFIX = {"+", "-", "*", "/", "%", "=", "<>", "<", "<=", ">", ">=", "AND", "OR"}


@dataclass(frozen=True)
class ColumnRef:
    index: int
    name: str
    type: pa.DataType

    def __str__(self) -> str:
        return f"${self.index}:{self.name}"


@dataclass(frozen=True)
class Literal:
    value: Any
    type: pa.DataType

    def __str__(self) -> str:
        if self.value is None:
            return "NULL"
        return str(self.value) if isinstance(self.value, Decimal) else repr(self.value)


@dataclass(frozen=True)
class Call:
    """A scalar function or operator from sqlstream.core.functions, by registry name."""

    name: str
    args: tuple[Expr, ...]
    type: pa.DataType
    # the session zone ('table.local-time-zone') of a function that reads wall-clock time, set by
    # the planner; None for every other function
    zone: str | None = None

    def __str__(self) -> str:
        if self.name in _INFIX and len(self.args) == 2:
            return f"({self.args[0]} {self.name} {self.args[1]})"
        return f"{self.name}({', '.join(str(a) for a in self.args)})"


@dataclass(frozen=True)
class Cast:
    arg: Expr
    type: pa.DataType
    safe: bool = False  # TRY_CAST: NULL instead of an error
    # the session zone of a cast between TIMESTAMP_LTZ and wall-clock time, set by the planner
    zone: str | None = None
    # CAST(x AS VARCHAR(n)) / CHAR(n): Flink cuts the text to n characters, and pads CHAR(n) with
    # spaces to n (Arrow's string type carries no length, so the cast carries it)
    length: int | None = None
    fixed: bool = False

    def __str__(self) -> str:
        target = sql_type_name(self.type)
        if self.length is not None:
            target = f"{'CHAR' if self.fixed else 'VARCHAR'}({self.length})"
        return f"{'TRY_CAST' if self.safe else 'CAST'}({self.arg} AS {target})"


@dataclass(frozen=True)
class Case:
    whens: tuple[tuple[Expr, Expr], ...]
    default: Expr | None
    type: pa.DataType

    def __str__(self) -> str:
        arms = " ".join(f"WHEN {c} THEN {v}" for c, v in self.whens)
        tail = f" ELSE {self.default}" if self.default is not None else ""
        return f"CASE {arms}{tail} END"


Expr = ColumnRef | Literal | Call | Cast | Case


def children(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, Call):
        return e.args
    if isinstance(e, Cast):
        return (e.arg,)
    if isinstance(e, Case):
        out: list[Expr] = []
        for c, v in e.whens:
            out += [c, v]
        if e.default is not None:
            out.append(e.default)
        return tuple(out)
    return ()


def referenced_columns(e: Expr) -> set[int]:
    """Input column indexes an expression reads (for projection pushdown)."""
    if isinstance(e, ColumnRef):
        return {e.index}
    out: set[int] = set()
    for c in children(e):
        out |= referenced_columns(c)
    return out


def remap_columns(e: Expr, mapping: dict[int, int]) -> Expr:
    """The same expression reading input column mapping[i] where it read i."""
    if isinstance(e, ColumnRef):
        return ColumnRef(mapping[e.index], e.name, e.type)
    if isinstance(e, Call):
        return replace(e, args=tuple(remap_columns(a, mapping) for a in e.args))
    if isinstance(e, Cast):
        return replace(e, arg=remap_columns(e.arg, mapping))
    if isinstance(e, Case):
        return Case(
            tuple((remap_columns(c, mapping), remap_columns(v, mapping)) for c, v in e.whens),
            None if e.default is None else remap_columns(e.default, mapping),
            e.type,
        )
    return e


def substitute(e: Expr, exprs: list[Expr]) -> Expr:
    """Inline a projection: replace ColumnRef i by exprs[i] (for pushing filters below projects)."""
    if isinstance(e, ColumnRef):
        return exprs[e.index]
    if isinstance(e, Call):
        return replace(e, args=tuple(substitute(a, exprs) for a in e.args))
    if isinstance(e, Cast):
        return replace(e, arg=substitute(e.arg, exprs))
    if isinstance(e, Case):
        return Case(
            tuple((substitute(c, exprs), substitute(v, exprs)) for c, v in e.whens),
            None if e.default is None else substitute(e.default, exprs),
            e.type,
        )
    return e
