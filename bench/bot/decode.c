/*
 * bench decode: typed decode of the shared webhook Updates (small: 267 bytes, large: 1099
 * bytes) into the generated structs, next to cJSON's bare DOM parse of the same bytes (the
 * floor; no mapping to types at all).
 *
 * One op of ours = what a webhook or long-poll handler pays: copy the body into the arena
 * (raw spans must outlive the input), tokenize, decode every field, then reset the arena.
 * One op of cJSON = cJSON_ParseWithLength + cJSON_Delete. Goal: ratio <= 0.5, 0 allocs.
 *
 * unknown_keys_80k: tg_unknown_keys over an Update holding 80 000 keys the type does not know
 * (869 KB, issue 21 item 12), next to the typed decode of the same bytes as its floor: listing
 * the keys with their paths should cost about what decoding costs (it used to be O(n^2):
 * every path was searched again from the root).
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "bot/codec/codec.h"
#include "core/alloc.h"
#include "core/buf.h"
#include "tgbot/api.h"
#include "tgbot/types.h"

typedef struct ctx {
    const char *json;
    size_t len;
    const tg__type *t;
    tg__arena arena;
    tg__jdoc doc;
} ctx;

static void typed_decode(void *p)
{
    ctx *c = p;
    void *out;
    tg__arena_reset(&c->arena);
    if (tg__codec_decode_json(c->t, c->json, c->len, &c->arena, &c->doc, &out, NULL) != TG_OK) {
        fprintf(stderr, "decode failed\n");
        exit(1);
    }
    tg__bench_sink((uint64_t)((const tg_update *)out)->update_id);
}

static void cjson_parse(void *p)
{
    ctx *c = p;
    cJSON *root = cJSON_ParseWithLength(c->json, c->len);
    if (!root) {
        fprintf(stderr, "cJSON failed\n");
        exit(1);
    }
    tg__bench_sink((uint64_t)(uintptr_t)root->child);
    cJSON_Delete(root);
}

static void scenario(const char *fixture, const char *ours, const char *floor)
{
    ctx c;
    char *json = tg__bench_fixture(fixture, &c.len);
    c.json = json;
    c.t = tg__codec_type_by_name("Update");
    tg__arena_init(&c.arena, 0, 0);
    tg__jdoc_init(&c.doc, NULL);
    tg__bench_result r_floor, r_ours;
    tg__bench_run(floor, cjson_parse, &c, &r_floor);
    tg__bench_run(ours, typed_decode, &c, &r_ours);
    tg__bench_report(&r_floor, NULL);
    tg__bench_report(&r_ours, &r_floor);
    tg__jdoc_cleanup(&c.doc);
    tg__arena_cleanup(&c.arena);
    tg__free(json);
}

static void count_key(void *ud, const char *path)
{
    (void)path;
    (*(size_t *)ud)++;
}

static void unknown_keys(void *p)
{
    ctx *c = p;
    size_t seen = 0;
    size_t n = tg_unknown_keys("Update", (tg_raw){c->json, c->len}, count_key, &seen);
    if (n != 80000 || seen != n) {
        fprintf(stderr, "unknown keys: %zu (%zu seen), expected 80000\n", n, seen);
        exit(1);
    }
    tg__bench_sink(n);
}

static void scenario_unknown(void)
{
    tg__buf b;
    tg__buf_init(&b, 0);
    tg__buf_puts(&b, "{\"update_id\":1");
    for (int i = 0; i < 80000; i++)
        tg__buf_printf(&b, ",\"k%05d\":0", i);
    tg__buf_putc(&b, '}');
    ctx c = {.json = b.data, .len = b.len, .t = tg__codec_type_by_name("Update")};
    tg__arena_init(&c.arena, 0, 0);
    tg__jdoc_init(&c.doc, NULL);
    tg__bench_result r_floor, r_ours;
    tg__bench_run("decode_80k_unknown", typed_decode, &c, &r_floor);
    tg__bench_run("unknown_keys_80k", unknown_keys, &c, &r_ours);
    tg__bench_report(&r_floor, NULL);
    tg__bench_report(&r_ours, &r_floor);
    tg__jdoc_cleanup(&c.doc);
    tg__arena_cleanup(&c.arena);
    tg__buf_cleanup(&b);
}

int main(void)
{
    scenario("fixtures/botapi/small_update.json", "decode_update_small", "cjson_parse_small");
    scenario("fixtures/botapi/large_update.json", "decode_update_large", "cjson_parse_large");
    scenario_unknown();
    tg__bench_table();
    return 0;
}
