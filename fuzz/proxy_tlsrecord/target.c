/*
 * Fuzz target: the FakeTLS record reader (client -> proxy after the handshake).
 *
 * Input: byte 0 picks a chunking pattern, the rest is the wire stream. The stream is fed
 * once whole and once in chunks; the payload and the final status must be identical
 * (reassembly must not depend on how TCP cut the bytes), payload never exceeds the input,
 * and the span iterator never points outside its buffer. Then the payload is wrapped with
 * the writer and read back, which must round-trip exactly.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/wire/faketls.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static enum faketls_rec run_chunked(const uint8_t *in, size_t n, unsigned pattern, uint8_t *out,
                                    size_t *out_n)
{
    struct faketls_reader r;
    faketls_reader_init(&r, (pattern & 0x80) ? 65535 : 0);
    enum faketls_rec st = FAKETLS_REC_NEED_MORE;
    size_t at = 0, step = (pattern & 0x0f) + 1;
    *out_n = 0;
    while (at < n && st == FAKETLS_REC_NEED_MORE) {
        size_t c = n - at < step ? n - at : step;
        size_t pos = 0, off, len;
        while ((st = faketls_reader_next(&r, in + at, c, &pos, &off, &len)) == FAKETLS_REC_DATA) {
            if (off + len > c || len == 0 || pos > c)
                abort();
            memcpy(out + *out_n, in + at + off, len);
            *out_n += len;
        }
        at += c;
        step = step * 3 % 17 + 1; /* vary the cut points */
    }
    return st;
}

static void roundtrip(const uint8_t *payload, size_t n)
{
    size_t wn = faketls_wrapped_len(n), got;
    uint8_t *w = malloc(wn ? wn : 1);
    if (!w)
        return;
    if (faketls_wrap(payload, n, w, wn) != wn)
        abort();
    struct faketls_reader r;
    faketls_reader_init(&r, 0);
    if (faketls_reader_strip(&r, w, wn, &got) != FAKETLS_REC_NEED_MORE || got != n ||
        memcmp(w, payload, n) != 0)
        abort();
    free(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned pattern = data[0];
    const uint8_t *in = data + 1;
    size_t n = size - 1, whole_n, chunk_n;
    uint8_t *whole = malloc(n + 1), *chunked = malloc(n + 1);
    if (!whole || !chunked)
        goto out;
    memcpy(whole, in, n);
    struct faketls_reader r;
    faketls_reader_init(&r, (pattern & 0x80) ? 65535 : 0);
    enum faketls_rec a = faketls_reader_strip(&r, whole, n, &whole_n);
    enum faketls_rec b = run_chunked(in, n, pattern, chunked, &chunk_n);
    if (whole_n > n || a != b || whole_n != chunk_n || memcmp(whole, chunked, whole_n) != 0)
        abort();
    if (a == FAKETLS_REC_DATA)
        abort(); /* strip never stops on data */
    roundtrip(whole, whole_n);
out:
    free(whole);
    free(chunked);
    return 0;
}
