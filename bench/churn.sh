#!/usr/bin/env bash
# A day of churn, two builds side by side: the `churn` example (crates/greenlight/examples/
# churn.rs: the runtime, its SQLite state file and the real judge, in simulated time) built from
# this tree and from OLD (a commit; the example file is copied into its tree, so both run the
# same fleet), run one after the other; each prints, every simulated hour, the state file's size
# and the heap held. See bench/README.md, "A day of churn".
#
#   bench/churn.sh OLD [HOURS] [PER_HOUR]      (defaults 24, 1000)
set -euo pipefail
old=${1:?usage: bench/churn.sh OLD-COMMIT [HOURS] [PER_HOUR]}
hours=${2:-24}
per_hour=${3:-1000}
here=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-/var/tmp/greenlight-target}
work=$(mktemp -d /var/tmp/greenlight-bench-churn.XXXXXX)
trap 'git -C "$here" worktree remove --force "$work/old" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

git -C "$here" worktree add --quiet --detach "$work/old" "$old"
mkdir -p "$work/old/crates/greenlight/examples"
cp "$here/crates/greenlight/examples/churn.rs" "$work/old/crates/greenlight/examples/churn.rs"
for side in old new; do
    tree=$here
    side_target=$target
    # OLD builds in a target directory of its own: cargo does not hash a workspace's path, so
    # both trees' crates have the same names, and in one directory the second tree's build is
    # taken for fresh when its files are older than the first tree's artifacts (it is not
    # built at all, and both sides run the same code).
    [ "$side" = old ] && tree=$work/old && side_target=$target-bench-old
    # The executable cargo names for this tree (cargo does not copy a fresh build to
    # release/examples again).
    exe=$(CARGO_TARGET_DIR=$side_target cargo build --quiet --release --manifest-path "$tree/Cargo.toml" \
        -p greenlight --example churn --message-format=json |
        python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "churn" and m.get("executable"):
        print(m["executable"])')
    cp "$exe" "$work/churn-$side"
done
for side in old new; do
    echo "## $side ($( [ "$side" = old ] && git -C "$here" rev-parse --short "$old" || git -C "$here" rev-parse --short HEAD ))"
    "$work/churn-$side" --hours "$hours" --per-hour "$per_hour"
    echo
done
