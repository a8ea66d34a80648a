/*
 * proxy_fakedc: a fake Telegram DC on 127.0.0.1 for tgproxy's tests and benchmarks.
 *
 * One thread, one epoll loop, many connections. Each connection must open with a direct
 * obfs2 header (brief 3.2, no secret: what tgproxy sends toward a DC), followed by a 16-byte
 * plaintext command inside the encrypted stream:
 *
 *   "ECHO" seed:u32 count:u64   echo every byte back until EOF (count ignored)
 *   "SINK" seed:u32 count:u64   read count bytes, verify them against pstream(seed), then
 *                               answer 8 bytes "SINK-OK!" or "SINK-BAD"; then echo
 *   "SRCE" seed:u32 count:u64   send count bytes of pstream(seed), discard whatever arrives
 *   "IDLE" ...                  hold the connection, discard input
 *   "SNKA" seed:u32 count:u64   SINK with acknowledgements: after each read that verified
 *                               bytes, an 8-byte count (u64) of bytes verified so far, at
 *                               most one per FAKEDC_ACK_STEP and always one at count; then
 *                               the 8-byte verdict as SINK, then echo
 *   "SRCW" seed:u32 count:u64   SRCE under flow control: the client sends 8-byte credits
 *                               (u64, the total it allows so far; the largest counts) and
 *                               the DC never sends past the credit
 *
 * All integers little-endian. Counters (atomics) let tests assert what the DC saw: the tag
 * and DC index of the last header, headers accepted / rejected, sinks verified / failed.
 *
 * Ownership: fakedc_start returns a handle freed by fakedc_stop (joins the thread, closes
 * every socket). Thread-safety: the counters may be read from any thread.
 */
#ifndef TGKIT_TEST_PROXY_FAKEDC_H
#define TGKIT_TEST_PROXY_FAKEDC_H

#include <stdint.h>

#define FAKEDC_CMD_LEN  16
#define FAKEDC_ACK_STEP ((uint64_t)64 * 1024) /* bytes between SNKA acknowledgements */

struct fakedc_counters {
    uint64_t accepted;    /* TCP connections accepted */
    uint64_t open;        /* connections open now */
    uint64_t headers_ok;  /* valid obfs2 headers */
    uint64_t headers_bad; /* invalid header or command */
    uint64_t sink_ok, sink_bad;
    uint64_t bytes_in, bytes_out; /* plaintext payload after the command */
    int32_t last_dc;
    uint32_t last_tag;
};

struct fakedc;

/* Start on 127.0.0.1, ephemeral port (returned in *port). NULL on failure. */
struct fakedc *fakedc_start(uint16_t *port);
/* The same on [::1] (IPv6 only). */
struct fakedc *fakedc_start6(uint16_t *port);
void fakedc_stop(struct fakedc *d); /* NULL-safe */
struct fakedc_counters fakedc_counters(struct fakedc *d);

/* Key || IV (pobfs_reply_keyiv) of the reply stream set up by the last valid header, all
   zero before the first. With fast mode these are the keys the proxy's client expects. */
void fakedc_last_reply_keyiv(struct fakedc *d, uint8_t out[48]);

/* The 16-byte command block. */
void fakedc_cmd(uint8_t out[FAKEDC_CMD_LEN], const char verb[4], uint32_t seed, uint64_t count);

#endif
