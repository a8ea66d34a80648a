/* proxy_expect: expectations shared by the proxy tests. See proxy_expect.h. */
#include "tgtest.h"

#include "proxy_expect.h"
#include "proxy_util.h"

#include <unistd.h>

void pexpect_fronted(struct pfront *front, uint16_t port, const char *src_ip, const void *bytes,
                     size_t n, size_t idx)
{
    if (idx == PEXPECT_NEXT)
        idx = pfront_count(front);
    int fd = psock_connect_from(src_ip, port, 10000);
    assert_true(fd >= 0);
    if (n)
        assert_int_equal(psock_write_all(fd, bytes, n), 0);
    char banner[sizeof PFRONT_BANNER - 1];
    assert_int_equal(psock_read_all(fd, banner, sizeof banner), 0);
    assert_memory_equal(banner, PFRONT_BANNER, sizeof banner);
    assert_int_equal(pfront_wait(front, idx, n, 10000), 0);
    static uint8_t got[PFRONT_MAX_BYTES];
    assert_int_equal(pfront_bytes(front, idx, got, sizeof got), (long)n);
    if (n)
        assert_memory_equal(got, bytes, n);
    close(fd);
}
