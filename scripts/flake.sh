#!/usr/bin/env bash
# scripts/flake.sh N [BUILD] — run the whole ctest suite N times while two CPU burners keep
# the machine busy, and print how often each test failed. A flaky test is a bug in the test
# or in the code: fix it at its cause (wait for a state, virtual time, ports the kernel
# picks, deadlines sized from what the test measures), never by retrying.
#
# Environment:
#   FLAKE_BURNERS   busy processes beside the suite (default 2; 0 for none)
#   FLAKE_JOBS      ctest -j (default: the number of cores)
#   FLAKE_REGEX     only tests matching this ctest -R regex (default: all)
#   FLAKE_OUT       where each failing run's ctest log is kept (default $BUILD/flake)
#
# Exit status: 0 when no test failed in any run, 1 otherwise, 2 on a usage error.
set -euo pipefail
n=${1:-}
build=${2:-build}
case $n in
'' | *[!0-9]* | 0)
    echo "usage: scripts/flake.sh N [BUILD]   (N runs of the suite, N >= 1)" >&2
    exit 2
    ;;
esac
if [ ! -f "$build/CTestTestfile.cmake" ]; then
    echo "flake: $build has no ctest suite: build it first (make build, or cmake --build $build)" >&2
    exit 2
fi
burners=${FLAKE_BURNERS:-2}
jobs=${FLAKE_JOBS:-$(nproc)}
regex=${FLAKE_REGEX:-}
out=${FLAKE_OUT:-$build/flake}
mkdir -p "$out"
build=$(cd "$build" && pwd)

# The burners: each spins for at most the time the whole run could take (bounded), and is
# stopped by its PID when the runs are over — never by name, which could match others.
pids=()
stop_burners() {
    local p
    for p in "${pids[@]}"; do
        kill "$p" 2>/dev/null || true
    done
    for p in "${pids[@]}"; do
        wait "$p" 2>/dev/null || true
    done
    pids=()
}
trap stop_burners EXIT INT TERM
limit=$((n * 3600))
for ((i = 0; i < burners; i++)); do
    ( end=$((SECONDS + limit)); while [ "$SECONDS" -lt "$end" ]; do :; done ) &
    pids+=($!)
done

declare -A fails=()
total_failed_runs=0
for ((run = 1; run <= n; run++)); do
    started=$(date +%s)
    args=(--output-on-failure --no-tests=error -j "$jobs")
    [ -n "$regex" ] && args+=(-R "$regex")
    failed_list="$build/Testing/Temporary/LastTestsFailed.log"
    rm -f "$failed_list"
    if (cd "$build" && ctest "${args[@]}") >"$out/run-$run.log" 2>&1; then
        verdict="passed"
    else
        verdict="FAILED"
        total_failed_runs=$((total_failed_runs + 1))
    fi
    names=()
    if [ "$verdict" = FAILED ] && [ -f "$failed_list" ]; then
        while IFS=: read -r _ name; do
            [ -n "$name" ] || continue
            names+=("$name")
            fails[$name]=$((${fails[$name]:-0} + 1))
        done <"$failed_list"
    else
        rm -f "$out/run-$run.log"
    fi
    echo "flake: run $run/$n $verdict in $(($(date +%s) - started)) s${names:+: ${names[*]}}"
done
stop_burners

echo
echo "flake: $n runs beside $burners CPU burners, ctest -j $jobs"
if [ "${#fails[@]}" -eq 0 ] && [ "$total_failed_runs" -eq 0 ]; then
    echo "flake: every test passed in every run (0 failures)"
    exit 0
fi
printf '%-48s %s\n' "test" "failed runs"
for name in "${!fails[@]}"; do
    printf '%d\t%s\n' "${fails[$name]}" "$name"
done | sort -k1,1nr -k2 | while IFS=$'\t' read -r count name; do
    printf '%-48s %d/%d\n' "$name" "$count" "$n"
done
echo "flake: logs of the failing runs are in $out/"
exit 1
