"""Processing time, injectable: the one place the runtime reads the clock or waits for it.

State TTL, processing-time watermarks and timers, source idle timeouts and
source throttles all go through a ``Clock``.  Jobs use ``SYSTEM_CLOCK``; tests
pass a ``ManualClock`` and move time with ``advance()``, so that no test
waits for time to pass or depends on how fast the machine is.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def time_ms(self) -> int:
        """Wall-clock time in epoch milliseconds: processing time (state TTL, PROCTIME())."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back, for measuring intervals (idle timeouts, rates)."""

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (a throttled source waiting for its next row)."""


class SystemClock:
    """The machine's clocks."""

    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


SYSTEM_CLOCK: Clock = SystemClock()


class ManualClock:
    """A clock that moves only when told: ``advance()``, or ``sleep()``, which returns at once
    having moved the clock by the time slept (and records it, so a test can bound how long a
    throttle would have blocked)."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self.start_ms = start_ms
        # time since start in integer nanoseconds: sub-millisecond sleeps add up exactly, as they
        # would not on a float of epoch milliseconds
        self._elapsed_ns = 0
        self._lock = threading.Lock()
        self.sleeps: list[float] = []

    def time_ms(self) -> int:
        return self.start_ms + self._elapsed_ns // 1_000_000

    def monotonic(self) -> float:
        return self._elapsed_ns / 1e9

    def advance(self, ms: float) -> None:
        """Move time forward by ``ms`` milliseconds."""
        if ms < 0:
            raise ValueError("a clock does not go back")
        with self._lock:
            self._elapsed_ns += round(ms * 1_000_000)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        with self._lock:  # at least 1 ns, as any real sleep: a waiter whose due time rounds to
            self._elapsed_ns += max(round(seconds * 1e9), 1)  # zero still gets there
