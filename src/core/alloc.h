/*
 * alloc: the allocation wrappers every tgkit module uses instead of raw malloc.
 *
 * They add two things to the C library's allocator:
 *  - a per-thread count of calls, so tests and benchmarks can say "allocations per operation"
 *    for our own code (bench builds additionally link allochook.c, which counts every malloc
 *    in the process, libcurl's included);
 *  - failure injection for tests: tg__alloc_fail_at(N) makes the Nth allocation from now
 *    (process-wide) return NULL, so error paths can be walked for N = 1, 2, ...
 *
 * Thread-safety: all functions are safe to call from any thread. The call counter is
 * thread-local (no shared cache line on the hot path); failure injection is a process-wide
 * countdown meant for single-threaded tests.
 */
#ifndef TGKIT_CORE_ALLOC_H
#define TGKIT_CORE_ALLOC_H

#include <stddef.h>
#include <stdint.h>

void *tg__malloc(size_t n);
void *tg__calloc(size_t count, size_t size);
void *tg__realloc(void *p, size_t n);
void tg__free(void *p);          /* tg__free(NULL) is a no-op */
char *tg__strdup(const char *s); /* NULL in, NULL out */
char *tg__strndup(const char *s, size_t n);
void *tg__memdup(const void *p, size_t n);

/* Allocation calls (malloc, calloc, growing realloc) made by this thread through tg__*. */
uint64_t tg__alloc_calls(void);

/*
 * Test hook: the nth allocation through tg__* from now on fails (1 = the very next one).
 * 0 disables injection. Returns nothing; tg__alloc_failed() says whether one was injected.
 */
void tg__alloc_fail_at(uint64_t nth);
int tg__alloc_failed(void);

#endif
