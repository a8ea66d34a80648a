#!/usr/bin/python3
"""An independent client against the emulator: python-telegram-bot 13.15 from Debian.

A small PTB bot (long polling through PTB's own Updater, requests encoded by PTB: JSON,
form and multipart) runs against tgbot-emulator; the test acts as the user through the
control API and checks what the bot sent: HTML parse_mode turned into entities, an inline
keyboard pressed and answered with an alert, the message edited, a document downloaded
with getFile, a document uploaded, commands set and read back, and Telegram's error
mapped by PTB to BadRequest("Chat not found").
Exits 77 (ctest: skipped) when python-telegram-bot is not installed.

usage: ptb_bot.py EMULATOR
"""
import io
import json
import subprocess
import sys
import time
import urllib.request

TOKEN = "7200001:AAHptbIndependentClientTokenAAAAAAAA"
WAIT_S = 15

try:
    import telegram
    from telegram import InlineKeyboardButton, InlineKeyboardMarkup, ParseMode
    from telegram.ext import (CallbackQueryHandler, CommandHandler, Filters, MessageHandler,
                              Updater)
except ImportError:
    print("skipped: python3-python-telegram-bot is not installed")
    sys.exit(77)


def control(base, name, body=None, query=""):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"{base}/control/{name}{query}", data=data,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=WAIT_S + 5) as r:
        return json.loads(r.read())


def wait_message(base, pred, what):
    """The first bot message in the private chat matching pred; waits on /control/events."""
    deadline = time.monotonic() + WAIT_S
    version = -1
    while time.monotonic() < deadline:
        msgs = control(base, "messages", query="?chat_id=100000001&from_bot=1")
        for m in msgs.get("messages", []):
            if pred(m):
                return m
        ev = control(base, "events", query=f"?since=999999999&version={version}&timeout_ms=2000")
        version = ev["version"]
    events = control(base, "events")["events"][-6:]
    raise AssertionError(f"{what}: not sent by the bot within {WAIT_S} s; last events:\n" +
                         "\n".join(json.dumps(e["data"])[:400] for e in events))


def on_start(update, context):
    kb = InlineKeyboardMarkup([[InlineKeyboardButton("Press", callback_data="pressed")]])
    update.message.reply_text(f"<b>Hello</b>, {update.effective_user.first_name}",
                              parse_mode=ParseMode.HTML, reply_markup=kb)


def on_press(update, context):
    update.callback_query.answer("Pressed!", show_alert=True)
    update.callback_query.edit_message_text("Done")


def on_document(update, context):
    f = context.bot.get_file(update.message.document.file_id)
    data = f.download_as_bytearray()
    update.message.reply_text(f"got {len(data)} bytes: {bytes(data).decode()}")


def on_upload(update, context):
    context.bot.send_document(update.effective_chat.id, document=io.BytesIO(b"abc"),
                              filename="x.txt", caption="file")


def on_text(update, context):
    update.message.reply_text(update.message.text.upper())


def scenario(base, bot):
    control(base, "send", {"text": "/start"})
    m = wait_message(base, lambda m: m.get("text") == "Hello, Developer", "/start answer")
    assert m["entities"] == [{"type": "bold", "offset": 0, "length": 5}], m
    ans = control(base, "press", {"message_id": m["message_id"], "data": "pressed",
                                  "wait_ms": WAIT_S * 1000})
    assert ans["answer"] == {"text": "Pressed!", "show_alert": True, "url": None}, ans
    wait_message(base, lambda x: x["message_id"] == m["message_id"] and x.get("text") == "Done"
                 and "edit_date" in x, "edit to Done")
    control(base, "document", {"file_name": "n.txt", "data": "hello world"})
    wait_message(base, lambda x: x.get("text") == "got 11 bytes: hello world", "download")
    control(base, "send", {"text": "/upload"})
    d = wait_message(base, lambda x: x.get("caption") == "file", "upload")
    assert d["document"]["file_name"] == "x.txt", d
    with urllib.request.urlopen(f"{base}/control/file?file_id={d['document']['file_id']}") as r:
        assert r.read() == b"abc"
    control(base, "send", {"text": "shout"})
    wait_message(base, lambda x: x.get("text") == "SHOUT", "echo")
    assert bot.get_me().username == "ptb_bot"
    bot.set_my_commands([("start", "Start"), ("upload", "Upload a file")])
    assert [(c.command, c.description) for c in bot.get_my_commands()] == [
        ("start", "Start"), ("upload", "Upload a file")]
    try:
        bot.send_message(chat_id=42, text="x")
        raise AssertionError("sendMessage to an unknown chat succeeded")
    except telegram.error.BadRequest as e:
        assert "Chat not found" in str(e), str(e)


def main(argv):
    emu = subprocess.Popen([argv[1], "--listen", "127.0.0.1:0", "--bot", TOKEN + ":ptb_bot"],
                           stdout=subprocess.PIPE, text=True)
    updater = None
    try:
        line = emu.stdout.readline()
        base = line[line.index("http://"):].strip().rstrip("/")
        updater = Updater(TOKEN, base_url=base + "/bot", base_file_url=base + "/file/bot",
                          use_context=True)
        dp = updater.dispatcher
        dp.add_handler(CommandHandler("start", on_start))
        dp.add_handler(CommandHandler("upload", on_upload))
        dp.add_handler(CallbackQueryHandler(on_press))
        dp.add_handler(MessageHandler(Filters.document, on_document))
        dp.add_handler(MessageHandler(Filters.text & ~Filters.command, on_text))
        updater.start_polling(poll_interval=0, timeout=1, drop_pending_updates=True)
        scenario(base, updater.bot)
        print("python-telegram-bot 13.15 against tgbot-emulator: all checks passed")
        return 0
    finally:
        if updater:
            updater.stop()
        emu.terminate()
        emu.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
