/*
 * test_server_replay: the engine's side of the anti-replay cache. With a cache of one set
 * (8 entries), a ninth authenticated hello within the window forgets the first: the worker
 * counts it in stats (replay_early_evictions) and warns once, naming max-entries; the
 * forgotten hello is answered again (what the warning is about) while the newest is
 * still refused as a replay.
 */
#include "tgtest.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "proxy_harness.h"
#include "proxy_util.h"

struct seen {
    pthread_mutex_t mu;
    int warnings;
    char last[512];
};

static void sink(void *user, int level, const char *msg)
{
    struct seen *s = user;
    if (level < TG__LOG_WARN || !strstr(msg, "anti-replay"))
        return;
    pthread_mutex_lock(&s->mu);
    s->warnings++;
    snprintf(s->last, sizeof s->last, "%s", msg);
    pthread_mutex_unlock(&s->mu);
}

/* Send hello on a new connection: true when the proxy answers with a ServerHello record,
   false when it fronts it (the recording front answers nothing and the proxy closes). */
static bool answered(const struct pharness *h, const uint8_t *hello, size_t n)
{
    int fd = psock_connect(h->port, 10000);
    assert_true(fd >= 0);
    assert_int_equal(psock_write_all(fd, hello, n), 0);
    uint8_t hdr[5] = {0};
    bool tls = psock_read_all(fd, hdr, 5) == 0 && hdr[0] == 0x16;
    close(fd);
    return tls;
}

static void test_early_eviction_counted_and_warned(void **state)
{
    (void)state;
    struct seen seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
    tg__logger saved = *tg__log_default();
    tg__log_default()->sink = sink;
    tg__log_default()->user = &seen;
    struct pharness h;
    assert_int_equal(
        pharness_start(&h, &(struct pharness_opts){.workers = 1, .antireplay_entries = 8}), 0);
    uint8_t hello[9][600];
    size_t n[9];
    int64_t now = (int64_t)time(NULL);
    for (int i = 0; i < 9; i++) {
        n[i] = pcli_hello(hello[i], sizeof hello[i], h.key, PHARNESS_DOMAIN, now);
        assert_true(answered(&h, hello[i], n[i]));
    }
    struct stats st;
    server_stats(h.srv, &st);
    assert_int_equal(st.replay_early_evictions, 1);
    assert_false(answered(&h, hello[8], n[8])); /* the newest is remembered */
    assert_true(answered(&h, hello[0], n[0]));  /* the first was forgotten early */
    server_stats(h.srv, &st);
    assert_int_equal(st.replay_early_evictions, 2); /* re-adding it pushed out another */
    pharness_stop(&h);
    tg__log_default()->sink = saved.sink;
    tg__log_default()->user = saved.user;
    assert_int_equal(seen.warnings, 1); /* at most one a minute */
    assert_non_null(strstr(seen.last, "raise [defense.anti-replay] max-entries"));
    assert_non_null(strstr(seen.last, "anti-replay: cache full, 1 handshake(s) forgotten"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_early_eviction_counted_and_warned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
