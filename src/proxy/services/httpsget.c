/* httpsget: shared libcurl settings for the services' downloads (httpsget.h). */
#include "proxy/services/httpsget.h"

#include <stdlib.h>

#ifndef TGKIT_VERSION_STRING
#define TGKIT_VERSION_STRING "0"
#endif

void httpsget_setup(CURL *h, const char *url, uint32_t http_ms, long total_ms,
                    curl_off_t max_bytes)
{
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 3L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)http_ms);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)(http_ms + 999) / 1000);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, total_ms);
    curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, max_bytes);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "tgproxy/" TGKIT_VERSION_STRING);
    if (getenv("SSL_CERT_FILE"))
        curl_easy_setopt(h, CURLOPT_CAINFO, getenv("SSL_CERT_FILE"));
    if (getenv("SSL_CERT_DIR"))
        curl_easy_setopt(h, CURLOPT_CAPATH, getenv("SSL_CERT_DIR"));
}
