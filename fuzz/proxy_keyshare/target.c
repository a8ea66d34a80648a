/*
 * Fuzz target: the Legendre symbol mod p = 2^255 - 19 that the ServerHello key share's
 * curve check runs (proxy/keyshare, keyshare_legendre: a binary Jacobi algorithm on 64-bit
 * stand-ins for the 256-bit values) against Euler's criterion z^((p - 1) / 2)
 * (keyshare_legendre_euler), differentially.
 *
 * Input: 32 bytes, the little-endian 256-bit z (shorter inputs are padded with zeros,
 * longer ones cut). A difference aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/wire/keyshare.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t z[32] = {0};
    memcpy(z, data, size < 32 ? size : 32);
    if (keyshare_legendre(z) != keyshare_legendre_euler(z))
        abort();
    return 0;
}
