/* Tests for core/readfile: a small file read whole and NUL-terminated, and every file that is
 * not one — missing, a FIFO (which must not block), a directory, too large, a link when links
 * are refused, a token file others may read — refused with its path and why. */
#include "tgtest.h"

#include "core/alloc.h"
#include "core/readfile.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64], path[128], fifo[128], link_path[128];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/tgcore-readfile-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(path, sizeof path, "%s/f", dir);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(link_path, sizeof link_path, "%s/link", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(path);
    unlink(fifo);
    unlink(link_path);
    return rmdir(dir);
}

static void put(const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    assert_true(fd >= 0);
    assert_int_equal(fchmod(fd, mode), 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static void test_reads_whole(void **state)
{
    (void)state;
    put("a = 1\nb = 2\n", 0600);
    char *buf, err[256] = "";
    size_t len;
    struct stat st;
    assert_int_equal(tg__read_file(path, 64, 0, &buf, &len, &st, err, sizeof err), 0);
    assert_int_equal(len, 12);
    assert_string_equal(buf, "a = 1\nb = 2\n"); /* NUL after the last byte */
    assert_int_equal(st.st_size, 12);
    tg__free(buf);
    put("", 0600); /* empty is a file too */
    assert_int_equal(tg__read_file(path, 64, 0, &buf, &len, NULL, err, sizeof err), 0);
    assert_int_equal(len, 0);
    assert_string_equal(buf, "");
    tg__free(buf);
}

static void test_refusals(void **state)
{
    (void)state;
    char *buf = (char *)1, err[256];
    size_t len;
    assert_int_equal(tg__read_file(path, 64, 0, &buf, &len, NULL, err, sizeof err), -ENOENT);
    assert_null(buf);
    assert_non_null(strstr(err, "/f: cannot open: No such file or directory"));

    put("0123456789", 0600);
    assert_int_equal(tg__read_file(path, 9, 0, &buf, &len, NULL, err, sizeof err), -EFBIG);
    assert_non_null(strstr(err, "/f: 10 bytes, expected at most 9"));
    assert_int_equal(tg__read_file(path, 10, 0, &buf, &len, NULL, err, sizeof err), 0);
    tg__free(buf);

    assert_int_equal(tg__read_file(dir, 64, 0, &buf, &len, NULL, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, ": a directory, expected a regular file"));

    /* a FIFO with no writer: open() would block forever without O_NONBLOCK */
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(tg__read_file(fifo, 64, 0, &buf, &len, NULL, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "/fifo: a FIFO, expected a regular file"));
}

static void test_link_and_private(void **state)
{
    (void)state;
    put("token", 0644);
    char *buf, err[256];
    size_t len;
    assert_int_equal(
        tg__read_file(path, 64, TG__READ_PRIVATE, &buf, &len, NULL, err, sizeof err), -EPERM);
    assert_non_null(strstr(err, "/f: readable by group or others (mode 0644), expected 0600"));
    assert_int_equal(chmod(path, 0600), 0);
    assert_int_equal(
        tg__read_file(path, 64, TG__READ_PRIVATE, &buf, &len, NULL, err, sizeof err), 0);
    tg__free(buf);

    assert_int_equal(symlink(path, link_path), 0);
    assert_int_equal(tg__read_file(link_path, 64, 0, &buf, &len, NULL, err, sizeof err), 0);
    assert_string_equal(buf, "token"); /* followed when allowed */
    tg__free(buf);
    assert_int_equal(
        tg__read_file(link_path, 64, TG__READ_NOFOLLOW, &buf, &len, NULL, err, sizeof err),
        -ELOOP);
    assert_non_null(strstr(err, "/link: a symbolic link, expected a regular file"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reads_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_link_and_private, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
