/*
 * allochook: counts every allocation in a benchmark process. See allochook.h.
 * glibc exports __libc_malloc and friends, which lets us forward without dlsym (dlsym itself
 * allocates, which makes a dlsym-based hook recursive at start-up).
 */
#include "core/allochook.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>

#if defined(__SANITIZE_ADDRESS__)
#define TGKIT_NO_HOOK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TGKIT_NO_HOOK 1
#endif
#endif

static atomic_uint_fast64_t n_allocs, n_frees, n_bytes;

#ifndef TGKIT_NO_HOOK
void *__libc_malloc(size_t n);
void *__libc_calloc(size_t c, size_t n);
void *__libc_realloc(void *p, size_t n);
void __libc_free(void *p);
void *__libc_memalign(size_t align, size_t n);

void *malloc(size_t n);
void *calloc(size_t c, size_t n);
void *realloc(void *p, size_t n);
void free(void *p);
int posix_memalign(void **out, size_t align, size_t n);
void *aligned_alloc(size_t align, size_t n);
void *memalign(size_t align, size_t n);

static void count(size_t n)
{
    atomic_fetch_add_explicit(&n_allocs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&n_bytes, n, memory_order_relaxed);
}

void *malloc(size_t n)
{
    count(n);
    return __libc_malloc(n);
}

void *calloc(size_t c, size_t n)
{
    count(c * n);
    return __libc_calloc(c, n);
}

void *realloc(void *p, size_t n)
{
    count(n);
    return __libc_realloc(p, n);
}

void free(void *p)
{
    if (p)
        atomic_fetch_add_explicit(&n_frees, 1, memory_order_relaxed);
    __libc_free(p);
}

void *memalign(size_t align, size_t n)
{
    count(n);
    return __libc_memalign(align, n);
}

void *aligned_alloc(size_t align, size_t n)
{
    return memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    void *p = memalign(align, n);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

int tg__allochook_active(void)
{
    return 1;
}
#else
int tg__allochook_active(void)
{
    return 0;
}
#endif

uint64_t tg__allochook_allocs(void)
{
    return atomic_load_explicit(&n_allocs, memory_order_relaxed);
}

uint64_t tg__allochook_frees(void)
{
    return atomic_load_explicit(&n_frees, memory_order_relaxed);
}

uint64_t tg__allochook_bytes(void)
{
    return atomic_load_explicit(&n_bytes, memory_order_relaxed);
}
