"""Flink's encoding and web functions: ENCODE/DECODE, TO_BASE64/FROM_BASE64, HEX/UNHEX/BIN, URL_ENCODE/URL_DECODE,
PARSE_URL, INET_ATON/INET_NTOA, with Flink's (Java's) results, including its NULLs for malformed
input (each checked against Flink 2.3, see tests/test_functions_text.py).

Arrow has no kernels for these, so they run per value, as the hash functions do.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import quote_plus, unquote_plus

import pyarrow as pa

from sqlstream.core.errors import DataError
from sqlstream.core.functions import ArgumentTypeError, Value, register
from sqlstream.core.functions.strings import INTEGER, STRING, returns, strict, type_names
from sqlstream.core.types import is_string

_MASK64 = (1 << 64) - 1
BINARY = (lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t), "BINARY")


def per_value(result: pa.DataType, fn: Callable[..., Any]) -> Callable[..., Value]:
    """A kernel applying ``fn`` to each non-NULL value of the first argument (the others constants)."""

    @strict(result)
    def kernel(first: Value, *rest: Value) -> Value:
        if not all(isinstance(r, pa.Scalar) for r in rest):
            raise ArgumentTypeError(f"{fn.__name__.strip('_').upper()}: the arguments after the first must be constants")
        extra = [r.as_py() for r in rest]
        if isinstance(first, pa.Scalar):
            return pa.scalar(fn(first.as_py(), *extra), result)
        return pa.array([None if v is None else fn(v, *extra) for v in first.to_pylist()], result)

    kernel.__doc__ = fn.__doc__
    return kernel


def _from_base64(text: str) -> str:
    try:
        return base64.b64decode(text, validate=True).decode("utf-8", errors="replace")
    except binascii.Error:
        raise ValueError(f"FROM_BASE64: '{text}' is not Base64") from None


def _hex(value: int | str) -> str:
    """Long.toHexString of an integer (two's complement), or the UTF-8 bytes of a string, upper case."""
    if isinstance(value, str):
        return value.encode().hex().upper()
    return format(value & _MASK64, "X")


def _unhex(text: str) -> bytes | None:
    """Flink's EncodingUtils.unhex: pairs of hex digits from the right; of an odd length the
    first digit is only checked (its byte stays 0); NULL for a non-hex digit."""
    digits = text.encode()
    out = bytearray((len(digits) + 1) >> 1)
    i, j = len(digits) - 2, len(out) - 1
    while i >= 0:
        pair = digits[i:i + 2].decode(errors="replace")
        if not re.fullmatch("[0-9a-fA-F]{2}", pair):
            return None
        out[j] = int(pair, 16)
        i, j = i - 2, j - 1
    if i == -1 and not re.fullmatch("[0-9a-fA-F]", chr(digits[0])):
        return None
    return bytes(out)


def _url_encode(text: str) -> str:
    """java.net.URLEncoder (UTF-8): letters, digits and . - * _ kept, space as '+'."""
    return quote_plus(text, safe="*").replace("~", "%7E")


_BAD_ESCAPE = re.compile(r"%(?![0-9a-fA-F]{2})")


def _url_decode(text: str) -> str | None:
    """java.net.URLDecoder (UTF-8); NULL where it fails (a '%' not followed by two hex digits)."""
    return None if _BAD_ESCAPE.search(text) else unquote_plus(text, errors="replace")


_URL = re.compile(r"(?P<protocol>https?|ftp|file|jar):(?://(?P<authority>[^/?#]*))?(?P<path>[^?#]*)"
                  r"(?:\?(?P<query>[^#]*))?(?:#(?P<ref>.*))?\Z", re.DOTALL)


def _parse_url(url: str, part: str, key: str | None = None) -> str | None:
    """java.net.URL's parts; NULL for a malformed URL, an absent part or an unknown part name."""
    m = _URL.match(url)
    if m is None:
        return None
    authority = m["authority"]
    userinfo, _, hostport = (authority or "").rpartition("@")
    host = re.sub(r":\d*\Z", "", hostport) if not hostport.startswith("[") else hostport.split("]")[0] + "]"
    query = m["query"]
    if key is not None:
        if part.upper() != "QUERY" or query is None:
            return None
        found = re.search(rf"(?:^|&){re.escape(key)}=([^&]*)", query)
        return found[1] if found else None
    parts = {
        "HOST": host if authority is not None else None,
        "PATH": m["path"],
        "QUERY": query,
        "REF": m["ref"],
        "PROTOCOL": m["protocol"],
        "FILE": m["path"] + (f"?{query}" if query is not None else ""),
        "AUTHORITY": authority,
        "USERINFO": userinfo or None,
    }
    return parts.get(part.upper())


def _inet_aton(text: str) -> int | None:
    """MySQL's (and Flink's) INET_ATON: 'a.b.c.d', 'a.b.c' (c fills 16 bits) and so on; NULL if malformed."""
    parts = text.split(".")
    if not 1 <= len(parts) <= 4 or not all(re.fullmatch("[0-9]+", p) for p in parts):
        return None
    numbers = [int(p) for p in parts]
    last_bits = 8 * (5 - len(parts))
    if any(n > 255 for n in numbers[:-1]) or numbers[-1] >= 1 << last_bits:
        return None
    value = 0
    for n in numbers[:-1]:
        value = value << 8 | n
    return value << last_bits | numbers[-1]


def _inet_ntoa(number: int) -> str | None:
    if not 0 <= number < 1 << 32:
        return None
    return ".".join(str(number >> shift & 255) for shift in (24, 16, 8, 0))


def _hex_type(types: list[pa.DataType]) -> pa.DataType:
    if not (pa.types.is_null(types[0]) or pa.types.is_integer(types[0]) or is_string(types[0])):
        raise ArgumentTypeError(f"HEX expects (INTEGER) or (STRING), got ({type_names(types)})")
    return pa.string()


register("TO_BASE64", returns("TO_BASE64", pa.string(), STRING),
         per_value(pa.string(), lambda s: base64.b64encode(s.encode()).decode()), 1)
register("FROM_BASE64", returns("FROM_BASE64", pa.string(), STRING), per_value(pa.string(), _from_base64), 1)
register("HEX", _hex_type, per_value(pa.string(), _hex), 1)
register("UNHEX", returns("UNHEX", pa.binary(), STRING), per_value(pa.binary(), _unhex), 1)
register("BIN", returns("BIN", pa.string(), INTEGER), per_value(pa.string(), lambda n: format(n & _MASK64, "b")), 1)
register("URL_ENCODE", returns("URL_ENCODE", pa.string(), STRING), per_value(pa.string(), _url_encode), 1)
register("URL_DECODE", returns("URL_DECODE", pa.string(), STRING), per_value(pa.string(), _url_decode), 1)
register("PARSE_URL", returns("PARSE_URL", pa.string(), STRING, STRING, STRING), per_value(pa.string(), _parse_url), 2, 3)
register("INET_ATON", returns("INET_ATON", pa.int64(), STRING), per_value(pa.int64(), _inet_aton), 1)
register("INET_NTOA", returns("INET_NTOA", pa.string(), INTEGER), per_value(pa.string(), _inet_ntoa), 1)


# Java's standard charsets (every JVM has them) by Python codec name, with what Java does that
# Python's codec does not: 'UTF-16' writes a big-endian byte order mark and reads big-endian
# where there is none
_JAVA_CHARSETS = {"ascii": "US-ASCII", "iso8859-1": "ISO-8859-1", "utf-8": "UTF-8", "utf-16-be": "UTF-16BE",
                  "utf-16-le": "UTF-16LE", "utf-16": "UTF-16"}


def _charset(name: str) -> str:
    """The Java charset ``name`` stands for (its canonical name or an alias Python's codecs also
    know, such as 'utf8' or 'latin1'); an error for a charset outside Java's standard six, as
    Charset.forName fails for an unknown one."""
    try:
        codec = codecs.lookup(name).name
    except LookupError:
        codec = ""
    if codec not in _JAVA_CHARSETS:
        raise DataError(f"unsupported charset '{name}' (sqlstream knows Java's standard charsets: "
                        f"{', '.join(_JAVA_CHARSETS.values())})")
    return _JAVA_CHARSETS[codec]


def _encode(text: str, charset: str) -> bytes:
    """String.getBytes(charset): a character the charset lacks becomes '?'."""
    java = _charset(charset)
    if java == "UTF-16":  # the byte order mark starts a non-empty encoding only
        return b"\xfe\xff" + text.encode("utf-16-be", errors="replace") if text else b""
    return text.encode(java, errors="replace")


def _decode(data: bytes, charset: str) -> str:
    """new String(bytes, charset): malformed input becomes U+FFFD; 'UTF-16' honours a byte order
    mark and is big-endian without one."""
    java = _charset(charset)
    if java == "UTF-16":
        if data[:2] == b"\xff\xfe":
            return data[2:].decode("utf-16-le", errors="replace")
        return data[2 if data[:2] == b"\xfe\xff" else 0:].decode("utf-16-be", errors="replace")
    return data.decode(java, errors="replace")


register("ENCODE", returns("ENCODE", pa.binary(), STRING, STRING), per_value(pa.binary(), _encode), 2)
register("DECODE", returns("DECODE", pa.string(), BINARY, STRING), per_value(pa.string(), _decode), 2)
