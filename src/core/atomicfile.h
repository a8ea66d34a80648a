/*
 * atomicfile: replace a small state file in one step, safely in a shared directory.
 *
 * tg__atomic_write(path, ...) writes the new contents to a private temporary beside path
 * (".NAME.XXXXXXXXXXXX" with a random suffix, created O_CREAT|O_EXCL|O_NOFOLLOW, so nothing
 * another user placed there, file or link, is ever opened), fsyncs it, renames it over path
 * and fsyncs the directory. A reader sees the old file or the new one, never a mix, and a
 * crash leaves at worst a stray temporary.
 *
 * - Mode: an existing path keeps its permission bits (setuid/setgid/sticky dropped); a new
 *   one gets new_mode (e.g. 0600 for files that hold tokens), whatever the umask.
 * - Links: a symbolic link (or anything but a regular file) at path is refused with ELOOP
 *   (EINVAL for other types) and left alone. rename() would replace the link itself, never
 *   its target, so this is not what keeps the target safe; it keeps a user who linked the
 *   file somewhere from silently losing the link.
 * - Owner: the new file belongs to the writing process, as any new file does.
 *
 * Returns 0, or -errno with err set to "PATH: what failed: why" (err may be NULL).
 * Thread-safety: reentrant; concurrent writers of one path each succeed, the last rename wins.
 */
#ifndef TGKIT_CORE_ATOMICFILE_H
#define TGKIT_CORE_ATOMICFILE_H

#include <stddef.h>
#include <sys/types.h>

int tg__atomic_write(const char *path, const void *data, size_t len, mode_t new_mode, char *err,
                     size_t errcap);

#endif
