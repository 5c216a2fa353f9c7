"""Registering Python UDFs so the binder and the runtime find them like built-ins.

Scalar UDFs go into the scalar function registry with a kernel that calls
the Python function (per batch if vectorized, else per row); aggregate UDFs
go into their own registry that planner.binder and runtime.aggregates read.
A table function is a function from a row to the ARRAY<ROW<...>> of the rows it
yields, under an internal name (``table_function_call``): LATERAL TABLE(f(x))
unnests that array, so it runs wherever UNNEST does.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from sqlstream.core import functions
from sqlstream.core.errors import CatalogError, PlanError
from sqlstream.core.types import parse_type
from sqlstream.core.udf import (
    RESULT_TYPE,
    RESULT_TYPES,
    VECTORIZED,
    AggregateFunction,
    TableFunction,
)


@dataclass(frozen=True)
class UserAggregate:
    name: str
    implementation: AggregateFunction
    result_type: pa.DataType


USER_AGGREGATES: dict[str, UserAggregate] = {}
USER_SCALARS: set[str] = set()
# table function name -> its result columns' types
USER_TABLE_FUNCTIONS: dict[str, list[pa.DataType]] = {}


def table_function_call(name: str) -> str:
    """The scalar function that computes table function ``name``'s rows as an ARRAY<ROW<...>>; not
    a name SQL text can call by accident (table functions are only called in LATERAL TABLE)."""
    return f"{name.upper()} (TABLE FUNCTION)"


def _table_kernel(name: str, fn: Callable[..., Any], row: pa.DataType) -> Callable[..., pa.Array]:
    """Calls the generator once per input row (a Python table function has no batch form) and
    collects what it yields into one list of rows per input row."""
    width = row.num_fields

    def as_row(item: Any) -> dict[str, Any]:
        values = item if isinstance(item, tuple | list) else (item,) if width == 1 else None
        if values is None or len(values) != width:
            got = "a single value" if values is None else f"{len(values)} values"
            raise ValueError(f"table function {name} yielded {got} ({item!r}) where its result_types "
                             f"declare {width} column(s)")
        return {f"f{i}": v for i, v in enumerate(values)}

    def kernel(*args: pa.Array | pa.Scalar) -> pa.Array:
        length = next((len(a) for a in args if not isinstance(a, pa.Scalar)), 1)
        columns = [[a.as_py()] * length if isinstance(a, pa.Scalar) else a.to_pylist() for a in args]
        rows = zip(*columns, strict=True) if columns else ((),) * length
        return pa.array([[as_row(item) for item in fn(*r) or ()] for r in rows], pa.list_(row))

    return kernel


def _register_table_function(key: str, obj: Any, declared: list[str]) -> None:
    if not declared:
        raise PlanError(f"table function '{key}' declares no result types; use @udtf(result_types=[...])")
    types = [parse_type(t) for t in declared]
    row = pa.struct([pa.field(f"f{i}", t) for i, t in enumerate(types)])
    fn = obj.eval if isinstance(obj, TableFunction) else obj
    functions.register(table_function_call(key), lambda _types: pa.list_(row), _table_kernel(key, fn, row), 0, None)
    USER_TABLE_FUNCTIONS[key] = types


def load(reference: str) -> Any:
    """'module.attribute' -> the object (an AggregateFunction class is instantiated)."""
    module_name, _, attr = reference.rpartition(".")
    if not module_name:
        raise CatalogError(f"function reference '{reference}' must be 'module.attribute'")
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise CatalogError(f"cannot load function '{reference}': {e}") from None
    if isinstance(obj, type) and issubclass(obj, AggregateFunction | TableFunction):
        obj = obj()
    return obj


def _row_kernel(fn: Callable, result: pa.DataType) -> Callable[..., pa.Array]:
    def kernel(*args: pa.Array | pa.Scalar) -> pa.Array:
        length = next((len(a) for a in args if not isinstance(a, pa.Scalar)), 1)
        columns = [[a.as_py()] * length if isinstance(a, pa.Scalar) else a.to_pylist() for a in args]
        return pa.array([fn(*row) for row in zip(*columns, strict=True)] if columns else [fn() for _ in range(length)], result)

    return kernel


def _vector_kernel(fn: Callable, result: pa.DataType) -> Callable[..., pa.Array]:
    def kernel(*args: pa.Array | pa.Scalar) -> pa.Array:
        out = fn(*args)
        return out if isinstance(out, pa.Array | pa.ChunkedArray | pa.Scalar) else pa.array(out, result)

    return kernel


def register(name: str, obj: Any, result_type: str | None = None) -> None:
    key = name.upper()
    if key in functions.REGISTRY and key not in USER_SCALARS or key in ("COUNT", "SUM", "MIN", "MAX", "AVG"):
        raise CatalogError(f"function '{name}' is a built-in function and cannot be redefined")
    if isinstance(obj, AggregateFunction):
        USER_AGGREGATES[key] = UserAggregate(key, obj, parse_type(result_type or obj.result_type))
        return
    if isinstance(obj, TableFunction) or hasattr(obj, RESULT_TYPES):
        declared = getattr(obj, RESULT_TYPES, None) or list(getattr(obj, "result_types", ()))
        _register_table_function(key, obj, [result_type] if result_type else declared)
        return
    if not callable(obj):
        raise CatalogError(f"'{name}' is neither a function nor an AggregateFunction")
    declared = result_type or getattr(obj, RESULT_TYPE, None)
    if declared is None:
        raise PlanError(f"function '{name}' declares no result type; decorate it with @udf(result_type=...)")
    result = parse_type(declared)
    kernel = _vector_kernel(obj, result) if getattr(obj, VECTORIZED, False) else _row_kernel(obj, result)
    functions.register(key, lambda types: result, kernel, 0, None)
    USER_SCALARS.add(key)


def unregister(name: str) -> bool:
    key = name.upper()
    if key in USER_AGGREGATES:
        del USER_AGGREGATES[key]
        return True
    if key in USER_SCALARS:
        USER_SCALARS.discard(key)
        functions.REGISTRY.pop(key, None)
        return True
    if key in USER_TABLE_FUNCTIONS:
        del USER_TABLE_FUNCTIONS[key]
        functions.REGISTRY.pop(table_function_call(key), None)
        return True
    return False
