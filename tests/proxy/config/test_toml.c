/*
 * test_toml: the strict TOML parser behind tgproxy's config (src/proxy/config/toml.c).
 *
 * Valid documents are checked value by value; every error case is a row of
 * {document, "name:line:col: " prefix, a word of the reason}, walked by one loop.
 */
#include "tgtest.h"

#include <math.h>

#include "core/alloc.h"
#include "proxy/config/toml.h"

static const struct toml_value *get(const struct toml_table *t, const char *key)
{
    const struct toml_kv *kv = toml_table_find(t, key, strlen(key));
    return kv ? kv->value : NULL;
}

static const struct toml_table *get_table(const struct toml_table *t, const char *key)
{
    const struct toml_value *v = get(t, key);
    assert_non_null(v);
    assert_int_equal(v->type, TOML_TABLE);
    return v->u.table;
}

static void assert_str(const struct toml_value *v, const char *want, size_t want_len)
{
    assert_non_null(v);
    assert_int_equal(v->type, TOML_STRING);
    assert_int_equal(v->u.str.len, want_len);
    assert_memory_equal(v->u.str.ptr, want, want_len);
    assert_int_equal(v->u.str.ptr[want_len], '\0');
}

static void assert_int(const struct toml_value *v, int64_t want)
{
    assert_non_null(v);
    assert_int_equal(v->type, TOML_INTEGER);
    assert_true(v->u.integer == want);
}

static enum toml_status parse(struct toml_doc *doc, const char *text, char *err, size_t cap)
{
    return toml_parse(doc, "t.toml", text, strlen(text), err, cap);
}

static void test_scalars(void **state)
{
    (void)state;
    const char *text = "# comment\n"
                       "a = 1\n"
                       "b = -17 # trailing\n"
                       "c = +1_000_000\n"
                       "d = 0x_ff\n"
                       "e = 0xDEAD_beef\n"
                       "f = 0o755\n"
                       "g = 0b1101\n"
                       "h = 9223372036854775807\n"
                       "i = -9223372036854775808\n"
                       "j = true\n"
                       "k = false\n"
                       "l = 3.5\n"
                       "m = -1e3\n"
                       "n = 6.02_2e+2_3\n"
                       "o = inf\n"
                       "p = -inf\n"
                       "q = nan\n"
                       "r = 0\n"
                       "s = -0.0\n";
    struct toml_doc doc;
    char err[256];
    /* 0x_ff is invalid: '_' must sit between digits. Check that first, then parse the rest. */
    assert_int_equal(parse(&doc, text, err, sizeof err), TOML_BAD);
    assert_non_null(strstr(err, "t.toml:5:5: misplaced '_'"));
    toml_doc_cleanup(&doc);

    const char *fixed = strstr(text, "e = ");
    char buf[1024];
    snprintf(buf, sizeof buf, "a = 1\nb = -17 # trailing\nc = +1_000_000\n%s", fixed);
    assert_int_equal(parse(&doc, buf, err, sizeof err), TOML_OK);
    const struct toml_table *r = doc.root;
    assert_int(get(r, "a"), 1);
    assert_int(get(r, "b"), -17);
    assert_int(get(r, "c"), 1000000);
    assert_int(get(r, "e"), 0xDEADBEEF);
    assert_int(get(r, "f"), 0755);
    assert_int(get(r, "g"), 13);
    assert_int(get(r, "h"), INT64_MAX);
    assert_int(get(r, "i"), INT64_MIN);
    assert_int_equal(get(r, "j")->type, TOML_BOOL);
    assert_true(get(r, "j")->u.boolean);
    assert_false(get(r, "k")->u.boolean);
    assert_int_equal(get(r, "l")->type, TOML_FLOAT);
    assert_true(get(r, "l")->u.fp == 3.5);
    assert_true(get(r, "m")->u.fp == -1000.0);
    assert_true(fabs(get(r, "n")->u.fp - 6.022e23) < 1e10);
    assert_true(isinf(get(r, "o")->u.fp) && get(r, "o")->u.fp > 0);
    assert_true(isinf(get(r, "p")->u.fp) && get(r, "p")->u.fp < 0);
    assert_true(isnan(get(r, "q")->u.fp));
    assert_int(get(r, "r"), 0);
    assert_true(signbit(get(r, "s")->u.fp));
    /* Positions: line 2 of buf holds b; its value starts at column 5. */
    const struct toml_kv *kv = toml_table_find(r, "b", 1);
    assert_int_equal(kv->pos.line, 2);
    assert_int_equal(kv->pos.col, 1);
    assert_int_equal(kv->value->pos.col, 5);
    toml_doc_cleanup(&doc);
}

static void test_strings(void **state)
{
    (void)state;
    const char *text = "a = \"tab\\there \\\"q\\\" \\\\ \\u00e9 \\U0001F600\"\n"
                       "b = 'C:\\raw\\path'\n"
                       "c = \"\"\"\nline1\nline2\"\"\"\n"
                       "d = \"\"\"one \\\n     two\"\"\"\n"
                       "e = '''\nraw \\n ''x'' '''\n"
                       "f = \"\"\"\"quoted\"\"\"\"\n"
                       "g = \"nul\\u0000in\"\n"
                       "h = \"\"\n"
                       "i = '''a''''\n"
                       "j = \"caf\xC3\xA9\"\r\n"
                       "k = \"\"\"x\r\ny\"\"\"\n"
                       "l = \"\\b\\f\\n\\r\\u20AC\"\n"
                       "m = '\xF0\x9F\x98\x80 \xE2\x82\xAC'\n";
    struct toml_doc doc;
    char err[256];
    assert_int_equal(parse(&doc, text, err, sizeof err), TOML_OK);
    const struct toml_table *r = doc.root;
    const char a[] = "tab\there \"q\" \\ \xC3\xA9 \xF0\x9F\x98\x80";
    assert_str(get(r, "a"), a, sizeof a - 1);
    assert_str(get(r, "b"), "C:\\raw\\path", 11);
    assert_str(get(r, "c"), "line1\nline2", 11);
    assert_str(get(r, "d"), "one two", 7);
    assert_str(get(r, "e"), "raw \\n ''x'' ", 13);
    assert_str(get(r, "f"), "\"quoted\"", 8);
    assert_str(get(r, "g"), "nul\0in", 6);
    assert_str(get(r, "h"), "", 0);
    assert_str(get(r, "i"), "a'", 2);
    assert_str(get(r, "j"), "caf\xC3\xA9", 5);
    assert_str(get(r, "k"), "x\ny", 3);
    assert_str(get(r, "l"), "\b\f\n\r\xE2\x82\xAC", 7);
    assert_str(get(r, "m"), "\xF0\x9F\x98\x80 \xE2\x82\xAC", 8);
    /* Columns count characters, not bytes: the value after a 4-byte character. */
    const struct toml_kv *kv = toml_table_find(r, "m", 1);
    assert_int_equal(kv->value->pos.col, 5);
    toml_doc_cleanup(&doc);
}

static void test_tables_and_keys(void **state)
{
    (void)state;
    const char *text = "\xEF\xBB\xBFtop = 1\n"
                       "site.\"google.com\" = true\n"
                       "[ dcs ]\n"
                       "2 = [\"127.0.0.1:443\"]\n"
                       "-2 = [ \"[::1]:443\", # media\n"
                       "  \"10.0.0.1:443\",\n"
                       "]\n"
                       "default = []\n"
                       "[network.timeout]\n"
                       "tcp = \"5s\"\n"
                       "[network]\n"
                       "proxies = []\n"
                       "[fruit]\n"
                       "apple.color = 'red'\n"
                       "apple.taste.sweet = true\n"
                       "[fruit.apple.texture]\n"
                       "smooth = true\n"
                       "[inline]\n"
                       "point = { x = 1, y = -2, nested.deep = 'ok', arr = [1, [2, 3]] }\n"
                       "empty = {}\n"
                       "'literal key' = 0\n"
                       "\"\" = 'empty key'\n";
    struct toml_doc doc;
    char err[256];
    assert_int_equal(parse(&doc, text, err, sizeof err), TOML_OK);
    const struct toml_table *r = doc.root;
    assert_int(get(r, "top"), 1);
    assert_true(get(get_table(r, "site"), "google.com")->u.boolean);
    const struct toml_table *dcs = get_table(r, "dcs");
    assert_int_equal(dcs->n, 3);
    const struct toml_value *media = get(dcs, "-2");
    assert_int_equal(media->type, TOML_ARRAY);
    assert_int_equal(media->u.array.n, 2);
    assert_str(media->u.array.first, "[::1]:443", 9);
    assert_str(media->u.array.first->next, "10.0.0.1:443", 12);
    assert_null(media->u.array.first->next->next);
    assert_int_equal(get(dcs, "default")->u.array.n, 0);
    const struct toml_table *net = get_table(r, "network");
    assert_str(get(get_table(net, "timeout"), "tcp"), "5s", 2);
    assert_int_equal(get(net, "proxies")->type, TOML_ARRAY);
    const struct toml_table *apple = get_table(get_table(r, "fruit"), "apple");
    assert_str(get(apple, "color"), "red", 3);
    assert_true(get(get_table(apple, "texture"), "smooth")->u.boolean);
    const struct toml_table *in = get_table(r, "inline");
    const struct toml_table *pt = get_table(in, "point");
    assert_int(get(pt, "y"), -2);
    assert_str(get(get_table(pt, "nested"), "deep"), "ok", 2);
    const struct toml_value *arr = get(pt, "arr");
    assert_int_equal(arr->u.array.n, 2);
    assert_int_equal(arr->u.array.first->next->type, TOML_ARRAY);
    assert_int_equal(get_table(in, "empty")->n, 0);
    assert_int(get(in, "literal key"), 0);
    assert_str(get(in, ""), "empty key", 9);
    /* Key order is document order. */
    assert_string_equal(r->first->key, "top");
    toml_doc_cleanup(&doc);
}

struct bad_case {
    const char *text;
    const char *where; /* "t.toml:L:C: " */
    const char *why;   /* a word of the reason */
};

static const struct bad_case bad_cases[] = {
    {"a = 1\na = 2\n", "t.toml:2:1: ", "duplicate key 'a' (first defined at 1:1)"},
    {"[a]\nx=1\n[a]\n", "t.toml:3:2: ", "defined twice"},
    {"[a.b]\n[a]\n[a]\n", "t.toml:3:2: ", "defined twice"},
    {"a = 1\n[a]\n", "t.toml:2:2: ", "already holds a integer"},
    {"a = 1\n[a.b]\n", "t.toml:2:2: ", "expected a table"},
    {"a = {x = 1}\n[a]\n", "t.toml:2:2: ", "inline table"},
    {"a = {x = 1}\na.y = 2\n", "t.toml:2:1: ", "inline table"},
    {"a = {x = 1}\n[a.b]\n", "t.toml:2:2: ", "inline table"},
    {"[fruit]\napple.color = 'red'\n[fruit.apple]\n", "t.toml:3:8: ", "dotted keys"},
    {"[a.b.c]\nz = 9\n[a]\nb.c.t = 1\n", "t.toml:4:1: ", "expected a new key"},
    {"[a]\nb.c = 1\n[x]\n[a.b.d]\n[a]\n", "t.toml:5:2: ", "defined twice"},
    {"a.b = 1\na.b.c = 2\n", "t.toml:2:3: ", "already holds a integer"},
    {"[[items]]\n", "t.toml:1:2: ", "arrays of tables"},
    {"a = \"open\n", "t.toml:1:5: ", "unterminated string"},
    {"a = 'open\n", "t.toml:1:5: ", "unterminated string"},
    {"a = \"\"\"never closed\n\n", "t.toml:1:5: ", "unterminated multi-line"},
    {"a = '''x''''''\n", "t.toml:1:5: ", "more than five quotes"},
    {"a = \"bad \\q escape\"\n", "t.toml:1:10: ", "invalid escape"},
    {"a = \"\\uD800\"\n", "t.toml:1:6: ", "not a scalar value"},
    {"a = \"\\u12\"\n", "t.toml:1:6: ", "expected 4 hex digits"},
    {"a = \"\"\"x \\ y\"\"\"\n", "t.toml:1:10: ", "line-ending backslash"},
    {"a = 01\n", "t.toml:1:5: ", "leading zero"},
    {"a = 1__0\n", "t.toml:1:5: ", "misplaced '_'"},
    {"a = 10_\n", "t.toml:1:5: ", "misplaced '_'"},
    {"a = 9223372036854775808\n", "t.toml:1:5: ", "out of range"},
    {"a = -9223372036854775809\n", "t.toml:1:5: ", "out of range"},
    {"a = 0x8000000000000000\n", "t.toml:1:5: ", "out of range"},
    {"a = -0x10\n", "t.toml:1:5: ", "sign on a hex"},
    {"a = 0xg\n", "t.toml:1:5: ", "base-16"},
    {"a = 1.\n", "t.toml:1:5: ", "digits after '.'"},
    {"a = 1e\n", "t.toml:1:5: ", "exponent"},
    {"a = 1e999\n", "t.toml:1:5: ", "float out of range"},
    {"a = .5\n", "t.toml:1:5: ", "unexpected '.'"},
    {"a = 1979-05-27\n", "t.toml:1:5: ", "dates and times"},
    {"a = 07:32:00\n", "t.toml:1:5: ", "dates and times"},
    {"a = True\n", "t.toml:1:5: ", "invalid value"},
    {"a = hello\n", "t.toml:1:5: ", "invalid value"},
    {"a =\n", "t.toml:1:4: ", "expected a value"},
    {"a\n", "t.toml:1:2: ", "expected '='"},
    {"= 1\n", "t.toml:1:1: ", "expected a key"},
    {"a = 1 b = 2\n", "t.toml:1:7: ", "expected a newline"},
    {"[a] x = 1\n", "t.toml:1:5: ", "expected a newline"},
    {"[a\n", "t.toml:1:3: ", "expected ']'"},
    {"[]\n", "t.toml:1:2: ", "expected a key"},
    {"a = [1, 2\n", "t.toml:1:5: ", "unterminated array"},
    {"a = [1 2]\n", "t.toml:1:8: ", "expected ',' or ']'"},
    {"a = [,]\n", "t.toml:1:6: ", "expected a value"},
    {"a = {x = 1,}\n", "t.toml:1:12: ", "trailing comma"},
    {"a = {x = 1\n}\n", "t.toml:1:11: ", "on the same line"},
    {"a = {x = 1 y = 2}\n", "t.toml:1:12: ", "expected ',' or '}'"},
    {"a = {x = 1, x = 2}\n", "t.toml:1:13: ", "duplicate key"},
    {"\"\"\"k\"\"\" = 1\n", "t.toml:1:1: ", "multi-line string used as a key"},
    {"a = 1\r\nb = 2\rc = 3\n", "t.toml:2:6: ", "carriage return"},
    {"a = \"x\x01y\"\n", "t.toml:1:7: ", "control character U+0001"},
    {"# c\x7f\n", "t.toml:1:4: ", "control character U+007F"},
    {"a = \"\xC3\"\n", "t.toml:1:6: ", "invalid UTF-8"},
    {"a = \"\xE0\x80\xAF\"\n", "t.toml:1:6: ", "invalid UTF-8"},
    {"a = \"\xED\xA0\x80\"\n", "t.toml:1:6: ", "invalid UTF-8"},
    {"\xC3\xA9 = 1\n", "t.toml:1:1: ", "unexpected non-ASCII character"},
    {"k\xC3\xA9y = 1\n", "t.toml:1:2: ", "expected '='"},
    {"a = \"\xC3\xA9\" x\n", "t.toml:1:9: ", "expected a newline"},
    {"a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q = 1\n", "t.toml:1:33: ", "too many dotted parts"},
    {"a = '\xF0\x9F\x98\x80' b\n", "t.toml:1:9: ", "unexpected letter after value"},
    {"a = \"\xF5\x80\x80\x80\"\n", "t.toml:1:6: ", "invalid UTF-8"},
    {"a = \"\xF4\x90\x80\x80\"\n", "t.toml:1:6: ", "invalid UTF-8"},
    {"a = \"\xF0\x9F\x98\"\n", "t.toml:1:6: ", "invalid UTF-8"},
    {"a = \"\xF0\x9F\n", "t.toml:1:6: ", "invalid UTF-8"},
    {"a = \"\\U00110000\"\n", "t.toml:1:6: ", "not a scalar value"},
    {"a = 1\n[a", "t.toml:2:3: ", "unexpected end of file in table header"},
    {"a = {\n}\n", "t.toml:1:6: ", "on the same line"},
    {"a = \"\"\"x\\", "t.toml:1:5: ", "unterminated multi-line"},
    {"a = [1] [2]\n", "t.toml:1:9: ", "expected a newline"},
    {"a = 1234567890123456789012345678901234567890123456789012345678901234567890"
     "1234567890123456789012345678901234567890123456789012345678901234567890\n",
     "t.toml:1:5: ", "too long for a number"},
    {"a = +\n", "t.toml:1:5: ", "invalid value"},
    {"a = 0b102\n", "t.toml:1:5: ", "base-2"},
    {"a = 0o8\n", "t.toml:1:5: ", "base-8"},
    {"[a.b]\nc = 1\n[a.b.c]\n", "t.toml:3:6: ", "already holds a integer"},
};

static void test_errors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const struct bad_case *c = &bad_cases[i];
        struct toml_doc doc;
        char err[300];
        enum toml_status st = parse(&doc, c->text, err, sizeof err);
        if (st != TOML_BAD || strncmp(err, c->where, strlen(c->where)) != 0 ||
            !strstr(err, c->why) || !strstr(err, "expected"))
            fail_msg("case %zu: status %d, message \"%s\"; wanted \"%s...%s\"", i, (int)st, err,
                     c->where, c->why);
        assert_null(doc.root);
        toml_doc_cleanup(&doc);
    }
}

static void test_depth_and_size_limits(void **state)
{
    (void)state;
    char text[256];
    struct toml_doc doc;
    char err[256];
    /* TOML_MAX_DEPTH nested arrays are fine; one more is an error, not a stack overflow. */
    size_t o = (size_t)snprintf(text, sizeof text, "a = ");
    for (int i = 0; i < TOML_MAX_DEPTH; i++)
        text[o++] = '[';
    for (int i = 0; i < TOML_MAX_DEPTH; i++)
        text[o++] = ']';
    text[o] = '\0';
    assert_int_equal(parse(&doc, text, err, sizeof err), TOML_OK);
    toml_doc_cleanup(&doc);
    o = (size_t)snprintf(text, sizeof text, "a = ");
    for (int i = 0; i <= TOML_MAX_DEPTH; i++)
        text[o++] = '{', text[o++] = 'b', text[o++] = '=';
    text[o] = '\0';
    assert_int_equal(parse(&doc, text, err, sizeof err), TOML_BAD);
    assert_non_null(strstr(err, "nested too deep"));
    toml_doc_cleanup(&doc);

    /* Too many keys in one table. */
    size_t cap = (TOML_MAX_KEYS + 1) * 16;
    char *big = tg__malloc(cap);
    assert_non_null(big);
    o = 0;
    for (int i = 0; i <= TOML_MAX_KEYS; i++)
        o += (size_t)snprintf(big + o, cap - o, "k%d = %d\n", i, i);
    assert_int_equal(toml_parse(&doc, "big", big, o, err, sizeof err), TOML_BAD);
    assert_non_null(strstr(err, "too many keys"));
    toml_doc_cleanup(&doc);
    tg__free(big);

    /* Oversized documents are refused before parsing. */
    assert_int_equal(toml_parse(&doc, "huge", "", (size_t)TOML_MAX_INPUT + 1, err, sizeof err),
                     TOML_BAD);
    assert_non_null(strstr(err, "huge:1:1: document is"));
    toml_doc_cleanup(&doc);
}

static void test_values_never_quoted_in_errors(void **state)
{
    (void)state;
    /* An unquoted secret, a secret followed by junk, a secret with a bad escape: the error
     * names the place, never the value. */
    static const char *const docs[] = {
        "secret = ee0123456789abcdef0123456789abcdef676f6f676c652e636f6d\n",
        "secret = \"ee0123456789abcdef0123456789abcdef676f6f676c652e636f6d\" x\n",
        "secret = \"ee0123456789abcdef0123456789abcdef676f6f676c652e636f6d\\q\"\n",
        "secret = \"ee0123456789abcdef0123456789abcdef676f6f676c652e636f6d\n",
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        struct toml_doc doc;
        char err[300];
        assert_int_equal(parse(&doc, docs[i], err, sizeof err), TOML_BAD);
        assert_null(strstr(err, "0123456789abcdef"));
        assert_null(strstr(err, "ee01"));
        toml_doc_cleanup(&doc);
    }
}

static void test_type_names(void **state)
{
    (void)state;
    static const char *const want[] = {"string", "integer", "float", "boolean", "array", "table"};
    for (int t = TOML_STRING; t <= TOML_TABLE; t++)
        assert_string_equal(toml_type_name((enum toml_type)t), want[t - TOML_STRING]);
    assert_string_equal(toml_type_name((enum toml_type)0), "value");
}

static void test_out_of_memory(void **state)
{
    (void)state;
    const char *text = "a = 1\n[b.c]\nd = 'x'\ne = [1, {f = 2}]\n";
    bool saw_nomem = false;
    for (uint64_t nth = 1; nth < 64; nth++) {
        struct toml_doc doc;
        char err[256];
        tg__alloc_fail_at(nth);
        enum toml_status st = parse(&doc, text, err, sizeof err);
        tg__alloc_fail_at(0);
        assert_true(st == TOML_OK || st == TOML_NOMEM);
        if (st == TOML_NOMEM) {
            saw_nomem = true;
            assert_non_null(strstr(err, "out of memory"));
        }
        toml_doc_cleanup(&doc);
        if (st == TOML_OK)
            break;
    }
    assert_true(saw_nomem);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalars),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_tables_and_keys),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_depth_and_size_limits),
        cmocka_unit_test(test_values_never_quoted_in_errors),
        cmocka_unit_test(test_type_names),
        cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
