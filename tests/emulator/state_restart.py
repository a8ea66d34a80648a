#!/usr/bin/env python3
"""tgbot-emulator --state FILE across a restart: what a user sent and what a bot set up
(commands, a group) is there after SIGTERM and a new start with the same --state and --bot,
and message ids go on where they stopped. The file is private (0600).

usage: state_restart.py EMULATOR
"""
import json
import os
import stat
import subprocess
import sys
import tempfile
import urllib.request

TOKEN = "7500001:AAHrestartTestTokenAAAAAAAAAAAAAAAAA"


def start(emulator, state):
    p = subprocess.Popen([emulator, "--listen", "127.0.0.1:0", "--state", state,
                          "--bot", TOKEN + ":restart_bot"], stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    return p, line[line.index("http://"):].strip().rstrip("/")


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def stop(p):
    p.terminate()
    assert p.wait(timeout=10) == 0, "the emulator did not exit cleanly"


def main(argv):
    with tempfile.TemporaryDirectory() as d:
        state = os.path.join(d, "world.json")
        p, base = start(argv[1], state)
        try:
            assert post(base + "/control/send", {"text": "before"})["ok"]
            assert post(f"{base}/bot{TOKEN}/setMyCommands",
                        {"commands": [{"command": "go", "description": "Go"}]})["ok"]
            assert post(base + "/control/chats", {"type": "supergroup", "title": "Kept"})["ok"]
        finally:
            stop(p)
        assert stat.S_IMODE(os.stat(state).st_mode) == 0o600
        p, base = start(argv[1], state)
        try:
            with urllib.request.urlopen(base + "/control/messages?chat_id=100000001") as r:
                msgs = json.loads(r.read())["messages"]
            assert [m["text"] for m in msgs] == ["before"], msgs
            cmds = post(f"{base}/bot{TOKEN}/getMyCommands", {})["result"]
            assert cmds == [{"command": "go", "description": "Go"}], cmds
            with urllib.request.urlopen(base + "/control/state") as r:
                chats = [c["chat"].get("title") for c in json.loads(r.read())["chats"]]
            assert "Kept" in chats, chats
            again = post(base + "/control/send", {"text": "after"})["message"]
            assert again["message_id"] == 2, again
        finally:
            stop(p)
    print("state file: the world survived a restart")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
