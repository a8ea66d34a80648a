#!/bin/sh
# bench/proxy/breakdown.sh [BUILD_DIR]: where a handshake's cost goes, for the plain epoll
# relay (the floor), dd and FakeTLS, in issue 30's scenario (handshake + one 64-byte round
# trip, then the connection stays open and silent). Three passes of bench_proxy_breakdown:
#
#   1. time:      CPU, allocations and the client's wall clock per handshake, and the close
#   2. strace:    system calls by kind per handshake (strace -c -f on each child)
#   3. callgrind: user-space instructions per handshake and phase (valgrind's callgrind;
#                 the children are followed across fork, each writes its own file; the
#                 phases are the engine's event handlers, inclusive, divided by the
#                 handshakes the child served). Valgrind hides SHA-NI and AVX-512 from the
#                 program, so OpenSSL's SHA-256 runs its portable code there: HMAC counts
#                 are higher than the instructions a native run executes.
#
# Environment: TGKIT_BENCH_HS (default 400; 200 for callgrind) handshakes per path;
# TGKIT_BENCH_MSS_CLAMP ("off" or a size) overrides the proxies' [defense] mss-clamp.
set -eu
B=${1:-build}
BIN=$B/bench/bench_proxy_breakdown
[ -x "$BIN" ] || { echo "breakdown: $BIN not built (cmake --build $B --target bench_proxy_breakdown)" >&2; exit 1; }
N=${TGKIT_BENCH_HS:-400}
echo "== time ($N handshakes per path)"
TGKIT_BENCH_HS=$N TGKIT_BENCH_BREAKDOWN=time "$BIN"
echo "== system calls per handshake ($N per path)"
TGKIT_BENCH_HS=$N TGKIT_BENCH_BREAKDOWN=strace "$BIN"
command -v valgrind >/dev/null || { echo "breakdown: no valgrind, instructions skipped" >&2; exit 0; }
D=$(mktemp -d /tmp/tgkit-cg-XXXXXX)
trap 'rm -rf "$D"' EXIT
NC=${TGKIT_BENCH_HS:-200}
echo "== user-space instructions per handshake ($NC per path, callgrind)"
TGKIT_BENCH_HS=$NC TGKIT_BENCH_BREAKDOWN=callgrind valgrind -q --tool=callgrind \
    --callgrind-out-file="$D/cg.%p" "$BIN" >"$D/children" 2>"$D/valgrind.log" ||
    { cat "$D/valgrind.log" >&2; exit 1; }
# phase = inclusive instructions of these functions (relay: pr_*; proxy: the engine's
# handlers), per handshake served by that child
PHASES='relay_child pr_accept pr_pump pr_settle pr_close worker_main loop_run_once on_listen conn_accept conn_accept_peer on_hs_client tls_hello faketls_validate faketls_server_hello keyshare_random crypto_hmac_sha256 flight_step plain_header obfs2_parse_client admit_hello start_dc obfs2_dc_header upstream_dc on_connected on_upstream relay_start relay_on_client relay_on_upstream run_timers conn_close crypto_ctr_init crypto_ctr_cleanup epoll_wait epoll_ctl'
sed -n 's/^bench=breakdown_child path=\([a-z]*\) pid=\([0-9]*\) handshakes=\([0-9]*\).*/\1 \2 \3/p' "$D/children" |
while read -r path pid n; do
    callgrind_annotate --inclusive=yes --threshold=100 "$D/cg.$pid" 2>/dev/null |
        awk -v path="$path" -v n="$n" -v phases="$PHASES" '
            BEGIN { k = split(phases, ph, " "); for (i = 1; i <= k; i++) want[ph[i]] = i }
            /^ *[0-9,]+ \(/ && !/=>/ {
                ir = $1; gsub(",", "", ir)
                f = $0; sub(/^[^)]*\) +/, "", f); sub(/ \[.*/, "", f)
                sub(/.*:/, "", f); sub(/[.'"'"'].*/, "", f)
                if (f in want && !(f in got)) got[f] = ir
            }
            END {
                line = "bench=breakdown_instructions_" path " unit=instructions_per_handshake"
                for (i = 1; i <= k; i++) if (ph[i] in got)
                    line = line sprintf(" %s=%.0f", ph[i], got[ph[i]] / n)
                print line
            }'
done
