/*
 * quotafile: the quota state file ([limits] state-file): how much of each secret's quota
 * was used in its current period, so a restart does not hand every secret a fresh quota.
 *
 * Format (text, one line each, '\n' ends lines; blank lines and lines starting with '#'
 * after the first are ignored):
 *
 *   # tgproxy quota state v1
 *   LABEL USED PERIOD_END
 *
 * LABEL is a [secrets] label ([A-Za-z0-9_.-], 1..63 bytes), USED the bytes charged in the
 * period (decimal), PERIOD_END the Unix second the period ends (0: not started, or the
 * quota never resets). Fields are separated by one space; each label appears once; at most
 * QUOTAFILE_MAX_ENTRIES lines, QUOTAFILE_MAX_BYTES in all.
 *
 * PERIOD_END is bounded by the secret's quota-reset: a period that starts now ends at most
 * one period ahead, so a later PERIOD_END (a clock that ran ahead when it was written, a
 * hand edit) is damage, refused like any other (quotafile_check_period).
 *
 * quotafile_parse is pure (bytes in, entries out; fuzzed: fuzz/proxy_quotafile).
 * quotafile_load reads a file and parses it; quotafile_save writes one atomically through
 * tg__atomic_write (core/atomicfile.h): a private O_EXCL temporary beside it, fsync, rename
 * over the old one, fsync of the directory, so a crash leaves either the old file or the new
 * one, never a mix; a new file is 0600, an existing one keeps its mode, a link is refused.
 *
 * Errors read "NAME:LINE: what, expected what" (NAME is the path or the caller's name).
 * Ownership: entries are caller storage. Thread-safety: no shared state.
 */
#ifndef TGPROXY_QUOTAFILE_H
#define TGPROXY_QUOTAFILE_H

#include <stddef.h>
#include <stdint.h>

#include "proxy/config/config.h"

#define QUOTAFILE_HEADER      "# tgproxy quota state v1"
#define QUOTAFILE_MAX_ENTRIES 1024        /* secrets' lines in one file */
#define QUOTAFILE_MAX_BYTES   (256 << 10) /* a whole file */

struct quotafile_entry {
    char label[CONFIG_LABEL_MAX];
    uint64_t used;      /* bytes charged in the current period */
    int64_t period_end; /* Unix seconds; 0 = not started / never resets */
    uint32_t line;      /* where quotafile_parse read it (for messages); ignored by save */
};

/*
 * Parse text[0..len) into out[0..cap). name is used in messages only. Returns the number of
 * entries (0..cap), or -EINVAL with err filled ("name:line: ..."), also when there are more
 * than cap entries.
 */
int quotafile_parse(const char *name, const char *text, size_t len, struct quotafile_entry *out,
                    size_t cap, char *err, size_t errlen);

/*
 * Check e, read from the file name, against its secret's period period_s (quota-reset; 0 =
 * the quota never resets, and any PERIOD_END is left for the limits to ignore): a
 * PERIOD_END more than period_s after now_s is refused. 0, or -EINVAL with err filled
 * ("name:LINE: PERIOD_END ...").
 */
int quotafile_check_period(const char *name, const struct quotafile_entry *e, int64_t now_s,
                           uint32_t period_s, char *err, size_t errlen);

/*
 * Read and parse the file at path. Returns the number of entries, -ENOENT when there is no
 * file (err filled too), -EINVAL for bad content, or another -errno (err says which).
 */
int quotafile_load(const char *path, struct quotafile_entry *out, size_t cap, char *err,
                   size_t errlen);

/*
 * Write entries atomically to path (mode 0600): path.tmp, fsync, rename, fsync of the
 * directory. 0 or -errno with err filled; on failure the old file is left as it was.
 */
int quotafile_save(const char *path, const struct quotafile_entry *e, size_t n, char *err,
                   size_t errlen);

#endif
