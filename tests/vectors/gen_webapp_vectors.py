#!/usr/bin/env python3
"""Mini App initData and Login Widget vectors for src/bot/helpers/webapp.c, computed here
with Python's hmac/hashlib and the `cryptography` package (Debian python3-cryptography),
never with the code under test. Deterministic: run it again and git diff stays empty.

  python3 tests/vectors/gen_webapp_vectors.py > tests/vectors/webapp.json

The rules (core.telegram.org/bots/webapps, "Validating data received via the Mini App" and
"Validating data for Third-Party Use"; core.telegram.org/widgets/login, "Checking
authorization"):
  data-check-string = the received fields but hash, sorted by key, as key=value joined by
                      "\\n" (values percent-decoded)
  Mini App:           hash = hex(HMAC_SHA256(key=HMAC_SHA256(key="WebAppData", bot_token),
                                             data-check-string))
  third party:        signature = base64url, no padding, of Ed25519 over
                      "<bot_id>:WebAppData\\n" + the data-check-string without signature
  Login Widget:       hash = hex(HMAC_SHA256(key=SHA256(bot_token), data-check-string))
Telegram's Ed25519 private keys are Telegram's, so the signed vectors here use a key pair
derived from a label; the test passes its public key in place of Telegram's.
"""
import base64
import hashlib
import hmac
import json
import urllib.parse

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives import serialization

TOKEN = "123456:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
BOT_ID = 123456
NOW = 1780000000
SEED = hashlib.sha256(b"tgkit-vector/webapp-ed25519").digest()
KEY = Ed25519PrivateKey.from_private_bytes(SEED)
PUB = KEY.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def dcs(fields, skip):
    return "\n".join(f"{k}={v}" for k, v in sorted(fields) if k not in skip)


def webapp_hash(fields, token=TOKEN):
    secret = hmac.new(b"WebAppData", token.encode(), hashlib.sha256).digest()
    return hmac.new(secret, dcs(fields, {"hash"}).encode(), hashlib.sha256).hexdigest()


def signature(fields, bot_id=BOT_ID):
    msg = f"{bot_id}:WebAppData\n" + dcs(fields, {"hash", "signature"})
    return base64.urlsafe_b64encode(KEY.sign(msg.encode())).decode().rstrip("=")


def login_hash(fields, token=TOKEN):
    secret = hashlib.sha256(token.encode()).digest()
    return hmac.new(secret, dcs(fields, {"hash"}).encode(), hashlib.sha256).hexdigest()


def query(fields):
    return "&".join(f"{k}={urllib.parse.quote(v, safe='')}" for k, v in fields)


USER = json.dumps({"id": 279058397, "first_name": "Vlad \u00e9 + & = %", "last_name": "K",
                   "username": "vdk", "language_code": "ru", "is_premium": True,
                   "allows_write_to_pm": True,
                   "photo_url": "https://t.me/i/userpic/320/x.svg"},
                  separators=(",", ":"), ensure_ascii=False)
CHAT = json.dumps({"id": -1001234567890, "type": "supergroup", "title": "Pizza fans"},
                  separators=(",", ":"))


def signed(fields, bot_id=BOT_ID, token=TOKEN):
    """fields plus signature plus hash (the hash covers the signature, as Telegram's does)."""
    f = list(fields) + [("signature", signature(fields, bot_id))]
    return f + [("hash", webapp_hash(f, token))]


def main():
    base = [("query_id", "AAHdF6IQAAAAAN0XohDhrOrc"), ("user", USER),
            ("auth_date", str(NOW - 60)), ("start_param", "ref_42"), ("chat_type", "sender"),
            ("chat_instance", "-3788475317572404878"), ("can_send_after", "5")]
    good = signed(base)
    cases = []

    def add(name, fields, expect, **kw):
        c = {"name": name, "init_data": fields if isinstance(fields, str) else query(fields),
             "expect": expect}
        c.update(kw)
        cases.append(c)

    add("valid", good, "ok", check="both")
    add("valid, hash only", good, "ok", check="token")
    add("valid, signature only", good, "ok", check="signature")
    tampered = [(k, v.replace("ru", "en") if k == "user" else v) for k, v in good]
    add("tampered user", tampered, "hash", check="token")
    add("tampered user, signature", tampered, "signature", check="signature")
    add("wrong bot token", signed(base, token="654321:BBBdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"),
        "hash", check="token")
    add("signed for another bot", signed(base, bot_id=999), "signature", check="signature")
    old = [(k, str(NOW - 90000) if k == "auth_date" else v) for k, v in base]
    add("expired", signed(old), "expired", check="both")
    future = [(k, str(NOW + 3600) if k == "auth_date" else v) for k, v in base]
    add("from the future", signed(future), "future", check="token")
    no_hash = [(k, v) for k, v in good if k != "hash"]
    add("no hash", no_hash, "missing", check="token")
    no_sig = base + [("hash", webapp_hash(base))]
    add("no signature", no_sig, "missing", check="signature")
    add("valid without signature, hash only", no_sig, "ok", check="token")
    chat = signed([("auth_date", str(NOW)), ("chat", CHAT), ("user", USER),
                   ("receiver", json.dumps({"id": 7, "first_name": "Bob", "is_bot": False}))])
    add("chat and receiver", chat, "ok", check="both")
    dup = good + [("auth_date", str(NOW))]
    add("duplicate key", dup, "duplicate", check="token")
    add("bad percent", query(good).replace("%7B", "%7G", 1), "encoding", check="token")
    # A worked example published by the tma.js project (docs.telegram-mini-apps.com), checked
    # here with Python before use: an old auth_date, so max_age is 0 (no age check).
    published = ("query_id=AAHdF6IQAAAAAN0XohDhrOrc&user=%7B%22id%22%3A279058397%2C%22first_name"
                 "%22%3A%22Vladislav%22%2C%22last_name%22%3A%22Kibenko%22%2C%22username%22%3A"
                 "%22vdkfrost%22%2C%22language_code%22%3A%22ru%22%2C%22is_premium%22%3Atrue%7D"
                 "&auth_date=1662771648&hash=c501b71e775f74ce10e377dea85a7ea24ecd640b223ea86dfe"
                 "453e0eaed2e2b2")
    pf = urllib.parse.parse_qsl(published, strict_parsing=True)
    assert webapp_hash([kv for kv in pf if kv[0] != "hash"],
                       "5768337691:AAH5YkoiEuPk8-FZa32hStHTqXiLPtAEhx8") == dict(pf)["hash"]
    add("published example", published, "ok", check="token",
        token="5768337691:AAH5YkoiEuPk8-FZa32hStHTqXiLPtAEhx8", max_age=0)

    login = [("id", "279058397"), ("first_name", "Vlad"), ("username", "vdk"),
             ("photo_url", "https://t.me/i/userpic/320/x.jpg"), ("auth_date", str(NOW - 10))]
    logins = [
        {"name": "login valid", "query": query(login + [("hash", login_hash(login))]),
         "expect": "ok"},
        {"name": "login tampered",
         "query": query([(k, "Eve" if k == "first_name" else v) for k, v in login] +
                        [("hash", login_hash(login))]), "expect": "hash"},
        {"name": "login webapp secret",
         "query": query(login + [("hash", webapp_hash(login))]), "expect": "hash"},
    ]
    print(json.dumps({"token": TOKEN, "bot_id": BOT_ID, "now": NOW,
                      "public_key_hex": PUB.hex(), "webapp": cases, "login": logins},
                     indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
