"""Vectorized evaluation of bound expressions over an Arrow record batch.

An expression is compiled once into a closure tree (no per-batch dispatch on
node types), and each closure evaluates a whole column with pyarrow.compute.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.casts import cast_number, cast_to_float, string_to_time, to_string
from sqlstream.core.errors import DataError, ExpressionError
from sqlstream.core.expressions import (
    Call,
    Case,
    Cast,
    ColumnRef,
    Expr,
    Literal,
    children,
    referenced_columns,
)
from sqlstream.core.functions import ArgumentTypeError, lookup
from sqlstream.core.functions.udfs import USER_SCALARS, table_function_call
from sqlstream.core.types import instant, is_ltz, is_numeric, is_string, sql_type_name, wall_clock

Value = pa.Array | pa.Scalar
Compiled = Callable[[pa.RecordBatch], Value]


def _cast(value: Value, target: pa.DataType, safe: bool, zone: str = "UTC") -> Value:
    if value.type == target:
        return value
    try:
        if is_ltz(value.type) and not is_ltz(target):
            # an instant becomes the wall-clock time of the session zone, then the target
            value = wall_clock(value, zone)
            if value.type == target:
                return value
        elif is_ltz(target) and is_string(value.type):
            try:
                # Flink reads the text as wall-clock time in the session zone
                wall = pc.cast(pc.utf8_trim_whitespace(value), pa.timestamp(target.unit))
            except pa.ArrowInvalid:
                return pc.cast(value, target)  # text with a zone offset ('...Z') names its instant
            return pc.cast(instant(wall, zone), target)
        elif is_ltz(target) and not is_ltz(value.type) and zone != "UTC" and (
                pa.types.is_timestamp(value.type) or pa.types.is_date(value.type)):
            # wall-clock time is read in the session zone
            return pc.cast(instant(pc.cast(value, pa.timestamp(target.unit)), zone), target)
        if pa.types.is_timestamp(value.type) and pa.types.is_timestamp(target) and _finer(value.type, target):
            # to a lower precision Flink drops the digits past it (the earlier instant)
            unit = {"s": "second", "ms": "millisecond", "us": "microsecond"}[target.unit]
            return pc.cast(pc.floor_temporal(value, unit=unit), target)
        if is_string(value.type) and pa.types.is_timestamp(target) and target.unit == "s":
            # text with a fraction of a second is read, then the fraction dropped
            return _cast(pc.cast(value, pa.timestamp("ns", target.tz)), target, safe, zone)
        if pa.types.is_struct(value.type) and pa.types.is_struct(target):
            return _cast_row(value, target, safe, zone)
        if pa.types.is_list(value.type) and pa.types.is_list(target) and _has_row(target.value_type):
            return _cast_list(value, target, safe, zone)
        if pa.types.is_map(value.type) and pa.types.is_map(target) and _has_row(target):
            return _cast_map(value, target, safe, zone)
        if pa.types.is_string(value.type) and pa.types.is_boolean(target):
            return _string_to_bool(value)
        if is_string(value.type) and pa.types.is_date(target):
            return _string_to_date(value, target, safe)
        if is_string(value.type) and is_numeric(target):
            # Flink trims, and reads '3.75' as INT 3 (BinaryStringDataUtil)
            value = pc.utf8_trim_whitespace(value)
            if pa.types.is_integer(target):
                try:
                    return pc.cast(value, target)
                except pa.ArrowInvalid:
                    # digits with a fraction are truncated; anything else (an exponent) is no INT
                    plain = pc.match_substring_regex(value, pattern=r"^[+-]?(\d+\.?\d*|\.\d+)$")
                    if not pc.all(pc.or_kleene(plain, pc.is_null(value))).as_py():
                        raise
                    return cast_number(pc.cast(value, pa.decimal128(38, 9)), target)
        if is_numeric(value.type) and (pa.types.is_integer(target) or pa.types.is_decimal(target)):
            return cast_number(value, target)
        if pa.types.is_decimal(value.type) and pa.types.is_floating(target):
            return cast_to_float(value, target)
        if is_numeric(value.type) and pa.types.is_floating(target):
            return pc.cast(value, target, safe=False)  # to the nearest FLOAT/DOUBLE, as Java
        if is_string(value.type) and pa.types.is_time(target):
            return pc.cast(string_to_time(value), target)
        if is_string(target):
            text = to_string(value)
            if text is not None:
                return text
        return pc.cast(value, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        if safe:
            return _try_cast_each(value, target, zone)
        raise DataError(f"CAST to {sql_type_name(target)} failed: {e}") from None


_UNIT_ORDER = {"s": 0, "ms": 1, "us": 2, "ns": 3}


def _finer(source: pa.TimestampType, target: pa.TimestampType) -> bool:
    return _UNIT_ORDER[source.unit] > _UNIT_ORDER[target.unit]


def _fit_length(text: Value, length: int, fixed: bool) -> Value:
    """Flink's CAST to VARCHAR(n) keeps the first n characters; CAST to CHAR(n) also pads with
    spaces to n."""
    text = pc.utf8_slice_codeunits(text, 0, length)
    return pc.utf8_rpad(text, width=length, padding=" ") if fixed else text


def _cast_row(value: Value, target: pa.DataType, safe: bool, zone: str) -> Value:
    """A ROW cast field by field, by position: the target's names replace the value's."""
    if isinstance(value, pa.Scalar):
        return _cast_row(pa.array([value.as_py()], value.type), target, safe, zone)[0]
    if isinstance(value, pa.ChunkedArray):
        value = value.combine_chunks()
    fields = [_cast(pc.struct_field(value, [i]), f.type, safe, zone) for i, f in enumerate(target)]
    return pa.StructArray.from_arrays(fields, fields=list(target), mask=value.is_null() if value.null_count else None)


def _has_row(t: pa.DataType) -> bool:
    """Whether a ROW is in ``t``, whose fields Arrow's own cast would match by name, not position."""
    if pa.types.is_list(t):
        return _has_row(t.value_type)
    if pa.types.is_map(t):
        return _has_row(t.key_type) or _has_row(t.item_type)
    return pa.types.is_struct(t)


def _cast_list(value: Value, target: pa.DataType, safe: bool, zone: str) -> Value:
    """An ARRAY cast element by element with :func:`_cast` (so its ROWs are cast by position, as in Flink)."""
    if isinstance(value, pa.Scalar):
        return _cast_list(pa.array([value.as_py()], value.type), target, safe, zone)[0]
    if isinstance(value, pa.ChunkedArray):
        value = value.combine_chunks()
    elements = _cast(pc.list_flatten(value), target.value_type, safe, zone)
    offsets = pc.cumulative_sum(pc.list_value_length(value).fill_null(0))
    offsets = pa.concat_arrays([pa.array([0], pa.int32()), offsets.cast(pa.int32())])
    return pa.ListArray.from_arrays(offsets, elements, type=target, mask=value.is_null() if value.null_count else None)


def _cast_map(value: Value, target: pa.DataType, safe: bool, zone: str) -> Value:
    """A MAP cast key by key and value by value with :func:`_cast` (ROWs in it by position, as in Flink)."""
    if isinstance(value, pa.Scalar):
        return _cast_map(pa.array([value.as_py()], value.type), target, safe, zone)[0]
    if isinstance(value, pa.ChunkedArray):
        value = value.combine_chunks()
    value = pa.concat_arrays([value])  # a slice's offsets and entries, from 0
    keys = _cast(value.keys, target.key_type, safe, zone)
    items = _cast(value.items, target.item_type, safe, zone)
    return pa.MapArray.from_arrays(value.offsets, keys, items, type=target,
                                   mask=value.is_null() if value.null_count else None)


def _string_to_date(value: Value, target: pa.DataType, safe: bool) -> Value:
    """Flink's date parsing: trimmed, 'yyyy[-M[-d]]' with any time after a space or 'T' ignored
    ('42' is 0042-01-01, '2024-02-29 23:59:59' is 2024-02-29)."""
    text = pc.replace_substring_regex(pc.utf8_trim_whitespace(value), pattern=r"[ T].*$", replacement="")
    text = pc.replace_substring_regex(text, pattern=r"^(\d{1,4})$", replacement=r"\1-01-01")
    text = pc.replace_substring_regex(text, pattern=r"^(\d{1,4}-\d{1,2})$", replacement=r"\1-01")
    parsed = pc.strptime(text, format="%Y-%m-%d", unit="s", error_is_null=True)
    if not safe and pc.sum(pc.and_(pc.is_valid(value), pc.is_null(parsed))).as_py():
        raise pa.ArrowInvalid("a string is not a date (yyyy-MM-dd)")
    return pc.cast(parsed, target)


def _string_to_bool(value: Value) -> Value:
    lowered = pc.utf8_lower(pc.utf8_trim_whitespace(value))
    true = pc.is_in(lowered, value_set=pa.array(["true", "t", "1", "yes"]))
    false = pc.is_in(lowered, value_set=pa.array(["false", "f", "0", "no"]))
    return pc.if_else(true, True, pc.if_else(false, False, pa.scalar(None, pa.bool_())))


def _try_cast_each(value: Value, target: pa.DataType, zone: str) -> Value:
    """Slow path for TRY_CAST, reached only when the vectorized cast failed."""
    if isinstance(value, pa.Scalar):
        try:
            return _cast(value, target, False, zone)
        except DataError:
            return pa.scalar(None, target)
    out = []
    for item in value:
        try:
            out.append(_cast(item, target, False, zone).as_py())
        except DataError:
            out.append(None)
    return pa.array(out, target)


_ROWS_SEARCHED = 100_000  # past this a failing batch is reported without its row


def _guarded(expr: Expr, run: Compiled) -> Compiled:
    """``run`` whose failure names the expression and the offending row's column values.

    The innermost failing call reports (an ExpressionError passes through the calls around it);
    only on failure are the batch's rows evaluated one by one to find the offending one.
    """

    def guarded(batch: pa.RecordBatch) -> Value:
        try:
            return run(batch)
        except (ExpressionError, ArgumentTypeError):
            raise  # described already, or a misused argument the planner reports at its position
        except Exception as e:  # noqa: BLE001  (a kernel's or a UDF's error, reported with its row)
            raise ExpressionFailure(expr, run, batch, e) from e

    return guarded


class ExpressionFailure(ExpressionError):
    """An ExpressionError whose message (which looks for the offending row) is only worked out
    when shown: a CASE that catches it to evaluate its branches lazily never pays for it."""

    def __init__(self, expr: Expr, run: Compiled, batch: pa.RecordBatch, error: Exception) -> None:
        super().__init__()
        self.failed = (expr, run, batch, error)
        self.message: str | None = None

    def __str__(self) -> str:
        if self.message is None:
            self.message = _failure(*self.failed)
        return self.message

    def __reduce__(self) -> tuple[type, tuple[str]]:
        return ExpressionError, (str(self),)


def _failure(expr: Expr, run: Compiled, batch: pa.RecordBatch, error: Exception) -> str:
    reason = str(error) if isinstance(error, DataError) else f"{type(error).__name__}: {error}"
    text = re.sub(r"\$\d+:", "", str(expr))
    columns = sorted(referenced_columns(expr))
    for i in range(min(batch.num_rows, _ROWS_SEARCHED)):
        try:
            run(batch.slice(i, 1))
        except Exception:  # noqa: BLE001, S112  (this is the row that fails)
            values = ", ".join(f"{batch.schema.field(c).name}={_shown(batch.column(c)[i].as_py())}" for c in columns)
            return f"{reason}: evaluating {text} on the row with {values}" if values else f"{reason}: evaluating {text}"
    return f"{reason}: evaluating {text}"


def _typed(e: Expr, t: pa.DataType) -> Expr:
    return e if e.type == t else Cast(e, t)


def _shown(value: object) -> str:
    return repr(value) if isinstance(value, str) else "NULL" if value is None else str(value)


class _Memo:
    """A compiled subexpression that keeps its last batch's value: its repeats in the same
    expressions, evaluated on the same batch, take the value instead of running the kernels again.
    A value carried over to a filtered batch (SharedSubexpressions.carry) is filtered when asked."""

    __slots__ = ("run", "batch", "value", "mask")

    def __init__(self, run: Compiled) -> None:
        self.run = run
        self.batch: pa.RecordBatch | None = None  # held, so its identity is not reused
        self.value: Value | None = None
        self.mask: pa.Array | None = None

    def __call__(self, batch: pa.RecordBatch) -> Value:
        if batch is self.batch:
            if self.mask is not None:
                if isinstance(self.value, pa.Array | pa.ChunkedArray):
                    self.value = self.value.filter(self.mask)
                self.mask = None
            return self.value
        value = self.run(batch)
        self.batch, self.value, self.mask = batch, value, None
        return value


class SharedSubexpressions:
    """The subexpressions that occur more than once among a Calc's predicate and projection,
    each evaluated once per batch (as Flink's generated code reuses a common expression's
    result): q21's ``lower(channel)`` in five places and its REGEXP_EXTRACT in the filter
    and again in the projection.

    Shared are calls and casts of built-in row-wise functions: not those that keep per-site
    state (RAND, UUID), nor Python UDFs.  A value is computed only where the expression is
    evaluated anyway; one computed on a whole batch serves the rows the predicate keeps, filtered
    (``carry``), since a row-wise function's value on a row does not depend on the other rows.
    """

    def __init__(self, exprs: list[Expr]) -> None:
        seen: set[Expr] = set()
        self.repeated: set[Expr] = set()
        stack = list(exprs)
        while stack:
            e = stack.pop()
            stack.extend(children(e))
            if not isinstance(e, Call | Cast) or (isinstance(e, Call) and _has_site(e)):
                continue
            try:
                if e in seen:
                    self.repeated.add(e)
                else:
                    seen.add(e)
            except TypeError:  # an unhashable literal (an ARRAY constant) inside: not shared
                continue
        self.memos: dict[Expr, _Memo] = {}

    def memo(self, expr: Expr, compile_: Callable[[], Compiled]) -> Compiled:
        """The compiled ``expr``, the same memo for every occurrence of a repeated one."""
        try:
            if expr not in self.repeated:
                return compile_()
        except TypeError:
            return compile_()
        if expr not in self.memos:
            self.memos[expr] = _Memo(compile_())
        return self.memos[expr]

    def carry(self, batch: pa.RecordBatch, mask: pa.Array, filtered: pa.RecordBatch) -> None:
        """Values computed on ``batch`` serve ``filtered`` (= ``batch.filter(mask)``), filtered on use."""
        for m in self.memos.values():
            if m.batch is batch and m.mask is None:
                m.batch, m.mask = filtered, mask


def _has_site(call: Call) -> bool:
    """Whether a call must run at each of its places: a per-site kernel (RAND, UUID) or user code
    (a Python UDF or table function may count its calls or have other side effects)."""
    fn = lookup(call.name)
    name = call.name.upper()
    return fn is None or fn.per_site or name in USER_SCALARS or name == table_function_call(name[: -len(" (TABLE FUNCTION)")])


def compile_expr(expr: Expr, shared: SharedSubexpressions | None = None) -> Compiled:
    """``expr`` as a function of a batch; with ``shared``, repeated subexpressions run once a batch."""
    if shared is not None and isinstance(expr, Call | Cast):
        return shared.memo(expr, lambda: _compile(expr, shared))
    return _compile(expr, shared)


def _compile(expr: Expr, shared: SharedSubexpressions | None) -> Compiled:
    if isinstance(expr, ColumnRef):
        index = expr.index
        return lambda batch: batch.column(index)
    if isinstance(expr, Literal):
        scalar = pa.scalar(expr.value, expr.type)
        return lambda batch: scalar
    if isinstance(expr, Cast):
        inner = compile_expr(expr.arg, shared)
        target, safe, zone = expr.type, expr.safe, expr.zone or "UTC"
        if expr.length is not None:
            length, fixed = expr.length, expr.fixed
            return _guarded(expr, lambda batch: _fit_length(_cast(inner(batch), target, safe, zone), length, fixed))
        return _guarded(expr, lambda batch: _cast(inner(batch), target, safe, zone))
    if isinstance(expr, Call) and expr.name == "IF":
        # IF(c, a, b) evaluates only the branch each row takes, as CASE WHEN c THEN a ELSE b END
        cond, yes, no = expr.args
        return compile_expr(Case(((_typed(cond, pa.bool_()), _typed(yes, expr.type)),), _typed(no, expr.type), expr.type),
                            shared)
    if isinstance(expr, Call):
        fn = lookup(expr.name)
        assert fn is not None, expr.name
        args = [compile_expr(a, shared) for a in expr.args]
        kernel = fn.kernel
        if fn.per_site:
            site = kernel()
            return _guarded(expr, lambda batch: site(*[a(batch) for a in args], rows=batch.num_rows))
        if fn.zoned:
            zone = expr.zone or "UTC"
            return _guarded(expr, lambda batch: kernel(*[a(batch) for a in args], zone=zone))
        return _guarded(expr, lambda batch: kernel(*[a(batch) for a in args]))
    if isinstance(expr, Case):
        whens = [(compile_expr(c, shared), compile_expr(v, shared)) for c, v in expr.whens]
        default = compile_expr(expr.default, shared) if expr.default is not None else None
        out_type = expr.type

        def eager(batch: pa.RecordBatch) -> Value:
            result: Value = default(batch) if default is not None else pa.scalar(None, out_type)
            conds = [cond(batch) for cond, _ in whens]
            values = [val(batch) for _, val in whens]
            if all(isinstance(c, pa.Array) for c in conds) and all(
                isinstance(v, pa.Array | pa.Scalar) and v.type == out_type for v in (*values, result)
            ):
                # one kernel pass over all arms (the first true arm wins, else the default)
                mask = pc.make_struct(*[pc.fill_null(c, False) for c in conds],
                                      field_names=[str(i) for i in range(len(conds))])
                return pc.case_when(mask, *values, result)
            # arms of other types or constant conditions: fold from the last arm, so the first
            # matching arm wins
            for c, v in zip(reversed(conds), reversed(values), strict=True):
                result = pc.if_else(pc.fill_null(c, False), v, result)
            return result

        def lazy(batch: pa.RecordBatch) -> Value:
            """Each branch over only the rows that take it, as Flink's generated if/else does:
            CASE WHEN i <> 0 THEN 10 / i END must not divide by the zero it guards against."""
            result = pa.nulls(batch.num_rows, out_type)
            pending = pa.array(np.ones(batch.num_rows, dtype=bool))
            arms = [(cond, val) for cond, val in whens] + ([(None, default)] if default is not None else [])
            for cond, val in arms:
                if cond is None:
                    taken = pending
                else:
                    taken = pc.and_(pending, pc.fill_null(as_array(cond(batch), batch.num_rows, pa.bool_()), False))
                    pending = pc.and_(pending, pc.invert(taken))
                if pc.any(taken).as_py():
                    values = as_array(val(batch.filter(taken)), pc.sum(taken).as_py(), out_type)
                    result = pc.replace_with_mask(result, taken, values)
            return result

        def case(batch: pa.RecordBatch) -> Value:
            try:
                return eager(batch)
            except ExpressionError:
                return lazy(batch)  # a branch failed, maybe on rows it does not take

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

    def __init__(self, exprs: list[Expr], names: list[str], shared: SharedSubexpressions | None = None) -> None:
        self.exprs = exprs
        shared = shared if shared is not None else SharedSubexpressions(exprs)
        self.compiled = [compile_expr(e, shared) for e in exprs]
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

    def __init__(self, expr: Expr, shared: SharedSubexpressions | None = None) -> None:
        self.compiled = compile_expr(expr, shared if shared is not None else SharedSubexpressions([expr]))

    def __call__(self, batch: pa.RecordBatch) -> pa.Array:
        return as_array(self.compiled(batch), batch.num_rows, pa.bool_())
