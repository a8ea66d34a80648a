/*
 * crypto: thin helpers over OpenSSL (and AES-NI, aesctr.h) for the proxy's protocol code.
 *
 * - AES-256-CTR stream objects (one per direction per connection). The IV is the initial
 *   128-bit big-endian counter block, incremented with carry over all 128 bits
 *   (EVP_aes_256_ctr semantics, brief 0.1). Encrypting and decrypting are the same XOR;
 *   crypto_ctr_apply() works in place and keeps the keystream position across calls.
 * - SHA-256 and HMAC-SHA256 over up to a few scattered parts (no concatenation copies).
 * - CSPRNG bytes from the kernel (getrandom(2)) and X25519 public keys for the FakeTLS
 *   ServerHello.
 *
 * OpenSSL's default provider (~1.6 MB resident once active: its name map, method tables and
 * the pages of libcrypto that building them touches; issue 30) is activated only by what
 * needs it, on first use: nothing here does on a CPU with AES-NI. The random bytes come
 * from the kernel, SHA-256 and HMAC-SHA256 from OpenSSL's low-level SHA256_* functions (no
 * provider), AES-256-CTR from aesctr.c. The EVP path (AES-CTR without AES-NI or under
 * crypto_ctr_force_evp, SHA-256 in a build without OpenSSL's deprecated API) fetches its
 * cipher and digest once per process on its first use (thread safe), so per-connection
 * set-up does not repeat provider look-ups. The X25519 functions below use EVP_PKEY and so
 * the provider. Each thread keeps one digest context, so hashing allocates nothing once the
 * thread is warm.
 *
 * Cipher memory: a struct crypto_ctr owns no OpenSSL object. It keeps key, IV and position.
 * - Where the CPU has AES-NI (x86-64), each apply runs aesctr.c: the 15 round keys are
 *   expanded on the stack from the stored key (~0.05 us), used and wiped before it returns.
 *   Nothing keyed outlives a call, so init, park and cleanup cost no key schedule and a
 *   stream, active or idle, holds nothing beyond its 64 bytes.
 * - Elsewhere (and under crypto_ctr_force_evp) OpenSSL's EVP serves: the keyed contexts
 *   (~650 bytes each) belong to the thread, at most 256 per thread, created as needed and
 *   handed to the streams being used, least recently used first. A stream whose context was
 *   taken by another is re-keyed at its exact position on its next apply (one key schedule
 *   plus at most 15 bytes of keystream to skip). So memory follows the active streams, never
 *   the open ones: 10,000 quiet connections hold no cipher heap. crypto_ctr_park() hands a
 *   stream's context back at once; crypto_ctr_cleanup() also overwrites its key schedule.
 * Key and IV are copied into the struct; callers should wipe theirs.
 * Thread-safety: all functions are reentrant; a crypto_ctr is used by one thread at a time.
 * Return convention: 0 or -errno (-ENOMEM allocation, -EIO OpenSSL failure, -EINVAL args).
 */
#ifndef TGPROXY_CRYPTO_H
#define TGPROXY_CRYPTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CRYPTO_AES_KEY_LEN 32
#define CRYPTO_AES_IV_LEN  16
#define CRYPTO_SHA256_LEN  32
#define CRYPTO_X25519_LEN  32

/* 64 bytes: a connection keeps two of them while it relays, parked or not (issue 30). */
struct crypto_ctr {
    uint64_t pos;         /* keystream bytes consumed so far */
    /* the EVP path's bookkeeping (all 0 on the AES-NI path): */
    uint64_t serial : 48; /* unique per keyed stream in the process (never 0 once keyed):
                             names the stream in its thread's slots */
    uint64_t slot : 14;   /* the slot of its thread that may hold it keyed */
    uint64_t homed : 1;   /* that slot may hold it keyed (else no slot does) */
    uint64_t ready : 1;   /* initialised */
    uint8_t key[32];      /* kept so the stream can be re-keyed at its position */
    uint8_t iv[16];
};

/* One part of a scattered message. */
struct crypto_part {
    const void *p;
    size_t n;
};

/* Set up the process's state now (otherwise done on first use): the AES-NI check, the
   per-thread key, the fork handler. On a CPU with AES-NI it fetches nothing and activates
   no OpenSSL provider (the EVP path, if forced, fetches on its first use); where every
   stream goes through EVP (no AES-NI; SHA-256 too in a build without OpenSSL's deprecated
   API) it fetches the cipher and digest now, so that a provider that cannot serve them
   stops the start. 0, or -EIO (no thread key, or the fetch failed). */
int crypto_init(void);

/*
 * Set up (or re-key, reusing the context) c for AES-256-CTR at keystream offset 0.
 * c must be zeroed or previously initialised. 0, -ENOMEM or -EIO.
 */
int crypto_ctr_init(struct crypto_ctr *c, const uint8_t key[32], const uint8_t iv[16]);
/* XOR n bytes of keystream into buf in place, advancing the stream. 0 or -EIO. */
int crypto_ctr_apply(struct crypto_ctr *c, uint8_t *buf, size_t n);
/* Same, from in to out (non-overlapping or identical buffers). 0 or -EIO. */
int crypto_ctr_apply2(struct crypto_ctr *c, const uint8_t *in, uint8_t *out, size_t n);
/* Wipe the key (and the key schedule of the thread's context, if it still holds this
   stream); c becomes zeroed. Call on the thread that used it last. NULL-safe, idempotent. */
void crypto_ctr_cleanup(struct crypto_ctr *c);
/*
 * Park an idle stream: hand its thread's context back for other streams now rather than
 * when it is the least recently used. The next apply resumes transparently at the same
 * keystream position. No-op if not initialised or already parked. NULL-safe.
 */
void crypto_ctr_park(struct crypto_ctr *c);
/* Does a context of the calling thread hold c keyed right now? (tests, statistics; always
   false on the AES-NI path, which keeps no context) */
bool crypto_ctr_keyed(const struct crypto_ctr *c);
/* Do streams run on AES-NI (aesctr.c) rather than EVP? */
bool crypto_ctr_aesni(void);
/* Test hook: true makes streams use EVP even where the CPU has AES-NI, false returns to the
   CPU's choice. Returns crypto_ctr_aesni() after the change. Switch only while no stream is
   in use (a stream begun on one path may be applied on the other, but tests should not
   rely on it). */
bool crypto_ctr_force_evp(bool on);
/* Add `blocks` to a 128-bit big-endian counter block (to start a stream at offset 16*k). */
void crypto_ctr_iv_add(uint8_t iv[16], uint64_t blocks);

/* SHA-256 of the concatenation of parts. 0 or -EIO. */
int crypto_sha256(const struct crypto_part *parts, size_t nparts, uint8_t out[32]);
/* HMAC-SHA256(key, concatenation of parts). 0 or -EIO. */
int crypto_hmac_sha256(const void *key, size_t keylen, const struct crypto_part *parts,
                       size_t nparts, uint8_t out[32]);

/* n bytes from the kernel's CSPRNG (getrandom(2), flags 0: blocks only until the kernel's
   pool is first initialised at boot; short reads and EINTR are retried). Requests up to 64
   bytes come from a per-thread block of its output (512 bytes per call; bytes wiped once
   handed out; emptied in a forked child), larger ones straight from getrandom. 0, or -EIO
   if the kernel gives none (getrandom fails: ENOSYS before Linux 3.17). */
int crypto_random(void *buf, size_t n);
/* n bytes that will be sent in clear (padding, filler, key share candidates): an AES-256-CTR
   keystream per thread, keyed from getrandom(2), re-keyed every MiB and in a forked child;
   cheaper than crypto_random for kilobytes. Never for keys, IVs or nonces. 0 or -EIO. */
int crypto_random_public(void *buf, size_t n);
/* Uniform random integer in [lo, hi) (hi > lo). Returns lo on RNG failure. */
uint32_t crypto_random_range(uint32_t lo, uint32_t hi);

/* X25519 public key of the given private scalar (clamped by X25519 itself). 0 or -EIO. */
int crypto_x25519_public(const uint8_t scalar[32], uint8_t pub[32]);
/* A fresh key pair from the CSPRNG; only the public half is returned. The ServerHello uses
   keyshare_random() (same distribution, a fraction of the cost); this stays as the
   benchmark's reference and for tests. 0 or -EIO. */
int crypto_x25519_random_public(uint8_t pub[32]);

/* Wipe memory in a way the compiler will not elide. */
void crypto_wipe(void *p, size_t n);

#endif
