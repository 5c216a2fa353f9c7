"""Nexmark q5 on Ray at parallelism 1 and 2, against the local runtime.

Each configuration runs the query twice, on a tiny number of events (its
start-up: planning and, on Ray, creating the actors and importing the engine
in each) and on ``--events``; the processing time is the difference, so
events/s measures the steady state, as benchmarks/nexmark/run.py does.  Ray
is started in this process once (``num_cpus`` = the machine's cores) and
every configuration runs in the same process, so they share the machine in
the same way.  Prints events/s per configuration, Ray's scaling ratio from
parallelism 1 to 2, and Ray's throughput relative to the local runtime at the
same parallelism.  Needs ``pip install 'sqlstream[ray]'``; not part of CI.

    python benchmarks/ray_scaling.py [--events 2000000] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NEXMARK = ROOT / "benchmarks" / "nexmark"
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(NEXMARK))

from run import DEFAULT_TPS, TINY_EVENTS, script_for  # noqa: E402 - benchmarks/nexmark/run.py

from sqlstream.frontend.session import Session  # noqa: E402

CONFIGS = [("local", 1), ("local", 2), ("ray", 1), ("ray", 2)]


def timed_run(target: str, parallelism: int, events: int) -> float:
    """Seconds to run q5 over ``events`` events on ``target`` at ``parallelism``."""
    session = Session()
    session.config.update({"execution.target": target, "parallelism.default": str(parallelism)})
    script = script_for("q5", "ddl.sql",
                        {"EVENTS_NUM": str(events), "TPS": str(DEFAULT_TPS), "RATE_LIMITED": "true"})
    started = time.perf_counter()
    session.execute_script(script)
    return time.perf_counter() - started


def events_per_s(target: str, parallelism: int, events: int) -> tuple[float, float]:
    """(events/s over the processing time, start-up seconds)."""
    tiny = timed_run(target, parallelism, TINY_EVENTS)
    full = timed_run(target, parallelism, events)
    return (events - TINY_EVENTS) / max(full - tiny, 1e-9), tiny


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--runs", type=int, default=1, help="runs per configuration; the median is reported")
    args = parser.parse_args()
    import ray

    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, logging_level="warning")
    print(f"Nexmark q5 ({NEXMARK / 'q5.sql'}), {args.events:,} events, {os.cpu_count()} cores, "
          f"median of {args.runs} run(s)")
    rates: dict[tuple[str, int], float] = {}
    for target, p in CONFIGS:
        runs = [events_per_s(target, p, args.events) for _ in range(args.runs)]
        rate = statistics.median(r for r, _ in runs)
        startup = statistics.median(s for _, s in runs)
        rates[(target, p)] = rate
        print(f"  {target:5s} p={p}: {rate:12,.0f} events/s   start-up {startup:5.1f} s", flush=True)
    ray.shutdown()
    print(f"Ray scaling p=1 -> p=2: {rates[('ray', 2)] / rates[('ray', 1)]:.2f}x "
          f"(local: {rates[('local', 2)] / rates[('local', 1)]:.2f}x)")
    for p in (1, 2):
        ratio = rates[("ray", p)] / rates[("local", p)]
        print(f"Ray vs local at p={p}: {ratio:.2f}x the throughput ({(1 - ratio) * 100:+.0f} % overhead)")


if __name__ == "__main__":
    main()
