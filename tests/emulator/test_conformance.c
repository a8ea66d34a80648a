/*
 * Conformance of the emulated Bot API: for each emulated method, a success and each
 * documented failure, over real HTTP (libcurl) to an emulator on 127.0.0.1, in the
 * encodings bots use (JSON, x-www-form-urlencoded, multipart, GET query). Each step is one
 * row: method, body (with $USER, $GROUP, $SUPER, $CHAN, $MSG, $CB and the file ids $FILE,
 * $FDOC, $FVID substituted), and
 * the expected outcome (ok, or error_code plus a piece of the description).
 * Also: every method of the generated model is known (emulated or "not emulated"), an
 * unknown name is 404, a bad token 401.
 */
#include "tgtest.h"

#include <curl/curl.h>
#include <jansson.h>

#include "bot/api/api.gen.h"
#include "emulator/api.h"
#include "tgbot/testing.h"

static tg_test *t;
#define NVARS 10
static char vars[NVARS][64]; /* $USER $GROUP $SUPER $CHAN $MSG $CB $FILE $USR2 $FDOC $FVID */
static const char *names[NVARS] = {"$USER", "$GROUP", "$SUPER", "$CHAN", "$MSG",
                                   "$CB",   "$FILE",  "$USR2",  "$FDOC", "$FVID"};

static size_t collect(char *p, size_t size, size_t n, void *ud)
{
    size_t len = size * n;
    char **s = ud;
    size_t old = *s ? strlen(*s) : 0;
    char *g = realloc(*s, old + len + 1);
    assert_non_null(g);
    memcpy(g + old, p, len);
    g[old + len] = '\0';
    *s = g;
    return len;
}

static char *subst(const char *in)
{
    char *out = malloc(strlen(in) * 4 + 256);
    size_t o = 0;
    for (const char *p = in; *p;) {
        int k = -1;
        for (int i = 0; i < NVARS; i++)
            if (!strncmp(p, names[i], strlen(names[i])))
                k = i;
        if (k >= 0) {
            o += (size_t)sprintf(out + o, "%s", vars[k]);
            p += strlen(names[k]);
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = '\0';
    return out;
}

/* One request; kind: 'j' JSON body, 'f' form body, 'q' GET query, 'm' multipart. */
static json_t *call(const char *token, const char *method, const char *body, char kind,
                    long *status)
{
    CURL *c = curl_easy_init();
    char url[512];
    char *b = subst(body);
    snprintf(url, sizeof url, "%s/bot%s/%s%s%s", tg_test_url(t), token, method,
             kind == 'q' ? "?" : "", kind == 'q' ? b : "");
    char *resp = NULL;
    struct curl_slist *h = NULL;
    curl_mime *mime = NULL;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &resp);
    if (kind == 'j') {
        h = curl_slist_append(h, "Content-Type: application/json");
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, b);
    } else if (kind == 'f') {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, b);
    } else if (kind == 'm') {
        /* body: "field=value&file:name=content" */
        mime = curl_mime_init(c);
        char *save, *tok = strtok_r(b, "&", &save);
        for (; tok; tok = strtok_r(NULL, "&", &save)) {
            char *eq = strchr(tok, '=');
            *eq = '\0';
            curl_mimepart *part = curl_mime_addpart(mime);
            bool file = !strncmp(tok, "file:", 5);
            curl_mime_name(part, file ? tok + 5 : tok);
            curl_mime_data(part, eq + 1, CURL_ZERO_TERMINATED);
            if (file)
                curl_mime_filename(part, "upload.txt");
        }
        curl_easy_setopt(c, CURLOPT_MIMEPOST, mime);
    }
    assert_int_equal(curl_easy_perform(c), CURLE_OK);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    curl_slist_free_all(h);
    curl_mime_free(mime);
    curl_easy_cleanup(c);
    free(b);
    json_t *j = json_loads(resp, 0, NULL);
    if (!j)
        fail_msg("%s: answer is not JSON: %s", method, resp);
    free(resp);
    return j;
}

#define FILE_VAR(v) (100 + (v))

typedef struct step {
    const char *method;
    char kind;
    const char *body;
    int code;         /* 0 = ok */
    const char *desc; /* piece of the description, or of the result's JSON when ok */
    int save; /* -1, or the var to fill with result.message_id (FILE_VAR(v): the first file_id) */
} step;

static void run_step(const step *s)
{
    long status;
    json_t *j = call(tg_test_token(t), s->method, s->body, s->kind, &status);
    bool ok = json_is_true(json_object_get(j, "ok"));
    char *text = json_dumps(j, JSON_COMPACT);
    if (s->code == 0) {
        if (!ok || status != 200)
            fail_msg("%s %s: expected ok, got %s", s->method, s->body, text);
        char *want = subst(s->desc ? s->desc : "");
        if (!strstr(text, want))
            fail_msg("%s %s: expected %s in %s", s->method, s->body, want, text);
        free(want);
        const char *fid = strstr(text, "\"file_id\":\"");
        if (s->save >= FILE_VAR(0) && fid)
            snprintf(vars[s->save - FILE_VAR(0)], sizeof vars[0], "%.*s",
                     (int)strcspn(fid + 11, "\""), fid + 11);
        else if (s->save >= FILE_VAR(0))
            fail_msg("%s %s: no file_id in %s", s->method, s->body, text);
        else if (s->save >= 0)
            snprintf(vars[s->save], sizeof vars[0], "%lld",
                     (long long)json_integer_value(
                         json_object_get(json_object_get(j, "result"), "message_id")));
    } else {
        const char *d = json_string_value(json_object_get(j, "description"));
        if (ok || status != s->code ||
            json_integer_value(json_object_get(j, "error_code")) != s->code || !d ||
            !strstr(d, s->desc))
            fail_msg("%s %s: expected %d \"%s\", got HTTP %ld %s", s->method, s->body, s->code,
                     s->desc, status, text);
    }
    free(text);
    json_decref(j);
}

static int setup(void **state)
{
    (void)state;
    t = tg_test_start();
    if (!t)
        return -1;
    snprintf(vars[0], sizeof vars[0], "%lld", (long long)tg_test_user_id(t));
    int64_t u2 = tg_test_add_user(t, "Second");
    snprintf(vars[7], sizeof vars[0], "%lld", (long long)u2);
    int64_t g = tg_test_add_chat(t, "group", "Plain group", 0);
    int64_t sg = tg_test_add_chat(t, "supergroup", "Super", 0);
    int64_t ch = tg_test_add_chat(t, "channel", "News", 0);
    snprintf(vars[1], sizeof vars[0], "%lld", (long long)g);
    snprintf(vars[2], sizeof vars[0], "%lld", (long long)sg);
    snprintf(vars[3], sizeof vars[0], "%lld", (long long)ch);
    tg_test_join(t, g, tg_test_bot_id(t), false);
    tg_test_join(t, sg, tg_test_bot_id(t), true);
    tg_test_join(t, sg, u2, false);
    tg_test_send(t, 0, 0, "/start"); /* opens the private chat */
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tg_test_free(t);
    return 0;
}

static const step messages[] = {
    {"getMe", 'q', "", 0, "\"is_bot\":true", -1},
    {"sendMessage", 'j', "{\"chat_id\":$USER,\"text\":\"hi\"}", 0, "\"text\":\"hi\"", 4},
    {"sendMessage", 'f', "chat_id=$USER&text=form%20body", 0, "form body", -1},
    {"sendMessage", 'q', "chat_id=$USER&text=query", 0, "\"text\":\"query\"", -1},
    {"sendMessage", 'm', "chat_id=$USER&text=multi", 0, "\"text\":\"multi\"", -1},
    {"sendMessage", 'j', "{\"text\":\"x\"}", 400, "Bad Request: chat_id is empty", -1},
    {"sendMessage", 'j', "{\"chat_id\":$USER}", 400, "Bad Request: message text is empty", -1},
    {"sendMessage", 'j', "{\"chat_id\":$USER,\"text\":\"\"}", 400, "message text is empty", -1},
    {"sendMessage", 'j', "{\"chat_id\":42,\"text\":\"x\"}", 400, "Bad Request: chat not found", -1},
    {"sendMessage", 'j', "{\"chat_id\":$USR2,\"text\":\"x\"}", 403,
     "Forbidden: bot can't initiate conversation with a user", -1},
    {"sendMessage", 'j', "{\"chat_id\":$USER,\"text\":{\"a\":1}}", 400, "text: expected string",
     -1},
    {"sendMessage", 'j', "{\"chat_id\":$USER,\"text\":\"<b>bold</b>\",\"parse_mode\":\"HTML\"}", 0,
     "{\"type\":\"bold\",\"offset\":0,\"length\":4}", -1},
    {"sendMessage", 'j', "{\"chat_id\":$USER,\"text\":\"<b>bold\",\"parse_mode\":\"HTML\"}", 400,
     "can't parse entities: Can't find end tag corresponding to start tag", -1},
    {"sendMessage", 'j',
     "{\"chat_id\":$USER,\"text\":\"*b* _i_ a.b\",\"parse_mode\":"
     "\"MarkdownV2\"}",
     400, "Character '.' is reserved", -1},
    {"sendMessage", 'j',
     "{\"chat_id\":$USER,\"text\":\"*b* \\\\.\",\"parse_mode\":"
     "\"MarkdownV2\"}",
     0, "\"text\":\"b .\"", -1},
    {"sendMessage", 'j',
     "{\"chat_id\":$USER,\"text\":\"k\",\"reply_markup\":{\"inline_keyboard\":"
     "[[{\"text\":\"b\",\"callback_data\":"
     "\"0123456789012345678901234567890123456789012345678901234567890123"
     "4\"}]]}}",
     400, "BUTTON_DATA_INVALID", -1},
    {"sendMessage", 'j',
     "{\"chat_id\":$USER,\"text\":\"r\",\"reply_parameters\":"
     "{\"message_id\":9999}}",
     400, "message to be replied not found", -1},
    {"sendMessage", 'j',
     "{\"chat_id\":$USER,\"text\":\"r\",\"reply_parameters\":"
     "{\"message_id\":$MSG}}",
     0, "\"reply_to_message\":{\"message_id\":$MSG", -1},
    {"sendMessage", 'j', "{\"chat_id\":$CHAN,\"text\":\"x\"}", 403,
     "Forbidden: bot is not a member of the channel chat", -1},
    {"editMessageText", 'j', "{\"chat_id\":$USER,\"message_id\":$MSG,\"text\":\"edited\"}", 0,
     "\"edit_date\"", -1},
    {"editMessageText", 'j', "{\"chat_id\":$USER,\"message_id\":$MSG,\"text\":\"edited\"}", 400,
     "message is not modified", -1},
    {"editMessageText", 'j', "{\"chat_id\":$USER,\"message_id\":9999,\"text\":\"e\"}", 400,
     "message to edit not found", -1},
    {"editMessageText", 'j', "{\"chat_id\":$USER,\"message_id\":1,\"text\":\"e\"}", 400,
     "message can't be edited", -1},
    {"editMessageReplyMarkup", 'j',
     "{\"chat_id\":$USER,\"message_id\":$MSG,\"reply_markup\":"
     "{\"inline_keyboard\":[[{\"text\":\"b\",\"callback_data\":"
     "\"d\"}]]}}",
     0, "\"callback_data\":\"d\"", -1},
    {"editMessageCaption", 'j', "{\"chat_id\":$USER,\"message_id\":$MSG,\"caption\":\"c\"}", 400,
     "there is no caption in the message to edit", -1},
    {"forwardMessage", 'j', "{\"chat_id\":$USER,\"from_chat_id\":$USER,\"message_id\":1}", 0,
     "\"forward_origin\":{\"type\":\"user\"", -1},
    {"forwardMessage", 'j', "{\"chat_id\":$USER,\"from_chat_id\":$USER,\"message_id\":9999}", 400,
     "message to forward not found", -1},
    {"copyMessage", 'j', "{\"chat_id\":$SUPER,\"from_chat_id\":$USER,\"message_id\":1}", 0,
     "\"message_id\":", -1},
    {"copyMessage", 'j', "{\"chat_id\":$USER,\"from_chat_id\":$USER,\"message_id\":9999}", 400,
     "message to copy not found", -1},
    {"sendChatAction", 'j', "{\"chat_id\":$USER,\"action\":\"typing\"}", 0, "true", -1},
    {"sendChatAction", 'j', "{\"chat_id\":$USER,\"action\":\"dancing\"}", 400,
     "wrong parameter action", -1},
    {"pinChatMessage", 'j', "{\"chat_id\":$USER,\"message_id\":$MSG}", 0, "true", -1},
    {"pinChatMessage", 'j', "{\"chat_id\":$USER,\"message_id\":9999}", 400,
     "message to pin not found", -1},
    {"pinChatMessage", 'j', "{\"chat_id\":$GROUP,\"message_id\":1}", 400, "not enough rights", -1},
    {"unpinChatMessage", 'j', "{\"chat_id\":$USER,\"message_id\":$MSG}", 0, "true", -1},
    {"unpinChatMessage", 'j', "{\"chat_id\":$USER,\"message_id\":$MSG}", 400,
     "message to unpin not found", -1},
    {"unpinAllChatMessages", 'j', "{\"chat_id\":$USER}", 0, "true", -1},
    {"deleteMessage", 'j', "{\"chat_id\":$USER,\"message_id\":$MSG}", 0, "true", -1},
    {"deleteMessage", 'j', "{\"chat_id\":$USER,\"message_id\":$MSG}", 400,
     "message to delete not found", -1},
    {"deleteMessages", 'j', "{\"chat_id\":$USER,\"message_ids\":[]}", 400, "message_ids", -1},
    {"deleteMessages", 'j', "{\"chat_id\":$USER,\"message_ids\":[9998,9999]}", 0, "true", -1},
    {"answerCallbackQuery", 'j', "{\"callback_query_id\":\"nope\"}", 400,
     "query is too old and response timeout expired or query ID is invalid", -1},
    {"answerInlineQuery", 'j', "{\"inline_query_id\":\"nope\",\"results\":[]}", 400,
     "query ID is invalid", -1},
    {"sendPhoto", 'm', "chat_id=$USER&caption=pic&file:photo=PNGDATA", 0, "\"photo\":[",
     FILE_VAR(6)},
    {"sendDocument", 'm', "chat_id=$USER&file:document=hello file", 0, "\"document\":{",
     FILE_VAR(8)},
    {"sendDocument", 'j', "{\"chat_id\":$USER,\"document\":\"no-such-id\"}", 400,
     "wrong file identifier/HTTP URL specified", -1},
    {"sendPhoto", 'j', "{\"chat_id\":$USER}", 400, "photo is empty", -1},
    {"sendAudio", 'm', "chat_id=$USER&performer=P&file:audio=ID3", 0, "\"performer\":\"P\"", -1},
    {"sendVideo", 'm', "chat_id=$USER&width=640&file:video=MP4", 0, "\"width\":640",
     FILE_VAR(9)},
    {"sendVoice", 'm', "chat_id=$USER&duration=3&file:voice=OGG", 0, "\"voice\":{", -1},
    {"sendAnimation", 'j', "{\"chat_id\":$USER,\"animation\":\"https://x.y/cat.gif\"}", 0,
     "\"file_name\":\"cat.gif\"", -1},
    {"sendVideo", 'j',
     "{\"chat_id\":$USER,\"video\":\"$FVID\",\"caption\":\"again\"}", 0,
     "\"file_id\":\"$FVID\"", -1},
    {"sendLocation", 'j', "{\"chat_id\":$USER,\"latitude\":52.5,\"longitude\":13.4}", 0,
     "\"location\":{\"latitude\":52.5,\"longitude\":13.4}", -1},
    {"sendLocation", 'j', "{\"chat_id\":$USER,\"latitude\":95,\"longitude\":0}", 400,
     "wrong latitude or longitude", -1},
    {"sendLocation", 'j', "{\"chat_id\":$USER,\"latitude\":1}", 400, "longitude is empty", -1},
    {"sendContact", 'j', "{\"chat_id\":$USER,\"phone_number\":\"+100\",\"first_name\":\"Al\"}", 0,
     "\"contact\":{\"phone_number\":\"+100\"", -1},
    {"sendContact", 'j', "{\"chat_id\":$USER,\"first_name\":\"Al\"}", 400, "phone_number is empty",
     -1},
    {"sendMediaGroup", 'm',
     "chat_id=$USER&media=[{\"type\":\"photo\",\"media\":\"attach://a\","
     "\"caption\":\"<b>one</b>\",\"parse_mode\":\"HTML\"},{\"type\":"
     "\"photo\",\"media\":\"attach://b\"}]&file:a=A&file:b=B",
     0, "\"media_group_id\"", -1},
    {"sendMediaGroup", 'j',
     "{\"chat_id\":$USER,\"media\":[{\"type\":\"photo\",\"media\":"
     "\"$FILE\"}]}",
     400, "an album must hold 2 to 10 media", -1},
    {"sendMediaGroup", 'j',
     "{\"chat_id\":$USER,\"media\":[{\"type\":\"photo\",\"media\":"
     "\"$FILE\"},{\"type\":\"document\","
     "\"media\":\"$FDOC\"}]}",
     400, "only be grouped with their own kind", -1},
    {"sendMediaGroup", 'j',
     "{\"chat_id\":$USER,\"media\":[{\"type\":\"photo\",\"media\":"
     "\"$FILE\"},{\"type\":\"photo\","
     "\"media\":\"attach://missing\"}]}",
     400, "wrong file identifier/HTTP URL specified", -1},
    {"sendDice", 'j', "{\"chat_id\":$USER}", 0, "\"dice\":{\"emoji\":\"\xf0\x9f\x8e\xb2\"", -1},
    {"sendDice", 'j', "{\"chat_id\":$USER,\"emoji\":\"x\"}", 400, "invalid dice emoji", -1},
    {"sendPhoto", 'j',
     "{\"chat_id\":$USER,\"photo\":\"$FILE\","
     "\"caption\":\"<b\",\"parse_mode\":\"HTML\"}",
     400, "can't parse entities", -1},
    {"getFile", 'j', "{\"file_id\":\"no-such-id\"}", 400, "invalid file_id", -1},
    {"getFile", 'j', "{\"file_id\":\"$FDOC\"}", 0,
     "\"file_path\":\"documents/file_2", -1},
    {"getUpdates", 'j', "{\"offset\":-1,\"timeout\":0}", 0, "\"update_id\"", -1},
    {"getUpdates", 'j', "{\"limit\":\"many\"}", 400, "limit: expected integer", -1},
    {"close", 'j', "{}", 0, "true", -1},
    {"logOut", 'j', "{}", 0, "true", -1},
};

static const step chats[] = {
    {"getChat", 'j', "{\"chat_id\":$SUPER}", 0, "\"title\":\"Super\"", -1},
    {"getChat", 'j', "{\"chat_id\":$USER}", 0, "\"type\":\"private\"", -1},
    {"getChat", 'j', "{\"chat_id\":-77}", 400, "chat not found", -1},
    {"getChatMember", 'j', "{\"chat_id\":$SUPER,\"user_id\":$USR2}", 0, "\"status\":\"member\"",
     -1},
    {"getChatMember", 'j', "{\"chat_id\":$SUPER,\"user_id\":$USER}", 0, "\"status\":\"creator\"",
     -1},
    {"getChatMember", 'j', "{\"chat_id\":$SUPER,\"user_id\":5}", 400, "user not found", -1},
    {"getChatMemberCount", 'j', "{\"chat_id\":$SUPER}", 0, "\"result\":3", -1},
    {"getChatAdministrators", 'j', "{\"chat_id\":$SUPER}", 0, "\"status\":\"administrator\"", -1},
    {"getChatAdministrators", 'j', "{\"chat_id\":$USER}", 400, "no administrators", -1},
    {"restrictChatMember", 'j',
     "{\"chat_id\":$SUPER,\"user_id\":$USR2,\"permissions\":"
     "{\"can_send_messages\":false}}",
     0, "true", -1},
    {"getChatMember", 'j', "{\"chat_id\":$SUPER,\"user_id\":$USR2}", 0, "\"status\":\"restricted\"",
     -1},
    {"restrictChatMember", 'j', "{\"chat_id\":$SUPER,\"user_id\":$USR2}", 400,
     "permissions is empty", -1},
    {"restrictChatMember", 'j', "{\"chat_id\":$GROUP,\"user_id\":$USR2,\"permissions\":{}}", 400,
     "not enough rights", -1},
    {"promoteChatMember", 'j', "{\"chat_id\":$SUPER,\"user_id\":$USR2,\"can_pin_messages\":true}",
     0, "true", -1},
    {"getChatMember", 'j', "{\"chat_id\":$SUPER,\"user_id\":$USR2}", 0, "\"can_pin_messages\":true",
     -1},
    {"banChatMember", 'j', "{\"chat_id\":$SUPER,\"user_id\":$USER}", 400, "can't remove chat owner",
     -1},
    {"banChatMember", 'j', "{\"chat_id\":$SUPER,\"user_id\":$USR2}", 0, "true", -1},
    {"getChatMember", 'j', "{\"chat_id\":$SUPER,\"user_id\":$USR2}", 0, "\"status\":\"kicked\"",
     -1},
    {"banChatMember", 'j', "{\"chat_id\":$SUPER}", 400, "user_id is empty", -1},
    {"unbanChatMember", 'j', "{\"chat_id\":$SUPER,\"user_id\":$USR2}", 0, "true", -1},
    {"getChatMember", 'j', "{\"chat_id\":$SUPER,\"user_id\":$USR2}", 0, "\"status\":\"left\"", -1},
    {"setChatTitle", 'j', "{\"chat_id\":$SUPER,\"title\":\"Renamed\"}", 0, "true", -1},
    {"setChatTitle", 'j', "{\"chat_id\":$GROUP,\"title\":\"No\"}", 400, "not enough rights", -1},
    {"setChatDescription", 'j', "{\"chat_id\":$SUPER,\"description\":\"About\"}", 0, "true", -1},
    {"getChat", 'j', "{\"chat_id\":$SUPER}", 0, "\"description\":\"About\"", -1},
    {"approveChatJoinRequest", 'j', "{\"chat_id\":$SUPER,\"user_id\":$USR2}", 400,
     "HIDE_REQUESTER_MISSING", -1},
    {"declineChatJoinRequest", 'j', "{\"chat_id\":$SUPER,\"user_id\":$USR2}", 400,
     "HIDE_REQUESTER_MISSING", -1},
    {"setMyCommands", 'j', "{\"commands\":[{\"command\":\"start\",\"description\":\"Start\"}]}", 0,
     "true", -1},
    {"setMyCommands", 'j',
     "{\"commands\":[{\"command\":\"start\",\"description\":\"Anfang\"}],"
     "\"language_code\":\"de\"}",
     0, "true", -1},
    {"setMyCommands", 'j', "{\"commands\":[{\"command\":\"Bad Name\",\"description\":\"x\"}]}", 400,
     "BOT_COMMAND_INVALID", -1},
    {"setMyCommands", 'j', "{}", 400, "commands is empty", -1},
    {"getMyCommands", 'j', "{}", 0, "\"description\":\"Start\"", -1},
    {"getMyCommands", 'j', "{\"language_code\":\"de\"}", 0, "Anfang", -1},
    {"getMyCommands", 'j', "{\"scope\":{\"type\":\"all_group_chats\"}}", 0, "\"result\":[]", -1},
    {"getMyCommands", 'j', "{\"language_code\":\"german\"}", 400, "invalid language code", -1},
    {"deleteMyCommands", 'j', "{}", 0, "true", -1},
    {"getMyCommands", 'j', "{}", 0, "\"result\":[]", -1},
    {"leaveChat", 'j', "{\"chat_id\":$USER}", 400, "private chats", -1},
    {"leaveChat", 'j', "{\"chat_id\":$GROUP}", 0, "true", -1},
    {"sendMessage", 'j', "{\"chat_id\":$GROUP,\"text\":\"x\"}", 403,
     "bot is not a member of the group chat", -1},
};

static const step hooks[] = {
    {"setWebhook", 'j', "{\"url\":\"ftp://x\"}", 400, "An HTTPS URL must be provided", -1},
    {"setWebhook", 'j', "{\"url\":\"http://127.0.0.1:9/h\",\"secret_token\":\"bad token!\"}", 400,
     "secret token contains unallowed characters", -1},
    {"setWebhook", 'j', "{}", 400, "url is empty", -1},
    {"setWebhook", 'j', "{\"url\":\"http://127.0.0.1:9/h\",\"max_connections\":1000}", 400,
     "max_connections", -1},
    {"setWebhook", 'j', "{\"url\":\"http://127.0.0.1:9/h\",\"secret_token\":\"ok_1\"}", 0, "true",
     -1},
    {"getWebhookInfo", 'j', "{}", 0, "\"url\":\"http://127.0.0.1:9/h\"", -1},
    {"getUpdates", 'j', "{}", 409, "Conflict: can't use getUpdates method while webhook is active",
     -1},
    {"deleteWebhook", 'j', "{\"drop_pending_updates\":true}", 0, "true", -1},
    {"getWebhookInfo", 'j', "{}", 0, "\"pending_update_count\":0", -1},
    {"getUpdates", 'j', "{\"timeout\":0}", 0, "\"result\":[]", -1},
};

static void run_table(const step *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        run_step(&s[i]);
}

static void test_messages(void **state)
{
    (void)state;
    run_table(messages, sizeof messages / sizeof messages[0]);
}

static void test_chats(void **state)
{
    (void)state;
    run_table(chats, sizeof chats / sizeof chats[0]);
}

static void test_webhooks(void **state)
{
    (void)state;
    run_table(hooks, sizeof hooks / sizeof hooks[0]);
}

/* Every generated method is known: emulated, or "not emulated"; never 404, never ok. */
static void test_every_method_known(void **state)
{
    (void)state;
    size_t emulated = 0;
    for (size_t i = 0; i < tg__method_count; i++) {
        const char *name = tg__methods[i]->name;
        if (emu_api_emulated(name)) {
            emulated++;
            continue;
        }
        long status;
        json_t *j = call(tg_test_token(t), name, "{}", 'j', &status);
        const char *d = json_string_value(json_object_get(j, "description"));
        assert_int_equal(status, 400);
        assert_non_null(d);
        assert_non_null(strstr(d, "is not emulated by tgbot-emulator"));
        assert_non_null(strstr(d, name));
        json_decref(j);
    }
    assert_true(emulated >= 40);
    long status;
    json_t *j = call(tg_test_token(t), "sendTelepathy", "{}", 'j', &status);
    assert_int_equal(status, 404);
    assert_string_equal(json_string_value(json_object_get(j, "description")), "Not Found");
    json_decref(j);
    j = call(tg_test_token(t), "SENDMESSAGE", "{\"chat_id\":$USER,\"text\":\"case\"}", 'j',
             &status);
    assert_int_equal(status, 200); /* method names are case-insensitive, as on Telegram */
    json_decref(j);
    j = call("12:short", "getMe", "{}", 'j', &status);
    assert_int_equal(status, 401);
    assert_string_equal(json_string_value(json_object_get(j, "description")), "Unauthorized");
    json_decref(j);
}

/* Long poll: an update that arrives during getUpdates ends it at once. */
static void test_long_poll_callback(void **state)
{
    (void)state;
    long status;
    json_t *j = call(tg_test_token(t), "getUpdates", "{\"offset\":-1}", 'j', &status);
    json_t *res = json_object_get(j, "result");
    json_int_t next =
        json_array_size(res)
            ? json_integer_value(json_object_get(json_array_get(res, 0), "update_id")) + 1
            : 0;
    json_decref(j);
    char body[128];
    snprintf(body, sizeof body, "{\"offset\":%lld}", (long long)next);
    j = call(tg_test_token(t), "getUpdates", body, 'j', &status);
    json_decref(j);
    int64_t id = tg_test_send(t, 0, 0, "during poll");
    snprintf(body, sizeof body, "{\"offset\":%lld,\"timeout\":20}", (long long)next);
    j = call(tg_test_token(t), "getUpdates", body, 'j', &status);
    char *text = json_dumps(j, JSON_COMPACT);
    assert_non_null(strstr(text, "during poll"));
    (void)id;
    free(text);
    json_decref(j);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_messages),           cmocka_unit_test(test_chats),
        cmocka_unit_test(test_webhooks),           cmocka_unit_test(test_every_method_known),
        cmocka_unit_test(test_long_poll_callback),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    curl_global_cleanup();
    return rc;
}
