/*
 * parse_mode as Telegram applies it: HTML and MarkdownV2 into plain text and entities
 * (offsets and lengths in UTF-16 code units), Telegram's errors for bad markup, and the
 * entities found in plain text. One table row per case: mode, input, expected text and
 * entities ("type@offset+length" joined by spaces) or the expected error.
 */
#include "tgtest.h"

#include "emulator/emu.h"

#define H TG_PARSE_MODE_HTML
#define M TG_PARSE_MODE_MARKDOWN_V2

static const struct {
    int mode;
    const char *in, *text, *ents, *err;
} cases[] = {
    {H, "<b>bold</b> plain", "bold plain", "bold@0+4", NULL},
    {H, "<b>a <i>b</i></b>", "a b", "bold@0+3 italic@2+1", NULL},
    {H, "<strong>s</strong><em>e</em><ins>u</ins><del>d</del>", "seud",
     "bold@0+1 italic@1+1 underline@2+1 strikethrough@3+1", NULL},
    {H, "&lt;tag&gt; &amp; &quot;q&quot; &#65;&#x42;", "<tag> & \"q\" AB", "", NULL},
    {H, "<a href=\"https://t.me\">link</a>", "link", "text_link@0+4", NULL},
    {H, "<pre><code class=\"language-c\">int x;</code></pre>", "int x;", "pre@0+6", NULL},
    {H, "<span class=\"tg-spoiler\">s</span><tg-spoiler>t</tg-spoiler>", "st",
     "spoiler@0+1 spoiler@1+1", NULL},
    {H, "<blockquote expandable>q</blockquote>", "q", "expandable_blockquote@0+1", NULL},
    {H, "\xf0\x9f\x98\x80<b>x</b>", "\xf0\x9f\x98\x80x", "bold@2+1", NULL}, /* emoji = 2 units */
    {H, "<b></b>empty", "empty", "", NULL},
    {H, "<b>open", NULL, NULL,
     "can't parse entities: Can't find end tag corresponding to start tag \"b\""},
    {H, "<blink>x</blink>", NULL, NULL,
     "can't parse entities: Unsupported start tag \"blink\" at byte offset 0"},
    {H, "<b>x</i>", NULL, NULL, "can't parse entities: Unmatched end tag at byte offset 4"},
    {H, "<a>x</a>", NULL, NULL, "Can't find href of the link"},
    {H, "a < b", NULL, NULL, "can't parse entities: Unclosed start tag at byte offset 2"},
    {M, "*bold* _it_ __u__ ~s~ ||sp||", "bold it u s sp",
     "bold@0+4 italic@5+2 underline@8+1 strikethrough@10+1 spoiler@12+2", NULL},
    {M, "*a _b_*", "a b", "bold@0+3 italic@2+1", NULL},
    {M, "`co\\`de` x", "co`de x", "code@0+5", NULL},
    {M, "```python\nprint()\n```", "print()\n", "pre@0+8", NULL},
    {M, "[site](https://t.me) \\. \\!", "site . !", "text_link@0+4", NULL},
    {M, "1.5", NULL, NULL, "Character '.' is reserved and must be escaped with the preceding '\\'"},
    {M, "*open", NULL, NULL,
     "can't parse entities: Can't find end of Bold entity at byte offset 0"},
    {M, "a - b", NULL, NULL, "Character '-' is reserved"},
    {M, "[x](", NULL, NULL, "Can't find end of a URL"},
};

static void describe(char *out, size_t cap, const tg_message_entity *e, size_t n)
{
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(out);
        snprintf(out + l, cap - l, "%s%s@%lld+%lld", i ? " " : "", e[i].type.str,
                 (long long)e[i].offset, (long long)e[i].length);
    }
}

static void test_parse_modes(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg__arena a;
        tg__arena_init(&a, 0, 0);
        char *text = NULL, err[200] = "", got[512];
        tg_message_entity *ents = NULL;
        size_t n = 0;
        int rc =
            emu_markup_parse(cases[i].mode, cases[i].in, &a, &text, &ents, &n, err, sizeof err);
        if (cases[i].err) {
            if (rc == 0 || !strstr(err, cases[i].err))
                fail_msg("case %zu (%s): expected error \"%s\", got rc %d \"%s\"", i, cases[i].in,
                         cases[i].err, rc, err);
        } else {
            if (rc != 0)
                fail_msg("case %zu (%s): %s", i, cases[i].in, err);
            describe(got, sizeof got, ents, n);
            if (strcmp(text, cases[i].text) || strcmp(got, cases[i].ents))
                fail_msg("case %zu (%s): got \"%s\" [%s], want \"%s\" [%s]", i, cases[i].in, text,
                         got, cases[i].text, cases[i].ents);
        }
        tg__arena_cleanup(&a);
    }
}

static void test_auto_entities(void **state)
{
    (void)state;
    static const struct {
        const char *in, *ents;
    } autos[] = {
        {"/start", "bot_command@0+6"},
        {"/start@my_bot payload", "bot_command@0+13"},
        {"hi @someone and #tag", "mention@3+8 hashtag@16+4"},
        {"see https://t.me/x now", "url@4+14"},
        {"a/b @ab #", ""}, /* no command mid-word, mention too short, bare # */
        {"\xc3\xa9 /go", "bot_command@2+3"},
    };
    for (size_t i = 0; i < sizeof autos / sizeof autos[0]; i++) {
        tg__arena a;
        tg__arena_init(&a, 0, 0);
        tg_message_entity *ents = NULL;
        size_t n = 0;
        char got[256];
        assert_int_equal(emu_auto_entities(autos[i].in, &a, &ents, &n), 0);
        describe(got, sizeof got, ents, n);
        if (strcmp(got, autos[i].ents))
            fail_msg("\"%s\": got [%s], want [%s]", autos[i].in, got, autos[i].ents);
        tg__arena_cleanup(&a);
    }
}

/* Links bots give (text_link, URL buttons) as Telegram checks them: kept (normalized) or
 * refused with Telegram's reason. */
static void test_links(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out, *why;
    } links[] = {
        {"https://t.me/x?a=1#f", "https://t.me/x?a=1#f", NULL},
        {"HTTP://Example.com", "HTTP://Example.com", NULL},
        {"tg://user?id=100000001", "tg://user?id=100000001", NULL},
        {"tg:resolve?domain=x", "tg:resolve?domain=x", NULL},
        {"ton://example.ton", "ton://example.ton", NULL},
        {"example.com", "http://example.com/", NULL},
        {"example.com:8080/p", "http://example.com:8080/p", NULL},
        {"user@example.com", "http://user@example.com/", NULL},
        {"javascript:1", "http://javascript:1/", NULL}, /* a host and a port, then */
        {"javascript:alert(1)", NULL, "Wrong port number specified in the URL"},
        {"JavaScript:alert(document.cookie)//", NULL, "Wrong port number specified in the URL"},
        {"javascript://%0aalert(1)", NULL, "Unsupported URL protocol"},
        {"data:text/html,<script>alert(1)</script>", NULL,
         "Wrong port number specified in the URL"},
        {"vbscript://x", NULL, "Unsupported URL protocol"},
        {"file:///etc/passwd", NULL, "Unsupported URL protocol"},
        {"ftp://example.com", NULL, "Unsupported URL protocol"},
        {"http:///x", NULL, "URL host is empty"},
        {"/control/send", NULL, "URL host is empty"},
        {"//evil.example/x", NULL, "URL host is empty"},
        {"", NULL, "URL host is empty"},
        {"example.com:0", NULL, "Wrong port number specified in the URL"},
        {"example.com:65536", NULL, "Wrong port number specified in the URL"},
        {"example.com:", NULL, "Wrong port number specified in the URL"},
        {"https://a\tb", NULL, "Wrong HTTP URL"},
        {"https://a\x7f", NULL, "Wrong HTTP URL"},
    };
    tg__arena a;
    tg__arena_init(&a, 0, 0);
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        const char *out = NULL, *why = emu_link_check(links[i].in, &a, &out);
        if (links[i].why) {
            if (!why || strcmp(why, links[i].why))
                fail_msg("%s: got %s, expected refusal \"%s\"", links[i].in,
                         why ? why : "accepted", links[i].why);
        } else if (why || strcmp(out, links[i].out)) {
            fail_msg("%s: got %s, expected %s", links[i].in, why ? why : out, links[i].out);
        }
    }
    tg_message_entity ents[2] = {
        {.type = {TG_MESSAGE_ENTITY_TYPE_BOLD, "bold"}, .offset = 0, .length = 1},
        {.type = {TG_MESSAGE_ENTITY_TYPE_TEXT_LINK, "text_link"}, .offset = 0, .length = 1,
         .url = "javascript:alert(1)"},
    };
    char err[320];
    assert_int_equal(emu_links_check(ents, 2, &a, err, sizeof err), -1);
    assert_string_equal(err, "entity URL 'javascript:alert(1)' is invalid: Wrong port number "
                             "specified in the URL");
    ents[1].url = "t.me";
    assert_int_equal(emu_links_check(ents, 2, &a, err, sizeof err), 0);
    assert_string_equal(ents[1].url, "http://t.me/");
    tg__arena_cleanup(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_modes),
        cmocka_unit_test(test_auto_entities),
        cmocka_unit_test(test_links),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
