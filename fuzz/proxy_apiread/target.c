/*
 * fuzz target: the control API's readers of outside input (src/proxy/daemon/apiread.c),
 * minus libmicrohttpd. The first byte picks the reader, the rest is its input:
 *   0  a request path for /v1/secrets/{label}[/{action}] (up to the first NUL);
 *   1  a request body whose "limits" member (or the body itself) goes to apiread_limits;
 *   2  a fleet peer's published stats object, added twice as two instances would be.
 * Any input must give a value that holds the reader's promise or a refusal with a message;
 * never a crash, a leak, a hang or a read past the input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/config/config.h"
#include "proxy/daemon/apiread.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void path(const char *s, size_t n)
{
    char *url = malloc(n + 1); /* exactly the path and its NUL, so ASan sees an overrun */
    if (!url)
        return;
    memcpy(url, s, n);
    url[n] = '\0';
    char label[CONFIG_LABEL_MAX + 1];
    const char *act = NULL;
    if (apiread_secret_path(url, label, sizeof label, &act)) {
        size_t ln = strlen(label), pre = strlen("/v1/secrets/");
        if (ln == 0 || ln >= sizeof label || strchr(label, '/') || strchr(act, '/'))
            abort();
        if (strncmp(url, "/v1/secrets/", pre) != 0 || memcmp(url + pre, label, ln) != 0)
            abort();
        const char *rest = url + pre + ln; /* "" or "/ACTION" */
        if (*rest ? (rest[0] != '/' || act != rest + 1) : *act != '\0')
            abort();
    }
    free(url);
}

static void limits(const char *s, size_t n)
{
    struct json_doc doc;
    char why[160];
    if (json_parse(&doc, s, n, why, sizeof why) != 0)
        return;
    const struct json_val *o = doc.root->type == JSON_OBJECT ? json_get(doc.root, "limits") : NULL;
    if (!o)
        o = doc.root;
    struct config_limits l, before;
    memset(&l, 0xa5, sizeof l);
    before = l;
    why[0] = '\0';
    if (apiread_limits(o, &l, why, sizeof why) != 0) {
        if (strncmp(why, "limits", 6) != 0 || memcmp(&l, &before, sizeof l) != 0)
            abort(); /* a refusal says why and changes nothing */
    } else {
        /* what was given is what was set; what was not given is left as it was */
        const struct json_val *m = json_get(o, "max-connections");
        if (m ? l.max_connections != (uint32_t)m->i : l.max_connections != before.max_connections)
            abort();
        m = json_get(o, "quota");
        if (m ? l.quota != (uint64_t)m->i : l.quota != before.quota)
            abort();
        m = json_get(o, "expires");
        if (m ? l.expires != m->i : l.expires != before.expires)
            abort();
    }
    json_doc_free(&doc);
}

static void peer(const char *s, size_t n, int quota)
{
    char *text = malloc(n ? n : 1);
    if (!text)
        return;
    memcpy(text, s, n);
    struct apiread_stats st;
    memset(&st, 0, sizeof st);
    st.quota = quota;
    st.instances = 1;
    apiread_peer_stats(&st, text, n);
    unsigned once = st.instances;
    apiread_peer_stats(&st, text, n);
    if (st.instances != 2 * once - 1 || st.niph > st.capiph || (st.niph && !st.iph))
        abort();
    if (!quota && (st.quota_used || st.quota_end))
        abort(); /* quota numbers count only for a secret with a quota */
    if (st.niph)
        qsort(st.iph, st.niph, sizeof *st.iph, apiread_u64_cmp);
    for (size_t i = 1; i < st.niph; i++)
        if (st.iph[i - 1] > st.iph[i])
            abort();
    apiread_stats_done(&st);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const char *s = (const char *)data + 1;
    size_t n = size - 1;
    switch (data[0] % 4) {
    case 0:
        path(s, strnlen(s, n));
        break;
    case 1:
        limits(s, n);
        break;
    default:
        peer(s, n, data[0] & 4);
        break;
    }
    return 0;
}
