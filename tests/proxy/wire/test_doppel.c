/*
 * proxy/doppel: the Weibull gap model of doppelganger shaping. The built-in profile has
 * mtg's parameters and mean; a refit recovers known shapes and scales from gaps drawn at
 * evenly spaced quantiles (so the check is deterministic); too few or degenerate gaps are
 * refused and bad values skipped. A raid's records summarise into gaps and per-phase size
 * quantiles (exactly, against a sort done here), phases short of records are not learned,
 * and sizes drawn from the summary stay within the learned ones and follow their quantiles.
 */
#include "tgtest.h"

#include "proxy/wire/doppel.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#define N 2000

/* gaps[i] = the (i + 0.5) / N quantile of w, in a scrambled order, plus junk when asked. */
static size_t sample(const struct doppel_weibull *w, double *gaps, bool junk)
{
    size_t n = 0;
    for (size_t i = 0; i < N; i++)
        gaps[n++] = doppel_draw(w, ((double)((i * 7919) % N) + 0.5) / N);
    if (junk) {
        gaps[n++] = 0;
        gaps[n++] = -3;
        gaps[n++] = NAN;
        gaps[n++] = INFINITY;
    }
    return n;
}

static void assert_near(double got, double want, double rel)
{
    if (fabs(got - want) > rel * fabs(want))
        fail_msg("got %.6g, want %.6g within %.1f%%", got, want, rel * 100);
}

/* The model's own ln/exp/pow/gamma against libm over the ranges the model uses: scaled gaps
 * in (0, 1], exponents k * ln y down to -1e3, draws -ln(u) for u in [2^-53, 1], pow with
 * 1/k for k in [0.01, 10], gamma(1 + 1/k). A wrong series term or range reduction fails. */
static double rel(double a, double b)
{
    if (a == b)
        return 0;
    return fabs(a - b) / fmax(fabs(a), fabs(b));
}

static void test_own_math_matches_libm(void **state)
{
    (void)state;
    double worst_ln = 0, worst_exp = 0, worst_pow = 0, worst_gamma = 0;
    for (int i = 0; i <= 20000; i++) {
        double x = pow(10, -20 + 40.0 * i / 20000) * (1 + 0.37 * (i % 7) / 7);
        worst_ln = fmax(worst_ln, fabs(doppel_ln(x) - log(x)) / fmax(1, fabs(log(x))));
        double e = -740 + 1449.0 * i / 20000;
        worst_exp = fmax(worst_exp, rel(doppel_exp(e), exp(e)));
        double u = 0x1p-53 + (1 - 0x1p-53) * i / 20000.0;
        double k = 0.01 + 9.99 * (i % 997) / 996.0;
        double d = -log(u);
        if (d > 0)
            worst_pow = fmax(worst_pow, rel(doppel_pow(d, 1 / k), pow(d, 1 / k)));
        double y = (i + 1) / 20001.0;
        worst_pow = fmax(worst_pow, rel(doppel_pow(y, k), pow(y, k)));
        worst_gamma = fmax(worst_gamma, rel(doppel_gamma(1 + 1 / k), tgamma(1 + 1 / k)));
    }
    assert_true(worst_ln < 1e-14);
    assert_true(worst_exp < 1e-13);
    assert_true(worst_pow < 1e-11); /* exp(y ln x) magnifies ln's error by |y ln x| <= ~700 */
    assert_true(worst_gamma < 1e-12);
    assert_true(doppel_ln(0) == -INFINITY);
    assert_true(isnan(doppel_ln(-1)));
    assert_true(doppel_ln(1) == 0);
    assert_true(rel(doppel_ln(0x1p-1070), log(0x1p-1070)) < 1e-15);
    assert_true(doppel_exp(0) == 1);
    assert_true(doppel_exp(800) == INFINITY);
    assert_true(doppel_exp(-800) == 0);
    assert_true(doppel_pow(0, 2) == 0);
    assert_true(doppel_pow(-0.0, 0.5) == 0);
    assert_true(doppel_pow(5, 0) == 1);
}

static void test_default_profile(void **state)
{
    (void)state;
    struct doppel_weibull d = doppel_default();
    assert_true(d.k == 0.37846373895785335);
    assert_true(d.lambda_ms == 1.73177086015485);
    assert_near(doppel_mean(&d), 6.7, 0.01); /* the brief's "about 6.7 ms" */
    assert_true(doppel_draw(&d, 1) == 0);
    assert_true(doppel_draw(&d, 0.9) < doppel_draw(&d, 0.1)); /* decreasing in u */
    assert_true(isfinite(doppel_draw(&d, 0)) && doppel_draw(&d, 0) > 0);
    assert_near(doppel_draw(&d, exp(-1)), d.lambda_ms, 1e-12); /* -ln u = 1 */
}

static void test_fit_recovers(void **state)
{
    (void)state;
    static double gaps[N + 4];
    const struct doppel_weibull cases[] = {
        {0.5, 2.0}, {1.0, 10.0}, {3.0, 0.25}, {DOPPEL_DEFAULT_K, DOPPEL_DEFAULT_LAMBDA}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = sample(&cases[i], gaps, i % 2 == 1);
        struct doppel_weibull got;
        assert_int_equal(doppel_fit(gaps, n, &got), 0);
        assert_near(got.k, cases[i].k, 0.03);
        assert_near(got.lambda_ms, cases[i].lambda_ms, 0.05);
    }
}

static void test_fit_refuses(void **state)
{
    (void)state;
    static double gaps[N];
    struct doppel_weibull w = doppel_default(), out = {1, 1};
    sample(&w, gaps, false);
    assert_int_equal(doppel_fit(gaps, DOPPEL_MIN_GAPS - 1, &out), -EINVAL);
    assert_int_equal(doppel_fit(gaps, DOPPEL_MIN_GAPS, &out), 0);
    for (size_t i = 0; i < 200; i++)
        gaps[i] = i < 150 ? 4.0 : -1.0; /* all equal, the rest unusable */
    out = (struct doppel_weibull){1, 1};
    assert_int_equal(doppel_fit(gaps, 200, &out), -EINVAL);
    assert_true(out.k == 1 && out.lambda_ms == 1);
}

/* n records of connections of per_conn records each: gaps from w at scrambled quantiles,
   lengths cycling through lens[]. */
static void raid_samples(struct doppel_sample *s, size_t n, size_t per_conn,
                         const struct doppel_weibull *w, const uint16_t *lens, size_t nlens)
{
    uint64_t t = 1000;
    for (size_t i = 0; i < n; i++) {
        size_t idx = i % per_conn;
        t += idx ? (uint64_t)(doppel_draw(w, ((double)((i * 7919) % n) + 0.5) / n) * 1000) : 5000;
        s[i] =
            (struct doppel_sample){.t_us = t, .len = lens[(i * 5) % nlens], .idx = (uint16_t)idx};
    }
}

static int cmp_u16(const void *a, const void *b)
{
    return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

static void test_learn_summary(void **state)
{
    (void)state;
    static struct doppel_sample s[3000];
    static const uint16_t lens[] = {517, 1017, 1517, 2017, 4113, 16401};
    struct doppel_weibull w = {0.8, 3.0};
    raid_samples(s, 3000, 50, &w, lens, 6); /* phases 0 and 1 only: 50 records a connection */
    struct doppel_profile p;
    doppel_profile_default(&p);
    assert_int_equal(doppel_learn(s, 3000, &p), 0);
    assert_true(p.gaps_learned);
    assert_int_equal(p.n_gaps, 3000 - 3000 / 50);
    assert_near(p.gap.k, 0.8, 0.1);
    assert_near(p.gap.lambda_ms, 3.0, 0.1);
    assert_int_equal(p.phases, 2);
    /* phase 1's table against a sort of its records */
    static uint16_t ph1[3000];
    size_t m = 0;
    for (size_t i = 0; i < 3000; i++)
        if (s[i].idx >= 40 && s[i].idx < 60)
            ph1[m++] = s[i].len;
    qsort(ph1, m, sizeof ph1[0], cmp_u16);
    for (unsigned j = 0; j <= DOPPEL_SIZE_Q; j++)
        assert_int_equal(p.size_q[1][j], ph1[(m - 1) * j / DOPPEL_SIZE_Q]);
    /* draws: within the learned range, the ends at u = 0 and u -> 1, phase 2 reads phase 1 */
    assert_int_equal(doppel_size(&p, 0, 0), 517);
    assert_int_equal(doppel_size(&p, 2, 0.999999), 16401);
    size_t small = 0;
    for (unsigned i = 0; i < 1000; i++) {
        uint32_t v = doppel_size(&p, 1, (i + 0.5) / 1000);
        assert_true(v >= 517 && v <= 16401);
        small += v <= 1017;
    }
    assert_true(small >= 250 && small <= 420); /* 2 of 6 lengths are <= 1017 */
}

static void test_learn_keeps_what_it_cannot_fit(void **state)
{
    (void)state;
    static struct doppel_sample s[120];
    static const uint16_t lens[] = {700};
    struct doppel_weibull w = {1, 1};
    raid_samples(s, 60, 30, &w, lens, 1); /* 58 gaps, 30 records in phase 0 only */
    struct doppel_profile p;
    doppel_profile_default(&p);
    p.size_q[0][0] = 1; /* a marker: sizes must not be replaced */
    raid_samples(s, 20, 20, &w, lens, 1);
    assert_int_equal(doppel_learn(s, 10, &p), 0); /* 10 records: nothing to learn */
    assert_false(p.gaps_learned);
    assert_int_equal(p.phases, 0);
    assert_int_equal(p.size_q[0][0], 1);
    assert_true(p.gap.k == DOPPEL_DEFAULT_K);
    raid_samples(s, 60, 30, &w, lens, 1);
    assert_int_equal(doppel_learn(s, 60, &p), 0); /* sizes yes, gaps (58 < 100) no */
    assert_false(p.gaps_learned);
    assert_int_equal(p.phases, 1);
    assert_int_equal(doppel_size(&p, 2, 0.5), 700);
    assert_int_equal(doppel_learn(NULL, 0, &p), 0);
    assert_int_equal(p.phases, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_own_math_matches_libm),
        cmocka_unit_test(test_default_profile),
        cmocka_unit_test(test_fit_recovers),
        cmocka_unit_test(test_fit_refuses),
        cmocka_unit_test(test_learn_summary),
        cmocka_unit_test(test_learn_keeps_what_it_cannot_fit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
