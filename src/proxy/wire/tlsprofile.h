/*
 * tlsprofile: what tgproxy learned of one fronting site's first flight (issue 23), the form
 * the FakeTLS answer is built from, kept across restarts in a small text file.
 *
 * tlsprofile_build() summarises the flights of one refresh (tlsflight.h: one per probe
 * connection) into a profile: the ServerHello's legacy version, cipher, session-id echo,
 * extensions in order with their lengths (key_share's group and key length, the
 * supported_versions choice), whether a ChangeCipherSpec follows, the encrypted part's
 * length on the wire of every probe (the learned distribution), and the site's segment
 * pattern: the most common one among the probes (among those whose reads were the wire's
 * segments, when there are any: tlsflight_mark_merged), kept as the byte offsets in the
 * flight where a TCP segment ended at a record boundary.
 *
 * tlsprofile_answer() builds a FakeTLS answer for one accepted ClientHello from a profile,
 * within what Telegram clients accept (docs/proxy-protocol-notes.md): the site's
 * ServerHello (fresh random, a fresh key share of the site's group and length: a genuine
 * public key for the groups keyshare.h makes, random bytes for others; the client's
 * session id echoed when the site echoes), exactly one CCS and exactly one ApplicationData
 * record whose length is a probe's encrypted wire bytes less its header, moved by a uniform
 * -TLSPROFILE_JITTER..+TLSPROFILE_JITTER (so it is never constant), HMAC over the exact
 * bytes (brief 4.7). It also says where to cut the writes (the site's segment offsets that
 * fall inside the answer).
 *
 * tlsprofile_format() / tlsprofile_parse(): the stored form, one block per domain:
 *
 *   tgproxy-tls-front 1
 *   domain example.com
 *   learned 1764640000          (Unix seconds of the refresh)
 *   probes 8
 *   version 0303                (the ServerHello's legacy_version, hex)
 *   cipher 1301
 *   sid-echo 1                  (the site echoes the client's session id)
 *   ccs 1                       (a ChangeCipherSpec follows the ServerHello)
 *   ext 002b 2                  (each extension in order: type in hex, length)
 *   ext 0033 36
 *   group 001d 32               (key_share group and key length; absent = none)
 *   selected 0304               (supported_versions; absent = none)
 *   records 4 5                 (fewest and most encrypted records of a probe)
 *   lens 2830 2830 2836 ...     (encrypted wire bytes of each probe)
 *   cuts 127                    (segment ends, byte offsets; may be empty)
 *   pattern SH+CCS|AD+AD+AD+AD  (for people and doctor)
 *   end
 *
 * Blank lines and lines starting with '#' are skipped. The parser is strict (it faces a file anyone with write access to the state directory
 * may have edited): every line is known, every number in range, every block complete and
 * the key share consistent with its extension's length; errors say which line and why.
 *
 * Pure apart from randomness (crypto_random, keyshare_random) in tlsprofile_answer: no I/O,
 * no allocation. Reentrant.
 */
#ifndef TGPROXY_TLSPROFILE_H
#define TGPROXY_TLSPROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/wire/tlsflight.h"

#define TLSPROFILE_DOMAIN_MAX 256 /* including the NUL (secret domains are at most 182) */
#define TLSPROFILE_MAX_EXT    8   /* ServerHello extensions a profile keeps */
#define TLSPROFILE_MAX_LENS   64  /* probes whose encrypted lengths are kept */
#define TLSPROFILE_MAX_CUTS   8   /* segment ends kept */
#define TLSPROFILE_KEY_MAX    256 /* largest key share copied (bytes) */
#define TLSPROFILE_PATTERN    64  /* pattern text, including the NUL */
#define TLSPROFILE_JITTER     32  /* +- bytes drawn onto a learned encrypted length */
#define TLSPROFILE_FILE_MAX   ((size_t)1 << 20) /* largest stored file read */
/* Largest answer: a ServerHello of a 32-byte session id and TLSPROFILE_MAX_EXT extensions
   (a key share of TLSPROFILE_KEY_MAX), CCS, one ApplicationData record of 16384. */
#define TLSPROFILE_ANSWER_MAX                                                                      \
    (5 + 4 + 2 + 32 + 1 + 32 + 3 + 2 + 4 * TLSPROFILE_MAX_EXT + 4 + TLSPROFILE_KEY_MAX + 2 + 6 +   \
     5 + 16384)

struct tlsprofile {
    char domain[TLSPROFILE_DOMAIN_MAX];
    int64_t learned_s; /* wall clock of the refresh that made it */
    uint32_t probes;   /* flights it was built from */
    uint16_t legacy_version;
    uint16_t cipher;
    bool sid_echo;
    bool ccs;
    size_t next;
    struct tlsflight_ext ext[TLSPROFILE_MAX_EXT];
    uint16_t group, key_len; /* key_share; group 0 = none */
    uint16_t selected;       /* supported_versions' selected version; 0 = none */
    uint8_t nenc_min, nenc_max;
    size_t nlens;
    uint32_t lens[TLSPROFILE_MAX_LENS]; /* encrypted wire bytes per probe (5 + len each record) */
    size_t ncuts;
    uint32_t cuts[TLSPROFILE_MAX_CUTS]; /* increasing flight offsets where a segment ended */
    char pattern[TLSPROFILE_PATTERN];
};

/*
 * A profile for domain from flights f[0..n) (n >= 1, each parsed by tlsflight_parse); now =
 * wall-clock seconds. The ServerHello shape is the first flight's; a flight that disagrees
 * (another cipher, extension list or group) is left out of the lengths. 0, or -EINVAL
 * (bad arguments), -EBADMSG (err says why: a HelloRetryRequest, no ServerHello fields a
 * FakeTLS answer can take, an extension list or key share larger than a profile keeps).
 */
int tlsprofile_build(const char *domain, const struct tlsflight *f, size_t n, int64_t now,
                     struct tlsprofile *out, char *err, size_t errlen);

/* The TLSFLIGHT_DIFF_* bits of what an answer built from p cannot copy (0 = all of it):
   doctor's and the metrics' view. */
unsigned tlsprofile_diff(const struct tlsprofile *p);
/* One line per bit set in diff, each saying what differs and why ("" when 0), into out. */
const char *tlsprofile_diff_text(unsigned diff, char *out, size_t cap);

/* The ApplicationData payload length for a draw r (32 random bits): a learned length less
   its record header, plus a jitter from r, within 1..FAKETLS_RECORD_MAX_OUT. */
size_t tlsprofile_draw_len(const struct tlsprofile *p, uint32_t r);

struct faketls_hello;

/*
 * Build the answer to hello h (accepted with key) from p into out (cap >= the answer; at
 * most TLSPROFILE_ANSWER_MAX). The write cuts (offsets < the answer's length, increasing)
 * go to cuts[0..*ncuts) (room for TLSPROFILE_MAX_CUTS). Returns the length, or -ENOSPC,
 * -EINVAL, -EIO (no random bytes, HMAC failure).
 */
int tlsprofile_answer(const struct tlsprofile *p, const struct faketls_hello *h,
                      const uint8_t key[16], uint8_t *out, size_t cap, size_t *cuts,
                      size_t *ncuts);

/* The stored form of p[0..n) into out (cap bytes). Returns the length written (without a
   NUL), or 0 when cap is short. */
size_t tlsprofile_format(const struct tlsprofile *p, size_t n, char *out, size_t cap);

/*
 * Parse the stored form text[0..len) into out[0..cap): *n = the profiles read. 0, or
 * -EBADMSG (err: "line N: what"), -E2BIG (more than cap profiles or a file over
 * TLSPROFILE_FILE_MAX), -EINVAL (bad arguments). On error *n = 0.
 */
int tlsprofile_parse(const char *text, size_t len, struct tlsprofile *out, size_t cap, size_t *n,
                     char *err, size_t errlen);

#endif
