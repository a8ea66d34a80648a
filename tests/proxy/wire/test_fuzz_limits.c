/*
 * test_fuzz_limits: every fuzz target declares the largest input it is given
 * (fuzz/<name>/max_len), the proxy parsers' limits cover their real maximum inputs, and
 * scripts/fuzz.sh (CI's fuzz smoke and `make fuzz`) hands that limit to libFuzzer as
 * -max_len. Without it libFuzzer caps inputs at 4096 bytes and a 4-16 KiB ClientHello is
 * never explored. The script is run against stand-in fuzzer executables that record their
 * arguments, so no fuzzing build is needed.
 */
#include "tgtest.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proxy/wire/faketls.h"
#include "proxy/wire/tlsflight.h"

/* First line of fuzz/<name>/max_len as a number; -1 when missing or malformed. */
static long max_len_of(const char *name)
{
    char path[512], line[64];
    snprintf(path, sizeof path, "%s/fuzz/%s/max_len", TGKIT_SOURCE_DIR, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char *end = NULL;
    long v = fgets(line, sizeof line, f) ? strtol(line, &end, 10) : -1;
    fclose(f);
    return end && (*end == '\n' || *end == '\0') && v > 0 ? v : -1;
}

static long file_size(const char *rel)
{
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", TGKIT_SOURCE_DIR, rel);
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static void test_every_target_declares_a_limit(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/fuzz", TGKIT_SOURCE_DIR);
    DIR *d = opendir(path);
    assert_non_null(d);
    int targets = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char target[1024];
        snprintf(target, sizeof target, "%s/%s/target.c", path, e->d_name);
        if (e->d_name[0] == '.' || access(target, R_OK) != 0)
            continue;
        targets++;
        if (max_len_of(e->d_name) < 64)
            fail_msg("fuzz/%s/max_len is missing or too small", e->d_name);
    }
    closedir(d);
    assert_true(targets >= 8);
}

/* Each proxy parser's limit covers the largest input the proxy can hand it. */
static void test_proxy_limits_cover_the_parsers(void **state)
{
    (void)state;
    assert_true(max_len_of("proxy_clienthello") > FAKETLS_HDR_LEN + FAKETLS_HELLO_MAX);
    assert_true(max_len_of("proxy_tlsrecord") >= 1 + 2 * (FAKETLS_HDR_LEN + 65535));
    assert_true(max_len_of("proxy_proxyproto") > 1024); /* PP_V2_MAX in conn.c */
    assert_true(max_len_of("proxy_obfs2") > 64);
    assert_true(max_len_of("proxy_tlsflight") >= 33 + TLSFLIGHT_RECORDING_MAX);
    long example = file_size("examples/tgproxy.example.toml");
    assert_true(example > 0);
    assert_true(max_len_of("proxy_toml") >= 2 * example);
}

/* scripts/fuzz.sh passes -max_len=<fuzz/<name>/max_len> to each fuzzer it runs. */
static void test_fuzz_script_passes_max_len(void **state)
{
    (void)state;
    char dir[] = "/tmp/tgproxy-fuzzsh-XXXXXX", path[256], log[256], cmd[1024];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/fuzz", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(log, sizeof log, "%s/args", dir);
    static const char *const names[] = {"proxy_clienthello", "proxy_toml"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/fuzz/%s_fuzzer", dir, names[i]);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fprintf(f, "#!/bin/sh\necho \"%s $*\" >> '%s'\necho stat::number_of_executed_units: 1\n",
                names[i], log);
        fclose(f);
        assert_int_equal(chmod(path, 0700), 0);
    }
    snprintf(cmd, sizeof cmd, "cd '%s' && bash scripts/fuzz.sh '%s' 1 > '%s/out' 2>&1",
             TGKIT_SOURCE_DIR, dir, dir);
    int rc = system(cmd);
    assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
    FILE *f = fopen(log, "r");
    assert_non_null(f);
    char got[2048] = "", want[128];
    size_t n = fread(got, 1, sizeof got - 1, f);
    got[n] = '\0';
    fclose(f);
    for (size_t i = 0; i < 2; i++) {
        snprintf(want, sizeof want, "%s -max_total_time=1 -max_len=%ld ", names[i],
                 max_len_of(names[i]));
        if (!strstr(got, want))
            fail_msg("fuzz.sh ran: %s\nwanted: %s", got, want);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_target_declares_a_limit),
        cmocka_unit_test(test_proxy_limits_cover_the_parsers),
        cmocka_unit_test(test_fuzz_script_passes_max_len),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
