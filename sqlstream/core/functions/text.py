"""More of Flink's string functions: OVERLAY, STARTSWITH/ENDSWITH, BTRIM, TRANSLATE, ELT and the
REGEXP_COUNT/SUBSTR/INSTR family, with Flink's results on NULLs, empty patterns and positions past
the end (each checked against Flink 2.3, see tests/test_functions_text.py).

As in sqlstream.core.functions.strings, patterns and search strings must be constants (Arrow takes
them as kernel options); the string argument is a column.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.functions import Kernel, Value, lookup, register
from sqlstream.core.functions.strings import INTEGER, STRING, constant, returns, strict

_NULL_INT = pa.scalar(None, pa.int32())


@strict(pa.string())
def _overlay(s: Value, replacement: Value, start: Value, length: Value | None = None) -> Value:
    """OVERLAY(s PLACING r FROM start [FOR length]): ``length`` characters from ``start`` replaced
    by ``r`` (as many as ``r`` has by default); ``s`` itself when ``start`` is before 1 or past
    its end."""
    text = constant(replacement, "OVERLAY", "the replacement")
    begin = constant(start, "OVERLAY", "the start position")
    count = None if length is None else constant(length, "OVERLAY", "the length")
    if begin < 1:
        return s  # Flink leaves the string as it is
    if not count:
        count = len(text)  # FOR 0 replaces as many characters as the replacement has, as in Flink
    head = pc.utf8_slice_codeunits(s, 0, begin - 1)
    tail = pc.utf8_slice_codeunits(s, begin - 1 + count)
    overlaid = pc.binary_join_element_wise(head, pa.scalar(text), tail, "")
    return pc.if_else(pc.greater(pc.utf8_length(s), begin - 1), overlaid, s)


def _affix(name: str, kernel: str) -> Kernel:
    @strict(pa.bool_())
    def test(s: Value, affix: Value) -> Value:
        return getattr(pc, kernel)(s, pattern=constant(affix, name, "the prefix or suffix"))

    return test


@strict(pa.string())
def _translate(s: Value, source: Value, target: Value) -> Value:
    """Each character of ``source`` becomes the one at its place in ``target``, or is removed
    where ``target`` is shorter; the first mapping of a repeated character wins (Flink's TRANSLATE).
    Arrow has no kernel that maps characters at once: with an ASCII mapping it is a byte lookup
    table with numpy (UTF-8 bytes of other characters are never ASCII, so they pass untouched),
    otherwise Python's str.translate per value."""
    old = constant(source, "TRANSLATE", "the characters to replace")
    new = constant(target, "TRANSLATE", "their replacements") or ""
    table: dict[int, str | None] = {}
    for i, ch in enumerate(old):
        table.setdefault(ord(ch), new[i] if i < len(new) else None)
    if isinstance(s, pa.Scalar):
        return pa.scalar(s.as_py().translate(table), pa.string())
    if isinstance(s, pa.ChunkedArray):
        s = s.combine_chunks()
    if len(s) == 0:
        return pa.array([], pa.string())
    if all(k < 128 and (v is None or ord(v) < 128) for k, v in table.items()):
        return _translate_bytes(s.cast(pa.string()), table)
    return pa.array([None if v is None else v.translate(table) for v in s.to_pylist()], pa.string())


def _translate_bytes(s: pa.Array, table: dict[int, str | None]) -> pa.Array:
    """TRANSLATE with an ASCII mapping over the UTF-8 bytes: a lookup table, then the removed
    bytes dropped and each row's offsets moved back by the removals before it."""
    lut = np.arange(256, dtype=np.uint8)
    drop = np.zeros(256, dtype=bool)
    for k, v in table.items():
        if v is None:
            drop[k] = True
        else:
            lut[k] = ord(v)
    offsets = np.frombuffer(s.buffers()[1], np.int32)[s.offset : s.offset + len(s) + 1].astype(np.int64)
    data_buf = s.buffers()[2]
    lo, hi = int(offsets[0]), int(offsets[-1])
    data = np.frombuffer(data_buf, np.uint8)[lo:hi] if data_buf is not None and hi > lo else np.zeros(0, np.uint8)
    keep = ~drop[data]
    kept_before = np.concatenate(([0], np.cumsum(keep)))  # kept bytes before each byte position
    new_offsets = kept_before[offsets - lo]
    out = pa.Array.from_buffers(pa.large_string(), len(s), [None, pa.py_buffer(new_offsets), pa.py_buffer(lut[data][keep])])
    return pc.if_else(s.is_valid(), out.cast(pa.string()), pa.scalar(None, pa.string()))


@strict(pa.int32())
def _regexp_count(s: Value, regex: Value) -> Value:
    pattern = constant(regex, "REGEXP_COUNT", "the pattern")
    if pattern == "":
        # an empty pattern matches between characters; Arrow would count between bytes
        return pc.cast(pc.add(pc.utf8_length(s), 1), pa.int32())
    return pc.cast(pc.count_substring_regex(s, pattern=pattern), pa.int32())


def _regexp_substr(s: Value, regex: Value) -> Value:
    """The first match of ``regex``; NULL if there is none: REGEXP_EXTRACT's group 0."""
    constant(regex, "REGEXP_SUBSTR", "the pattern")
    return lookup("REGEXP_EXTRACT").kernel(s, regex, pa.scalar(0, pa.int32()))


@strict(pa.int32())
def _regexp_instr(s: Value, regex: Value) -> Value:
    """1-based character position of the first match of ``regex``; 0 if there is none."""
    parts = pc.split_pattern_regex(s, pattern=constant(regex, "REGEXP_INSTR", "the pattern"), max_splits=1)
    position = pc.cast(pc.add(pc.utf8_length(pc.list_element(parts, 0)), 1), pa.int32())
    return pc.if_else(pc.equal(pc.list_value_length(parts), 2), position, pa.scalar(0, pa.int32()))


def _elt(index: Value, *values: Value) -> Value:
    """ELT(n, v1, v2, ...): the n-th value; NULL when n is out of range."""
    n = len(values)
    valid = pc.and_(pc.greater_equal(index, 1), pc.less_equal(index, n))
    choice = pc.if_else(valid, pc.subtract(index, 1), _NULL_INT)
    if isinstance(choice, pa.Scalar):
        return values[choice.as_py()] if choice.is_valid else pa.scalar(None, pa.string())
    return pc.choose(pc.cast(choice, pa.int8() if n < 128 else pa.int32()), *values)


register("OVERLAY", returns("OVERLAY", pa.string(), STRING, STRING, INTEGER, INTEGER), _overlay, 3, 4)
register("STARTSWITH", returns("STARTSWITH", pa.bool_(), STRING, STRING), _affix("STARTSWITH", "starts_with"), 2)
register("ENDSWITH", returns("ENDSWITH", pa.bool_(), STRING, STRING), _affix("ENDSWITH", "ends_with"), 2)
# TRANSLATE3: the name Flink's function list gives TRANSLATE (callable in Flink SQL too)
register("TRANSLATE", returns("TRANSLATE", pa.string(), STRING, STRING, STRING), _translate, 3, aliases=("TRANSLATE3",))
register("REGEXP_COUNT", returns("REGEXP_COUNT", pa.int32(), STRING, STRING), _regexp_count, 2)
register("REGEXP_SUBSTR", returns("REGEXP_SUBSTR", pa.string(), STRING, STRING), _regexp_substr, 2)
register("REGEXP_INSTR", returns("REGEXP_INSTR", pa.int32(), STRING, STRING), _regexp_instr, 2)
register("ELT", returns("ELT", pa.string(), INTEGER, STRING, rest=STRING), _elt, 2, None)
