#!/usr/bin/env bash
# Run every libFuzzer target for N seconds each, starting from (and adding to) a scratch copy
# of its committed seed corpus. fuzz/<name>/max_len (first line: a number of bytes, then
# why) is the largest input the target is given: sized for its parser, since libFuzzer's
# default of 4096 bytes never reaches, say, a 16 KiB ClientHello. A target without one stops
# the run.
set -euo pipefail
build=$1
secs=${2:-60}
status=0
for f in "$build"/fuzz/*_fuzzer; do
    [ -x "$f" ] || continue
    name=$(basename "$f" _fuzzer)
    max_len=$(sed -n '1{/^[0-9][0-9]*$/p}' "fuzz/$name/max_len" 2>/dev/null || true)
    if [ -z "$max_len" ]; then
        echo "fuzz: fuzz/$name/max_len is missing or does not start with a number of bytes"
        status=1
        continue
    fi
    work=$(mktemp -d)
    cp -r "fuzz/$name/corpus/." "$work/" 2>/dev/null || true
    echo "fuzz: $name for ${secs}s, inputs up to $max_len bytes"
    if ! "$f" -max_total_time="$secs" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="fuzz/$name/" "$work" 2>&1 | grep -E 'stat::number_of_executed_units|ERROR|SUMMARY'; then
        :
    fi
    # oom-: an input that made the target allocate past -rss_limit_mb (or one malloc past
    # -malloc_limit_mb, which defaults to it): unbounded memory is a failure like a crash.
    # (find, not ls: ls of four globs fails when any one matches nothing, and libFuzzer stops
    # at its first artifact, so an ls test never saw one.)
    found=$(find "fuzz/$name" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' \
        -o -name 'timeout-*' -o -name 'oom-*' \) | head -n 1)
    if [ -n "$found" ]; then
        echo "fuzz: $name found a failing input ($found)"
        status=1
    fi
    rm -rf "$work"
done
exit $status
