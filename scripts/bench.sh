#!/usr/bin/env bash
# Run every benchmark in the build and print its machine-readable lines with the commit.
set -euo pipefail
build=${1:-build}
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "# tgkit benchmarks at $commit, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores"
for b in "$build"/bench/bench_*; do
    [ -x "$b" ] || continue
    echo "## $(basename "$b")"
    "$b"
done
