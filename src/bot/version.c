/* version and status strings of libtgbot. */
#include "tgbot/common.h"

#include <assert.h>

static const char *const status_names[] = {
    [TG_OK] = "ok",
    [TG_ERR_NOMEM] = "out of memory",
    [TG_ERR_INVALID] = "invalid argument",
    [TG_ERR_TRANSPORT] = "transport error",
    [TG_ERR_TIMEOUT] = "timed out",
    [TG_ERR_API] = "Bot API error",
    [TG_ERR_DECODE] = "cannot decode reply",
    [TG_ERR_HTTP] = "HTTP error",
    [TG_ERR_CANCELLED] = "cancelled",
    [TG_ERR_TOO_BIG] = "size limit exceeded",
    [TG_ERR_IO] = "file I/O error",
    [TG_ERR_FLOOD] = "flood control refused the call",
};
static_assert(sizeof status_names / sizeof status_names[0] == TG_STATUS_COUNT,
              "status_names must cover every tg_status");

TG_API int tg_version_num(void)
{
    return TG_VERSION_NUM;
}

TG_API const char *tg_version(void)
{
    return TG_VERSION_STRING;
}

TG_API const char *tg_strerror(tg_status st)
{
    if ((unsigned)st >= TG_STATUS_COUNT)
        return "unknown status";
    return status_names[st];
}
