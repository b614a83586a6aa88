#!/usr/bin/env python3
"""Big push benchmark: two greenlight binaries, each against a sandbox fleet, receive one push
of --commits commits (a history import, a monorepo merge) whose middle and last commits ask for
a watch each.

Measured for each binary: from the `git push` returning to the arrival of each watch's
`watch_started` event (none within --timeout is reported as such), and the watchdog's peak
resident memory (VmHWM) at the end, with the peaks of its two parts sampled every 50 ms:
anonymous (heap, stacks) and file-backed (the clone's packs it maps, the kernel's to drop). The watchdog finds the push by its fetch interval (default
10 s) or when the sandbox reports the new revision, as with Argo CD.

With --watched N, N of the push's commits (spread evenly) ask for a watch each instead, of the
apps other than the first, in shadow mode: N watches in flight. Once all have started, one more
commit is pushed: a bad image for the first app, in arm mode with a short deadline. Measured
then: push -> all N watches started, and for the bad commit push -> watch started, how late its
FAIL came after its moment (reached + deadline, on the wall clock, to the line's arrival) and
FAIL -> revert pushed. Run with --watched 1 and with --watched 10000 to see whether a verdict's
latency grows with the watches in flight.

Usage:
  python3 bench/big_push.py --a OLD/greenlight --b NEW/greenlight [--commits 100000]
  python3 bench/big_push.py --a OLD/greenlight --b NEW/greenlight --commits 10000 --watched 10000

It owns a temporary directory per binary (a bare remote with --apps apps and a clone that
pushes), the sandbox (B's binary, release) and the watchdog, all child processes in their own
process groups, ended on success, failure, Ctrl-C or SIGTERM; every wait is bounded. Python
3.11 standard library and git.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fleet  # noqa: E402
import watch_latency as wl  # noqa: E402


def history(parent: str, commits: int, asks: dict[int, int] | None = None) -> bytes:
    """A fast-import stream of `commits` commits on top of `parent`: each changes a file outside
    the apps; commit i in `asks` also bumps app asks[i]'s image and asks for its watch (default:
    the middle one app 1, the last one app 0)."""
    if asks is None:
        asks = {commits // 2: 1, commits: 0}
    out = []
    who = "Ann Example <ann@example.com>"
    t = int(time.time()) - commits
    for i in range(1, commits + 1):
        msg = f"import {i}\n"
        files = [(f"history/part{i % 500}.txt", f"{i}\n")]
        if i in asks:
            app = fleet.app_name(asks[i])
            msg = f"bump {app}\n\nNav-Watchdog: app={app} deadline=3600 mode=shadow\n"
            files.append((f"apps/{app}/deploy.yaml", fleet.deployment(app, f"registry.local/web:big-{i}")))
        out.append(f"commit refs/heads/main\nmark :{i}\ncommitter {who} {t + i} +0000\n")
        out.append(f"data {len(msg.encode())}\n{msg}\n")
        out.append(f"from {parent}\n" if i == 1 else f"from :{i - 1}\n")
        for path, body in files:
            out.append(f"M 100644 inline {path}\ndata {len(body.encode())}\n{body}\n")
        out.append("\n")
    return "".join(out).encode()


def history_watched(parent: str, commits: int, watched: int, apps: int) -> bytes:
    """`history` with `watched` of the commits (every commits // watched-th) bumping one of the
    apps 1.. in turn and asking for its watch."""
    step = max(commits // max(watched, 1), 1)
    asks = {step * (k + 1): 1 + k % (apps - 1) for k in range(watched) if step * (k + 1) <= commits}
    if len(asks) != watched:
        raise wl.BenchError(f"{len(asks)} of {watched} watched commits fit in {commits} commits")
    return history(parent, commits, asks)


def count_events(kind: str, n: int):
    """A predicate that holds at the `n`-th `kind` event line it is shown."""
    seen = [0]

    def pred(text: str) -> bool:
        ev = wl.event_of(text)
        if ev is not None and ev["event"] == kind:
            seen[0] += 1
        return seen[0] >= n

    return pred


def peak_rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


class RssSampler:
    """Samples the process's anonymous (heap, stacks) and file-backed (the clone's packs it maps)
    resident memory every 50 ms and keeps the peak of each: VmHWM is their sum's peak, and
    file-backed pages are the kernel's to drop."""

    def __init__(self, pid: int):
        self.pid = pid
        self.peak = {"RssAnon": 0, "RssFile": 0}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.done.wait(0.05):
            try:
                text = Path(f"/proc/{self.pid}/status").read_text()
            except OSError:
                return
            for line in text.splitlines():
                key, _, value = line.partition(":")
                if key in self.peak:
                    self.peak[key] = max(self.peak[key], int(value.split()[0]))

    def stop(self) -> dict:
        self.done.set()
        self.thread.join(timeout=5)
        return self.peak


def one_binary(label: str, binary: Path, args, echo: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"greenlight-bigpush-{label}-") as tmp:
        root = Path(tmp)
        repo = fleet.make_fleet(root, args.apps)
        children = []
        try:
            sandbox, url = fleet.start_sandbox(args.b, repo, args.apps, "1s", echo)
            children.append(sandbox)
            watch = wl.Child(label, [
                str(binary), "watch", "--repo", str(repo.remote), "--argocd-url", url,
                "--state", str(root / "state.db"), "--log-format", "json",
                "--git-author", "bench <bench@bench.test>",
            ], echo)
            children.append(watch)
            watch.lines.wait("watching", lambda t: "watching " in t, 300)
            sampler = RssSampler(watch.proc.pid)
            time.sleep(3)
            parent = wl.git(repo.work, "rev-parse", "HEAD")
            made = time.monotonic()
            stream = (
                history_watched(parent, args.commits, args.watched, args.apps)
                if args.watched
                else history(parent, args.commits)
            )
            subprocess.run(
                ["git", "fast-import", "--quiet"], cwd=repo.work, check=True, input=stream,
            )
            # fast-import moved the branch, not the work tree: a later commit starts from it.
            wl.git(repo.work, "reset", "-q", "--hard", "main")
            tip = wl.git(repo.work, "rev-parse", "main")
            middle = wl.git(repo.work, "rev-parse", f"main~{args.commits - args.commits // 2}")
            made = time.monotonic() - made
            pushed = time.monotonic()
            wl.git(repo.work, "push", "-q", "origin", "main")
            push_took = time.monotonic() - pushed
            pushed = time.monotonic()
            if args.watched:
                return watched_round(watch, repo, sampler, args, made, push_took, pushed)
            starts = {}
            for name, sha in [("middle", middle), ("tip", tip)]:
                try:
                    remaining = args.timeout - (time.monotonic() - pushed)
                    _, stamp, _ = watch.lines.wait(
                        f"watch_started of {sha[:8]}", wl.is_event("watch_started", sha),
                        max(remaining, 1),
                    )
                    starts[name] = stamp - pushed
                except wl.BenchError:
                    starts[name] = None
            # The arrived commits are written after the watches start: a moment for it.
            time.sleep(5)
            peaks = sampler.stop()
            return {
                "peak_anon_kib": peaks["RssAnon"],
                "peak_file_kib": peaks["RssFile"],
                "made_s": made,
                "push_s": push_took,
                "started_s": starts,
                "peak_rss_kib": peak_rss_kib(watch.proc.pid),
            }
        finally:
            for c in reversed(children):
                c.stop()


def watched_round(watch, repo, sampler, args, made: float, push_took: float, pushed: float) -> dict:
    """--watched: all N watches started, then the bad commit's verdict and revert."""
    from_start = len(watch.lines.snapshot())
    try:
        _, stamp, _ = watch.lines.wait(
            f"{args.watched} watches started", count_events("watch_started", args.watched),
            args.timeout,
        )
        all_started = stamp - pushed
    except wl.BenchError:
        all_started = None
        kinds: dict[str, int] = {}
        for _, _, text in watch.lines.snapshot():
            ev = wl.event_of(text)
            if ev is not None:
                kinds[ev["event"]] = kinds.get(ev["event"], 0) + 1
        print(f"not all {args.watched} watches started within {args.timeout:.0f} s; events: {kinds}",
              file=sys.stderr, flush=True)
    app = fleet.app_name(0)
    path = repo.work / "apps" / app / "deploy.yaml"
    path.write_text(fleet.deployment(app, "registry.local/web:9.9.9-does-not-exist"))
    wl.git(repo.work, "add", "-A")
    wl.git(repo.work, "commit", "-q", "-m",
           f"bad {app}\n\nNav-Watchdog: app={app} deadline={args.bad_deadline} mode=arm")
    bad = wl.git(repo.work, "rev-parse", "HEAD")
    bad_pushed = time.monotonic()
    wl.git(repo.work, "push", "-q", "origin", "main")
    bound = args.timeout + args.bad_deadline
    _, started, _ = watch.lines.wait("the bad commit's watch", wl.is_event("watch_started", bad), bound, from_start)
    _, reached_stamp, reached_text = watch.lines.wait("the bad commit reached", wl.is_event("reached", bad), bound, from_start)
    failed_at, failed_stamp, _ = watch.lines.wait(
        "the bad commit failed", wl.is_event("failed", bad), bound, from_start,
        fail=wl.terminal_other_than("failed", bad),
    )
    _, reverted_stamp, _ = watch.lines.wait(
        "the bad commit's revert", wl.is_event("revert_pushed", bad), bound, failed_at + 1,
        fail=wl.terminal_other_than("revert_pushed", bad),
    )
    reached_at = wl.parse_time(wl.event_of(reached_text)["time"])
    peaks = sampler.stop()
    return {
        "made_s": made,
        "push_s": push_took,
        "all_started_s": all_started,
        "bad_started_s": started - bad_pushed,
        "fail_late_s": failed_stamp + wl.WALL_OFFSET - (reached_at + args.bad_deadline),
        "fail_to_revert_s": reverted_stamp - failed_stamp,
        "bad_push_to_revert_s": reverted_stamp - bad_pushed,
        "peak_anon_kib": peaks["RssAnon"],
        "peak_file_kib": peaks["RssFile"],
        "peak_rss_kib": peak_rss_kib(watch.proc.pid),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--a", type=Path, required=True, help="the first binary (say, before)")
    p.add_argument("--b", type=Path, required=True, help="the second binary (its sandbox runs both)")
    p.add_argument("--commits", type=int, default=100_000)
    p.add_argument("--apps", type=int, default=20)
    p.add_argument("--watched", type=int, default=0,
                   help="commits of the push that ask for a watch; then a bad commit (see above)")
    p.add_argument("--bad-deadline", type=int, default=20, help="the bad commit's deadline, seconds")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for a watch")
    p.add_argument("--echo", action="store_true", help="print the children's lines")
    args = p.parse_args()

    def stop(signum, _frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    results = {}
    for label, binary in [("a", args.a), ("b", args.b)]:
        results[label] = one_binary(label, binary, args, args.echo)
        print(label, json.dumps(results[label]), flush=True)

    def fmt(v):
        return f"none within {args.timeout:.0f} s" if v is None else f"{v:.1f} s"

    if args.watched:
        print(f"\n{args.commits} commits in one push, {args.watched} of them watched, {args.apps} apps; "
              f"then one bad commit (deadline {args.bad_deadline} s, arm)")
        print("| figure | A | B |\n|---|---|---|")
        for key, what in [
            ("all_started_s", f"push -> all {args.watched} watches started"),
            ("bad_started_s", "bad commit: push -> watch started"),
            ("fail_late_s", "bad commit: FAIL after its moment"),
            ("fail_to_revert_s", "bad commit: FAIL -> revert pushed"),
            ("bad_push_to_revert_s", "bad commit: push -> revert pushed"),
        ]:
            a, b = results["a"][key], results["b"][key]
            print(f"| {what} | {fmt(a)} | {fmt(b)} |")
        a, b = results["a"]["peak_rss_kib"], results["b"]["peak_rss_kib"]
        print(f"| watchdog peak RSS (MiB) | {a / 1024:.0f} | {b / 1024:.0f} |")
        return 0

    print(f"\n{args.commits} commits in one push, {args.apps} apps")
    print(f"| figure | A | B |\n|---|---|---|")
    for name in ["middle", "tip"]:
        a, b = results["a"]["started_s"][name], results["b"]["started_s"][name]
        print(f"| push -> watch started ({name} commit) | {fmt(a)} | {fmt(b)} |")
    a, b = results["a"]["peak_rss_kib"], results["b"]["peak_rss_kib"]
    print(f"| watchdog peak RSS (MiB) | {a / 1024:.0f} | {b / 1024:.0f} |")
    for key, what in [("peak_anon_kib", "anonymous: heap and stacks"), ("peak_file_kib", "file-backed: the mapped packs")]:
        a, b = results["a"][key], results["b"][key]
        print(f"| of it, peak {what} (MiB, sampled) | {a / 1024:.0f} | {b / 1024:.0f} |")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except wl.BenchError as e:
        print(f"big_push: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
