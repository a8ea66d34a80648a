#!/usr/bin/env python3
"""The emulator's web chat in real headless Chromium (Debian's /usr/bin/chromium).

Starts tgbot-emulator on a free port with two bots, runs the echo and inline_keyboard
examples against it, and drives Chromium over the DevTools protocol (--remote-debugging-pipe:
NUL-separated JSON on fds 3 and 4, so no WebSocket client or npm package is needed):
  1. open the page, pick the echo bot, send /start, see the reply appear;
  2. pick the counter bot, send /start, press "+1", see the same bubble edited to Count: 1;
  3. save a screenshot (argv[5]).
Exits 77 (ctest: skipped) when Chromium or the examples are missing.

usage: web_chat.py EMULATOR ECHO INLINE_KEYBOARD CHROMIUM SCREENSHOT.png
"""
import base64
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

ECHO_TOKEN = "7100001:AAHwebChatEchoTokenAAAAAAAAAAAAAAAAA"
COUNTER_TOKEN = "7100002:AAHwebChatCounterTokenAAAAAAAAAAAAAA"
DEADLINE_S = 60  # the whole test
LOG = None if os.environ.get("WEB_CHAT_VERBOSE") else subprocess.DEVNULL
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
        if LOG is None:
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


def js_wait(cdp, session, cond, what, timeout_ms=15000):
    """Evaluate cond in the page until it is truthy (bounded); return its value."""
    expr = ("new Promise((ok, no) => { const t0 = Date.now(); (function check() {"
            f" let v; try {{ v = ({cond}); }} catch (e) {{ v = null; }}"
            " if (v) return ok(v);"
            f" if (Date.now() - t0 > {timeout_ms}) return no(new Error('timeout'));"
            " setTimeout(check, 50); })(); })")
    r = cdp.call("Runtime.evaluate", {"expression": expr, "awaitPromise": True,
                                      "returnByValue": True}, session)
    if "exceptionDetails" in r:
        body = cdp.call("Runtime.evaluate", {"expression": "document.body.innerText",
                                             "returnByValue": True}, session)
        # Why: what the page holds now, and whether a fresh reload would show it.
        probe = cdp.call("Runtime.evaluate", {
            "expression": "(async () => { const r = await api('messages', null, chatQuery());"
                          " const before = JSON.stringify([S.shownVersion, r.version,"
                          " r.messages && r.messages.length, S.current]);"
                          " S.shownVersion = null;"
                          " try { await loadMessages(); return 'reload ok ' + before; }"
                          " catch (e) { return String(e.stack); } })()",
            "awaitPromise": True, "returnByValue": True}, session)
        raise AssertionError(f"{what}: not seen; reloading says {probe['result'].get('value')};"
                             f" page says:\n{body['result'].get('value')}")
    return r["result"].get("value")


def js(cdp, session, expr):
    r = cdp.call("Runtime.evaluate", {"expression": expr, "returnByValue": True}, session)
    if "exceptionDetails" in r:
        raise AssertionError(f"{expr}: {r['exceptionDetails']}")
    return r["result"].get("value")


def send_in_page(cdp, session, text):
    js(cdp, session, "document.querySelector('#composer').value = " + json.dumps(text) +
       "; document.querySelector('#send').click(); true")


def scenario(cdp, session, url):
    js_wait(cdp, session, "document.querySelector('[data-bot=\"echo_bot\"]')", "echo bot listed")
    js(cdp, session, "document.querySelector('[data-bot=\"echo_bot\"]').click(); true")
    js_wait(cdp, session, "!document.querySelector('#composer').disabled", "composer enabled")
    send_in_page(cdp, session, "/start")
    js_wait(cdp, session, "[...document.querySelectorAll('.msg.in .text')]"
            ".some(e => e.textContent === '/start')", "echo reply to /start")
    js(cdp, session, "document.querySelector('[data-bot=\"counter_bot\"]').click(); true")
    send_in_page(cdp, session, "/start")
    mid = js_wait(cdp, session, "(() => { const b = document.querySelector("
                  "'.msg.in button[data-data=\"count:1\"]'); return b && "
                  "b.closest('.msg').querySelector('.text').textContent === 'Count: 0' && "
                  "b.closest('.msg').dataset.id; })()", "Count: 0 with buttons")
    js(cdp, session, "document.querySelector('.msg.in button[data-data=\"count:1\"]').click();"
       " true")
    js_wait(cdp, session, f"(() => {{ const m = document.querySelector('.msg[data-id=\"{mid}\"]');"
            " return m && m.querySelector('.text').textContent === 'Count: 1' &&"
            " m.querySelector('.edited') &&"
            " document.querySelectorAll('.msg.in').length === 1; })()",
            "the same message edited to Count: 1")


def start_emulator(path):
    p = subprocess.Popen([path, "--listen", "127.0.0.1:0", "--bot", ECHO_TOKEN + ":echo_bot",
                          "--bot", COUNTER_TOKEN + ":counter_bot"], stdout=subprocess.PIPE,
                         text=True)
    line = p.stdout.readline()  # "tgbot-emulator: web chat at http://127.0.0.1:PORT/"
    if "http://" not in line:
        p.kill()
        raise RuntimeError(f"emulator did not start: {line!r}")
    return p, line[line.index("http://"):].strip().rstrip("/")


def start_chromium(path, profile):
    cmd_r, cmd_w = os.pipe()
    res_r, res_w = os.pipe()

    def fds():
        os.dup2(cmd_r, 3)
        os.dup2(res_w, 4)

    p = subprocess.Popen([path, *FLAGS, "--user-data-dir=" + profile, "about:blank"],
                         preexec_fn=fds, pass_fds=(3, 4, cmd_r, res_w),
                         stdout=subprocess.DEVNULL, stderr=LOG)
    os.close(cmd_r)
    os.close(res_w)
    return p, cmd_w, res_r


def stop(p):
    if p and p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main(argv):
    emulator, echo, counter, chromium, shot = argv[1:6]
    for f in (emulator, echo, counter, chromium):
        if not os.access(f, os.X_OK):
            print(f"skipped: {f} is not there")
            return 77
    deadline = time.monotonic() + DEADLINE_S
    procs, profile = [], tempfile.mkdtemp(prefix="tgemu-chromium-")
    try:
        emu, url = start_emulator(emulator)
        procs.append(emu)
        for exe, token in ((echo, ECHO_TOKEN), (counter, COUNTER_TOKEN)):
            env = dict(os.environ, TELEGRAM_BOT_TOKEN=token, TELEGRAM_API_URL=url)
            procs.append(subprocess.Popen([exe], env=env, stderr=subprocess.DEVNULL))
        browser, wfd, rfd = start_chromium(chromium, profile)
        procs.append(browser)
        cdp = Cdp(wfd, rfd, deadline)
        # Attach to a blank page first, then navigate: commands sent while a target created
        # with a URL is still committing its first navigation may never be answered.
        target = cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = cdp.call("Target.attachToTarget", {"targetId": target,
                                                     "flatten": True})["sessionId"]
        cdp.call("Page.navigate", {"url": url + "/"}, session)
        scenario(cdp, session, url)
        png = cdp.call("Page.captureScreenshot", {"format": "png"}, session)["data"]
        os.makedirs(os.path.dirname(os.path.abspath(shot)), exist_ok=True)
        with open(shot, "wb") as f:
            f.write(base64.b64decode(png))
        print(f"web chat: echo reply and in-place edit seen; screenshot {shot}")
        try:
            cdp.call("Browser.close")
        except (EOFError, TimeoutError):
            pass
        return 0
    finally:
        for p in reversed(procs):
            stop(p)
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
