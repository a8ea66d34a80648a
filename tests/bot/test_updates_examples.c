/*
 * The echo example as a user runs it: the built binary, pointed at the fake Bot API with
 * TELEGRAM_API_URL, answers a private text message with the same text as a reply, ignores a
 * group message, and exits 0 on SIGTERM and on SIGINT after confirming what it handled.
 * Skipped when examples are not built.
 */
#include "tgtest.h"

#include <jansson.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "dispatch_fakeapi.h"

#define TOKEN    "123456:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
#define ECHO_BIN TGKIT_BINARY_DIR "/examples/echo/echo"

static pid_t spawn_echo(fakeapi *f)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("TELEGRAM_BOT_TOKEN", TOKEN, 1);
        setenv("TELEGRAM_API_URL", fakeapi_url(f), 1);
        execl(ECHO_BIN, "echo", (char *)NULL);
        _exit(127);
    }
    return pid;
}

static void run_echo(int sig)
{
#ifdef TGKIT_NO_EXAMPLES
    tgtest_skip("the example bots are not built here (TGKIT_BUILD_EXAMPLES=OFF)");
#endif
    if (access(ECHO_BIN, X_OK) != 0) /* a build dependency (CMakeLists.txt) */
        fail_msg("%s: not built", ECHO_BIN);
    fakeapi *f = fakeapi_start(TOKEN);
    fakeapi_add_update(f, 1,
                       "{\"update_id\":1,\"message\":{\"message_id\":7,\"chat\":{\"id\":-5,"
                       "\"type\":\"group\"},\"from\":{\"id\":2},\"text\":\"not me\"}}");
    fakeapi_add_update(f, 2,
                       "{\"update_id\":2,\"message\":{\"message_id\":8,\"chat\":{\"id\":2,"
                       "\"type\":\"private\"},\"from\":{\"id\":2},\"text\":\"h\\u00e9llo\"}}");
    pid_t pid = spawn_echo(f);
    for (int i = 0; i < 2000 && fakeapi_count(f, "sendMessage") < 1; i++)
        tg__sleep_ms(10);
    for (int i = 0; i < 2000 && fakeapi_offset(f) < 3; i++)
        tg__sleep_ms(10);
    kill(pid, sig);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal((int)fakeapi_count(f, "sendMessage"), 1);
    assert_int_equal((int)fakeapi_count(f, "deleteWebhook"), 1);
    char *b = fakeapi_body(f, "sendMessage", 0);
    json_t *j = json_loads(b, 0, NULL);
    assert_int_equal(json_integer_value(json_object_get(j, "chat_id")), 2);
    assert_string_equal(json_string_value(json_object_get(j, "text")), "h\xc3\xa9llo");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(j, "reply_parameters"), "message_id")),
        8);
    json_decref(j);
    free(b);
    assert_int_equal(fakeapi_offset(f), 3); /* both updates confirmed before exiting */
    fakeapi_stop(f);
}

static void test_echo_sigterm(void **state)
{
    (void)state;
    run_echo(SIGTERM);
}

static void test_echo_sigint(void **state)
{
    (void)state;
    run_echo(SIGINT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_echo_sigterm),
        cmocka_unit_test(test_echo_sigint),
    };
    return tgtest_result(cmocka_run_group_tests(tests, NULL, NULL));
}
