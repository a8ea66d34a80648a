/* Shared helpers for tests: paths to test data, file reading, RSS and fd counts. */
#include "tgtest.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

const char *tgtest_data_path(const char *rel)
{
    static _Thread_local char path[4096];
    snprintf(path, sizeof path, "%s/%s", TGKIT_TEST_DATA_DIR, rel);
    return path;
}

char *tgtest_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n - 1 == 0) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf)
        return NULL;
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

uint64_t tgtest_xorshift64(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

long tgtest_rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return -1;
    long size = 0, rss = 0;
    if (fscanf(f, "%ld %ld", &size, &rss) != 2)
        rss = -1;
    fclose(f);
    return rss < 0 ? -1 : rss * (sysconf(_SC_PAGESIZE) / 1024);
}

int tgtest_open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n - 3; /* ".", ".." and the DIR's own fd */
}

void tgtest_nofile_at_least(unsigned long want)
{
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur >= want)
        return;
    rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want ? rl.rlim_max : want;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur < want)
        fail_msg("the open-files hard limit %llu is below the %lu this test needs",
                 (unsigned long long)rl.rlim_max, want);
}

void tgtest_assert_same_json(const char *a, const char *b)
{
    json_error_t e;
    json_t *ja = json_loads(a, JSON_DECODE_ANY, &e);
    json_t *jb = json_loads(b, JSON_DECODE_ANY, &e);
    bool same = ja && jb && json_equal(ja, jb);
    json_decref(ja);
    json_decref(jb);
    if (!same)
        fail_msg("JSON differs:\n%s\n%s", a, b);
}

int tgtest_file_count(const char *path, const char *needle)
{
    size_t len = 0;
    char *text = tgtest_read_file(path, &len);
    int n = 0;
    for (const char *p = text; p && (p = strstr(p, needle)); p++)
        n++;
    free(text);
    return n;
}

static int skipped;

void tgtest_skip_note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("SKIPPED: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    skipped++;
}

int tgtest_result(int failed)
{
    if (failed)
        return failed;
    if (skipped)
        fprintf(stderr, "%d test(s) skipped: reported to ctest as skipped (exit %d)\n", skipped,
                TGTEST_SKIP_CODE);
    return skipped ? TGTEST_SKIP_CODE : 0;
}

void tgtest_expect_abort(void (*fn)(void *arg), void *arg, const char *needle)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        fn(arg);
        _exit(0); /* returned: nothing caught it */
    }
    close(fds[1]);
    char err[8192];
    size_t n = 0;
    ssize_t k;
    while (n + 1 < sizeof err && (k = read(fds[0], err + n, sizeof err - 1 - n)) != 0) {
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            break;
        n += (size_t)k;
    }
    err[n] = '\0';
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT)
        fail_msg("expected an abort, the child %s %d; its stderr:\n%s",
                 WIFSIGNALED(status) ? "died of signal" : "exited with",
                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), err);
    if (!strstr(err, needle))
        fail_msg("the abort did not say \"%s\"; its stderr:\n%s", needle, err);
}

void tgtest_remove_sqlite(const char *path)
{
    const char *sfx[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s%s", path, sfx[i]);
        unlink(p);
    }
}
