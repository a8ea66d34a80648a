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
 *
 * Built on libtgbot's public API only (tgbot/tgbot.h: tg_decode, tg_encode,
 * tg_unknown_visit, tg_type_name on a codec-only ctx) and linked against the shared library,
 * so it is also an example of using the codec from outside.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tgbot/tgbot.h>

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

/* All of stdin into *buf (malloc'd), at most MAX_INPUT bytes. */
static int read_stdin(char **buf, size_t *len)
{
    size_t cap = 65536, n = 0;
    char *b = malloc(cap);
    while (b) {
        size_t got = fread(b + n, 1, cap - n, stdin);
        n += got;
        if (got == 0)
            break;
        if (n == cap) {
            char *nb = cap < MAX_INPUT ? realloc(b, cap * 2) : NULL;
            if (!nb) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
            cap *= 2;
        }
    }
    *buf = b;
    *len = n;
    return b && !ferror(stdin) ? 0 : -1;
}

static bool type_known(const char *type)
{
    for (size_t i = 0; tg_type_name(i); i++)
        if (strcmp(tg_type_name(i), type) == 0)
            return true;
    return false;
}

static void report_unknown(void *ud, const char *path, bool variant)
{
    (void)ud;
    fprintf(stderr, "unknown %s: %s\n", variant ? "variant" : "field", path);
}

/* Encode value as type, growing the buffer as tg_encode asks. NULL on failure. */
static char *encode(tg_ctx *ctx, const char *type, const void *value, size_t *len)
{
    size_t cap = 65536;
    char *out = malloc(cap);
    tg_status st = out ? tg_encode(ctx, type, value, out, cap, len) : TG_ERR_NOMEM;
    if (st == TG_ERR_TOO_BIG) {
        cap = *len + 1;
        char *bigger = realloc(out, cap);
        st = bigger ? tg_encode(ctx, type, value, bigger, cap, len) : TG_ERR_NOMEM;
        out = bigger ? bigger : out;
    }
    if (st != TG_OK) {
        fprintf(stderr, "tgbot-json: %s\n",
                st == TG_ERR_NOMEM && !out ? "out of memory" : tg_ctx_errmsg(ctx));
        free(out);
        return NULL;
    }
    return out;
}

static int decode_cmd(const char *type)
{
    if (!type_known(type)) {
        fprintf(stderr, "tgbot-json: unknown type '%s' (see 'tgbot-json types')\n", type);
        return 2;
    }
    int rc = 1;
    char *in = NULL, *out = NULL;
    size_t in_len, out_len;
    void *value;
    tg_ctx *ctx = tg_ctx_new(NULL); /* codec only: no bot, no token */
    if (!ctx) {
        fprintf(stderr, "tgbot-json: out of memory\n");
        return 1;
    }
    if (read_stdin(&in, &in_len) != 0) {
        fprintf(stderr, "tgbot-json: cannot read stdin (or more than %zu bytes)\n", MAX_INPUT);
        goto out;
    }
    if (tg_decode(ctx, type, in, in_len, &value) != TG_OK) {
        fprintf(stderr, "tgbot-json: %s\n", tg_ctx_errmsg(ctx));
        goto out;
    }
    tg_unknown_visit(type, (tg_raw){in, in_len}, report_unknown, NULL);
    out = encode(ctx, type, value, &out_len);
    if (!out)
        goto out;
    fwrite(out, 1, out_len, stdout);
    fputc('\n', stdout);
    rc = fflush(stdout) == 0 ? 0 : 1;
out:
    free(out);
    free(in);
    tg_ctx_free(ctx);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "decode") == 0)
        return decode_cmd(argv[2]);
    if (argc == 2 && strcmp(argv[1], "types") == 0) {
        for (size_t i = 0; tg_type_name(i); i++)
            printf("%s\n", tg_type_name(i));
        return 0;
    }
    return usage();
}
