/* bot_fx: the fake Bot API server plus a bot and ctx pointed at it (see bot_server.h). */
#include "bot_server.h"
#include "tgtest.h"

#include <stdlib.h>
#include <string.h>

#include <tgbot/tgbot.h>

bool bot_test_lean(void)
{
    const char *t = getenv("TGKIT_TEST_TRANSPORT");
    return t && strcmp(t, "lean") == 0;
}

tg_bot *bot_test_new(const char *token, const tg_bot_options *opts)
{
    tg_bot_options o = opts ? *opts : (tg_bot_options){0};
    if (!o.transport && bot_test_lean())
        o.transport = tg_transport_lean();
    return tg_bot_new(token, &o);
}

bot_fx *bot_fx_new(const char *token, const tg_bot_options *opts)
{
    bot_fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->srv = bot_server_start(token);
    assert_non_null(f->srv);
    tg_bot_options o = opts ? *opts : (tg_bot_options){0};
    o.base_url = bot_server_url(f->srv);
    f->bot = bot_test_new(token, &o);
    assert_non_null(f->bot);
    f->ctx = tg_ctx_new(f->bot);
    assert_non_null(f->ctx);
    return f;
}

void bot_fx_free(bot_fx *f)
{
    if (!f)
        return;
    tg_ctx_free(f->ctx);
    tg_bot_free(f->bot);
    bot_server_stop(f->srv);
    free(f);
}

void bot_logcap_init(bot_logcap *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
}

void bot_logcap_sink(void *user, int level, const char *line)
{
    bot_logcap *c = user;
    (void)level;
    pthread_mutex_lock(&c->mu);
    size_t n = strlen(line);
    char *p = realloc(c->text, c->len + n + 2);
    if (p) {
        memcpy(p + c->len, line, n);
        p[c->len + n] = '\n';
        p[c->len + n + 1] = '\0';
        c->text = p;
        c->len += n + 1;
        c->lines++;
    }
    pthread_mutex_unlock(&c->mu);
}

void bot_logcap_free(bot_logcap *c)
{
    free(c->text);
    pthread_mutex_destroy(&c->mu);
    memset(c, 0, sizeof *c);
}
