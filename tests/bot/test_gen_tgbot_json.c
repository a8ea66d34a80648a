/*
 * The tgbot-json tool end to end: decode -> encode must reproduce the input as a JSON value
 * (jansson's json_equal, key order aside) for the shared fixtures and for payloads with
 * fields and variants newer than the generated API; unknown fields are listed on stderr;
 * malformed or mistyped input exits 1 with one error line naming the JSON path.
 */
#include "tgtest.h"

#include <sys/wait.h>
#include <unistd.h>

typedef struct run {
    int status;
    char *out;
    char *err;
} run;

static char *slurp(const char *path)
{
    char *s = tgtest_read_file(path, NULL);
    assert_non_null(s);
    return s;
}

static run tool(const char *type, const char *input)
{
    char in[] = "/tmp/tgbot-json-in-XXXXXX";
    int fd = mkstemp(in);
    assert_true(fd >= 0);
    size_t n = strlen(input);
    assert_int_equal(write(fd, input, n), (ssize_t)n);
    close(fd);
    char out[64], err[64], cmd[1024];
    snprintf(out, sizeof out, "%s.out", in);
    snprintf(err, sizeof err, "%s.err", in);
    snprintf(cmd, sizeof cmd, "'%s/tgbot-json' decode %s < %s > %s 2> %s", TGKIT_BINARY_DIR, type,
             in, out, err);
    int st = system(cmd);
    run r = {WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp(out), slurp(err)};
    unlink(in);
    unlink(out);
    unlink(err);
    return r;
}

static void run_free(run *r)
{
    free(r->out);
    free(r->err);
}

static void test_fixtures_round_trip(void **state)
{
    (void)state;
    const char *names[] = {"small_update.json", "large_update.json", "dispatch_update.json"};
    for (size_t i = 0; i < 3; i++) {
        char rel[96];
        snprintf(rel, sizeof rel, "fixtures/botapi/%s", names[i]);
        char *in = slurp(tgtest_data_path(rel));
        run r = tool("Update", in);
        assert_int_equal(r.status, 0);
        assert_string_equal(r.err, "");
        tgtest_assert_same_json(in, r.out);
        run_free(&r);
        free(in);
    }
}

static void test_unknown_fields_listed_and_kept(void **state)
{
    (void)state;
    const char *in =
        "{\"update_id\":3,\"brand_new\":{\"deep\":[1,2,{\"x\":null}]},"
        "\"message\":{\"message_id\":4,\"date\":5,\"chat\":{\"id\":6,\"type\":\"private\","
        "\"mood\":\"calm\"},\"forward_origin\":{\"type\":\"pigeon\",\"wings\":2},"
        "\"entities\":[{\"type\":\"glitter\",\"offset\":0,\"length\":1}]}}";
    run r = tool("Update", in);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.err, "unknown field: brand_new\n"));
    assert_non_null(strstr(r.err, "unknown field: message.chat.mood\n"));
    assert_non_null(strstr(r.err, "unknown variant: message.forward_origin\n"));
    tgtest_assert_same_json(in, r.out);
    run_free(&r);

    const char *member = "{\"status\":\"member\",\"user\":{\"id\":1,\"is_bot\":false,"
                         "\"first_name\":\"A\"},\"until_date\":9,\"can_fly\":true}";
    r = tool("ChatMember", member);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.err, "unknown field: can_fly\n");
    tgtest_assert_same_json(member, r.out);
    run_free(&r);
}

static void test_bad_input(void **state)
{
    (void)state;
    static const struct {
        const char *type, *in, *want;
        int status;
    } cases[] = {
        {"Update", "{\"update_id\":1,\"message\":{\"message_id\":true}}",
         "message.message_id: expected integer, found true", 1},
        {"Update", "{\"update_id\":1,", "at byte", 1},
        {"Message", "", "at byte", 1},
        {"NoSuchType", "{}", "unknown type 'NoSuchType'", 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run r = tool(cases[i].type, cases[i].in);
        assert_int_equal(r.status, cases[i].status);
        assert_string_equal(r.out, "");
        if (!strstr(r.err, cases[i].want))
            fail_msg("case %zu: '%s' lacks '%s'", i, r.err, cases[i].want);
        assert_non_null(strchr(r.err, '\n'));
        assert_null(strchr(strchr(r.err, '\n') + 1, '\n')); /* one line */
        run_free(&r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures_round_trip),
        cmocka_unit_test(test_unknown_fields_listed_and_kept),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
