/* prom: scrape helpers for the metrics tests. See prom.h. */
#include "prom.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int prom_scrape(const char *url, const char *prefix, char *out, size_t cap)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 %s/tests/proxy/prom_scrape.py '%s' %s %s/docs/tgproxy.md",
             TGKIT_SOURCE_DIR, url, prefix, TGKIT_SOURCE_DIR);
    FILE *p = popen(cmd, "r");
    if (!p || cap < 3)
        return -1;
    out[0] = '\n';
    size_t n = 1 + fread(out + 1, 1, cap - 2, p);
    out[n] = '\0';
    return pclose(p) == 0 ? 0 : -1;
}

char *prom_scrape_local(unsigned port)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/", port);
    char *out = calloc(1, 1 << 20);
    if (out && prom_scrape(url, "tgproxy", out, 1 << 20) != 0) {
        free(out);
        out = NULL;
    }
    return out;
}

double prom_sample(const char *page, const char *key)
{
    char pat[256];
    snprintf(pat, sizeof pat, "\n%s ", key);
    const char *at = strstr(page, pat);
    return at ? strtod(at + strlen(pat), NULL) : NAN;
}
