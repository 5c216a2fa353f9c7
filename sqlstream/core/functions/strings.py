"""Flink SQL's built-in string functions, registered into sqlstream.core.functions.

Semantics follow Flink's runtime (SqlFunctionUtils / BinaryStringDataUtil), not
Arrow's defaults, wherever the two differ: TRIM removes only spaces unless told
otherwise, LPAD/RPAD truncate and cycle multi-character pads, REGEXP_REPLACE
treats the replacement literally, CONCAT_WS skips NULLs, SPLIT_INDEX and
REGEXP_EXTRACT return NULL instead of failing.

Arrow takes patterns, pad strings and positions as kernel *options*, not
columns, so those arguments must be constants here; a column in their place
raises ArgumentTypeError naming the argument.

The small typing helpers at the top are shared with numeric and
temporal, which register the numeric and temporal functions.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.types import is_numeric, is_string, sql_type_name

# ---------------------------------------------------------------- shared helpers

ArgKind = tuple[Callable[[pa.DataType], bool], str]

STRING: ArgKind = (is_string, "STRING")
INTEGER: ArgKind = (pa.types.is_integer, "INTEGER")
NUMERIC: ArgKind = (is_numeric, "NUMERIC")
BOOLEAN: ArgKind = (pa.types.is_boolean, "BOOLEAN")


def type_names(types: list[pa.DataType]) -> str:
    return ", ".join(sql_type_name(t) for t in types)


def check_args(
    name: str, types: list[pa.DataType], kinds: tuple[ArgKind, ...], rest: ArgKind | None = None
) -> None:
    """Raise ArgumentTypeError unless every argument fits its kind; NULL fits any kind.

    ``rest`` is the kind of the arguments past ``kinds`` (variadic functions).
    """
    for i, t in enumerate(types):
        kind = kinds[i] if i < len(kinds) else rest
        if kind is None or pa.types.is_null(t) or kind[0](t):
            continue
        expected = ", ".join(k[1] for k in kinds) + (f", {rest[1]}..." if rest else "")
        raise ArgumentTypeError(f"{name} expects ({expected}), got ({type_names(types)})")


def returns(name: str, result: pa.DataType, *kinds: ArgKind, rest: ArgKind | None = None) -> Infer:
    """A typing rule: check the arguments against ``kinds``, always return ``result``."""

    def infer(types: list[pa.DataType]) -> pa.DataType:
        check_args(name, types, kinds, rest)
        return result

    return infer


def constant(value: Value, function: str, argument: str) -> Any:
    """The Python value of an argument that Arrow only accepts as a kernel option."""
    if isinstance(value, pa.Scalar):
        return value.as_py()
    raise ArgumentTypeError(f"{function}: {argument} must be a constant")


def strict(result: pa.DataType) -> Callable[[Kernel], Kernel]:
    """Make a kernel return NULL when any argument is a NULL constant.

    That is Flink's rule for all these functions, and it spares each kernel
    from handling ``None`` option values and NULL-typed scalars.
    """

    def wrap(kernel: Kernel) -> Kernel:
        def strict_kernel(*args: Value, **options: str) -> Value:
            if any(isinstance(a, pa.Scalar) and not a.is_valid for a in args):
                return pa.scalar(None, result)
            return kernel(*args, **options)  # options: the session zone of a zoned kernel

        strict_kernel.__doc__ = kernel.__doc__
        return strict_kernel

    return wrap


def first_as_array(kernel: Kernel) -> Kernel:
    """Run a kernel that needs an Array (take, numpy) on a constant first argument too."""

    def array_kernel(first: Value, *rest: Value) -> Value:
        if isinstance(first, pa.ChunkedArray):
            first = first.combine_chunks()
        if isinstance(first, pa.Scalar):
            return kernel(pa.array([first.as_py()], first.type), *rest)[0]
        return kernel(first, *rest)

    array_kernel.__doc__ = kernel.__doc__
    return array_kernel


def lookup(table: pa.Array, indices: Value) -> Value:
    """table[indices], also for a scalar index (pc.take only accepts arrays)."""
    if isinstance(indices, pa.Scalar):
        return table[indices.as_py()] if indices.is_valid else pa.scalar(None, table.type)
    return pc.take(table, indices)


# Imported only now: sqlstream.core.functions imports this module (and numeric and
# temporal, which use the helpers above) at its end, so whichever module is
# imported first, the helpers must exist before sqlstream.core.functions runs.
from sqlstream.core.functions import ArgumentTypeError, Infer, Kernel, Value, register  # noqa: E402


def _null_string() -> pa.Scalar:
    return pa.scalar(None, pa.string())


def _rewrite_literal(text: str) -> str:
    """``text`` as an RE2 rewrite string that inserts it verbatim (Java's quoteReplacement)."""
    return text.replace("\\", "\\\\")


# ---------------------------------------------------------------- trimming

_SPACE = " "  # Flink trims only U+0020 by default, not all whitespace


def _trim(name: str, trimmer: Callable[..., Value]) -> Kernel:
    @strict(pa.string())
    def kernel(s: Value, characters: Value | None = None) -> Value:
        """Remove any of ``characters`` (a set, as in Flink) from the end(s)."""
        chars = (
            _SPACE if characters is None else constant(characters, name, "the characters to trim")
        )
        return trimmer(s, characters=chars)

    return kernel


# ---------------------------------------------------------------- search and replace


@strict(pa.string())
def _replace(s: Value, search: Value, replacement: Value) -> Value:
    old = constant(search, "REPLACE", "the search string")
    new = constant(replacement, "REPLACE", "the replacement")
    if old == "":
        # Java inserts the replacement around every character; Arrow's
        # replace_substring never terminates on an empty pattern, an empty regex does it.
        return pc.replace_substring_regex(s, pattern="", replacement=_rewrite_literal(new))
    return pc.replace_substring(s, pattern=old, replacement=new)


@strict(pa.int32())
def _position(seek: Value, s: Value, start: Value | None = None) -> Value:
    """1-based character position of ``seek`` in ``s`` at or after ``start``; 0 if absent."""
    needle = constant(seek, "POSITION", "the string searched for")
    begin = 1 if start is None else constant(start, "LOCATE", "the start position")
    if needle == "":
        # Flink: an empty string is found at position 1, whatever the start
        return pc.if_else(pc.is_valid(s), pa.scalar(1, pa.int32()), pa.scalar(None, pa.int32()))
    offset = max(begin - 1, 0)
    hay = pc.utf8_slice_codeunits(s, offset) if offset else s
    # find_substring counts bytes; the text before the first match counts characters
    head = pc.list_element(pc.split_pattern(hay, pattern=needle, max_splits=1), 0)
    head_length = pc.utf8_length(head)
    found = pc.less(head_length, pc.utf8_length(hay))
    position = pc.add(pc.cast(head_length, pa.int64()), offset + 1)
    return pc.cast(pc.if_else(found, position, 0), pa.int32())


@strict(pa.string())
def _split_index(s: Value, separator: Value, index: Value) -> Value:
    """The index-th (0-based) field of ``s`` split by ``separator``; NULL past the end."""
    sep = constant(separator, "SPLIT_INDEX", "the separator")
    i = constant(index, "SPLIT_INDEX", "the index")
    if i < 0:
        return _null_string()
    if len(sep) == 1 and sep.isascii() and isinstance(s, pa.Array) and is_string(s.type):
        return _split_field_ascii(s, ord(sep), i)
    if len(sep) == 1:
        # one pass of RE2: i fields and their separators, then the wanted field (no match: fewer
        # fields), about 6x faster than splitting every string into a list
        c = f"\\x{{{ord(sep):X}}}"
        field = pc.struct_field(pc.extract_regex(s, pattern=f"^(?:[^{c}]*{c}){{{i}}}(?P<g>[^{c}]*)"), "g")
        # an empty string has no fields at all in Flink
        return pc.if_else(pc.greater(pc.utf8_length(s), 0), field, _null_string())
    if isinstance(s, pa.Scalar):
        return _split_index(pa.array([s.as_py()], pa.string()), separator, index)[0]
    text = pc.fill_null(s, "")  # a NULL list would vanish from the flattening below
    # commons-lang splits on whitespace when the separator is empty
    parts = pc.split_pattern_regex(text, pattern=r"\s") if sep == "" else pc.split_pattern(text, pattern=sep)
    # element i, NULL for a shorter list (list_element fails past the end; padding the string
    # with separators would merge with a partial separator at its end)
    field = pc.list_flatten(pc.list_slice(parts, i, i + 1, return_fixed_size_list=True))
    # an empty string has no fields at all in Flink; NULL stays NULL
    return pc.if_else(pc.greater(pc.utf8_length(s), 0), field, _null_string())


def _split_field_ascii(s: pa.Array, sep: int, i: int) -> pa.Array:
    """SPLIT_INDEX by a one-byte (ASCII) separator with numpy, about 3x faster than a regex pass:
    the separators' byte positions, each row's first one by a binary search of the row
    boundaries (both shared by the SPLIT_INDEX calls on one column, see _separators), then the
    wanted fields copied out one memcpy each.  An ASCII byte never occurs inside a multi-byte UTF-8
    character, so byte positions split as characters do."""
    rows = len(s)
    if rows == 0:
        return pa.array([], s.type)
    data_buf = s.buffers()[2]
    offsets, hits, bounds = _separators(s, sep)
    first, count = bounds[:-1], bounds[1:] - bounds[:-1]
    last = max(len(hits) - 1, 0)
    padded = np.append(hits, 0)  # index ``last`` exists even without separators; masked below
    begin = offsets[:-1] if i == 0 else padded[np.minimum(first + i - 1, last)] + 1
    end = np.where(count > i, padded[np.minimum(first + i, last)], offsets[1:])
    # the field exists (i separators before it); an empty string has no fields at all in Flink
    valid = (count >= i) & (offsets[1:] > offsets[:-1])
    if s.null_count:
        valid &= s.is_valid().to_numpy(zero_copy_only=False)
    # every field and the gap behind it as elements of one array over the input's bytes (the
    # fields ascend and never overlap), then every other element taken: one memcpy per field
    # instead of a byte-wise numpy gather with 8 bytes of index per byte
    begin = np.where(valid, begin, offsets[:-1])
    end = np.where(valid, end, offsets[:-1])
    span_offsets = np.empty(2 * rows, np.int64)
    span_offsets[0::2], span_offsets[1::2] = begin, end
    present = np.ones(2 * rows - 1, bool)
    present[0::2] = valid
    spans = pa.Array.from_buffers(pa.large_string(), 2 * rows - 1,
                                  [pa.array(present).buffers()[1], pa.py_buffer(span_offsets),
                                   data_buf if data_buf is not None else pa.py_buffer(b"")])
    return spans.take(pa.array(np.arange(0, 2 * rows - 1, 2))).cast(s.type)


# the last column's separators found in this thread: (key, the column's buffers, the result)
_last_separators = threading.local()


def _separators(s: pa.Array, sep: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A string column's row offsets (int64), the byte positions of ``sep`` in its values, and per
    row boundary the number of those before it.  The last column's are remembered (per thread):
    SPLIT_INDEX(url, '/', 3), (url, '/', 4) and (url, '/', 5) in one SELECT (Nexmark q22) find the
    separators once.  A column is known by its buffers' addresses and its slice; the memo keeps the
    buffers, so no other column's can take those addresses while it is remembered."""
    buffers = s.buffers()
    key = (s.type, s.offset, len(s), sep, *((b.address, b.size) if b is not None else None for b in buffers))
    memo = getattr(_last_separators, "memo", None)
    if memo is not None and memo[0] == key:
        return memo[2]
    rows = len(s)
    wide = pa.types.is_large_string(s.type)
    offsets = np.frombuffer(buffers[1], np.int64 if wide else np.int32)[s.offset : s.offset + rows + 1]
    offsets = offsets.astype(np.int64)
    data = np.frombuffer(buffers[2], np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    lo, hi = int(offsets[0]), int(offsets[-1])
    hits = np.flatnonzero(data[lo:hi] == sep) + lo
    bounds = np.searchsorted(hits, offsets)  # per row boundary: the separators before it
    found = (offsets, hits, bounds)
    _last_separators.memo = (key, buffers, found)
    return found


# ---------------------------------------------------------------- regular expressions
# Arrow evaluates RE2 syntax, Flink Java regexes: backreferences and lookaround
# are not available here.  Flink returns NULL/FALSE for an invalid regex instead
# of failing the job, and so do these kernels.


@strict(pa.bool_())
def _regexp(s: Value, regex: Value) -> Value:
    pattern = constant(regex, "REGEXP", "the regular expression")
    if pattern == "":
        return pc.if_else(pc.is_valid(s), False, pa.scalar(None, pa.bool_()))
    try:
        return pc.match_substring_regex(s, pattern=pattern)
    except pa.ArrowInvalid:
        return pc.if_else(pc.is_valid(s), False, pa.scalar(None, pa.bool_()))


def _one_named_group(pattern: str, index: int) -> str | None:
    """``pattern`` (Java syntax) for Arrow's ``extract_regex``, which extracts only named groups.

    Group ``index`` (0: the whole match) becomes ``(?P<g>...)`` and every other capturing group
    (also Java's named ``(?<name>...)``) a non-capturing one, so the group counted is Java's
    and RE2 tracks one submatch only.  None when ``pattern`` has no group ``index``; ValueError
    on a construct this scanner does not number safely (a nested or ``]``-first character class,
    ``\\Q`` inside a class), for which the caller falls back to RE2's own numbering.
    """
    out: list[str] = []
    group = 0
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            if pattern.startswith("\\Q", i):  # quoted text up to \E: no groups in it
                end = pattern.find("\\E", i + 2)
                stop = n if end < 0 else end + 2
            else:
                stop = i + 2
            out.append(pattern[i:stop])
            i = stop
        elif c == "[":
            j = i + 1
            if pattern.startswith("^", j):
                j += 1
            if pattern.startswith("]", j):
                raise ValueError("a character class opening with ]")
            while j < n and pattern[j] != "]":
                if pattern[j] == "[" or pattern.startswith("\\Q", j):
                    raise ValueError("a nested character class")
                j += 2 if pattern[j] == "\\" else 1
            out.append(pattern[i:j + 1])
            i = j + 1
        elif c == "(" and not pattern.startswith("(?", i):
            group += 1
            out.append("(?P<g>" if group == index else "(?:")
            i += 1
        elif c == "(" and pattern.startswith("(?<", i) and i + 3 < n and pattern[i + 3].isalpha():
            close = pattern.find(">", i)  # a Java named group (?<name>X) is numbered too
            if close < 0:
                raise ValueError("an unterminated group name")
            group += 1
            out.append("(?P<g>" if group == index else "(?:")
            i = close + 1
        else:
            out.append(c)
            i += 1
    if index > group:
        return None
    body = "".join(out)
    return f"(?P<g>{body})" if index == 0 else body


@strict(pa.string())
def _regexp_extract(s: Value, regex: Value, group: Value | None = None) -> Value:
    """Group ``group`` (0: the whole match) of the first match of ``regex``; NULL if none.

    One pass of Arrow's ``extract_regex`` (RE2's partial match: the leftmost match, as Java's
    ``Matcher.find()``) with the wanted group named.  A group that does not take part in the
    match gives '' (Java: NULL), as before.
    """
    pattern = constant(regex, "REGEXP_EXTRACT", "the regular expression")
    index = 0 if group is None else constant(group, "REGEXP_EXTRACT", "the group index")
    if index < 0:
        return _null_string()
    try:
        named = _one_named_group(pattern, index)
    except ValueError:
        return _regexp_extract_rewritten(s, pattern, index)
    if named is None:  # fewer groups than ``group``
        return _null_string()
    try:
        return pc.struct_field(pc.extract_regex(s, pattern=named), "g")
    except pa.ArrowInvalid:  # a construct RE2 lacks (backreference, lookaround): Flink's NULL
        return _null_string()


def _regexp_extract_rewritten(s: Value, pattern: str, index: int) -> Value:
    """REGEXP_EXTRACT for a pattern whose groups the scanner cannot number: RE2 numbers them
    itself in a rewrite of each string to its group, about ten times slower than one extract."""
    try:
        matched = pc.match_substring_regex(s, pattern=pattern)
        # a lazy prefix finds the first match like Java's Matcher.find(), and the rewrite keeps
        # just its group N: the match itself is wrapped in group 1, so group N is N + 1
        extracted = pc.replace_substring_regex(
            s, pattern=f"(?s:^.*?)((?:{pattern}))(?s:.*)$", replacement=f"\\{index + 1}", max_replacements=1
        )
    except pa.ArrowInvalid:  # bad regex, or fewer groups than ``group``
        return _null_string()
    return pc.if_else(matched, extracted, _null_string())


@strict(pa.string())
def _regexp_replace(s: Value, regex: Value, replacement: Value) -> Value:
    pattern = constant(regex, "REGEXP_REPLACE", "the regular expression")
    new = constant(replacement, "REGEXP_REPLACE", "the replacement")
    try:
        # Flink quotes the replacement: "$1" or "\1" in it are literal text
        return pc.replace_substring_regex(s, pattern=pattern, replacement=_rewrite_literal(new))
    except pa.ArrowInvalid:
        return _null_string()


# ---------------------------------------------------------------- padding and slicing


_ASTRAL = r"[\x{10000}-\x{10FFFF}]"  # characters Java stores as two UTF-16 units


def _utf16_length(s: pa.Array) -> pa.Array:
    """Java's String.length(): characters outside the Basic Multilingual Plane count twice."""
    return pc.add(pc.cast(pc.utf8_length(s), pa.int64()), pc.cast(pc.count_substring_regex(s, pattern=_ASTRAL), pa.int64()))


def _utf16_prefix(s: pa.Array, width: int) -> pa.Array:
    """Java's s.substring(0, width): the first ``width`` UTF-16 units. Only the rows holding a
    character outside the BMP are cut in Python (they are rare; Arrow counts code points)."""
    cut = pc.utf8_slice_codeunits(s, 0, width)
    astral = pc.fill_null(pc.match_substring_regex(s, pattern=_ASTRAL), False)
    if not pc.any(astral).as_py():
        return cut
    rows = pc.indices_nonzero(astral)
    java = [text.encode("utf-16-le")[: 2 * width].decode("utf-16-le", errors="replace")
            for text in pc.take(s, rows).to_pylist()]
    return pc.replace_with_mask(cut, astral, pa.array(java, pa.string()))


def _pad(name: str, left: bool) -> Kernel:
    @strict(pa.string())
    @first_as_array
    def kernel(s: Value, length: Value, pad: Value) -> Value:
        """Pad to ``length`` characters with ``pad`` repeated, or cut ``s`` to ``length``."""
        width = constant(length, name, "the length")
        fill = constant(pad, name, "the pad string")
        if width < 0 or fill == "":
            return pa.nulls(len(s), pa.string())
        missing = pc.max_element_wise(pc.subtract(width, _utf16_length(s)), 0)
        whole = pc.divide(missing, len(fill))
        part = pc.subtract(missing, pc.multiply(whole, len(fill)))
        padding = pc.binary_join_element_wise(
            pc.binary_repeat(fill, whole),
            lookup(pa.array([fill[:j] for j in range(len(fill))]), part),
            "",
        )
        cut = _utf16_prefix(s, width)
        padded = pc.binary_join_element_wise(*((padding, s) if left else (s, padding)), "")
        return pc.if_else(pc.greater(missing, 0), padded, cut)

    return kernel


@strict(pa.string())
def _left(s: Value, count: Value) -> Value:
    n = constant(count, "LEFT", "the length")
    return pc.utf8_slice_codeunits(s, 0, max(n, 0))


@strict(pa.string())
def _right(s: Value, count: Value) -> Value:
    n = constant(count, "RIGHT", "the length")
    if n <= 0:
        return pc.utf8_slice_codeunits(s, 0, 0)
    return pc.utf8_slice_codeunits(s, -n)


@strict(pa.string())
def _repeat(s: Value, times: Value) -> Value:
    # Flink: a count <= 0 gives the empty string
    return pc.binary_repeat(s, pc.max_element_wise(times, 0, skip_nulls=False))


# ---------------------------------------------------------------- concatenation


def _concat_ws(separator: Value, *strings: Value) -> Value:
    """Join the non-NULL strings with ``separator``; NULL only if the separator is.

    Built from if_else rather than binary_join_element_wise(null_handling='skip'),
    which in Arrow 26 drops the rows whose inputs are all NULL.
    """
    if isinstance(separator, pa.Scalar) and not separator.is_valid:
        return pa.scalar(None, pa.string())
    joined: Value = pa.scalar(None, pa.string())
    for s in strings:
        s = pc.cast(s, pa.string())
        extended = pc.if_else(
            pc.is_null(joined), s, pc.binary_join_element_wise(joined, separator, s, "")
        )
        joined = pc.if_else(pc.is_null(s), joined, extended)
    result = pc.coalesce(joined, "")
    return pc.if_else(pc.is_null(separator), pa.scalar(None, pa.string()), result)


# ---------------------------------------------------------------- characters and case

_BYTES = pa.array([bytes([i]) for i in range(256)], pa.binary())
# Flink's CHR is Latin-1: code (n & 0xFF), with U+0000 for 0
_LATIN1 = pa.array([chr(i) for i in range(256)], pa.string())


@strict(pa.int32())
def _ascii(s: Value) -> Value:
    """Flink's ASCII: the first UTF-8 byte as a signed Java byte, 0 for ''."""
    first = pc.binary_slice(pc.cast(s, pa.binary()), 0, 1)
    unsigned = pc.cast(pc.index_in(first, value_set=_BYTES), pa.int32())
    signed = pc.if_else(pc.greater_equal(unsigned, 128), pc.subtract(unsigned, 256), unsigned)
    return pc.cast(
        pc.if_else(pc.is_valid(s), pc.coalesce(signed, 0), pa.scalar(None, pa.int64())), pa.int32()
    )


@strict(pa.string())
def _chr(code: Value) -> Value:
    codes = pc.cast(code, pa.int64())
    char = lookup(_LATIN1, pc.bit_wise_and(codes, 0xFF))
    return pc.if_else(pc.less(codes, 0), "", char)


_A, _Z, _LOWER_A, _LOWER_Z, _DIGIT_0, _DIGIT_9 = (ord(c) for c in "AZaz09")


@strict(pa.string())
@first_as_array
def _initcap(s: pa.Array) -> pa.Array:
    """Flink's (Calcite's) INITCAP: upper-case the first letter of each run of ASCII letters
    and digits, lower-case its other letters; every other character is left as is.

    Arrow's utf8_title uses Unicode word boundaries ("1st" -> "1St"), so this works on
    the UTF-8 bytes with numpy instead: bytes >= 0x80 are never letters or digits, which
    is exactly Calcite's treatment of non-ASCII characters.
    """
    validity, offsets_buf, data_buf = s.buffers()
    if data_buf is None or data_buf.size == 0:
        return s
    offset_type = np.int64 if pa.types.is_large_string(s.type) else np.int32
    offsets = np.frombuffer(offsets_buf, offset_type)[s.offset : s.offset + len(s) + 1]
    data = np.frombuffer(data_buf, np.uint8).copy()
    upper = (data >= _A) & (data <= _Z)
    lower = (data >= _LOWER_A) & (data <= _LOWER_Z)
    alnum = upper | lower | ((data >= _DIGIT_0) & (data <= _DIGIT_9))
    after_alnum = np.zeros_like(alnum)
    after_alnum[1:] = alnum[:-1]
    starts = offsets[:-1][offsets[:-1] < len(data)]
    after_alnum[starts] = False  # a word never continues into the next string
    data[lower & ~after_alnum] -= 32
    data[upper & after_alnum] += 32
    return pa.Array.from_buffers(
        s.type,
        len(s),
        [validity, offsets_buf, pa.py_buffer(data.tobytes())],
        s.null_count,
        s.offset,
    )


# ---------------------------------------------------------------- hashing


def _hash(algorithm: str) -> Kernel:
    @strict(pa.string())
    def kernel(s: Value) -> Value:
        """Lower-case hex digest of the UTF-8 bytes, as Flink's EncodingUtils.hex."""
        if isinstance(s, pa.Scalar):
            return pa.scalar(hashlib.new(algorithm, s.as_py().encode()).hexdigest())
        # Arrow has no cryptographic hash kernel, so this one is per row
        return pa.array(
            [
                None if v is None else hashlib.new(algorithm, v.encode()).hexdigest()
                for v in s.to_pylist()
            ],
            pa.string(),
        )

    return kernel


_SHA2 = {bits: _hash(f"sha{bits}") for bits in (224, 256, 384, 512)}


@strict(pa.string())
def _sha2(s: Value, bits: Value) -> Value:
    length = constant(bits, "SHA2", "the hash length")
    if length not in _SHA2:
        raise ArgumentTypeError(f"SHA2: hash length must be 224, 256, 384 or 512, got {length}")
    return _SHA2[length](s)


# ---------------------------------------------------------------- registration

for _name, _trimmer in (("TRIM", pc.utf8_trim), ("LTRIM", pc.utf8_ltrim), ("RTRIM", pc.utf8_rtrim),
                         ("BTRIM", pc.utf8_trim)):
    register(_name, returns(_name, pa.string(), STRING, STRING), _trim(_name, _trimmer), 1, 2)

register("REPLACE", returns("REPLACE", pa.string(), STRING, STRING, STRING), _replace, 3)
register(
    "POSITION",
    returns("POSITION", pa.int32(), STRING, STRING, INTEGER),
    _position,
    2,
    3,
    aliases=("LOCATE",),
)
register("INITCAP", returns("INITCAP", pa.string(), STRING), _initcap, 1)
register("LPAD", returns("LPAD", pa.string(), STRING, INTEGER, STRING), _pad("LPAD", left=True), 3)
register("RPAD", returns("RPAD", pa.string(), STRING, INTEGER, STRING), _pad("RPAD", left=False), 3)
register("REPEAT", returns("REPEAT", pa.string(), STRING, INTEGER), _repeat, 2)
register(
    "REVERSE", returns("REVERSE", pa.string(), STRING), strict(pa.string())(pc.utf8_reverse), 1
)
register(
    "CONCAT_WS", returns("CONCAT_WS", pa.string(), STRING, STRING, rest=STRING), _concat_ws, 2, None
)
register(
    "SPLIT_INDEX", returns("SPLIT_INDEX", pa.string(), STRING, STRING, INTEGER), _split_index, 3
)
register("REGEXP", returns("REGEXP", pa.bool_(), STRING, STRING), _regexp, 2)
register(
    "REGEXP_EXTRACT",
    returns("REGEXP_EXTRACT", pa.string(), STRING, STRING, INTEGER),
    _regexp_extract,
    2,
    3,
)
register(
    "REGEXP_REPLACE",
    returns("REGEXP_REPLACE", pa.string(), STRING, STRING, STRING),
    _regexp_replace,
    3,
)
register("LEFT", returns("LEFT", pa.string(), STRING, INTEGER), _left, 2)
register("RIGHT", returns("RIGHT", pa.string(), STRING, INTEGER), _right, 2)
register("ASCII", returns("ASCII", pa.int32(), STRING), _ascii, 1)
register("CHR", returns("CHR", pa.string(), INTEGER), _chr, 1)
register("MD5", returns("MD5", pa.string(), STRING), _hash("md5"), 1)
register("SHA1", returns("SHA1", pa.string(), STRING), _hash("sha1"), 1)
for _bits, _kernel in _SHA2.items():
    register(f"SHA{_bits}", returns(f"SHA{_bits}", pa.string(), STRING), _kernel, 1)
register("SHA2", returns("SHA2", pa.string(), STRING, INTEGER), _sha2, 2)
