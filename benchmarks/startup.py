"""Start-up of ``sqlstream run``: a whole process running a trivial job (VALUES -> print).

Issue target: under 0.5 s.  Prints the median and the spread of wall-clock and CPU seconds
(user + system, of the child, from ``getrusage``) over ``--runs`` runs after one warm-up run,
and with ``--imports`` the modules whose import took longest (``python -X importtime``,
cumulative microseconds).  Whether Python may cache bytecode matters: with
``PYTHONDONTWRITEBYTECODE`` set and no cached ``.pyc`` files, every start compiles sqlstream's
modules again (about 0.16 s here); ``--compile`` compiles them first, as a non-editable
``pip install`` does.  Not part of CI.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JOB = "SELECT a, b FROM (VALUES (1, 'one'), (2, 'two')) AS t(a, b);\n"


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(script: Path) -> tuple[float, float]:
    """(wall s, CPU s) of one ``sqlstream run`` of ``script``."""
    cpu, wall = _child_cpu(), time.perf_counter()
    subprocess.run([sys.executable, "-m", "sqlstream.frontend.cli", "run", str(script)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - wall, _child_cpu() - cpu


def slowest_imports(script: Path, top: int) -> list[tuple[int, str]]:
    """(cumulative µs, module) of the ``top`` costliest imports of one run."""
    err = subprocess.run([sys.executable, "-X", "importtime", "-m", "sqlstream.frontend.cli", "run", str(script)],
                         check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT).stderr
    rows = []
    for line in err.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].rstrip()))
    return sorted(rows, reverse=True)[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--compile", action="store_true", help="compile sqlstream's modules to .pyc first")
    parser.add_argument("--imports", type=int, default=0, metavar="N", help="print the N slowest imports")
    args = parser.parse_args()
    if args.compile:
        compileall.compile_dir(ROOT / "sqlstream", quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "job.sql"
        script.write_text(JOB)
        run_once(script)
        runs = [run_once(script) for _ in range(args.runs)]
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        print(f"sqlstream run, VALUES -> print, {args.runs} runs (load average {os.getloadavg()[0]:.2f}, "
              f"bytecode cache {'off' if sys.dont_write_bytecode else 'on'})")
        print(f"  wall s: median {statistics.median(walls):.3f}  min {min(walls):.3f}  max {max(walls):.3f}")
        print(f"  CPU s:  median {statistics.median(cpus):.3f}  min {min(cpus):.3f}  max {max(cpus):.3f}")
        for micros, module in slowest_imports(script, args.imports) if args.imports else []:
            print(f"  {micros / 1000:7.1f} ms  {module.strip()}")


if __name__ == "__main__":
    main()
