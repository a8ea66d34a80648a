/*
 * doctor: `tgproxy doctor CONFIG.toml`, checks that a configuration can serve on this host
 * before it is started (as mtg's doctor does). One line per check on out:
 *
 *   ✓ config: tgproxy.toml loads; no ignored or deprecated keys
 *   ! config: mtg.toml:61:1: auto-update: accepted for mtg compatibility but ignored: ...
 *   ✗ clock: 3600 s ahead of www.example.com's Date header (tolerance ±120 s)
 *
 * Checks, in order: the file loads, and the loader's own findings, one line each (an
 * ignored or deprecated mtg key is a ! warning, anything else, such as a file others can
 * read, a ✗ failure); the clock against the fronting host's HTTPS Date header
 * (libcurl HEAD, within tolerate-time-skewness); every DC of the table answers a TCP
 * connect (all addresses in parallel, bounded by [network.timeout] tcp, at most 5 s);
 * with [network] proxies, a SOCKS5 CONNECT through each upstream instead (one per DC);
 * for each FakeTLS domain, the fronting host completes a TLS handshake whose certificate
 * is valid for that SNI name (OpenSSL, system CA store; SSL_CERT_FILE / SSL_CERT_DIR
 * replace it, as OpenSSL does everywhere); the SNI name resolves to the address the proxy
 * fronts to (mtg's SNI-DNS match); the open-files hard limit holds `concurrency`
 * connections; every bind-to address, and the [stats.prometheus] one when enabled, can be
 * bound right now.
 *
 * Secrets are never printed: lines name labels, domains (sent in clear by every client)
 * and addresses. The checks touch the network (DNS, TCP, HTTPS) and may take a few
 * seconds; nothing is retried.
 *
 * Thread-safety: call from one thread at a time (libcurl's global init happens here).
 */
#ifndef TGPROXY_DOCTOR_H
#define TGPROXY_DOCTOR_H

#include <stdbool.h>
#include <stdio.h>

#define DOCTOR_EXIT_FAILED   1 /* the file loads but at least one check failed */
#define DOCTOR_EXIT_WARNINGS 2 /* strict: nothing failed, but there were warnings */

/*
 * Run every check for the file at path, writing one line per check to out (borrowed):
 * "✓" passed, "✗" failed, "!" a warning, such as a harmless finding (an mtg key tgproxy ignores or a
 * deprecated mtg spelling: config_warning_harmless). Returns the process exit code:
 * DOCTOR_EXIT_FAILED some check failed; else DOCTOR_EXIT_WARNINGS when strict and there
 * were warnings; else 0. 78 (EX_CONFIG) the file does not load (the other checks need it
 * and are not run), 71 (EX_OSERR) out of memory.
 */
int doctor_check(const char *path, FILE *out, bool strict);
/* doctor_check, not strict: warnings alone exit 0. */
int doctor_run(const char *path, FILE *out);

#endif
