/*
 * The world saved to a file and loaded into a fresh emulator: bots with their commands,
 * users, groups with members and pins, messages (with entities and keyboards) and files come
 * back the same, and the loaded world goes on (new message ids follow the old ones). Broken
 * files fail with a message naming where.
 */
#include "tgtest.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "emulator/api.h"
#include "emulator/server.h"

#define TOKEN "7300001:AAHstateTestTokenAAAAAAAAAAAAAAAAAAA"

static char *ctl(emu *e, const char *name, const char *method, const char *body)
{
    emu_form q;
    emu_form_init(&q);
    tg__buf out;
    tg__buf_init(&out, 0);
    int code = emu_control(e, name, method, &q, body, strlen(body), &out);
    emu_form_cleanup(&q);
    if (code != 200)
        fail_msg("control %s %s: %d %s", name, body, code, tg__buf_cstr(&out));
    char *s = strdup(tg__buf_cstr(&out));
    tg__buf_cleanup(&out);
    return s;
}

static char *call(emu *e, const char *method, const char *body)
{
    tg__buf out;
    tg__buf_init(&out, 0);
    int code = emu_api_call(e, TOKEN, method, body, strlen(body), NULL, &out);
    if (code != 200)
        fail_msg("%s %s: %d %s", method, body, code, tg__buf_cstr(&out));
    char *s = strdup(tg__buf_cstr(&out));
    tg__buf_cleanup(&out);
    return s;
}

static emu *fresh(void)
{
    char err[200];
    emu *e = emu_new(&(emu_options){.max_wait_ms = 1}, err, sizeof err);
    assert_non_null(e);
    return e;
}

static void build_world(emu *e)
{
    free(ctl(e, "bots", "POST", "{\"token\":\"" TOKEN "\",\"username\":\"kept_bot\"}"));
    free(ctl(e, "users", "POST", "{\"first_name\":\"Alice\",\"username\":\"alice\"}"));
    free(ctl(e, "chats", "POST",
             "{\"type\":\"supergroup\",\"title\":\"Kept\",\"owner_id\":100000001}"));
    free(ctl(e, "join", "POST", "{\"chat_id\":-1000000001001,\"user_id\":7300001,\"admin\":true}"));
    free(ctl(e, "join", "POST", "{\"chat_id\":-1000000001001,\"user_id\":100000002}"));
    free(ctl(e, "send", "POST", "{\"text\":\"/start\"}"));
    free(ctl(e, "document", "POST", "{\"file_name\":\"a.txt\",\"data\":\"file body\"}"));
    free(call(e, "sendMessage",
              "{\"chat_id\":100000001,\"text\":\"<b>hi</b>\",\"parse_mode\":"
              "\"HTML\",\"reply_markup\":{\"inline_keyboard\":[[{\"text\":\"k\","
              "\"callback_data\":\"d\"}]]}}"));
    free(call(e, "pinChatMessage", "{\"chat_id\":-1000000001001,\"message_id\":1}"));
    free(call(e, "setMyCommands",
              "{\"commands\":[{\"command\":\"go\",\"description\":\"Go\"}],"
              "\"language_code\":\"fr\"}"));
}

static void test_round_trip(void **state)
{
    (void)state;
    char path[] = "/tmp/tgemu-state-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    char err[300];
    emu *a = fresh();
    build_world(a);
    assert_int_equal(emu_state_save(a, path, err, sizeof err), 0);
    char *st_a = ctl(a, "state", "GET", "");
    char *msgs_a = ctl(a, "messages", "GET", "{\"chat_id\":100000001}");
    char *grp_a = ctl(a, "messages", "GET", "{\"chat_id\":-1000000001001}");
    emu_free(a);

    emu *b = fresh();
    assert_int_equal(emu_state_load(b, path, err, sizeof err), 0);
    char *st_b = ctl(b, "state", "GET", "");
    char *msgs_b = ctl(b, "messages", "GET", "{\"chat_id\":100000001}");
    char *grp_b = ctl(b, "messages", "GET", "{\"chat_id\":-1000000001001}");
    /* versions differ (a fresh world counts its own changes); the contents must not */
    assert_string_equal(strstr(msgs_a, "\"messages\""), strstr(msgs_b, "\"messages\""));
    assert_string_equal(strstr(grp_a, "\"messages\""), strstr(grp_b, "\"messages\""));
    /* users the same; bots and chats the same apart from pending updates and versions */
    char *ua = strstr(st_a, "\"users\""), *ub = strstr(st_b, "\"users\"");
    assert_int_equal(strstr(ua, "\"chats\"") - ua, strstr(ub, "\"chats\"") - ub);
    assert_memory_equal(ua, ub, (size_t)(strstr(ua, "\"chats\"") - ua));
    static const char group[] = "{\"chat\":{\"id\":-1000000001001,\"type\":\"supergroup\","
                                "\"title\":\"Kept\"},\"bot_id\":0,";
    const char *same[] = {"\"username\":\"kept_bot\"", group,
                          "{\"chat\":{\"id\":100000001,\"type\":\"private\","};
    for (size_t i = 0; i < 3; i++)
        assert_true(strstr(st_a, same[i]) && strstr(st_b, same[i]));
    char *cmds = call(b, "getMyCommands", "{\"language_code\":\"fr\"}");
    assert_non_null(strstr(cmds, "\"command\":\"go\""));
    /* the document's file_id, still the bot's to use after the restart */
    const char *fid = strstr(msgs_a, "\"file_id\":\"");
    assert_non_null(fid);
    char body[160];
    snprintf(body, sizeof body, "{\"file_id\":\"%.*s\"}", (int)strcspn(fid + 11, "\""), fid + 11);
    char *file = call(b, "getFile", body);
    assert_non_null(strstr(file, "\"file_size\":9"));
    char *chat = call(b, "getChat", "{\"chat_id\":-1000000001001}");
    assert_non_null(strstr(chat, "\"pinned_message\":{\"message_id\":1"));
    char *next = call(b, "sendMessage", "{\"chat_id\":100000001,\"text\":\"after\"}");
    assert_non_null(strstr(next, "\"message_id\":4")); /* after /start, document, hi */
    free(st_a), free(msgs_a), free(grp_a), free(st_b), free(msgs_b), free(grp_b);
    free(cmds), free(file), free(chat), free(next);
    emu_free(b);
    unlink(path);
}

static void test_bad_files(void **state)
{
    (void)state;
    static const struct {
        const char *json, *err;
    } cases[] = {
        {"[]", "state: (top): expected an object with \"format\": 1"},
        {"{\"format\":1,\"bots\":{}}", "bots, users, chats and files must be arrays"},
        {"{\"format\":1,\"bots\":[{\"token\":\"1:short\"}]}", "bots[0]: a bot needs a well-formed"},
        {"{\"format\":1,\"chats\":[{\"id\":-5,\"type\":\"group\",\"messages\":[{\"message\":"
         "{\"message_id\":1,\"date\":1}}]}]}",
         "chats[0].messages[0].message: missing required field \"chat\""},
        {"{\"format\":1,\"chats\":[{\"id\":5,\"type\":\"private\",\"bot_id\":9}]}",
         "a private chat needs its bot and its user"},
        {"{\"format\":1,\"files\":[{\"file_id\":\"x\",\"file_path\":\"p\",\"data_base64\":\"@@\"}]"
         "}",
         "files[0]: a file needs"},
        {"{\"format\":1,", "state: not JSON"},
        /* kept NUL-terminated, "A\u0000B" would load as "A": refused where it is */
        {"{\"format\":1,\"users\":[{\"id\":5,\"first_name\":\"A\\u0000B\"}]}",
         "state: users[0].first_name: a string holding \\u0000"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        emu *e = fresh();
        char err[300] = "";
        assert_int_equal(
            emu_state_load_json(e, cases[i].json, strlen(cases[i].json), err, sizeof err), -1);
        if (!strstr(err, cases[i].err))
            fail_msg("case %zu: expected \"%s\" in \"%s\"", i, cases[i].err, err);
        emu_free(e);
    }
}

/* The state file holds tokens: neither a FILE.tmp created beforehand by another user nor a
 * link planted there becomes the state file or redirects the write (issue 21, item 9). */
static void test_save_through_planted_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/tgemu-state-dir-XXXXXX", path[64], tmp[72], victim[64], err[600];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/world.json", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    snprintf(victim, sizeof victim, "%s/victim", dir);
    emu *e = fresh();
    build_world(e);
    /* a world-writable FILE.tmp of another owner */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0666);
    assert_true(fd >= 0);
    assert_int_equal(fchmod(fd, 0666), 0);
    if (geteuid() == 0)
        assert_int_equal(fchown(fd, 65534, 65534), 0);
    close(fd);
    struct stat planted, st;
    assert_int_equal(stat(tmp, &planted), 0);
    assert_int_equal(emu_state_save(e, path, err, sizeof err), 0);
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode) && st.st_ino != planted.st_ino);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(st.st_uid, geteuid());
    assert_int_equal(stat(tmp, &st), 0);
    assert_int_equal(st.st_size, 0); /* nothing written into it */
    /* a link at FILE.tmp to another file */
    assert_int_equal(unlink(tmp), 0);
    fd = open(victim, O_WRONLY | O_CREAT | O_EXCL, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "precious", 8), 8);
    close(fd);
    assert_int_equal(symlink(victim, tmp), 0);
    assert_int_equal(chmod(path, 0640), 0);
    assert_int_equal(emu_state_save(e, path, err, sizeof err), 0);
    assert_int_equal(stat(victim, &st), 0);
    assert_int_equal(st.st_size, 8);
    assert_int_equal(lstat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0640); /* the owner's chosen mode is kept */
    /* a link at FILE itself is refused */
    assert_int_equal(unlink(path), 0);
    assert_int_equal(symlink(victim, path), 0);
    assert_int_equal(emu_state_save(e, path, err, sizeof err), -1);
    assert_non_null(strstr(err, "symbolic link"));
    assert_int_equal(stat(victim, &st), 0);
    assert_int_equal(st.st_size, 8);
    emu_free(e);
    unlink(path), unlink(tmp), unlink(victim);
    assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_save_through_planted_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
