#!/usr/bin/env bash
# Run every benchmark in the build and print its machine-readable lines with the commit, then
# go-telegram's four hot paths for libtgbot (scripts/bench_table.py), also written to
# bench/results.md with the machine, the commit and the date.
set -euo pipefail
build=${1:-build}
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
out=$(mktemp /tmp/tgkit-bench-XXXXXX)
trap 'rm -f "$out"' EXIT
{
    echo "# tgkit benchmarks at $commit, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores"
    for b in "$build"/bench/bench_*; do
        [ -x "$b" ] || continue
        echo "## $(basename "$b")"
        "$b"
    done
} | tee "$out"
python3 "$(dirname "$0")/bench_table.py" "$out" "$(dirname "$0")/../bench/results.md"
