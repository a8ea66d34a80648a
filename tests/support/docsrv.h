/*
 * docsrv: a small HTTPS server on 127.0.0.1 that serves documents the test sets, for the
 * sources tgproxy downloads (middle-proxy documents, "what is my IP" answers).
 *
 *   struct docsrv *s = docsrv_start();          a fresh CA (tls_pki.h); SSL_CERT_FILE set to it
 *   docsrv_serve(s, "/secret", 200, p, n, 0);   what GET /secret answers from now on
 *   docsrv_url(s, "/secret", url, sizeof url);  "https://127.0.0.1:PORT/secret"
 *   docsrv_stop(s);                              the port stops answering (connection refused)
 *
 * A path not served answers 404. date != 0 sends that Date header (Unix seconds) instead of
 * the server's clock. Every request of a path is counted (docsrv_hits).
 * Thread-safety: docsrv_serve and docsrv_hits from any thread (the server runs its own).
 */
#ifndef TGKIT_TEST_DOCSRV_H
#define TGKIT_TEST_DOCSRV_H

#include <stddef.h>
#include <stdint.h>

struct docsrv;

struct docsrv *docsrv_start(void);
void docsrv_serve(struct docsrv *s, const char *path, int status, const void *body, size_t len,
                  int64_t date);
void docsrv_url(const struct docsrv *s, const char *path, char *out, size_t cap);
unsigned docsrv_hits(struct docsrv *s, const char *path);
void docsrv_stop(struct docsrv *s);

#endif
