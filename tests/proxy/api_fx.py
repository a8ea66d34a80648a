"""Helpers shared by the control API's Python tests (panel.py, openapi.py)."""
import os
import re
import time


def write(path, text):
    """Write path whole (a temporary and a rename), mode 0600: a daemon never reads half."""
    with open(path + ".new", "w") as f:
        f.write(text)
    os.chmod(path + ".new", 0o600)
    os.rename(path + ".new", path)


def wait_log(path, pattern, deadline):
    """The first match of pattern in the log at path, polled until deadline (monotonic)."""
    while time.monotonic() < deadline:
        with open(path) as f:
            m = re.search(pattern, f.read())
        if m:
            return m
        time.sleep(0.05)  # polling a log file for a line, bounded by the deadline
    with open(path) as f:
        raise AssertionError(f"no {pattern!r} in the log:\n{f.read()}")
