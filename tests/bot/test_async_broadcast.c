/*
 * test_async_broadcast: examples/async_broadcast end to end against the tgbot-emulator
 * program started with --rate-limits (Telegram's limits, 429 beyond them).
 *
 * 2,000 chats: 1,900 users who started the bot (50 of whom then blocked it) and 100 ids the
 * emulator does not know. The broadcast is interrupted (SIGINT) once a few hundred chats
 * have their outcome, then run again with the same progress file, and must:
 *   - exit 1 the first time ("interrupted"), 0 the second, with the summary
 *     "sent 1850, failed 150 (blocked 50, not found 100)";
 *   - never meet a 429 ("flood-waited and retried 0" in both runs: every 429 the emulator
 *     answers reaches the client and is counted there);
 *   - deliver exactly one message to every reachable user and none to the blocked ones
 *     (the emulator's message lists, chat by chat): nothing sent twice across the resume.
 * Without the programs built the test fails, naming what is missing.
 */
#include "tgtest.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#define TOKEN    "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_"
#define EMU      TGKIT_BINARY_DIR "/tgbot-emulator"
#define EXAMPLE  TGKIT_BINARY_DIR "/examples/async_broadcast/async_broadcast"
#define USERS    1900
#define BLOCKED  50
#define UNKNOWN  100
#define TEXT     "broadcast to everyone"

static char base[64];
static pid_t emu_pid = -1;

struct body {
    char *p;
    size_t n;
};

static size_t collect(char *p, size_t s, size_t n, void *u)
{
    struct body *b = u;
    char *g = realloc(b->p, b->n + s * n + 1);
    assert_non_null(g);
    memcpy(g + b->n, p, s * n);
    b->n += s * n;
    g[b->n] = '\0';
    b->p = g;
    return s * n;
}

/* One control API call; the parsed answer (json_decref it). */
static json_t *control(CURL *c, const char *path, const char *post)
{
    char url[256];
    snprintf(url, sizeof url, "%s/control/%s", base, path);
    struct body b = {0};
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    if (post) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, post);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    }
    CURLcode rc = curl_easy_perform(c);
    curl_slist_free_all(h);
    if (rc != CURLE_OK)
        fail_msg("control %s: %s", path, curl_easy_strerror(rc));
    json_t *j = json_loads(b.p ? b.p : "", 0, NULL);
    if (!j || !json_is_true(json_object_get(j, "ok")))
        fail_msg("control %s: %s", path, b.p ? b.p : "(empty)");
    free(b.p);
    return j;
}

static void emu_start(void)
{
    if (access(EMU, X_OK) != 0)
        fail_msg("%s: not built", EMU);
    int out[2];
    assert_int_equal(pipe(out), 0);
    emu_pid = fork();
    if (emu_pid == 0) {
        dup2(out[1], 1);
        close(out[0]);
        execl(EMU, EMU, "--listen", "127.0.0.1:0", "--rate-limits", "--bot", TOKEN, (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    /* "tgbot-emulator: web chat at http://127.0.0.1:PORT/" */
    FILE *f = fdopen(out[0], "r");
    char line[256];
    unsigned port = 0;
    while (!port && fgets(line, sizeof line, f)) {
        const char *u = strstr(line, "http://127.0.0.1:");
        if (u)
            port = (unsigned)atoi(u + 17);
    }
    fclose(f);
    assert_true(port > 0);
    snprintf(base, sizeof base, "http://127.0.0.1:%u", port);
}

static pid_t run_example(const char *chats, const char *progress, int *out_fd)
{
    if (access(EXAMPLE, X_OK) != 0)
        fail_msg("%s: not built", EXAMPLE);
    int out[2];
    assert_int_equal(pipe(out), 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        close(out[0]);
        setenv("TELEGRAM_BOT_TOKEN", TOKEN, 1); /* not in argv */
        execl(EXAMPLE, EXAMPLE, "--api", base, "--chats", chats, "--text", TEXT, "--progress",
              progress, (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    *out_fd = out[0];
    return pid;
}

static char *read_all(int fd)
{
    struct body b = {0};
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        collect(buf, 1, (size_t)n, &b);
    close(fd);
    return b.p ? b.p : strdup("");
}

static const char *g_progress;
static bool some_done(void *arg)
{
    (void)arg;
    return tgtest_file_count(g_progress, "\nD ") >= 300;
}

static void test_broadcast_2000_chats_resumed(void **state)
{
    (void)state;
#ifdef TGKIT_NO_EXAMPLES
    tgtest_skip("the example bots are not built here (TGKIT_BUILD_EXAMPLES=OFF)");
#endif
    emu_start();
    CURL *c = curl_easy_init();
    assert_non_null(c);
    static int64_t ids[USERS];
    for (int i = 0; i < USERS; i++) {
        char j[96];
        snprintf(j, sizeof j, "{\"first_name\":\"u%d\"}", i);
        json_t *r = control(c, "users", j);
        ids[i] = json_integer_value(json_object_get(json_object_get(r, "user"), "id"));
        json_decref(r);
        assert_true(ids[i] > 0);
        snprintf(j, sizeof j, "{\"command\":\"start\",\"user_id\":%lld}", (long long)ids[i]);
        json_decref(control(c, "command", j));
    }
    for (int i = 0; i < BLOCKED; i++) { /* every 38th user blocks the bot */
        char j[64];
        snprintf(j, sizeof j, "{\"user_id\":%lld}", (long long)ids[i * (USERS / BLOCKED)]);
        json_decref(control(c, "block", j));
    }
    char chats[64], progress[64];
    snprintf(chats, sizeof chats, "/tmp/tgkit-bcast-%d.chats", (int)getpid());
    snprintf(progress, sizeof progress, "/tmp/tgkit-bcast-%d.progress", (int)getpid());
    unlink(progress);
    FILE *f = fopen(chats, "w");
    assert_non_null(f);
    fprintf(f, "# users, then ids nobody has\n");
    for (int i = 0; i < USERS; i++) {
        fprintf(f, "%lld\n", (long long)ids[i]);
        if (i % (USERS / UNKNOWN) == 0)
            fprintf(f, "%lld\n", 990000000000LL + i);
    }
    fclose(f);

    /* first run, interrupted */
    int fd;
    pid_t pid = run_example(chats, progress, &fd);
    g_progress = progress;
    assert_true(tgtest_wait_until(some_done, NULL, 120000));
    kill(pid, SIGINT);
    char *out1 = read_all(fd);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 1);
    assert_non_null(strstr(out1, "interrupted"));
    assert_non_null(strstr(out1, "flood-waited and retried 0"));

    /* second run, to the end */
    pid = run_example(chats, progress, &fd);
    char *out2 = read_all(fd);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    fprintf(stderr, "run 1: %srun 2: %s", out1, out2);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_non_null(strstr(out2, "sent 1850, failed 150 (blocked 50, not found 100)"));
    assert_non_null(strstr(out2, "flood-waited and retried 0"));
    assert_null(strstr(out2, "uncertain"));

    /* exactly one message per reachable user, none to the blocked ones */
    for (int i = 0; i < USERS; i++) {
        char q[128];
        snprintf(q, sizeof q, "messages?chat_id=%lld&from_bot=1", (long long)ids[i]);
        json_t *r = control(c, q, NULL);
        size_t n = json_array_size(json_object_get(r, "messages"));
        json_decref(r);
        bool blocked = i % (USERS / BLOCKED) == 0 && i / (USERS / BLOCKED) < BLOCKED;
        if (n != (blocked ? 0u : 1u))
            fail_msg("user %d (%s): %zu messages from the bot", i, blocked ? "blocked" : "reachable",
                     n);
    }
    free(out1);
    free(out2);
    curl_easy_cleanup(c);
    unlink(chats);
    unlink(progress);
}

static int teardown(void **state)
{
    (void)state;
    if (emu_pid > 0) {
        kill(emu_pid, SIGTERM);
        waitpid(emu_pid, NULL, 0);
        emu_pid = -1;
    }
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_broadcast_2000_chats_resumed, teardown),
    };
    return tgtest_result(cmocka_run_group_tests(tests, NULL, NULL));
}
