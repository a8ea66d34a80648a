/*
 * sized: option and statistics structs copied by the caller's size. See sized.h.
 */
#include "core/sized.h"

#include <string.h>

bool tg__sized_in(void *dst, size_t dst_size, const void *src, size_t src_size)
{
    memset(dst, 0, dst_size);
    if (!src)
        return true;
    size_t n = src_size < dst_size ? src_size : dst_size;
    memcpy(dst, src, n);
    const unsigned char *extra = (const unsigned char *)src + n;
    for (size_t i = n; i < src_size; i++, extra++)
        if (*extra)
            return false;
    return true;
}

void tg__sized_out(void *dst, size_t dst_size, const void *src, size_t src_size)
{
    if (dst)
        memcpy(dst, src, src_size < dst_size ? src_size : dst_size);
}
