/* redis_server: start and stop a real redis-server for tests. See redis_server.h. */
#include "redis_server.h"
#include "ports.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"

static const char *server_path(void)
{
    const char *p = getenv("TGKIT_REDIS_SERVER");
    return p && *p ? p : "/usr/bin/redis-server";
}

bool tgtest_redis_available(void)
{
    return access(server_path(), X_OK) == 0;
}

static bool answers_ping(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return false;
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {.tv_sec = 1};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[16] = {0};
    bool ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0 && write(fd, "PING\r\n", 6) == 6 &&
              read(fd, buf, sizeof buf - 1) > 0 && strncmp(buf, "+PONG", 5) == 0;
    close(fd);
    return ok;
}

static void exec_server(const tgtest_redis *r)
{
    char port[16], bus[16];
    snprintf(port, sizeof port, "%u", r->port);
    snprintf(bus, sizeof bus, "%u", r->bus_port);
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) {
        dup2(devnull, 1);
        close(devnull);
    }
    execl(server_path(), "redis-server", "--port", port, "--bind", "127.0.0.1", "--dir", r->dir,
          "--save", "", "--appendonly", r->durable ? "yes" : "no", "--appendfsync", "no",
          "--daemonize", "no", "--loglevel", "warning", "--cluster-enabled",
          r->cluster ? "yes" : "no", "--cluster-config-file", "nodes.conf", "--cluster-port",
          r->cluster ? bus : "0", (char *)NULL);
    _exit(127);
}

/* Fork the server on r->port and wait until it answers PING. 0 or -1. */
static int launch(tgtest_redis *r)
{
    r->pid = fork();
    if (r->pid < 0)
        return -1;
    if (r->pid == 0)
        exec_server(r);
    for (int i = 0; i < 200; i++) { /* up to ~10 s */
        if (answers_ping(r->port))
            return 0;
        if (waitpid(r->pid, NULL, WNOHANG) == r->pid) {
            r->pid = 0;
            break;
        }
        tg__sleep_ms(50);
    }
    return -1;
}

static int start(tgtest_redis *r, bool durable, bool cluster)
{
    memset(r, 0, sizeof *r);
    r->durable = durable;
    r->cluster = cluster;
    snprintf(r->dir, sizeof r->dir, "/tmp/tgtest-redis-XXXXXX");
    if (!mkdtemp(r->dir))
        return -1;
    r->port = (uint16_t)tgtest_listen_port();
    r->bus_port = cluster ? (uint16_t)tgtest_listen_port() : 0;
    if (r->port && (!cluster || (r->bus_port && r->bus_port != r->port)) && launch(r) == 0)
        return 0;
    tgtest_redis_stop(r);
    return -1;
}

int tgtest_redis_start(tgtest_redis *r)
{
    return start(r, false, false);
}

int tgtest_redis_start_durable(tgtest_redis *r)
{
    return start(r, true, false);
}

int tgtest_redis_start_cluster_node(tgtest_redis *r)
{
    return start(r, false, true);
}

/* Remove the files of one directory level (the server's append-only directory). */
static void remove_files(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[400];
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
}

void tgtest_redis_kill(tgtest_redis *r)
{
    if (r->pid > 0) {
        kill(r->pid, SIGKILL);
        waitpid(r->pid, NULL, 0);
        r->pid = 0;
    }
}

int tgtest_redis_restart(tgtest_redis *r)
{
    tgtest_redis_kill(r);
    for (int i = 0; i < 50; i++) { /* the port may linger briefly */
        if (launch(r) == 0)
            return 0;
        tg__sleep_ms(100);
    }
    return -1;
}

void tgtest_redis_stop(tgtest_redis *r)
{
    if (r->pid > 0) {
        kill(r->pid, SIGTERM);
        int i;
        for (i = 0; i < 100 && waitpid(r->pid, NULL, WNOHANG) == 0; i++)
            tg__sleep_ms(50);
        if (i == 100) {
            kill(r->pid, SIGKILL);
            waitpid(r->pid, NULL, 0);
        }
        r->pid = 0;
    }
    if (r->dir[0]) {
        char path[200];
        snprintf(path, sizeof path, "%s/appendonlydir", r->dir);
        remove_files(path);
        rmdir(path);
        remove_files(r->dir); /* dump.rdb, if any */
        if (rmdir(r->dir) != 0)
            fprintf(stderr, "redis_server: could not remove %s\n", r->dir);
        r->dir[0] = '\0';
    }
}

tgtest_redis tgtest_redis_group;

int tgtest_redis_group_up(void **state)
{
    (void)state;
    if (!tgtest_redis_available()) {
        fprintf(stderr, "redis-server not installed\n");
        return -1;
    }
    return tgtest_redis_start(&tgtest_redis_group);
}

int tgtest_redis_group_down(void **state)
{
    (void)state;
    tgtest_redis_stop(&tgtest_redis_group);
    return 0;
}
