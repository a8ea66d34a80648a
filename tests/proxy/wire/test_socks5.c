/*
 * proxy/socks5: the SOCKS5 client state machine and the socks5:// URL parser, table-driven.
 * Each negotiation case lists the upstream's reply bytes and the status the client must end
 * with; every case is fed whole and one byte at a time, and the requests the client sends
 * are checked byte for byte against RFC 1928 / RFC 1929 layouts written out in hex.
 */
#include "tgtest.h"

#include "proxy/wire/socks5.h"

#include <arpa/inet.h>
#include <errno.h>

static size_t unhex(const char *h, uint8_t *out, size_t cap)
{
    size_t n = 0;
    for (; h[0] && h[1]; h += 2) {
        unsigned v;
        assert_int_equal(sscanf(h, "%2x", &v), 1);
        assert_true(n < cap);
        out[n++] = (uint8_t)v;
    }
    return n;
}

static void assert_pending(const struct socks5_client *c, const char *hex)
{
    uint8_t want[SOCKS5_REQ_MAX];
    size_t wn = unhex(hex, want, sizeof want), n = 0;
    const uint8_t *got = socks5_client_pending(c, &n);
    assert_int_equal(n, wn);
    assert_memory_equal(got, want, n);
}

static struct socks5_upstream upstream(const char *url)
{
    struct socks5_upstream up;
    char err[256];
    if (socks5_url_parse(url, strlen(url), &up, err, sizeof err) != 0)
        fail_msg("%s: %s", url, err);
    return up;
}

struct neg_case {
    const char *name;
    bool auth;
    const char *replies; /* hex, all replies back to back (plus tunnel bytes) */
    int want;
    size_t used; /* bytes consumed in total */
    uint8_t rep;
};

static const struct neg_case neg_cases[] = {
    {"no auth, v4 bound", false,
     "0500"
     "05000001"
     "7f000001"
     "1f90",
     SOCKS5_CONNECTED, 12, 0},
    {"no auth, tunnel bytes follow", false,
     "0500"
     "05000001"
     "00000000"
     "0000"
     "abcd",
     SOCKS5_CONNECTED, 12, 0},
    {"auth, v6 bound", true,
     "0502"
     "0100"
     "05000004"
     "00000000000000000000000000000001"
     "0050",
     SOCKS5_CONNECTED, 26, 0},
    {"auth, name bound", true,
     "0502"
     "0100"
     "05000003"
     "03"
     "616263"
     "0050",
     SOCKS5_CONNECTED, 14, 0},
    {"auth, empty name bound", true,
     "0502"
     "0100"
     "05000003"
     "00"
     "0050",
     SOCKS5_CONNECTED, 11, 0},
    {"bad version", false, "0400", SOCKS5_E_VERSION, 1, 0},
    {"no acceptable method", true, "05ff", SOCKS5_E_NO_METHOD, 2, 0},
    {"method not offered", false, "0502", SOCKS5_E_METHOD, 2, 0},
    {"wrong password", true,
     "0502"
     "0101",
     SOCKS5_E_AUTH, 4, 0},
    {"auth version", true,
     "0502"
     "0500",
     SOCKS5_E_VERSION, 3, 0},
    {"refused", false,
     "0500"
     "0505",
     SOCKS5_E_REPLY, 4, 5},
    {"not allowed", true,
     "0502"
     "0100"
     "05020001",
     SOCKS5_E_REPLY, 6, 2},
    {"reply bad version", false,
     "0500"
     "0400",
     SOCKS5_E_VERSION, 3, 0},
    {"reply bad atyp", false,
     "0500"
     "05000002"
     "00",
     SOCKS5_E_ATYP, 6, 0},
    {"truncated reply", false,
     "0500"
     "05000001"
     "7f00",
     SOCKS5_MORE, 8, 0},
    {"nothing", true, "", SOCKS5_MORE, 0, 0},
};

/* Negotiate with b[0..n) given step bytes per read; checks each request sent. */
static int negotiate(const struct neg_case *t, const uint8_t *b, size_t n, size_t step,
                     size_t *total, struct socks5_client *c)
{
    struct socks5_upstream up =
        upstream(t->auth ? "socks5://us%40er:p%3Ass@127.0.0.1:1080" : "socks5://127.0.0.1:1080");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(443)};
    inet_pton(AF_INET, "149.154.167.51", &a.sin_addr);
    struct socks5_target tg = {.sa = (const struct sockaddr *)&a};
    assert_int_equal(socks5_client_init(c, &up, &tg), SOCKS5_SEND);
    assert_pending(c, t->auth ? "050102" : "050100");
    int r = SOCKS5_MORE, sends = 0;
    *total = 0;
    while (*total < n && (r == SOCKS5_MORE || r == SOCKS5_SEND)) {
        size_t k = n - *total < step ? n - *total : step, used = 0;
        r = socks5_client_feed(c, b + *total, k, &used);
        *total += used;
        if (r == SOCKS5_SEND && sends++ == 0 && t->auth)
            assert_pending(c, "01"
                              "05"
                              "7573406572"
                              "04"
                              "703a7373"); /* "us@er", "p:ss" */
        else if (r == SOCKS5_SEND)
            assert_pending(c, "05010001"
                              "959aa733"
                              "01bb");
    }
    return r == SOCKS5_SEND ? SOCKS5_MORE : r;
}

static void test_negotiation_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof neg_cases / sizeof neg_cases[0]; i++) {
        const struct neg_case *t = &neg_cases[i];
        uint8_t b[512];
        size_t n = unhex(t->replies, b, sizeof b);
        for (size_t step = 1; step <= n + 1; step += n ? n : 1) {
            struct socks5_client c;
            size_t used = 0;
            int r = negotiate(t, b, n, step, &used, &c);
            if (r != t->want || used != t->used)
                fail_msg("%s (step %zu): status %d used %zu, want %d used %zu", t->name, step, r,
                         used, t->want, t->used);
            if (t->want == SOCKS5_E_REPLY)
                assert_int_equal(c.rep, t->rep);
            assert_non_null(socks5_strerror(r, &c));
        }
    }
}

static void test_connect_requests(void **state)
{
    (void)state;
    struct socks5_upstream up = upstream("socks5://127.0.0.1:1080");
    struct socks5_client c;
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons(443)};
    inet_pton(AF_INET6, "2001:b28:f23d:f001::a", &a6.sin6_addr);
    struct socks5_target t6 = {.sa = (const struct sockaddr *)&a6};
    uint8_t ok[] = {0x05, 0x00};
    size_t used = 0;
    assert_int_equal(socks5_client_init(&c, &up, &t6), SOCKS5_SEND);
    assert_int_equal(socks5_client_feed(&c, ok, 2, &used), SOCKS5_SEND);
    assert_pending(&c, "05010004"
                       "20010b28f23df001000000000000000a"
                       "01bb");
    struct socks5_target tn = {.host = "venus.web.telegram.org", .port = 443};
    assert_int_equal(socks5_client_init(&c, &up, &tn), SOCKS5_SEND);
    assert_int_equal(socks5_client_feed(&c, ok, 2, &used), SOCKS5_SEND);
    assert_pending(&c, "05010003"
                       "16"
                       "76656e75732e7765622e74656c656772616d2e6f7267"
                       "01bb");
    /* After the end, feeding is refused. */
    uint8_t rep[] = {5, 0, 0, 1, 0, 0, 0, 0, 0, 0};
    assert_int_equal(socks5_client_feed(&c, rep, sizeof rep, &used), SOCKS5_CONNECTED);
    assert_int_equal(socks5_client_feed(&c, rep, sizeof rep, &used), SOCKS5_E_STATE);
    assert_int_equal(used, 0);
    /* Bad targets. */
    char longname[300];
    memset(longname, 'a', 256);
    longname[256] = '\0';
    struct socks5_target bad[] = {{.host = ""}, {.host = longname}, {.sa = NULL, .host = NULL}};
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(socks5_client_init(&c, &up, &bad[i]), SOCKS5_E_ARG);
}

struct url_case {
    const char *url;
    bool ok;
    const char *host, *user, *pass;
    uint16_t port;
};

static const struct url_case url_cases[] = {
    {"socks5://127.0.0.1:1080", true, "127.0.0.1", NULL, NULL, 1080},
    {"socks5://[::1]:9050/", true, "::1", NULL, NULL, 9050},
    {"socks5://user:pass@proxy.example:1080", true, "proxy.example", "user", "pass", 1080},
    {"socks5://u%3Ax:p%40%2f@10.0.0.1:1", true, "10.0.0.1", "u:x", "p@/", 1},
    {"socks5://a:b@c@10.0.0.1:1", true, "10.0.0.1", "a", "b@c", 1},
    {"socks5://onlyuser@10.0.0.1:1", true, "10.0.0.1", "onlyuser", "", 1},
    {"socks4://127.0.0.1:1080", false, NULL, NULL, NULL, 0},
    {"socks5://127.0.0.1", false, NULL, NULL, NULL, 0},
    {"socks5://127.0.0.1:0", false, NULL, NULL, NULL, 0},
    {"socks5://127.0.0.1:65536", false, NULL, NULL, NULL, 0},
    {"socks5://:pw@127.0.0.1:1", false, NULL, NULL, NULL, 0},
    {"socks5://u:@127.0.0.1:1", false, NULL, NULL, NULL, 0},
    {"socks5://u:%zz@127.0.0.1:1", false, NULL, NULL, NULL, 0},
    {"socks5://u:%4@127.0.0.1:1", false, NULL, NULL, NULL, 0},
    {"socks5://u:a%00b@127.0.0.1:1", false, NULL, NULL, NULL, 0},
    {"socks5://127.0.0.1:1/path", false, NULL, NULL, NULL, 0},
    {"socks5://u:p@", false, NULL, NULL, NULL, 0},
    {"socks5://", false, NULL, NULL, NULL, 0},
};

static void test_url_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof url_cases / sizeof url_cases[0]; i++) {
        const struct url_case *t = &url_cases[i];
        struct socks5_upstream up;
        char err[256] = "";
        int r = socks5_url_parse(t->url, strlen(t->url), &up, err, sizeof err);
        if ((r == 0) != t->ok)
            fail_msg("%s: got %d (%s)", t->url, r, err);
        if (!t->ok) {
            assert_true(err[0] != '\0');
            continue;
        }
        assert_string_equal(up.addr.host, t->host);
        assert_int_equal(up.addr.port, t->port);
        assert_int_equal(up.auth, t->user != NULL);
        if (t->user) {
            assert_string_equal(up.user, t->user);
            assert_string_equal(up.pass, t->pass);
        }
        char shown[300];
        socks5_url_format(&up, shown, sizeof shown);
        if (t->pass && t->pass[0])
            assert_null(strstr(shown, t->pass));
    }
}

static void test_long_credentials(void **state)
{
    (void)state;
    char url[1400], cred[600];
    memset(cred, 'x', 255);
    cred[255] = '\0';
    snprintf(url, sizeof url, "socks5://%s:%s@127.0.0.1:1", cred, cred);
    struct socks5_upstream up;
    assert_int_equal(socks5_url_parse(url, strlen(url), &up, NULL, 0), 0);
    assert_int_equal(up.user_len, 255);
    struct socks5_client c;
    struct socks5_target t = {.host = "a", .port = 1};
    assert_int_equal(socks5_client_init(&c, &up, &t), SOCKS5_SEND);
    uint8_t m[] = {5, 2};
    size_t used = 0, n = 0;
    assert_int_equal(socks5_client_feed(&c, m, 2, &used), SOCKS5_SEND);
    socks5_client_pending(&c, &n);
    assert_int_equal(n, 1 + 1 + 255 + 1 + 255);
    cred[255] = 'x', cred[256] = '\0';
    snprintf(url, sizeof url, "socks5://%s:p@127.0.0.1:1", cred);
    char err[256];
    assert_int_equal(socks5_url_parse(url, strlen(url), &up, err, sizeof err), -EINVAL);
    assert_null(strstr(err, cred));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_negotiation_table),
        cmocka_unit_test(test_connect_requests),
        cmocka_unit_test(test_url_table),
        cmocka_unit_test(test_long_credentials),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
