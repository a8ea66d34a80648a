/*
 * readfile: read a small file whole, the one way every loader here does it.
 *
 * tg__read_file(path, max, flags, &buf, &len, &st, err, errcap) opens path with O_RDONLY |
 * O_CLOEXEC | O_NOCTTY | O_NONBLOCK (a FIFO at the path would otherwise hold the caller in
 * open() until some writer appears: a daemon's main thread, on a reload), checks with fstat
 * that it is a regular file of at most max bytes, and reads it into a tg__malloc'ed buffer
 * with a NUL after the last byte (so text parsers may treat it as a string; len excludes
 * the NUL). A file that shrinks or grows while it is read is an error, not a silent cut.
 *
 * flags: TG__READ_NOFOLLOW refuses a symbolic link at path (O_NOFOLLOW: ELOOP);
 * TG__READ_PRIVATE refuses a file that group or others may read or write (token files).
 * st (may be NULL) gets the file's fstat.
 *
 * Returns 0, or -errno with err (may be NULL) set to "PATH: why": "cannot open: No such
 * file or directory", "a FIFO, expected a regular file", "N bytes, expected at most MAX",
 * "readable by group or others (mode 0644), expected 0600", "read failed: why", "changed
 * size while it was read". -ENOENT is returned as such, so a caller can treat a missing
 * optional file as empty. The buffer is the caller's (tg__free); on error *out is NULL.
 * Thread-safety: reentrant.
 */
#ifndef TGKIT_CORE_READFILE_H
#define TGKIT_CORE_READFILE_H

#include <stddef.h>
#include <sys/stat.h>

enum {
    TG__READ_NOFOLLOW = 1u << 0,
    TG__READ_PRIVATE = 1u << 1,
};

int tg__read_file(const char *path, size_t max, unsigned flags, char **out, size_t *len,
                  struct stat *st, char *err, size_t errcap);

/* What a file of mode m that is not regular is, for messages ("a FIFO", "a directory" ...). */
const char *tg__file_kind(mode_t m);

#endif
