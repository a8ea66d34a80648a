/* ports.c: see ports.h. */
#include "ports.h"

#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

/* The first port of the kernel's ephemeral range (32768 when it cannot be read). */
static int ephemeral_low(void)
{
    int lo = 32768, hi = 0;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d %d", &lo, &hi) != 2)
            lo = 32768;
        fclose(f);
    }
    return lo;
}

static bool port_free_any(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return false;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    bool ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

int tgtest_listen_port(void)
{
    int lo = ephemeral_low(), base = 10000;
    if (lo - base < 1000)
        base = 1024;
    int span = lo - base;
    /* Start where this process's pid points, so concurrent test processes start apart. */
    /* Each call in one process moves on, so two ports asked for before either is bound
     * differ. */
    static _Atomic unsigned calls;
    unsigned start = (unsigned)getpid() * 7919u, k = calls++;
    for (unsigned i = 0; i < 2000; i++) {
        int port = base + (int)((start + (k + i) * 104729u) % (unsigned)span);
        if (port_free_any(port))
            return port;
    }
    fprintf(stderr, "tgtest: no free TCP port below the ephemeral range (%d..%d)\n", base, lo - 1);
    return 0;
}
