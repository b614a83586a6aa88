#!/usr/bin/env bash
# The repository reads the judge asks (ancestry, a new commit's data and changed paths), in
# process against a git process each, on a generated 50,000-commit history; whole processes,
# run in turn (A B A B …), the median of each, per question. See bench/README.md.
#
#   bench/reads.sh [ROUNDS]        (default 5)
set -euo pipefail
rounds=${1:-5}
here=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-/var/tmp/greenlight-target}
work=${READS_BENCH_DIR:-/var/tmp/greenlight-bench-reads}

CARGO_TARGET_DIR=$target cargo build --quiet --release --manifest-path "$here/Cargo.toml" \
    -p greenlight-git --example reads
reads=$target/release/examples/reads
if [ ! -d "$work/clone" ]; then
    rm -rf "$work"
    "$reads" make "$work" 50000
fi

ms() { date +%s%N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

printf '%-10s %12s %12s %10s\n' question "in process" "git process" speedup
# kind, questions asked in process, questions asked of git (each run).
for spec in "near 20000 200" "far 20000 200" "far-walk 200 200" "far-moving 2000 200" \
    "unrelated 20000 200" "commits 2000 200"; do
    set -- $spec
    kind=$1 n_in=$2 n_git=$3
    a=() b=()
    for _ in $(seq "$rounds"); do
        t0=$(ms); "$reads" ask "$work" in-process "$kind" "$n_in"; t1=$(ms)
        "$reads" ask "$work" git "$kind" "$n_git"; t2=$(ms)
        a+=($(( (t1 - t0) / n_in ))) b+=($(( (t2 - t1) / n_git )))
    done
    ma=$(printf '%s\n' "${a[@]}" | median) mb=$(printf '%s\n' "${b[@]}" | median)
    awk -v k="$kind" -v a="$ma" -v b="$mb" \
        'BEGIN { printf "%-10s %9.1f µs %9.1f µs %9.0f×\n", k, a / 1000, b / 1000, b / a }'
done
