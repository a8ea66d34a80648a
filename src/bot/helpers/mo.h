/*
 * mo: a GNU gettext .mo catalog parsed from bytes, and the plural formula inside it.
 * Pure: bytes in, a catalog or an error message out; no I/O (i18n.c reads files).
 *
 * Layout (little or big endian, as the magic says): magic 0x950412de, revision (major 0 or
 * 1), N, offset of the originals table, offset of the translations table, hash size and
 * offset (ignored here). Each table has N (length, offset) pairs; every string must end
 * with a NUL inside the file at offset+length. Originals are "msgid", "msgid\0plural" or
 * "context\004msgid"; translations of plurals are the forms separated by NULs. The entry
 * with the empty msgid is the header: its Content-Type charset must be UTF-8 (or absent)
 * and its Plural-Forms gives nplurals and the C-like formula over n.
 */
#ifndef TGKIT_BOT_HELPERS_MO_H
#define TGKIT_BOT_HELPERS_MO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG__PLURAL_MAX_NODES 128
#define TG__PLURAL_MAX_DEPTH 32

/* A compiled plural formula: nodes in an array, root last. */
struct tg__plural_node {
    uint8_t op;      /* see plural.c */
    uint8_t a, b, c; /* operand node indices */
    uint32_t num;    /* literal value */
};

struct tg__plural {
    struct tg__plural_node nodes[TG__PLURAL_MAX_NODES];
    unsigned count; /* 0: the default "n != 1" */
    unsigned nplurals;
};

/* Compile "nplurals=N; plural=EXPR;" (the Plural-Forms value). 0, or -1 with err set. */
int tg__plural_parse(struct tg__plural *p, const char *s, size_t n, char *err, size_t errcap);
/* The form index for n, already clamped to 0..nplurals-1. */
unsigned tg__plural_eval(const struct tg__plural *p, uint64_t n);

struct tg__mo_entry {
    const char *orig; /* NUL-terminated; may contain \0 (plural) or \004 (context) inside */
    size_t orig_len;  /* up to the first NUL: the lookup key */
    const char *tr;
    size_t tr_len; /* all forms with their NULs */
};

struct tg__mo {
    char *data; /* owned copy of the file */
    size_t len;
    struct tg__mo_entry *entries; /* sorted by key (memcmp), owned */
    size_t count;
    struct tg__plural plural;
};

/* Parse data (copied) into mo. 0, or -1 with err set (mo left empty); -2 on out of memory. */
int tg__mo_parse(struct tg__mo *mo, const void *data, size_t len, char *err, size_t errcap);
void tg__mo_cleanup(struct tg__mo *mo);
/* The entry whose key is key[0..n), or NULL. */
const struct tg__mo_entry *tg__mo_find(const struct tg__mo *mo, const char *key, size_t n);
/* Form i of e's translation (NULL when e has fewer forms or the form is empty). */
const char *tg__mo_form(const struct tg__mo_entry *e, unsigned i);

#endif
