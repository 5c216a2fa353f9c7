"""What each state backend can do, known to the planner before any backend exists.

The planner picks an operator's state form from this table (``state.backend.type``), and the
runtime's backends declare the same capability from it, so the two cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlstream.core.errors import PlanError


@dataclass(frozen=True)
class BackendCapabilities:
    # keeps Arrow tables in memory beside keyed state: the vectorized operator forms run on it
    columnar: bool
    # keeps a vectorized form's state as encoded rows in the keyed store, read and written a batch
    # at a time (the non-windowed GROUP BY: core.aggregates.group_agg_columnar_rows; the INNER join
    # of append-only inputs: core.joins.join_columnar_rows; the window aggregation:
    # core.aggregates.window_agg_columnar_rows; the Top-N and keep-last deduplication of an
    # append-only input: core.aggregates.rank_columnar_rows)
    columnar_rows: bool = False


STATE_BACKENDS: dict[str, BackendCapabilities] = {
    "hashmap": BackendCapabilities(columnar=True),
    # state that may exceed memory stays in RocksDB: the GROUP BY, the inner join, the window
    # aggregation and the Top-N as rows written a batch at a time, the other operators one entry per
    # key (the per-key forms)
    "rocksdb": BackendCapabilities(columnar=False, columnar_rows=True),
}
DEFAULT_STATE_BACKEND = "hashmap"


def backend_type(settings: Mapping[str, str]) -> str:
    """The backend a job's settings name: ``state.backend.type`` (or Flink's older ``state.backend``)."""
    return (settings.get("state.backend.type") or settings.get("state.backend") or DEFAULT_STATE_BACKEND).lower()


def capabilities(settings: Mapping[str, str]) -> BackendCapabilities:
    """The capabilities of the backend the settings name; an unknown one is refused by name."""
    name = backend_type(settings)
    caps = STATE_BACKENDS.get(name)
    if caps is None:
        raise PlanError(f"unknown state backend '{name}' (state.backend.type); use one of {', '.join(STATE_BACKENDS)}")
    return caps
