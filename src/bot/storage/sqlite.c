/*
 * sqlite: the embedded store that survives restarts: one SQLite file in WAL mode.
 *
 * Connections. One writer connection behind a mutex (SQLite allows one writer per file at a
 * time anyway; queueing writers here costs nothing and keeps them off the busy handler) and
 * a free list of reader connections, opened on demand, one per thread reading at the same
 * moment. In WAL mode readers never wait for the writer and see every committed write.
 * Other processes on the same file take turns with this one for the write lock; a write
 * waits for them up to busy_timeout_ms (sqlite3_busy_timeout), then fails with
 * TG_ERR_TIMEOUT. Every connection is used by one thread at a time, so they are opened
 * SQLITE_OPEN_NOMUTEX.
 *
 * Durability. Every set/del is one autocommit transaction. With WAL, a transaction that
 * returned is in the WAL file, which the next opener replays: kill -9 at any point loses
 * nothing committed (synchronous=NORMAL). synchronous=FULL (sync_full) also fsyncs each
 * commit, for power loss.
 *
 * Schema. PRAGMA user_version is the schema version and migrations[] the steps from each
 * version to the next; opening runs the missing steps in one BEGIN IMMEDIATE transaction,
 * re-reading the version inside it, so two processes opening an old file at once migrate
 * it once. A file whose version is newer than this library knows is refused untouched.
 *
 * Expiry is wall-clock milliseconds (processes on one machine agree); a get treats an
 * expired row as absent, and the writer deletes expired rows at most once a minute.
 */
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "bot/storage/storage.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "core/sized.h"

#define SWEEP_EVERY_MS 60000

/* Each entry takes the schema from version i to i + 1; append only, never edit one. */
static const char *const migrations[] = {
    /* 0 -> 1: the key-value table; the partial index finds expired rows for the sweep. */
    "CREATE TABLE tg_kv (key TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL,"
    " expires_ms INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;"
    "CREATE INDEX tg_kv_expiry ON tg_kv (expires_ms) WHERE expires_ms > 0;",
};
#define SCHEMA_VERSION ((int)(sizeof migrations / sizeof migrations[0]))

enum stmt_id { S_GET, S_SET, S_DEL, S_SCAN_RANGE, S_SCAN_FROM, S_SWEEP, S_COUNT };

static const char *const stmt_sql[S_COUNT] = {
    [S_GET] = "SELECT value, expires_ms FROM tg_kv WHERE key = ?1",
    [S_SET] = "INSERT OR REPLACE INTO tg_kv (key, value, expires_ms) VALUES (?1, ?2, ?3)",
    [S_DEL] = "DELETE FROM tg_kv WHERE key = ?1",
    [S_SCAN_RANGE] = "SELECT key, value, expires_ms FROM tg_kv WHERE key >= ?1 AND key < ?2",
    [S_SCAN_FROM] = "SELECT key, value, expires_ms FROM tg_kv WHERE key >= ?1",
    [S_SWEEP] = "DELETE FROM tg_kv WHERE expires_ms > 0 AND expires_ms <= ?1",
};

struct sqconn {
    sqlite3 *db;
    sqlite3_stmt *st[S_COUNT]; /* prepared on first use */
    struct sqconn *next;       /* reader free list */
};

struct sqlstore {
    tg_storage base;
    char *path;
    uint32_t busy_ms;
    bool sync_full;
    pthread_mutex_t wmu; /* the writer connection and next_sweep_ms */
    struct sqconn writer;
    uint64_t next_sweep_ms;
    pthread_mutex_t rmu; /* the reader free list */
    struct sqconn *readers;
};

/* Record what failed (on this thread) and map SQLite's code to a status. */
static tg_status fail(const struct sqlstore *q, sqlite3 *db, int rc, const char *what)
{
    const char *msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    int code = rc & 0xff;
    if (code == SQLITE_BUSY || code == SQLITE_LOCKED) {
        tg__storage_seterr("sqlite %s: %s: %s (waited %u ms for another writer)", q->path, what,
                           msg, q->busy_ms);
        return TG_ERR_TIMEOUT;
    }
    tg__storage_seterr("sqlite %s: %s: %s", q->path, what, msg);
    if (code == SQLITE_NOMEM)
        return TG_ERR_NOMEM;
    if (code == SQLITE_TOOBIG)
        return TG_ERR_TOO_BIG;
    return TG_ERR_IO;
}

static void conn_close(struct sqconn *c)
{
    for (int i = 0; i < S_COUNT; i++)
        sqlite3_finalize(c->st[i]);
    sqlite3_close_v2(c->db);
    memset(c, 0, sizeof *c);
}

static int conn_open(struct sqlstore *q, struct sqconn *c)
{
    memset(c, 0, sizeof *c);
    int rc = sqlite3_open_v2(
        q->path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_busy_timeout(c->db, (int)q->busy_ms);
    if (rc == SQLITE_OK)
        rc = sqlite3_extended_result_codes(c->db, 1);
    return rc;
}

/* The prepared statement id of c, reset and unbound; NULL on failure (*rc says why). */
static sqlite3_stmt *stmt(struct sqconn *c, enum stmt_id id, int *rc)
{
    if (!c->st[id]) {
        *rc = sqlite3_prepare_v3(c->db, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT, &c->st[id],
                                 NULL);
        if (*rc != SQLITE_OK)
            return NULL;
    }
    return c->st[id];
}

static void stmt_done(sqlite3_stmt *s)
{
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
}

static int exec(sqlite3 *db, const char *sql)
{
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

static int user_version(sqlite3 *db, int *v)
{
    sqlite3_stmt *s;
    int rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, NULL);
    if (rc != SQLITE_OK)
        return rc;
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *v = sqlite3_column_int(s, 0);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(s);
    return rc;
}

/* Bring the schema to SCHEMA_VERSION in one transaction; false (errmsg set) on failure. */
static bool migrate(struct sqlstore *q, sqlite3 *db)
{
    int v = 0, rc = exec(db, "BEGIN IMMEDIATE");
    if (rc != SQLITE_OK)
        return fail(q, db, rc, "begin the schema check"), false;
    if ((rc = user_version(db, &v)) != SQLITE_OK) {
        fail(q, db, rc, "read the schema version");
        goto rollback;
    }
    if (v > SCHEMA_VERSION || v < 0) {
        tg__storage_seterr("sqlite %s: schema version %d is newer than this libtgbot knows (%d); "
                           "the file was left untouched",
                           q->path, v, SCHEMA_VERSION);
        goto rollback;
    }
    for (; v < SCHEMA_VERSION; v++) {
        char what[64];
        snprintf(what, sizeof what, "migrate the schema from version %d to %d", v, v + 1);
        if ((rc = exec(db, migrations[v])) != SQLITE_OK) {
            fail(q, db, rc, what);
            goto rollback;
        }
    }
    char set[48];
    snprintf(set, sizeof set, "PRAGMA user_version = %d", SCHEMA_VERSION);
    if ((rc = exec(db, set)) != SQLITE_OK || (rc = exec(db, "COMMIT")) != SQLITE_OK) {
        fail(q, db, rc, "commit the schema");
        goto rollback;
    }
    return true;
rollback:
    exec(db, "ROLLBACK");
    return false;
}

/* PRAGMA journal_mode = WAL: SQLITE_OK with the mode now in force in mode, or the error. */
static int set_wal(sqlite3 *db, char *mode, size_t cap)
{
    sqlite3_stmt *s;
    int rc = sqlite3_prepare_v2(db, "PRAGMA journal_mode = WAL", -1, &s, NULL);
    if (rc != SQLITE_OK)
        return rc;
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        const unsigned char *m = sqlite3_column_text(s, 0);
        snprintf(mode, cap, "%s", m ? (const char *)m : "?");
        rc = SQLITE_OK;
    }
    sqlite3_finalize(s);
    return rc;
}

/* The writer: WAL (a property of the file, so readers opened later use it too), the
 * synchronous level, and the schema. Switching a new file to WAL needs it to itself, and
 * SQLite does not call the busy handler for that: when several processes open a new file
 * at once, the switch is retried here until busy_timeout_ms has passed. */
static bool writer_open(struct sqlstore *q)
{
    struct sqconn *c = &q->writer;
    int rc = conn_open(q, c);
    if (rc != SQLITE_OK)
        return fail(q, c->db, rc, "open"), false;
    char mode[16] = "";
    uint64_t deadline = tg__now_ms() + q->busy_ms;
    for (uint64_t pause = 1; (rc = set_wal(c->db, mode, sizeof mode)) != SQLITE_OK;) {
        if ((rc & 0xff) != SQLITE_BUSY || tg__now_ms() >= deadline)
            return fail(q, c->db, rc, "switch to WAL mode"), false;
        tg__sleep_ms(pause);
        pause = pause < 16 ? pause * 2 : 16;
    }
    if (strcmp(mode, "wal") != 0) {
        tg__storage_seterr("sqlite %s: the file refuses WAL mode (journal_mode stays %s)", q->path,
                           mode);
        return false;
    }
    rc = exec(c->db, q->sync_full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL");
    if (rc != SQLITE_OK)
        return fail(q, c->db, rc, "set synchronous"), false;
    return migrate(q, c->db);
}

static struct sqconn *reader_get(struct sqlstore *q, tg_status *st)
{
    pthread_mutex_lock(&q->rmu);
    struct sqconn *c = q->readers;
    if (c)
        q->readers = c->next;
    pthread_mutex_unlock(&q->rmu);
    if (c)
        return c;
    if (!(c = tg__calloc(1, sizeof *c))) {
        tg__storage_seterr("sqlite %s: out of memory", q->path);
        *st = TG_ERR_NOMEM;
        return NULL;
    }
    int rc = conn_open(q, c);
    if (rc != SQLITE_OK) {
        *st = fail(q, c->db, rc, "open a reader");
        conn_close(c);
        tg__free(c);
        return NULL;
    }
    return c;
}

static void reader_put(struct sqlstore *q, struct sqconn *c)
{
    pthread_mutex_lock(&q->rmu);
    c->next = q->readers;
    q->readers = c;
    pthread_mutex_unlock(&q->rmu);
}

static bool live(sqlite3_stmt *s, int col, uint64_t now)
{
    sqlite3_int64 exp = sqlite3_column_int64(s, col);
    return exp == 0 || (uint64_t)exp > now;
}

static tg_status sq_get(tg_storage *s, const char *key, void *buf, size_t cap, size_t *len,
                        bool *found)
{
    struct sqlstore *q = (struct sqlstore *)s;
    tg_status st = TG_OK;
    *found = false;
    *len = 0;
    struct sqconn *c = reader_get(q, &st);
    if (!c)
        return st;
    int rc = SQLITE_OK;
    sqlite3_stmt *g = stmt(c, S_GET, &rc);
    if (g && (rc = sqlite3_bind_text(g, 1, key, -1, SQLITE_STATIC)) == SQLITE_OK)
        rc = sqlite3_step(g);
    if (rc == SQLITE_ROW && live(g, 1, tg__wall_ms())) {
        size_t n = (size_t)sqlite3_column_bytes(g, 0);
        const void *v = sqlite3_column_blob(g, 0);
        *found = true;
        *len = n;
        if (n > cap)
            st = TG_ERR_TOO_BIG;
        else if (n)
            memcpy(buf, v, n);
    } else if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        st = fail(q, c->db, rc, "get");
    }
    if (g)
        stmt_done(g);
    reader_put(q, c);
    return st;
}

/* Delete expired rows, at most once a minute (called with wmu held). */
static void sweep(struct sqlstore *q, uint64_t now)
{
    if (now < q->next_sweep_ms)
        return;
    q->next_sweep_ms = now + SWEEP_EVERY_MS;
    int rc = SQLITE_OK;
    sqlite3_stmt *d = stmt(&q->writer, S_SWEEP, &rc);
    if (d && sqlite3_bind_int64(d, 1, (sqlite3_int64)now) == SQLITE_OK)
        sqlite3_step(d); /* a busy or failed sweep is retried a minute later */
    if (d)
        stmt_done(d);
}

static tg_status sq_set(tg_storage *s, const char *key, const void *val, size_t len,
                        uint64_t ttl_ms)
{
    struct sqlstore *q = (struct sqlstore *)s;
    if (len > INT_MAX) {
        tg__storage_seterr("sqlite %s: set %s: %zu bytes is more than a value may hold", q->path,
                           key, len);
        return TG_ERR_TOO_BIG;
    }
    uint64_t now = tg__wall_ms();
    tg_status st = TG_OK;
    int rc = SQLITE_OK;
    pthread_mutex_lock(&q->wmu);
    sqlite3_stmt *w = stmt(&q->writer, S_SET, &rc);
    if (w && (rc = sqlite3_bind_text(w, 1, key, -1, SQLITE_STATIC)) == SQLITE_OK &&
        (rc = sqlite3_bind_blob64(w, 2, val, len, SQLITE_STATIC)) == SQLITE_OK &&
        (rc = sqlite3_bind_int64(w, 3, ttl_ms ? (sqlite3_int64)(now + ttl_ms) : 0)) == SQLITE_OK)
        rc = sqlite3_step(w);
    if (rc != SQLITE_DONE)
        st = fail(q, q->writer.db, rc, "set");
    if (w)
        stmt_done(w);
    if (st == TG_OK)
        sweep(q, now);
    pthread_mutex_unlock(&q->wmu);
    return st;
}

static tg_status sq_del(tg_storage *s, const char *key)
{
    struct sqlstore *q = (struct sqlstore *)s;
    tg_status st = TG_OK;
    int rc = SQLITE_OK;
    pthread_mutex_lock(&q->wmu);
    sqlite3_stmt *d = stmt(&q->writer, S_DEL, &rc);
    if (d && (rc = sqlite3_bind_text(d, 1, key, -1, SQLITE_STATIC)) == SQLITE_OK)
        rc = sqlite3_step(d);
    if (rc != SQLITE_DONE)
        st = fail(q, q->writer.db, rc, "delete");
    if (d)
        stmt_done(d);
    pthread_mutex_unlock(&q->wmu);
    return st;
}

/* The smallest string above every string that starts with prefix, into out (strlen(prefix)
 * + 1 bytes); false when there is none (the prefix is empty or all 0xff bytes). */
static bool prefix_end(const char *prefix, char *out)
{
    size_t n = strlen(prefix);
    memcpy(out, prefix, n + 1);
    while (n && (unsigned char)out[n - 1] == 0xff)
        out[--n] = '\0';
    if (!n)
        return false;
    out[n - 1] = (char)((unsigned char)out[n - 1] + 1);
    return true;
}

static tg_status sq_scan(tg_storage *s, const char *prefix, tg_storage_scan_fn fn, void *user)
{
    struct sqlstore *q = (struct sqlstore *)s;
    tg_status st = TG_OK;
    char *end = tg__malloc(strlen(prefix) + 1);
    struct sqconn *c = end ? reader_get(q, &st) : NULL;
    if (!c) {
        tg__free(end);
        return end ? st : TG_ERR_NOMEM;
    }
    bool ranged = prefix_end(prefix, end);
    int rc = SQLITE_OK;
    sqlite3_stmt *r = stmt(c, ranged ? S_SCAN_RANGE : S_SCAN_FROM, &rc);
    if (r && (rc = sqlite3_bind_text(r, 1, prefix, -1, SQLITE_STATIC)) == SQLITE_OK && ranged)
        rc = sqlite3_bind_text(r, 2, end, -1, SQLITE_STATIC);
    uint64_t now = tg__wall_ms();
    bool go = true;
    while (r && rc == SQLITE_OK && go) {
        int step = sqlite3_step(r);
        if (step == SQLITE_DONE)
            break;
        if (step != SQLITE_ROW) {
            rc = step;
            break;
        }
        if (live(r, 2, now))
            go = fn(user, (const char *)sqlite3_column_text(r, 0), sqlite3_column_blob(r, 1),
                    (size_t)sqlite3_column_bytes(r, 1));
    }
    if (rc != SQLITE_OK)
        st = fail(q, c->db, rc, "scan");
    if (r)
        stmt_done(r);
    reader_put(q, c);
    tg__free(end);
    return st;
}

static void sq_free(tg_storage *s)
{
    struct sqlstore *q = (struct sqlstore *)s;
    for (struct sqconn *c = q->readers, *next; c; c = next) {
        next = c->next;
        conn_close(c);
        tg__free(c);
    }
    conn_close(&q->writer); /* the last connection checkpoints the WAL into the file */
    pthread_mutex_destroy(&q->wmu);
    pthread_mutex_destroy(&q->rmu);
    tg__free(q->path);
    tg__free(q);
}

static const tg_storage_ops sqlite_ops = {
    .get = sq_get, .set = sq_set, .del = sq_del, .free = sq_free, .scan = sq_scan};

tg_storage *tg_storage_sqlite_new_sized(const tg_sqlite_options *opts, size_t opts_size)
{
    tg_sqlite_options o;
    tg__storage_seterr("%s", "");
    if (!tg__sized_in(&o, sizeof o, opts, opts_size)) {
        tg__storage_seterr("sqlite: options: " TG__SIZED_ERRMSG);
        return NULL;
    }
    if (!o.path || !*o.path) {
        tg__storage_seterr("sqlite: options: path is required (the database file)");
        return NULL;
    }
    if (!sqlite3_threadsafe()) {
        tg__storage_seterr("sqlite: this SQLite library was built without thread support");
        return NULL;
    }
    struct sqlstore *q = tg__calloc(1, sizeof *q);
    if (!q || !(q->path = tg__strdup(o.path))) {
        tg__free(q);
        tg__storage_seterr("sqlite: out of memory");
        return NULL;
    }
    q->base.ops = &sqlite_ops;
    q->busy_ms = o.busy_timeout_ms ? o.busy_timeout_ms : 5000;
    q->sync_full = o.sync_full;
    pthread_mutex_init(&q->wmu, NULL);
    pthread_mutex_init(&q->rmu, NULL);
    if (!writer_open(q)) {
        sq_free(&q->base);
        return NULL;
    }
    return &q->base;
}
