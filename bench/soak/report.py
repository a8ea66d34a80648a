#!/usr/bin/env python3
"""Plots and verdicts of a soak run (bench/soak/run.sh): reads DIR/samples.csv and
DIR/summary.txt written by the soak program, draws one PNG per sampled quantity over time
(Debian's python3-matplotlib) and writes DIR/report.md with the verdicts.

Flat means: after the warm-up (the first tenth of the run, at least 60 s when the run is
long enough to spare it), the median of the last tenth of the samples exceeds the median of
the tenth right after the warm-up by no more than the tolerance given per quantity below.
The least-squares slope over the whole post-warm-up part is reported beside it.

Usage: report.py DIR proxy|bot      exit 0 when every verdict passes, 1 otherwise."""
import csv
import os
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# (column, title, unit, tolerance: absolute, relative) — a quantity with a tolerance gets
# a "flat" verdict; the others are only drawn.
SERIES = {
    "proxy": [
        ("rss_kb", "tgproxy resident set", "KiB", 1024, 0.10),
        ("fds", "tgproxy open file descriptors", "fds", 16, 0.05),
        ("threads", "tgproxy threads", "threads", 0, 0.0),
        ("client_conns", "client connections open (the soak's count)", "connections", None, None),
        ("proxy_active", "client_connections_active (scraped)", "connections", None, None),
        ("hs_p50_ms", "handshake latency p50 (connect + handshake)", "ms", None, None),
        ("hs_p99_ms", "handshake latency p99 (connect + handshake)", "ms", None, None),
        # each doubling of the table is an RSS step of its new size less the old one's
        ("replay_entries", "anti-replay table (scraped antireplay_capacity_entries, 16 B each)",
         "entries", None, None),
    ],
    "bot": [
        ("rss_kb", "bot resident set", "KiB", 1024, 0.10),
        ("fds", "bot open file descriptors", "fds", 16, 0.05),
        ("threads", "bot threads", "threads", 2, 0.0),
        ("handled_per_s", "updates handled per second", "updates/s", None, None),
        ("lag", "updates sent but not yet handled", "updates", None, None),
    ],
}


def read_summary(path):
    out = {}
    with open(path) as f:
        for line in f:
            if "=" in line:
                k, v = line.strip().split("=", 1)
                try:
                    out[k] = float(v) if "." in v else int(v)
                except ValueError:
                    out[k] = v
    return out


def slope_per_min(ts, ys):
    n = len(ts)
    if n < 2:
        return 0.0
    mt, my = sum(ts) / n, sum(ys) / n
    den = sum((t - mt) ** 2 for t in ts)
    return 0.0 if den == 0 else 60.0 * sum((t - mt) * (y - my) for t, y in zip(ts, ys)) / den


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in SERIES:
        print(__doc__, file=sys.stderr)
        return 2
    d, kind = sys.argv[1], sys.argv[2]
    rows = list(csv.DictReader(open(os.path.join(d, "samples.csv"))))
    s = read_summary(os.path.join(d, "summary.txt"))
    if len(rows) < 10:
        print(f"report: {d}/samples.csv has {len(rows)} samples; a soak needs at least 10",
              file=sys.stderr)
        return 1
    t = [float(r["t_s"]) for r in rows]
    n = len(rows)
    warm = max(n // 10, min(60, n // 4))
    tenth = max(1, (n - warm) // 10)
    verdicts = []  # (name, passed, detail)
    cuts = [i for i, r in enumerate(rows) if "bot-restart" in (r.get("event") or "")]
    bounds = [0] + cuts + [n]
    lifetimes = [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]
    lines = ["# Soak report: " + kind, ""]
    lines.append("Samples: %d (one a second); warm-up: the first %d s. " % (n, warm) +
                 "Settings: " + ", ".join(f"{k}={v}" for k, v in s.items()
                                          if k in ("minutes", "churn_per_min", "relays",
                                                   "slow", "reload_every_s", "scrape_every_s",
                                                   "fleet", "updates", "chats", "mode",
                                                   "restarts")))
    lines.append("")
    lines.append("| quantity | after warm-up (median) | at the end (median) | slope after "
                 "warm-up | tolerance | plot |")
    lines.append("|---|---|---|---|---|---|")
    for col, title, unit, tol_abs, tol_rel in SERIES[kind]:
        if col not in rows[0]:
            continue
        ys = [float(r[col]) for r in rows]
        png = f"{col}.png"
        fig, ax = plt.subplots(figsize=(9, 3.2))
        ax.plot(t, ys, linewidth=0.8)
        for r in rows:
            if r.get("event"):
                ax.axvline(float(r["t_s"]), color="tab:red" if "restart" in r["event"]
                           else "tab:gray", linewidth=0.4, alpha=0.5)
        ax.axvspan(0, t[warm - 1], color="tab:orange", alpha=0.08, label="warm-up")
        if tol_abs is not None:
            ax.set_ylim(bottom=0)  # growth is read against the whole, not a zoomed band
        ax.set_title(title)
        ax.set_xlabel("seconds")
        ax.set_ylabel(unit)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(d, png), dpi=110)
        plt.close(fig)
        # A restarted process is a new one: each lifetime is judged on its own, with its
        # own warm-up (the proxy's Redis restart leaves tgproxy running: one lifetime).
        for lo, hi in lifetimes:
            seg_t, seg = t[lo:hi], ys[lo:hi]
            sw = max(len(seg) // 10, min(60, len(seg) // 4))
            st10 = max(1, (len(seg) - sw) // 10)
            if len(seg) - sw < 2:
                continue
            base = statistics.median(seg[sw:sw + st10])
            end = statistics.median(seg[-st10:])
            slope = slope_per_min(seg_t[sw:], seg[sw:])
            which = "" if len(lifetimes) == 1 else f" (process {lifetimes.index((lo, hi)) + 1})"
            tol = "—"
            if tol_abs is not None:
                limit = base * (1 + tol_rel) + tol_abs
                tol = f"≤ {base:.0f} + {tol_rel:.0%} + {tol_abs} = {limit:.0f}"
                verdicts.append((f"{title} flat{which}", end <= limit,
                                 f"{end:.0f} at the end vs {base:.0f} after warm-up "
                                 f"(limit {limit:.0f} {unit})"))
            lines.append(f"| {title}{which} | {base:.1f} {unit} | {end:.1f} {unit} | "
                         f"{slope:+.2f} {unit}/min | {tol} | ![]({png}) |")
    lines.append("")

    def v(name, ok, detail):
        verdicts.append((name, bool(ok), detail))

    if kind == "proxy":
        planned = s["churn_per_min"] * s["seconds"] / 60
        done = s["churn_ok"] + s["churn_fail_connect"] + s["churn_fail_verify"] + \
            s["injected_failures"]
        v("no handshake or transfer failures beyond the injected ones",
          s["churn_fail_connect"] + s["churn_fail_verify"] == 0,
          f"{s['churn_ok']} cycles verified; {s['churn_fail_connect']} failed to connect or "
          f"hand-shake, {s['churn_fail_verify']} failed verification; "
          f"{s['injected_failures']} inside the 10 s after the injected Redis restart")
        v("the churn kept its rate", done >= 0.95 * planned,
          f"{done:.0f} cycles of {planned:.0f} planned")
        v("every long-lived relay's bytes verified", s["relay_failures"] == 0 and
          s["relay_bytes_verified"] > 0,
          f"{s['relay_rounds']} rounds, {s['relay_bytes_verified']} bytes verified, "
          f"{s['relay_failures']} failures, {s['relay_reopened']} reopened")
        v("the slow readers' bytes verified", s["slow_failures"] == 0 and
          (s["slow"] == 0 or s["slow_bytes_verified"] > 0),
          f"{s['slow_bytes_verified']} bytes verified, {s['slow_failures']} failures")
        expect = int(s["seconds"] // s["reload_every_s"]) - 1
        v("every SIGHUP applied; each added secret worked at once and each removed one was "
          "fronted", s["reloads_done"] >= max(expect, 0) and s["reload_checks_failed"] == 0,
          f"{s['reloads_done']} reloads (≥ {max(expect, 0)} expected), "
          f"{s['reload_checks_failed']} checks failed")
        v("every metrics scrape answered", s["scrapes_failed"] == 0,
          f"{s['scrapes_ok']} scrapes, {s['scrapes_failed']} failed")
        v("tgproxy drained and exited 0 at the end", s["tgproxy_exit"] == 0,
          f"exit status {s['tgproxy_exit']}")
    else:
        v("every update sent", s["sent"] == s["updates"] and s["send_failures"] == 0,
          f"{s['sent']} of {s['updates']} sent through the control API, "
          f"{s['send_failures']} refused")
        v("every update handled exactly once", s["handled"] == s["updates"] and
          s["duplicates"] == 0 and s["missing"] == 0 and s["unknown_ids"] == 0,
          f"{s['handled']} of {s['updates']} handled, {s['duplicates']} twice, "
          f"{s['missing']} missing; {s['redelivered']} given to the bot again after the "
          f"restart and recognised by the conversation's count")
        v("in order in every chat", s["out_of_order"] == 0,
          f"{s['out_of_order']} out of order over {s['chats']} chats")
        v("the bot stopped cleanly, at the restart and at the end", s["bot_exit"] == 0,
          f"exit status {s['bot_exit']} ({s['restarts']} restart)")

    lines.append("## Verdicts")
    lines.append("")
    for name, ok, detail in verdicts:
        lines.append(f"- **{'PASS' if ok else 'FAIL'}** — {name}: {detail}")
    lines.append("")
    ok = all(p for _, p, _ in verdicts)
    lines.append(f"Overall: **{'PASS' if ok else 'FAIL'}**")
    with open(os.path.join(d, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    for name, p, detail in verdicts:
        print(f"soak: {'PASS' if p else 'FAIL'} {name}: {detail}")
    print(f"soak: report in {d}/report.md")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
