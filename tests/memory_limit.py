"""Running state code in a child process whose data segment is capped (``RLIMIT_DATA``).

The savepoint tests fill a state, then cap the child at what it uses then plus
a headroom smaller than the state, and take and restore a savepoint: if either
held the state whole, the cap would stop it.  What makes such a cap
deterministic rather than a race with the allocator:

- the system allocator with one malloc arena (``ARROW_DEFAULT_MEMORY_POOL=system``,
  ``MALLOC_ARENA_MAX=1``): jemalloc and per-thread arenas reserve address space up
  front, which the limit counts although nothing uses it;
- a fixed mmap threshold (``MALLOC_MMAP_THRESHOLD_``): glibc otherwise raises its
  threshold each time a large block is freed, so later large blocks come from the
  heap, which fragments and keeps growing with the timing of frees (the window
  test's child grew 60 MB more in one run than in another, and RocksDB aborts the
  process when an allocation fails under the cap).

``PREAMBLE`` gives the child ``vm_data()`` and ``cap(headroom)``; the child prints
one JSON line last, which ``run_capped`` returns.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

PREAMBLE = r"""
import resource
from pathlib import Path


def vm_data() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmData:"):
            return int(line.split()[1]) << 10
    raise RuntimeError("no VmData")


def cap(headroom: int) -> None:
    # from here on the process may grow by the headroom only; the cap counts what the work so far
    # left, RocksDB's threads and caches among it
    limit = vm_data() + headroom
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
"""


def run_capped(child: str, *args: object, timeout: float = 600) -> dict[str, Any]:
    """Run ``PREAMBLE + child`` with ``args`` as its argv; its last stdout line, parsed as JSON."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ARROW_DEFAULT_MEMORY_POOL": "system",
           "MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_THRESHOLD_": str(1 << 17)}
    done = subprocess.run([sys.executable, "-c", PREAMBLE + child, *map(str, args)],
                          env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
