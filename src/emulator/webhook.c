/*
 * webhook: setWebhook / deleteWebhook / getWebhookInfo, and the delivery thread that POSTs
 * each bot's updates, oldest first and one at a time, to its URL (libcurl) with the
 * X-Telegram-Bot-Api-Secret-Token header. An answer other than 2xx (or no answer) keeps the
 * update, records last_error_date / last_error_message as getWebhookInfo reports them, and
 * retries after 1, 2, 4 ... 30 seconds. Unlike Telegram, plain http:// URLs and any port are
 * accepted, since bots under test listen on 127.0.0.1.
 *
 * The lock is never held during a POST: the thread copies what it sends, then re-checks that
 * the update is still the first one before dropping it.
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "emulator/handlers.h"
#include "emulator/server.h"

#define RETRY_MAX_MS    30000
#define POST_TIMEOUT_MS 10000

static void clear_hook(emu_webhook *h)
{
    tg__free(h->url);
    tg__free(h->secret);
    tg__free(h->last_error_message);
    memset(h, 0, sizeof *h);
}

static bool secret_ok(const char *s)
{
    size_t n = strlen(s);
    return n >= 1 && n <= 256 &&
           strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

int emu_webhook_set(emu_req *r)
{
    const tg_set_webhook_params *p = r->p;
    emu_bot *b = r->b;
    if (!*p->url) {
        clear_hook(&b->hook);
    } else {
        if (strncmp(p->url, "https://", 8) && strncmp(p->url, "http://", 7))
            return emu_fail(r, 400, "bad webhook: An HTTPS URL must be provided for webhook");
        if (p->secret_token && !secret_ok(p->secret_token))
            return emu_fail(r, 400, "secret token contains unallowed characters");
        if (p->max_connections.has && (p->max_connections.v < 1 || p->max_connections.v > 100))
            return emu_fail(r, 400, "bad webhook: max_connections must be between 1 and 100");
        clear_hook(&b->hook);
        b->hook.url = tg__strdup(p->url);
        b->hook.secret = tg__strdup(p->secret_token);
        b->hook.max_connections = p->max_connections.has ? p->max_connections.v : 40;
    }
    if (p->drop_pending_updates.has && p->drop_pending_updates.v)
        emu_updates_confirm(b, b->next_update_id);
    if (p->allowed_updates) {
        uint64_t mask = 0;
        for (size_t i = 0; i < p->allowed_updates_count; i++)
            if (p->allowed_updates[i].id > 1 && p->allowed_updates[i].id < 64)
                mask |= (uint64_t)1 << p->allowed_updates[i].id;
        if (mask)
            b->allowed = mask;
    }
    emu_touch(r->e);
    tg__jw_bool(&r->w, true);
    return 0;
}

int emu_webhook_delete(emu_req *r)
{
    const tg_delete_webhook_params *p = r->p;
    clear_hook(&r->b->hook);
    if (p && p->drop_pending_updates.has && p->drop_pending_updates.v)
        emu_updates_confirm(r->b, r->b->next_update_id);
    emu_touch(r->e);
    tg__jw_bool(&r->w, true);
    return 0;
}

int emu_webhook_info(emu_req *r)
{
    const emu_webhook *h = &r->b->hook;
    tg_webhook_info wi = {.url = h->url ? h->url : "", .pending_update_count = (int64_t)r->b->nq};
    if (h->url) {
        wi.max_connections = (tg_opt_i64)TG_SOME(h->max_connections);
        wi.ip_address = "127.0.0.1";
    }
    if (h->last_error_date) {
        wi.last_error_date = (tg_opt_i64)TG_SOME(h->last_error_date);
        wi.last_error_message = h->last_error_message;
    }
    tg__codec_encode(&tg__t_webhook_info, &wi, &r->w, 0);
    return 0;
}

/* ---- delivery ---- */

typedef struct job {
    int64_t bot_id, update_id;
    char *url, *secret, *body;
} job;

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    return size * n;
}

/* POST the job; 0 on a 2xx answer, else -1 with why. */
static int post(const job *j, char *why, size_t cap)
{
    CURL *c = curl_easy_init();
    if (!c) {
        snprintf(why, cap, "out of memory");
        return -1;
    }
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    char sec[300];
    if (j->secret) {
        snprintf(sec, sizeof sec, "X-Telegram-Bot-Api-Secret-Token: %s", j->secret);
        h = curl_slist_append(h, sec);
    }
    curl_easy_setopt(c, CURLOPT_URL, j->url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, j->body);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)POST_TIMEOUT_MS);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L); /* self-signed local certificates */
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK) {
        snprintf(why, cap, "Connection failed: %s", curl_easy_strerror(rc));
        return -1;
    }
    if (status < 200 || status > 299) {
        snprintf(why, cap, "Wrong response from the webhook: %ld", status);
        return -1;
    }
    return 0;
}

/* The next due delivery, copied; false when none (then *wait_ms says how long to sleep). */
static bool next_job(emu *e, job *j, int64_t *wait_ms)
{
    int64_t now = (int64_t)tg__now_ms();
    *wait_ms = 1000;
    for (size_t i = 0; i < e->nbots; i++) {
        emu_bot *b = e->bots[i];
        if (!b->hook.url || b->nq == 0)
            continue;
        if (b->hook.next_try_ms > now) {
            if (b->hook.next_try_ms - now < *wait_ms)
                *wait_ms = b->hook.next_try_ms - now;
            continue;
        }
        *j = (job){b->u.id, b->q[0].id, tg__strdup(b->hook.url), tg__strdup(b->hook.secret),
                   tg__strdup(b->q[0].json)};
        return j->url && j->body;
    }
    return false;
}

static void done_job(emu *e, const job *j, int ok, const char *why)
{
    emu_bot *b = emu_bot_by_id(e, j->bot_id);
    if (!b || !b->hook.url)
        return;
    if (ok == 0) {
        if (b->nq && b->q[0].id == j->update_id)
            emu_updates_confirm(b, j->update_id + 1);
        b->hook.failures = 0;
        b->hook.next_try_ms = 0;
    } else {
        uint32_t f = b->hook.failures < 5 ? b->hook.failures : 5;
        int64_t delay = (int64_t)1000 << f;
        b->hook.failures++;
        b->hook.next_try_ms = (int64_t)tg__now_ms() + (delay > RETRY_MAX_MS ? RETRY_MAX_MS : delay);
        b->hook.last_error_date = emu_now();
        tg__free(b->hook.last_error_message);
        b->hook.last_error_message = tg__strdup(why);
    }
    emu_touch(e);
}

static void *deliver(void *arg)
{
    emu *e = arg;
    pthread_mutex_lock(&e->mu);
    while (!e->stopping) {
        job j = {0};
        int64_t wait_ms;
        if (next_job(e, &j, &wait_ms)) {
            pthread_mutex_unlock(&e->mu);
            char why[200] = "";
            int ok = post(&j, why, sizeof why);
            pthread_mutex_lock(&e->mu);
            done_job(e, &j, ok, why);
        } else {
            struct timespec until = emu_deadline(e, wait_ms);
            pthread_cond_timedwait(&e->cv, &e->mu, &until);
        }
        tg__free(j.url);
        tg__free(j.secret);
        tg__free(j.body);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

int emu_webhook_start(emu *e)
{
    if (pthread_create(&e->hook_thread, NULL, deliver, e) != 0)
        return -1;
    e->hook_started = true;
    return 0;
}

void emu_webhook_stop(emu *e)
{
    if (!e->hook_started)
        return;
    pthread_mutex_lock(&e->mu);
    e->stopping = true;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->hook_thread, NULL);
    e->hook_started = false;
}
