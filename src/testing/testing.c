/*
 * testing: the C test helper of include/tgbot/testing.h. It runs an emulator in the test's
 * process and acts through the same control API the web chat uses (emu_control), so a test
 * exercises exactly what a developer clicks. Waits sleep on the emulator's condition
 * variable (woken by every change) up to a deadline: no polling loops with sleeps.
 */
#include "tgbot/testing.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/str.h"
#include "emulator/emu.h"
#include "emulator/server.h"
#include "emulator/webapp.h"

#define TEST_TOKEN "7000001:AAHtgkitEmulatorTestTokenAAAAAAAAAA"

struct tg_test {
    emu *e;
    char url[64];
    int64_t bot_id, user_id;
    char err[256];
};

static void terr(tg_test *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void terr(tg_test *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->err, sizeof t->err, fmt, ap);
    va_end(ap);
}

tg_test *tg_test_start(void)
{
    tg_test *t = calloc(1, sizeof *t);
    char err[256];
    if (!t)
        return NULL;
    t->e = emu_new(&(emu_options){.host = "127.0.0.1"}, err, sizeof err);
    if (t->e && emu_start(t->e, err, sizeof err) == 0) {
        pthread_mutex_lock(&t->e->mu);
        emu_bot *b = emu_bot_add(t->e, TEST_TOKEN, "emulated_test_bot", "Test Bot");
        t->bot_id = b ? b->u.id : 0;
        t->user_id = t->e->users[0]->id;
        pthread_mutex_unlock(&t->e->mu);
        snprintf(t->url, sizeof t->url, "http://127.0.0.1:%u", (unsigned)t->e->port);
        if (b)
            return t;
        snprintf(err, sizeof err, "cannot add the test bot");
    }
    fprintf(stderr, "tg_test_start: %s\n", err);
    tg_test_free(t);
    return NULL;
}

void tg_test_free(tg_test *t)
{
    if (!t)
        return;
    emu_free(t->e);
    free(t);
}

const char *tg_test_url(const tg_test *t)
{
    return t->url;
}

const char *tg_test_token(const tg_test *t)
{
    (void)t;
    return TEST_TOKEN;
}

int64_t tg_test_bot_id(const tg_test *t)
{
    return t->bot_id;
}

int64_t tg_test_user_id(const tg_test *t)
{
    return t->user_id;
}

const char *tg_test_errmsg(const tg_test *t)
{
    return t->err;
}

pid_t tg_test_spawn(tg_test *t, const char *path, char *const argv[])
{
    pid_t pid = fork();
    if (pid < 0) {
        terr(t, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        setenv("TELEGRAM_BOT_TOKEN", TEST_TOKEN, 1);
        setenv("TELEGRAM_API_URL", t->url, 1);
        char *const none[] = {(char *)path, NULL};
        execv(path, argv ? argv : none);
        _exit(127);
    }
    return pid;
}

int tg_test_stop_child(pid_t pid)
{
    if (pid <= 0 || kill(pid, SIGTERM) != 0)
        return -1;
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* POST body to /control/<name>; the answer's JSON (malloc'ed) or NULL with t->err set. */
static char *control(tg_test *t, const char *name, const char *body)
{
    emu_form q;
    emu_form_init(&q);
    tg__buf out;
    tg__buf_init(&out, 0);
    int code = emu_control(t->e, name, "POST", &q, body, strlen(body), &out);
    emu_form_cleanup(&q);
    char *s = tg__buf_detach(&out, NULL);
    tg__buf_cleanup(&out);
    if (code != 200) {
        terr(t, "control %s: %s", name, s ? s : "out of memory");
        tg__free(s);
        return NULL;
    }
    char *copy = s ? strdup(s) : NULL;
    tg__free(s);
    return copy;
}

/* Integer at "key" (or "outer.key") of a control answer, or def. */
static int64_t json_int(const char *json, const char *outer, const char *key, int64_t def)
{
    tg__jdoc d;
    tg__jdoc_init(&d, NULL);
    tg__jerr e;
    int64_t v = def;
    if (json && tg__json_parse(&d, json, strlen(json), &e) == 0) {
        uint32_t o = outer ? tg__json_obj_get(&d, 0, outer) : 0;
        uint32_t k = o != UINT32_MAX && d.toks[o].type == TG__J_OBJECT
                         ? tg__json_obj_get(&d, o, key)
                         : UINT32_MAX;
        if (k == UINT32_MAX || tg__json_get_i64(&d, k, &v, &e) != 0)
            v = def;
    }
    tg__jdoc_cleanup(&d);
    return v;
}

/* JSON string literal of s (malloc'ed). */
static char *jstr(const char *s)
{
    tg__buf b;
    tg__buf_init(&b, 0);
    tg__jw w;
    tg__jw_init(&w, &b);
    tg__jw_str(&w, s);
    char *r = w.err ? NULL : tg__buf_detach(&b, NULL);
    tg__buf_cleanup(&b);
    char *copy = r ? strdup(r) : NULL;
    tg__free(r);
    return copy;
}

int64_t tg_test_add_user(tg_test *t, const char *first_name)
{
    char *n = jstr(first_name ? first_name : "User");
    char body[512];
    snprintf(body, sizeof body, "{\"first_name\":%s}", n ? n : "\"User\"");
    free(n);
    char *a = control(t, "users", body);
    int64_t id = json_int(a, "user", "id", -1);
    free(a);
    return id;
}

int64_t tg_test_add_chat(tg_test *t, const char *type, const char *title, int64_t owner)
{
    char *ty = jstr(type), *ti = jstr(title ? title : "Group");
    char body[600];
    snprintf(body, sizeof body, "{\"type\":%s,\"title\":%s,\"owner_id\":%lld}", ty, ti,
             (long long)(owner ? owner : t->user_id));
    free(ty);
    free(ti);
    char *a = control(t, "chats", body);
    int64_t id = json_int(a, "chat", "id", 0);
    free(a);
    return id;
}

int tg_test_join(tg_test *t, int64_t chat_id, int64_t member_id, bool admin)
{
    char body[200];
    snprintf(body, sizeof body, "{\"chat_id\":%lld,\"user_id\":%lld,\"admin\":%s}",
             (long long)chat_id, (long long)member_id, admin ? "true" : "false");
    char *a = control(t, "join", body);
    free(a);
    return a ? 0 : -1;
}

static void ids(tg_test *t, char *out, size_t cap, int64_t user_id, int64_t chat_id)
{
    snprintf(out, cap, "\"user_id\":%lld,\"bot_id\":%lld%s",
             (long long)(user_id ? user_id : t->user_id), (long long)t->bot_id, "");
    if (chat_id) {
        size_t n = strlen(out);
        snprintf(out + n, cap - n, ",\"chat_id\":%lld", (long long)chat_id);
    }
}

int64_t tg_test_send_reply(tg_test *t, int64_t user_id, int64_t chat_id, const char *text,
                           int64_t reply_to)
{
    char who[160];
    ids(t, who, sizeof who, user_id, chat_id);
    char *s = jstr(text);
    size_t n = strlen(who) + (s ? strlen(s) : 0) + 96;
    char *body = malloc(n);
    if (!s || !body) {
        free(s);
        free(body);
        terr(t, "out of memory");
        return -1;
    }
    snprintf(body, n, "{%s,\"text\":%s,\"reply_to_message_id\":%lld}", who, s, (long long)reply_to);
    char *a = control(t, "send", body);
    int64_t id = json_int(a, "message", "message_id", -1);
    free(s);
    free(body);
    free(a);
    return id;
}

int64_t tg_test_send(tg_test *t, int64_t user_id, int64_t chat_id, const char *text)
{
    return tg_test_send_reply(t, user_id, chat_id, text, 0);
}

int64_t tg_test_send_document(tg_test *t, int64_t user_id, int64_t chat_id, const char *file_name,
                              const void *data, size_t len)
{
    char who[160];
    ids(t, who, sizeof who, user_id, chat_id);
    size_t cap = len * 4 / 3 + 8;
    char *b64 = malloc(cap), *name = jstr(file_name);
    size_t n = cap + strlen(who) + (name ? strlen(name) : 0) + 64;
    char *body = malloc(n);
    int64_t id = -1;
    if (b64 && name && body && tg__b64_encode(b64, cap, data, len, TG__B64_STD) != TG__BAD_LEN) {
        snprintf(body, n, "{%s,\"file_name\":%s,\"data_base64\":\"%s\"}", who, name, b64);
        char *a = control(t, "document", body);
        id = json_int(a, "message", "message_id", -1);
        free(a);
    }
    free(b64);
    free(name);
    free(body);
    return id;
}

/* The "answer" member of a control answer, when answered; else NULL. */
static char *answer_of(tg_test *t, const char *a)
{
    tg__jdoc d;
    tg__jdoc_init(&d, NULL);
    tg__jerr e;
    char *r = NULL;
    if (a && tg__json_parse(&d, a, strlen(a), &e) == 0) {
        uint32_t k = tg__json_obj_get(&d, 0, "answer");
        if (k != UINT32_MAX && d.toks[k].type != TG__J_NULL) {
            size_t n;
            const char *raw = tg__json_raw(&d, k, &n);
            r = strndup(raw, n);
        }
    }
    tg__jdoc_cleanup(&d);
    if (a && !r)
        terr(t, "not answered in time");
    return r;
}

char *tg_test_press(tg_test *t, int64_t user_id, int64_t chat_id, int64_t message_id,
                    const char *data, int timeout_ms)
{
    char who[160], body[512];
    ids(t, who, sizeof who, user_id, chat_id);
    char *d = jstr(data);
    snprintf(body, sizeof body, "{%s,\"message_id\":%lld,\"data\":%s,\"wait_ms\":%d}", who,
             (long long)message_id, d ? d : "null", timeout_ms);
    free(d);
    char *a = control(t, "press", body);
    char *r = answer_of(t, a);
    free(a);
    return r;
}

char *tg_test_inline(tg_test *t, int64_t user_id, const char *query, int timeout_ms)
{
    char who[160], body[1024];
    ids(t, who, sizeof who, user_id, 0);
    char *q = jstr(query);
    snprintf(body, sizeof body, "{%s,\"query\":%s,\"wait_ms\":%d}", who, q ? q : "\"\"",
             timeout_ms);
    free(q);
    char *a = control(t, "inline", body);
    char *r = answer_of(t, a);
    free(a);
    return r;
}

int64_t tg_test_choose(tg_test *t, int64_t user_id, int64_t chat_id, const char *result_id)
{
    char who[160], body[512];
    ids(t, who, sizeof who, user_id, chat_id);
    char *r = jstr(result_id);
    snprintf(body, sizeof body, "{%s,\"result_id\":%s}", who, r ? r : "\"\"");
    free(r);
    char *a = control(t, "choose", body);
    int64_t id = json_int(a, "message", "message_id", -1);
    free(a);
    return id;
}

static struct timespec deadline(int timeout_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* Message matching (after_id, contains, edited) in chat, as malloc'ed JSON, or NULL.
 * Called with the lock held. */
static char *find(tg_test *t, int64_t chat_id, int64_t after_id, int64_t exact_id,
                  const char *contains)
{
    emu_chat *c = emu_chat_get(t->e, chat_id ? chat_id : t->user_id, t->bot_id);
    for (size_t i = 0; c && i < c->nmsgs; i++) {
        const emu_msg *m = &c->msgs[i];
        if (m->deleted || m->sender_id != t->bot_id || m->id <= after_id ||
            (exact_id && m->id != exact_id))
            continue;
        tg__arena a;
        tg__arena_init(&a, 0, 0);
        tg_message *msg = emu_msg_decode(m, &a);
        const char *txt = msg ? (msg->text ? msg->text : msg->caption) : NULL;
        bool ok = msg && (!contains || (txt && strstr(txt, contains))) &&
                  (!exact_id || msg->edit_date.has);
        tg__arena_cleanup(&a);
        if (ok)
            return strdup(m->json);
    }
    return NULL;
}

static char *wait_for(tg_test *t, int64_t chat_id, int64_t after_id, int64_t exact_id,
                      const char *contains, int timeout_ms)
{
    struct timespec until = deadline(timeout_ms);
    pthread_mutex_lock(&t->e->mu);
    char *r;
    while (!(r = find(t, chat_id, after_id, exact_id, contains)))
        if (pthread_cond_timedwait(&t->e->cv, &t->e->mu, &until) == ETIMEDOUT)
            break;
    if (!r)
        r = find(t, chat_id, after_id, exact_id, contains);
    pthread_mutex_unlock(&t->e->mu);
    if (!r)
        terr(t, "no %s from the bot containing \"%s\" in chat %lld within %d ms",
             exact_id ? "edit" : "message", contains ? contains : "", (long long)chat_id,
             timeout_ms);
    return r;
}

char *tg_test_wait_message(tg_test *t, int64_t chat_id, int64_t after_id, const char *contains,
                           int timeout_ms)
{
    return wait_for(t, chat_id, after_id, 0, contains, timeout_ms);
}

char *tg_test_wait_edit(tg_test *t, int64_t chat_id, int64_t message_id, const char *contains,
                        int timeout_ms)
{
    return wait_for(t, chat_id, 0, message_id, contains, timeout_ms);
}

bool tg_test_wait_idle(tg_test *t, int timeout_ms)
{
    struct timespec until = deadline(timeout_ms);
    pthread_mutex_lock(&t->e->mu);
    emu_bot *b = emu_bot_by_id(t->e, t->bot_id);
    while (b && b->nq)
        if (pthread_cond_timedwait(&t->e->cv, &t->e->mu, &until) == ETIMEDOUT)
            break;
    bool idle = b && b->nq == 0;
    pthread_mutex_unlock(&t->e->mu);
    if (!idle)
        terr(t, "the bot still has pending updates after %d ms", timeout_ms);
    return idle;
}

int64_t tg_test_last_message_id(tg_test *t, int64_t chat_id)
{
    pthread_mutex_lock(&t->e->mu);
    emu_chat *c = emu_chat_get(t->e, chat_id ? chat_id : t->user_id, t->bot_id);
    int64_t id = c && c->nmsgs ? c->msgs[c->nmsgs - 1].id : 0;
    pthread_mutex_unlock(&t->e->mu);
    return id;
}

/* "request" of a call event's JSON when its "method" is method, malloc'ed; else NULL. */
static char *call_request(const char *json, const char *method)
{
    tg__jdoc d;
    tg__jerr je;
    char *out = NULL;
    tg__jdoc_init(&d, NULL);
    if (tg__json_parse(&d, json, strlen(json), &je) == 0) {
        uint32_t m = tg__json_obj_get(&d, 0, "method");
        uint32_t r = tg__json_obj_get(&d, 0, "request");
        size_t n;
        if (m != UINT32_MAX && r != UINT32_MAX && tg__json_str_eq(&d, m, method, strlen(method))) {
            const char *raw = tg__json_raw(&d, r, &n);
            if ((out = malloc(n + 1)) != NULL) {
                memcpy(out, raw, n);
                out[n] = '\0';
            }
        }
    }
    tg__jdoc_cleanup(&d);
    return out;
}

char *tg_test_last_call(tg_test *t, const char *method)
{
    char *req = NULL;
    pthread_mutex_lock(&t->e->mu);
    emu *e = t->e;
    uint64_t first = e->seq > EMU_EVENTS ? e->seq - EMU_EVENTS + 1 : 1;
    for (uint64_t s = e->seq; s >= first && s > 0 && !req; s--) {
        const emu_event *ev = &e->events[s % EMU_EVENTS];
        if (ev->bot_id == t->bot_id && strcmp(ev->kind, "call") == 0 && ev->json)
            req = call_request(ev->json, method);
    }
    pthread_mutex_unlock(&t->e->mu);
    if (!req)
        terr(t, "no %s call of the bot among the emulator's last %d events", method, EMU_EVENTS);
    return req;
}

char *tg_test_webapp(tg_test *t, int64_t user_id, const char *start_param)
{
    char *sp = start_param ? jstr(start_param) : NULL;
    char body[400];
    snprintf(body, sizeof body, "{\"user_id\":%lld,\"bot_id\":%lld%s%s}",
             (long long)(user_id ? user_id : t->user_id), (long long)t->bot_id,
             sp ? ",\"start_param\":" : "", sp ? sp : "");
    free(sp);
    char *a = control(t, "webapp", body);
    char *init = NULL;
    tg__jdoc d;
    tg__jdoc_init(&d, NULL);
    tg__jerr e;
    if (a && tg__json_parse(&d, a, strlen(a), &e) == 0) {
        uint32_t k = tg__json_obj_get(&d, 0, "init_data");
        if (k != UINT32_MAX && d.toks[k].type == TG__J_STRING &&
            (init = malloc((size_t)d.toks[k].len + 1)) != NULL &&
            tg__json_str_copy(&d, k, init, (size_t)d.toks[k].len + 1) < 0) {
            free(init);
            init = NULL;
        }
    }
    tg__jdoc_cleanup(&d);
    free(a);
    if (!init && a)
        terr(t, "webapp: the answer has no init_data");
    return init;
}

const char *tg_test_webapp_public_key(void)
{
    return emu_webapp_public_key();
}
