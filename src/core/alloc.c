/*
 * alloc: counting, failure-injecting wrappers over the C allocator. See alloc.h.
 * Invariant: when injection is off, the only shared memory touched is one relaxed load of
 * a flag that never changes, so the wrappers do not bounce cache lines between threads.
 */
#include "core/alloc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static _Thread_local uint64_t calls;
static atomic_bool inject_on;
static atomic_uint_fast64_t inject_left;
static atomic_int inject_hit;

static int should_fail(void)
{
    calls++;
    if (!atomic_load_explicit(&inject_on, memory_order_relaxed))
        return 0;
    uint_fast64_t left = atomic_fetch_sub(&inject_left, 1);
    if (left == 1) {
        atomic_store(&inject_on, false);
        atomic_store(&inject_hit, 1);
        return 1;
    }
    return 0;
}

void *tg__malloc(size_t n)
{
    if (should_fail())
        return NULL;
    return malloc(n ? n : 1);
}

void *tg__calloc(size_t count, size_t size)
{
    if (should_fail())
        return NULL;
    return calloc(count ? count : 1, size ? size : 1);
}

void *tg__realloc(void *p, size_t n)
{
    if (should_fail())
        return NULL;
    return realloc(p, n ? n : 1);
}

void tg__free(void *p)
{
    free(p);
}

void *tg__calloc_table(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size)
        return NULL;
    size_t n = count * size;
    if (n < TG__TABLE_MIN)
        return tg__calloc(count, size);
    if (should_fail())
        return NULL;
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

int tg__zeroed_mutex_ok(void)
{
    static const pthread_mutex_t init = PTHREAD_MUTEX_INITIALIZER;
    static const pthread_mutex_t zero;
    return memcmp(&init, &zero, sizeof init) == 0;
}

void tg__free_table(void *p, size_t count, size_t size)
{
    if (!p)
        return;
    size_t n = count * size;
    if (n < TG__TABLE_MIN)
        tg__free(p);
    else
        munmap(p, n);
}

char *tg__strdup(const char *s)
{
    return s ? tg__strndup(s, strlen(s)) : NULL;
}

char *tg__strndup(const char *s, size_t n)
{
    if (!s)
        return NULL;
    size_t len = strnlen(s, n);
    char *d = tg__malloc(len + 1);
    if (!d)
        return NULL;
    memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

void *tg__memdup(const void *p, size_t n)
{
    void *d = tg__malloc(n);
    if (d && n)
        memcpy(d, p, n);
    return d;
}

uint64_t tg__alloc_calls(void)
{
    return calls;
}

void tg__alloc_fail_at(uint64_t nth)
{
    atomic_store(&inject_hit, 0);
    atomic_store(&inject_left, nth);
    atomic_store(&inject_on, nth != 0);
}

int tg__alloc_failed(void)
{
    return atomic_load(&inject_hit);
}
