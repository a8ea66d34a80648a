/*
 * Fuzz target: the PROXY protocol v1/v2 header parser of the listener (proxyproto_parse).
 * Checks that it never reads past the input, that an accepted header fits in it, and that
 * every prefix of an accepted header is "need more" (the parser is fed as bytes arrive).
 */
#include <stdint.h>
#include <stdlib.h>

#include "proxy/wire/proxyproto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t len = 0;
    int r = proxyproto_parse(data, size, &len, NULL);
    if (r == PROXYPROTO_OK) {
        if (len == 0 || len > size)
            abort();
        for (size_t k = 0; k < len; k++) {
            size_t l2 = 0;
            if (proxyproto_parse(data, k, &l2, NULL) != PROXYPROTO_MORE)
                abort();
        }
    }
    return 0;
}
