/*
 * tgbot/testing.h: test a bot end to end against an in-process tgbot-emulator.
 *
 * The helper starts the emulator (a local Telegram Bot API; see docs/emulator.md) inside
 * the test process on 127.0.0.1 with a free port, creates one bot and one user, and gives
 * a bot author a few calls to script users and check what the bot sent:
 *
 *   tg_test *t = tg_test_start();
 *   pid_t bot = tg_test_spawn(t, "./echo");          // TELEGRAM_BOT_TOKEN/_API_URL set
 *   tg_test_send(t, 0, 0, "hello");                  // the user writes to the bot
 *   char *m = tg_test_wait_message(t, 0, 0, "hello", 5000);
 *   assert(m != NULL);                               // the bot answered "hello"
 *   free(m);
 *   tg_test_stop_child(bot);
 *   tg_test_free(t);
 *
 * Bots written in any language can be spawned the same way; a bot running in the test's
 * own process can use tg_test_url() and tg_test_token() directly.
 *
 * Ids: user_id 0 means the default user; chat_id 0 means that user's private chat with the
 * bot. Waits are bounded by timeout_ms and end as soon as the awaited thing happens.
 * Strings returned are malloc'ed JSON (Bot API types), freed with free().
 * Errors: functions return -1 / NULL / false and tg_test_errmsg() says why.
 * Thread-safety: a tg_test may be used from one thread at a time; the emulator itself
 * serves its HTTP clients on its own threads.
 */
#ifndef TGBOT_TESTING_H
#define TGBOT_TESTING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_test tg_test;

/* Start an emulator with one bot and one user ("Developer"). NULL on failure (why on
 * stderr). */
tg_test *tg_test_start(void);
/* Stop the emulator and free everything. NULL-safe. */
void tg_test_free(tg_test *t);

/* Base URL for TELEGRAM_API_URL ("http://127.0.0.1:PORT") and the bot's token; valid until
 * tg_test_free. */
const char *tg_test_url(const tg_test *t);
const char *tg_test_token(const tg_test *t);
/* The bot's user id, and the default user's id. */
int64_t tg_test_bot_id(const tg_test *t);
int64_t tg_test_user_id(const tg_test *t);
/* The last error ("no message containing \"hi\" from the bot in chat 5 within 2000 ms"). */
const char *tg_test_errmsg(const tg_test *t);

/* Run program (argv[0] = path, argv NULL = no arguments) with TELEGRAM_BOT_TOKEN and
 * TELEGRAM_API_URL set for this emulator. Returns the child's pid, or -1. */
pid_t tg_test_spawn(tg_test *t, const char *path, char *const argv[]);
/* SIGTERM the child and reap it; returns its exit status (or -1). */
int tg_test_stop_child(pid_t pid);

/* Another user; returns its id or -1. */
int64_t tg_test_add_user(tg_test *t, const char *first_name);
/* A chat of type "group", "supergroup" or "channel" owned by owner (0: default user);
 * returns its id, or 0 on failure. */
int64_t tg_test_add_chat(tg_test *t, const char *type, const char *title, int64_t owner);
/* member_id (a user or the bot's id) joins chat_id; admin gives it every right. 0 or -1. */
int tg_test_join(tg_test *t, int64_t chat_id, int64_t member_id, bool admin);

/* user sends text (commands included: "/start") in chat; reply_to 0 = none. Returns the
 * new message's id or -1. */
int64_t tg_test_send(tg_test *t, int64_t user_id, int64_t chat_id, const char *text);
int64_t tg_test_send_reply(tg_test *t, int64_t user_id, int64_t chat_id, const char *text,
                           int64_t reply_to);
/* user sends a document (bytes data[0..len), name file_name). Returns the message id or -1. */
int64_t tg_test_send_document(tg_test *t, int64_t user_id, int64_t chat_id, const char *file_name,
                              const void *data, size_t len);
/* user presses the inline button with callback data of message_id; waits up to timeout_ms
 * for answerCallbackQuery. Returns the answer JSON ({"text":..,"show_alert":..,"url":..}) or
 * NULL (not answered in time, or no such button). */
char *tg_test_press(tg_test *t, int64_t user_id, int64_t chat_id, int64_t message_id,
                    const char *data, int timeout_ms);
/* user types "@bot query"; waits for answerInlineQuery; returns the results array JSON. */
char *tg_test_inline(tg_test *t, int64_t user_id, const char *query, int timeout_ms);

/* user picks result result_id of their last answered inline query: it is sent "via @bot"
 * into chat (0: the private chat with the bot) and the bot gets chosen_inline_result.
 * Returns the new message's id or -1. */
int64_t tg_test_choose(tg_test *t, int64_t user_id, int64_t chat_id, const char *result_id);

/* The first message from the bot in chat with id > after_id whose text or caption contains
 * contains (NULL: any), as Message JSON; waits up to timeout_ms. NULL on timeout. */
char *tg_test_wait_message(tg_test *t, int64_t chat_id, int64_t after_id, const char *contains,
                           int timeout_ms);
/* Wait until message message_id of chat has been edited so that its text contains
 * contains; returns the Message JSON or NULL on timeout. */
char *tg_test_wait_edit(tg_test *t, int64_t chat_id, int64_t message_id, const char *contains,
                        int timeout_ms);
/* Wait until the bot has no pending updates (it has fetched everything). */
bool tg_test_wait_idle(tg_test *t, int timeout_ms);
/* The id of the last message in chat (0 when none). */
int64_t tg_test_last_message_id(tg_test *t, int64_t chat_id);
/* The parameters of the bot's most recent call of method ("sendMessage"), as the emulator
 * received them: a JSON object (a multipart upload's form fields turned into JSON; the
 * string "(large)" past 8 KiB), malloc'ed; NULL when the last 512 calls and updates hold
 * none. A blocking call is recorded before it returns, an async one before its callback. */
char *tg_test_last_call(tg_test *t, const char *method);

/* user opens the bot's Mini App: the initData (a query string) Telegram would give it, with
 * start_param (NULL = none), auth_date now, hash signed with the bot's token and signature
 * signed with the emulator's Ed25519 key (check it with tg_test_webapp_public_key() as
 * tg_webapp_check.public_key_hex, in place of Telegram's). malloc'ed, or NULL. */
char *tg_test_webapp(tg_test *t, int64_t user_id, const char *start_param);
/* The emulator's Ed25519 public key (64 hex digits), or NULL. */
const char *tg_test_webapp_public_key(void);

#ifdef __cplusplus
}
#endif

#endif
