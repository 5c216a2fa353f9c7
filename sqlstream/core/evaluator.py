"""Vectorized evaluation of bound expressions over an Arrow record batch.

An expression is compiled once into a closure tree (no per-batch dispatch on
node types), and each closure evaluates a whole column with pyarrow.compute.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.casts import cast_number, cast_to_float, string_to_time, to_string
from sqlstream.core.errors import DataError
from sqlstream.core.expressions import Call, Case, Cast, ColumnRef, Expr, Literal
from sqlstream.core.functions import lookup
from sqlstream.core.types import is_numeric, is_string

Value = pa.Array | pa.Scalar
Compiled = Callable[[pa.RecordBatch], Value]


def _cast(value: Value, target: pa.DataType, safe: bool) -> Value:
    if value.type == target:
        return value
    try:
        if pa.types.is_string(value.type) and pa.types.is_boolean(target):
            return _string_to_bool(value)
        if is_numeric(value.type) and (pa.types.is_integer(target) or pa.types.is_decimal(target)):
            return cast_number(value, target)
        if pa.types.is_decimal(value.type) and pa.types.is_floating(target):
            return cast_to_float(value, target)
        if is_string(value.type) and pa.types.is_time(target):
            return pc.cast(string_to_time(value), target)
        if is_string(target):
            text = to_string(value)
            if text is not None:
                return text
        return pc.cast(value, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        if safe:
            return _try_cast_each(value, target)
        raise DataError(f"CAST to {target} failed: {e}") from None


def _string_to_bool(value: Value) -> Value:
    lowered = pc.utf8_lower(pc.utf8_trim_whitespace(value))
    true = pc.is_in(lowered, value_set=pa.array(["true", "t", "1", "yes"]))
    false = pc.is_in(lowered, value_set=pa.array(["false", "f", "0", "no"]))
    return pc.if_else(true, True, pc.if_else(false, False, pa.scalar(None, pa.bool_())))


def _try_cast_each(value: Value, target: pa.DataType) -> Value:
    """Slow path for TRY_CAST, reached only when the vectorized cast failed."""
    if isinstance(value, pa.Scalar):
        try:
            return pc.cast(value, target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return pa.scalar(None, target)
    out = []
    for item in value:
        try:
            out.append(pc.cast(item, target).as_py())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            out.append(None)
    return pa.array(out, target)


def compile_expr(expr: Expr) -> Compiled:
    if isinstance(expr, ColumnRef):
        index = expr.index
        return lambda batch: batch.column(index)
    if isinstance(expr, Literal):
        scalar = pa.scalar(expr.value, expr.type)
        return lambda batch: scalar
    if isinstance(expr, Cast):
        inner = compile_expr(expr.arg)
        target, safe = expr.type, expr.safe
        return lambda batch: _cast(inner(batch), target, safe)
    if isinstance(expr, Call):
        fn = lookup(expr.name)
        assert fn is not None, expr.name
        args = [compile_expr(a) for a in expr.args]
        kernel = fn.kernel
        return lambda batch: kernel(*[a(batch) for a in args])
    if isinstance(expr, Case):
        whens = [(compile_expr(c), compile_expr(v)) for c, v in expr.whens]
        default = compile_expr(expr.default) if expr.default is not None else None
        out_type = expr.type

        def case(batch: pa.RecordBatch) -> Value:
            result: Value = default(batch) if default is not None else pa.scalar(None, out_type)
            # fold from the last arm so the first matching arm wins
            for cond, val in reversed(whens):
                c = pc.fill_null(cond(batch), False)
                result = pc.if_else(c, val(batch), result)
            return result

        return case
    raise TypeError(f"cannot compile {expr!r}")


def as_array(value: Value, length: int, type_: pa.DataType) -> pa.Array:
    """A column of ``length`` rows from a kernel's result (broadcasting a scalar)."""
    if isinstance(value, pa.ChunkedArray):
        value = value.combine_chunks()
    if isinstance(value, pa.Scalar):
        value = pa.nulls(length, value.type).fill_null(value) if value.is_valid else pa.nulls(length, value.type)
    if value.type != type_:
        value = value.cast(type_)
    return value


class Projector:
    """Evaluates a list of named expressions into a new record batch."""

    def __init__(self, exprs: list[Expr], names: list[str]) -> None:
        self.exprs = exprs
        self.compiled = [compile_expr(e) for e in exprs]
        self.schema = pa.schema([pa.field(n, e.type) for n, e in zip(names, exprs, strict=True)])

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        n = batch.num_rows
        cols = [
            as_array(c(batch), n, f.type)
            for c, f in zip(self.compiled, self.schema, strict=True)
        ]
        return pa.RecordBatch.from_arrays(cols, schema=self.schema)


class Predicate:
    """Evaluates a boolean expression into a filter mask (NULL counts as false)."""

    def __init__(self, expr: Expr) -> None:
        self.compiled = compile_expr(expr)

    def __call__(self, batch: pa.RecordBatch) -> pa.Array:
        return as_array(self.compiled(batch), batch.num_rows, pa.bool_())
