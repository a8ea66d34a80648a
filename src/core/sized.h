/*
 * sized: copy option and statistics structs across the ABI boundary by the size the caller
 * was compiled with (see docs/abi.md, "Structs that grow").
 *
 * Public option structs only ever grow at the end. Each public function taking one is a
 * macro in its header that passes sizeof(the struct) as the caller's header declares it, so
 * the library knows how much the caller has:
 *  - an older caller (smaller struct): the fields it lacks read as zero, i.e. their default;
 *  - a newer caller (larger struct): accepted while every byte the library does not know is
 *    zero (the caller set nothing this library could not honour), refused otherwise.
 * Statistics structs go the other way: the library writes no more than the caller has.
 *
 * Thread-safety: pure functions over their arguments.
 */
#ifndef TGKIT_CORE_SIZED_H
#define TGKIT_CORE_SIZED_H

#include <stdbool.h>
#include <stddef.h>

/* Copy src (src_size bytes, NULL = all defaults) into dst (dst_size bytes), zero-filling what
 * src lacks. Returns false when src is larger and a byte past dst_size is not zero. */
bool tg__sized_in(void *dst, size_t dst_size, const void *src, size_t src_size);

/* Copy min(dst_size, src_size) bytes of src to dst (NULL dst: nothing). */
void tg__sized_out(void *dst, size_t dst_size, const void *src, size_t src_size);

/* The message every public entry point uses when tg__sized_in refuses. */
#define TG__SIZED_ERRMSG                                                                           \
    "sets options this library version does not know (built against a newer tgbot.h?)"

#endif
