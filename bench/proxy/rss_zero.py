#!/usr/bin/env python3
"""bench/proxy/rss_zero.py [BUILD_DIR] [options]: tgproxy's resident memory with no connection,
by component (issue 30's goal: <= 6 MB with the default config), beside a floor from the same
run.

Each scenario starts the build's tgproxy on 127.0.0.1 the way an operator or a harness would,
waits for readiness (the READY=1 tgproxy sends to $NOTIFY_SOCKET once its listeners serve,
as under systemd: no sleeping to synchronise), lets it settle for --after seconds (default 3:
the issue's "3 s after start"), reads /proc/PID/smaps and prints the resident kilobytes by
component, and stops it. Scenarios (--scenarios, comma-separated; default all but workers-N):

  make-run      the file `make run` writes (scripts/run.sh): bind-to, public-host, one ee
                secret for www.google.com; [defense.tls-front] on, as by default
  no-tls-front  the same with [defense.tls-front] enabled = false
  example       examples/tgproxy.example.toml (the README's "every option with its
                default"), bind-to moved to 127.0.0.1 and a fresh secret
  simple-run    `tgproxy simple-run 127.0.0.1:PORT` with the secret in TGPROXY_SECRET
  prometheus    make-run plus [stats.prometheus] on 127.0.0.1, scraped once before the
                sample (a harness that polls the metrics to see the proxy up)
  tls-front-learns  make-run with [domain-fronting] at a local TLS site (openssl s_server,
                a self-signed certificate for the secret's domain): tls-front's first
                refresh learns a profile, as it would from the real site on a host with a
                network; sampled --after seconds after the "learned" line
  workers-N     make-run with workers = N (e.g. workers-1, workers-8: what a bigger host's
                default of one worker per CPU costs)

The floors, from the same run (bench/proxy/rss/floor.c, compiled here with cc): `floor-libc`
(a PIE that only waits) and `floor-crypto` (libcrypto loaded and initialised as tgproxy does,
AES-256-CTR and SHA-256 fetched and used once); the ratio is tgproxy's total over
floor-crypto's.

Components: the mappings of libcrypto, libc, ld.so, the tgproxy binary and any other file
(named); [heap] (the main malloc arena); the main thread's [stack]; every other thread's
stack (the anonymous mapping its stack pointer is in, from /proc/PID/task/TID/syscall);
other threads' malloc arenas (anonymous mappings aligned to glibc's 64 MiB heap size); the
remaining anonymous mappings (allocations of 128 KiB and more, OpenSSL's and ours). Each row
gives Rss and, in parentheses, the part the process wrote (smaps' Anonymous: a library's
relocated pages, .data/.bss, written heap), the rest being clean file pages the kernel read
(and mapped around each fault: up to 16 pages per fault). --runs N repeats each scenario and prints the median total beside the range.

Environment/options: --after SECONDS, --runs N, --scenarios LIST, --json (one JSON object
per sample on stdout instead of the table).
"""
import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ARENA = 64 << 20  # glibc's HEAP_MAX_SIZE on 64-bit: a thread arena's mapping is aligned to it
READY_S = 30      # the most a process may take to become ready


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def secret(binary, domain="www.google.com"):
    return subprocess.run([binary, "generate-secret", "--hex", domain], check=True,
                          capture_output=True, text=True).stdout.strip()


def write(path, text):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def make_run_toml(binary, port):
    # what scripts/run.sh writes on a first `make run`
    return (f'# Written by \'make run\' on first start; edit freely (see docs/tgproxy.md).\n'
            f'bind-to = "127.0.0.1:{port}"\npublic-host = "127.0.0.1"\n\n'
            f'[secrets]\nmain = "{secret(binary)}"\n')


def example_toml(binary, port):
    with open(os.path.join(ROOT, "examples", "tgproxy.example.toml")) as f:
        text = f.read()
    text = re.sub(r"^bind-to = .*$", f'bind-to = "127.0.0.1:{port}"', text, count=1, flags=re.M)
    return re.sub(r'^main = "[0-9a-f]+"', f'main = "{secret(binary, "www.example.com")}"',
                  text, count=1, flags=re.M)


class Notify:
    """A datagram socket standing in for systemd's: tgproxy sends READY=1 to it."""

    def __init__(self, d):
        self.path = os.path.join(d, "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)

    def wait_ready(self, proc, deadline):
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"exited with {proc.returncode} before READY=1")
            self.sock.settimeout(max(0.05, min(1.0, deadline - time.monotonic())))
            try:
                msg = self.sock.recv(4096).decode(errors="replace")
            except socket.timeout:
                continue
            if "READY=1" in msg.split("\n"):
                return
        raise RuntimeError(f"no READY=1 within {READY_S} s")

    def close(self):
        self.sock.close()


def thread_stacks(pid):
    """{stack pointer: thread name} for every thread but the main one (blocked in a call)."""
    sps = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        if tid == str(pid):
            continue
        try:
            with open(f"/proc/{pid}/task/{tid}/syscall") as f:
                fields = f.read().split()
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue
        if len(fields) >= 3 and fields[0] != "running":
            sps[int(fields[-2], 16)] = name
    return sps


def smaps(pid):
    maps, cur = [], None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \d+\s*(.*)$", line)
            if m:
                cur = {"lo": int(m[1], 16), "hi": int(m[2], 16), "perm": m[3],
                       "path": m[4].strip(), "Rss": 0, "Anonymous": 0}
                maps.append(cur)
                continue
            k = line.split(":", 1)
            if cur and len(k) == 2 and k[0] in ("Rss", "Anonymous"):
                cur[k[0]] = int(k[1].split()[0])
    return maps


def component(m, binary, sps, prev):
    p = m["path"]
    base = os.path.basename(p)
    if p:
        if os.path.realpath(p) == binary:
            return "binary"
        if base.startswith("floor-"):
            return "binary"
        if base.startswith("libcrypto.so"):
            return "libcrypto"
        if base.startswith("libc.so"):
            return "libc"
        if base.startswith("ld-linux"):
            return "ld.so"
        if p == "[heap]":
            return "heap (main arena)"
        if p == "[stack]":
            return "main thread's stack"
        if p in ("[vdso]", "[vvar]", "[vsyscall]", "[vvar_vclock]"):
            return "vdso"
        if p.startswith("["):
            return p
        return "file " + base
    for sp, name in sps.items():
        if m["lo"] <= sp < m["hi"]:
            return "thread stacks"
    # a thread arena: its first mapping starts on a 64 MiB boundary (the rest of the 64 MiB
    # follows as a PROT_NONE mapping, or read-write as the arena grows)
    if m["lo"] % ARENA == 0 or (prev is not None and prev.get("arena") and prev["hi"] == m["lo"]):
        m["arena"] = True
        return "thread malloc arenas"
    return "anonymous (mmap'd allocations)"


ORDER = ["libcrypto", "libc", "ld.so", "binary", "heap (main arena)",
         "anonymous (mmap'd allocations)", "thread malloc arenas", "thread stacks",
         "main thread's stack", "vdso"]


def sample(pid, binary):
    sps = thread_stacks(pid)
    comps, prev = {}, None
    for m in smaps(pid):
        c = component(m, binary, sps, prev)
        prev = m
        rss, dirty = comps.get(c, (0, 0))
        comps[c] = (rss + m["Rss"], dirty + m["Anonymous"])
    with open(f"/proc/{pid}/status") as f:
        status = dict(line.split(":", 1) for line in f if ":" in line)
    total = int(status["VmRSS"].split()[0])
    threads = int(status["Threads"].strip())
    return {"components": comps, "total": total, "threads": threads}


def run_one(name, binary, floor, after, d):
    port = free_port()
    env = dict(os.environ)
    env.pop("STATE_DIRECTORY", None)
    scrape, site, learn = None, None, False
    if name.startswith("floor-"):
        kind = name[len("floor-"):]
        if kind not in floor:
            raise SystemExit(f"rss_zero: unknown scenario {name}")
        cmd = [floor[kind], kind]
    elif name == "simple-run":
        env["TGPROXY_SECRET"] = secret(binary)
        cmd = [binary, "simple-run", f"127.0.0.1:{port}"]
    else:
        conf = os.path.join(d, f"{name}.toml")
        if name == "example":
            text = example_toml(binary, port)
        else:
            text = make_run_toml(binary, port)
            if name == "no-tls-front":
                text += "\n[defense.tls-front]\nenabled = false\n"
            elif name == "prometheus":
                mport = free_port()
                text = text.replace("\n[secrets]",
                                    f'\n[stats.prometheus]\nenabled = true\n'
                                    f'bind-to = "127.0.0.1:{mport}"\n\n[secrets]', 1)
                scrape = f"http://127.0.0.1:{mport}/"
            elif name == "tls-front-learns":
                site, sport = tls_site(d)
                text = text.replace("\n[secrets]", f'\n[domain-fronting]\nhost = "127.0.0.1"\n'
                                    f'port = {sport}\n\n[secrets]', 1)
                learn = True
            elif name.startswith("workers-"):
                text = f"workers = {int(name[len('workers-'):])}\n" + text
            elif name != "make-run":
                raise SystemExit(f"rss_zero: unknown scenario {name}")
        write(conf, text)
        cmd = [binary, "run", conf]
    is_floor = name.startswith("floor-")
    notify = Notify(d)
    env["NOTIFY_SOCKET"] = notify.path
    log = open(os.path.join(d, f"{name}.log"), "w+")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE if is_floor else log,
                            stderr=log, text=True)
    try:
        deadline = time.monotonic() + READY_S
        if is_floor:
            line = proc.stdout.readline()
            if line.strip() != "ready":
                raise RuntimeError(f"floor said {line!r}")
        else:
            notify.wait_ready(proc, deadline)
        if scrape:
            with urllib.request.urlopen(scrape, timeout=10) as r:
                r.read()
        while learn and "tls-front: " not in read_log(log):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("tls-front logged no refresh")
            time.sleep(0.05)  # polling the log for the refresh's line, bounded
        if learn and ": learned from" not in read_log(log):
            raise RuntimeError("tls-front did not learn from the local site")
        time.sleep(after)  # the measurement point ("3 s after start"), not a synchronisation
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode}")
        s = sample(proc.pid, binary)
    except RuntimeError as e:
        log.seek(0)
        raise SystemExit(f"rss_zero: {name}: {e}\n{log.read()[-2000:]}")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        notify.close()
        os.unlink(notify.path)
        log.close()
        if site:
            site.terminate()
            site.wait(timeout=30)
    s["scenario"] = name
    return s


def read_log(log):
    log.flush()
    with open(log.name) as f:
        return f.read()


def tls_site(d):
    """openssl s_server on 127.0.0.1 with a self-signed certificate: (process, port)."""
    cert, key = os.path.join(d, "site.crt"), os.path.join(d, "site.key")
    if not os.path.exists(cert):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                        "/CN=www.google.com", "-keyout", key, "-out", cert],
                       check=True, capture_output=True)
    for _ in range(5):  # a port another process took between free_port and the bind
        port = free_port()
        p = subprocess.Popen(["openssl", "s_server", "-quiet", "-accept", f"127.0.0.1:{port}",
                              "-cert", cert, "-key", key, "-naccept", "100"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and p.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return p, port
            except OSError:
                time.sleep(0.05)  # polling the site's port until it listens, bounded
        p.kill()
        p.wait()
    raise SystemExit("rss_zero: openssl s_server did not start")


def build_floor(d):
    """floor-libc without libcrypto, floor-crypto with it (bench/proxy/rss/floor.c)."""
    src = os.path.join(HERE, "rss", "floor.c")
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libcrypto"], check=True,
                           capture_output=True, text=True).stdout.split()
    cc = os.environ.get("CC", "cc")
    out = {}
    for kind, extra in (("libc", []), ("crypto", ["-DFLOOR_CRYPTO"] + flags)):
        out[kind] = os.path.join(d, f"floor-{kind}")
        subprocess.run([cc, "-O2", "-fPIE", "-pie", "-o", out[kind], src] + extra, check=True)
    return out


def table(results, names):
    """Markdown: a row per component, a column per scenario (median run by total)."""
    med = {}
    for n in names:
        runs = sorted((r for r in results if r["scenario"] == n), key=lambda r: r["total"])
        med[n] = runs[len(runs) // 2]
    comps = [c for c in ORDER if any(c in med[n]["components"] for n in names)]
    comps += sorted({c for n in names for c in med[n]["components"]} - set(comps))
    lines = ["| component, KB resident (written) | " + " | ".join(names) + " |",
             "| --- |" + " --- |" * len(names)]
    for c in comps:
        cells = []
        for n in names:
            rss, dirty = med[n]["components"].get(c, (0, 0))
            cells.append(f"{rss} ({dirty})" if rss else "0")
        if any(cell != "0" for cell in cells):
            lines.append(f"| {c} | " + " | ".join(cells) + " |")
    lines.append("| threads | " + " | ".join(str(med[n]["threads"]) for n in names) + " |")
    tot = []
    for n in names:
        all_t = [r["total"] for r in results if r["scenario"] == n]
        rng = f" ({min(all_t)}-{max(all_t)})" if len(all_t) > 1 else ""
        tot.append(f"**{statistics.median(all_t) / 1024:.2f} MB**{rng}")
    lines.append("| **VmRSS** | " + " | ".join(tot) + " |")
    floor = [r["total"] for r in results if r["scenario"] == "floor-crypto"]
    if floor:
        f = statistics.median(floor)
        lines.append("| ratio to floor-crypto | " + " | ".join(
            f"{statistics.median([r['total'] for r in results if r['scenario'] == n]) / f:.2f}x"
            for n in names) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--after", type=float, default=3.0)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--scenarios",
                    default="floor-libc,floor-crypto,make-run,no-tls-front,tls-front-learns,"
                            "example,simple-run,prometheus")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    binary = os.path.realpath(os.path.join(a.build, "tgproxy"))
    if not os.access(binary, os.X_OK):
        raise SystemExit(f"rss_zero: {binary} is not built (cmake --build {a.build} --target tgproxy)")
    names = [n for n in a.scenarios.split(",") if n]
    d = tempfile.mkdtemp(prefix="tgkit-rss-")
    try:
        floor = build_floor(d)
        results = []
        for _ in range(max(1, a.runs)):
            for n in names:
                r = run_one(n, binary, floor, a.after, d)
                results.append(r)
                if a.json:
                    print(json.dumps({"scenario": n, "total_kb": r["total"],
                                      "threads": r["threads"],
                                      "components": {k: {"rss_kb": v[0], "dirty_kb": v[1]}
                                                     for k, v in r["components"].items()}}))
                    sys.stdout.flush()
        if not a.json:
            ver = subprocess.run([binary, "--version"], capture_output=True,
                                 text=True).stdout.strip()
            print(f"rss_zero: {binary} ({ver}), {a.after:g} s after READY=1, "
                  f"{a.runs} run(s), median by total; {os.cpu_count()} CPUs")
            print(table(results, names))
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
