/*
 * clock: monotonic and wall time helpers.
 * Monotonic time is for deadlines and durations (never jumps); wall time only for protocol
 * timestamps (FakeTLS) and log lines. Thread-safety: all functions are reentrant.
 */
#ifndef TGKIT_CORE_CLOCK_H
#define TGKIT_CORE_CLOCK_H

#include <stdint.h>

uint64_t tg__now_ns(void);  /* CLOCK_MONOTONIC, nanoseconds */
uint64_t tg__now_ms(void);  /* CLOCK_MONOTONIC, milliseconds */
uint64_t tg__wall_ms(void); /* CLOCK_REALTIME, milliseconds since the Unix epoch */
int64_t tg__wall_s(void);   /* CLOCK_REALTIME, seconds since the Unix epoch */
/* Sleep ms milliseconds, resuming after signals until the full time has passed. */
void tg__sleep_ms(uint64_t ms);
/* Thread CPU time used so far, nanoseconds (CLOCK_THREAD_CPUTIME_ID). */
uint64_t tg__thread_cpu_ns(void);
/* Process CPU time used so far, nanoseconds (CLOCK_PROCESS_CPUTIME_ID). */
uint64_t tg__process_cpu_ns(void);

#endif
