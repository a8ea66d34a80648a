/*
 * tgproxy: MTProto proxy daemon. Everything lives in tgproxy_lib; see cli.h.
 *
 * The serving commands (run, simple-run) start OpenSSL without its error texts: loading
 * them costs the daemon about 0.5 MB of resident memory for messages it prints only when a
 * DNS-over-TLS handshake fails, where the error's code is given instead (issue 30,
 * docs/proxy-engine.md "Memory at zero connections"). Every other command keeps them.
 *
 * Nor do they read OpenSSL's configuration file unless OPENSSL_CONF names one: parsing the
 * system's openssl.cnf costs ~100 KB of resident memory, and Debian's configures nothing
 * (an empty openssl_init section: the default provider is activated implicitly either way).
 * A deployment that configures OpenSSL for tgproxy (providers, properties, a TLS policy for
 * DNS over TLS) says so with OPENSSL_CONF, which is then loaded here, at start
 * (docs/tgproxy.md): OpenSSL would otherwise read it only when its provider is first used,
 * which on a CPU with AES-NI may be never (proxy/wire/crypto.h).
 */
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/daemon/cli.h"

int main(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "run") == 0 || strcmp(argv[1], "simple-run") == 0)) {
        uint64_t opts = OPENSSL_INIT_NO_LOAD_CRYPTO_STRINGS;
        opts |= getenv("OPENSSL_CONF") ? OPENSSL_INIT_LOAD_CONFIG : OPENSSL_INIT_NO_LOAD_CONFIG;
        OPENSSL_init_crypto(opts, NULL);
    }
    return cli_main(argc, argv, stdout, stderr);
}
