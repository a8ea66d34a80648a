/* apiread.c: the control API's readers of outside input (apiread.h). */
#include "proxy/daemon/apiread.h"

#include "core/alloc.h"
#include "core/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SNUM(group, name, max, pre)                                                                \
    {                                                                                              \
        group, name, max, pre, sizeof(pre) - 1                                                     \
    }
const struct apiread_field apiread_field[SNUM_COUNT] = {
    SNUM(NULL, "connections_active", false, "{\"connections_active\":"),
    SNUM(NULL, "connections_total", false, ",\"connections_total\":"),
    SNUM(NULL, "bytes_to_upstream", false, ",\"bytes_to_upstream\":"),
    SNUM(NULL, "bytes_to_client", false, ",\"bytes_to_client\":"),
    SNUM(NULL, "limits_hit", false, ",\"limits_hit\":"),
    /* over a fleet: the union of the instances' addresses (their hashes), see snums_fleet */
    SNUM(NULL, "unique_ips", false, ",\"unique_ips\":"),
    SNUM(NULL, "last_seen", true, ",\"last_seen\":"), /* Unix seconds; null (0 here) = never */
    SNUM("handshakes", "ok", false, ",\"handshakes\":{\"ok\":"),
    SNUM("handshakes", "stale", false, ",\"stale\":"),
    SNUM("handshakes", "replay", false, ",\"replay\":"),
    SNUM("handshakes", "limit", false, ",\"limit\":"),
    SNUM("handshakes", "other", false, ",\"other\":"),
};
#undef SNUM

void apiread_iph_add(struct apiread_stats *n, uint64_t h)
{
    if (n->nomem)
        return;
    if (n->niph == n->capiph) {
        size_t cap = n->capiph ? 2 * n->capiph : SEEN_ADDRS;
        uint64_t *p = tg__realloc(n->iph, cap * sizeof *p);
        if (!p) {
            n->nomem = true;
            return;
        }
        n->iph = p;
        n->capiph = cap;
    }
    n->iph[n->niph++] = h;
}

int apiread_u64_cmp(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

/* 16 hex digits into *v. */
static bool hex16(const char *s, size_t n, uint64_t *v)
{
    uint8_t raw[8];
    if (n != 16 || tg__hex_decode(raw, sizeof raw, s, n) != sizeof raw)
        return false;
    uint64_t x = 0;
    for (int i = 0; i < 8; i++)
        x = x << 8 | raw[i];
    *v = x;
    return true;
}

void apiread_peer_stats(struct apiread_stats *n, const char *text, size_t len)
{
    struct json_doc doc;
    char why[64];
    if (json_parse(&doc, text, len, why, sizeof why) != 0)
        return;
    const struct json_val *root = doc.root;
    for (size_t i = 0; root->type == JSON_OBJECT && i < SNUM_COUNT; i++) {
        const struct json_val *o =
            apiread_field[i].group ? json_get(root, apiread_field[i].group) : root;
        const struct json_val *m =
            o && o->type == JSON_OBJECT ? json_get(o, apiread_field[i].name) : NULL;
        uint64_t x = m && m->type == JSON_NUMBER && m->is_int && m->i >= 0 ? (uint64_t)m->i : 0;
        if (i == SNUM_UNIQUE_IPS)
            continue; /* below */
        if (apiread_field[i].max)
            n->v[i] = x > n->v[i] ? x : n->v[i];
        else
            n->v[i] += x;
    }
    const struct json_val *ips = root->type == JSON_OBJECT ? json_get(root, "ips") : NULL;
    if (ips && ips->type == JSON_ARRAY) {
        for (const struct json_val *h = ips->child; h; h = h->next) {
            uint64_t v;
            if (h->type == JSON_STRING && hex16(h->str, h->len, &v))
                apiread_iph_add(n, v);
        }
    } else if (root->type == JSON_OBJECT) {
        const struct json_val *u = json_get(root, "unique_ips");
        if (u && u->type == JSON_NUMBER && u->is_int && u->i > 0)
            n->ips_unhashed += (uint64_t)u->i;
    }
    const struct json_val *qu = root->type == JSON_OBJECT ? json_get(root, "quota_used") : NULL,
                          *qe =
                              root->type == JSON_OBJECT ? json_get(root, "quota_period_end") : NULL;
    if (n->quota && qu && qu->type == JSON_NUMBER && qu->is_int && qu->i > 0)
        n->quota_used += (uint64_t)qu->i;
    if (n->quota && qe && qe->type == JSON_NUMBER && qe->is_int && qe->i > n->quota_end)
        n->quota_end = qe->i;
    n->instances++;
    json_doc_free(&doc);
}

void apiread_stats_done(struct apiread_stats *n)
{
    tg__free(n->iph);
    n->iph = NULL;
    n->niph = n->capiph = 0;
}

int apiread_limits(const struct json_val *o, struct config_limits *l, char *why, size_t whylen)
{
    static const char *const keys[] = {"max-connections", "max-unique-ips", "unique-ips-window",
                                       "quota",           "quota-reset",    "expires"};
    if (!o)
        return 0;
    if (o->type != JSON_OBJECT) {
        snprintf(why, whylen, "limits: expected an object");
        return -1;
    }
    for (const struct json_val *m = o->child; m; m = m->next) {
        size_t k = 0;
        while (k < 6 && strcmp(keys[k], m->key) != 0)
            k++;
        if (k == 6) {
            snprintf(why, whylen,
                     "limits: unknown member (expected max-connections, max-unique-ips, "
                     "unique-ips-window, quota, quota-reset, expires)");
            return -1;
        }
        if (m->type != JSON_NUMBER || !m->is_int || m->i < 0 ||
            (k != 3 && k != 5 && m->i > (int64_t)UINT32_MAX)) {
            snprintf(why, whylen, "limits.%s: expected a whole number >= 0", keys[k]);
            return -1;
        }
    }
    uint64_t v;
    for (size_t k = 0; k < 6; k++) {
        const struct json_val *m = json_get(o, keys[k]);
        if (!m)
            continue;
        v = (uint64_t)m->i;
        switch (k) {
        case 0:
            l->max_connections = (uint32_t)v;
            break;
        case 1:
            l->max_unique_ips = (uint32_t)v;
            break;
        case 2:
            l->unique_ips_window_s = (uint32_t)v;
            break;
        case 3:
            l->quota = v;
            break;
        case 4:
            l->quota_reset_s = (uint32_t)v;
            break;
        default:
            l->expires = (int64_t)v;
            break;
        }
    }
    return 0;
}

bool apiread_secret_path(const char *url, char *label, size_t cap, const char **action)
{
    static const char pre[] = "/v1/secrets/";
    if (strncmp(url, pre, sizeof pre - 1) != 0)
        return false;
    const char *l = url + sizeof pre - 1, *slash = strchr(l, '/');
    size_t n = slash ? (size_t)(slash - l) : strlen(l);
    if (n == 0 || n >= cap)
        return false;
    memcpy(label, l, n);
    label[n] = '\0';
    *action = slash ? slash + 1 : "";
    return !strchr(*action, '/');
}
