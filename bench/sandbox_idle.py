#!/usr/bin/env python3
"""Sandbox fleet benchmark: what the stand-in for Argo CD costs at --apps apps, two binaries
side by side (`greenlight sandbox` of each), in alternating rounds.

Measured for each: from start to every app Healthy (the sandbox's `health ... -> Healthy` lines),
then, with the fleet settled and no client connected, its resident memory (VmRSS, and the peak
VmHWM) and the CPU time it spends (user + system, its own and its git processes', from /proc)
over --idle-seconds of nothing happening, given per idle minute.

Usage:
  python3 bench/sandbox_idle.py --a OLD/greenlight --b NEW/greenlight [--apps 10000] [--idle-seconds 60]

It owns a temporary directory (a bare remote with --apps apps) and the sandboxes, child processes
in their own process groups, ended on success, failure, Ctrl-C or SIGTERM; every wait is
bounded. Python 3.11 standard library and git.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fleet  # noqa: E402
import watch_latency as wl  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of the process so far, and of the children it waited for (the
    git processes it runs)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / TICKS


def memory_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) in KiB."""
    got = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            got[key] = int(value.split()[0])
    return got["VmRSS"], got["VmHWM"]


def one(binary: Path, repo: wl.Repo, args) -> dict:
    began = time.monotonic()
    sandbox, _url = fleet.start_sandbox(binary, repo, args.apps, args.sync_interval, args.verbose)
    try:
        healthy: set[str] = set()

        def settled(text: str) -> bool:
            if text.startswith("app ") and text.endswith("-> Healthy"):
                healthy.add(text.split()[1].rstrip(":"))
            return len(healthy) >= args.apps

        sandbox.lines.wait(f"{args.apps} apps Healthy", settled, args.timeout)
        to_healthy = time.monotonic() - began
        # A moment for the last updates to go out; then nothing happens for the idle window.
        time.sleep(2)
        pid = sandbox.proc.pid
        cpu0 = cpu_seconds(pid)
        time.sleep(args.idle_seconds)
        cpu = cpu_seconds(pid) - cpu0
        rss, hwm = memory_kib(pid)
        return {
            "to_healthy_s": to_healthy,
            "idle_cpu_s_per_min": cpu * 60.0 / args.idle_seconds,
            "rss_mib": rss / 1024,
            "peak_rss_mib": hwm / 1024,
        }
    finally:
        sandbox.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, type=Path, help="the first binary (e.g. the previous build)")
    ap.add_argument("--b", required=True, type=Path, help="the second binary")
    ap.add_argument("--apps", type=int, default=10_000)
    ap.add_argument("--idle-seconds", type=float, default=60.0)
    ap.add_argument("--sync-interval", default="1s", help="the sandbox's --sync-interval (its default)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for the fleet to settle")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    for b in (args.a, args.b):
        if not os.access(b, os.X_OK):
            print(f"sandbox_idle.py: {b} is not an executable binary", file=sys.stderr)
            return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    results: dict[str, list[dict]] = {"a": [], "b": []}
    with tempfile.TemporaryDirectory(prefix="greenlight-sandbox-idle-") as tmp:
        repo = fleet.make_fleet(Path(tmp), args.apps)
        try:
            for r in range(args.rounds):
                for label, binary in (("a", args.a), ("b", args.b)):
                    print(f"round {r + 1}: {label} = {binary}", file=sys.stderr)
                    results[label].append(one(binary, repo, args))
        except wl.BenchError as e:
            print(f"sandbox_idle.py: {e}", file=sys.stderr)
            return 1
    print("| figure | rounds | a | b | b / a |")
    print("|---|---|---|---|---|")
    for key, what in (
        ("to_healthy_s", "start -> every app Healthy (s), median"),
        ("rss_mib", "resident memory, idle (MiB), median"),
        ("peak_rss_mib", "peak resident memory (MiB), median"),
        ("idle_cpu_s_per_min", "CPU per idle minute (s), median"),
    ):
        va = sorted(run[key] for run in results["a"])
        vb = sorted(run[key] for run in results["b"])
        a, b = va[len(va) // 2], vb[len(vb) // 2]
        ratio = f"{b / a:.3f}" if a else "—"
        print(f"| {what} | {len(va)} | {a:.1f} | {b:.1f} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
