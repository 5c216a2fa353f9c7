"""Name resolution: which input column a (possibly qualified) column name means."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp

from sqlstream.core.errors import PlanError
from sqlstream.core.expressions import ColumnRef


def position(node: exp.Expression | None) -> tuple[int | None, int | None]:
    """Line and column of the first token of ``node`` that sqlglot located."""
    if node is None:
        return None, None
    best: tuple[int, int] | None = None
    for n in node.walk():
        meta = getattr(n, "_meta", None) or {}
        if "line" in meta:
            # sqlglot records the column of the token's last character
            start_col = meta.get("col", 1)
            if "start" in meta and "end" in meta:
                start_col = meta["col"] - (meta["end"] - meta["start"])
            here = (meta["line"], start_col)
            best = here if best is None or here < best else best
    if best is not None:
        return best
    return None, None


def plan_error(message: str, node: exp.Expression | None, token: str | None = None) -> PlanError:
    line, col = position(node)
    return PlanError(message, line, col, token)


USING = "$using:"  # the prefix of a USING join's right-side column in the join's scope


@dataclass(frozen=True)
class ScopeColumn:
    qualifier: str | None
    name: str
    type: pa.DataType


class Scope:
    """The columns visible to an expression, in input order."""

    def __init__(self, columns: list[ScopeColumn]) -> None:
        self.columns = columns

    @classmethod
    def of(cls, schema: pa.Schema, qualifier: str | None = None) -> Scope:
        return cls([ScopeColumn(qualifier, f.name, f.type) for f in schema])

    def requalified(self, qualifier: str) -> Scope:
        return Scope([ScopeColumn(qualifier, c.name, c.type) for c in self.columns])

    def resolve(self, node: exp.Column) -> ColumnRef:
        name = node.name
        qualifier = node.table or None
        matches = [
            i
            for i, c in enumerate(self.columns)
            if (c.name.lower() == name.lower()
                # the right side's column of a JOIN ... USING answers only to its qualified name
                or (qualifier is not None and c.name.lower() == f"{USING}{name}".lower()))
            and (qualifier is None or (c.qualifier or "").lower() == qualifier.lower())
        ]
        if len(matches) > 1:
            raise plan_error(f"column '{name}' is ambiguous; qualify it with its table name", node, name)
        if not matches:
            shown = f"{qualifier}.{name}" if qualifier else name
            candidates = [c.name for c in self.columns]
            close = difflib.get_close_matches(name, candidates, n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            available = ", ".join(candidates)
            raise plan_error(
                f"unknown column '{shown}'.{hint} Available columns: {available}", node, name
            )
        i = matches[0]
        return ColumnRef(i, self.columns[i].name, self.columns[i].type)
