"""A bounded, expiring cache in front of a lookup function (lookup.cache.max-rows / .ttl)."""

from __future__ import annotations

from collections import OrderedDict

from sqlstream.runtime.clock import SYSTEM_CLOCK, Clock
from sqlstream.runtime.connectors.base import LookupFunction


class CachedLookup:
    """Caches per key, misses included (a key with no row is remembered as such, as Flink does);
    an entry expires ttl after it was loaded (Flink's DefaultLookupCache: Guava's expireAfterWrite)."""

    def __init__(self, lookup: LookupFunction, max_rows: int, ttl_ms: int | None,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.lookup = lookup
        self.clock = clock
        self.max_rows = max_rows
        self.ttl_s = None if ttl_ms is None else ttl_ms / 1000
        self.entries: OrderedDict[tuple, tuple[float, list[tuple]]] = OrderedDict()
        self.hits = self.misses = 0

    def __call__(self, keys: list[tuple]) -> dict[tuple, list[tuple]]:
        now = self.clock.monotonic()
        out: dict[tuple, list[tuple]] = {}
        missing = []
        for k in keys:
            cached = self.entries.get(k)
            if cached is not None and (self.ttl_s is None or now - cached[0] < self.ttl_s):
                self.entries.move_to_end(k)
                out[k] = cached[1]
                self.hits += 1
            else:
                missing.append(k)
        if missing:
            self.misses += len(missing)
            found = self.lookup(missing)
            for k in missing:
                rows = found.get(k, [])
                out[k] = rows
                self.entries[k] = (now, rows)
                self.entries.move_to_end(k)
            while len(self.entries) > self.max_rows:
                self.entries.popitem(last=False)
        return out


def with_cache(lookup: LookupFunction, max_rows: int | None, ttl_ms: int | None,
               clock: Clock = SYSTEM_CLOCK) -> LookupFunction:
    return CachedLookup(lookup, max_rows, ttl_ms, clock) if max_rows else lookup
