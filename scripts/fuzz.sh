#!/usr/bin/env bash
# Run every libFuzzer target for N seconds each, starting from (and adding to) a scratch copy
# of its committed seed corpus. fuzz/<name>/max_len (first line: a number of bytes, then
# why) is the largest input the target is given: sized for its parser, since libFuzzer's
# default of 4096 bytes never reaches, say, a 16 KiB ClientHello. A target without one stops
# the run. FUZZ_JOBS targets run at once (default: the number of cores; each fuzzer uses
# one), each printing its lines when it ends.
#
# The long run (`make fuzz-long`) sets, besides the seconds:
#   FUZZ_TARGETS  names to run (space-separated; default every built target)
#   FUZZ_REPORT   a Markdown file to write: per target executions, coverage at start and end,
#                 corpus size before and after, findings (fuzz/RESULTS.md)
#   FUZZ_MERGE=1  add to fuzz/<name>/corpus the inputs of the run that reach new coverage,
#                 minimized (libFuzzer -merge=1), so the committed corpus keeps what it found
set -euo pipefail
build=$1
secs=${2:-60}
jobs=${FUZZ_JOBS:-$(nproc)}
targets=${FUZZ_TARGETS:-}
report=${FUZZ_REPORT:-}
merge=${FUZZ_MERGE:-0}
logs=$(mktemp -d)
# The report's "run" column: the day, and the commit checked out when the run started (the
# binaries' when they were built from this tree; a commit made during a long run must not
# relabel the rows it is measuring).
run_at="$(date -u +%Y-%m-%d) $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
trap 'rm -rf "$logs"' EXIT

# The number in "cov: N" of the first (INITED) or last status line libFuzzer printed.
cov_of() {
    { grep -E '^#[0-9]+' "$1" | grep -oE 'cov: [0-9]+' | sed 's/cov: //' | "$2" -n 1; } || true
}

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
    local before after execs
    before=$(find "fuzz/$name/corpus" -type f 2>/dev/null | wc -l)
    echo "fuzz: $name for ${secs}s, inputs up to $max_len bytes"
    "$f" -max_total_time="$secs" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="fuzz/$name/" "$work" >"$logs/$name.full" 2>&1 || true
    grep -E 'stat::number_of_executed_units|ERROR|SUMMARY' "$logs/$name.full" || true
    after=$before
    if [ "$merge" = 1 ]; then
        # -merge=1 adds to the committed corpus only the inputs that reach new coverage,
        # minimized; the hand-made seeds stay as they are.
        mkdir -p "fuzz/$name/corpus"
        if ! "$f" -merge=1 -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
            "fuzz/$name/corpus" "$work" >"$logs/$name.merge" 2>&1; then
            echo "fuzz: $name: merging the corpus failed; the committed corpus is unchanged"
            tail -n 5 "$logs/$name.merge"
        fi
        after=$(find "fuzz/$name/corpus" -type f | wc -l)
    fi
    rm -rf "$work"
    # oom-: an input that made the target allocate past -rss_limit_mb (or one malloc past
    # -malloc_limit_mb, which defaults to it): unbounded memory is a failure like a crash.
    # (find, not ls: ls of four globs fails when any one matches nothing, and libFuzzer stops
    # at its first artifact, so an ls test never saw one.)
    found=$(find "fuzz/$name" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' \
        -o -name 'timeout-*' -o -name 'oom-*' \) | head -n 1)
    execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$logs/$name.full")
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "${execs:-0}" \
        "$(cov_of "$logs/$name.full" head)" "$(cov_of "$logs/$name.full" tail)" \
        "$before" "$after" "${found:-none}" >"$logs/$name.row"
    if [ -n "$found" ]; then
        echo "fuzz: $name found a failing input ($found)"
        return 1
    fi
    return 0
}

# The table in $report, rewritten after every target that ends (a long run stopped half-way
# keeps what it measured). Rows of targets not run this time stay as they were, so the table
# can be filled over several runs; each row says when and on which commit it was measured.
write_report() {
    [ -n "$report" ] || return 0
    local when=$run_at rows row name execs c0 c1 b a found line
    rows=$(mktemp)
    for row in "$logs"/*.row; do
        [ -f "$row" ] || continue
        IFS=$'\t' read -r name execs c0 c1 b a found <"$row"
        echo "| $name | $secs | $execs | ${c0:-?} | ${c1:-?} | $b | $a | $found | $when |" >>"$rows"
    done
    if [ -f "$report" ]; then
        grep -E '^\| [a-z0-9_]+ \| [0-9]' "$report" | while IFS= read -r line; do
            name=$(echo "$line" | cut -d'|' -f2 | tr -d ' ')
            grep -q "^| $name |" "$rows" || echo "$line"
        done >>"$rows" || true
    fi
    {
        echo "# Fuzzing results"
        echo
        echo "Written by \`make fuzz-long\` (scripts/fuzz.sh with FUZZ_REPORT): each target run from its"
        echo "committed corpus with the ASan+UBSan build, FUZZ_JOBS at once. Coverage is libFuzzer's"
        echo "\`cov:\` (edges) once the corpus was loaded and at the end; the corpus is counted in files"
        echo "before the run and after the inputs reaching new coverage were merged into it. A finding"
        echo "names its artifact; its fix commit and regression input are listed under the table."
        echo
        echo "| target | seconds | executions | cov at start | cov at end | corpus before | corpus after | findings | run |"
        echo "|---|---|---|---|---|---|---|---|---|"
        sort "$rows"
        if [ -f "$report" ] && grep -q '^## Findings' "$report"; then
            echo
            sed -n '/^## Findings/,$p' "$report"
        fi
    } >"$report.new"
    mv "$report.new" "$report"
    rm -f "$rows"
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
    write_report
    pids=("${pids[@]:1}")
    names=("${names[@]:1}")
    running=$((running - 1))
}
# FUZZ_TARGETS run in the order given (most exposed first, say); each must have been built.
files=()
if [ -n "$targets" ]; then
    for name in $targets; do
        if [ ! -x "$build/fuzz/${name}_fuzzer" ]; then
            echo "fuzz: $name is not a fuzz target built in $build/fuzz" >&2
            exit 1
        fi
        files+=("$build/fuzz/${name}_fuzzer")
    done
else
    files=("$build"/fuzz/*_fuzzer)
fi
for f in "${files[@]}"; do
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
[ -z "$report" ] || echo "fuzz: wrote $report"

exit $status
