"""What every logical node is: a relational operator over its inputs, as plain data.

The optimizer's passes and the physical lowering walk trees of these nodes through this
interface alone: ``inputs`` and ``with_inputs`` to rebuild a tree, ``map_expressions`` to rewrite
the scalar expressions a node holds, ``prune_columns`` to drop columns nobody reads,
``describe`` for EXPLAIN.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, replace

import pyarrow as pa

from sqlstream.core.expressions import Expr
from sqlstream.core.windows import WINDOW_COLUMNS, WindowSpec

# prune(node, required columns) -> (new node, old column index -> new)
Prune = Callable[["LogicalNode", set[int]], tuple["LogicalNode", dict[int, int]]]


@dataclass(frozen=True)
class WindowColumns:
    """Window properties: the output columns that hold the bounds of each row's window.

    Rows carrying window columns of ``window`` arrive, at any operator, before the
    watermark passes their window's end - 1: that is what lets a GROUP BY or a join on
    them fire once per window and forget it (a cascaded window aggregation, a window
    join).  ``window`` is the spec of the windowing TVF that assigned the windows, so its
    column indexes refer to that TVF's input; compare specs with ``same_windows``.
    """

    window: WindowSpec
    start: int | None
    end: int | None
    time: int | None

    def role(self, index: int) -> str | None:
        """'window_start' | 'window_end' | 'window_time' if column ``index`` is one of them."""
        for name, col in zip(WINDOW_COLUMNS, (self.start, self.end, self.time), strict=True):
            if col == index:
                return name
        return None

    def through(self, mapping: dict[int, int]) -> WindowColumns | None:
        """The same columns after ``mapping`` (old index -> new); None when none of them is left."""
        moved = [None if c is None else mapping.get(c) for c in (self.start, self.end, self.time)]
        return None if moved == [None, None, None] else WindowColumns(self.window, *moved)


class LogicalNode(ABC):
    """A node of the logical plan: its output schema, which output column (if any) is the
    event-time attribute, and whether its output is an updating changelog (+I/-U/+U/-D)."""

    @property
    @abstractmethod
    def schema(self) -> pa.Schema: ...

    @property
    @abstractmethod
    def inputs(self) -> list[LogicalNode]: ...

    @abstractmethod
    def with_inputs(self, inputs: list[LogicalNode]) -> LogicalNode:
        """The same node over other inputs (of the same columns)."""

    @abstractmethod
    def describe(self) -> str:
        """One line for EXPLAIN (and the identity of the physical node it becomes)."""

    @abstractmethod
    def prune_columns(self, required: set[int], prune: Prune) -> tuple[LogicalNode, dict[int, int]]:
        """This node reading only what ``required`` output columns need from its inputs
        (``prune`` prunes an input); returns the node and the map of its output columns."""

    def map_expressions(self, fn: Callable[[Expr], Expr]) -> LogicalNode:
        """The node with ``fn`` applied to each scalar expression it holds (none by default)."""
        return self

    @property
    def rowtime(self) -> int | None:
        return None

    @property
    def updating(self) -> bool:
        return any(i.updating for i in self.inputs)

    @property
    def window_properties(self) -> tuple[WindowColumns, ...]:
        """Window columns this node makes or passes on; most nodes have none."""
        return ()


class OneInput(LogicalNode):
    """A node over one input, its dataclass field ``input``: what rebuilding a tree needs."""

    input: LogicalNode

    @property
    def inputs(self) -> list[LogicalNode]:
        return [self.input]

    def with_inputs(self, inputs: list[LogicalNode]) -> LogicalNode:
        return replace(self, input=inputs[0])  # type: ignore[type-var]


class KeepsTime(OneInput):
    """A one-input node whose output keeps its input's columns in place, so its time attribute
    and window columns are the input's (a filter, a correlate appending columns)."""

    @property
    def rowtime(self) -> int | None:
        return self.input.rowtime

    @property
    def window_properties(self) -> tuple[WindowColumns, ...]:
        return self.input.window_properties


def time_columns(node: LogicalNode) -> set[int]:
    """A join input keeps its time attribute: the join's output event time may need it."""
    return set() if node.rowtime is None else {node.rowtime}
