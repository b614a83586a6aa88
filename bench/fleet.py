#!/usr/bin/env python3
"""Fleet benchmark: two greenlight binaries side by side against one sandbox fleet.

Measured for each binary, in alternating rounds so that both meet the same machine load:

  Healthy -> streak       one commit asks for --watches watches; their apps roll out together
                          and turn Healthy in the sandbox within milliseconds of each other. Per
                          app: the arrival of the watch's `healthy_streak_started` event minus the
                          arrival of the sandbox's `app <name>: health Progressing -> Healthy`
                          line (printed just before it publishes the update on its stream).
                          Split by the event's own time (when the watchdog took the update in,
                          ms resolution): Healthy -> taken in (the stand-in's delivery, the
                          socket, the watchdog's reading and parsing) and taken in -> printed
                          (the watchdog's queue, judge, store write and output); and by the
                          proxy, which stamps the stream line that first says the app is
                          Healthy as it passes: Healthy -> through the proxy is the stand-in's,
                          through the proxy -> printed the watchdog's (with the socket).
  idle bytes per minute   then, those watches in flight (healthy, their stability windows open),
                          the bytes both ways between the watchdog and the Argo CD API over
                          --idle-seconds of nothing happening, and the HTTP requests among them;
                          a counting TCP proxy sits between the two.
  window end -> CONFIRMED per watch: the arrival of `confirmed` minus its due moment
                          (`healthy_streak_started`'s time + --stable-for), on the wall clock.
  push -> watch started   last, from the `git push` returning to the arrival of the watch's
                          `watch_started` event, for --pushes commits each changing one app with
                          a trailer (the sandbox compares a new commit within its
                          --sync-interval, as Argo CD with its own git webhook does).

Every line of every child is stamped with time.monotonic() as it arrives (watch_latency.py's
reader), so the figures compare processes on one clock.

It owns a temporary directory (a bare remote with --apps apps and a clone that pushes), the
release `greenlight sandbox` and the watchdogs, all child processes in their own process groups,
ended on success, failure, Ctrl-C or SIGTERM; every wait is bounded. Python 3.11 standard
library and git.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import urllib.request
import os
import signal
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import watch_latency as wl  # noqa: E402  (the Lines/Child/git helpers)


class CountingProxy:
    """A TCP proxy on a loopback port that counts the bytes each way and the requests."""

    def __init__(self, upstream: tuple[str, int]):
        self.upstream = upstream
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(256)
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.up = 0
        self.down = 0
        self.requests = 0
        # While recording: (arrival stamp, the connection's number, bytes) of what the API sent.
        self.recording: list[tuple[float, int, bytes]] | None = None
        self.connections = 0
        threading.Thread(target=self.accept, daemon=True).start()

    def record(self, on: bool) -> list[tuple[float, int, bytes]]:
        with self.lock:
            got = self.recording or []
            self.recording = [] if on else None
            return got

    def reset(self) -> None:
        with self.lock:
            self.up = self.down = self.requests = 0

    def counts(self) -> tuple[int, int, int]:
        with self.lock:
            return self.up, self.down, self.requests

    def accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            self.connections += 1
            n = self.connections
            threading.Thread(target=self.pipe, args=(client, server, True, n), daemon=True).start()
            threading.Thread(target=self.pipe, args=(server, client, False, n), daemon=True).start()

    def pipe(self, src: socket.socket, dst: socket.socket, upward: bool, conn: int) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                with self.lock:
                    if upward:
                        self.up += len(data)
                        self.requests += data.count(b" HTTP/1.1\r\n")
                    else:
                        self.down += len(data)
                        if self.recording is not None:
                            self.recording.append((time.monotonic(), conn, data))
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


HOOK_SECRET = "fleet-bench-secret"


def healthy_on_the_wire(recorded: list[tuple[float, int, bytes]]) -> dict[str, float]:
    """Per app, when the first stream line saying it is Healthy after one saying Progressing had
    passed the proxy whole (the rollout's turn, not the Healthy of the revision before)."""
    seen: dict[str, float] = {}
    progressing: set[str] = set()
    pending: dict[int, bytes] = {}
    for stamp, conn, data in recorded:
        buf = pending.get(conn, b"") + data
        *lines, rest = buf.split(b"\n")
        pending[conn] = rest
        for line in lines:
            if not line.startswith(b"data:"):
                continue
            try:
                app = json.loads(line[5:])["result"]["application"]
            except (ValueError, KeyError, TypeError):
                continue
            name = app.get("metadata", {}).get("name")
            health = app.get("status", {}).get("health", {}).get("status")
            if health == "Progressing":
                progressing.add(name)
            elif name in progressing and health == "Healthy" and name not in seen:
                seen[name] = stamp
    return seen


def post_push(url: str, sha: str) -> None:
    """A GitHub push delivery for `sha` on main, signed as GitHub signs it."""
    body = json.dumps({"ref": "refs/heads/main", "after": sha}).encode()
    sig = hmac.new(HOOK_SECRET.encode(), body, hashlib.sha256).hexdigest()
    req = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "X-GitHub-Event": "push",
        "X-GitHub-Delivery": sha, "X-Hub-Signature-256": f"sha256={sig}",
    })
    with urllib.request.urlopen(req, timeout=10) as r:
        if r.status != 202:
            raise wl.BenchError(f"POST {url}: {r.status}")


def app_name(i: int) -> str:
    return f"app{i:05d}"


def deployment(name: str, image: str) -> str:
    return wl.deployment(image).replace("web", name)


def make_fleet(root: Path, apps: int) -> wl.Repo:
    repo = wl.Repo(root)
    for i in range(apps):
        path = repo.work / "apps" / app_name(i) / "deploy.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(deployment(app_name(i), "registry.local/web:1.0.0"))
    wl.git(repo.work, "add", "-A")
    wl.git(repo.work, "commit", "-q", "-m", f"{apps} apps")
    wl.git(repo.work, "push", "-q", "origin", "HEAD:main")
    return repo


def start_sandbox(binary: Path, repo: wl.Repo, apps: int, sync_interval: str, echo: bool) -> tuple[wl.Child, str]:
    """The release sandbox serving `apps` apps of the fleet in `repo`, and its URL once it listens."""
    argv = [
        str(binary), "sandbox", "--repo", str(repo.remote), "--listen",
        "127.0.0.1:0", "--sync-interval", sync_interval, "--rollout-time", "2s",
    ]
    for i in range(apps):
        argv += ["--app", f"{app_name(i)}=apps/{app_name(i)}"]
    sandbox = wl.Child("sandbox", argv, echo)
    try:
        _, _, line = sandbox.lines.wait(
            "the sandbox's URL", lambda t: "sandbox listening on " in t, 300
        )
    except BaseException:
        sandbox.stop()
        raise
    return sandbox, line.split("sandbox listening on ", 1)[1].split()[0]


def commit_apps(repo: wl.Repo, apps: list[int], tag: str, deadline: int = 3600) -> str:
    trailers = []
    for i in apps:
        name = app_name(i)
        path = repo.work / "apps" / name / "deploy.yaml"
        path.write_text(deployment(name, f"registry.local/web:{tag}"))
        trailers.append(f"Nav-Watchdog: app={name} deadline={deadline} mode=shadow")
    message = f"bench {tag}\n\n" + "\n".join(trailers)
    wl.git(repo.work, "add", "-A")
    wl.git(repo.work, "commit", "-q", "-m", message)
    wl.git(repo.work, "push", "-q", "origin", "HEAD:main")
    return wl.git(repo.work, "rev-parse", "HEAD")


def events(lines: wl.Lines, kind: str, commit: str) -> list[tuple[float, dict]]:
    out = []
    for stamp, _, text in lines.snapshot():
        ev = wl.event_of(text)
        if ev and ev["event"] == kind and ev.get("commit") == commit:
            out.append((stamp, ev))
    return out


def wait_count(lines: wl.Lines, kind: str, commit: str, n: int, timeout: float) -> None:
    end = time.monotonic() + timeout
    while len(events(lines, kind, commit)) < n:
        if time.monotonic() > end:
            raise wl.BenchError(
                f"{n} {kind} events for {commit[:8]}: {len(events(lines, kind, commit))} within {timeout:.0f}s\n{lines.tail()}"
            )
        time.sleep(0.1)


def one_binary(label: str, binary: Path, args, echo: bool, round_no: int) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"greenlight-fleet-{label}-") as tmp:
        root = Path(tmp)
        repo = make_fleet(root, args.apps)
        children = []
        try:
            sandbox, url = start_sandbox(args.sandbox_binary, repo, args.apps, args.sandbox_sync_interval, echo)
            children.append(sandbox)
            host, port = url.removeprefix("http://").rsplit(":", 1)
            proxy = CountingProxy((host, int(port)))
            argv = [
                str(binary), "watch", "--repo", str(repo.remote),
                "--argocd-url", f"http://127.0.0.1:{proxy.port}",
                "--state", str(root / "state.db"),
                "--stable-for", f"{round(args.stable_for * 1000)}ms",
                "--log-format", "json", "--git-author", "bench <bench@bench.test>",
            ]
            hook = None
            if label in args.hooks_for:
                probe = socket.socket()
                probe.bind(("127.0.0.1", 0))
                listen = f"127.0.0.1:{probe.getsockname()[1]}"
                probe.close()
                (root / "hook-secret").write_text(HOOK_SECRET + "\n")
                argv += ["--listen", listen, "--github-webhook-secret-file", str(root / "hook-secret")]
                hook = f"http://{listen}/hooks/github"
            watch = wl.Child(label, argv, echo)
            children.append(watch)
            watch.lines.wait("watching", lambda t: "watching " in t, 300)
            # Let the start settle: its listing, the stream's burst.
            time.sleep(5)
            # The burst: one commit asks for --watches watches; their apps roll out together
            # and turn Healthy within milliseconds of each other in the sandbox.
            burst = list(range(args.watches))
            proxy.record(True)
            sha = commit_apps(repo, burst, f"burst-{round_no}")
            wait_count(watch.lines, "healthy_streak_started", sha, len(burst), 300)
            on_wire = healthy_on_the_wire(proxy.record(False))
            healthy_at = {}
            for stamp, _, text in sandbox.lines.snapshot():
                if ": health Progressing -> Healthy" in text and text.startswith("app "):
                    healthy_at[text.split()[1].rstrip(":")] = stamp
            streaks = []
            wire = []
            after_wire = []
            received = []
            printed = []
            streak_due = {}
            for stamp, ev in events(watch.lines, "healthy_streak_started", sha):
                # The event's time is the moment the watchdog took the update in: the split
                # between the stand-in's delivery and the watchdog's own work (ms resolution).
                taken_in = wl.parse_time(ev["time"])
                if ev["app"] in healthy_at:
                    streaks.append(stamp - healthy_at[ev["app"]])
                    received.append(taken_in - (wl.WALL_OFFSET + healthy_at[ev["app"]]))
                    if ev["app"] in on_wire:
                        wire.append(on_wire[ev["app"]] - healthy_at[ev["app"]])
                if ev["app"] in on_wire:
                    after_wire.append(stamp - on_wire[ev["app"]])
                printed.append(wl.WALL_OFFSET + stamp - taken_in)
                streak_due[ev["app"]] = taken_in + args.stable_for
            # Idle: the watches in flight, their windows still open, nothing happening.
            time.sleep(2)
            proxy.reset()
            time.sleep(args.idle_seconds)
            up, down, requests = proxy.counts()
            per_min = 60.0 / args.idle_seconds
            wait_count(watch.lines, "confirmed", sha, len(burst), args.stable_for + 120)
            confirms = [
                wl.WALL_OFFSET + stamp - streak_due[ev["app"]]
                for stamp, ev in events(watch.lines, "confirmed", sha)
            ]
            # Pushes, one at a time: from the push to the watch's start.
            starts = []
            for p in range(args.pushes):
                sha = commit_apps(repo, [args.watches + p], f"push-{round_no}-{p}")
                pushed = time.monotonic()
                if hook:
                    post_push(hook, sha)
                _, stamp, _ = watch.lines.wait(
                    f"watch_started of {sha[:8]}", wl.is_event("watch_started", sha), 120
                )
                starts.append(stamp - pushed)
            status = Path(f"/proc/{watch.proc.pid}/status").read_text()
            hwm = next(int(l.split()[1]) for l in status.splitlines() if l.startswith("VmHWM:"))
            return {
                "watchdog_peak_rss_mib": hwm / 1024,
                "push_to_watch_started_s": starts,
                "streak_after_healthy_s": streaks,
                "streak_received_after_healthy_s": received,
                "streak_on_wire_after_healthy_s": wire,
                "streak_printed_after_wire_s": after_wire,
                "streak_printed_after_received_s": printed,
                "confirmed_after_window_s": confirms,
                "idle_bytes_per_min": (up + down) * per_min,
                "idle_requests_per_min": requests * per_min,
            }
        finally:
            for c in reversed(children):
                c.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, type=Path, help="the first binary (e.g. the previous build)")
    ap.add_argument("--b", required=True, type=Path, help="the second binary")
    ap.add_argument("--sandbox-binary", type=Path, help="the sandbox's binary (default: --b)")
    ap.add_argument("--apps", type=int, default=1000)
    ap.add_argument("--watches", type=int, default=200)
    ap.add_argument("--pushes", type=int, default=5)
    ap.add_argument("--idle-seconds", type=float, default=60.0)
    ap.add_argument("--stable-for", type=float, default=0.0,
                    help="seconds (default: the idle window plus 20 s)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--sandbox-sync-interval", default="1s")
    ap.add_argument("--hooks-for", default="", help="a, b or ab: those binaries also get a GitHub push webhook after each push (they must know --github-webhook-secret-file)")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args()
    args.sandbox_binary = args.sandbox_binary or args.b
    args.stable_for = args.stable_for or args.idle_seconds + 20
    for b in (args.a, args.b, args.sandbox_binary):
        if not os.access(b, os.X_OK):
            print(f"fleet.py: {b} is not an executable binary", file=sys.stderr)
            return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    results: dict[str, list[dict]] = {"a": [], "b": []}
    try:
        for r in range(args.rounds):
            for label, binary in (("a", args.a), ("b", args.b)):
                print(f"round {r + 1}: {label} = {binary}", file=sys.stderr)
                results[label].append(one_binary(label, binary, args, args.verbose, r))
    except wl.BenchError as e:
        print(f"fleet.py: {e}", file=sys.stderr)
        return 1

    def values(label, key):
        return [v for run in results[label] for v in (run[key] if isinstance(run[key], list) else [run[key]])]

    print("| figure | n | a | b | b / a |")
    print("|---|---|---|---|---|")
    for key, what, scale in (
        ("push_to_watch_started_s", "push -> watch started, median (ms)", 1000.0),
        ("streak_after_healthy_s", "Healthy -> streak started, p50 (ms)", 1000.0),
        ("streak_after_healthy_s", "Healthy -> streak started, p99 (ms)", 1000.0),
        ("streak_on_wire_after_healthy_s", "  of it, Healthy -> update through the proxy, p50 (ms)", 1000.0),
        ("streak_on_wire_after_healthy_s", "  of it, Healthy -> update through the proxy, p99 (ms)", 1000.0),
        ("streak_printed_after_wire_s", "  of it, through the proxy -> event printed, p50 (ms)", 1000.0),
        ("streak_printed_after_wire_s", "  of it, through the proxy -> event printed, p99 (ms)", 1000.0),
        ("streak_received_after_healthy_s", "  of it, Healthy -> update taken in, p50 (ms)", 1000.0),
        ("streak_received_after_healthy_s", "  of it, Healthy -> update taken in, p99 (ms)", 1000.0),
        ("streak_printed_after_received_s", "  of it, taken in -> event printed, p50 (ms)", 1000.0),
        ("streak_printed_after_received_s", "  of it, taken in -> event printed, p99 (ms)", 1000.0),
        ("confirmed_after_window_s", "window end -> CONFIRMED, p50 (ms)", 1000.0),
        ("confirmed_after_window_s", "window end -> CONFIRMED, p99 (ms)", 1000.0),
        ("idle_bytes_per_min", "idle bytes per minute", 1.0),
        ("watchdog_peak_rss_mib", "watchdog peak RSS (MiB), median", 1.0),
        ("idle_requests_per_min", "idle requests per minute", 1.0),
    ):
        va, vb = values("a", key), values("b", key)
        if not va or not vb:
            continue
        pick = (lambda v: wl.percentile(v, 99)) if "p99" in what else statistics.median
        a, b = pick(va), pick(vb)
        ratio = f"{b / a:.3f}" if a else "—"
        print(f"| {what} | {len(va)} | {a * scale:.1f} | {b * scale:.1f} | {ratio} |")
    if args.json_out:
        args.json_out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
