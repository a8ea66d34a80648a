/*
 * json: a small, strict JSON (RFC 8259) reader and a string writer, for the control API's
 * request bodies and its state file (src/proxy/daemon/api.c, apistore.c).
 *
 * json_parse() builds a tree in one allocation-per-node arena owned by a struct json_doc:
 * objects keep their members in document order (a duplicate key is refused, so a body
 * cannot say two things at once), strings are decoded (escapes, surrogate pairs) and must be
 * valid UTF-8 without U+0000 (they are handed on as C strings), numbers keep their integer
 * value when they have one. Nesting is capped at JSON_DEPTH_MAX and the input at the
 * caller's size limit, so a hostile body costs bounded time and memory.
 *
 * The proxy has no other JSON parser and must not use the bot's (src/bot and src/proxy never
 * include each other). This file is fuzzed (fuzz/proxy_json).
 *
 * Ownership: a json_doc owns every node and string; json_doc_free releases them (NULL-safe).
 * Thread-safety: none needed: a parsed doc is read-only.
 */
#ifndef TGPROXY_JSON_H
#define TGPROXY_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

#define JSON_DEPTH_MAX 32
#define JSON_NODES_MAX 65536 /* values in one document */

enum json_type { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

struct json_val {
    enum json_type type;
    bool b;          /* JSON_BOOL */
    bool is_int;     /* JSON_NUMBER with an exact int64_t value (no fraction or exponent) */
    int64_t i;       /* when is_int */
    double num;      /* JSON_NUMBER */
    const char *str; /* JSON_STRING: decoded, NUL-terminated, no NUL inside */
    size_t len;      /* JSON_STRING: bytes; JSON_ARRAY / JSON_OBJECT: members */
    const char *key; /* a member of an object: its decoded key */
    struct json_val *child, *next; /* first member; next sibling */
};

struct json_doc {
    struct json_val *root;
    void *blocks; /* the arena */
};

/*
 * Parse len bytes of text (need not be NUL-terminated) into doc. Returns 0, -EINVAL with
 * err = "offset N: what" (never quoting the input), or -ENOMEM. On failure doc is empty.
 */
int json_parse(struct json_doc *doc, const char *text, size_t len, char *err, size_t errlen);
void json_doc_free(struct json_doc *doc);

/* The member named key of an object, or NULL (also for a non-object). */
const struct json_val *json_get(const struct json_val *obj, const char *key);

/* Append s (n bytes) as a JSON string literal with quotes: '"', '\\' and controls escaped,
   and '<', '>', '&' as \u003c.. so the text is inert inside HTML too. 0 or -ENOMEM. */
int json_put_str(tg__buf *b, const char *s, size_t n);

#endif
