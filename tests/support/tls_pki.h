/*
 * tls_pki: a throw-away certificate authority for tests, made with OpenSSL's APIs: a CA
 * (P-256, CA:TRUE, keyCertSign) and one server certificate it signs, valid for a DNS name
 * and the loopback addresses 127.0.0.1 and ::1 (subjectAltName), for two days.
 *
 * The PEM texts are kept in memory (libmicrohttpd's MHD_OPTION_HTTPS_MEM_CERT / _KEY take
 * them as they are), and the CA certificate is also written to a file in a fresh directory
 * under /tmp, for SSL_CERT_FILE / CURLOPT_CAINFO.
 *
 * Ownership: tpki_make fills caller storage; tpki_free releases it and removes the files.
 * Thread-safety: none needed (set up once per test).
 */
#ifndef TGKIT_TEST_TLS_PKI_H
#define TGKIT_TEST_TLS_PKI_H

struct tpki {
    char *ca_pem;     /* the CA certificate */
    char *crt_pem;    /* the server certificate, signed by the CA */
    char *key_pem;    /* the server's private key (PKCS#8) */
    char dir[64];     /* the directory holding ca_file */
    char ca_file[96]; /* the CA certificate as a PEM file */
};

/* A CA and a certificate for dns_name (+ 127.0.0.1, ::1). 0, or -1 (nothing held). */
int tpki_make(struct tpki *p, const char *dns_name);
/* NULL-safe on a zeroed struct. */
void tpki_free(struct tpki *p);

#endif
