"""Savepoint and restore of one keyed state on its own: seconds, size, and how much memory each takes.

A state backend is filled with K entries of a GROUP BY's shape (key ``(i, 'k')``,
value ``(i, 2i, 'v<i>')``); then its savepoint is written (the canonical format,
streamed in bounded batches) and restored into a fresh backend.  "RSS growth" is
the rise of the process's peak RSS (VmHWM, reset before each step through
/proc/self/clear_refs) during the step: the memory the step itself needed on top
of the filled state.  Each backend runs in a child process of its own.
Usage: python benchmarks/savepoint_memory.py [--keys 1000000] [--backends rocksdb,hashmap]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def reset_peak() -> float:
    """Start a new peak RSS measurement (5 to clear_refs resets VmHWM to the current RSS)."""
    Path("/proc/self/clear_refs").write_text("5")
    return peak_rss_mb()


def child(backend_name: str, keys: int) -> dict[str, float]:
    from sqlstream.runtime.state import create_backend

    work = Path(tempfile.mkdtemp(prefix="savepoint-memory-"))
    try:
        backend = create_backend(backend_name, range(128), work / "local")
        st = backend.state("s")
        started = time.perf_counter()
        for i in range(keys):
            st.put(i % 128, (i, "k"), (i, i * 2, f"v{i}"))
        fill_s = time.perf_counter() - started
        base = reset_peak()
        started = time.perf_counter()
        target = work / "savepoint"
        target.mkdir()
        handle = backend.snapshot(1, canonical=True)(target)
        savepoint_s = time.perf_counter() - started
        savepoint_growth = peak_rss_mb() - base
        backend.close()
        base = reset_peak()
        started = time.perf_counter()
        restored = create_backend(backend_name, range(128), work / "restored")
        restored.restore([handle])
        restore_s = time.perf_counter() - started
        restore_growth = peak_rss_mb() - base
        if len(restored.state("s")) != keys:
            raise AssertionError(f"restored {len(restored.state('s'))} entries of {keys}")
        restored.close()
        return {"fill_s": fill_s, "savepoint_s": savepoint_s, "savepoint_mb": os.path.getsize(handle["file"]) / 2**20,
                "savepoint_rss_growth_mb": savepoint_growth, "restore_s": restore_s,
                "restore_rss_growth_mb": restore_growth}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print("SAVEPOINT_MEMORY " + json.dumps(child(sys.argv[2], int(sys.argv[3]))), flush=True)
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--backends", default="rocksdb,hashmap")
    args = ap.parse_args()
    print(f"{'backend':>8} {'keys':>10} {'svp s':>6} {'svp MB':>7} {'svp RSS+':>8} {'restore s':>9} {'restore RSS+':>12}")
    for name in args.backends.split(","):
        done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", name, str(args.keys)],
                              capture_output=True, text=True, check=False)
        line = next((x for x in done.stdout.splitlines() if x.startswith("SAVEPOINT_MEMORY ")), None)
        if line is None:
            print(f"{name:>8} {args.keys:>10,} failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
            continue
        r = json.loads(line.split(" ", 1)[1])
        print(f"{name:>8} {args.keys:>10,} {r['savepoint_s']:>6.2f} {r['savepoint_mb']:>7.1f} "
              f"{r['savepoint_rss_growth_mb']:>8.0f} {r['restore_s']:>9.2f} {r['restore_rss_growth_mb']:>12.0f}")
    load = os.getloadavg()
    print(f"load average after the run: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
