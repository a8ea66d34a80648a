/*
 * bench/proxy/log_scrub: what scrubbing registered secrets costs per log line.
 *
 * tgproxy registers every text form of each configured secret (secret_scrub_forms: hex in
 * both cases and six base64 forms, 8 entries for an ee secret) with the default logger, and
 * every log line is scrubbed before it is written. Rows, on a 200-byte tgproxy-like line
 * (label, addresses, a hex digest) that holds no secret, the common case:
 *   floor: strlen + memchr of the line (the least a scan of it costs);
 *   scrub_N: tg__log_scrub with N proxy secrets registered (N = 1, 8, 256);
 *   memmem_N: the previous algorithm (one memmem per registered entry) on the same entries,
 *            for comparison;
 *   scrub_256_hit: the line with one secret in it (copied into the buffer each time, as
 *            tg__vlog formats each line afresh), against a floor of the copy + strlen.
 * Time per line and allocations per line (0 expected) are reported next to the floor.
 */
#include "bench.h"

#include "core/log.h"
#include "proxy/wire/secret.h"

#include <stdio.h>
#include <string.h>

#define LINE_LEN 200

struct ctx {
    tg__logger *lg;
    char line[TG__LOG_LINE_MAX + 64];
    char hit[LINE_LEN + 1]; /* the line with a secret in it */
    char buf[TG__LOG_LINE_MAX + 64];
};

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static void floor_scan(void *p)
{
    struct ctx *x = p;
    size_t n = strlen(x->line);
    tg__bench_sink(n + (memchr(x->line, '\x01', n) != NULL));
}

static void scrub(void *p)
{
    struct ctx *x = p;
    tg__log_scrub(x->lg, x->line, sizeof x->line);
    tg__bench_sink((uint8_t)x->line[0]);
}

/* The algorithm before the hash index: every entry searched for over the whole line. */
static void memmem_all(void *p)
{
    struct ctx *x = p;
    size_t len = strlen(x->line), n = __atomic_load_n(&x->lg->n_secrets, __ATOMIC_ACQUIRE);
    uint64_t found = 0;
    for (size_t i = 0; i < n; i++) {
        const struct tg__log_secret *e =
            &x->lg->chunks[i / TG__LOG_SECRET_CHUNK][i % TG__LOG_SECRET_CHUNK];
        found += memmem(x->line, len, e->p, e->n) != NULL;
    }
    tg__bench_sink(found);
}

static void floor_copy(void *p)
{
    struct ctx *x = p;
    memcpy(x->buf, x->hit, sizeof x->hit);
    tg__bench_sink(strlen(x->buf));
}

static void scrub_hit(void *p)
{
    struct ctx *x = p;
    memcpy(x->buf, x->hit, sizeof x->hit);
    tg__log_scrub(x->lg, x->buf, sizeof x->buf);
    tg__bench_sink(strlen(x->buf));
}

/* Register nsecrets random ee secrets the way tgproxy does; keeps the last one in *last. */
static void add_secrets(tg__logger *lg, size_t from, size_t to, uint64_t *seed, struct secret *last)
{
    char forms[SECRET_FORMS_MAX][SECRET_FORM_CAP];
    for (size_t i = from; i < to; i++) {
        struct secret s = {.kind = SECRET_EE, .domain_len = 11};
        memcpy(s.domain, "example.com", 12);
        for (size_t k = 0; k < SECRET_KEY_LEN; k++)
            s.key[k] = (uint8_t)rnd(seed);
        size_t n = secret_scrub_forms(&s, forms);
        for (size_t f = 0; f < n; f++)
            if (tg__logger_add_secret(lg, forms[f], strlen(forms[f])) != 0)
                fprintf(stderr, "log_scrub: cannot register a secret\n");
        *last = s;
    }
}

/* A tgproxy-like line of exactly LINE_LEN bytes: text, addresses, a hex digest. */
static void make_line(char *out, uint64_t *seed)
{
    int n = snprintf(out, LINE_LEN + 1,
                     "conn 4711: secret=user-0042 from 203.0.113.77:51234 to dc 2 "
                     "(149.154.167.51:443): handshake failed after 1532 ms, digest ");
    while (n < LINE_LEN)
        out[n++] = "0123456789abcdef"[rnd(seed) & 15];
    out[LINE_LEN] = '\0';
}

static void row(const char *name, tg__bench_fn fn, struct ctx *x, const tg__bench_result *floor)
{
    tg__bench_result r;
    tg__bench_run(name, fn, x, &r);
    tg__bench_report(&r, floor);
}

int main(void)
{
    static tg__logger lg;
    static struct ctx x;
    tg__logger_init(&lg, TG__LOG_INFO, NULL, NULL);
    x.lg = &lg;
    uint64_t seed = 42;
    make_line(x.line, &seed);
    tg__bench_result fl, fc;
    tg__bench_run("proxy_log_floor_strlen_memchr_200", floor_scan, &x, &fl);
    tg__bench_report(&fl, NULL);

    static const size_t counts[] = {1, 8, 256};
    struct secret last;
    size_t have = 0;
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        add_secrets(&lg, have, counts[c], &seed, &last);
        have = counts[c];
        char name[64];
        snprintf(name, sizeof name, "proxy_log_scrub_200_%zu_secrets", have);
        row(name, scrub, &x, &fl);
        snprintf(name, sizeof name, "proxy_log_memmem_200_%zu_secrets", have);
        row(name, memmem_all, &x, &fl);
    }
    printf("bench=proxy_log_entries secrets=%zu entries=%zu commit=%s\n", have, lg.n_secrets,
           tg__bench_commit());

    char hex[2 * (1 + SECRET_KEY_LEN + 11) + 1];
    memcpy(x.hit, x.line, sizeof x.hit);
    if (secret_format(&last, false, hex, sizeof hex) < 0)
        return 1;
    memcpy(x.hit + 120, hex, 2 + 2 * SECRET_KEY_LEN); /* "ee" + the key's hex */
    tg__bench_run("proxy_log_floor_copy_strlen_200", floor_copy, &x, &fc);
    tg__bench_report(&fc, NULL);
    row("proxy_log_scrub_200_256_secrets_hit", scrub_hit, &x, &fc);
    memset(hex, 0, sizeof hex);
    memset(&last, 0, sizeof last);
    tg__bench_table();
    tg__logger_cleanup(&lg);
    return 0;
}
