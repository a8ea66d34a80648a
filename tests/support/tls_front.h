/*
 * tls_front: real TLS 1.3 web fronts for tgproxy's FakeTLS-shape tests (issue 23): a chain
 * of three RSA certificates (root -> intermediate -> leaf for a domain, keys of a chosen
 * size, made with the openssl command, as a public site's chain is) served by OpenSSL's
 * `s_server` or GnuTLS's `gnutls-serv` (two independent implementations) on 127.0.0.1.
 *
 * s_server serves one connection at a time (a silent client holds the others in the
 * backlog); gnutls-serv serves several. Neither closes a silent connection by itself.
 *
 * Ownership: caller storage; tfront_pki_free removes the files, tfront_stop kills and reaps
 * the server. Thread-safety: set up from one thread. Failures are cmocka assertions.
 */
#ifndef TGKIT_TEST_TLS_FRONT_H
#define TGKIT_TEST_TLS_FRONT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct tfront_pki {
    char dir[64];
    char leaf[96], key[96], chain[96], full[96]; /* leaf.pem, leaf.key, int+root, all three */
};

/* root -> intermediate -> leaf for domain (and www.domain), RSA keys of bits (2048, 3072,
   4096), in a fresh directory under /tmp. */
void tfront_pki_make(struct tfront_pki *p, const char *domain, int bits);
void tfront_pki_free(struct tfront_pki *p);

struct tfront {
    pid_t pid;
    uint16_t port;
    char log[128];
};

/* Start s_server (gnutls false) or gnutls-serv on 127.0.0.1 and a free port serving p's
   chain, TLS 1.3 only; returns once the port accepts connections. */
void tfront_start(struct tfront *s, const struct tfront_pki *p, bool gnutls);
/* The same on a given port (0: a free one), e.g. another server where one just stopped. */
void tfront_start_on(struct tfront *s, const struct tfront_pki *p, bool gnutls, uint16_t port);
void tfront_stop(struct tfront *s); /* NULL-safe on a zeroed struct */

#endif
