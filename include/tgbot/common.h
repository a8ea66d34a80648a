/*
 * tgbot/common.h: version, export macro and status codes shared by every libtgbot header.
 *
 * Thread-safety: everything declared here is safe to call from any thread.
 */
#ifndef TGBOT_COMMON_H
#define TGBOT_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(TG_BUILDING_LIBRARY)
#define TG_API __attribute__((visibility("default")))
#else
#define TG_API
#endif

#define TG_VERSION_MAJOR 0
#define TG_VERSION_MINOR 1
#define TG_VERSION_PATCH 0
/* MAJOR*10000 + MINOR*100 + PATCH; compare with tg_version_num() to detect a header/library
 * mismatch at run time. */
#define TG__STR2(x)       #x
#define TG__STR(x)        TG__STR2(x)
#define TG_VERSION_STRING                                                                          \
    TG__STR(TG_VERSION_MAJOR) "." TG__STR(TG_VERSION_MINOR) "." TG__STR(TG_VERSION_PATCH)
#define TG_VERSION_NUM    (TG_VERSION_MAJOR * 10000 + TG_VERSION_MINOR * 100 + TG_VERSION_PATCH)

/* The library's version number (TG_VERSION_NUM of the build) and its string "0.1.0". */
TG_API int tg_version_num(void);
TG_API const char *tg_version(void);

/* Result of every fallible libtgbot call. Append only: never renumber or reuse a value. */
typedef enum tg_status {
    TG_OK = 0,
    TG_ERR_NOMEM,     /* out of memory, or an arena/buffer cap was hit */
    TG_ERR_INVALID,   /* bad argument (e.g. a required parameter missing); see errmsg */
    TG_ERR_TRANSPORT, /* DNS/TCP/TLS failure or connection lost; curl code in details */
    TG_ERR_TIMEOUT,   /* the call or the connect did not finish in time */
    TG_ERR_API,       /* Telegram answered ok=false: error_code, description, parameters */
    TG_ERR_DECODE,    /* the reply is not valid JSON or does not match the schema */
    TG_ERR_HTTP,      /* HTTP status without a Bot API JSON body (e.g. a 502 HTML page) */
    TG_ERR_CANCELLED, /* stopped by shutdown while waiting or retrying */
    TG_ERR_TOO_BIG,   /* a size limit was exceeded (body, download cap, depth) */
    TG_ERR_IO,        /* local file could not be read or written */
    TG_ERR_FLOOD,     /* flood control refused the call in fail-fast mode */
} tg_status;

#define TG_STATUS_COUNT 12

/* A static, human-readable name for st ("out of memory", ...). Never NULL. */
TG_API const char *tg_strerror(tg_status st);

#ifdef __cplusplus
}
#endif

#endif
