/*
 * bench: the tiny harness every benchmark in bench/ uses.
 *
 * tg__bench_run() calibrates an iteration count so one measurement takes about 0.3 s, runs
 * the measurement 5 times and keeps the median time and the median allocation count per
 * operation (process-wide malloc-family calls from core/allochook.h, so libcurl's and
 * cJSON's allocations count too; under ASan the hook is off and allocations read "na").
 * tg__bench_report() prints one machine-parsable line per scenario, next to its floor (a
 * baseline measured in the same run) as a ratio:
 *
 *   bench=json_tokenize_small ns_per_op=123.4 allocs_per_op=0.00 floor=cjson_parse_small
 *   ratio=0.51 commit=1a2b3c4
 *
 * and remembers the row for tg__bench_table(), the human summary printed at the end.
 *
 * Environment: TGKIT_BENCH_SECONDS overrides the 0.3 s per measurement (e.g. 0.02 for a
 * smoke run); TGKIT_BENCH_RUNS the 5 repetitions; TGKIT_BENCH_CLOCK=cpu times with this
 * thread's CPU clock instead of the wall clock (steadier on a busy machine; only for
 * benchmarks that never wait on another thread or process); TGKIT_COMMIT the commit printed
 * (else `git rev-parse --short HEAD` in the source tree, else "unknown").
 *
 * Ownership: results are caller-owned values; fixture buffers come from tg__malloc and are
 * freed with tg__free. Thread-safety: none; benchmarks drive the harness from one thread.
 */
#ifndef TGKIT_BENCH_H
#define TGKIT_BENCH_H

#include <stddef.h>
#include <stdint.h>

typedef void (*tg__bench_fn)(void *ctx);

typedef struct tg__bench_result {
    char name[64];
    double ns_per_op;     /* median over the runs */
    double allocs_per_op; /* median over the runs; < 0 when the malloc hook is inactive */
    uint64_t iters;       /* operations per run */
    int runs;
} tg__bench_result;

/* Measure fn(ctx) per call. Calls fn once first to warm caches and arenas. Returns 0. */
int tg__bench_run(const char *name, tg__bench_fn fn, void *ctx, tg__bench_result *out);

/* Print the machine line for r (floor may be NULL: then floor=none ratio=1.00) and keep the
 * row for tg__bench_table(). */
void tg__bench_report(const tg__bench_result *r, const tg__bench_result *floor);

/* Print a human table of every row reported so far. */
void tg__bench_table(void);

/* Short commit id of the tree being measured (static string). */
const char *tg__bench_commit(void);

/* Keep a value alive so the compiler cannot drop the work that produced it. */
void tg__bench_sink(uint64_t v);

/* Read <dir>/<rel> whole (NUL-terminated; free with tg__free). Exits with a message when the
 * file cannot be read: a benchmark without its fixture has nothing to measure. */
char *tg__bench_read_data(const char *dir, const char *rel, size_t *len);

#ifdef TGKIT_TEST_DATA_DIR
/* A fixture of tests/ (the same bytes the tests decode), e.g.
 * tg__bench_fixture("fixtures/botapi/small_update.json", &len). */
#define tg__bench_fixture(rel, len) tg__bench_read_data(TGKIT_TEST_DATA_DIR, (rel), (len))
#endif

#endif
