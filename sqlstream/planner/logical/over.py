"""The logical nodes of OVER windows on streams: OVER aggregates, Top-N and deduplication
(``Rank``), ORDER BY / LIMIT (``StreamSort``).  planner.over binds them from SQL."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pyarrow as pa

from sqlstream.core.aggregates import AggCall
from sqlstream.core.errors import PlanError
from sqlstream.planner.logical.base import LogicalNode, OneInput, Prune

TOP_N_HINT = (
    "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...) AS rn FROM ...) "
    "WHERE rn <= N"
)


@dataclass(frozen=True)
class OverFrame:
    """ROWS or RANGE BETWEEN <preceding> PRECEDING AND CURRENT ROW; ``preceding`` None is UNBOUNDED.

    ``preceding`` counts rows for ROWS and milliseconds for RANGE.
    """

    kind: str  # ROWS | RANGE
    preceding: int | None

    def describe(self) -> str:
        if self.preceding is None:
            start = "UNBOUNDED"
        else:
            start = f"{self.preceding}" if self.kind == "ROWS" else f"{self.preceding}ms"
        return f"{self.kind} BETWEEN {start} PRECEDING AND CURRENT ROW"


@dataclass
class OverAggregate(OneInput):
    """Input columns plus one column per aggregate over the row's frame in its partition."""

    input: LogicalNode
    partition_keys: list[int]
    time_index: int
    frame: OverFrame
    aggs: list[AggCall]

    @property
    def schema(self) -> pa.Schema:
        return pa.schema(list(self.input.schema) + [pa.field(a.name, a.type) for a in self.aggs])

    @property
    def rowtime(self) -> int | None:
        return self.input.rowtime

    @property
    def updating(self) -> bool:
        return False

    def describe(self) -> str:
        keys = ", ".join(f"${k}" for k in self.partition_keys)
        return (
            f"OverAggregate(partition=[{keys}], order=${self.time_index}, {self.frame.describe()}, "
            f"aggs=[{', '.join(a.describe() for a in self.aggs)}])"
        )

    def prune_columns(self, required: set[int], prune: Prune) -> tuple[LogicalNode, dict[int, int]]:
        width = len(self.input.schema)
        needed = {i for i in required if i < width} | set(self.partition_keys) | {self.time_index}
        needed = needed.union(*(a.columns for a in self.aggs))
        child, mapping = prune(self.input, needed)
        aggs = [a.remapped(mapping) for a in self.aggs]
        node = OverAggregate(child, [mapping[k] for k in self.partition_keys], mapping[self.time_index],
                             self.frame, aggs)
        out = dict(mapping)
        out.update({width + j: len(child.schema) + j for j in range(len(self.aggs))})
        return node, out


@dataclass(frozen=True)
class SortKey:
    index: int
    descending: bool
    nulls_first: bool

    def describe(self) -> str:
        nulls = " NULLS FIRST" if self.nulls_first != (not self.descending) else ""
        return f"${self.index} {'DESC' if self.descending else 'ASC'}{nulls}"

    def remapped(self, mapping: dict[int, int]) -> SortKey:
        return SortKey(mapping[self.index], self.descending, self.nulls_first)


@dataclass
class Rank(LogicalNode):
    """ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...) with rank_start <= rn <= rank_end.

    ``rank_end`` None means not bounded (yet); ``window`` holds the input columns
    that are window_start and window_end when it ranks within windows;
    ``time_order`` says that it orders by a single time column (the time attribute,
    or a window TVF's time column), so ``rn = 1`` is a deduplication.
    ``output_rank`` is cleared by projection pruning when nobody reads ``rn``:
    the Top-N then emits -D/+I of rows instead of updating every shifted rank.
    """

    input: LogicalNode
    partition_keys: list[int]
    order: list[SortKey]
    rank_start: int = 1
    rank_end: int | None = None
    output_rank: bool = True
    window: tuple[int, int] | None = None
    time_order: bool = False

    @property
    def strategy(self) -> str:
        """window | first (buffered keep-first deduplication) | topn (updating Top-N)."""
        if self.window is not None:
            return "window"
        if (self.time_order and (self.rank_start, self.rank_end) == (1, 1) and not self.order[0].descending
                and self.order[0].index == self.input.rowtime and not self.input.updating):
            return "first"
        return "topn"

    @property
    def newer_wins(self) -> bool:
        """Keep-last deduplication: among rows with the same time the one that arrived last wins."""
        return self.time_order and self.order[0].descending and (self.rank_start, self.rank_end) == (1, 1)

    @property
    def schema(self) -> pa.Schema:
        fields = list(self.input.schema)
        if self.output_rank:
            fields.append(pa.field("$rn", pa.int64()))
        return pa.schema(fields)

    @property
    def rowtime(self) -> int | None:
        return None if self.updating else self.input.rowtime

    @property
    def updating(self) -> bool:
        return self.strategy == "topn"

    @property
    def inputs(self) -> list[LogicalNode]:
        return [self.input]

    def describe(self) -> str:
        keys = ", ".join(f"${k}" for k in self.partition_keys)
        order = ", ".join(k.describe() for k in self.order)
        end = "" if self.rank_end is None else str(self.rank_end)
        what = {"window": "WindowRank", "first": "Deduplicate", "topn": "Rank"}[self.strategy]
        extra = ""
        if self.strategy == "first":
            extra = ", keep=first"
        elif self.newer_wins:
            extra = ", keep=last"
        number = ", rank number" if self.output_rank else ""
        return f"{what}(rows {self.rank_start}..{end}, partition=[{keys}], order=[{order}]{extra}{number})"

    def with_inputs(self, inputs: list[LogicalNode]) -> LogicalNode:
        # the first look at the complete plan: every enclosing WHERE has been bound
        if self.rank_end is None and self.window is None and self._numbers_rows_in_time_order(inputs[0]):
            return self._as_row_count(inputs[0])
        if self.rank_end is None and self.window is None:
            raise PlanError(
                "ROW_NUMBER() over an unbounded stream never ends: it is only supported as a Top-N or "
                f"deduplication query, with a condition on the row number in the enclosing query: {TOP_N_HINT} "
                "(rn = 1 with ORDER BY the time attribute deduplicates)"
            )
        return replace(self, input=inputs[0])

    def _numbers_rows_in_time_order(self, child: LogicalNode) -> bool:
        """ROW_NUMBER() OVER (... ORDER BY <time attribute>) with no bound on the number: as Flink,
        an OVER aggregate numbering an append-only stream's rows as the watermark passes them."""
        return (len(self.order) == 1 and not self.order[0].descending and self.order[0].index == child.rowtime
                and not child.updating)

    def _as_row_count(self, child: LogicalNode) -> LogicalNode:
        """The row number as a count of the partition's rows up to and including this one (ROWS frame:
        rows with the same time get consecutive numbers, in arrival order)."""
        if not self.output_rank:
            return child  # nobody reads the number
        count = AggCall("COUNT", None, False, pa.int64(), "$rn")
        return OverAggregate(child, list(self.partition_keys), self.order[0].index, OverFrame("ROWS", None), [count])

    def prune_columns(self, required: set[int], prune: Prune) -> tuple[LogicalNode, dict[int, int]]:
        width = len(self.input.schema)
        needed = {i for i in required if i < width} | set(self.partition_keys) | {k.index for k in self.order}
        if self.window is not None:
            needed |= set(self.window)
        if self.input.rowtime is not None and not self.updating:
            needed.add(self.input.rowtime)  # append-only results keep their time attribute
        child, mapping = prune(self.input, needed)
        output_rank = self.output_rank and width in required
        node = Rank(
            child, [mapping[k] for k in self.partition_keys], [k.remapped(mapping) for k in self.order],
            self.rank_start, self.rank_end, output_rank,
            None if self.window is None else (mapping[self.window[0]], mapping[self.window[1]]),
            self.time_order,
        )
        out = dict(mapping)
        if output_rank:
            out[width] = len(child.schema)
        return node, out


@dataclass
class StreamSort(OneInput):
    """ORDER BY <time attribute> [, ...] [LIMIT n] (``order`` set), or LIMIT n alone: append-only."""

    input: LogicalNode
    order: list[SortKey]
    limit: int | None

    @property
    def schema(self) -> pa.Schema:
        return self.input.schema

    @property
    def rowtime(self) -> int | None:
        return self.input.rowtime

    @property
    def updating(self) -> bool:
        return False

    def describe(self) -> str:
        limit = "" if self.limit is None else f"limit={self.limit}"
        if not self.order:
            return f"Limit({limit})"
        order = ", ".join(k.describe() for k in self.order)
        return f"Sort(order=[{order}]{', ' + limit if limit else ''})"

    def prune_columns(self, required: set[int], prune: Prune) -> tuple[LogicalNode, dict[int, int]]:
        needed = set(required) | {k.index for k in self.order}
        if self.order and self.input.rowtime is not None:
            needed.add(self.input.rowtime)
        child, mapping = prune(self.input, needed)
        return StreamSort(child, [k.remapped(mapping) for k in self.order], self.limit), mapping
