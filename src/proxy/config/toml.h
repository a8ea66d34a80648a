/*
 * toml: a strict parser for the TOML subset tgproxy's configuration uses.
 *
 * Bytes in, tree out: toml_parse() does no I/O, so it is fuzzed (fuzz/proxy_toml) and the
 * config loader, the tests and the fuzzer share it. Supported, following TOML 1.0:
 *   - tables [a] and [a.b.c] (bare or quoted key parts), dotted keys, inline tables;
 *   - bare, "basic" and 'literal' keys;
 *   - strings: basic (all TOML 1.0 escapes), literal, and both multi-line forms;
 *   - integers: decimal with sign and '_' separators, 0x / 0o / 0b; 64-bit, overflow is
 *     an error; floats (fraction, exponent, inf, nan); booleans;
 *   - arrays (mixed types, multi-line, comments inside, trailing comma);
 *   - comments, LF and CRLF line ends, an optional UTF-8 byte order mark.
 * Not supported (clear error): arrays of tables [[x]], dates and times.
 * Strict: invalid UTF-8, control characters, duplicate keys, tables defined twice,
 * extending an inline table or a table closed by the TOML rules are errors.
 *
 * Errors are one line, "name:line:col: what, expected X"; columns count characters from 1.
 * Messages quote keys but never string values, so a secret in a value cannot leak.
 *
 * Limits (hostile input cannot exhaust memory or time): TOML_MAX_DEPTH nested arrays or
 * inline tables, TOML_MAX_KEYS keys per table, TOML_MAX_KEY_PARTS parts per dotted key,
 * TOML_MAX_ARENA bytes of tree.
 *
 * Ownership: everything in a toml_doc (tables, keys, strings) lives in its arena and dies
 * with toml_doc_cleanup(). The input text is not referenced after toml_parse() returns.
 * Thread-safety: a doc is not shared while being parsed; afterwards it is read-only.
 */
#ifndef TGPROXY_TOML_H
#define TGPROXY_TOML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"

#define TOML_MAX_DEPTH     32          /* nested arrays / inline tables */
#define TOML_MAX_KEYS      1024        /* keys in one table */
#define TOML_MAX_KEY_PARTS 16          /* parts of one dotted key or table header */
#define TOML_MAX_ARENA     (32u << 20) /* bytes of tree per document */
#define TOML_MAX_INPUT     (1u << 20)  /* bytes of text per document */

enum toml_status { TOML_OK = 0, TOML_BAD = 1, TOML_NOMEM = 2 };

enum toml_type {
    TOML_STRING = 1,
    TOML_INTEGER,
    TOML_FLOAT,
    TOML_BOOL,
    TOML_ARRAY,
    TOML_TABLE,
};

/* How a table came to exist: decides whether it may be extended later (TOML 1.0 rules). */
enum toml_origin {
    TOML_ORIGIN_ROOT = 0,
    TOML_ORIGIN_IMPLICIT, /* parent of a [a.b] header; [a] may still define it once */
    TOML_ORIGIN_HEADER,   /* defined by a [header] */
    TOML_ORIGIN_DOTTED,   /* created by a dotted key a.b = ... */
    TOML_ORIGIN_INLINE,   /* { ... }: closed for good */
};

struct toml_pos {
    uint32_t line; /* from 1 */
    uint32_t col;  /* from 1, in characters */
};

struct toml_table;

struct toml_value {
    enum toml_type type;
    struct toml_pos pos;     /* first character of the value (or of the [header]) */
    struct toml_value *next; /* next element when this value is in an array */
    union {
        struct {
            const char *ptr; /* NUL-terminated UTF-8; may contain NUL from \u0000 */
            size_t len;
        } str;
        int64_t integer;
        double fp;
        bool boolean;
        struct {
            struct toml_value *first;
            size_t n;
        } array;
        struct toml_table *table;
    } u;
};

struct toml_kv {
    const char *key; /* NUL-terminated, arena */
    size_t key_len;
    struct toml_pos pos; /* of the key (or of the header that created the table) */
    struct toml_value *value;
    struct toml_kv *next; /* in document order */
};

struct toml_table {
    struct toml_kv *first;
    struct toml_kv *last;
    size_t n;
    enum toml_origin origin;
    uint32_t owner; /* parse context that created a dotted table */
};

struct toml_doc {
    tg__arena arena;
    struct toml_table *root; /* NULL until a successful parse */
    const char *name;        /* copy of the name given to toml_parse */
};

/*
 * Parse text[0..len) into doc. doc need not be initialised; on any return it owns an
 * arena that toml_doc_cleanup() must release.
 *
 * name  used in messages only (a file name, "<cmdline>"); copied.
 * err   receives "name:line:col: what, expected X" on TOML_BAD or TOML_NOMEM (may be NULL).
 * Returns TOML_OK, TOML_BAD or TOML_NOMEM. Pure: no I/O, no global state.
 */
enum toml_status toml_parse(struct toml_doc *doc, const char *name, const char *text, size_t len,
                            char *err, size_t errlen);

/* Release the doc's arena. NULL-safe; the doc may be parsed into again. */
void toml_doc_cleanup(struct toml_doc *doc);

/* The entry named key (exact bytes) in t, or NULL. Borrowed from the doc. */
const struct toml_kv *toml_table_find(const struct toml_table *t, const char *key, size_t key_len);

/* "string", "integer", ... for messages; static. */
const char *toml_type_name(enum toml_type type);

#endif
