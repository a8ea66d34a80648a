/*
 * Fuzz target: the DNS answer parser (dnsmsg_parse) of the DNS-over-HTTPS resolver. Bytes
 * 0..1 are the expected id, byte 2 picks A or AAAA, the rest is the message, checked as the
 * answer to "example.com". Checks that results are in range, that addresses come only with
 * DNSMSG_OK, and that a failure leaves the answer zeroed.
 */
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "proxy/wire/dnsmsg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    uint16_t id = (uint16_t)(data[0] << 8 | data[1]);
    uint16_t qtype = data[2] & 1 ? DNSMSG_TYPE_A : DNSMSG_TYPE_AAAA;
    struct dnsmsg_answer a;
    int r = dnsmsg_parse(data + 3, size - 3, id, "example.com", qtype, &a);
    if (r < DNSMSG_E_NAME || r > DNSMSG_NXDOMAIN || a.n > DNSMSG_MAX_ADDRS)
        abort();
    if ((r == DNSMSG_OK) != (a.n > 0))
        abort();
    for (size_t i = 0; i < a.n; i++)
        if (a.a[i].family != (qtype == DNSMSG_TYPE_A ? AF_INET : AF_INET6))
            abort();
    if (r < 0 && (a.ttl != 0 || a.rcode != 0))
        abort();
    if (dnsmsg_strerror(r) == NULL)
        abort();
    return 0;
}
