/* Tests for proxy/secret: every text form of secrets.json, classification, errors, format. */
#include "tgtest.h"

#include <errno.h>
#include <string.h>

#include "proxy/wire/secret.h"
#include "proxy_vectors.h"

static json_t *vec;

static int setup(void **state)
{
    (void)state;
    vec = pv_load("vectors/secrets.json");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    json_decref(vec);
    return 0;
}

static void parse_ok(const char *text, struct secret *s)
{
    char err[128] = "";
    int rc = secret_parse(text, strlen(text), s, err, sizeof err);
    if (rc != 0)
        fail_msg("form rejected: %s", err);
}

static void check_key(const struct secret *s)
{
    size_t n;
    uint8_t *key = pv_hex(vec, "forms/key_hex", &n);
    assert_int_equal(n, 16);
    assert_memory_equal(s->key, key, 16);
    free(key);
}

static void test_classic_and_dd_forms(void **state)
{
    (void)state;
    static const char *const paths[] = {"forms/classic/hex", "forms/classic/base64url"};
    struct secret s;
    for (size_t i = 0; i < 2; i++) {
        parse_ok(pv_str(vec, paths[i]), &s);
        assert_int_equal(s.kind, SECRET_CLASSIC);
        assert_string_equal(s.domain, "");
        assert_int_equal(s.domain_len, 0);
        check_key(&s);
    }
    static const char *const dd[] = {"forms/dd/hex", "forms/dd/base64url"};
    for (size_t i = 0; i < 2; i++) {
        parse_ok(pv_str(vec, dd[i]), &s);
        assert_int_equal(s.kind, SECRET_DD);
        check_key(&s);
    }
}

static void test_ee_forms(void **state)
{
    (void)state;
    static const char *const paths[] = {"forms/ee/hex", "forms/ee/base64url",
                                        "forms/ee/base64url_padded", "forms/ee/base64_standard"};
    const char *domain = pv_str(vec, "forms/domain");
    for (size_t i = 0; i < 4; i++) {
        struct secret s;
        parse_ok(pv_str(vec, paths[i]), &s);
        assert_int_equal(s.kind, SECRET_EE);
        assert_string_equal(s.domain, domain);
        assert_int_equal(s.domain_len, strlen(domain));
        check_key(&s);
    }
}

static void test_uppercase_hex(void **state)
{
    (void)state;
    char up[128];
    const char *hex = pv_str(vec, "forms/ee/hex");
    size_t n = strlen(hex);
    assert_true(n < sizeof up);
    for (size_t i = 0; i <= n; i++)
        up[i] = (hex[i] >= 'a' && hex[i] <= 'f') ? (char)(hex[i] - 32) : hex[i];
    struct secret s;
    parse_ok(up, &s);
    assert_int_equal(s.kind, SECRET_EE);
    check_key(&s);
}

/* The secret=... value of every link in the vectors parses to the same key. */
static void test_link_secrets(void **state)
{
    (void)state;
    json_t *links = pv_need(vec, "links");
    const char *name;
    json_t *pair;
    int seen = 0;
    json_object_foreach(links, name, pair)
    {
        const char *urls[2] = {pv_str(pair, "tg"), pv_str(pair, "https")};
        for (int i = 0; i < 2; i++) {
            const char *p = strstr(urls[i], "secret=");
            assert_non_null(p);
            p += 7;
            size_t n = strcspn(p, "&");
            struct secret s;
            char err[128];
            assert_int_equal(secret_parse(p, n, &s, err, sizeof err), 0);
            check_key(&s);
            seen++;
        }
    }
    assert_int_equal(seen, 8);
}

/* Whether text holds one of the n scrub forms (so the log's scrubber would hide the key). */
static bool covered(const char *text, char forms[SECRET_FORMS_MAX][SECRET_FORM_CAP], size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strstr(text, forms[i]))
            return true;
    return false;
}

/* Every text form in the vectors (all kinds, hex either case, both base64 alphabets, padded
   or not, and the secret= of each link) holds one of the forms tgproxy registers for the
   ee secret with the same key, so a log line quoting any of them is scrubbed. */
/* Every text form of the vectors' secret. */
static const char *const paths[] = {
    "forms/classic/hex",
    "forms/classic/base64url",
    "forms/dd/hex",
    "forms/dd/base64url",
    "forms/ee/hex",
    "forms/ee/base64url",
    "forms/ee/base64url_padded",
    "forms/ee/base64_standard",
};

static void test_scrub_forms_cover_every_form(void **state)
{
    (void)state;
    struct secret s;
    parse_ok(pv_str(vec, "forms/ee/hex"), &s);
    char forms[SECRET_FORMS_MAX][SECRET_FORM_CAP];
    size_t n = secret_scrub_forms(&s, forms);
    assert_int_equal(n, 8); /* 2 hex + classic, dd, ee in 2 alphabets each */
    for (size_t i = 0; i < n; i++)
        assert_true(strlen(forms[i]) >= 4); /* the logger's minimum */
    char up[256];
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        const char *text = pv_str(vec, paths[i]);
        if (!covered(text, forms, n))
            fail_msg("%s is not covered", paths[i]);
        size_t k = 0;
        for (; text[k] && k + 1 < sizeof up; k++)
            up[k] = (text[k] >= 'a' && text[k] <= 'f') ? (char)(text[k] - 32) : text[k];
        up[k] = '\0';
        if (strstr(paths[i], "/hex") && !covered(up, forms, n))
            fail_msg("%s in upper case is not covered", paths[i]);
    }
    json_t *links = pv_need(vec, "links");
    const char *name;
    json_t *pair;
    json_object_foreach(links, name, pair)
    {
        if (!covered(pv_str(pair, "tg"), forms, n) || !covered(pv_str(pair, "https"), forms, n))
            fail_msg("link %s is not covered", name);
    }
    memset(forms, 0, sizeof forms);
}

/* secret_redact: every text form of the vectors' secret (and its upper-case hex, and a
   cut-off paste) leaves no 8-character piece of itself in a message; ordinary config words,
   paths, numbers and addresses pass untouched. */
static void test_redact(void **state)
{
    (void)state;
    char form[300], msg[1024];
    for (size_t i = 0; i < sizeof paths / sizeof paths[0] * 3; i++) {
        const char *text = pv_str(vec, paths[i / 3]);
        snprintf(form, sizeof form, "%s", text);
        if (i % 3 == 1) /* upper case */
            for (char *c = form; *c; c++)
                *c = (char)(*c >= 'a' && *c <= 'z' && strstr(paths[i / 3], "hex") ? *c - 32 : *c);
        if (i % 3 == 2) /* cut off after 24 characters */
            form[24] = '\0';
        snprintf(msg, sizeof msg,
                 "c.toml:3:1: unexpected end of line after key '%s', expected "
                 "'='; again: %s.",
                 form, form);
        assert_int_equal(secret_redact(msg), 2);
        for (size_t k = 0; k + 8 <= strlen(form); k++)
            if (memmem(msg, strlen(msg), form + k, 8))
                fail_msg("%s (%zu): piece at %zu left in \"%s\"", paths[i / 3], i % 3, k, msg);
        assert_non_null(strstr(msg, "key '[REDACTED]', expected '='; again: [REDACTED]."));
        assert_true(secret_lookalike(form, strlen(form)));
    }
    static const char *const keep[] = {
        "c.toml:1:1: tolerate-time-skewness: expected a duration such as \"2m\"",
        "/etc/tgproxy/tgproxy.toml: a FIFO, expected a regular file",
        "dc_connect_duration_seconds, proxy-protocol-listener, allow-fallback-on-unknown-dc",
        "USED: 18446744073709551615 bytes, PERIOD_END 99999999999",
        "[2001:db8::1]:443 and www.example.com; /var/lib/tgproxy/main.quota",
        "https://cloudflare-dns.com/dns-query, socks5://user@127.0.0.1:1080",
    };
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        snprintf(msg, sizeof msg, "%s", keep[i]);
        assert_int_equal(secret_redact(msg), 0);
        assert_string_equal(msg, keep[i]);
    }
}

static void test_format_roundtrip(void **state)
{
    (void)state;
    struct secret s;
    char out[600];
    static const char *const kinds[] = {"classic", "dd", "ee"};
    for (size_t i = 0; i < 3; i++) {
        char hp[64], bp[64];
        snprintf(hp, sizeof hp, "forms/%s/hex", kinds[i]);
        snprintf(bp, sizeof bp, "forms/%s/base64url", kinds[i]);
        parse_ok(pv_str(vec, hp), &s);
        int n = secret_format(&s, false, out, sizeof out);
        assert_int_equal(n, (int)strlen(pv_str(vec, hp)));
        assert_string_equal(out, pv_str(vec, hp));
        n = secret_format(&s, true, out, sizeof out);
        assert_int_equal(n, (int)strlen(pv_str(vec, bp)));
        assert_string_equal(out, pv_str(vec, bp));
    }
    /* too small a buffer: -1, never overflow */
    parse_ok(pv_str(vec, "forms/ee/hex"), &s);
    size_t need = strlen(pv_str(vec, "forms/ee/hex"));
    assert_int_equal(secret_format(&s, false, out, need), -1);
    assert_int_equal(secret_format(&s, false, out, need + 1), (int)need);
}

static void expect_bad(const char *text, const char *why_part)
{
    struct secret s;
    char err[160] = "";
    assert_int_equal(secret_parse(text, strlen(text), &s, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "proxy secret"));
    if (why_part && !strstr(err, why_part))
        fail_msg("error '%s' lacks '%s'", err, why_part);
    /* the error never echoes the text */
    if (strlen(text) >= 6 && strstr(err, text))
        fail_msg("error echoes the secret");
}

static void test_rejects(void **state)
{
    (void)state;
    expect_bad("", "empty");
    expect_bad("b00ebb678bf4d454a4ae053927ceb0", "shorter than 16"); /* 15 bytes hex */
    /* valid hex of an unsupported length: no base64 fallback */
    expect_bad("00b00ebb678bf4d454a4ae053927ceb06e", "unsupported");
    expect_bad("ddb00ebb678bf4d454a4ae053927ceb06e00", "unsupported");
    expect_bad("ee00000000000000000000000000000000", "unsupported"); /* 17 bytes, ee */
    expect_bad("not a secret at all!", "neither hex");
    expect_bad("b00ebb678bf4d454a4ae053927ceb06", "neither hex"); /* odd length, bad b64 */
    /* ee with IP literal and with junk in the domain */
    expect_bad("eeb00ebb678bf4d454a4ae053927ceb06e"
               "312e322e332e34",
               "IP"); /* 1.2.3.4 */
    expect_bad("eeb00ebb678bf4d454a4ae053927ceb06e"
               "61202062",
               "character");
    expect_bad("eeb00ebb678bf4d454a4ae053927ceb06e"
               "612e2e62",
               "empty label");
    /* base64 with non-zero trailing bits (last char changed from g to h) */
    expect_bad("sA67Z4v01FSkrgU5J86wbh", NULL);
    /* null argument */
    struct secret s;
    assert_int_equal(secret_parse(NULL, 3, &s, NULL, 0), -EINVAL);
}

static void test_domain_limits(void **state)
{
    (void)state;
    char text[600];
    strcpy(text, "eeb00ebb678bf4d454a4ae053927ceb06e");
    size_t base = strlen(text);
    /* 182-byte domain: a*61 . a*61 . a*58 */
    char dom[200];
    memset(dom, 'a', 182);
    dom[61] = '.';
    dom[123] = '.';
    dom[182] = '\0';
    for (size_t i = 0; i < 182; i++)
        snprintf(text + base + 2 * i, 3, "%02x", (unsigned char)dom[i]);
    struct secret s;
    char err[128];
    assert_int_equal(secret_parse(text, strlen(text), &s, err, sizeof err), 0);
    assert_int_equal(s.domain_len, 182);
    assert_string_equal(s.domain, dom);
    /* 183 bytes: refused */
    strcat(text, "61");
    assert_int_equal(secret_parse(text, strlen(text), &s, err, sizeof err), -EINVAL);
    assert_null(secret_domain_problem("example.com", 11));
    assert_null(secret_domain_problem("a-b.example.com", 15));
    assert_non_null(secret_domain_problem("-a.com", 6));
    assert_non_null(secret_domain_problem("a.com.", 6));
    assert_non_null(secret_domain_problem("::1", 3));
    assert_non_null(secret_domain_problem("10.0.0.1", 8));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classic_and_dd_forms),
        cmocka_unit_test(test_ee_forms),
        cmocka_unit_test(test_uppercase_hex),
        cmocka_unit_test(test_link_secrets),
        cmocka_unit_test(test_format_roundtrip),
        cmocka_unit_test(test_rejects),
        cmocka_unit_test(test_domain_limits),
        cmocka_unit_test(test_scrub_forms_cover_every_form),
        cmocka_unit_test(test_redact),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
