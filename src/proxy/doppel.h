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
 * Only this model is here (pure computation, no I/O, no allocation, reentrant); the
 * fetcher that measures a site and the shaper that applies the model are not written yet.
 */
#ifndef TGPROXY_DOPPEL_H
#define TGPROXY_DOPPEL_H

#include <stddef.h>

#define DOPPEL_DEFAULT_K      0.37846373895785335 /* mtg's, measured from ok.ru */
#define DOPPEL_DEFAULT_LAMBDA 1.73177086015485    /* ms, same source */
#define DOPPEL_MIN_GAPS       100                 /* fewer gaps: keep the profile */

struct doppel_weibull {
    double k;         /* shape, > 0 */
    double lambda_ms; /* scale, ms, > 0 */
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

#endif
