/* daemon_fx: a built daemon under test. See daemon_fx.h. */
#include "tgtest.h"

#include "daemon_fx.h"
#include "proxy_proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void dfx_init(struct dfx *d, const char *what)
{
    memset(d, 0, sizeof *d);
    snprintf(d->dir, sizeof d->dir, "/tmp/tgkit-%s-XXXXXX", what);
    assert_non_null(mkdtemp(d->dir));
    dfx_path(d, "tgproxy.toml", d->cfg, sizeof d->cfg);
    dfx_path(d, "log", d->log, sizeof d->log);
}

void dfx_path(const struct dfx *d, const char *name, char *out, size_t cap)
{
    assert_true((size_t)snprintf(out, cap, "%s/%s", d->dir, name) < cap);
}

void dfx_write(const char *path, const char *text)
{
    char tmp[160];
    assert_true((size_t)snprintf(tmp, sizeof tmp, "%s.new", path) < sizeof tmp);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fchmod(fileno(f), 0600); /* configs hold secrets: tgproxy warns otherwise */
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(rename(tmp, path), 0);
}

void dfx_config(const struct dfx *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = NULL;
    int n = vasprintf(&text, fmt, ap);
    va_end(ap);
    assert_true(n >= 0);
    /* a tgproxy file that does not mention [defense.tls-front] gets it turned off: its
       probes would be extra connections to the test's stand-in fronting host, which tests
       count and read in accept order (tests of the learned answer configure it) */
    if (strstr(text, "[secrets]") && !strstr(text, "tls-front")) {
        char *more = NULL;
        assert_true(asprintf(&more, "%s\n[defense.tls-front]\nenabled = false\n", text) >= 0);
        free(text);
        text = more;
    }
    dfx_write(d->cfg, text);
    free(text);
}

void dfx_spawn(struct dfx *d, char *const argv[])
{
    assert_int_equal(d->pid, 0); /* one daemon per fixture at a time */
    if (access(argv[0], X_OK) != 0)
        fail_msg("%s: not built (a test names its binary as a build dependency)", argv[0]);
    unlink(d->log);                            /* the log of this process only */
    d->pid = pproc_spawn_logged(argv, d->log); /* dies with the test (PR_SET_PDEATHSIG) */
    assert_true(d->pid > 0);
}

void dfx_start(struct dfx *d, char *const argv[])
{
    dfx_spawn(d, argv);
    dfx_wait_log(d, "listening on", 1);
    d->port = dfx_log_port(d, "listening on");
}

void dfx_run(struct dfx *d, const char *bin)
{
    char *argv[] = {(char *)bin, "run", d->cfg, NULL};
    dfx_start(d, argv);
}

int dfx_log_count(const struct dfx *d, const char *needle)
{
    return tgtest_file_count(d->log, needle);
}

struct log_want {
    const struct dfx *d;
    const char *needle;
    int n;
};

static bool log_has(void *arg)
{
    const struct log_want *w = arg;
    if (dfx_log_count(w->d, w->needle) >= w->n)
        return true;
    /* a daemon that exited will never write it: stop waiting */
    siginfo_t si = {0};
    return w->d->pid > 0 && waitid(P_PID, (id_t)w->d->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           si.si_pid;
}

void dfx_wait_log(const struct dfx *d, const char *needle, int n)
{
    struct log_want w = {d, needle, n};
    tgtest_wait_until(log_has, &w, DFX_WAIT_MS);
    if (dfx_log_count(d, needle) >= n)
        return;
    if (d->quiet)
        fail_msg("log lacks \"%s\" x%d", needle, n);
    char *log = dfx_log(d);
    fail_msg("log lacks \"%s\" x%d:\n%s", needle, n, log ? log : "");
}

uint16_t dfx_log_port(const struct dfx *d, const char *needle)
{
    uint16_t port = 0;
    if (pproc_log_port(d->log, needle, &port) != 0)
        fail_msg("no port on the log line \"%s\"", needle);
    return port;
}

char *dfx_log(const struct dfx *d)
{
    size_t len = 0;
    return tgtest_read_file(d->log, &len);
}

void dfx_signal(const struct dfx *d, int sig)
{
    assert_true(d->pid > 0);
    assert_int_equal(kill(d->pid, sig), 0);
}

struct reap {
    struct dfx *d;
    int status;
};

static bool reaped(void *arg)
{
    struct reap *r = arg;
    return waitpid(r->d->pid, &r->status, WNOHANG) == r->d->pid;
}

int dfx_wait_exit(struct dfx *d)
{
    assert_true(d->pid > 0);
    struct reap r = {d, 0};
    if (!tgtest_wait_until(reaped, &r, DFX_WAIT_MS)) {
        kill(d->pid, SIGKILL);
        waitpid(d->pid, NULL, 0);
        d->pid = 0;
        fail_msg("the daemon did not exit within %d ms (killed)", DFX_WAIT_MS);
    }
    d->pid = 0;
    if (WIFSIGNALED(r.status))
        fail_msg("the daemon died of signal %d", WTERMSIG(r.status));
    assert_true(WIFEXITED(r.status));
    return WEXITSTATUS(r.status);
}

int dfx_stop(struct dfx *d, int sig)
{
    dfx_signal(d, sig);
    int rc = dfx_wait_exit(d);
    /* a stop that is not clean: show why (a sanitizer's report is in the log; 66 is TSan's) */
    if (rc != 0 && !d->quiet) {
        char *log = dfx_log(d);
        print_message("daemon exited %d on signal %d; its log:\n%s\n", rc, sig, log ? log : "");
        free(log);
    }
    return rc;
}

void dfx_done(struct dfx *d)
{
    pid_t leaked = d->pid;
    if (leaked > 0) {
        kill(leaked, SIGKILL);
        waitpid(leaked, NULL, 0);
        d->pid = 0;
    }
    DIR *dir = opendir(d->dir);
    struct dirent *e;
    while (dir && (e = readdir(dir))) {
        char p[192];
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
            (size_t)snprintf(p, sizeof p, "%s/%s", d->dir, e->d_name) < sizeof p)
            unlink(p);
    }
    if (dir)
        closedir(dir);
    rmdir(d->dir);
    if (leaked > 0)
        fail_msg("daemon pid %d was still running at the end of the test (leaked; killed)",
                 (int)leaked);
}
