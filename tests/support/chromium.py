"""Headless Chromium (Debian's /usr/bin/chromium) driven over the DevTools protocol, for the
browser tests (tests/emulator/web_chat.py, tests/proxy/panel.py).

Chromium is started with --remote-debugging-pipe: the protocol is NUL-separated JSON on its
fds 3 (commands) and 4 (answers), so no WebSocket client or npm package is needed. Every
wait is bounded: by the deadline given to Cdp, and by timeout_ms in the page for wait_js.
Set CDP_VERBOSE=1 (or WEB_CHAT_VERBOSE=1) to see Chromium's stderr and the answers read.

Import it with tests/support on sys.path (the tests put it there from their own path, so
this works from any build directory of a clean clone).
"""
import base64
import json
import os
import select
import subprocess
import sys
import time

VERBOSE = bool(os.environ.get("CDP_VERBOSE") or os.environ.get("WEB_CHAT_VERBOSE"))
LOG = None if VERBOSE else subprocess.DEVNULL
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1400,800", "--remote-debugging-pipe"]


class Cdp:
    """Chrome DevTools protocol over the pipe: one request at a time, events skipped."""

    def __init__(self, wfd, rfd, deadline):
        self.w, self.r, self.deadline, self.next_id, self.buf = wfd, rfd, deadline, 0, b""

    def _read_one(self):
        while b"\0" not in self.buf:
            left = self.deadline - time.monotonic()
            if left <= 0 or not select.select([self.r], [], [], left)[0]:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self.r, 1 << 16)
            if not chunk:
                raise EOFError("chromium closed the DevTools pipe")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        if VERBOSE:
            print("cdp <-", msg[:300], file=sys.stderr)
        return json.loads(msg)

    def call(self, method, params=None, session=None):
        self.next_id += 1
        req = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            req["sessionId"] = session
        os.write(self.w, json.dumps(req).encode() + b"\0")
        while True:
            m = self._read_one()
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m["result"]


def start_chromium(path, profile, extra_flags=()):
    """Chromium at path with a fresh profile directory; (process, command fd, answer fd)."""
    cmd_r, cmd_w = os.pipe()
    res_r, res_w = os.pipe()

    def fds():
        os.dup2(cmd_r, 3)
        os.dup2(res_w, 4)

    p = subprocess.Popen([path, *FLAGS, *extra_flags, "--user-data-dir=" + profile,
                          "about:blank"], preexec_fn=fds, pass_fds=(3, 4, cmd_r, res_w),
                         stdout=subprocess.DEVNULL, stderr=LOG)
    os.close(cmd_r)
    os.close(res_w)
    return p, cmd_w, res_r


def stop(p):
    """Terminate a process (any child of the test), kill it if it does not go in 10 s."""
    if p and p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def open_tab(cdp, url):
    """A new tab navigated to url; (target id, session id)."""
    # Attach to a blank page first, then navigate: commands sent while a target created
    # with a URL is still committing its first navigation may never be answered.
    target = cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = cdp.call("Target.attachToTarget", {"targetId": target,
                                                 "flatten": True})["sessionId"]
    cdp.call("Page.navigate", {"url": url}, session)
    return target, session


def js(cdp, session, expr):
    """The value of expr in the page; an exception in it fails the test."""
    r = cdp.call("Runtime.evaluate", {"expression": expr, "returnByValue": True}, session)
    if "exceptionDetails" in r:
        raise AssertionError(f"{expr}: {r['exceptionDetails']}")
    return r["result"].get("value")


def page_text(cdp, session):
    return "the page says:\n" + str(js(cdp, session, "document.body.innerText"))


def wait_js(cdp, session, cond, what, timeout_ms=15000, why=page_text):
    """Evaluate cond in the page until it is truthy (polled there every 50 ms, at most
    timeout_ms); return its value. When it never is: AssertionError "WHAT: not seen; " and
    why(cdp, session) (by default the page's text)."""
    expr = ("new Promise((ok, no) => { const t0 = Date.now(); (function check() {"
            f" let v; try {{ v = ({cond}); }} catch (e) {{ v = null; }}"
            " if (v) return ok(v);"
            f" if (Date.now() - t0 > {timeout_ms}) return no(new Error('timeout'));"
            " setTimeout(check, 50); })(); })")
    r = cdp.call("Runtime.evaluate", {"expression": expr, "awaitPromise": True,
                                      "returnByValue": True}, session)
    if "exceptionDetails" in r:
        raise AssertionError(f"{what}: not seen; {why(cdp, session)}")
    return r["result"].get("value")


def screenshot(cdp, session, path):
    """Save the tab as a PNG at path (its directory made when missing)."""
    png = cdp.call("Page.captureScreenshot", {"format": "png"}, session)["data"]
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "wb") as f:
        f.write(base64.b64decode(png))


def close(cdp):
    """Ask Chromium to close; it may go before it answers."""
    try:
        cdp.call("Browser.close")
    except (EOFError, TimeoutError):
        pass
