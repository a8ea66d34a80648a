#!/usr/bin/env python3
"""Unit tests of botapi-gen's model on small synthetic pages: the shapes it must read, and
the changes it must refuse loudly instead of guessing. Run: python3 test_model.py"""
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import model as M  # noqa: E402

HEAD = """<html><body><div id="dev_page_content">
<h3>Recent changes</h3>
<h4><a class="anchor" name="may-1-2030" href="#may-1-2030"></a>May 1, 2030</h4>
<p><strong>Bot API 99.1</strong></p>
<h3>Available types</h3>
"""
TAIL = "</div><div>footer</div></body></html>"


def type_entry(name, rows):
    body = "".join(f"<tr><td>{f}</td><td>{t}</td><td>{d}</td></tr>" for f, t, d in rows)
    return (f'<h4><a class="anchor" name="{name.lower()}" href="#{name.lower()}"></a>{name}</h4>'
            f"<p>A type.</p><table class=\"table\"><thead><tr><th>Field</th><th>Type</th>"
            f"<th>Description</th></tr></thead><tbody>{body}</tbody></table>\n")


def method_entry(name, ret_html, rows=()):
    body = "".join(f"<tr><td>{p}</td><td>{t}</td><td>{r}</td><td>x</td></tr>"
                   for p, t, r in rows)
    table = ("<table class=\"table\"><thead><tr><th>Parameter</th><th>Type</th><th>Required</th>"
             f"<th>Description</th></tr></thead><tbody>{body}</tbody></table>") if rows else ""
    return (f'<h4><a class="anchor" name="{name.lower()}" href="#{name.lower()}"></a>{name}</h4>'
            f"<p>Does things. {ret_html}</p>{table}\n")


def link(name):
    return f'<a href="#{name.lower()}">{name}</a>'


USER = type_entry("User", [("id", "Integer", "Id"), ("name", "String", "<em>Optional</em>. N")])
OV = {"unions": {}, "anonymous_unions": {}, "enums": []}


def build(entries, ov=OV):
    with tempfile.NamedTemporaryFile("w", suffix=".html", delete=False, encoding="utf-8") as f:
        f.write(HEAD + "".join(entries) + TAIL)
        path = f.name
    try:
        return M.build_model(path, json.loads(json.dumps(ov)))
    finally:
        os.unlink(path)


class ModelTest(unittest.TestCase):
    def test_reads_types_methods_and_returns(self):
        m = build([USER, method_entry("getUser", f"Returns a {link('User')} object on success.",
                                      [("user_id", "Integer or String", "Yes")]),
                   method_entry("getUsers", f"On success, an Array of {link('User')} objects is "
                                            "returned."),
                   method_entry("ping", "Returns <em>True</em> on success.")])
        self.assertEqual(m["version"], "99.1")
        self.assertEqual(M.counts(m)["types"], 1)
        user = m["types"][0]
        self.assertEqual([f["optional"] for f in user["fields"]], [False, True])
        rets = {x["name"]: M.expr_str(x["returns"]) for x in m["methods"]}
        self.assertEqual(rets, {"getUser": "User", "getUsers": "Array of User", "ping": "True"})
        self.assertEqual(m["methods"][0]["params"][0]["type"], {"chatid": True})

    def test_decoy_return_sentence(self):
        m = build([USER, method_entry("getUser", "Returns an error, if the moon is full. "
                                                 f"On success, returns a {link('User')} object.")])
        self.assertEqual(m["methods"][0]["returns"], {"ref": "User"})

    def test_unknown_type_word_fails(self):
        bad = type_entry("Thing", [("size", "Integer64", "x")])
        with self.assertRaisesRegex(M.ModelError, "unknown type word 'Integer64'"):
            build([bad])

    def test_unresolved_link_fails(self):
        bad = type_entry("Thing", [("owner", '<a href="#ghost">Ghost</a>', "x")])
        with self.assertRaisesRegex(M.ModelError, "does not resolve"):
            build([bad])

    def test_missing_return_fails(self):
        with self.assertRaisesRegex(M.ModelError, "no return type"):
            build([USER, method_entry("doIt", "It is done.")])

    def test_union_discriminator_and_missing_strategy(self):
        a = type_entry("PetCat", [("kind", "String", "Kind, always “cat”")])
        b = type_entry("PetDog", [("kind", "String", "Kind, must be <em>dog</em>")])
        union = ('<h4><a class="anchor" name="pet" href="#pet"></a>Pet</h4><p>One of</p>'
                 f"<ul><li>{link('PetCat')}</li><li>{link('PetDog')}</li></ul>\n")
        m = build([union, a, b])
        pet = next(t for t in m["types"] if t["name"] == "Pet")
        self.assertEqual(pet["discriminator"], "kind")
        self.assertEqual(pet["values"], {"PetCat": "cat", "PetDog": "dog"})
        plain = type_entry("PetFish", [("fins", "Integer", "x")])
        union2 = union.replace("</ul>", f"<li>{link('PetFish')}</li></ul>")
        with self.assertRaisesRegex(M.ModelError, "no discriminator and no override"):
            build([union2, a, b, plain])

    def test_anonymous_union_needs_a_name(self):
        t = type_entry("Box", [("item", f"{link('User')} or {link('Tag')}", "x")])
        tag = type_entry("Tag", [("label", "String", "x")])
        with self.assertRaisesRegex(M.ModelError, "has no name in overrides"):
            build([USER, t, tag])

    def test_stale_enum_override_fails(self):
        ov = dict(OV, enums=[{"name": "Color", "fields": ["User.name"], "values": ["red"]}])
        with self.assertRaisesRegex(M.ModelError, "no longer quotes"):
            build([USER], ov)


class DefaultsTest(unittest.TestCase):
    """The rows a bot-wide default fills (tg_bot_set_defaults): TG__FIELD_DEF with the
    parse mode's entities and text, only in method params and types a call sends."""

    def test_marks_params_and_sent_types_only(self):
        import botapi_gen as G
        ent = type_entry("MessageEntity", [("offset", "Integer", "x")])
        lpo = type_entry("LinkPreviewOptions", [("is_disabled", "Boolean", "<em>Optional</em>. x")])
        opt = "<em>Optional</em>. x"
        content = type_entry("InputTextContent", [
            ("message_text", "String", "x"), ("parse_mode", "String", opt),
            ("entities", f"Array of {link('MessageEntity')}", opt),
            ("link_preview_options", link("LinkPreviewOptions"), opt)])
        received = type_entry("Received", [
            ("text", "String", "x"), ("link_preview_options", link("LinkPreviewOptions"), opt),
            ("quote_parse_mode", "String", opt)])
        send = method_entry("sendThing", "Returns <em>True</em> on success.", [
            ("caption", "String", "Optional"), ("parse_mode", "String", "Optional"),
            ("caption_entities", f"Array of {link('MessageEntity')}", "Optional"),
            ("protect_content", "Boolean", "Optional"),
            ("disable_notification", "Boolean", "Optional"),
            ("content", link("InputTextContent"), "Optional")])
        get = method_entry("getReceived", f"Returns a {link('Received')} object.")
        ov = dict(OV, enums=[{"name": "ParseMode", "match_name": "(^|_)parse_mode$",
                              "values": ["HTML"], "check": False, "reason": "test"}])
        g = G.Gen(build([ent, lpo, content, received, send, get], ov))
        self.assertIn("InputTextContent", g.sent)
        self.assertNotIn("Received", g.sent)
        params = g.m["methods"][0]["params"]
        rows = [g.field_row("P", f, params) for f in params]
        self.assertIn("TG__FIELD_DEF(P, parse_mode, TG__K_ENUM, TG__F_OPT, &tg__e_parse_mode, "
                      "TG__D_PARSE_MODE, 3, 1)", rows)  # caption_entities keeps it out
        self.assertIn("TG__D_PROTECT, 0, 0)", rows[3])
        self.assertIn("TG__D_SILENT, 0, 0)", rows[4])
        self.assertTrue(rows[0].startswith("TG__FIELD(") and rows[5].startswith("TG__FIELD("))
        types = g.emit_types_c()
        self.assertIn("TG__FIELD_DEF(tg_input_text_content, parse_mode, TG__K_ENUM, TG__F_OPT, "
                      "&tg__e_parse_mode, TG__D_PARSE_MODE, 3, 1)", types)
        self.assertIn("TG__FIELD_DEF(tg_input_text_content, link_preview_options", types)
        self.assertNotIn("TG__FIELD_DEF(tg_received", types)  # received only, never sent


if __name__ == "__main__":
    unittest.main()
