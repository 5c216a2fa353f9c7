"""A savepoint of a rocksdb window aggregation larger than the memory the process may use.

The window aggregation on rocksdb keeps its partials as RocksDB entries
(window_agg_rocksdb.py; per slice for HOP), so its state is bounded by RocksDB,
and its savepoint (the columnar form's table of windows: each slice expanded to
its six windows, a key group at a time) is written from a frozen view of
RocksDB's files and restored a file batch at a time.  A child process fills
a HOP window aggregation whose keys are 1000-byte strings, caps its data
segment (``RLIMIT_DATA``) at what it uses then plus a headroom smaller than
the state, and takes a savepoint and restores it into a new operator; reading
the savepoint whole does not fit, which the child also checks, so the limit
binds (tests/memory_limit.py: how the cap is kept deterministic).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.memory_limit import run_capped

KEYS = 45_000  # in 6 one-hour HOP windows each: 270 k windows of ~1 kB, a savepoint of ~265 MB
HEADROOM_MB = 170

CHILD = r"""
import json, os, sys

import numpy as np
import pyarrow as pa

from sqlstream.core.aggregates import AggCall
from sqlstream.core.windows import WindowSpec
from sqlstream.runtime.elements import Chunk
from sqlstream.runtime.operators.base import Metrics, OperatorContext
from sqlstream.runtime.operators.window_agg import WindowAggOperator
from sqlstream.runtime.operators.window_agg_rocksdb import ROWS_STATE, SLICES_STATE, RocksDBWindowAggregates
from sqlstream.runtime.state import BackendFactory
from sqlstream.runtime.task import Task

work, keys, headroom = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]) << 20
HOUR = 3_600_000



factory = BackendFactory("rocksdb", {"state.backend.rocksdb.memory.fixed-per-slot": "16 mb",
                                     "state.backend.rocksdb.writebuffer.size": "4 mb"}, 1)
schema = pa.schema([("window_start", pa.timestamp("ms")), ("window_end", pa.timestamp("ms")), ("k", pa.string()),
                    ("n", pa.int64()), ("s", pa.int64())])
aggs = [AggCall("COUNT", None, False, pa.int64(), "n"), AggCall("SUM", 2, False, pa.int64(), "s")]


def operator(restore=None):
    backend = factory.create(range(128), 0, work)
    if restore is not None:
        backend.restore_all([restore])
    op = WindowAggOperator(WindowSpec("HOP", 0, size_ms=HOUR, slide_ms=HOUR // 6), ["window_start", "window_end", 1],
                           aggs, schema, columnar=True)
    Task(op, 1, OperatorContext("w", 0, 1, Metrics(), 128, backend, {}))
    if restore is not None:
        op.restore_state(None)
    assert isinstance(op.columnar, RocksDBWindowAggregates)
    return op, backend


blob = os.urandom(1 << 20)
op, backend = operator()
# small batches: the bytes objects a batch frees stay in the heap, counted in VmData, and would
# widen the headroom
for start in range(0, keys, 1000):
    ids = np.arange(start, min(keys, start + 1000))
    names = [str(i).encode() + blob[i * 7919 % ((1 << 20) - 1000):][:990] for i in ids]
    op.process_batch(Chunk(pa.record_batch([pa.array(ids * 1000 % (HOUR // 6), pa.int64()).cast(pa.timestamp("ms")),
                                            pa.array(names, pa.binary()).cast(pa.string(), safe=False),
                                            pa.array(ids)], names=["ts", "k", "v"])))
entries = len(backend.states[SLICES_STATE])  # one slice per key
# filled: from here on (savepoint, restore) the process may grow by the headroom only
cap(headroom)
savepoint = work / "savepoint"
savepoint.mkdir()
handle = backend.snapshot_all(1, canonical=True)(savepoint)
backend.close()

again, restored = operator(handle)
# restored as whole windows: each key in its six
ok = len(restored.states[ROWS_STATE]) == 6 * entries and len(again.columnar.ends) == 6
(path,) = handle["columnar"].values()
restored.close()
try:
    with pa.OSFile(str(path)) as source:
        whole = pa.ipc.open_file(source).read_all()
    control = f"read whole: {whole.nbytes} bytes"
except MemoryError:
    control = "MemoryError"
print(json.dumps({"restored": ok, "entries": entries, "savepoint_bytes": os.path.getsize(path), "control": control}))
"""


@pytest.mark.slow
def test_a_window_savepoint_larger_than_the_memory_limit_is_written_and_restored(tmp_path: Path) -> None:
    result = run_capped(CHILD, tmp_path, KEYS, HEADROOM_MB)
    assert result["restored"] and result["entries"] == KEYS
    assert result["savepoint_bytes"] > HEADROOM_MB << 20  # the state is larger than the headroom
    assert result["control"] == "MemoryError"  # holding the savepoint whole does not fit under the limit
