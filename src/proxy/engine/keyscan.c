/* keyscan: hints and a scan budget for hellos many keys could sign. See keyscan.h. */
#include "proxy/engine/keyscan.h"

/* 64-bit FNV-1a of the address, then a final mix: the slot from the low bits, the tag
   from the high ones. */
static uint64_t addr_hash(const uint8_t ip[16])
{
    uint64_t x = 14695981039346656037ull;
    for (int i = 0; i < 16; i++)
        x = (x ^ ip[i]) * 1099511628211ull;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    return x ^ (x >> 32);
}

uint32_t keyscan_key_id(const uint8_t key[16], const char *domain, size_t domain_len)
{
    uint64_t x = 14695981039346656037ull;
    for (int i = 0; i < 16; i++)
        x = (x ^ key[i]) * 1099511628211ull;
    for (size_t i = 0; i < domain_len; i++) /* ASCII case folded, as SNI matching is */
        x = (x ^ (uint8_t)(domain[i] >= 'A' && domain[i] <= 'Z' ? domain[i] + 32 : domain[i])) *
            1099511628211ull;
    x ^= x >> 31;
    x *= 0x94d049bb133111ebull;
    uint32_t id = (uint32_t)(x ^ (x >> 32));
    return id ? id : 1;
}

uint32_t keyscan_hint_get(const struct keyscan_hints *t, const uint8_t ip[16])
{
    uint64_t h = addr_hash(ip);
    uint64_t v = __atomic_load_n(&t->slot[h % KEYSCAN_HINT_SLOTS], __ATOMIC_RELAXED);
    return v >> 32 == h >> 32 ? (uint32_t)v : 0;
}

void keyscan_hint_put(struct keyscan_hints *t, const uint8_t ip[16], uint32_t id)
{
    if (!id)
        return;
    uint64_t h = addr_hash(ip);
    __atomic_store_n(&t->slot[h % KEYSCAN_HINT_SLOTS], (h >> 32) << 32 | id, __ATOMIC_RELAXED);
}

bool keyscan_budget_take(struct keyscan_budget *b, uint64_t now_ms, uint64_t bytes)
{
    if (!b->started || now_ms < b->last_ms) {
        b->started = true;
        b->tokens = KEYSCAN_RATE;
        b->last_ms = now_ms;
    }
    uint64_t dt = now_ms - b->last_ms;
    if (dt) {
        uint64_t add = dt >= 1000 ? KEYSCAN_RATE : KEYSCAN_RATE / 1000 * dt;
        b->tokens = b->tokens + add > KEYSCAN_RATE ? KEYSCAN_RATE : b->tokens + add;
        b->last_ms = now_ms;
    }
    if (bytes > b->tokens)
        return false;
    b->tokens -= bytes;
    return true;
}

enum faketls_verdict keyscan_validate(struct keyscan_hints *t, struct keyscan_budget *b,
                                      const uint8_t ip[16], uint64_t now_ms,
                                      const struct faketls_hello *h, const struct faketls_key *keys,
                                      size_t n, size_t ncand, struct faketls_policy *pol,
                                      struct faketls_match *out, bool *capped)
{
    *capped = false;
    if (ncand <= 2)
        return faketls_validate(h, keys, n, pol, out); /* two HMACs at most, as it is */
    /* The hint alone first: a known client costs one HMAC and none of the budget, so
       neither a busy proxy nor a junk flood can front a client the table remembers. */
    uint32_t id = keyscan_hint_get(t, ip);
    pol->hint = 0;
    for (size_t i = 0; id && i < n && !pol->hint; i++) /* integer compares, no HMAC */
        if (keys[i].id == id)
            pol->hint = i + 1;
    if (pol->hint) {
        pol->hint_only = true;
        enum faketls_verdict v = faketls_validate(h, keys, n, pol, out);
        if (v == FAKETLS_ACCEPT)
            return v;
        pol->hint = 0; /* wrong or stale: the scan below decides, without it */
    }
    /* what faketls_validate may hash: every candidate, within its per-hello budget */
    uint64_t scan = (uint64_t)ncand * h->len, most = FAKETLS_DIGEST_BUDGET + h->len;
    pol->hint_only = !keyscan_budget_take(b, now_ms, scan < most ? scan : most);
    *capped = pol->hint_only;
    enum faketls_verdict v = faketls_validate(h, keys, n, pol, out);
    if (v == FAKETLS_ACCEPT)
        keyscan_hint_put(t, ip, keys[out->index].id);
    return v;
}
