/*
 * statsd: the flushing thread and the line formats. See statsd.h.
 * Invariant: prev[i] is the value sample i (in metrics_collect order, fixed for one
 * config) had at the previous flush; counters send the difference.
 */
#include "proxy/statsd.h"

#include "core/alloc.h"
#include "core/log.h"
#include "proxy/metrics.h"
#include "proxy/server.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct statsd {
    const struct server *srv;
    int fd;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    bool stop;
    double *prev;
    size_t nprev, i;
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

static int emit(void *user, const struct metric_sample *m)
{
    struct statsd *sd = user;
    size_t i = sd->i++;
    if (i >= sd->nprev) {
        double *p = tg__realloc(sd->prev, (i + 1) * sizeof *p);
        if (!p)
            return -ENOMEM;
        sd->prev = p;
        memset(p + sd->nprev, 0, (i + 1 - sd->nprev) * sizeof *p);
        sd->nprev = i + 1;
    }
    if (m->type == METRIC_HISTOGRAM && m->suffix && !strcmp(m->suffix, "_bucket"))
        return 0; /* statsd has no buckets: a histogram goes as its _sum and _count counters */
    double v = m->value;
    if (m->type != METRIC_GAUGE) {
        v = m->value - sd->prev[i];
        sd->prev[i] = m->value;
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
    sd->i = 0;
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
    tg__free(sd->prev);
    tg__free(sd);
}
