/*
 * The client over HTTPS against the fake Bot API server on 127.0.0.1 with a self-signed
 * certificate (made by the openssl CLI): the ca_file and ca_path options really decide what
 * is trusted. Trusted -> the call succeeds (HTTP/2 is offered through ALPN and libmicrohttpd
 * answers HTTP/1.1, so the fallback is exercised too); the system default or another CA ->
 * a transport error that names the certificate problem and never the token.
 */
#include "tgtest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bot_server.h"
#include "tgbot/tgbot.h"

#define TOKEN "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_"
#define GETME "{\"ok\":true,\"result\":{\"id\":7,\"is_bot\":true,\"first_name\":\"Bot\"}}"

struct tls_fx {
    char dir[64];
    char cert[128], key[128];   /* the server's */
    char other[128], okey[128]; /* an unrelated self-signed certificate */
    char hashdir[128];          /* ca_path directory holding the server's certificate */
    bot_server *srv;
};

static bool make_cert(const char *cert, const char *key)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout %s "
             "-out %s -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 "
             ">/dev/null 2>&1",
             key, cert);
    return system(cmd) == 0;
}

static int setup(void **state)
{
    struct tls_fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    snprintf(f->dir, sizeof f->dir, "/tmp/tgtest-tls-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->cert, sizeof f->cert, "%s/cert.pem", f->dir);
    snprintf(f->key, sizeof f->key, "%s/key.pem", f->dir);
    snprintf(f->other, sizeof f->other, "%s/other.pem", f->dir);
    snprintf(f->okey, sizeof f->okey, "%s/other-key.pem", f->dir);
    snprintf(f->hashdir, sizeof f->hashdir, "%s/ca", f->dir);
    /* the openssl CLI comes with ca-certificates, which make deps installs */
    assert_true(make_cert(f->cert, f->key));
    assert_true(make_cert(f->other, f->okey));
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp %s %s/ && openssl rehash %s >/dev/null 2>&1",
             f->hashdir, f->cert, f->hashdir, f->hashdir);
    assert_int_equal(system(cmd), 0);
    f->srv = bot_server_start_tls(TOKEN, f->cert, f->key);
    assert_non_null(f->srv);
    assert_int_equal(strncmp(bot_server_url(f->srv), "https://", 8), 0);
    bot_server_set_reply(f->srv, "getMe", 200, GETME);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct tls_fx *f = *state;
    bot_server_stop(f->srv);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

/* getMe with these options; returns the status, errmsg copied into msg. */
static tg_status get_me(struct tls_fx *f, tg_bot_options o, char *msg, size_t cap)
{
    o.base_url = bot_server_url(f->srv);
    o.timeout_ms = 5000;
    o.retry.no_retry_connect = true;
    tg_bot *bot = bot_test_new(TOKEN, &o);
    assert_non_null(bot);
    tg_ctx *ctx = tg_ctx_new(bot);
    assert_non_null(ctx);
    tg_user *me = NULL;
    tg_status st = tg_get_me(ctx, &me);
    if (st == TG_OK) {
        assert_non_null(me);
        assert_int_equal(me->id, 7);
    }
    snprintf(msg, cap, "%s", tg_ctx_errmsg(ctx));
    tg_ctx_free(ctx);
    tg_bot_free(bot);
    return st;
}

static void test_ca_file_trusts_the_server(void **state)
{
    struct tls_fx *f = *state;
    char msg[512];
    size_t before = bot_server_nrequests(f->srv);
    assert_int_equal(get_me(f, (tg_bot_options){.ca_file = f->cert}, msg, sizeof msg), TG_OK);
    assert_int_equal(bot_server_nrequests(f->srv), before + 1);
}

static void test_ca_path_trusts_the_server(void **state)
{
    struct tls_fx *f = *state;
    char msg[512];
    assert_int_equal(get_me(f, (tg_bot_options){.ca_path = f->hashdir}, msg, sizeof msg),
                     TG_OK);
}

static void expect_cert_failure(struct tls_fx *f, tg_bot_options o)
{
    char msg[512];
    size_t before = bot_server_nrequests(f->srv);
    assert_int_equal(get_me(f, o, msg, sizeof msg), TG_ERR_TRANSPORT);
    assert_non_null(strstr(msg, "certificate"));
    assert_null(strstr(msg, TOKEN));
    assert_null(strstr(msg, "AAHdqTcv")); /* not even the secret half */
    assert_int_equal(bot_server_nrequests(f->srv), before); /* nothing got through */
}

static void test_untrusted_by_default(void **state)
{
    expect_cert_failure(*state, (tg_bot_options){0});
}

static void test_other_ca_rejected(void **state)
{
    struct tls_fx *f = *state;
    expect_cert_failure(f, (tg_bot_options){.ca_file = f->other});
}

static void test_missing_ca_file(void **state)
{
    struct tls_fx *f = *state;
    char msg[512], path[160];
    snprintf(path, sizeof path, "%s/none.pem", f->dir);
    assert_int_equal(get_me(f, (tg_bot_options){.ca_file = path}, msg, sizeof msg),
                     TG_ERR_TRANSPORT);
    assert_true(msg[0] != '\0');
    assert_null(strstr(msg, TOKEN));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ca_file_trusts_the_server, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ca_path_trusts_the_server, setup, teardown),
        cmocka_unit_test_setup_teardown(test_untrusted_by_default, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_ca_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_ca_file, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
