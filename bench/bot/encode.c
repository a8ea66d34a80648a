/*
 * bench encode: sendMessage params -> JSON request body through the generated descriptor
 * tables (tg__codec_encode_params), next to the floor: the same JSON written by direct
 * tg__jw calls (what a hand-written encoder would do). Both write into a reused buffer.
 * Goal: under 0.1 us per op, 0 allocs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bot/api/api.gen.h"
#include "core/buf.h"

typedef struct ctx {
    tg__buf buf;
    tg_send_message_params p;
} ctx;

static void check(ctx *c, tg__jw *w)
{
    if (w->err) {
        fprintf(stderr, "encode failed: %d\n", w->err);
        exit(1);
    }
    tg__bench_sink(c->buf.len);
}

static void encode_generated(void *p)
{
    ctx *c = p;
    tg__jw w;
    tg__buf_reset(&c->buf);
    tg__jw_init(&w, &c->buf);
    tg__codec_encode_params(&tg__m_send_message, &c->p, NULL, &w, NULL, 0);
    check(c, &w);
}

static void encode_by_hand(void *p)
{
    ctx *c = p;
    tg__jw w;
    tg__buf_reset(&c->buf);
    tg__jw_init(&w, &c->buf);
    tg__jw_obj_begin(&w);
    tg__jw_key(&w, "chat_id", 7);
    tg__jw_i64(&w, c->p.chat_id.id);
    tg__jw_key(&w, "text", 4);
    tg__jw_str(&w, c->p.text);
    tg__jw_key(&w, "parse_mode", 10);
    tg__jw_str(&w, "HTML");
    tg__jw_key(&w, "disable_notification", 20);
    tg__jw_bool(&w, c->p.disable_notification.v);
    tg__jw_obj_end(&w);
    check(c, &w);
}

int main(void)
{
    ctx c = {.p = {.chat_id = tg_chat_id_int(-100123456789),
                   .text = "Hello, <b>world</b>! A typical reply of a bot.",
                   .parse_mode = TG_ENUM(TG_PARSE_MODE_HTML),
                   .disable_notification = TG_SOME(true)}};
    tg__buf_init(&c.buf, 0);
    encode_generated(&c);
    char *gen = strdup(tg__buf_cstr(&c.buf));
    encode_by_hand(&c);
    if (!gen || strcmp(gen, tg__buf_cstr(&c.buf)) != 0) {
        fprintf(stderr, "the two encoders disagree:\n%s\n%s\n", gen, tg__buf_cstr(&c.buf));
        return 1;
    }
    free(gen);
    tg__bench_result floor, ours;
    tg__bench_run("jw_by_hand_send_message", encode_by_hand, &c, &floor);
    tg__bench_run("encode_send_message", encode_generated, &c, &ours);
    tg__bench_report(&floor, NULL);
    tg__bench_report(&ours, &floor);
    tg__bench_table();
    tg__buf_cleanup(&c.buf);
    return 0;
}
