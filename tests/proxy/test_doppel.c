/*
 * proxy/doppel: the Weibull gap model of doppelganger shaping. The built-in profile has
 * mtg's parameters and mean; a refit recovers known shapes and scales from gaps drawn at
 * evenly spaced quantiles (so the check is deterministic); too few or degenerate gaps are
 * refused and bad values skipped.
 */
#include "tgtest.h"

#include "proxy/doppel.h"

#include <errno.h>
#include <math.h>

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_profile),
        cmocka_unit_test(test_fit_recovers),
        cmocka_unit_test(test_fit_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
