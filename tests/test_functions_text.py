"""The string, encoding and web functions added from Flink's list (OVERLAY, STARTSWITH, BTRIM,
TRANSLATE, ELT, REGEXP_COUNT/SUBSTR/INSTR, TO_BASE64, HEX, UNHEX, BIN, URL_ENCODE/DECODE, PARSE_URL,
INET_ATON/NTOA, INSTR, IFNULL): each expression over the same rows gave these values and this type
in Flink 2.3 (PyFlink, streaming mode, parallelism 1; BYTES shown as hex)."""

from __future__ import annotations

import pytest

from sqlstream.core.errors import SqlStreamError
from sqlstream.frontend.session import Session

WIDE = "(VALUES ('abcdefg', 12, ' a b ', 'a b&c/ü?'), ('García', -3, '', ''), (CAST(NULL AS STRING), CAST(NULL AS INT), CAST(NULL AS STRING), CAST(NULL AS STRING))) AS t(s, n, p, u)"
NARROW = "(VALUES ('abcdefg'), ('García'), (CAST(NULL AS STRING))) AS t(s)"

FLINK_TYPES = {"VARCHAR": "string", "CHAR": "string", "INT": "int32", "BIGINT": "int64", "BOOLEAN": "bool",
               "VARBINARY": "binary"}

CASES = [
    ("OVERLAY(s PLACING 'xyz' FROM 2 FOR 3)", WIDE, 'VARCHAR', ['axyzefg', 'Gxyzía', None]),
    ("OVERLAY(s PLACING 'xy' FROM 3)", WIDE, 'VARCHAR', ['abxyefg', 'Gaxyía', None]),
    ("OVERLAY(s PLACING '' FROM 1 FOR 1)", WIDE, 'VARCHAR', ['bcdefg', 'arcía', None]),
    ("OVERLAY(s PLACING 'Q' FROM 10)", WIDE, 'VARCHAR', ['abcdefg', 'García', None]),
    ("INSTR(s, 'c')", WIDE, 'INT', [3, 4, None]),
    ("STARTSWITH(s, 'ab')", WIDE, 'BOOLEAN', [True, False, None]),
    ("ENDSWITH(s, 'fg')", WIDE, 'BOOLEAN', [False, True, None]),
    ("STARTSWITH(s, '')", WIDE, 'BOOLEAN', [True, True, None]),
    ('BTRIM(p)', WIDE, 'VARCHAR', ['a b', '', None]),
    ("BTRIM(s, 'ag')", WIDE, 'VARCHAR', ['bcdef', 'Garcí', None]),
    ("REGEXP_COUNT(s, '[a-c]')", WIDE, 'INT', [3, 3, None]),
    ("REGEXP_SUBSTR(s, 'c.')", WIDE, 'VARCHAR', ['cd', 'cí', None]),
    ("REGEXP_INSTR(s, 'd')", WIDE, 'INT', [4, None, 0]),
    ("REGEXP_INSTR(s, 'zz')", WIDE, 'INT', [0, 0, None]),
    ("REGEXP_SUBSTR(s, 'zz')", WIDE, 'VARCHAR', [None, None, None]),
    ("ELT(2, s, 'b', 'c')", WIDE, 'VARCHAR', ['b', 'b', 'b']),
    ("ELT(5, s, 'b')", WIDE, 'VARCHAR', [None, None, None]),
    ("ELT(0, s, 'b')", WIDE, 'VARCHAR', [None, None, None]),
    ('TO_BASE64(s)', WIDE, 'VARCHAR', ['YWJjZGVmZw==', 'R2FyY8OtYQ==', None]),
    ('FROM_BASE64(TO_BASE64(s))', WIDE, 'VARCHAR', ['abcdefg', 'García', None]),
    ('HEX(s)', WIDE, 'VARCHAR', ['61626364656667', '47617263C3AD61', None]),
    ('HEX(n)', WIDE, 'VARCHAR', ['C', 'FFFFFFFFFFFFFFFD', None]),
    ('BIN(n)', WIDE, 'VARCHAR', ['1100', '1111111111111111111111111111111111111111111111111111111111111101', None]),
    ("UNHEX('616263')", WIDE, 'VARBINARY', ['616263', '616263', '616263']),
    ('URL_ENCODE(u)', WIDE, 'VARCHAR', ['a+b%26c%2F%C3%BC%3F', '', None]),
    ('URL_DECODE(URL_ENCODE(u))', WIDE, 'VARCHAR', ['a b&c/ü?', '', None]),
    ("URL_DECODE('a+b%26c%zz')", WIDE, 'VARCHAR', [None, None, None]),
    ("PARSE_URL('http://facebook.com/path1/p.php?k1=v1&k2=v2#Ref1', 'HOST')", WIDE, 'VARCHAR', ['facebook.com', 'facebook.com', 'facebook.com']),
    ("PARSE_URL('http://facebook.com/path1/p.php?k1=v1&k2=v2#Ref1', 'QUERY', 'k1')", WIDE, 'VARCHAR', ['v1', 'v1', 'v1']),
    ("PARSE_URL('http://facebook.com/path1/p.php?k1=v1&k2=v2#Ref1', 'PATH')", WIDE, 'VARCHAR', ['/path1/p.php', '/path1/p.php', '/path1/p.php']),
    ("PARSE_URL('http://facebook.com/path1/p.php?k1=v1&k2=v2#Ref1', 'QUERY')", WIDE, 'VARCHAR', ['k1=v1&k2=v2', 'k1=v1&k2=v2', 'k1=v1&k2=v2']),
    ("PARSE_URL('http://facebook.com/path1/p.php?k1=v1&k2=v2#Ref1', 'REF')", WIDE, 'VARCHAR', ['Ref1', 'Ref1', 'Ref1']),
    ("PARSE_URL('http://facebook.com/path1/p.php?k1=v1&k2=v2#Ref1', 'PROTOCOL')", WIDE, 'VARCHAR', ['http', 'http', 'http']),
    ("PARSE_URL('http://user:pw@facebook.com:8080/path1/p.php?k1=v1&k2=v2#Ref1', 'AUTHORITY')", WIDE, 'VARCHAR', ['user:pw@facebook.com:8080', 'user:pw@facebook.com:8080', 'user:pw@facebook.com:8080']),
    ("PARSE_URL('http://user:pw@facebook.com:8080/path1/p.php?k1=v1&k2=v2#Ref1', 'USERINFO')", WIDE, 'VARCHAR', ['user:pw', 'user:pw', 'user:pw']),
    ("PARSE_URL('http://facebook.com/path1/p.php?k1=v1&k2=v2#Ref1', 'FILE')", WIDE, 'VARCHAR', ['/path1/p.php?k1=v1&k2=v2', '/path1/p.php?k1=v1&k2=v2', '/path1/p.php?k1=v1&k2=v2']),
    ("IFNULL(s, 'x')", WIDE, 'VARCHAR', ['abcdefg', 'García', 'x']),
    ("INET_ATON('192.168.0.1')", WIDE, 'BIGINT', [3232235521, 3232235521, 3232235521]),
    ('INET_NTOA(3232235521)', WIDE, 'VARCHAR', ['192.168.0.1', '192.168.0.1', '192.168.0.1']),
    ("TRANSLATE(s, 'abc', 'xy')", WIDE, 'VARCHAR', ['xydefg', 'Gxríx', None]),
    ('HEX(-1)', WIDE, 'VARCHAR', ['FFFFFFFFFFFFFFFF', 'FFFFFFFFFFFFFFFF', 'FFFFFFFFFFFFFFFF']),
    ('BIN(-1)', WIDE, 'VARCHAR', ['1111111111111111111111111111111111111111111111111111111111111111', '1111111111111111111111111111111111111111111111111111111111111111', '1111111111111111111111111111111111111111111111111111111111111111']),
    ("INSTR(s, '')", WIDE, 'INT', [1, 1, None]),
    ("REGEXP_COUNT(s, '')", WIDE, 'INT', [8, 7, None]),
    ("UNHEX('abc')", NARROW, 'VARBINARY', ['00bc', '00bc', '00bc']),
    ("UNHEX('zz')", NARROW, 'VARBINARY', [None, None, None]),
    ("INET_ATON('1.2.3')", NARROW, 'BIGINT', [16908291, 16908291, 16908291]),
    ("INET_ATON('256.1.1.1')", NARROW, 'BIGINT', [None, None, None]),
    ('INET_NTOA(-1)', NARROW, 'VARCHAR', [None, None, None]),
    ('INET_NTOA(4294967296)', NARROW, 'VARCHAR', [None, None, None]),
    ("PARSE_URL('not a url', 'HOST')", NARROW, 'VARCHAR', [None, None, None]),
    ("PARSE_URL('http://a.com/p?x=1', 'QUERY', 'y')", NARROW, 'VARCHAR', [None, None, None]),
    ("PARSE_URL('http://a.com/p', 'QUERY')", NARROW, 'VARCHAR', [None, None, None]),
    ("PARSE_URL('http://a.com/p?x=1&x=2', 'QUERY', 'x')", NARROW, 'VARCHAR', ['1', '1', '1']),
    ("PARSE_URL('http://A.Com:80/p', 'HOST')", NARROW, 'VARCHAR', ['A.Com', 'A.Com', 'A.Com']),
    ("PARSE_URL('http://a.com/p', 'USERINFO')", NARROW, 'VARCHAR', [None, None, None]),
    ("PARSE_URL('http://a.com/p', 'FOO')", NARROW, 'VARCHAR', [None, None, None]),
    ('HEX(CAST(255 AS BIGINT))', NARROW, 'VARCHAR', ['FF', 'FF', 'FF']),
    ('TO_BASE64(CAST(NULL AS STRING))', NARROW, 'VARCHAR', [None, None, None]),
    ("URL_ENCODE('~*._-')", NARROW, 'VARCHAR', ['%7E*._-', '%7E*._-', '%7E*._-']),
    ("ELT(CAST(NULL AS INT), 'a')", NARROW, 'CHAR', [None, None, None]),
    ("TRANSLATE('aabbcc', 'aba', 'xyz')", NARROW, 'VARCHAR', ['xxyycc', 'xxyycc', 'xxyycc']),
    ("TRANSLATE(s, '', 'x')", NARROW, 'VARCHAR', ['abcdefg', 'García', None]),
    ("REGEXP_SUBSTR('abc', '')", NARROW, 'VARCHAR', ['', '', '']),
    ("OVERLAY('abc' PLACING 'x' FROM 0)", NARROW, 'VARCHAR', ['abc', 'abc', 'abc']),
    ("OVERLAY('abc' PLACING 'x' FROM 4)", NARROW, 'VARCHAR', ['abc', 'abc', 'abc']),
    ("OVERLAY('abc' PLACING 'x' FROM -1 FOR 2)", NARROW, 'VARCHAR', ['abc', 'abc', 'abc']),
    ("OVERLAY('abc' PLACING 'xyz' FROM 2 FOR 0)", NARROW, 'VARCHAR', ['axyz', 'axyz', 'axyz']),
    ("INET_ATON('127.0.0.1 ')", NARROW, 'BIGINT', [None, None, None]),
    ("HEX('')", NARROW, 'VARCHAR', ['', '', '']),
    ('BIN(0)', NARROW, 'VARCHAR', ['0', '0', '0']),
    ('HEX(0)', NARROW, 'VARCHAR', ['0', '0', '0']),
    ("BTRIM(s, '')", NARROW, 'VARCHAR', ['abcdefg', 'García', None]),
    ("ENDSWITH(s, '')", NARROW, 'BOOLEAN', [None, True, True]),
]


def _select(expression: str, rows: str):
    return Session().execute_script(f"SELECT {expression} AS v FROM {rows};")[-1].table


@pytest.mark.parametrize(("expression", "rows", "flink_type", "values"), CASES, ids=[c[0] for c in CASES])
def test_function_gives_flinks_values_and_type(expression: str, rows: str, flink_type: str, values: list) -> None:
    table = _select(expression, rows)
    got = [v.hex() if isinstance(v, bytes) else v for v in table.column(0).to_pylist()]
    # Flink's VALUES may come out in another order: compare as multisets
    assert sorted(map(repr, got)) == sorted(map(repr, values))
    assert str(table.schema.field(0).type) == FLINK_TYPES[flink_type]


def test_from_base64_of_a_malformed_string_fails_the_job_naming_it() -> None:
    # Flink fails too (IllegalArgumentException from java.util.Base64)
    with pytest.raises(SqlStreamError, match="FROM_BASE64: '!!' is not Base64"):
        _select("FROM_BASE64(s)", "(VALUES ('!!')) AS t(s)")


def test_a_pattern_that_is_a_column_is_refused_at_plan_time() -> None:
    with pytest.raises(SqlStreamError, match="must be a constant"):
        _select("STARTSWITH(s, s)", NARROW)
