/*
 * The SQLite store (src/bot/storage/sqlite.c) on real files: the storage contract, values
 * surviving a reopen, the schema version and its refusals, the dispatcher's workers and
 * several processes writing one file at once, and kill -9 of a writing process at any
 * point: the file must pass SQLite's integrity check and hold every acknowledged write.
 * The checks read the file with SQLite directly, not through the store under test.
 */
#include "tgtest.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include "storage_contract.h"
#include "tgbot/dispatch.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/tgkit-sqlite-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *db_path(const char *name)
{
    static char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

static tg_storage *open_store(const char *path)
{
    tg_storage *s = tg_storage_sqlite_new(&(tg_sqlite_options){.path = path});
    if (!s)
        fail_msg("sqlite store %s: %s", path, tg_storage_errmsg());
    return s;
}

/* One value of SELECT sql on the file, read by SQLite itself; malloc'ed text or NULL. */
static char *query_text(const char *path, const char *sql)
{
    sqlite3 *db;
    sqlite3_stmt *st;
    char *out = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
            out = strdup((const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return out;
}

static long query_long(const char *path, const char *sql)
{
    char *t = query_text(path, sql);
    long v = t ? strtol(t, NULL, 10) : -1;
    free(t);
    return v;
}

static void assert_integrity(const char *path)
{
    char *ok = query_text(path, "PRAGMA integrity_check");
    assert_non_null(ok);
    assert_string_equal(ok, "ok");
    free(ok);
}

static void test_contract(void **state)
{
    (void)state;
    tg_storage *s = open_store(db_path("contract.db"));
    tgtest_storage_contract(s);
    tg_storage_free(s);
    assert_integrity(db_path("contract.db"));
}

static void test_survives_reopen(void **state)
{
    (void)state;
    const char *p = db_path("reopen.db");
    tg_storage *s = open_store(p);
    assert_int_equal(tg_storage_set(s, "conv:1:1", "tgc1\n0\nask\n", 11, 0), TG_OK);
    assert_int_equal(tg_storage_set(s, "short", "x", 1, 1), TG_OK);
    tg_storage_free(s);
    s = open_store(p);
    char buf[32];
    size_t len;
    bool found;
    assert_int_equal(tg_storage_get(s, "conv:1:1", buf, sizeof buf, &len, &found), TG_OK);
    assert_true(found);
    assert_int_equal(len, 11);
    assert_memory_equal(buf, "tgc1\n0\nask\n", 11);
    assert_int_equal(tg_storage_get(s, "short", buf, sizeof buf, &len, &found), TG_OK);
    assert_false(found); /* its wall-clock deadline passed while the file was closed */
    tg_storage_free(s);
    char *mode = query_text(p, "PRAGMA journal_mode");
    assert_string_equal(mode, "wal");
    free(mode);
}

static void test_schema_versions(void **state)
{
    (void)state;
    const char *p = db_path("schema.db");
    tg_storage_free(open_store(p));
    assert_int_equal(query_long(p, "PRAGMA user_version"), 1);
    assert_int_equal(query_long(p, "SELECT count(*) FROM sqlite_schema WHERE name = 'tg_kv'"), 1);
    /* A newer library's file: refused, and left as it was. */
    free(query_text(p, "PRAGMA user_version = 99"));
    assert_null(tg_storage_sqlite_new(&(tg_sqlite_options){.path = p}));
    assert_non_null(strstr(tg_storage_errmsg(), "schema version 99 is newer"));
    assert_non_null(strstr(tg_storage_errmsg(), p));
    assert_int_equal(query_long(p, "PRAGMA user_version"), 99);
    /* Not a database at all. */
    const char *junk = db_path("junk.db");
    FILE *f = fopen(junk, "w");
    assert_non_null(f);
    fputs("this is a text file, not SQLite, and it is long enough to have a header\n", f);
    fclose(f);
    assert_null(tg_storage_sqlite_new(&(tg_sqlite_options){.path = junk}));
    assert_non_null(strstr(tg_storage_errmsg(), "not a database"));
    /* A directory that does not exist, and no path. */
    assert_null(tg_storage_sqlite_new(&(tg_sqlite_options){.path = "/nonexistent/dir/x.db"}));
    assert_non_null(strstr(tg_storage_errmsg(), "/nonexistent/dir/x.db"));
    assert_null(tg_storage_sqlite_new(&(tg_sqlite_options){0}));
    assert_non_null(strstr(tg_storage_errmsg(), "path is required"));
}

/* Several processes create the schema of one new file at the same moment: each must open
 * it, and the migration runs once (no "table already exists"). */
static void test_concurrent_first_open(void **state)
{
    (void)state;
    const char *p = db_path("first.db");
    int go[2];
    assert_int_equal(pipe(go), 0);
    pid_t kids[6];
    for (int i = 0; i < 6; i++) {
        kids[i] = fork();
        assert_true(kids[i] >= 0);
        if (kids[i] == 0) {
            char c;
            close(go[1]);
            if (read(go[0], &c, 1) < 0) /* all start together when the pipe closes */
                _exit(3);
            tg_storage *s = tg_storage_sqlite_new(&(tg_sqlite_options){.path = p});
            if (!s) {
                fprintf(stderr, "child %d: %s\n", i, tg_storage_errmsg());
                _exit(1);
            }
            char k[16];
            snprintf(k, sizeof k, "child:%d", i);
            tg_status st = tg_storage_set(s, k, "1", 1, 0);
            tg_storage_free(s);
            _exit(st == TG_OK ? 0 : 2);
        }
    }
    close(go[0]);
    close(go[1]);
    for (int i = 0; i < 6; i++) {
        int status;
        assert_int_equal(waitpid(kids[i], &status, 0), kids[i]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    assert_int_equal(query_long(p, "SELECT count(*) FROM tg_kv WHERE key LIKE 'child:%'"), 6);
    assert_int_equal(query_long(p, "PRAGMA user_version"), 1);
}

/* ---- threads and processes writing at once ---- */

#define WRITES 300

struct writer_arg {
    tg_storage *s;
    int id;
    int failures;
};

static void *writer_thread(void *p)
{
    struct writer_arg *a = p;
    for (int i = 0; i < WRITES; i++) {
        char k[48], v[48], got[48];
        size_t len;
        bool found;
        snprintf(k, sizeof k, "w:%d:%d:%d", (int)getpid(), a->id, i);
        snprintf(v, sizeof v, "value %d of %d", i, a->id);
        if (tg_storage_set(a->s, k, v, strlen(v), 0) != TG_OK ||
            tg_storage_get(a->s, k, got, sizeof got, &len, &found) != TG_OK || !found ||
            len != strlen(v) || memcmp(got, v, len) != 0) {
            fprintf(stderr, "writer %d at %d: %s\n", a->id, i, tg_storage_errmsg());
            a->failures++;
        }
    }
    return NULL;
}

/* 4 threads on one store; returns the number of failed operations. */
static int write_with_threads(const char *path)
{
    tg_storage *s = tg_storage_sqlite_new(&(tg_sqlite_options){.path = path});
    if (!s)
        return 1000;
    pthread_t th[4];
    struct writer_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (struct writer_arg){.s = s, .id = i};
        pthread_create(&th[i], NULL, writer_thread, &args[i]);
    }
    int failures = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        failures += args[i].failures;
    }
    tg_storage_free(s);
    return failures;
}

static void test_threads(void **state)
{
    (void)state;
    const char *p = db_path("threads.db");
    assert_int_equal(write_with_threads(p), 0);
    assert_int_equal(query_long(p, "SELECT count(*) FROM tg_kv"), 4 * WRITES);
    assert_integrity(p);
}

/* Three processes, four threads each, one file. */
static void test_processes(void **state)
{
    (void)state;
    const char *p = db_path("procs.db");
    tg_storage_free(open_store(p));
    pid_t kids[3];
    for (int i = 0; i < 3; i++) {
        kids[i] = fork();
        assert_true(kids[i] >= 0);
        if (kids[i] == 0)
            _exit(write_with_threads(p) == 0 ? 0 : 1);
    }
    for (int i = 0; i < 3; i++) {
        int status;
        assert_int_equal(waitpid(kids[i], &status, 0), kids[i]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    assert_int_equal(query_long(p, "SELECT count(*) FROM tg_kv"), 3 * 4 * WRITES);
    assert_integrity(p);
}

/* ---- kill -9 ---- */

#define ROUNDS 24

/* The value of key i: long enough that a write spans several pages now and then. */
static size_t crash_value(unsigned i, char *out, size_t cap)
{
    size_t n = 64 + (i * 37) % 3000;
    if (n > cap)
        n = cap;
    for (size_t j = 0; j < n; j++)
        out[j] = (char)('a' + (i + j) % 26);
    return n;
}

/* The child: writes keys from first on, writing each index to fd once its set returned. */
static void crash_child(const char *path, unsigned first, int fd)
{
    tg_storage *s = tg_storage_sqlite_new(&(tg_sqlite_options){.path = path});
    if (!s)
        _exit(1);
    static char v[4096];
    for (unsigned i = first; i < first + 100000; i++) {
        char k[32];
        snprintf(k, sizeof k, "crash:%u", i);
        size_t n = crash_value(i, v, sizeof v);
        if (tg_storage_set(s, k, v, n, 0) != TG_OK)
            _exit(2);
        if (i % 5 == 0)
            tg_storage_del(s, "crash:scratch"); /* deletes are in flight too */
        else
            tg_storage_set(s, "crash:scratch", v, n / 2, 0);
        if (write(fd, &i, sizeof i) != (ssize_t)sizeof i)
            _exit(3);
    }
    _exit(0);
}

/* Read acknowledgements until want have come (or the child ended); returns the highest. */
static long read_acks(int fd, unsigned want, unsigned *count)
{
    long last = -1;
    unsigned i;
    while (*count < want && read(fd, &i, sizeof i) == (ssize_t)sizeof i) {
        last = i;
        ++*count;
    }
    return last;
}

static void test_kill_9_loop(void **state)
{
    (void)state;
    const char *p = db_path("crash.db");
    unsigned next = 0; /* keys below next were acknowledged in earlier rounds */
    for (int round = 0; round < ROUNDS; round++) {
        int ack[2];
        assert_int_equal(pipe(ack), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(ack[0]);
            crash_child(p, next, ack[1]);
        }
        close(ack[1]);
        /* Round 0 kills at once, on a new file, likely in the middle of creating it; later
         * rounds after a varying number of acknowledged writes. */
        unsigned want = round == 0 ? 0 : (unsigned)(round * 13) % 60, count = 0;
        long last = read_acks(ack[0], want, &count);
        kill(pid, SIGKILL);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        /* Writes acknowledged before the kill are in the pipe still: they count too. */
        long more = read_acks(ack[0], UINT32_MAX, &count);
        if (more >= 0)
            last = more;
        close(ack[0]);
        if (!WIFSIGNALED(status))
            fail_msg("round %d: the child exited with %d before the kill", round,
                     WEXITSTATUS(status));
        if (access(p, F_OK) != 0)
            continue; /* killed before the file existed */
        assert_integrity(p);
        tg_storage *s = open_store(p);
        static char want_v[4096], got[4096];
        for (unsigned i = 0; last >= 0 && i <= (unsigned)last; i++) {
            char k[32];
            size_t len;
            bool found;
            snprintf(k, sizeof k, "crash:%u", i);
            size_t n = crash_value(i, want_v, sizeof want_v);
            assert_int_equal(tg_storage_get(s, k, got, sizeof got, &len, &found), TG_OK);
            if (!found)
                fail_msg("round %d: acknowledged key %s is lost", round, k);
            assert_int_equal(len, n);
            assert_memory_equal(got, want_v, n);
        }
        tg_storage_free(s);
        if (last >= 0)
            next = (unsigned)last + 1;
    }
    assert_true(next > 0);
    assert_integrity(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_contract),        cmocka_unit_test(test_survives_reopen),
        cmocka_unit_test(test_schema_versions), cmocka_unit_test(test_concurrent_first_open),
        cmocka_unit_test(test_threads),         cmocka_unit_test(test_processes),
        cmocka_unit_test(test_kill_9_loop),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
