/*
 * allochook: process-wide malloc counter for benchmarks.
 *
 * Linked only into bench executables (never into the libraries). It interposes malloc, calloc,
 * realloc, free, posix_memalign, aligned_alloc and memalign and forwards to glibc's __libc_*
 * entry points, counting calls with relaxed atomics. Under AddressSanitizer it does not
 * interpose (ASan owns malloc) and tg__allochook_active() returns 0.
 *
 * Thread-safety: the counters are atomics; reading them from any thread is fine.
 */
#ifndef TGKIT_CORE_ALLOCHOOK_H
#define TGKIT_CORE_ALLOCHOOK_H

#include <stdint.h>

int tg__allochook_active(void);      /* 1 when counts are real */
uint64_t tg__allochook_allocs(void); /* malloc-family calls that returned new memory */
uint64_t tg__allochook_frees(void);
uint64_t tg__allochook_bytes(void); /* bytes requested in total */

#endif
