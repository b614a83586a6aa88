#!/usr/bin/env python3
"""Two greenlight binaries on the watch latency benchmark, in one run: `watch_latency.py` for
binary A, then B, then A, then B … (`--rounds`), so that both meet the same machine load, and
then the medians of every figure side by side with the ratio B / A.

Use it to check that a change to the runtime did not make the watchdog slower to act: build the
old commit's release binary in a worktree, the new one in the clone, and compare. A ratio below
1 means B acted sooner. Python 3.11 standard library only; it runs nothing but the benchmark.

    python3 bench/watch_latency_compare.py --a OLD/greenlight --b NEW/greenlight --rounds 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Per-commit fields of watch_latency.py's --json-out, and what they measure (seconds).
FIGURES = [
    ("latency_s", "status -> judge (arrival)"),
    ("timer_json_s", "stability timer, event times"),
    ("timer_arrival_s", "stability timer, arrival"),
    ("timer_due_s", "stability timer, after its moment"),
    ("overshoot_status_s", "deadline timer, status --json"),
    ("overshoot_arrival_s", "deadline timer, arrival"),
    ("overshoot_due_s", "deadline timer, after its moment"),
]


def run(binary: Path, out: Path, extra: list[str]) -> dict:
    cmd = [sys.executable, str(HERE / "watch_latency.py"), "--binary", str(binary),
           "--json-out", str(out), *extra]
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"watch_latency_compare: {binary} failed (exit {done.returncode})")
    return json.loads(out.read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", type=Path, required=True, help="the baseline binary")
    ap.add_argument("--b", type=Path, required=True, help="the binary under test")
    ap.add_argument("--rounds", type=int, default=2, help="A/B pairs (default 2)")
    ap.add_argument("--runs", type=int, default=6, help="good commits per benchmark run (default 6)")
    ap.add_argument("--failing", type=int, default=2, help="failing commits per run (default 2)")
    args = ap.parse_args()
    for b in (args.a, args.b):
        if not b.is_file():
            ap.error(f"{b}: no such binary")
    extra = ["--runs", str(args.runs), "--failing", str(args.failing)]
    values: dict[str, dict[str, list[float]]] = {"A": {}, "B": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for side, binary in (("A", args.a), ("B", args.b)):
                doc = run(binary, Path(tmp) / f"{side}{r}.json", extra)
                for row in doc["commits"]:
                    if row.get("excluded"):
                        continue
                    for key, _ in FIGURES:
                        v = row.get(key)
                        if v is not None:
                            values[side].setdefault(key, []).append(v)
    print(f"{'figure (ms)':<34} {'n A':>4} {'median A':>9} {'n B':>4} {'median B':>9} {'B / A':>7}")
    for key, name in FIGURES:
        a, b = values["A"].get(key, []), values["B"].get(key, [])
        if not a or not b:
            print(f"{name:<34} {len(a):>4} {'-':>9} {len(b):>4} {'-':>9} {'-':>7}")
            continue
        ma, mb = statistics.median(a) * 1000, statistics.median(b) * 1000
        ratio = f"{mb / ma:7.2f}" if abs(ma) > 1e-9 else f"{'-':>7}"
        print(f"{name:<34} {len(a):>4} {ma:9.1f} {len(b):>4} {mb:9.1f} {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
