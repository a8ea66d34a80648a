/*
 * doppel: the Weibull gap model of doppelganger shaping and its refit. See doppel.h.
 */
#include "proxy/wire/doppel.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

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

void doppel_profile_default(struct doppel_profile *p)
{
    memset(p, 0, sizeof *p);
    p->gap = doppel_default();
}

static int cmp_u16(const void *a, const void *b)
{
    return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

static unsigned phase_of(uint32_t idx)
{
    return idx < 40 ? 0u : idx < 60 ? 1u : 2u; /* dynamic record sizing's 40 + 20 */
}

/* Quantile tables of the phases that have enough records; returns how many, from 0. */
static unsigned learn_sizes(const struct doppel_sample *s, size_t n, uint16_t *scratch,
                            uint16_t q[DOPPEL_PHASES][DOPPEL_SIZE_Q + 1])
{
    unsigned learned = 0;
    for (unsigned ph = 0; ph < DOPPEL_PHASES; ph++) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (phase_of(s[i].idx) == ph)
                scratch[m++] = s[i].len;
        if (m < DOPPEL_MIN_SIZES)
            break;
        qsort(scratch, m, sizeof *scratch, cmp_u16);
        for (unsigned j = 0; j <= DOPPEL_SIZE_Q; j++)
            q[ph][j] = scratch[(m - 1) * j / DOPPEL_SIZE_Q];
        learned = ph + 1;
    }
    return learned;
}

int doppel_learn(const struct doppel_sample *s, size_t n, struct doppel_profile *p)
{
    double *gaps = tg__malloc((n ? n : 1) * sizeof *gaps);
    uint16_t *lens = tg__malloc((n ? n : 1) * sizeof *lens);
    if (!gaps || !lens) {
        tg__free(gaps);
        tg__free(lens);
        return -ENOMEM;
    }
    size_t ng = 0;
    for (size_t i = 1; i < n; i++)
        if (s[i].idx > 0 && s[i].t_us >= s[i - 1].t_us)
            gaps[ng++] = (double)(s[i].t_us - s[i - 1].t_us) / 1000.0;
    struct doppel_weibull w;
    if (doppel_fit(gaps, ng, &w) == 0) {
        p->gap = w;
        p->gaps_learned = true;
        p->n_gaps = (uint32_t)ng;
    }
    uint16_t q[DOPPEL_PHASES][DOPPEL_SIZE_Q + 1];
    unsigned ph = learn_sizes(s, n, lens, q);
    if (ph > 0) {
        memcpy(p->size_q, q, sizeof q);
        p->phases = (uint8_t)ph;
        p->n_records = (uint32_t)n;
    }
    tg__free(gaps);
    tg__free(lens);
    return 0;
}

uint32_t doppel_size(const struct doppel_profile *p, unsigned phase, double u)
{
    const uint16_t *q = p->size_q[phase < p->phases ? phase : p->phases - 1u];
    if (!(u >= 0))
        u = 0;
    double at = u * DOPPEL_SIZE_Q;
    unsigned j = at >= DOPPEL_SIZE_Q ? DOPPEL_SIZE_Q - 1u : (unsigned)at;
    double f = at - j;
    f = f > 1 ? 1 : f;
    return (uint32_t)(q[j] + f * (q[j + 1] - q[j]) + 0.5);
}
