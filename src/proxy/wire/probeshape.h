/*
 * probeshape: a site's first flights against a FakeTLS proxy's answers to the same
 * ClientHello shape, feature by feature, as a passive observer would tell them apart
 * (issue 23, `tgproxy probe` with the secret).
 *
 * probeshape_compare() reads n flights of each (struct tlsflight, as tlsscout records them)
 * and fills one row per observable feature: the ServerHello record's length, cipher,
 * session-id echo, extensions in order with their lengths, key-share group and length,
 * the ChangeCipherSpec, the number of encrypted records, the encrypted bytes' range, and how
 * the flight up to its first encrypted record was cut into reads. Each row says the two
 * values (sets of what the n flights showed, "a, b" or "lo..hi") and a verdict:
 *   SAME   nothing to tell them apart
 *   DIFF   a giveaway
 *   LIMIT  different, but no FakeTLS answer can copy it: the site spreads its encrypted
 *          flight over several records while Telegram clients take exactly one
 *          (docs/proxy-protocol-notes.md); a front that packs its flight removes it.
 * Encrypted bytes are the same when every proxy length lies within PROBESHAPE_ENC_SLACK of
 * the site's range, and, when the site's length varies by more than that, the proxy's
 * varies too. Reads over a fast path are a lower bound of the segments (both may merge).
 *
 * Pure: no I/O, no allocation. Reentrant.
 */
#ifndef TGPROXY_PROBESHAPE_H
#define TGPROXY_PROBESHAPE_H

#include <stddef.h>

#include "proxy/wire/tlsflight.h"

#define PROBESHAPE_ROWS      9
#define PROBESHAPE_VALUE_MAX 96
#define PROBESHAPE_ENC_SLACK 64

enum probeshape_verdict { PROBESHAPE_SAME, PROBESHAPE_DIFF, PROBESHAPE_LIMIT };

struct probeshape_row {
    const char *feature; /* static */
    char site[PROBESHAPE_VALUE_MAX];
    char proxy[PROBESHAPE_VALUE_MAX];
    enum probeshape_verdict verdict;
};

/* Fill rows[0..PROBESHAPE_ROWS) from ns site flights and np proxy flights (each >= 1).
   Returns the number of DIFF rows (LIMIT rows are not counted). */
size_t probeshape_compare(const struct tlsflight *site, size_t ns, const struct tlsflight *proxy,
                          size_t np, struct probeshape_row rows[PROBESHAPE_ROWS]);

const char *probeshape_verdict_name(enum probeshape_verdict v); /* "same", "DIFFERS", "limit" */

#endif
