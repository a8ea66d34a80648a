/*
 * sdnotify: one datagram per message to $NOTIFY_SOCKET. See sdnotify.h.
 */
#include "proxy/daemon/sdnotify.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int sdnotify_send(const char *text)
{
    const char *name = getenv("NOTIFY_SOCKET");
    if (!name || !name[0])
        return 0;
    struct sockaddr_un sun;
    memset(&sun, 0, sizeof sun);
    sun.sun_family = AF_UNIX;
    size_t n = strlen(name);
    if ((name[0] != '/' && name[0] != '@') || n >= sizeof sun.sun_path)
        return -EINVAL;
    memcpy(sun.sun_path, name, n);
    if (name[0] == '@')
        sun.sun_path[0] = '\0'; /* the abstract namespace */
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (name[0] == '/'));
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    ssize_t sent = sendto(fd, text, strlen(text), MSG_NOSIGNAL, (struct sockaddr *)&sun, len);
    int rc = sent < 0 ? -errno : 0;
    close(fd);
    return rc;
}

int sdnotify_reloading(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    char msg[64];
    snprintf(msg, sizeof msg, "RELOADING=1\nMONOTONIC_USEC=%llu",
             (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000);
    return sdnotify_send(msg);
}
