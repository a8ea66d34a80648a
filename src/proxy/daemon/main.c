/*
 * tgproxy: MTProto proxy daemon. Everything lives in tgproxy_lib; see cli.h.
 *
 * The serving commands (run, simple-run) start OpenSSL without its error texts: loading
 * them costs the daemon about 0.5 MB of resident memory for messages it prints only when a
 * DNS-over-TLS handshake fails, where the error's code is given instead (issue 30,
 * docs/proxy-engine.md "Memory at zero connections"). Every other command keeps them.
 */
#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>

#include "proxy/daemon/cli.h"

int main(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "run") == 0 || strcmp(argv[1], "simple-run") == 0))
        OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CRYPTO_STRINGS, NULL);
    return cli_main(argc, argv, stdout, stderr);
}
