"""Translate sqlglot function nodes into registry calls.

sqlglot parses many functions into dedicated node classes whose argument
slots do not follow the SQL argument order (TIMESTAMPDIFF, POSITION, ...),
so each needs an explicit translation to (registry name, arguments in the
order the registered kernel takes them).
"""

from __future__ import annotations

from sqlglot import exp


def translate_call(node: exp.Func) -> tuple[str, list[exp.Expression]] | None:
    """(registry name, SQL argument nodes) for a function node, or None if unknown."""
    if isinstance(node, exp.Anonymous):
        return node.name.upper(), list(node.expressions)
    if isinstance(node, exp.Substring):
        args = [node.this, node.args.get("start")]
        if node.args.get("length") is not None:
            args.append(node.args["length"])
        return "SUBSTRING", [a for a in args if a is not None]
    if isinstance(node, exp.Length):
        return "CHAR_LENGTH", [node.this]
    if isinstance(node, exp.Coalesce):
        return "COALESCE", [node.this, *node.expressions]
    if isinstance(node, exp.Concat):
        return "CONCAT", list(node.expressions)
    if isinstance(node, exp.Upper | exp.Lower):
        return node.sql_name(), [node.this]
    return None
