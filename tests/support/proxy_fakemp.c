/* proxy_fakemp: tgproxy-fakemp under test (proxy_fakemp.h). */
#include "proxy_fakemp.h"

#include "tgtest.h"

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
