/*
 * doppel: the Weibull gap model of doppelganger shaping and its refit. See doppel.h.
 */
#include "proxy/wire/doppel.h"

#include <errno.h>
#include <math.h> /* INFINITY, isfinite: macros; the functions below keep libm out (issue 30) */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

struct doppel_weibull doppel_default(void)
{
    return (struct doppel_weibull){DOPPEL_DEFAULT_K, DOPPEL_DEFAULT_LAMBDA};
}

/*
 * The gap model's own ln, exp, pow and gamma: libm costs 328 KB resident at start for four
 * functions (issue 30). Against libm (test_doppel; 2 million random arguments): ln and exp
 * within 8 ulp (relative 8e-16); pow within 1e-13 (exp(y ln x) multiplies ln's error by
 * |y ln x|, up to ~700); gamma(1 + 1/k) within 2e-13. Far finer than a sampled delay needs.
 */
static double bits_to_double(uint64_t b)
{
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

static uint64_t double_to_bits(double d)
{
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    return b;
}

double doppel_ln(double x)
{
    if (x != x || x < 0)
        return NAN;
    if (x == 0)
        return -INFINITY;
    if (x == INFINITY)
        return INFINITY;
    int e = 0;
    if (x < 0x1p-1022) { /* subnormal: scale into the normal range first */
        x *= 0x1p54;
        e = -54;
    }
    uint64_t b = double_to_bits(x);
    e += (int)((b >> 52) & 0x7ff) - 1023;
    double m = bits_to_double((b & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL); /* [1, 2) */
    if (m > 1.4142135623730951) {
        m /= 2;
        e++;
    }
    /* ln m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172 */
    double s = (m - 1) / (m + 1), s2 = s * s, term = s, sum = 0;
    for (int i = 1; i < 40; i += 2) {
        sum += term / i;
        term *= s2;
    }
    return 2 * sum + e * 0.6931471805599453;
}

double doppel_exp(double x)
{
    if (x != x)
        return x;
    if (x > 709.782712893384)
        return INFINITY;
    if (x < -745.2)
        return 0;
    /* x = n ln 2 + r, |r| <= ln 2 / 2; ln 2 in two parts keeps r exact to ~1e-20 */
    double n = (double)(long)(x * 1.4426950408889634 + (x < 0 ? -0.5 : 0.5));
    double r = (x - n * 0.6931471803691238) - n * 1.9082149292705877e-10;
    double term = 1, sum = 1;
    for (int i = 1; i < 22; i++) {
        term *= r / i;
        sum += term;
    }
    int k = (int)n;
    while (k > 1023) {
        sum *= 0x1p1023;
        k -= 1023;
    }
    while (k < -1022) {
        sum *= 0x1p-1022;
        k += 1022;
    }
    return sum * bits_to_double((uint64_t)(k + 1023) << 52);
}

/* x^y for x >= 0 (the model raises only gaps and means to powers) */
double doppel_pow(double x, double y)
{
    if (y == 0)
        return 1;
    if (x == 0)
        return y > 0 ? 0 : INFINITY;
    return doppel_exp(y * doppel_ln(x));
}

/* Gamma(x) for x >= 1 (the mean's 1 + 1/k): Stirling's series after shifting x past 16. */
double doppel_gamma(double x)
{
    if (!(x > 0))
        return NAN;
    double shift = 0; /* ln of x (x+1) ... (x+j-1) */
    while (x < 16) {
        shift += doppel_ln(x);
        x += 1;
    }
    double z = 1 / (x * x);
    double series = (1.0 / 12 - z * (1.0 / 360 - z * (1.0 / 1260 - z * (1.0 / 1680 - z * (1.0 / 1188))))) / x;
    double lg = (x - 0.5) * doppel_ln(x) - x + 0.9189385332046728 + series;
    return doppel_exp(lg - shift);
}

/* The likelihood equation at k over y (scaled gaps in (0, 1]); decreasing in k. */
static double mle_eq(const double *gaps, size_t n, double scale, double k, double mean_ln)
{
    double s = 0, sl = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(gaps[i] > 0) || !isfinite(gaps[i]))
            continue;
        double ly = doppel_ln(gaps[i] / scale), yk = doppel_exp(k * ly);
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
            sum_ln += doppel_ln(gaps_ms[i] / max);
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
            s += doppel_pow(gaps_ms[i] / max, k);
    out->k = k;
    out->lambda_ms = max * doppel_pow(s / (double)used, 1 / k);
    return 0;
}

double doppel_draw(const struct doppel_weibull *w, double u)
{
    if (!(u > 0))
        u = 0x1p-53; /* the smallest step of a 53-bit uniform draw */
    if (u > 1)
        u = 1;
    return w->lambda_ms * doppel_pow(-doppel_ln(u), 1 / w->k);
}

double doppel_mean(const struct doppel_weibull *w)
{
    return w->lambda_ms * doppel_gamma(1 + 1 / w->k);
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
