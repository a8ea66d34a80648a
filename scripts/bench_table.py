#!/usr/bin/env python3
"""Cross-library table: go-telegram's four hot paths for libtgbot, from `make bench` output.

Reads the `bench=NAME ns_per_op=... allocs_per_op=... floor=... ratio=...` lines the
benchmarks printed (a file, or stdin), prints the table and writes it as Markdown to the
output path with the machine, the commit and the date. Every figure and its floor come from
the same run; a row whose benchmark is missing says so instead of inventing a number.

usage: bench_table.py BENCH_OUTPUT RESULTS_MD [COMMIT]
"""
import datetime
import os
import platform
import re
import subprocess
import sys

KV = re.compile(r"(\w+)=([0-9.]+)")
LINE = re.compile(r"^bench=(\S+) ns_per_op=([0-9.]+) allocs_per_op=(\S+) floor=(\S+) ratio=([0-9.]+)")

# (path, what libtgbot does, our row, floor row, floor described)
ROWS = [
    ("webhook decode, small Update (267 B)",
     "copy into the arena, tokenize, typed decode of every field, reset",
     "decode_update_small", "cjson_parse_small", "cJSON DOM parse + delete"),
    ("decode, large Update (1099 B)",
     "same, large Update",
     "decode_update_large", "cjson_parse_large", "cJSON DOM parse + delete"),
    ("call round trip: sendMessage, libcurl transport",
     "encode, POST over kept-alive HTTP/1.1 to a local server, decode the Message (pinned to one CPU)",
     "roundtrip_tgbot_pinned", "roundtrip_raw_socket_pinned", "raw socket: write request, read answer"),
    ("call round trip: sendMessage, lean transport",
     "same over tg_transport_lean()",
     "roundtrip_tgbot_lean_pinned", "roundtrip_raw_socket_pinned", "raw socket: write request, read answer"),
    ("dispatch, 20 command handlers, last matches: route an already-parsed update",
     "router only, on a decoded update (like for like with the other libraries)",
     "dispatch_20_commands", "strcmp_20_commands", "20 string compares"),
    ("dispatch, 20 command handlers, last matches: tokenize + route",
     "from the raw JSON bytes: tokenize, build the event, route, reset",
     "dispatch_tokenize_route_20", "cjson_parse_strcmp_20_commands",
     "cJSON parse + 20 string compares"),
]


def machine():
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = "?"
    try:
        with open("/proc/loadavg") as f:
            load = f.read().split()[0]
    except OSError:
        pass
    return "%s, %d CPUs, %s %s (load average %s when the table was written)" % (
        model, os.cpu_count() or 0, platform.system(), platform.release(), load)


def commit_id(arg):
    if arg:
        return arg
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return out + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def also_measured(rows, extra):
    """CPU time per round trip (steadier than wall time on a shared machine) and TLS."""
    notes = []
    cpu = extra.get("roundtrip_cpu_pinned")
    if cpu:
        notes.append("round trip, process CPU time per call (client + server threads): raw socket "
                     "%s ns, libtgbot over libcurl %s ns (%sx), over lean %s ns (%sx)" % (
                         cpu.get("raw_socket_cpu_ns"), cpu.get("tgbot_cpu_ns"),
                         cpu.get("tgbot_vs_raw"), cpu.get("lean_cpu_ns"), cpu.get("lean_vs_raw")))
    conns = extra.get("roundtrip_connections_pinned")
    if conns:
        notes.append("connections opened for the whole run: libcurl transport %s, lean %s" % (
            conns.get("tgbot_transport_connects"), conns.get("lean_transport_connects")))
    tls = [rows.get(n) for n in ("roundtrip_tls_raw_openssl_pinned", "roundtrip_tls_tgbot_pinned",
                                 "roundtrip_tls_tgbot_lean_pinned")]
    if all(tls):
        notes.append("round trip over TLS to a local libssl server: raw OpenSSL client %s "
                     "(%s allocs/op), libtgbot over libcurl %s (%.2fx, %s allocs/op), over lean "
                     "%s (%.2fx, %s allocs/op; the allocations are OpenSSL's own, as the floor's)"
                     % (fmt_ns(tls[0][0]), tls[0][1], fmt_ns(tls[1][0]), tls[1][0] / tls[0][0],
                        tls[1][1], fmt_ns(tls[2][0]), tls[2][0] / tls[0][0], tls[2][1]))
    return notes


def fmt_ns(ns):
    return "%.1f us" % (ns / 1000) if ns >= 10000 else "%.0f ns" % ns


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    src = sys.stdin if sys.argv[1] == "-" else open(sys.argv[1])
    # rows: the latest line of each name; pairs: for each row naming a floor, that floor's
    # latest line printed before it (two programs measure cJSON on the small Update: a row is
    # compared with the floor its own program measured)
    rows, pairs, extra = {}, {}, {}
    for line in src:
        m = LINE.match(line.strip())
        if m:
            rows[m.group(1)] = (float(m.group(2)), m.group(3))
            if m.group(4) in rows:
                pairs[m.group(1)] = rows[m.group(4)]
        elif line.startswith("bench="):
            name = line.split()[0][6:]
            extra[name] = dict(KV.findall(line))
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    commit = commit_id(sys.argv[3] if len(sys.argv) > 3 else "")
    head = ["path", "libtgbot", "allocs/op", "floor", "floor time", "floor allocs/op", "ratio"]
    table = []
    for path, what, ours, floor, floor_desc in ROWS:
        if ours not in rows or floor not in rows:
            table.append([path, "not measured (%s missing)" % (ours if ours not in rows else floor),
                          "", floor_desc, "", "", ""])
            continue
        (ns, al), (fns, fal) = rows[ours], pairs.get(ours, rows[floor])
        table.append([path, fmt_ns(ns), al, floor_desc, fmt_ns(fns), fal, "%.2f" % (ns / fns)])
    widths = [max(len(r[i]) for r in table + [head]) for i in range(len(head))]
    print("\n# go-telegram's four hot paths, libtgbot (commit %s, %s)" % (commit, when))
    for r in [head] + table:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    with open(sys.argv[2], "w") as out:
        out.write("# Benchmark results: go-telegram's four hot paths\n\n")
        out.write("Written by `make bench` (scripts/bench_table.py) from the benchmarks' own lines; "
                  "every floor was measured in the same run. Time and allocations are per "
                  "operation (allocations: every malloc-family call in the process, libraries "
                  "included). Ratio = libtgbot time / floor time.\n\n")
        out.write("- machine: %s\n- commit: %s\n- date: %s\n\n" % (machine(), commit, when))
        out.write("| " + " | ".join(head) + " |\n|" + "---|" * len(head) + "\n")
        for r in table:
            out.write("| " + " | ".join(c or "-" for c in r) + " |\n")
        out.write("\nWhat each row measures:\n\n")
        for path, what, ours, floor, floor_desc in ROWS:
            out.write("- **%s** (`%s` vs `%s`): %s; floor: %s.\n" % (path, ours, floor, what,
                                                                   floor_desc))
        notes = also_measured(rows, extra)
        if notes:
            out.write("\nAlso measured in the same run:\n\n" + "".join("- %s\n" % n for n in notes))
    print("(written to %s)" % sys.argv[2])


if __name__ == "__main__":
    main()
