#!/usr/bin/env python3
"""Independent generator for the middle-proxy test vectors (middle_proxy.json).

Written from docs/proxy-protocol-notes.md ("Middle-proxy mode"), not from tgproxy's C code
and not from any proxy implementation. Needs Python 3 and the "cryptography" package
(Debian: python3-cryptography) for AES-256-CBC; MD5, SHA-1 and CRC32 come from the standard
library (hashlib, binascii).

Every "random" byte string is derived: det(label, n), as in gen_vectors.py.

Usage:  python3 gen_midproxy_vectors.py OUTDIR
"""
import binascii
import hashlib
import ipaddress
import json
import os
import struct
import sys

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_vectors import det  # noqa: E402  (the shared derivation of "random" bytes)


def le32(v):
    return struct.pack("<I", v & 0xFFFFFFFF)


def le64(v):
    return struct.pack("<Q", v)


# type words as little-endian 32-bit integers
NONCE, HANDSHAKE, HANDSHAKE_ERROR = 0x7ACB87AA, 0x7682EEF5, 0x6A27BEDA
PROXY_REQ, PROXY_ANS, SIMPLE_ACK = 0x36CEF1EE, 0x4403DA0D, 0x3BAC409B
CLOSE_EXT, CLOSE_CONN, PING, PONG = 0x5EB634A2, 0x1FCF425D, 0x5730A2DF, 0x8430EAA7
TL_PROXY_TAG = 0xDB1E26AE

F_NOT_ENCRYPTED, F_HAS_AD_TAG, F_MAGIC, F_EXTMODE2 = 0x2, 0x8, 0x1000, 0x20000
F_PAD, F_INTERMEDIATE, F_ABRIDGED, F_QUICKACK = 0x8000000, 0x20000000, 0x40000000, 0x80000000

PROXY_SECRET = det("tgproxy-vector/proxy-secret", 128)
AD_TAG = det("tgproxy-vector/ad-tag", 16)


def frame(seq, payload, pad16):
    """length | seq | payload | crc32(length|seq|payload), then 04 00 00 00 words to 16."""
    head = le32(len(payload) + 12) + struct.pack("<i", seq) + payload
    out = head + le32(binascii.crc32(head))
    if pad16:
        while len(out) % 16:
            out += le32(4)
    return out


def addr_bytes(ip):
    a = ipaddress.ip_address(ip)
    return a.packed


def derive(nonce_srv, nonce_clt, clt_ts, srv_ip, srv_port, clt_ip, clt_port, purpose):
    """The key and IV one direction uses; purpose b"CLIENT" (client->server) or b"SERVER"."""
    v6 = ":" in srv_ip
    if v6:
        s4 = c4 = b"\x00" * 4
    else:
        s4 = addr_bytes(srv_ip)[::-1]
        c4 = addr_bytes(clt_ip)[::-1]
    s = nonce_srv + nonce_clt + le32(clt_ts) + s4 + struct.pack("<H", clt_port) + purpose
    s += c4 + struct.pack("<H", srv_port) + PROXY_SECRET + nonce_srv
    if v6:
        s += addr_bytes(clt_ip) + addr_bytes(srv_ip)
    s += nonce_clt
    key = hashlib.md5(s[1:]).digest()[:12] + hashlib.sha1(s).digest()
    iv = hashlib.md5(s[2:]).digest()
    return key, iv, s


def cbc(key, iv):
    return Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()


def nonce_msg(key_select, schema, ts, nonce):
    return le32(NONCE) + key_select + le32(schema) + le32(ts) + nonce


def pid(ip4, port, pidn, utime):
    return addr_bytes(ip4)[::-1] + struct.pack("<HHI", port, pidn, utime)


def mapped(ip):
    a = ipaddress.ip_address(ip)
    if a.version == 4:
        return b"\x00" * 10 + b"\xff\xff" + a.packed
    return a.packed


def proxy_req(flags, conn_id, cl_ip, cl_port, my_ip, my_port, tag, payload):
    out = le32(PROXY_REQ) + le32(flags) + le64(conn_id)
    out += mapped(cl_ip) + le32(cl_port) + mapped(my_ip) + le32(my_port)
    if flags & F_HAS_AD_TAG:
        extra = le32(TL_PROXY_TAG) + bytes([len(tag)]) + tag
        while len(extra) % 4:
            extra += b"\x00"
        out += le32(len(extra)) + extra
    return out + payload


def session(name, v6, ts):
    """One client<->middle-proxy connection: nonces, keys, the first frames both ways."""
    if v6:
        clt_ip, clt_port, srv_ip, srv_port = "2001:db8::1", 50123, "2001:db8:f00::8888", 8888
    else:
        clt_ip, clt_port, srv_ip, srv_port = "192.0.2.10", 50123, "149.154.175.50", 8888
    n_clt = det("tgproxy-vector/mp/%s/nonce-client" % name, 16)
    n_srv = det("tgproxy-vector/mp/%s/nonce-server" % name, 16)
    ksel = PROXY_SECRET[:4]
    c_nonce = nonce_msg(ksel, 1, ts, n_clt)
    s_nonce = nonce_msg(ksel, 1, ts + 1, n_srv)
    ck, civ, cs = derive(n_srv, n_clt, ts, srv_ip, srv_port, clt_ip, clt_port, b"CLIENT")
    sk, siv, _ = derive(n_srv, n_clt, ts, srv_ip, srv_port, clt_ip, clt_port, b"SERVER")
    c_enc, s_enc = cbc(ck, civ), cbc(sk, siv)
    my_pid = pid("192.0.2.10", 50123, 4242, ts)
    srv_pid = pid("149.154.175.50", 8888, 7, ts - 100)
    hs_c = le32(HANDSHAKE) + le32(0) + my_pid + b"\x00" * 12
    hs_s = le32(HANDSHAKE) + le32(0) + srv_pid + my_pid
    hs_c_plain = frame(-1, hs_c, True)
    hs_s_plain = frame(-1, hs_s, True)
    payload = det("tgproxy-vector/mp/%s/payload" % name, 40)
    req = proxy_req(F_HAS_AD_TAG | F_MAGIC | F_EXTMODE2 | F_INTERMEDIATE | F_PAD,
                    0x1122334455667788, "203.0.113.7", 40000, "198.51.100.1", 443, AD_TAG,
                    payload)
    req_plain = frame(0, req, True)
    ans = le32(PROXY_ANS) + le32(0) + le64(0x1122334455667788) + payload[::-1]
    ans_plain = frame(0, ans, True)
    return {
        "name": name,
        "client_addr": {"ip": clt_ip, "port": clt_port},
        "server_addr": {"ip": srv_ip, "port": srv_port},
        "client_ts": ts,
        "nonce_client_hex": n_clt.hex(),
        "nonce_server_hex": n_srv.hex(),
        "client_nonce_frame_hex": frame(-2, c_nonce, False).hex(),
        "client_nonce_frame_padded_hex": frame(-2, c_nonce, True).hex(),
        "server_nonce_frame_hex": frame(-2, s_nonce, False).hex(),
        "derivation_input_client_hex": cs.hex(),
        "client_to_server_key_hex": ck.hex(),
        "client_to_server_iv_hex": civ.hex(),
        "server_to_client_key_hex": sk.hex(),
        "server_to_client_iv_hex": siv.hex(),
        "client_handshake_plain_hex": hs_c_plain.hex(),
        "server_handshake_plain_hex": hs_s_plain.hex(),
        "client_pid_hex": my_pid.hex(),
        "proxy_req_plain_hex": req_plain.hex(),
        "proxy_ans_plain_hex": ans_plain.hex(),
        # one CBC chain per direction across frames
        "client_wire_hex": (c_enc.update(hs_c_plain) + c_enc.update(req_plain)).hex(),
        "server_wire_hex": (s_enc.update(hs_s_plain) + s_enc.update(ans_plain)).hex(),
    }


def main(outdir):
    payload = det("tgproxy-vector/mp/req-payload", 24)
    reqs = []
    for name, flags, tag in [
        ("padded_tag", F_HAS_AD_TAG | F_MAGIC | F_EXTMODE2 | F_INTERMEDIATE | F_PAD, AD_TAG),
        ("intermediate_quickack",
         F_HAS_AD_TAG | F_MAGIC | F_EXTMODE2 | F_INTERMEDIATE | F_QUICKACK, AD_TAG),
        ("abridged_unencrypted",
         F_HAS_AD_TAG | F_MAGIC | F_EXTMODE2 | F_ABRIDGED | F_NOT_ENCRYPTED, AD_TAG),
        ("no_tag_v6", F_MAGIC | F_EXTMODE2 | F_INTERMEDIATE, b""),
    ]:
        cl = "2001:db8::77" if name.endswith("v6") else "203.0.113.7"
        me = "2001:db8::1" if name.endswith("v6") else "198.51.100.1"
        reqs.append({
            "name": name, "flags": flags, "conn_id": 0x0102030405060708,
            "client_ip": cl, "client_port": 40000, "proxy_ip": me, "proxy_port": 443,
            "ad_tag_hex": tag.hex(), "payload_hex": payload.hex(),
            "message_hex": proxy_req(flags, 0x0102030405060708, cl, 40000, me, 443, tag,
                                     payload).hex(),
        })
    answers = [
        {"name": "proxy_ans", "kind": "proxy_ans", "flags": 8, "conn_id": 0x0102030405060708,
         "payload_hex": payload.hex(),
         "message_hex": (le32(PROXY_ANS) + le32(8) + le64(0x0102030405060708) + payload).hex()},
        {"name": "simple_ack", "kind": "simple_ack", "conn_id": 0x0102030405060708,
         "confirm": 0x8a0b0c0d,
         "message_hex": (le32(SIMPLE_ACK) + le64(0x0102030405060708) + le32(0x8a0b0c0d)).hex()},
        {"name": "close_ext", "kind": "close_ext", "conn_id": 0x0102030405060708,
         "message_hex": (le32(CLOSE_EXT) + le64(0x0102030405060708)).hex()},
        {"name": "close_conn", "kind": "close_conn", "conn_id": 0x0102030405060708,
         "message_hex": (le32(CLOSE_CONN) + le64(0x0102030405060708)).hex()},
        {"name": "ping", "kind": "ping", "ping_id": 0x1d2c3b4a59687786,
         "message_hex": (le32(PING) + le64(0x1d2c3b4a59687786)).hex()},
        {"name": "pong", "kind": "pong", "ping_id": 0x1d2c3b4a59687786,
         "message_hex": (le32(PONG) + le64(0x1d2c3b4a59687786)).hex()},
    ]
    crc = [{"data_hex": d.hex(), "crc32": binascii.crc32(d)}
           for d in [b"", b"123456789", det("tgproxy-vector/mp/crc", 77)]]
    doc = {
        "description": "Middle-proxy (RPC) protocol vectors: CRC32 framing, RPC messages, "
                       "key derivation and AES-256-CBC streams. Generated by "
                       "gen_midproxy_vectors.py from docs/proxy-protocol-notes.md.",
        "proxy_secret_hex": PROXY_SECRET.hex(),
        "ad_tag_hex": AD_TAG.hex(),
        "crc32": crc,
        "proxy_req": reqs,
        "answers": answers,
        "sessions": [session("ipv4", False, 1700000000), session("ipv6", True, 1700000123)],
    }
    with open(os.path.join(outdir, "middle_proxy.json"), "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
