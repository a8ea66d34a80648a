/*
 * httpsget: the libcurl settings every download of tgproxy's services shares (access lists,
 * middle-proxy documents): HTTPS only, redirects too (at most 3), the peer's certificate and
 * name verified, `http_ms` bounding the connect and any stall, total_ms the whole transfer,
 * max_bytes the body, no signals, tgproxy's User-Agent, and the CA bundle OpenSSL programs
 * honour (SSL_CERT_FILE / SSL_CERT_DIR), as doctor uses.
 *
 * The caller sets its own write callback, error buffer and anything else. Thread-safety: as
 * libcurl's easy handles (one thread per handle).
 */
#ifndef TGPROXY_HTTPSGET_H
#define TGPROXY_HTTPSGET_H

#include <curl/curl.h>
#include <stdint.h>

void httpsget_setup(CURL *h, const char *url, uint32_t http_ms, long total_ms,
                    curl_off_t max_bytes);

#endif
