/*
 * redis_server: a throwaway redis-server for tests, on 127.0.0.1 and a free port, in a fresh
 * temporary directory, with persistence off. Stopped (SIGTERM, then SIGKILL) and its
 * directory removed by tgtest_redis_stop().
 */
#ifndef TGKIT_TEST_REDIS_SERVER_H
#define TGKIT_TEST_REDIS_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct tgtest_redis {
    pid_t pid;
    uint16_t port;
    char dir[128];
} tgtest_redis;

/* true when /usr/bin/redis-server (or $TGKIT_REDIS_SERVER) can be run. */
bool tgtest_redis_available(void);
/* Start a server and wait until it answers PING (at most ~10 s). 0 or -1. */
int tgtest_redis_start(tgtest_redis *r);
void tgtest_redis_stop(tgtest_redis *r);
/* Kill the server and start a fresh one on the same port (data is gone). 0 or -1. */
int tgtest_redis_restart(tgtest_redis *r);

#endif
