/*
 * cli: tgproxy's command line (run, simple-run, generate-secret, access, doctor, --help,
 * --version).
 *
 * All of it lives in tgproxy_lib so tests drive it directly; src/proxy/daemon/main.c only calls
 * cli_main(). One exit-code table for every command (docs/tgproxy.md, tgproxy(8)); past 2
 * the codes follow sysexits(3) so a service manager can tell causes apart:
 *   0   success (run / simple-run: clean shutdown on SIGINT or SIGTERM; doctor: no check
 *       failed, warnings allowed)
 *   1   doctor: the file loads but a check failed (DOCTOR_EXIT_FAILED, doctor.h)
 *   2   doctor --strict: no check failed, but warnings (DOCTOR_EXIT_WARNINGS)
 *   64  EX_USAGE        bad command line
 *   65  EX_DATAERR      a bad argument value that is not a usage mistake (domain, secret)
 *   69  EX_UNAVAILABLE  cannot serve: a listen or [stats.prometheus] address cannot be bound
 *   70  EX_SOFTWARE     unexpected internal failure
 *   71  EX_OSERR        the OS refused resources (memory, threads, random bytes)
 *   74  EX_IOERR        writing the output failed
 *   78  EX_CONFIG       the configuration file is missing or invalid
 * Messages go to err, one line each, starting with "tgproxy: "; normal output to out.
 * Secrets are written to out only by generate-secret and access, whose job that is.
 *
 * Thread-safety: cli_main() is meant for the main thread of a process; `run` blocks until
 * SIGINT or SIGTERM.
 */
#ifndef TGPROXY_CLI_H
#define TGPROXY_CLI_H

#include <stdio.h>

#define TGPROXY_VERSION TGKIT_VERSION_STRING /* from CMake: the project version */

/* Run the command line in argv (argv[0] is the program). out and err are borrowed.
 * Returns the process exit code. */
int cli_main(int argc, char **argv, FILE *out, FILE *err);

/* A command's failure: "tgproxy: " and the message on one line of err; returns code (an exit
   code of the table above), so a command can `return cli_fail(...)`. */
int cli_fail(FILE *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
