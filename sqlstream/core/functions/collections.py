"""Flink's collection functions and operators over ARRAY, MAP and ROW values.

Constructors (``ARRAY[...]``, ``MAP[...]``, ``ROW(...)``), element access (``a[i]``: 1-based,
NULL past the end; ``m[k]``; ``r.f``), equality by value, and CARDINALITY, ELEMENT,
ARRAY_CONTAINS, ARRAY_DISTINCT, MAP_KEYS, MAP_VALUES, SPLIT, ARRAY_JOIN and the further ARRAY_*/MAP_*
functions registered at the end, with Flink 2.3's results (pinned by the reference groups ``nested``
and ``nested_functions``).

Every kernel works on the flattened child arrays of Arrow list, map and struct arrays (offsets,
``list_parent_indices``, ``take``), never row by row.  A kernel whose arguments are all scalars
(constants) answers a scalar, as the evaluator expects of constant expressions.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.errors import DataError
from sqlstream.core.functions import ArgumentTypeError, Value, common_type, register
from sqlstream.core.types import is_string, sql_type_name

# The operators a[i] / m[k] and r.f, by names no SQL call can spell (SHOW FUNCTIONS leaves them out)
ITEM = "$ITEM"
FIELD = "$FIELD"


def _rowwise(kernel: Callable[..., pa.Array]) -> Callable[..., Value]:
    """``kernel`` over arrays of one length: scalars are broadcast to the arrays' length, and a
    call with scalars only answers a scalar."""

    @functools.wraps(kernel)
    def run(*args: Value) -> Value:
        arrays = [a for a in args if not isinstance(a, pa.Scalar)]
        if not arrays:
            return kernel(*[pa.array([a.as_py()], a.type) for a in args])[0]
        n = len(arrays[0])
        return kernel(*[_broadcast(a, n) for a in args])

    return run


def _broadcast(value: Value, n: int) -> pa.Array:
    if isinstance(value, pa.ChunkedArray):
        return value.combine_chunks()
    if isinstance(value, pa.Scalar):
        return pa.array([value.as_py()] * n, value.type) if value.is_valid else pa.nulls(n, value.type)
    return value


def _lengths(arr: pa.Array) -> np.ndarray:
    """Entries per list or map value (0 where NULL)."""
    offsets = arr.offsets.to_numpy()
    out = np.diff(offsets)
    if arr.null_count:
        out = np.where(arr.is_null().to_numpy(zero_copy_only=False), 0, out)
    return out


def _values(arr: pa.Array) -> pa.Array:
    """The elements of a list array (of its slice), in order."""
    return arr.flatten()


def _parents(arr: pa.Array) -> np.ndarray:
    """Per flattened element, the row it belongs to."""
    return np.repeat(np.arange(len(arr)), _lengths(arr))


def _lists(lengths: np.ndarray, values: pa.Array, type_: pa.DataType, nulls: pa.Array | None) -> pa.Array:
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    mask = None if nulls is None or not nulls.null_count else nulls.is_null()
    return pa.ListArray.from_arrays(offsets, values, type=type_, mask=mask)


# ---------------------------------------------------------------- typing


def _element_type(types: list[pa.DataType], what: str) -> pa.DataType:
    out = types[0]
    for t in types[1:]:
        c = common_type(out, t)
        if c is None:
            raise ArgumentTypeError(f"{what} cannot combine " + ", ".join(sql_type_name(x) for x in types))
        out = c
    return pa.string() if pa.types.is_null(out) else out


def _array_type(types: list[pa.DataType]) -> pa.DataType:
    return pa.list_(_element_type(types, "ARRAY[...]"))


def _map_type(types: list[pa.DataType]) -> pa.DataType:
    if len(types) % 2:
        raise ArgumentTypeError("MAP[...] needs key and value pairs: an even number of arguments")
    return pa.map_(_element_type(types[0::2], "MAP[...] keys"), _element_type(types[1::2], "MAP[...] values"))


def _row_type(types: list[pa.DataType]) -> pa.DataType:
    # Flink names the fields of a ROW(...) value EXPR$0, EXPR$1, ...
    return pa.struct([pa.field(f"EXPR${i}", pa.string() if pa.types.is_null(t) else t) for i, t in enumerate(types)])


def _item_type(types: list[pa.DataType]) -> pa.DataType:
    container, index = types
    if pa.types.is_list(container):
        if not (pa.types.is_integer(index) or pa.types.is_null(index)):
            raise ArgumentTypeError(f"an ARRAY index must be an integer, got {sql_type_name(index)}")
        return container.value_type
    if pa.types.is_map(container):
        if common_type(container.key_type, index) is None or (
                not pa.types.is_null(index) and is_string(container.key_type) != is_string(index)):
            raise ArgumentTypeError(
                f"a key of {sql_type_name(container)} cannot be {sql_type_name(index)}")
        return container.item_type
    raise ArgumentTypeError(f"[] applies to an ARRAY or a MAP, not to {sql_type_name(container)}")


def _field_type(types: list[pa.DataType], constants: list[object]) -> pa.DataType:
    row, _ = types
    name = constants[1]
    if not pa.types.is_struct(row):
        raise ArgumentTypeError(f"field access '.{name}' applies to a ROW, not to {sql_type_name(row)}")
    index = row.get_field_index(name)
    if index < 0:
        raise ArgumentTypeError(f"{sql_type_name(row)} has no field '{name}'")
    return row.field(index).type


def _needs(kind: str, check: Callable[[pa.DataType], bool]) -> Callable[[pa.DataType], None]:
    def require(t: pa.DataType) -> None:
        if not check(t):
            raise ArgumentTypeError(f"expected {kind}, got {sql_type_name(t)}")

    return require


_array_arg = _needs("an ARRAY", pa.types.is_list)
_map_arg = _needs("a MAP", pa.types.is_map)


def _cardinality_type(types: list[pa.DataType]) -> pa.DataType:
    _needs("an ARRAY or a MAP", lambda t: pa.types.is_list(t) or pa.types.is_map(t))(types[0])
    return pa.int32()


def _element_of(types: list[pa.DataType]) -> pa.DataType:
    _array_arg(types[0])
    return types[0].value_type


def _contains_type(types: list[pa.DataType]) -> pa.DataType:
    _array_arg(types[0])
    if common_type(types[0].value_type, types[1]) is None:
        raise ArgumentTypeError(
            f"ARRAY_CONTAINS cannot look for {sql_type_name(types[1])} in {sql_type_name(types[0])}")
    return pa.bool_()


def _same_array(types: list[pa.DataType]) -> pa.DataType:
    _array_arg(types[0])
    return types[0]


def _keys_type(types: list[pa.DataType]) -> pa.DataType:
    _map_arg(types[0])
    return pa.list_(types[0].key_type)


def _values_type(types: list[pa.DataType]) -> pa.DataType:
    _map_arg(types[0])
    return pa.list_(types[0].item_type)


# ---------------------------------------------------------------- kernels


def _interleaved(columns: list[pa.Array]) -> pa.Array:
    """Row i's values of every column, then row i+1's: the children of ARRAY[...] or MAP[...]."""
    n, k = len(columns[0]), len(columns)
    order = (np.arange(k)[None, :] * n + np.arange(n)[:, None]).ravel()
    return pa.concat_arrays(columns).take(pa.array(order))


def _array(*args: Value) -> Value:
    def build(*columns: pa.Array) -> pa.Array:
        t = _array_type([c.type for c in columns])
        columns = [c.cast(t.value_type) if c.type != t.value_type else c for c in columns]
        return _lists(np.full(len(columns[0]), len(columns)), _interleaved(columns), t, None)

    return _rowwise(build)(*args)


def _map(*args: Value) -> Value:
    def build(*columns: pa.Array) -> pa.Array:
        t = _map_type([c.type for c in columns])
        keys = [c.cast(t.key_type) for c in columns[0::2]]
        values = [c.cast(t.item_type) for c in columns[1::2]]
        flat_keys = _interleaved(keys)
        if flat_keys.null_count:
            raise DataError("a MAP key is NULL")
        n = len(columns[0])
        flat_values = _interleaved(values)
        lengths = np.full(n, len(keys))
        if len(keys) > 1:
            # a key given twice keeps its last value, once (Flink's MAP[...] is a map)
            rows = np.repeat(np.arange(n), len(keys))
            table = pa.table({"r": rows, "k": flat_keys, "i": np.arange(len(rows))})
            last = np.sort(table.group_by(["r", "k"], use_threads=False).aggregate([("i", "max")])
                           .column("i_max").to_numpy())
            if len(last) < len(rows):
                flat_keys, flat_values = flat_keys.take(pa.array(last)), flat_values.take(pa.array(last))
                lengths = np.bincount(rows[last], minlength=n)
        offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
        return pa.MapArray.from_arrays(offsets, flat_keys, flat_values, type=t)

    return _rowwise(build)(*args)


def _row(*args: Value) -> Value:
    def build(*columns: pa.Array) -> pa.Array:
        t = _row_type([c.type for c in columns])
        return pa.StructArray.from_arrays([c.cast(f.type) for c, f in zip(columns, t, strict=True)], fields=list(t))

    return _rowwise(build)(*args)


@_rowwise
def _item(container: pa.Array, index: pa.Array) -> pa.Array:
    if pa.types.is_map(container.type):
        return _map_get(container, index)
    return _array_get(container, index)


def _array_get(arr: pa.Array, index: pa.Array) -> pa.Array:
    """a[i]: 1-based; NULL where a or i is NULL or i is outside 1..length (a constant index below 1
    is refused at plan time, as Flink's validator does; a computed one gives NULL, as Flink)."""
    idx = pc.fill_null(pc.cast(index, pa.int64()), 0).to_numpy(zero_copy_only=False)  # NULL: no element
    valid_idx = idx >= 1
    idx = np.where(valid_idx, idx, 1)
    lengths = _lengths(arr)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])  # in the flattened elements
    hit = valid_idx & arr.is_valid().to_numpy(zero_copy_only=False) & (idx <= lengths)
    positions = pa.array(np.where(hit, starts + idx - 1, 0), mask=~hit)
    return _values(arr).take(positions) if len(_values(arr)) else pa.nulls(len(arr), arr.type.value_type)


def _map_get(m: pa.Array, key: pa.Array) -> pa.Array:
    """m[k]: the value of key k (the last entry with it), NULL if there is none."""
    entries = _entries(m)
    parents = _parents(entries)
    flat = _values(entries)
    keys, items = flat.field(0), flat.field(1)
    wanted = key.cast(m.type.key_type).take(pa.array(parents, pa.int64()))
    match = pc.fill_null(pc.equal(keys, wanted), False).to_numpy(zero_copy_only=False)
    found = np.full(len(m), -1, np.int64)
    hits = np.flatnonzero(match)
    found[parents[hits]] = hits  # a later entry of the same row overwrites: the last wins
    if not len(items):
        return pa.nulls(len(m), m.type.item_type)
    return items.take(pa.array(np.where(found >= 0, found, 0), mask=found < 0))


def _entries(m: pa.Array) -> pa.Array:
    """A map array as the list of its entries (struct<key, value>), for the list kernels."""
    entries = pa.StructArray.from_arrays([m.keys, m.items], ["key", "value"])
    offsets = pa.array(m.offsets.to_numpy())  # a fresh array: Arrow takes no mask with sliced offsets
    return pa.ListArray.from_arrays(offsets, entries, mask=m.is_null() if m.null_count else None)


def _field(row: Value, name: Value) -> Value:
    """r.f: NULL where the row is NULL."""
    if isinstance(row, pa.Scalar):
        return row[name.as_py()] if row.is_valid else pa.scalar(None, row.type.field(name.as_py()).type)
    if isinstance(row, pa.ChunkedArray):
        row = row.combine_chunks()
    return pc.struct_field(row, name.as_py())


@_rowwise
def _cardinality(arr: pa.Array) -> pa.Array:
    if pa.types.is_map(arr.type):
        arr = _entries(arr)
    return pa.array(_lengths(arr).astype(np.int32), mask=arr.is_null().to_numpy(zero_copy_only=False))


@_rowwise
def _element(arr: pa.Array) -> pa.Array:
    """The only element of an array; NULL for an empty or NULL array, an error for more."""
    lengths = _lengths(arr)
    if (lengths > 1).any():
        raise DataError("Array has more than one element")
    return _array_get(arr, pa.array(np.ones(len(arr), np.int64)))


@_rowwise
def _array_contains(arr: pa.Array, needle: pa.Array) -> pa.Array:
    """Whether the array holds the value; looking for NULL finds a NULL element (Flink)."""
    parents = _parents(arr)
    values = _values(arr)
    wanted = needle.cast(values.type).take(pa.array(parents, pa.int64()))
    equal = pc.fill_null(pc.equal(values, wanted), False)
    both_null = pc.and_(pc.is_null(values), pc.is_null(wanted))
    hits = pc.or_(equal, both_null).to_numpy(zero_copy_only=False)
    found = np.bincount(parents[hits], minlength=len(arr)) > 0
    return pa.array(found, mask=arr.is_null().to_numpy(zero_copy_only=False))


@_rowwise
def _array_distinct(arr: pa.Array) -> pa.Array:
    """Each array's distinct elements (NULL once) in the order of their first occurrence."""
    parents = _parents(arr)
    values = _values(arr)
    if len(values) == 0:
        return arr
    table = pa.table({"p": parents, "v": values, "i": np.arange(len(values))})
    firsts = table.group_by(["p", "v"], use_threads=False).aggregate([("i", "min")])
    keep = np.sort(firsts.column("i_min").to_numpy())
    lengths = np.bincount(parents[keep], minlength=len(arr))
    return _lists(lengths, values.take(pa.array(keep)), arr.type, arr)


@_rowwise
def _map_keys(m: pa.Array) -> pa.Array:
    entries = _entries(m)
    return _lists(_lengths(entries), _values(entries).field(0), pa.list_(m.type.key_type), m)


@_rowwise
def _map_values(m: pa.Array) -> pa.Array:
    entries = _entries(m)
    return _lists(_lengths(entries), _values(entries).field(1), pa.list_(m.type.item_type), m)


# ---------------------------------------------------------------- equality


def nested_equal(a: Value, b: Value) -> Value:
    """a = b for ARRAY, MAP and ROW values of one type, as Flink compares them: NULL if either is
    NULL, else equal when their elements (fields, entries in any order) are, a NULL element equal
    to a NULL element.  Compared through an unambiguous text of each value (strings quoted)."""
    def run(left: pa.Array, right: pa.Array) -> pa.Array:
        return pc.equal(_canonical(left), _canonical(right))

    return _rowwise(run)(a, b)


def _canonical(arr: pa.Array) -> pa.Array:
    """A text per value that is equal exactly when the values are; NULL stays NULL."""
    t = arr.type
    if pa.types.is_struct(t):
        parts = [_canonical_part(pc.struct_field(arr, [i])) for i in range(t.num_fields)]
        body = parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, ",")
        return pc.if_else(arr.is_valid(), pc.binary_join_element_wise("(", body, ")", ""), pa.scalar(None, pa.string()))
    if pa.types.is_map(t):
        entries = _entries(arr)
        flat = _values(entries)
        texts = pc.binary_join_element_wise(_canonical_part(flat.field(0)), _canonical_part(flat.field(1)), ":")
        lengths = _lengths(entries)
        parents = np.repeat(np.arange(len(arr)), lengths)
        order = pa.table({"p": parents, "t": texts}).sort_by([("p", "ascending"), ("t", "ascending")])
        lists = _lists(lengths, order.column("t").combine_chunks(), pa.list_(pa.string()), arr)
        return pc.binary_join_element_wise("{", pc.binary_join(lists, ","), "}", "")
    if pa.types.is_list(t):
        lists = _lists(_lengths(arr), _canonical_part(_values(arr)), pa.list_(pa.string()), arr)
        return pc.binary_join_element_wise("[", pc.binary_join(lists, ","), "]", "")
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        # BYTES compare byte by byte: read as text unchecked (no UTF-8 needed), quoted as a string
        return _canonical(arr.view(pa.large_string() if pa.types.is_large_binary(t) else pa.string()))
    if is_string(t):
        escaped = pc.replace_substring(pc.replace_substring(arr, "\\", "\\\\"), '"', '\\"')
        return pc.binary_join_element_wise('"', escaped, '"', "")
    return pc.cast(arr, pa.string())


def _canonical_part(arr: pa.Array) -> pa.Array:
    """An element's or field's text; 'null' for NULL (no value's text is unquoted null)."""
    return pc.fill_null(_canonical(arr), "null")


# ---------------------------------------------------------------- more of Flink's collection functions


def _offsets(lengths: np.ndarray) -> np.ndarray:
    """Each row's first position among the flattened elements."""
    return np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)


def _null_mask(*arrays: pa.Array) -> np.ndarray:
    out = np.zeros(len(arrays[0]), bool)
    for a in arrays:
        if a.null_count:
            out |= a.is_null().to_numpy(zero_copy_only=False)
    return out


def _rebuilt(lengths: np.ndarray, values: pa.Array, type_: pa.DataType, nulls: np.ndarray) -> pa.Array:
    """A list array of ``values`` cut into ``lengths``; NULL where ``nulls``."""
    lengths = np.where(nulls, 0, lengths)
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    return pa.ListArray.from_arrays(offsets, values, type=type_, mask=pa.array(nulls) if nulls.any() else None)


def _local_positions(lengths: np.ndarray) -> np.ndarray:
    """Per flattened element, its 0-based position in its own row."""
    return np.arange(int(lengths.sum())) - np.repeat(_offsets(lengths), lengths)


def _element_matches(what: str) -> Callable[[list[pa.DataType]], pa.DataType]:
    """The typing of (array, element) functions that answer the array's type."""

    def infer(types: list[pa.DataType]) -> pa.DataType:
        _array_arg(types[0])
        if common_type(types[0].value_type, types[1]) is None:
            raise ArgumentTypeError(f"{what} cannot combine {sql_type_name(types[0])} and {sql_type_name(types[1])}")
        return types[0]

    return infer


def _position_type(types: list[pa.DataType]) -> pa.DataType:
    _element_matches("ARRAY_POSITION")(types)
    return pa.int32()


@_rowwise
def _array_reverse(arr: pa.Array) -> pa.Array:
    lengths = _lengths(arr)
    starts = np.repeat(_offsets(lengths), lengths)
    local = _local_positions(lengths)
    order = starts + np.repeat(lengths, lengths) - 1 - local
    return _rebuilt(lengths, _values(arr).take(pa.array(order)), arr.type, _null_mask(arr))


def _hits(arr: pa.Array, needle: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(row of each flattened element, whether it equals the row's needle; NULL equals NULL)."""
    parents = _parents(arr)
    values = _values(arr)
    wanted = needle.cast(values.type).take(pa.array(parents, pa.int64()))
    equal = pc.or_(pc.fill_null(pc.equal(values, wanted), False), pc.and_(pc.is_null(values), pc.is_null(wanted)))
    return parents, equal.to_numpy(zero_copy_only=False)


@_rowwise
def _array_position(arr: pa.Array, needle: pa.Array) -> pa.Array:
    """The 1-based position of the first element equal to ``needle``; 0 if none (Flink)."""
    parents, hit = _hits(arr, needle)
    local = _local_positions(_lengths(arr))
    first = np.full(len(arr), np.iinfo(np.int64).max)
    np.minimum.at(first, parents[hit], local[hit])
    out = np.where(first == np.iinfo(np.int64).max, 0, first + 1).astype(np.int32)
    return pa.array(out, mask=_null_mask(arr))


@_rowwise
def _array_remove(arr: pa.Array, needle: pa.Array) -> pa.Array:
    """The array without the elements equal to ``needle`` (NULL removes the NULL elements)."""
    parents, hit = _hits(arr, needle)
    keep = ~hit
    lengths = np.bincount(parents[keep], minlength=len(arr))
    return _rebuilt(lengths, _values(arr).filter(pa.array(keep)), arr.type, _null_mask(arr))


def _concat_type(types: list[pa.DataType]) -> pa.DataType:
    for t in types:
        _array_arg(t)
    return pa.list_(_element_type([t.value_type for t in types], "ARRAY_CONCAT"))


def _concatenated(arrays: list[pa.Array], t: pa.DataType) -> pa.Array:
    """Row by row, the arrays' elements one after the other; NULL where any array is NULL."""
    nulls = _null_mask(*arrays)
    lengths = [_lengths(a) for a in arrays]
    values = pa.concat_arrays([_values(a).cast(t.value_type) for a in arrays])
    rows = np.concatenate([_parents(a) for a in arrays])
    source = np.concatenate([np.full(int(n.sum()), i) for i, n in enumerate(lengths)])
    order = np.lexsort((source, rows))  # stable: each array's own order is kept
    order = order[~nulls[rows[order]]]  # a row NULL by one array has none of the others' elements
    return _rebuilt(sum(lengths), values.take(pa.array(order)), t, nulls)


def _array_concat(*args: Value) -> Value:
    def run(*arrays: pa.Array) -> pa.Array:
        return _concatenated(list(arrays), _concat_type([a.type for a in arrays]))

    return _rowwise(run)(*args)


def _appending(prepend: bool) -> Callable[..., Value]:
    def run(arr: pa.Array, element: pa.Array) -> pa.Array:
        single = pa.ListArray.from_arrays(pa.array(np.arange(len(element) + 1, dtype=np.int32)),
                                          element.cast(arr.type.value_type))
        pair = [single, arr] if prepend else [arr, single]
        return _concatenated(pair, arr.type)

    return _rowwise(run)


def _extreme_type(types: list[pa.DataType]) -> pa.DataType:
    _array_arg(types[0])
    t = types[0].value_type
    if pa.types.is_list(t) or pa.types.is_map(t) or pa.types.is_struct(t):
        raise ArgumentTypeError(f"the elements of {sql_type_name(types[0])} have no order")
    return t


def _extreme(function: str) -> Callable[..., Value]:
    @_rowwise
    def run(arr: pa.Array) -> pa.Array:
        """The largest (smallest) non-NULL element; NULL for a NULL or empty array (or all NULL)."""
        values = _values(arr)
        out = pa.nulls(len(arr), arr.type.value_type)
        if not len(values):
            return out
        table = pa.table({"p": _parents(arr), "v": values})
        grouped = table.group_by("p", use_threads=False).aggregate([("v", function)])
        rows = grouped.column("p").to_numpy()
        at = np.full(len(arr), -1)
        at[rows] = np.arange(len(rows))
        return grouped.column(f"v_{function}").combine_chunks().take(pa.array(np.where(at >= 0, at, 0), mask=at < 0))

    return run


def _slice_type(types: list[pa.DataType]) -> pa.DataType:
    _array_arg(types[0])
    for t in types[1:]:
        if not (pa.types.is_integer(t) or pa.types.is_null(t)):
            raise ArgumentTypeError(f"ARRAY_SLICE offsets must be integers, got {sql_type_name(t)}")
    return types[0]


def _array_slice(arr: Value, start: Value, end: Value | None = None) -> Value:
    def run(arr: pa.Array, start: pa.Array, end: pa.Array | None = None) -> pa.Array:
        """Elements ``start``..``end`` inclusive, 1-based (0 is the first, a negative offset counts
        from the end, a missing end is the last); empty when the range is empty; NULL if an argument is."""
        lengths = _lengths(arr)
        nulls = _null_mask(arr, start, *([end] if end is not None else []))
        lo = pc.fill_null(pc.cast(start, pa.int64()), 0).to_numpy(zero_copy_only=False)
        hi = lengths if end is None else pc.fill_null(pc.cast(end, pa.int64()), 0).to_numpy(zero_copy_only=False)
        lo = np.where(lo < 0, lengths + lo + 1, np.maximum(lo, 1))
        hi = np.where(hi < 0, lengths + hi + 1, hi)
        lo, hi = np.maximum(lo, 1), np.minimum(hi, lengths)
        counts = np.where(nulls | (hi < lo), 0, hi - lo + 1)
        positions = np.repeat(_offsets(lengths) + lo - 1, counts) + _local_positions(counts)
        return _rebuilt(counts, _values(arr).take(pa.array(positions.astype(np.int64))), arr.type, nulls)

    return _rowwise(run)(arr, start, *([end] if end is not None else []))


def _entries_type(types: list[pa.DataType]) -> pa.DataType:
    _map_arg(types[0])
    return pa.list_(pa.struct([pa.field("key", types[0].key_type), pa.field("value", types[0].item_type)]))


@_rowwise
def _map_entries(m: pa.Array) -> pa.Array:
    """The entries as an ARRAY of ROW<key, value>, in the map's order."""
    entries = _entries(m)
    return _rebuilt(_lengths(entries), _values(entries), _entries_type([m.type]), _null_mask(m))


def _from_arrays_type(types: list[pa.DataType]) -> pa.DataType:
    _array_arg(types[0])
    _array_arg(types[1])
    return pa.map_(types[0].value_type, types[1].value_type)


@_rowwise
def _map_from_arrays(keys: pa.Array, values: pa.Array) -> pa.Array:
    """MAP_FROM_ARRAYS(keys, values): the i-th key maps to the i-th value; the arrays must have the
    same length; NULL if either is NULL."""
    nulls = _null_mask(keys, values)
    key_lengths, value_lengths = _lengths(keys), _lengths(values)
    if (key_lengths != value_lengths)[~nulls].any():
        raise DataError("Invalid function MAP_FROM_ARRAYS call: the key array and the value array must have the "
                        "same length")
    keep_keys = np.repeat(~nulls, key_lengths)
    keep_values = np.repeat(~nulls, value_lengths)
    flat_keys = _values(keys).filter(pa.array(keep_keys))
    if flat_keys.null_count:
        raise DataError("a MAP key is NULL")
    lengths = np.where(nulls, 0, key_lengths)
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    out = pa.MapArray.from_arrays(offsets, flat_keys, _values(values).filter(pa.array(keep_values)),
                                  type=pa.map_(keys.type.value_type, values.type.value_type))
    return pc.if_else(pa.array(nulls), pa.scalar(None, out.type), out) if nulls.any() else out


def _split_type(types: list[pa.DataType]) -> pa.DataType:
    for t in types:
        if not (is_string(t) or pa.types.is_null(t)):
            raise ArgumentTypeError(f"SPLIT takes STRING arguments, got {sql_type_name(t)}")
    return pa.list_(pa.string())


def _split(s: Value, delimiter: Value) -> Value:
    """SPLIT(s, delimiter): the pieces between the delimiters ('' between two adjacent ones); an
    empty delimiter splits into characters; NULL if either is NULL."""
    if not isinstance(delimiter, pa.Scalar):
        raise ArgumentTypeError("SPLIT's delimiter must be a constant")
    if not delimiter.is_valid:
        return pa.scalar(None, pa.list_(pa.string())) if isinstance(s, pa.Scalar) else pa.nulls(len(s), pa.list_(pa.string()))
    text = delimiter.as_py()
    if text:
        return pc.split_pattern(s, text)
    # Arrow has no split into characters: slicing each to its code points (a rare form)
    if isinstance(s, pa.Scalar):
        return pa.scalar(None if not s.is_valid else list(s.as_py()), pa.list_(pa.string()))
    return pa.array([None if v is None else list(v) for v in s.to_pylist()], pa.list_(pa.string()))


def _join_type(types: list[pa.DataType]) -> pa.DataType:
    _array_arg(types[0])
    if not (is_string(types[0].value_type) or pa.types.is_null(types[0].value_type)):
        raise ArgumentTypeError(f"ARRAY_JOIN takes an ARRAY of STRING, got {sql_type_name(types[0])}")
    return pa.string()


def _array_join(arr: Value, delimiter: Value, replacement: Value | None = None) -> Value:
    def run(arr: pa.Array, delimiter: pa.Array, replacement: pa.Array | None = None) -> pa.Array:
        """The elements joined by ``delimiter``; a NULL element is left out, or replaced by
        ``replacement`` when given; NULL if the array or the delimiter is NULL."""
        values = _values(arr)
        parents = _parents(arr)
        if replacement is None:
            keep = values.is_valid().to_numpy(zero_copy_only=False)
            values, parents = values.filter(pa.array(keep)), parents[keep]
        else:
            values = pc.coalesce(values, replacement.cast(values.type).take(pa.array(parents, pa.int64())))
        lengths = np.bincount(parents, minlength=len(arr))
        lists = _rebuilt(lengths, values.cast(pa.string()), pa.list_(pa.string()), _null_mask(arr))
        return pc.binary_join(lists, delimiter)

    return _rowwise(run)(arr, delimiter, *([replacement] if replacement is not None else []))


def _sort_type(types: list[pa.DataType]) -> pa.DataType:
    _array_arg(types[0])
    for t in types[1:]:
        if not (pa.types.is_boolean(t) or pa.types.is_null(t)):
            raise ArgumentTypeError(f"ARRAY_SORT's order arguments are BOOLEAN, got {sql_type_name(t)}")
    _extreme_type(types[:1])  # its elements must have an order
    return types[0]


def _array_sort(arr: Value, ascending: Value | None = None, nulls_first: Value | None = None) -> Value:
    """Each array sorted (ascending by default, NULLs first; descending puts NULLs last unless
    ``nulls_first`` says otherwise); NULL if an argument is NULL."""
    flags = [a for a in (ascending, nulls_first) if a is not None]
    if any(not isinstance(a, pa.Scalar) for a in flags):
        raise ArgumentTypeError("ARRAY_SORT's order arguments must be constants")
    if any(not a.is_valid for a in flags):
        return pa.scalar(None, arr.type) if isinstance(arr, pa.Scalar) else pa.nulls(len(arr), arr.type)
    up = True if ascending is None else ascending.as_py()
    first = up if nulls_first is None else nulls_first.as_py()

    @_rowwise
    def run(arr: pa.Array) -> pa.Array:
        lengths = _lengths(arr)
        table = pa.table({"p": _parents(arr), "v": _values(arr)})
        placement = "at_start" if first else "at_end"
        order = table.sort_by([("p", "ascending", placement), ("v", "ascending" if up else "descending", placement)])
        return _rebuilt(lengths, order.column("v").combine_chunks(), arr.type, _null_mask(arr))

    return run(arr)


def _element_keys(arr: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """(row of each element, a text equal exactly for equal elements of one row)."""
    parents = _parents(arr)
    rows = pa.array(parents).cast(pa.string())
    return parents, pc.binary_join_element_wise(rows, _canonical_part(_values(arr)), "\x1f")


def _first_occurrences(keys: pa.Array) -> np.ndarray:
    """The positions of the first occurrence of each distinct key, ascending."""
    if not len(keys):
        return np.zeros(0, np.int64)
    firsts = pa.table({"k": keys, "i": np.arange(len(keys))}).group_by("k", use_threads=False).aggregate(
        [("i", "min")])
    return np.sort(firsts.column("i_min").to_numpy())


def _set_operation(kind: str) -> Callable[..., Value]:
    @_rowwise
    def run(a: pa.Array, b: pa.Array) -> pa.Array:
        """ARRAY_UNION / ARRAY_INTERSECT / ARRAY_EXCEPT: distinct elements, in the order of their
        first occurrence; NULL if either array is NULL."""
        t = _concat_type([a.type, b.type])
        nulls = _null_mask(a, b)
        a, b = a.cast(t), b.cast(t)
        if kind == "union":
            source = _concatenated([a, b], t)
            parents, keys = _element_keys(source)
            keep = np.ones(len(keys), bool)
        else:
            source = a
            parents, keys = _element_keys(a)
            inside = pc.is_in(keys, value_set=_element_keys(b)[1]).to_numpy(zero_copy_only=False)
            keep = inside if kind == "intersect" else ~inside
        candidates = np.flatnonzero(keep & ~nulls[parents])
        chosen = candidates[_first_occurrences(keys.take(pa.array(candidates)))]
        lengths = np.bincount(parents[chosen], minlength=len(source))
        return _rebuilt(lengths, _values(source).take(pa.array(chosen)), t, nulls)

    return run


def _map_union_type(types: list[pa.DataType]) -> pa.DataType:
    for t in types:
        _map_arg(t)
    out = types[0]
    for t in types[1:]:
        c = common_type(out, t)
        if c is None:
            raise ArgumentTypeError("MAP_UNION cannot combine " + ", ".join(sql_type_name(x) for x in types))
        out = c
    return out


def _map_union(*args: Value) -> Value:
    def run(*maps: pa.Array) -> pa.Array:
        """The maps merged: a key of a later map takes its value from there; NULL if any map is."""
        t = _map_union_type([m.type for m in maps])
        entries = [_entries(m.cast(t)) for m in maps]
        merged = _concatenated(entries, pa.list_(entries[0].type.value_type))
        parents, flat = _parents(merged), _values(merged)
        keys = pc.binary_join_element_wise(pa.array(parents).cast(pa.string()), _canonical_part(flat.field(0)), "\x1f")
        last = len(keys) - 1 - _first_occurrences(keys.take(pa.array(np.arange(len(keys))[::-1])))
        last = np.sort(last) if len(last) else last
        lengths = np.bincount(parents[last], minlength=len(merged))
        chosen = flat.take(pa.array(last.astype(np.int64)))
        offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
        out = pa.MapArray.from_arrays(offsets, chosen.field(0), chosen.field(1), type=t)
        nulls = _null_mask(*maps)
        return pc.if_else(pa.array(nulls), pa.scalar(None, t), out) if nulls.any() else out

    return _rowwise(run)(*args)


def _last_of_each_key(parents: np.ndarray, keys: pa.Array) -> np.ndarray:
    """Per row, the position of the last entry of each key (ascending): a later one wins."""
    texts = pc.binary_join_element_wise(pa.array(parents).cast(pa.string()), _canonical_part(keys), "\x1f")
    last = len(texts) - 1 - _first_occurrences(texts.take(pa.array(np.arange(len(texts))[::-1])))
    return np.sort(last).astype(np.int64)


def _str_to_map_type(types: list[pa.DataType]) -> pa.DataType:
    for t in types:
        if not (is_string(t) or pa.types.is_null(t)):
            raise ArgumentTypeError(f"STR_TO_MAP takes STRING arguments, got {sql_type_name(t)}")
    return pa.map_(pa.string(), pa.string())


def _str_to_map(text: Value, pair_delimiter: Value | None = None, key_value_delimiter: Value | None = None) -> Value:
    """STR_TO_MAP(text[, pairs, key/value]): the pairs split at the regular expression ``pairs``
    (','), each at the first match of ``key/value`` ('='); a pair without it maps to NULL; a later
    pair of a key wins; '' is the empty map; NULL if an argument is NULL."""
    delimiters = [d for d in (pair_delimiter, key_value_delimiter) if d is not None]
    if any(not isinstance(d, pa.Scalar) for d in delimiters):
        raise ArgumentTypeError("STR_TO_MAP's delimiters must be constants")
    t = pa.map_(pa.string(), pa.string())
    if any(not d.is_valid for d in delimiters):
        return pa.scalar(None, t) if isinstance(text, pa.Scalar) else pa.nulls(len(text), t)
    pairs = "," if pair_delimiter is None else pair_delimiter.as_py()
    key_value = "=" if key_value_delimiter is None else key_value_delimiter.as_py()

    @_rowwise
    def run(text: pa.Array) -> pa.Array:
        # an empty text is an empty map (an empty pair between two delimiters is the key '')
        parts = pc.split_pattern_regex(pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text), pairs)
        lengths = _lengths(parts)
        entries = pc.split_pattern_regex(_values(parts), key_value, max_splits=1)
        keys = _array_get(entries, pa.array(np.ones(len(entries), np.int64)))
        values = _array_get(entries, pa.array(np.full(len(entries), 2, np.int64)))  # NULL without one
        parents = np.repeat(np.arange(len(text)), lengths)
        last = _last_of_each_key(parents, keys)
        counts = np.bincount(parents[last], minlength=len(text))
        offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
        out = pa.MapArray.from_arrays(offsets, keys.take(pa.array(last)), values.take(pa.array(last)), type=t)
        nulls = _null_mask(text)
        return pc.if_else(pa.array(nulls), pa.scalar(None, t), out) if nulls.any() else out

    return run(text)


def _extract_all_type(types: list[pa.DataType]) -> pa.DataType:
    for t in types[:2]:
        if not (is_string(t) or pa.types.is_null(t)):
            raise ArgumentTypeError(f"REGEXP_EXTRACT_ALL takes STRING text and pattern, got {sql_type_name(t)}")
    if len(types) > 2 and not (pa.types.is_integer(types[2]) or pa.types.is_null(types[2])):
        raise ArgumentTypeError(f"REGEXP_EXTRACT_ALL's group index is an integer, got {sql_type_name(types[2])}")
    return pa.list_(pa.string())


def _regexp_extract_all(s: Value, regex: Value, group: Value | None = None) -> Value:
    """Group ``group`` (1 by default, 0: the whole match) of every match of ``regex``, in order; an
    empty array if none; NULL if an argument is NULL or the group does not exist.  Arrow has no kernel that finds every match,
    so the values are matched by Python's re one by one (a pattern is compiled once)."""
    t = pa.list_(pa.string())
    args = [a for a in (regex, group) if a is not None]
    if any(not isinstance(a, pa.Scalar) for a in args):
        raise ArgumentTypeError("REGEXP_EXTRACT_ALL's pattern and group index must be constants")
    pattern = re.compile(regex.as_py()) if regex.is_valid else None
    index = 1 if group is None else group.as_py()
    if pattern is None or index is None or not 0 <= index <= pattern.groups:
        # a group the pattern does not have gives NULL, as in Flink
        return pa.scalar(None, t) if isinstance(s, pa.Scalar) else pa.nulls(len(s), t)

    def matches(text: str | None) -> list[str | None] | None:
        return None if text is None else [m.group(index) for m in pattern.finditer(text)]

    if isinstance(s, pa.Scalar):
        return pa.scalar(matches(s.as_py()), t)
    return pa.array([matches(v) for v in s.to_pylist()], t)


register("ARRAY", _array_type, _array, 1, None)
register("MAP", _map_type, _map, 2, None)
register("ROW", _row_type, _row, 1, None)
register(ITEM, _item_type, _item, 2)
register(FIELD, _field_type, _field, 2, sees_constants=True)
register("CARDINALITY", _cardinality_type, _cardinality, 1)
register("ELEMENT", _element_of, _element, 1)
register("ARRAY_CONTAINS", _contains_type, _array_contains, 2)
register("ARRAY_DISTINCT", _same_array, _array_distinct, 1)
register("MAP_KEYS", _keys_type, _map_keys, 1)
register("MAP_VALUES", _values_type, _map_values, 1)
register("SPLIT", _split_type, _split, 2)
register("ARRAY_JOIN", _join_type, _array_join, 2, 3)
register("ARRAY_REVERSE", _same_array, _array_reverse, 1)
register("ARRAY_POSITION", _position_type, _array_position, 2)
register("ARRAY_REMOVE", _element_matches("ARRAY_REMOVE"), _array_remove, 2)
register("ARRAY_CONCAT", _concat_type, _array_concat, 1, None)
register("ARRAY_APPEND", _element_matches("ARRAY_APPEND"), _appending(False), 2)
register("ARRAY_PREPEND", _element_matches("ARRAY_PREPEND"), _appending(True), 2)
register("ARRAY_MAX", _extreme_type, _extreme("max"), 1)
register("ARRAY_MIN", _extreme_type, _extreme("min"), 1)
register("ARRAY_SLICE", _slice_type, _array_slice, 2, 3)
register("MAP_ENTRIES", _entries_type, _map_entries, 1)
register("MAP_FROM_ARRAYS", _from_arrays_type, _map_from_arrays, 2)
register("ARRAY_SORT", _sort_type, _array_sort, 1, 3)
register("ARRAY_UNION", _concat_type, _set_operation("union"), 2)
register("ARRAY_INTERSECT", _concat_type, _set_operation("intersect"), 2)
register("ARRAY_EXCEPT", _concat_type, _set_operation("except"), 2)
register("MAP_UNION", _map_union_type, _map_union, 1, None)
register("STR_TO_MAP", _str_to_map_type, _str_to_map, 1, 3)
register("REGEXP_EXTRACT_ALL", _extract_all_type, _regexp_extract_all, 2, 3)
