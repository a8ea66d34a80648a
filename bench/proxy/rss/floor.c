/*
 * The floor for tgproxy's RSS at zero connections (bench/proxy/rss_zero.py builds and runs
 * it beside the daemon): a PIE that does what any OpenSSL program of tgproxy's kind must,
 * and nothing else, then waits.
 *
 *   floor libc     libc and ld.so only (built without -DFLOOR_CRYPTO: no libcrypto at all)
 *   floor crypto   + libcrypto (built with -DFLOOR_CRYPTO): initialised without its error
 *                  texts (as `tgproxy run`),
 *                  AES-256-CTR and SHA-256 fetched from the default provider, 32 bytes of
 *                  RAND_bytes (the DRBG seeded), one AES-256-CTR encryption and one SHA-256
 *
 * Prints "ready" on stdout when done, then sleeps until a signal ends it.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifdef FLOOR_CRYPTO
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

static int crypto_floor(void)
{
    OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CRYPTO_STRINGS, NULL);
    EVP_CIPHER *ctr = EVP_CIPHER_fetch(NULL, "AES-256-CTR", NULL);
    EVP_MD *sha = EVP_MD_fetch(NULL, "SHA256", NULL);
    unsigned char key[32], iv[16], buf[64], md[32];
    unsigned n = 0;
    int out = 0;
    if (!ctr || !sha || RAND_bytes(key, sizeof key) != 1 || RAND_bytes(iv, sizeof iv) != 1)
        return -1;
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    memset(buf, 0, sizeof buf);
    if (!c || EVP_EncryptInit_ex2(c, ctr, key, iv, NULL) != 1 ||
        EVP_EncryptUpdate(c, buf, &out, buf, sizeof buf) != 1 ||
        EVP_Digest(buf, sizeof buf, md, &n, sha, NULL) != 1)
        return -1;
    EVP_CIPHER_CTX_free(c);
    return 0;
}
#else
static int crypto_floor(void)
{
    return -1;
}
#endif

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "libc") != 0 && strcmp(argv[1], "crypto") != 0)) {
        fprintf(stderr, "usage: floor libc|crypto\n");
        return 64;
    }
    if (strcmp(argv[1], "crypto") == 0 && crypto_floor() < 0) {
        fprintf(stderr, "floor: OpenSSL failed\n");
        return 70;
    }
    printf("ready\n");
    fflush(stdout);
    for (;;)
        pause();
}
