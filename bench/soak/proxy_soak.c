/*
 * tgkit_soak_proxy: the built tgproxy daemon under an hour of steady churn (run it through
 * bench/soak/run.sh, which also draws the plots and writes the verdicts).
 *
 * What runs beside `tgproxy run` (a separate process, whose RSS, descriptors and threads are
 * sampled from /proc every second):
 *   - churn: connect -> FakeTLS or dd handshake -> a verified 4 KiB echo -> close, at a
 *     steady rate (--churn cycles per minute, alternating FakeTLS and dd), the handshake
 *     latency of each cycle recorded;
 *   - --relays long-lived FakeTLS relays, each echoing 1 KiB (verified) every 5 s;
 *   - --slow slow readers: downloads read 4 KiB every 200 ms, every byte verified;
 *   - a SIGHUP every --reload-every seconds whose new file adds one secret and removes the
 *     one added before: the new secret must complete a handshake at once and the removed one
 *     must be fronted (both checked after each reload);
 *   - a metrics scrape every --scrape-every seconds;
 *   - with --fleet, [fleet] on a real redis-server, killed and restarted half-way.
 * The fake DC and the fronting stand-in are the tests' own (tests/support).
 *
 * Output in --out DIR: samples.csv (one row a second) and summary.txt (key=value lines:
 * every count the verdicts need). Exit status 0 when the run completed (verdicts are
 * bench/soak/verdicts.py's), 1 when it could not run.
 */
#include "proxy_client.h"
#include "proxy_fakedc.h"
#include "proxy_front.h"
#include "proxy_proc.h"
#include "proxy_util.h"
#include "redis_server.h"

#include "core/str.h"

#include <errno.h>
#include <getopt.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DOMAIN        "example.com"
#define CHURN_BYTES   4096
#define RELAY_ROUND   1024
#define RELAY_EVERY_S 5
#define SLOW_READ     4096
#define SLOW_PAUSE_MS 200
#define LAT_CAP       65536 /* handshake latencies kept per second */

struct opts {
    double minutes;
    int churn_per_min, relays, slow, reload_every_s, scrape_every_s, churn_threads;
    bool fleet;
    const char *out, *tgproxy;
};

static struct opts O = {.minutes = 60,
                        .churn_per_min = 5000,
                        .relays = 500,
                        .slow = 2,
                        .reload_every_s = 60,
                        .scrape_every_s = 5,
                        .churn_threads = 16,
                        .out = "bench/results/soak-proxy",
                        .tgproxy = TGKIT_BINARY_DIR "/tgproxy"};

/* ---- shared state ---- */
static atomic_bool stop_flag;
static double t0; /* monotonic seconds at the start of the load */
static uint8_t key_tls[16], key_dd[16];
static uint16_t dc_port, front_port, proxy_port, metrics_port;
static pid_t proxy_pid;
static char dir[256], cfg_path[300], log_path[300];
static tgtest_redis redis;

static atomic_ullong churn_ok, churn_fail_connect, churn_fail_verify, churn_started;
static atomic_ullong relay_rounds, relay_failures, relay_reopened, relay_bytes;
static atomic_ullong slow_bytes, slow_failures;
static atomic_ullong scrapes_ok, scrapes_failed, reloads_done, reload_checks_failed;
static atomic_ullong injected_failures; /* churn failures within the injected window */
static atomic_int open_conns;           /* ours: relays + slow readers + churn in flight */
static atomic_llong proxy_active = -1;  /* client_connections_active, last scrape */
/* antireplay_capacity_entries, last scrape: the table doubles to the load (16 B an entry),
   and each doubling is a step in RSS (the new table less the old one) */
static atomic_llong replay_entries = -1;
static atomic_int event_code;           /* for the CSV: 1 reload, 2 redis restart */
static atomic_llong inject_until_ms;    /* churn failures before this are injected */

static pthread_mutex_t lat_mu = PTHREAD_MUTEX_INITIALIZER;
static double lat[LAT_CAP];
static size_t lat_n;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_until(double t)
{
    struct timespec ts = {.tv_sec = (time_t)t, .tv_nsec = (long)((t - (double)(time_t)t) * 1e9)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

/* Sleep until t, in steps of at most 100 ms so a stop is seen; false when stopping. */
static bool pace_until(double t)
{
    while (!atomic_load(&stop_flag)) {
        double n = now_s();
        if (n >= t)
            return true;
        sleep_until(n + (t - n < 0.1 ? t - n : 0.1));
    }
    return false;
}

static int64_t elapsed_ms(void)
{
    return (int64_t)((now_s() - t0) * 1000);
}

/* ---- the daemon's file ---- */

/* Secrets "tls" and "dd" always; "rot" = key gen's secret when gen > 0. */
static void rot_key(int gen, uint8_t out[16])
{
    for (int i = 0; i < 16; i++)
        out[i] = (uint8_t)(key_tls[i] ^ (uint8_t)(gen * 131 + i * 7 + 1));
}

static int write_config(int gen)
{
    char ht[33], hd[33], hr[33], dom[2 * sizeof DOMAIN];
    tg__hex_encode(ht, key_tls, 16);
    tg__hex_encode(hd, key_dd, 16);
    tg__hex_encode(dom, DOMAIN, strlen(DOMAIN));
    char fleet[128] = "";
    if (O.fleet)
        snprintf(fleet, sizeof fleet, "[fleet]\nredis = \"redis://127.0.0.1:%u\"\n", redis.port);
    char rot[128] = "";
    if (gen > 0) {
        uint8_t k[16];
        rot_key(gen, k);
        tg__hex_encode(hr, k, 16);
        snprintf(rot, sizeof rot, "rot%d = \"ee%s%s\"\n", gen, hr, dom);
    }
    char text[4096];
    int n = snprintf(text, sizeof text,
                     "bind-to = \"127.0.0.1:0\"\n"
                     "workers = 2\n"
                     "log-level = \"info\"\n"
                     "[dcs]\n"
                     "default = [\"127.0.0.1:%u\"]\n"
                     "[domain-fronting]\n"
                     "host = \"127.0.0.1\"\n"
                     "port = %u\n"
                     "[stats.prometheus]\n"
                     "enabled = true\n"
                     "bind-to = \"127.0.0.1:0\"\n"
                     "%s"
                     "[secrets]\n"
                     "tls = \"ee%s%s\"\n"
                     "dd = \"dd%s\"\n"
                     "%s",
                     dc_port, front_port, fleet, ht, dom, hd, rot);
    if (n < 0 || (size_t)n >= sizeof text)
        return -1;
    char tmp[320];
    snprintf(tmp, sizeof tmp, "%s.new", cfg_path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    fchmod(fileno(f), 0600);
    bool ok = fwrite(text, 1, (size_t)n, f) == (size_t)n;
    ok = fclose(f) == 0 && ok;
    return ok && rename(tmp, cfg_path) == 0 ? 0 : -1;
}

/* ---- clients ---- */

static struct pcli_opts copts(enum pcli_mode mode, const uint8_t *key)
{
    return (struct pcli_opts){.mode = mode,
                              .key = key,
                              .sni = mode == PCLI_TLS ? DOMAIN : NULL,
                              .dc = 2,
                              .timeout_ms = 10000};
}

static void record_latency(double s)
{
    pthread_mutex_lock(&lat_mu);
    if (lat_n < LAT_CAP)
        lat[lat_n++] = s;
    pthread_mutex_unlock(&lat_mu);
}

static void churn_failed(atomic_ullong *kind)
{
    if (elapsed_ms() < atomic_load(&inject_until_ms))
        atomic_fetch_add(&injected_failures, 1);
    else
        atomic_fetch_add(kind, 1);
}

static void *churn_main(void *arg)
{
    (void)arg;
    double period = 60.0 / O.churn_per_min;
    while (!atomic_load(&stop_flag)) {
        unsigned long long i = atomic_fetch_add(&churn_started, 1);
        if (!pace_until(t0 + (double)i * period))
            break;
        bool tls = (i % 2) == 0;
        struct pcli_opts o = copts(tls ? PCLI_TLS : PCLI_DD, tls ? key_tls : key_dd);
        struct pcli c;
        atomic_fetch_add(&open_conns, 1);
        double s = now_s();
        int rc = pcli_connect(&c, proxy_port, &o);
        if (rc == 0) {
            record_latency(now_s() - s);
            rc = pcli_echo(&c, (uint32_t)i, CHURN_BYTES, 0);
            if (rc == 0)
                atomic_fetch_add(&churn_ok, 1);
            else
                churn_failed(&churn_fail_verify);
        } else {
            churn_failed(&churn_fail_connect);
        }
        pcli_close(&c);
        atomic_fetch_sub(&open_conns, 1);
    }
    return NULL;
}

struct relay {
    struct pcli c;
    bool up;
    uint32_t seed;
    uint64_t off;
};

static int relay_open(struct relay *r)
{
    struct pcli_opts o = copts(PCLI_TLS, key_tls);
    uint8_t cmd[FAKEDC_CMD_LEN];
    fakedc_cmd(cmd, "ECHO", r->seed, 0);
    r->off = 0;
    int rc = pcli_connect(&r->c, proxy_port, &o);
    if (rc == 0)
        rc = pcli_send(&r->c, cmd, sizeof cmd);
    r->up = rc == 0;
    if (r->up)
        atomic_fetch_add(&open_conns, 1);
    else
        pcli_close(&r->c);
    return rc;
}

static int relay_round(struct relay *r)
{
    uint8_t out[RELAY_ROUND], in[RELAY_ROUND];
    pstream_fill(r->seed, r->off, out, sizeof out);
    int rc = pcli_send(&r->c, out, sizeof out);
    if (rc == 0)
        rc = pcli_recv_all(&r->c, in, sizeof in);
    if (rc == 0 && pstream_check(r->seed, r->off, in, sizeof in) >= 0)
        rc = -EBADMSG;
    if (rc == 0)
        r->off += sizeof out;
    return rc;
}

static void *relays_main(void *arg)
{
    (void)arg;
    struct relay *rs = calloc((size_t)O.relays, sizeof *rs);
    if (!rs)
        return NULL;
    for (int i = 0; i < O.relays && !atomic_load(&stop_flag); i++) {
        rs[i].seed = 100000 + (uint32_t)i;
        if (relay_open(&rs[i]) != 0)
            atomic_fetch_add(&relay_failures, 1);
    }
    double step = (double)RELAY_EVERY_S / (O.relays > 0 ? O.relays : 1);
    double next = now_s();
    for (long k = 0; !atomic_load(&stop_flag) && O.relays > 0; k++) {
        next += step;
        if (!pace_until(next))
            break;
        struct relay *r = &rs[k % O.relays];
        if (!r->up) {
            if (relay_open(r) == 0)
                atomic_fetch_add(&relay_reopened, 1);
            continue;
        }
        if (relay_round(r) == 0) {
            atomic_fetch_add(&relay_rounds, 1);
            atomic_fetch_add(&relay_bytes, RELAY_ROUND);
        } else {
            atomic_fetch_add(&relay_failures, 1);
            pcli_close(&r->c);
            r->up = false;
            atomic_fetch_sub(&open_conns, 1);
        }
    }
    for (int i = 0; i < O.relays; i++)
        if (rs[i].up) {
            pcli_close(&rs[i].c);
            atomic_fetch_sub(&open_conns, 1);
        }
    free(rs);
    return NULL;
}

static void *slow_main(void *arg)
{
    uint32_t seed = 900000 + (uint32_t)(uintptr_t)arg;
    struct pcli_opts o = copts(PCLI_TLS, key_tls);
    struct pcli c;
    uint8_t cmd[FAKEDC_CMD_LEN], buf[SLOW_READ];
    fakedc_cmd(cmd, "SRCE", seed, UINT64_C(1) << 40);
    if (pcli_connect(&c, proxy_port, &o) != 0 || pcli_send(&c, cmd, sizeof cmd) != 0) {
        atomic_fetch_add(&slow_failures, 1);
        pcli_close(&c);
        return NULL;
    }
    atomic_fetch_add(&open_conns, 1);
    uint64_t off = 0;
    double next = now_s();
    while (!atomic_load(&stop_flag)) {
        next += SLOW_PAUSE_MS / 1000.0;
        if (!pace_until(next))
            break;
        if (pcli_recv_all(&c, buf, sizeof buf) != 0 ||
            pstream_check(seed, off, buf, sizeof buf) >= 0) {
            atomic_fetch_add(&slow_failures, 1);
            break;
        }
        off += sizeof buf;
        atomic_fetch_add(&slow_bytes, sizeof buf);
    }
    pcli_close(&c);
    atomic_fetch_sub(&open_conns, 1);
    return NULL;
}

/* ---- metrics scrape: a plain HTTP/1.0 GET, the values of two gauges ---- */

/* The sample line "PREFIX_NAME N" of name (not its # HELP / # TYPE) into *out. */
static void gauge(const char *page, const char *name, atomic_llong *out)
{
    size_t len = strlen(name);
    for (const char *line = page; line && *line; line = strchr(line, '\n')) {
        line += *line == '\n';
        const char *sp = strchr(line, ' ');
        if (*line == '#' || !sp || (size_t)(sp - line) < len + 1 || sp[-(long)len - 1] != '_')
            continue;
        if (memcmp(sp - len, name, len) == 0) {
            atomic_store(out, strtoll(sp + 1, NULL, 10));
            return;
        }
    }
}

static int scrape(void)
{
    int fd = psock_connect(metrics_port, 5000);
    if (fd < 0)
        return -1;
    static const char req[] = "GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (psock_write_all(fd, req, sizeof req - 1) != 0) {
        close(fd);
        return -1;
    }
    size_t cap = 1 << 20, n = 0;
    char *page = malloc(cap + 1);
    ssize_t r;
    while (page && n < cap && (r = read(fd, page + n, cap - n)) > 0)
        n += (size_t)r;
    close(fd);
    if (!page)
        return -1;
    page[n] = '\0';
    int rc = strncmp(page, "HTTP/1.", 7) == 0 && strstr(page, " 200 ") ? 0 : -1;
    if (rc == 0) {
        gauge(page, "client_connections_active", &proxy_active);
        gauge(page, "antireplay_capacity_entries", &replay_entries);
    }
    free(page);
    return rc;
}

static void *scrape_main(void *arg)
{
    (void)arg;
    double next = now_s();
    while (!atomic_load(&stop_flag)) {
        next += O.scrape_every_s;
        if (!pace_until(next))
            break;
        atomic_fetch_add(scrape() == 0 ? &scrapes_ok : &scrapes_failed, 1);
    }
    return NULL;
}

/* ---- operations: reloads, and the injected Redis restart ---- */

/* Wait (bounded: 20 s) until the daemon's log holds n "reload: " lines. The log is read
   from where the last call stopped (pproc_log_count reads only a log's first MiB, and an
   hour of connection lines is tens of MiB). 0, or -1. */
static int wait_reloads(int n)
{
    static const char needle[] = "reload: ";
    static long off;
    static int seen;
    static char carry[sizeof needle];
    static size_t carry_n;
    for (int i = 0; i < 1000; i++) {
        FILE *f = fopen(log_path, "r");
        if (f && fseek(f, off, SEEK_SET) == 0) {
            char buf[65536 + sizeof needle];
            size_t got;
            while ((got = fread(buf + carry_n, 1, 65536, f)) > 0) {
                memcpy(buf, carry, carry_n);
                size_t len = carry_n + got;
                off += (long)got;
                for (char *p = buf; (p = memmem(p, (size_t)(buf + len - p), needle,
                                                 sizeof needle - 1)) != NULL;
                     p += sizeof needle - 1)
                    seen++;
                /* keep the last bytes: a needle cut by the read is found next time */
                carry_n = len < sizeof needle - 1 ? len : sizeof needle - 2;
                memcpy(carry, buf + len - carry_n, carry_n);
            }
        }
        if (f)
            fclose(f);
        if (seen >= n)
            return 0;
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

/* A fresh handshake with key (FakeTLS): 0 when it relays a short echo. */
static int try_key(const uint8_t *key, uint32_t seed)
{
    struct pcli_opts o = copts(PCLI_TLS, key);
    o.timeout_ms = 3000;
    struct pcli c;
    int rc = pcli_connect(&c, proxy_port, &o);
    if (rc == 0)
        rc = pcli_echo(&c, seed, 1024, 0);
    pcli_close(&c);
    return rc;
}

static void *ops_main(void *arg)
{
    (void)arg;
    double end = t0 + O.minutes * 60;
    double next_reload = t0 + O.reload_every_s;
    bool redis_done = !O.fleet;
    int gen = 0;
    while (!atomic_load(&stop_flag)) {
        double next = next_reload;
        double half = t0 + (end - t0) / 2;
        if (!redis_done && half < next)
            next = half;
        if (!pace_until(next))
            break;
        if (!redis_done && now_s() >= half) {
            /* injected: churn failures in the next 10 s are the restart's, counted apart */
            atomic_store(&inject_until_ms, elapsed_ms() + 10000);
            atomic_store(&event_code, 2);
            if (tgtest_redis_restart(&redis) != 0)
                fprintf(stderr, "soak: restarting redis-server failed\n");
            redis_done = true;
            continue;
        }
        next_reload += O.reload_every_s;
        int prev = gen++;
        if (write_config(gen) != 0) {
            fprintf(stderr, "soak: writing %s failed\n", cfg_path);
            atomic_fetch_add(&reload_checks_failed, 1);
            continue;
        }
        kill(proxy_pid, SIGHUP);
        atomic_store(&event_code, 1);
        if (wait_reloads(gen) != 0) {
            fprintf(stderr, "soak: reload %d was not logged\n", gen);
            atomic_fetch_add(&reload_checks_failed, 1);
            continue;
        }
        atomic_fetch_add(&reloads_done, 1);
        uint8_t k[16];
        rot_key(gen, k);
        if (try_key(k, 777000 + (uint32_t)gen) != 0) {
            fprintf(stderr, "soak: the secret added by reload %d does not work\n", gen);
            atomic_fetch_add(&reload_checks_failed, 1);
        }
        if (prev > 0) {
            rot_key(prev, k);
            if (try_key(k, 778000 + (uint32_t)gen) == 0) {
                fprintf(stderr, "soak: the secret removed by reload %d still works\n", gen);
                atomic_fetch_add(&reload_checks_failed, 1);
            }
        }
    }
    return NULL;
}

/* ---- sampling ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void sample_loop(FILE *csv)
{
    static double mine[LAT_CAP];
    fprintf(csv, "t_s,rss_kb,fds,threads,client_conns,proxy_active,hs_n,hs_p50_ms,hs_p99_ms,"
                 "churn_ok,churn_failed,relay_rounds,relay_failures,replay_entries,event\n");
    double end = t0 + O.minutes * 60;
    for (long s = 1; now_s() < end; s++) {
        sleep_until(t0 + (double)s);
        pthread_mutex_lock(&lat_mu);
        size_t n = lat_n;
        memcpy(mine, lat, n * sizeof *mine);
        lat_n = 0;
        pthread_mutex_unlock(&lat_mu);
        qsort(mine, n, sizeof *mine, cmp_double);
        double p50 = n ? mine[n / 2] * 1e3 : 0, p99 = n ? mine[(n * 99) / 100] * 1e3 : 0;
        int ev = atomic_exchange(&event_code, 0);
        fprintf(csv, "%ld,%ld,%ld,%ld,%d,%lld,%zu,%.3f,%.3f,%llu,%llu,%llu,%llu,%lld,%s\n", s,
                pproc_status_field(proxy_pid, "VmRSS"), pproc_fd_count(proxy_pid),
                pproc_status_field(proxy_pid, "Threads"), atomic_load(&open_conns),
                atomic_load(&proxy_active), n, p50, p99, atomic_load(&churn_ok),
                atomic_load(&churn_fail_connect) + atomic_load(&churn_fail_verify),
                atomic_load(&relay_rounds), atomic_load(&relay_failures),
                atomic_load(&replay_entries), ev == 1 ? "reload" : ev == 2 ? "redis-restart" : "");
        fflush(csv);
        if (waitpid(proxy_pid, NULL, WNOHANG) == proxy_pid) {
            fprintf(stderr, "soak: tgproxy exited during the run (see %s)\n", log_path);
            proxy_pid = -1;
            return;
        }
    }
}

/* ---- setup ---- */

static void usage(FILE *f)
{
    fprintf(f, "usage: tgkit_soak_proxy [--minutes M] [--churn N/min] [--relays N] [--slow N]\n"
               "         [--reload-every S] [--scrape-every S] [--threads N] [--fleet]\n"
               "         [--out DIR] [--tgproxy PATH]\n");
}

static int parse(int argc, char **argv)
{
    static const struct option lo[] = {
        {"minutes", 1, NULL, 'm'},      {"churn", 1, NULL, 'c'},   {"relays", 1, NULL, 'r'},
        {"slow", 1, NULL, 's'},         {"reload-every", 1, NULL, 'R'},
        {"scrape-every", 1, NULL, 'S'}, {"threads", 1, NULL, 't'}, {"fleet", 0, NULL, 'f'},
        {"out", 1, NULL, 'o'},          {"tgproxy", 1, NULL, 'p'}, {"help", 0, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (ch) {
        case 'm': O.minutes = atof(optarg); break;
        case 'c': O.churn_per_min = atoi(optarg); break;
        case 'r': O.relays = atoi(optarg); break;
        case 's': O.slow = atoi(optarg); break;
        case 'R': O.reload_every_s = atoi(optarg); break;
        case 'S': O.scrape_every_s = atoi(optarg); break;
        case 't': O.churn_threads = atoi(optarg); break;
        case 'f': O.fleet = true; break;
        case 'o': O.out = optarg; break;
        case 'p': O.tgproxy = optarg; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return -1;
        }
    }
    if (O.minutes <= 0 || O.churn_per_min <= 0 || O.relays < 0 || O.slow < 0 ||
        O.reload_every_s <= 0 || O.scrape_every_s <= 0 || O.churn_threads <= 0 ||
        O.churn_threads > 256 || O.slow > 64) {
        fprintf(stderr, "tgkit_soak_proxy: an option is out of range\n");
        usage(stderr);
        return -1;
    }
    return 0;
}

static void summary(double secs, int exit_status)
{
    char path[300];
    snprintf(path, sizeof path, "%s/summary.txt", O.out);
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    fprintf(f,
            "minutes=%.2f\nseconds=%.1f\nchurn_per_min=%d\nrelays=%d\nslow=%d\n"
            "reload_every_s=%d\nscrape_every_s=%d\nfleet=%d\n"
            "churn_ok=%llu\nchurn_fail_connect=%llu\nchurn_fail_verify=%llu\n"
            "injected_failures=%llu\nrelay_rounds=%llu\nrelay_bytes_verified=%llu\n"
            "relay_failures=%llu\nrelay_reopened=%llu\nslow_bytes_verified=%llu\n"
            "slow_failures=%llu\nscrapes_ok=%llu\nscrapes_failed=%llu\nreloads_done=%llu\n"
            "reload_checks_failed=%llu\ntgproxy_exit=%d\n",
            O.minutes, secs, O.churn_per_min, O.relays, O.slow, O.reload_every_s,
            O.scrape_every_s, O.fleet, atomic_load(&churn_ok), atomic_load(&churn_fail_connect),
            atomic_load(&churn_fail_verify), atomic_load(&injected_failures),
            atomic_load(&relay_rounds), atomic_load(&relay_bytes), atomic_load(&relay_failures),
            atomic_load(&relay_reopened), atomic_load(&slow_bytes), atomic_load(&slow_failures),
            atomic_load(&scrapes_ok), atomic_load(&scrapes_failed), atomic_load(&reloads_done),
            atomic_load(&reload_checks_failed), exit_status);
    fclose(f);
}

int main(int argc, char **argv)
{
    if (parse(argc, argv) != 0)
        return 2;
    signal(SIGPIPE, SIG_IGN);
    if (RAND_bytes(key_tls, 16) != 1 || RAND_bytes(key_dd, 16) != 1)
        return 1;
    char mk[512];
    snprintf(mk, sizeof mk, "mkdir -p '%s'", O.out);
    if (system(mk) != 0) {
        fprintf(stderr, "soak: cannot create %s\n", O.out);
        return 1;
    }
    snprintf(dir, sizeof dir, "/tmp/tgkit-soak-XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    snprintf(cfg_path, sizeof cfg_path, "%s/tgproxy.toml", dir);
    snprintf(log_path, sizeof log_path, "%s/tgproxy.log", O.out);
    unlink(log_path);

    struct fakedc *dc = fakedc_start(&dc_port);
    struct pfront *front = pfront_start(&front_port);
    if (!dc || !front) {
        fprintf(stderr, "soak: the fake DC or the fronting stand-in could not start\n");
        return 1;
    }
    if (O.fleet && tgtest_redis_start(&redis) != 0) {
        fprintf(stderr, "soak: --fleet needs redis-server (it did not start)\n");
        return 1;
    }
    if (write_config(0) != 0)
        return 1;
    char *args[] = {(char *)O.tgproxy, "run", cfg_path, NULL};
    proxy_pid = pproc_spawn_logged(args, log_path);
    if (proxy_pid < 0 || pproc_log_wait(log_path, "listening on", 1) != 0 ||
        pproc_log_port(log_path, "listening on", &proxy_port) != 0 ||
        pproc_log_wait(log_path, "[stats.prometheus] serving", 1) != 0 ||
        pproc_log_port(log_path, "[stats.prometheus] serving", &metrics_port) != 0) {
        fprintf(stderr, "soak: tgproxy did not start (see %s)\n", log_path);
        return 1;
    }
    char csv_path[300];
    snprintf(csv_path, sizeof csv_path, "%s/samples.csv", O.out);
    FILE *csv = fopen(csv_path, "w");
    if (!csv)
        return 1;
    printf("soak: tgproxy pid %d on port %u for %.1f min: %d cycles/min, %d relays, %d slow "
           "readers, SIGHUP every %d s, scrape every %d s%s\n",
           (int)proxy_pid, proxy_port, O.minutes, O.churn_per_min, O.relays, O.slow,
           O.reload_every_s, O.scrape_every_s, O.fleet ? ", [fleet] with a Redis restart" : "");
    fflush(stdout);

    t0 = now_s();
    pthread_t churn[256], slow[64], relays, scraper, ops;
    for (int i = 0; i < O.churn_threads; i++)
        pthread_create(&churn[i], NULL, churn_main, NULL);
    for (int i = 0; i < O.slow; i++)
        pthread_create(&slow[i], NULL, slow_main, (void *)(uintptr_t)i);
    pthread_create(&relays, NULL, relays_main, NULL);
    pthread_create(&scraper, NULL, scrape_main, NULL);
    pthread_create(&ops, NULL, ops_main, NULL);

    sample_loop(csv);
    atomic_store(&stop_flag, true);
    for (int i = 0; i < O.churn_threads; i++)
        pthread_join(churn[i], NULL);
    for (int i = 0; i < O.slow; i++)
        pthread_join(slow[i], NULL);
    pthread_join(relays, NULL);
    pthread_join(scraper, NULL);
    pthread_join(ops, NULL);
    fclose(csv);

    int exit_status = -1;
    if (proxy_pid > 0) {
        kill(proxy_pid, SIGTERM);
        int st = 0;
        for (int i = 0; i < 400; i++) { /* bounded: 40 s */
            pid_t r = waitpid(proxy_pid, &st, WNOHANG);
            if (r == proxy_pid) {
                exit_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                break;
            }
            struct timespec ts = {0, 100 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        if (exit_status < 0) {
            kill(proxy_pid, SIGKILL);
            waitpid(proxy_pid, NULL, 0);
        }
    }
    summary(now_s() - t0, exit_status);
    if (O.fleet)
        tgtest_redis_stop(&redis);
    fakedc_stop(dc);
    pfront_stop(front);
    unlink(cfg_path);
    rmdir(dir);
    printf("soak: done; %s/samples.csv and summary.txt written\n", O.out);
    return 0;
}
