/* tls_front: see tls_front.h. */
#include "tls_front.h"

#include "proxy_proc.h"
#include "proxy_util.h"
#include "tgtest.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static int sh(const char *cmd)
{
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

void tfront_pki_make(struct tfront_pki *p, const char *domain, int bits)
{
    snprintf(p->dir, sizeof p->dir, "/tmp/tgkit-front-XXXXXX");
    assert_non_null(mkdtemp(p->dir));
    char cmd[3072];
    snprintf(
        cmd, sizeof cmd,
        "cd %s && exec >log 2>&1 && "
        "openssl req -x509 -newkey rsa:%d -nodes -keyout root.key -out root.pem -days 2 "
        "-subj '/CN=Test Root CA' -addext basicConstraints=critical,CA:TRUE && "
        "openssl req -newkey rsa:%d -nodes -keyout int.key -out int.csr "
        "-subj '/CN=Test Intermediate CA' && "
        "printf 'basicConstraints=critical,CA:TRUE\\nkeyUsage=keyCertSign,cRLSign\\n' >int.ext && "
        "openssl x509 -req -in int.csr -CA root.pem -CAkey root.key -CAcreateserial "
        "-out int.pem -days 2 -extfile int.ext && "
        "openssl req -newkey rsa:%d -nodes -keyout leaf.key -out leaf.csr "
        "-subj '/CN=%s' && "
        "printf 'subjectAltName=DNS:%s,DNS:www.%s\\n' >leaf.ext && "
        "openssl x509 -req -in leaf.csr -CA int.pem -CAkey int.key -CAcreateserial "
        "-out leaf.pem -days 2 -extfile leaf.ext && "
        "cat int.pem root.pem >chain.pem && cat leaf.pem int.pem root.pem >full.pem",
        p->dir, bits, bits, bits, domain, domain, domain);
    assert_int_equal(sh(cmd), 0);
    snprintf(p->leaf, sizeof p->leaf, "%s/leaf.pem", p->dir);
    snprintf(p->key, sizeof p->key, "%s/leaf.key", p->dir);
    snprintf(p->chain, sizeof p->chain, "%s/chain.pem", p->dir);
    snprintf(p->full, sizeof p->full, "%s/full.pem", p->dir);
}

void tfront_pki_free(struct tfront_pki *p)
{
    if (!p->dir[0])
        return;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", p->dir);
    (void)sh(cmd);
    p->dir[0] = '\0';
}

static bool port_open(void *arg)
{
    struct tfront *s = arg;
    int fd = psock_connect(s->port, 200);
    if (fd < 0)
        return false;
    close(fd);
    return true;
}

void tfront_start(struct tfront *s, const struct tfront_pki *p, bool gnutls)
{
    tfront_start_on(s, p, gnutls, 0);
}

void tfront_start_on(struct tfront *s, const struct tfront_pki *p, bool gnutls, uint16_t on)
{
    int port = on ? on : tgtest_listen_port();
    assert_true(port > 0);
    s->port = (uint16_t)port;
    snprintf(s->log, sizeof s->log, "%s/%s-%d.log", p->dir, gnutls ? "gnutls" : "openssl", port);
    char portstr[16], accept[32];
    snprintf(portstr, sizeof portstr, "%d", port);
    snprintf(accept, sizeof accept, "127.0.0.1:%d", port);
    if (gnutls) {
        char *argv[] = {"/usr/bin/gnutls-serv",
                        "--port",
                        portstr,
                        "--x509certfile",
                        (char *)p->full,
                        "--x509keyfile",
                        (char *)p->key,
                        "--priority",
                        "NORMAL:-VERS-ALL:+VERS-TLS1.3",
                        "--quiet",
                        NULL};
        assert_int_equal(access(argv[0], X_OK), 0); /* Debian's gnutls-bin (make deps) */
        s->pid = pproc_spawn_logged(argv, s->log);
    } else {
        char *argv[] = {"/usr/bin/openssl",
                        "s_server",
                        "-accept",
                        accept,
                        "-cert",
                        (char *)p->leaf,
                        "-key",
                        (char *)p->key,
                        "-cert_chain",
                        (char *)p->chain,
                        "-tls1_3",
                        "-quiet",
                        NULL};
        s->pid = pproc_spawn_logged(argv, s->log);
    }
    assert_true(s->pid > 0);
    assert_true(tgtest_wait_until(port_open, s, 20000));
}

void tfront_stop(struct tfront *s)
{
    if (s->pid <= 0)
        return;
    kill(s->pid, SIGTERM);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
}
