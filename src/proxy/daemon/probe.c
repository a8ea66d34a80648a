/* probe: `tgproxy probe` (see probe.h). */
#include "proxy/daemon/probe.h"
#include "proxy/daemon/cli.h"

#include "core/alloc.h"
#include "core/buf.h"
#include "core/str.h"
#include "proxy/services/probeconn.h"
#include "proxy/services/tlsscout.h"
#include "proxy/wire/crypto.h"
#include "proxy/wire/json.h"
#include "proxy/wire/probekind.h"
#include "proxy/wire/probeshape.h"
#include "proxy/wire/tlsflight.h"
#include "proxy/wire/value.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <string.h>
#include <sysexits.h>
#include <time.h>

#define ANSWER_KEEP 8192 /* bytes of each answer kept for the comparison */

struct peer {
    char text[VALUE_HOST_MAX + 16]; /* as given (or derived), for the report */
    char host[VALUE_HOST_MAX];
    struct sockaddr_storage addr;
    socklen_t len;
};

struct side {
    uint8_t buf[ANSWER_KEEP];
    struct probeconn_res res;
    int rc;
};

struct row {
    const struct probekind *k;
    const char *skipped; /* why it did not run (static), or NULL */
    struct side front, proxy;
    unsigned diff;
};

struct run {
    const struct probe_opts *o;
    FILE *out, *err;
    struct peer proxy, front;
    const char *sni;
    int wait_ms;
    long now_ms; /* the bound of "at once" */
    size_t nrows;
    struct row *rows;
    uint8_t *bytes; /* the probe being sent */
    /* handshakes */
    int hs_tried, hs_genuine;
    size_t nflight_site, nflight_proxy;
    struct tlsflight *site_flights, *proxy_flights;
    struct probeshape_row shape[PROBESHAPE_ROWS];
    size_t shape_diffs;
    bool shaped;
};

/* HOST:PORT (a name is resolved, the first address taken). 0 or an exit code. */
static int resolve(struct run *r, const char *what, const char *text, struct peer *p)
{
    struct value_hostport hp;
    char why[256];
    tg__strlcpy(p->text, text, sizeof p->text);
    if (value_hostport_parse(text, strlen(text), &hp, why, sizeof why) != 0)
        return cli_fail(r->err, EX_USAGE, "probe: %s: %s", what, why);
    tg__strlcpy(p->host, hp.host, sizeof p->host);
    if (hp.resolved) {
        p->addr = hp.addr;
        p->len = hp.addr_len;
        return 0;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    char port[8];
    snprintf(port, sizeof port, "%u", (unsigned)hp.port);
    int rc = getaddrinfo(hp.host, port, &hints, &res);
    if (rc != 0 || !res)
        return cli_fail(r->err, EX_UNAVAILABLE, "probe: %s %s: cannot resolve: %s", what, hp.host,
                        rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
    memcpy(&p->addr, res->ai_addr, res->ai_addrlen);
    p->len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

/* ---- the probes ---- */

/* One probe to the site, then the same bytes to the proxy: one connection at a time, as a
   careful prober makes them, so a front that serves one client at a time (openssl s_server)
   answers the proxy's fronted connection as promptly as the direct one. */
static int probe_pair(struct run *r, struct row *row, const struct probeconn_req *q)
{
    struct side *sides[2] = {&row->front, &row->proxy};
    const struct peer *to[2] = {&r->front, &r->proxy};
    const bool pp[2] = {r->o->front_proxy_v2, r->o->proxy_proxy_v2};
    for (int i = 0; i < 2; i++) {
        struct probeconn_req qi = *q;
        qi.proxy_v2 = pp[i];
        sides[i]->res.buf = sides[i]->buf;
        sides[i]->res.cap = sizeof sides[i]->buf;
        sides[i]->rc =
            probeconn_run((const struct sockaddr *)&to[i]->addr, to[i]->len, &qi, &sides[i]->res);
        if (sides[i]->rc < 0)
            return cli_fail(r->err, EX_UNAVAILABLE, "probe: cannot connect to the %s %s: %s",
                            i ? "proxy" : "front", to[i]->text, strerror(-sides[i]->rc));
    }
    return 0;
}

/* A valid hello sent to the proxy once, so the probe that follows is a replay; false when
   the proxy did not answer it as FakeTLS (then the replay would prove nothing). */
static bool prime(struct run *r, const uint8_t *b, size_t n)
{
    uint8_t *rec = tg__malloc(TLSFLIGHT_RECORDING_MAX);
    if (!rec)
        return false;
    struct tlsscout_opts so = {.timeout_ms = r->wait_ms, .proxy_v2 = r->o->proxy_proxy_v2};
    struct tlsflight f;
    char why[256];
    size_t rn = 0;
    bool ok = tlsscout_exchange((const struct sockaddr *)&r->proxy.addr, r->proxy.len, b, n,
                                "the proxy", &so, rec, &rn, &f, why, sizeof why) == 0 &&
              probekind_answer_genuine(b, n, rec, rn, r->o->secret->key);
    tg__free(rec);
    return ok;
}

static int run_probes(struct run *r)
{
    const uint8_t *key = r->o->secret ? r->o->secret->key : NULL;
    r->nrows = probekind_count();
    r->rows = tg__calloc(r->nrows, sizeof *r->rows);
    r->bytes = tg__malloc(PROBEKIND_BYTES_MAX);
    if (!r->rows || !r->bytes)
        return cli_fail(r->err, EX_OSERR, "probe: out of memory");
    uint8_t *bytes = r->bytes;
    long rtt = 0;
    for (size_t i = 0; i < r->nrows; i++) {
        struct row *row = &r->rows[i];
        row->k = probekind_get(i);
        uint8_t rnd[TLSFLIGHT_HELLO_RND];
        if (crypto_random(rnd, sizeof rnd) != 0)
            return cli_fail(r->err, EX_OSERR, "probe: no random bytes");
        struct probekind_ctx c = {r->sni, key, (int64_t)time(NULL), rnd};
        size_t n = probekind_bytes(i, &c, bytes, PROBEKIND_BYTES_MAX);
        if (n == (size_t)-1) {
            row->skipped = key ? "cannot be built" : "needs the secret";
            continue;
        }
        if ((row->k->flags & PROBEKIND_REPLAY) && !prime(r, bytes, n)) {
            row->skipped = "the proxy did not accept the secret";
            continue;
        }
        struct probeconn_req q = {
            .bytes = bytes,
            .n = n,
            .shut_wr = row->k->shut_wr,
            .after_eof = row->k->after_eof,
            .after_eof_n = row->k->after_eof ? strlen(row->k->after_eof) : 0,
            .wait_ms = r->wait_ms,
        };
        int rc = probe_pair(r, row, &q);
        if (rc != 0)
            return rc;
        long c1 = row->front.res.connect_ms, c2 = row->proxy.res.connect_ms;
        rtt = c1 > rtt ? c1 : rtt;
        rtt = c2 > rtt ? c2 : rtt;
    }
    /* "at once": within half a second plus a few round trips of the slower peer (the
       proxy adds its own connect to the site) */
    r->now_ms = 500 + 4 * rtt;
    for (size_t i = 0; i < r->nrows; i++)
        if (!r->rows[i].skipped)
            r->rows[i].diff = probekind_compare(r->rows[i].k, &r->rows[i].front.res.obs,
                                                &r->rows[i].proxy.res.obs, r->now_ms);
    return 0;
}

/* ---- FakeTLS handshakes ---- */

static int run_handshakes(struct run *r)
{
    int n = r->o->handshakes > 0 ? r->o->handshakes : PROBE_HANDSHAKES_DEFAULT;
    r->site_flights = tg__calloc((size_t)n, sizeof *r->site_flights);
    r->proxy_flights = tg__calloc((size_t)n, sizeof *r->proxy_flights);
    uint8_t *rec = tg__malloc(TLSFLIGHT_RECORDING_MAX);
    if (!r->site_flights || !r->proxy_flights || !rec) {
        tg__free(rec);
        return cli_fail(r->err, EX_OSERR, "probe: out of memory");
    }
    int code = 0;
    struct tlsscout_opts so = {.timeout_ms = r->wait_ms, .proxy_v2 = r->o->proxy_proxy_v2};
    struct tlsscout_opts fo = {.timeout_ms = r->wait_ms, .proxy_v2 = r->o->front_proxy_v2};
    for (int i = 0; i < n && code == 0; i++) {
        uint8_t rnd[TLSFLIGHT_HELLO_RND], hello[TLSFLIGHT_HELLO_LEN];
        char why[256];
        size_t rn = 0;
        if (crypto_random(rnd, sizeof rnd) != 0) {
            code = cli_fail(r->err, EX_OSERR, "probe: no random bytes");
            break;
        }
        /* to the proxy: signed with the secret, as a Telegram client signs it */
        size_t hl = probekind_signed_hello(hello, sizeof hello, r->sni, r->o->secret->key,
                                           (int64_t)time(NULL), rnd);
        if (hl == 0) {
            code =
                cli_fail(r->err, EX_SOFTWARE, "probe: cannot build a ClientHello for %s", r->sni);
            break;
        }
        r->hs_tried++;
        struct tlsflight f;
        int rc = tlsscout_exchange((const struct sockaddr *)&r->proxy.addr, r->proxy.len, hello, hl,
                                   "the proxy", &so, rec, &rn, &f, why, sizeof why);
        if (rc == 0 && probekind_answer_genuine(hello, hl, rec, rn, r->o->secret->key))
            r->proxy_flights[r->nflight_proxy++] = f, r->hs_genuine++;
        else if (rc < 0 && rn == 0 && (rc == -ECONNREFUSED || rc == -ETIMEDOUT))
            code = cli_fail(r->err, EX_UNAVAILABLE, "probe: %s", why);
        /* to the site: the same ClientHello shape, unsigned */
        if (code == 0 && crypto_random(rnd, sizeof rnd) == 0) {
            hl = tlsflight_client_hello(hello, sizeof hello, r->sni, rnd);
            rc = tlsscout_exchange((const struct sockaddr *)&r->front.addr, r->front.len, hello, hl,
                                   "the front", &fo, rec, &rn, &f, why, sizeof why);
            if (rc == 0)
                r->site_flights[r->nflight_site++] = f;
            else
                code = cli_fail(r->err, rn ? 1 : EX_UNAVAILABLE, "probe: %s", why);
        }
        crypto_wipe(hello, sizeof hello);
    }
    tg__free(rec);
    if (code == 0 && r->nflight_site && r->nflight_proxy) {
        r->shape_diffs = probeshape_compare(r->site_flights, r->nflight_site, r->proxy_flights,
                                            r->nflight_proxy, r->shape);
        r->shaped = true;
    }
    return code;
}

/* ---- the report ---- */

static const char *const diff_names[] = {"bytes", "close kind", "close time", "first-byte time",
                                         "reset after close"};

static void diff_text(unsigned diff, char *out, size_t cap)
{
    size_t w = 0;
    out[0] = '\0';
    for (unsigned b = 0; b < 5; b++)
        if (diff & (1u << b))
            w += (size_t)snprintf(out + w, w < cap ? cap - w : 0, "%s%s", w ? ", " : "",
                                  diff_names[b]);
}

static void when_text(const struct run *r, const struct probekind_obs *o, char *out, size_t cap)
{
    char shape[PROBEKIND_SHAPE_MAX];
    probekind_shape(o->bytes, o->n, true, shape, sizeof shape);
    if (o->end == PROBEKIND_OPEN) {
        snprintf(out, cap, "%s; open after %.1f s", shape, (double)o->end_ms / 1000);
        return;
    }
    const char *cls = probekind_tclass(o->end_ms, r->now_ms) == PROBEKIND_T_NOW ? "at once" : NULL;
    if (cls)
        snprintf(out, cap, "%s; %s %s%s", shape, probekind_end_name(o->end), cls,
                 o->reset_after_eof ? ", RST to more" : "");
    else
        snprintf(out, cap, "%s; %s after %.1f s%s", shape, probekind_end_name(o->end),
                 (double)o->end_ms / 1000, o->reset_after_eof ? ", RST to more" : "");
}

static size_t giveaways(const struct run *r)
{
    size_t n = r->hs_tried && !r->hs_genuine;
    for (size_t i = 0; i < r->nrows; i++)
        n += !r->rows[i].skipped && r->rows[i].diff;
    if (r->shaped)
        for (size_t i = 0; i < PROBESHAPE_ROWS; i++)
            n += r->shape[i].verdict == PROBESHAPE_DIFF ||
                 (r->o->strict && r->shape[i].verdict == PROBESHAPE_LIMIT);
    return n;
}

static void print_text(const struct run *r)
{
    FILE *f = r->out;
    const char *pp = " (PROXY v2 header)";
    fprintf(f, "tgproxy probe: proxy %s%s, front %s%s, SNI %s, wait %.1f s\n\n", r->proxy.text,
            r->o->proxy_proxy_v2 ? pp : "", r->front.text, r->o->front_proxy_v2 ? pp : "", r->sni,
            (double)r->wait_ms / 1000);
    fprintf(f, "%-8s %-30s %s\n", "", "probe", "answer (front | proxy when they differ)");
    for (size_t i = 0; i < r->nrows; i++) {
        const struct row *row = &r->rows[i];
        char a[PROBEKIND_SHAPE_MAX + 64], b[PROBEKIND_SHAPE_MAX + 64], d[96];
        if (row->skipped) {
            fprintf(f, "%-8s %-30s (%s)\n", "skipped", row->k->name, row->skipped);
            continue;
        }
        when_text(r, &row->front.res.obs, a, sizeof a);
        if (!row->diff) {
            fprintf(f, "%-8s %-30s %s\n", "same", row->k->name, a);
            continue;
        }
        when_text(r, &row->proxy.res.obs, b, sizeof b);
        diff_text(row->diff, d, sizeof d);
        fprintf(f, "%-8s %-30s %s\n", "DIFFERS", row->k->name, d);
        fprintf(f, "%-8s %-30s front: %s\n", "", "", a);
        fprintf(f, "%-8s %-30s proxy: %s\n", "", "", b);
    }
    if (r->hs_tried) {
        fprintf(f,
                "\nFakeTLS handshakes: %d to the proxy with the secret (%d accepted), %zu to "
                "the front with the same ClientHello shape\n",
                r->hs_tried, r->hs_genuine, r->nflight_site);
        if (!r->hs_genuine)
            fprintf(f,
                    "%-8s the proxy did not accept the secret: its answers are not signed "
                    "with it (a wrong secret, a clock far off, or another server)\n",
                    "DIFFERS");
    }
    if (r->shaped) {
        fprintf(f, "%-8s %-24s %-30s %s\n", "", "feature", "front", "proxy");
        for (size_t i = 0; i < PROBESHAPE_ROWS; i++) {
            const struct probeshape_row *s = &r->shape[i];
            fprintf(f, "%-8s %-24s %-30s %s\n", probeshape_verdict_name(s->verdict), s->feature,
                    s->site, s->proxy);
        }
        for (size_t i = 0; i < PROBESHAPE_ROWS; i++)
            if (r->shape[i].verdict == PROBESHAPE_LIMIT)
                fprintf(f,
                        "note: %s: the front spreads its encrypted flight over several\n"
                        "      records and Telegram clients take exactly one, so no FakeTLS\n"
                        "      answer can copy it; a front that packs its flight into one\n"
                        "      record removes it%s\n",
                        r->shape[i].feature, r->o->strict ? " (--strict: counted)" : "");
    }
    size_t g = giveaways(r);
    if (g == 0) {
        size_t limits = 0;
        for (size_t i = 0; r->shaped && i < PROBESHAPE_ROWS; i++)
            limits += r->shape[i].verdict == PROBESHAPE_LIMIT;
        fprintf(f, "\nverdict: indistinguishable%s\n",
                limits ? " (but for the limit of FakeTLS noted above)" : "");
        return;
    }
    fprintf(f, "\nverdict: distinguishable (%zu): ", g);
    const char *sep = "";
    if (r->hs_tried && !r->hs_genuine)
        fprintf(f, "%sthe secret was not accepted", sep), sep = "; ";
    for (size_t i = 0; i < r->nrows; i++)
        if (!r->rows[i].skipped && r->rows[i].diff) {
            char d[96];
            diff_text(r->rows[i].diff, d, sizeof d);
            fprintf(f, "%s%s (%s)", sep, r->rows[i].k->name, d);
            sep = "; ";
        }
    for (size_t i = 0; r->shaped && i < PROBESHAPE_ROWS; i++)
        if (r->shape[i].verdict == PROBESHAPE_DIFF ||
            (r->o->strict && r->shape[i].verdict == PROBESHAPE_LIMIT)) {
            fprintf(f, "%shandshake %s (front %s, proxy %s)", sep, r->shape[i].feature,
                    r->shape[i].site, r->shape[i].proxy);
            sep = "; ";
        }
    fputc('\n', f);
}

static void json_str(tg__buf *b, const char *s)
{
    json_put_str(b, s, strlen(s));
}

static void json_obs(tg__buf *b, const struct probekind_obs *o)
{
    char shape[PROBEKIND_SHAPE_MAX];
    probekind_shape(o->bytes, o->n, true, shape, sizeof shape);
    tg__buf_puts(b, "{\"shape\":");
    json_str(b, shape);
    tg__buf_printf(b,
                   ",\"bytes\":%zu,\"end\":\"%s\",\"end_ms\":%ld,\"first_ms\":%ld,"
                   "\"reset_after_close\":%s}",
                   o->total, probekind_end_name(o->end), o->end_ms, o->first_ms,
                   o->reset_after_eof ? "true" : "false");
}

static int print_json(const struct run *r)
{
    tg__buf b;
    tg__buf_init(&b, 4u << 20);
    tg__buf_puts(&b, "{\"proxy\":");
    json_str(&b, r->proxy.text);
    tg__buf_puts(&b, ",\"front\":");
    json_str(&b, r->front.text);
    tg__buf_puts(&b, ",\"sni\":");
    json_str(&b, r->sni);
    tg__buf_printf(&b, ",\"wait_ms\":%d,\"at_once_ms\":%ld,\"probes\":[", r->wait_ms, r->now_ms);
    for (size_t i = 0; i < r->nrows; i++) {
        const struct row *row = &r->rows[i];
        tg__buf_puts(&b, i ? ",{\"name\":" : "{\"name\":");
        json_str(&b, row->k->name);
        if (row->skipped) {
            tg__buf_puts(&b, ",\"skipped\":");
            json_str(&b, row->skipped);
            tg__buf_putc(&b, '}');
            continue;
        }
        tg__buf_printf(&b, ",\"same\":%s,\"differs\":[", row->diff ? "false" : "true");
        for (unsigned k = 0, first = 1; k < 5; k++)
            if (row->diff & (1u << k)) {
                tg__buf_puts(&b, first ? "" : ",");
                json_str(&b, diff_names[k]);
                first = 0;
            }
        tg__buf_puts(&b, "],\"front\":");
        json_obs(&b, &row->front.res.obs);
        tg__buf_puts(&b, ",\"proxy\":");
        json_obs(&b, &row->proxy.res.obs);
        tg__buf_putc(&b, '}');
    }
    tg__buf_puts(&b, "]");
    if (r->hs_tried) {
        tg__buf_printf(&b,
                       ",\"handshakes\":{\"proxy\":%d,\"accepted\":%d,\"front\":%zu,\"shape\":[",
                       r->hs_tried, r->hs_genuine, r->nflight_site);
        for (size_t i = 0; r->shaped && i < PROBESHAPE_ROWS; i++) {
            tg__buf_puts(&b, i ? ",{\"feature\":" : "{\"feature\":");
            json_str(&b, r->shape[i].feature);
            tg__buf_puts(&b, ",\"front\":");
            json_str(&b, r->shape[i].site);
            tg__buf_puts(&b, ",\"proxy\":");
            json_str(&b, r->shape[i].proxy);
            tg__buf_puts(&b, ",\"verdict\":");
            json_str(&b, probeshape_verdict_name(r->shape[i].verdict));
            tg__buf_putc(&b, '}');
        }
        tg__buf_puts(&b, "]}");
    }
    size_t g = giveaways(r);
    tg__buf_printf(&b, ",\"giveaways\":%zu,\"verdict\":\"%s\"}\n", g,
                   g ? "distinguishable" : "indistinguishable");
    size_t len = b.len;
    int rc = len >= 2 && memcmp(tg__buf_cstr(&b) + len - 2, "}\n", 2) == 0 ? 0 : -ENOMEM;
    if (rc == 0)
        fputs(tg__buf_cstr(&b), r->out);
    tg__buf_cleanup(&b);
    return rc;
}

int probe_run(const struct probe_opts *o, FILE *out, FILE *err)
{
    struct run r = {.o = o, .out = out, .err = err};
    r.wait_ms = o->wait_ms > 0 ? o->wait_ms : PROBE_WAIT_MS_DEFAULT;
    int code = resolve(&r, "the proxy", o->proxy, &r.proxy);
    if (code != 0)
        return code;
    char front[VALUE_HOST_MAX + 16];
    if (o->front)
        tg__strlcpy(front, o->front, sizeof front);
    else if (o->secret && o->secret->domain[0])
        snprintf(front, sizeof front, "%s:443", o->secret->domain);
    else
        return cli_fail(r.err, EX_USAGE,
                        "probe: which front? give --front HOST:PORT or an ee secret");
    code = resolve(&r, "the front", front, &r.front);
    if (code != 0)
        return code;
    struct sockaddr_storage ip;
    socklen_t iplen;
    r.sni = o->sni ? o->sni : o->secret && o->secret->domain[0] ? o->secret->domain : r.front.host;
    if (value_parse_ip(r.sni, strlen(r.sni), &ip, &iplen))
        return cli_fail(r.err, EX_USAGE,
                        "probe: the front is an IP address: give the site's name with --sni "
                        "DOMAIN (or an ee secret)");
    code = run_probes(&r);
    if (code == 0 && o->secret)
        code = run_handshakes(&r);
    if (code == 0) {
        if (o->json ? print_json(&r) != 0 : (print_text(&r), false))
            code = cli_fail(r.err, EX_OSERR, "probe: out of memory");
        else
            code = giveaways(&r) ? 1 : 0;
    }
    tg__free(r.rows);
    tg__free(r.bytes);
    tg__free(r.site_flights);
    tg__free(r.proxy_flights);
    return code;
}
