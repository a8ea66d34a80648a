#!/usr/bin/env python3
"""The serving commands leave OpenSSL's configuration file alone unless OPENSSL_CONF names one
(src/proxy/daemon/main.c; issue 30: parsing the system's openssl.cnf cost ~100 KB resident).

1. With OPENSSL_CONF naming a file that activates a provider module (a path in the test's
   directory, which does not exist, beside the default provider), `tgproxy run` until ready
   under `strace -f -e trace=openat,open`: the file is read and the module looked for, at
   start: a file named that way is loaded and applied, even though on a CPU with AES-NI
   nothing at start uses a provider (proxy/wire/crypto.h), which is when OpenSSL would read
   it by itself.
2. Without OPENSSL_CONF, `tgproxy run` until it is ready (READY=1 on $NOTIFY_SOCKET) under
   `strace -f -e trace=openat,open`: its config file is opened, no openssl.cnf is.
3. The same trace with OPENSSL_CONF naming a harmless copy shows that file opened (the
   trace sees a configuration being read when there is one).

usage: opensslconf.py TGPROXY
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from api_fx import write  # noqa: E402


def secret(binary):
    return subprocess.run([binary, "generate-secret", "--hex", "localhost"], check=True,
                          capture_output=True, text=True).stdout.strip()


def config(binary, d):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = os.path.join(d, "tgproxy.toml")
    write(conf, f'bind-to = "127.0.0.1:{port}"\n[defense.tls-front]\nenabled = false\n'
                f'[secrets]\nmain = "{secret(binary)}"\n')
    return conf


def traced_until_ready(binary, conf, d, env):
    """The openat/open paths of `tgproxy run conf` from start to READY=1."""
    notify = os.path.join(d, "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(notify)
    trace = os.path.join(d, "trace")
    env = dict(env, NOTIFY_SOCKET=notify)
    log = open(os.path.join(d, "log"), "w+")
    p = subprocess.Popen(["strace", "-f", "-qq", "-e", "trace=openat,open", "-o", trace,
                          binary, "run", conf], env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 60
        ready = False
        while not ready and time.monotonic() < deadline and p.poll() is None:
            sock.settimeout(0.5)
            try:
                ready = "READY=1" in sock.recv(4096).decode().split("\n")
            except socket.timeout:
                pass
        log.seek(0)
        assert ready, f"tgproxy never became ready:\n{log.read()}"
    finally:
        # SIGTERM to tgproxy itself (strace's child); strace then exits with it
        try:
            with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
                kids = [int(x) for x in f.read().split()]
        except OSError:
            kids = []
        for k in kids:
            os.kill(k, 15)
        if not kids:
            p.terminate()
        p.wait(timeout=60)
        sock.close()
        os.unlink(notify)
        log.close()
    with open(trace) as f:
        return [line.split('"')[1] for line in f if line.count('"') >= 2]


def main():
    binary = sys.argv[1]
    assert shutil.which("strace"), "strace is not installed (make deps installs it)"
    d = tempfile.mkdtemp(prefix="tgkit-opensslconf-")
    try:
        conf = config(binary, d)
        env = {k: v for k, v in os.environ.items() if k != "OPENSSL_CONF"}

        # 1. a file named by OPENSSL_CONF is loaded and applied at start
        probe = os.path.join(d, "probe-module.so")
        named = os.path.join(d, "probe.cnf")
        write(named, "openssl_conf = init\n[init]\nproviders = prov\n[prov]\n"
                     "default = default_sect\nprobe = probe_sect\n[default_sect]\nactivate = 1\n"
                     f"[probe_sect]\nmodule = {probe}\nactivate = 1\n")
        paths = traced_until_ready(binary, conf, d, dict(env, OPENSSL_CONF=named))
        assert named in paths, f"OPENSSL_CONF={named} was not opened: {paths}"
        assert probe in paths, f"the provider module {named} names was not looked for: {paths}"

        # 2. without OPENSSL_CONF no openssl.cnf is opened
        paths = traced_until_ready(binary, conf, d, env)
        assert conf in paths, f"the trace does not show the config file opened: {paths}"
        cnf = [p for p in paths if p.endswith("openssl.cnf")]
        assert not cnf, f"tgproxy run read {cnf} without OPENSSL_CONF"

        # 3. the trace does see a configuration file when one is named
        plain = os.path.join(d, "plain.cnf")
        write(plain, "# nothing configured\n")
        paths = traced_until_ready(binary, conf, d, dict(env, OPENSSL_CONF=plain))
        assert plain in paths, f"OPENSSL_CONF={plain} was not opened: {paths}"
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print("opensslconf: ok")


if __name__ == "__main__":
    main()
