/*
 * Tests for engine/conn_pp's client address: the peer address accept returned is kept
 * (conn_pp_accepted) and given by conn_pp_client_ip without asking the socket, exactly as
 * the socket would have answered; a PROXY header's address still comes first; without a
 * kept peer the socket is asked, as before. Real TCP connections on 127.0.0.1 and ::1.
 */
#include "tgtest.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy/engine/conn_pp.h"

/* A connected pair on addr (127.0.0.1 or ::1): *srv is the accepted socket, *peer what
   accept returned for it. False when the family is not available here. */
static bool tcp_pair(int family, int *cli, int *srv, struct sockaddr_storage *peer)
{
    struct sockaddr_storage ss = {0};
    socklen_t len;
    if (family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)(void *)&ss;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof *a;
    } else {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)(void *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_loopback;
        len = sizeof *a;
    }
    int l = socket(family, SOCK_STREAM, 0);
    assert_true(l >= 0);
    if (bind(l, (struct sockaddr *)&ss, len) != 0) {
        close(l);
        return false; /* no ::1 on this machine */
    }
    assert_int_equal(listen(l, 1), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&ss, &len), 0);
    *cli = socket(family, SOCK_STREAM, 0);
    assert_int_equal(connect(*cli, (struct sockaddr *)&ss, len), 0);
    socklen_t pl = sizeof *peer;
    *srv = accept(l, (struct sockaddr *)peer, &pl);
    assert_true(*srv >= 0);
    close(l);
    return true;
}

static void check_family(int family, const uint8_t want[16])
{
    int cli, srv;
    struct sockaddr_storage peer;
    if (!tcp_pair(family, &cli, &srv, &peer)) {
        assert_int_equal(family, AF_INET6); /* 127.0.0.1 must work */
        return;
    }
    uint8_t kept[16], asked[16];
    struct conn_pp pp = {0};
    conn_pp_accepted(&pp, NULL);
    assert_true(conn_pp_client_ip(&pp, srv, asked)); /* nothing kept: the socket answers */
    assert_memory_equal(asked, want, 16);
    conn_pp_accepted(&pp, (struct sockaddr *)&peer);
    /* the kept copy needs no socket: -1 could not be asked */
    assert_true(conn_pp_client_ip(&pp, -1, kept));
    assert_memory_equal(kept, asked, 16);
    /* a PROXY header's client comes first (what conn_pp_take stores for an IPv4 one) */
    pp.addr = (struct proxyproto_addr){.family = AF_INET, .src = {192, 0, 2, 7}};
    uint8_t hdr[16], want_hdr[16] = {[10] = 0xff, [11] = 0xff, 192, 0, 2, 7};
    assert_true(conn_pp_client_ip(&pp, -1, hdr));
    assert_memory_equal(hdr, want_hdr, 16);
    /* a family accept never returns here: nothing kept, the socket is asked */
    struct sockaddr other = {.sa_family = AF_UNIX};
    struct conn_pp pp2 = {0};
    conn_pp_accepted(&pp2, &other);
    assert_false(conn_pp_client_ip(&pp2, -1, kept));
    assert_true(conn_pp_client_ip(&pp2, srv, kept));
    assert_memory_equal(kept, want, 16);
    close(cli);
    close(srv);
}

static void test_peer_kept_ipv4(void **state)
{
    (void)state;
    const uint8_t want[16] = {[10] = 0xff, [11] = 0xff, 127, 0, 0, 1};
    check_family(AF_INET, want);
}

static void test_peer_kept_ipv6(void **state)
{
    (void)state;
    const uint8_t want[16] = {[15] = 1};
    check_family(AF_INET6, want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_peer_kept_ipv4),
        cmocka_unit_test(test_peer_kept_ipv6),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
