/*
 * slowloris: trickling HTTP clients. See slowloris.h.
 */
#include "slowloris.h"

#include "proxy_util.h"
#include "tgtest.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

/* The request: a POST whose headers never end (SLOW_MAX rounds at most). */
static char endless_byte(size_t i)
{
    static const char head[] = "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    static const char line[] = "X-Slow: a\r\n";
    if (i < sizeof head - 1)
        return head[i];
    return line[(i - (sizeof head - 1)) % (sizeof line - 1)];
}

void slow_open(struct slow *s, const char *src_ip, uint16_t port, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        if (s->n >= SLOW_MAX)
            fail_msg("slowloris: more than %d connections", SLOW_MAX);
        int fd = psock_connect_from(src_ip, port, 5000);
        if (fd < 0)
            fail_msg("slowloris: connect from %s: %s", src_ip, strerror(-fd));
        char c = endless_byte(0);
        (void)send(fd, &c, 1, MSG_NOSIGNAL); /* a limit may already have closed it */
        s->fd[s->n] = fd;
        s->closed[s->n] = false;
        s->sent[s->n] = 1;
        s->n++;
    }
}

/* Whether the peer has closed fd: end of stream or an error (a reset). */
static bool peer_closed(int fd)
{
    char c;
    ssize_t r = recv(fd, &c, 1, MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

bool slow_refused(const char *src_ip, uint16_t port)
{
    int fd = psock_connect_from(src_ip, port, 5000);
    if (fd < 0)
        return true; /* refused outright */
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    bool closed = poll(&p, 1, 5000) > 0 && peer_closed(fd);
    close(fd);
    return closed;
}

size_t slow_round(struct slow *s, int pace_ms)
{
    struct pollfd p[SLOW_MAX];
    size_t map[SLOW_MAX], m = 0, closed = 0;
    for (size_t i = 0; i < s->n; i++)
        if (!s->closed[i]) {
            p[m] = (struct pollfd){.fd = s->fd[i], .events = POLLIN | POLLRDHUP};
            map[m++] = i;
        }
    if (m > 0 && poll(p, m, pace_ms) > 0)
        for (size_t k = 0; k < m; k++)
            if (p[k].revents && peer_closed(p[k].fd))
                s->closed[map[k]] = true;
    for (size_t i = 0; i < s->n; i++) {
        if (s->closed[i]) {
            closed++;
            continue;
        }
        char c = endless_byte(s->sent[i]++);
        if (send(s->fd[i], &c, 1, MSG_NOSIGNAL) < 0) {
            s->closed[i] = true;
            closed++;
        }
    }
    return closed;
}

void slow_until_cut(struct slow *s, int pace_ms, int rounds)
{
    size_t closed = 0;
    for (int i = 0; i < rounds && closed < s->n; i++)
        closed = slow_round(s, pace_ms);
    if (closed < s->n)
        fail_msg("slowloris: %zu of %zu trickling connections still open after %d rounds",
                 s->n - closed, s->n, rounds);
}

void slow_close(struct slow *s)
{
    for (size_t i = 0; i < s->n; i++)
        close(s->fd[i]);
    s->n = 0;
}
