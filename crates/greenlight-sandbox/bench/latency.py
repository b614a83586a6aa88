#!/usr/bin/env python3
# Latency of the sandbox binary, measured from outside over real git and HTTP:
#   push -> the Succeeded update on the stream, and how late the timer-driven Healthy update
#   arrives after the rollout time. Usage: bench/latency.py <path to greenlight> [commits]
import json, os, re, subprocess, sys, threading, time, urllib.request, tempfile
B = sys.argv[1]; N = int(sys.argv[2]) if len(sys.argv) > 2 else 10
env = dict(os.environ, GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@b", GIT_COMMITTER_NAME="a", GIT_COMMITTER_EMAIL="a@b")
d = tempfile.mkdtemp()
def git(*a, cwd=d): return subprocess.run(["git", *a], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()
git("init", "-q", "--bare", "-b", "main", "origin.git"); git("init", "-q", "-b", "main", "work")
w = os.path.join(d, "work"); os.makedirs(os.path.join(w, "apps/web"))
def deploy(tag):
    open(os.path.join(w, "apps/web/d.yaml"), "w").write(f"apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec:\n  template:\n    spec:\n      containers: [{{name: web, image: 'nginx:{tag}'}}]\n")
    git("add", "-A", cwd=w); git("commit", "-qm", tag, cwd=w); git("push", "-q", os.path.join(d, "origin.git"), "HEAD:main", cwd=w)
    return git("rev-parse", "HEAD", cwd=w)
deploy("1.0")
SYNC, ROLL = 0.2, 0.5
p = subprocess.Popen([B, "sandbox", "--repo", os.path.join(d, "origin.git"), "--listen", "127.0.0.1:0", "--app", "web=apps/web", "--sync-interval", f"{int(SYNC*1000)}ms", "--rollout-time", f"{int(ROLL*1000)}ms"], stderr=subprocess.PIPE, text=True)
url = None
for line in p.stderr:
    m = re.search(r"sandbox listening on (http://\S+)", line)
    if m: url = m.group(1); break
threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
events = []
def reader():
    with urllib.request.urlopen(url + "/api/v1/stream/applications?name=web") as r:
        for line in r:
            a = json.loads(line)["result"]["application"]; s = a["status"]
            events.append((time.monotonic(), s["sync"].get("revision"), s["sync"]["status"], s.get("operationState", {}).get("phase"), s["health"]["status"], s.get("operationState", {}).get("syncResult", {}).get("revision")))
threading.Thread(target=reader, daemon=True).start()
def wait(cond, t=20):
    end = time.monotonic() + t
    while time.monotonic() < end:
        for e in list(events):
            if cond(e): return e
        time.sleep(0.005)
    raise SystemExit("timeout")
wait(lambda e: e[4] == "Healthy")
push_to_synced, health_lag = [], []
for i in range(N):
    t0 = time.monotonic(); sha = deploy(f"1.{i+1}")
    done = wait(lambda e: e[3] == "Succeeded" and e[5] == sha)
    healthy = wait(lambda e: e[0] > done[0] and e[4] == "Healthy" and e[1] == sha)
    push_to_synced.append(done[0] - t0); health_lag.append(healthy[0] - done[0] - ROLL)
p.terminate(); p.wait()
q = lambda xs: f"median {sorted(xs)[len(xs)//2]*1000:.0f} ms, max {max(xs)*1000:.0f} ms"
print(f"{N} commits, sync-interval {SYNC}s, rollout-time {ROLL}s")
print(f"push -> Succeeded event on the stream: {q(push_to_synced)}")
print(f"Healthy event after rollout time elapsed (timer lateness): {q(health_lag)}")
print(f"exit code on SIGTERM: {p.returncode}")
import shutil; shutil.rmtree(d, ignore_errors=True)
