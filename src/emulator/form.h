/*
 * form: pure parsers for the request bodies the Bot API accepts besides JSON:
 * application/x-www-form-urlencoded (also used for GET query strings) and
 * multipart/form-data (RFC 7578). Bytes in, a list of fields out; no I/O, no global state.
 *
 * Every field's name and value is a NUL-terminated copy owned by the emu_form (values may
 * also contain NUL bytes: use value_len). A multipart part with a filename is a file
 * (is_file), with its Content-Type kept when given.
 *
 * Limits: at most EMU_FORM_MAX_FIELDS fields; names up to 255 bytes. Anything malformed is
 * an error with a message saying what and where (byte offset), never a crash.
 * Ownership: the caller owns the emu_form (init/cleanup). Thread-safety: none needed.
 */
#ifndef TGKIT_EMULATOR_FORM_H
#define TGKIT_EMULATOR_FORM_H

#include <stdbool.h>
#include <stddef.h>

#include "core/arena.h"

#define EMU_FORM_MAX_FIELDS 512

typedef struct emu_field {
    const char *name;
    const char *value; /* NUL-terminated; may hold NUL bytes (files) */
    size_t value_len;
    const char *filename;     /* multipart files only, else NULL */
    const char *content_type; /* multipart parts that name one, else NULL */
    bool is_file;
} emu_field;

typedef struct emu_form {
    emu_field *fields; /* in the arena */
    size_t count;
    size_t cap;
    tg__arena arena;
    char err[160]; /* last error: "multipart: part 2: no Content-Disposition (at byte 88)" */
} emu_form;

void emu_form_init(emu_form *f);
void emu_form_cleanup(emu_form *f); /* NULL-safe */

/* Append one field (copies name and value). 0, or -1 with f->err set. */
int emu_form_add(emu_form *f, const char *name, size_t name_len, const char *value,
                 size_t value_len);

/* Parse "a=1&b=x%20y" (a '+' is a space). 0, or -1 with f->err set. */
int emu_form_urlencoded(emu_form *f, const char *src, size_t len);

/* Parse a multipart/form-data body; content_type is the request's header (its boundary
 * parameter is required). 0, or -1 with f->err set. */
int emu_form_multipart(emu_form *f, const char *content_type, const char *body, size_t len);

/* The first field named name, or NULL. */
const emu_field *emu_form_get(const emu_form *f, const char *name);

#endif
