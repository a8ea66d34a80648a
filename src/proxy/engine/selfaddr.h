/*
 * selfaddr: the TCP endpoints that reach this proxy's own listeners, so the engine never
 * fronts a connection onto itself (a loop that would chain connections up to the
 * `concurrency` limit).
 *
 * A listener on a specific address is reached at that address and its port. A wildcard
 * listener (0.0.0.0 or [::]) is reached at every address the host really has of that
 * family (getifaddrs: 127.0.0.1, ::1, the public ones) with its port, and at the
 * unspecified address itself (Linux connects 0.0.0.0 and :: to the local host). Nothing
 * else is: 127.0.0.2:443 beside a 0.0.0.0:443 listener is a different socket when a site
 * binds it (SO_REUSEPORT lets a specific bind sit beside a wildcard one, and the kernel
 * prefers the specific one). Addresses are compared after normalisation: an IPv4-mapped
 * IPv6 address (::ffff:127.0.0.1) is the IPv4 address it maps, since connecting to it
 * reaches the IPv4 listener.
 *
 * The set is built once at start-up (after the listeners are bound, so port 0 is the real
 * port) and is read-only afterwards; an address added to an interface later is not in it.
 *
 * Beside it, the host's own addresses whatever the port (selfaddr_local): a connect to one
 * of them is answered by this kernel inside the connect() call (upstream.c connects to a
 * DC there without waiting for epoll).
 *
 * Ownership: struct selfaddr is caller storage; selfaddr_cleanup releases its array.
 * Thread-safety: selfaddr_has is reentrant and may run on any thread once built.
 */
#ifndef TGPROXY_SELFADDR_H
#define TGPROXY_SELFADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct ifaddrs;

struct selfaddr_entry {
    int family;       /* AF_INET or AF_INET6 */
    uint8_t addr[16]; /* 4 bytes used for AF_INET */
    uint16_t port;    /* network byte order */
};

struct selfaddr {
    struct selfaddr_entry *e;
    size_t n;
    const struct selfaddr_entry *host; /* the interface list's addresses (port 0), in e's
                                          allocation */
    size_t nhost;
};

/*
 * Build s from the bound listener addresses listen[0..n) (ports as bound, network byte
 * order) and the host's interface list ifa (as getifaddrs returns it; NULL = none). No
 * I/O. Returns 0 or -ENOMEM (s left empty).
 */
int selfaddr_build(struct selfaddr *s, const struct sockaddr_storage *listen, size_t n,
                   const struct ifaddrs *ifa);
/* selfaddr_build with the host's real interface list (getifaddrs). 0 or -errno. */
int selfaddr_init(struct selfaddr *s, const struct sockaddr_storage *listen, size_t n);
void selfaddr_cleanup(struct selfaddr *s);

/* Is a connect to sa (AF_INET or AF_INET6, v4-mapped allowed) one to this proxy? */
bool selfaddr_has(const struct selfaddr *s, const struct sockaddr *sa);

/* Is sa (any port) an address of this host: loopback (127.0.0.0/8, ::1), the unspecified
   address, or one the interface list had when s was built? */
bool selfaddr_local(const struct selfaddr *s, const struct sockaddr *sa);

/* Rewrite an IPv4-mapped IPv6 address in place as the AF_INET address it maps (the port
   kept); *len follows. Other addresses are left as they are. */
void selfaddr_normalize(struct sockaddr_storage *ss, socklen_t *len);

#endif
