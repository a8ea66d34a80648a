/*
 * lazylib: libcurl, libmicrohttpd, libssl, libhiredis and libqrencode loaded when first
 * used (the last three: see their section below), for the tgproxy executable
 * only (linked into it, never into tgproxy_lib, so the tests and libtgbot call the
 * libraries directly).
 *
 * Why: linking the two pulls their dependency chains into every tgproxy process (GnuTLS
 * and p11-kit, Kerberos, LDAP, libssh2, nghttp2, librtmp ...), whose relocations and
 * constructors cost about 4.7 MB of resident memory at start (issue 30, measured in
 * docs/proxy-engine.md "Memory at zero connections"), although a default configuration
 * uses neither: libcurl serves only access-list downloads, DNS-over-HTTPS, the
 * doppelganger's scout and doctor; libmicrohttpd only [stats.prometheus] and [api].
 *
 * How: this file defines the functions tgproxy calls under their own names, so the static
 * link resolves tgproxy_lib's calls here and (with --as-needed) records no dependency on
 * either library (ctest proxy/lazylibs checks the binary's NEEDED entries). The first call
 * dlopen()s the library by its soname, resolves every function once and forwards; the
 * variadic ones forward their one argument by the type the option says (libcurl's option
 * number ranges) or through MHD_start_daemon_va. When a library cannot be loaded each
 * function returns the library's own failure value (NULL, CURLE_FAILED_INIT,
 * CURLM_INTERNAL_ERROR, MHD_NO) and one error line names the library and dlerror().
 *
 * A function added to a caller without an entry here is linked from the library as
 * before: correct, but the library is a dependency again and proxy/lazylibs fails.
 *
 * Thread-safety: loading runs once (pthread_once); the pointers are read-only after it.
 */
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <microhttpd.h>
#include <openssl/ssl.h>
#include <qrencode.h>

#include "core/log.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <string.h>

#define CURL_SONAME "libcurl.so.4"
#define MHD_SONAME  "libmicrohttpd.so.12"

/* ---- libcurl ---- */

static struct {
    CURLcode (*global_init)(long);
    void (*global_cleanup)(void);
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_perform)(CURL *);
    void (*easy_cleanup)(CURL *);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    const char *(*easy_strerror)(CURLcode);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
    time_t (*getdate)(const char *, const time_t *);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_add_handle)(CURLM *, CURL *);
    CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
    CURLMcode (*multi_perform)(CURLM *, int *);
    CURLMcode (*multi_poll)(CURLM *, struct curl_waitfd[], unsigned int, int, int *);
    CURLMsg *(*multi_info_read)(CURLM *, int *);
    CURLMcode (*multi_cleanup)(CURLM *);
    int ok;
} cu;

static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

/* Resolve each name into the pointer array; all or nothing. */
static int resolve(void *h, const char *const *names, void (**out)(void), int n)
{
    for (int i = 0; i < n; i++) {
        void *p = dlsym(h, names[i]);
        if (!p) {
            tg__log(NULL, TG__LOG_ERROR, "cannot load %s from its library: %s", names[i],
                    dlerror());
            return -1;
        }
        /* POSIX: dlsym's void * holds the function's address; copied, not cast (ISO C has
           no object-to-function pointer conversion) */
        memcpy(&out[i], &p, sizeof out[i]);
    }
    return 0;
}

/* dlopen soname and resolve its n names into out: 0, or -1 with one error line. */
static int load_lib(const char *soname, const char *const *names, void (**out)(void), int n)
{
    void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        tg__log(NULL, TG__LOG_ERROR, "cannot load %s: %s", soname, dlerror());
        return -1;
    }
    return resolve(h, names, out, n);
}

static void cu_load(void)
{
    static const char *const names[] = {"curl_global_init",      "curl_global_cleanup",
                                        "curl_easy_init",        "curl_easy_setopt",
                                        "curl_easy_perform",     "curl_easy_cleanup",
                                        "curl_easy_getinfo",     "curl_easy_strerror",
                                        "curl_slist_append",     "curl_slist_free_all",
                                        "curl_getdate",          "curl_multi_init",
                                        "curl_multi_add_handle", "curl_multi_remove_handle",
                                        "curl_multi_perform",    "curl_multi_poll",
                                        "curl_multi_info_read",  "curl_multi_cleanup"};
    void (*fns[sizeof names / sizeof names[0]])(void);
    if (load_lib(CURL_SONAME, names, fns, (int)(sizeof names / sizeof names[0])) != 0)
        return;
    int i = 0;
    cu.global_init = (CURLcode(*)(long))fns[i++];
    cu.global_cleanup = (void (*)(void))fns[i++];
    cu.easy_init = (CURL * (*)(void)) fns[i++];
    cu.easy_setopt = (CURLcode(*)(CURL *, CURLoption, ...))fns[i++];
    cu.easy_perform = (CURLcode(*)(CURL *))fns[i++];
    cu.easy_cleanup = (void (*)(CURL *))fns[i++];
    cu.easy_getinfo = (CURLcode(*)(CURL *, CURLINFO, ...))fns[i++];
    cu.easy_strerror = (const char *(*)(CURLcode))fns[i++];
    cu.slist_append = (struct curl_slist * (*)(struct curl_slist *, const char *)) fns[i++];
    cu.slist_free_all = (void (*)(struct curl_slist *))fns[i++];
    cu.getdate = (time_t(*)(const char *, const time_t *))fns[i++];
    cu.multi_init = (CURLM * (*)(void)) fns[i++];
    cu.multi_add_handle = (CURLMcode(*)(CURLM *, CURL *))fns[i++];
    cu.multi_remove_handle = (CURLMcode(*)(CURLM *, CURL *))fns[i++];
    cu.multi_perform = (CURLMcode(*)(CURLM *, int *))fns[i++];
    cu.multi_poll = (CURLMcode(*)(CURLM *, struct curl_waitfd[], unsigned int, int, int *))fns[i++];
    cu.multi_info_read = (CURLMsg * (*)(CURLM *, int *)) fns[i++];
    cu.multi_cleanup = (CURLMcode(*)(CURLM *))fns[i++];
    cu.ok = 1;
}

static int cu_ready(void)
{
    pthread_once(&cu_once, cu_load);
    return cu.ok;
}

CURLcode(curl_global_init)(long flags)
{
    return cu_ready() ? cu.global_init(flags) : CURLE_FAILED_INIT;
}

void(curl_global_cleanup)(void)
{
    if (cu_ready())
        cu.global_cleanup();
}

CURL *(curl_easy_init)(void)
{
    return cu_ready() ? cu.easy_init() : NULL;
}

/* One argument, of the type the option's number range says (curl.h: CURLOPTTYPE_*). */
CURLcode(curl_easy_setopt)(CURL *h, CURLoption opt, ...)
{
    if (!cu_ready())
        return CURLE_FAILED_INIT;
    va_list ap;
    va_start(ap, opt);
    CURLcode rc;
    if (opt < CURLOPTTYPE_OBJECTPOINT) {
        long v = va_arg(ap, long);
        rc = cu.easy_setopt(h, opt, v);
    } else if (opt < CURLOPTTYPE_FUNCTIONPOINT) {
        void *v = va_arg(ap, void *);
        rc = cu.easy_setopt(h, opt, v);
    } else if (opt < CURLOPTTYPE_OFF_T) {
        void (*v)(void) = va_arg(ap, void (*)(void));
        rc = cu.easy_setopt(h, opt, v);
    } else if (opt < CURLOPTTYPE_BLOB) {
        curl_off_t v = va_arg(ap, curl_off_t);
        rc = cu.easy_setopt(h, opt, v);
    } else {
        void *v = va_arg(ap, void *);
        rc = cu.easy_setopt(h, opt, v);
    }
    va_end(ap);
    return rc;
}

CURLcode(curl_easy_perform)(CURL *h)
{
    return cu_ready() ? cu.easy_perform(h) : CURLE_FAILED_INIT;
}

void(curl_easy_cleanup)(CURL *h)
{
    if (cu_ready())
        cu.easy_cleanup(h);
}

/* Every CURLINFO takes one pointer. */
CURLcode(curl_easy_getinfo)(CURL *h, CURLINFO info, ...)
{
    if (!cu_ready())
        return CURLE_FAILED_INIT;
    va_list ap;
    va_start(ap, info);
    void *p = va_arg(ap, void *);
    va_end(ap);
    return cu.easy_getinfo(h, info, p);
}

const char *(curl_easy_strerror)(CURLcode rc)
{
    return cu_ready() ? cu.easy_strerror(rc) : "libcurl could not be loaded";
}

struct curl_slist *(curl_slist_append)(struct curl_slist *l, const char *s)
{
    return cu_ready() ? cu.slist_append(l, s) : NULL;
}

void(curl_slist_free_all)(struct curl_slist *l)
{
    if (cu_ready())
        cu.slist_free_all(l);
}

time_t(curl_getdate)(const char *p, const time_t *unused)
{
    return cu_ready() ? cu.getdate(p, unused) : (time_t)-1;
}

CURLM *(curl_multi_init)(void)
{
    return cu_ready() ? cu.multi_init() : NULL;
}

CURLMcode(curl_multi_add_handle)(CURLM *m, CURL *h)
{
    return cu_ready() ? cu.multi_add_handle(m, h) : CURLM_INTERNAL_ERROR;
}

CURLMcode(curl_multi_remove_handle)(CURLM *m, CURL *h)
{
    return cu_ready() ? cu.multi_remove_handle(m, h) : CURLM_INTERNAL_ERROR;
}

CURLMcode(curl_multi_perform)(CURLM *m, int *running)
{
    return cu_ready() ? cu.multi_perform(m, running) : CURLM_INTERNAL_ERROR;
}

CURLMcode(curl_multi_poll)(CURLM *m, struct curl_waitfd extra[], unsigned int n, int ms, int *ret)
{
    return cu_ready() ? cu.multi_poll(m, extra, n, ms, ret) : CURLM_INTERNAL_ERROR;
}

CURLMsg *(curl_multi_info_read)(CURLM *m, int *left)
{
    return cu_ready() ? cu.multi_info_read(m, left) : NULL;
}

CURLMcode(curl_multi_cleanup)(CURLM *m)
{
    return cu_ready() ? cu.multi_cleanup(m) : CURLM_INTERNAL_ERROR;
}

/* ---- libmicrohttpd ---- */

static struct {
    struct MHD_Daemon *(*start_daemon_va)(unsigned int, uint16_t, MHD_AcceptPolicyCallback, void *,
                                          MHD_AccessHandlerCallback, void *, va_list);
    void (*stop_daemon)(struct MHD_Daemon *);
    const union MHD_DaemonInfo *(*get_daemon_info)(struct MHD_Daemon *, enum MHD_DaemonInfoType,
                                                   ...);
    const union MHD_ConnectionInfo *(*get_connection_info)(struct MHD_Connection *,
                                                           enum MHD_ConnectionInfoType, ...);
    const char *(*lookup_connection_value)(struct MHD_Connection *, enum MHD_ValueKind,
                                           const char *);
    enum MHD_Result (*queue_response)(struct MHD_Connection *, unsigned int, struct MHD_Response *);
    struct MHD_Response *(*create_response_from_buffer)(size_t, void *,
                                                        enum MHD_ResponseMemoryMode);
    struct MHD_Response *(*create_response_from_buffer_with_free_callback_cls)(
        size_t, void *, MHD_ContentReaderFreeCallback, void *);
    enum MHD_Result (*add_response_header)(struct MHD_Response *, const char *, const char *);
    void (*destroy_response)(struct MHD_Response *);
    int ok;
} mh;

static pthread_once_t mh_once = PTHREAD_ONCE_INIT;

static void mh_load(void)
{
    static const char *const names[] = {"MHD_start_daemon_va",
                                        "MHD_stop_daemon",
                                        "MHD_get_daemon_info",
                                        "MHD_get_connection_info",
                                        "MHD_lookup_connection_value",
                                        "MHD_queue_response",
                                        "MHD_create_response_from_buffer",
                                        "MHD_create_response_from_buffer_with_free_callback_cls",
                                        "MHD_add_response_header",
                                        "MHD_destroy_response"};
    void (*fns[sizeof names / sizeof names[0]])(void);
    if (load_lib(MHD_SONAME, names, fns, (int)(sizeof names / sizeof names[0])) != 0)
        return;
    int i = 0;
    mh.start_daemon_va =
        (struct MHD_Daemon * (*)(unsigned int, uint16_t, MHD_AcceptPolicyCallback, void *,
                                 MHD_AccessHandlerCallback, void *, va_list)) fns[i++];
    mh.stop_daemon = (void (*)(struct MHD_Daemon *))fns[i++];
    mh.get_daemon_info = (const union MHD_DaemonInfo *(*)(struct MHD_Daemon *,
                                                          enum MHD_DaemonInfoType, ...))fns[i++];
    mh.get_connection_info =
        (const union MHD_ConnectionInfo *(*)(struct MHD_Connection *, enum MHD_ConnectionInfoType,
                                             ...))fns[i++];
    mh.lookup_connection_value =
        (const char *(*)(struct MHD_Connection *, enum MHD_ValueKind, const char *))fns[i++];
    mh.queue_response =
        (enum MHD_Result(*)(struct MHD_Connection *, unsigned int, struct MHD_Response *))fns[i++];
    mh.create_response_from_buffer =
        (struct MHD_Response * (*)(size_t, void *, enum MHD_ResponseMemoryMode)) fns[i++];
    mh.create_response_from_buffer_with_free_callback_cls =
        (struct MHD_Response * (*)(size_t, void *, MHD_ContentReaderFreeCallback, void *)) fns[i++];
    mh.add_response_header =
        (enum MHD_Result(*)(struct MHD_Response *, const char *, const char *))fns[i++];
    mh.destroy_response = (void (*)(struct MHD_Response *))fns[i++];
    mh.ok = 1;
}

static int mh_ready(void)
{
    pthread_once(&mh_once, mh_load);
    return mh.ok;
}

struct MHD_Daemon *(MHD_start_daemon)(unsigned int flags, uint16_t port,
                                      MHD_AcceptPolicyCallback apc, void *apc_cls,
                                      MHD_AccessHandlerCallback dh, void *dh_cls, ...)
{
    if (!mh_ready())
        return NULL;
    va_list ap;
    va_start(ap, dh_cls);
    struct MHD_Daemon *d = mh.start_daemon_va(flags, port, apc, apc_cls, dh, dh_cls, ap);
    va_end(ap);
    return d;
}

void(MHD_stop_daemon)(struct MHD_Daemon *d)
{
    if (mh_ready())
        mh.stop_daemon(d);
}

/* The trailing arguments are unused by every info type tgproxy asks for. */
const union MHD_DaemonInfo *(MHD_get_daemon_info)(struct MHD_Daemon *d, enum MHD_DaemonInfoType t,
                                                  ...)
{
    return mh_ready() ? mh.get_daemon_info(d, t) : NULL;
}

const union MHD_ConnectionInfo *(MHD_get_connection_info)(struct MHD_Connection *c,
                                                          enum MHD_ConnectionInfoType t, ...)
{
    return mh_ready() ? mh.get_connection_info(c, t) : NULL;
}

const char *(MHD_lookup_connection_value)(struct MHD_Connection *c, enum MHD_ValueKind k,
                                          const char *key)
{
    return mh_ready() ? mh.lookup_connection_value(c, k, key) : NULL;
}

enum MHD_Result(MHD_queue_response)(struct MHD_Connection *c, unsigned int status,
                                    struct MHD_Response *r)
{
    return mh_ready() ? mh.queue_response(c, status, r) : MHD_NO;
}

struct MHD_Response *(MHD_create_response_from_buffer)(size_t size, void *buf,
                                                       enum MHD_ResponseMemoryMode mode)
{
    return mh_ready() ? mh.create_response_from_buffer(size, buf, mode) : NULL;
}

struct MHD_Response *(
    MHD_create_response_from_buffer_with_free_callback_cls)(size_t size, void *buf,
                                                            MHD_ContentReaderFreeCallback crfc,
                                                            void *crfc_cls)
{
    return mh_ready()
               ? mh.create_response_from_buffer_with_free_callback_cls(size, buf, crfc, crfc_cls)
               : NULL;
}

enum MHD_Result(MHD_add_response_header)(struct MHD_Response *r, const char *h, const char *v)
{
    return mh_ready() ? mh.add_response_header(r, h, v) : MHD_NO;
}

void(MHD_destroy_response)(struct MHD_Response *r)
{
    if (mh_ready())
        mh.destroy_response(r);
}

/* ---- libssl, libhiredis, libqrencode (issue 30) ----
   Each only for some features: libssl for DNS over TLS and doctor's certificate check
   (libcrypto, which the engine needs, stays linked), libhiredis for [fleet], libqrencode
   for `access`. Together 352 KB resident at start when linked. Their pointers are declared
   from the headers' own prototypes (__typeof__), one list per library. */

#define SSL_SONAME   "libssl.so.3"
#define RD_SONAME    "libhiredis.so.0.14"
#define QRENC_SONAME "libqrencode.so.4"

#define SSL_FNS(X)                                                                                 \
    X(SSL_CTX_ctrl)                                                                                \
    X(SSL_CTX_free)                                                                                \
    X(SSL_CTX_new)                                                                                 \
    X(SSL_CTX_set_default_verify_paths)                                                            \
    X(SSL_CTX_set_msg_callback)                                                                    \
    X(SSL_connect)                                                                                 \
    X(SSL_ctrl)                                                                                    \
    X(SSL_free)                                                                                    \
    X(SSL_get0_param)                                                                              \
    X(SSL_get_error)                                                                               \
    X(SSL_get_verify_result)                                                                       \
    X(SSL_get_version)                                                                             \
    X(SSL_is_init_finished)                                                                        \
    X(SSL_new)                                                                                     \
    X(SSL_read)                                                                                    \
    X(SSL_set1_host)                                                                               \
    X(SSL_set_bio)                                                                                 \
    X(SSL_set_fd)                                                                                  \
    X(SSL_set_verify)                                                                              \
    X(SSL_shutdown)                                                                                \
    X(SSL_write)                                                                                   \
    X(TLS_client_method)
#define HIREDIS_FNS(X)                                                                             \
    X(freeReplyObject)                                                                             \
    X(redisAppendCommandArgv)                                                                      \
    X(redisAsyncCommandArgv)                                                                       \
    X(redisAsyncConnect)                                                                           \
    X(redisAsyncConnectUnix)                                                                       \
    X(redisAsyncFree)                                                                              \
    X(redisAsyncHandleRead)                                                                        \
    X(redisAsyncHandleWrite)                                                                       \
    X(redisAsyncSetConnectCallback)                                                                \
    X(redisAsyncSetDisconnectCallback)                                                             \
    X(redisBufferRead)                                                                             \
    X(redisBufferWrite)                                                                            \
    X(redisConnectUnixWithTimeout)                                                                 \
    X(redisConnectWithTimeout)                                                                     \
    X(redisFree)                                                                                   \
    X(redisGetReplyFromReader)                                                                     \
    X(redisSetTimeout)                                                                             \
    X(redisvAppendCommand)
#define QRENC_FNS(X) X(QRcode_encodeString) X(QRcode_free)

#define LAZY_PTR(f)  __typeof__(f) *f;
#define LAZY_NAME(f) #f,
#define LAZY_ONE(f)  +1

/* The library's pointers (ptrs: a struct of nothing but them, in the list's order) loaded
   once; names in the same order. */
struct lazy_lib {
    const char *soname;
    const char *const *names;
    int n;
    void *ptrs;
    pthread_once_t once;
    int ok;
};

static void lazy_fill(struct lazy_lib *l)
{
    void (*fns[32])(void);
    if (l->n > (int)(sizeof fns / sizeof fns[0]) || load_lib(l->soname, l->names, fns, l->n) != 0)
        return;
    for (int i = 0; i < l->n; i++) /* copied byte for byte: every member is a function pointer */
        memcpy((char *)l->ptrs + (size_t)i * sizeof fns[0], &fns[i], sizeof fns[0]);
    l->ok = 1;
}

/* One library: its pointers (p), names, loader state and p##_ready(). */
#define LAZY_LIB(p, soname, FNS)                                                                   \
    static struct {                                                                                \
        FNS(LAZY_PTR)                                                                              \
    } p;                                                                                           \
    _Static_assert(sizeof p == sizeof(void (*)(void)) * (0 FNS(LAZY_ONE)), "only pointers");       \
    static const char *const p##_names[] = {FNS(LAZY_NAME)};                                       \
    static struct lazy_lib p##_lib = {                                                             \
        soname, p##_names, 0 FNS(LAZY_ONE), &p, PTHREAD_ONCE_INIT, 0};                             \
    static void p##_load(void)                                                                     \
    {                                                                                              \
        lazy_fill(&p##_lib);                                                                       \
    }                                                                                              \
    static int p##_ready(void)                                                                     \
    {                                                                                              \
        pthread_once(&p##_lib.once, p##_load);                                                     \
        return p##_lib.ok;                                                                         \
    }

LAZY_LIB(ss, SSL_SONAME, SSL_FNS)
LAZY_LIB(rd, RD_SONAME, HIREDIS_FNS)
LAZY_LIB(qr, QRENC_SONAME, QRENC_FNS)

/* libssl: SSL_CTX_new and SSL_new give NULL when it cannot be loaded, so the rest is never
   reached with an object; each still returns the library's own failure value. */
long(SSL_CTX_ctrl)(SSL_CTX *ctx, int cmd, long larg, void *parg)
{
    return ss_ready() ? ss.SSL_CTX_ctrl(ctx, cmd, larg, parg) : 0;
}
void(SSL_CTX_free)(SSL_CTX *ctx)
{
    if (ss_ready())
        ss.SSL_CTX_free(ctx);
}
SSL_CTX *(SSL_CTX_new)(const SSL_METHOD *meth)
{
    return ss_ready() ? ss.SSL_CTX_new(meth) : NULL;
}
int(SSL_CTX_set_default_verify_paths)(SSL_CTX *ctx)
{
    return ss_ready() ? ss.SSL_CTX_set_default_verify_paths(ctx) : 0;
}
void(SSL_CTX_set_msg_callback)(SSL_CTX *ctx,
                               void (*cb)(int write_p, int version, int content_type,
                                          const void *buf, size_t len, SSL *ssl, void *arg))
{
    if (ss_ready())
        ss.SSL_CTX_set_msg_callback(ctx, cb);
}
int(SSL_connect)(SSL *s)
{
    return ss_ready() ? ss.SSL_connect(s) : -1;
}
long(SSL_ctrl)(SSL *s, int cmd, long larg, void *parg)
{
    return ss_ready() ? ss.SSL_ctrl(s, cmd, larg, parg) : 0;
}
void(SSL_free)(SSL *s)
{
    if (ss_ready())
        ss.SSL_free(s);
}
X509_VERIFY_PARAM *(SSL_get0_param)(SSL *s)
{
    return ss_ready() ? ss.SSL_get0_param(s) : NULL;
}
int(SSL_get_error)(const SSL *s, int ret_code)
{
    return ss_ready() ? ss.SSL_get_error(s, ret_code) : SSL_ERROR_SSL;
}
long(SSL_get_verify_result)(const SSL *s)
{
    return ss_ready() ? ss.SSL_get_verify_result(s) : X509_V_ERR_UNSPECIFIED;
}
const char *(SSL_get_version)(const SSL *s)
{
    return ss_ready() ? ss.SSL_get_version(s) : "unknown";
}
int(SSL_is_init_finished)(const SSL *s)
{
    return ss_ready() ? ss.SSL_is_init_finished(s) : 0;
}
SSL *(SSL_new)(SSL_CTX *ctx)
{
    return ss_ready() ? ss.SSL_new(ctx) : NULL;
}
int(SSL_read)(SSL *s, void *buf, int num)
{
    return ss_ready() ? ss.SSL_read(s, buf, num) : -1;
}
int(SSL_set1_host)(SSL *s, const char *hostname)
{
    return ss_ready() ? ss.SSL_set1_host(s, hostname) : 0;
}
void(SSL_set_bio)(SSL *s, BIO *rbio, BIO *wbio)
{
    if (ss_ready())
        ss.SSL_set_bio(s, rbio, wbio);
}
int(SSL_set_fd)(SSL *s, int fd)
{
    return ss_ready() ? ss.SSL_set_fd(s, fd) : 0;
}
void(SSL_set_verify)(SSL *s, int mode, SSL_verify_cb callback)
{
    if (ss_ready())
        ss.SSL_set_verify(s, mode, callback);
}
int(SSL_shutdown)(SSL *s)
{
    return ss_ready() ? ss.SSL_shutdown(s) : -1;
}
int(SSL_write)(SSL *s, const void *buf, int num)
{
    return ss_ready() ? ss.SSL_write(s, buf, num) : -1;
}
const SSL_METHOD *(TLS_client_method)(void)
{
    return ss_ready() ? ss.TLS_client_method() : NULL;
}

/* libhiredis: the connect functions give NULL when it cannot be loaded. */
int(redisAppendCommandArgv)(redisContext *c, int argc, const char **argv, const size_t *argvlen)
{
    return rd_ready() ? rd.redisAppendCommandArgv(c, argc, argv, argvlen) : REDIS_ERR;
}
int(redisAsyncCommandArgv)(redisAsyncContext *ac, redisCallbackFn *fn, void *privdata, int argc,
                           const char **argv, const size_t *argvlen)
{
    return rd_ready() ? rd.redisAsyncCommandArgv(ac, fn, privdata, argc, argv, argvlen) : REDIS_ERR;
}
redisAsyncContext *(redisAsyncConnect)(const char *ip, int port)
{
    return rd_ready() ? rd.redisAsyncConnect(ip, port) : NULL;
}
redisAsyncContext *(redisAsyncConnectUnix)(const char *path)
{
    return rd_ready() ? rd.redisAsyncConnectUnix(path) : NULL;
}
void(redisAsyncFree)(redisAsyncContext *ac)
{
    if (rd_ready())
        rd.redisAsyncFree(ac);
}
void(redisAsyncHandleRead)(redisAsyncContext *ac)
{
    if (rd_ready())
        rd.redisAsyncHandleRead(ac);
}
void(redisAsyncHandleWrite)(redisAsyncContext *ac)
{
    if (rd_ready())
        rd.redisAsyncHandleWrite(ac);
}
int(redisAsyncSetConnectCallback)(redisAsyncContext *ac, redisConnectCallback *fn)
{
    return rd_ready() ? rd.redisAsyncSetConnectCallback(ac, fn) : REDIS_ERR;
}
int(redisAsyncSetDisconnectCallback)(redisAsyncContext *ac, redisDisconnectCallback *fn)
{
    return rd_ready() ? rd.redisAsyncSetDisconnectCallback(ac, fn) : REDIS_ERR;
}
int(redisBufferRead)(redisContext *c)
{
    return rd_ready() ? rd.redisBufferRead(c) : REDIS_ERR;
}
int(redisBufferWrite)(redisContext *c, int *done)
{
    return rd_ready() ? rd.redisBufferWrite(c, done) : REDIS_ERR;
}
redisContext *(redisConnectUnixWithTimeout)(const char *path, const struct timeval tv)
{
    return rd_ready() ? rd.redisConnectUnixWithTimeout(path, tv) : NULL;
}
redisContext *(redisConnectWithTimeout)(const char *ip, int port, const struct timeval tv)
{
    return rd_ready() ? rd.redisConnectWithTimeout(ip, port, tv) : NULL;
}
void(redisFree)(redisContext *c)
{
    if (rd_ready())
        rd.redisFree(c);
}
int(redisGetReplyFromReader)(redisContext *c, void **reply)
{
    return rd_ready() ? rd.redisGetReplyFromReader(c, reply) : REDIS_ERR;
}
int(redisSetTimeout)(redisContext *c, const struct timeval tv)
{
    return rd_ready() ? rd.redisSetTimeout(c, tv) : REDIS_ERR;
}
int(redisvAppendCommand)(redisContext *c, const char *format, va_list ap)
{
    return rd_ready() ? rd.redisvAppendCommand(c, format, ap) : REDIS_ERR;
}

void(freeReplyObject)(void *reply)
{
    if (rd_ready())
        rd.freeReplyObject(reply);
}

/* libqrencode */
QRcode *(QRcode_encodeString)(const char *string, int version, QRecLevel level, QRencodeMode hint,
                              int casesensitive)
{
    return qr_ready() ? qr.QRcode_encodeString(string, version, level, hint, casesensitive) : NULL;
}
void(QRcode_free)(QRcode *qrcode)
{
    if (qr_ready())
        qr.QRcode_free(qrcode);
}
