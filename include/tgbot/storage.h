/*
 * tgbot/storage.h: the key-value store behind conversations, sessions, jobs and the
 * callback-data store, and its three implementations:
 *
 *   memory   in process, the default; nothing survives the process
 *   SQLite   one file on disk (WAL): survives restarts and kill -9, shared by the
 *            dispatcher's workers and by several processes on one machine
 *   Redis    shared by processes on several machines
 *
 * Swapping one for another is one line of the program; nothing else changes:
 *
 *   tg_storage *s = tg_storage_memory_new();
 *   tg_storage *s = tg_storage_sqlite_new(&(tg_sqlite_options){.path = "bot.db"});
 *   tg_storage *s = tg_storage_redis_new(&(tg_redis_options){.host = "10.0.0.5"});
 *   tg_dispatcher *d = tg_dispatcher_new(bot, r, &(tg_dispatcher_options){.storage = s});
 *
 * Keys are NUL-terminated strings (the library's own keys are ASCII), values any bytes.
 * Every implementation must be thread-safe; all three provided ones are.
 */
#ifndef TGBOT_STORAGE_H
#define TGBOT_STORAGE_H

#include "tgbot/common.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_storage tg_storage;

/* One entry of a scan: key and value live only during the call. Return false to stop. */
typedef bool (*tg_storage_scan_fn)(void *user, const char *key, const void *val, size_t len);

/*
 * A key-value store with expiry. Every function must be thread-safe.
 * get:  copy the value into buf[0..cap) and its length into *len; TG_OK with *found=false
 *       when absent or expired; TG_ERR_TOO_BIG when it does not fit (len says how big).
 * set:  store a copy; ttl_ms 0 = never expires.
 * del:  TG_OK also when the key is absent.
 * scan: call fn for every live key that starts with prefix, in no particular order (keys
 *       set or deleted during the scan may or may not be seen). fn must not call the
 *       storage. Optional: NULL means the store cannot list keys, and what needs it (the
 *       job queue's persistence) refuses the store with TG_ERR_INVALID.
 * Members may be added at the end: define the table with designated initializers so a
 * member this header does not know yet is NULL.
 */
typedef struct tg_storage_ops {
    tg_status (*get)(tg_storage *s, const char *key, void *buf, size_t cap, size_t *len,
                     bool *found);
    tg_status (*set)(tg_storage *s, const char *key, const void *val, size_t len, uint64_t ttl_ms);
    tg_status (*del)(tg_storage *s, const char *key);
    void (*free)(tg_storage *s);
    tg_status (*scan)(tg_storage *s, const char *prefix, tg_storage_scan_fn fn, void *user);
} tg_storage_ops;

/* Implementations embed this as their first member. */
struct tg_storage {
    const tg_storage_ops *ops;
};

/* An in-process store (a locked hash table). NULL on out of memory. */
TG_API tg_storage *tg_storage_memory_new(void);

typedef struct tg_sqlite_options {
    const char *path;         /* the database file (created when missing); required */
    uint32_t busy_timeout_ms; /* how long a write waits for another process's; 0 = 5000 */
    bool sync_full;           /* fsync every commit (survives power loss, ~ms per write);
                                 false: synchronous=NORMAL, which survives a crash or kill
                                 of the process but may lose the last commits on power loss */
    const char *table;        /* NULL = "tg_kv"; [A-Za-z_][A-Za-z0-9_]* up to 48 bytes */
} tg_sqlite_options;

/*
 * A SQLite store: one file in WAL mode, safe for the dispatcher's workers (one writer
 * connection, readers beside it that never block on it) and for several processes on the
 * same file (writes wait up to busy_timeout_ms for each other). Every set is one
 * transaction: once it returns TG_OK the value survives kill -9 of the process.
 * The schema is versioned (PRAGMA user_version) and migrated on open; a file written by a
 * newer libtgbot is refused, not damaged. Expiry is wall-clock, so processes agree.
 * NULL on failure; tg_storage_errmsg() says why (path, SQLite's message).
 */
TG_API tg_storage *tg_storage_sqlite_new_sized(const tg_sqlite_options *opts, size_t opts_size);
#define tg_storage_sqlite_new(...)                                                                 \
    tg_storage_sqlite_new_sized((__VA_ARGS__), sizeof(tg_sqlite_options))

typedef struct tg_redis_options {
    const char *host;     /* NULL = "127.0.0.1" */
    uint16_t port;        /* 0 = 6379 */
    const char *password; /* AUTH; NULL = none (a secret: never logged) */
    int db;               /* SELECT; 0 = default */
    const char *prefix;   /* key prefix; NULL = "tgbot:" */
    uint32_t timeout_ms;  /* connect and command timeout; 0 = 2000 */
} tg_redis_options;

/* A Redis store (hiredis), connected at once. NULL on failure; tg_storage_errmsg() says why.
 * Reconnects after a failed command on the next call. Replies are read under bounds (65536
 * elements, 16 MiB strings, 64 MiB a reply; docs/fleet.md): a reply past them is refused
 * before it is allocated, the call returns TG_ERR_TOO_BIG (found false, len 0), the reason is
 * logged and the connection dropped. The link is plain TCP: keep it on a network you trust. */
TG_API tg_storage *tg_storage_redis_new_sized(const tg_redis_options *opts, size_t opts_size);
#define tg_storage_redis_new(...)                                                                  \
    tg_storage_redis_new_sized((__VA_ARGS__), sizeof(tg_redis_options))
/* Why the last *_new on this thread failed, or why the last tg_storage_get/set/del/scan
 * on this thread failed ("" after one that succeeded, or when a store of your own says
 * nothing). Thread-local. Never contains a password. */
TG_API const char *tg_storage_errmsg(void);

TG_API tg_status tg_storage_get(tg_storage *s, const char *key, void *buf, size_t cap, size_t *len,
                                bool *found);
TG_API tg_status tg_storage_set(tg_storage *s, const char *key, const void *val, size_t len,
                                uint64_t ttl_ms);
TG_API tg_status tg_storage_del(tg_storage *s, const char *key);
/* TG_ERR_INVALID when the store has no scan (see tg_storage_ops). */
TG_API tg_status tg_storage_scan(tg_storage *s, const char *prefix, tg_storage_scan_fn fn,
                                 void *user);
TG_API void tg_storage_free(tg_storage *s); /* NULL-safe */

#ifdef __cplusplus
}
#endif

#endif
