/* Helpers to read the proxy vectors (tests/vectors/) with jansson (see proxy_vectors.h). */
#include "proxy_vectors.h"

#include "tgtest.h"

json_t *pv_load(const char *rel)
{
    json_error_t e;
    const char *path = tgtest_data_path(rel);
    json_t *root = json_load_file(path, 0, &e);
    if (!root)
        fail_msg("cannot load %s: %s (line %d)", path, e.text, e.line);
    return root;
}

json_t *pv_get(json_t *root, const char *path)
{
    json_t *cur = root;
    char key[256];
    const char *p = path;
    while (cur && *p) {
        size_t n = strcspn(p, "/");
        if (n >= sizeof key)
            return NULL;
        memcpy(key, p, n);
        key[n] = '\0';
        if (json_is_array(cur)) {
            char *end;
            unsigned long i = strtoul(key, &end, 10);
            cur = (*end == '\0' && n > 0) ? json_array_get(cur, i) : NULL;
        } else {
            cur = json_object_get(cur, key);
        }
        p += n;
        if (*p == '/')
            p++;
    }
    return cur;
}

json_t *pv_need(json_t *root, const char *path)
{
    json_t *v = pv_get(root, path);
    if (!v)
        fail_msg("vector field %s missing", path);
    return v;
}

const char *pv_str(json_t *root, const char *path)
{
    json_t *v = pv_need(root, path);
    if (!json_is_string(v))
        fail_msg("vector field %s is not a string", path);
    return json_string_value(v);
}

long long pv_int(json_t *root, const char *path)
{
    json_t *v = pv_need(root, path);
    if (!json_is_integer(v))
        fail_msg("vector field %s is not an integer", path);
    return json_integer_value(v);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

uint8_t *pv_unhex(const char *hex, size_t *len)
{
    size_t n = strlen(hex);
    if (n % 2)
        fail_msg("odd-length hex in vector");
    uint8_t *out = malloc(n / 2 + 1);
    if (!out)
        fail_msg("out of memory");
    for (size_t i = 0; i < n / 2; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            free(out);
            fail_msg("bad hex digit in vector");
        }
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    if (len)
        *len = n / 2;
    return out;
}

uint8_t *pv_hex(json_t *root, const char *path, size_t *len)
{
    return pv_unhex(pv_str(root, path), len);
}
