/*
 * The connection state machine in virtual time: one worker driven by this thread with an
 * injected loop clock (loop_set_clock), real sockets on 127.0.0.1, the fake DC and the
 * fronting stand-in of the harness. Every deadline is checked on both sides of its edge (open
 * one millisecond before, closed at it) without sleeping: the clock only moves when a test
 * moves it, and I/O is waited for by polling the loop until the awaited event happened.
 *
 * Covered: the handshake deadline (silent client, and a DISCARD client), the DC connect
 * timeout (and that the handshake deadline no longer applies while connecting), a DC on
 * this host connected within the client's event (and a refusing first address), the DNS
 * wait for a [dcs] host name, the fronting connect timeout, the park period and the idle
 * timeout of a relay, a fronted relay closing on the done time after the site's FIN, and
 * the dynamic-record-sizing quiet second (with the worker on a
 * thread of its own, so a blocking FakeTLS client can run on the test's thread).
 */
#include "tgtest.h"

#include "proxy/engine/conn.h"
#include "proxy/engine/upstream.h"
#include "proxy_client.h"
#include "proxy_harness.h"
#include "proxy_util.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

struct vt {
    struct pharness h;
    struct conn_shared sh;
    struct conn_worker w;
    uint64_t now; /* the worker's clock, in virtual milliseconds */
    int lfd;      /* where the test's clients connect; accepted sockets go to the worker */
    uint16_t lport;
    /* threaded mode (vt_spawn): the worker runs on its own thread, accepting from lfd */
    pthread_t th;
    struct loop_io lio;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int ready; /* 1 once the worker runs, -1 if it could not start */
};

/* Atomic: in threaded mode the test thread moves the clock the worker reads. */
static uint64_t vt_clock(void *ud)
{
    return __atomic_load_n(&((struct vt *)ud)->now, __ATOMIC_ACQUIRE);
}

/* cfg tweaks after the harness built it, before the worker reads it */
typedef void (*vt_cfg_fn)(struct config *cfg, void *arg);

static void vt_start(struct vt *v, const struct pharness_opts *o, vt_cfg_fn fn, void *arg)
{
    memset(v, 0, sizeof *v);
    assert_int_equal(pharness_prepare(&v->h, o), 0);
    if (fn)
        fn(&v->h.cfg, arg);
    assert_int_equal(conn_shared_init(&v->sh, &v->h.cfg), 0);
    assert_int_equal(conn_worker_init(&v->w, &v->sh), 0);
    v->now = 1000000;
    loop_set_clock(&v->w.loop, vt_clock, v);
    v->lfd = psock_listen(&v->lport, 16);
    assert_true(v->lfd >= 0);
}

static void vt_stop(struct vt *v)
{
    conn_worker_cleanup(&v->w);
    conn_shared_cleanup(&v->sh);
    close(v->lfd);
    pharness_stop(&v->h);
}

/* A client connected to the worker: returns the client's end (blocking). */
static int vt_client(struct vt *v)
{
    int cfd = psock_connect(v->lport, 5000);
    assert_true(cfd >= 0);
    int sfd = accept4(v->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    assert_true(sfd >= 0);
    conn_accept(&v->w, sfd);
    assert_int_equal(v->w.stats.accepted, 1);
    return cfd;
}

/* Dispatch what is ready now; timers fire up to the virtual now. */
static void vt_run(struct vt *v)
{
    for (int i = 0; i < 4; i++)
        assert_int_equal(loop_run_once(&v->w.loop, 0), 0);
}

/* Move the clock by ms and run. */
static void vt_advance(struct vt *v, uint64_t ms)
{
    __atomic_add_fetch(&v->now, ms, __ATOMIC_RELEASE);
    vt_run(v);
}

/* Run the loop until *counter reaches want (I/O from other threads: bounded real wait). */
static void vt_wait(struct vt *v, const uint64_t *counter, uint64_t want)
{
    for (int i = 0; i < 500 && *counter < want; i++)
        assert_int_equal(loop_run_once(&v->w.loop, 10), 0);
    assert_int_equal(*counter, want);
}

/* 1 when the peer closed (EOF or reset) cfd, 0 while it is open and silent. Bytes that
   arrive are read and dropped. */
static int closed(int fd)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 0) == 0)
            return 0;
        char b[512];
        ssize_t n = recv(fd, b, sizeof b, MSG_DONTWAIT);
        if (n <= 0)
            return n == 0 || errno != EAGAIN;
    }
}

/* A listener that never completes a connect: its accept queue is full, so the kernel
   drops further SYNs and a connect to it stays in progress. Fills fds[0..3). */
static uint16_t blackhole(int fds[4])
{
    uint16_t port = 0;
    fds[0] = psock_listen(&port, 0);
    assert_true(fds[0] >= 0);
    for (int i = 1; i < 4; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = psock_addr(port);
        connect(fds[i], (struct sockaddr *)&a, sizeof a);
    }
    /* the last one must still be connecting, or the port is no blackhole */
    struct pollfd p = {.fd = fds[3], .events = POLLOUT};
    assert_int_equal(poll(&p, 1, 50), 0);
    return port;
}

static void blackhole_close(int fds[4])
{
    for (int i = 0; i < 4; i++)
        close(fds[i]);
}

/* A dd client's 64-byte obfs2 header for DC 2. */
static void send_dd_header(struct vt *v, int cfd)
{
    uint8_t wire[64];
    struct pctr enc, dec;
    assert_int_equal(pobfs_client_header(wire, v->h.key, PTAG_PADDED, 2, &enc, &dec), 0);
    pctr_cleanup(&enc);
    pctr_cleanup(&dec);
    assert_int_equal(psock_write_all(cfd, wire, sizeof wire), 0);
}

/* Silent client, nothing to front to: the silence leg passes, the deadline closes. */
static void test_handshake_deadline(void **state)
{
    (void)state;
    struct vt v;
    vt_start(&v, &(struct pharness_opts){.dd = true, .no_front = true, .handshake_ms = 2000}, NULL,
             NULL);
    int cfd = vt_client(&v);
    vt_run(&v);
    vt_advance(&v, 500); /* the silence leg (a quarter of 2 s): nothing to open early */
    assert_int_equal(closed(cfd), 0);
    vt_advance(&v, 1499);
    assert_int_equal(closed(cfd), 0);
    assert_int_equal(v.w.stats.handshake_timeout, 0);
    vt_advance(&v, 1);
    assert_int_equal(closed(cfd), 1);
    assert_int_equal(v.w.stats.handshake_timeout, 1);
    assert_int_equal(v.w.stats.closed, 1);
    close(cfd);
    vt_stop(&v);
}

/* Bytes no handshake starts with and nothing to front to: DISCARD until the deadline. */
static void test_discard_until_deadline(void **state)
{
    (void)state;
    struct vt v;
    vt_start(&v, &(struct pharness_opts){.dd = true, .no_front = true, .handshake_ms = 2000}, NULL,
             NULL);
    int cfd = vt_client(&v);
    static const char get[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(psock_write_all(cfd, get, sizeof get - 1), 0);
    vt_wait(&v, &v.w.stats.handshake_bad, 1);
    vt_advance(&v, 500); /* the deadline's first leg, as for a silent client */
    assert_int_equal(psock_write_all(cfd, get, sizeof get - 1), 0); /* read and dropped */
    vt_run(&v);
    vt_advance(&v, 1499);
    assert_int_equal(closed(cfd), 0);
    vt_advance(&v, 1);
    assert_int_equal(closed(cfd), 1);
    /* one handshake, one outcome: it failed (not TLS), it does not time out as well */
    assert_int_equal(v.w.stats.handshake_timeout, 0);
    assert_int_equal(v.w.stats.handshake_bad, 1);
    assert_int_equal(v.w.stats.hs_not_tls, 1);
    close(cfd);
    vt_stop(&v);
}

/* The DC never answers: the connect timeout ends it, the handshake deadline does not. */
static void test_dc_connect_timeout(void **state)
{
    (void)state;
    int bh[4];
    uint16_t port = blackhole(bh);
    struct vt v;
    vt_start(&v,
             &(struct pharness_opts){.dd = true,
                                     .no_front = true,
                                     .no_fakedc = true,
                                     .dc_port = port,
                                     .handshake_ms = 2000,
                                     .tcp_ms = 3000},
             NULL, NULL);
    int cfd = vt_client(&v);
    send_dd_header(&v, cfd);
    vt_wait(&v, &v.w.stats.handshake_ok, 1);
    vt_advance(&v, 2000); /* past the handshake deadline: not in force while connecting */
    assert_int_equal(closed(cfd), 0);
    vt_advance(&v, 999);
    assert_int_equal(closed(cfd), 0);
    assert_int_equal(v.w.stats.dc_connect_fail, 0);
    vt_advance(&v, 1);
    assert_int_equal(closed(cfd), 1);
    assert_int_equal(v.w.stats.dc_connect_fail, 1);
    assert_int_equal(v.w.stats.handshake_timeout, 0);
    /* counted for the client's DC (2) under "timeout" (STATS_DC_FAIL_LIST's second) */
    const struct stats_dc *d = &v.w.dcs[stats_dc_slot(2)];
    assert_string_equal(stats_dc_fail_name(1), "timeout");
    assert_int_equal(d->fail[1], 1);
    assert_int_equal(d->le[STATS_DC_NLE], 0); /* and never as a connect that succeeded */
    close(cfd);
    vt_stop(&v);
    blackhole_close(bh);
}

/* A dd client whose whole first flight is in its socket before it is accepted: the obfs2
   header for DC 2, an ECHO command for the fake DC and msg[0..8) for it to echo. Returns
   the client's end; *dec decrypts what comes back. */
static int vt_client_flight(struct vt *v, struct pctr *dec, const uint8_t msg[8])
{
    uint8_t wire[64 + FAKEDC_CMD_LEN + 8];
    struct pctr enc;
    assert_int_equal(pobfs_client_header(wire, v->h.key, PTAG_PADDED, 2, &enc, dec), 0);
    fakedc_cmd(wire + 64, "ECHO", 1, 0);
    memcpy(wire + 64 + FAKEDC_CMD_LEN, msg, 8);
    pctr_apply(&enc, wire + 64, sizeof wire - 64);
    pctr_cleanup(&enc);
    int cfd = psock_connect(v->lport, 5000);
    assert_true(cfd >= 0);
    assert_int_equal(psock_write_all(cfd, wire, sizeof wire), 0);
    int sfd = accept4(v->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    assert_true(sfd >= 0);
    conn_accept(&v->w, sfd); /* reads the flight at once (conn_accept_peer) */
    return cfd;
}

/* Run the loop until the client has n bytes (bounded), then decrypt them. */
static void vt_read(struct vt *v, int cfd, struct pctr *dec, uint8_t *out, size_t n)
{
    size_t got = 0;
    for (int i = 0; i < 500 && got < n; i++) {
        assert_int_equal(loop_run_once(&v->w.loop, 10), 0);
        ssize_t k = recv(cfd, out + got, n - got, MSG_DONTWAIT);
        if (k > 0)
            got += (size_t)k;
    }
    assert_int_equal(got, n);
    pctr_apply(dec, out, n);
}

/* Two [dcs] default addresses: a local port nobody listens on, then the fake DC. */
static void refused_first(struct config *cfg, void *arg)
{
    (void)arg;
    struct config_dc *d = &cfg->dcs[0];
    d->addrs[1] = d->addrs[0];
    d->naddrs = 2;
    uint16_t port = 0;
    int fd = psock_listen(&port, 1);
    assert_true(fd >= 0);
    close(fd); /* refused from now on */
    struct sockaddr_in a = psock_addr(port);
    memcpy(&d->addrs[0].addr, &a, sizeof a);
    d->addrs[0].addr_len = sizeof a;
    d->addrs[0].port = port;
}

/* A dd client's first flight to a worker whose DC (for the client's DC 2) answers on this
   host: connected within the accept event, so before the loop ever ran it is counted as
   a connect in no time (the clock has not moved) and nothing as failed; then msg comes
   back through the fake DC's echo. */
static void expect_at_once_echo(struct vt *v, const uint8_t msg[8])
{
    struct pctr dec;
    int cfd = vt_client_flight(v, &dec, msg);
    const struct stats_dc *d = &v->w.dcs[stats_dc_slot(2)];
    assert_int_equal(v->w.stats.handshake_ok, 1);
    assert_int_equal(d->le[0], 1);
    for (size_t i = 0; i < STATS_DC_FAIL_COUNT; i++)
        assert_int_equal(d->fail[i], 0);
    assert_int_equal(v->w.stats.bytes_up, 64 + FAKEDC_CMD_LEN + 8);
    uint8_t back[8];
    vt_read(v, cfd, &dec, back, sizeof back);
    assert_memory_equal(back, msg, sizeof back);
    assert_int_equal(v->w.stats.dc_connect_fail, 0);
    pctr_cleanup(&dec);
    close(cfd);
}

/* A DC on this host has accepted by the time connect() returns: the relay starts within
   the client's own event, with no epoll round for the connect (issue 30; before, the DC
   socket waited for WRITE in the loop, so the connect was not counted until it ran). */
static void test_dc_connect_at_once(void **state)
{
    (void)state;
    struct vt v;
    vt_start(&v, &(struct pharness_opts){.dd = true, .no_front = true}, NULL, NULL);
    expect_at_once_echo(&v, (const uint8_t *)"at-once");
    assert_int_equal(fakedc_counters(v.h.dc).headers_ok, 1);
    vt_stop(&v);
}

/* The first DC address refuses (at once, on this host): it is counted as nothing but a
   failed attempt, and the next address is tried within the same event. */
static void test_dc_refused_then_next(void **state)
{
    (void)state;
    struct vt v;
    vt_start(&v, &(struct pharness_opts){.dd = true, .no_front = true}, refused_first, NULL);
    expect_at_once_echo(&v, (const uint8_t *)"second!");
    assert_int_equal(fakedc_counters(v.h.dc).accepted, 1);
    vt_stop(&v);
}

/* The only DC address refuses: reported as refused for the client's DC, the client closed
   (at once: this host's refusal is there when connect() returns). */
static void test_dc_refused_reported(void **state)
{
    (void)state;
    struct vt v;
    vt_start(&v,
             &(struct pharness_opts){
                 .dd = true, .no_front = true, .dc_closed_port = true, .no_fakedc = true},
             NULL, NULL);
    static const uint8_t msg[8] = "refused";
    struct pctr dec;
    int cfd = vt_client_flight(&v, &dec, msg);
    assert_int_equal(v.w.stats.handshake_ok, 1);
    assert_int_equal(v.w.stats.dc_connect_fail, 1);
    const struct stats_dc *d = &v.w.dcs[stats_dc_slot(2)];
    assert_string_equal(stats_dc_fail_name(0), "refused");
    assert_int_equal(d->fail[0], 1);
    for (size_t i = 0; i <= STATS_DC_NLE; i++)
        assert_int_equal(d->le[i], 0);
    assert_int_equal(v.w.stats.closed, 1);
    assert_int_equal(closed(cfd), 1);
    pctr_cleanup(&dec);
    close(cfd);
    vt_stop(&v);
}

/* A resolver that answers only when released (the DNS wait deadline passes first). */
static pthread_mutex_t gai_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gai_cv = PTHREAD_COND_INITIALIZER;
static bool gai_released;

static void gai_wait(void)
{
    pthread_mutex_lock(&gai_mu);
    while (!gai_released)
        pthread_cond_wait(&gai_cv, &gai_mu);
    pthread_mutex_unlock(&gai_mu);
}

static int gai_stall(const char *host, const char *port, const struct addrinfo *hints,
                     struct addrinfo **res)
{
    (void)host, (void)port, (void)hints;
    *res = NULL;
    gai_wait();
    return EAI_NONAME;
}

static void gai_release(void)
{
    pthread_mutex_lock(&gai_mu);
    gai_released = true;
    pthread_cond_broadcast(&gai_cv);
    pthread_mutex_unlock(&gai_mu);
}

/* A worker whose [dcs] default is a host name that resolver fn looks up (held until
   gai_release), and a dd client that authenticated: its DC connect waits for the lookup. */
static int dc_by_name(struct vt *v, upstream_gai_fn fn)
{
    gai_released = false;
    upstream_set_resolver(fn);
    vt_start(v,
             &(struct pharness_opts){
                 .dd = true, .no_front = true, .dc_host = "dc.vt.invalid", .tcp_ms = 3000},
             NULL, NULL);
    int cfd = vt_client(v);
    send_dd_header(v, cfd);
    vt_wait(v, &v->w.stats.handshake_ok, 1);
    return cfd;
}

/* A [dcs] host name whose lookup outlives the DC connect timeout: the connection ends
   with reason dns at that timeout, not before. */
static void test_dc_dns_wait(void **state)
{
    (void)state;
    struct vt v;
    int cfd = dc_by_name(&v, gai_stall);
    vt_advance(&v, 2999);
    assert_int_equal(closed(cfd), 0);
    vt_advance(&v, 1);
    assert_int_equal(closed(cfd), 1);
    assert_int_equal(v.w.stats.dc_connect_fail, 1);
    assert_string_equal(stats_dc_fail_name(3), "dns"); /* the lookup gave nothing in time */
    assert_int_equal(v.w.dcs[stats_dc_slot(2)].fail[3], 1);
    assert_int_equal(fakedc_counters(v.h.dc).accepted, 0);
    close(cfd);
    gai_release();
    vt_stop(&v); /* joins the resolver thread */
    upstream_set_resolver(NULL);
}

/* The same resolver, answering the fake DC's address once released. */
static int gai_late(const char *host, const char *port, const struct addrinfo *hints,
                    struct addrinfo **res)
{
    (void)host;
    gai_wait();
    return getaddrinfo("127.0.0.1", port, hints, res);
}

/* The DC connect time counts from the start of the connect, its [dcs] name lookup
   included, to the connected socket: 700 ms of virtual time land in the 1 s bucket, and
   nothing is counted as failed. */
static void test_dc_connect_time(void **state)
{
    (void)state;
    struct vt v;
    int cfd = dc_by_name(&v, gai_late);
    vt_advance(&v, 700);
    gai_release();
    const struct stats_dc *d = &v.w.dcs[stats_dc_slot(2)];
    assert_int_equal(stats_dc_le_ms(9), 1000);
    vt_wait(&v, &d->le[9], 1); /* the lookup's answer, then the connect, at the same time */
    assert_int_equal(d->sum_ms, 700);
    for (size_t i = 0; i <= STATS_DC_NLE; i++)
        assert_int_equal(d->le[i], i == 9);
    for (size_t i = 0; i < STATS_DC_FAIL_COUNT; i++)
        assert_int_equal(d->fail[i], 0);
    assert_int_equal(closed(cfd), 0);
    close(cfd);
    vt_stop(&v);
    upstream_set_resolver(NULL);
}

static void front_to(struct config *cfg, void *arg)
{
    uint16_t port = *(const uint16_t *)arg;
    struct sockaddr_in a = psock_addr(port);
    memcpy(&cfg->fronting.addr, &a, sizeof a);
    cfg->fronting.addr_len = sizeof a;
    cfg->fronting.port = port;
    cfg->timeout.fronting_ms = 1500;
}

/* A fronting host that never answers: the fronting timeout ends the connection. */
static void test_front_connect_timeout(void **state)
{
    (void)state;
    int bh[4];
    uint16_t port = blackhole(bh);
    struct vt v;
    vt_start(&v, &(struct pharness_opts){.dd = true, .handshake_ms = 1000}, front_to, &port);
    int cfd = vt_client(&v);
    static const char get[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(psock_write_all(cfd, get, sizeof get - 1), 0);
    vt_wait(&v, &v.w.stats.handshake_bad, 1);
    vt_advance(&v, 1499); /* past the handshake deadline too: the connector's time counts */
    assert_int_equal(closed(cfd), 0);
    vt_advance(&v, 1);
    assert_int_equal(closed(cfd), 1);
    assert_int_equal(v.w.stats.fronted, 0);
    assert_int_equal(v.w.stats.closed, 1);
    close(cfd);
    vt_stop(&v);
    blackhole_close(bh);
}

/* A relay quiet for the park period parks its ciphers; quiet for the idle timeout, it
   closes. Traffic in between sends it back to the park period. */
static void test_relay_park_and_idle(void **state)
{
    (void)state;
    struct vt v;
    vt_start(&v, &(struct pharness_opts){.dd = true, .no_front = true, .idle_ms = 4000}, NULL,
             NULL);
    int cfd = vt_client(&v);
    send_dd_header(&v, cfd);
    vt_wait(&v, &v.w.stats.handshake_ok, 1);
    for (int i = 0; i < 500 && fakedc_counters(v.h.dc).headers_ok < 1; i++)
        assert_int_equal(loop_run_once(&v.w.loop, 10), 0);
    assert_int_equal(fakedc_counters(v.h.dc).headers_ok, 1);
    /* park = min(idle / 2, 10 s) = 2 s, then the other 2 s of the idle timeout */
    vt_advance(&v, 1999);
    assert_int_equal(v.w.stats.parked, 0);
    /* the 64-byte header, counted as it went to the DC (conn_count_bytes), not at a timer */
    assert_int_equal(v.w.stats.bytes_up, 64);
    vt_advance(&v, 1);
    assert_int_equal(v.w.stats.parked, 1);
    assert_int_equal(v.w.stats.bytes_up, 64); /* once, still open */
    assert_int_equal(closed(cfd), 0);
    vt_advance(&v, 1999);
    assert_int_equal(closed(cfd), 0);
    assert_int_equal(v.w.stats.idle_timeout, 0);
    vt_advance(&v, 1);
    assert_int_equal(closed(cfd), 1);
    assert_int_equal(v.w.stats.idle_timeout, 1);
    assert_int_equal(v.w.stats.bytes_up, 64); /* and not once more at close */
    assert_int_equal(v.w.stats.bytes_down, 0);
    close(cfd);
    vt_stop(&v);
}

/* Fronted: FRONT_CONNECT -> FRONT_RELAY once the site accepts; the site's FIN reaches the
   client and the connection is closed once the client stays quiet for the done time (the
   handshake timeout here, shorter than CONN_FRONT_DONE_MS). */
static void test_front_relay_site_fin(void **state)
{
    (void)state;
    uint16_t sport = 0;
    int sl = psock_listen(&sport, 4);
    assert_true(sl >= 0);
    struct vt v;
    vt_start(&v, &(struct pharness_opts){.dd = true, .handshake_ms = 4000}, front_to, &sport);
    int cfd = vt_client(&v);
    static const char get[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(psock_write_all(cfd, get, sizeof get - 1), 0);
    vt_wait(&v, &v.w.stats.handshake_bad, 1);
    int sfd = accept(sl, NULL, NULL); /* the kernel completed the worker's connect */
    assert_true(sfd >= 0);
    vt_wait(&v, &v.w.stats.fronted, 1);
    char got[sizeof get - 1];
    assert_int_equal(psock_read_all(sfd, got, sizeof got), 0); /* replayed as read */
    assert_memory_equal(got, get, sizeof got);
    assert_int_equal(psock_write_all(sfd, "bye", 3), 0);
    shutdown(sfd, SHUT_WR);
    char b[8];
    size_t n = 0;
    bool eof = false;
    for (int i = 0; i < 500 && !eof; i++) {
        assert_int_equal(loop_run_once(&v.w.loop, 10), 0);
        ssize_t k = recv(cfd, b + n, sizeof b - n, MSG_DONTWAIT);
        if (k > 0)
            n += (size_t)k;
        eof = k == 0;
    }
    assert_true(eof);
    assert_int_equal(n, 3);
    assert_memory_equal(b, "bye", 3);
    vt_advance(&v, 3999);
    assert_int_equal(v.w.stats.closed, 0);
    vt_advance(&v, 1);
    assert_int_equal(v.w.stats.closed, 1);
    close(cfd);
    close(sfd);
    close(sl);
    vt_stop(&v);
}

/* ---- threaded mode: a blocking client on the test thread, the worker on its own ---- */

static void on_vt_listen(struct loop *l, struct loop_io *io, unsigned events)
{
    (void)l, (void)events;
    struct vt *v = (struct vt *)(void *)((char *)io - offsetof(struct vt, lio));
    int fd = accept4(v->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0)
        conn_accept(&v->w, fd);
}

static void vt_set_ready(struct vt *v, int ready)
{
    pthread_mutex_lock(&v->mu);
    v->ready = ready;
    pthread_cond_broadcast(&v->cv);
    pthread_mutex_unlock(&v->mu);
}

/* The worker's thread: its pools belong to the thread that initialises them. */
static void *vt_main(void *arg)
{
    struct vt *v = arg;
    int rc = conn_worker_init(&v->w, &v->sh);
    if (rc == 0) {
        loop_set_clock(&v->w.loop, vt_clock, v);
        rc = loop_io_add(&v->w.loop, &v->lio, v->lfd, LOOP_READ, on_vt_listen);
    }
    vt_set_ready(v, rc == 0 ? 1 : -1);
    if (rc == 0)
        loop_run(&v->w.loop);
    loop_io_del(&v->w.loop, &v->lio);
    conn_worker_cleanup(&v->w);
    return NULL;
}

static void vt_spawn_cfg(struct vt *v, const struct pharness_opts *o, vt_cfg_fn fn, void *arg)
{
    memset(v, 0, sizeof *v);
    assert_int_equal(pharness_prepare(&v->h, o), 0);
    if (fn)
        fn(&v->h.cfg, arg);
    assert_int_equal(conn_shared_init(&v->sh, &v->h.cfg), 0);
    v->now = 1000000;
    v->lfd = psock_listen(&v->lport, 16);
    assert_true(v->lfd >= 0);
    pthread_mutex_init(&v->mu, NULL);
    pthread_cond_init(&v->cv, NULL);
    assert_int_equal(pthread_create(&v->th, NULL, vt_main, v), 0);
    pthread_mutex_lock(&v->mu);
    while (!v->ready)
        pthread_cond_wait(&v->cv, &v->mu);
    int ready = v->ready;
    pthread_mutex_unlock(&v->mu);
    assert_int_equal(ready, 1);
}

static void vt_spawn(struct vt *v, const struct pharness_opts *o)
{
    vt_spawn_cfg(v, o, NULL, NULL);
}

static void vt_join(struct vt *v)
{
    loop_stop(&v->w.loop);
    pthread_join(v->th, NULL);
    conn_shared_cleanup(&v->sh);
    close(v->lfd);
    pthread_mutex_destroy(&v->mu);
    pthread_cond_destroy(&v->cv);
    pharness_stop(&v->h);
}

/* Send total bytes in 16 KiB pieces to the echoing DC, read the echo back as raw FakeTLS
   records; returns how many of the first 40 records carry more than 1450 payload bytes. */
static size_t echo_big_records(struct pcli *c, size_t total)
{
    static uint8_t piece[16384], skip[16384];
    size_t over = 0, nrec = 0;
    for (size_t done = 0; done < total; done += sizeof piece) {
        memset(piece, (int)(done >> 14), sizeof piece);
        assert_int_equal(pcli_send(c, piece, sizeof piece), 0);
        for (size_t got = 0; got < sizeof piece;) {
            uint8_t hdr[5];
            assert_int_equal(psock_read_all(c->fd, hdr, 5), 0);
            assert_int_equal(hdr[0], 0x17);
            size_t n = (size_t)hdr[3] << 8 | hdr[4];
            assert_true(n > 0 && n <= sizeof skip);
            assert_int_equal(psock_read_all(c->fd, skip, n), 0);
            over += nrec++ < 40 && n > 1450;
            got += n;
        }
    }
    return over;
}

/* Dynamic record sizing starts small again after a quiet second toward the client, and
   not after 999 ms: the clock is virtual, the bursts in between are real. */
static void test_record_sizing_quiet_second(void **state)
{
    (void)state;
    struct vt v;
    vt_spawn(&v, &(struct pharness_opts){.ee = true});
    struct pcli c;
    struct pcli_opts o = pharness_client(&v.h, PCLI_TLS);
    assert_int_equal(pcli_connect(&c, v.lport, &o), 0);
    uint8_t cmd[FAKEDC_CMD_LEN];
    fakedc_cmd(cmd, "ECHO", 1, 0);
    assert_int_equal(pcli_send(&c, cmd, sizeof cmd), 0);
    assert_int_equal(echo_big_records(&c, 1 << 20), 0); /* the first 40 are small */
    __atomic_add_fetch(&v.now, 999, __ATOMIC_RELEASE);
    assert_true(echo_big_records(&c, 1 << 16) > 0); /* still warm */
    __atomic_add_fetch(&v.now, 1000, __ATOMIC_RELEASE);
    assert_int_equal(echo_big_records(&c, 1 << 16), 0); /* small again */
    pcli_close(&c);
    vt_join(&v);
}

/* ---- hellos without SNI with many secrets (issue 21, item 14) ---- */

#define NOSNI_KEYS 256

struct nosni_keys {
    uint8_t k[NOSNI_KEYS][16];
    char dom[NOSNI_KEYS][24];
};

/* 255 more ee secrets beside the harness's "tls" one, each with a domain of its own. */
static void add_ee_secrets(struct config *cfg, void *arg)
{
    struct nosni_keys *ks = arg;
    for (int i = 1; i < NOSNI_KEYS; i++) {
        struct secret sec = {.kind = SECRET_EE};
        memset(ks->k[i], i, 16);
        ks->k[i][15] = 0x5a;
        memcpy(sec.key, ks->k[i], 16);
        snprintf(ks->dom[i], sizeof ks->dom[i], "d%03d.example", i);
        sec.domain_len = strlen(ks->dom[i]);
        memcpy(sec.domain, ks->dom[i], sec.domain_len);
        char label[16], err[256];
        snprintf(label, sizeof label, "s%03d", i);
        assert_int_equal(config_add_secret(cfg, label, &sec, err, sizeof err), 0);
    }
}

static uint64_t stat_of(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* A FakeTLS client of the last secret without SNI from src_ip: 0 once a byte went through
   the DC and back, else what pcli_connect or the echo said. */
static int nosni_client(struct vt *v, struct nosni_keys *ks, const char *src_ip, const char *sni)
{
    struct pcli c;
    struct pcli_opts o = pharness_client(&v->h, PCLI_TLS);
    o.key = ks->k[NOSNI_KEYS - 1];
    o.sni = sni;
    o.src_ip = src_ip;
    o.timeout_ms = 5000;
    int rc = pcli_connect(&c, v->lport, &o);
    if (rc == 0)
        rc = pcli_echo(&c, 5, 100, 0);
    pcli_close(&c);
    return rc;
}

/* A 517-byte hello without SNI that no key signed, from 127.0.0.3: fronted (the fronting
   stand-in's banner arrives) once the worker has checked it. */
static void nosni_junk(struct vt *v)
{
    static const uint8_t foreign[16] = {0xfe, 0xed};
    uint8_t hello[517];
    assert_int_equal(pcli_hello_sized(hello, sizeof hello, foreign, NULL, time(NULL), 517), 517);
    int fd = psock_connect_from("127.0.0.3", v->lport, 5000);
    assert_true(fd >= 0);
    assert_int_equal(psock_write_all(fd, hello, sizeof hello), 0);
    char banner[sizeof PFRONT_BANNER - 1];
    assert_int_equal(psock_read_all(fd, banner, sizeof banner), 0);
    assert_memory_equal(banner, PFRONT_BANNER, sizeof banner);
    close(fd);
}

/* A no-SNI client is found among 256 secrets while the worker's scan budget lasts, and
   remembered by address; once junk no-SNI hellos have spent the budget, an unknown address
   is tried against nothing (fronted), a known one against its key alone before the budget
   is asked (admitted, not capped), a hello with SNI as ever; a second of (virtual) time refills the budget. */
static void test_nosni_budget_and_hints(void **state)
{
    (void)state;
    struct nosni_keys *ks = calloc(1, sizeof *ks);
    assert_non_null(ks);
    struct vt v;
    vt_spawn_cfg(&v, &(struct pharness_opts){.ee = true}, add_ee_secrets, ks);
    assert_int_equal(nosni_client(&v, ks, "127.0.0.1", NULL), 0); /* a full scan finds it */
    assert_int_equal(stat_of(&v.w.stats.handshake_ok), 1);
    /* junk of the same size until one is refused its scan: what is left of the budget
       is then less than the scan the client's hello needs */
    size_t most = KEYSCAN_RATE / (NOSNI_KEYS * 517) + 2, sent = 0;
    while (stat_of(&v.w.stats.scan_capped) == 0 && sent++ < most)
        nosni_junk(&v);
    assert_int_equal(stat_of(&v.w.stats.scan_capped), 1);
    assert_true(sent > 2); /* the budget held a few full scans first */
    assert_int_not_equal(nosni_client(&v, ks, "127.0.0.2", NULL), 0); /* unknown: fronted */
    assert_int_equal(stat_of(&v.w.stats.scan_capped), 2);
    /* its hint, tried before the budget is charged: not capped */
    assert_int_equal(nosni_client(&v, ks, "127.0.0.1", NULL), 0);
    assert_int_equal(stat_of(&v.w.stats.scan_capped), 2);
    assert_int_equal(nosni_client(&v, ks, "127.0.0.2", ks->dom[NOSNI_KEYS - 1]), 0); /* SNI */
    assert_int_equal(stat_of(&v.w.stats.scan_capped), 2);
    assert_int_equal(stat_of(&v.w.stats.handshake_ok), 3);
    __atomic_add_fetch(&v.now, 1000, __ATOMIC_RELEASE);
    assert_int_equal(nosni_client(&v, ks, "127.0.0.2", NULL), 0); /* refilled: found */
    assert_int_equal(stat_of(&v.w.stats.scan_capped), 2);
    assert_int_equal(stat_of(&v.w.stats.handshake_ok), 4);
    vt_join(&v);
    free(ks);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handshake_deadline),
        cmocka_unit_test(test_discard_until_deadline),
        cmocka_unit_test(test_dc_connect_timeout),
        cmocka_unit_test(test_dc_connect_at_once),
        cmocka_unit_test(test_dc_refused_then_next),
        cmocka_unit_test(test_dc_refused_reported),
        cmocka_unit_test(test_dc_dns_wait),
        cmocka_unit_test(test_dc_connect_time),
        cmocka_unit_test(test_front_connect_timeout),
        cmocka_unit_test(test_relay_park_and_idle),
        cmocka_unit_test(test_front_relay_site_fin),
        cmocka_unit_test(test_record_sizing_quiet_second),
        cmocka_unit_test(test_nosni_budget_and_hints),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
