/*
 * atomicfile: private temporary, fsync, rename, directory fsync. See atomicfile.h.
 * Invariant: the only path opened for writing is one this call created with O_EXCL, and it
 * is either renamed over the target or unlinked before returning.
 */
#include "core/atomicfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TMP_TRIES 16

static int fail(char *err, size_t errcap, int en, const char *path, const char *what)
{
    if (err && errcap)
        snprintf(err, errcap, "%.300s: %s: %s", path, what, strerror(en));
    return -en;
}

/* The directory part of path ("." when there is none) into dir. 0 or -ENAMETOOLONG. */
static int dir_of(const char *path, char *dir, size_t cap)
{
    const char *slash = strrchr(path, '/');
    size_t n = !slash ? 0 : slash == path ? 1 : (size_t)(slash - path);
    if (n + 2 > cap)
        return -ENAMETOOLONG;
    if (n)
        memcpy(dir, path, n);
    else
        dir[n++] = '.';
    dir[n] = '\0';
    return 0;
}

/* A name nobody can predict: getrandom, or (if the kernel refuses) time and pid; O_EXCL
 * keeps even a predicted name safe, the randomness only spares the retries. */
static void suffix(char out[13])
{
    static const char al[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    uint8_t r[12];
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid();
        for (size_t i = 0; i < sizeof r; i++, x = x * 6364136223846793005ULL + 1442695040888963407ULL)
            r[i] = (uint8_t)(x >> 56);
    }
    for (size_t i = 0; i < sizeof r; i++)
        out[i] = al[r[i] % (sizeof al - 1)];
    out[12] = '\0';
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        if (w == 0)
            return -EIO;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int tg__atomic_write(const char *path, const void *data, size_t len, mode_t new_mode, char *err,
                     size_t errcap)
{
    char dir[PATH_MAX], tmp[PATH_MAX];
    if (!path || !*path || dir_of(path, dir, sizeof dir) != 0)
        return fail(err, errcap, path && *path ? ENAMETOOLONG : EINVAL, path ? path : "", "bad path");
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if (!*base)
        return fail(err, errcap, EISDIR, path, "names a directory");

    mode_t mode = new_mode & 0777;
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (S_ISLNK(st.st_mode))
            return fail(err, errcap, ELOOP, path, "is a symbolic link; refusing to replace it");
        if (!S_ISREG(st.st_mode))
            return fail(err, errcap, EINVAL, path, "is not a regular file");
        mode = st.st_mode & 0777;
    } else if (errno != ENOENT) {
        return fail(err, errcap, errno, path, "cannot stat");
    }

    int fd = -1;
    for (int i = 0; i < TMP_TRIES && fd < 0; i++) {
        char sfx[13];
        suffix(sfx);
        if (snprintf(tmp, sizeof tmp, "%.*s.%s.%s", (int)(base - path), path, base, sfx) >=
            (int)sizeof tmp)
            return fail(err, errcap, ENAMETOOLONG, path, "path too long for a temporary beside it");
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST)
            return fail(err, errcap, errno, path, "cannot create a temporary file beside it");
    }
    if (fd < 0)
        return fail(err, errcap, EEXIST, path, "no free temporary name beside it");

    int rc = fchmod(fd, mode) < 0 ? -errno : 0;
    const char *what = "cannot set the mode of the temporary";
    if (rc == 0) {
        rc = write_all(fd, data, len);
        what = "cannot write";
    }
    if (rc == 0 && fsync(fd) < 0) {
        rc = -errno;
        what = "cannot sync";
    }
    if (close(fd) < 0 && rc == 0) {
        rc = -errno;
        what = "cannot write";
    }
    if (rc == 0 && rename(tmp, path) < 0) {
        rc = -errno;
        what = "cannot rename the temporary over it";
    }
    if (rc < 0) {
        unlink(tmp);
        return fail(err, errcap, -rc, path, what);
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return fail(err, errcap, errno, path, "written, but its directory cannot be opened to sync");
    rc = fsync(dfd) < 0 ? -errno : 0;
    close(dfd);
    if (rc < 0)
        return fail(err, errcap, -rc, path, "written, but its directory cannot be synced");
    return 0;
}
