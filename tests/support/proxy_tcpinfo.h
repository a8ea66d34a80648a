/* proxy_tcpinfo: TCP_INFO's data-segment count of a socket (see proxy_tcpinfo.c). */
#ifndef TGKIT_TEST_PROXY_TCPINFO_H
#define TGKIT_TEST_PROXY_TCPINFO_H

/* Segments carrying data received on fd so far, or -1. */
long ptcp_data_segs_in(int fd);

#endif
