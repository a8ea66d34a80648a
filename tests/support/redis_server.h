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
    uint16_t bus_port; /* cluster bus (cluster nodes only; port + 10000 may not exist) */
    bool durable;      /* append-only file: survives SIGKILL and restart */
    bool cluster;      /* --cluster-enabled yes (tgtest_redis_start_cluster_node) */
    char dir[128];
} tgtest_redis;

/* true when /usr/bin/redis-server (or $TGKIT_REDIS_SERVER) can be run. */
bool tgtest_redis_available(void);
/* Start a server and wait until it answers PING (at most ~10 s). 0 or -1. */
int tgtest_redis_start(tgtest_redis *r);
/* Start a Redis Cluster node (cluster-enabled, not yet part of a cluster). 0 or -1. */
int tgtest_redis_start_cluster_node(tgtest_redis *r);
/* The same with appendonly yes: Redis writes a command to the append-only file before it
 * answers, so a killed server (tgtest_redis_restart: SIGKILL, start again) keeps everything
 * it acknowledged. The file is never fsynced (the kernel keeps it across a process kill;
 * only a machine crash would need appendfsync always). */
int tgtest_redis_start_durable(tgtest_redis *r);
void tgtest_redis_stop(tgtest_redis *r);
/* Kill the server (SIGKILL) and start a fresh one on the same port: the data is gone, unless
 * the server is durable. 0 or -1. */
int tgtest_redis_restart(tgtest_redis *r);
/* SIGKILL the server and leave it down (tgtest_redis_restart brings it back). */
void tgtest_redis_kill(tgtest_redis *r);

/* One server shared by a cmocka group: pass these as the group's setup and teardown
 * (state is unused); the server is tgtest_redis_group. Setup fails, naming the missing
 * program, when redis-server is not installed. */
extern tgtest_redis tgtest_redis_group;
int tgtest_redis_group_up(void **state);
int tgtest_redis_group_down(void **state);

#endif
