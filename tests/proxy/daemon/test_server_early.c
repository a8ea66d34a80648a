/*
 * The early fronting connection against genuine dd clients whose 64-byte obfs2 header
 * arrives in two segments (issue 21, item 1). While fewer than 64 bytes are here, tgproxy
 * passes them to the fronting site at once; when the site answers them, the client is
 * fronted at once (no obfs2 client waits for the server before its header is whole). So a
 * split header still connects as long as its second part is here before the site speaks:
 * when the site is quiet, and when the site speaks after the rest was sent (tgproxy reads
 * the client's queued bytes before it decides). A site that answered the first part alone
 * gets the client, and its answer reaches the client at once.
 *
 * The site is a socket of the test's own, so each step is ordered by the test: the first
 * part is known to have reached the site before the site answers, or the rest is sent
 * before it answers. Nothing waits on a clock.
 */
#include "tgtest.h"

#include "proxy_client.h"
#include "proxy_harness.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#define FIRST  24 /* bytes of the header in the first segment */
#define ANSWER "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"

struct site {
    int lfd;     /* the fronting site's listener */
    int fd;      /* its one connection (the early fronting connection) */
    bool answer; /* answer the first part before the rest is sent */
    uint8_t got[64];
};

/* tgproxy with a dd secret fronting to the test's own site, handshake deadline far off. */
static void start(struct pharness *h, struct site *s)
{
    uint16_t port = 0;
    s->lfd = psock_listen(&port, 8);
    s->fd = -1;
    assert_true(s->lfd >= 0);
    assert_int_equal(
        pharness_prepare(h, &(struct pharness_opts){.dd = true, .handshake_ms = 60000}), 0);
    struct sockaddr_in a = psock_addr(port);
    memcpy(&h->cfg.fronting.addr, &a, sizeof a);
    h->cfg.fronting.addr_len = sizeof a;
    h->cfg.fronting.port = port;
    assert_int_equal(server_start(&h->cfg, &h->srv), 0);
    h->port = server_port(h->srv, 0);
}

static void stop(struct pharness *h, struct site *s)
{
    pharness_stop(h);
    if (s->fd >= 0)
        close(s->fd);
    close(s->lfd);
}

/* The first part has left the client: accept the early connection and read the part. */
static void first_part_sent(int cfd, void *arg)
{
    (void)cfd;
    struct site *s = arg;
    struct pollfd pf = {.fd = s->lfd, .events = POLLIN};
    assert_int_equal(poll(&pf, 1, 10000), 1);
    s->fd = accept(s->lfd, NULL, NULL);
    assert_true(s->fd >= 0);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(s->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    assert_int_equal(psock_read_all(s->fd, s->got, FIRST), 0);
    if (s->answer)
        assert_int_equal(psock_write_all(s->fd, ANSWER, sizeof ANSWER - 1), 0);
}

static int dd_connect(struct pharness *h, struct site *s, struct pcli *c)
{
    struct pcli_opts o = pharness_client(h, PCLI_DD);
    o.split = FIRST;
    o.between = first_part_sent;
    o.between_arg = s;
    return pcli_connect(c, h->port, &o);
}

/* A quiet site: the second segment decides, the client reaches the DC, and the site sees
   the first part and a close. */
static void test_split_header_quiet_site(void **state)
{
    (void)state;
    struct pharness h;
    struct site s = {0};
    start(&h, &s);
    struct pcli c;
    assert_int_equal(dd_connect(&h, &s, &c), 0);
    assert_int_equal(pcli_echo(&c, 3, 10000, 0), 0);
    pcli_close(&c);
    uint8_t b;
    assert_int_equal(recv(s.fd, &b, 1, 0), 0); /* the early connection was dropped */
    struct stats st;
    server_stats(h.srv, &st);
    assert_int_equal(st.front_early, 1);
    assert_int_equal(st.fronted, 0);
    stop(&h, &s);
}

/* The site answers the first part, but only after the rest was sent: tgproxy reads the
   client's queued bytes before it decides, so the client still connects. */
static void test_split_header_site_answers_after_rest(void **state)
{
    (void)state;
    struct pharness h;
    struct site s = {0};
    start(&h, &s);
    struct pcli c;
    assert_int_equal(dd_connect(&h, &s, &c), 0);         /* the whole header has been sent */
    send(s.fd, ANSWER, sizeof ANSWER - 1, MSG_NOSIGNAL); /* fails if already dropped */
    assert_int_equal(pcli_echo(&c, 4, 10000, 0), 0);
    pcli_close(&c);
    struct stats st;
    server_stats(h.srv, &st);
    assert_int_equal(st.fronted, 0);
    stop(&h, &s);
}

/* The site answered the first part alone: the client is fronted at once (the answer
   arrives long before the 60 s deadline), and the rest of its header, genuine as it is,
   goes to the site. */
static void test_site_answers_first_part(void **state)
{
    (void)state;
    struct pharness h;
    struct site s = {.answer = true};
    start(&h, &s);
    uint8_t wire[64];
    struct pctr enc, dec;
    assert_int_equal(pobfs_client_header(wire, h.key, PTAG_PADDED, 2, &enc, &dec), 0);
    pctr_cleanup(&enc);
    pctr_cleanup(&dec);
    int fd = psock_connect(h.port, 10000);
    assert_true(fd >= 0);
    assert_int_equal(psock_write_all(fd, wire, FIRST), 0);
    first_part_sent(fd, &s);
    char got[sizeof ANSWER - 1];
    assert_int_equal(psock_read_all(fd, got, sizeof got), 0);
    assert_memory_equal(got, ANSWER, sizeof got);
    assert_memory_equal(s.got, wire, FIRST);
    assert_int_equal(psock_write_all(fd, wire + FIRST, 64 - FIRST), 0);
    uint8_t rest[64 - FIRST];
    assert_int_equal(psock_read_all(s.fd, rest, sizeof rest), 0);
    assert_memory_equal(rest, wire + FIRST, sizeof rest);
    struct stats st;
    server_stats(h.srv, &st);
    assert_int_equal(st.fronted, 1);
    assert_int_equal(st.handshake_timeout, 0);
    assert_int_equal(fakedc_counters(h.dc).headers_ok, 0);
    close(fd);
    stop(&h, &s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_header_quiet_site),
        cmocka_unit_test(test_split_header_site_answers_after_rest),
        cmocka_unit_test(test_site_answers_first_part),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
