/*
 * gen: a configuration generation: one loaded config and what the engine derives from it
 * for new connections (the secrets sorted by kind for the handshake, the per-secret limits,
 * each secret's slot in the label registry), immutable once built and shared by reference
 * count.
 *
 * The server starts with generation 1; every accepted reload (SIGHUP) builds the next one
 * and publishes it (conn.h conn_shared_publish). A worker takes the current generation for
 * each connection it accepts, and the connection keeps its reference until it ends, so an
 * established relay never sees a reload: its secret, DC table, fronting target and timeouts
 * stay the ones it started with. A generation is freed when its last reference goes.
 *
 * Per-secret state that must be continuous across reloads is keyed by the secret's label,
 * never by its position in the file: the label registry (struct gen_labels) gives each label
 * seen since start a fixed slot (per-secret counters, metrics), and limits_new carries a
 * label's limit state (open connections, client addresses, quota use) into the next
 * generation (limits.h).
 *
 * Ownership: gen_new borrows cfg (which must outlive the generation) or takes over *own
 * (moved: *own is left empty). Thread-safety: a built generation is read-only; gen_ref and
 * gen_unref may run on any thread. The registry is appended to by the controlling thread
 * only (gen_new) and read by any thread (gen_labels_count, gen_labels_name).
 */
#ifndef TGPROXY_GEN_H
#define TGPROXY_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/config/config.h"
#include "proxy/wire/faketls.h"
#include "proxy/wire/obfs2.h"

#define GEN_LABELS_MAX 8192       /* labels the registry holds over a process's life */
#define GEN_NO_SLOT    UINT32_MAX /* a secret whose label found no room in the registry */

struct limits;

/* Every secret label seen since start, each at a fixed slot. */
struct gen_labels {
    char (*name)[CONFIG_LABEL_MAX]; /* GEN_LABELS_MAX entries */
    uint32_t n;                     /* atomic: slots in use (release after name[n-1] is set) */
};

struct gen {
    uint32_t refs; /* atomic */
    uint64_t seq;  /* 1 for the config the server started with, then +1 per reload */
    const struct config *cfg;
    struct config own;             /* cfg points here when the generation owns its config */
    struct obfs2_candidate *plain; /* dd / classic secrets for plain obfs2 */
    size_t *plain_idx;             /* plain[i] is cfg->secrets[plain_idx[i]] */
    size_t nplain;
    struct faketls_key *ee; /* ee secrets for FakeTLS */
    size_t *ee_idx;         /* ee[i] is cfg->secrets[ee_idx[i]] */
    size_t nee;
    struct limits *limits; /* per-secret limits ([limits.LABEL]), state shared by label */
    uint32_t *slot;        /* cfg->secrets[i]'s label slot, or GEN_NO_SLOT */
    bool fast_mode;
    bool dyn_records; /* dynamic record sizing toward FakeTLS clients */
};

/* 0 or -ENOMEM. */
int gen_labels_init(struct gen_labels *r);
void gen_labels_cleanup(struct gen_labels *r);
/* Slots in use now (acquire: their names are readable). */
uint32_t gen_labels_count(const struct gen_labels *r);
/* Label of slot i < gen_labels_count(); stable for the registry's life. */
const char *gen_labels_name(const struct gen_labels *r, uint32_t i);

/*
 * Build a generation with one reference. Exactly one of cfg (borrowed) and own (moved into
 * the generation; *own is left config_init'ed) is non-NULL. prev (may be NULL) is the
 * generation it follows: limit state is carried over by label. labels: the registry, which
 * gets a slot for each new label (controlling thread only). 0 or -ENOMEM (nothing kept;
 * *own is then still the caller's).
 */
int gen_new(const struct config *cfg, struct config *own, const struct gen *prev,
            struct gen_labels *labels, uint64_t seq, struct gen **out);
void gen_ref(struct gen *g);
/* Drop a reference; the last one frees the generation. NULL-safe. */
void gen_unref(struct gen *g);

#endif
