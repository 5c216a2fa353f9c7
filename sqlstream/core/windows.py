"""Window specs: how a windowing TVF cuts event time into windows.

The planner builds them from TUMBLE/HOP/CUMULATE/SESSION calls; the window operators
of the runtime assign rows to the windows they describe.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pyarrow as pa

WINDOW_COLUMNS = ("window_start", "window_end", "window_time")


@dataclass(frozen=True)
class WindowSpec:
    """A windowing TVF: TUMBLE(size), HOP(slide, size), CUMULATE(step, size), SESSION(gap)."""

    kind: str  # TUMBLE | HOP | CUMULATE | SESSION
    time_index: int  # the time attribute column of the TVF input
    size_ms: int = 0
    slide_ms: int = 0
    step_ms: int = 0
    gap_ms: int = 0
    offset_ms: int = 0
    partition_keys: tuple[int, ...] = ()  # SESSION ... PARTITION BY
    # on a TIMESTAMP_LTZ time attribute, the session zone ('table.local-time-zone') the windows are
    # aligned in, as Flink does: bounds are that zone's wall-clock time (a 1-day window starts at
    # local midnight, a day with a daylight saving change lasts 23 or 25 hours); None on TIMESTAMP
    zone: str | None = None

    def same_windows(self, other: WindowSpec) -> bool:
        """Whether both specs cut event time into the same windows, wherever their time columns are.

        Window joins need it of their two inputs.  Sessions depend on the data, so two
        session specs never promise the same windows.
        """
        shape = lambda w: (w.kind, w.size_ms, w.slide_ms, w.step_ms, w.offset_ms, w.zone)  # noqa: E731
        return self.kind != "SESSION" and shape(self) == shape(other)

    def remapped(self, mapping: dict[int, int]) -> WindowSpec:
        """The same spec over an input whose columns moved (old index -> new)."""
        return replace(self, time_index=mapping[self.time_index],
                       partition_keys=tuple(mapping[k] for k in self.partition_keys))

    def describe(self, time: bool = True) -> str:
        """``time=False`` leaves out the time column (it belongs to the TVF's input, not here)."""
        parts = {
            "TUMBLE": f"size={self.size_ms}ms",
            "HOP": f"slide={self.slide_ms}ms, size={self.size_ms}ms",
            "CUMULATE": f"step={self.step_ms}ms, size={self.size_ms}ms",
            "SESSION": f"gap={self.gap_ms}ms",
        }[self.kind]
        if self.offset_ms:
            parts += f", offset={self.offset_ms}ms"
        if self.zone is not None:
            parts += f", zone={self.zone}"
        return f"{self.kind}(time=${self.time_index}, {parts})" if time else f"{self.kind}({parts})"


def window_column_types(spec: WindowSpec, time_type: pa.DataType) -> tuple[pa.DataType, pa.DataType, pa.DataType]:
    """The types of window_start, window_end and window_time for windows on a time column of
    ``time_type``: the time attribute's own type on TIMESTAMP; on TIMESTAMP_LTZ (``spec.zone`` set)
    Flink types the bounds TIMESTAMP (wall-clock time of the zone) and window_time TIMESTAMP_LTZ
    (an instant, the time attribute of the output)."""
    if spec.zone is None:
        return time_type, time_type, time_type
    unit = time_type.unit
    return pa.timestamp(unit), pa.timestamp(unit), pa.timestamp(unit, "UTC")


def partition_columns(key_indexes: list[int], input_window: tuple[int, int] | None) -> tuple[int, ...]:
    """The input columns a window aggregation's input is hash-partitioned by (its key groups).

    The group keys; a cascaded aggregation without any uses the window end instead of
    sending every row to one subtask (each window is aggregated on its own anyway).
    """
    if key_indexes or input_window is None:
        return tuple(key_indexes)
    return (input_window[1],)
