/*
 * dc: where a client's DC index goes in direct mode (brief 2.5, 3.4 and section 9).
 *
 * Rules, in priority order:
 *   1. operator overrides ([dcs] in the config): the entry for the exact signed id, else
 *      for a media id (-N) the entry for +N, else the "default" entry (which thus applies
 *      to every id, known or not: tests point all traffic at a fake DC this way);
 *   2. the built-in table: +-1..5 production, +-203 CDN, +-10001..10003 test backend (only
 *      when test DCs are enabled); media ids (negative) use the same addresses as +N;
 *   3. anything else (0 included) is unknown: -ENOENT (the engine logs and closes), or,
 *      with allow-fallback-on-unknown-dc, DC 2 (through rules 1-2 again).
 * Every built-in DC is reached on port 443; addresses are listed IPv4 first, then IPv6, in
 * table order: the caller applies prefer-ip.
 *
 * The override hook is the config's [dcs] array (struct config_dc, proxy/config.h); this
 * module only reads it. No DNS, no allocation: the built-in table is parsed into socket
 * addresses once, at first use (pthread_once), and a dc_target points into it.
 * Thread-safety: every call from any thread.
 */
#ifndef TGPROXY_DC_H
#define TGPROXY_DC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "proxy/config/config.h"

#define DC_PORT        443
#define DC_BUILTIN_MAX 4 /* addresses per built-in entry */
#define DC_FALLBACK    2 /* where unknown DCs go when fallback is on */

struct dc_options {
    const struct config_dc *overrides; /* borrowed, may be NULL */
    size_t noverrides;
    bool use_test_dcs; /* route +-10001..10003 to the test table */
    bool fallback;     /* unknown DC -> DC_FALLBACK instead of -ENOENT */
};

struct dc_target {
    int32_t id;                           /* effective id (after fallback; sign kept) */
    bool fell_back;                       /* the client's id was unknown: DC_FALLBACK used */
    const struct config_dc *override;     /* non-NULL: use its addresses (may need DNS) */
    size_t naddrs;                        /* built-in addresses (when override is NULL) */
    const struct sockaddr_storage *addrs; /* naddrs of them, in the static table */
    const socklen_t *addr_lens;
};

/* Options from a loaded config ([dcs], test-dcs, allow-fallback-on-unknown-dc). */
void dc_options_from_config(struct dc_options *o, const struct config *cfg);

/* Built-in table id for a client value, or 0 if the table has no entry for it:
   +-1..5 -> 1..5, +-203 -> 203, +-10001..10003 -> itself (positive) if use_test_dcs. */
int32_t dc_table_id(int32_t dc, bool use_test_dcs);

/* Built-in addresses of table id (as from dc_table_id), up to cap; returns the count. */
size_t dc_builtin(int32_t table_id, struct sockaddr_storage *out, socklen_t *lens, size_t cap);

/* Override entry for dc per rule 1, or NULL. */
const struct config_dc *dc_override(const struct config_dc *dcs, size_t n, int32_t dc);

/* Full decision. 0, or -ENOENT for an unknown DC without fallback. */
int dc_resolve(const struct dc_options *o, int32_t dc, struct dc_target *out);

#endif
