/*
 * systemd readiness (src/proxy/daemon/sdnotify.c): the built tgproxy, run with
 * $NOTIFY_SOCKET pointing at a datagram socket of the test's, sends READY=1 once it
 * listens, RELOADING=1 with MONOTONIC_USEC then READY=1 around a SIGHUP reload (a refused
 * one too), and STOPPING=1 when SIGTERM starts the drain, in that order. The abstract
 * namespace ("@name") and an unset variable are checked in-process.
 */
#include "tgtest.h"

#include "daemon_fx.h"
#include "proxy/daemon/sdnotify.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static int bind_dgram(const char *name, bool abstract)
{
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    size_t n = strlen(name);
    assert_true(n + 1 < sizeof sun.sun_path);
    memcpy(sun.sun_path + abstract, name, n);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
    assert_int_equal(bind(fd, (struct sockaddr *)&sun, len), 0);
    return fd;
}

/* The next datagram (bounded wait), NUL-terminated in buf. */
static void next_msg(int fd, char *buf, size_t cap)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, DFX_WAIT_MS) != 1)
        fail_msg("no notification within %d ms", DFX_WAIT_MS);
    ssize_t n = recv(fd, buf, cap - 1, 0);
    assert_true(n > 0);
    buf[n] = '\0';
}

static uint64_t mono_usec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000;
}

static const char conf[] = "bind-to = \"127.0.0.1:0\"\n"
                           "[secrets]\n"
                           "main = \"dd000102030405060708090a0b0c0d0e0f\"\n"
                           "[domain-fronting]\nhost = \"127.0.0.1\"\nport = 9\n";

static void test_notify_sequence(void **state)
{
    (void)state;
    struct dfx d;
    dfx_init(&d, "sdnotify");
    char sock[128], msg[512];
    dfx_path(&d, "notify", sock, sizeof sock);
    int fd = bind_dgram(sock, false);
    setenv("NOTIFY_SOCKET", sock, 1);
    dfx_config(&d, "%s", conf);
    dfx_run(&d, DFX_TGPROXY);
    next_msg(fd, msg, sizeof msg);
    assert_non_null(strstr(msg, "READY=1\n"));
    assert_non_null(strstr(msg, "STATUS=serving 1 secret(s) on 1 listener(s), generation 1"));

    uint64_t before = mono_usec();
    dfx_signal(&d, SIGHUP);
    next_msg(fd, msg, sizeof msg);
    uint64_t after = mono_usec();
    unsigned long long at = 0;
    if (strncmp(msg, "RELOADING=1\nMONOTONIC_USEC=", 27) != 0 || sscanf(msg + 27, "%llu", &at) != 1)
        fail_msg("want RELOADING=1 and MONOTONIC_USEC first, got: %s", msg);
    assert_true(at >= before && at <= after); /* the same clock as systemd reads */
    next_msg(fd, msg, sizeof msg);
    assert_non_null(strstr(msg, "READY=1\n"));
    assert_non_null(strstr(msg, "generation 2"));

    dfx_config(&d, "bind-to = \"127.0.0.1:0\"\n[secrets]\nmain = \"nonsense\"\n");
    dfx_signal(&d, SIGHUP); /* refused: still RELOADING then READY */
    next_msg(fd, msg, sizeof msg);
    assert_true(strncmp(msg, "RELOADING=1\n", 12) == 0);
    next_msg(fd, msg, sizeof msg);
    assert_non_null(strstr(msg, "READY=1\n"));
    assert_non_null(strstr(msg, "generation 2"));

    dfx_signal(&d, SIGTERM);
    next_msg(fd, msg, sizeof msg);
    assert_true(strncmp(msg, "STOPPING=1\n", 11) == 0);
    assert_int_equal(dfx_wait_exit(&d), 0);
    unsetenv("NOTIFY_SOCKET");
    close(fd);
    unlink(sock);
    dfx_done(&d);
}

static void test_abstract_and_unset(void **state)
{
    (void)state;
    char name[64], env[72], msg[128];
    snprintf(name, sizeof name, "tgtest-sdnotify-%ld", (long)getpid());
    int fd = bind_dgram(name, true);
    snprintf(env, sizeof env, "@%s", name);
    setenv("NOTIFY_SOCKET", env, 1);
    assert_int_equal(sdnotify_send("READY=1\nSTATUS=x"), 0);
    next_msg(fd, msg, sizeof msg);
    assert_string_equal(msg, "READY=1\nSTATUS=x");
    setenv("NOTIFY_SOCKET", "relative/path", 1);
    assert_int_equal(sdnotify_send("READY=1"), -EINVAL);
    unsetenv("NOTIFY_SOCKET");
    assert_int_equal(sdnotify_send("READY=1"), 0); /* not under systemd: nothing to do */
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_notify_sequence),
        cmocka_unit_test(test_abstract_and_unset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
