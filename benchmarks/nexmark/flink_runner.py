"""Runs one Nexmark SQL script on Apache Flink (PyFlink, local mini-cluster); prints measurements.

Runs with the PyFlink venv's python (see benchmarks/README.md), not the
project's: it imports nothing from sqlstream.  Prints one line
``NEXMARK {json}`` with ``env_s`` (JVM and table environment start-up),
``script_s`` (every statement, the INSERT jobs until they finish; a ``SET 'key' = 'value'``
statement sets the table configuration, as Flink's SQL client does), and the CPU
seconds and peak RSS of this process plus the Flink JVM it started, read from
/proc before the JVM goes away.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import sys
import time
from pathlib import Path
from typing import Any

# nexmark-flink's benchmark configuration: mini-batch aggregation, split distinct aggregates.
FLINK_SETTINGS = {
    "table.exec.mini-batch.enabled": "true",
    "table.exec.mini-batch.allow-latency": "2 s",
    "table.exec.mini-batch.size": "50000",
    "table.optimizer.distinct-agg.split.enabled": "true",
}


SET = re.compile(r"SET\s+'([^']+)'\s*=\s*'([^']*)'", re.IGNORECASE)


def statements(script: str) -> list[str]:
    """The script's statements: '--' comments dropped, split at ';' outside quotes."""
    out, current, quote = [], [], ""
    i = 0
    while i < len(script):
        ch = script[i]
        if not quote and script.startswith("--", i):
            i = script.find("\n", i)
            if i < 0:
                break
            continue
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'`":
            quote = ch
        elif ch == ";":
            out.append("".join(current).strip())
            current = []
            i += 1
            continue
        current.append(ch)
        i += 1
    out.append("".join(current).strip())
    return [s for s in out if s]


def child_pids() -> list[int]:
    me = os.getpid()
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == me:
                pids.append(int(entry.name))
    return pids


def process_usage(pid: int) -> tuple[float, float]:
    """(CPU seconds, peak RSS MB) of a live process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    peak = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            peak = int(line.split()[1]) / 1024
    return cpu, peak


def main() -> int:
    parser = argparse.ArgumentParser(description="run a Nexmark script on PyFlink")
    parser.add_argument("script")
    parser.add_argument("--parallelism", type=int, default=1)
    args = parser.parse_args()
    started = time.perf_counter()
    from pyflink.table import EnvironmentSettings, TableEnvironment

    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = env.get_config()
    config.set("parallelism.default", str(args.parallelism))
    for key, value in FLINK_SETTINGS.items():
        config.set(key, value)
    ready = time.perf_counter()
    out: dict[str, Any] = {"env_s": ready - started}
    try:
        for stmt in statements(Path(args.script).read_text()):
            setting = SET.fullmatch(stmt)
            if setting:  # as Flink's SQL client does: into the configuration of the jobs to come
                config.set(setting.group(1), setting.group(2))
                continue
            result = env.execute_sql(stmt)
            if stmt.lstrip().upper().startswith("INSERT"):
                result.wait()
        out["status"] = "ok"
    except Exception as e:  # noqa: BLE001 - Flink's error (planning or job) is the result
        text = str(e)
        message = next((ln.strip() for ln in text.splitlines() if "Exception:" in ln), text.strip())
        out["status"] = "unsupported"
        out["error"] = message[:300]
    out["script_s"] = time.perf_counter() - ready
    cpu = 0.0
    rss = 0.0
    for pid in child_pids():
        try:
            c, r = process_usage(pid)
        except OSError:
            continue
        cpu += c
        rss += r
    own = resource.getrusage(resource.RUSAGE_SELF)
    out["cpu_s"] = cpu + own.ru_utime + own.ru_stime
    out["peak_rss_mb"] = rss + own.ru_maxrss / 1024
    print("NEXMARK " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
