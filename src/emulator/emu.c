/*
 * emu: the emulator's lifecycle: create the world (with one ready user, "Developer", for
 * the web chat), start the HTTP server and the webhook thread, stop and free everything.
 */
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "emulator/emu.h"
#include "emulator/server.h"

#define FIRST_USER_ID  100000001
#define FIRST_GROUP_ID 1001

emu *emu_new(const emu_options *o, char *err, size_t errcap)
{
    emu *e = tg__calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, errcap, "out of memory");
        return NULL;
    }
    if (o)
        e->o = *o;
    e->host = tg__strdup(e->o.host ? e->o.host : "127.0.0.1");
    e->state_file = tg__strdup(e->o.state_file);
    pthread_mutex_init(&e->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_cond_init(&e->cv, &ca);
    pthread_condattr_destroy(&ca);
    e->next_user_id = FIRST_USER_ID;
    e->next_group_id = FIRST_GROUP_ID;
    e->next_file_id = 1;
    pthread_mutex_lock(&e->mu);
    emu_user *dev = emu_user_add(e, 0, "Developer", NULL, "developer", "en");
    pthread_mutex_unlock(&e->mu);
    if (!e->host || !dev) {
        snprintf(err, errcap, "out of memory");
        emu_free(e);
        return NULL;
    }
    return e;
}

int emu_start(emu *e, char *err, size_t errcap)
{
    if (emu_http_start(e, err, errcap) != 0)
        return -1;
    if (emu_webhook_start(e) != 0) {
        snprintf(err, errcap, "cannot start the webhook thread");
        emu_http_stop(e);
        return -1;
    }
    return 0;
}

static void free_chat(emu_chat *c)
{
    for (size_t i = 0; i < c->nmsgs; i++)
        tg__free(c->msgs[i].json);
    for (size_t i = 0; i < c->nmembers; i++)
        tg__free(c->members[i].custom_title);
    tg__free(c->msgs);
    tg__free(c->members);
    tg__free(c->pins);
    tg__free(c->join_reqs);
    tg__free(c->title);
    tg__free(c->username);
    tg__free(c->description);
    tg__free(c->reply_kb);
    tg__free(c);
}

static void free_user_fields(emu_user *u)
{
    tg__free(u->first_name);
    tg__free(u->last_name);
    tg__free(u->username);
    tg__free(u->language_code);
}

static void free_bot(emu_bot *b)
{
    free_user_fields(&b->u);
    tg__free(b->token);
    for (size_t i = 0; i < b->nq; i++)
        tg__free(b->q[i].json);
    tg__free(b->q);
    for (size_t i = 0; i < b->ncmds; i++) {
        tg__free(b->cmds[i].scope);
        tg__free(b->cmds[i].lang);
        tg__free(b->cmds[i].json);
    }
    tg__free(b->cmds);
    tg__free(b->hook.url);
    tg__free(b->hook.secret);
    tg__free(b->hook.last_error_message);
    tg__free(b->description);
    tg__free(b->short_description);
    tg__free(b->name);
    tg__free(b);
}

static void free_world(emu *e)
{
    for (size_t i = 0; i < e->nbots; i++)
        free_bot(e->bots[i]);
    for (size_t i = 0; i < e->nusers; i++) {
        free_user_fields(e->users[i]);
        tg__free(e->users[i]);
    }
    for (size_t i = 0; i < e->nchats; i++)
        free_chat(e->chats[i]);
    for (size_t i = 0; i < e->nfiles; i++)
        emu_file_free(e->files[i]);
    for (size_t i = 0; i < e->nqueries; i++) {
        tg__free(e->queries[i]->id);
        tg__free(e->queries[i]->query);
        tg__free(e->queries[i]->answer);
        tg__free(e->queries[i]);
    }
    for (size_t i = 0; i < EMU_EVENTS; i++)
        tg__free(e->events[i].json);
    tg__free(e->bots);
    tg__free(e->users);
    tg__free(e->chats);
    tg__free(e->files);
    tg__free(e->queries);
}

void emu_free(emu *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&e->mu);
    e->stopping = true;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    emu_webhook_stop(e);
    emu_http_stop(e);
    free_world(e);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    tg__free(e->host);
    tg__free(e->state_file);
    tg__free(e);
}
