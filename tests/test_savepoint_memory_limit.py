"""A savepoint of RocksDB state larger than the memory the process may use is written and restored.

The work runs in a child process that fills a RocksDB state, then caps
its data segment with ``RLIMIT_DATA`` at what it uses then plus a headroom
smaller than the state, and takes a savepoint and restores it.  Both the
savepoint and its restore stream the state batch by batch, so they fit;
reading the savepoint whole does not, which the child also checks, so the
limit is shown to bind (tests/memory_limit.py: how the cap is kept
deterministic).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.memory_limit import run_capped

ENTRIES = 260_000  # of 1000 incompressible bytes each: a savepoint of ~254 MB (the old whole-in-memory path failed at 150)
HEADROOM_MB = 170  # the savepoint and the restore take ~35 and ~70 MB above the filled state (measured)

CHILD = r"""
import json, os, sys

import pyarrow as pa

from sqlstream.runtime.state import BackendFactory
from sqlstream.runtime.state.codec import encode
from sqlstream.runtime.state.rocksdb import encode_key

work, entries, headroom = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]) << 20



# RocksDB's own memory bounded too, by the options a user would set
factory = BackendFactory("rocksdb", {"state.backend.rocksdb.memory.fixed-per-slot": "16 mb",
                                     "state.backend.rocksdb.writebuffer.size": "4 mb"}, 1)
backend = factory.create(range(128), 0)
st = backend.state("s")
blob = os.urandom(1 << 20)


def value(i: int) -> bytes:
    start = i * 7919 % ((1 << 20) - 1000)
    return blob[start:start + 1000]


for start in range(0, entries, 10_000):
    ids = range(start, min(entries, start + 10_000))
    st.put_new_raw([encode_key(i % 128, (i,)) for i in ids], [encode(value(i)) for i in ids])
# filled: from here on (savepoint, restore) the process may grow by the headroom only
cap(headroom)
savepoint = work / "savepoint"
savepoint.mkdir()
handle = backend.snapshot(1, canonical=True)(savepoint)
backend.close()

again = factory.create(range(128), 0)
again.restore([handle])
s = again.state("s")
restored = len(s) == entries and all(s.get(i % 128, (i,)) == value(i) for i in range(0, entries, 997))
again.close()
try:
    with pa.OSFile(str(handle["file"])) as source:
        whole = pa.ipc.open_file(source).read_all()
    control = f"read whole: {whole.nbytes} bytes"
except MemoryError:
    control = "MemoryError"
print(json.dumps({"restored": restored, "savepoint_bytes": os.path.getsize(handle["file"]), "control": control}))
"""


@pytest.mark.slow
def test_a_savepoint_of_state_larger_than_the_memory_limit_is_written_and_restored(tmp_path: Path) -> None:
    result = run_capped(CHILD, tmp_path, ENTRIES, HEADROOM_MB)
    assert result["restored"]
    assert result["savepoint_bytes"] > HEADROOM_MB << 20  # the state is larger than the headroom
    assert result["control"] == "MemoryError"  # holding the savepoint whole does not fit under the limit
