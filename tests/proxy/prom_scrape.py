#!/usr/bin/env python3
"""Scrape a tgproxy metrics page and parse it with an independent, strict parser.

Usage: prom_scrape.py URL PREFIX [DOCS]
Fetches URL (urllib), checks the content type, parses the body with Debian's
python3-prometheus-client text parser and checks the naming rules tgproxy promises:
every family has HELP and TYPE, carries PREFIX, counters end in _total, no label holds
anything but [A-Za-z0-9_.-] (a histogram's le: a number or +Inf), each histogram series
has its buckets in increasing le, cumulative (never decreasing), ending in +Inf equal to
its _count, and a _sum, and every value is printed as an integer when whole, else in the
shortest form that reads back exactly. With DOCS (docs/tgproxy.md), every family must
also have its row in the "### Metrics" table there: an operator never has to read the
source; a family of the "### mtg's metric names" table there (names = "mtg") may stand
instead, and an mtg counter may lack _total, as mtg's own page had it. Prints one line per sample, "name{k=v,...} value" with labels sorted, for the C
test to compare; exits 1 with a reason on any violation.
"""
import re
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def fail(why):
    print("prom_scrape: " + why, file=sys.stderr)
    sys.exit(1)


def check_histogram(fam):
    """Buckets per series (labels without le) in order, cumulative, +Inf == _count."""
    series = {}
    for s in fam.samples:
        key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
        h = series.setdefault(key, {"buckets": [], "sum": None, "count": None})
        if s.name == fam.name + "_bucket":
            h["buckets"].append((s.labels["le"], s.value))
        elif s.name == fam.name + "_sum":
            h["sum"] = s.value
        elif s.name == fam.name + "_count":
            h["count"] = s.value
        else:
            fail("histogram %s: stray sample %s" % (fam.name, s.name))
    for key, h in series.items():
        where = "%s%s" % (fam.name, dict(key))
        b = h["buckets"]
        if not b or b[-1][0] != "+Inf":
            fail("%s: no +Inf bucket last" % where)
        bounds = [float(le) for le, _ in b]
        if any(x >= y for x, y in zip(bounds, bounds[1:])):
            fail("%s: le not increasing" % where)
        if any(x > y for (_, x), (_, y) in zip(b, b[1:])):
            fail("%s: buckets not cumulative" % where)
        if h["count"] is None or h["sum"] is None:
            fail("%s: _count or _sum missing" % where)
        if h["count"] != b[-1][1]:
            fail("%s: _count %g != +Inf bucket %g" % (where, h["count"], b[-1][1]))


def digits(token):
    """Significant digits of a decimal number's text: 0.0070 -> '7', 1.5e-07 -> '15'."""
    mant = re.split(r"[eE]", token.lstrip("+-"))[0].replace(".", "")
    return mant.strip("0") or "0"


def check_number(line):
    """A sample's value is printed as tgproxy promises: a whole number as an integer, any
    other in the shortest form that reads back exactly (as Python's repr, an independent
    shortest round-trip printer), NaN and infinities as NaN, +Inf, -Inf."""
    token = line.rsplit(" ", 1)[-1]
    if token in ("NaN", "+Inf", "-Inf"):
        return
    v = float(token)
    if v == int(v) and abs(v) < 9.2e18:
        if not re.fullmatch(r"-?[0-9]+", token) or int(token) != int(v):
            fail("%r: a whole number not printed as an integer" % line)
    elif digits(token) != digits(repr(v)) or float(token) != v:
        fail("%r: not the shortest exact form (%s)" % (line, repr(v)))


def documented(path, heading="Metrics"):
    """Family names (without prefix) of the rows of the '### HEADING' table in path."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if "\n### %s\n" % heading not in text:
        fail("no '### %s' section in %s" % (heading, path))
    section = text.split("\n### %s\n" % heading, 1)[-1].split("\n#", 1)[0]
    return set(re.findall(r"^\| `([a-z_]+)` \|", section, re.M))


def main():
    url, prefix = sys.argv[1], sys.argv[2]
    docs = documented(sys.argv[3]) if len(sys.argv) > 3 else None
    mtg = documented(sys.argv[3], "mtg's metric names") if len(sys.argv) > 3 else set()
    with urllib.request.urlopen(url, timeout=10) as r:
        ctype = r.headers.get("Content-Type", "")
        body = r.read().decode("utf-8")
    if not ctype.startswith("text/plain; version=0.0.4"):
        fail("content type %r" % ctype)
    helps = set(re.findall(r"^# HELP (\S+) ", body, re.M))
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", body, re.M))
    if helps != set(types):
        fail("HELP and TYPE lines differ")
    for line in body.splitlines():
        if line and not line.startswith("#"):
            check_number(line)
    for name, kind in types.items():
        if not name.startswith(prefix + "_"):
            fail("%s lacks the prefix" % name)
        base = name[len(prefix) + 1:]
        is_mtg = base in mtg or (base.endswith("_total") and base[:-6] in mtg)
        if kind == "counter" and not name.endswith("_total") and not is_mtg:
            fail("counter %s does not end in _total" % name)
        if docs is not None and base not in docs and not is_mtg:
            fail("%s is not in the Metrics table of %s" % (name, sys.argv[3]))
    n = 0
    for fam in text_string_to_metric_families(body):
        if fam.type == "histogram":
            check_histogram(fam)
        for s in fam.samples:
            for k, v in s.labels.items():
                ok = re.fullmatch(r"[A-Za-z0-9_.-]+", v)
                if k == "le" and fam.type == "histogram":
                    ok = v == "+Inf" or re.fullmatch(r"[0-9]+(\.[0-9]+)?(e-?[0-9]+)?", v)
                if not ok:
                    fail("label %s=%r" % (k, v))
            labels = ",".join("%s=%s" % kv for kv in sorted(s.labels.items()))
            print("%s{%s} %.17g" % (s.name, labels, s.value))
            n += 1
    if n == 0:
        fail("no samples")


if __name__ == "__main__":
    main()
