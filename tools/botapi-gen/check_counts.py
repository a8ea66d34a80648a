#!/usr/bin/env python3
"""Check botapi-gen's model against the independent counter (count.py).

usage: check_counts.py PAGE COUNT_PY
Compares the headline counts, every method's return type and every union's members with
their discriminator values. Exit status 0 when all agree, 1 with one line per difference.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import model as M  # noqa: E402

KEYS = ["bot_api_version", "types", "types_union", "types_with_field_table",
        "types_without_fields", "methods", "methods_with_params", "methods_without_params",
        "fields", "fields_optional", "fields_required", "fields_fixed_value", "params",
        "params_required_yes", "params_required_optional", "union_member_slots",
        "union_distinct_members"]


def main():
    page, count_py = sys.argv[1], sys.argv[2]
    ref = json.loads(subprocess.run([sys.executable, count_py, page, "--json", "--detail"],
                                    check=True, capture_output=True, text=True).stdout)
    with open(os.path.join(HERE, "overrides.json"), encoding="utf-8") as f:
        model = M.build_model(page, json.load(f))
    ours = M.counts(model)
    bad = []
    for k in KEYS:
        if ours.get(k) != ref["counts"].get(k):
            bad.append(f"{k}: ours {ours.get(k)!r}, count.py {ref['counts'].get(k)!r}")
    rets = {m["name"]: M.expr_str(m["returns"]) for m in model["methods"]}
    for name, r in ref["detail"]["method_returns"].items():
        if rets.get(name) != r:
            bad.append(f"return of {name}: ours {rets.get(name)!r}, count.py {r!r}")
    unions = {t["name"]: t for t in model["types"] if t["kind"] == "union"}
    for name, members in ref["detail"]["unions"].items():
        u = unions.get(name)
        if u is None:
            bad.append(f"union {name} missing")
            continue
        mine = [[m, f"{u['discriminator']}={u['values'][m]}" if u["discriminator"] else ""]
                for m in u["members"]]
        if mine != members:
            bad.append(f"union {name}: ours {mine}, count.py {members}")
    if len(unions) != len(ref["detail"]["unions"]):
        bad.append(f"unions: ours {len(unions)}, count.py {len(ref['detail']['unions'])}")
    for line in bad:
        print("MISMATCH " + line)
    print(f"{page}: {ours['types']} types, {ours['types_union']} unions, {ours['methods']} "
          f"methods, {ours['fields']} fields, {ours['params']} params: "
          + ("OK" if not bad else f"{len(bad)} mismatches"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
