/*
 * bench/proxy/seen: what noting a client address costs an authenticated handshake.
 *
 * conn.c calls seen_note once per authenticated handshake, with the label's slot and the
 * client's address; a secret shared by hundreds of clients keeps SEEN_ADDRS (256) of them.
 * Rows, over one slot filled to the cap:
 *   floor:        what any per-slot note must do: lock the slot's mutex, compare the address
 *                 with one kept entry, store the time, unlock;
 *   scan_256:     the previous design (a linear scan of every kept entry, replacing the
 *                 oldest), kept here as the reference the index replaced;
 *   note_same:    one client reconnecting (the address is already the most recent);
 *   note_hit_256: 256 clients in turn (each note finds its address and moves it first);
 *   note_new_512: 512 clients in turn, so every note is a new address at the cap: the least
 *                 recent one is replaced (a deletion from the index);
 *   get_256:      the API's read of the slot (count and copy of 256 addresses).
 * Time and allocations per operation (0 expected) next to the floor.
 */
#include "bench.h"

#include "proxy/engine/seen.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define NADDR 512

struct ctx {
    struct seen *s;
    uint8_t addr[NADDR][16];
    size_t i;
    int64_t now;
    /* the floor's and the reference's state */
    pthread_mutex_t mu;
    struct seen_addr one, ref[SEEN_ADDRS];
    uint32_t nref;
};

static void floor_note(void *p)
{
    struct ctx *x = p;
    const uint8_t *a = x->addr[x->i++ & 255];
    pthread_mutex_lock(&x->mu);
    if (memcmp(x->one.addr, a, 16) != 0)
        tg__bench_sink(1);
    x->one.at = x->now;
    pthread_mutex_unlock(&x->mu);
}

/* The previous seen_note's body: scan for the address while finding the oldest entry. */
static void scan_256(void *p)
{
    struct ctx *x = p;
    const uint8_t *a = x->addr[x->i++ & 255];
    pthread_mutex_lock(&x->mu);
    uint32_t i = 0, oldest = 0;
    for (; i < x->nref && memcmp(x->ref[i].addr, a, 16) != 0; i++)
        if (x->ref[i].at < x->ref[oldest].at)
            oldest = i;
    if (i == x->nref) {
        i = x->nref < SEEN_ADDRS ? x->nref++ : oldest;
        memcpy(x->ref[i].addr, a, 16);
    }
    x->ref[i].at = ++x->now;
    pthread_mutex_unlock(&x->mu);
}

static void note_same(void *p)
{
    struct ctx *x = p;
    seen_note(x->s, 0, x->addr[0], x->now);
}

static void note_hit_256(void *p)
{
    struct ctx *x = p;
    seen_note(x->s, 0, x->addr[x->i++ & 255], x->now);
}

static void note_new_512(void *p)
{
    struct ctx *x = p;
    seen_note(x->s, 0, x->addr[x->i++ & (NADDR - 1)], x->now);
}

static void get_256(void *p)
{
    struct ctx *x = p;
    struct seen_addr out[SEEN_ADDRS];
    int64_t last;
    tg__bench_sink(seen_get(x->s, 0, x->now, 3600, out, SEEN_ADDRS, &last));
    tg__bench_sink((uint64_t)out[SEEN_ADDRS - 1].at);
}

int main(void)
{
    static struct ctx x;
    x.s = seen_new(1);
    if (!x.s)
        return 1;
    pthread_mutex_init(&x.mu, NULL);
    x.now = 1700000000;
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < NADDR; i++) { /* IPv4-mapped, random addresses */
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        x.addr[i][10] = x.addr[i][11] = 0xff;
        memcpy(x.addr[i] + 12, &r, 4);
    }
    for (size_t i = 0; i < 256; i++) { /* both tables full */
        seen_note(x.s, 0, x.addr[i], x.now);
        scan_256(&x);
    }
    tg__bench_result fl, r2;
    tg__bench_run("proxy_seen_floor_lock_compare_store", floor_note, &x, &fl);
    tg__bench_report(&fl, NULL);
    tg__bench_run("proxy_seen_scan_256_previous", scan_256, &x, &r2);
    tg__bench_report(&r2, &fl);
    tg__bench_run("proxy_seen_note_same", note_same, &x, &r2);
    tg__bench_report(&r2, &fl);
    tg__bench_run("proxy_seen_note_hit_256", note_hit_256, &x, &r2);
    tg__bench_report(&r2, &fl);
    tg__bench_run("proxy_seen_note_new_512", note_new_512, &x, &r2);
    tg__bench_report(&r2, &fl);
    tg__bench_run("proxy_seen_get_256", get_256, &x, &r2);
    tg__bench_report(&r2, &fl);
    tg__bench_table();
    seen_free(x.s);
    return 0;
}
