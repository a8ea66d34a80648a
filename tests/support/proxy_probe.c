/* proxy_probe: one prober connection and what it saw. See proxy_probe.h. */
#include "proxy_probe.h"

#include "proxy/services/probeconn.h"
#include "proxy_util.h"

#include <errno.h>
#include <string.h>

int pprobe_run(const char *addr, uint16_t port, const struct pprobe *p, struct pprobe_result *r)
{
    memset(r, 0, sizeof *r);
    r->first_ms = -1;
    struct sockaddr_storage ss;
    socklen_t len;
    if (psock_addr_parse(addr, port, &ss, &len) < 0)
        return -EINVAL;
    struct probeconn_req q = {.bytes = p->bytes,
                              .n = p->n,
                              .shut_wr = p->shut_wr,
                              .after_eof = p->after_eof,
                              .after_eof_n = p->after_eof_n,
                              .wait_ms = p->wait_ms};
    struct probeconn_res res = {.buf = r->bytes, .cap = sizeof r->bytes};
    int rc = probeconn_run((const struct sockaddr *)&ss, len, &q, &res);
    if (rc < 0)
        return rc;
    /* times since connect, as these tests count them */
    r->n = res.obs.total;
    r->end = res.obs.end == PROBEKIND_FIN   ? PPROBE_FIN
             : res.obs.end == PROBEKIND_RST ? PPROBE_RST
                                            : PPROBE_OPEN;
    r->end_ms = res.obs.end_ms + res.connect_ms;
    r->first_ms = res.obs.first_ms >= 0 ? res.obs.first_ms + res.connect_ms : -1;
    r->reset_after_eof = res.obs.reset_after_eof;
    return 0;
}

const char *pprobe_end_name(enum pprobe_end e)
{
    return e == PPROBE_FIN ? "FIN" : e == PPROBE_RST ? "RST" : "open";
}
