/*
 * curlbody: a libcurl answer's body collected into one growing, NUL-terminated buffer, for
 * the tests' and benchmarks' HTTP clients (CURLOPT_WRITEFUNCTION curlbody_write with
 * CURLOPT_WRITEDATA a struct curlbody *).
 *
 * Ownership: struct curlbody is caller storage, zeroed to start; set len to 0 to reuse it
 * for the next answer, free(p) when done. Thread-safety: one transfer at a time per body.
 */
#ifndef TGKIT_TEST_CURLBODY_H
#define TGKIT_TEST_CURLBODY_H

#include <stddef.h>

struct curlbody {
    char *p; /* NUL-terminated once anything arrived; NULL before */
    size_t len, cap;
};

/* Append size * n bytes; returns them, or 0 (libcurl's write error) when out of memory. */
size_t curlbody_write(char *p, size_t size, size_t n, void *user);

#endif
