/*
 * proxy_fakemp: tgproxy-fakemp (tools/fakemp, the fake middle proxy) as a daemon under test.
 *
 * pfmp_secret() writes a proxy secret file; pfmp_start() runs the fake in d (daemon_fx.h)
 * relaying to the fake DC at 127.0.0.1:dc_port in --raw mode (what proxy_fakedc expects),
 * listening on 127.0.0.1:port (0: the kernel's choice), and waits for its listening line, so
 * d->port is its port. The binary is a build dependency of the proxy tests (extra.cmake).
 *
 * Thread-safety: one thread.
 */
#ifndef TGKIT_TEST_PROXY_FAKEMP_H
#define TGKIT_TEST_PROXY_FAKEMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon_fx.h"

#define PFMP_BIN TGKIT_BINARY_DIR "/tgproxy-fakemp"

/* Write n bytes of secret to path (whole, 0600); fails the test on error. */
void pfmp_secret(const char *path, const uint8_t *secret, size_t n);
/* Start the fake (see above); extra: more arguments, NULL-terminated, or NULL. */
void pfmp_start(struct dfx *d, const char *secret_path, uint16_t dc_port, uint16_t port,
                const char *const *extra);

/* tgproxy's configuration for a middle-proxy test into d->cfg (dfx_config): one worker,
   top-level ad-tag tag, one secret "dd" (dd + key), every DC at the fake DC's dc_port,
   [middle-proxy] proxy-secret and proxy-config (file paths or URLs) followed by mp_lines
   (whole lines, "" for none), and [stats.prometheus] on a free port when metrics. */
void pfmp_daemon_config(const struct dfx *d, const char *tag, const uint8_t key[16],
                        uint16_t dc_port, const char *secret, const char *config,
                        const char *mp_lines, bool metrics);

/* Through tgproxy at 127.0.0.1:port in middle-proxy mode to the fake DC behind the fake
   middle proxy: a client of mode with key sends the fake DC's ECHO and 4 KiB as packets of
   its transport framing (dd and FakeTLS: padded intermediate; classic: abridged) and must
   get every byte back, framed the same way. 0, or -1 (connect, I/O or wrong bytes). */
int pfmp_echo_framed(uint16_t port, int mode, const uint8_t *key);

struct pcli;
/* The pieces: the transport tag of a pcli mode, one packet framed in it, and n bytes of
   packets read back (their payloads, joined). 0 or -1. */
uint32_t pfmp_tag(int mode);
int pfmp_send_packet(struct pcli *c, uint32_t tag, const void *p, size_t n);
int pfmp_recv_packets(struct pcli *c, uint32_t tag, uint8_t *out, size_t n);

#endif
