#!/usr/bin/env python3
"""Watchdog latency benchmark: how long after Argo CD reports the status that decides a verdict
does `greenlight watch` act on it (it is meant to be event-driven, with no fixed polling delay).

It owns a temporary directory (a bare git remote and a clone that pushes), the release
`greenlight sandbox` and `greenlight watch` child processes, and the figures it prints. It never
touches anything outside its temporary directory and the cargo target directory, and it never
leaves a child running: every child is its own process group, ended on success, failure,
Ctrl-C or SIGTERM, and every wait has a bound.

Measured, per good commit (shadow trailer, the watch at its default --fetch-interval 10s, the
sandbox's rollout long enough that the app turns Healthy only after the watch has started the
commit's watch):
  1. status -> judge: arrival of the watch's `healthy_streak_started` event minus arrival of the
     sandbox line `app web: health Progressing -> Healthy` for that commit's rollout. The sandbox
     prints that line just before it publishes the update on its application stream.
  2. timer precision: `confirmed` minus (`healthy_streak_started` + --stable-for), from the
     events' own `time` fields (millisecond precision) and from arrival stamps.
Per failing commit (an image tag containing `does-not-exist`, shadow, a short deadline):
  3. deadline precision: the verdict's `finished_at` minus (`reached_at` + deadline), from
     `greenlight status --json`, and the same from arrival stamps of `reached` and `failed`.

Every line of both children is stamped with time.monotonic() by a reader thread as it arrives,
so (1) compares two processes on one clock. The timers are also measured from the due moment
itself: the verdict line's arrival, on the wall clock (the monotonic stamp plus one offset taken
at start), minus the moment greenlight computed (`healthy_streak_started`'s time + --stable-for;
`reached_at` + deadline). greenlight's times are whole milliseconds of the same wall clock, so
this figure is how late the verdict reached a reader after its moment. Python 3.11 standard library only.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
APP = "web"
APP_PATH = "apps/web"
TERMINAL_EVENTS = {
    "confirmed",
    "failed",
    "not_reached",
    "unwatchable",
    "inconclusive",
    "revert_pushed",
    "revert_adopted",
    "revert_failed",
    "directive_rejected",
}


class BenchError(Exception):
    """A run that could not be measured: says what was waited for and what was seen."""


# ---------------------------------------------------------------------------------------------
# Durations, timestamps, statistics


def parse_duration(text: str) -> float:
    """`10s`, `500ms`, `2m`, or bare seconds, as greenlight reads them; returns seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration; use e.g. 10s, 500ms, 2m or 90"
        )
    value = float(m.group(1))
    unit = m.group(2) or "s"
    return value * {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[unit]


def duration_flag(seconds: float) -> str:
    """Seconds as a flag value greenlight accepts (whole milliseconds)."""
    return f"{round(seconds * 1000)}ms"


# time.time() - time.monotonic(), taken once: a monotonic arrival stamp plus this is the wall
# clock time of that arrival, comparable with the times greenlight writes in its events.
WALL_OFFSET = time.time() - time.monotonic()


def parse_time(text: str) -> float:
    """RFC 3339 (`2026-12-02T10:33:15.250Z`) to seconds since the epoch."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile: an observed value, never an interpolation."""
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def summary(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "median_ms": statistics.median(values) * 1000,
        "p95_ms": percentile(values, 95) * 1000,
        "max_ms": max(values) * 1000,
        "min_ms": min(values) * 1000,
    }


# ---------------------------------------------------------------------------------------------
# Child processes whose lines are stamped on arrival


class Lines:
    """Lines from one or more pipes, each stamped with time.monotonic() when it was read."""

    def __init__(self, label: str, echo: bool):
        self.label = label
        self.echo = echo
        self.items: list[tuple[float, str, str]] = []  # (stamp, stream, text)
        self.cond = threading.Condition()
        self.closed = 0

    def pump(self, pipe, stream: str) -> None:
        for raw in iter(pipe.readline, b""):
            stamp = time.monotonic()
            text = raw.decode("utf-8", "replace").rstrip("\n")
            with self.cond:
                self.items.append((stamp, stream, text))
                self.cond.notify_all()
            if self.echo:
                print(f"{stamp:12.3f} {self.label:>7}| {text}", file=sys.stderr)
        with self.cond:
            self.closed += 1
            self.cond.notify_all()

    def wait(self, what: str, pred, timeout: float, start: int = 0, fail=None):
        """The first line from index `start` on that satisfies `pred`: (index, stamp, text).

        `fail(text)` returning a message ends the wait at once with that message."""
        end = time.monotonic() + timeout
        i = start
        with self.cond:
            while True:
                while i < len(self.items):
                    stamp, _, text = self.items[i]
                    if pred(text):
                        return i, stamp, text
                    if fail is not None:
                        why = fail(text)
                        if why:
                            raise BenchError(f"{what}: {why}\n{self.tail()}")
                    i += 1
                left = end - time.monotonic()
                if left <= 0:
                    raise BenchError(
                        f"{what}: not seen within {timeout:.0f}s\n{self.tail()}"
                    )
                if self.closed >= 2:
                    raise BenchError(f"{what}: the {self.label} process ended\n{self.tail()}")
                self.cond.wait(left)

    def tail(self, n: int = 25) -> str:
        with self.cond:
            rows = self.items[-n:]
        return "\n".join(f"  {self.label}| {t}" for _, _, t in rows)

    def snapshot(self) -> list[tuple[float, str, str]]:
        with self.cond:
            return list(self.items)


class Child:
    """A child in its own process group, so that ending it also ends the git it runs."""

    def __init__(self, label: str, argv: list[str], echo: bool, env: dict | None = None):
        self.label = label
        self.lines = Lines(label, echo)
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=env,
        )
        for pipe, name in ((self.proc.stdout, "stdout"), (self.proc.stderr, "stderr")):
            threading.Thread(
                target=self.lines.pump, args=(pipe, name), daemon=True
            ).start()

    def stop(self) -> None:
        """SIGTERM to the group, then SIGKILL if it has not exited within 5 s."""
        if self.proc.poll() is not None:
            return
        for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                return
            # The group is signalled only while its leader is not yet reaped, so its id cannot
            # belong to anyone else; the signal reaches any git the daemon is running too.
            try:
                self.proc.wait(timeout=grace)
                return
            except subprocess.TimeoutExpired:
                continue


# ---------------------------------------------------------------------------------------------
# Git


GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_AUTHOR_NAME": "Bench Human",
    "GIT_AUTHOR_EMAIL": "human@bench.test",
    "GIT_COMMITTER_NAME": "Bench Human",
    "GIT_COMMITTER_EMAIL": "human@bench.test",
}


def git(cwd: Path, *args: str) -> str:
    env = dict(os.environ, **GIT_ENV)
    try:
        out = subprocess.run(
            ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        raise BenchError(f"git {' '.join(args)} in {cwd}: no answer within 60s")
    if out.returncode != 0:
        raise BenchError(f"git {' '.join(args)} in {cwd} failed: {out.stderr.strip()}")
    return out.stdout.strip()


def deployment(image: str) -> str:
    return (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: apps\n"
        "spec:\n  replicas: 1\n  selector:\n    matchLabels: {app: web}\n  template:\n"
        "    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n"
        f"        - name: main\n          image: {image}\n"
    )


class Repo:
    """A bare remote (what the sandbox and the watchdog read) and a clone that pushes."""

    def __init__(self, root: Path):
        self.remote = root / "origin.git"
        self.work = root / "work"
        self.remote.mkdir()
        git(self.remote, "init", "-q", "--bare", "--initial-branch=main")
        git(root, "clone", "-q", str(self.remote), "work")
        git(self.work, "checkout", "-q", "-B", "main")

    def deploy(self, image: str, message: str) -> str:
        path = self.work / APP_PATH / "deploy.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(deployment(image))
        git(self.work, "add", "-A")
        git(self.work, "commit", "-q", "-m", message)
        git(self.work, "push", "-q", "origin", "HEAD:main")
        return git(self.work, "rev-parse", "HEAD")


# ---------------------------------------------------------------------------------------------
# The benchmark


def event_of(text: str) -> dict | None:
    """A watch JSON event line (one with `event`), else None."""
    if not text.startswith("{"):
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) and "event" in obj else None


def is_event(kind: str, commit: str):
    def pred(text: str) -> bool:
        ev = event_of(text)
        return ev is not None and ev["event"] == kind and ev.get("commit") == commit

    return pred


def terminal_other_than(kind: str, commit: str):
    def fail(text: str) -> str | None:
        ev = event_of(text)
        if ev and ev.get("commit") == commit and ev["event"] in TERMINAL_EVENTS - {kind}:
            return f"expected {kind}, got {ev['event']}: {ev.get('message')}"
        return None

    return fail


def find_event(lines: Lines, kind: str, commit: str) -> tuple[float, dict] | None:
    for stamp, _, text in lines.snapshot():
        ev = event_of(text)
        if ev and ev["event"] == kind and ev.get("commit") == commit:
            return stamp, ev
    return None


def sandbox_healthy_after_sync(sandbox: Lines, sha: str) -> tuple[float, str] | None:
    """The sandbox's `health Progressing -> Healthy` line for the rollout of `sha`: the first
    such line after `operation Succeeded at <sha7>`, before any later operation of the app."""
    synced = f"app {APP}: operation Succeeded at {sha[:7]}"
    seen_sync = False
    for stamp, _, text in sandbox.snapshot():
        if not seen_sync:
            seen_sync = text.startswith(synced)
            continue
        if text.startswith(f"app {APP}: operation "):
            return None  # a later rollout began before this one turned Healthy
        if text.startswith(f"app {APP}: health Progressing -> Healthy"):
            return stamp, text
    return None


def status_json(binary: Path, state: Path) -> dict:
    try:
        out = subprocess.run(
            [str(binary), "status", "--json", "--state", str(state)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired:
        raise BenchError("greenlight status --json: no answer within 30s")
    if out.returncode != 0:
        raise BenchError(f"greenlight status --json failed: {out.stderr.strip()}")
    return json.loads(out.stdout)


def build(target_dir: Path) -> Path:
    env = dict(os.environ, CARGO_TARGET_DIR=str(target_dir))
    argv = ["cargo", "build", "--release", "-p", "greenlight", "--bin", "greenlight"]
    print(f"building: CARGO_TARGET_DIR={target_dir} {' '.join(argv)}", file=sys.stderr)
    try:
        out = subprocess.run(argv, cwd=REPO_ROOT, env=env, timeout=3600)
    except subprocess.TimeoutExpired:
        raise BenchError("cargo build --release did not finish within 60 minutes")
    if out.returncode != 0:
        raise BenchError(f"cargo build --release failed (exit {out.returncode})")
    binary = target_dir / "release" / "greenlight"
    if not binary.is_file():
        raise BenchError(f"{binary}: the build finished but the binary is not there")
    return binary


def run_good(args, repo: Repo, watch: Child, sandbox: Child, i: int) -> dict:
    image = f"registry.local/web:1.{i + 1}.0"
    trailer = f"Nav-Watchdog: app={APP} deadline={duration_flag(args.good_deadline)} mode=shadow"
    sha = repo.deploy(image, f"web: {image}\n\n{trailer}")
    bound = args.fetch_interval + args.rollout_time + args.stable_for + 60
    watch.lines.wait(
        f"good commit {i + 1} ({sha[:8]}) confirmed",
        is_event("confirmed", sha),
        bound,
        fail=terminal_other_than("confirmed", sha),
    )
    started = find_event(watch.lines, "watch_started", sha)
    streak = find_event(watch.lines, "healthy_streak_started", sha)
    confirmed = find_event(watch.lines, "confirmed", sha)
    broken = find_event(watch.lines, "healthy_streak_broken", sha)
    healthy = sandbox_healthy_after_sync(sandbox.lines, sha)
    if started is None or streak is None or confirmed is None:
        raise BenchError(f"commit {sha[:8]}: confirmed without watch_started/healthy_streak_started")
    row = {
        "commit": sha,
        "kind": "good",
        "streak_broken": broken is not None,
        "timer_json_s": parse_time(confirmed[1]["time"])
        - parse_time(streak[1]["time"])
        - args.stable_for,
        "timer_arrival_s": confirmed[0] - streak[0] - args.stable_for,
        "timer_due_s": confirmed[0] + WALL_OFFSET - parse_time(streak[1]["time"]) - args.stable_for,
        "latency_s": None,
        "excluded": None,
    }
    if healthy is None:
        row["excluded"] = "no sandbox Progressing -> Healthy line for this rollout"
    elif started[0] >= healthy[0]:
        # The watch learnt of the commit (by its fetch) only after the app was Healthy: what
        # decided then was the fetch, not the stream update; not a status -> judge sample.
        row["excluded"] = "the watch started after the app turned Healthy (raise --rollout-time)"
    elif broken is not None:
        row["excluded"] = "the healthy streak broke and restarted"
    else:
        row["latency_s"] = streak[0] - healthy[0]
        since_start = healthy[0] - started[0]
        row["healthy_after_watch_start_s"] = since_start
        # The watch started on a fetch tick; its next tick after the Healthy line is when this
        # same daemon, were it polling, would first have seen the app Healthy.
        row["next_fetch_tick_s"] = args.fetch_interval - since_start % args.fetch_interval
    return row


def run_failing(args, repo: Repo, watch: Child, binary: Path, state: Path, j: int) -> dict:
    image = f"registry.local/web:9.{j}.0-does-not-exist"
    trailer = f"Nav-Watchdog: app={APP} deadline={duration_flag(args.fail_deadline)} mode=shadow"
    sha = repo.deploy(image, f"web: {image}\n\n{trailer}")
    bound = args.fetch_interval + args.fail_deadline + 60
    watch.lines.wait(
        f"failing commit {j + 1} ({sha[:8]}) failed",
        is_event("failed", sha),
        bound,
        fail=terminal_other_than("failed", sha),
    )
    st = status_json(binary, state)
    w = next((w for w in st.get("watches", []) if w.get("commit") == sha), None)
    if w is None or w.get("state") != "FAIL" or not w.get("reached_at") or not w.get("finished_at"):
        raise BenchError(f"commit {sha[:8]}: status --json shows {w!r}, expected a FAIL with reached_at")
    reached = find_event(watch.lines, "reached", sha)
    failed = find_event(watch.lines, "failed", sha)
    deadline = float(w["deadline_s"])
    return {
        "commit": sha,
        "kind": "failing",
        "deadline_s": deadline,
        "overshoot_status_s": parse_time(w["finished_at"]) - parse_time(w["reached_at"]) - deadline,
        "overshoot_arrival_s": (failed[0] - reached[0] - deadline) if reached and failed else None,
        "overshoot_due_s": (failed[0] + WALL_OFFSET - parse_time(w["reached_at"]) - deadline)
        if failed
        else None,
        "reason": w.get("reason"),
    }


def fmt_ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1000:9.1f}"


def report(args, good: list[dict], failing: list[dict]) -> dict:
    lat = [r["latency_s"] for r in good if r["latency_s"] is not None]
    tj = [r["timer_json_s"] for r in good]
    ta = [r["timer_arrival_s"] for r in good]
    fs = [r["overshoot_status_s"] for r in failing]
    fa = [r["overshoot_arrival_s"] for r in failing if r["overshoot_arrival_s"] is not None]
    td = [r["timer_due_s"] for r in good]
    fd = [r["overshoot_due_s"] for r in failing if r["overshoot_due_s"] is not None]

    print()
    print("per commit (ms)")
    print(f"  {'commit':<10} {'kind':<8} {'status->judge':>13} {'next fetch':>10} {'timer(json)':>11} "
          f"{'timer(arr)':>10} {'deadline(st)':>12} {'deadline(arr)':>13}  note")
    for r in good:
        print(f"  {r['commit'][:10]:<10} good     {fmt_ms(r['latency_s']):>13} "
              f"{fmt_ms(r.get('next_fetch_tick_s')):>10} "
              f"{fmt_ms(r['timer_json_s']):>11} {fmt_ms(r['timer_arrival_s']):>10} "
              f"{'-':>12} {'-':>13}  {r['excluded'] or ''}")
    for r in failing:
        print(f"  {r['commit'][:10]:<10} failing  {'-':>13} {'-':>10} {'-':>11} {'-':>10} "
              f"{fmt_ms(r['overshoot_status_s']):>12} {fmt_ms(r['overshoot_arrival_s']):>13}")
    print("  (next fetch: how long after the Healthy line the daemon's own next fetch tick came)")

    rows = [
        ("status -> judge (healthy_streak_started - sandbox Healthy line, arrival)", lat),
        ("next fetch tick after the Healthy line (what polling would have waited)",
         [r["next_fetch_tick_s"] for r in good if r["latency_s"] is not None]),
        ("stability timer: confirmed - (streak + stable-for), event times", tj),
        ("stability timer: confirmed - (streak + stable-for), arrival", ta),
        ("stability timer: confirmed arrival - its due moment, wall clock", td),
        ("deadline timer: finished_at - (reached_at + deadline), status --json", fs),
        ("deadline timer: failed - (reached + deadline), arrival", fa),
        ("deadline timer: failed arrival - its due moment, wall clock", fd),
    ]
    print()
    print(f"  {'measure':<72} {'n':>3} {'median':>9} {'p95':>9} {'max':>9}  (ms)")
    out = {}
    for name, values in rows:
        s = summary(values)
        out[name] = s
        if s["n"] == 0:
            print(f"  {name:<72} {0:>3} {'-':>9} {'-':>9} {'-':>9}")
            continue
        print(f"  {name:<72} {s['n']:>3} {s['median_ms']:9.1f} {s['p95_ms']:9.1f} {s['max_ms']:9.1f}")

    fetch_ms = args.fetch_interval * 1000
    print()
    if lat:
        med = statistics.median(lat) * 1000
        print(f"  --fetch-interval {fetch_ms:.0f} ms: status -> judge median {med:.1f} ms = "
              f"{med / fetch_ms:.4f} of the interval")
        print(f"  a watchdog polling every {fetch_ms:.0f} ms would add on average {fetch_ms / 2:.0f} ms "
              f"(half the interval; up to {fetch_ms:.0f} ms): "
              f"{(fetch_ms / 2) / med if med > 0 else float('inf'):.0f}x the measured median")
    else:
        print("  no status -> judge sample: see the notes per commit")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(
        description="Measure greenlight watch's status -> judge latency and timer precision "
        "against the sandbox. Not part of the test suite."
    )
    ap.add_argument("--runs", type=int, default=8, help="good commits, in sequence (default 8)")
    ap.add_argument("--failing", type=int, default=3,
                    help="failing commits (image tag with does-not-exist), after the good ones (default 3)")
    ap.add_argument("--fetch-interval", type=parse_duration, default=parse_duration("10s"),
                    help="the watch's --fetch-interval (default 10s, the watch's own default)")
    ap.add_argument("--rollout-time", type=parse_duration, default=parse_duration("12s"),
                    help="the sandbox's --rollout-time; must exceed the fetch interval (default 12s)")
    ap.add_argument("--sync-interval", type=parse_duration, default=parse_duration("500ms"),
                    help="the sandbox's --sync-interval (default 500ms)")
    ap.add_argument("--stable-for", type=parse_duration, default=parse_duration("5s"),
                    help="the watch's --stable-for (default 5s)")
    ap.add_argument("--good-deadline", type=parse_duration, default=parse_duration("120s"),
                    help="the trailer deadline of good commits (default 120s)")
    ap.add_argument("--fail-deadline", type=parse_duration, default=parse_duration("5s"),
                    help="the trailer deadline of failing commits (default 5s)")
    ap.add_argument("--binary", type=Path, help="use this greenlight binary; skip the build")
    ap.add_argument("--json-out", type=Path, help="also write every figure to this JSON file")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--verbose", action="store_true", help="echo both children's lines with their stamps")
    args = ap.parse_args()
    if args.runs < 1 or args.failing < 0:
        ap.error("--runs must be at least 1 and --failing at least 0")
    if args.rollout_time <= args.fetch_interval:
        ap.error("--rollout-time must exceed --fetch-interval, or the watch may learn of a "
                 "commit only after its app is Healthy and nothing event-driven is measured")

    # Ctrl-C, SIGTERM and SIGHUP end the run through the finally below. SIGINT is installed
    # too: a shell that starts the script in the background leaves it ignored.
    def stop_signal(signum, _frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop_signal)

    children: list[Child] = []
    root = Path(tempfile.mkdtemp(prefix="greenlight-watch-latency-"))
    try:
        binary = args.binary or build(
            Path(os.environ.get("CARGO_TARGET_DIR", "/var/tmp/greenlight-target"))
        )
        repo = Repo(root)
        repo.deploy("registry.local/web:1.0.0", "initial deploy")

        sandbox = Child("sandbox", [
            str(binary), "sandbox", "--repo", str(repo.remote), "--listen", "127.0.0.1:0",
            "--app", f"{APP}={APP_PATH}",
            "--sync-interval", duration_flag(args.sync_interval),
            "--rollout-time", duration_flag(args.rollout_time),
        ], args.verbose)
        children.append(sandbox)
        _, _, line = sandbox.lines.wait(
            "sandbox listening", lambda t: t.startswith("sandbox listening on "), 60)
        url = line.split("sandbox listening on ", 1)[1].strip()
        sandbox.lines.wait(
            "initial rollout Healthy",
            lambda t: t.startswith(f"app {APP}: health Progressing -> Healthy"),
            args.rollout_time + 60,
        )

        state = root / "state" / "greenlight.db"
        watch = Child("watch", [
            str(binary), "watch", "--repo", str(repo.remote), "--argocd-url", url,
            "--state", str(state), "--stable-for", duration_flag(args.stable_for),
            "--fetch-interval", duration_flag(args.fetch_interval), "--log-format", "json",
        ], args.verbose)
        children.append(watch)
        watch.lines.wait("watching line", lambda t: t.startswith("watching "), 60)
        watch.lines.wait(
            "stream connected",
            lambda t: "application stream connected" in t,
            60,
        )

        print(f"sandbox {url}, rollout {args.rollout_time:g}s, sync every {args.sync_interval:g}s; "
              f"watch fetch every {args.fetch_interval:g}s, stable-for {args.stable_for:g}s",
              file=sys.stderr)
        good, failing = [], []
        for i in range(args.runs):
            row = run_good(args, repo, watch, sandbox, i)
            good.append(row)
            print(f"good {i + 1}/{args.runs} {row['commit'][:8]}: status->judge "
                  f"{fmt_ms(row['latency_s']).strip()} ms {row['excluded'] or ''}", file=sys.stderr)
        for j in range(args.failing):
            row = run_failing(args, repo, watch, binary, state, j)
            failing.append(row)
            print(f"failing {j + 1}/{args.failing} {row['commit'][:8]}: verdict "
                  f"{fmt_ms(row['overshoot_status_s']).strip()} ms after reach + deadline",
                  file=sys.stderr)

        figures = report(args, good, failing)
        if args.json_out:
            args.json_out.write_text(json.dumps({
                "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                "commits": good + failing,
                "summary": figures,
            }, indent=2))
        return 0
    except BenchError as e:
        print(f"watch_latency: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        print(f"watch_latency: interrupted ({e or 'SIGINT'}); stopping the children", file=sys.stderr)
        return 130
    finally:
        # A second Ctrl-C must not cut the clean-up short: every wait in it is bounded.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        for child in reversed(children):
            child.stop()
        if args.keep:
            print(f"kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
