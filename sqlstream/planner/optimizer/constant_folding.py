"""Constant folding: a deterministic call whose arguments are all literals becomes its value."""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa

from sqlstream.core.evaluator import compile_expr
from sqlstream.core.expressions import Call, Case, Cast, Expr, Literal, children
from sqlstream.planner.logical import LogicalNode

# functions whose value changes between calls: never folded
NON_DETERMINISTIC = {"CURRENT_TIMESTAMP", "NOW", "LOCALTIMESTAMP", "CURRENT_DATE", "CURRENT_TIME", "RAND", "RAND_INTEGER", "UUID",
                     "PROCTIME", "CURRENT_WATERMARK"}


def fold(e: Expr) -> Expr:
    if isinstance(e, Call):
        args = tuple(fold(a) for a in e.args)
        e = replace(e, args=args)
        if args and all(isinstance(a, Literal) for a in args) and e.name not in NON_DETERMINISTIC:
            try:
                value = compile_expr(e)(pa.record_batch([pa.array([0])], names=["x"]))
            except Exception:  # noqa: BLE001 - leave it to runtime, which reports the error with context
                return e
            return _literal(value, e)
        return e
    if isinstance(e, Cast):
        arg = fold(e.arg)
        if isinstance(arg, Literal) and arg.value is None:
            return Literal(None, e.type)  # CAST(NULL AS t): a typed NULL
        e = replace(e, arg=arg)
        if isinstance(arg, Literal):
            try:
                # through the evaluator, which applies the session zone of a cast to or from TIMESTAMP_LTZ
                value = compile_expr(e)(pa.record_batch([pa.array([0])], names=["x"]))
            except Exception:  # noqa: BLE001 - leave it to runtime, which reports the error with context
                return e
            return _literal(value, e)
        return e
    if isinstance(e, Case):
        return Case(tuple((fold(c), fold(v)) for c, v in e.whens), None if e.default is None else fold(e.default), e.type)
    return e


def _literal(value: pa.Scalar | pa.Array, e: Call | Cast) -> Expr:
    """``e``'s constant value as a literal, or ``e`` itself where Python holds no such value: a
    nanosecond timestamp with a fraction finer than microseconds has no ``datetime`` (pyarrow gives
    one only through pandas, which sqlstream does not depend on), so it is computed at run time."""
    if not isinstance(value, pa.Scalar):
        return e
    try:
        return Literal(value.cast(e.type).as_py(), e.type)
    except ValueError:
        return e


def deterministic(e: Expr) -> bool:
    if isinstance(e, Call) and e.name in NON_DETERMINISTIC:
        return False
    return all(deterministic(c) for c in children(e))


def fold_constants(node: LogicalNode) -> LogicalNode:
    """Every expression of every node folded, bottom-up."""
    return node.with_inputs([fold_constants(i) for i in node.inputs]).map_expressions(fold)
