/*
 * Record sizes toward a FakeTLS client (brief 4.9), read off the wire: with dynamic record
 * sizing (the default) the proxy starts like a TLS server warming up (40 records of at most
 * 1450 payload bytes, 20 of at most 4096, then up to 16384; the quiet second after which it
 * starts small again is tested in virtual time, test_conn_vt); without it records go up to
 * 16384 from the first. Every record is an ApplicationData record within the brief's limit
 * and the payloads add up to what was sent.
 */
#include "tgtest.h"

#include "proxy_client.h"
#include "proxy_harness.h"
#include "proxy_util.h"

#include <unistd.h>

#define MAX_RECS 4096

struct recs {
    size_t len[MAX_RECS];
    size_t n;
};

/* Read raw records from fd until `payload` bytes of payload arrived; lengths appended. */
static void read_records(int fd, size_t payload, struct recs *r)
{
    static uint8_t skip[16384];
    size_t got = 0;
    while (got < payload) {
        uint8_t hdr[5];
        assert_int_equal(psock_read_all(fd, hdr, 5), 0);
        assert_int_equal(hdr[0], 0x17);
        assert_int_equal(hdr[1], 0x03);
        assert_int_equal(hdr[2], 0x03);
        size_t n = (size_t)hdr[3] << 8 | hdr[4];
        assert_true(n > 0 && n <= 16384);
        assert_int_equal(psock_read_all(fd, skip, n), 0);
        assert_true(r->n < MAX_RECS);
        r->len[r->n++] = n;
        got += n;
    }
    assert_int_equal(got, payload); /* records never run past what was sent */
}

/* Echo `total` bytes through the proxy in 16 KiB pieces, reading each piece's echo back as
   raw records (their payloads are the client's own stream, not decrypted here). */
static void echo_raw(struct pcli *c, uint64_t seed, size_t total, struct recs *r)
{
    static uint8_t piece[16384];
    for (size_t i = 0; i < sizeof piece; i++)
        piece[i] = (uint8_t)(seed + i * 7);
    for (size_t done = 0; done < total;) {
        size_t k = total - done < sizeof piece ? total - done : sizeof piece;
        assert_int_equal(pcli_send(c, piece, k), 0);
        read_records(c->fd, k, r);
        done += k;
    }
}

static void open_echo(struct pharness *h, struct pcli *c)
{
    struct pcli_opts o = pharness_client(h, PCLI_TLS);
    assert_int_equal(pcli_connect(c, h->port, &o), 0);
    uint8_t cmd[FAKEDC_CMD_LEN];
    fakedc_cmd(cmd, "ECHO", 1, 0);
    assert_int_equal(pcli_send(c, cmd, sizeof cmd), 0);
}

static void test_dynamic_sizes(void **state)
{
    (void)state;
    struct pharness h;
    assert_int_equal(pharness_start(&h, &(struct pharness_opts){.ee = true}), 0);
    struct pcli c;
    open_echo(&h, &c);
    struct recs *r = calloc(1, sizeof *r);
    assert_non_null(r);
    echo_raw(&c, 5, 1 << 20, r);
    assert_true(r->n > 60);
    size_t big = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (i < 40)
            assert_true(r->len[i] <= 1450);
        else if (i < 60)
            assert_true(r->len[i] <= 4096);
        big += r->len[i] > 4096;
    }
    assert_true(big > 0); /* full-size records once warmed up */

    /* starting small again after a quiet second: test_conn_vt, in virtual time */
    pcli_close(&c);
    free(r);
    pharness_stop(&h);
}

static void test_fixed_sizes(void **state)
{
    (void)state;
    struct pharness h;
    assert_int_equal(
        pharness_start(&h, &(struct pharness_opts){.ee = true, .no_dynamic_records = true}), 0);
    struct pcli c;
    open_echo(&h, &c);
    struct recs *r = calloc(1, sizeof *r);
    assert_non_null(r);
    echo_raw(&c, 7, 1 << 20, r);
    size_t over_small = 0;
    for (size_t i = 0; i < r->n && i < 40; i++)
        over_small += r->len[i] > 1450;
    assert_true(over_small > 0); /* 16 KiB echoes come back in records over 1450 at once */
    pcli_close(&c);
    free(r);
    pharness_stop(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dynamic_sizes),
        cmocka_unit_test(test_fixed_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
