/*
 * Reloads against the threads that read the engine meanwhile: while the controlling thread
 * runs a bounded series of server_reload calls (labels added, timeouts and the blocklist
 * toggled), a thread scrapes the Prometheus page with libcurl, the statsd pusher flushes
 * every millisecond into a UDP socket, and a client thread relays through the workers (so
 * they move to each new generation and free old ones). Every scrape must answer 200 with the
 * whole page, every relay must echo, and the statsd counters must never go backwards. Run
 * under ThreadSanitizer and AddressSanitizer by CI (make tsan-test / asan-test).
 */
#include "tgtest.h"

#include "core/alloc.h"
#include "proxy_client.h"
#include "proxy_harness.h"
#include "proxy_util.h"

#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define RELOADS 100   /* reloads on the controlling thread */
#define SCRAPES 10000 /* upper bound of page fetches while the reloads run */
#define RELAYS  10000 /* upper bound of relays while the reloads run */

struct race {
    struct pharness h;
    bool done;                            /* atomic: the reloads are over */
    bool failed;                          /* atomic: a thread failed (its why is set before) */
    unsigned scrapes, relays;             /* atomic: done so far */
    char why_scrape[256], why_relay[256]; /* each thread's failure, "" = none */
};

/* A thread's failure: its own message, then the flag the others read. */
static void thread_failed(struct race *r, char *why, size_t cap, const char *msg)
{
    snprintf(why, cap, "%s", msg);
    __atomic_store_n(&r->failed, true, __ATOMIC_RELEASE);
}

struct body {
    char *p;
    size_t len;
};

static size_t on_body(char *p, size_t size, size_t n, void *user)
{
    struct body *b = user;
    char *q = realloc(b->p, b->len + size * n + 1);
    if (!q)
        return 0;
    memcpy(q + b->len, p, size * n);
    b->p = q;
    b->len += size * n;
    b->p[b->len] = '\0';
    return size * n;
}

/* One GET of the page: "" when it answered 200 with a whole page, else why not. */
static void scrape_once(CURL *c, char *why, size_t cap)
{
    struct body b = {0};
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    if (rc != CURLE_OK)
        snprintf(why, cap, "scrape: %s", curl_easy_strerror(rc));
    else if (code != 200)
        snprintf(why, cap, "scrape: HTTP %ld", code);
    else if (!b.p || !strstr(b.p, "\ntgproxy_start_time_seconds "))
        snprintf(why, cap, "scrape: the page is cut short (%zu bytes)", b.len);
    free(b.p);
}

static void *scraper(void *arg)
{
    struct race *r = arg;
    char url[64], why[256] = "";
    snprintf(url, sizeof url, "http://127.0.0.1:%u/", (unsigned)server_metrics_port(r->h.srv));
    CURL *c = curl_easy_init();
    if (!c)
        return NULL;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 20000L);
    curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L); /* a new connection each time */
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    for (unsigned i = 0; i < SCRAPES && !why[0] && !__atomic_load_n(&r->done, __ATOMIC_ACQUIRE);
         i++) {
        scrape_once(c, why, sizeof why);
        __atomic_add_fetch(&r->scrapes, 1, __ATOMIC_RELEASE);
    }
    curl_easy_cleanup(c);
    if (why[0])
        thread_failed(r, r->why_scrape, sizeof r->why_scrape, why);
    return NULL;
}

static void *relayer(void *arg)
{
    struct race *r = arg;
    struct pcli_opts o = pharness_client(&r->h, PCLI_TLS);
    for (unsigned i = 0; i < RELAYS && !__atomic_load_n(&r->done, __ATOMIC_ACQUIRE); i++) {
        struct pcli c;
        int rc = pcli_connect(&c, r->h.port, &o);
        if (rc == 0)
            rc = pcli_echo(&c, i, 2000, 0);
        pcli_close(&c);
        if (rc != 0) {
            char why[64];
            snprintf(why, sizeof why, "relay %u failed (%d)", i, rc);
            thread_failed(r, r->why_relay, sizeof r->why_relay, why);
            break;
        }
        __atomic_add_fetch(&r->relays, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* Reload i: h's secrets plus labels r0..r(i/4), the fake DC and site kept; every other
   reload a shorter handshake timeout (a new set of deadline queues in each worker), every
   third one the blocklist on (the first creates the access lists, the others rebuild),
   every fourth one without [stats.*] (restart-only: the page and the pusher keep running). */
static int reload_once(struct race *r, int i, const char *block, char *why, size_t cap)
{
    struct pharness *h = &r->h;
    struct config cfg;
    char err[CONFIG_ERR_MAX];
    assert_int_equal(pharness_reload_base(h, &cfg), 0);
    cfg.dcs = tg__calloc(h->cfg.ndcs, sizeof *cfg.dcs);
    assert_non_null(cfg.dcs);
    memcpy(cfg.dcs, h->cfg.dcs, h->cfg.ndcs * sizeof *cfg.dcs);
    cfg.ndcs = h->cfg.ndcs;
    cfg.fronting = h->cfg.fronting;
    if (i % 4 != 1) { /* restart-only: kept; every fourth file turns both off (a warning) */
        cfg.prometheus = h->cfg.prometheus;
        cfg.statsd = h->cfg.statsd;
    }
    cfg.timeout = h->cfg.timeout;
    cfg.timeout.handshake_ms = i % 2 ? 5000 : 6000;
    for (int k = 0; k <= i / 4; k++) {
        char label[16];
        snprintf(label, sizeof label, "r%d", k);
        assert_int_equal(config_add_secret(&cfg, label, &h->cfg.secrets[0].secret, err, sizeof err),
                         0);
    }
    if (i % 3 == 0) {
        cfg.blocklist.sources = tg__calloc(1, sizeof *cfg.blocklist.sources);
        assert_non_null(cfg.blocklist.sources);
        cfg.blocklist.nsources = 1;
        cfg.blocklist.enabled = true;
        snprintf(cfg.blocklist.sources[0].text, sizeof cfg.blocklist.sources[0].text, "%s", block);
    }
    int rc = server_reload(h->srv, &cfg, err, sizeof err);
    if (rc != 0)
        snprintf(why, cap, "reload %d refused: %.200s", i, err);
    config_cleanup(&cfg);
    return rc;
}

/* A statsd datagram's counters (lines "name...:value|c..."): each is what the counter rose
   by since the last flush, so none may be negative. "" in why, else the first bad line. */
static void statsd_check(const char *d, char *why, size_t cap)
{
    for (const char *l = d; *l;) {
        size_t len = strcspn(l, "\n");
        const char *colon = memchr(l, ':', len), *bar = memchr(l, '|', len);
        if (colon && bar && bar[1] == 'c' && strtod(colon + 1, NULL) < 0 && !why[0])
            snprintf(why, cap, "statsd: a counter went back: %.*s", (int)len, l);
        l += len + (l[len] == '\n');
    }
}

/* Read statsd datagrams on fd until the scraper and the relayer each did one more thing
   than *seen (bounded: 20 s), checking each; then note what they did. */
static void wait_progress(struct race *r, int fd, unsigned seen[2], char *why, size_t cap)
{
    char d[4096];
    for (int t = 0; t < 2000; t++) {
        unsigned s = __atomic_load_n(&r->scrapes, __ATOMIC_ACQUIRE);
        unsigned n = __atomic_load_n(&r->relays, __ATOMIC_ACQUIRE);
        if ((s > seen[0] && n > seen[1]) || __atomic_load_n(&r->failed, __ATOMIC_ACQUIRE)) {
            seen[0] = s;
            seen[1] = n;
            return;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 10) == 1) {
            ssize_t got = recv(fd, d, sizeof d - 1, 0);
            d[got > 0 ? got : 0] = '\0';
            statsd_check(d, why, cap);
        }
    }
    snprintf(why, cap, "no progress: %u scrapes, %u relays", seen[0], seen[1]);
}

static void test_reload_while_read(void **state)
{
    (void)state;
    char dir[] = "/tmp/tgtest-rlrace-XXXXXX", block[64];
    assert_non_null(mkdtemp(dir));
    snprintf(block, sizeof block, "%s/block.netset", dir);
    FILE *f = fopen(block, "w");
    assert_non_null(f);
    fputs("192.0.2.0/24\n", f); /* nobody the test connects from */
    fclose(f);
    uint16_t sport = 0;
    int sfd = psock_udp_bind(&sport);
    assert_true(sfd >= 0);
    struct race *r = calloc(1, sizeof *r);
    assert_non_null(r);
    assert_int_equal(pharness_start(&r->h, &(struct pharness_opts){.ee = true,
                                                                   .prometheus = true,
                                                                   .statsd_port = sport,
                                                                   .statsd_flush_ms = 1}),
                     0);
    pthread_t ts, tr;
    assert_int_equal(pthread_create(&ts, NULL, scraper, r), 0);
    assert_int_equal(pthread_create(&tr, NULL, relayer, r), 0);
    char why[256] = "";
    unsigned seen[2] = {0, 0};
    for (int i = 0; i < RELOADS && !why[0] && !__atomic_load_n(&r->failed, __ATOMIC_ACQUIRE); i++) {
        wait_progress(r, sfd, seen, why, sizeof why); /* reloads meet scrapes and relays */
        if (!why[0])
            reload_once(r, i, block, why, sizeof why);
    }
    __atomic_store_n(&r->done, true, __ATOMIC_RELEASE);
    pthread_join(ts, NULL);
    pthread_join(tr, NULL);
    const char *first = r->why_scrape[0] ? r->why_scrape : r->why_relay[0] ? r->why_relay : why;
    if (first[0])
        fail_msg("after %u scrapes and %u relays: %s", r->scrapes, r->relays, first);
    assert_true(r->scrapes >= RELOADS && r->relays >= RELOADS);
    print_message("%d reloads met %u scrapes and %u relays\n", RELOADS, r->scrapes, r->relays);
    uint64_t ok = 0, failed = 0;
    bool last_ok = false;
    double when = 0;
    server_reload_counts(r->h.srv, &ok, &failed, &last_ok, &when);
    assert_int_equal(ok, RELOADS);
    assert_int_equal(failed, 0);
    pharness_stop(&r->h);
    free(r);
    close(sfd);
    unlink(block);
    rmdir(dir);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reload_while_read),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
