/*
 * api_scrape: a control-panel-like client of tgproxy's [api] on its own thread, for the
 * benchmarks: every every_ms it fetches GET /v1/secrets (every secret with its stats) and
 * GET /v1/info, as the built-in panel's refresh does, over one keep-alive connection
 * (libcurl), and checks each answer (200 and the envelope's "ok":true).
 *
 * Ownership: struct api_scrape is caller storage (api_scrape_start .. api_scrape_stop).
 * Thread-safety: start, pause/resume and stop from one controlling thread.
 */
#ifndef TGKIT_TEST_API_SCRAPE_H
#define TGKIT_TEST_API_SCRAPE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct api_scrape {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char base[64];
    unsigned every_ms;
    bool active, stop, started;
    uint64_t rounds, bad; /* under mu */
};

/* A paused scraper of http://127.0.0.1:port. 0 or -1. */
int api_scrape_start(struct api_scrape *s, uint16_t port, unsigned every_ms);
/* Scrape (true) or pause (false). */
void api_scrape_set(struct api_scrape *s, bool active);
/* Rounds done (each two calls) and how many answers were wrong, so far. */
uint64_t api_scrape_rounds(struct api_scrape *s, uint64_t *bad);
/* One round now on the caller's thread (for a cost measurement): 0, or -1 when wrong. */
int api_scrape_once(const char *base, const char *path);
void api_scrape_stop(struct api_scrape *s);

#endif
