/*
 * dc: built-in DC address table and routing rules (see dc.h, brief 3.4).
 */
#include "proxy/config/dc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>

struct builtin {
    int32_t id;
    const char *addr[DC_BUILTIN_MAX]; /* IPv4 first, then IPv6; NULL-terminated */
};

/* Brief 3.4. DC 2's second IPv4 is listed by tdlib and mtg; DC 5 per section 9 #1. */
static const struct builtin table[] = {
    {1, {"149.154.175.50", "2001:b28:f23d:f001::a"}},
    {2, {"149.154.167.51", "95.161.76.100", "2001:67c:4e8:f002::a"}},
    {3, {"149.154.175.100", "2001:b28:f23d:f003::a"}},
    {4, {"149.154.167.91", "2001:67c:4e8:f004::a"}},
    {5, {"149.154.171.5", "2001:b28:f23f:f005::a"}},
    {203, {"91.105.192.100", "2a0a:f280:203:a:5000::100"}},
    {10001, {"149.154.175.10", "2001:b28:f23d:f001::e"}},
    {10002, {"149.154.167.40", "2001:67c:4e8:f002::e"}},
    {10003, {"149.154.175.117", "2001:b28:f23d:f003::e"}},
};

void dc_options_from_config(struct dc_options *o, const struct config *cfg)
{
    *o = (struct dc_options){
        .overrides = cfg->dcs,
        .noverrides = cfg->ndcs,
        .use_test_dcs = cfg->use_test_dcs,
        .fallback = cfg->allow_fallback_on_unknown_dc,
    };
}

int32_t dc_table_id(int32_t dc, bool use_test_dcs)
{
    int32_t a = dc < 0 ? -dc : dc;
    if ((a >= 1 && a <= 5) || a == 203)
        return a;
    if (use_test_dcs && a >= 10001 && a <= 10003)
        return a;
    return 0;
}

static bool fill(const char *text, struct sockaddr_storage *ss, socklen_t *len)
{
    memset(ss, 0, sizeof(*ss));
    struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, text, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons(DC_PORT);
        *len = sizeof(*in4);
        return true;
    }
    if (inet_pton(AF_INET6, text, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(DC_PORT);
        *len = sizeof(*in6);
        return true;
    }
    return false;
}

#define NTABLE (sizeof table / sizeof table[0])

/* The table as socket addresses, parsed once: a connect used to run inet_pton on its DC's
   strings and copy the results into the caller's dc_target (issue 30). */
static struct parsed {
    struct sockaddr_storage addrs[DC_BUILTIN_MAX];
    socklen_t lens[DC_BUILTIN_MAX];
    size_t n;
} parsed[NTABLE];
static pthread_once_t parsed_once = PTHREAD_ONCE_INIT;

static void parse_table(void)
{
    for (size_t i = 0; i < NTABLE; i++)
        for (size_t k = 0; k < DC_BUILTIN_MAX && table[i].addr[k]; k++)
            if (fill(table[i].addr[k], &parsed[i].addrs[parsed[i].n], &parsed[i].lens[parsed[i].n]))
                parsed[i].n++;
}

static const struct parsed *builtin_of(int32_t table_id)
{
    pthread_once(&parsed_once, parse_table);
    for (size_t i = 0; i < NTABLE; i++)
        if (table[i].id == table_id)
            return &parsed[i];
    return NULL;
}

size_t dc_builtin(int32_t table_id, struct sockaddr_storage *out, socklen_t *lens, size_t cap)
{
    const struct parsed *p = builtin_of(table_id);
    size_t n = p ? (p->n < cap ? p->n : cap) : 0;
    for (size_t k = 0; k < n; k++) {
        out[k] = p->addrs[k];
        lens[k] = p->lens[k];
    }
    return n;
}

const struct config_dc *dc_override(const struct config_dc *dcs, size_t n, int32_t dc)
{
    const struct config_dc *media = NULL, *def = NULL;
    for (size_t i = 0; dcs && i < n; i++) {
        if (dcs[i].is_default) {
            def = def ? def : &dcs[i];
            continue;
        }
        if (dcs[i].id == dc)
            return &dcs[i];
        if (dc < 0 && dcs[i].id == -dc && !media)
            media = &dcs[i];
    }
    return media ? media : def;
}

/* Rules 1-2 for one id; false if neither knows it. */
static bool route(const struct dc_options *o, int32_t dc, struct dc_target *out)
{
    out->id = dc;
    out->override = dc_override(o->overrides, o->noverrides, dc);
    if (out->override)
        return true;
    int32_t t = dc_table_id(dc, o->use_test_dcs);
    const struct parsed *p = t ? builtin_of(t) : NULL;
    if (!p || !p->n)
        return false;
    out->naddrs = p->n;
    out->addrs = p->addrs;
    out->addr_lens = p->lens;
    return true;
}

int dc_resolve(const struct dc_options *o, int32_t dc, struct dc_target *out)
{
    *out = (struct dc_target){0};
    if (route(o, dc, out))
        return 0;
    if (!o->fallback)
        return -ENOENT;
    out->fell_back = true;
    return route(o, DC_FALLBACK, out) ? 0 : -ENOENT;
}
