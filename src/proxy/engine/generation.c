/*
 * generation: configuration generations and the label registry. See generation.h.
 * Invariant: a generation never changes after gen_new returns; the registry only grows, and a
 * slot's name is written before the count that makes it visible (release / acquire).
 */
#include "proxy/engine/generation.h"

#include "core/alloc.h"
#include "core/str.h"
#include "proxy/wire/crypto.h"
#include "proxy/engine/keyscan.h"
#include "proxy/engine/limits.h"

#include <errno.h>
#include <string.h>

int gen_labels_init(struct gen_labels *r)
{
    r->n = 0;
    r->name = tg__calloc(GEN_LABELS_MAX, sizeof *r->name);
    return r->name ? 0 : -ENOMEM;
}

void gen_labels_cleanup(struct gen_labels *r)
{
    if (!r)
        return;
    tg__free(r->name);
    r->name = NULL;
    r->n = 0;
}

uint32_t gen_labels_count(const struct gen_labels *r)
{
    return __atomic_load_n(&r->n, __ATOMIC_ACQUIRE);
}

const char *gen_labels_name(const struct gen_labels *r, uint32_t i)
{
    return i < gen_labels_count(r) ? r->name[i] : "";
}

/* The slot of label, added when new; GEN_NO_SLOT when the registry is full. */
static uint32_t label_slot(struct gen_labels *r, const char *label)
{
    uint32_t n = r->n; /* only this thread appends */
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(r->name[i], label) == 0)
            return i;
    if (n >= GEN_LABELS_MAX)
        return GEN_NO_SLOT;
    tg__strlcpy(r->name[n], label, sizeof r->name[n]);
    __atomic_store_n(&r->n, n + 1, __ATOMIC_RELEASE);
    return n;
}

/* Split the secrets into FakeTLS keys and plain obfs2 candidates. */
static int split_secrets(struct gen *g)
{
    const struct config *cfg = g->cfg;
    size_t n = cfg->nsecrets ? cfg->nsecrets : 1;
    g->plain = tg__calloc(n, sizeof *g->plain);
    g->plain_idx = tg__calloc(n, sizeof *g->plain_idx);
    g->ee = tg__calloc(n, sizeof *g->ee);
    g->ee_idx = tg__calloc(n, sizeof *g->ee_idx);
    g->slot = tg__calloc(n, sizeof *g->slot);
    if (!g->plain || !g->plain_idx || !g->ee || !g->ee_idx || !g->slot)
        return -ENOMEM;
    for (size_t i = 0; i < cfg->nsecrets; i++) {
        const struct secret *sec = &cfg->secrets[i].secret;
        if (sec->kind == SECRET_EE) {
            memcpy(g->ee[g->nee].key, sec->key, 16);
            g->ee[g->nee].domain = sec->domain;
            g->ee[g->nee].domain_len = sec->domain_len;
            g->ee[g->nee].domain_hash = faketls_domain_hash(sec->domain, sec->domain_len);
            g->ee[g->nee].id = keyscan_key_id(sec->key, sec->domain, sec->domain_len);
            g->ee_idx[g->nee++] = i;
        } else {
            memcpy(g->plain[g->nplain].key, sec->key, 16);
            g->plain[g->nplain].tags = obfs2_tags_for(sec->kind, false);
            g->plain_idx[g->nplain++] = i;
        }
    }
    return 0;
}

static void gen_free(struct gen *g)
{
    limits_free(g->limits);
    if (g->ee)
        crypto_wipe(g->ee, sizeof *g->ee * (g->nee ? g->nee : 1));
    if (g->plain)
        crypto_wipe(g->plain, sizeof *g->plain * (g->nplain ? g->nplain : 1));
    tg__free(g->plain);
    tg__free(g->plain_idx);
    tg__free(g->ee);
    tg__free(g->ee_idx);
    tg__free(g->slot);
    config_cleanup(&g->own);
    tg__free(g);
}

int gen_new(const struct config *cfg, struct config *own, const struct gen *prev,
            struct gen_labels *labels, uint64_t seq, struct gen **out)
{
    *out = NULL;
    struct gen *g = tg__calloc(1, sizeof *g);
    if (!g)
        return -ENOMEM;
    g->refs = 1;
    g->seq = seq;
    config_init(&g->own);
    g->cfg = cfg ? cfg : &g->own;
    if (!cfg)
        g->own = *own; /* the arrays move with the struct */
    int rc = split_secrets(g);
    if (rc == 0 && !(g->limits = limits_new(g->cfg, prev ? prev->limits : NULL)))
        rc = -ENOMEM;
    if (rc != 0) {
        if (!cfg)
            config_init(&g->own); /* the caller keeps its config */
        gen_free(g);
        return rc;
    }
    for (size_t i = 0; i < g->cfg->nsecrets; i++) {
        const char *label = g->cfg->secrets[i].label;
        /* the previous generation's slot at the same place first (see state_for) */
        if (prev && i < prev->cfg->nsecrets && prev->slot[i] != GEN_NO_SLOT &&
            strcmp(prev->cfg->secrets[i].label, label) == 0)
            g->slot[i] = prev->slot[i];
        else
            g->slot[i] = label_slot(labels, label);
    }
    g->fast_mode = g->cfg->fast_mode; /* brief 3.3: on by default (fast-mode) */
    g->dyn_records = g->cfg->dynamic_records;
    if (!cfg)
        config_init(own);
    *out = g;
    return 0;
}

void gen_ref(struct gen *g)
{
    __atomic_add_fetch(&g->refs, 1, __ATOMIC_RELAXED);
}

void gen_unref(struct gen *g)
{
    if (g && __atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL) == 0)
        gen_free(g);
}
