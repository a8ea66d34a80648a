/*
 * doppel: the Weibull gap model of doppelganger shaping and its refit. See doppel.h.
 */
#include "proxy/doppel.h"

#include <errno.h>
#include <math.h>

struct doppel_weibull doppel_default(void)
{
    return (struct doppel_weibull){DOPPEL_DEFAULT_K, DOPPEL_DEFAULT_LAMBDA};
}

/* The likelihood equation at k over y (scaled gaps in (0, 1]); decreasing in k. */
static double mle_eq(const double *gaps, size_t n, double scale, double k, double mean_ln)
{
    double s = 0, sl = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(gaps[i] > 0) || !isfinite(gaps[i]))
            continue;
        double ly = log(gaps[i] / scale), yk = exp(k * ly);
        s += yk;
        sl += yk * ly;
    }
    return 1 / k + mean_ln - sl / s;
}

int doppel_fit(const double *gaps_ms, size_t n, struct doppel_weibull *out)
{
    size_t used = 0;
    double max = 0, min = INFINITY, sum_ln = 0;
    for (size_t i = 0; i < n; i++) {
        double x = gaps_ms[i];
        if (!(x > 0) || !isfinite(x))
            continue;
        used++;
        max = x > max ? x : max;
        min = x < min ? x : min;
    }
    if (used < DOPPEL_MIN_GAPS || !(max > min))
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if (gaps_ms[i] > 0 && isfinite(gaps_ms[i]))
            sum_ln += log(gaps_ms[i] / max);
    double mean_ln = sum_ln / (double)used, lo = 0.01, hi = 10;
    for (int step = 0; step < 70; step++) {
        double mid = (lo + hi) / 2;
        if (mle_eq(gaps_ms, n, max, mid, mean_ln) > 0)
            lo = mid;
        else
            hi = mid;
    }
    double k = (lo + hi) / 2, s = 0;
    for (size_t i = 0; i < n; i++)
        if (gaps_ms[i] > 0 && isfinite(gaps_ms[i]))
            s += pow(gaps_ms[i] / max, k);
    out->k = k;
    out->lambda_ms = max * pow(s / (double)used, 1 / k);
    return 0;
}

double doppel_draw(const struct doppel_weibull *w, double u)
{
    if (!(u > 0))
        u = 0x1p-53; /* the smallest step of a 53-bit uniform draw */
    if (u > 1)
        u = 1;
    return w->lambda_ms * pow(-log(u), 1 / w->k);
}

double doppel_mean(const struct doppel_weibull *w)
{
    return w->lambda_ms * tgamma(1 + 1 / w->k);
}
