/*
 * daemon_fx: a built daemon under test, as a separate process (tgproxy, the emulator...).
 *
 *   struct dfx d;
 *   dfx_init(&d, "reload");                        private dir /tmp/tgkit-reload-XXXXXX
 *   dfx_config(&d, "bind-to = \"127.0.0.1:0\"\n..."); d.cfg (tgproxy.toml), whole, 0600
 *   dfx_run(&d, DFX_TGPROXY);                      `tgproxy run d.cfg`, waits for "listening on"
 *   ... d.port (from that line), dfx_wait_log(&d, "reload: ", 1), dfx_signal(&d, SIGHUP) ...
 *   assert_int_equal(dfx_stop(&d, SIGTERM), 0);    signal, reap, exit status
 *   dfx_done(&d);                                  fails if the process was left running
 *
 * The binary is a build dependency of the test (tests/CMakeLists.txt), so a missing one is
 * a failure, never a skip. Its stdout and stderr go to d.log. The child gets SIGKILL when
 * the test process dies (PR_SET_PDEATHSIG), so a failed assertion, which leaves the test
 * at once, never leaves a daemon behind; dfx_done fails a test that did not stop its daemon.
 * Ports come from the daemon's own "listening on ... (port N)" line (bind to port 0), so no
 * test races another for a free port. Waits are bounded (DFX_WAIT_MS) and fail with the log
 * quoted, unless d.quiet (a test whose log might hold a secret when it fails).
 *
 * Ownership: struct dfx is caller storage. Thread-safety: one thread.
 */
#ifndef TGKIT_TEST_DAEMON_FX_H
#define TGKIT_TEST_DAEMON_FX_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define DFX_TGPROXY TGKIT_BINARY_DIR "/tgproxy"
#define DFX_WAIT_MS 20000 /* bound of every wait: a stuck daemon fails, never hangs */

struct dfx {
    pid_t pid; /* the running daemon; 0 once reaped */
    char dir[64], cfg[96], log[96];
    uint16_t port; /* from the first "listening on" line */
    bool quiet;    /* failures do not quote the log */
};

/* A fresh private directory named after what (cfg and log inside, neither created). */
void dfx_init(struct dfx *d, const char *what);
/* A path in d's directory: "<dir>/<name>" into out[cap]. */
void dfx_path(const struct dfx *d, const char *name, char *out, size_t cap);
/* Write path whole (through path.new and a rename: a daemon never reads half a file), 0600. */
void dfx_write(const char *path, const char *text);
/* dfx_write(d->cfg, printf-style text). A tgproxy file (one with [secrets]) that does not
   name tls-front gets "[defense.tls-front] enabled = false" appended: no probes to the
   test's stand-in fronting host. */
void dfx_config(const struct dfx *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Start argv (argv[0] a path) with its output in d->log (emptied first); no wait. */
void dfx_spawn(struct dfx *d, char *const argv[]);
/* dfx_spawn, then wait for "listening on" and read d->port from it. */
void dfx_start(struct dfx *d, char *const argv[]);
/* dfx_start of `bin run d->cfg`. */
void dfx_run(struct dfx *d, const char *bin);
/* Occurrences of needle in the log now. */
int dfx_log_count(const struct dfx *d, const char *needle);
/* Wait until the log holds needle n times (fails the test after DFX_WAIT_MS). */
void dfx_wait_log(const struct dfx *d, const char *needle, int n);
/* The port on the first log line holding needle (pproc_log_port's rules); fails without. */
uint16_t dfx_log_port(const struct dfx *d, const char *needle);
/* The whole log, malloc'ed (free it). */
char *dfx_log(const struct dfx *d);
/* Send sig to the daemon (it must be running). */
void dfx_signal(const struct dfx *d, int sig);
/* Reap the daemon (bounded): its exit status; a death by signal fails the test. */
int dfx_wait_exit(struct dfx *d);
/* dfx_signal then dfx_wait_exit. */
int dfx_stop(struct dfx *d, int sig);
/* Remove d's files and directory. Fails the test when the daemon is still running (after
   killing and reaping it): a test stops what it starts. */
void dfx_done(struct dfx *d);

#endif
