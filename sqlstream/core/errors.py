"""Errors a user sees.

Every failure caused by the user's SQL, data or environment is raised as a
:class:`SqlStreamError` subclass whose message names the problem and where it
is.  The CLI prints these without a traceback; anything else is a bug.
"""

from __future__ import annotations

from sqlstream.core.secrets import redact


class SqlStreamError(Exception):
    """Base of all errors that are reported to the user as plain messages.

    The message hides secret option values (``'password' = '...'``), since it
    may quote the user's SQL and ends up on screens, in logs and in REST answers.
    """

    def __str__(self) -> str:
        return redact(super().__str__())


class SqlError(SqlStreamError):
    """An error in SQL text, located by line and column (1-based) when known."""

    def __init__(
        self,
        message: str,
        line: int | None = None,
        col: int | None = None,
        token: str | None = None,
        sql: str | None = None,
    ) -> None:
        self.message = message
        self.line = line
        self.col = col
        self.token = token
        self.sql = sql
        super().__init__(self.render())

    def render(self) -> str:
        where = ""
        if self.line is not None:
            where = f" at line {self.line}, column {self.col}"
        near = f" near '{self.token}'" if self.token else ""
        text = redact(f"SQL error{where}{near}: {self.message}")
        if self.sql is not None and self.line is not None:
            lines = self.sql.splitlines()
            if 0 < self.line <= len(lines):
                src = lines[self.line - 1]
                before = max((self.col or 1) - 1, 0)
                # secrets before the error shorten the quoted line: the caret moves with them
                caret = " " * len(redact(src[:before])) + "^"
                text += f"\n  {redact(src)}\n  {caret}"
        return text


class PlanError(SqlError):
    """The SQL is valid but cannot be planned (unknown table, type mismatch, ...)."""


class CatalogError(SqlStreamError):
    """A catalog object is missing, duplicated or malformed."""


class ConnectorError(SqlStreamError):
    """A connector was given bad options or failed to reach its data."""


class DataError(SqlStreamError):
    """A record could not be read: names the file (or partition) and line (or offset)."""


class ExpressionError(DataError):
    """Evaluating an expression failed on a row: names the expression, the row's column values and
    the reason in Flink's words ('/ by zero'), instead of an Arrow kernel message."""


class JobError(SqlStreamError):
    """A running job failed; wraps the operator and cause."""
