/*
 * Fuzz target: the recorded server first flight (proxy/wire/tlsflight.h), what a front
 * prober reads back from a real TLS site.
 *
 * Input: byte 0 seeds how the rest is cut into TCP reads; bytes 1..32 are the session id
 * the "client" sent; the rest is the recording. It is parsed once as one read and once cut
 * into reads: the verdict and every record/ServerHello field must agree (segmentation
 * never changes what was parsed), counts stay within their bounds, every read's record
 * index is a record, the segment pattern text is always terminated within its buffer, and
 * a read counted as one TCP segment is never marked merged (tlsflight_mark_merged).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/wire/tlsflight.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 33)
        return 0;
    unsigned seed = data[0];
    const uint8_t *sid = data + 1, *in = data + 33;
    size_t n = size - 33;
    uint32_t seg[TLSFLIGHT_MAX_SEG];
    size_t nseg = 0, at = 0, step = (seed & 0x3f) + 1;
    while (at < n && nseg < TLSFLIGHT_MAX_SEG) {
        size_t c = n - at < step ? n - at : step;
        if (nseg == TLSFLIGHT_MAX_SEG - 1)
            c = n - at;
        seg[nseg++] = (uint32_t)c;
        at += c;
        step = step * 7 % 97 + 1;
    }
    static struct tlsflight a, b;
    char err[160];
    int ra = tlsflight_parse(in, n, NULL, 0, sid, seed & 0x80 ? 32 : 0, &a, err, sizeof err);
    int rb = tlsflight_parse(in, n, seg, nseg, sid, seed & 0x80 ? 32 : 0, &b, err, sizeof err);
    if (ra != rb)
        abort();
    if (ra != 0)
        return 0;
    if (a.nrec != b.nrec || a.nrec == 0 || a.nrec > TLSFLIGHT_MAX_REC ||
        a.next > TLSFLIGHT_MAX_EXT || a.next != b.next || a.cipher != b.cipher ||
        a.ccs != b.ccs || a.nenc != b.nenc || a.enc_total != b.enc_total ||
        a.truncated != b.truncated || a.sid_echo != b.sid_echo || a.group != b.group ||
        a.key_len != b.key_len || memcmp(a.rec, b.rec, sizeof a.rec) != 0 ||
        memcmp(a.ext, b.ext, sizeof a.ext) != 0)
        abort();
    if (b.nseg != nseg || a.nenc > a.nrec)
        abort();
    for (size_t i = 0; i < b.nseg; i++)
        if (b.seg_end_rec[i] >= b.nrec)
            abort();
    /* a read that took no more TCP segments than its bytes need is never "merged"; any
       other count stays within the reads (tlsflight_mark_merged) */
    uint32_t wire[TLSFLIGHT_MAX_SEG];
    for (size_t i = 0; i < b.nseg; i++)
        wire[i] = 1;
    tlsflight_mark_merged(&b, wire, 1460);
    if (b.seg_merged)
        abort();
    for (size_t i = 0; i < b.nseg; i++)
        wire[i] = (uint32_t)(seed >> (i % 6) & 3) + 1;
    tlsflight_mark_merged(&b, wire, (seed & 7) + 1);
    char text[64];
    tlsflight_segments(&b, text, sizeof text);
    if (!memchr(text, '\0', sizeof text))
        abort();
    return 0;
}
