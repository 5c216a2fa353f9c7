"""Checkpoint duration and size against keyed-state size, for both state backends.

Fills one operator subtask's keyed state with N group-aggregate entries
(key -> (accumulators, last emitted row), as GROUP BY keeps them), then
takes a checkpoint: the synchronous part (what blocks processing), the
asynchronous part (writing files), and the bytes on disk.  For rocksdb a
second checkpoint after 1 % more updates shows the incremental copy.
Usage: python benchmarks/checkpoint_size.py [--max-keys 10000000]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlstream.runtime.state import create_backend  # noqa: E402


def size_of(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def measure(backend_name: str, keys: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        backend = create_backend(backend_name, range(128), root / "local")
        backend.shared_dir = root / "shared"
        state = backend.state("groups")
        started = time.perf_counter()
        for i in range(keys):
            state.put(i % 128, (f"key-{i}",), ([[i], [i * 2, 1]], (f"key-{i}", i, i * 2)))
        fill_s = time.perf_counter() - started

        def checkpoint(n: int) -> tuple[float, float, int, dict]:
            t0 = time.perf_counter()
            writer = backend.snapshot(n)
            t1 = time.perf_counter()
            directory = root / f"chk-{n}"
            directory.mkdir()
            handle = writer(directory)
            t2 = time.perf_counter()
            return t1 - t0, t2 - t1, size_of(directory), handle

        sync_s, async_s, private_bytes, handle = checkpoint(1)
        total_bytes = private_bytes + (size_of(root / "shared") if (root / "shared").exists() else 0)
        for i in range(0, keys, 100):  # touch 1 % of the keys
            state.put(i % 128, (f"key-{i}",), ([[i + 1], [i, 2]], (f"key-{i}", i + 1, i)))
        sync2, async2, _, handle2 = checkpoint(2)
        second_copied = _copied(handle2)
        backend.close()
    return {
        "backend": backend_name, "keys": keys, "fill_s": round(fill_s, 2),
        "sync_s": round(sync_s, 4), "async_s": round(async_s, 3), "size_mb": round(total_bytes / 2**20, 1),
        "second_sync_s": round(sync2, 4), "second_async_s": round(async2, 3),
        "second_copied_mb": round(second_copied / 2**20, 1),
    }


def _copied(handle: dict) -> int:
    """Bytes the checkpoint wrote: rocksdb reports its incremental copy, canonical files are whole."""
    if "bytes_copied" in handle:
        return handle["bytes_copied"]
    return Path(handle["file"]).stat().st_size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--max-keys", type=float, default=1e6)
    args = ap.parse_args()
    sizes = [k for k in (10_000, 100_000, 1_000_000, 10_000_000) if k <= args.max_keys]
    results = [measure(b, k) for k in sizes for b in ("hashmap", "rocksdb")]
    header = f"{'backend':>8} {'keys':>10} {'sync s':>8} {'async s':>8} {'size MB':>8} {'2nd sync':>9} {'2nd async':>9} {'2nd MB':>7}"
    print(header)
    for r in results:
        print(f"{r['backend']:>8} {r['keys']:>10,} {r['sync_s']:>8} {r['async_s']:>8} {r['size_mb']:>8} "
              f"{r['second_sync_s']:>9} {r['second_async_s']:>9} {str(r['second_copied_mb']):>7}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
