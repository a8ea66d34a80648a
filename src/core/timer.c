/*
 * timer: intrusive min-heap of deadlines. See timer.h.
 *
 * The heap is a complete binary tree of the timers themselves (parent/left/right links).
 * Node k (1-based, breadth first) is found from the root by the bits of k below its top bit:
 * 0 = left, 1 = right. Insertion appends at position count+1 and sifts up; removal moves the
 * node at position count into the hole and sifts it up or down. Sifting swaps nodes (links),
 * never keys, since the caller owns the storage.
 *
 * Invariants (tg__timers_check): root has no parent; every child's parent link points back;
 * no child is less than its parent by (deadline, seq); exactly count nodes; every node in the
 * heap has state ARMED, every node on the due list state DUE.
 */
#include "core/timer.h"

#include "core/clock.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

enum { ST_IDLE = 0, ST_ARMED = 1, ST_DUE = 2 };

#ifndef NDEBUG
static void check_owner(const tg__timers *h)
{
    if (h->owner != (unsigned long)pthread_self()) {
        fprintf(stderr, "tg__timers: used from a thread that does not own the heap\n");
        abort();
    }
}
#else
#define check_owner(h) ((void)0)
#endif

static uint64_t default_clock(void *user)
{
    (void)user;
    return tg__now_ns();
}

void tg__timers_init(tg__timers *h, tg__timer_clock_fn clock, void *clock_user)
{
    *h = (tg__timers){.clock = clock ? clock : default_clock, .clock_user = clock_user};
#ifndef NDEBUG
    h->owner = (unsigned long)pthread_self();
#endif
}

uint64_t tg__timers_now(const tg__timers *h)
{
    return h->clock(h->clock_user);
}

void tg__timer_init(tg__timer *t, tg__timer_fn fn, void *user)
{
    *t = (tg__timer){.fn = fn, .user = user};
}

static bool less(const tg__timer *a, const tg__timer *b)
{
    if (a->deadline_ns != b->deadline_ns)
        return a->deadline_ns < b->deadline_ns;
    return a->seq < b->seq;
}

/* The node at 1-based position k (1 <= k <= count). */
static tg__timer *node_at(const tg__timers *h, size_t k)
{
    int top = (int)(sizeof k * CHAR_BIT) - 1 - __builtin_clzl((unsigned long)k);
    tg__timer *n = h->root;
    for (int b = top - 1; b >= 0; b--)
        n = (k >> b) & 1 ? n->right : n->left;
    return n;
}

static void replace_in_parent(tg__timers *h, tg__timer *old, tg__timer *new_, tg__timer *parent)
{
    if (!parent)
        h->root = new_;
    else if (parent->left == old)
        parent->left = new_;
    else
        parent->right = new_;
}

/* Swap c with its parent p (c moves up one level). */
static void swap_with_parent(tg__timers *h, tg__timer *c)
{
    tg__timer *p = c->parent, *gp = p->parent;
    tg__timer *cl = c->left, *cr = c->right;
    if (p->left == c) {
        c->left = p;
        c->right = p->right;
        if (c->right)
            c->right->parent = c;
    } else {
        c->right = p;
        c->left = p->left;
        if (c->left)
            c->left->parent = c;
    }
    p->left = cl;
    p->right = cr;
    if (cl)
        cl->parent = p;
    if (cr)
        cr->parent = p;
    p->parent = c;
    c->parent = gp;
    replace_in_parent(h, p, c, gp);
}

static void sift_up(tg__timers *h, tg__timer *n)
{
    while (n->parent && less(n, n->parent))
        swap_with_parent(h, n);
}

static void sift_down(tg__timers *h, tg__timer *n)
{
    for (;;) {
        tg__timer *s = n->left;
        if (!s)
            return;
        if (n->right && less(n->right, s))
            s = n->right;
        if (!less(s, n))
            return;
        swap_with_parent(h, s);
    }
}

static void heap_insert(tg__timers *h, tg__timer *t)
{
    t->left = t->right = NULL;
    h->count++;
    if (h->count == 1) {
        t->parent = NULL;
        h->root = t;
        return;
    }
    tg__timer *p = node_at(h, h->count >> 1);
    t->parent = p;
    if (h->count & 1)
        p->right = t;
    else
        p->left = t;
    sift_up(h, t);
}

static void heap_remove(tg__timers *h, tg__timer *n)
{
    tg__timer *last = node_at(h, h->count);
    h->count--;
    if (last == h->root) { /* the only node, so n == last */
        h->root = NULL;
        return;
    }
    replace_in_parent(h, last, NULL, last->parent);
    if (last == n)
        return;
    /* last takes n's place (n's links are read after detaching last: one may have been it) */
    last->parent = n->parent;
    last->left = n->left;
    last->right = n->right;
    if (last->left)
        last->left->parent = last;
    if (last->right)
        last->right->parent = last;
    replace_in_parent(h, n, last, n->parent);
    if (last->parent && less(last, last->parent))
        sift_up(h, last);
    else
        sift_down(h, last);
}

static void due_unlink(tg__timers *h, tg__timer *t)
{
    /* due list: left = next, right = prev */
    if (t->right)
        t->right->left = t->left;
    else
        h->due_head = t->left;
    if (t->left)
        t->left->right = t->right;
    else
        h->due_tail = t->right;
}

static void detach(tg__timers *h, tg__timer *t)
{
    if (t->state == ST_ARMED)
        heap_remove(h, t);
    else if (t->state == ST_DUE)
        due_unlink(h, t);
    t->state = ST_IDLE;
    t->parent = t->left = t->right = NULL;
}

void tg__timer_add(tg__timers *h, tg__timer *t, uint64_t deadline_ns)
{
    check_owner(h);
    detach(h, t);
    t->deadline_ns = deadline_ns;
    t->seq = h->seq++;
    t->state = ST_ARMED;
    heap_insert(h, t);
}

void tg__timer_add_in(tg__timers *h, tg__timer *t, uint64_t delay_ns)
{
    uint64_t now = tg__timers_now(h);
    tg__timer_add(h, t, delay_ns > UINT64_MAX - now ? UINT64_MAX : now + delay_ns);
}

bool tg__timer_cancel(tg__timers *h, tg__timer *t)
{
    check_owner(h);
    bool was = t->state != ST_IDLE;
    detach(h, t);
    return was;
}

uint64_t tg__timers_next_deadline(const tg__timers *h)
{
    return h->root ? h->root->deadline_ns : UINT64_MAX;
}

int tg__timers_timeout_ms(const tg__timers *h, uint64_t now_ns)
{
    if (!h->root)
        return -1;
    uint64_t d = h->root->deadline_ns;
    if (d <= now_ns)
        return 0;
    uint64_t left = d - now_ns;
    uint64_t ms = left / 1000000u + (left % 1000000u != 0); /* no overflow near UINT64_MAX */
    return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

size_t tg__timers_run_due(tg__timers *h, uint64_t now_ns)
{
    check_owner(h);
    if (h->running) {
        fprintf(stderr, "tg__timers: run_due called from one of its own callbacks\n");
        abort();
    }
    /* 1. everything due now leaves the heap, in order, onto the due list */
    while (h->root && h->root->deadline_ns <= now_ns) {
        tg__timer *t = h->root;
        heap_remove(h, t);
        t->state = ST_DUE;
        t->parent = NULL;
        t->left = NULL;
        t->right = h->due_tail;
        if (h->due_tail)
            h->due_tail->left = t;
        else
            h->due_head = t;
        h->due_tail = t;
    }
    /* 2. fire them; callbacks may cancel (unlink) any of the rest, or rearm them */
    h->running = true;
    size_t fired = 0;
    while (h->due_head) {
        tg__timer *t = h->due_head;
        due_unlink(h, t);
        t->state = ST_IDLE;
        t->left = t->right = NULL;
        fired++;
        t->fn(t, now_ns);
    }
    h->running = false;
    return fired;
}

/* Positions are 1-based breadth first: a node at k has children at 2k and 2k+1. count nodes
 * with distinct positions all <= count make the tree complete. */
static int check_node(const tg__timers *h, const tg__timer *n, const tg__timer *parent,
                      size_t pos, size_t *count)
{
    if (!n)
        return 0;
    if (pos > h->count || n->parent != parent || n->state != ST_ARMED)
        return -1;
    if (parent && less(n, parent))
        return -1;
    (*count)++;
    if (check_node(h, n->left, n, pos * 2, count) ||
        check_node(h, n->right, n, pos * 2 + 1, count))
        return -1;
    return 0;
}

int tg__timers_check(const tg__timers *h)
{
    size_t count = 0;
    if (check_node(h, h->root, NULL, 1, &count) || count != h->count)
        return -1;
    for (const tg__timer *t = h->due_head; t; t = t->left)
        if (t->state != ST_DUE)
            return -1;
    return 0;
}
