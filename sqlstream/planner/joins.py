"""How a join runs, read off its condition.

The condition is split into conjuncts: ``left.k = right.k`` equalities are
the keys both inputs are partitioned and stored by; comparisons bounding
``left.time - right.time`` between constants make an interval join (state
expires with the watermark); equal ``window_start`` and ``window_end`` of
windows of the same spec on both sides make a window join (rows wait for
their window to end).  Window columns are known from the inputs' window
properties (planner.logical.WindowColumns), so the inputs may be windowing
TVFs, window aggregations (cascaded or not) or window joins, through
projections and filters.  The rest is a residual predicate evaluated on
candidate pairs.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from sqlstream.core.errors import PlanError
from sqlstream.core.expressions import Call, Cast, ColumnRef, Expr, Literal, referenced_columns
from sqlstream.core.joins import IntervalBounds
from sqlstream.planner.logical import WindowColumns

MIN_BOUND = -(2**62)
MAX_BOUND = 2**62


@dataclass(frozen=True)
class WindowJoin:
    """The window columns equated by a window join; the right's index within the right input."""

    left: WindowColumns
    right: WindowColumns

    @property
    def left_end(self) -> int:
        assert self.left.end is not None
        return self.left.end

    @property
    def right_end(self) -> int:
        assert self.right.end is not None
        return self.right.end

    def describe(self) -> str:
        return (f"window={self.left.window.describe(time=False)} on window_start ${self.left.start}=${self.right.start}, "
                f"window_end ${self.left.end}=${self.right.end}")


@dataclass(frozen=True)
class JoinSpec:
    kind: str
    left_keys: tuple[int, ...]
    right_keys: tuple[int, ...]  # index within the right input
    residual: Expr | None  # over left + right columns
    interval: IntervalBounds | None
    window: WindowJoin | None

    def describe(self, window_columns: bool = False) -> str:
        """``window_columns``: name the window and its columns instead of just "window join" (the
        physical plan keeps the short form: operator ids, hence savepoints, are derived from it)."""
        keys = ", ".join(f"${lk}=${rk}" for lk, rk in zip(self.left_keys, self.right_keys, strict=True))
        parts = [f"keys=[{keys}]"]
        if self.interval is not None:
            b = self.interval
            parts.append(f"interval: {b.lower}ms <= ${b.left_time} - right.${b.right_time} <= {b.upper}ms")
        if self.window is not None:
            parts.append(self.window.describe() if window_columns else "window join")
        if self.residual is not None:
            parts.append(f"where={self.residual}")
        return ", ".join(parts)


def conjuncts(e: Expr | None) -> list[Expr]:
    if e is None:
        return []
    if isinstance(e, Call) and e.name == "AND":
        return conjuncts(e.args[0]) + conjuncts(e.args[1])
    return [e]


def conjoin(parts: list[Expr]) -> Expr | None:
    out: Expr | None = None
    for p in parts:
        out = p if out is None else Call("AND", (out, p), pa.bool_())
    return out


def _strip_cast(e: Expr) -> Expr:
    while isinstance(e, Cast) and pa.types.is_timestamp(e.type):
        e = e.arg
    return e


def _time_offset(e: Expr) -> tuple[int, int] | None:
    """(column index, offset ms) for `col`, `col + INTERVAL`, `col - INTERVAL`."""
    e = _strip_cast(e)
    if isinstance(e, ColumnRef):
        return e.index, 0
    if isinstance(e, Call) and e.name in ("+", "-") and len(e.args) == 2:
        col, lit = _strip_cast(e.args[0]), e.args[1]
        if isinstance(col, ColumnRef) and isinstance(lit, Literal) and pa.types.is_duration(lit.type):
            ms = int(lit.value.total_seconds() * 1000) if hasattr(lit.value, "total_seconds") else int(lit.value)
            return col.index, ms if e.name == "+" else -ms
    return None


def _bound(pred: Expr, width: int, left_time: int | None, right_time: int | None) -> tuple[int | None, int | None] | None:
    """A conjunct as a (lower, upper) bound on left.time - right.time, or None if it is not one."""
    if not (isinstance(pred, Call) and pred.name in (">=", ">", "<=", "<") and len(pred.args) == 2):
        return None
    a, b = _time_offset(pred.args[0]), _time_offset(pred.args[1])
    if a is None or b is None:
        return None
    (ia, oa), (ib, ob) = a, b
    op = pred.name
    if ia == left_time and ib == width + (right_time if right_time is not None else -1):
        pass
    elif ib == left_time and ia == width + (right_time if right_time is not None else -1):
        # mirror: right + ob op left + oa  ->  left + oa (mirrored op) right + ob
        (ia, oa), (ib, ob) = (ib, ob), (ia, oa)
        op = {">=": "<=", ">": "<", "<=": ">=", "<": ">"}[op]
    else:
        return None
    # left + oa  op  right + ob   <=>   left - right  op  ob - oa
    c = ob - oa
    if op == ">=":
        return c, None
    if op == ">":
        return c + 1, None
    if op == "<=":
        return None, c
    return None, c - 1


def equi_keys(condition: Expr | None, width: int) -> tuple[list[int], list[int], list[Expr]]:
    """(left key columns, right key columns within the right input, the other conjuncts)."""
    left_keys: list[int] = []
    right_keys: list[int] = []
    rest: list[Expr] = []
    for c in conjuncts(condition):
        if isinstance(c, Call) and c.name == "=" and len(c.args) == 2:
            a, b = c.args
            if isinstance(a, ColumnRef) and isinstance(b, ColumnRef):
                if a.index < width <= b.index:
                    left_keys.append(a.index)
                    right_keys.append(b.index - width)
                    continue
                if b.index < width <= a.index:
                    left_keys.append(b.index)
                    right_keys.append(a.index - width)
                    continue
        rest.append(c)
    return left_keys, right_keys, rest


def analyze(join) -> JoinSpec:  # noqa: ANN001 - planner.logical.Join (import cycle)
    width = len(join.left.schema)
    left_keys, right_keys, rest = equi_keys(join.condition, width)
    if join.kind in ("SEMI", "ANTI"):
        # semi and anti joins run as regular joins only (Flink has no time-bounded form of them)
        return JoinSpec(join.kind, tuple(left_keys), tuple(right_keys), conjoin(rest), None, None)
    left_rt, right_rt = join.left.rowtime, join.right.rowtime
    window = _window_join(join, left_keys, right_keys, width)
    interval = None
    if window is None and left_rt is not None and right_rt is not None:
        lower, upper = MIN_BOUND, MAX_BOUND
        remaining: list[Expr] = []
        found_lower = found_upper = False
        for c in rest:
            bound = _bound(c, width, left_rt, right_rt)
            if bound is None:
                remaining.append(c)
                continue
            lo, hi = bound
            if lo is not None:
                lower, found_lower = max(lower, lo), True
            if hi is not None:
                upper, found_upper = min(upper, hi), True
        if found_lower and found_upper:
            interval = IntervalBounds(left_rt, right_rt, lower, upper)
            rest = remaining
            for side, node in (("left", join.left), ("right", join.right)):
                if node.updating:  # Flink: StreamPhysicalIntervalJoin doesn't support consuming update changes
                    raise PlanError(
                        f"an interval join (a join bounding the time attributes of both sides) doesn't support "
                        f"consuming update and delete changes, but its {side} input is an updating changelog "
                        "(e.g. a changelog-format or upsert source); join without the time bounds instead"
                    )
    if window is not None:
        drop = set(window[1])
        left_keys = [k for i, k in enumerate(left_keys) if i not in drop]
        right_keys = [k for i, k in enumerate(right_keys) if i not in drop]
    residual = conjoin(rest)
    return JoinSpec(join.kind, tuple(left_keys), tuple(right_keys), residual, interval,
                    window[0] if window is not None else None)


def _window_join(join, left_keys: list[int], right_keys: list[int], width: int) -> tuple[WindowJoin, list[int]] | None:  # noqa: ANN001
    """The window columns of one spec that the equi keys equate (window_start and window_end on
    both sides), and which key pairs they are; None if the join is not a window join."""
    if join.left.updating or join.right.updating:
        return None  # window columns only mean "complete once the watermark passes" on append-only rows
    pairs = list(zip(left_keys, right_keys, strict=True))
    for lw in join.left.window_properties:
        for rw in join.right.window_properties:
            if not lw.window.same_windows(rw.window) or None in (lw.start, lw.end, rw.start, rw.end):
                continue
            start, end = (lw.start, rw.start), (lw.end, rw.end)
            if start in pairs and end in pairs:
                return WindowJoin(lw, rw), [i for i, p in enumerate(pairs) if p in (start, end)]
    return None


def side_of(e: Expr, width: int) -> str:
    """'left', 'right', 'both' or 'none': which inputs a predicate reads."""
    cols = referenced_columns(e)
    if not cols:
        return "none"
    if all(i < width for i in cols):
        return "left"
    if all(i >= width for i in cols):
        return "right"
    return "both"
