/* storage: internals shared by the storage implementations (the thread's error text). */
#ifndef TGKIT_BOT_STORAGE_STORAGE_H
#define TGKIT_BOT_STORAGE_STORAGE_H

#include "tgbot/storage.h"

/* Set the text tg_storage_errmsg() returns on this thread. */
void tg__storage_seterr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
