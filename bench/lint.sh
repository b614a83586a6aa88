#!/usr/bin/env bash
# Benchmark: `greenlight lint` against checkov over the same manifests, in one run.
# Prints the wall-time ratio, greenlight's MB/s on one core and both peak RSS figures.
# greenlight runs with --include-tests: it reads every file of the corpus, test directories
# too, as when the recorded figures were taken.
# Not part of the test suite.
#
#   bench/lint.sh [DIR]      (default: $GREENLIGHT_CORPUS, else ../shared/corpus/manifests
#                             beside the repository, as the corpus tests look for it)
#
# checkov is installed with pip into a virtualenv when it is not on PATH
# (CHECKOV_VENV, default /var/tmp/greenlight-checkov-venv).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/greenlight-target}"
WANT="${1:-${GREENLIGHT_CORPUS:-../shared/corpus/manifests}}"
if [ ! -d "$WANT" ]; then
  echo "bench/lint.sh: no manifest directory at $WANT; give one: bench/lint.sh DIR (or set GREENLIGHT_CORPUS)" >&2
  exit 2
fi
DIR="$(cd "$WANT" && pwd)"
RUNS="${RUNS:-3}"

command -v /usr/bin/time >/dev/null || { apt-get update -qq && apt-get install -y -qq time; }

echo "== building greenlight (release)" >&2
cargo build --release -q -p greenlight
GL="$CARGO_TARGET_DIR/release/greenlight"

if command -v checkov >/dev/null 2>&1; then
  CHECKOV="$(command -v checkov)"
else
  VENV="${CHECKOV_VENV:-/var/tmp/greenlight-checkov-venv}"
  if [ ! -x "$VENV/bin/checkov" ]; then
    echo "== installing checkov into $VENV (pip install checkov)" >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q checkov
  fi
  CHECKOV="$VENV/bin/checkov"
fi

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# wall seconds and max RSS (KiB) from GNU time -v
field() { grep -F "$2" "$1" | awk -F': ' '{print $2}'; }
wall_s() {
  local t; t="$(field "$1" 'Elapsed (wall clock) time')"
  python3 -c "import sys; p=sys.argv[1].split(':'); print(sum(float(x)*60**i for i,x in enumerate(reversed(p))))" "$t"
}

# Warm the page cache so neither tool pays for the first read.
"$GL" lint --fail-on never --include-tests --format json "$DIR" > "$TMP/gl.json"
BYTES="$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['summary']['bytes'])" "$TMP/gl.json")"
OBJECTS="$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['summary']['objects'])" "$TMP/gl.json")"

echo "== greenlight lint, one core (taskset -c 0), best of $RUNS" >&2
GL_WALL=""; GL_RSS=""
for _ in $(seq "$RUNS"); do
  /usr/bin/time -v -o "$TMP/gl.time" taskset -c 0 "$GL" lint --fail-on never --include-tests --format json "$DIR" > /dev/null
  w="$(wall_s "$TMP/gl.time")"; r="$(field "$TMP/gl.time" 'Maximum resident set size')"
  if [ -z "$GL_WALL" ] || python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)" "$w" "$GL_WALL"; then
    GL_WALL="$w"; GL_RSS="$r"
  fi
done

echo "== checkov -d DIR --framework kubernetes --skip-download --quiet" >&2
set +e
/usr/bin/time -v -o "$TMP/ck.time" "$CHECKOV" -d "$DIR" --framework kubernetes --skip-download --quiet > "$TMP/ck.out" 2> "$TMP/ck.err"
CK_RC=$?
set -e
CK_WALL="$(wall_s "$TMP/ck.time")"; CK_RSS="$(field "$TMP/ck.time" 'Maximum resident set size')"

python3 - "$DIR" "$BYTES" "$OBJECTS" "$GL_WALL" "$GL_RSS" "$CK_WALL" "$CK_RSS" "$CK_RC" "$("$CHECKOV" --version 2>/dev/null | tail -1)" <<'PY'
import sys
d, b, objs, gw, gr, cw, cr, rc, ver = sys.argv[1:]
b, gw, cw = int(b), float(gw), float(cw)
print(f"corpus           {d}")
print(f"bytes linted     {b} ({b/1e6:.1f} MB), {objs} objects")
print(f"greenlight       {gw:.3f} s wall on one core, {b/1e6/gw:.1f} MB/s, peak RSS {int(gr)/1024:.1f} MiB")
print(f"checkov {ver:<8} {cw:.1f} s wall (exit {rc}), peak RSS {int(cr)/1024:.1f} MiB")
print(f"ratio            greenlight is {cw/gw:.0f}x faster than checkov")
print(f"targets          >=100x: {'met' if cw/gw >= 100 else 'MISSED'}; >=20 MB/s: {'met' if b/1e6/gw >= 20 else 'MISSED'}")
PY
