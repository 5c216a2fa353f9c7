"""MATCH_RECOGNIZE on event time: Flink's CEP NFA per partition key, ONE ROW PER MATCH.

As Flink's CepOperator, rows wait in keyed state until the watermark passes their timestamp,
then are fed in timestamp order (arrival order among equal timestamps) to the pattern of their
key; a row whose time the watermark has already passed is late and dropped.

The NFA follows Flink's (NFACompiler, strict contiguity as MATCH_RECOGNIZE's concatenation):
every row may start a partial match; quantifiers are greedy (Flink's translation makes ``+ *
{n,} {n,m}`` greedy), so a partial match that can take the row into its current variable does
(it proceeds to the next variable only for a row the variable's condition rejects, even once
its maximum count is reached), except after an optional ``v?``, which Flink leaves non-greedy:
that partial match forks into both; one that can do neither dies.  The pattern ends in a variable that is not greedy (Flink
refuses a greedy last one), so a match completes each time its last variable has taken its
minimum count of rows or more.  A completed match
waits until no partial match that started strictly earlier is still open, then is emitted and prunes
the partial and completed matches its AFTER MATCH SKIP strategy discards
(NFA.processMatchesAccordingToSkipStrategy: SKIP PAST LAST ROW those that started at or before
its last row, SKIP TO NEXT ROW at or before its first row, SKIP TO FIRST/LAST v before v's
first/last row).

Per key the state holds the rows its open matches still reach (one Arrow batch, with the
sequence number of its first row) and the open partial and completed matches as plain tuples
(start, variable, count, the variable of each row), so checkpoints and savepoints carry them.

Why per-row Python: a row's transitions depend on the match so far (which variable each earlier
row took, and DEFINE conditions may read FIRST/LAST of those rows), so the NFA walks rows one by
one.  DEFINE conditions that read only the current row are evaluated vectorized once per firing;
those that navigate into the match are needed per (partial match, row): each key's walk is a
generator that yields such a condition and waits for its answer, and the walks of all keys of a
firing run side by side, their conditions evaluated together in one Arrow call per variable a round.

With WITHIN, a key whose partial matches are open has a timer at the first time one times out, so a
key no row reaches any more still drops them (and emits a completed match they held back), as
Flink's CepOperator visits such keys at every watermark; its state stays bounded.
"""

from __future__ import annotations

from collections.abc import Generator
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.aggregates import wrap_integer
from sqlstream.core.errors import DataError
from sqlstream.core.evaluator import as_array, compile_expr
from sqlstream.core.expressions import referenced_columns
from sqlstream.core.physical import MatchRecognizeConfig
from sqlstream.runtime.elements import MIN_WATERMARK, Chunk
from sqlstream.runtime.operators.base import Operator, OperatorContext, Output
from sqlstream.runtime.operators.rank import KeyTimers, group_rows
from sqlstream.runtime.operators.waiting import take_due, wait_for_watermark
from sqlstream.runtime.operators.window_agg import event_times

# a partial match: (start sequence number, pattern term, rows taken by that term, variable per row)
Partial = tuple[int, int, int, tuple[int, ...]]
# a completed match waiting for its turn: (start sequence number, variable per row)
Completed = tuple[int, tuple[int, ...]]
# a navigating DEFINE to evaluate: (variable, the key's rows, the row's sequence number, the value of
# each navigation it reads (None for the others))
Request = tuple[int, "_KeyRows", int, list[Any]]
# one key's walk of its NFA over its due rows: yields requests, is sent their answers
Walk = Generator[Request, bool, None]
# an emitted match: (the key's rows, start sequence number, variable per row, emission time: the time
# of the row being processed, or the watermark, when it was emitted: Flink's MATCH_ROWTIME())
Emitted = tuple["_KeyRows", int, tuple[int, ...], int]


class _KeyRows:
    """The rows of one key the NFA can reach: retained rows then this firing's due rows."""

    def __init__(self, batch: pa.RecordBatch, base: int, due_offset: int) -> None:
        self.batch = batch
        self.base = base  # sequence number of batch row 0
        self.due_offset = due_offset  # batch row of the first due row
        self.columns: dict[int, list[Any]] = {}

    def column(self, column: int) -> list[Any]:
        """The column's values as Python objects, by batch row (sequence number - base)."""
        values = self.columns.get(column)
        if values is None:
            values = self.columns[column] = self.batch.column(column).to_pylist()
        return values

    def value(self, column: int, seq: int) -> Any:
        return self.column(column)[seq - self.base]


class MatchRecognizeOperator(Operator):
    name = "MatchRecognize"
    keyed = True

    def __init__(self, config: MatchRecognizeConfig, schema: pa.Schema) -> None:
        self.config = config
        self.keys = list(config.partition_keys)
        self.time_index = config.time_index
        self.pattern = config.pattern
        self.schema = schema
        self.compiled = [None if d is None else compile_expr(d) for d in config.defines]
        # a DEFINE that reads a column past the input row's navigates into the match so far
        self.navigating = [d is not None and any(i >= config.input_width for i in referenced_columns(d))
                           for d in config.defines]
        # per variable, the input columns and the navigations (by index) its DEFINE reads
        width = config.input_width
        self.reads = [(set(), set()) if d is None else
                      ({i for i in referenced_columns(d) if i < width},
                       {i - width for i in referenced_columns(d) if i >= width}) for d in config.defines]
        self.measures = [compile_expr(m) for m in config.measures]
        self.due_timers = KeyTimers()  # key group -> its earliest waiting row
        # WITHIN: (key group, key) -> when its earliest open partial match times out, so that a key
        # no row reaches any more still drops its timed-out matches (Flink's CepOperator visits a
        # key with partial matches at every watermark)
        self.expiry_timers = KeyTimers()
        self.watermark = MIN_WATERMARK

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        # key group -> batches of its rows that wait for the watermark, in arrival order
        self.waiting = ctx.keyed_state.state("waiting")
        # (key group, partition key) -> (sequence number of the first retained row, the retained rows,
        # the next sequence number, partial matches, completed matches waiting to be emitted); a key
        # with no open match has no entry
        self.nfa = ctx.keyed_state.state("nfa")

    # ------------------------------------------------------------ input
    def process_batch(self, chunk: Chunk, input_index: int = 0) -> Output:
        wait_for_watermark(self.ctx, self.waiting, self.due_timers, chunk.batch, self.keys, self.time_index,
                           self.watermark)
        return []

    # ------------------------------------------------------------ firing
    def on_watermark(self, timestamp: int) -> Output:
        self.watermark = timestamp
        due = take_due(self.waiting, self.due_timers, self.time_index, timestamp)
        expiring = self.expiry_timers.pop_due(timestamp)
        if due is None and not expiring:
            return []
        emitted: list[Emitted] = []
        walks = self._fire(due, timestamp, emitted) if due is not None else {}
        for kg, key in expiring:
            if (kg, key) not in walks:  # no row of the key is due: only time advances
                walks[(kg, key)] = self._run_key(kg, key, None, [], [], emitted, timestamp)
        self._walk_together(list(walks.values()))
        out = self._output(emitted)
        return [Chunk(out)] if out.num_rows else []

    def _walk_together(self, walks: list[Walk]) -> None:
        """Run the keys' NFA walks side by side: each yields the navigating DEFINE it needs next
        and waits for its answer; the requests of all walks are answered together, one vectorized
        evaluation per variable a round, so the per-row Python stays in the walks and the Arrow
        calls are shared by all keys of the firing."""
        waiting: list[tuple[Walk, Request]] = []
        for walk in walks:
            try:
                waiting.append((walk, next(walk)))
            except StopIteration:
                pass
        while waiting:
            answers = self._evaluate([request for _, request in waiting])
            advanced: list[tuple[Walk, Request]] = []
            for (walk, _), answer in zip(waiting, answers, strict=True):
                try:
                    advanced.append((walk, walk.send(answer)))
                except StopIteration:
                    pass
            waiting = advanced

    def _evaluate(self, requests: list[Request]) -> list[bool]:
        """The navigating DEFINE of each request over its row and navigation values (NULL is false)."""
        answers: list[bool] = [False] * len(requests)
        by_variable: dict[int, list[int]] = {}
        for i, request in enumerate(requests):
            by_variable.setdefault(request[0], []).append(i)
        schema = requests[0][1].batch.schema  # the input's: every key's rows have it
        for variable, which in by_variable.items():
            columns, navigations = self.reads[variable]
            n = len(which)
            arrays = [pa.array([requests[i][1].column(c)[requests[i][2] - requests[i][1].base] for i in which],
                               schema.field(c).type)
                      if c in columns else pa.nulls(n, schema.field(c).type) for c in range(len(schema))]
            arrays += [pa.array([requests[i][3][j] for i in which], t) if j in navigations else pa.nulls(n, t)
                       for j, t in enumerate(self.config.navigation_types)]
            batch = pa.RecordBatch.from_arrays(arrays, names=[f"c{j}" for j in range(len(arrays))])
            result = pc.fill_null(as_array(self.compiled[variable](batch), n, pa.bool_()), False).to_pylist()
            for i, ok in zip(which, result, strict=True):
                answers[i] = ok
        return answers

    def _fire(self, due_rows: pa.RecordBatch, watermark: int,
              emitted: list[Emitted]) -> dict[tuple[int, tuple], Walk]:
        """The NFA walks of the keys of the due rows, by (key group, key)."""
        groups = group_rows(due_rows, self.keys, self.ctx.max_parallelism)
        # each key's due rows in event-time order, rows of equal times by the further ORDER BY
        # columns, then in arrival order
        n = due_rows.num_rows
        due_times = event_times(due_rows, self.time_index)
        columns = {"$ts": due_times}
        spec: list[tuple[str, str] | tuple[str, str, str]] = [("$ts", "ascending")]
        for i, (column, desc, nulls_first) in enumerate(self.config.tie_order):
            columns[f"s{i}"] = due_rows.column(column)
            spec.append((f"s{i}", "descending" if desc else "ascending", "at_start" if nulls_first else "at_end"))
        columns["$arrival"] = pa.array(np.arange(n))
        spec.append(("$arrival", "ascending"))
        rank = np.empty(n, dtype=np.int64)
        rank[pc.sort_indices(pa.table(columns), sort_keys=spec).to_numpy()] = np.arange(n)
        ordered = [g[2][np.argsort(rank[g[2]])] for g in groups]
        order = np.concatenate(ordered)
        rows = due_rows.take(pa.array(order))
        row_times = due_times.to_numpy(zero_copy_only=False)[order].tolist()
        current_only = self._current_row_conditions(rows)
        offset = 0
        walks: dict[tuple[int, tuple], Walk] = {}
        for (kg, key, _), idx in zip(groups, ordered, strict=True):
            n = len(idx)
            walks[(kg, key)] = self._run_key(kg, key, rows.slice(offset, n), row_times[offset:offset + n],
                                             [c if c is None else c[offset:offset + n] for c in current_only],
                                             emitted, watermark)
            offset += n
        return walks

    def _current_row_conditions(self, rows: pa.RecordBatch) -> list[list[bool] | None]:
        """Per variable, its DEFINE over each due row when it reads only the current row (NULL is
        false); None where the condition navigates into the match (or there is none)."""
        out: list[list[bool] | None] = []
        for run, navigating in zip(self.compiled, self.navigating, strict=True):
            if run is None or navigating:
                out.append(None)
                continue
            value = as_array(run(rows), rows.num_rows, pa.bool_())
            out.append(pc.fill_null(value, False).to_pylist())
        return out

    def _run_key(self, kg: int, key: tuple, due: pa.RecordBatch | None, due_times: list[int],
                 current_only: list[list[bool] | None], emitted: list[Emitted], watermark: int) -> Walk:
        """Feed the key's ``due`` rows (None: none, time advances only; ``due_times`` their times)
        to its NFA: a walk that yields each navigating DEFINE it needs evaluated (see
        _walk_together)."""
        stored = self.nfa.get(kg, key)
        if stored is None:
            if due is None:
                return
            base, kept, next_seq, partials, completed = 0, None, 0, (), ()
        else:
            base, kept, next_seq, partials, completed = stored
        if due is None:
            due = kept.slice(0, 0)
        batch = due if kept is None else pa.concat_batches([kept, due])
        rows = _KeyRows(batch, base, next_seq - base)
        partial: list[Partial] = list(partials)
        pending: list[Completed] = list(completed)
        last_term = len(self.pattern) - 1
        last = self.pattern[last_term]
        within = self.config.within_ms
        times = event_times(batch, self.time_index).to_numpy(zero_copy_only=False) if within is not None else None

        def advance_time(now: int) -> None:
            # WITHIN: a partial match whose first row is ``within`` or more before ``now`` times out
            # (NFA.advanceTime, before the rows of ``now`` and at the watermark)
            nonlocal partial
            if times is not None:
                partial = [p for p in partial if now - int(times[p[0] - base]) < within]

        def emit(now: int) -> None:
            # a completed match is emitted once no partial match that started strictly earlier is
            # open (NFA.isEarlier: <=), and prunes what its AFTER MATCH SKIP discards; ``now`` is
            # the time of the row being processed, or the watermark (CepOperator's timestamp)
            nonlocal partial, pending
            while pending and (not partial or pending[0][0] <= partial[0][0]):
                match = pending.pop(0)
                keep = self._survives(match)
                partial = [p for p in partial if keep(p[0])]
                pending = [m for m in pending if keep(m[0])]
                emitted.append((rows, match[0], match[1], now))

        for i in range(due.num_rows):
            seq = next_seq + i
            now = due_times[i]
            if times is not None:
                advance_time(now)
                emit(now)
            advanced: list[Partial] = []
            for pm in [*partial, (seq, 0, 0, ())]:
                for step in (yield from self._step(pm, seq, i, rows, current_only)):
                    if step[1] == last_term and step[2] >= last.min:
                        pending.append((step[0], step[3]))
                        if last.max is not None and step[2] == last.max:
                            continue  # a reluctant last variable may take more rows: more matches
                    advanced.append(step)
            partial = advanced
            pending.sort(key=lambda m: m[0])  # stable: of equal starts, the one completed first
            emit(now)
        if times is not None:
            advance_time(watermark)
            emit(watermark)
        next_seq += due.num_rows
        starts = [p[0] for p in partial] + [m[0] for m in pending]
        if not starts:
            self.nfa.delete(kg, key)  # no open match: the key's sequence numbers may start over
            return
        first = min(starts)
        kept_rows = batch.slice(first - base)
        self.nfa.put(kg, key, (first, kept_rows, next_seq, tuple(partial), tuple(pending)))
        if times is not None and partial:
            self.expiry_timers.register(kg, key, min(int(times[p[0] - base]) for p in partial) + within)

    def _step(self, pm: Partial, seq: int, due_index: int, rows: _KeyRows,
              current_only: list[list[bool] | None]) -> Generator[Request, bool, list[Partial]]:
        """The partial match's successors after ``seq``.  A greedy quantifier takes the row into its
        variable if it can, and proceeds to the next variable only for a row its own condition
        rejects, even once its maximum is reached (Flink's NFACompiler adds NOT(take) to the next
        state's transitions); a non-greedy one (``v?``, reluctant) forks into both; a count below
        the minimum must take."""
        start, term, count, labels = pm
        t = self.pattern[term]
        out: list[Partial] = []
        room = t.max is None or count < t.max
        accepted = (room or t.greedy) and (yield from self._accepts(t.variable, labels, start, seq, due_index,
                                                                    rows, current_only))
        if room and accepted:
            out.append((start, term, count + 1, (*labels, t.variable)))
        if count >= t.min and term + 1 < len(self.pattern) and not (t.greedy and accepted):
            out += yield from self._step((start, term + 1, 0, labels), seq, due_index, rows, current_only)
        return out

    def _accepts(self, variable: int, labels: tuple[int, ...], start: int, seq: int, due_index: int,
                 rows: _KeyRows, current_only: list[list[bool] | None]) -> Generator[Request, bool, bool]:
        if self.compiled[variable] is None:
            return True
        precomputed = current_only[variable]
        if precomputed is not None:
            return precomputed[due_index]
        # the navigations the condition reads, into the match as it would be with the row as ``variable``
        navigations = self.reads[variable][1]
        values: list[Any] = [None] * len(self.config.navigations)
        for j in navigations:
            nav = self.config.navigations[j]
            var = nav[1]
            taken = [start + k for k, v in enumerate(labels) if var < 0 or v == var]
            if var < 0 or var == variable:
                taken.append(seq)
            values[j] = self._read(nav, self.config.navigation_types[j], taken, rows)
        return (yield (variable, rows, seq, values))

    def _survives(self, match: Completed) -> Any:
        """Which start sequence numbers the match's AFTER MATCH SKIP strategy keeps."""
        start, labels = match
        kind, variable = self.config.skip
        if kind == "PAST LAST ROW":
            last = start + len(labels) - 1
            return lambda s: s > last
        if kind == "TO NEXT ROW":
            return lambda s: s > start
        positions = [start + j for j, v in enumerate(labels) if v == variable]
        if not positions:
            raise DataError(f"Could not skip to {'first' if kind == 'TO FIRST' else 'last'} element of a match.")
        target = positions[0] if kind == "TO FIRST" else positions[-1]
        return lambda s: s >= target

    # ------------------------------------------------------------ output
    def _output(self, emitted: list[Emitted]) -> pa.RecordBatch:
        n = len(emitted)
        key_columns = [pa.array([e[0].value(k, e[1]) for e in emitted], self.schema.field(j).type)
                       for j, k in enumerate(self.keys)]
        primitives = [pa.array([self._primitive(p, t, *e) for e in emitted], t)
                      for p, t in zip(self.config.primitives, self.config.primitive_types, strict=True)]
        measures_in = pa.RecordBatch.from_arrays(primitives, names=[f"m{i}" for i in range(len(primitives))]) \
            if primitives else pa.RecordBatch.from_arrays([pa.nulls(n)], names=["none"])
        width = len(self.keys)
        measures = [as_array(run(measures_in), n, self.schema.field(width + j).type)
                    for j, run in enumerate(self.measures)]
        return pa.RecordBatch.from_arrays(key_columns + measures, schema=self.schema)

    def _primitive(self, primitive: tuple[str, int, int, int], t: pa.DataType, rows: _KeyRows, start: int,
                   labels: tuple[int, ...], emitted_at: int) -> Any:
        if primitive[0] == "ROWTIME":  # MATCH_ROWTIME(): when the match was emitted, in milliseconds
            return emitted_at
        variable = primitive[1]
        return self._read(primitive, t, [start + j for j, v in enumerate(labels) if variable < 0 or v == variable],
                          rows)

    @staticmethod
    def _read(what: tuple[str, int, int, int], t: pa.DataType, taken: list[int], rows: _KeyRows) -> Any:
        """FIRST/LAST(col, offset) or an aggregate of col (of type ``t``) over the rows ``taken``."""
        kind, _, column, offset = what
        if kind in ("FIRST", "LAST"):
            at = offset if kind == "FIRST" else len(taken) - 1 - offset
            return rows.value(column, taken[at]) if 0 <= at < len(taken) else None
        if column < 0:  # COUNT(*)
            return len(taken)
        all_values, base = rows.column(column), rows.base
        values = [v for v in (all_values[s - base] for s in taken) if v is not None]
        if kind == "COUNT":
            return len(values)
        if not values:
            return None
        if kind == "MIN":
            return min(values)
        if kind == "MAX":
            return max(values)
        total = sum(values)
        if kind == "SUM":
            return wrap_integer(total, t) if pa.types.is_integer(t) else total
        # AVG: integers truncate toward zero, a DECIMAL rounds HALF_UP to its scale (Flink)
        if pa.types.is_integer(t):
            return wrap_integer(abs(total) // len(values) * (1 if total >= 0 else -1), t)
        if pa.types.is_decimal(t):
            with localcontext() as ctx:
                ctx.prec = 80
                return (Decimal(total) / len(values)).quantize(Decimal(1).scaleb(-t.scale), rounding=ROUND_HALF_UP)
        return total / len(values)

    # ------------------------------------------------------------ checkpoints
    def snapshot_state(self, checkpoint_id: int) -> Any:
        return {"watermark": self.watermark}

    def restore_state(self, state: Any) -> None:
        if state is not None:
            self.watermark = state["watermark"]
        for kg, _, waiting in self.waiting.items():
            first = min(int(pc.min(event_times(b, self.time_index)).as_py()) for b in waiting)
            self.due_timers.register(kg, (), first)
        within = self.config.within_ms
        if within is not None:
            for kg, key, (base, kept, _, partials, _) in self.nfa.items():
                if partials:
                    times = event_times(kept, self.time_index).to_numpy(zero_copy_only=False)
                    self.expiry_timers.register(kg, key, min(int(times[p[0] - base]) for p in partials) + within)
