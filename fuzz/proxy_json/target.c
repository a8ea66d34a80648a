/*
 * fuzz target: the control API's JSON reader (src/proxy/wire/json.c), as request bodies and
 * the [api] state file reach it (src/proxy/daemon/apistore.c). Any input must parse into a
 * tree whose strings are NUL-free valid lengths and whose members are counted right, or be
 * refused with -EINVAL and an "offset N: ..." message; the state-file parser on the same
 * bytes must give unique valid labels or a message naming the file. Never a crash, a hang
 * or a read past the input.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/daemon/apistore.h"
#include "proxy/wire/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t walk(const struct json_val *v, int depth)
{
    if (depth > JSON_DEPTH_MAX + 1)
        abort();
    size_t nodes = 1, members = 0;
    if (v->type == JSON_STRING && strlen(v->str) != v->len)
        abort();
    for (const struct json_val *m = v->child; m; m = m->next) {
        if ((v->type == JSON_OBJECT) != (m->key != NULL))
            abort();
        nodes += walk(m, depth + 1);
        members++;
    }
    if ((v->type == JSON_ARRAY || v->type == JSON_OBJECT) && members != v->len)
        abort();
    return nodes;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size ? size : 1); /* exactly size bytes: ASan sees a read past it */
    if (!text)
        return 0;
    memcpy(text, data, size);
    char err[256];
    struct json_doc doc;
    int rc = json_parse(&doc, text, size, err, sizeof err);
    if (rc == 0) {
        if (walk(doc.root, 0) > JSON_NODES_MAX)
            abort();
        tg__buf b;
        tg__buf_init(&b, 1 << 20);
        if (doc.root->type == JSON_STRING && json_put_str(&b, doc.root->str, doc.root->len) == 0) {
            struct json_doc back; /* what we write reads back as the same string */
            if (json_parse(&back, b.data, b.len, err, sizeof err) != 0 ||
                back.root->type != JSON_STRING || back.root->len != doc.root->len ||
                memcmp(back.root->str, doc.root->str, doc.root->len) != 0)
                abort();
            json_doc_free(&back);
        }
        tg__buf_cleanup(&b);
        json_doc_free(&doc);
    } else if (rc != -EINVAL || strncmp(err, "offset ", 7) != 0) {
        abort();
    }
    struct apistore st;
    apistore_init(&st);
    rc = apistore_parse(&st, "fuzz.json", text, size, err, sizeof err);
    if (rc == 0) {
        for (size_t i = 0; i < st.n; i++)
            for (size_t k = 0; k < i; k++)
                if (strcmp(st.e[i].label, st.e[k].label) == 0)
                    abort();
    } else if (rc != -EINVAL || strncmp(err, "fuzz.json: ", 11) != 0) {
        abort();
    }
    apistore_cleanup(&st);
    free(text);
    return 0;
}
