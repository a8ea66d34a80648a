/*
 * prom: read tgproxy's Prometheus page in a test through tests/proxy/prom_scrape.py, an
 * independent strict parser (python3 prometheus_client) that also holds every family to
 * its row in docs/tgproxy.md and every value to its printed form.
 *
 * Thread-safety: reentrant; prom_scrape runs a child process.
 */
#ifndef TGKIT_TEST_PROM_H
#define TGKIT_TEST_PROM_H

#include <stddef.h>

/* Fetch url (e.g. "http://[::1]:3129/") and parse it with metric prefix `prefix`; the
   canonical sample lines ("\nname{k=v,...} value", labels sorted) into out (cap bytes,
   NUL-terminated). 0, or -1 when the page fails the script's checks (why on stderr). */
int prom_scrape(const char *url, const char *prefix, char *out, size_t cap);

/* prom_scrape of tgproxy's page at http://127.0.0.1:port/ into a malloc'ed buffer (1 MiB,
   the caller frees it), or NULL when the page fails the checks. */
char *prom_scrape_local(unsigned port);

/* The value of sample key ("name{k=v}", "name{}") in a prom_scrape page; NAN if absent. */
double prom_sample(const char *page, const char *key);

#endif
