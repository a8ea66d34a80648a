/* curlbody: see curlbody.h. */
#include "curlbody.h"

#include <stdlib.h>
#include <string.h>

size_t curlbody_write(char *p, size_t size, size_t n, void *user)
{
    struct curlbody *b = user;
    size_t k = size * n;
    if (b->len + k + 1 > b->cap) {
        size_t cap = (b->len + k + 1) * 2;
        char *q = realloc(b->p, cap);
        if (!q)
            return 0;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, k);
    b->len += k;
    b->p[b->len] = '\0';
    return k;
}
