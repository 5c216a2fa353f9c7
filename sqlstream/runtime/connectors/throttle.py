"""Rate limiting for generator sources (datagen, nexmark): rows per second, never blocking long.

A token-bucket over a count of rows: at most one second (or one batch) of
backlog accumulates, and a reader waits at most ``MAX_BLOCK_S`` for the next
row before returning None, so a throttled source never stalls its subtask's
checkpoints and control messages.
"""

from __future__ import annotations

from sqlstream.runtime.clock import SYSTEM_CLOCK, Clock

MAX_BLOCK_S = 0.02


class Throttle:
    def __init__(self, rate: float, batch: int, clock: Clock = SYSTEM_CLOCK) -> None:
        self.rate = rate  # rows per second
        self.batch = batch
        self.clock = clock  # the source context's: tests pass a ManualClock
        self.base_time = 0.0  # monotonic time when base_count rows had been let out
        self.base_count = 0

    def start(self, count: int) -> None:
        """Begin (or resume, after a restore) with ``count`` rows already produced."""
        self.base_time = self.clock.monotonic()
        self.base_count = count

    def allowed(self, count: int) -> int:
        """Rows that may go out now, given ``count`` produced so far.

        Row r (from the start) goes out at r / rate seconds, the first one at once, as Flink's rate
        limiter lets its first permit go: a generated row's nominal time (datagen's timestamps,
        start + r / rate) is then when it leaves, not one interval before.
        """
        now = self.clock.monotonic()
        allowed = int((now - self.base_time) * self.rate) + 1 - (count - self.base_count)
        cap = max(int(self.rate), self.batch)
        if allowed > cap:
            self.base_time = now - cap / self.rate
            self.base_count = count
            allowed = cap
        return allowed

    def wait(self, count: int) -> int:
        """Rows allowed now, waiting at most MAX_BLOCK_S for the first one."""
        allowed = self.allowed(count)
        if allowed <= 0:
            due = (count - self.base_count) / self.rate - (self.clock.monotonic() - self.base_time)
            self.clock.sleep(min(max(due, 0.0), MAX_BLOCK_S))
            allowed = self.allowed(count)
        return allowed
