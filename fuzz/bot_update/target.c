/*
 * Fuzz target for the generated Update decoder: decode any bytes as an Update (a webhook
 * body); when that succeeds, encode the structs, decode that encoding again (must succeed
 * and see no unknown keys), encode again (must be byte-identical: a fixed point), and
 * encode once more keeping unknown keys (must be valid JSON). Failures must be clean errors
 * with a message; violations abort() so libFuzzer and the corpus replay report them.
 *
 * Inputs of the form "#TypeName\n<json>" decode as that type instead (any type or union
 * of the API; an unknown name is skipped). This lets the fuzzer reach union strategies
 * that Update never uses (presence, repeated discriminators, RichText's string and array).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bot/codec/codec.h"
#include "core/arena.h"
#include "core/buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

static tg__arena arena;
static tg__jdoc d1, d2;
static tg__buf a, b, msg;
static const tg__type *update;
static const tg__type *type; /* the type of the current input */

static void init_once(void)
{
    tg__arena_init(&arena, 0, (size_t)256 << 20);
    tg__jdoc_init(&d1, NULL);
    tg__jdoc_init(&d2, NULL);
    tg__buf_init(&a, 0);
    tg__buf_init(&b, 0);
    tg__buf_init(&msg, 0);
    update = tg__codec_type_by_name("Update");
    CHECK(update != NULL);
}

static void encode(const void *v, tg__buf *out, int flags)
{
    tg__jw w;
    tg__buf_reset(out);
    tg__jw_init(&w, out);
    tg__codec_encode(type, v, &w, flags);
    CHECK(w.err == 0);
}

/* The path the unknown-key walk builds on its way down is the one tg__json_path finds. */
static void same_path(void *ud, const tg__jdoc *d, uint32_t tok, bool variant, const char *path)
{
    (void)ud;
    (void)variant;
    tg__buf full;
    tg__buf_init(&full, 0);
    if (tg__json_path(d, tok, &full) == 0 && path)
        CHECK(strcmp(path, tg__buf_cstr(&full)) == 0);
    tg__buf_cleanup(&full);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!update)
        init_once();
    tg__arena_reset(&arena);
    tg__buf_reset(&msg);
    type = update;
    if (size >= 2 && data[0] == '#') {
        const uint8_t *nl = memchr(data, '\n', size < 64 ? size : 64);
        char name[64];
        if (!nl)
            return 0;
        memcpy(name, data + 1, (size_t)(nl - data) - 1);
        name[nl - data - 1] = '\0';
        type = tg__codec_type_by_name(name);
        if (!type)
            return 0;
        size -= (size_t)(nl - data) + 1;
        data = nl + 1;
    }
    void *v1;
    tg_status st = tg__codec_decode_json(type, (const char *)data, size, &arena, &d1, &v1, &msg);
    if (st != TG_OK) {
        CHECK(st == TG_ERR_DECODE || st == TG_ERR_NOMEM);
        CHECK(msg.len > 0);
        return 0;
    }
    tg__buf path;
    tg__buf_init(&path, 0);
    tg__codec_unknown_keys(type, &d1, 0, same_path, NULL, &path);
    tg__buf_cleanup(&path);
    encode(v1, &a, 0);
    void *v2;
    tg__buf_reset(&msg);
    st = tg__codec_decode_json(type, a.data, a.len, &arena, &d2, &v2, &msg);
    CHECK(st == TG_OK);
    CHECK(tg__codec_unknown_keys(type, &d2, 0, NULL, NULL, NULL) == 0);
    encode(v2, &b, 0);
    CHECK(a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
    encode(v1, &b, TG__ENC_KEEP_UNKNOWN);
    tg__jerr err;
    CHECK(tg__json_parse(&d2, b.data, b.len, &err) == 0);
    return 0;
}
