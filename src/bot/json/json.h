/*
 * json: libtgbot's JSON tokenizer, decoding helpers and writer (the codec's primitives).
 *
 * CONTRACT (shared by the hand-written codec in src/bot/json/ and the generated code in
 * src/bot/api/; change both together).
 *
 * Tokenizer. tg__json_parse() validates the whole input strictly per RFC 8259 (no trailing
 * commas, no comments, valid escapes, valid UTF-8 without surrogates or overlongs, no lone
 * surrogate escapes, no leading zeros, depth/size/token limits) and fills a flat array of
 * tokens in document order. A container token is followed by its children; for objects,
 * children alternate key (a STRING token) and value. tok.next is the index of the first token
 * after the subtree, so skipping any value is O(1). Because validation is complete at parse
 * time, the accessors below never see malformed bytes.
 *
 * Memory. A tg__jdoc owns its token array and reuses it across parses (growth only), so a warm
 * doc parses with zero malloc calls. The input bytes are borrowed: they must outlive the doc's
 * use. Strings decoded into an arena are NUL-terminated copies; when a string has no escapes
 * it is copied with one memcpy.
 *
 * Errors. Every failure fills a tg__jerr: byte offset, the token (when known) and a message
 * "what: expected X, found Y". tg__json_path() turns a token index into a path such as
 * "result.entities[2].offset" by walking down from the root (costs nothing on success).
 * After a failed parse the doc holds the tokens completed so far as a consistent, truncated
 * tree, good for tg__json_path/tg__json_errmsg and nothing else.
 *
 * Thread-safety: none; a doc, decoder or writer is used by one thread at a time.
 */
#ifndef TGKIT_BOT_JSON_H
#define TGKIT_BOT_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/buf.h"

typedef enum tg__jtype {
    TG__J_NONE = 0,
    TG__J_OBJECT,
    TG__J_ARRAY,
    TG__J_STRING,
    TG__J_NUMBER,
    TG__J_TRUE,
    TG__J_FALSE,
    TG__J_NULL,
} tg__jtype;

/* Token flags */
#define TG__JF_ESCAPED 0x01 /* string: contains backslash escapes */
#define TG__JF_FRAC    0x02 /* number: has a fraction or exponent (not an integer literal) */
#define TG__JF_NEG     0x04 /* number: starts with '-' */
#define TG__JF_NUL     0x08 /* string: holds a \u0000 escape (decoded, U+0000 inside the text) */

typedef struct tg__jtok {
    uint32_t start; /* byte offset; strings: first byte after the opening quote */
    uint32_t len;   /* bytes; strings: raw length between the quotes (escapes undecoded);
                       containers: from the bracket to the closing bracket inclusive */
    uint32_t next;  /* index of the first token after this value's subtree */
    uint32_t count; /* objects: members (key/value pairs); arrays: elements; else 0 */
    uint8_t type;   /* tg__jtype */
    uint8_t flags;  /* TG__JF_* */
} tg__jtok;

typedef struct tg__jlimits {
    uint32_t max_depth;  /* nesting; 0 = 64 */
    size_t max_bytes;    /* input size; 0 = 64 MiB */
    uint32_t max_tokens; /* 0 = max_bytes/2 + 1 */
} tg__jlimits;

typedef struct tg__jerr {
    size_t offset; /* byte offset of the problem in the input */
    uint32_t tok;  /* token index when the error is about a token, else UINT32_MAX;
                      syntax errors: the innermost open container (so the path says where),
                      UINT32_MAX outside any container */
    char msg[192]; /* "what: expected X, found Y" (no path; see tg__json_errmsg) */
    bool nomem;    /* the failure is an allocation, not the input (TG_ERR_NOMEM, not DECODE) */
} tg__jerr;

typedef struct tg__jdoc {
    const char *src; /* borrowed input */
    size_t len;
    tg__jtok *toks; /* owned, reused across parses */
    uint32_t ntok;
    uint32_t cap;
    tg__jlimits lim;
} tg__jdoc;

void tg__jdoc_init(tg__jdoc *d, const tg__jlimits *lim); /* lim NULL = defaults */
void tg__jdoc_cleanup(tg__jdoc *d);                      /* NULL-safe */
/* Tokenize src[0..len). Returns 0, or -1 with *err filled (syntax, limits, out of memory). */
int tg__json_parse(tg__jdoc *d, const char *src, size_t len, tg__jerr *err);

/* Name of a token type for messages: "object", "array", "string", "number", "true"... */
const char *tg__json_type_name(tg__jtype t);
/* Append the path of token tok ("result.entities[2].offset"; "" for the root) to out. It walks
 * down from the root: O(depth x siblings), for one error message. A walk that names many
 * tokens builds its path on the way down with the two steps below instead. */
int tg__json_path(const tg__jdoc *d, uint32_t tok, tg__buf *out);
/* One step of a path as tg__json_path writes it: key token key (".key", or "key" when first,
 * or ["raw key"]), or element i of an array ("[i]"). 0 or -errno. */
int tg__json_path_key(const tg__jdoc *d, uint32_t key, bool first, tg__buf *out);
int tg__json_path_index(uint32_t i, tg__buf *out);
/* Work counter, for tests that assert how work grows with input: one per sibling or element
 * a path walk (tg__json_path) or the codec's unknown-key walk steps over, on this thread. */
extern _Thread_local uint64_t tg__json_steps;
/* One line: "<path>: <msg> (at byte N)". */
int tg__json_errmsg(const tg__jdoc *d, const tg__jerr *err, tg__buf *out);

/* ---- value accessors (tok must be a valid index; the type is checked) ---- */

/* Raw bytes of any value (strings include their quotes). */
static inline const char *tg__json_raw(const tg__jdoc *d, uint32_t tok, size_t *len)
{
    const tg__jtok *t = &d->toks[tok];
    if (t->type == TG__J_STRING) {
        *len = (size_t)t->len + 2;
        return d->src + t->start - 1;
    }
    *len = t->len;
    return d->src + t->start;
}
/* Compare a string token's decoded value with s[0..n). */
bool tg__json_str_eq(const tg__jdoc *d, uint32_t tok, const char *s, size_t n);
/* Decoded, NUL-terminated copy in the arena; *len (optional) excludes the NUL. NULL on OOM. */
char *tg__json_str_dup(const tg__jdoc *d, uint32_t tok, tg__arena *a, size_t *len);
/* Decoded string into out[0..cap), NUL-terminated; returns the decoded length or -1 if it
 * does not fit (it needs length + 1 bytes). */
long tg__json_str_copy(const tg__jdoc *d, uint32_t tok, char *out, size_t cap);
/* Integers: the token must be an integer literal (no fraction/exponent) within range.
 * Return 0 or -1 (err filled: "expected integer", "out of range for int32"...). */
int tg__json_get_i64(const tg__jdoc *d, uint32_t tok, int64_t *out, tg__jerr *err);
int tg__json_get_i32(const tg__jdoc *d, uint32_t tok, int32_t *out, tg__jerr *err);
/* Any number as a double (exact round trip of what tg__jw_double writes). */
int tg__json_get_double(const tg__jdoc *d, uint32_t tok, double *out, tg__jerr *err);
int tg__json_get_bool(const tg__jdoc *d, uint32_t tok, bool *out, tg__jerr *err);
/* Fill err with "what: expected <expected>, found <type of tok>" at tok. Returns -1. */
int tg__json_fail(const tg__jdoc *d, uint32_t tok, tg__jerr *err, const char *expected);

/* Find key in object tok (linear; for hand-written code such as the response envelope —
 * generated decoders use their own switch). Returns the value's token index or UINT32_MAX. */
uint32_t tg__json_obj_get(const tg__jdoc *d, uint32_t obj, const char *key);

/* ---- writer ---- */

/* Writes JSON into a tg__buf. Errors are sticky: after the first failure (cap, OOM, NaN)
 * every call is a no-op and err stays set, so encoders check once at the end. Commas are
 * handled by the writer: keys and array elements after the first get one automatically. */
typedef struct tg__jw {
    tg__buf *buf;
    int err; /* 0, -ENOMEM, -E2BIG, -EINVAL (NaN/Inf, depth) */
    uint32_t depth;
    uint64_t nonempty; /* bit i: container at depth i already has a member */
} tg__jw;

void tg__jw_init(tg__jw *w, tg__buf *buf); /* buf is borrowed; appends after its content */
void tg__jw_obj_begin(tg__jw *w);
void tg__jw_obj_end(tg__jw *w);
void tg__jw_arr_begin(tg__jw *w);
void tg__jw_arr_end(tg__jw *w);
void tg__jw_key(tg__jw *w, const char *key, size_t n); /* key must not need escaping */
/* tg__jw_key of a string literal: the compiler counts its length (a non-literal does not
   compile). */
#define TG__JW_KEY(w, lit) tg__jw_key((w), "" lit "", sizeof(lit) - 1)
/* Any key (escaped like a string value; invalid UTF-8 sets -EINVAL), for generic re-encoding
 * of decoded documents (unknown fields, tools, fuzzing). */
void tg__jw_key_escaped(tg__jw *w, const char *key, size_t n);
void tg__jw_str(tg__jw *w, const char *s); /* NULL writes null */
void tg__jw_strn(tg__jw *w, const char *s, size_t n);
void tg__jw_i64(tg__jw *w, int64_t v);
void tg__jw_double(tg__jw *w, double v); /* shortest text that reads back bit-exact */
void tg__jw_bool(tg__jw *w, bool v);
void tg__jw_null(tg__jw *w);
void tg__jw_raw(tg__jw *w, const char *json, size_t n); /* a complete JSON value */

#endif
