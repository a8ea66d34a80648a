#!/usr/bin/env python3
"""tgproxy loads libcurl, libmicrohttpd, libssl, libhiredis and libqrencode at first use
(src/proxy/daemon/lazylib.c).

1. The binary does not depend on either library (readelf's NEEDED entries): linking them
   costs every process ~4.7 MB of resident memory at start (issue 30). A caller that uses a
   function lazylib.c lacks brings the dependency back, and this fails. Nor on libm (328 KB:
   the doppelganger has its own math); in a sanitizer build, whose runtime needs libm, no
   libm function may be imported instead.
2. libmicrohttpd through the loader: `tgproxy run` with [stats.prometheus] serves a page
   with tgproxy's metrics.
3. libcurl through the loader: `tgproxy doctor` reads the Date header of a local HTTPS
   fronting host (a self-signed certificate made here with openssl, trusted through
   SSL_CERT_FILE) and reports the clock's skew against it.
4. libhiredis through the loader: `tgproxy run` with [fleet] at a local redis-server
   reports every worker's Redis link up (tgproxy_fleet_redis_up 1).
5. libqrencode through the loader: `tgproxy access` draws the QR codes.
libssl (DNS over TLS, doctor's certificate check) is loaded the same way.

usage: lazylibs.py TGPROXY
"""
import http.server
import os
import re
import shutil
import ssl
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from api_fx import wait_log, write  # noqa: E402


def needed(binary):
    out = subprocess.run(["readelf", "-d", binary], check=True, capture_output=True, text=True)
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out.stdout)


def check_needed(binary):
    libs = needed(binary)
    assert libs, "readelf found no NEEDED entry at all"
    bad = [lib for lib in libs
           if lib.startswith(("libcurl", "libmicrohttpd", "libssl", "libhiredis", "libqrencode"))]
    assert not bad, f"{binary} links {bad} directly (a function missing in lazylib.c?)"
    # libm: 328 KB resident at start; the doppelganger's math is its own (wire/doppel.c)
    libm = [lib for lib in libs if lib.startswith("libm.")]
    if not libm:
        return
    # A sanitizer build: clang links its runtime with -lm (its lgamma interceptors read
    # signgam), so NEEDED says nothing about tgproxy's own code; check its imports instead.
    assert sanitized(binary), f"{binary} links {libm} (a libm function called outside the tests?)"
    runtime = {"signgam", "__signgam"}
    used = sorted((imports(binary) & libm_only()) - runtime)
    assert not used, f"{binary} calls libm's {used} (a libm function called outside the tests?)"


def dynsyms(path, which):
    out = subprocess.run(["nm", "-D", which, path], check=True, capture_output=True, text=True)
    return {line.split()[-1].split("@")[0] for line in out.stdout.splitlines() if line.split()}


def imports(binary):
    return dynsyms(binary, "--undefined-only")


def sanitized(binary):
    return bool(dynsyms(binary, "--defined-only") & {"__asan_init", "__tsan_init"})


def libm_only():
    """The functions libm.so.6 defines and libc.so.6 does not (frexp, ldexp ... are in both)."""
    out = subprocess.run(["ldconfig", "-p"], check=True, capture_output=True, text=True).stdout
    paths = {}
    for name in ("libm.so.6", "libc.so.6"):
        found = re.findall(r"^\s*" + re.escape(name) + r" \(([^)]*)\) => (\S+)$", out, re.M)
        native = [path for arch, path in found if "x86-64" in arch or "AArch64" in arch] or \
            [path for _, path in found]
        assert native, f"ldconfig -p lists no {name}"
        paths[name] = native[0]
    return dynsyms(paths["libm.so.6"], "--defined-only") - dynsyms(paths["libc.so.6"], "--defined-only")


def secret(binary):
    out = subprocess.run([binary, "generate-secret", "--hex", "localhost"], check=True,
                         capture_output=True, text=True)
    return out.stdout.strip()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_fleet(binary, d):
    """[fleet] through the lazily loaded libhiredis: every worker's Redis link comes up."""
    rport = free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(rport), "--bind", "127.0.0.1",
                              "--save", "", "--appendonly", "no"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    conf = os.path.join(d, "fleet.toml")
    write(conf, f'secret = "{secret(binary)}"\nbind-to = "127.0.0.1:0"\n'
                '[stats.prometheus]\nenabled = true\nbind-to = "127.0.0.1:0"\n'
                f'[fleet]\nredis = "redis://127.0.0.1:{rport}"\n')
    log = os.path.join(d, "fleet.log")
    with open(log, "w") as lf:
        p = subprocess.Popen([binary, "run", conf], stdout=lf, stderr=subprocess.STDOUT)
    try:
        m = wait_log(log, r"\[stats\.prometheus\] serving (http://\S+)", time.monotonic() + 30)
        deadline, body = time.monotonic() + 30, ""
        up = re.compile(r"^tgproxy_fleet_redis_up 1$", re.M)
        while time.monotonic() < deadline and not up.search(body):
            with urllib.request.urlopen(m.group(1), timeout=10) as r:
                body = r.read().decode()
            time.sleep(0.05)  # polling the gauge, bounded by the deadline
        assert up.search(body), body[:2000]
        with open(log) as f:
            assert "cannot load" not in f.read()
    finally:
        p.terminate()
        assert p.wait(timeout=30) == 0
        redis.terminate()
        redis.wait(timeout=30)


def check_qr(binary, d):
    """`access` draws its QR codes through the lazily loaded libqrencode."""
    conf = os.path.join(d, "access.toml")
    write(conf, f'secret = "{secret(binary)}"\nbind-to = "127.0.0.1:443"\n')
    out = subprocess.run([binary, "access", conf, "--host", "127.0.0.1"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "\u2588" in out.stdout, out.stdout + out.stderr


def check_metrics(binary, d):
    conf = os.path.join(d, "metrics.toml")
    write(conf, f'secret = "{secret(binary)}"\nbind-to = "127.0.0.1:0"\n'
                '[stats.prometheus]\nenabled = true\nbind-to = "127.0.0.1:0"\n')
    log = os.path.join(d, "metrics.log")
    with open(log, "w") as lf:
        p = subprocess.Popen([binary, "run", conf], stdout=lf, stderr=subprocess.STDOUT)
    try:
        m = wait_log(log, r"\[stats\.prometheus\] serving (http://\S+)", time.monotonic() + 30)
        with urllib.request.urlopen(m.group(1), timeout=10) as r:
            body = r.read().decode()
        assert "tgproxy_" in body, body[:400]
    finally:
        p.terminate()
        assert p.wait(timeout=30) == 0


class DateHandler(http.server.BaseHTTPRequestHandler):
    def do_HEAD(self):
        self.send_response(200)  # BaseHTTPRequestHandler adds the Date header
        self.end_headers()

    def log_message(self, *args):
        pass


def check_curl(binary, d):
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost"],
                   check=True, capture_output=True)
    srv = http.server.HTTPServer(("127.0.0.1", 0), DateHandler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    port = srv.server_address[1]
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        conf = os.path.join(d, "doctor.toml")
        write(conf, f'secret = "{secret(binary)}"\nbind-to = "127.0.0.1:0"\n'
                    f'[domain-fronting]\nhost = "127.0.0.1"\nport = {port}\n')
        env = dict(os.environ, SSL_CERT_FILE=cert)
        out = subprocess.run([binary, "doctor", conf], env=env, capture_output=True, text=True,
                             timeout=120)
        lines = [line for line in out.stdout.splitlines() if "clock" in line]
        assert lines, out.stdout + out.stderr
        assert "Date header" in lines[0] and "localhost" in lines[0], lines[0]
        # libssl through the loader: the fronting host's certificate checked
        tls = [line for line in out.stdout.splitlines() if "with a certificate valid for" in line]
        assert tls and "TLSv1." in tls[0], out.stdout + out.stderr
    finally:
        srv.shutdown()


def main():
    binary = sys.argv[1]
    d = tempfile.mkdtemp(prefix="tgkit-lazylibs-")
    try:
        check_needed(binary)
        check_metrics(binary, d)
        check_curl(binary, d)
        check_fleet(binary, d)
        check_qr(binary, d)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print("lazylibs: ok")


if __name__ == "__main__":
    main()
