/* proxy_fakemp: tgproxy-fakemp under test (proxy_fakemp.h). */
#include "proxy_fakemp.h"

#include "tgtest.h"

#include "core/str.h"
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

void pfmp_daemon_config(const struct dfx *d, const char *tag, const uint8_t key[16],
                        uint16_t dc_port, const char *secret, const char *config,
                        const char *mp_lines, bool metrics)
{
    char hex[33];
    tg__hex_encode(hex, key, 16);
    dfx_config(d,
               "bind-to = \"127.0.0.1:0\"\n"
               "workers = 1\n"
               "ad-tag = \"%s\"\n"
               "[secrets]\n"
               "dd = \"dd%s\"\n"
               "[dcs]\n"
               "default = [\"127.0.0.1:%u\"]\n"
               "[middle-proxy]\n"
               "proxy-secret = \"%s\"\n"
               "proxy-config = \"%s\"\n"
               "%s%s",
               tag, hex, (unsigned)dc_port, secret, config, mp_lines,
               metrics ? "[stats.prometheus]\n"
                         "enabled = true\n"
                         "bind-to = \"127.0.0.1:0\"\n"
                       : "");
}

uint32_t pfmp_tag(int mode)
{
    return mode == PCLI_CLASSIC ? OBFS2_TAG_ABRIDGED : OBFS2_TAG_PADDED;
}

int pfmp_send_packet(struct pcli *c, uint32_t tag, const void *p, size_t n)
{
    uint8_t buf[8192 + MTFRAME_HEAD_MAX], h[MTFRAME_HEAD_MAX];
    size_t hl = mtframe_head(tag, n, 0, h);
    if (hl == 0 || n > 8192)
        return -1;
    memcpy(buf, h, hl);
    memcpy(buf + hl, p, n);
    return pcli_send(c, buf, hl + n);
}

int pfmp_recv_packets(struct pcli *c, uint32_t tag, uint8_t *out, size_t n)
{
    static __thread uint8_t rx[1 << 16];
    size_t rl = 0, got = 0;
    while (got < n) {
        ssize_t r = pcli_recv(c, rx + rl, sizeof rx - rl);
        if (r <= 0)
            return -1;
        rl += (size_t)r;
        size_t at = 0;
        struct mtframe_pkt p;
        while (mtframe_next(tag, rx + at, rl - at, 0, &p, NULL) == MTFRAME_OK) {
            if (got + p.len > n)
                return -1;
            memcpy(out + got, rx + at + p.off, p.len);
            got += p.len;
            at += p.consumed;
        }
        memmove(rx, rx + at, rl - at);
        rl -= at;
    }
    return 0;
}

int pfmp_echo_framed(uint16_t port, int mode, const uint8_t *key)
{
    struct pcli c;
    struct pcli_opts o = {.mode = (enum pcli_mode)mode, .key = key, .dc = 2, .sni = "example.com"};
    if (pcli_connect(&c, port, &o) != 0)
        return -1;
    uint32_t tag = pfmp_tag(mode);
    uint8_t cmd[FAKEDC_CMD_LEN], data[4096], back[4096];
    fakedc_cmd(cmd, "ECHO", 0, 0);
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 13 + (size_t)mode);
    int rc = pfmp_send_packet(&c, tag, cmd, sizeof cmd);
    for (int k = 0; rc == 0 && k < 4; k++)
        rc = pfmp_send_packet(&c, tag, data + k * 1024, 1024);
    if (rc == 0)
        rc = pfmp_recv_packets(&c, tag, back, sizeof back);
    pcli_close(&c);
    return rc == 0 && memcmp(back, data, sizeof data) == 0 ? 0 : -1;
}
