/*
 * event: turn the JSON of one Update into a tg_event (the routed view) and its ordering key.
 *
 * Both work on a tokenized document (tg__jdoc) so the webhook server, long polling, tests and
 * the fuzzer share one strict parser. Strings of the event are decoded into the given arena;
 * ev->json points at the caller's bytes, which must outlive the event.
 *
 * Thread-safety: none (doc and arena belong to the caller).
 */
#ifndef TGKIT_BOT_DISPATCH_EVENT_H
#define TGKIT_BOT_DISPATCH_EVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bot/json/json.h"
#include "core/arena.h"
#include "tgbot/dispatch.h"

/* What the queue needs to know before the update runs. */
typedef struct tg__event_key {
    int64_t update_id;
    int64_t key;  /* chat id, else user id */
    bool ordered; /* false: neither chat nor user (runs unordered) */
    tg_update_kind kind;
} tg__event_key;

/*
 * Tokenize json and read update_id, the kind and the ordering key. Returns 0, or -1 with a
 * message in err ("update: expected object, found array (at byte 0)"; "update_id: missing"),
 * or -2 when memory ran out (err says so).
 */
int tg__event_key_parse(tg__jdoc *doc, const char *json, size_t len, tg__event_key *out, char *err,
                        size_t errcap);

/*
 * Fill ev from json (tokenized again into doc) with strings in a. username (may be NULL)
 * decides command_for_me. Returns 0, -1 with err filled (malformed JSON) or -2 (out of
 * memory).
 */
int tg__event_parse(tg_event *ev, tg__jdoc *doc, tg__arena *a, const char *json, size_t len,
                    const char *username, char *err, size_t errcap);

/* Split a command line: "/cmd@bot args" -> name, mention, args (spans into text). */
void tg__command_split(const char *text, const char **name, size_t *name_len, const char **mention,
                       size_t *mention_len, const char **args);

#endif
