/*
 * conn_check (TGKIT_CHECKS: Debug and sanitizer builds, conn_int.h): a connection closed
 * twice is caught at the second conn_close, before it touches the worker's slab or its
 * pools again (the kind of bug a4a408c fixed: a pooled connection closed twice). A real
 * worker with a real accepted socket runs in a child process, which must abort with the
 * check's message. In a release build the check is compiled out: the test says so and
 * ctest reports it skipped.
 */
#include "tgtest.h"

#include "proxy/engine/conn_int.h"
#include "proxy_harness.h"
#include "proxy_util.h"

#include <sys/socket.h>
#include <unistd.h>

#if TGKIT_CHECKS
/* In the child: no cmocka; a set-up failure exits (the parent then reports no abort). */
static void close_twice(void *arg)
{
    (void)arg;
    struct pharness h;
    struct conn_shared sh;
    struct conn_worker w;
    uint16_t port = 0;
    int lfd = psock_listen(&port, 4);
    if (lfd < 0 || pharness_prepare(&h, &(struct pharness_opts){0}) != 0 ||
        conn_shared_init(&sh, &h.cfg) != 0 || conn_worker_init(&w, &sh) != 0)
        _exit(2);
    int cfd = psock_connect(port, 5000);
    int sfd = cfd >= 0 ? accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC) : -1;
    if (sfd < 0)
        _exit(3);
    conn_accept(&w, sfd);
    struct conn *c = tg__slab_first(&w.conn_slab); /* the only one */
    if (!c)
        _exit(4);
    conn_close(c, END_EOF);
    fprintf(stderr, "closed once\n");
    conn_close(c, END_EOF); /* the mistake: conn_check aborts here */
    fprintf(stderr, "closed twice and nothing noticed\n");
}
#endif

static void test_double_close_caught(void **state)
{
    (void)state;
#if TGKIT_CHECKS
    tgtest_expect_abort(close_twice, NULL, "conn_check: ");
    tgtest_expect_abort(close_twice, NULL, "c->magic == CONN_MAGIC");
#else
    tgtest_skip("conn_check is compiled out of release builds (TGKIT_CHECKS)");
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_double_close_caught),
    };
    return tgtest_result(cmocka_run_group_tests(tests, NULL, NULL));
}
