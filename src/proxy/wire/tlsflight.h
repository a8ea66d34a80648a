/*
 * tlsflight: the shape of a real TLS server's first flight, as a front prober recorded it
 * (issue 23): what a passive observer sees of the site's answer to a ClientHello, so that
 * FakeTLS answers can be built the same way.
 *
 * tlsflight_parse() reads the bytes the site sent after our ClientHello (up to where the
 * prober stopped reading) and the lengths of the TCP reads they came in, and fills a
 * struct tlsflight: every record's type and length, the ServerHello's legacy version,
 * random-is-HelloRetryRequest, session id echo, cipher suite, compression, extensions in
 * order with their lengths (key_share group and key length, supported_versions' choice),
 * whether a ChangeCipherSpec follows, how many encrypted (ApplicationData) records follow
 * and their lengths, and which records each TCP segment ended in.
 *
 * Only the flight's framing is read: nothing after the ServerHello is decrypted. A record
 * cut by the end of the recording is counted as `truncated`, not an error (the prober stops
 * at a byte cap or a quiet gap). Errors: a first record that is not a handshake record
 * holding a ServerHello (an alert is reported as such), a length that overruns its parent,
 * a record version other than 03 0x, more than TLSFLIGHT_MAX_* of anything.
 *
 * Pure: no I/O, no allocation; reads only inside the buffers given. Reentrant.
 */
#ifndef TGPROXY_TLSFLIGHT_H
#define TGPROXY_TLSFLIGHT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TLSFLIGHT_RECORDING_MAX 40000 /* bytes a prober keeps of one flight */
#define TLSFLIGHT_MAX_EXT 32 /* ServerHello extensions kept */
#define TLSFLIGHT_MAX_REC 32 /* records of the flight kept */
#define TLSFLIGHT_MAX_SEG 64 /* TCP reads kept */

#define TLSFLIGHT_REC_CCS       20
#define TLSFLIGHT_REC_ALERT     21
#define TLSFLIGHT_REC_HANDSHAKE 22
#define TLSFLIGHT_REC_APPDATA   23

#define TLSFLIGHT_EXT_KEY_SHARE          51
#define TLSFLIGHT_EXT_SUPPORTED_VERSIONS 43

struct tlsflight_ext {
    uint16_t type;
    uint16_t len; /* extension_data length */
};

struct tlsflight_rec {
    uint8_t type;
    uint16_t version; /* record-layer version (0x0303 in TLS 1.3 flights) */
    uint16_t len;     /* fragment length */
};

struct tlsflight {
    /* ServerHello */
    uint16_t legacy_version; /* 0x0303 */
    bool hrr;                /* the random is RFC 8446's HelloRetryRequest value */
    uint8_t sid_len;         /* legacy_session_id_echo length */
    bool sid_echo;           /* ... equal to the session id the client sent */
    uint16_t cipher;
    uint8_t compression;
    size_t next;
    struct tlsflight_ext ext[TLSFLIGHT_MAX_EXT];
    uint16_t version;        /* supported_versions' selected_version; 0 = absent */
    uint16_t group;          /* key_share's group; 0 = absent */
    uint16_t key_len;        /* key_share's key_exchange length */
    uint16_t sh_record_len;  /* length of the record holding the ServerHello */
    bool sh_record_only;     /* that record holds the ServerHello alone */
    /* the flight */
    size_t nrec;
    struct tlsflight_rec rec[TLSFLIGHT_MAX_REC];
    bool ccs;                /* a ChangeCipherSpec record (01) right after the ServerHello */
    size_t nenc;             /* ApplicationData records after the ServerHello */
    uint32_t enc_total;      /* their fragment bytes in all */
    bool alert;              /* an alert record came (the site refused something) */
    bool truncated;          /* the recording ends inside a record */
    /* TCP reads: seg_len[i] bytes; seg_end_rec[i] = index of the record holding the read's
       last byte; seg_cuts[i] = the read ended before that record's end */
    size_t nseg;
    uint32_t seg_len[TLSFLIGHT_MAX_SEG];
    uint8_t seg_end_rec[TLSFLIGHT_MAX_SEG];
    bool seg_cuts[TLSFLIGHT_MAX_SEG]; /* the read ended inside a record */
    /* a read held a short TCP segment's end at a record boundary inside it
       (tlsflight_mark_merged): the reads are not the wire's segments there, and the
       pattern may lack a cut the site made */
    bool seg_merged;
};

/*
 * Parse n recorded bytes p that arrived in nseg reads of seg[i] bytes (sum = n; seg may be
 * NULL with nseg 0: one read). client_sid / client_sid_len: the session id our ClientHello
 * carried, for sid_echo. 0 on success; -EBADMSG (malformed; err says what and at which
 * offset), -E2BIG (more than a TLSFLIGHT_MAX_* of something), -EINVAL (bad arguments).
 */
int tlsflight_parse(const uint8_t *p, size_t n, const uint32_t *seg, size_t nseg,
                    const uint8_t *client_sid, size_t client_sid_len, struct tlsflight *out,
                    char *err, size_t errlen);

/*
 * Which reads held more than the wire's segments: wire[i] = how many TCP segments with data
 * arrived for read i (at most; TCP_INFO's count around the read), mss = the receive MSS.
 * A read of len bytes that took more segments than len / mss rounded up held a short one,
 * i.e. the end of a site's write; if a record boundary lies inside that read, the site may
 * have cut its flight there and a busy reader merged the two (reads only ever merge
 * segments). Sets f->seg_merged then; wire NULL or mss 0 leaves it false.
 */
void tlsflight_mark_merged(struct tlsflight *f, const uint32_t *wire, uint32_t mss);

/* The segment pattern in short text ("SH|CCS+AD" style: records of one read joined by '+',
   reads by '|', a record cut by a read boundary marked "~"): into out (cap > 0), always
   NUL-terminated. Returns out. */
const char *tlsflight_segments(const struct tlsflight *f, char *out, size_t cap);

/*
 * A ClientHello shaped like the ones Telegram clients send (a Chrome-like TLS 1.3 hello:
 * GREASE, x25519 key share, ALPN h2/http1.1, padded to 517 bytes), for probing a front.
 * rnd: TLSFLIGHT_HELLO_RND fresh random bytes (random, session id, key share, GREASE).
 * Into out (cap >= TLSFLIGHT_HELLO_LEN); returns the length, or 0 when sni is too long
 * (over 200 bytes) or cap too small. The session id is rnd[32..64).
 */
#define TLSFLIGHT_HELLO_LEN 517
#define TLSFLIGHT_HELLO_RND 100
size_t tlsflight_client_hello(uint8_t *out, size_t cap, const char *sni,
                              const uint8_t rnd[TLSFLIGHT_HELLO_RND]);

/*
 * A FakeTLS answer shaped like a site's recorded flight, within what Telegram clients
 * accept (docs/proxy-protocol-notes.md): one ServerHello record, one CCS, one
 * ApplicationData record, HMAC over those bytes. tlsflight_answer() fills a (for
 * faketls_server_hello) from site: the site's cipher when it is a TLS 1.3 suite, its order
 * of key_share and supported_versions, and an ApplicationData length of the site's
 * encrypted bytes in all, moved by jitter (-32..+32, from the caller's random draw) and kept
 * within 1..FAKETLS_RECORD_MAX_OUT. Returns the TLSFLIGHT_DIFF_* bits of what the answer
 * still cannot copy (0 = the whole observable shape), for `doctor` and the metrics.
 */
#define TLSFLIGHT_DIFF_CIPHER   0x01u /* not a TLS 1.3 suite: today's cipher kept */
#define TLSFLIGHT_DIFF_EXTS     0x02u /* other extensions than key_share + supported_versions */
#define TLSFLIGHT_DIFF_GROUP    0x04u /* key share not x25519 / 32 bytes */
#define TLSFLIGHT_DIFF_NO_CCS   0x08u /* the site sends no CCS; clients require one */
#define TLSFLIGHT_DIFF_RECORDS  0x10u /* several encrypted records: sent as one */
#define TLSFLIGHT_DIFF_SESSION  0x20u /* the site does not echo the session id */
#define TLSFLIGHT_DIFF_SEGMENTS 0x40u /* the site splits its flight across TCP segments */

struct faketls_answer;
unsigned tlsflight_answer(const struct tlsflight *site, int jitter, struct faketls_answer *a);

#endif
