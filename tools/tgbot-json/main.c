/*
 * tgbot-json: check Bot API payloads against libtgbot's generated types.
 *
 *   tgbot-json decode TYPE   read one JSON value on stdin, decode it as the Bot API type
 *                            TYPE (Update, Message, ChatMember, ...), write it back to stdout
 *                            re-encoded from the C structs. Keys the generated API does not
 *                            know are listed on stderr ("unknown field: <path>", and
 *                            "unknown variant: <path>" for a union member it cannot tell)
 *                            and still come out on stdout. Exit 0; malformed or mistyped input: one
 *                            error line with the JSON path on stderr, exit 1.
 *   tgbot-json types         list every type name.
 *
 * Exit status: 0 ok, 1 bad input, 2 usage error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bot/codec/codec.h"
#include "core/alloc.h"
#include "core/arena.h"
#include "core/buf.h"
#include "tgbot/api.h"

#define MAX_INPUT ((size_t)64 << 20) /* bytes */

static int usage(void)
{
    fprintf(stderr,
            "usage: tgbot-json decode TYPE < value.json\n"
            "       tgbot-json types\n"
            "Bot API %s\n",
            TG_BOT_API_VERSION);
    return 2;
}

static int read_stdin(tg__buf *in)
{
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0)
        if (tg__buf_append(in, chunk, n) != 0)
            return -1;
    return ferror(stdin) ? -1 : 0;
}

static void report_unknown(void *ud, const tg__jdoc *d, uint32_t tok, bool variant)
{
    tg__buf *path = ud;
    tg__buf_reset(path);
    if (tg__json_path(d, tok, path) == 0)
        fprintf(stderr, "unknown %s: %s\n", variant ? "variant" : "field", tg__buf_cstr(path));
}

static int decode_cmd(const char *type)
{
    const tg__type *t = tg__codec_type_by_name(type);
    if (!t) {
        fprintf(stderr, "tgbot-json: unknown type '%s' (see 'tgbot-json types')\n", type);
        return 2;
    }
    int rc = 1;
    tg__buf in, out, msg;
    tg__arena arena;
    tg__jdoc doc;
    tg__buf_init(&in, MAX_INPUT);
    tg__buf_init(&out, 0);
    tg__buf_init(&msg, 0);
    tg__arena_init(&arena, 0, 0);
    tg__jdoc_init(&doc, NULL);
    if (read_stdin(&in) != 0) {
        fprintf(stderr, "tgbot-json: cannot read stdin (or more than %zu bytes)\n", MAX_INPUT);
        goto out;
    }
    void *value;
    if (tg__codec_decode_json(t, in.data ? in.data : "", in.len, &arena, &doc, &value, &msg) !=
        TG_OK) {
        fprintf(stderr, "tgbot-json: decode %s: %s\n", type, tg__buf_cstr(&msg));
        goto out;
    }
    tg__codec_unknown_keys(t, &doc, 0, report_unknown, &msg);
    tg__jw w;
    tg__jw_init(&w, &out);
    tg__codec_encode(t, value, &w, TG__ENC_KEEP_UNKNOWN);
    if (w.err) {
        fprintf(stderr, "tgbot-json: encode %s failed (%d)\n", type, w.err);
        goto out;
    }
    fwrite(out.data, 1, out.len, stdout);
    fputc('\n', stdout);
    rc = fflush(stdout) == 0 ? 0 : 1;
out:
    tg__jdoc_cleanup(&doc);
    tg__arena_cleanup(&arena);
    tg__buf_cleanup(&msg);
    tg__buf_cleanup(&out);
    tg__buf_cleanup(&in);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "decode") == 0)
        return decode_cmd(argv[2]);
    if (argc == 2 && strcmp(argv[1], "types") == 0) {
        for (size_t i = 0; i < tg__type_count; i++)
            printf("%s\n", tg__types[i]->name);
        return 0;
    }
    return usage();
}
