"""Window assignment for TUMBLE, HOP and CUMULATE, vectorized with numpy.

Each function maps event times (epoch ms) to the windows that contain them,
as parallel arrays (row index, window start, window end): a row in k windows
appears k times.  Window bounds follow Flink: start = ts - (ts - offset) mod
size, windows are [start, end), and a window is complete when the watermark
reaches end - 1.

Windows on a TIMESTAMP_LTZ time attribute are aligned in the session zone, as
Flink's window operators do: event times (instants) become that zone's
wall-clock time in epoch ms (:meth:`WindowClock.local`), windows are assigned
on those, and their bounds stay wall-clock time (window_start/window_end are
TIMESTAMP).  Firing compares the watermark, an instant, with the instant of the
window's last wall-clock millisecond (:meth:`WindowClock.fire_times`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from sqlstream.core.types import instant, wall_clock
from sqlstream.core.windows import WindowSpec


@dataclass(frozen=True)
class WindowClock:
    """Where window bounds meet event time: ``zone`` None for windows on TIMESTAMP (bounds and
    watermarks are the same epoch-ms scale), else the zone of wall-clock bounds of windows on a
    TIMESTAMP_LTZ time attribute."""

    zone: str | None

    def local(self, ts: np.ndarray) -> np.ndarray:
        """Event times (epoch ms) as the values windows are assigned on: wall-clock ms in the zone."""
        if self.zone is None or self.zone == "UTC":
            return ts
        return _ms(wall_clock(pa.array(ts, pa.int64()).cast(pa.timestamp("ms", "UTC")), self.zone))

    def fire_times(self, ends: np.ndarray) -> np.ndarray:
        """The watermarks at which windows ending at ``ends`` fire (or their rows become late):
        the instant of the last millisecond before the end.  Flink's TimeWindowUtil.toEpochMillsForTimer:
        a wall-clock time that occurs twice (clocks turned back) is its later instant, so a window
        over the repeated hour waits for both; one skipped (clocks turned forward) moves later by
        the gap, as java.time does."""
        if self.zone is None or self.zone == "UTC":
            return ends - 1
        return _ms(instant(_stamps(ends - 1), self.zone, later_at_overlap=True))

    def fire_time(self, end: int) -> int:
        """:meth:`fire_times` of one window end (operators ask it once per watermark and window)."""
        if self.zone is None or self.zone == "UTC":
            return end - 1
        return int(self.fire_times(np.array([end], np.int64))[0])

    def window_times(self, ends: np.ndarray) -> np.ndarray:
        """window_time of windows ending at ``ends`` (epoch ms): on TIMESTAMP_LTZ the instant of the
        last wall-clock millisecond, the earlier one when it occurs twice (Flink's toEpochMills)."""
        if self.zone is None or self.zone == "UTC":
            return ends - 1
        return _ms(instant(_stamps(ends - 1), self.zone))


def _stamps(ms: np.ndarray) -> pa.Array:
    return pa.array(ms, pa.int64()).cast(pa.timestamp("ms"))


def _ms(stamps: pa.Array) -> np.ndarray:
    return stamps.cast(pa.int64()).to_numpy(zero_copy_only=False)


def _floor_start(ts: np.ndarray, size: int, offset: int) -> np.ndarray:
    return ts - np.mod(ts - offset, size)


def first_window_end(spec: WindowSpec, ts: np.ndarray) -> np.ndarray:
    """The earliest end among a row's windows (its slice end): late rows are judged by it."""
    if spec.kind == "TUMBLE":
        return _floor_start(ts, spec.size_ms, spec.offset_ms) + spec.size_ms
    if spec.kind == "HOP":
        return _floor_start(ts, spec.slide_ms, spec.offset_ms) + spec.slide_ms
    if spec.kind == "CUMULATE":
        return _floor_start(ts, spec.step_ms, spec.offset_ms) + spec.step_ms
    raise ValueError(spec.kind)


def assign(spec: WindowSpec, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row indexes, window starts, window ends) for every (row, window) pair."""
    rows = np.arange(len(ts), dtype=np.int64)
    if spec.kind == "TUMBLE":
        start = _floor_start(ts, spec.size_ms, spec.offset_ms)
        return rows, start, start + spec.size_ms
    if spec.kind == "HOP":
        last = _floor_start(ts, spec.slide_ms, spec.offset_ms)
        n = spec.size_ms // spec.slide_ms
        starts = np.concatenate([last - j * spec.slide_ms for j in range(n)])
        return np.tile(rows, n), starts, starts + spec.size_ms
    if spec.kind == "CUMULATE":
        block = _floor_start(ts, spec.size_ms, spec.offset_ms)
        parts_rows, parts_start, parts_end = [], [], []
        for i in range(1, spec.size_ms // spec.step_ms + 1):
            end = block + i * spec.step_ms
            mask = end > ts
            parts_rows.append(rows[mask])
            parts_start.append(block[mask])
            parts_end.append(end[mask])
        return np.concatenate(parts_rows), np.concatenate(parts_start), np.concatenate(parts_end)
    raise ValueError(f"{spec.kind} windows are assigned by merging, not here")


# ---------------------------------------------------------------- slices (Flink's SliceAssigners)
# A HOP or CUMULATE row lies in several windows but in ONE slice: the slide- (step-) sized pane
# that ends at its first window end.  A window is the union of the slices between its start and
# its end, so state kept per slice is written once per row and merged when a window fires.


def slice_size(spec: WindowSpec) -> int | None:
    """The slice length of windows made of several slices (None: a window is one slice)."""
    if spec.kind == "HOP" and spec.size_ms > spec.slide_ms:
        return spec.slide_ms
    if spec.kind == "CUMULATE" and spec.size_ms > spec.step_ms:
        return spec.step_ms
    return None


def window_starts(spec: WindowSpec, ends: np.ndarray) -> np.ndarray:
    """The starts of the (HOP or CUMULATE) windows ending at ``ends``."""
    if spec.kind == "HOP":
        return ends - spec.size_ms
    return _floor_start(ends - 1, spec.size_ms, spec.offset_ms)  # CUMULATE: its block's start


def last_window_ends(spec: WindowSpec, slice_ends: np.ndarray) -> np.ndarray:
    """The end of the last window each slice belongs to: once it fired, the slice is done."""
    if spec.kind == "HOP":
        return slice_ends + spec.size_ms - spec.slide_ms
    return _floor_start(slice_ends - 1, spec.size_ms, spec.offset_ms) + spec.size_ms


def slice_windows(spec: WindowSpec, slice_ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(slice indexes, window ends) for every (slice, window it belongs to) pair: the windows of a
    slice end at its own end and every slice length after it up to its last window's end."""
    step = slice_size(spec)
    assert step is not None
    last = last_window_ends(spec, slice_ends)
    index = np.arange(len(slice_ends), dtype=np.int64)
    parts_index, parts_end = [], []
    for j in range(spec.size_ms // step):
        ends = slice_ends + j * step
        mask = ends <= last
        parts_index.append(index[mask])
        parts_end.append(ends[mask])
    return np.concatenate(parts_index), np.concatenate(parts_end)
