"""botapi-gen, step 1: read the Bot API page into an intermediate model.

The page is a flat run of siblings inside <div id="dev_page_content">; each h4 owns the
blocks up to the next h3/h4. We build a tiny tree per top-level block (html.parser
events), classify h4 entries by the shape of their name, and read tables, union lists and
return-type sentences. Anything that cannot be typed raises ModelError; deliberate
exceptions live in overrides.json, each with a reason.

Python 3 standard library only.
"""

import html.parser
import re

VOID = {"br", "img", "hr", "input", "meta", "link", "col", "source", "wbr", "area", "base"}
PRIMS = {"Integer", "String", "Boolean", "True", "Float"}


class ModelError(Exception):
    pass


class Node:
    __slots__ = ("tag", "attrs", "children")

    def __init__(self, tag, attrs):
        self.tag = tag
        self.attrs = dict(attrs)
        self.children = []

    def iter(self, tag=None):
        for c in self.children:
            if isinstance(c, Node):
                if tag is None or c.tag == tag:
                    yield c
                yield from c.iter(tag)

    def kids(self, tag=None):
        return [c for c in self.children if isinstance(c, Node) and (tag is None or c.tag == tag)]

    def text(self):
        return self._render(False)

    def marked(self):
        """Text with <em> content wrapped in \\x01..\\x02 (for 'must be <em>x</em>')."""
        return self._render(True)

    def _render(self, mark_em):
        out = []
        for c in self.children:
            if isinstance(c, str):
                out.append(c)
            elif c.tag == "img":
                out.append(c.attrs.get("alt") or "")  # emoji are images with alt text
            elif c.tag == "em" and mark_em:
                out.append("\x01" + c.text() + "\x02")
            else:
                out.append(c._render(mark_em))
        return "".join(out)


class _Builder(html.parser.HTMLParser):
    """Collects the direct children of #dev_page_content as trees."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth = 0          # depth inside the content div (0 = outside)
        self.blocks = []
        self.stack = []

    def handle_starttag(self, tag, attrs):
        if self.depth == 0:
            if tag == "div" and dict(attrs).get("id") == "dev_page_content":
                self.depth = 1
            return
        node = Node(tag, attrs)
        if self.stack:
            self.stack[-1].children.append(node)
        else:
            self.blocks.append(node)
        if tag in VOID:
            return
        self.stack.append(node)
        self.depth += 1

    def handle_startendtag(self, tag, attrs):
        if self.depth == 0:
            return
        node = Node(tag, attrs)
        if self.stack:
            self.stack[-1].children.append(node)
        else:
            self.blocks.append(node)

    def handle_endtag(self, tag):
        if self.depth == 0 or tag in VOID:
            return
        if not self.stack:
            if tag == "div":
                self.depth = 0  # end of the content div
            return
        # pop to the matching open tag; stray end tags are ignored
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                self.depth = len(self.stack) + 1
                return

    def handle_data(self, data):
        if self.depth > 0 and self.stack:
            self.stack[-1].children.append(data)


# ---- type expressions ----
# {"prim": "Integer"} | {"ref": "Message"} | {"array": expr} | {"or": [expr, ...]}
# "InputFile" is a ref to the special type InputFile.

def expr_str(e):
    if "prim" in e:
        return e["prim"]
    if "ref" in e:
        return e["ref"]
    if "array" in e:
        inner = e["array"]
        if "or" in inner and inner.get("list"):
            names = [expr_str(x) for x in inner["or"]]
            return "Array of " + ", ".join(names[:-1]) + " and " + names[-1]
        return "Array of " + expr_str(inner)
    return " or ".join(expr_str(x) for x in e["or"])


def _cell_atoms(td):
    """Tokens of a Type cell: words of plain text and linked names (marked as refs)."""
    toks = []
    for c in td.children:
        if isinstance(c, str):
            for w in re.findall(r"[A-Za-z0-9]+|\S", c):
                toks.append(("w", w))
        elif c.tag == "a":
            href = c.attrs.get("href", "")
            toks.append(("ref", c.text().strip(), href))
        else:
            for w in re.findall(r"[A-Za-z0-9]+|\S", c.text()):
                toks.append(("w", w))
    return toks


def parse_type_cell(td, where, anchors):
    toks = _cell_atoms(td)
    pos = [0]

    def peek():
        return toks[pos[0]] if pos[0] < len(toks) else None

    def atom():
        t = peek()
        if t is None:
            raise ModelError(f"{where}: type cell ends early: {td.text()!r}")
        pos[0] += 1
        if t[0] == "ref":
            name, href = t[1], t[2]
            if not re.fullmatch(r"[A-Z][A-Za-z0-9]*", name):
                raise ModelError(f"{where}: bad type link {name!r}")
            anchor = href.rsplit("#", 1)[-1]
            if anchor != name.lower() or anchor not in anchors:
                raise ModelError(f"{where}: type link {name!r} -> {href!r} does not resolve")
            return {"ref": name}
        if t[1] in PRIMS:
            return {"prim": t[1]}
        raise ModelError(f"{where}: unknown type word {t[1]!r} in {td.text()!r}")

    def alt():
        t = peek()
        if t and t[0] == "w" and t[1] == "Array":
            pos[0] += 1
            nx = peek()
            if not nx or nx[1] != "of":
                raise ModelError(f"{where}: 'Array' not followed by 'of'")
            pos[0] += 1
            inner = alt()
            items = [inner]
            nx = peek()
            if nx and nx[1] == ",":
                while nx and nx[1] == ",":
                    pos[0] += 1
                    items.append(atom())
                    nx = peek()
                if not nx or nx[1] != "and":
                    raise ModelError(f"{where}: list under 'Array of' lacks 'and'")
                pos[0] += 1
                items.append(atom())
                return {"array": {"or": items, "list": True}}
            return {"array": inner}
        return atom()

    alts = [alt()]
    while peek() is not None:
        t = peek()
        if t[0] == "w" and t[1] == "or":
            pos[0] += 1
            alts.append(alt())
        else:
            raise ModelError(f"{where}: unexpected {t[1]!r} in type {td.text()!r}")
    return alts[0] if len(alts) == 1 else {"or": alts}


# ---- return types ----

RET_PRIM = {"True": "True", "Integer": "Integer", "Int": "Integer", "String": "String",
            "Boolean": "Boolean", "Float": "Float"}


def _sentences(paras, anchors_types):
    """Split prose into sentences of tokens ('t', text) / ('type', name) / ('prim', name)."""
    sents, cur = [], []
    for p in paras:
        for tok in _flat_tokens(p, anchors_types):
            if tok[0] == "t":
                parts = re.split(r"(?<=[.!?])\s+(?=[A-Z])", tok[1])
                for i, part in enumerate(parts):
                    if i > 0:
                        sents.append(cur)
                        cur = []
                    cur.append(("t", part))
            else:
                cur.append(tok)
        if cur:
            sents.append(cur)
            cur = []
    return sents


def _flat_tokens(node, anchors_types):
    for c in node.children:
        if isinstance(c, str):
            yield ("t", c)
        elif c.tag == "a":
            href = c.attrs.get("href", "")
            anchor = href.rsplit("#", 1)[-1] if "#" in href else ""
            if anchor in anchors_types:
                yield ("type", anchors_types[anchor])
            else:
                yield ("t", c.text())
        elif c.tag == "em":
            word = c.text().strip()
            if word in RET_PRIM:
                yield ("prim", RET_PRIM[word])
            else:
                yield ("t", c.text())
        elif c.tag == "img":
            yield ("t", c.attrs.get("alt") or "")
        else:
            yield from _flat_tokens(c, anchors_types)


def parse_return(name, paras, anchors_types):
    for sent in _sentences(paras, anchors_types):
        text = "".join(t[1] for t in sent if t[0] == "t")
        if not re.search(r"\breturn(s|ed)?\b", text, re.I):
            continue
        alts, prev = [], ""
        for tok in sent:
            if tok[0] == "t":
                prev = tok[1]
                continue
            e = {"prim": tok[1]} if tok[0] == "prim" else {"ref": tok[1]}
            if re.search(r"\bArray of\s*$", prev, re.I) or re.search(r"\barray of\s*$", prev):
                e = {"array": e}
            if e not in alts:
                alts.append(e)
            prev = ""
        if alts:
            return alts[0] if len(alts) == 1 else {"or": alts}
    raise ModelError(f"method {name}: no return type found in its description")


# ---- page -> entries ----

def read_blocks(path):
    with open(path, encoding="utf-8") as f:
        src = f.read()
    b = _Builder()
    b.feed(src)
    b.close()
    if not b.blocks:
        raise ModelError(f"{path}: no #dev_page_content found")
    return b.blocks


def heading_name(h):
    return h.text().strip()


def split_entries(blocks):
    """Return (version, date, entries); entries: (kind, name, anchor, [blocks])."""
    entries, cur, section = [], None, ""
    version = date = None
    for blk in blocks:
        if blk.tag == "h3":
            section = heading_name(blk)
            cur = None
            continue
        if blk.tag == "h4":
            name = heading_name(blk)
            a = next(blk.iter("a"), None)
            anchor = a.attrs.get("name", "") if a is not None else ""
            if re.fullmatch(r"[A-Z][A-Za-z0-9]*", name):
                kind = "type"
            elif re.fullmatch(r"[a-z][A-Za-z0-9]*", name):
                kind = "method"
            else:
                kind = "prose"
                if section == "Recent changes" and date is None:
                    date = name
            cur = [kind, name, anchor, []]
            entries.append(cur)
            continue
        if cur is not None:
            cur[3].append(blk)
            if version is None and cur[0] == "prose" and section == "Recent changes":
                for s in blk.iter("strong"):
                    m = re.fullmatch(r"Bot API (\d+\.\d+)", s.text().strip())
                    if m:
                        version = m.group(1)
                        break
    if version is None:
        raise ModelError("no 'Bot API X.Y' under Recent changes")
    return version, date, entries


def table_rows(table):
    head = [th.text().strip() for th in table.iter("th")]
    rows = []
    for tr in table.iter("tr"):
        tds = tr.kids("td")
        if tds:
            rows.append(tds)
    return head, rows


FIXED_RE = [re.compile(r"\balways “([^”]+)”"), re.compile(r"\bmust be \x01([^\x02]+)\x02")]


def fixed_value(desc_td):
    m = desc_td.marked()
    for rx in FIXED_RE:
        found = rx.search(m)
        if found:
            return found.group(1)
    return None


def quoted_values(desc_td):
    """Every value quoted in a description: curly or ASCII quotes, or emphasis."""
    m = desc_td.marked()
    vals = re.findall(r"“([^”]+)”", m) + re.findall(r'"([^"]+)"', m)
    vals += re.findall(r"\x01([^\x02]+)\x02", m)
    return vals


def _type_entry(name, anchor, blocks, anchors, type_names):
    t = {"name": name, "anchor": anchor, "kind": "object", "fields": [], "members": []}
    tables = [b for b in blocks if b.tag == "table"]
    lists = [b for b in blocks if b.tag == "ul"]
    if tables:
        head, rows = table_rows(tables[0])
        if head != ["Field", "Type", "Description"]:
            raise ModelError(f"type {name}: unexpected table header {head}")
        for tds in rows:
            if len(tds) != 3:
                raise ModelError(f"type {name}: row with {len(tds)} cells")
            fname = tds[0].text().strip()
            if not re.fullmatch(r"[a-z][a-z0-9_]*", fname):
                raise ModelError(f"type {name}: bad field name {fname!r}")
            where = f"{name}.{fname}"
            desc = tds[2]
            optional = desc.marked().lstrip().startswith("\x01Optional\x02")
            t["fields"].append({
                "name": fname,
                "type": parse_type_cell(tds[1], where, anchors),
                "optional": optional,
                "fixed": fixed_value(desc),
                "attach": "attach://" in desc.text(),
                "_desc": desc,
            })
        return t
    for ul in lists:
        items = ul.kids("li")
        members = []
        for li in items:
            links = li.kids("a")
            if len(links) != 1 or li.text().strip() != links[0].text().strip():
                members = None
                break
            mname = links[0].text().strip()
            if mname not in type_names:
                raise ModelError(f"union {name}: member {mname!r} is not a declared type")
            members.append(mname)
        if members:
            t["kind"] = "union"
            t["members"] = members
            return t
    t["kind"] = "input_file" if name == "InputFile" else "empty"
    return t


def _method_entry(name, anchor, blocks, anchors, anchors_types):
    m = {"name": name, "anchor": anchor, "params": []}
    before = []
    table = None
    for b in blocks:
        if b.tag == "table":
            table = b
            break
        if b.tag in ("p", "blockquote"):
            before.append(b)
    m["returns"] = parse_return(name, before, anchors_types)
    if table is not None:
        head, rows = table_rows(table)
        if head != ["Parameter", "Type", "Required", "Description"]:
            raise ModelError(f"method {name}: unexpected table header {head}")
        for tds in rows:
            if len(tds) != 4:
                raise ModelError(f"method {name}: row with {len(tds)} cells")
            pname = tds[0].text().strip()
            req = tds[2].text().strip()
            if req not in ("Yes", "Optional"):
                raise ModelError(f"method {name}.{pname}: Required is {req!r}")
            m["params"].append({
                "name": pname,
                "type": parse_type_cell(tds[1], f"{name}.{pname}", anchors),
                "optional": req == "Optional",
                "fixed": None,
                "attach": "attach://" in tds[3].text(),
                "_desc": tds[3],
            })
    return m


def build_raw(path):
    blocks = read_blocks(path)
    version, date, entries = split_entries(blocks)
    anchors = {}
    for kind, name, anchor, _ in entries:
        if kind == "prose":
            continue
        if anchor != name.lower():
            raise ModelError(f"{name}: anchor {anchor!r} is not the lower-cased name")
        if anchor in anchors:
            raise ModelError(f"duplicate anchor {anchor!r}")
        anchors[anchor] = name
    anchors_types = {a: n for a, n in anchors.items() if n[0].isupper()}
    type_names = set(anchors_types.values())
    types, methods = [], []
    for kind, name, anchor, blks in entries:
        if kind == "type":
            types.append(_type_entry(name, anchor, blks, anchors, type_names))
        elif kind == "method":
            methods.append(_method_entry(name, anchor, blks, anchors, anchors_types))
    return {"version": version, "date": date, "types": types, "methods": methods,
            "prose": [e[1] for e in entries if e[0] == "prose"]}


# ---- the finished model ----

def _snake(name):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _walk_exprs(raw):
    """Yield (owner, item) for every field and parameter."""
    for t in raw["types"]:
        for f in t["fields"]:
            yield t["name"], f
    for m in raw["methods"]:
        for p in m["params"]:
            yield m["name"], p


def _union_dispatch(name, members, types, ov, not_constant):
    """Find the discriminator of a union from its members' constant fields."""
    consts = []
    for mname in members:
        mt = types[mname]
        fx = {f["name"]: f["fixed"] for f in mt["fields"]
              if f["fixed"] is not None and f"{mname}.{f['name']}" not in not_constant}
        consts.append(fx)
    common = set(consts[0]) if consts else set()
    for fx in consts[1:]:
        common &= set(fx)
    u = {"discriminator": None, "values": {}, "strategy": None}
    if len(common) == 1:
        key = common.pop()
        u["discriminator"] = key
        u["values"] = {m: c[key] for m, c in zip(members, consts)}
        u["strategy"] = "discrim"
        vals = list(u["values"].values())
        if len(set(vals)) != len(vals) and not ov.get("duplicate_values"):
            raise ModelError(f"union {name}: discriminator values repeat; add an override")
    elif len(common) > 1:
        raise ModelError(f"union {name}: several candidate discriminators {sorted(common)}")
    if ov.get("strategy"):
        if u["strategy"] == "discrim":
            raise ModelError(f"union {name}: override strategy but the page has a discriminator")
        u["strategy"] = ov["strategy"]
    if u["strategy"] is None:
        raise ModelError(f"union {name}: no discriminator and no override strategy")
    u["also_string"] = bool(ov.get("also_string"))
    u["also_array"] = bool(ov.get("also_array"))
    return u


def _apply_enums(raw, types, ov):
    index = {}
    for owner, f in _walk_exprs(raw):
        index[f"{owner}.{f['name']}"] = f
    enums = []
    for e in ov.get("enums", []):
        values = e.get("values")
        if e.get("from_optional_fields_of"):
            src = types[e["from_optional_fields_of"]]
            values = [f["name"] for f in src["fields"] if f["optional"]]
        owners = {o for o, _ in _walk_exprs(raw)}
        # a field whose owner is absent belongs to a newer page: skip it; a missing field
        # of an existing owner means the override went stale
        targets = [(k, index.get(k)) for k in e.get("fields", []) if k.split(".")[0] in owners]
        if e.get("values_from_description") and targets and targets[0][1] is not None:
            values = []
            for v in quoted_values(targets[0][1]["_desc"]):
                if v not in values and v != "Optional":
                    values.append(v)
            if not values:
                raise ModelError(f"enum {e['name']}: {targets[0][0]} quotes no values")
        unchecked = set(e.get("unchecked_fields", []))
        targets += [(k, index.get(k)) for k in sorted(unchecked) if k.split(".")[0] in owners]
        if e.get("match_name"):
            rx = re.compile(e["match_name"])
            targets += [(k, f) for k, f in index.items() if rx.search(f["name"])]
        for key, f in targets:
            if f is None:
                raise ModelError(f"overrides: enum {e['name']}: no field or parameter {key}")
            base = f["type"]["array"] if "array" in f["type"] else f["type"]
            if base != {"prim": "String"}:
                raise ModelError(f"enum {e['name']}: {key} is {expr_str(f['type'])}, not String")
            if e.get("check", True) and key not in unchecked:
                quoted = set(quoted_values(f["_desc"]))
                missing = [v for v in values if v not in quoted]
                if missing:
                    raise ModelError(f"enum {e['name']}: {key} no longer quotes {missing}")
            f["enum"] = e["name"]
        if not targets:
            continue
        idents = [_enum_ident(e, v) for v in values]
        if len(set(idents)) != len(idents) or len(set(values)) != len(values):
            raise ModelError(f"enum {e['name']}: values or identifiers repeat")
        enums.append({"name": e["name"], "values": values, "idents": idents,
                      "fields": sorted(k for k, _ in targets), "reason": e.get("reason", "")})
    return enums


def _enum_ident(e, v):
    explicit = e.get("idents", {})
    if v in explicit:
        return explicit[v]
    if e.get("ident_style") == "codepoints":
        return "_".join("U%04X" % ord(c) for c in v)
    word = v if v.isupper() else _snake(v)
    ident = re.sub(r"[^A-Za-z0-9]+", "_", word).strip("_").upper()
    if not re.fullmatch(r"[A-Z][A-Z0-9_]*", ident):
        raise ModelError(f"enum {e['name']}: value {v!r} needs an explicit identifier")
    return ident


def _classify(e, anon_names):
    """Rewrite special shapes: chat ids, files, anonymous unions."""
    if "or" in e:
        names = [expr_str(a) for a in e["or"]]
        if names == ["Integer", "String"]:
            return {"chatid": True}
        if names == ["InputFile", "String"]:
            return {"file": True}
        key = " or ".join(names)
        if key not in anon_names:
            raise ModelError(f"anonymous union {key!r} has no name in overrides.json")
        return {"ref": anon_names[key]}
    if "array" in e:
        return {"array": _classify(e["array"], anon_names)}
    if e.get("ref") == "InputFile":
        return {"file": True}
    return e


def build_model(path, ov):
    raw = build_raw(path)
    types = {t["name"]: t for t in raw["types"]}
    not_constant = ov.get("not_constant", {})
    for key in not_constant:
        tn, fn = key.split(".")
        if tn not in types or not any(f["name"] == fn for f in types[tn]["fields"]):
            raise ModelError(f"overrides: not_constant {key} does not exist")
    # unions
    for t in raw["types"]:
        if t["kind"] == "union":
            t.update(_union_dispatch(t["name"], t["members"], types,
                                     ov.get("unions", {}).get(t["name"], {}), not_constant))
    for name in ov.get("unions", {}):
        if name not in types or types[name]["kind"] != "union":
            raise ModelError(f"overrides: {name} is not a union on this page")
    # anonymous unions
    anon_names, anon = {}, []
    for key, a in ov.get("anonymous_unions", {}).items():
        anon_names[key] = a["name"]
    used = set()
    for owner, f in _walk_exprs(raw):
        f["type"] = _classify(f["type"], anon_names)
        inner = f["type"].get("array", f["type"])
        if inner.get("ref") in anon_names.values():
            used.add(inner["ref"])
    for key, a in ov.get("anonymous_unions", {}).items():
        if a["name"] not in used:
            continue  # an older page may lack it
        members = key.split(" or ")
        u = {"name": a["name"], "anchor": None, "kind": "union", "fields": [],
             "members": members, "anonymous": True}
        u.update(_union_dispatch(a["name"], members, types, a, not_constant))
        anon.append(u)
    # constants, attach fields, enums
    for owner, f in _walk_exprs(raw):
        if f["fixed"] is not None and f"{owner}.{f['name']}" not in not_constant:
            f["const"] = f["fixed"]
        if f["attach"] and f["type"] == {"prim": "String"}:
            f["type"] = {"file": True}
    enums = _apply_enums(raw, types, ov)
    model = {"version": raw["version"], "date": raw["date"], "types": raw["types"],
             "anonymous_unions": anon, "methods": raw["methods"], "enums": enums,
             "prose": raw["prose"]}
    _check_names(model, ov)
    _mark_files(model)
    return model


def _refs(e):
    if "array" in e:
        return _refs(e["array"])
    if "or" in e:
        return [r for a in e["or"] for r in _refs(a)]
    return [e["ref"]] if "ref" in e else []


def _mark_files(model):
    """has_files: a method's params can carry an InputFile (directly or via attach://)."""
    alltypes = {t["name"]: t for t in model["types"] + model["anonymous_unions"]}
    memo = {}

    def reach(name, seen):
        if name in memo:
            return memo[name]
        if name in seen:
            return False
        seen.add(name)
        t = alltypes[name]
        r = any(_has_file(f["type"], seen) for f in t["fields"])
        r = r or any(reach(m, seen) for m in t["members"])
        memo[name] = r
        return r

    def _has_file(e, seen):
        inner = e.get("array", e)
        inner = inner.get("array", inner)
        if inner.get("file"):
            return True
        return any(reach(r, seen) for r in _refs(inner))

    for m in model["methods"]:
        m["has_files"] = any(_has_file(p["type"], set()) for p in m["params"])


C_KEYWORDS = {"auto", "break", "case", "char", "const", "continue", "default", "do", "double",
              "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long",
              "register", "restrict", "return", "short", "signed", "sizeof", "static", "struct",
              "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "bool"}


def _check_names(model, ov):
    seen = {}
    reserved = ov.get("reserved_c_names", {})
    for t in model["types"] + model["anonymous_unions"]:
        if t["kind"] == "input_file":
            continue
        c = "tg_" + _snake(t["name"])
        if c in reserved or c in seen:
            raise ModelError(f"C name {c} of {t['name']} clashes")
        seen[c] = t["name"]
        for f in t["fields"]:
            if f["name"] in C_KEYWORDS or f["name"] == "raw":
                raise ModelError(f"{t['name']}.{f['name']}: field name clashes in C")
    for m in model["methods"]:
        for c in ("tg_" + _snake(m["name"]), "tg_" + _snake(m["name"]) + "_params"):
            if c in reserved or c in seen:
                raise ModelError(f"C name {c} of method {m['name']} clashes")
            seen[c] = m["name"]


def counts(model):
    types = model["types"]
    fields = [f for t in types for f in t["fields"]]
    params = [p for m in model["methods"] for p in m["params"]]
    return {
        "bot_api_version": model["version"],
        "bot_api_date": model["date"],
        "types": len(types),
        "types_union": sum(1 for t in types if t["kind"] == "union"),
        "types_with_field_table": sum(1 for t in types if t["kind"] == "object"),
        "types_without_fields": sum(1 for t in types if t["kind"] in ("empty", "input_file")),
        "methods": len(model["methods"]),
        "methods_with_params": sum(1 for m in model["methods"] if m["params"]),
        "methods_without_params": sum(1 for m in model["methods"] if not m["params"]),
        "fields": len(fields),
        "fields_optional": sum(1 for f in fields if f["optional"]),
        "fields_required": sum(1 for f in fields if not f["optional"]),
        "fields_fixed_value": sum(1 for f in fields if f["fixed"] is not None),
        "params": len(params),
        "params_required_yes": sum(1 for p in params if not p["optional"]),
        "params_required_optional": sum(1 for p in params if p["optional"]),
        "union_member_slots": sum(len(t["members"]) for t in types),
        "union_distinct_members": len({m for t in types for m in t["members"]}),
    }


def dump(model):
    """JSON-ready copy of the model (descriptions dropped: they are Telegram's prose)."""
    def clean(x):
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items() if not k.startswith("_")}
        if isinstance(x, list):
            return [clean(v) for v in x]
        return x
    out = clean(model)
    out["counts"] = counts(model)
    for m in out["methods"]:
        m["returns_str"] = expr_str(m["returns"])
    return out
