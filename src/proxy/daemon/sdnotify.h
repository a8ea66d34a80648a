/*
 * sdnotify: systemd's readiness protocol (sd_notify(3)), written here instead of linking
 * libsystemd: the protocol is one datagram of "KEY=VALUE\n" lines to the AF_UNIX socket
 * named by $NOTIFY_SOCKET (a path, or "@name" for the abstract namespace), which is a dozen
 * lines; libsystemd would add a dependency (and its own threads and allocations) to a
 * daemon that must also run without systemd, in containers and on other init systems.
 *
 * tgproxy sends (packaging/tgproxy@.service is Type=notify):
 *   READY=1 + STATUS=...                     once the listeners serve (server_run)
 *   RELOADING=1 + MONOTONIC_USEC=N           when a reload of the files starts
 *   READY=1 + STATUS=...                     when it is over (applied or refused)
 *   STOPPING=1 + STATUS=...                  when draining starts (SIGTERM or POST /v1/drain)
 * Without $NOTIFY_SOCKET every call is a no-op returning 0.
 *
 * Thread-safety: reentrant (one socket per call); any thread.
 */
#ifndef TGPROXY_SDNOTIFY_H
#define TGPROXY_SDNOTIFY_H

/* Send text (lines "KEY=VALUE", '\n'-separated) to $NOTIFY_SOCKET. 0 (also when the
   variable is unset), or -errno (a bad socket name: -EINVAL). */
int sdnotify_send(const char *text);
/* RELOADING=1 with MONOTONIC_USEC= the CLOCK_MONOTONIC time now, as systemd wants it. */
int sdnotify_reloading(void);

#endif
