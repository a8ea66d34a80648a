/* docsrv: an HTTPS document server for tests (docsrv.h). */
#include "docsrv.h"

#include "proxy_util.h"
#include "tgtest.h"
#include "tls_pki.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DOCSRV_DOCS 8

struct doc {
    char path[32];
    int status;
    uint8_t *body;
    size_t len;
    int64_t date;
    unsigned hits;
};

struct docsrv {
    struct tpki pki;
    struct MHD_Daemon *d;
    uint16_t port;
    pthread_mutex_t mu;
    struct doc docs[DOCSRV_DOCS];
};

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *size, void **ctx)
{
    (void)method, (void)version, (void)data, (void)size, (void)ctx;
    struct docsrv *s = cls;
    int status = 404;
    uint8_t *body = NULL;
    size_t len = 0;
    int64_t date = 0;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < DOCSRV_DOCS; i++) {
        struct doc *d = &s->docs[i];
        if (!d->path[0] || strcmp(d->path, url) != 0)
            continue;
        d->hits++;
        status = d->status;
        date = d->date;
        if (d->len && (body = malloc(d->len)))
            memcpy(body, d->body, len = d->len);
    }
    pthread_mutex_unlock(&s->mu);
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    if (date) {
        char v[64];
        time_t t = (time_t)date;
        struct tm tm;
        strftime(v, sizeof v, "%a, %d %b %Y %H:%M:%S GMT", gmtime_r(&t, &tm));
        MHD_add_response_header(r, "Date", v);
    }
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return rc;
}

struct docsrv *docsrv_start(void)
{
    struct docsrv *s = calloc(1, sizeof *s);
    assert_non_null(s);
    pthread_mutex_init(&s->mu, NULL);
    assert_int_equal(tpki_make(&s->pki, "localhost"), 0);
    struct sockaddr_in sa = psock_addr(0);
    s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_TLS, 0, NULL, NULL,
                            on_request, s, MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_HTTPS_MEM_CERT,
                            s->pki.crt_pem, MHD_OPTION_HTTPS_MEM_KEY, s->pki.key_pem,
                            MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
    assert_non_null(s->d);
    s->port = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT)->port;
    setenv("SSL_CERT_FILE", s->pki.ca_file, 1); /* libcurl in this process and in children */
    return s;
}

void docsrv_serve(struct docsrv *s, const char *path, int status, const void *body, size_t len,
                  int64_t date)
{
    pthread_mutex_lock(&s->mu);
    struct doc *d = NULL;
    for (int i = 0; i < DOCSRV_DOCS && !d; i++)
        if (strcmp(s->docs[i].path, path) == 0)
            d = &s->docs[i];
    for (int i = 0; i < DOCSRV_DOCS && !d; i++)
        if (!s->docs[i].path[0])
            d = &s->docs[i];
    if (!d)
        fail_msg("docsrv: more than %d paths", DOCSRV_DOCS);
    snprintf(d->path, sizeof d->path, "%s", path);
    free(d->body);
    d->body = len ? malloc(len) : NULL;
    if (len)
        memcpy(d->body, body, len);
    d->len = len;
    d->status = status;
    d->date = date;
    pthread_mutex_unlock(&s->mu);
}

void docsrv_url(const struct docsrv *s, const char *path, char *out, size_t cap)
{
    snprintf(out, cap, "https://127.0.0.1:%u%s", (unsigned)s->port, path);
}

unsigned docsrv_hits(struct docsrv *s, const char *path)
{
    unsigned n = 0;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < DOCSRV_DOCS; i++)
        if (strcmp(s->docs[i].path, path) == 0)
            n = s->docs[i].hits;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void docsrv_stop(struct docsrv *s)
{
    if (!s)
        return;
    if (s->d)
        MHD_stop_daemon(s->d);
    for (int i = 0; i < DOCSRV_DOCS; i++)
        free(s->docs[i].body);
    tpki_free(&s->pki);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
