/*
 * logcap: the in-memory log sink shared by tests. See logcap.h.
 */
#include "logcap.h"

#include "core/log.h"
#include "wait.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

static struct {
    pthread_mutex_t mu;
    char text[16384];
    size_t len;
} logs = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void sink(void *user, int level, const char *msg)
{
    (void)user;
    (void)level;
    pthread_mutex_lock(&logs.mu);
    size_t n = strlen(msg);
    if (logs.len + n + 2 < sizeof logs.text) {
        memcpy(logs.text + logs.len, msg, n);
        logs.len += n;
        logs.text[logs.len++] = '\n';
        logs.text[logs.len] = '\0';
    }
    pthread_mutex_unlock(&logs.mu);
}

void logcap_clear(void)
{
    pthread_mutex_lock(&logs.mu);
    logs.len = 0;
    logs.text[0] = '\0';
    pthread_mutex_unlock(&logs.mu);
}

void logcap_start(void)
{
    logcap_clear();
    tg__log_default()->sink = sink;
}

bool logcap_has(const char *needle)
{
    pthread_mutex_lock(&logs.mu);
    bool found = strstr(logs.text, needle) != NULL;
    pthread_mutex_unlock(&logs.mu);
    return found;
}

static bool has(void *needle)
{
    return logcap_has(needle);
}

bool logcap_wait(const char *needle)
{
    return tgtest_wait_until(has, (void *)needle, 10000);
}

const char *logcap_text(void)
{
    return logs.text;
}
