/* proxy_fakemp: tgproxy-fakemp under test (proxy_fakemp.h). */
#include "proxy_fakemp.h"

#include "tgtest.h"

#include "proxy/wire/mtframe.h"
#include "proxy/wire/obfs2.h"
#include "proxy_client.h"
#include "proxy_fakedc.h"

#include <fcntl.h>
#include <unistd.h>

void pfmp_secret(const char *path, const uint8_t *secret, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, secret, n), (ssize_t)n);
    close(fd);
}

void pfmp_start(struct dfx *d, const char *secret_path, uint16_t dc_port, uint16_t port,
                const char *const *extra)
{
    char dc[64], at[64];
    snprintf(dc, sizeof dc, "127.0.0.1:%u", (unsigned)dc_port);
    snprintf(at, sizeof at, "127.0.0.1:%u", (unsigned)port);
    char *argv[16] = {PFMP_BIN, "--listen", at,     "--secret-file", (char *)secret_path,
                      "--dc",   dc,         "--raw"};
    size_t n = 8;
    for (size_t i = 0; extra && extra[i] && n < 15; i++)
        argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    dfx_start(d, argv);
}

int pfmp_echo_framed(uint16_t port, int mode, const uint8_t *key)
{
    struct pcli c;
    struct pcli_opts o = {.mode = (enum pcli_mode)mode, .key = key, .dc = 2, .sni = "example.com"};
    if (pcli_connect(&c, port, &o) != 0)
        return -1;
    uint32_t tag = mode == PCLI_CLASSIC ? OBFS2_TAG_ABRIDGED : OBFS2_TAG_PADDED;
    uint8_t cmd[FAKEDC_CMD_LEN], data[4096], buf[8192], h[MTFRAME_HEAD_MAX], back[4096];
    fakedc_cmd(cmd, "ECHO", 0, 0);
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 13 + (size_t)mode);
    size_t hl = mtframe_head(tag, sizeof cmd, 0, h);
    memcpy(buf, h, hl);
    memcpy(buf + hl, cmd, sizeof cmd);
    int rc = pcli_send(&c, buf, hl + sizeof cmd);
    for (int k = 0; rc == 0 && k < 4; k++) {
        hl = mtframe_head(tag, 1024, 0, h);
        memcpy(buf, h, hl);
        memcpy(buf + hl, data + k * 1024, 1024);
        rc = pcli_send(&c, buf, hl + 1024);
    }
    static uint8_t rx[1 << 16];
    size_t rl = 0, got = 0;
    while (rc == 0 && got < sizeof back) {
        ssize_t r = pcli_recv(&c, rx + rl, sizeof rx - rl);
        if (r <= 0) {
            rc = -1;
            break;
        }
        rl += (size_t)r;
        size_t at = 0;
        struct mtframe_pkt p;
        while (rc == 0 && mtframe_next(tag, rx + at, rl - at, 0, &p, NULL) == MTFRAME_OK) {
            if (got + p.len > sizeof back)
                rc = -1;
            else
                memcpy(back + got, rx + at + p.off, p.len);
            got += p.len;
            at += p.consumed;
        }
        memmove(rx, rx + at, rl - at);
        rl -= at;
    }
    pcli_close(&c);
    return rc == 0 && memcmp(back, data, sizeof data) == 0 ? 0 : -1;
}
