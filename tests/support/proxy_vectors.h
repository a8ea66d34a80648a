/*
 * proxy_vectors: read the proxy test vectors (tests/vectors/) with jansson.
 *
 * pv_load() returns the parsed document (fails the test if missing); free with json_decref.
 * pv_str() follows a '/'-separated path of object keys and array indexes ("cases/0/dc") and
 * fails the test when a step is missing. pv_hex() decodes a *_hex field into a malloc'ed
 * buffer (caller frees with free()). Test-only code: failures abort the current test.
 */
#ifndef TGTEST_PROXY_VECTORS_H
#define TGTEST_PROXY_VECTORS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

json_t *pv_load(const char *rel);                /* rel under tests/: "vectors/x.json" */
json_t *pv_get(json_t *root, const char *path);  /* NULL if absent */
json_t *pv_need(json_t *root, const char *path); /* fails the test if absent */
const char *pv_str(json_t *root, const char *path);
long long pv_int(json_t *root, const char *path);
uint8_t *pv_hex(json_t *root, const char *path, size_t *len);
/* Hex-decode a literal; malloc'ed, caller frees. */
uint8_t *pv_unhex(const char *hex, size_t *len);

#endif
