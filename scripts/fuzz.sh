#!/usr/bin/env bash
# Run every libFuzzer target for N seconds each, starting from (and adding to) a scratch copy
# of its committed seed corpus. fuzz/<name>/max_len (first line: a number of bytes, then
# why) is the largest input the target is given: sized for its parser, since libFuzzer's
# default of 4096 bytes never reaches, say, a 16 KiB ClientHello. A target without one stops
# the run. FUZZ_JOBS targets run at once (default: the number of cores; each fuzzer uses
# one), each printing its lines when it ends.
set -euo pipefail
build=$1
secs=${2:-60}
jobs=${FUZZ_JOBS:-$(nproc)}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# One target: its summary lines on stdout; exit 1 when it found a failing input.
run_one() {
    local f=$1 name max_len work found
    name=$(basename "$f" _fuzzer)
    max_len=$(sed -n '1{/^[0-9][0-9]*$/p}' "fuzz/$name/max_len" 2>/dev/null || true)
    if [ -z "$max_len" ]; then
        echo "fuzz: fuzz/$name/max_len is missing or does not start with a number of bytes"
        return 1
    fi
    work=$(mktemp -d)
    cp -r "fuzz/$name/corpus/." "$work/" 2>/dev/null || true
    echo "fuzz: $name for ${secs}s, inputs up to $max_len bytes"
    "$f" -max_total_time="$secs" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="fuzz/$name/" "$work" 2>&1 |
        grep -E 'stat::number_of_executed_units|ERROR|SUMMARY' || true
    rm -rf "$work"
    # oom-: an input that made the target allocate past -rss_limit_mb (or one malloc past
    # -malloc_limit_mb, which defaults to it): unbounded memory is a failure like a crash.
    # (find, not ls: ls of four globs fails when any one matches nothing, and libFuzzer stops
    # at its first artifact, so an ls test never saw one.)
    found=$(find "fuzz/$name" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' \
        -o -name 'timeout-*' -o -name 'oom-*' \) | head -n 1)
    if [ -n "$found" ]; then
        echo "fuzz: $name found a failing input ($found)"
        return 1
    fi
    return 0
}

status=0
running=0
pids=()
names=()
# Wait for the oldest running target, print its log, note its status.
reap() {
    local pid=${pids[0]} name=${names[0]}
    if ! wait "$pid"; then
        status=1
    fi
    cat "$logs/$name.log"
    pids=("${pids[@]:1}")
    names=("${names[@]:1}")
    running=$((running - 1))
}
for f in "$build"/fuzz/*_fuzzer; do
    [ -x "$f" ] || continue
    name=$(basename "$f" _fuzzer)
    run_one "$f" > "$logs/$name.log" 2>&1 &
    pids+=($!)
    names+=("$name")
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        reap
    fi
done
while [ "$running" -gt 0 ]; do
    reap
done
exit $status
