/*
 * Fuzz target: AES-256-CTR on AES-NI (proxy/aesctr, through crypto_ctr) against OpenSSL's
 * EVP_aes_256_ctr, differentially.
 *
 * Input: 32 bytes of key, 16 of IV (an IV of all 0xff bytes and its neighbours make the
 * counter carry over 64 and 128 bits), one byte of switches, then the data. The data is
 * XORed with the keystream by one crypto_ctr in applies whose lengths come from the data's
 * own bytes (0 to 300; in place or out of place; some parks between them), and must equal
 * EVP's result in one go; the switches also turn the VAES code off. A mismatch aborts.
 * On a CPU without AES-NI both sides are EVP and the target checks the splits alone.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "proxy/wire/aesctr.h"
#include "proxy/wire/crypto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 49)
        return 0;
    const uint8_t *key = data, *iv = data + 32;
    uint8_t sw = data[48];
    const uint8_t *plain = data + 49;
    size_t n = size - 49;
    uint8_t *ref = malloc(n + 1), *got = malloc(n + 1);
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int outl = 0;
    if (!ref || !got || !x || EVP_EncryptInit_ex(x, EVP_aes_256_ctr(), NULL, key, iv) != 1 ||
        EVP_EncryptUpdate(x, ref, &outl, plain, (int)n) != 1 || (size_t)outl != n)
        abort();
    EVP_CIPHER_CTX_free(x);
    aesctr_wide(!(sw & 1));
    struct crypto_ctr c = {0};
    if (crypto_ctr_init(&c, key, iv) != 0)
        abort();
    if (sw & 2)
        memcpy(got, plain, n);
    size_t at = 0, k = 0;
    while (at < n) {
        size_t len = (size_t)plain[k++ % n] * 300 / 255;
        if (len > n - at || k > n) /* k > n: all the rest at once, so the loop ends */
            len = n - at;
        int rc = (sw & 2) ? crypto_ctr_apply(&c, got + at, len)
                          : crypto_ctr_apply2(&c, plain + at, got + at, len);
        if (rc != 0 || c.pos != at + len)
            abort();
        at += len;
        if ((sw & 4) && (plain[at % n] & 1))
            crypto_ctr_park(&c);
    }
    if (memcmp(got, ref, n) != 0)
        abort();
    crypto_ctr_cleanup(&c);
    aesctr_wide(true);
    free(ref);
    free(got);
    return 0;
}
