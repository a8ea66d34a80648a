/*
 * fuzz target: the TOML parser and the config loader on top of it (src/proxy/config/toml.c,
 * src/proxy/config/config.c). Any input must give OK with a walkable tree or BAD/NOMEM with a
 * "name:line:col: ..." message; the loader must then accept or reject without leaking.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/config/config.h"
#include "proxy/config/toml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Visit every value; checks the invariants the config loader relies on. */
static size_t walk(const struct toml_value *v, int depth)
{
    size_t n = 1;
    if (depth > TOML_MAX_DEPTH + TOML_MAX_KEY_PARTS * 2 || v->pos.line == 0 || v->pos.col == 0)
        abort();
    if (v->type == TOML_STRING && v->u.str.ptr[v->u.str.len] != '\0')
        abort();
    if (v->type == TOML_ARRAY) {
        size_t count = 0;
        for (const struct toml_value *e = v->u.array.first; e; e = e->next, count++)
            n += walk(e, depth + 1);
        if (count != v->u.array.n)
            abort();
    }
    if (v->type == TOML_TABLE) {
        size_t count = 0;
        for (const struct toml_kv *kv = v->u.table->first; kv; kv = kv->next, count++) {
            if (toml_table_find(v->u.table, kv->key, kv->key_len) != kv)
                abort(); /* keys are unique within a table */
            n += walk(kv->value, depth + 1);
        }
        if (count != v->u.table->n)
            abort();
    }
    return n;
}

static void ignore_warning(void *user, const char *msg)
{
    (void)user;
    if (strncmp(msg, "fuzz.toml:", 10) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct toml_doc doc;
    char err[512];
    enum toml_status st = toml_parse(&doc, "fuzz.toml", (const char *)data, size, err, sizeof err);
    if (st == TOML_OK) {
        struct toml_value root = {.type = TOML_TABLE, .pos = {1, 1}, .u.table = doc.root};
        walk(&root, 0);
    } else if (strncmp(err, "fuzz.toml:", 10) != 0) {
        abort();
    }
    toml_doc_cleanup(&doc);

    struct config cfg;
    config_init(&cfg);
    int rc = config_parse(&cfg, "fuzz.toml", (const char *)data, size, err, sizeof err,
                          ignore_warning, NULL);
    if (rc == 0 && (cfg.nlisten == 0 || cfg.nsecrets == 0))
        abort();
    if (rc != 0 && strncmp(err, "fuzz.toml", 9) != 0)
        abort();
    config_cleanup(&cfg);
    return 0;
}
