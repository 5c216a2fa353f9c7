"""Which cases of the Flink reference suite sqlstream passes today, against pending.toml.

    PYTHONPATH=. python tests/flink_reference/triage.py [--only GROUP ...] [--write]

prints the pending cases that now pass (remove them from pending.toml) and the cases that fail
without being listed. ``--write`` rewrites pending.toml with every failing case of the groups run,
keeping the reason already written for a case that still fails, else the difference found.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.flink_reference import suite  # noqa: E402
from tests.flink_reference.check import compare  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", default=[], help="run only these groups")
    parser.add_argument("--write", action="store_true", help="rewrite pending.toml from this run")
    args = parser.parse_args()
    path = suite.HERE / "pending.toml"
    pending: dict[str, str] = tomllib.loads(path.read_text(encoding="utf-8"))["pending"]
    deliberate = tomllib.loads((suite.HERE / "deliberate.toml").read_text(encoding="utf-8"))["deliberate"]
    groups = args.only or suite.groups()
    failing: dict[str, str] = {}
    now_pass: list[str] = []
    for group in groups:
        for case in suite.load_group(group):
            if case.id in deliberate:
                continue
            differences = {p: compare(case, p) for p in case.parallelisms}
            if differences[1] is not None:
                failing[case.id] = pending.get(case.id) or differences[1]
            elif differences.get(2) is not None:
                key = f"{case.id}@p2"
                failing[key] = pending.get(key) or differences[2]
            for key in (case.id, f"{case.id}@p2"):
                if key in pending and key not in failing:
                    now_pass.append(key)
            status = "ok" if all(d is None for d in differences.values()) else "DIFFERS"
            print(f"{case.id}: {status}", flush=True)
    print("\npending cases that now pass (remove them from pending.toml):")
    print("\n".join(f"  {k}" for k in now_pass) or "  none")
    print("\nfailing cases not in pending.toml:")
    print("\n".join(f"  {k}: {r}" for k, r in failing.items() if k not in pending) or "  none")
    if args.write:
        kept = {k: r for k, r in pending.items() if k.split("@")[0].split(".")[0] not in groups}
        merged = dict(sorted({**kept, **failing}.items()))
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("#")]
        lines += ["[pending]"] + [f"{_toml(k)} = {_toml(_one_line(r))}" for k, r in merged.items()]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 200 else line[:197] + "..."


def _toml(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


if __name__ == "__main__":
    sys.exit(main())
