/*
 * aesctr: AES-256-CTR on the CPU's AES instructions (AES-NI), for crypto.c's streams.
 *
 * Stateless: every call expands the 15 round keys (FIPS-197) from the 32-byte key on the
 * stack, XORs the keystream of (key, iv) from keystream byte `pos` on, and wipes the round
 * keys, the keystream scratch and the vector registers before it returns. So nothing keyed
 * outlives a call: a stream is its key, IV and position (struct crypto_ctr), and an idle one
 * costs no memory beyond that. The counter is the IV read as a 128-bit big-endian number,
 * incremented with carry over all 128 bits (EVP_aes_256_ctr's semantics).
 *
 * x86-64 with GCC or clang only; elsewhere aesctr_available() is false and crypto.c keeps
 * to OpenSSL's EVP. Thread-safety: reentrant.
 */
#ifndef TGPROXY_AESCTR_H
#define TGPROXY_AESCTR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Does this CPU have the instructions (AES-NI and SSE4.1)? Checked once. */
bool aesctr_available(void);
/* Where the CPU also has VAES and AVX2, long runs go sixteen blocks at a time through the
   256-bit registers (two blocks per instruction); on by default. Test hook: false keeps
   to the 128-bit code, true goes back. Returns whether the wide code is in use now. */
bool aesctr_wide(bool on);

/*
 * out[i] = in[i] ^ keystream[pos + i] for i < n, where keystream is AES-256-CTR of key with
 * initial counter block iv. in == NULL writes the keystream itself. in and out may be the
 * same buffer (not otherwise overlapping). Only when aesctr_available().
 */
void aesctr_xor(const uint8_t key[32], const uint8_t iv[16], uint64_t pos, const uint8_t *in,
                uint8_t *out, size_t n);

#endif
