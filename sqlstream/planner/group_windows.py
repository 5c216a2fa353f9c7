"""Window specs, and Flink's legacy group windows mapped onto them.

``GROUP BY k, TUMBLE(ts, size)`` (also ``HOP(ts, slide, size)`` and ``SESSION(ts, gap)``)
with ``TUMBLE_START`` / ``TUMBLE_END`` / ``TUMBLE_ROWTIME`` (and the ``HOP_`` and
``SESSION_`` ones) in the select list is the older spelling of a window aggregation over a
windowing TVF.  The binder turns the group window into the :class:`WindowSpec` the TVF
would have, so both spellings plan to the same window aggregation and give the same rows;
the auxiliary functions become its window_start, window_end and window_time outputs.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from sqlstream.core.sql.dialect import Flink, interval_ms
from sqlstream.core.windows import WindowSpec
from sqlstream.planner.scope import Scope, plan_error

# the legacy group window functions and the names of their interval arguments, in SQL order
GROUP_WINDOWS: dict[str, tuple[str, ...]] = {
    "TUMBLE": ("size",),
    "HOP": ("slide", "size"),
    "SESSION": ("gap",),
}

# TUMBLE_START -> ("TUMBLE", "window_start"), ...
AUXILIARIES: dict[str, tuple[str, str]] = {
    f"{kind}_{suffix}": (kind, role)
    for kind in GROUP_WINDOWS
    for suffix, role in (
        ("START", "window_start"),
        ("END", "window_end"),
        ("ROWTIME", "window_time"),
    )
}


def window_spec(
    kind: str, time_index: int, ms: list[int], node: exp.Expression, partition: tuple[int, ...] = ()
) -> WindowSpec:
    """The spec of a ``kind`` window from its interval arguments in milliseconds, in the TVF's
    order (TUMBLE: size[, offset]; HOP: slide, size[, offset]; CUMULATE: step, size[, offset];
    SESSION: gap), checked; errors are located at ``node``."""
    expected = {"TUMBLE": (1, 2), "HOP": (2, 3), "CUMULATE": (2, 3), "SESSION": (1, 1)}[kind]
    if not expected[0] <= len(ms) <= expected[1]:
        raise plan_error(f"{kind} takes {expected[0]} interval argument(s), got {len(ms)}", node)
    if any(v <= 0 for v in ms[: expected[0]]):
        raise plan_error(f"{kind} window sizes must be positive", node)
    if partition and kind != "SESSION":
        raise plan_error("PARTITION BY is only allowed in a SESSION window", node)
    offset = ms[expected[0]] if len(ms) > expected[0] else 0
    if kind == "TUMBLE":
        return WindowSpec("TUMBLE", time_index, size_ms=ms[0], offset_ms=offset)
    if kind == "HOP":
        slide, size = ms[:2]
        if size % slide != 0:
            raise plan_error(
                f"HOP size ({size} ms) must be an integral multiple of the slide ({slide} ms)", node
            )
        return WindowSpec("HOP", time_index, size_ms=size, slide_ms=slide, offset_ms=offset)
    if kind == "CUMULATE":
        step, size = ms[:2]
        if size % step != 0:
            raise plan_error(
                f"CUMULATE size ({size} ms) must be an integral multiple of the step ({step} ms)",
                node,
            )
        return WindowSpec("CUMULATE", time_index, size_ms=size, step_ms=step, offset_ms=offset)
    return WindowSpec("SESSION", time_index, gap_ms=ms[0], partition_keys=partition)


def group_window_kind(node: exp.Expression) -> str | None:
    """'TUMBLE' | 'HOP' | 'SESSION' if ``node`` is a legacy group window call, else None."""
    if isinstance(node, exp.Anonymous) and node.name.upper() in GROUP_WINDOWS:
        return node.name.upper()
    return None


def auxiliary(node: exp.Expression) -> tuple[str, str] | None:
    """(group window kind, window column) if ``node`` calls TUMBLE_START, HOP_END, ..."""
    if isinstance(node, exp.Anonymous):
        return AUXILIARIES.get(node.name.upper())
    return None


@dataclass(frozen=True)
class GroupWindow:
    """A legacy group window of a GROUP BY: the call as written and the window it stands for."""

    call: exp.Anonymous
    kind: str
    window: WindowSpec

    def check_auxiliary(self, node: exp.Anonymous, scope: Scope) -> str:
        """The window column a TUMBLE_START(...)-like call of this window reads.

        Its arguments must be the group window's own (the same time column and
        intervals); anything else is an error located at the call."""
        kind, role = AUXILIARIES[node.name.upper()]
        written = f"{self.call.sql(dialect=Flink)} in GROUP BY"
        if kind != self.kind:
            raise plan_error(
                f"{node.name.upper()} needs a {kind} group window, "
                f"but the query groups by {written}",
                node,
            )
        args = list(node.expressions)
        if len(args) != len(self.call.expressions):
            raise plan_error(f"{node.name.upper()} takes the arguments of {written}", node)
        same_time = (
            isinstance(args[0], exp.Column)
            and scope.resolve(args[0]).index == self.window.time_index
        )
        if not same_time or _intervals(args[1:]) != _intervals(self.call.expressions[1:]):
            raise plan_error(
                f"{node.sql(dialect=Flink)} does not match the group window {written}; "
                "use the same time column and intervals",
                node,
            )
        return role


def bind_group_window(call: exp.Anonymous, scope: Scope, rowtime: int | None) -> GroupWindow:
    """The window of a legacy TUMBLE/HOP/SESSION call in GROUP BY, over an input whose time
    attribute is column ``rowtime`` of ``scope``."""
    kind = call.name.upper()
    params = GROUP_WINDOWS[kind]
    args = list(call.expressions)
    if len(args) != 1 + len(params):
        raise plan_error(
            f"{kind}(time_attribute, {', '.join(params)}) takes {1 + len(params)} arguments, "
            f"got {len(args)}",
            call,
        )
    time = args[0]
    if not isinstance(time, exp.Column) or rowtime is None or scope.resolve(time).index != rowtime:
        raise plan_error(
            f"the time column '{time.sql(dialect=Flink)}' of the group window {kind} must be "
            "a time attribute (a column with a WATERMARK declared on its table, or a PROCTIME() column)",
            time,
            time.name if isinstance(time, exp.Column) else None,
        )
    return GroupWindow(call, kind, window_spec(kind, rowtime, _intervals(args[1:]), call))


def _intervals(nodes: list[exp.Expression]) -> list[int]:
    return [interval_ms(n) for n in nodes]
