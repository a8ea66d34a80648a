/*
 * bench/proxy/acl: what the access-list check at accept costs with a large list.
 *
 * A blocklist of 150,000 random IPv4 ranges (CIDRs from /20 to /32, as in FireHOL's big
 * netsets; more than 100,000 remain after merging) and 20,000 IPv6 CIDRs is written to a
 * file, loaded through acl_new as tgproxy loads it, and parsed into a netset. Rows, each looking up
 * the next of 4096 random addresses (about a tenth of them covered): floor: a plain binary search
 * (lower bound) over a sorted uint32_t array of the same range starts, and one random load from
 * that array (the memory floor); netset_has4 / netset_has6: the merged-range search alone;
 *   acl_check: what an accept pays (the reader's busy flag, two atomic pointer loads, the
 *          allowlist/blocklist rule, the search).
 * Time per lookup and allocations per lookup (0 expected) are reported next to the floor.
 * A line reports the build (read, parse, sort, merge, publish) of the whole list.
 */
#include "bench.h"

#include "core/alloc.h"
#include "core/clock.h"
#include "proxy/services/acl.h"
#include "proxy/wire/netset.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NV4    150000
#define NV6    20000
#define NPROBE 4096 /* power of two */

struct ctx {
    const uint32_t *sorted; /* range starts, sorted (the floor's array) */
    size_t n;
    const struct netset *ns;
    struct acl *acl;
    uint32_t probe4[NPROBE];
    uint8_t probe6[NPROBE][16];
    struct sockaddr_in sa[NPROBE];
    size_t i;
};

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static void floor_bsearch(void *p)
{
    struct ctx *x = p;
    uint32_t v = x->probe4[x->i++ & (NPROBE - 1)];
    size_t lo = 0, hi = x->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (x->sorted[mid] <= v)
            lo = mid + 1;
        else
            hi = mid;
    }
    tg__bench_sink(lo);
}

static void floor_load(void *p)
{
    struct ctx *x = p;
    uint32_t v = x->probe4[x->i++ & (NPROBE - 1)];
    tg__bench_sink(x->sorted[v % x->n]);
}

static void has4(void *p)
{
    struct ctx *x = p;
    tg__bench_sink(netset_has4(x->ns, x->probe4[x->i++ & (NPROBE - 1)]));
}

static void has6(void *p)
{
    struct ctx *x = p;
    tg__bench_sink(netset_has6(x->ns, x->probe6[x->i++ & (NPROBE - 1)]));
}

static void check(void *p)
{
    struct ctx *x = p;
    const struct sockaddr *sa = (const struct sockaddr *)&x->sa[x->i++ & (NPROBE - 1)];
    tg__bench_sink(acl_check(x->acl, 0, sa));
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The list file: NV4 IPv4 CIDRs then NV6 IPv6 CIDRs; starts[] gets the IPv4 starts. */
static int write_list(const char *path, uint32_t *starts)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    uint64_t s = 42;
    fprintf(f, "# bench list\n");
    for (size_t i = 0; i < NV4; i++) {
        unsigned plen = 20 + (unsigned)(rnd(&s) % 13);
        uint32_t a = (uint32_t)rnd(&s) & (plen == 32 ? UINT32_MAX : ~(UINT32_MAX >> plen));
        starts[i] = a;
        fprintf(f, "%u.%u.%u.%u/%u\n", a >> 24, a >> 16 & 255, a >> 8 & 255, a & 255, plen);
    }
    for (size_t i = 0; i < NV6; i++) {
        uint8_t b[16] = {0x20, 0x01};
        for (int k = 2; k < 8; k++)
            b[k] = (uint8_t)rnd(&s);
        char t[INET6_ADDRSTRLEN];
        inet_ntop(AF_INET6, b, t, sizeof t);
        fprintf(f, "%s/%u\n", t, 32 + (unsigned)(rnd(&s) % 33));
    }
    return fclose(f);
}

/* Probes: half inside a listed range's start, half random (mostly outside). */
static void make_probes(struct ctx *x, const uint32_t *starts)
{
    uint64_t s = 7;
    for (size_t i = 0; i < NPROBE; i++) {
        uint32_t a = i % 8 == 0 ? starts[rnd(&s) % NV4] : (uint32_t)rnd(&s);
        x->probe4[i] = a;
        x->sa[i] = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(a)};
        x->probe6[i][0] = 0x20;
        x->probe6[i][1] = 0x01;
        for (int k = 2; k < 16; k++)
            x->probe6[i][k] = (uint8_t)rnd(&s);
    }
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    if (f && fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        buf = n > 0 ? malloc((size_t)n) : NULL;
        rewind(f);
        if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        }
        *len = n > 0 ? (size_t)n : 0;
    }
    if (f)
        fclose(f);
    return buf;
}

/* Load the list through acl_new (as tgproxy does) and borrow its published blocklist. */
static int load(struct ctx *x, const char *path, struct config *cfg)
{
    config_init(cfg);
    cfg->blocklist.enabled = true;
    cfg->blocklist.nsources = 1;
    cfg->blocklist.sources = tg__calloc(1, sizeof *cfg->blocklist.sources);
    if (!cfg->blocklist.sources)
        return -1;
    snprintf(cfg->blocklist.sources[0].text, sizeof cfg->blocklist.sources[0].text, "%s", path);
    char err[512];
    uint64_t t0 = tg__now_ns();
    if (acl_new(cfg, 1, &x->acl, err, sizeof err) != 0) {
        fprintf(stderr, "acl: %s\n", err);
        return -1;
    }
    double ms = (double)(tg__now_ns() - t0) / 1e6;
    struct acl_list_stats st;
    acl_stats(x->acl, ACL_BLOCK, &st);
    printf("bench=proxy_acl_build lines=%d ranges=%llu ms=%.1f commit=%s\n", NV4 + NV6,
           (unsigned long long)st.ranges, ms, tg__bench_commit());
    return 0;
}

int main(void)
{
    static struct ctx x;
    uint32_t *starts = malloc(NV4 * sizeof *starts);
    char path[] = "/tmp/tgbench-acl-XXXXXX";
    int fd = mkstemp(path);
    if (!starts || fd < 0)
        return 1;
    close(fd);
    struct config cfg;
    if (write_list(path, starts) != 0 || load(&x, path, &cfg) != 0)
        return 1;
    size_t text_len = 0;
    char *text = read_all(path, &text_len);
    unlink(path);
    if (!text)
        return 1;
    /* the floor's array: the same list, sorted starts (unmerged, a little longer) */
    qsort(starts, NV4, sizeof *starts, cmp_u32);
    x.sorted = starts;
    x.n = NV4;
    make_probes(&x, starts);
    /* the same list parsed straight into a netset, for the search-only rows */
    struct netset *ns = netset_new();
    char err[256];
    if (!ns || netset_parse(ns, path, text, text_len, err, sizeof err) != 0 ||
        netset_finish(ns) != 0)
        return 1;
    free(text);
    x.ns = ns;
    tg__bench_result fb, fl, r;
    tg__bench_run("proxy_acl_floor_bsearch_u32", floor_bsearch, &x, &fb);
    tg__bench_report(&fb, NULL);
    tg__bench_run("proxy_acl_floor_load", floor_load, &x, &fl);
    tg__bench_report(&fl, NULL);
    tg__bench_run("proxy_acl_netset_has4", has4, &x, &r);
    tg__bench_report(&r, &fb);
    tg__bench_run("proxy_acl_netset_has6", has6, &x, &r);
    tg__bench_report(&r, &fb);
    tg__bench_run("proxy_acl_check_v4", check, &x, &r);
    tg__bench_report(&r, &fb);
    tg__bench_table();
    netset_free(ns);
    acl_free(x.acl);
    config_cleanup(&cfg);
    free(starts);
    return 0;
}
