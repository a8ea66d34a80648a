/*
 * json_floor: the JSON parse floors next to our tokenizer, on the shared Bot API fixtures
 * (small_update.json, large_update.json).
 *
 * Scenarios per fixture:
 *  - cjson_parse_*      cJSON DOM parse + delete (the floor DESIGN.md names for decoding);
 *  - jansson_parse_*    jansson DOM parse + decref (our differential-test oracle);
 *  - json_tokenize_*    tg__json_parse into a warm doc (no mapping);
 *  - json_tok_strings_* tokenize, then decode every string into a warm arena and every
 *                       number through the integer/double accessors: an upper bound on what
 *                       a generated typed decode does beyond tokenizing.
 * Each line reports ns/op and allocs/op with cJSON's parse of the same bytes as the floor.
 */
#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>
#include <jansson.h>

#include "bench.h"
#include "bot/json/json.h"
#include "core/alloc.h"

struct input {
    const char *src;
    size_t len;
    tg__jdoc doc;
    tg__arena arena;
};

static void run_cjson(void *ctx)
{
    struct input *in = ctx;
    cJSON *j = cJSON_ParseWithLength(in->src, in->len);
    if (!j) {
        fprintf(stderr, "cJSON failed to parse the fixture\n");
        exit(1);
    }
    tg__bench_sink((uint64_t)(uintptr_t)j->child);
    cJSON_Delete(j);
}

static void run_jansson(void *ctx)
{
    struct input *in = ctx;
    json_error_t err;
    json_t *j = json_loadb(in->src, in->len, 0, &err);
    if (!j) {
        fprintf(stderr, "jansson: %s\n", err.text);
        exit(1);
    }
    tg__bench_sink(json_object_size(j));
    json_decref(j);
}

static void run_tokenize(void *ctx)
{
    struct input *in = ctx;
    tg__jerr err;
    if (tg__json_parse(&in->doc, in->src, in->len, &err) != 0) {
        fprintf(stderr, "tokenizer: %s\n", err.msg);
        exit(1);
    }
    tg__bench_sink(in->doc.ntok);
}

static void run_tok_strings(void *ctx)
{
    struct input *in = ctx;
    run_tokenize(ctx);
    tg__arena_reset(&in->arena);
    const tg__jdoc *d = &in->doc;
    uint64_t acc = 0;
    for (uint32_t i = 0; i < d->ntok; i++) {
        const tg__jtok *t = &d->toks[i];
        if (t->type == TG__J_STRING) {
            size_t n = 0;
            if (tg__json_str_dup(d, i, &in->arena, &n))
                acc += n;
        } else if (t->type == TG__J_NUMBER) {
            int64_t v;
            double dv;
            if (!(t->flags & TG__JF_FRAC) && tg__json_get_i64(d, i, &v, NULL) == 0)
                acc += (uint64_t)v;
            else if (tg__json_get_double(d, i, &dv, NULL) == 0)
                acc += (uint64_t)(int64_t)dv;
        }
    }
    tg__bench_sink(acc);
}

static void bench_fixture(const char *file, const char *tag)
{
    struct input in;
    char rel[128], name[64];
    snprintf(rel, sizeof rel, "fixtures/botapi/%s", file);
    in.src = tg__bench_fixture(rel, &in.len);
    tg__jdoc_init(&in.doc, NULL);
    tg__arena_init(&in.arena, 0, 0);

    tg__bench_result floor, r;
    snprintf(name, sizeof name, "cjson_parse_%s", tag);
    tg__bench_run(name, run_cjson, &in, &floor);
    tg__bench_report(&floor, NULL);
    snprintf(name, sizeof name, "jansson_parse_%s", tag);
    tg__bench_run(name, run_jansson, &in, &r);
    tg__bench_report(&r, &floor);
    snprintf(name, sizeof name, "json_tokenize_%s", tag);
    tg__bench_run(name, run_tokenize, &in, &r);
    tg__bench_report(&r, &floor);
    snprintf(name, sizeof name, "json_tok_strings_%s", tag);
    tg__bench_run(name, run_tok_strings, &in, &r);
    tg__bench_report(&r, &floor);

    tg__arena_cleanup(&in.arena);
    tg__jdoc_cleanup(&in.doc);
    tg__free((void *)in.src);
}

int main(void)
{
    bench_fixture("small_update.json", "small");
    bench_fixture("large_update.json", "large");
    tg__bench_table();
    return 0;
}
