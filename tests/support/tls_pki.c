/*
 * tls_pki: a test CA and a server certificate made with OpenSSL's APIs. See tls_pki.h.
 */
#include "tls_pki.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Add one v3 extension, issued by issuer (NULL = self). 1 or 0. */
static int add_ext(X509 *crt, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer ? issuer : crt, crt, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    int ok = ext && X509_add_ext(crt, ext, -1);
    X509_EXTENSION_free(ext);
    return ok;
}

/* A certificate for key, named cn, signed by (issuer, ikey); issuer NULL = self-signed. */
static X509 *make_cert(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *ikey, long serial)
{
    X509 *crt = X509_new();
    if (!crt)
        return NULL;
    X509_set_version(crt, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(crt), serial);
    X509_gmtime_adj(X509_getm_notBefore(crt), -3600);
    X509_gmtime_adj(X509_getm_notAfter(crt), 2 * 86400);
    X509_NAME *nm = X509_get_subject_name(crt);
    X509_NAME_add_entry_by_txt(nm, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(crt, issuer ? X509_get_subject_name(issuer) : nm);
    X509_set_pubkey(crt, key);
    return crt;
}

/* PEM text of a certificate or key (malloc'd, NUL-terminated). */
static char *pem_text(X509 *crt, EVP_PKEY *key)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *out = NULL, *data = NULL;
    if (b && (crt ? PEM_write_bio_X509(b, crt)
                  : PEM_write_bio_PrivateKey(b, key, NULL, NULL, 0, NULL, NULL))) {
        long n = BIO_get_mem_data(b, &data);
        if (n > 0 && (out = malloc((size_t)n + 1))) {
            memcpy(out, data, (size_t)n);
            out[n] = '\0';
        }
    }
    BIO_free(b);
    return out;
}

int tpki_make(struct tpki *p, const char *dns_name)
{
    memset(p, 0, sizeof *p);
    EVP_PKEY *cakey = EVP_EC_gen("P-256"), *key = EVP_EC_gen("P-256");
    X509 *ca = cakey ? make_cert(cakey, "tgkit-test-ca", NULL, NULL, 1) : NULL;
    X509 *crt = key && ca ? make_cert(key, dns_name, ca, cakey, 2) : NULL;
    char san[300];
    snprintf(san, sizeof san, "DNS:%s,IP:127.0.0.1,IP:::1", dns_name);
    int ok = crt && add_ext(ca, NULL, NID_basic_constraints, "critical,CA:TRUE") &&
             add_ext(ca, NULL, NID_key_usage, "critical,keyCertSign,cRLSign") &&
             add_ext(ca, NULL, NID_subject_key_identifier, "hash") &&
             X509_sign(ca, cakey, EVP_sha256()) > 0 &&
             add_ext(crt, ca, NID_subject_alt_name, san) &&
             add_ext(crt, ca, NID_ext_key_usage, "serverAuth") &&
             add_ext(crt, ca, NID_authority_key_identifier, "keyid") &&
             X509_sign(crt, cakey, EVP_sha256()) > 0;
    if (ok) {
        p->ca_pem = pem_text(ca, NULL);
        p->crt_pem = pem_text(crt, NULL);
        p->key_pem = pem_text(NULL, key);
        snprintf(p->dir, sizeof p->dir, "/tmp/tgtest-pki-XXXXXX");
        ok = p->ca_pem && p->crt_pem && p->key_pem && mkdtemp(p->dir);
    }
    if (ok) {
        snprintf(p->ca_file, sizeof p->ca_file, "%s/ca.pem", p->dir);
        FILE *f = fopen(p->ca_file, "w");
        ok = f && fputs(p->ca_pem, f) >= 0;
        if (f && fclose(f) != 0)
            ok = 0;
    }
    X509_free(crt);
    X509_free(ca);
    EVP_PKEY_free(key);
    EVP_PKEY_free(cakey);
    if (!ok) {
        tpki_free(p);
        return -1;
    }
    return 0;
}

void tpki_free(struct tpki *p)
{
    if (p->ca_file[0]) { /* set once mkdtemp made the directory */
        unlink(p->ca_file);
        rmdir(p->dir);
    }
    free(p->ca_pem);
    free(p->crt_pem);
    free(p->key_pem);
    memset(p, 0, sizeof *p);
}
