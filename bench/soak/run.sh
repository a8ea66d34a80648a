#!/usr/bin/env bash
# bench/soak/run.sh proxy|bot [OPTIONS] — a soak: the program runs the load for --minutes
# (default 60), samples the daemon every second and writes samples.csv and summary.txt in
# --out (default bench/results/soak-KIND, with -fleet for a proxy --fleet run); report.py
# then draws the PNG plots and writes report.md with the verdicts. The exit status is the
# verdicts': 0 when all pass. Options after KIND go to the program (--help lists them).
# BUILD (default build) is the build directory; the programs are built if needed.
set -euo pipefail
cd "$(dirname "$0")/../.."
kind=${1:-}
case $kind in
proxy) prog=tgkit_soak_proxy; deps="tgkit_soak_proxy tgproxy" ;;
bot) prog=tgkit_soak_bot; deps="tgkit_soak_bot tgbot-emulator" ;;
*)
    echo "usage: bench/soak/run.sh proxy|bot [--minutes M] [...]   (--help for the options)" >&2
    exit 2
    ;;
esac
shift
build=${BUILD:-build}
out=bench/results/soak-$kind
for a in "$@"; do
    [ "$a" = --fleet ] && out=$out-fleet
    [ "$a" = --webhook ] && out=$out-webhook
done
prev=
for a in "$@"; do
    [ "$prev" = --out ] && out=$a
    prev=$a
done
# Debian's python3 (its python3-matplotlib), not one a version manager put first in PATH.
py=/usr/bin/python3
"$py" -c 'import matplotlib' 2>/dev/null || scripts/deps.sh python3-matplotlib
[ -f "$build/CMakeCache.txt" ] || cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
# shellcheck disable=SC2086
cmake --build "$build" -j "$(nproc)" --target $deps >/dev/null
"$build/bench/soak/$prog" --out "$out" "$@"
"$py" bench/soak/report.py "$out" "$kind"
