/* fleet_fx: helpers of the fleet tests. See fleet_fx.h. */
#include "fleet_fx.h"

#include <curl/curl.h>
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t fx_update(char *buf, size_t cap, int64_t update_id, int64_t chat, long seq)
{
    int n =
        snprintf(buf, cap,
                 "{\"update_id\":%lld,\"message\":{\"message_id\":%lld,\"date\":1700000000,"
                 "\"chat\":{\"id\":%lld,\"type\":\"private\"},\"from\":{\"id\":%lld,"
                 "\"is_bot\":false,\"first_name\":\"u\"},\"text\":\"%ld\"}}",
                 (long long)update_id, (long long)update_id, (long long)chat, (long long)chat, seq);
    return n < 0 ? 0 : (size_t)n;
}

long fx_seq_of(const char *text)
{
    char *end;
    long v = text ? strtol(text, &end, 10) : -1;
    return text && *text && !*end ? v : -1;
}

static int cmp_rec(const void *a, const void *b)
{
    const struct fx_rec *x = a, *y = b;
    if (x->chat != y->chat)
        return x->chat < y->chat ? -1 : 1;
    if (x->t0_ns != y->t0_ns)
        return x->t0_ns < y->t0_ns ? -1 : 1;
    return 0;
}

static void note(struct fx_check *c, const struct fx_rec *r, const char *what)
{
    if (!c->first[0])
        snprintf(c->first, sizeof c->first, "chat %lld seq %ld: %s", (long long)r->chat, r->seq,
                 what);
}

/* One chat's records, sorted by start time. */
static void check_chat(const struct fx_rec *r, size_t n, long per_chat, unsigned char *seen,
                       struct fx_check *c)
{
    long next = 1;
    uint64_t last_t1 = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i].t0_ns < last_t1) {
            c->overlap++;
            note(c, &r[i], "started before the previous handler of its chat ended");
        }
        if (r[i].t1_ns > last_t1)
            last_t1 = r[i].t1_ns;
        if (r[i].seq < 1 || r[i].seq > per_chat)
            continue;
        if (seen[r[i].seq]) {
            c->dups++;
            continue;
        }
        seen[r[i].seq] = 1;
        if (r[i].seq != next) {
            c->order++;
            note(c, &r[i], "ran out of order");
        }
        if (r[i].seq >= next)
            next = r[i].seq + 1;
        if (r[i].prev != r[i].seq - 1 && r[i].prev != r[i].seq) {
            c->conv++;
            note(c, &r[i], "conversation did not hold the previous seq");
        }
    }
}

/* One update never handled: counted, and named in out->lost while there is room. */
static void note_lost(struct fx_check *c, int64_t chat, long seq, long update_id)
{
    c->missing++;
    if (!c->first[0])
        snprintf(c->first, sizeof c->first, "chat %lld seq %ld: never handled", (long long)chat,
                 seq);
    size_t used = strlen(c->lost), room = sizeof c->lost - used;
    char item[80];
    int n = snprintf(item, sizeof item, "%supdate %ld (chat %lld seq %ld)", used ? ", " : "",
                     update_id, (long long)chat, seq);
    if (strstr(c->lost, "..."))
        return;                                     /* full already */
    if (n > 0 && (size_t)n + sizeof ", ..." < room) /* room left for the ellipsis */
        memcpy(c->lost + used, item, (size_t)n + 1);
    else
        memcpy(c->lost + used, ", ...", sizeof ", ...");
}

void fx_check_records(struct fx_rec *r, size_t n, int64_t chat_base, long nchats, long per_chat,
                      struct fx_check *out)
{
    memset(out, 0, sizeof *out);
    qsort(r, n, sizeof *r, cmp_rec);
    unsigned char *seen = malloc((size_t)per_chat + 1);
    size_t i = 0;
    for (long c = 0; c < nchats && seen; c++) {
        int64_t chat = chat_base + c;
        while (i < n && r[i].chat < chat)
            i++;
        size_t j = i;
        while (j < n && r[j].chat == chat)
            j++;
        memset(seen, 0, (size_t)per_chat + 1);
        check_chat(r + i, j - i, per_chat, seen, out);
        for (long s = 1; s <= per_chat; s++)
            if (!seen[s])
                note_lost(out, chat, s, (s - 1) * nchats + c + 1);
        i = j;
    }
    free(seen);
}

static void *worker_main(void *arg)
{
    struct fx_worker *w = arg;
    w->rc = tg_fleet_run_worker(w->f, w->d, &(tg_fleet_worker_options){.drain_ms = 5000});
    return NULL;
}

bool fx_worker_start(struct fx_worker *w, tg_fleet *f, tg_storage *st, tg_handler_fn fn, void *user)
{
    *w = (struct fx_worker){.f = f, .st = st, .r = tg_router_new()};
    if (!f || !w->r || tg_router_on_kind(w->r, TG_UPDATE_MESSAGE, fn, user) != TG_OK)
        return false;
    w->d = tg_dispatcher_new(NULL, w->r, &(tg_dispatcher_options){.workers = 4, .storage = st});
    return w->d && pthread_create(&w->th, NULL, worker_main, w) == 0;
}

tg_status fx_worker_stop(struct fx_worker *w)
{
    tg_dispatcher_stop(w->d);
    pthread_join(w->th, NULL);
    tg_dispatcher_free(w->d);
    tg_storage_free(w->st);
    tg_router_free(w->r);
    tg_fleet_free(w->f);
    return w->rc;
}

static _Thread_local CURL *post_handle;

static size_t discard(char *p, size_t sz, size_t n, void *u)
{
    (void)p;
    (void)u;
    return sz * n;
}

long fx_post(const char *url, const char *body, size_t len)
{
    if (!post_handle && !(post_handle = curl_easy_init()))
        return -1;
    CURL *c = post_handle;
    static const char *const hdr[] = {"Content-Type: application/json", NULL};
    struct curl_slist *hs = curl_slist_append(NULL, hdr[0]);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hs);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)len);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    long status = -1;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hs);
    return status;
}

void fx_post_cleanup(void)
{
    if (post_handle)
        curl_easy_cleanup(post_handle);
    post_handle = NULL;
}

long long fx_redis_int(uint16_t port, const char *fmt, ...)
{
    struct timeval tv = {.tv_sec = 2};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    long long v = -1;
    if (c && !c->err) {
        va_list ap;
        va_start(ap, fmt);
        redisReply *r = redisvCommand(c, fmt, ap);
        va_end(ap);
        if (r && r->type == REDIS_REPLY_INTEGER)
            v = r->integer;
        if (r)
            freeReplyObject(r);
    }
    if (c)
        redisFree(c);
    return v;
}
