/* tlsanswer: see tlsanswer.h. */
#include "proxy/engine/tlsanswer.h"

#include "proxy/services/tlsfront.h"

#include <errno.h>
#include <sys/socket.h>

/* The profile for key's domain, after moving to the newest published set. */
static const struct tlsprofile *profile_for(struct tlsanswer_worker *tw, struct tlsfront *live,
                                            const struct faketls_key *k)
{
    if (!live)
        return NULL;
    if (!tw->set || tlsfront_seq(live) != tw->seq) {
        tlsfront_set_unref(tw->set);
        tw->set = tlsfront_acquire(live);
        tw->seq = tw->set->seq;
    }
    return tlsfront_set_find(tw->set, k->domain, k->domain_len);
}

static int send_all(int fd, const uint8_t *p, size_t n)
{
    ssize_t wr = send(fd, p, n, MSG_NOSIGNAL);
    return wr == (ssize_t)n ? 0 : wr < 0 ? -errno : -EIO;
}

int tlsanswer_send(struct tlsanswer_worker *tw, struct tlsfront *live, const struct faketls_key *k,
                   const struct faketls_hello *h, int fd, uint8_t *scratch)
{
    const struct tlsprofile *p = profile_for(tw, live, k);
    if (!p) {
        struct faketls_answer a = {.cipher = h->cipher};
        int n = faketls_server_hello(h, k->key, &a, scratch, FAKETLS_SERVER_HELLO_MAX);
        if (n < 0)
            return n;
        tw->fixed++;
        return send_all(fd, scratch, (size_t)n);
    }
    size_t cuts[TLSPROFILE_MAX_CUTS], ncuts = 0;
    int n = tlsprofile_answer(p, h, k->key, scratch, TLSANSWER_SCRATCH, cuts, &ncuts);
    if (n < 0)
        return n;
    tw->learned++;
    /* the site's segments: a fresh socket's buffer takes the whole answer, and with
       TCP_NODELAY each send leaves as its own segment(s) */
    size_t at = 0;
    for (size_t i = 0; i <= ncuts; i++) {
        size_t end = i < ncuts ? cuts[i] : (size_t)n;
        int rc = send_all(fd, scratch + at, end - at);
        if (rc < 0)
            return rc;
        at = end;
    }
    return 0;
}

void tlsanswer_worker_cleanup(struct tlsanswer_worker *tw)
{
    tlsfront_set_unref(tw->set);
    tw->set = NULL;
}
