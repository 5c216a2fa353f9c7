"""Flink's duration option text ('10 s', '500ms', '1 min'), read the same way by the planner
(SET keys, hints) and the runtime (connector options, state TTL), and its MemorySize text
('128MB'), for connector options."""

from __future__ import annotations

import re

_DURATION = re.compile(r"^\s*(\d+)\s*(ms|milli|millis|s|sec|second|seconds|min|minute|minutes|h|hour|hours|d|day|days)?\s*$")
_UNIT_MS = {
    None: 1000, "ms": 1, "milli": 1, "millis": 1, "s": 1000, "sec": 1000, "second": 1000,
    "seconds": 1000, "min": 60_000, "minute": 60_000, "minutes": 60_000, "h": 3_600_000,
    "hour": 3_600_000, "hours": 3_600_000, "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
}


def parse_duration_ms(text: str) -> int:
    """Flink duration option text ('10 s', '500ms', '1 min') in milliseconds."""
    m = _DURATION.match(text.lower())
    if not m:
        raise ValueError(f"'{text}' is not a duration (e.g. '10 s', '500 ms', '1 min')")
    return int(m.group(1)) * _UNIT_MS[m.group(2)]


_MEMORY = re.compile(
    r"^\s*(\d+)\s*(b|bytes|k|kb|kib|kibibytes|m|mb|mib|mebibytes|g|gb|gib|gibibytes|t|tb|tib|tebibytes)?\s*$"
)
_MEMORY_UNIT = {"b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_memory_size(text: str) -> int:
    """Flink MemorySize text ('128MB', '64 kb', '1024') in bytes (units are powers of 1024)."""
    m = _MEMORY.match(text.lower())
    if not m:
        raise ValueError(f"'{text}' is not a memory size (e.g. '128MB', '64 kb')")
    unit = (m.group(2) or "b")[0]
    return int(m.group(1)) * _MEMORY_UNIT[unit]
