#!/usr/bin/env python3
"""The control API's OpenAPI 3.1 document (/v1/openapi.json) against the real answers.

Runs the built tgproxy with [api], fetches the document from it (so the served copy is the
one checked), checks its shape (OpenAPI 3.1, every operation with responses) and every
schema in it against the JSON Schema 2020-12 meta-schema (jsonschema, Debian's
python3-jsonschema: an independent implementation), then calls every endpoint (and the error cases) and validates each answer's body with
jsonschema against the schema the document gives for that path, method and status; a
status the document does not list for the operation fails too. Every path of the document
must have been called.

usage: openapi.py TGPROXY
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import jsonschema

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from api_fx import wait_log  # noqa: E402


def validate_spec(spec):
    assert spec["openapi"].startswith("3.1."), spec["openapi"]
    assert spec["info"]["title"] and spec["info"]["version"]
    for name, schema in spec["components"]["schemas"].items():
        jsonschema.Draft202012Validator.check_schema(schema)
    for path, ops in spec["paths"].items():
        assert path.startswith("/v1/"), path
        for method, op in ops.items():
            assert method in ("get", "post", "patch", "delete"), (path, method)
            assert op["responses"], (path, method)
            for status, resp in op["responses"].items():
                for media in resp["content"].values():
                    jsonschema.Draft202012Validator.check_schema(
                        dict(media["schema"], components=spec["components"]))

TOKEN = "openapi-test-token-42"
DEADLINE_S = 60




class Api:
    def __init__(self, base, spec):
        self.base, self.spec, self.called = base, spec, set()

    def call(self, method, path, template, body=None, token=TOKEN, want=None, headers=None):
        req = urllib.request.Request(self.base + path, method=method, headers=dict(headers or {}))
        if token:
            req.add_header("Authorization", "Bearer " + token)
        if body is not None:
            req.data = json.dumps(body).encode()
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                status, ctype, raw = r.status, r.headers["Content-Type"], r.read()
        except urllib.error.HTTPError as e:
            status, ctype, raw = e.code, e.headers["Content-Type"], e.read()
        if want is not None and status != want:
            raise AssertionError(f"{method} {path}: {status}, want {want}: {raw[:300]!r}")
        op = self.spec["paths"][template][method.lower()]
        resp = op["responses"].get(str(status))
        if resp is None:
            raise AssertionError(f"{method} {template}: status {status} is not in the document")
        media = resp["content"]
        if ctype not in media:
            raise AssertionError(f"{method} {template} {status}: type {ctype} not documented")
        self.called.add(template)
        if ctype != "application/json":
            return raw
        doc = json.loads(raw)
        schema = dict(media[ctype]["schema"], components=self.spec["components"])
        try:
            jsonschema.Draft202012Validator(schema).validate(doc)
        except jsonschema.ValidationError as e:
            raise AssertionError(f"{method} {path} {status}: {e.message}\n{raw[:500]!r}")
        return doc


def main(argv):
    tgproxy = argv[1]
    deadline = time.monotonic() + DEADLINE_S
    work = tempfile.mkdtemp(prefix="tgproxy-openapi-")
    proc = None
    try:
        token_file, state = os.path.join(work, "api.token"), os.path.join(work, "api.json")
        conf, log = os.path.join(work, "proxy.toml"), os.path.join(work, "log")
        with open(token_file, "w") as f:
            f.write(TOKEN + "\n")
        os.chmod(token_file, 0o600)
        with open(conf, "w") as f:
            f.write("bind-to = \"127.0.0.1:0\"\n[secrets]\n"
                    "file1 = \"dd000102030405060708090a0b0c0d0e0f\"\n"
                    "[domain-fronting]\nhost = \"127.0.0.1\"\nport = 9\n"
                    "[api]\nenabled = true\nbind-to = \"127.0.0.1:0\"\n"
                    f"token-file = \"{token_file}\"\nstate-file = \"{state}\"\n"
                    "max-body = 2048\nauth-failures-per-minute = 5\n")
        os.chmod(conf, 0o600)
        with open(log, "w") as lf:
            proc = subprocess.Popen([tgproxy, "run", conf], stdout=lf, stderr=lf)
        base = wait_log(log, r"\[api\] serving (http://127\.0\.0\.1:\d+)/", deadline).group(1)
        with urllib.request.urlopen(base + "/v1/openapi.json", timeout=10) as r:
            assert r.headers["Content-Type"] == "application/json"
            spec = json.load(r)
        validate_spec(spec)
        a = Api(base, spec)
        a.call("GET", "/v1/health", "/v1/health", token=None, want=200)
        a.call("GET", "/v1/ready", "/v1/ready", token=None, want=200)
        a.call("GET", "/v1/info", "/v1/info", want=200)
        a.call("GET", "/v1/info", "/v1/info", token="wrong", want=401)
        a.call("GET", "/v1/secrets", "/v1/secrets", want=200)
        made = a.call("POST", "/v1/secrets", "/v1/secrets", want=201,
                      body={"label": "alice", "kind": "ee", "domain": "example.com",
                            "limits": {"quota": 1000000}})
        assert made["data"]["key"].startswith("ee")
        a.call("POST", "/v1/secrets", "/v1/secrets", want=201, body={"label": "bob", "kind": "dd"})
        a.call("POST", "/v1/secrets", "/v1/secrets", want=409, body={"label": "bob", "kind": "dd"})
        a.call("POST", "/v1/secrets", "/v1/secrets", want=400, body={"label": "x", "kind": "zz"})
        a.call("POST", "/v1/secrets", "/v1/secrets", want=413, body={"label": "y" * 3000})
        t = "/v1/secrets/{label}"
        a.call("GET", "/v1/secrets/alice", t, want=200)
        a.call("GET", "/v1/secrets/nobody", t, want=404)
        a.call("PATCH", "/v1/secrets/alice", t, want=200, body={"limits": {"max-connections": 3}})
        a.call("PATCH", "/v1/secrets/alice", t, want=200,
               body={"ad_tag": "00112233445566778899aabbccddeeff"})
        a.call("PATCH", "/v1/secrets/alice", t, want=400, body={"ad_tag": "12"})
        a.call("PATCH", "/v1/secrets/alice", t, want=409, body={"limits": {}},
               headers={"If-Match": "\"1\""})
        a.call("PATCH", "/v1/secrets/file1", t, want=409, body={"limits": {}})
        for act in ("stats", "link"):
            a.call("GET", f"/v1/secrets/alice/{act}", t + "/" + act, want=200)
        a.call("GET", "/v1/secrets/alice/stats?scope=local", t + "/stats", want=200)
        a.call("GET", "/v1/secrets/alice/stats?scope=fleet", t + "/stats", want=400)  # no [fleet]
        a.call("GET", "/v1/secrets?scope=fleet", "/v1/secrets", want=400)
        svg = a.call("GET", "/v1/secrets/alice/qr.svg", t + "/qr.svg", want=200)
        assert svg.startswith(b"<svg")
        png = a.call("GET", "/v1/secrets/alice/qr.png", t + "/qr.png", want=200)
        assert png.startswith(b"\x89PNG")
        a.call("POST", "/v1/secrets/alice/reset-quota", t + "/reset-quota", want=200)
        a.call("POST", "/v1/secrets/bob/reset-quota", t + "/reset-quota", want=409)
        for act in ("disable", "enable", "rotate"):
            a.call("POST", f"/v1/secrets/alice/{act}", t + "/" + act, want=200)
        a.call("POST", "/v1/secrets/file1/disable", t + "/disable", want=200)
        a.call("GET", "/v1/secrets", "/v1/secrets", want=200)  # a disabled file secret listed
        a.call("POST", "/v1/secrets/file1/enable", t + "/enable", want=200)
        a.call("DELETE", "/v1/secrets/bob", t, want=200)
        a.call("POST", "/v1/reload", "/v1/reload", want=200)
        a.call("GET", "/v1/info", "/v1/info", want=200)  # with recent reloads
        a.call("POST", "/v1/drain", "/v1/drain", want=202)
        a.call("GET", "/v1/ready", "/v1/ready", token=None, want=503)
        missing = set(spec["paths"]) - a.called
        assert not missing, f"documented but never called: {sorted(missing)}"
        print(f"openapi: document valid; {len(a.called)} paths checked against real answers")
        return 0
    except BaseException:
        # the daemon's own words say why it stopped answering (a sanitizer report, an abort)
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)
            print(f"tgproxy exited with {proc.returncode}; its log:", file=sys.stderr)
            with open(log, errors="replace") as lf:
                sys.stderr.write(lf.read()[-20000:])
        raise
    finally:
        if proc and proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
