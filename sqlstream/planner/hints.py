"""Flink's STATE_TTL query hint: an idle-state retention time per regular join input and per
group aggregation, in place of ``table.exec.state.ttl`` for the operators of one query block.

``SELECT /*+ STATE_TTL('o' = '1d', 'c' = '12h') */ ...``: each key names an input of the hinted
SELECT (a table, a view, an alias, or a subquery's alias); a join keeps each side's rows for the
TTL of that side's key, a GROUP BY over one named input keeps its groups for that key's TTL. A key
that names no input is an error, as in Flink ("cannot match the name of input tables or views").
"""

from __future__ import annotations

from sqlglot import exp

from sqlstream.core.durations import parse_duration_ms
from sqlstream.planner.scope import plan_error

STATE_TTL = "STATE_TTL"


def state_ttl_hint(sel: exp.Select) -> dict[str, int]:
    """The STATE_TTL hint of a SELECT as {lower-cased input name: TTL in ms} (empty without one);
    the first hint naming a key wins, as Flink resolves conflicting hints."""
    hint = sel.args.get("hint")
    out: dict[str, int] = {}
    if hint is None:
        return out
    for item in hint.expressions:
        if not (isinstance(item, exp.Anonymous) and item.name.upper() == STATE_TTL):
            continue
        if not item.expressions:
            raise plan_error("STATE_TTL needs key-value options, e.g. /*+ STATE_TTL('orders' = '1d') */", item)
        for option in item.expressions:
            if not (isinstance(option, exp.EQ) and isinstance(option.this, exp.Literal | exp.Column)
                    and isinstance(option.expression, exp.Literal)):
                raise plan_error("STATE_TTL options are 'table or alias' = 'duration' pairs, e.g. "
                                 "STATE_TTL('orders' = '1d')", option)
            key, value = option.this.name, option.expression.name
            try:
                ttl = parse_duration_ms(value)
            except ValueError as e:
                raise plan_error(f"STATE_TTL('{key}' = '{value}'): {e}", option) from None
            if ttl < 0:
                raise plan_error(f"STATE_TTL('{key}' = '{value}'): the TTL must not be negative", option)
            out.setdefault(key.lower(), ttl)
    return out


def input_name(node: exp.Expression) -> str | None:
    """The name a FROM or JOIN item is known by in a STATE_TTL hint: its alias, else its table or
    view name (None for an item without a name, such as a window TVF)."""
    if isinstance(node, exp.Table | exp.Subquery):
        return (node.alias or node.name or None) and (node.alias or node.name).lower()
    return None


def check_keys(ttls: dict[str, int], names: list[str | None], at: exp.Expression) -> None:
    """Refuse a hint key that names no input of the query block, as Flink does."""
    unknown = [k for k in ttls if k not in {n for n in names if n}]
    if unknown:
        raise plan_error("The options of following hints cannot match the name of input tables or views: "
                         + ", ".join(f"`{k}` in `state_ttl`" for k in unknown)
                         + f" (the inputs here: {', '.join(n for n in names if n) or 'none with a name'})", at)


def ttl_ms(ttl: int | None) -> int | None:
    """A hinted TTL as the operators take it: 0 keeps state forever (None)."""
    return ttl if ttl else None
