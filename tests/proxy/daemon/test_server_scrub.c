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
#include "proxy/wire/secret.h"
#include "proxy_util.h"
#include "proxy_proc.h"

#include <openssl/rand.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define BINARY   TGKIT_BINARY_DIR "/tgproxy"
#define NSTART   12 /* secrets at start: past the old TG__LOG_MAX_SECRETS of 8 */
#define NRELOAD  3  /* secrets a reload adds */
#define NSECRETS (NSTART + NRELOAD)

struct env {
    uint16_t port;
    pid_t pid;
    char dir[64], cfg[96], log[96];
    struct secret s[NSECRETS];
};

/* Config with secrets u0..u(n-1); bad_key, when given, is an unknown top-level key. */
static void write_cfg(const struct env *e, size_t n, const char *bad_key)
{
    char tmp[128];
    snprintf(tmp, sizeof tmp, "%s.new", e->cfg);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fprintf(f, "bind-to = \"127.0.0.1:%u\"\nworkers = 1\nlog-level = \"info\"\n", e->port);
    if (bad_key)
        fprintf(f, "%s = 1\n", bad_key);
    fputs("[secrets]\n", f);
    for (size_t i = 0; i < n; i++) {
        char text[2 * (1 + SECRET_KEY_LEN + SECRET_DOMAIN_MAX) + 1];
        assert_true(secret_format(&e->s[i], false, text, sizeof text) > 0);
        fprintf(f, "u%zu = \"%s\"\n", i, text);
    }
    fchmod(fileno(f), 0600); /* it holds secrets: tgproxy warns otherwise */
    fclose(f);
    assert_int_equal(rename(tmp, e->cfg), 0); /* the daemon never reads half a file */
}

static int log_count(const struct env *e, const char *needle)
{
    return tgtest_file_count(e->log, needle);
}

/* Bounded wait for n occurrences; on failure the message names the needle only (the log
   could hold a secret if scrubbing failed, and test output must not). */
static void wait_log(const struct env *e, const char *needle, int n)
{
    for (int i = 0; i < 1000 && log_count(e, needle) < n; i++)
        usleep(10000);
    if (log_count(e, needle) < n)
        fail_msg("log lacks \"%s\" x%d", needle, n);
}

/* SIGHUP with bad_key in the file: one more refusal in the log. */
static void refused_reload(struct env *e, size_t nsecrets, const char *bad_key, int *refusals)
{
    write_cfg(e, nsecrets, bad_key);
    assert_int_equal(kill(e->pid, SIGHUP), 0);
    wait_log(e, "reload refused", ++*refusals);
}

static void test_many_secrets_never_logged(void **state)
{
    (void)state;
    if (access(BINARY, X_OK) != 0)
        skip(); /* the CLI is not built in this tree */
    struct env e = {0};
    int probe = psock_listen(&e.port, 1); /* a free port for bind-to */
    assert_true(probe >= 0);
    close(probe);
    snprintf(e.dir, sizeof e.dir, "/tmp/tgproxy-scrub-XXXXXX");
    assert_non_null(mkdtemp(e.dir));
    snprintf(e.cfg, sizeof e.cfg, "%s/tgproxy.toml", e.dir);
    snprintf(e.log, sizeof e.log, "%s/log", e.dir);
    for (size_t i = 0; i < NSECRETS; i++) {
        e.s[i] = (struct secret){.kind = SECRET_EE, .domain_len = 11};
        memcpy(e.s[i].domain, "example.com", 12);
        assert_int_equal(RAND_bytes(e.s[i].key, SECRET_KEY_LEN), 1);
    }
    write_cfg(&e, NSTART, NULL);
    char *argv[] = {BINARY, "run", e.cfg, NULL};
    e.pid = pproc_spawn_logged(argv, e.log);
    assert_true(e.pid > 0);
    wait_log(&e, "listening on", 1);

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
    assert_int_equal(kill(e.pid, SIGHUP), 0);
    wait_log(&e, "reload: ", 1);
    assert_true(secret_format(&e.s[NSECRETS - 1], true, text, sizeof text) > 0);
    refused_reload(&e, NSECRETS, text, &refusals);
    assert_true(secret_scrub_forms(&e.s[NSECRETS - 2], forms) >= 1);
    refused_reload(&e, NSECRETS, forms[0], &refusals);

    assert_int_equal(kill(e.pid, SIGTERM), 0);
    int status = 0;
    assert_int_equal(waitpid(e.pid, &status, 0), e.pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);

    /* every refusal quoted its key, redacted (the ee form keeps its public domain hex) */
    assert_int_equal(log_count(&e, ": unknown key"), refusals);
    assert_int_equal(log_count(&e, "[REDACTED]"), refusals);
    size_t len = 0;
    char *log = tgtest_read_file(e.log, &len);
    assert_non_null(log);
    for (size_t i = 0; i < NSECRETS; i++) {
        size_t n = secret_scrub_forms(&e.s[i], forms);
        for (size_t f = 0; f < n; f++)
            if (strstr(log, forms[f]))
                fail_msg("form %zu of secret u%zu is in the log", f, i);
    }
    assert_null(strstr(log, "cannot add it to the log's scrub list"));
    free(log);
    unlink(e.cfg);
    unlink(e.log);
    rmdir(e.dir);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_secrets_never_logged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
