/*
 * proxy_proc: child processes for the proxy benchmarks (and tests that want a separate
 * process): tgproxy's engine in a forked child (pproc_proxy_*), a plain epoll TCP relay
 * without crypto as the benchmark floor (pproc_relay_*), Debian's microsocks as a SOCKS5
 * upstream that is not ours (pproc_microsocks_start), and per-process CPU / RSS from
 * /proc, so the figures are the proxy's alone, not the load generator's.
 *
 * The proxy child runs server_start(cfg) and answers commands on a pipe: its port, a
 * report (allocation count, engine counters) and quit. Fork happens before the caller
 * starts any client threads; only the listening sockets of the fake DC / fronting host are
 * inherited (never accepted on by the child).
 *
 * Ownership: struct pproc is caller storage, released by pproc_stop. Thread-safety: use
 * from one thread.
 */
#ifndef TGKIT_TEST_PROXY_PROC_H
#define TGKIT_TEST_PROXY_PROC_H

#include <stdint.h>
#include <sys/types.h>

#include "proxy/config/config.h"
#include "proxy/engine/stats.h"

struct pproc {
    pid_t pid;
    int cmd, resp; /* pipes to / from the child (proxy only; -1 for the relay) */
    uint16_t port; /* where it listens */
};

struct pproc_report {
    uint64_t cpu_ns; /* user + system CPU of the child so far */
    long rss_kb;     /* resident set now */
    long hwm_kb;     /* peak resident set */
    uint64_t allocs; /* malloc-family calls in the child (0 unless allochook is linked) */
    struct stats st; /* proxy only */
};

/* Fork a child that serves cfg with the tgproxy engine. 0 or -errno. */
int pproc_proxy_start(struct pproc *p, const struct config *cfg);
/* Fork a plain relay (one epoll thread, no crypto) 127.0.0.1:ephemeral -> 127.0.0.1:dst. */
int pproc_relay_start(struct pproc *p, uint16_t dst_port);
/* Debian's microsocks (/usr/bin/microsocks, an independent SOCKS5 server) on 127.0.0.1, a
   free port, requiring user/pass when both are given (each call picks a new port if the
   one chosen is taken meanwhile). -ENOENT when it is not installed, else 0 or -errno. */
int pproc_microsocks_start(struct pproc *p, const char *user, const char *pass);
/* The same listening on ::1 ("::1") or another numeric loopback address. */
int pproc_microsocks_start_on(struct pproc *p, const char *ip, const char *user, const char *pass);
/* Fork and exec argv[0] (a path) with stdout and stderr appended to the file log (created
   0600) and no other descriptor of this process but stdin; the child gets SIGKILL if this
   process dies first (PR_SET_PDEATHSIG). The child's pid, or -errno. */
pid_t pproc_spawn_logged(char *const argv[], const char *log);
/* Occurrences of needle in the file log now (its first MiB; 0 when it does not exist). */
int pproc_log_count(const char *log, const char *needle);
/* The port on the first line of log holding needle: after "(port " (tgproxy's "listening on
   ADDR (port N)"), else after the line's last ':' (a URL, "http://[::1]:N/"). 0 or -1. */
int pproc_log_port(const char *log, const char *needle, uint16_t *port);
/* Wait (bounded: 20 s) until log holds needle at least n times: 0, or -1. */
int pproc_log_wait(const char *log, const char *needle, int n);
/* Field `name` of /proc/PID/status ("VmRSS", "Threads": its number, kB for sizes), or -1
   when the process or the field is not there. */
long pproc_status_field(pid_t pid, const char *name);
/* Open descriptors of process pid now (the entries of /proc/PID/fd), or -1. */
long pproc_fd_count(pid_t pid);
/* CPU and RSS from /proc; allocs and stats too for a proxy child. 0 or -errno. */
int pproc_report(struct pproc *p, struct pproc_report *out);
/* Stop and reap the child. NULL-safe on a zeroed struct. */
void pproc_stop(struct pproc *p);

#endif
