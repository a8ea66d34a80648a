/*
 * proxy_tcpinfo: the data segments a TCP socket has received (Linux's tcpi_data_segs_in),
 * the count a passive observer on the path sees of a flight. Its own file: <linux/tcp.h>
 * (which has that field) cannot be included beside <netinet/tcp.h>.
 */
#include "proxy_tcpinfo.h"

#include <netinet/in.h>
#include <stddef.h>
#include <linux/tcp.h>
#include <sys/socket.h>

long ptcp_data_segs_in(int fd)
{
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
        len < offsetof(struct tcp_info, tcpi_data_segs_in) + sizeof ti.tcpi_data_segs_in)
        return -1;
    return (long)ti.tcpi_data_segs_in;
}
