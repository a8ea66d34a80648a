#!/usr/bin/env python3
"""Time-zone vectors for src/bot/dispatch/tz.c, computed with Python's zoneinfo (an
independent TZif reader), never with the code under test, from the TZif files committed in
tests/fixtures/tz/ (copies of Debian tzdata 2025b; public domain), so the vectors do not
change when the machine's tzdata does.

Writes tz.txt: one vector per line,
  offset <zone> <unix seconds> <offset seconds east of UTC>
  local  <zone> <local seconds> <unix seconds>   (fold=0: the first of a repeated time,
                                                  and for a skipped time the instant as far
                                                  past the gap's start; PEP 495)
Instants cover each zone's changes in 2026 (a second before, at, after), 2037-2041 (past
the last transition of a fat TZif file: the footer rule decides), and 2100.

Run: python3 tests/vectors/gen_tz_vectors.py tests/fixtures/tz > tests/vectors/tz.txt
"""
from datetime import datetime, timedelta, timezone
import os
import sys
from zoneinfo import ZoneInfo

ZONES = ["Europe/Berlin", "America/New_York", "Australia/Sydney", "Asia/Kolkata",
         "America/Sao_Paulo", "Pacific/Chatham", "Europe/London", "Africa/Casablanca",
         "America/St_Johns", "UTC"]
UTC = timezone.utc


def offset(z, t):
    return int(datetime.fromtimestamp(t, UTC).astimezone(z).utcoffset().total_seconds())


def changes(z, start, end, step=3600):
    """Instants (unix seconds) where the offset changes, found hour by hour then by second."""
    out = []
    t = start
    prev = offset(z, t)
    while t < end:
        n = t + step
        o = offset(z, n)
        if o != prev:
            lo, hi = t, n
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if offset(z, mid) == prev:
                    lo = mid
                else:
                    hi = mid
            out.append(hi)
        prev, t = o, n
    return out


def main():
    root = sys.argv[1]
    for name in ZONES:
        with open(os.path.join(root, name), "rb") as f:
            z = ZoneInfo.from_file(f, key=name)
        instants = set()
        for year in (2026, 2037, 2038, 2040, 2041, 2100):
            s = int(datetime(year, 1, 1, tzinfo=UTC).timestamp())
            e = int(datetime(year + 1, 1, 1, tzinfo=UTC).timestamp())
            for c in changes(z, s, e):
                instants.update((c - 1, c, c + 1, c + 1800))
            instants.update((s, s + 86400 * 180))
        for t in sorted(instants):
            print(f"offset {name} {t} {offset(z, t)}")
        for t in sorted(instants):
            # local wall times around each instant: before, inside and after gaps/overlaps
            for d in (-5400, -1800, 0, 1800, 5400):
                local = datetime.fromtimestamp(t + d, UTC).replace(tzinfo=None)
                loc = datetime(local.year, local.month, local.day, local.hour, local.minute,
                               local.second, tzinfo=z, fold=0)
                local_s = int((local - datetime(1970, 1, 1)).total_seconds())
                print(f"local {name} {local_s} {int(loc.timestamp())}")


if __name__ == "__main__":
    main()
