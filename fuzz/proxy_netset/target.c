/*
 * Fuzz target: the netset parser (netset_parse + netset_finish). Whatever the text, parsing
 * ends in 0 or -EINVAL with a "name:LINE: " message; a set that parsed, once finished, holds
 * ordered, disjoint, non-adjacent ranges, and the lookup agrees with them at every range's
 * edges (inside at both ends, outside just beyond).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/wire/netset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check4(const struct netset *ns)
{
    for (size_t i = 0; i < ns->n4; i++) {
        if (ns->lo4[i] > ns->hi4[i] || (i > 0 && ns->hi4[i - 1] + 1 >= ns->lo4[i]))
            abort();
        if (!netset_has4(ns, ns->lo4[i]) || !netset_has4(ns, ns->hi4[i]))
            abort();
        if ((ns->lo4[i] > 0 && netset_has4(ns, ns->lo4[i] - 1)) ||
            (ns->hi4[i] < UINT32_MAX && netset_has4(ns, ns->hi4[i] + 1)))
            abort();
    }
}

static void store(uint8_t out[16], struct netset_u128 v)
{
    for (int i = 0; i < 8; i++) {
        out[i] = (uint8_t)(v.hi >> (56 - 8 * i));
        out[8 + i] = (uint8_t)(v.lo >> (56 - 8 * i));
    }
}

static void check6(const struct netset *ns)
{
    for (size_t i = 0; i < ns->n6; i++) {
        struct netset_u128 lo = ns->lo6[i], hi = ns->hi6[i];
        if (lo.hi > hi.hi || (lo.hi == hi.hi && lo.lo > hi.lo))
            abort();
        uint8_t b[16];
        store(b, lo);
        if (!netset_has6(ns, b))
            abort();
        store(b, hi);
        if (!netset_has6(ns, b))
            abort();
        if (hi.lo != UINT64_MAX) { /* just above the range: outside */
            hi.lo++;
            store(b, hi);
            if (netset_has6(ns, b))
                abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct netset *ns = netset_new();
    if (!ns)
        return 0;
    char err[256] = "";
    int rc = netset_parse(ns, "f", (const char *)data, size, err, sizeof err);
    if (rc != 0) {
        if (rc != -EINVAL || strncmp(err, "f:", 2) != 0)
            abort();
        netset_free(ns);
        return 0;
    }
    if (netset_finish(ns) == 0) {
        check4(ns);
        check6(ns);
    }
    netset_free(ns);
    return 0;
}
