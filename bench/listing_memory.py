#!/usr/bin/env python3
"""Peak memory of `greenlight watch --once` against a large application listing.

A stand-in for Argo CD's list API serves `--apps` Applications of about `--app-kib` KiB each
(most of it in the fields greenlight never reads: managed fields, inline Helm values, the
summary, the sync result's resource list), honouring `fields=` the way Argo CD's HTTP forwarder
does (only the listed JSON paths are kept; arrays are traversed). Each binary runs
`watch --once` against it, over a scratch git repository, in its own child process, and the
child's peak resident memory (ru_maxrss) is reported. `--no-fields` serves the whole listing
whatever is asked (a proxy that strips the query, or an API without field selection).

    python3 bench/listing_memory.py --binary A=/old/greenlight --binary B=/new/greenlight

Python 3.11 standard library and git only. Exit 0 after a complete run, 2 on a bad flag.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


def application(i: int, kib: int) -> dict:
    filler = "x" * 1024
    return {
        "metadata": {
            "name": f"app-{i:05d}",
            "namespace": "argocd",
            "resourceVersion": str(1000 + i),
            "managedFields": [{"manager": "argocd-controller", "fieldsV1": {"f": filler}}
                              for _ in range(kib // 4)],
        },
        "spec": {
            "project": "default",
            "source": {"repoURL": "https://git.example.com/platform/deploy.git",
                       "path": f"apps/app-{i:05d}", "targetRevision": "main",
                       "helm": {"values": filler * (kib // 4)}},
            "destination": {"server": "https://kubernetes.default.svc", "namespace": "apps"},
            "syncPolicy": {"automated": {"prune": True, "selfHeal": True}},
        },
        "status": {
            "sync": {"status": "Synced", "revision": "0" * 40},
            "health": {"status": "Healthy"},
            "resources": [{"group": "apps", "version": "v1", "kind": "Deployment",
                           "namespace": "apps", "name": f"app-{i:05d}", "status": "Synced"}],
            "summary": {"images": [filler] * (kib // 4)},
            "operationState": {
                "phase": "Succeeded", "startedAt": "2026-12-01T10:00:00Z",
                "finishedAt": "2026-12-01T10:00:05Z",
                "syncResult": {"revision": "0" * 40,
                               "resources": [{"message": filler}] * (kib // 4)},
            },
            "reconciledAt": "2026-12-01T10:00:06Z",
            "resourceHealthSource": "appTree",
        },
    }


def select(value, paths: list[list[str]]):
    """Keep only `paths` (each a list of keys) of `value`, traversing arrays."""
    if isinstance(value, list):
        return [select(v, paths) for v in value]
    if not isinstance(value, dict):
        return value
    if any(len(p) == 0 for p in paths):
        return value
    out = {}
    for key in value:
        sub = [p[1:] for p in paths if p[0] == key]
        if sub:
            out[key] = select(value[key], sub)
    return out


def serve(listing: dict, honour_fields: bool) -> ThreadingHTTPServer:
    whole = json.dumps(listing).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the standard library's name)
            url = urlparse(self.path)
            if url.path != "/api/v1/applications":
                self.send_response(404)
                self.end_headers()
                return
            fields = parse_qs(url.query).get("fields", [""])[0]
            if honour_fields and fields and not fields.startswith("-"):
                body = json.dumps(select(listing, [f.split(".") for f in fields.split(",")])).encode()
            else:
                body = whole
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client refused a body past its bound and closed

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


MEASURE = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print(done.returncode)
print(done.stderr[-400:].replace("\\n", " | "))
"""


def git(*args: str, cwd: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL,
                   env={**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b",
                        "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"})


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--binary", action="append", required=True, metavar="LABEL=PATH")
    p.add_argument("--apps", type=int, default=1500)
    p.add_argument("--app-kib", type=int, default=200)
    p.add_argument("--no-fields", action="store_true")
    a = p.parse_args()
    binaries = []
    for b in a.binary:
        label, _, path = b.partition("=")
        if not path or not os.access(path, os.X_OK):
            print(f"--binary {b!r}: expected LABEL=PATH to an executable", file=sys.stderr)
            return 2
        binaries.append((label, path))
    listing = {"metadata": {"resourceVersion": "1"},
               "items": [application(i, a.app_kib) for i in range(a.apps)]}
    size = len(json.dumps(listing))
    server = serve(listing, not a.no_fields)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    with tempfile.TemporaryDirectory() as tmp:
        work = os.path.join(tmp, "work")
        os.makedirs(work)
        git("init", "-q", "-b", "main", cwd=work)
        with open(os.path.join(work, "README"), "w") as f:
            f.write("deploy\n")
        git("add", ".", cwd=work)
        git("commit", "-q", "-m", "initial", cwd=work)
        git("clone", "-q", "--bare", work, os.path.join(tmp, "origin.git"), cwd=tmp)
        print(f"listing: {a.apps} applications, {size / 2**20:.0f} MiB whole; "
              f"fields= {'ignored' if a.no_fields else 'honoured'}")
        print("| binary | peak RSS (MiB) | exit | last words |")
        print("|---|---|---|---|")
        for label, path in binaries:
            state = os.path.join(tmp, f"{label}.db")
            cmd = [sys.executable, "-c", MEASURE, path, "watch", "--once",
                   "--repo", os.path.join(tmp, "origin.git"), "--argocd-url", url,
                   "--state", state]
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=600).stdout
            rss_kib, code, words = (out.split("\n", 2) + ["", "", ""])[:3]
            print(f"| {label} | {int(rss_kib) / 1024:.0f} | {code} | {words.strip()[-160:]} |")
    server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
