#!/usr/bin/env python3
"""tgproxy's control panel ([api] at /) in real headless Chromium (Debian's /usr/bin/chromium),
driven over the DevTools pipe with the browser tests' client (tests/support/chromium.py).

Runs the built tgproxy with [api] and a token file, then in the browser:
  1. a wrong token is refused; the right one logs in and lists the file's secret;
  2. create a dd secret with a quota: its row appears and its QR code (fetched with the
     token, shown from a blob: URL) is rendered (naturalWidth > 0);
  3. a real dd client (obfs2 header, AES-CTR from python3-cryptography) authenticates with
     the file's secret: the panel's Active count and unique addresses go to 1 by themselves
     (live refresh), and the secret's details list the client's address;
  4. disable the new secret from its row: the row says disabled;
  5. a reload refused for a key named <img src=x onerror=...>: the recent-reloads list shows
     the text, no image element is made and its script never runs.
Fails (never skips) when something it needs is missing.

usage: panel.py TGPROXY CHROMIUM SCREENSHOT.png
"""
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from chromium import Cdp, close, js, open_tab, screenshot, start_chromium, stop  # noqa: E402
from chromium import wait_js as wait_for  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from api_fx import wait_log, write  # noqa: E402

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes  # noqa: E402

TOKEN = "panel-test-token-0123456789"
KEY = bytes(range(16))
DEADLINE_S = 240  # a bound against a hang, not a timing (see web_chat.py)
HOSTILE = "<img src=x onerror=window.pwned=1>"


def config(port_dc, token_file, state_file, extra=""):
    return (f"bind-to = \"127.0.0.1:0\"\n{extra}"
            "[secrets]\n"
            f"file1 = \"dd{KEY.hex()}\"\n"
            f"[dcs]\ndefault = \"127.0.0.1:{port_dc}\"\n"
            "[domain-fronting]\nhost = \"127.0.0.1\"\nport = 9\n"
            "[api]\nenabled = true\nbind-to = \"127.0.0.1:0\"\n"
            f"token-file = \"{token_file}\"\nstate-file = \"{state_file}\"\n")


def dd_client(port):
    """A dd (padded intermediate) client's obfs2 header for KEY, DC 2."""
    while True:
        h = bytearray(os.urandom(64))
        if h[0] != 0xef and h[0:4] not in (b"HEAD", b"POST", b"GET ", b"OPTI", b"\x16\x03\x01\x02",
                                           b"\xdd\xdd\xdd\xdd", b"\xee\xee\xee\xee") \
                and h[4:8] != b"\0\0\0\0":
            break
    h[56:60] = b"\xdd\xdd\xdd\xdd"
    h[60:62] = (2).to_bytes(2, "little", signed=True)
    key = hashlib.sha256(bytes(h[8:40]) + KEY).digest()
    enc = Cipher(algorithms.AES(key), modes.CTR(bytes(h[40:56]))).encryptor()
    wire = enc.update(bytes(h))
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(bytes(h[:56]) + wire[56:64])
    return s


def api(base, method, path, body=None):
    req = urllib.request.Request(base + path, method=method,
                                 headers={"Authorization": "Bearer " + TOKEN})
    if body is not None:
        req.data = json.dumps(body).encode()
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def main(argv):
    tgproxy, chromium, shot = argv[1:4]
    for f in (tgproxy, chromium):
        if not os.access(f, os.X_OK):
            print(f"FAIL: {f} is not there (needed: apt-get install chromium)")
            return 1
    deadline = time.monotonic() + DEADLINE_S
    work = tempfile.mkdtemp(prefix="tgproxy-panel-")
    procs, held = [], []
    dc = socket.socket()
    dc.bind(("127.0.0.1", 0))
    dc.listen(8)
    try:
        token_file, state_file = os.path.join(work, "api.token"), os.path.join(work, "api.json")
        conf, log = os.path.join(work, "proxy.toml"), os.path.join(work, "log")
        write(token_file, TOKEN + "\n")
        write(conf, config(dc.getsockname()[1], token_file, state_file))
        with open(log, "w") as lf:
            procs.append(subprocess.Popen([tgproxy, "run", conf], stdout=lf, stderr=lf))
        port = int(wait_log(log, r"listening on \S+ \(port (\d+)\)", deadline).group(1))
        base = wait_log(log, r"\[api\] serving (http://127\.0\.0\.1:\d+)/", deadline).group(1)

        browser, wfd, rfd = start_chromium(chromium, os.path.join(work, "profile"))
        procs.append(browser)
        cdp = Cdp(wfd, rfd, deadline)
        _, session = open_tab(cdp, base + "/")
        wait_for(cdp, session, "document.readyState === 'complete' && typeof onLogin === 'function'",
                 "the login form with its script")

        def login(token):
            js(cdp, session, f"document.querySelector('#token').value = {json.dumps(token)};"
               " document.querySelector('#login-btn').click(); true")

        login("wrong")
        wait_for(cdp, session, "document.querySelector('#login-error').textContent"
                 ".includes('unauthorized')", "a wrong token refused")
        login(TOKEN)
        wait_for(cdp, session, "document.querySelector('tr[data-label=\"file1\"]')",
                 "the file's secret listed")
        assert js(cdp, session, "sessionStorage.getItem('tgproxy-token')") == TOKEN

        js(cdp, session, "document.querySelector('#c-label').value = 'alice';"
           " document.querySelector('#c-kind').value = 'dd';"
           " document.querySelector('#c-quota').value = '1000000';"
           " document.querySelector('#create-btn').click(); true")
        wait_for(cdp, session, "document.querySelector('tr[data-label=\"alice\"]')",
                 "the new secret listed")
        wait_for(cdp, session, "document.querySelector('#share-label').textContent === 'alice'"
                 " && document.querySelector('#share-qr').complete"
                 " && document.querySelector('#share-qr').naturalWidth > 0", "its QR code shown")
        assert js(cdp, session, "document.querySelector('#share-qr').src").startswith("blob:")
        tme = js(cdp, session, "document.querySelector('#share-tme').textContent")
        assert tme.startswith("https://t.me/proxy?server=127.0.0.1&port="), tme

        held.append(dd_client(port))
        conn, _ = dc.accept()  # the proxy reached the DC: the client authenticated
        held.append(conn)
        wait_for(cdp, session, "document.querySelector('tr[data-label=\"file1\"]')"
                 ".children[5].textContent === '1'", "the live count of file1 going to 1")
        wait_for(cdp, session, "document.querySelector('tr[data-label=\"file1\"]')"
                 ".children[11].textContent === '1'", "file1's unique client addresses at 1")
        js(cdp, session, "document.querySelector('tr[data-label=\"file1\"]"
           " button[data-action=\"share\"]').click(); true")
        wait_for(cdp, session, "document.querySelector('#share-label').textContent === 'file1'"
                 " && [...document.querySelectorAll('#share-clients li')]"
                 ".some(li => li.textContent.startsWith('127.0.0.1 '))",
                 "file1's client address listed")

        js(cdp, session, "document.querySelector('tr[data-label=\"alice\"]"
           " button[data-action=\"disable\"]').click(); true")
        wait_for(cdp, session, "document.querySelector('tr[data-label=\"alice\"]')"
                 ".className === 'disabled'", "alice disabled")
        status, body = api(base, "GET", "/v1/secrets/alice")
        assert status == 200 and body["data"]["disabled"] is True, body

        write(conf, config(dc.getsockname()[1], token_file, state_file,
                           extra=json.dumps(HOSTILE) + " = 1\n"))
        status, body = api(base, "POST", "/v1/reload")
        assert status == 409 and HOSTILE in body["error"]["message"], body
        wait_for(cdp, session, "[...document.querySelectorAll('#reloads li')]"
                 f".some(li => li.textContent.includes({json.dumps(HOSTILE)}))",
                 "the refused reload's error shown as text")
        imgs = js(cdp, session, "document.querySelectorAll('img').length")
        assert imgs == 1, f"{imgs} img elements: the hostile text became markup"
        assert js(cdp, session, "window.pwned === undefined"), "the hostile script ran"

        screenshot(cdp, session, shot)
        print(f"panel: login, create, QR shown, live count, disable, hostile text inert;"
              f" screenshot {shot}")
        close(cdp)
        return 0
    finally:
        for s in held:
            s.close()
        dc.close()
        for p in reversed(procs):
            stop(p)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
