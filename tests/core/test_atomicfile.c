/* Tests for core/atomicfile: contents replaced whole, modes, and nothing planted beside the
 * file (a predictable FILE.tmp, a symbolic link) is followed or becomes the file. */
#include "tgtest.h"

#include "core/atomicfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/tgcore-atomicfile-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    DIR *d = opendir(dir);
    struct dirent *de;
    char p[320];
    while (d && (de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        if (unlink(p) != 0)
            rmdir(p);
    }
    if (d)
        closedir(d);
    return rmdir(dir);
}

static void put(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
}

static void expect(const char *path, const char *text)
{
    char buf[256] = {0};
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    assert_true(n >= 0);
    assert_string_equal(buf, text);
}

/* Entries of dir (besides . and ..). */
static int entries(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d)) != NULL;)
        n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
    if (d)
        closedir(d);
    return n;
}

static void test_new_and_replaced(void **state)
{
    (void)state;
    char path[128], err[512];
    snprintf(path, sizeof path, "%s/state", dir);
    mode_t old = umask(0);
    int rc = tg__atomic_write(path, "one", 3, 0600, err, sizeof err);
    umask(old);
    assert_int_equal(rc, 0);
    expect(path, "one");
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600); /* new_mode, whatever the umask */
    assert_int_equal(entries(), 1);              /* no temporary left behind */
    /* an existing file keeps its mode (not the special bits) */
    assert_int_equal(chmod(path, 02640), 0);
    assert_int_equal(tg__atomic_write(path, "two!", 4, 0600, err, sizeof err), 0);
    expect(path, "two!");
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0640);
    assert_int_equal(entries(), 1);
    /* a bare name is written in the current directory */
    char cwd[256];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(dir), 0);
    assert_int_equal(tg__atomic_write("bare", "b", 1, 0600, err, sizeof err), 0);
    assert_int_equal(chdir(cwd), 0);
    snprintf(path, sizeof path, "%s/bare", dir);
    expect(path, "b");
}

/* A FILE.tmp made beforehand by someone else (world-writable, another owner) is neither
 * opened nor renamed into place: the file is a new inode of ours with our mode. */
static void test_planted_tmp_file(void **state)
{
    (void)state;
    char path[128], tmp[136], err[512];
    snprintf(path, sizeof path, "%s/state", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    put(tmp, "attacker", 0666);
    if (geteuid() == 0)
        assert_int_equal(chown(tmp, 65534, 65534), 0);
    struct stat planted, st;
    assert_int_equal(stat(tmp, &planted), 0);
    assert_int_equal(tg__atomic_write(path, "ours", 4, 0600, err, sizeof err), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_true(st.st_ino != planted.st_ino);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(st.st_uid, geteuid());
    expect(path, "ours");
    expect(tmp, "attacker"); /* left alone */
}

/* A symbolic link planted where the old code put its temporary, or at the file itself, never
 * redirects the write to its target. */
static void test_planted_links(void **state)
{
    (void)state;
    char path[128], tmp[136], victim[128], err[512];
    snprintf(path, sizeof path, "%s/state", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    snprintf(victim, sizeof victim, "%s/victim", dir);
    put(victim, "precious", 0644);
    assert_int_equal(symlink(victim, tmp), 0);
    assert_int_equal(tg__atomic_write(path, "ours", 4, 0600, err, sizeof err), 0);
    expect(victim, "precious");
    expect(path, "ours");
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    /* a link at the path is refused, and link and target stay as they were */
    assert_int_equal(unlink(path), 0);
    assert_int_equal(symlink(victim, path), 0);
    assert_int_equal(tg__atomic_write(path, "ours", 4, 0600, err, sizeof err), -ELOOP);
    assert_non_null(strstr(err, "symbolic link"));
    assert_non_null(strstr(err, path));
    expect(victim, "precious");
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(entries(), 3); /* victim, state (link), state.tmp (link): no temporary */
}

static void test_errors(void **state)
{
    (void)state;
    char path[128], err[512];
    snprintf(path, sizeof path, "%s/no/such/dir/state", dir);
    assert_int_equal(tg__atomic_write(path, "x", 1, 0600, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "cannot create a temporary"));
    snprintf(path, sizeof path, "%s/sub", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    assert_int_equal(tg__atomic_write(path, "x", 1, 0600, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "not a regular file"));
    snprintf(path, sizeof path, "%s/", dir);
    assert_int_equal(tg__atomic_write(path, "x", 1, 0600, NULL, 0), -EISDIR);
    assert_int_equal(tg__atomic_write("", "x", 1, 0600, err, sizeof err), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_new_and_replaced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_planted_tmp_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_planted_links, setup, teardown),
        cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
