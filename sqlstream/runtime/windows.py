"""Window assignment for TUMBLE, HOP and CUMULATE, vectorized with numpy.

Each function maps event times (epoch ms) to the windows that contain them,
as parallel arrays (row index, window start, window end): a row in k windows
appears k times.  Window bounds follow Flink: start = ts - (ts - offset) mod
size, windows are [start, end), and a window is complete when the watermark
reaches end - 1.
"""

from __future__ import annotations

import numpy as np

from sqlstream.core.windows import WindowSpec


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
