/* api_scrape: a panel-like [api] client for the benchmarks. See api_scrape.h. */
#include "api_scrape.h"
#include "curlbody.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* GET base+path on c: true when 200 with the envelope's ok:true. */
static bool get_ok(CURL *c, const char *base, const char *path, struct curlbody *b)
{
    char url[128];
    snprintf(url, sizeof url, "%s%s", base, path);
    b->len = 0;
    curl_easy_setopt(c, CURLOPT_URL, url);
    long status = 0;
    if (curl_easy_perform(c) != CURLE_OK)
        return false;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    return status == 200 && b->p && strncmp(b->p, "{\"ok\":true", 10) == 0;
}

static CURL *handle(struct curlbody *b)
{
    CURL *c = curl_easy_init();
    if (!c)
        return NULL;
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, curlbody_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_USERAGENT, "tgproxy-panel-bench");
    return c;
}

int api_scrape_once(const char *base, const char *path)
{
    struct curlbody b = {0};
    CURL *c = handle(&b);
    bool ok = c && get_ok(c, base, path, &b);
    if (c)
        curl_easy_cleanup(c);
    free(b.p);
    return ok ? 0 : -1;
}

static void *scrape_main(void *arg)
{
    struct api_scrape *s = arg;
    struct curlbody b = {0};
    CURL *c = handle(&b);
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        if (!s->active) {
            pthread_cond_wait(&s->cv, &s->mu);
            continue;
        }
        pthread_mutex_unlock(&s->mu);
        bool ok = c && get_ok(c, s->base, "/v1/secrets", &b) && get_ok(c, s->base, "/v1/info", &b);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)s->every_ms * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_mutex_lock(&s->mu);
        s->rounds++;
        s->bad += !ok;
        if (!s->stop && s->active)
            pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    }
    pthread_mutex_unlock(&s->mu);
    if (c)
        curl_easy_cleanup(c);
    free(b.p);
    return NULL;
}

int api_scrape_start(struct api_scrape *s, uint16_t port, unsigned every_ms)
{
    memset(s, 0, sizeof *s);
    snprintf(s->base, sizeof s->base, "http://127.0.0.1:%u", (unsigned)port);
    s->every_ms = every_ms;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->th, NULL, scrape_main, s) != 0)
        return -1;
    s->started = true;
    return 0;
}

void api_scrape_set(struct api_scrape *s, bool active)
{
    pthread_mutex_lock(&s->mu);
    s->active = active;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

uint64_t api_scrape_rounds(struct api_scrape *s, uint64_t *bad)
{
    pthread_mutex_lock(&s->mu);
    uint64_t n = s->rounds;
    if (bad)
        *bad = s->bad;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void api_scrape_stop(struct api_scrape *s)
{
    if (!s->started)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->th, NULL);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    s->started = false;
}
