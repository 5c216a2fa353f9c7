"""Parsing SQL scripts into located statements with user-facing errors.

A script is tokenized once, so every position (in trees, in errors) refers to
the whole script rather than to one statement; then it is split on the
semicolons between statements (never inside strings, comments or statement
sets) and each statement is parsed with the :class:`~planner.dialect.Flink`
dialect.  sqlglot's exceptions never escape: syntax errors become
:class:`~sqlstream.core.errors.SqlError` naming the offending token and its line and
column, in words rather than sqlglot's internal messages.
"""

from __future__ import annotations

import difflib
import re
import sys
import typing as t
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import ErrorLevel, ParseError, TokenError
from sqlglot.parser import Parser
from sqlglot.tokens import Token, TokenType

from sqlstream.core.errors import SqlError
from sqlstream.core.sql.dialect import STATEMENT_KEYWORDS, Flink, split_statements

_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
_EXPECTING = re.compile(r"^Expecting (.+)$")
_EXPECTED_NAME = re.compile(r"^Expected (table|database) name but got .*$", re.DOTALL)
_REQUIRED = re.compile(r"^Required keyword: '(\w+)' missing for <class '[\w.]*?(\w+)'>$")


@dataclass(frozen=True)
class Statement:
    """One statement of a script: its tree, its own text and where it starts.

    ``line`` and ``col`` (1-based) locate the statement's first token in the
    whole script, so that later (planning) errors can be reported in place.
    """

    node: exp.Expression
    text: str
    line: int
    col: int


def parse_script(sql: str) -> list[Statement]:
    """Parses every statement of ``sql``; empty statements and comments are skipped."""
    tokens = _tokenize(sql)
    return [_parse_statement(chunk, sql) for chunk in split_statements(tokens)]


def parse_one(sql: str) -> exp.Expression:
    """Parses exactly one statement, or one scalar expression such as ``a + 1``.

    Statements are recognised by their first keyword; anything else is parsed
    as an expression, except that a misspelt statement keyword (``SELEC 1``)
    is reported as such rather than as a strange expression.
    """
    chunks = split_statements(_tokenize(sql))
    if not chunks:
        raise SqlError("expected a statement or an expression, found nothing", sql=sql)
    if len(chunks) > 1:
        extra = chunks[1][0]
        line, col = line_col(sql, extra.start)
        raise SqlError(
            "expected a single statement, but found another one", line, col, extra.text, sql
        )
    chunk = chunks[0]
    first = chunk[0]
    if _starts_statement(first) and first.token_type != TokenType.L_PAREN:
        return _parse_statement(chunk, sql).node
    try:
        return _parse_expression(chunk, sql)
    except SqlError:
        if first.token_type != TokenType.L_PAREN and not difflib.get_close_matches(
            first.text.upper(), STATEMENT_KEYWORDS, n=1, cutoff=0.75
        ):
            raise
    # A parenthesised query, "(SELECT 1) UNION (SELECT 2)", or a misspelt keyword.
    return _parse_statement(chunk, sql).node


def line_col(sql: str, offset: int) -> tuple[int, int]:
    """1-based line and column of character ``offset`` of ``sql``."""
    line = sql.count("\n", 0, offset) + 1
    col = offset - (sql.rfind("\n", 0, offset) + 1) + 1
    return line, col


def _starts_statement(token: Token) -> bool:
    parser = Flink.Parser
    return (
        token.token_type in parser.STATEMENT_PARSERS
        or token.token_type in parser.QUERY_START_TOKENS
        or (token.token_type == TokenType.VAR and token.text.upper() in parser.TEXT_STATEMENT_PARSERS)
    )


def _tokenize(sql: str) -> list[Token]:
    try:
        return Flink().tokenize(sql)
    except TokenError as error:
        offset = error.start if error.start is not None else 0
        line, col = line_col(sql, offset)
        rest = sql[offset:]
        if rest.startswith("/*"):
            message = "unterminated comment: '/*' has no matching '*/'"
        elif rest.startswith("'"):
            message = "unterminated string literal: the opening quote has no closing quote"
        elif rest.startswith("`"):
            message = "unterminated quoted identifier: the opening ` has no closing `"
        else:
            message = f"cannot read the SQL text here ({_ANSI_ESCAPE.sub('', str(error))})"
        token = rest.splitlines()[0][:20] if rest else None
        raise SqlError(message, line, col, token, sql) from None


def _new_parser() -> Parser:
    """A Flink parser that raises at the first error, so it is the one reported."""
    return Flink().parser(error_level=ErrorLevel.IMMEDIATE)


# How deeply expressions may nest (parentheses, chained operators, nested CASEs): the planner and
# the evaluator walk expression trees recursively, so deeper ones are refused here, by name, rather
# than failing somewhere later with a RecursionError.
MAX_NESTING = 200
_PARSER_RECURSION = 30 * MAX_NESTING + 1000


def _parse_statement(chunk: list[Token], sql: str) -> Statement:
    start, end = chunk[0].start, chunk[-1].end
    line, col = line_col(sql, start)
    too_deep = SqlError(f"the statement nests expressions more than {MAX_NESTING} levels deep (parentheses, "
                        "chained operators or CASEs); split it, e.g. into views or with SUM over rows",
                        line, col, chunk[0].text, sql)
    # sqlglot's parser recurses some twenty calls per parenthesis: give it room for MAX_NESTING of them
    if sys.getrecursionlimit() < _PARSER_RECURSION:
        sys.setrecursionlimit(_PARSER_RECURSION)
    try:
        node = _new_parser().parse(chunk, sql)[0]
    except ParseError as error:
        raise _sql_error(error, sql) from None
    except RecursionError:
        raise too_deep from None
    if node is not None and nesting(node) > MAX_NESTING:
        raise too_deep
    # The dialect never falls back to exp.Command; guard the contract anyway.
    command = node.find(exp.Command) if node is not None else None
    if node is None or command is not None:
        raise SqlError(f"unsupported statement '{chunk[0].text}'", line, col, chunk[0].text, sql)
    return Statement(t.cast(exp.Expression, node), sql[start : end + 1], line, col)


def nesting(node: exp.Expression) -> int:
    """The depth of the tree under ``node``, counted without recursion."""
    deepest = 0
    stack = [(node, 0)]
    while stack:
        n, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((child, d + 1) for child in n.iter_expressions())
    return deepest


def _parse_expression(chunk: list[Token], sql: str) -> exp.Expression:
    try:
        node = _new_parser().parse_into(exp.Expr, chunk, sql)[0]
    except ParseError as error:
        raise _sql_error(error, sql) from None
    if node is None:
        raise SqlError("expected an expression", sql=sql)
    return t.cast(exp.Expression, node)


def _sql_error(error: ParseError, sql: str) -> SqlError:
    """Turns sqlglot's first reported error into a located, readable SqlError."""
    info = error.errors[0] if error.errors else {}
    description = _ANSI_ESCAPE.sub("", str(info.get("description") or error)).strip()
    start = info.get("start")
    if start is None:
        # Not raised through the Flink parser: fall back to sqlglot's own position.
        line, col = info.get("line"), info.get("col")
        highlight = _ANSI_ESCAPE.sub("", info.get("highlight") or "")
        if col is not None and highlight:
            col = max(col - len(highlight) + 1, 1)
        return SqlError(_humanize(description, highlight or None, False), line, col, None, sql)
    token = sql[start : info.get("end", start) + 1] or None
    line, col = line_col(sql, start)
    return SqlError(_humanize(description, token, bool(info.get("at_end"))), line, col, token, sql)


def _humanize(description: str, token: str | None, at_end: bool) -> str:
    """Rewrites sqlglot's parser-internal messages in a user's terms."""
    found = f"the statement ended after '{token}'" if at_end else f"found '{token}'"
    if description == "Invalid expression / Unexpected token":
        return f"unexpected end of statement after '{token}'" if at_end else f"unexpected '{token}'"
    if match := _EXPECTING.match(description):
        return f"expected '{match.group(1)}' but {found}"
    if description == "Expected TYPE after CAST":
        return f"expected a data type after AS in CAST, but {found}"
    if match := _EXPECTED_NAME.match(description):
        return f"expected a {match.group(1)} name but {found}"
    if match := _REQUIRED.match(description):
        arg, node = match.groups()
        what = f"unexpected end of statement after '{token}'" if at_end else f"unexpected '{token}'"
        return f"{what}; {_missing_part(node, arg)}"
    return description


def _missing_part(node: str, arg: str) -> str:
    """What a node that sqlglot found incomplete lacks, e.g. a WHERE's condition."""
    if node in ("Where", "Having", "Qualify"):
        return f"the {node.upper()} condition is missing"
    if node == "Property":
        return "the option value is missing"
    node_class = getattr(exp, node, None)
    if isinstance(node_class, type) and issubclass(node_class, exp.Binary):
        return "an operand is missing"
    if isinstance(node_class, type) and issubclass(node_class, exp.Func):
        return f"{node_class.sql_names()[0]}() is missing an argument"
    words = re.sub(r"(?<!^)(?=[A-Z])", " ", node).lower()
    return f"the {words} is incomplete ({arg.rstrip('_')} is missing)"
