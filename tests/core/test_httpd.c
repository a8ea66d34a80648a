/*
 * core/httpd on 127.0.0.1, against libcurl as the legitimate client and trickling raw
 * sockets (tests/support/slowloris) as the attacker:
 *   - past FD_SETSIZE: with 1100 descriptors open a request is still answered (select()
 *     could not watch its socket);
 *   - per-IP limit: one address cannot take more than its share, others are served;
 *   - request deadline: connections that keep trickling bytes are cut once their request
 *     is overdue, freeing the slots a legitimate request then gets; on keep-alive each
 *     request has its own deadline; a handler's own time does not count.
 * Every wait is bounded; trickles are paced by poll() timeouts, nothing sleeps to wait.
 */
#include "tgtest.h"

#include "core/httpd.h"
#include "proxy_util.h"
#include "slowloris.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <unistd.h>

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static bool gate_closed, in_handler;

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *data,
                              size_t *size, void **con_cls)
{
    (void)cls, (void)url, (void)method, (void)version, (void)data;
    if (!*con_cls) { /* first call: headers are in */
        *con_cls = c;
        return MHD_YES;
    }
    if (*size) {
        *size = 0;
        return MHD_YES;
    }
    pthread_mutex_lock(&gate_mu);
    in_handler = true;
    pthread_cond_broadcast(&gate_cv);
    while (gate_closed)
        pthread_cond_wait(&gate_cv, &gate_mu);
    in_handler = false;
    pthread_mutex_unlock(&gate_mu);
    struct MHD_Response *r =
        MHD_create_response_from_buffer(3, (void *)"ok\n", MHD_RESPMEM_PERSISTENT);
    enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return rc;
}

static struct tg__httpd *start_pool(unsigned threads, unsigned max, unsigned per_ip,
                                    uint32_t timeout_ms)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct tg__httpd_opts o = {.addr = (struct sockaddr *)&a,
                               .handler = answer,
                               .threads = threads,
                               .max_connections = max,
                               .per_ip = per_ip,
                               .idle_timeout_s = 60,
                               .request_timeout_ms = timeout_ms};
    struct tg__httpd *h = tg__httpd_start(&o);
    assert_non_null(h);
    assert_true(tg__httpd_port(h) > 0);
    return h;
}

static struct tg__httpd *start(unsigned max, unsigned per_ip, uint32_t timeout_ms)
{
    return start_pool(0, max, per_ip, timeout_ms);
}

/* A GET by libcurl from 127.0.0.1: its HTTP status, 0 when the transfer failed. */
static long get(uint16_t port)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/", port);
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, fwrite);
    FILE *null = fopen("/dev/null", "w");
    curl_easy_setopt(c, CURLOPT_WRITEDATA, null);
    long status = 0;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    fclose(null);
    return status;
}

struct count_arg {
    const struct tg__httpd *h;
    unsigned want;
};

static bool has_connections(void *arg)
{
    const struct count_arg *a = arg;
    return tg__httpd_connections(a->h) == a->want;
}

static void wait_connections(const struct tg__httpd *h, unsigned want)
{
    struct count_arg a = {h, want};
    if (!tgtest_wait_until(has_connections, &a, 10000))
        fail_msg("%u connections, wanted %u", tg__httpd_connections(h), want);
}

/* More descriptors than FD_SETSIZE: the request's socket is numbered above 1024. */
static void test_past_fd_setsize(void **state)
{
    (void)state;
    tgtest_nofile_at_least(4096);
    struct tg__httpd *h = start(0, 0, 0);
    int fds[1100];
    for (size_t i = 0; i < 1100; i++)
        assert_true((fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0);
    assert_true(fds[1099] > 1024);
    assert_int_equal(get(tg__httpd_port(h)), 200);
    for (size_t i = 0; i < 1100; i++)
        close(fds[i]);
    tg__httpd_stop(h);
}

/* One address holds at most per_ip connections; other addresses are still served. */
static void test_per_ip_limit(void **state)
{
    (void)state;
    struct tg__httpd *h = start(64, 4, 0);
    uint16_t port = tg__httpd_port(h);
    struct slow s = {0};
    slow_open(&s, "127.0.0.2", port, 4);
    wait_connections(h, 4);
    assert_true(slow_refused("127.0.0.2", port));
    assert_int_equal(get(port), 200);       /* from 127.0.0.1 */
    assert_int_equal(slow_round(&s, 0), 0); /* the four are still held */
    slow_close(&s);
    tg__httpd_stop(h);
}

static void *get_main(void *arg)
{
    long *status = arg;
    *status = get(*(uint16_t *)(status + 1));
    return NULL;
}

/* Trickling connections from several addresses fill every slot; each keeps sending, yet
   each is cut once its request is overdue. A legitimate request made meanwhile waits in
   the listen queue (a full daemon stops accepting) and is served once slots free. */
static void test_deadline_cuts_trickles(void **state)
{
    (void)state;
    struct tg__httpd *h = start(16, 4, 300);
    uint16_t port = tg__httpd_port(h);
    struct slow s = {0};
    static const char *const from[] = {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"};
    for (size_t i = 0; i < 4; i++)
        slow_open(&s, from[i], port, 4);
    wait_connections(h, 16);
    long arg[2] = {0, 0};
    *(uint16_t *)(arg + 1) = port;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, get_main, arg), 0);
    slow_until_cut(&s, 50, 200);
    pthread_join(th, NULL);
    assert_int_equal(arg[0], 200);
    /* the 16, and the GET's own connection if it sat idle past the deadline before curl
       closed it */
    assert_true(tg__httpd_expired(h) == 16 || tg__httpd_expired(h) == 17);
    slow_close(&s);
    tg__httpd_stop(h);
}

/* Keep-alive: the second request on a connection gets a deadline of its own. */
static void test_deadline_per_request(void **state)
{
    (void)state;
    struct tg__httpd *h = start(16, 4, 300);
    int fd = psock_connect_from("127.0.0.2", tg__httpd_port(h), 5000);
    assert_true(fd >= 0);
    static const char req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(psock_write_all(fd, req, sizeof req - 1), 0);
    char buf[512];
    ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
    assert_true(n > 0);
    buf[n] = '\0';
    assert_non_null(strstr(buf, "HTTP/1.1 200"));
    struct slow s = {.fd = {fd}, .sent = {1}, .n = 1};
    assert_int_equal(send(fd, "G", 1, 0), 1); /* the next request, trickled */
    slow_until_cut(&s, 50, 200);
    assert_int_equal(tg__httpd_expired(h), 1);
    slow_close(&s);
    tg__httpd_stop(h);
}

static bool handler_entered(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&gate_mu);
    bool in = in_handler;
    pthread_mutex_unlock(&gate_mu);
    return in;
}

/* A request whose handler takes longer than the deadline is still answered: the deadline
   ends when the request is in. A trickle opened after it, so due later, is cut first (by
   the pool's other thread: the handler holds its own). */
static void test_handler_time_not_counted(void **state)
{
    (void)state;
    struct tg__httpd *h = start_pool(2, 16, 4, 300);
    uint16_t port = tg__httpd_port(h);
    gate_closed = true;
    long arg[2] = {0, 0};
    *(uint16_t *)(arg + 1) = port;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, get_main, arg), 0);
    assert_true(tgtest_wait_until(handler_entered, NULL, 10000));
    struct slow s = {0};
    slow_open(&s, "127.0.0.2", port, 1);
    slow_until_cut(&s, 50, 200);
    pthread_mutex_lock(&gate_mu);
    gate_closed = false;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
    pthread_join(th, NULL);
    assert_int_equal(arg[0], 200);
    assert_int_equal(tg__httpd_expired(h), 1);
    slow_close(&s);
    tg__httpd_stop(h);
}

/* The share of the open-files limit: limit / divisor within [lo, hi]. */
static void test_fd_share(void **state)
{
    (void)state;
    struct rlimit rl, saved;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
    rl = saved;
    rl.rlim_cur = 1024;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
    assert_int_equal(tg__httpd_fd_share(2, 16, 65536), 512);
    assert_int_equal(tg__httpd_fd_share(32, 32, 256), 32);
    assert_int_equal(tg__httpd_fd_share(64, 32, 256), 32);
    assert_int_equal(tg__httpd_fd_share(2, 16, 100), 100);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_past_fd_setsize),
        cmocka_unit_test(test_per_ip_limit),
        cmocka_unit_test(test_deadline_cuts_trickles),
        cmocka_unit_test(test_deadline_per_request),
        cmocka_unit_test(test_handler_time_not_counted),
        cmocka_unit_test(test_fd_share),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
