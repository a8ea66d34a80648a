/*
 * The example bots as a user runs them: the built binary, pointed at the fake Bot API with
 * TELEGRAM_API_URL, gets real updates by long polling; the test checks the calls it made
 * (method and JSON body) and that it exits 0 on SIGTERM. Skipped when examples are not
 * built.
 */
#include "tgtest.h"

#include <jansson.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "dispatch_fakeapi.h"

#define TOKEN "123456:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

static pid_t spawn_example(fakeapi *f, const char *path)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("TELEGRAM_BOT_TOKEN", TOKEN, 1);
        setenv("TELEGRAM_API_URL", fakeapi_url(f), 1);
        execl(path, path, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Wait (bounded) until method was called n times. */
static void wait_calls(fakeapi *f, const char *method, size_t n)
{
    for (int i = 0; i < 2000 && fakeapi_count(f, method) < n; i++)
        tg__sleep_ms(10);
    assert_true(fakeapi_count(f, method) >= n);
}

static void stop_example(pid_t pid)
{
    kill(pid, SIGTERM);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* The i-th body of method, parsed. */
static json_t *body_of(fakeapi *f, const char *method, size_t i)
{
    char *b = fakeapi_body(f, method, i);
    assert_non_null(b);
    json_t *j = json_loads(b, 0, NULL);
    free(b);
    assert_non_null(j);
    return j;
}

/* The callback_data of button (row, col) of an inline keyboard object. */
static const char *button_data(json_t *markup, size_t row, size_t col)
{
    json_t *rows = json_object_get(markup, "inline_keyboard");
    return json_string_value(
        json_object_get(json_array_get(json_array_get(rows, row), col), "callback_data"));
}

static void test_inline_keyboard(void **state)
{
    (void)state;
    const char *bin = TGKIT_BINARY_DIR "/examples/inline_keyboard/inline_keyboard";
    if (access(bin, X_OK) != 0)
        skip();
    fakeapi *f = fakeapi_start(TOKEN);
    fakeapi_add_update(f, 1,
                       "{\"update_id\":1,\"message\":{\"message_id\":7,\"date\":1,\"chat\":{\"id\":"
                       "9,\"type\":\"private\"},\"from\":{\"id\":9,\"is_bot\":false,"
                       "\"first_name\":\"A\"},\"text\":\"/start\"}}");
    pid_t pid = spawn_example(f, bin);
    wait_calls(f, "sendMessage", 1);
    json_t *j = body_of(f, "sendMessage", 0);
    assert_int_equal(json_integer_value(json_object_get(j, "chat_id")), 9);
    assert_string_equal(json_string_value(json_object_get(j, "text")), "Count: 0");
    json_t *kb = json_object_get(j, "reply_markup");
    assert_string_equal(button_data(kb, 0, 0), "count:-1");
    assert_string_equal(button_data(kb, 0, 1), "count:1");
    json_decref(j);

    fakeapi_add_update(f, 2,
                       "{\"update_id\":2,\"callback_query\":{\"id\":\"cb1\",\"from\":{\"id\":9,"
                       "\"is_bot\":false,\"first_name\":\"A\"},\"chat_instance\":\"ci\","
                       "\"data\":\"count:1\",\"message\":{\"message_id\":8,\"date\":1,"
                       "\"chat\":{\"id\":9,\"type\":\"private\"},\"text\":\"Count: 0\"}}}");
    wait_calls(f, "answerCallbackQuery", 1);
    j = body_of(f, "editMessageText", 0);
    assert_int_equal(json_integer_value(json_object_get(j, "chat_id")), 9);
    assert_int_equal(json_integer_value(json_object_get(j, "message_id")), 8);
    assert_string_equal(json_string_value(json_object_get(j, "text")), "Count: 1");
    kb = json_object_get(j, "reply_markup");
    assert_string_equal(button_data(kb, 0, 0), "count:0");
    assert_string_equal(button_data(kb, 0, 1), "count:2");
    json_decref(j);
    j = body_of(f, "answerCallbackQuery", 0);
    assert_string_equal(json_string_value(json_object_get(j, "callback_query_id")), "cb1");
    json_decref(j);
    stop_example(pid);
    fakeapi_stop(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inline_keyboard),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
