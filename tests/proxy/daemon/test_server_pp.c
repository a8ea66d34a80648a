/*
 * PROXY protocol end to end: a balancer's v1/v2 header on the listener
 * (proxy-protocol-listener) and the v2 header tgproxy sends to the fronting host
 * ([domain-fronting] proxy-protocol). The outgoing header must name the client the
 * balancer named, not the balancer's socket; UNKNOWN (v1) and LOCAL (v2) fall back to the
 * socket's addresses. The parser itself: test_proxyproto.c.
 */
#include "tgtest.h"

#include "proxy/engine/conn.h"
#include "proxy_harness.h"

#include <arpa/inet.h>
#include <unistd.h>

static const uint8_t v2_sig[12] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
                                   0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a};
static const char probe[] = "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n";

/* Connect, send prefix + an invalid handshake, read the fronting banner; returns the
   connection's fd and copies what the fronting host received into got (returns its size
   through *n). The fronting host must receive exactly hdr_len + probe bytes. */
static int front_through(struct pharness *h, const void *prefix, size_t plen, size_t hdr_len,
                         uint8_t *got, size_t cap, size_t idx)
{
    int fd = psock_connect(h->port, 10000);
    assert_true(fd >= 0);
    assert_int_equal(psock_write_all(fd, prefix, plen), 0);
    assert_int_equal(psock_write_all(fd, probe, sizeof probe - 1), 0);
    char banner[sizeof PFRONT_BANNER - 1];
    assert_int_equal(psock_read_all(fd, banner, sizeof banner), 0);
    assert_int_equal(pfront_wait(h->front, idx, hdr_len + sizeof probe - 1, 10000), 0);
    assert_int_equal(pfront_bytes(h->front, idx, got, cap), (long)(hdr_len + sizeof probe - 1));
    assert_memory_equal(got, v2_sig, sizeof v2_sig);
    assert_int_equal(got[12], 0x21);
    assert_memory_equal(got + hdr_len, probe, sizeof probe - 1);
    return fd;
}

static void expect_v4(const uint8_t *got, const char *src, const char *dst, uint16_t sport,
                      uint16_t dport)
{
    uint8_t a[4], b[4];
    assert_int_equal(got[13], 0x11);
    assert_int_equal(got[15], 12);
    assert_int_equal(inet_pton(AF_INET, src, a), 1);
    assert_int_equal(inet_pton(AF_INET, dst, b), 1);
    assert_memory_equal(got + 16, a, 4);
    assert_memory_equal(got + 20, b, 4);
    assert_int_equal(got[24] << 8 | got[25], sport);
    assert_int_equal(got[26] << 8 | got[27], dport);
}

static void test_v1_client_address_reaches_front(void **state)
{
    (void)state;
    struct pharness h;
    assert_int_equal(pharness_start(&h, &(struct pharness_opts){.pp_listener = true,
                                                                .pp_front = true}),
                     0);
    static const char v1[] = "PROXY TCP4 203.0.113.7 198.51.100.1 5555 443\r\n";
    uint8_t got[512];
    int fd = front_through(&h, v1, sizeof v1 - 1, 28, got, sizeof got, 0);
    expect_v4(got, "203.0.113.7", "198.51.100.1", 5555, 443);
    close(fd);

    /* v2 from the balancer, IPv4: the same, from the binary form */
    static const uint8_t v2[] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49,
                                 0x54, 0x0a, 0x21, 0x11, 0x00, 0x0c, 203,  0,    113,  8,
                                 198,  51,   100,  2,    0x1f, 0x90, 0x01, 0xbb};
    fd = front_through(&h, v2, sizeof v2, 28, got, sizeof got, 1);
    expect_v4(got, "203.0.113.8", "198.51.100.2", 8080, 443);
    close(fd);
    pharness_stop(&h);
}

static void test_v1_ipv6_client_address(void **state)
{
    (void)state;
    struct pharness h;
    assert_int_equal(pharness_start(&h, &(struct pharness_opts){.pp_listener = true,
                                                                .pp_front = true}),
                     0);
    static const char v1[] = "PROXY TCP6 2001:db8::7 2001:db8:1::1 5555 8443\r\n";
    uint8_t got[512];
    int fd = front_through(&h, v1, sizeof v1 - 1, 52, got, sizeof got, 0);
    assert_int_equal(got[13], 0x21); /* TCP over IPv6, though the socket is IPv4 */
    assert_int_equal(got[15], 36);
    uint8_t a[16], b[16];
    assert_int_equal(inet_pton(AF_INET6, "2001:db8::7", a), 1);
    assert_int_equal(inet_pton(AF_INET6, "2001:db8:1::1", b), 1);
    assert_memory_equal(got + 16, a, 16);
    assert_memory_equal(got + 32, b, 16);
    assert_int_equal(got[48] << 8 | got[49], 5555);
    assert_int_equal(got[50] << 8 | got[51], 8443);
    close(fd);
    pharness_stop(&h);
}

/* v1 UNKNOWN and v2 LOCAL name no client: the socket's peer (us) is sent instead. */
static void test_unknown_and_local_fall_back_to_socket(void **state)
{
    (void)state;
    struct pharness h;
    assert_int_equal(pharness_start(&h, &(struct pharness_opts){.pp_listener = true,
                                                                .pp_front = true}),
                     0);
    static const char unknown[] = "PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n";
    static const uint8_t local[] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51,
                                    0x55, 0x49, 0x54, 0x0a, 0x20, 0x00, 0x00, 0x00};
    const struct {
        const void *p;
        size_t n;
    } cases[] = {{unknown, sizeof unknown - 1}, {local, sizeof local}};
    for (size_t i = 0; i < 2; i++) {
        uint8_t got[512] = {0};
        int fd = front_through(&h, cases[i].p, cases[i].n, 28, got, sizeof got, i);
        struct sockaddr_in me = {0};
        socklen_t ml = sizeof me;
        assert_int_equal(getsockname(fd, (struct sockaddr *)&me, &ml), 0);
        expect_v4(got, "127.0.0.1", "127.0.0.1", ntohs(me.sin_port), h.port);
        close(fd);
    }
    pharness_stop(&h);
}

/* A v1 line whose addresses do not parse is malformed: closed, never fronted. */
static void test_malformed_v1_addresses_close(void **state)
{
    (void)state;
    struct pharness h;
    assert_int_equal(pharness_start(&h, &(struct pharness_opts){.pp_listener = true,
                                                                .pp_front = true}),
                     0);
    static const char bad[] = "PROXY TCP4 203.0.113.300 198.51.100.1 5555 443\r\n";
    int fd = psock_connect(h.port, 10000);
    assert_true(fd >= 0);
    assert_int_equal(psock_write_all(fd, bad, sizeof bad - 1), 0);
    assert_int_equal(psock_write_all(fd, probe, sizeof probe - 1), 0);
    uint8_t b;
    assert_true(recv(fd, &b, 1, 0) <= 0); /* closed without the fronting banner */
    close(fd);
    assert_int_equal(pfront_count(h.front), 0);
    pharness_stop(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v1_client_address_reaches_front),
        cmocka_unit_test(test_v1_ipv6_client_address),
        cmocka_unit_test(test_unknown_and_local_fall_back_to_socket),
        cmocka_unit_test(test_malformed_v1_addresses_close),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
