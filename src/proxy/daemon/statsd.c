/*
 * statsd: the flushing thread and the line formats. See statsd.h.
 * Invariant: the prev table holds, for every counter series sent so far, its value at the
 * previous flush, keyed by the series itself (family, suffix, labels), never by its place in
 * the walk: a reload that adds secret labels moves every sample after the per-secret ones.
 */
#include "proxy/daemon/statsd.h"

#include "core/alloc.h"
#include "core/log.h"
#include "proxy/daemon/metrics.h"
#include "proxy/daemon/server.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PREV_KEY_MAX 256 /* family, suffix and labels of one series, with the NUL */

/* One counter series' value at the previous flush. */
struct prev {
    uint64_t hash; /* of key; 0 = empty slot */
    char *key;
    double value;
};

struct statsd {
    const struct server *srv;
    int fd;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    bool stop;
    struct prev *prev; /* open addressing, cap a power of two, at most half full */
    size_t cap, used;
    char dgram[STATSD_DATAGRAM];
    size_t dlen;
    uint64_t send_errors;
};

static void send_dgram(struct statsd *sd)
{
    if (sd->dlen == 0)
        return;
    if (send(sd->fd, sd->dgram, sd->dlen, MSG_DONTWAIT) < 0)
        sd->send_errors++;
    sd->dlen = 0;
}

static int line_of(const struct statsd *sd, const struct metric_sample *m, double v, char *out,
                   size_t cap)
{
    const struct config *cfg = server_config(sd->srv);
    enum config_tag_format tf = cfg->statsd.tag_format;
    const char *kind = m->type == METRIC_GAUGE ? "g" : "c"; /* a histogram: _sum, _count */
    const char *suffix = m->suffix ? m->suffix : "";
    char tags[256] = "";
    size_t t = 0;
    for (size_t i = 0; i < m->nlabels && t < sizeof tags; i++) {
        const char *k = m->label_key[i], *lv = m->label_val[i];
        int n = tf == CONFIG_TAGS_DATADOG
                    ? snprintf(tags + t, sizeof tags - t, "%s%s:%s", i ? "," : "|#", k, lv)
                : tf == CONFIG_TAGS_INFLUXDB ? snprintf(tags + t, sizeof tags - t, ",%s=%s", k, lv)
                                             : snprintf(tags + t, sizeof tags - t, ";%s=%s", k, lv);
        t += n > 0 ? (size_t)n : 0;
    }
    if (t >= sizeof tags)
        return -1; /* labels are short config labels: cannot happen, but never truncate */
    char num[32];
    metrics_format_value(v, num, sizeof num);
    if (tf == CONFIG_TAGS_DATADOG)
        return snprintf(out, cap, "%s.%s%s:%s|%s%s\n", cfg->statsd.prefix, m->family, suffix, num,
                        kind, tags);
    return snprintf(out, cap, "%s.%s%s%s:%s|%s\n", cfg->statsd.prefix, m->family, suffix, tags, num,
                    kind);
}

/* The series' identity: "family suffix|key=value|..." into key (cap PREV_KEY_MAX); its
   FNV-1a hash (never 0). */
static uint64_t series_key(const struct metric_sample *m, char *key)
{
    int n = snprintf(key, PREV_KEY_MAX, "%s%s", m->family, m->suffix ? m->suffix : "");
    for (size_t i = 0; i < m->nlabels && n > 0 && n < PREV_KEY_MAX; i++)
        n +=
            snprintf(key + n, PREV_KEY_MAX - (size_t)n, "|%s=%s", m->label_key[i], m->label_val[i]);
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = key; *p; p++)
        h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
    return h ? h : 1;
}

/* The slot of key in tab (cap a power of two): its entry, or the empty slot for it. */
static struct prev *prev_slot(struct prev *tab, size_t cap, uint64_t h, const char *key)
{
    for (size_t i = (size_t)h & (cap - 1);; i = (i + 1) & (cap - 1))
        if (!tab[i].hash || (tab[i].hash == h && strcmp(tab[i].key, key) == 0))
            return &tab[i];
}

/* Double the table (or make the first one). 0 or -ENOMEM (the table stays). */
static int prev_grow(struct statsd *sd)
{
    size_t cap = sd->cap ? sd->cap * 2 : 256;
    struct prev *tab = tg__calloc(cap, sizeof *tab);
    if (!tab)
        return -ENOMEM;
    for (size_t i = 0; i < sd->cap; i++)
        if (sd->prev[i].hash)
            *prev_slot(tab, cap, sd->prev[i].hash, sd->prev[i].key) = sd->prev[i];
    tg__free(sd->prev);
    sd->prev = tab;
    sd->cap = cap;
    return 0;
}

/* What counter m rose by since the previous flush (its whole value the first time), and
   remember its value. -ENOMEM when a new series finds no room. */
static int counter_delta(struct statsd *sd, const struct metric_sample *m, double *delta)
{
    char key[PREV_KEY_MAX];
    uint64_t h = series_key(m, key);
    if (2 * (sd->used + 1) > sd->cap && prev_grow(sd) < 0)
        return -ENOMEM;
    struct prev *e = prev_slot(sd->prev, sd->cap, h, key);
    if (!e->hash) {
        if (!(e->key = tg__strdup(key)))
            return -ENOMEM;
        e->hash = h;
        e->value = 0;
        sd->used++;
    }
    *delta = m->value - e->value;
    e->value = m->value;
    return 0;
}

static int emit(void *user, const struct metric_sample *m)
{
    struct statsd *sd = user;
    if (m->type == METRIC_HISTOGRAM && m->suffix && !strcmp(m->suffix, "_bucket"))
        return 0; /* statsd has no buckets: a histogram goes as its _sum and _count counters */
    double v = m->value;
    if (m->type != METRIC_GAUGE) {
        if (counter_delta(sd, m, &v) < 0)
            return -ENOMEM;
        if (v == 0)
            return 0;
    }
    char line[512];
    int n = line_of(sd, m, v, line, sizeof line);
    if (n <= 0 || (size_t)n >= sizeof line)
        return 0;
    if (sd->dlen + (size_t)n > sizeof sd->dgram)
        send_dgram(sd);
    memcpy(sd->dgram + sd->dlen, line, (size_t)n);
    sd->dlen += (size_t)n;
    return 0;
}

static void flush(struct statsd *sd)
{
    if (metrics_collect(sd->srv, emit, sd) != 0)
        tg__log(NULL, TG__LOG_WARN, "[stats.statsd]: out of memory; this flush is partial");
    send_dgram(sd);
}

static void *statsd_main(void *arg)
{
    struct statsd *sd = arg;
    uint32_t every = server_config(sd->srv)->statsd.flush_ms;
    pthread_mutex_lock(&sd->mu);
    while (!sd->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += every / 1000;
        ts.tv_nsec += (long)(every % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        int rc = 0;
        while (!sd->stop && rc != ETIMEDOUT)
            rc = pthread_cond_timedwait(&sd->cv, &sd->mu, &ts);
        pthread_mutex_unlock(&sd->mu);
        flush(sd); /* also the final one at stop */
        pthread_mutex_lock(&sd->mu);
    }
    pthread_mutex_unlock(&sd->mu);
    return NULL;
}

int statsd_start(const struct server *s, struct statsd **out)
{
    const struct config *cfg = server_config(s);
    *out = NULL;
    struct statsd *sd = tg__calloc(1, sizeof *sd);
    if (!sd)
        return -ENOMEM;
    sd->srv = s;
    const struct sockaddr_storage *a = &cfg->statsd.addr.addr;
    sd->fd = socket(a->ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int rc = sd->fd < 0 || connect(sd->fd, (const struct sockaddr *)a, cfg->statsd.addr.addr_len)
                 ? -errno
                 : 0;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&sd->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&sd->mu, NULL);
    if (rc == 0 && pthread_create(&sd->th, NULL, statsd_main, sd) != 0)
        rc = -EAGAIN;
    if (rc < 0) {
        tg__log(NULL, TG__LOG_ERROR, "[stats.statsd] address %s: %s", cfg->statsd.addr.host,
                strerror(-rc));
        if (sd->fd >= 0)
            close(sd->fd);
        pthread_cond_destroy(&sd->cv);
        pthread_mutex_destroy(&sd->mu);
        tg__free(sd);
        return rc;
    }
    *out = sd;
    return 0;
}

void statsd_stop(struct statsd *sd)
{
    if (!sd)
        return;
    pthread_mutex_lock(&sd->mu);
    sd->stop = true;
    pthread_cond_signal(&sd->cv);
    pthread_mutex_unlock(&sd->mu);
    pthread_join(sd->th, NULL);
    close(sd->fd);
    pthread_cond_destroy(&sd->cv);
    pthread_mutex_destroy(&sd->mu);
    for (size_t i = 0; i < sd->cap; i++)
        tg__free(sd->prev[i].key);
    tg__free(sd->prev);
    tg__free(sd);
}
