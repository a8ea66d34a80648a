/* proxy_proc: forked proxy / plain relay children and /proc figures. See proxy_proc.h. */
#include "proxy_proc.h"
#include "wait.h"

#include "proxy/daemon/server.h"
#include "proxy_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Provided by core/allochook.c when the executable links it (benchmarks); absent in tests. */
extern uint64_t tg__allochook_allocs(void) __attribute__((weak));
extern char **environ;

static int read_full(int fd, void *p, size_t n)
{
    uint8_t *b = p;
    while (n) {
        ssize_t r = read(fd, b, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -EPIPE;
        b += r;
        n -= (size_t)r;
    }
    return 0;
}

static int write_full(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -EPIPE;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

static void proxy_child(const struct config *cfg, int cmd, int resp)
{
    struct server *s = NULL;
    uint16_t port = 0;
    if (server_start(cfg, &s) == 0)
        port = server_port(s, 0);
    write_full(resp, &port, sizeof port);
    char c;
    while (s && read_full(cmd, &c, 1) == 0 && c != 'Q') {
        struct pproc_report r = {0};
        r.allocs = tg__allochook_allocs ? tg__allochook_allocs() : 0;
        server_stats(s, &r.st);
        write_full(resp, &r, sizeof r);
    }
    server_stop(s);
    _exit(0);
}

int pproc_proxy_start(struct pproc *p, const struct config *cfg)
{
    int a[2], b[2];
    *p = (struct pproc){.pid = -1, .cmd = -1, .resp = -1};
    /* close-on-exec: a program started later (redis-server) must not keep the child's
       command pipe open, or the child never sees it close */
    if (pipe2(a, O_CLOEXEC) < 0)
        return -errno;
    if (pipe2(b, O_CLOEXEC) < 0) {
        close(a[0]), close(a[1]);
        return -errno;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(a[1]), close(b[0]);
        proxy_child(cfg, a[0], b[1]);
    }
    close(a[0]), close(b[1]);
    p->pid = pid;
    p->cmd = a[1];
    p->resp = b[0];
    if (pid < 0 || read_full(p->resp, &p->port, sizeof p->port) < 0 || !p->port) {
        pproc_stop(p);
        return -EIO;
    }
    return 0;
}

pid_t pproc_spawn_logged(char *const argv[], const char *log)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        /* dies with its parent: a test that fails half-way never leaves a daemon behind */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(126);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd < 0)
            _exit(126);
        dup2(fd, 1);
        dup2(fd, 2);
        /* nothing else of the parent's: its sockets, pipes and files (a soak driver's
           connections, a test's listeners) are not the program's, and held open here they
           would keep the parent's peers waiting and count as the program's descriptors */
        if (close_range(3, ~0u, 0) != 0)
            for (int k = 3; k < 65536; k++)
                close(k);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

int pproc_log_count(const char *log, const char *needle)
{
    FILE *f = fopen(log, "rb");
    if (!f)
        return 0;
    static const size_t cap = 1 << 20;
    char *buf = malloc(cap + 1);
    size_t n = buf ? fread(buf, 1, cap, f) : 0;
    fclose(f);
    int k = 0;
    if (buf) {
        buf[n] = '\0';
        for (const char *p = buf; (p = strstr(p, needle)) != NULL; p++)
            k++;
    }
    free(buf);
    return k;
}

int pproc_log_port(const char *log, const char *needle, uint16_t *port)
{
    FILE *f = fopen(log, "rb");
    char line[512];
    const char *at = NULL;
    while (f && !at && fgets(line, sizeof line, f))
        at = strstr(line, needle);
    if (f)
        fclose(f);
    if (!at)
        return -1;
    const char *p = strstr(at, "(port "); /* "listening on ADDR (port N)" */
    p = p ? p + 6 : strrchr(at, ':');     /* else a URL's "...:N/" */
    unsigned long n = p ? strtoul(p + (*p == ':'), NULL, 10) : 0;
    *port = (uint16_t)n;
    return n > 0 && n < 65536 ? 0 : -1;
}

struct log_want {
    const char *log, *needle;
    int n;
};

static bool log_has(void *arg)
{
    const struct log_want *w = arg;
    return pproc_log_count(w->log, w->needle) >= w->n;
}

int pproc_log_wait(const char *log, const char *needle, int n)
{
    struct log_want w = {log, needle, n};
    return tgtest_wait_until(log_has, &w, 20000) ? 0 : -1;
}

/* ---- plain relay: two sockets, one buffer per direction, backpressure ---- */

/* 64 KiB, as tgproxy's bulk buffers: the floor moves as much per syscall as the proxy can */
#define PR_BUF 65536

struct prside;
struct prpair {
    int fd[2];       /* 0 = client, 1 = upstream */
    uint8_t *buf[2]; /* buf[d]: bytes read from fd[d] waiting for fd[!d] */
    size_t off[2], len[2];
    bool eof[2];
    uint32_t mask[2];
    int tag[2]; /* epoll data: pointer to tag[i] identifies side i */
};

static void pr_close(int ep, struct prpair *p)
{
    for (int i = 0; i < 2; i++) {
        epoll_ctl(ep, EPOLL_CTL_DEL, p->fd[i], NULL);
        close(p->fd[i]);
        free(p->buf[i]);
    }
    free(p);
}

/* Move bytes from side d to side !d. -1 to close. */
static int pr_pump(struct prpair *p, int d)
{
    for (int round = 0; round < 4; round++) {
        while (p->off[d] < p->len[d]) {
            ssize_t w = send(p->fd[!d], p->buf[d] + p->off[d], p->len[d] - p->off[d], MSG_NOSIGNAL);
            if (w < 0)
                return errno == EAGAIN ? 0 : -1;
            p->off[d] += (size_t)w;
        }
        free(p->buf[d]);
        p->buf[d] = NULL;
        p->off[d] = p->len[d] = 0;
        if (p->eof[d])
            return 0;
        p->buf[d] = malloc(PR_BUF);
        ssize_t r = p->buf[d] ? recv(p->fd[d], p->buf[d], PR_BUF, 0) : -1;
        if (r == 0) {
            p->eof[d] = true;
            shutdown(p->fd[!d], SHUT_WR);
        }
        if (r <= 0) {
            free(p->buf[d]);
            p->buf[d] = NULL;
            return r < 0 && errno != EAGAIN ? -1 : 0;
        }
        p->len[d] = (size_t)r;
    }
    return 0;
}

static void pr_settle(int ep, struct prpair *p)
{
    if (p->eof[0] && p->eof[1] && !p->buf[0] && !p->buf[1]) {
        pr_close(ep, p);
        return;
    }
    for (int i = 0; i < 2; i++) {
        uint32_t m = (!p->eof[i] && !p->buf[i] ? EPOLLIN : 0) | (p->buf[!i] ? EPOLLOUT : 0);
        if (m != p->mask[i]) {
            struct epoll_event ev = {.events = m, .data.ptr = &p->tag[i]};
            epoll_ctl(ep, EPOLL_CTL_MOD, p->fd[i], &ev);
            p->mask[i] = m;
        }
    }
}

static void pr_accept(int ep, int lfd, uint16_t dst)
{
    int cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (cfd < 0)
        return;
    int ufd = psock_connect(dst, 10000); /* blocking connect to localhost: immediate */
    struct prpair *p = calloc(1, sizeof *p);
    if (ufd < 0 || !p) {
        close(cfd);
        if (ufd >= 0)
            close(ufd);
        free(p);
        return;
    }
    psock_set_nonblock(ufd, true);
    p->fd[0] = cfd, p->fd[1] = ufd;
    p->tag[0] = 0, p->tag[1] = 1;
    for (int i = 0; i < 2; i++) {
        p->mask[i] = EPOLLIN;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &p->tag[i]};
        epoll_ctl(ep, EPOLL_CTL_ADD, p->fd[i], &ev);
    }
}

static void relay_child(int lfd, uint16_t dst)
{
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL}, evs[256];
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        for (int i = 0; i < n; i++) {
            if (!evs[i].data.ptr) {
                pr_accept(ep, lfd, dst);
                continue;
            }
            int *tag = evs[i].data.ptr;
            struct prpair *p =
                (struct prpair *)(void *)((char *)(tag - *tag) - offsetof(struct prpair, tag));
            if (pr_pump(p, *tag) < 0 || pr_pump(p, !*tag) < 0) {
                pr_close(ep, p);
                continue;
            }
            pr_settle(ep, p);
        }
    }
}

int pproc_relay_start(struct pproc *p, uint16_t dst_port)
{
    *p = (struct pproc){.pid = -1, .cmd = -1, .resp = -1};
    int lfd = psock_listen(&p->port, 4096);
    if (lfd < 0)
        return lfd;
    psock_set_nonblock(lfd, true);
    pid_t pid = fork();
    if (pid == 0) {
        relay_child(lfd, dst_port);
        _exit(0);
    }
    close(lfd);
    p->pid = pid;
    return pid < 0 ? -errno : 0;
}

static void proc_figures(pid_t pid, struct pproc_report *out)
{
    char path[64], line[256];
    /* the child's CPU clock (every thread, nanoseconds); /proc's clock ticks (10 ms) only
       when the clock cannot be read */
    clockid_t cid;
    struct timespec ts;
    bool have_cpu = clock_getcpuclockid(pid, &cid) == 0 && clock_gettime(cid, &ts) == 0;
    if (have_cpu)
        out->cpu_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = have_cpu ? NULL : fopen(path, "r");
    if (f) {
        unsigned long ut = 0, st = 0;
        /* fields 14 and 15 (utime, stime) follow ") state" and 11 numbers */
        if (fgets(line, sizeof line, f)) {
            char *q = strrchr(line, ')');
            if (q &&
                sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) == 2)
                out->cpu_ns =
                    (uint64_t)(ut + st) * (1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK));
        }
        fclose(f);
    }
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if ((f = fopen(path, "r"))) {
        while (fgets(line, sizeof line, f)) {
            sscanf(line, "VmRSS: %ld", &out->rss_kb);
            sscanf(line, "VmHWM: %ld", &out->hwm_kb);
        }
        fclose(f);
    }
}

long pproc_status_field(pid_t pid, const char *name)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long v = -1;
    size_t nl = strlen(name);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, name, nl) == 0 && line[nl] == ':') {
            v = strtol(line + nl + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

long pproc_fd_count(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    long n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* A free loopback port: bound, read, released (the child binds it right after). */
static uint16_t free_port(void)
{
    uint16_t port = 0;
    int fd = psock_listen(&port, 1);
    if (fd < 0)
        return 0;
    close(fd);
    return port;
}

static uint16_t free_port6(void)
{
    uint16_t port = 0;
    int fd = psock_listen6(&port, 1);
    if (fd < 0)
        return 0;
    close(fd);
    return port;
}

/* Wait up to 2 s for the child to listen on p->port (of ::1 with v6); false if it exited
   meanwhile. */
struct listen_want {
    const struct pproc *p;
    bool v6, exited;
};

static bool listening_or_gone(void *arg)
{
    struct listen_want *w = arg;
    int fd = w->v6 ? psock_connect6(w->p->port, 1000) : psock_connect(w->p->port, 1000);
    if (fd >= 0) {
        close(fd);
        return true;
    }
    w->exited = waitpid(w->p->pid, NULL, WNOHANG) == w->p->pid;
    return w->exited;
}

static bool wait_listening(const struct pproc *p, bool v6)
{
    struct listen_want w = {p, v6, false};
    return tgtest_wait_until(listening_or_gone, &w, 2000) && !w.exited;
}

int pproc_microsocks_start(struct pproc *p, const char *user, const char *pass)
{
    return pproc_microsocks_start_on(p, "127.0.0.1", user, pass);
}

int pproc_microsocks_start_on(struct pproc *p, const char *ip, const char *user, const char *pass)
{
    bool v6 = strchr(ip, ':') != NULL;
    static const char path[] = "/usr/bin/microsocks";
    *p = (struct pproc){.pid = -1, .cmd = -1, .resp = -1};
    if (access(path, X_OK) != 0)
        return -ENOENT;
    for (int attempt = 0; attempt < 5; attempt++) {
        char port[8];
        p->port = v6 ? free_port6() : free_port();
        snprintf(port, sizeof port, "%u", (unsigned)p->port);
        char *argv[11] = {"microsocks", "-i", (char *)ip, "-p", port, NULL};
        if (user && pass) {
            argv[5] = "-u", argv[6] = (char *)user, argv[7] = "-P", argv[8] = (char *)pass;
            argv[9] = NULL;
        }
        int rc = posix_spawn(&p->pid, path, NULL, NULL, argv, environ);
        if (rc != 0) {
            p->pid = -1;
            return -rc;
        }
        if (wait_listening(p, v6))
            return 0;
        pproc_stop(p); /* the port was taken meanwhile: another one */
    }
    return -EADDRINUSE;
}

int pproc_report(struct pproc *p, struct pproc_report *out)
{
    memset(out, 0, sizeof *out);
    if (p->cmd >= 0) {
        char c = 'R';
        if (write_full(p->cmd, &c, 1) < 0 || read_full(p->resp, out, sizeof *out) < 0)
            return -EPIPE;
    }
    proc_figures(p->pid, out);
    return 0;
}

void pproc_stop(struct pproc *p)
{
    if (p->pid == 0 && p->cmd == 0)
        return; /* a zeroed struct: nothing was started */
    if (p->pid > 0) {
        if (p->cmd >= 0) {
            char c = 'Q';
            write_full(p->cmd, &c, 1);
        } else {
            kill(p->pid, SIGTERM);
        }
        waitpid(p->pid, NULL, 0);
    }
    if (p->cmd >= 0)
        close(p->cmd);
    if (p->resp >= 0)
        close(p->resp);
    *p = (struct pproc){.pid = -1, .cmd = -1, .resp = -1};
}
