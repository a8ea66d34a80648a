/*
 * doppel: the timing model of doppelganger traffic shaping ([defense.doppelganger], as mtg):
 * gaps between TLS records toward FakeTLS clients follow a Weibull distribution, either
 * the built-in profile or one refitted from the gaps measured on the fronting site.
 *
 * Facts carried over from mtg (brief 6.3): X = lambda * (-ln U)^(1/k) ms with U uniform in
 * (0, 1]; the default k = 0.37846373895785335 and lambda = 1.73177086015485 ms, which mtg
 * states it measured from ok.ru from Moscow (mean gap lambda * Gamma(1 + 1/k), about
 * 6.7 ms); a refit needs at least DOPPEL_MIN_GAPS gaps: k by bisection (70 steps over
 * [0.01, 10]) on the maximum-likelihood equation 1/k + mean(ln x) - sum(x^k ln x) /
 * sum(x^k) = 0, then lambda = (sum(x^k) / n)^(1/k). The fit here works on x / max(x)
 * (k does not depend on the scale), so x^k never overflows.
 *
 * A profile is what the shaper needs to look like a site: the gap model and, per phase of a
 * burst (records 0..39, 40..59, 60.. since the connection was quiet for a second: the
 * phases of dynamic record sizing), DOPPEL_SIZE_Q + 1 quantiles of the record lengths seen
 * on the wire. doppel_learn() summarises the records of one raid into a profile; the sample
 * arrays are dropped, so a worker's copy is a few hundred bytes.
 *
 * Pure computation, no I/O, reentrant; only doppel_learn allocates (scratch, freed before it
 * returns). The fetcher that measures a site is doppel_fetch.h, the shaper shape.h.
 */
#ifndef TGPROXY_DOPPEL_H
#define TGPROXY_DOPPEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DOPPEL_DEFAULT_K      0.37846373895785335 /* mtg's, measured from ok.ru */
#define DOPPEL_DEFAULT_LAMBDA 1.73177086015485    /* ms, same source */
#define DOPPEL_MIN_GAPS       100                 /* fewer gaps: keep the profile */
#define DOPPEL_PHASES         3    /* records [0, 40), [40, 60), [60, ...) of a burst */
#define DOPPEL_SIZE_Q         16   /* size quantiles per phase: 0, 1/16, ..., 16/16 */
#define DOPPEL_MIN_SIZES      16   /* fewer records in a phase: the phase is not learned */
#define DOPPEL_MAX_SAMPLES    4096 /* records kept per raid (mtg keeps 4096 gaps) */

struct doppel_weibull {
    double k;         /* shape, > 0 */
    double lambda_ms; /* scale, ms, > 0 */
};

/* One TLS record as the fetcher saw it arrive. */
struct doppel_sample {
    uint64_t t_us; /* arrival, microseconds on the fetcher's clock */
    uint16_t len;  /* length field of the record header (what an observer sees) */
    uint16_t idx;  /* index among the application records of its connection; 0 = first */
};

struct doppel_profile {
    struct doppel_weibull gap;
    /* size_q[p][j]: the j/DOPPEL_SIZE_Q quantile of record lengths in phase p */
    uint16_t size_q[DOPPEL_PHASES][DOPPEL_SIZE_Q + 1];
    uint8_t phases;    /* phases with learned sizes (0..DOPPEL_PHASES; later ones: the last) */
    bool gaps_learned; /* gap is a refit, not the built-in one */
    uint32_t n_gaps;   /* gaps and records the profile was learned from (0: built-in) */
    uint32_t n_records;
};

/* The built-in profile (the defaults above). */
struct doppel_weibull doppel_default(void);

/*
 * Refit from gaps_ms[0..n) (non-positive and non-finite values are skipped). Returns 0 with
 * *out set, or -EINVAL (out untouched) when fewer than DOPPEL_MIN_GAPS usable gaps remain
 * or they are all equal (no shape to fit).
 */
int doppel_fit(const double *gaps_ms, size_t n, struct doppel_weibull *out);

/* A gap in ms for u in (0, 1] (u outside is clamped): lambda * (-ln u)^(1/k). */
double doppel_draw(const struct doppel_weibull *w, double u);

/* The distribution's mean gap, ms: lambda * Gamma(1 + 1/k). */
double doppel_mean(const struct doppel_weibull *w);

/* The model's math without libm (issue 30: libm is 328 KB resident for these four). ln and
 * exp over the doubles, pow for x >= 0, gamma for x > 0 (used at 1 + 1/k, k in [0.01, 10]). */
double doppel_ln(double x);
double doppel_exp(double x);
double doppel_pow(double x, double y);
double doppel_gamma(double x);

/* The built-in profile: default gaps, no learned sizes. */
void doppel_profile_default(struct doppel_profile *p);

/*
 * Summarise one raid's records into *p, which holds the previous profile: gaps between
 * consecutive records of one connection (idx > 0) are refitted when there are at least
 * DOPPEL_MIN_GAPS of them (else p->gap stays), sizes per phase when a phase has at least
 * DOPPEL_MIN_SIZES records (the phases after the last learned one use its table; when not
 * even phase 0 has enough, p's sizes stay). Returns 0, or -ENOMEM (p untouched).
 */
int doppel_learn(const struct doppel_sample *s, size_t n, struct doppel_profile *p);

/* A record length for phase (clamped to the learned ones) and u in [0, 1): the quantile
   table read at u, interpolated. p->phases must be > 0. */
uint32_t doppel_size(const struct doppel_profile *p, unsigned phase, double u);

#endif
