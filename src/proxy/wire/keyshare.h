/*
 * keyshare: the X25519 public key the FakeTLS ServerHello carries, made cheaply.
 *
 * The proxy never completes a key exchange, so it needs no private key: only a public value
 * a censor cannot tell from a real server's. A real X25519 public key is the u-coordinate of
 * a uniformly random point of the curve's prime-order subgroup. keyshare_random() draws a
 * uniformly random point R of Curve25519 (random u from the CSPRNG, kept when
 * u^3 + 486662 u^2 + u is a non-zero square mod p, i.e. R lies on the curve and not on its
 * twist) and returns u([8]R). Multiplying by the cofactor 8 maps the uniform distribution on
 * the curve onto the uniform distribution on the prime-order subgroup, which is exactly the
 * distribution of genuine public keys. Cost: one Legendre symbol per candidate (about two
 * candidates on average; an exact binary Jacobi symbol whose steps run branch-free on
 * 64-bit stand-ins for the 256-bit values, ~0.9 us here, a third of Euler's criterion; see
 * keyshare.c) and three x-only doublings, ~2.4 us a share, against a full 255-step
 * Montgomery ladder for a genuine key pair (~33 us, see bench/proxy/handshake.c). Each
 * thread makes its shares KEYSHARE_BATCH at a time, so the final inversion (X/Z) is shared
 * by the batch (Montgomery's trick: one inversion and three multiplications per share); a
 * share is handed out once and wiped from the batch.
 *
 * Arithmetic is mod p = 2^255 - 19 on five 51-bit limbs; it handles public random values
 * only, so it makes no constant-time promise beyond that of the ladder it replaces.
 * Thread-safety: reentrant. Returns 0, or -EIO if the CSPRNG fails.
 */
#ifndef TGPROXY_KEYSHARE_H
#define TGPROXY_KEYSHARE_H

#include <stddef.h>
#include <stdint.h>

#define KEYSHARE_BATCH 16

int keyshare_random(uint8_t pub[32]);

/* Same from caller-chosen 32-byte candidates (the last bit of each is ignored): tries
   cand[0..n) in order and returns the index used, or -1 if none lies on the curve.
   Deterministic; for tests. */
int keyshare_from_candidates(const uint8_t (*cand)[32], int n, uint8_t pub[32]);
/* The batch form keyshare_random() uses: the shares of the first (at most KEYSHARE_BATCH)
   candidates of cand[0..n) that lie on the curve, in order, into out; returns how many.
   Each equals keyshare_from_candidates() on that candidate alone. Deterministic. */
int keyshare_batch_from_candidates(const uint8_t (*cand)[32], int n, uint8_t (*out)[32]);

/* Another group's public key share, as a server of that group sends it: for secp256r1,
   secp384r1 and secp521r1 (0x0017..0x0019) the uncompressed point 04 || x || y of a
   uniformly random point of the curve (OpenSSL decompresses a random x with a random sign;
   these curves have prime order, so that is exactly the distribution of a fresh key pair's
   public key, and an observer who checks the point finds it on the curve), for x448
   (0x001e) a fresh X448 key pair's public key (OpenSSL keygen). len must be that group's
   length (65, 97, 133, 56). 0; -ENOTSUP for another group or length (the caller falls back
   to random bytes); -EIO when OpenSSL fails. Allocates (OpenSSL's objects), unlike
   keyshare_random. */
int keyshare_group_random(uint16_t group, uint8_t *out, size_t len);
/* The key length keyshare_group_random makes for group, or 0 when it makes none. */
size_t keyshare_group_len(uint16_t group);

/* For tests and fuzzing: the Legendre symbol (z / p), p = 2^255 - 19, of the little-endian
   256-bit z (all 256 bits count; z need not be below p): -1, 0 or 1. keyshare_legendre is
   the binary algorithm the curve check runs, keyshare_legendre_euler the reference,
   Euler's criterion z^((p - 1) / 2) on the same field arithmetic. */
int keyshare_legendre(const uint8_t z[32]);
int keyshare_legendre_euler(const uint8_t z[32]);

#endif
