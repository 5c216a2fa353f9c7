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

With ``--checkpoint-dir`` (a local path or a store's URI such as ``s3://bucket/chk``,
with ``--set s3.endpoint=...`` and the other ``s3.*`` keys), it then runs q5 on Ray
at parallelism 1 and 2 checkpointing every ``--interval`` into that directory and
into a local one, and prints the median checkpoint duration and size of each: on a
store every actor uploads its snapshot files itself before acknowledging.

    python benchmarks/ray_scaling.py [--events 2000000] [--runs 3]
    python benchmarks/ray_scaling.py --checkpoint-dir s3://bucket/chk --set s3.endpoint=http://host:9000 \
        --set s3.access-key=KEY --set s3.secret-key=SECRET --set s3.path.style.access=true
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NEXMARK = ROOT / "benchmarks" / "nexmark"
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(NEXMARK))

from run import DEFAULT_TPS, TINY_EVENTS, script_for  # noqa: E402 - benchmarks/nexmark/run.py

from sqlstream.frontend.session import Session  # noqa: E402

CONFIGS = [("local", 1), ("local", 2), ("ray", 1), ("ray", 2)]


def timed_run(target: str, parallelism: int, events: int, settings: dict[str, str] | None = None) -> float:
    """Seconds to run q5 over ``events`` events on ``target`` at ``parallelism``."""
    return _run(target, parallelism, events, settings)[0]


def _run(target: str, parallelism: int, events: int, settings: dict[str, str] | None) -> tuple[float, Any]:
    """(seconds, the JobResult) of q5 over ``events`` events; ``settings`` are SET on top."""
    session = Session()
    session.config.update({"execution.target": target, "parallelism.default": str(parallelism), **(settings or {})})
    script = script_for("q5", "ddl.sql",
                        {"EVENTS_NUM": str(events), "TPS": str(DEFAULT_TPS), "RATE_LIMITED": "true"})
    started = time.perf_counter()
    results = session.execute_script(script)
    return time.perf_counter() - started, results[-1].job


def checkpoint_figures(parallelism: int, events: int, directory: str, interval: str,
                       settings: dict[str, str]) -> tuple[float, float, int]:
    """(median duration in ms, median size in bytes, count) of the checkpoints of a Ray run of q5
    that checkpoints into a fresh directory under ``directory`` every ``interval``."""
    chk = f"{directory.rstrip('/')}/{uuid.uuid4().hex[:8]}"
    _, job = _run("ray", parallelism, events, {**settings, "execution.checkpointing.interval": interval,
                                                "state.checkpoints.dir": chk})
    periodic = job.checkpoints[:-1] or job.checkpoints  # the last one is the final checkpoint of the bounded run
    return (statistics.median(c.duration_s * 1000 for c in periodic),
            statistics.median(c.size_bytes for c in periodic), len(job.checkpoints))


def events_per_s(target: str, parallelism: int, events: int) -> tuple[float, float]:
    """(events/s over the processing time, start-up seconds)."""
    tiny = timed_run(target, parallelism, TINY_EVENTS)
    full = timed_run(target, parallelism, events)
    return (events - TINY_EVENTS) / max(full - tiny, 1e-9), tiny


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--runs", type=int, default=1, help="runs per configuration; the median is reported")
    parser.add_argument("--checkpoint-dir", help="also time checkpoints on Ray into this path or URI (s3://...)")
    parser.add_argument("--interval", default="2 s", help="checkpoint interval of those runs")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting of those runs (the s3.* keys of a store)")
    parser.add_argument("--skip-throughput", action="store_true", help="only the checkpoint runs")
    args = parser.parse_args()
    import ray

    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, logging_level="warning")
    print(f"Nexmark q5 ({NEXMARK / 'q5.sql'}), {args.events:,} events, {os.cpu_count()} cores, "
          f"median of {args.runs} run(s)")
    if not args.skip_throughput:
        throughput(args.events, args.runs)
    if args.checkpoint_dir:
        settings = dict(kv.split("=", 1) for kv in args.set)
        local = tempfile.mkdtemp(prefix="sqlstream-bench-chk-")
        print(f"Checkpoints on Ray every {args.interval} (median duration, median size, count):")
        for p in (1, 2):
            for where in (args.checkpoint_dir, local):
                ms, size, n = checkpoint_figures(p, args.events, where, args.interval, settings)
                print(f"  p={p} {where}: {ms:8.1f} ms  {size / 1e6:7.2f} MB  {n} checkpoints", flush=True)
    ray.shutdown()


def throughput(events: int, runs_per_config: int) -> None:
    """Events/s of each configuration, Ray's scaling and its overhead against the local runtime."""
    rates: dict[tuple[str, int], float] = {}
    for target, p in CONFIGS:
        runs = [events_per_s(target, p, events) for _ in range(runs_per_config)]
        rate = statistics.median(r for r, _ in runs)
        startup = statistics.median(s for _, s in runs)
        rates[(target, p)] = rate
        print(f"  {target:5s} p={p}: {rate:12,.0f} events/s   start-up {startup:5.1f} s", flush=True)
    print(f"Ray scaling p=1 -> p=2: {rates[('ray', 2)] / rates[('ray', 1)]:.2f}x "
          f"(local: {rates[('local', 2)] / rates[('local', 1)]:.2f}x)")
    for p in (1, 2):
        ratio = rates[("ray", p)] / rates[("local", p)]
        print(f"Ray vs local at p={p}: {ratio:.2f}x the throughput ({(1 - ratio) * 100:+.0f} % overhead)")


if __name__ == "__main__":
    main()
