"""A task runs one operator: it turns arriving elements into operator calls.

It tracks the watermark of each input and advances the operator's event
time to their minimum (an ended input counts as +infinity), and calls
end_input once every input has ended, after a final watermark.
"""

from __future__ import annotations

import time

from sqlstream.runtime.elements import (
    MAX_WATERMARK,
    MIN_WATERMARK,
    Chunk,
    Element,
    EndOfInput,
    Watermark,
)
from sqlstream.runtime.operators.base import Operator, OperatorContext


class Task:
    def __init__(self, operator: Operator, num_channels: int, ctx: OperatorContext) -> None:
        """``num_channels``: upstream channels (inputs x upstream subtasks) this task hears from."""
        self.operator = operator
        self.ctx = ctx
        self.input_watermarks = [MIN_WATERMARK] * num_channels
        self.ended = [False] * num_channels
        self.watermark = MIN_WATERMARK  # event time of the operator (min over its inputs)
        self.forwarded = MIN_WATERMARK  # the last watermark sent downstream
        # time spent in this operator's code (Flink's busy time): two clock reads per element, not per row
        self.busy_s = 0.0
        operator.open(ctx)

    def receive(self, element: Element, channel: int = 0, input_index: int = 0) -> list[Element]:
        started = time.perf_counter()
        try:
            return self._receive(element, channel, input_index)
        finally:
            self.busy_s += time.perf_counter() - started

    def _receive(self, element: Element, channel: int, input_index: int) -> list[Element]:
        if isinstance(element, Chunk):
            self.ctx.metrics.records_in += element.num_rows
            return self._emit(self.operator.process_batch(element, input_index))
        if isinstance(element, Watermark):
            if self.operator.generates_watermarks:
                return []
            if element.timestamp > self.input_watermarks[channel]:
                self.input_watermarks[channel] = element.timestamp
            return self._advance(min(self.input_watermarks))
        if isinstance(element, EndOfInput):
            self.ended[channel] = True
            self.input_watermarks[channel] = MAX_WATERMARK
            if not all(self.ended):
                return self._advance(min(self.input_watermarks))
            out = self._advance(MAX_WATERMARK)
            out += self._emit(self.operator.end_input())
            out.append(EndOfInput())
            return out
        raise TypeError(element)

    def announce_splits(self, assigned: tuple[str, ...], finished: frozenset[str]) -> list[Element]:
        """Tell the operator which source splits feed it (see Operator.on_splits)."""
        return self._emit(self.operator.on_splits(assigned, finished))

    def advance_processing_time(self, now_ms: int) -> list[Element]:
        """Tell the operator the wall clock while its input is idle (see Operator.on_processing_time)."""
        return self._emit(self.operator.on_processing_time(now_ms))

    def _advance(self, timestamp: int) -> list[Element]:
        if timestamp <= self.watermark:
            return []
        self.watermark = timestamp
        out = self._emit(self.operator.on_watermark(timestamp))
        forwarded = self.operator.output_watermark(timestamp)
        if forwarded > self.forwarded:
            self.forwarded = forwarded
            out.append(Watermark(forwarded))
        return out

    def _emit(self, elements: list) -> list[Element]:
        out: list[Element] = []
        for e in elements:
            if isinstance(e, Chunk):
                if e.num_rows:
                    self.ctx.metrics.records_out += e.num_rows
                    out.append(e)
            elif isinstance(e, Watermark):
                if e.timestamp > self.forwarded:
                    self.watermark = max(self.watermark, e.timestamp)
                    self.forwarded = e.timestamp
                    out.append(e)
            else:
                out.append(e)
        return out
