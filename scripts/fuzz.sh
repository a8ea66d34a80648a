#!/usr/bin/env bash
# Run every libFuzzer target for N seconds each, starting from (and adding to) a scratch copy
# of its committed seed corpus.
set -euo pipefail
build=$1
secs=${2:-60}
status=0
for f in "$build"/fuzz/*_fuzzer; do
    [ -x "$f" ] || continue
    name=$(basename "$f" _fuzzer)
    work=$(mktemp -d)
    cp -r "fuzz/$name/corpus/." "$work/" 2>/dev/null || true
    echo "fuzz: $name for ${secs}s"
    if ! "$f" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="fuzz/$name/" "$work" 2>&1 | grep -E 'stat::number_of_executed_units|ERROR|SUMMARY'; then
        :
    fi
    if ls "fuzz/$name"/crash-* "fuzz/$name"/leak-* "fuzz/$name"/timeout-* >/dev/null 2>&1; then
        echo "fuzz: $name found a failing input (see fuzz/$name/)"
        status=1
    fi
    rm -rf "$work"
done
exit $status
