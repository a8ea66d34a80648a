#!/usr/bin/env python3
"""The emulator's web chat in real headless Chromium (Debian's /usr/bin/chromium).

Starts tgbot-emulator on a free port with two bots, runs the echo and inline_keyboard
examples against it, and drives Chromium over the DevTools protocol (--remote-debugging-pipe:
NUL-separated JSON on fds 3 and 4, so no WebSocket client or npm package is needed):
  1. open the page, pick the echo bot, send /start, see the reply appear;
  2. pick the counter bot, send /start, press "+1", see the same bubble edited to Count: 1;
  3. the echo bot sends a photo and an HTML document whose script would post as the user
     (issue 21, item 5): the photo shows in the chat; opening the document's URL in a tab,
     from /control/file and from /file/bot<TOKEN>/, runs none of its script (it is an
     attachment with a sandboxing CSP), so nothing is posted; the page's own CSP refuses an
     injected inline script;
  4. a page of another origin (evil.example, mapped to 127.0.0.1 by Chromium's resolver
     rules, served by a small HTTP server here) posts JSON as text/plain to /control/send,
     which browsers send without a preflight; then a second emulator takes over the port of
     such a page, as DNS rebinding would, and the page reads /control/state and posts: all
     refused (issue 21, item 6), nothing posted;
  5. save a screenshot (argv[5]).
Exits 77 (ctest: skipped) when Chromium or the examples are missing.

usage: web_chat.py EMULATOR ECHO INLINE_KEYBOARD CHROMIUM SCREENSHOT.png
"""
import http.server
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from chromium import (Cdp, close, js, open_tab, page_text, screenshot,  # noqa: E402
                      start_chromium, stop, wait_js)

ECHO_TOKEN = "7100001:AAHwebChatEchoTokenAAAAAAAAAAAAAAAAA"
COUNTER_TOKEN = "7100002:AAHwebChatCounterTokenAAAAAAAAAAAAAA"
DEADLINE_S = 240  # the whole test: a bound against a hang, not a timing (chromium under
#                   a load of 20 on 2 cores took 62 s where a quiet machine takes 11)
EVIL_HOST = ["--host-resolver-rules=MAP evil.example 127.0.0.1"]


def reload_probe(cdp, session):
    """Why a wait failed: what the page holds now, and whether a fresh reload would show it."""
    probe = cdp.call("Runtime.evaluate", {
        "expression": "(async () => { const r = await api('messages', null, chatQuery());"
                      " const before = JSON.stringify([S.shownVersion, r.version,"
                      " r.messages && r.messages.length, S.current]);"
                      " S.shownVersion = null;"
                      " try { await loadMessages(); return 'reload ok ' + before; }"
                      " catch (e) { return String(e.stack); } })()",
        "awaitPromise": True, "returnByValue": True}, session)
    return f"reloading says {probe['result'].get('value')}; {page_text(cdp, session)}"


def js_wait(cdp, session, cond, what, timeout_ms=15000):
    """Evaluate cond in the page until it is truthy (bounded); return its value."""
    return wait_js(cdp, session, cond, what, timeout_ms, why=reload_probe)


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


# Rendered on the emulator's origin, this would act as the user.
EVIL_HTML = (b"<html><body><script>window.ran = 1; fetch('/control/send', {method: 'POST',"
             b" headers: {'Content-Type': 'application/json'}, body: JSON.stringify({text:"
             b" 'pwned'})}).then(r => { window.posted = r.status; }, e => { window.posted ="
             b" String(e); });</script></body></html>")


def png_4x3():
    """A real 4x3 RGB PNG, so the page can show that the photo decoded."""
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff))
    rows = b"".join(b"\0" + b"\x20\x80\xe0" * 4 for _ in range(3))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 3, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def bot_upload(url, token, method, field, name, ctype, data):
    """A multipart Bot API upload to the Developer's chat; the answer's result."""
    b = uuid.uuid4().hex
    body = (f"--{b}\r\nContent-Disposition: form-data; name=\"chat_id\"\r\n\r\n100000001\r\n"
            f"--{b}\r\nContent-Disposition: form-data; name=\"{field}\"; filename=\"{name}\"\r\n"
            f"Content-Type: {ctype}\r\n\r\n").encode() + data + f"\r\n--{b}--\r\n".encode()
    req = urllib.request.Request(f"{url}/bot{token}/{method}", data=body, headers={
        "Content-Type": f"multipart/form-data; boundary={b}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())["result"]


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def hostile_files(cdp, session, url):
    photo = bot_upload(url, ECHO_TOKEN, "sendPhoto", "photo", "dot.png", "image/png", png_4x3())
    doc = bot_upload(url, ECHO_TOKEN, "sendDocument", "document", "invoice.html", "text/html",
                     EVIL_HTML)["document"]
    with urllib.request.urlopen(f"{url}/bot{ECHO_TOKEN}/getFile?file_id={doc['file_id']}") as r:
        doc_path = json.loads(r.read())["result"]["file_path"]
    js(cdp, session, "document.querySelector('[data-bot=\"echo_bot\"]').click(); true")
    js_wait(cdp, session, "[...document.querySelectorAll('.msg.in img')].some(i => i.complete &&"
            " i.naturalWidth === 4 && i.naturalHeight === 3)", "the photo shown in the chat")
    js_wait(cdp, session, "document.querySelector('.msg.in a.file')", "the document listed")
    # The page's CSP: an inline script injected into it does not run.
    blocked = js(cdp, session, "(() => { const s = document.createElement('script');"
                 " s.textContent = 'window.injected = 1'; document.body.appendChild(s);"
                 " return window.injected === undefined; })()")
    assert blocked, "an inline script injected into the web chat ran: no CSP"
    cdp.call("Browser.setDownloadBehavior", {"behavior": "deny"})
    # A second tab on the web chat, so the links open from the emulator's origin (as a click
    # in the chat would) and the renderer stays the same across the navigations.
    _, tab = open_tab(cdp, url + "/")
    js_wait(cdp, tab, "document.querySelector('[data-bot=\"echo_bot\"]')", "second tab loaded")
    for link in (f"{url}/control/file?file_id={doc['file_id']}",
                 f"{url}/file/bot{ECHO_TOKEN}/{doc_path}"):
        nav = cdp.call("Page.navigate", {"url": link}, tab)
        if nav.get("isDownload"):
            continue  # an attachment: downloaded (and denied), no document, nothing ran
        # Shown as a document: wait until either nothing of it runs (a sandboxed one) or its
        # script has finished posting; then say which.
        state = js_wait(cdp, tab, "document.readyState === 'complete' &&"
                        " (window.ran !== 1 || window.posted !== undefined) &&"
                        " JSON.stringify({href: location.href, ran: window.ran || 0,"
                        " posted: window.posted || null})", "the file's tab settled")
        got = json.loads(state)
        assert got["ran"] == 0 and got["posted"] is None, f"{link}: the file's script ran: {got}"
    bot_id = photo["from"]["id"]
    msgs = get_json(f"{url}/control/messages?chat_id=100000001&bot_id={bot_id}")
    texts = [m.get("text") for m in msgs["messages"]]
    assert "pwned" not in texts, f"the file's script posted as the user: {texts}"


class EvilPage(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"<!doctype html><title>evil</title><p>a page on another origin</p>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class EvilServer(http.server.ThreadingHTTPServer):
    """Keeps its connections, so stopping it closes those Chromium holds idle (preconnected
    or kept), and the next request to the port reaches whoever listens there next."""

    def server_activate(self):
        self.conns = []
        super().server_activate()

    def get_request(self):
        conn, addr = super().get_request()
        self.conns.append(conn)
        return conn, addr


def serve_evil_page():
    evil = EvilServer(("127.0.0.1", 0), EvilPage)
    threading.Thread(target=evil.serve_forever, daemon=True).start()
    return evil


def stop_evil_page(evil):
    evil.shutdown()
    evil.server_close()
    for conn in evil.conns:
        try:
            conn.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def open_evil_page(cdp, port):
    """A new tab showing the page of http://evil.example:PORT/ (resolved to 127.0.0.1)."""
    target, tab = open_tab(cdp, f"http://evil.example:{port}/")
    js_wait(cdp, tab, "document.title === 'evil'", "the foreign page loaded")
    return target, tab


def posted(url, *texts):
    """Those of texts the Developer's private chat holds (none when there is no chat)."""
    try:
        msgs = get_json(f"{url}/control/messages?chat_id=100000001")
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return []
        raise
    return [m.get("text") for m in msgs["messages"] if m.get("text") in texts]


def foreign_pages(cdp, url, emulator):
    # A simple cross-origin POST: no preflight, the answer is opaque, but it is sent.
    evil = serve_evil_page()
    try:
        target, tab = open_evil_page(cdp, evil.server_port)
        sent = cdp.call("Runtime.evaluate", {"expression": (
            f"fetch('{url}/control/send', {{method: 'POST', mode: 'no-cors', headers:"
            " {'Content-Type': 'text/plain'}, body: JSON.stringify({text: 'cross-origin'})})"
            ".then(() => 'answered', e => String(e))"), "awaitPromise": True,
            "returnByValue": True}, tab)["result"].get("value")
        assert sent == "answered", f"the cross-origin post did not reach the emulator: {sent}"
        cdp.call("Target.closeTarget", {"targetId": target})
    finally:
        stop_evil_page(evil)
    assert not posted(url, "cross-origin"), "a cross-origin text/plain post was accepted"
    # DNS rebinding: the page came from evil.example:P; then evil.example:P is answered by an
    # emulator (as when the attacker's DNS name starts resolving to 127.0.0.1), so for the
    # browser the page is same-origin with the emulator; only the Host header tells.
    evil = serve_evil_page()
    port = evil.server_port
    try:
        target, tab = open_evil_page(cdp, port)
    finally:
        stop_evil_page(evil)
    emu2, url2 = start_emulator(emulator, f"127.0.0.1:{port}")
    try:
        got = cdp.call("Runtime.evaluate", {"expression": (
            "(async () => { const s = await fetch('/control/state');"
            " const p = await fetch('/control/send', {method: 'POST', headers:"
            " {'Content-Type': 'application/json'}, body: JSON.stringify({text: 'rebound'})});"
            " return [s.status, p.status]; })()"), "awaitPromise": True,
            "returnByValue": True}, tab)
        statuses = got["result"].get("value")
        assert statuses == [421, 421], f"the rebound page used the control API: {got}"
        assert not posted(url2, "rebound"), "the rebound page posted as the user"
        cdp.call("Target.closeTarget", {"targetId": target})
    finally:
        stop(emu2)


def start_emulator(path, listen="127.0.0.1:0"):
    p = subprocess.Popen([path, "--listen", listen, "--bot", ECHO_TOKEN + ":echo_bot",
                          "--bot", COUNTER_TOKEN + ":counter_bot"], stdout=subprocess.PIPE,
                         text=True)
    line = p.stdout.readline()  # "tgbot-emulator: web chat at http://127.0.0.1:PORT/"
    if "http://" not in line:
        p.kill()
        raise RuntimeError(f"emulator did not start: {line!r}")
    return p, line[line.index("http://"):].strip().rstrip("/")


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
        browser, wfd, rfd = start_chromium(chromium, profile, EVIL_HOST)
        procs.append(browser)
        cdp = Cdp(wfd, rfd, deadline)
        _, session = open_tab(cdp, url + "/")
        scenario(cdp, session, url)
        hostile_files(cdp, session, url)
        foreign_pages(cdp, url, emulator)
        screenshot(cdp, session, shot)
        print(f"web chat: echo reply, in-place edit, photo shown, hostile file inert,"
              f" foreign and rebound pages refused; screenshot {shot}")
        close(cdp)
        return 0
    finally:
        for p in reversed(procs):
            stop(p)
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
