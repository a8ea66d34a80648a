/*
 * [defense] mss-clamp (issue 23, item 3): the public listeners announce a small MSS in their
 * SYN-ACK so a client's kernel cuts its ClientHello into segments; the metrics listener
 * never does. And tgproxy reassembles a ClientHello that arrives one byte per segment.
 *
 * What the clamp announces is read on the client's side: TCP_MAXSEG of a connected socket
 * is the MSS it sends with, at most what the peer's SYN-ACK announced (less the timestamp
 * option). On loopback an unclamped connection sends with ~65 kB segments.
 */
#include "tgtest.h"

#include "proxy_client.h"
#include "proxy_harness.h"

#include <errno.h>
#include <sched.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/sockios.h>

#define CLAMP 256

static int client_mss(int fd)
{
    int mss = 0;
    socklen_t len = sizeof mss;
    assert_int_equal(getsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &len), 0);
    return mss;
}

/* The clamp is on the proxy's listener and only there; the handshake and a transfer work
   through it (1 MB each way crosses thousands of 256-byte segments). */
static void test_clamp_public_listener_only(void **state)
{
    (void)state;
    struct pharness h;
    assert_int_equal(pharness_start(&h, &(struct pharness_opts){.ee = true,
                                                                .dd = true,
                                                                .prometheus = true,
                                                                .mss_clamp = CLAMP}),
                     0);
    struct pcli c;
    struct pcli_opts o = pharness_client(&h, PCLI_TLS);
    assert_int_equal(pcli_connect(&c, h.port, &o), 0);
    int mss = client_mss(c.fd);
    assert_true(mss > 0 && mss <= CLAMP);
    assert_int_equal(pcli_echo(&c, 7, 1 << 20, 0), 0);
    pcli_close(&c);
    assert_int_equal(pcli_connect(&c, h.port, &o), 0);
    assert_int_equal(pcli_source(&c, 8, 1 << 20), 0);
    pcli_close(&c);
    o = pharness_client(&h, PCLI_DD);
    assert_int_equal(pcli_connect(&c, h.port, &o), 0);
    mss = client_mss(c.fd);
    assert_true(mss > 0 && mss <= CLAMP);
    pcli_close(&c);
    int fd = psock_connect(server_metrics_port(h.srv), 10000);
    assert_true(fd >= 0);
    assert_true(client_mss(fd) > 1460); /* loopback's own MSS, untouched */
    close(fd);
    pharness_stop(&h);
}

/* mss-clamp off: the listener announces loopback's own MSS. */
static void test_clamp_off(void **state)
{
    (void)state;
    struct pharness h;
    assert_int_equal(pharness_start(&h, &(struct pharness_opts){.mss_clamp = -1}), 0);
    struct pcli c;
    struct pcli_opts o = pharness_client(&h, PCLI_TLS);
    assert_int_equal(pcli_connect(&c, h.port, &o), 0);
    assert_true(client_mss(c.fd) > 1460);
    pcli_close(&c);
    pharness_stop(&h);
}

/* The default configuration on a loopback listener (the harness's, 127.0.0.1): no clamp,
   since only this host's processes reach it; the clamp applied there needs
   mss-clamp-loopback (what test_clamp_public_listener_only's harness sets). */
static void test_default_leaves_loopback_listener(void **state)
{
    (void)state;
    struct pharness h;
    assert_int_equal(pharness_start(&h, &(struct pharness_opts){.ee = true}), 0);
    assert_int_equal(h.cfg.mss_clamp, CONFIG_MSS_CLAMP_DEFAULT);
    assert_false(h.cfg.mss_clamp_loopback);
    struct pcli c;
    struct pcli_opts o = pharness_client(&h, PCLI_TLS);
    assert_int_equal(pcli_connect(&c, h.port, &o), 0);
    assert_true(client_mss(c.fd) > 1460);
    assert_int_equal(pcli_echo(&c, 3, 4096, 0), 0);
    pcli_close(&c);
    pharness_stop(&h);
}

/* Every byte written has been acknowledged by the proxy's kernel: so each one left in a
   segment of its own (TCP_NODELAY is on) before the next is written. Bounded wait. */
static void acked(int fd, void *arg)
{
    (void)arg;
    int left = 1;
    for (int i = 0; i < 100000 && left > 0; i++) {
        assert_int_equal(ioctl(fd, SIOCOUTQ, &left), 0);
        if (left > 0)
            sched_yield();
    }
    assert_int_equal(left, 0);
}

/* A ClientHello in 517 one-byte segments, then the whole session: tgproxy waits for the
   record to be complete, authenticates it, answers, relays. Also with the clamp, where the
   client's kernel cuts it as a real client's would. */
static void test_hello_in_one_byte_segments(void **state)
{
    (void)state;
    static const int32_t clamps[] = {-1, CLAMP};
    for (size_t i = 0; i < sizeof clamps / sizeof clamps[0]; i++) {
        struct pharness h;
        assert_int_equal(pharness_start(&h, &(struct pharness_opts){.mss_clamp = clamps[i]}), 0);
        for (size_t split = 1; split <= 300; split += 299) { /* 1 byte; 300 bytes */
            struct pcli c;
            struct pcli_opts o = pharness_client(&h, PCLI_TLS);
            o.split = split;
            o.between = acked;
            assert_int_equal(pcli_connect(&c, h.port, &o), 0);
            assert_int_equal(pcli_echo(&c, 9, 100000, 0), 0);
            pcli_close(&c);
        }
        struct stats st;
        server_stats(h.srv, &st);
        assert_int_equal(st.fronted, 0);
        pharness_stop(&h);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clamp_public_listener_only),
        cmocka_unit_test(test_clamp_off),
        cmocka_unit_test(test_default_leaves_loopback_listener),
        cmocka_unit_test(test_hello_in_one_byte_segments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
