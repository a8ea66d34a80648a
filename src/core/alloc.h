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

/*
 * Zeroed tables sized for the worst case but mostly never written (a slot per possible
 * label, a start-size hash table): from TG__TABLE_MIN bytes on they are mapped straight from
 * the kernel, so a page becomes resident only when first written (reads see the shared zero
 * page). calloc would clear, and so touch, anything below the C library's mmap threshold
 * (128 KiB on glibc): 64 KiB of revocation marks resident at start for nothing (issue 30).
 * Smaller tables come from tg__calloc. Free with tg__free_table and the same count and size.
 */
#define TG__TABLE_MIN ((size_t)16384)
void *tg__calloc_table(size_t count, size_t size);
void tg__free_table(void *p, size_t count, size_t size); /* NULL is a no-op */
/* Whether zeroed memory is an initialised default pthread mutex (PTHREAD_MUTEX_INITIALIZER
 * is all zero bytes, as on glibc and musl): then a zeroed table of mutexes needs no pass of
 * pthread_mutex_init (nor of _destroy), and its pages stay untouched until used. */
int tg__zeroed_mutex_ok(void);

/* Allocation calls (malloc, calloc, growing realloc) made by this thread through tg__*. */
uint64_t tg__alloc_calls(void);

/*
 * Test hook: the nth allocation through tg__* from now on fails (1 = the very next one).
 * 0 disables injection. Returns nothing; tg__alloc_failed() says whether one was injected.
 */
void tg__alloc_fail_at(uint64_t nth);
int tg__alloc_failed(void);

#endif
