/*
 * Log scrubbing of the built daemon (`tgproxy run CONFIG`) with more secrets than the
 * logger's old 8 slots: 12 ee secrets at start, 3 more added by a SIGHUP reload. The daemon
 * is made to log config text that holds a secret the way an operator slip would put it
 * there: a broken reload file whose unknown top-level key is a secret (hex, upper-case hex,
 * the whole ee hex form, base64url), which the refusal line quotes as file:line:col: KEY.
 * The log must show "[REDACTED]" where each was quoted and no form of any secret anywhere.
 */
#include "tgtest.h"

#include "core/str.h"
#include "daemon_fx.h"
#include "proxy/wire/secret.h"
#include "proxy_util.h"

#include <openssl/rand.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NSTART   12 /* secrets at start: past the old TG__LOG_MAX_SECRETS of 8 */
#define NRELOAD  3  /* secrets a reload adds */
#define NSECRETS (NSTART + NRELOAD)

struct env {
    struct dfx d; /* quiet: a failure never quotes a log that may hold a secret */
    struct secret s[NSECRETS];
};

/* Config with secrets u0..u(n-1); bad_key, when given, is an unknown top-level key. */
static void write_cfg(const struct env *e, size_t n, const char *bad_key)
{
    char buf[8192];
    /* port 0: the kernel's choice (no race for a free port); a reload keeps the listener */
    size_t k = (size_t)snprintf(buf, sizeof buf,
                                "bind-to = \"127.0.0.1:0\"\nworkers = 1\nlog-level = \"info\"\n");
    if (bad_key)
        k += (size_t)snprintf(buf + k, sizeof buf - k, "%s = 1\n", bad_key);
    k += (size_t)snprintf(buf + k, sizeof buf - k, "[secrets]\n");
    for (size_t i = 0; i < n; i++) {
        char text[2 * (1 + SECRET_KEY_LEN + SECRET_DOMAIN_MAX) + 1];
        assert_true(secret_format(&e->s[i], false, text, sizeof text) > 0);
        k += (size_t)snprintf(buf + k, sizeof buf - k, "u%zu = \"%s\"\n", i, text);
    }
    assert_true(k < sizeof buf);
    dfx_write(e->d.cfg, buf); /* whole, 0600: it holds secrets */
}

/* SIGHUP with bad_key in the file: one more refusal in the log. */
static void refused_reload(struct env *e, size_t nsecrets, const char *bad_key, int *refusals)
{
    write_cfg(e, nsecrets, bad_key);
    dfx_signal(&e->d, SIGHUP);
    dfx_wait_log(&e->d, "reload refused", ++*refusals);
}

static void test_many_secrets_never_logged(void **state)
{
    (void)state;
    struct env e = {0};
    dfx_init(&e.d, "scrub");
    e.d.quiet = true;
    for (size_t i = 0; i < NSECRETS; i++) {
        e.s[i] = (struct secret){.kind = SECRET_EE, .domain_len = 11};
        memcpy(e.s[i].domain, "example.com", 12);
        assert_int_equal(RAND_bytes(e.s[i].key, SECRET_KEY_LEN), 1);
    }
    write_cfg(&e, NSTART, NULL);
    dfx_run(&e.d, DFX_TGPROXY);

    /* Each form as it would be pasted, each for a secret past the 8th. */
    char forms[SECRET_FORMS_MAX][SECRET_FORM_CAP], text[SECRET_FORM_CAP];
    int refusals = 0;
    assert_true(secret_scrub_forms(&e.s[11], forms) >= 2);
    refused_reload(&e, NSTART, forms[0], &refusals); /* hex */
    assert_true(secret_scrub_forms(&e.s[10], forms) >= 2);
    refused_reload(&e, NSTART, forms[1], &refusals); /* upper-case hex */
    assert_true(secret_format(&e.s[9], false, text, sizeof text) > 0);
    refused_reload(&e, NSTART, text, &refusals); /* the whole ee hex form */
    assert_true(secret_format(&e.s[8], true, text, sizeof text) > 0);
    refused_reload(&e, NSTART, text, &refusals); /* base64url */

    write_cfg(&e, NSECRETS, NULL); /* the reload adds 3 secrets */
    dfx_signal(&e.d, SIGHUP);
    dfx_wait_log(&e.d, "reload: ", 1);
    assert_true(secret_format(&e.s[NSECRETS - 1], true, text, sizeof text) > 0);
    refused_reload(&e, NSECRETS, text, &refusals);
    assert_true(secret_scrub_forms(&e.s[NSECRETS - 2], forms) >= 1);
    refused_reload(&e, NSECRETS, forms[0], &refusals);

    assert_int_equal(dfx_stop(&e.d, SIGTERM), 0);

    /* every refusal quoted its key, redacted (the ee form keeps its public domain hex) */
    assert_int_equal(dfx_log_count(&e.d, ": unknown key"), refusals);
    assert_int_equal(dfx_log_count(&e.d, "[REDACTED]"), refusals);
    char *log = dfx_log(&e.d);
    assert_non_null(log);
    for (size_t i = 0; i < NSECRETS; i++) {
        size_t n = secret_scrub_forms(&e.s[i], forms);
        for (size_t f = 0; f < n; f++)
            if (strstr(log, forms[f]))
                fail_msg("form %zu of secret u%zu is in the log", f, i);
    }
    assert_null(strstr(log, "cannot add it to the log's scrub list"));
    free(log);
    dfx_done(&e.d);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_secrets_never_logged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
