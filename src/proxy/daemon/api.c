/*
 * api: the control API's listener, access checks and endpoints. See api.h, docs/api.md.
 * Invariant: every handler runs on the MHD thread with the server's reload lock held, so
 * a.st (the state file as last read or written) and the published generation agree.
 */
#include "proxy/daemon/api.h"

#include "core/alloc.h"
#include "core/clock.h"
#include "core/httpd.h"
#include "core/log.h"
#include "core/readfile.h"
#include "core/str.h"
#include "proxy/daemon/apifleet.h"
#include "proxy/daemon/apiread.h"
#include "proxy/daemon/apistore.h"
#include "proxy/daemon/links.h"
#include "proxy/daemon/server.h"
#include "proxy/engine/generation.h"
#include "proxy/engine/limits.h"
#include "proxy/engine/seen.h"
#include "proxy/engine/stats.h"
#include "proxy/services/tlsfront.h"
#include "proxy/wire/crypto.h"
#include "proxy/wire/json.h"
#include "proxy/wire/netset.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef TGKIT_VERSION_STRING
#define TGKIT_VERSION_STRING "0"
#endif

#define API_CONNS        128   /* connections at once (each up to 64 KiB of buffers) */
#define API_CONNS_PER_IP 32    /* from one address: a panel and a few scripts */
#define API_TIMEOUT_MS   10000 /* a request's deadline however it trickles, and idle time */
#define TOKEN_MAX        512   /* bytes of a token file */
#define FAIL_SLOTS       256   /* addresses tracked for failed logins */
#define RELOADS_KEPT     16    /* /v1/info recent reloads */
#define OUT_MAX          (16u << 20)
#define SECRET_TEXT      (2 * (1 + SECRET_KEY_LEN + 255) + 1)
#define SYNC_MS          250  /* [fleet]: how often an instance looks for the fleet's changes */
#define PUBLISH_MS       1000 /* [fleet]: how often it publishes its stats */
#define WRITE_TRIES      4    /* [fleet]: a change another instance overtook is tried again */

#define ANSWERED (-1) /* a handler's result: an error answer is in its struct out */

struct fail_slot {
    uint8_t addr[16];
    int64_t minute;
    uint32_t count;
};

struct reload_rec {
    int64_t at;
    bool ok;
    char origin[16];
    char error[160];
};

#define OUT_SLOTS    API_CONNS  /* answers in flight: one per connection at most */
#define OUT_KEPT     4          /* slots whose buffer outlives its answer */
#define OUT_KEPT_MAX (4u << 20) /* a kept buffer larger than this is freed anyway */

struct api;

struct qreset {
    char label[CONFIG_LABEL_MAX];
    uint64_t n;
};

struct out_slot {
    struct api *a;
    tg__buf b;  /* the answer while busy; a kept slot's spare memory while not */
    bool busy;  /* its buffer belongs to an answer being built or sent */
    bool keys;  /* the answer carried a key: wiped once sent */
};

struct api {
    struct tg__httpd *httpd;
    struct server *srv;
    struct netset *allow;
    bool has_token;
    uint8_t mac_key[32];
    uint8_t token_mac[32];
    struct apistore st;
    struct fail_slot fails[FAIL_SLOTS];
    struct reload_rec reloads[RELOADS_KEPT];
    size_t nreloads; /* total recorded; the ring holds the last RELOADS_KEPT */
    uint16_t port;
    /* [fleet]: the state is the fleet's (apifleet.h); wl is the request thread's link (used
       under the reload lock), the sync thread has its own */
    bool fleet;
    char inst[17]; /* this instance's id among the fleet's stats publishers */
    struct apifleet_link wl;
    pthread_t sync_th;
    bool sync_started;
    pthread_mutex_t stop_mu;
    pthread_cond_t stop_cv;
    bool stop; /* under stop_mu */
    uint64_t failed_rev; /* the fleet's revision that did not apply here (0 = none) */
    /* [fleet]: per label, the fleet's count of reset-quota calls last applied here (under the
       reload lock); qr_primed once read at start (resets before it are not applied again) */
    struct qreset *qr;
    size_t nqr, capqr;
    bool qr_primed;
    const char **gl; /* gen_labels_sorted's, of generation gl_seq (under the reload lock) */
    uint64_t gl_seq;
    pthread_mutex_t out_mu; /* the slots' busy flags and kept buffers */
    struct out_slot outs[OUT_SLOTS];
};

struct req {
    tg__buf body;
    bool too_big;
    bool done; /* an answer was queued at the first call */
};

/* ---- answers ----
   An answer is built in a buffer that is then handed to libmicrohttpd as it is (no copy) in
   one of the out slots; once sent, the buffer goes back to its slot (wiped first if it held
   a key). The first OUT_KEPT slots keep their buffers' memory for the next answers, so the
   panel's list of 1,000 secrets (about 500 KB, every 2 s) writes into pages already mapped
   rather than into a fresh allocation that is then copied. */

static enum MHD_Result send_response(struct MHD_Connection *c, struct MHD_Response *r,
                                     unsigned status, const char *type, const char *etag,
                                     const char *allow, bool csp)
{
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    if (etag)
        MHD_add_response_header(r, "ETag", etag);
    if (allow)
        MHD_add_response_header(r, "Allow", allow);
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    if (csp)
        MHD_add_response_header(r, "Content-Security-Policy",
                                "default-src 'none'; script-src 'self'; style-src 'self'; "
                                "img-src 'self' blob:; connect-src 'self'; form-action 'self'; "
                                "frame-ancestors 'none'; base-uri 'none'");
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

/* The answer being built: {"ok":true,"data": ... } */
struct out {
    tg__buf b;
    struct out_slot *slot; /* b came from it (out_take), or NULL */
    unsigned status;
    const char *allow;
    char etag[32];
    bool raw; /* b is the whole body (svg, png) of type */
    bool retry; /* [fleet]: another instance changed the state first: run the request again */
    bool keys;  /* the answer carries a secret's key (create, links, QR): wiped once sent */
    bool csp; /* a panel page: send the Content-Security-Policy */
    const char *type;
};

__attribute__((format(printf, 4, 5))) static int err_out(struct out *o, unsigned status,
                                                         const char *code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tg__buf_reset(&o->b);
    o->status = status;
    o->raw = false;
    int rc = tg__buf_printf(&o->b, "{\"ok\":false,\"error\":{\"code\":\"%s\",\"message\":", code);
    if (rc == 0)
        rc = json_put_str(&o->b, msg, strlen(msg));
    if (rc == 0)
        rc = tg__buf_puts(&o->b, "}}");
    return ANSWERED;
}

static int data_begin(struct out *o, unsigned status)
{
    o->status = status;
    return tg__buf_puts(&o->b, "{\"ok\":true,\"data\":");
}

/* A free slot (the lowest, so kept memory is reused first), now busy; NULL if none. */
static struct out_slot *slot_get(struct api *a)
{
    struct out_slot *sl = NULL;
    pthread_mutex_lock(&a->out_mu);
    for (size_t i = 0; !sl && i < OUT_SLOTS; i++)
        if (!a->outs[i].busy)
            sl = &a->outs[i];
    if (sl)
        sl->busy = true;
    pthread_mutex_unlock(&a->out_mu);
    return sl;
}

/* The slot's answer is done with: wiped if it held a key, kept (emptied) or freed. */
static void slot_put(struct out_slot *sl)
{
    struct api *a = sl->a;
    if (sl->b.data && sl->keys)
        crypto_wipe(sl->b.data, sl->b.len);
    sl->keys = false;
    if (sl - a->outs >= OUT_KEPT || sl->b.cap > OUT_KEPT_MAX)
        tg__buf_cleanup(&sl->b);
    else
        tg__buf_reset(&sl->b);
    pthread_mutex_lock(&a->out_mu);
    sl->busy = false;
    pthread_mutex_unlock(&a->out_mu);
}

/* Build o's answer in a kept buffer, if one is free. */
static void out_take(struct api *a, struct out *o)
{
    if (o->slot)
        return;
    struct out_slot *sl = slot_get(a);
    if (!sl)
        return;
    tg__buf_cleanup(&o->b);
    o->b = sl->b;
    tg__buf_reset(&o->b);
    tg__buf_init(&sl->b, OUT_MAX);
    o->slot = sl;
}

/* libmicrohttpd is done with an answer's buffer. */
static void on_sent(void *cls)
{
    slot_put(cls);
}

static enum MHD_Result send_out(struct api *a, struct MHD_Connection *c, struct out *o)
{
    if (!o->raw && o->status < 300 && tg__buf_putc(&o->b, '}') != 0)
        err_out(o, 500, "internal", "out of memory");
    if (o->b.len == 0 && !o->raw)
        err_out(o, 500, "internal", "out of memory");
    const char *type = o->raw ? o->type : "application/json";
    const char *etag = o->etag[0] ? o->etag : NULL;
    struct out_slot *sl = o->slot ? o->slot : o->b.data ? slot_get(a) : NULL;
    if (sl) { /* the buffer goes to the slot, and libmicrohttpd sends it from there */
        tg__buf_cleanup(&sl->b);
        sl->b = o->b;
        sl->keys = o->keys;
        tg__buf_init(&o->b, OUT_MAX);
        struct MHD_Response *r = MHD_create_response_from_buffer_with_free_callback_cls(
            sl->b.len, sl->b.data, on_sent, sl);
        if (!r)
            slot_put(sl);
        return send_response(c, r, o->status, type, etag, o->allow, o->csp);
    }
    /* every slot busy (or nothing written): a copy */
    enum MHD_Result rc = send_response(
        c,
        MHD_create_response_from_buffer(o->b.len, o->b.data ? o->b.data : (void *)(uintptr_t) "",
                                        MHD_RESPMEM_MUST_COPY),
        o->status, type, etag, o->allow, o->csp);
    if (o->b.data && o->keys)
        crypto_wipe(o->b.data, o->b.len); /* links and a new secret pass through here */
    tg__buf_cleanup(&o->b);
    return rc;
}

/* ---- access ---- */

static void addr16(const struct sockaddr *sa, uint8_t out[16])
{
    memset(out, 0, 16);
    if (sa->sa_family == AF_INET) {
        out[10] = out[11] = 0xff;
        memcpy(out + 12, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        memcpy(out, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
    }
}

static struct fail_slot *fail_slot(struct api *a, const uint8_t addr[16], int64_t minute, bool add)
{
    struct fail_slot *old = &a->fails[0];
    for (size_t i = 0; i < FAIL_SLOTS; i++) {
        struct fail_slot *f = &a->fails[i];
        if (f->count && memcmp(f->addr, addr, 16) == 0) {
            if (f->minute != minute) {
                f->minute = minute;
                f->count = 0;
            }
            return f;
        }
        if (!f->count || f->minute < old->minute)
            old = f;
    }
    if (!add)
        return NULL;
    memcpy(old->addr, addr, 16);
    old->minute = minute;
    old->count = 0;
    return old;
}

static bool token_ok(struct api *a, const char *hdr)
{
    static const char bearer[] = "Bearer ";
    if (!hdr || strncmp(hdr, bearer, sizeof bearer - 1) != 0)
        return false;
    const char *t = hdr + sizeof bearer - 1;
    uint8_t mac[32];
    struct crypto_part p = {t, strlen(t)};
    if (crypto_hmac_sha256(a->mac_key, sizeof a->mac_key, &p, 1, mac) != 0)
        return false;
    bool ok = CRYPTO_memcmp(mac, a->token_mac, sizeof mac) == 0;
    crypto_wipe(mac, sizeof mac);
    return ok;
}

/* ---- numbers ---- */

static const char *kind_name(enum secret_kind k)
{
    return k == SECRET_EE ? "ee" : k == SECRET_DD ? "dd" : "classic";
}

static uint32_t slot_of(struct server *s, const char *label)
{
    size_t n = server_secret_count(s);
    for (size_t i = 0; i < n; i++)
        if (strcmp(server_secret_label(s, i), label) == 0)
            return (uint32_t)i;
    return GEN_NO_SLOT;
}

/* ---- the direct JSON writer ----
   The list of 1,000 secrets is one answer of about 500 KB. Each piece of it has a stated
   bound: room for it is made once (w_begin), it is written through a pointer with no check
   per byte, and the buffer's length is set after it (w_end). */

static char *w_begin(tg__buf *b, size_t room)
{
    return tg__buf_reserve(b, room) == 0 ? b->data + b->len : NULL;
}

static void w_end(tg__buf *b, char *p)
{
    b->len = (size_t)(p - b->data);
    *p = '\0';
}

#define W_LIT(p, s) ((char *)memcpy((p), (s), sizeof(s) - 1) + sizeof(s) - 1)

static char *w_mem(char *p, const void *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

/* A decimal number: at most 20 bytes. */
static char *w_u64(char *p, uint64_t v)
{
    char t[20];
    size_t k = sizeof t;
    do
        t[--k] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    return w_mem(p, t + k, sizeof t - k);
}

/* At most 20 bytes (19 digits and a sign). */
static char *w_i64(char *p, int64_t v)
{
    if (v >= 0)
        return w_u64(p, (uint64_t)v);
    *p++ = '-';
    return w_u64(p, (uint64_t)0 - (uint64_t)v);
}

/* Bytes a JSON string is written as unchanged (json_put_str's rules: no control bytes, no
   quote or backslash, and no < > & so that an answer is inert if a browser sniffs it). */
static bool w_plain(unsigned char c)
{
    return c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' && c != 0x7f;
}

/* n bytes as a JSON string, byte for byte what json_put_str writes: at most 6 n + 2 bytes. */
static char *w_str(char *p, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    *p++ = '"';
    size_t i = 0;
    while (i < n) {
        size_t run = i;
        while (run < n && w_plain((unsigned char)s[run]))
            run++;
        p = w_mem(p, s + i, run - i);
        if (run == n)
            break;
        unsigned char c = (unsigned char)s[run];
        *p++ = '\\';
        if (c == '"' || c == '\\')
            *p++ = (char)c;
        else if (c == '\n')
            *p++ = 'n';
        else {
            p = W_LIT(p, "u00");
            *p++ = hex[c >> 4];
            *p++ = hex[c & 15];
        }
        i = run + 1;
    }
    *p++ = '"';
    return p;
}

#define CLIENTS_SHOWN   64 /* addresses a /stats answer lists */
/* The writer's bounds: the numbers (each field's pre and 20 digits, the quota, instances),
   one client of the list, one published address hash. */
#define SNUMS_ROOM  1024
#define CLIENT_ROOM (32 + INET6_ADDRSTRLEN + 20)
#define IPH_ROOM    20

/* What snums_put writes beside the numbers. */
enum {
    SN_FLEET = 1,   /* "instances" */
    SN_CLIENTS = 2, /* "clients": the first CLIENTS_SHOWN addresses (the operator's /stats) */
    SN_IPH = 4,     /* "ips": every address's hash (published to the fleet, never answered) */
};

/* The numbers of a label here: slot (GEN_NO_SLOT = never served), the generation index
   (-1 = not served now, e.g. disabled); up to max of its addresses into addrs (NULL =
   counted only). */
static void snums_local(struct apiread_stats *n, struct server *s, const struct gen *g,
                        uint32_t slot, ssize_t gi, struct seen_addr *addrs, size_t max)
{
    struct stats_secret ss;
    memset(n, 0, sizeof *n);
    memset(&ss, 0, sizeof ss);
    int64_t last = 0;
    size_t ips = 0;
    if (slot != GEN_NO_SLOT) {
        server_secret_stats(s, slot, &ss);
        ips = server_secret_seen(s, slot, gi >= 0 ? g->cfg->secrets[gi].limits.unique_ips_window_s : 0,
                                 addrs, addrs ? max : 0, &last);
        n->addrs = addrs;
        n->naddrs = addrs ? (ips < max ? ips : max) : 0;
    }
    const uint64_t v[] = {ss.active,   ss.conns,    ss.bytes_up,  ss.bytes_down,
                          ss.limits_hit, ips,       (uint64_t)(last > 0 ? last : 0),
                          ss.conns,    ss.hs_stale, ss.hs_replay, ss.hs_limit, ss.hs_other};
    _Static_assert(sizeof v / sizeof v[0] == SNUM_COUNT, "a value for every field");
    memcpy(n->v, v, sizeof v);
    n->quota = gi >= 0 && limits_quota_get(g->limits, (size_t)gi, &n->quota_used, &n->quota_end);
    n->quota_limit = gi >= 0 ? g->cfg->secrets[gi].limits.quota : 0;
    n->instances = 1;
}

/* 64 bits mixed so that every input bit moves every output bit (the finaliser of
   SplitMix64: Steele, Lea, Flood 2014, constants as published). */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* An address as the fleet's instances publish it: its 16 bytes (IPv4 mapped) mixed into 64
   bits, the same at every instance, so that two that saw one client publish one value. A
   publish hashes every counted address of every secret each second (256 x 1,000 at most),
   so this is a few multiplications, not SHA-256. A pseudonym, not anonymity: anyone who
   can read Redis finds an address again by hashing candidates (Redis already holds the
   secrets' keys; it must be private anyway). */
static uint64_t addr_hash(const uint8_t addr[16])
{
    uint64_t hi = 0, lo = 0;
    for (int i = 0; i < 8; i++) {
        hi = hi << 8 | addr[i];
        lo = lo << 8 | addr[8 + i];
    }
    return mix64(lo ^ mix64(hi ^ 0x7467707278793235ull /* "tgprxy25" */));
}

static int snums_put(tg__buf *b, const struct apiread_stats *n, unsigned what)
{
    size_t nc = what & SN_CLIENTS ? (n->naddrs < CLIENTS_SHOWN ? n->naddrs : CLIENTS_SHOWN) : 0;
    size_t nh = what & SN_IPH ? n->naddrs : 0;
    char *p = w_begin(b, SNUMS_ROOM + nc * CLIENT_ROOM + nh * IPH_ROOM);
    if (!p)
        return -ENOMEM;
    for (size_t i = 0; i < SNUM_COUNT; i++) {
        p = w_mem(p, apiread_field[i].pre, apiread_field[i].pre_len);
        if (i == SNUM_LAST_SEEN && n->v[i] == 0)
            p = W_LIT(p, "null");
        else
            p = w_u64(p, n->v[i]);
    }
    *p++ = '}'; /* the handshakes group */
    uint64_t q = n->quota_limit, used = n->quota_used;
    if (n->quota) {
        p = W_LIT(p, ",\"quota_used\":");
        p = w_u64(p, used);
        p = W_LIT(p, ",\"quota_left\":");
        p = w_u64(p, used >= q ? 0 : q - used);
        p = W_LIT(p, ",\"quota_period_end\":");
        p = w_i64(p, n->quota_end);
    } else {
        p = W_LIT(p, ",\"quota_used\":null,\"quota_left\":null,\"quota_period_end\":null");
    }
    if (what & SN_FLEET) {
        p = W_LIT(p, ",\"instances\":");
        p = w_u64(p, n->instances);
    }
    for (size_t i = 0; i < nc; i++) {
        char text[INET6_ADDRSTRLEN];
        const uint8_t *a = n->addrs[i].addr;
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (memcmp(a, mapped, 12) == 0)
            inet_ntop(AF_INET, a + 12, text, sizeof text);
        else
            inet_ntop(AF_INET6, a, text, sizeof text);
        p = i ? W_LIT(p, ",{\"address\":") : W_LIT(p, ",\"clients\":[{\"address\":");
        p = w_str(p, text, strlen(text)); /* digits, dots and colons: as long as text */
        p = W_LIT(p, ",\"last_seen\":");
        p = w_i64(p, n->addrs[i].at);
        *p++ = '}';
    }
    if (nc)
        *p++ = ']';
    for (size_t i = 0; i < nh; i++) {
        char hex[16];
        uint64_t h = addr_hash(n->addrs[i].addr);
        for (int k = 15; k >= 0; k--, h >>= 4)
            hex[k] = "0123456789abcdef"[h & 15];
        p = i ? W_LIT(p, ",\"") : W_LIT(p, ",\"ips\":[\"");
        p = w_mem(p, hex, sizeof hex);
        *p++ = '"';
    }
    if (nh)
        *p++ = ']';
    *p++ = '}';
    w_end(b, p);
    return 0;
}

static ssize_t gen_index(const struct gen *g, const char *label)
{
    for (size_t i = 0; i < g->cfg->nsecrets; i++)
        if (strcmp(g->cfg->secrets[i].label, label) == 0)
            return (ssize_t)i;
    return -1;
}

/* ?scope=fleet: the other instances' stats objects, sorted by label. */
struct peer_stat {
    char label[CONFIG_LABEL_MAX];
    char *json;
    size_t len;
};

struct peer_stats {
    struct peer_stat *p;
    size_t n, cap;
    unsigned peers; /* instances that answered besides this one */
    bool nomem;
};

static void on_peer_stat(void *user, const char *label, const char *json, size_t len)
{
    struct peer_stats *ps = user;
    if (ps->nomem || strlen(label) >= CONFIG_LABEL_MAX)
        return;
    if (ps->n == ps->cap) {
        size_t cap = ps->cap ? 2 * ps->cap : 64;
        struct peer_stat *p = tg__realloc(ps->p, cap * sizeof *p);
        if (!p) {
            ps->nomem = true;
            return;
        }
        ps->p = p;
        ps->cap = cap;
    }
    struct peer_stat *e = &ps->p[ps->n];
    if (!(e->json = tg__malloc(len + 1))) {
        ps->nomem = true;
        return;
    }
    memcpy(e->json, json, len);
    e->json[len] = '\0';
    e->len = len;
    tg__strlcpy(e->label, label, sizeof e->label);
    ps->n++;
}

static int peer_cmp(const void *x, const void *y)
{
    return strcmp(((const struct peer_stat *)x)->label, ((const struct peer_stat *)y)->label);
}

static void peer_stats_free(struct peer_stats *ps)
{
    for (size_t i = 0; i < ps->n; i++)
        tg__free(ps->p[i].json);
    tg__free(ps->p);
    memset(ps, 0, sizeof *ps);
}

/* Every other live instance's stats (of label, or of all with NULL). 0, or -1 with a 503 in
   o (Redis away) or a 500. */
static int peer_stats_read(struct api *a, const char *label, struct peer_stats *ps, struct out *o);

/* This instance's address hashes and every peer's stats of label, and unique_ips the size of
   the union of their hashes (exact up to the SEEN_ADDRS each instance tracks; a peer that
   published no hashes adds its count). n's addresses must be all of them (SEEN_ADDRS). */
static void snums_fleet(struct apiread_stats *n, const struct peer_stats *ps, const char *label)
{
    size_t lo = 0, hi = ps->n;
    while (lo < hi) { /* the first entry not before label */
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(ps->p[mid].label, label) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = 0; i < n->naddrs; i++)
        apiread_iph_add(n, addr_hash(n->addrs[i].addr));
    unsigned seen = n->instances;
    for (; lo < ps->n && strcmp(ps->p[lo].label, label) == 0; lo++)
        apiread_peer_stats(n, ps->p[lo].json, ps->p[lo].len);
    n->instances = seen + ps->peers; /* every instance answered, with or without the label */
    size_t distinct = 0;
    if (n->niph)
        qsort(n->iph, n->niph, sizeof *n->iph, apiread_u64_cmp);
    for (size_t i = 0; i < n->niph; i++)
        distinct += i == 0 || n->iph[i] != n->iph[i - 1];
    n->v[SNUM_UNIQUE_IPS] = distinct + n->ips_unhashed;
}

/* The stats object of a label: local (ps NULL) or over the fleet; what as snums_put's. */
static int put_stats_at(tg__buf *b, struct server *s, const struct gen *g, const char *label,
                        ssize_t gi, const struct peer_stats *ps, unsigned what)
{
    struct apiread_stats n;
    struct seen_addr addrs[SEEN_ADDRS];
    bool all = ps || (what & SN_IPH); /* a union needs every address, a list the newest */
    snums_local(&n, s, g, gi >= 0 ? g->slot[gi] : slot_of(s, label), gi,
                all || (what & SN_CLIENTS) ? addrs : NULL, all ? SEEN_ADDRS : CLIENTS_SHOWN);
    if (ps)
        snums_fleet(&n, ps, label);
    int rc = n.nomem ? -ENOMEM : snums_put(b, &n, what | (ps ? SN_FLEET : 0));
    apiread_stats_done(&n);
    return rc;
}

static int put_stats(tg__buf *b, struct server *s, const struct gen *g, const char *label,
                     const struct peer_stats *ps, unsigned what)
{
    return put_stats_at(b, s, g, label, gen_index(g, label), ps, what);
}

/* The writer's bound for one secret without its stats: its label and domain escaped (6 bytes
   each at most), and the rest (names, 8 numbers of 20 digits, the ad tag) well under 1 KiB. */
#define SECRET_ROOM(label_len, domain_len) (1024 + 6 * ((label_len) + (domain_len)))

/* One secret as the API shows it (never its key): gi its generation index (-1 = not served),
   e its state entry (or NULL). */
static int put_secret_at(tg__buf *b, struct api *a, const struct gen *g, const char *label,
                         ssize_t gi, const struct apistore_entry *e, bool with_stats,
                         const struct peer_stats *ps)
{
    const struct config_secret *cs = gi >= 0 ? &g->cfg->secrets[gi] : NULL;
    bool api_owned =
        e && e->has_secret && (!cs || memcmp(&cs->secret, &e->secret, sizeof cs->secret) == 0);
    const struct secret *sec = cs ? &cs->secret : &e->secret;
    const struct config_limits *lim = cs ? &cs->limits : &e->limits;
    bool shown = cs || (e && e->has_secret);
    size_t ll = strlen(label), dl = shown && sec->kind == SECRET_EE ? sec->domain_len : 0;
    char *p = w_begin(b, SECRET_ROOM(ll, dl));
    if (!p)
        return -ENOMEM;
    p = W_LIT(p, "{\"label\":");
    p = w_str(p, label, ll);
    p = api_owned ? W_LIT(p, ",\"source\":\"api\"") : W_LIT(p, ",\"source\":\"file\"");
    p = e && e->disabled ? W_LIT(p, ",\"disabled\":true") : W_LIT(p, ",\"disabled\":false");
    p = W_LIT(p, ",\"revision\":");
    p = w_u64(p, e ? e->revision : 0);
    if (shown) {
        p = W_LIT(p, ",\"kind\":\"");
        const char *k = kind_name(sec->kind);
        p = w_mem(p, k, strlen(k));
        p = W_LIT(p, "\",\"domain\":");
        p = sec->kind == SECRET_EE ? w_str(p, sec->domain, dl) : W_LIT(p, "null");
        /* as apistore_put_limits writes them */
        static const char *const pre[] = {",\"limits\":{\"max-connections\":",
                                          ",\"max-unique-ips\":", ",\"unique-ips-window\":",
                                          ",\"quota\":", ",\"quota-reset\":"};
        const uint64_t lv[] = {lim->max_connections, lim->max_unique_ips,
                               lim->unique_ips_window_s, lim->quota, lim->quota_reset_s};
        for (size_t i = 0; i < sizeof lv / sizeof lv[0]; i++)
            p = w_u64(w_mem(p, pre[i], strlen(pre[i])), lv[i]);
        p = W_LIT(p, ",\"expires\":");
        p = w_i64(p, lim->expires);
        p = W_LIT(p, "},\"ad_tag\":");
        int8_t mode = cs ? cs->ad_tag_mode : e->ad_tag_mode;
        if (mode > 0) {
            char hex[33];
            tg__hex_encode(hex, cs ? cs->ad_tag : e->ad_tag, 16);
            *p++ = '"';
            p = w_mem(p, hex, 32);
            *p++ = '"';
        } else {
            p = mode < 0 ? W_LIT(p, "\"\"") : W_LIT(p, "null");
        }
    }
    if (with_stats)
        p = W_LIT(p, ",\"stats\":");
    w_end(b, p);
    int rc = with_stats ? put_stats_at(b, a->srv, g, label, gi, ps, 0) : 0;
    return rc ? rc : tg__buf_putc(b, '}');
}

static int put_secret(tg__buf *b, struct api *a, const struct gen *g, const char *label,
                      bool with_stats, const struct peer_stats *ps)
{
    return put_secret_at(b, a, g, label, gen_index(g, label), apistore_find(&a->st, label),
                         with_stats, ps);
}

/* ---- changes ---- */

static const char *config_path(struct api *a)
{
    return server_config(a->srv)->source;
}

/* Publish the config file merged with cand; then write cand to the state file. On a failed
   write the previous state is published again. 0, or -1 with o holding the error answer. */
static int apply(struct api *a, struct apistore *cand, struct out *o)
{
    char err[CONFIG_ERR_MAX];
    struct config cfg;
    config_init(&cfg);
    int rc = config_load_file(&cfg, config_path(a), err, sizeof err, NULL, NULL);
    if (rc == 0)
        rc = apistore_merge(cand, &cfg, err, sizeof err, NULL, NULL);
    if (rc == 0 && a->fleet) /* the fleet gets only a change this instance can serve */
        rc = config_validate(&cfg, err, sizeof err);
    if (rc == 0 && a->fleet) {
        int p = apifleet_push(&a->wl, a->st.revision, cand);
        if (p <= 0) {
            config_cleanup(&cfg);
            if (p == 0) {
                o->retry = true; /* on_request reads the fleet's state and runs it again */
                return err_out(o, 409, "revision_mismatch",
                               "another instance of the fleet changed the secrets first");
            }
            return err_out(o, 503, "fleet_unavailable",
                           "%s; changes are refused until it is back (every instance serves the "
                           "secrets it last saw)",
                           a->wl.err);
        }
    }
    if (rc == 0)
        rc = server_reload(a->srv, &cfg, err, sizeof err);
    config_cleanup(&cfg);
    api_note_reload(a, rc == 0, "api", rc == 0 ? NULL : err);
    if (rc == -ENOMEM)
        return err_out(o, 500, "internal", "out of memory");
    if (rc != 0)
        return err_out(o, 409, "config_invalid", "the change was not applied: %s", err);
    const char *path = server_config(a->srv)->api.state_file;
    if ((rc = apistore_save(cand, path, err, sizeof err)) != 0 && a->fleet) {
        /* the fleet has it: the file is this instance's copy for a start without Redis */
        tg__log(NULL, TG__LOG_WARN, "api: %s; the fleet's Redis holds the change", err);
    } else if (rc != 0) {
        tg__log(NULL, TG__LOG_ERROR, "api: %s; publishing the previous state again", err);
        char err2[CONFIG_ERR_MAX];
        config_init(&cfg);
        if (config_load_file(&cfg, config_path(a), err2, sizeof err2, NULL, NULL) == 0 &&
            apistore_merge(&a->st, &cfg, err2, sizeof err2, NULL, NULL) == 0)
            (void)server_reload(a->srv, &cfg, err2, sizeof err2);
        config_cleanup(&cfg);
        return err_out(o, 500, "state_write_failed", "%s", err);
    }
    struct apistore tmp = a->st;
    a->st = *cand;
    *cand = tmp;
    return 0;
}

/* ---- [fleet]: the state is the fleet's ---- */

/* Whether a relay of label, served under old, must end under new: its secret went, changed
   its key or was disabled. */
static bool revoked_by(const struct apistore *old, const struct apistore *new, const char *label)
{
    const struct apistore_entry *e = apistore_find((struct apistore *)old, label),
                                *f = apistore_find((struct apistore *)new, label);
    if (f && f->disabled)
        return !e || !e->disabled;
    if (!e || e->disabled || !e->has_secret)
        return false;
    return !f || !f->has_secret || memcmp(&f->secret, &e->secret, sizeof f->secret) != 0;
}

/* Make fresh (the fleet's state) the running one, as an API change here would: publish it
   as a generation, keep it in the state file, close the relays of the secrets it disabled,
   rotated or removed. Reload lock held. 0 or -errno (logged). */
static int adopt(struct api *a, struct apistore *fresh)
{
    char err[CONFIG_ERR_MAX];
    struct config cfg;
    config_init(&cfg);
    int rc = config_load_file(&cfg, config_path(a), err, sizeof err, NULL, NULL);
    if (rc == 0)
        rc = apistore_merge(fresh, &cfg, err, sizeof err, NULL, NULL);
    if (rc == 0)
        rc = server_reload(a->srv, &cfg, err, sizeof err);
    config_cleanup(&cfg);
    api_note_reload(a, rc == 0, "fleet", rc == 0 ? NULL : err);
    if (rc != 0) {
        tg__log(NULL, TG__LOG_ERROR,
                "api: the fleet's secrets (revision %" PRIu64 ") cannot be served here: %s",
                fresh->revision, err);
        return rc;
    }
    if (apistore_save(fresh, server_config(a->srv)->api.state_file, err, sizeof err) != 0)
        tg__log(NULL, TG__LOG_WARN, "api: %s (the fleet's state is served all the same)", err);
    size_t n = a->st.n + fresh->n, k = 0;
    char(*gone)[CONFIG_LABEL_MAX] = n ? tg__calloc(n, sizeof *gone) : NULL;
    for (size_t i = 0; gone && i < a->st.n; i++)
        if (revoked_by(&a->st, fresh, a->st.e[i].label))
            tg__strlcpy(gone[k++], a->st.e[i].label, sizeof gone[0]);
    for (size_t i = 0; gone && i < fresh->n; i++)
        if (!apistore_find(&a->st, fresh->e[i].label) && revoked_by(&a->st, fresh, fresh->e[i].label))
            tg__strlcpy(gone[k++], fresh->e[i].label, sizeof gone[0]);
    struct apistore tmp = a->st;
    a->st = *fresh;
    *fresh = tmp;
    for (size_t i = 0; i < k; i++)
        server_revoke(a->srv, gone[i]);
    tg__log(NULL, TG__LOG_INFO, "api: the fleet's secrets, revision %" PRIu64 ", applied (%zu revoked)",
            a->st.revision, k);
    tg__free(gone);
    return 0;
}

/* Follow the fleet, whose revision is rev (read on l just now). Reload lock held. Nothing
   stored yet: this instance's state becomes the fleet's. -1 when Redis failed. */
static int sync_locked(struct api *a, struct apifleet_link *l, int64_t rev)
{
    if (rev < 0)
        return -1;
    if ((uint64_t)rev == a->st.revision)
        return 0;
    if (rev == 0) /* an empty (or flushed) Redis: seed it */
        return apifleet_push(l, 0, &a->st) < 0 ? -1 : 0;
    if ((uint64_t)rev == a->failed_rev)
        return 0; /* it did not apply; a later revision may */
    struct apistore fresh;
    int p = apifleet_pull(l, &fresh);
    if (p > 0 && adopt(a, &fresh) != 0)
        a->failed_rev = (uint64_t)rev;
    apistore_cleanup(&fresh);
    return p < 0 ? -1 : 0;
}

static int label_cmp(const void *x, const void *y)
{
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* The generation's labels, sorted, so that looking up 1,000 labels costs n log n compares,
   not n^2; kept for the next call while the generation is the same (a sequence number is
   never reused). The reload lock must be held. NULL on ENOMEM. */
static const char **gen_labels_sorted(struct api *a, const struct gen *g)
{
    if (a->gl && a->gl_seq == g->seq)
        return a->gl;
    size_t ng = g->cfg->nsecrets;
    const char **gl = tg__realloc(a->gl, (ng + 1) * sizeof *gl);
    if (!gl)
        return NULL;
    for (size_t i = 0; i < ng; i++)
        gl[i] = g->cfg->secrets[i].label;
    qsort(gl, ng, sizeof *gl, label_cmp);
    a->gl = gl;
    a->gl_seq = g->seq;
    return gl;
}

/* This instance's stats of every label it shows, to the fleet. */
static void publish(struct api *a, struct apifleet_link *l)
{
    server_reload_lock(a->srv);
    struct gen *g = server_gen(a->srv);
    size_t cap = g->cfg->nsecrets + a->st.n, n = 0;
    char(*labels)[CONFIG_LABEL_MAX] = cap ? tg__calloc(cap, sizeof *labels) : NULL;
    const char **lp = cap ? tg__calloc(cap, sizeof *lp) : NULL;
    tg__buf *vals = cap ? tg__calloc(cap, sizeof *vals) : NULL;
    bool ok = cap == 0 || (labels && lp && vals);
    size_t ng = g->cfg->nsecrets;
    const char **gl = gen_labels_sorted(a, g);
    ok = ok && gl;
    for (size_t i = 0; ok && i < cap; i++) {
        const char *label = i < ng ? g->cfg->secrets[i].label : a->st.e[i - ng].label;
        if (i >= ng && bsearch(&label, gl, ng, sizeof *gl, label_cmp))
            continue; /* served: done above */
        tg__strlcpy(labels[n], label, sizeof labels[n]);
        lp[n] = labels[n];
        tg__buf_init(&vals[n], SNUMS_ROOM + SEEN_ADDRS * IPH_ROOM);
        ok = put_stats_at(&vals[n], a->srv, g, label, i < ng ? (ssize_t)i : -1, NULL, SN_IPH) == 0;
        n++;
    }
    gen_unref(g);
    server_reload_unlock(a->srv);
    if (ok)
        (void)apifleet_publish(l, a->inst, lp, vals, n);
    for (size_t i = 0; vals && i < n; i++)
        tg__buf_cleanup(&vals[i]);
    tg__free(vals);
    tg__free(lp);
    tg__free(labels);
}

static int follow_qresets(struct api *a, struct apifleet_link *l);

/* The sync thread: every SYNC_MS, the fleet's revision; a new one is applied here. Every
   PUBLISH_MS, this instance's stats. An outage is logged once, and its end. */
static void *sync_main(void *arg)
{
    struct api *a = arg;
    struct apifleet_link l;
    apifleet_link_init(&l, server_config(a->srv));
    uint64_t next_pub = 0;
    bool down = false;
    pthread_mutex_lock(&a->stop_mu);
    while (!a->stop) {
        pthread_mutex_unlock(&a->stop_mu);
        int64_t rev = apifleet_revision(&l);
        int rc = -1;
        if (rev >= 0) {
            server_reload_lock(a->srv);
            rc = sync_locked(a, &l, rev);
            server_reload_unlock(a->srv);
        }
        if (rc == 0)
            rc = follow_qresets(a, &l);
        if (rc == 0 && tg__now_ms() >= next_pub) {
            publish(a, &l);
            next_pub = tg__now_ms() + PUBLISH_MS;
        }
        if ((rc != 0) != down) {
            down = rc != 0;
            if (down)
                tg__log(NULL, TG__LOG_WARN,
                        "api: %s; the secrets last seen are served, API changes are refused "
                        "until it is back",
                        l.err);
            else
                tg__log(NULL, TG__LOG_INFO, "api: the fleet's Redis is back");
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)SYNC_MS * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_mutex_lock(&a->stop_mu);
        if (!a->stop)
            pthread_cond_timedwait(&a->stop_cv, &a->stop_mu, &ts);
    }
    pthread_mutex_unlock(&a->stop_mu);
    apifleet_link_cleanup(&l);
    return NULL;
}

static int peer_stats_read(struct api *a, const char *label, struct peer_stats *ps, struct out *o)
{
    int n = apifleet_read(&a->wl, a->inst, label, on_peer_stat, ps);
    if (n < 0)
        return err_out(o, 503, "fleet_unavailable", "%s: no fleet-wide numbers now (scope=local "
                       "has this instance's)", a->wl.err);
    if (ps->nomem)
        return err_out(o, 500, "internal", "out of memory");
    ps->peers = (unsigned)n;
    if (ps->n)
        qsort(ps->p, ps->n, sizeof *ps->p, peer_cmp);
    return 0;
}

/* If-Match against an entry's revision: 0, or -1 with a 409 answer. */
static int check_match(struct MHD_Connection *c, const struct apistore_entry *e, uint64_t rev,
                       struct out *o)
{
    const char *im = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "If-Match");
    if (!im || strcmp(im, "*") == 0)
        return 0;
    char want[32];
    snprintf(want, sizeof want, "\"%" PRIu64 "\"", e ? e->revision : rev);
    if (strcmp(im, want) == 0)
        return 0;
    return err_out(o, 409, "revision_mismatch",
                   "If-Match %s is stale: the secret is at revision %s (GET it again)",
                   strlen(im) < 40 ? im : "(long)", want);
}

static int limits_from(const struct json_val *o, struct config_limits *l, struct out *out)
{
    char why[160];
    if (apiread_limits(o, l, why, sizeof why) != 0)
        return err_out(out, 400, "bad_request", "%s", why);
    return 0;
}

static int parse_body(const struct req *r, struct json_doc *doc, struct out *o)
{
    char why[160];
    doc->root = NULL;
    doc->blocks = NULL;
    if (r->body.len == 0)
        return 0;
    int rc = json_parse(doc, r->body.data, r->body.len, why, sizeof why);
    if (rc == -ENOMEM)
        return err_out(o, 500, "internal", "out of memory");
    if (rc != 0)
        return err_out(o, 400, "bad_json", "request body: %s", why);
    if (doc->root->type != JSON_OBJECT) {
        json_doc_free(doc);
        return err_out(o, 400, "bad_json", "request body: expected a JSON object");
    }
    return 0;
}

static int put_links(tg__buf *b, struct api *a, const char *label, const struct secret *sec)
{
    const struct config *cfg = server_config(a->srv);
    char host[CONFIG_HOST_MAX];
    uint16_t port = cfg->public_port ? cfg->public_port : server_port(a->srv, 0);
    if (cfg->public_host[0]) {
        tg__strlcpy(host, cfg->public_host, sizeof host);
    } else {
        const struct sockaddr_storage *sa = &cfg->listen[0].addr;
        inet_ntop(sa->ss_family,
                  sa->ss_family == AF_INET
                      ? (const void *)&((const struct sockaddr_in *)(const void *)sa)->sin_addr
                      : (const void *)&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
                  host, sizeof host);
    }
    int rc = tg__buf_puts(b, "{\"tg\":\"");
    if (rc == 0)
        rc = links_format(b, LINKS_TG, host, port, sec, false);
    if (rc == 0)
        rc = tg__buf_puts(b, "\",\"tme\":\"");
    if (rc == 0)
        rc = links_format(b, LINKS_TME, host, port, sec, false);
    if (rc == 0)
        rc = tg__buf_puts(b, "\",\"qr_svg\":\"/v1/secrets/");
    if (rc == 0)
        rc = tg__buf_printf(b, "%s/qr.svg\",\"qr_png\":\"/v1/secrets/%s/qr.png\"}", label, label);
    return rc;
}

/* The served secret of label (from the generation, else a disabled API entry), or NULL. */
static const struct secret *find_secret(struct api *a, const struct gen *g, const char *label)
{
    ssize_t gi = gen_index(g, label);
    if (gi >= 0)
        return &g->cfg->secrets[gi].secret;
    struct apistore_entry *e = apistore_find(&a->st, label);
    return e && e->has_secret ? &e->secret : NULL;
}

static int new_key(struct secret *sec)
{
    return crypto_random(sec->key, sizeof sec->key);
}

/* POST /v1/secrets */
static int h_create(struct api *a, const struct json_val *body, struct out *o)
{
    o->keys = true;
    const struct json_val *lab = json_get(body, "label"), *kind = json_get(body, "kind"),
                          *dom = json_get(body, "domain"), *sec = json_get(body, "secret");
    for (const struct json_val *m = body ? body->child : NULL; m; m = m->next)
        if (strcmp(m->key, "label") && strcmp(m->key, "kind") && strcmp(m->key, "domain") &&
            strcmp(m->key, "secret") && strcmp(m->key, "limits") && strcmp(m->key, "ad_tag"))
            return err_out(o, 400, "bad_request",
                           "unknown member (expected label, kind, domain, secret, limits, ad_tag)");
    if (!lab || lab->type != JSON_STRING || !apistore_label_ok(lab->str, lab->len))
        return err_out(o, 400, "bad_request", "label: expected 1..%d characters of [A-Za-z0-9_.-]",
                       CONFIG_LABEL_MAX - 1);
    struct gen *g = server_gen(a->srv);
    bool taken = gen_index(g, lab->str) >= 0 || apistore_find(&a->st, lab->str);
    gen_unref(g);
    if (taken)
        return err_out(o, 409, "exists", "a secret labelled %s exists", lab->str);
    struct apistore_entry ne;
    memset(&ne, 0, sizeof ne);
    tg__strlcpy(ne.label, lab->str, sizeof ne.label);
    ne.has_secret = true;
    char why[160];
    if (sec) {
        if (sec->type != JSON_STRING ||
            secret_parse(sec->str, sec->len, &ne.secret, why, sizeof why) != 0)
            return err_out(o, 400, "bad_request", "secret: %s",
                           sec->type == JSON_STRING ? why : "expected a string");
        if (kind || dom)
            return err_out(o, 400, "bad_request",
                           "secret given: kind and domain come from it, leave them out");
    } else {
        const char *k = kind && kind->type == JSON_STRING ? kind->str : kind ? "" : "ee";
        ne.secret.kind = strcmp(k, "ee") == 0   ? SECRET_EE
                         : strcmp(k, "dd") == 0 ? SECRET_DD
                                                : SECRET_CLASSIC;
        if (strcmp(k, "ee") && strcmp(k, "dd") && strcmp(k, "classic"))
            return err_out(o, 400, "bad_request", "kind: expected \"ee\", \"dd\" or \"classic\"");
        if (ne.secret.kind == SECRET_EE) {
            const char *bad = !dom || dom->type != JSON_STRING ? "expected a domain string"
                              : dom->len > SECRET_DOMAIN_MAX
                                  ? "too long"
                                  : secret_domain_problem(dom->str, dom->len);
            if (bad)
                return err_out(o, 400, "bad_request", "domain: %s", bad);
            memcpy(ne.secret.domain, dom->str, dom->len);
            ne.secret.domain_len = (uint8_t)dom->len;
        } else if (dom) {
            return err_out(o, 400, "bad_request", "domain: only an ee secret has one");
        }
        if (new_key(&ne.secret) != 0)
            return err_out(o, 500, "internal", "no random bytes");
    }
    if (limits_from(json_get(body, "limits"), &ne.limits, o) != 0)
        return ANSWERED;
    const struct json_val *tag = json_get(body, "ad_tag"); /* middle-proxy mode's ad tag */
    if (tag && (tag->type != JSON_STRING ||
                apistore_ad_tag(tag->str, tag->len, &ne.ad_tag_mode, ne.ad_tag) != 0))
        return err_out(o, 400, "bad_request",
                       "ad_tag: expected the 32 hex digits @MTProxybot gives, or \"\" for none");
    struct apistore cand;
    apistore_init(&cand);
    struct apistore_entry *e = NULL;
    if (apistore_copy(&cand, &a->st) != 0 || !(e = apistore_add(&cand, ne.label))) {
        apistore_cleanup(&cand);
        return err_out(o, 507, "full", "the API holds at most %d secrets", APISTORE_MAX);
    }
    uint64_t rev = ne.revision = ++cand.revision;
    *e = ne;
    int rc = apply(a, &cand, o);
    apistore_cleanup(&cand);
    if (rc != 0)
        return rc;
    g = server_gen(a->srv);
    char text[SECRET_TEXT];
    int n = secret_format(&ne.secret, false, text, sizeof text);
    rc = data_begin(o, 201);
    if (rc == 0)
        rc = tg__buf_puts(&o->b, "{\"secret\":");
    if (rc == 0)
        rc = put_secret(&o->b, a, g, ne.label, false, NULL);
    if (rc == 0)
        rc = tg__buf_printf(&o->b, ",\"key\":\"%s\",\"links\":", n > 0 ? text : "");
    if (rc == 0)
        rc = put_links(&o->b, a, ne.label, &ne.secret);
    if (rc == 0)
        rc = tg__buf_putc(&o->b, '}');
    crypto_wipe(text, sizeof text);
    crypto_wipe(&ne, sizeof ne);
    gen_unref(g);
    snprintf(o->etag, sizeof o->etag, "\"%" PRIu64 "\"", rev);
    return rc;
}

enum op { OP_DISABLE, OP_ENABLE, OP_ROTATE, OP_PATCH, OP_DELETE };

/* disable / enable / rotate / PATCH / DELETE of one label */
static int h_change(struct api *a, struct MHD_Connection *c, const char *label, enum op op,
                    const struct json_val *body, struct out *o)
{
    struct gen *g = server_gen(a->srv);
    bool in_gen = gen_index(g, label) >= 0;
    gen_unref(g);
    struct apistore cand;
    apistore_init(&cand);
    if (apistore_copy(&cand, &a->st) != 0)
        return err_out(o, 500, "internal", "out of memory");
    struct apistore_entry *e = apistore_find(&cand, label);
    int rc = 0;
    if (!e && !in_gen)
        rc = err_out(o, 404, "not_found", "no secret labelled %s", label);
    else if (check_match(c, e, 0, o) != 0)
        rc = -1;
    else if ((op == OP_ROTATE || op == OP_PATCH || op == OP_DELETE) && !(e && e->has_secret))
        rc = err_out(o, 409, "file_owned",
                     "%s is defined in the configuration file: edit the file (and SIGHUP) to "
                     "change it; the API can disable, enable and reset its quota",
                     label);
    if (rc != 0) {
        apistore_cleanup(&cand);
        return rc;
    }
    if (!e && !(e = apistore_add(&cand, label))) {
        apistore_cleanup(&cand);
        return err_out(o, 507, "full", "the API holds at most %d entries", APISTORE_MAX);
    }
    uint64_t rev = ++cand.revision;
    e->revision = rev;
    if (op == OP_DISABLE)
        e->disabled = true;
    else if (op == OP_ENABLE)
        e->disabled = false;
    else if (op == OP_ROTATE && new_key(&e->secret) != 0)
        rc = err_out(o, 500, "internal", "no random bytes");
    else if (op == OP_PATCH) {
        for (const struct json_val *m = body ? body->child : NULL; m && rc == 0; m = m->next)
            if (strcmp(m->key, "limits") != 0 && strcmp(m->key, "ad_tag") != 0)
                rc = err_out(o, 400, "bad_request",
                             "PATCH changes limits and ad_tag: {\"limits\":{...},\"ad_tag\":\"...\"}");
        if (rc == 0)
            rc = limits_from(json_get(body, "limits"), &e->limits, o);
        const struct json_val *tag = json_get(body, "ad_tag"); /* middle-proxy mode */
        if (rc == 0 && tag && tag->type == JSON_NULL)
            e->ad_tag_mode = 0, memset(e->ad_tag, 0, sizeof e->ad_tag); /* the top-level one */
        else if (rc == 0 && tag &&
                 (tag->type != JSON_STRING ||
                  apistore_ad_tag(tag->str, tag->len, &e->ad_tag_mode, e->ad_tag) != 0))
            rc = err_out(o, 400, "bad_request",
                         "ad_tag: expected the 32 hex digits @MTProxybot gives, \"\" for none, "
                         "or null for the top-level ad-tag");
    } else if (op == OP_DELETE)
        apistore_del(&cand, e);
    if (op == OP_ENABLE && !e->has_secret)
        apistore_del(&cand, e); /* a file secret's override with nothing left to say */
    if (rc == 0)
        rc = apply(a, &cand, o);
    apistore_cleanup(&cand);
    if (rc != 0)
        return rc;
    if (op == OP_DISABLE || op == OP_ROTATE || op == OP_DELETE)
        server_revoke(a->srv, label); /* its open relays end too, not only new handshakes */
    g = server_gen(a->srv);
    rc = data_begin(o, 200);
    if (rc == 0 && op == OP_DELETE)
        rc = tg__buf_puts(&o->b, "{\"deleted\":");
    if (rc == 0 && op == OP_DELETE)
        rc = json_put_str(&o->b, label, strlen(label));
    if (rc == 0 && op == OP_DELETE)
        rc = tg__buf_putc(&o->b, '}');
    if (rc == 0 && op != OP_DELETE)
        rc = put_secret(&o->b, a, g, label, true, NULL);
    gen_unref(g);
    snprintf(o->etag, sizeof o->etag, "\"%" PRIu64 "\"", rev);
    return rc;
}

/* The fleet's count of label's quota resets as applied here (added at 0 with add; NULL if
   absent, or on ENOMEM). */
static struct qreset *qreset_find(struct api *a, const char *label, bool add)
{
    for (size_t i = 0; i < a->nqr; i++)
        if (strcmp(a->qr[i].label, label) == 0)
            return &a->qr[i];
    if (!add)
        return NULL;
    if (a->nqr == a->capqr) {
        size_t cap = a->capqr ? 2 * a->capqr : 16;
        struct qreset *q = tg__realloc(a->qr, cap * sizeof *q);
        if (!q)
            return NULL;
        a->qr = q;
        a->capqr = cap;
    }
    struct qreset *r = &a->qr[a->nqr++];
    tg__strlcpy(r->label, label, sizeof r->label);
    r->n = 0;
    return r;
}

/* This instance's count of the quota of generation index gi goes back to 0, and its workers
   forget that the fleet said it is used up. False without a quota. */
static bool quota_zero(struct api *a, const struct gen *g, ssize_t gi)
{
    uint64_t used;
    int64_t end;
    if (gi < 0 || !limits_quota_get(g->limits, (size_t)gi, &used, &end))
        return false;
    limits_quota_set(g->limits, (size_t)gi, 0, end);
    server_fleet_quota_reset(a->srv, g->slot[gi]);
    return true;
}

struct qreset_ctx {
    struct api *a;
    struct gen *g;
};

/* The sync thread read a label's count of resets: a change is a reset made at another
   instance (or at this one, already applied: then the count is ours). */
static void on_qreset(void *user, const char *label, uint64_t n)
{
    struct qreset_ctx *x = user;
    struct qreset *r = qreset_find(x->a, label, true);
    if (!r || r->n == n)
        return;
    if (x->a->qr_primed && quota_zero(x->a, x->g, gen_index(x->g, label)))
        tg__log(NULL, TG__LOG_INFO, "api: the quota of %s was reset at another instance", label);
    r->n = n;
}

/* Every SYNC_MS: the quota resets made anywhere in the fleet. 0 or -1 (Redis away). */
static int follow_qresets(struct api *a, struct apifleet_link *l)
{
    server_reload_lock(a->srv);
    struct qreset_ctx x = {a, server_gen(a->srv)};
    int rc = apifleet_quota_resets(l, on_qreset, &x);
    if (rc == 0)
        a->qr_primed = true;
    gen_unref(x.g);
    server_reload_unlock(a->srv);
    return rc;
}

/* reset-quota: this instance's count; with [fleet] the fleet's count in Redis first (the
   other instances reset theirs when they see it, within SYNC_MS). */
static int h_reset_quota(struct api *a, const char *label, struct out *o)
{
    struct gen *g = server_gen(a->srv);
    ssize_t gi = gen_index(g, label);
    int rc = 0;
    uint64_t used;
    int64_t end;
    if (gi < 0)
        rc = err_out(o, 404, "not_found", "no secret labelled %s is served now", label);
    else if (!limits_quota_get(g->limits, (size_t)gi, &used, &end))
        rc = err_out(o, 409, "no_quota", "%s has no quota", label);
    else if (a->fleet) {
        int64_t n = apifleet_quota_reset(&a->wl, label, g->cfg->secrets[gi].limits.quota_reset_s);
        struct qreset *r = n >= 0 ? qreset_find(a, label, true) : NULL;
        if (n < 0)
            rc = err_out(o, 503, "fleet_unavailable", "%s: the fleet's quota count is not reset",
                         a->wl.err);
        else if (r)
            r->n = (uint64_t)n; /* applied here below: the sync thread need not */
    }
    if (rc == 0) {
        quota_zero(a, g, gi);
        rc = data_begin(o, 200);
        if (rc == 0)
            rc = put_secret(&o->b, a, g, label, true, NULL);
    }
    gen_unref(g);
    return rc;
}

/* ---- QR images ---- */

static int qr_svg(tg__buf *b, const char *text);
static int qr_png(tg__buf *b, const char *text);

static int h_link(struct api *a, const char *label, int what, struct out *o)
{
    o->keys = true;
    struct gen *g = server_gen(a->srv);
    const struct secret *sec = find_secret(a, g, label);
    int rc;
    if (!sec) {
        gen_unref(g);
        return err_out(o, 404, "not_found", "no secret labelled %s", label);
    }
    if (what == 0) {
        rc = data_begin(o, 200);
        if (rc == 0)
            rc = put_links(&o->b, a, label, sec);
    } else {
        tg__buf l;
        tg__buf_init(&l, 4096);
        rc = put_links(&l, a, label, sec);
        /* the t.me link, as phones open it: between "tme":" and the next quote */
        const char *at = rc == 0 ? strstr(tg__buf_cstr(&l), "\"tme\":\"") : NULL;
        char link[2048];
        size_t n = at ? strcspn(at + 7, "\"") : 0;
        if (at && n < sizeof link) {
            memcpy(link, at + 7, n);
            link[n] = '\0';
            o->raw = true;
            o->status = 200;
            o->type = what == 1 ? "image/svg+xml" : "image/png";
            rc = what == 1 ? qr_svg(&o->b, link) : qr_png(&o->b, link);
            crypto_wipe(link, sizeof link);
        } else {
            rc = -EINVAL;
        }
        if (l.data)
            crypto_wipe(l.data, l.len);
        tg__buf_cleanup(&l);
        if (rc != 0)
            err_out(o, 500, "internal", "cannot draw the QR code");
    }
    gen_unref(g);
    return rc;
}

/* ?scope=: NULL for this instance's numbers, else the fleet's read into ps. 0, or -1 with an
   answer in o. */
static int scope_of(struct api *a, struct MHD_Connection *c, const char *label,
                    struct peer_stats *ps, const struct peer_stats **use, struct out *o)
{
    const char *sc = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "scope");
    *use = NULL;
    if (!sc || strcmp(sc, "local") == 0)
        return 0;
    if (strcmp(sc, "fleet") != 0)
        return err_out(o, 400, "bad_request", "scope: expected local or fleet");
    if (!a->fleet)
        return err_out(o, 400, "bad_request", "scope=fleet: this proxy has no [fleet]");
    if (peer_stats_read(a, label, ps, o) != 0)
        return -1;
    *use = ps;
    return 0;
}

static int entry_cmp(const void *x, const void *y)
{
    return strcmp((*(struct apistore_entry *const *)x)->label,
                  (*(struct apistore_entry *const *)y)->label);
}

static int key_entry_cmp(const void *key, const void *y)
{
    return strcmp(*(const char *const *)key, (*(struct apistore_entry *const *)y)->label);
}

static int h_list(struct api *a, struct MHD_Connection *c, struct out *o)
{
    struct peer_stats pss = {0};
    const struct peer_stats *ps;
    if (scope_of(a, c, NULL, &pss, &ps, o) != 0)
        return ANSWERED;
    struct gen *g = server_gen(a->srv);
    int rc = data_begin(o, 200);
    if (rc == 0)
        rc = tg__buf_printf(&o->b,
                            "{\"revision\":%" PRIu64 ",\"generation\":%" PRIu64 ",",
                            a->st.revision, g->seq);
    if (rc == 0 && ps)
        rc = tg__buf_printf(&o->b, "\"instances\":%u,", 1 + ps->peers);
    if (rc == 0)
        rc = tg__buf_puts(&o->b, "\"secrets\":[");
    /* labels sorted, so that 1,000 secrets cost n log n compares, not n^2 */
    size_t ng = g->cfg->nsecrets, ns = a->st.n;
    if (rc == 0) /* about 500 bytes a secret: one allocation rather than a dozen regrowths */
        rc = tg__buf_reserve(&o->b, (ng + ns) * 512);
    const char **gl = gen_labels_sorted(a, g);
    struct apistore_entry **sl = tg__malloc((ns + 1) * sizeof *sl);
    if (!gl || !sl)
        rc = -ENOMEM;
    for (size_t i = 0; rc == 0 && i < ns; i++)
        sl[i] = &a->st.e[i];
    if (rc == 0)
        qsort(sl, ns, sizeof *sl, entry_cmp);
    bool first = true;
    for (size_t i = 0; rc == 0 && i < ng; i++, first = false) {
        rc = first ? 0 : tg__buf_putc(&o->b, ',');
        const char *label = g->cfg->secrets[i].label;
        struct apistore_entry **e = bsearch(&label, sl, ns, sizeof *sl, key_entry_cmp);
        if (rc == 0)
            rc = put_secret_at(&o->b, a, g, label, (ssize_t)i, e ? *e : NULL, true, ps);
    }
    for (size_t i = 0; rc == 0 && i < ns; i++) {
        const char *label = a->st.e[i].label;
        if (bsearch(&label, gl, ng, sizeof *gl, label_cmp))
            continue;
        rc = first ? 0 : tg__buf_putc(&o->b, ',');
        first = false;
        if (rc == 0)
            rc = put_secret_at(&o->b, a, g, label, -1, &a->st.e[i], true, ps);
    }
    tg__free(sl);
    if (rc == 0)
        rc = tg__buf_puts(&o->b, "]}");
    gen_unref(g);
    peer_stats_free(&pss);
    return rc;
}

static int h_get(struct api *a, struct MHD_Connection *c, const char *label, bool stats,
                 struct out *o)
{
    struct gen *g = server_gen(a->srv);
    struct apistore_entry *e = apistore_find(&a->st, label);
    struct peer_stats pss = {0};
    const struct peer_stats *ps = NULL;
    int rc;
    if (gen_index(g, label) < 0 && !e)
        rc = err_out(o, 404, "not_found", "no secret labelled %s", label);
    else if (stats && scope_of(a, c, label, &pss, &ps, o) != 0)
        rc = ANSWERED;
    else {
        rc = data_begin(o, 200);
        if (rc == 0 && stats) /* the addresses: for the operator, in this answer only */
            rc = put_stats(&o->b, a->srv, g, label, ps, SN_CLIENTS);
        else if (rc == 0)
            rc = put_secret(&o->b, a, g, label, true, NULL);
        snprintf(o->etag, sizeof o->etag, "\"%" PRIu64 "\"", e ? e->revision : 0);
    }
    gen_unref(g);
    peer_stats_free(&pss);
    return rc;
}

static int h_info(struct api *a, struct out *o)
{
    uint64_t ok = 0, failed = 0;
    bool last_ok = true;
    double when = 0;
    server_reload_counts(a->srv, &ok, &failed, &last_ok, &when);
    struct gen *g = server_gen(a->srv);
    double up = (double)tg__wall_s() - server_start_time(a->srv);
    int rc = data_begin(o, 200);
    if (rc == 0)
        rc = tg__buf_printf(&o->b,
                            "{\"version\":\"%s\",\"uptime_s\":%.0f,\"generation\":%" PRIu64
                            ",\"revision\":%" PRIu64 ",\"secrets\":%zu,\"connections_active\":%u,"
                            "\"reloads\":{\"ok\":%" PRIu64 ",\"failed\":%" PRIu64
                            ",\"last_ok\":%s,\"last_ok_time\":%.0f,\"recent\":[",
                            TGKIT_VERSION_STRING, up < 0 ? 0 : up, g->seq, a->st.revision,
                            g->cfg->nsecrets, server_active(a->srv), ok, failed,
                            last_ok ? "true" : "false", when);
    size_t n = a->nreloads < RELOADS_KEPT ? a->nreloads : RELOADS_KEPT;
    for (size_t k = 0; rc == 0 && k < n; k++) { /* newest first */
        const struct reload_rec *r = &a->reloads[(a->nreloads - 1 - k) % RELOADS_KEPT];
        rc = tg__buf_printf(&o->b, "%s{\"at\":%" PRId64 ",\"ok\":%s,\"origin\":", k ? "," : "",
                            r->at, r->ok ? "true" : "false");
        if (rc == 0)
            rc = json_put_str(&o->b, r->origin, strlen(r->origin));
        if (rc == 0)
            rc = tg__buf_puts(&o->b, ",\"error\":");
        if (rc == 0)
            rc = r->ok ? tg__buf_puts(&o->b, "null")
                       : json_put_str(&o->b, r->error, strlen(r->error));
        if (rc == 0)
            rc = tg__buf_putc(&o->b, '}');
    }
    if (rc == 0)
        rc = tg__buf_puts(&o->b, "]}}");
    gen_unref(g);
    return rc;
}

/* The fronting host as this process last saw it: tls-front's latest refreshes (each a real
   connection and TLS handshake to it) and the fronted connections that could not reach it. */
static int put_fronting(tg__buf *b, struct api *a)
{
    static struct tlsfront_status st[TLSFRONT_MAX_DOMAINS]; /* under the reload lock */
    struct tlsfront *t = server_tlsfront(a->srv);
    size_t n = t ? tlsfront_status(t, st, TLSFRONT_MAX_DOMAINS) : 0;
    if (n > TLSFRONT_MAX_DOMAINS)
        n = TLSFRONT_MAX_DOMAINS;
    int reachable = -1; /* not probed */
    const char *why = NULL;
    for (size_t i = 0; i < n; i++) {
        if (st[i].refreshes + st[i].failures == 0)
            continue; /* not probed yet */
        if (!st[i].last_error[0]) {
            reachable = 1;
        } else if (reachable < 0) {
            reachable = 0;
            why = st[i].last_error;
        }
    }
    if (reachable == 1)
        why = NULL;
    struct stats s;
    server_stats(a->srv, &s);
    int rc = tg__buf_printf(b, ",\"fronting\":{\"reachable\":%s,\"error\":",
                            reachable < 0 ? "null" : reachable ? "true" : "false");
    if (rc == 0)
        rc = why ? json_put_str(b, why, strlen(why)) : tg__buf_puts(b, "null");
    if (rc == 0)
        rc = tg__buf_printf(b, ",\"domains_probed\":%zu,\"connect_failures\":%" PRIu64 "}", n,
                            (uint64_t)s.end_front_fail);
    return rc;
}

static int h_ready(struct api *a, struct out *o)
{
    bool draining = server_draining(a->srv);
    struct gen *g = server_gen(a->srv);
    int rc = data_begin(o, draining ? 503 : 200);
    if (rc == 0)
        rc = tg__buf_printf(
            &o->b, "{\"ready\":%s,\"draining\":%s,\"listeners\":%zu,\"generation\":%" PRIu64,
            draining ? "false" : "true", draining ? "true" : "false",
            server_config(a->srv)->nlisten, g->seq);
    if (rc == 0)
        rc = put_fronting(&o->b, a);
    if (rc == 0)
        rc = tg__buf_putc(&o->b, '}');
    gen_unref(g);
    if (draining) { /* a 503 still carries the envelope, with ok false */
        tg__buf_reset(&o->b);
        err_out(o, 503, "not_ready", "draining: new connections are refused");
    }
    return rc;
}

/* ---- routing ---- */

static bool method_is(const char *m, const char *want)
{
    return strcmp(m, want) == 0;
}

static void token_reread(struct api *a);

static int route(struct api *a, struct MHD_Connection *c, const char *url, const char *m,
                 const struct req *r, struct out *o)
{
    bool get = method_is(m, "GET") || method_is(m, "HEAD"), post = method_is(m, "POST");
    if (strcmp(url, "/v1/health") == 0) {
        if (!get)
            return o->allow = "GET, HEAD", err_out(o, 405, "method_not_allowed", "use GET");
        int rc = data_begin(o, 200);
        return rc ? rc : tg__buf_puts(&o->b, "{\"status\":\"alive\"}");
    }
    if (strcmp(url, "/v1/ready") == 0)
        return get ? h_ready(a, o)
                   : (o->allow = "GET, HEAD", err_out(o, 405, "method_not_allowed", "use GET"));
    if (strcmp(url, "/v1/info") == 0)
        return get ? h_info(a, o)
                   : (o->allow = "GET, HEAD", err_out(o, 405, "method_not_allowed", "use GET"));
    if (strcmp(url, "/v1/reload") == 0 || strcmp(url, "/v1/drain") == 0) {
        if (!post)
            return o->allow = "POST", err_out(o, 405, "method_not_allowed", "use POST");
        if (url[4] == 'd') {
            server_drain(a->srv);
            int rc = data_begin(o, 202);
            return rc ? rc : tg__buf_puts(&o->b, "{\"draining\":true}");
        }
        char err[CONFIG_ERR_MAX];
        if (server_reload_file_locked(a->srv, config_path(a), "api", err, sizeof err) != 0)
            return err_out(o, 409, "config_invalid", "reload refused: %s", err);
        token_reread(a);
        struct apistore fresh;
        if (apistore_load(&fresh, server_config(a->srv)->api.state_file, err, sizeof err) == 0) {
            apistore_cleanup(&a->st);
            a->st = fresh;
        }
        struct gen *g = server_gen(a->srv);
        int rc = data_begin(o, 200);
        if (rc == 0)
            rc = tg__buf_printf(&o->b, "{\"generation\":%" PRIu64 ",\"secrets\":%zu}", g->seq,
                                g->cfg->nsecrets);
        gen_unref(g);
        return rc;
    }
    struct json_doc doc = {0};
    if (strcmp(url, "/v1/secrets") == 0) {
        if (get)
            return h_list(a, c, o);
        if (!post)
            return o->allow = "GET, HEAD, POST",
                   err_out(o, 405, "method_not_allowed", "use GET or POST");
        if (parse_body(r, &doc, o) != 0)
            return -1;
        int rc = h_create(a, doc.root, o);
        json_doc_free(&doc);
        return rc;
    }
    char label[CONFIG_LABEL_MAX + 1];
    const char *act = NULL;
    if (!apiread_secret_path(url, label, sizeof label, &act))
        return err_out(o, 404, "not_found", "no such endpoint (see /v1/openapi.json)");
    if (act[0] == '\0') {
        bool patch = method_is(m, "PATCH"), del = method_is(m, "DELETE");
        if (get)
            return h_get(a, c, label, false, o);
        if (!patch && !del)
            return o->allow = "GET, HEAD, PATCH, DELETE",
                   err_out(o, 405, "method_not_allowed", "use GET, PATCH or DELETE");
        if (parse_body(r, &doc, o) != 0)
            return -1;
        int rc = h_change(a, c, label, patch ? OP_PATCH : OP_DELETE, doc.root, o);
        json_doc_free(&doc);
        return rc;
    }
    static const struct {
        const char *name;
        bool post;
        int op; /* enum op, or 10 reset-quota, 20 stats, 30.. link/svg/png */
    } acts[] = {
        {"disable", true, OP_DISABLE}, {"enable", true, OP_ENABLE}, {"rotate", true, OP_ROTATE},
        {"reset-quota", true, 10},     {"stats", false, 20},        {"link", false, 30},
        {"qr.svg", false, 31},         {"qr.png", false, 32},
    };
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        if (strcmp(act, acts[i].name) != 0)
            continue;
        if (acts[i].post ? !post : !get)
            return o->allow = acts[i].post ? "POST" : "GET, HEAD",
                   err_out(o, 405, "method_not_allowed", "use %s", acts[i].post ? "POST" : "GET");
        if (acts[i].op < 10)
            return h_change(a, c, label, (enum op)acts[i].op, NULL, o);
        if (acts[i].op == 10)
            return h_reset_quota(a, label, o);
        if (acts[i].op == 20)
            return h_get(a, c, label, true, o);
        return h_link(a, label, acts[i].op - 30, o);
    }
    return err_out(o, 404, "not_found", "no such endpoint (see /v1/openapi.json)");
}

/* The first call for a request: access checks, size. 0 = go on, else an answer in o. */
static int gate(struct api *a, struct MHD_Connection *c, const char *url, struct out *o)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    if (!sa || !netset_has(a->allow, sa))
        return err_out(o, 403, "forbidden", "this address is not in [api] allow");
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    if (cl && strtoull(cl, NULL, 10) > server_config(a->srv)->api.max_body)
        return err_out(o, 413, "too_large", "the body is over [api] max-body (%u bytes)",
                       server_config(a->srv)->api.max_body);
    if (strncmp(url, "/v1/", 4) != 0 || !a->has_token || strcmp(url, "/v1/health") == 0 ||
        strcmp(url, "/v1/ready") == 0 || strcmp(url, "/v1/openapi.json") == 0)
        return 0;
    uint8_t addr[16];
    addr16(sa, addr);
    int64_t minute = tg__wall_s() / 60;
    struct fail_slot *f = fail_slot(a, addr, minute, false);
    uint32_t limit = server_config(a->srv)->api.auth_failures;
    if (f && f->count >= limit)
        return err_out(o, 429, "too_many_failures",
                       "too many failed logins from this address; try again next minute");
    if (token_ok(a, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization")))
        return 0;
    f = fail_slot(a, addr, minute, true);
    f->count++;
    char who[INET6_ADDRSTRLEN + 8];
    struct sockaddr_storage ss;
    memcpy(&ss, sa,
           sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
    value_format_addr(&ss, who, sizeof who);
    tg__log(NULL, TG__LOG_WARN, "api: %s: missing or wrong bearer token (%u this minute)", who,
            f->count);
    return err_out(o, 401, "unauthorized", "missing or wrong bearer token");
}

static int serve_static(const char *url, const char *method, struct out *o);

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls)
{
    (void)version;
    struct api *a = cls;
    struct req *r = *con_cls;
    struct out o;
    memset(&o, 0, sizeof o);
    tg__buf_init(&o.b, OUT_MAX);
    if (!r) {
        if (!(r = tg__calloc(1, sizeof *r)))
            return MHD_NO;
        tg__buf_init(&r->body, server_config(a->srv)->api.max_body);
        *con_cls = r;
        server_reload_lock(a->srv);
        int rc = gate(a, c, url, &o);
        server_reload_unlock(a->srv);
        if (rc == 0) {
            tg__buf_cleanup(&o.b);
            return MHD_YES;
        }
        r->done = true;
        return send_out(a, c, &o);
    }
    if (r->done) {
        *upload_size = 0;
        tg__buf_cleanup(&o.b);
        return MHD_YES;
    }
    if (*upload_size) {
        if (!r->too_big && tg__buf_append(&r->body, upload_data, *upload_size) != 0)
            r->too_big = true;
        *upload_size = 0;
        tg__buf_cleanup(&o.b);
        return MHD_YES;
    }
    if (r->too_big)
        err_out(&o, 413, "too_large", "the body is over [api] max-body (%u bytes)",
                server_config(a->srv)->api.max_body);
    else if (strncmp(url, "/v1/", 4) != 0)
        serve_static(url, method, &o);
    else if (strcmp(url, "/v1/openapi.json") == 0)
        serve_static(url + 3, method, &o); /* the embedded web/openapi.json */
    else {
        bool write = strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0;
        out_take(a, &o);
        server_reload_lock(a->srv);
        int rc = 0;
        for (int t = 0; t < WRITE_TRIES; t++) {
            if (a->fleet && write) /* change the fleet's latest, not what this one last saw */
                (void)sync_locked(a, &a->wl, apifleet_revision(&a->wl));
            o.retry = false;
            tg__buf_reset(&o.b);
            o.etag[0] = '\0';
            rc = route(a, c, url, method, r, &o);
            if (!o.retry)
                break;
        }
        server_reload_unlock(a->srv);
        if (rc != 0 && rc != ANSWERED)
            err_out(&o, 500, "internal", "out of memory");
    }
    return send_out(a, c, &o);
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls,
                    enum MHD_RequestTerminationCode why)
{
    (void)cls;
    (void)c;
    (void)why;
    struct req *r = *con_cls;
    if (!r)
        return;
    if (r->body.data)
        crypto_wipe(r->body.data, r->body.len);
    tg__buf_cleanup(&r->body);
    tg__free(r);
    *con_cls = NULL;
}

/* ---- the panel (static) ---- */

/* The panel's files, embedded at build time (CMakeLists.txt, src/emulator/embed.cmake). */
struct api_asset {
    const char *path, *ctype;
    const unsigned char *data;
    size_t len;
};
extern const struct api_asset api_web_assets[];
extern const size_t api_web_asset_count;

/* GET / and the panel's files. Public (the token is asked for by the page and kept in its
   session storage); a strict CSP: nothing from elsewhere, no inline script. */
static int serve_static(const char *url, const char *method, struct out *o)
{
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return o->allow = "GET, HEAD", err_out(o, 405, "method_not_allowed", "use GET");
    const char *name = strcmp(url, "/") == 0 ? "index.html" : url + 1;
    for (size_t i = 0; i < api_web_asset_count; i++)
        if (strcmp(api_web_assets[i].path, name) == 0) {
            o->raw = true;
            o->status = 200;
            o->type = api_web_assets[i].ctype;
            o->csp = true;
            return tg__buf_append(&o->b, api_web_assets[i].data, api_web_assets[i].len);
        }
    return err_out(o, 404, "not_found", "no such page");
}

/* ---- QR drawing ---- */

#include <qrencode.h>

static QRcode *encode(const char *text)
{
    return QRcode_encodeString(text, 0, QR_ECLEVEL_M, QR_MODE_8, 1);
}

static int qr_svg(tg__buf *b, const char *text)
{
    QRcode *qr = encode(text);
    if (!qr)
        return -EINVAL;
    int side = qr->width + 2 * LINKS_QR_QUIET;
    int rc = tg__buf_printf(b,
                            "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %d\" "
                            "shape-rendering=\"crispEdges\"><rect width=\"%d\" height=\"%d\" "
                            "fill=\"#fff\"/><path fill=\"#000\" d=\"",
                            side, side, side, side);
    for (int y = 0; y < qr->width && rc == 0; y++)
        for (int x = 0; x < qr->width && rc == 0; x++)
            if (qr->data[y * qr->width + x] & 1)
                rc = tg__buf_printf(b, "M%d %dh1v1h-1z", x + LINKS_QR_QUIET, y + LINKS_QR_QUIET);
    if (rc == 0)
        rc = tg__buf_puts(b, "\"/></svg>\n");
    QRcode_free(qr);
    return rc;
}

static uint32_t crc32_of(const uint8_t *p, size_t n, uint32_t crc)
{
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1)));
    }
    return ~crc;
}

static int put_be32(tg__buf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    return tg__buf_append(b, x, 4);
}

static int png_chunk(tg__buf *b, const char *type, const uint8_t *p, size_t n)
{
    int rc = put_be32(b, (uint32_t)n);
    size_t at = b->len;
    if (rc == 0)
        rc = tg__buf_append(b, type, 4);
    if (rc == 0 && n)
        rc = tg__buf_append(b, p, n);
    if (rc == 0)
        rc = put_be32(b, crc32_of((const uint8_t *)b->data + at, n + 4, 0));
    return rc;
}

/* A grayscale PNG, SCALE pixels per module, its image data in stored (uncompressed)
   deflate blocks: no zlib needed for a few kilobytes. */
static int qr_png(tg__buf *b, const char *text)
{
    enum { SCALE = 8 };
    QRcode *qr = encode(text);
    if (!qr)
        return -EINVAL;
    int side = qr->width + 2 * LINKS_QR_QUIET;
    size_t w = (size_t)side * SCALE, row = w + 1, raw_len = row * w;
    uint8_t *raw = tg__malloc(raw_len);
    tg__buf z;
    tg__buf_init(&z, raw_len + raw_len / 65535 * 5 + 64);
    int rc = raw ? 0 : -ENOMEM;
    for (size_t y = 0; rc == 0 && y < w; y++) {
        raw[y * row] = 0; /* filter: none */
        for (size_t x = 0; x < w; x++) {
            int mx = (int)(x / SCALE) - LINKS_QR_QUIET, my = (int)(y / SCALE) - LINKS_QR_QUIET;
            bool dark = mx >= 0 && my >= 0 && mx < qr->width && my < qr->width &&
                        (qr->data[my * qr->width + mx] & 1);
            raw[y * row + 1 + x] = dark ? 0 : 255;
        }
    }
    static const uint8_t zhdr[2] = {0x78, 0x01};
    if (rc == 0)
        rc = tg__buf_append(&z, zhdr, 2);
    uint32_t s1 = 1, s2 = 0;
    for (size_t i = 0; rc == 0 && i < raw_len; i++) {
        s1 = (s1 + raw[i]) % 65521;
        s2 = (s2 + s1) % 65521;
    }
    for (size_t at = 0; rc == 0 && at < raw_len;) {
        size_t n = raw_len - at > 65535 ? 65535 : raw_len - at;
        uint8_t h[5] = {at + n == raw_len, (uint8_t)n, (uint8_t)(n >> 8), (uint8_t)~n,
                        (uint8_t)(~n >> 8)};
        rc = tg__buf_append(&z, h, 5);
        if (rc == 0)
            rc = tg__buf_append(&z, raw + at, n);
        at += n;
    }
    if (rc == 0)
        rc = put_be32(&z, s2 << 16 | s1);
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    uint8_t ihdr[13] = {(uint8_t)(w >> 24),
                        (uint8_t)(w >> 16),
                        (uint8_t)(w >> 8),
                        (uint8_t)w,
                        (uint8_t)(w >> 24),
                        (uint8_t)(w >> 16),
                        (uint8_t)(w >> 8),
                        (uint8_t)w,
                        8,
                        0,
                        0,
                        0,
                        0};
    if (rc == 0)
        rc = tg__buf_append(b, sig, 8);
    if (rc == 0)
        rc = png_chunk(b, "IHDR", ihdr, sizeof ihdr);
    if (rc == 0)
        rc = png_chunk(b, "IDAT", (const uint8_t *)z.data, z.len);
    if (rc == 0)
        rc = png_chunk(b, "IEND", NULL, 0);
    tg__free(raw);
    tg__buf_cleanup(&z);
    QRcode_free(qr);
    return rc;
}

/* ---- lifecycle ---- */

__attribute__((format(printf, 2, 0))) static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[256];
    vsnprintf(msg, sizeof msg, fmt, ap);
    msg[strcspn(msg, "\n")] = '\0';
    tg__log(NULL, TG__LOG_DEBUG, "[api]: %s", msg);
}

/* The token file: a regular file only its owner can read, 1..TOKEN_MAX-1 bytes of token
   (a trailing newline is dropped). Keeps only its HMAC. */
static int token_load(struct api *a, const char *path)
{
    char *tok, why[CONFIG_ERR_MAX];
    size_t len;
    /* room past the token for a line ending and stray blanks; a longer file is refused
       whole rather than read as its first TOKEN_MAX bytes */
    int rc = tg__read_file(path, TOKEN_MAX + 16, TG__READ_NOFOLLOW | TG__READ_PRIVATE, &tok,
                           &len, NULL, why, sizeof why);
    if (rc != 0) {
        tg__log(NULL, TG__LOG_ERROR, "[api] token-file %s%s", why,
                rc == -EPERM ? " (chmod 600 it)" : "");
        return rc;
    }
    size_t n = len;
    while (n > 0 && (tok[n - 1] == '\n' || tok[n - 1] == '\r' || tok[n - 1] == ' '))
        n--;
    bool ok = n > 0 && n < TOKEN_MAX;
    for (size_t i = 0; ok && i < n; i++)
        ok = tok[i] > ' ' && tok[i] < 0x7f;
    if (!ok) {
        crypto_wipe(tok, len);
        tg__free(tok);
        tg__log(NULL, TG__LOG_ERROR,
                "[api] token-file %s: expected one line of 1..%d printable characters", path,
                TOKEN_MAX - 1);
        return -EINVAL;
    }
    struct crypto_part p = {tok, n};
    uint8_t key[32], mac[32]; /* the token in use changes only once the new one is read */
    rc = crypto_random(key, sizeof key) == 0 &&
                 crypto_hmac_sha256(key, sizeof key, &p, 1, mac) == 0
             ? 0
             : -EIO;
    crypto_wipe(tok, len);
    tg__free(tok);
    if (rc == 0) {
        memcpy(a->mac_key, key, sizeof key);
        memcpy(a->token_mac, mac, sizeof mac);
        a->has_token = true;
    }
    crypto_wipe(key, sizeof key);
    crypto_wipe(mac, sizeof mac);
    return rc;
}

int api_start(struct server *s, struct api **out)
{
    const struct config *cfg = server_config(s);
    *out = NULL;
    struct api *a = tg__calloc(1, sizeof *a);
    if (!a)
        return -ENOMEM;
    a->srv = s;
    apistore_init(&a->st);
    pthread_mutex_init(&a->stop_mu, NULL);
    pthread_cond_init(&a->stop_cv, NULL);
    pthread_mutex_init(&a->out_mu, NULL);
    for (size_t i = 0; i < OUT_SLOTS; i++) {
        a->outs[i].a = a;
        tg__buf_init(&a->outs[i].b, OUT_MAX);
    }
    apifleet_link_init(&a->wl, cfg);
    char err[CONFIG_ERR_MAX];
    int rc = 0;
    if (cfg->api.token_file[0])
        rc = token_load(a, cfg->api.token_file);
    if (rc == 0 && !(a->allow = netset_new()))
        rc = -ENOMEM;
    if (rc == 0 && (netset_parse(a->allow, "[api] allow", cfg->api.allow, strlen(cfg->api.allow),
                                 err, sizeof err) != 0 ||
                    netset_finish(a->allow) != 0)) {
        tg__log(NULL, TG__LOG_ERROR, "%s", err);
        rc = -EINVAL;
    }
    if (rc == 0 && (rc = apistore_load(&a->st, cfg->api.state_file, err, sizeof err)) != 0)
        tg__log(NULL, TG__LOG_ERROR, "[api] %s", err);
    uint8_t id[8];
    if (rc == 0 && cfg->fleet.enabled) {
        a->fleet = true;
        rc = crypto_random(id, sizeof id) == 0 ? 0 : -EIO;
        tg__hex_encode(a->inst, id, sizeof id);
        if (rc == 0 && pthread_create(&a->sync_th, NULL, sync_main, a) != 0)
            rc = -EAGAIN;
        a->sync_started = rc == 0;
    }
    if (rc == 0) {
        struct tg__httpd_opts ho = {
            .addr = (const struct sockaddr *)&cfg->api.bind.addr,
            .handler = on_request,
            .handler_cls = a,
            .completed = on_done,
            .completed_cls = a,
            .max_connections = API_CONNS,
            .per_ip = API_CONNS_PER_IP,
            .idle_timeout_s = API_TIMEOUT_MS / 1000,
            .request_timeout_ms = API_TIMEOUT_MS,
            .memory_limit = (size_t)64 * 1024,
            .log = mhd_log,
        };
        a->httpd = tg__httpd_start(&ho);
        if (!a->httpd) {
            rc = -errno;
            char where[CONFIG_HOST_MAX + 8];
            value_format_addr(&cfg->api.bind.addr, where, sizeof where);
            tg__log(NULL, TG__LOG_ERROR, "[api] bind-to %s: %s", where, strerror(-rc));
        }
    }
    if (rc != 0) {
        api_stop(a);
        return rc;
    }
    a->port = tg__httpd_port(a->httpd) ? tg__httpd_port(a->httpd) : cfg->api.bind.port;
    struct sockaddr_storage at = cfg->api.bind.addr;
    char url[CONFIG_HOST_MAX + 8];
    value_set_port(&at, a->port);
    value_format_addr(&at, url, sizeof url);
    tg__log(NULL, TG__LOG_INFO, "[api] serving http://%s/ (%s)", url,
            a->has_token ? "bearer token required" : "no token, loopback only");
    *out = a;
    return 0;
}

uint16_t api_port(const struct api *a)
{
    return a ? a->port : 0;
}

/* A reload (SIGHUP, POST /v1/reload) reads the token file again: a new token replaces the
   one in use; a file that does not read right leaves it (token_load said why). */
static void token_reread(struct api *a)
{
    const char *tf = server_config(a->srv)->api.token_file;
    if (a->has_token && tf[0] && token_load(a, tf) != 0)
        tg__log(NULL, TG__LOG_ERROR, "[api] token-file %s: not read again; the token in use stays",
                tf);
}

void api_note_reload(struct api *a, bool ok, const char *origin, const char *err)
{
    if (!a)
        return;
    struct reload_rec *r = &a->reloads[a->nreloads++ % RELOADS_KEPT];
    r->at = tg__wall_s();
    r->ok = ok;
    tg__strlcpy(r->origin, origin, sizeof r->origin);
    tg__strlcpy(r->error, err ? err : "", sizeof r->error);
    if (ok && strcmp(origin, "SIGHUP") == 0)
        token_reread(a);
    if (ok && strcmp(origin, "api") != 0) { /* the state file may have been edited too */
        struct apistore fresh;
        char e2[CONFIG_ERR_MAX];
        if (apistore_load(&fresh, server_config(a->srv)->api.state_file, e2, sizeof e2) == 0) {
            apistore_cleanup(&a->st);
            a->st = fresh;
        }
    }
}

void api_stop(struct api *a)
{
    if (!a)
        return;
    if (a->sync_started) {
        pthread_mutex_lock(&a->stop_mu);
        a->stop = true;
        pthread_cond_signal(&a->stop_cv);
        pthread_mutex_unlock(&a->stop_mu);
        pthread_join(a->sync_th, NULL);
    }
    tg__httpd_stop(a->httpd); /* every answer sent or dropped: the slots are free */
    for (size_t i = 0; i < OUT_SLOTS; i++)
        tg__buf_cleanup(&a->outs[i].b);
    pthread_mutex_destroy(&a->out_mu);
    tg__free(a->gl);
    tg__free(a->qr);
    apifleet_link_cleanup(&a->wl);
    pthread_mutex_destroy(&a->stop_mu);
    pthread_cond_destroy(&a->stop_cv);
    netset_free(a->allow);
    apistore_cleanup(&a->st);
    crypto_wipe(a->mac_key, sizeof a->mac_key);
    crypto_wipe(a->token_mac, sizeof a->token_mac);
    tg__free(a);
}
