/*
 * The fleet in one process, against a real redis-server on 127.0.0.1:
 *  - cluster slots of keys and hash tags (the Redis Cluster specification's examples);
 *  - webhook ingress -> streams -> a worker: every update runs once, in order per chat, the
 *    streams end empty and nothing stays pending;
 *  - the webhook answers 503 while Redis is down and 200 again once it is back, 400 for a
 *    body that is not an Update (nothing published);
 *  - two workers share the partitions; when one stops, the other takes all of them;
 *  - a read whose answer is lost after Redis ran it: the reader claims the entry back and
 *    runs it before the chat's next update (stream ids: the one after an id);
 *  - long polling as ingress: one poller at a time, the other takes over from the offset;
 *    with the Bot API away, ten failed rounds log one warning; five 409s then success log
 *    one warning and one "working again" line;
 *  - fleet-wide flood control, and the fallback to local limits while Redis is down;
 *  - the idempotency helper.
 * The multi-process run (kills, restarts, a Redis restart) is test_fleet_procs.c.
 */
#include "tgtest.h"

#include <pthread.h>

#include "bot/fleet/rconn.h"
#include "core/clock.h"
#include "dispatch_fakeapi.h"
#include "fleet_fx.h"
#include "redis_server.h"
#include "tgbot/tgbot.h"

#define MAX_RECS 4096

struct sink {
    pthread_mutex_t mu;
    struct fx_rec recs[MAX_RECS];
    size_t n;
};

static struct sink sink = {.mu = PTHREAD_MUTEX_INITIALIZER};
static tgtest_redis redis;

static long conv_prev(tg_hctx *h)
{
    size_t len = 0;
    const char *data = tg_conv_data(h, &len);
    char b[24];
    if (!data || len >= sizeof b)
        return 0;
    memcpy(b, data, len);
    b[len] = '\0';
    return atol(b);
}

static tg_status on_message(tg_hctx *h, void *user)
{
    struct sink *s = user;
    uint64_t t0 = tg__now_ns();
    const tg_event *ev = tg_hctx_event(h);
    long seq = fx_seq_of(ev->text), prev = conv_prev(h);
    char b[24];
    int n = snprintf(b, sizeof b, "%ld", seq > prev ? seq : prev);
    tg_status st = tg_conv_set(h, "counting", b, (size_t)n);
    pthread_mutex_lock(&s->mu);
    if (s->n < MAX_RECS)
        s->recs[s->n++] = (struct fx_rec){ev->chat_id, seq, prev, t0, tg__now_ns()};
    pthread_mutex_unlock(&s->mu);
    return st;
}

static tg_fleet_options fleet_opts(const char *id)
{
    return (tg_fleet_options){.redis_port = redis.port,
                              .redis_timeout_ms = 1000,
                              .partitions = 8,
                              .lease_ms = 800,
                              .worker_id = id};
}

/* A worker with Redis conversations, recording into sink. */
static void wk_start(struct fx_worker *w, const char *id)
{
    tg_fleet_options o = fleet_opts(id);
    tg_fleet *f = tg_fleet_new(&o);
    tg_storage *st = tg_storage_redis_new(&(tg_redis_options){.port = redis.port});
    assert_true(f && st);
    assert_true(fx_worker_start(w, f, st, on_message, &sink));
}

static void wk_stop(struct fx_worker *w)
{
    assert_int_equal(fx_worker_stop(w), TG_OK);
}

static size_t sink_count(void)
{
    pthread_mutex_lock(&sink.mu);
    size_t n = sink.n;
    pthread_mutex_unlock(&sink.mu);
    return n;
}

static uint64_t handled(tg_fleet *f)
{
    tg_fleet_stats s;
    tg_fleet_get_stats(f, &s);
    return s.handled;
}

static int setup(void **state)
{
    (void)state;
    sink.n = 0;
    return tgtest_redis_start(&redis);
}

static int teardown(void **state)
{
    (void)state;
    fx_post_cleanup();
    tgtest_redis_stop(&redis);
    return 0;
}

static void test_slots(void **state)
{
    (void)state;
    assert_int_equal(tg__redis_slot("123456789", 9), 0x31C3); /* CRC16/XMODEM check value */
    const char *a = "{user1000}.following", *b = "{user1000}.followers";
    assert_int_equal(tg__redis_slot(a, strlen(a)), tg__redis_slot(b, strlen(b)));
    assert_int_equal(tg__redis_slot("foo{}{bar}", 10), tg__redis_slot("foo{}{bar}x", 10));
    assert_int_equal(tg__redis_slot("foo{{bar}}zap", 13), tg__redis_slot("{bar", 4));
    assert_int_equal(tg__redis_slot("foo{bar}{zap}", 13), tg__redis_slot("bar", 3));
}

static void test_stream_id_next(void **state)
{
    (void)state;
    char next[TG__STREAM_ID_MAX];
    assert_int_equal(tg__stream_id_next("1700000000000-0", next), 0);
    assert_string_equal(next, "1700000000000-1");
    assert_int_equal(tg__stream_id_next("5-18446744073709551615", next), 0);
    assert_string_equal(next, "6-0");
    const char *bad[] = {"18446744073709551615-18446744073709551615",
                         "18446744073709551616-0",
                         "",
                         "1",
                         "1-",
                         "-1",
                         "1-2x",
                         "a-1",
                         "1--2",
                         "1-+2"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(tg__stream_id_next(bad[i], next), -1);
}

static void post_all(const char *url, long chats, long per_chat, int64_t *next_id)
{
    char body[512];
    for (long s = 1; s <= per_chat; s++)
        for (long c = 0; c < chats; c++) {
            size_t n = fx_update(body, sizeof body, (*next_id)++, 1000 + c, s);
            assert_int_equal(fx_post(url, body, n), 200);
        }
}

static void wait_handled(tg_fleet *const *fs, int nf, uint64_t want)
{
    uint64_t got = 0;
    for (int i = 0; i < 1500 && got < want; i++) { /* up to ~30 s */
        got = 0;
        for (int k = 0; k < nf; k++)
            got += handled(fs[k]);
        if (got < want)
            tg__sleep_ms(20);
    }
    assert_true(got >= want);
}

static void check_sink(long chats, long per_chat, bool expect_no_dups)
{
    struct fx_check c;
    fx_check_records(sink.recs, sink.n, 1000, chats, per_chat, &c);
    if (c.missing || c.order || c.overlap || c.conv || (expect_no_dups && c.dups))
        fail_msg("missing %ld order %ld overlap %ld conv %ld dups %ld: %s", c.missing, c.order,
                 c.overlap, c.conv, c.dups, c.first);
}

static void test_webhook_to_worker(void **state)
{
    (void)state;
    struct fx_worker w = {0};
    wk_start(&w, "solo");
    tg_fleet_options io = fleet_opts(NULL);
    tg_fleet *in = tg_fleet_new(&io);
    assert_non_null(in);
    tg_webhook *wh =
        tg_webhook_start(NULL, &(tg_webhook_options){.host = "127.0.0.1", .port = -1, .fleet = in});
    assert_non_null(wh);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/", tg_webhook_port(wh));
    int64_t id = 1;
    post_all(url, 10, 30, &id);
    assert_int_equal(fx_post(url, "{\"update_id\":", 13), 400); /* not published */
    wait_handled(&w.f, 1, 300);
    tg_fleet_stats s;
    tg_fleet_get_stats(in, &s);
    assert_int_equal(s.published, 300);
    tg_webhook_stop(wh);
    wk_stop(&w);
    check_sink(10, 30, true);
    assert_int_equal(sink.n, 300);
    for (int p = 0; p < 8; p++) { /* acknowledged entries are deleted, none pending */
        assert_int_equal(fx_redis_int(redis.port, "XLEN {tgbot:p%d}:stream", p), 0);
        assert_int_equal(fx_redis_int(redis.port, "EXISTS {tgbot:p%d}:lease", p), 0);
    }
    tg_fleet_free(in);
}

static void test_webhook_503_while_redis_down(void **state)
{
    (void)state;
    tg_fleet_options io = fleet_opts(NULL);
    tg_fleet *in = tg_fleet_new(&io);
    assert_non_null(in);
    tg_webhook *wh =
        tg_webhook_start(NULL, &(tg_webhook_options){.host = "127.0.0.1", .port = -1, .fleet = in});
    assert_non_null(wh);
    char url[64], body[512];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/", tg_webhook_port(wh));
    size_t n = fx_update(body, sizeof body, 1, 1000, 1);
    assert_int_equal(fx_post(url, body, n), 200);
    tgtest_redis_kill(&redis);
    assert_int_equal(fx_post(url, body, n), 503);
    assert_int_equal(fx_post(url, body, n), 503);
    assert_int_equal(tgtest_redis_restart(&redis), 0);
    assert_int_equal(fx_post(url, body, n), 200);
    tg_fleet_stats s;
    tg_fleet_get_stats(in, &s);
    assert_int_equal(s.published, 2);
    assert_int_equal(s.publish_failed, 2);
    assert_null(tg_webhook_start(
        NULL, &(tg_webhook_options){.port = -1, .fleet = in, .reply_wait_ms = 100}));
    assert_non_null(strstr(tg_webhook_errmsg(), "reply_wait_ms"));
    tg_webhook_stop(wh);
    tg_fleet_free(in);
}

static void wait_owned(struct fx_worker *w, unsigned want)
{
    tg_fleet_stats s = {0};
    for (int i = 0; i < 500; i++) { /* up to ~10 s; leases are 800 ms */
        tg_fleet_get_stats(w->f, &s);
        if (s.owned == want)
            return;
        tg__sleep_ms(20);
    }
    fail_msg("worker owns %u partitions, expected %u", s.owned, want);
}

static void test_two_workers_share_and_hand_over(void **state)
{
    (void)state;
    struct fx_worker a = {0}, b = {0};
    wk_start(&a, "a");
    wk_start(&b, "b");
    wait_owned(&a, 4); /* 8 partitions, members sorted: a gets 0,2,4,6 and b 1,3,5,7 */
    wait_owned(&b, 4);
    tg_fleet_options io = fleet_opts(NULL);
    tg_fleet *in = tg_fleet_new(&io);
    assert_non_null(in);
    char body[512];
    int64_t id = 1;
    for (long s = 1; s <= 20; s++)
        for (long c = 0; c < 20; c++) {
            size_t n = fx_update(body, sizeof body, id++, 1000 + c, s);
            assert_int_equal(tg_fleet_publish(in, body, n), TG_OK);
        }
    tg_fleet *both[] = {a.f, b.f};
    wait_handled(both, 2, 400);
    wk_stop(&b); /* releases its leases at once */
    wait_owned(&a, 8);
    for (long c = 0; c < 20; c++) {
        size_t n = fx_update(body, sizeof body, id++, 1000 + c, 21);
        assert_int_equal(tg_fleet_publish(in, body, n), TG_OK);
    }
    for (int i = 0; i < 1500 && sink_count() < 420; i++) /* up to ~30 s */
        tg__sleep_ms(20);
    wk_stop(&a);
    check_sink(20, 21, true);
    tg_fleet_free(in);
}

/* Run a command on the test's redis-server that must answer +OK. */
static void redis_ok(const char *fmt, const char *arg)
{
    redisContext *c = redisConnectWithTimeout("127.0.0.1", redis.port, (struct timeval){2, 0});
    assert_true(c && !c->err);
    redisReply *r = redisCommand(c, fmt, arg);
    assert_true(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redisFree(c);
}

/* How many times the first pending entry of stream was delivered (0: nothing pending). */
static long long deliveries(const char *stream)
{
    return fx_redis_int(redis.port, "EVAL %s 1 %s",
                        "local p = redis.call('XPENDING', KEYS[1], 'workers', '-', '+', 1)\n"
                        "if #p == 0 then return 0 end\n"
                        "return p[1][4]",
                        stream);
}

/* Redis runs an XREADGROUP (the entry is now pending in the reader's name) and the answer
 * never arrives: here Redis closes the connection because the answer exceeds the output
 * buffer limit, as a timeout or a dropped link would lose it. The reader must take the entry
 * back (claim it again) and run it before the chat's next update, not read on past it. */
static void test_read_answer_lost_entry_claimed_back(void **state)
{
    (void)state;
    struct fx_worker w = {0};
    wk_start(&w, "solo");
    wait_owned(&w, 8);
    tg_fleet_options io = fleet_opts(NULL);
    tg_fleet *in = tg_fleet_new(&io);
    assert_non_null(in);
    char stream[64], small[512];
    snprintf(stream, sizeof stream, "{tgbot:p%u}:stream", tg_fleet_partition(in, 1000));
    enum { PAD = 1 << 20 }; /* answers with this entry exceed the 256 KB limit below */
    char *big = malloc(PAD + sizeof small);
    assert_non_null(big);
    size_t n = fx_update(small, sizeof small, 1, 1000, 1);
    memcpy(big, "{\"pad\":\"", 8);
    memset(big + 8, 'x', PAD);
    memcpy(big + 8 + PAD, "\",", 2);
    memcpy(big + 10 + PAD, small + 1, n); /* the update's own fields, NUL included */
    redis_ok("CONFIG SET client-output-buffer-limit %s", "normal 262144 0 0");
    assert_int_equal(tg_fleet_publish(in, big, 9 + PAD + n), TG_OK);
    long long times = 0; /* delivered once (answer lost), then claimed back (answer lost) */
    for (int i = 0; i < 500 && (times = deliveries(stream)) < 2 && sink_count() == 0; i++)
        tg__sleep_ms(20); /* up to ~10 s */
    redis_ok("CONFIG SET client-output-buffer-limit %s", "normal 0 0 0");
    free(big);
    size_t early = sink_count(); /* 0: no answer with the entry ever arrived */
    n = fx_update(small, sizeof small, 2, 1000, 2);
    assert_int_equal(tg_fleet_publish(in, small, n), TG_OK);
    for (int i = 0; i < 500 && sink_count() < 2; i++) /* up to ~10 s */
        tg__sleep_ms(20);
    wk_stop(&w);
    assert_int_equal(early, 0);
    if (times < 2)
        fail_msg("entry delivered %lld time(s) and never claimed back by its reader", times);
    check_sink(1, 2, true);
    assert_int_equal(fx_redis_int(redis.port, "XLEN %s", stream), 0);
    tg_fleet_free(in);
}

/* ---- long polling as ingress ---- */

#define TOKEN "123456:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

struct poller {
    tg_bot *bot;
    tg_router *r;
    tg_dispatcher *d;
    tg_fleet *f;
    pthread_t th;
    tg_status rc;
};

static void *poller_main(void *arg)
{
    struct poller *p = arg;
    p->rc = tg_run_polling(p->d, &(tg_polling_options){.timeout_s = 1, .fleet = p->f});
    return NULL;
}

static void poller_start(struct poller *p, fakeapi *api, const char *id)
{
    tg_fleet_options o = fleet_opts(id);
    /* The test counts exact publishes per poller, so the polling lease must not lapse: one
     * that does (a loaded machine stalled the poller past 800 ms) leaves the offset unsaved
     * and the next holder publishes those updates again, the duplicates the product allows.
     * 4 s leases also make each getUpdates a 1 s long poll (lease_ms / 2). */
    o.lease_ms = 4000;
    assert_non_null(p->f = tg_fleet_new(&o));
    assert_non_null(p->bot = tg_bot_new(TOKEN, &(tg_bot_options){.base_url = fakeapi_url(api)}));
    assert_non_null(p->r = tg_router_new());
    p->d =
        tg_dispatcher_new(p->bot, p->r, &(tg_dispatcher_options){.workers = 1, .no_get_me = true});
    assert_non_null(p->d);
    assert_int_equal(pthread_create(&p->th, NULL, poller_main, p), 0);
}

static uint64_t published(struct poller *p)
{
    tg_fleet_stats s;
    tg_fleet_get_stats(p->f, &s);
    return s.published;
}

static void poller_stop(struct poller *p)
{
    tg_dispatcher_stop(p->d);
    pthread_join(p->th, NULL);
    assert_int_equal(p->rc, TG_OK);
    tg_dispatcher_free(p->d);
    tg_router_free(p->r);
    tg_bot_free(p->bot);
    tg_fleet_free(p->f);
}

static void add_updates(fakeapi *api, long from_seq, long to_seq, int64_t *id)
{
    char body[512];
    for (long s = from_seq; s <= to_seq; s++)
        for (long c = 0; c < 20; c++) {
            fx_update(body, sizeof body, *id, 1000 + c, s);
            fakeapi_add_update(api, (*id)++, body);
        }
}

static void wait_sink(size_t n)
{
    for (int i = 0; i < 1500 && sink_count() < n; i++) /* up to ~30 s */
        tg__sleep_ms(20);
    assert_int_equal(sink_count(), n);
}

static void test_polling_ingress_one_poller_at_a_time(void **state)
{
    (void)state;
    fakeapi *api = fakeapi_start(TOKEN);
    assert_non_null(api);
    struct fx_worker w = {0};
    struct poller a = {0}, b = {0};
    wk_start(&w, "w");
    int64_t id = 1;
    add_updates(api, 1, 10, &id);
    poller_start(&a, api, "pa");
    wait_sink(200);
    poller_start(&b, api, "pb"); /* waits: a holds the polling lease */
    add_updates(api, 11, 15, &id);
    wait_sink(300);
    assert_int_equal(published(&a), 300);
    assert_int_equal(published(&b), 0);
    poller_stop(&a); /* releases the lease: b polls from the stored offset */
    add_updates(api, 16, 20, &id);
    wait_sink(400);
    assert_int_equal(published(&b), 100);
    for (int i = 0; i < 500 && fakeapi_offset(api) < id; i++)
        tg__sleep_ms(20);
    assert_int_equal(fakeapi_offset(api), id); /* everything published was confirmed */
    poller_stop(&b);
    wk_stop(&w);
    check_sink(20, 20, true);
    fakeapi_stop(api);
}

/* Fleet polling of a Bot API that is not there (a closed port): ten failed rounds log one
 * warning, the rest at debug level (issue 27's once per change of state). */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int warns, fails_seen; /* fleet polling warnings; the highest "(failure N in a row)" */
    char again[160];       /* the "working again" line */
    int agains;
} flog = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, "", 0};

static void flog_sink(void *user, int level, const char *line)
{
    (void)user;
    pthread_mutex_lock(&flog.mu);
    if (level == TG_LOG_WARN && strstr(line, "fleet polling: getUpdates"))
        flog.warns++;
    const char *f = strstr(line, "(failure ");
    if (level == TG_LOG_DEBUG && strstr(line, "fleet polling: getUpdates") && f)
        flog.fails_seen = atoi(f + 9);
    if (level == TG_LOG_INFO && strstr(line, "fleet polling: working again")) {
        snprintf(flog.again, sizeof flog.again, "%s", line);
        flog.agains++;
    }
    pthread_cond_broadcast(&flog.cv);
    pthread_mutex_unlock(&flog.mu);
}

/* A fleet poller of the Bot API at url that logs into flog. */
static void flog_poller_start(struct poller *p, const char *url)
{
    pthread_mutex_lock(&flog.mu);
    flog.warns = flog.fails_seen = flog.agains = 0;
    flog.again[0] = '\0';
    pthread_mutex_unlock(&flog.mu);
    tg_fleet_options o = fleet_opts("pc"); /* 800 ms leases: a failed round waits 200 ms */
    assert_non_null(p->f = tg_fleet_new(&o));
    assert_non_null(p->bot = tg_bot_new(TOKEN, &(tg_bot_options){.base_url = url,
                                                                 .log = flog_sink,
                                                                 .log_level = TG_LOG_DEBUG,
                                                                 .retry = {.max_attempts = 1}}));
    assert_non_null(p->r = tg_router_new());
    p->d =
        tg_dispatcher_new(p->bot, p->r, &(tg_dispatcher_options){.workers = 1, .no_get_me = true});
    assert_non_null(p->d);
    assert_int_equal(pthread_create(&p->th, NULL, poller_main, p), 0);
}

/* Wait (bounded: 60 s) until flog's *field reaches n. */
static bool flog_wait(const int *field, int n)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 60;
    pthread_mutex_lock(&flog.mu);
    while (*field < n && pthread_cond_timedwait(&flog.cv, &flog.mu, &until) == 0)
        ;
    bool ok = *field >= n;
    pthread_mutex_unlock(&flog.mu);
    return ok;
}

static void test_polling_closed_api_warns_once(void **state)
{
    (void)state;
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", tgtest_listen_port()); /* nothing there */
    struct poller p = {0};
    flog_poller_start(&p, url);
    bool seen = flog_wait(&flog.fails_seen, 10);
    poller_stop(&p);
    assert_true(seen);
    assert_int_equal(flog.warns, 1);
    assert_int_equal(flog.agains, 0);
}

/* Five 409s, then getUpdates works: one warning, then one "working again" line. */
static void test_polling_recovery_logged_once(void **state)
{
    (void)state;
    fakeapi *api = fakeapi_start(TOKEN);
    assert_non_null(api);
    fakeapi_conflict(api, 5);
    struct poller p = {0};
    flog_poller_start(&p, fakeapi_url(api));
    bool again = flog_wait(&flog.agains, 1);
    poller_stop(&p);
    fakeapi_stop(api);
    if (!again)
        fail_msg("no \"working again\" line after the 409s (%d warnings)", flog.warns);
    assert_int_equal(flog.warns, 1);
    assert_int_equal(flog.agains, 1);
    assert_non_null(strstr(flog.again, "working again after 5 failed calls in "));
}

/* ---- fleet-wide flood control ---- */

static tg_status send_to(tg_ctx *ctx, int chat)
{
    char body[64];
    const char *res;
    size_t len;
    int n = snprintf(body, sizeof body, "{\"chat_id\":%d,\"text\":\"x\"}", chat);
    tg_status st = tg_call_raw(ctx, "sendMessage", body, (size_t)n, &res, &len);
    tg_ctx_reset(ctx);
    return st;
}

static void test_flood_fleet_wide_then_local(void **state)
{
    (void)state;
    fakeapi *api = fakeapi_start(TOKEN);
    tg_fleet_options o = fleet_opts(NULL);
    tg_fleet *f = tg_fleet_new(&o);
    assert_non_null(f);
    assert_non_null(api);
    tg_bot *plain = tg_bot_new(TOKEN, &(tg_bot_options){.base_url = fakeapi_url(api)});
    assert_int_equal(tg_fleet_share_flood(f, plain), TG_ERR_INVALID); /* flood control off */
    /* one message per chat per 1000 s, refused at once (the global limit out of the way):
     * no timing in this test */
    tg_bot_options bo = {
        .base_url = fakeapi_url(api),
        .flood = {
            .enabled = true, .fail_fast = true, .chat_per_sec = 0.001, .global_per_sec = 1e6}};
    tg_bot *a = tg_bot_new(TOKEN, &bo), *b = tg_bot_new(TOKEN, &bo);
    assert_true(a && b);
    assert_int_equal(tg_fleet_share_flood(f, a), TG_OK);
    assert_int_equal(tg_fleet_share_flood(f, b), TG_OK);
    tg_ctx *ca = tg_ctx_new(a), *cb = tg_ctx_new(b);
    assert_int_equal(send_to(ca, 5), TG_OK);
    assert_int_equal(send_to(cb, 5), TG_ERR_FLOOD); /* another process's slot: shared */
    assert_int_equal(send_to(cb, 6), TG_OK);
    assert_int_equal(send_to(ca, 6), TG_ERR_FLOOD);
    tg_fleet_stats s;
    tg_fleet_get_stats(f, &s);
    assert_int_equal(s.flood_checks, 4);
    assert_int_equal(s.flood_fallbacks, 0);
    tgtest_redis_kill(&redis);
    assert_int_equal(send_to(cb, 7), TG_OK); /* Redis away: b's own buckets decide */
    assert_int_equal(send_to(cb, 7), TG_ERR_FLOOD);
    assert_int_equal(send_to(ca, 7), TG_OK); /* ... and a's: the limit is per process now */
    tg_fleet_get_stats(f, &s);
    assert_int_equal(s.flood_fallbacks, 3);
    assert_int_equal(tgtest_redis_restart(&redis), 0);
    for (int i = 0; i < 100 && s.flood_checks == 4; i++) { /* back within ~1 s */
        tg__sleep_ms(50);
        send_to(ca, 100 + i);
        tg_fleet_get_stats(f, &s);
    }
    assert_int_equal(s.flood_checks, 5);
    tg_ctx_free(ca);
    tg_ctx_free(cb);
    tg_bot_free(a);
    tg_bot_free(b);
    tg_bot_free(plain);
    tg_fleet_free(f);
    fakeapi_stop(api);
}

static void test_idempotency_helper(void **state)
{
    (void)state;
    tg_fleet_options o = fleet_opts(NULL);
    tg_fleet *f = tg_fleet_new(&o);
    assert_non_null(f);
    bool yes = true;
    assert_int_equal(tg_fleet_is_processed(f, "reply", 77, &yes), TG_OK);
    assert_false(yes);
    assert_int_equal(tg_fleet_mark_processed(f, "reply", 77, 60000), TG_OK);
    assert_int_equal(tg_fleet_is_processed(f, "reply", 77, &yes), TG_OK);
    assert_true(yes);
    assert_int_equal(tg_fleet_is_processed(f, "charge", 77, &yes), TG_OK);
    assert_false(yes);
    assert_int_equal(tg_fleet_mark_processed(f, NULL, 78, 1), TG_OK); /* 1 ms */
    tg__sleep_ms(20);
    assert_int_equal(tg_fleet_is_processed(f, NULL, 78, &yes), TG_OK);
    assert_false(yes);
    tg_fleet_free(f);
}

static void test_bad_options(void **state)
{
    (void)state;
    tg_fleet_options o = fleet_opts("bad id!");
    assert_null(tg_fleet_new(&o));
    assert_non_null(strstr(tg_fleet_errmsg(), "worker_id"));
    o = fleet_opts(NULL);
    o.partitions = 5000;
    assert_null(tg_fleet_new(&o));
    assert_non_null(strstr(tg_fleet_errmsg(), "partitions"));
    o = fleet_opts(NULL);
    o.redis_port = 1; /* nothing listens there */
    o.redis_password = "hunter2-secret";
    assert_null(tg_fleet_new(&o));
    assert_non_null(strstr(tg_fleet_errmsg(), "connect"));
    assert_null(strstr(tg_fleet_errmsg(), "hunter2"));
}

int main(void)
{
    if (!tgtest_redis_available()) {
        fprintf(stderr, "redis-server not installed (make deps)\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slots),
        cmocka_unit_test(test_stream_id_next),
        cmocka_unit_test_setup_teardown(test_webhook_to_worker, setup, teardown),
        cmocka_unit_test_setup_teardown(test_webhook_503_while_redis_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_workers_share_and_hand_over, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_answer_lost_entry_claimed_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_polling_ingress_one_poller_at_a_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_polling_closed_api_warns_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_polling_recovery_logged_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flood_fleet_wide_then_local, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idempotency_helper, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_options, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
