/*
 * flood.c: client-side flood control, shared by every ctx of a bot.
 *
 * Each limit is a GCRA bucket without burst (the "theoretical arrival time" form of a token
 * bucket): a message may go at max(now, tat) and moves tat one emission interval past that.
 * A message needs the global bucket and its chat's bucket, and for groups and channels the
 * group bucket too; the slot is the latest of them, so one reservation under one lock keeps
 * all limits at once and callers simply sleep until their slot. Reservations are made in
 * arrival order, which keeps messages to one chat in order.
 *
 * A fleet (src/bot/fleet/flood.c) may take over the reservation with the same arithmetic
 * in Redis, so the limits hold across processes; when it cannot reach Redis it answers
 * TG__FLOOD_UNAVAILABLE and the local buckets decide, as if there were no fleet.
 *
 * Chats live in an open-addressing table keyed by chat id. A bucket whose tat has passed is
 * the same as a fresh one, so the table is swept of those before it grows: memory follows
 * the number of chats written to in the last interval, not all chats ever seen.
 */
#include <string.h>

#include "bot/client/client_int.h"
#include "core/alloc.h"

#define EMPTY_KEY          INT64_MIN
#define MIN_CAP            64
#define DEF_GLOBAL_PER_SEC 30.0
#define DEF_CHAT_PER_SEC   1.0
#define DEF_GROUP_PER_MIN  20.0
#define DEF_MAX_WAIT_MS    60000

/* unit_us / per_unit rounded up (without libm: the library does not link it). */
static int64_t interval_us(double per_unit, double unit_us)
{
    double q = unit_us / per_unit;
    int64_t i = (int64_t)q;
    return (double)i < q ? i + 1 : i;
}

int tg__flood_init(struct tg__flood *f, const tg_flood_options *opt)
{
    memset(f, 0, sizeof *f);
    f->opt = *opt;
    if (!f->opt.global_per_sec)
        f->opt.global_per_sec = DEF_GLOBAL_PER_SEC;
    if (!f->opt.chat_per_sec)
        f->opt.chat_per_sec = DEF_CHAT_PER_SEC;
    if (!f->opt.group_per_min)
        f->opt.group_per_min = DEF_GROUP_PER_MIN;
    if (!f->opt.max_wait_ms)
        f->opt.max_wait_ms = DEF_MAX_WAIT_MS;
    const double r[3] = {f->opt.global_per_sec, f->opt.chat_per_sec, f->opt.group_per_min};
    for (int i = 0; i < 3; i++)
        if (!(r[i] > 0.0 && r[i] < 1e9))
            return -1;
    f->global_us = interval_us(f->opt.global_per_sec, 1e6);
    f->chat_us = interval_us(f->opt.chat_per_sec, 1e6);
    f->group_us = interval_us(f->opt.group_per_min, 60e6);
    pthread_mutex_init(&f->mu, NULL);
    return 0;
}

void tg__flood_cleanup(struct tg__flood *f)
{
    if (!f->global_us)
        return;
    tg__free(f->slots);
    pthread_mutex_destroy(&f->mu);
    f->slots = NULL;
    f->global_us = 0;
}

bool tg__flood_applies(const char *m)
{
    if (strncmp(m, "send", 4) == 0)
        return strcmp(m, "sendChatAction") != 0;
    return strncmp(m, "forward", 7) == 0 || strncmp(m, "copy", 4) == 0;
}

static size_t slot_hash(int64_t key, size_t cap)
{
    uint64_t x = (uint64_t)key * 0x9E3779B97F4A7C15ull;
    return (size_t)(x ^ (x >> 29)) & (cap - 1);
}

static struct tg__flood_slot *probe(struct tg__flood_slot *s, size_t cap, int64_t key)
{
    size_t i = slot_hash(key, cap);
    for (size_t n = 0; n < cap; n++, i = (i + 1) & (cap - 1))
        if (s[i].key == key || s[i].key == EMPTY_KEY)
            return &s[i];
    return NULL;
}

/* Rehash the live buckets (tat still ahead of now) into a table of new_cap slots. */
static int rebuild(struct tg__flood *f, size_t new_cap, int64_t now)
{
    struct tg__flood_slot *ns = tg__malloc(new_cap * sizeof *ns);
    if (!ns)
        return -1;
    for (size_t i = 0; i < new_cap; i++)
        ns[i].key = EMPTY_KEY;
    size_t used = 0;
    for (size_t i = 0; i < f->cap; i++) {
        const struct tg__flood_slot *o = &f->slots[i];
        if (o->key == EMPTY_KEY || (o->chat_tat <= now && o->group_tat <= now))
            continue;
        *probe(ns, new_cap, o->key) = *o;
        used++;
    }
    tg__free(f->slots);
    f->slots = ns;
    f->cap = new_cap;
    f->used = used;
    return 0;
}

static struct tg__flood_slot *find_slot(struct tg__flood *f, int64_t key, int64_t now)
{
    if (f->used + 1 > f->cap / 2) {
        size_t cap = f->cap ? f->cap : MIN_CAP;
        if (rebuild(f, cap, now) != 0)
            return NULL;
        if (f->used + 1 > cap / 4 && rebuild(f, cap * 2, now) != 0)
            return NULL;
    }
    struct tg__flood_slot *s = probe(f->slots, f->cap, key);
    if (s && s->key == EMPTY_KEY) {
        s->key = key;
        s->chat_tat = s->group_tat = 0;
        f->used++;
    }
    return s;
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

void tg__flood_set_remote(struct tg__flood *f, tg__flood_remote_fn fn, void *user)
{
    pthread_mutex_lock(&f->mu);
    f->remote = fn;
    f->remote_user = user;
    pthread_mutex_unlock(&f->mu);
}

int64_t tg__flood_reserve(struct tg__flood *f, int64_t key, bool group, int64_t now)
{
    if (key == EMPTY_KEY)
        key = EMPTY_KEY + 1;
    pthread_mutex_lock(&f->mu);
    tg__flood_remote_fn remote = f->remote;
    void *ruser = f->remote_user;
    pthread_mutex_unlock(&f->mu);
    if (remote) {
        int64_t at = remote(ruser, f, key, group, now);
        if (at != TG__FLOOD_UNAVAILABLE)
            return at;
    }
    pthread_mutex_lock(&f->mu);
    int64_t at = -1;
    struct tg__flood_slot *s = find_slot(f, key, now);
    if (s) {
        at = max64(now, max64(f->global_tat, s->chat_tat));
        if (group)
            at = max64(at, s->group_tat);
        if ((f->opt.fail_fast && at > now) || at - now > (int64_t)f->opt.max_wait_ms * 1000) {
            at = -1;
        } else {
            f->global_tat = at + f->global_us;
            s->chat_tat = at + f->chat_us;
            if (group)
                s->group_tat = at + f->group_us;
        }
    }
    pthread_mutex_unlock(&f->mu);
    return at;
}
