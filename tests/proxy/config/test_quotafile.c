/*
 * The quota state file (src/proxy/config/quotafile.c): one row per bad input with the line and
 * the words its error must name, a round trip through a real file, and the atomic write
 * (the old file stays when the write cannot happen; no temporary file is left behind).
 */
#include "tgtest.h"

#include "proxy/config/quotafile.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#define HDR QUOTAFILE_HEADER "\n"

static void test_bad_inputs(void **state)
{
    (void)state;
    static const struct {
        const char *text, *where, *what;
    } rows[] = {
        {"", "q:1: ", "empty file"},
        {"main 1 2\n", "q:1: ", "header"},
        {"# tgproxy quota state v2\n", "q:1: ", "header"},
        {HDR "main 1 2", "q:2: ", "newline"},
        {HDR "main 1\n", "q:2: ", "three fields"},
        {HDR "main 1 2 3\n", "q:2: ", "three fields"},
        {HDR "main  1 2\n", "q:2: ", "three fields"},
        {HDR "main 1 2 \n", "q:2: ", "three fields"},
        {HDR " main 1 2\n", "q:2: ", "three fields"},
        {HDR "ma/in 1 2\n", "q:2: ", "bad label"},
        {HDR "main x 2\n", "q:2: ", "USED"},
        {HDR "main -1 2\n", "q:2: ", "USED"},
        {HDR "main 1 -2\n", "q:2: ", "PERIOD_END"},
        {HDR "main 18446744073709551616 2\n", "q:2: ", "USED: out of range"},
        {HDR "main 1 9223372036854775808\n", "q:2: ", "PERIOD_END: out of range"},
        {HDR "main 1 2\r\n", "q:2: ", "PERIOD_END"},
        {HDR "\n# c\nmain 1 2\nmain 3 4\n", "q:5: ", "twice"},
        {HDR "a 1 2\nb 1 2\nc 1 2\n", "q:4: ", "too many"},
        {HDR "a234567890123456789012345678901234567890123456789012345678901234 1 2\n",
         "q:2: ", "too long"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct quotafile_entry e[2];
        char err[256] = "";
        int rc = quotafile_parse("q", rows[i].text, strlen(rows[i].text), e, 2, err, sizeof err);
        if (rc != -EINVAL || strncmp(err, rows[i].where, strlen(rows[i].where)) != 0 ||
            !strstr(err, rows[i].what))
            fail_msg("row %zu: rc %d, err \"%s\"; wanted \"%s...%s\"", i, rc, err, rows[i].where,
                     rows[i].what);
    }
}

/* PERIOD_END is bounded by the period: one period ahead of now at most (a period started
   now ends there), named by its line; a quota that never resets takes anything. */
static void test_period_bound(void **state)
{
    (void)state;
    static const char text[] = HDR "# c\na 1 1003600\nb 1 1003601\nc 1 99999999999\nd 1 5\n";
    struct quotafile_entry e[4];
    char err[256] = "";
    assert_int_equal(quotafile_parse("q", text, sizeof text - 1, e, 4, err, sizeof err), 4);
    assert_int_equal(e[0].line, 3);
    assert_int_equal(quotafile_check_period("q", &e[0], 1000000, 3600, err, sizeof err), 0);
    assert_int_equal(quotafile_check_period("q", &e[1], 1000000, 3600, err, sizeof err), -EINVAL);
    assert_string_equal(err, "q:4: PERIOD_END 1003601 is 3601 s from now, expected at most one "
                             "quota-reset period (3600 s) ahead");
    assert_int_equal(quotafile_check_period("q", &e[2], 1000000, 86400, err, sizeof err), -EINVAL);
    assert_true(strncmp(err, "q:5: PERIOD_END", 15) == 0);
    assert_int_equal(quotafile_check_period("q", &e[2], 1000000, 0, err, sizeof err), 0);
    assert_int_equal(quotafile_check_period("q", &e[3], 1000000, 3600, err, sizeof err), 0);
}

static void test_good_input(void **state)
{
    (void)state;
    static const char text[] = HDR "\n# saved by tgproxy\nmain 123 1767225600\nb.x-y_z "
                                   "18446744073709551615 0\n";
    struct quotafile_entry e[4];
    char err[256];
    assert_int_equal(quotafile_parse("q", text, sizeof text - 1, e, 4, err, sizeof err), 2);
    assert_string_equal(e[0].label, "main");
    assert_true(e[0].used == 123 && e[0].period_end == 1767225600);
    assert_string_equal(e[1].label, "b.x-y_z");
    assert_true(e[1].used == UINT64_MAX && e[1].period_end == 0);
    assert_int_equal(quotafile_parse("q", HDR, sizeof HDR - 1, e, 4, err, sizeof err), 0);
}

static void test_save_load(void **state)
{
    (void)state;
    char dir[] = "/tmp/tgproxy-quotafile-XXXXXX", path[96], tmp[104], err[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/q", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    struct quotafile_entry in[2] = {{"a", 5, 100, 0}, {"b", 0, 0, 0}}, out[4];
    assert_int_equal(quotafile_load(path, out, 4, err, sizeof err), -ENOENT);
    assert_int_equal(quotafile_save(path, in, 2, err, sizeof err), 0);
    assert_int_equal(access(tmp, F_OK), -1); /* renamed away */
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600); /* labels and usage are the operator's */
    assert_int_equal(quotafile_load(path, out, 4, err, sizeof err), 2);
    for (int i = 0; i < 2; i++) {
        assert_string_equal(out[i].label, in[i].label);
        assert_true(out[i].used == in[i].used && out[i].period_end == in[i].period_end);
    }
    in[0].used = 7; /* replaced as a whole */
    assert_int_equal(quotafile_save(path, in, 1, err, sizeof err), 0);
    assert_int_equal(quotafile_load(path, out, 4, err, sizeof err), 1);
    assert_true(out[0].used == 7);
    /* a link planted at the old predictable temporary name is not followed: the file it
     * points to stays as it was, and the state file is a fresh regular file of mode 0600 */
    char victim[104];
    snprintf(victim, sizeof victim, "%s/victim", dir);
    FILE *v = fopen(victim, "w");
    assert_non_null(v);
    fputs("precious\n", v);
    fclose(v);
    assert_int_equal(chmod(path, 0640), 0);
    assert_int_equal(symlink(victim, tmp), 0);
    assert_int_equal(quotafile_save(path, in, 2, err, sizeof err), 0);
    assert_int_equal(quotafile_load(victim, out, 4, err, sizeof err), -EINVAL);
    assert_int_equal(quotafile_load(path, out, 4, err, sizeof err), 2);
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0640); /* the operator's mode is kept */
    unlink(tmp);
    /* a link at the state file itself: refused, and the old file it points to stays */
    char real[104];
    snprintf(real, sizeof real, "%s/real", dir);
    assert_int_equal(rename(path, real), 0);
    assert_int_equal(symlink(real, path), 0);
    assert_true(quotafile_save(path, in, 1, err, sizeof err) < 0);
    assert_non_null(strstr(err, "symbolic link"));
    assert_int_equal(quotafile_load(real, out, 4, err, sizeof err), 2);
    unlink(path);
    unlink(real);
    unlink(victim);
    char missing[128];
    snprintf(missing, sizeof missing, "%s/no/such/dir/q", dir);
    assert_true(quotafile_save(missing, in, 2, err, sizeof err) < 0);
    assert_non_null(strstr(err, "cannot create"));
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_good_input),
        cmocka_unit_test(test_period_bound),
        cmocka_unit_test(test_save_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
