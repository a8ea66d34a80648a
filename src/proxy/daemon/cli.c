/*
 * cli: the tgproxy command line (see cli.h for exit codes).
 *
 * Each command parses its own arguments with one small table-driven option parser
 * (options may come before or after positional arguments, "--opt VALUE" or "--opt=VALUE",
 * "--" ends options), then builds or loads a struct config and hands it to the engine
 * (server_run) or prints what the operator asked for. Nothing here touches the network
 * except through server_run.
 */
#include "proxy/daemon/cli.h"
#include "proxy/daemon/apistore.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/buf.h"
#include "core/log.h"
#include "core/str.h"
#include "proxy/config/config.h"
#include "proxy/daemon/doctor.h"
#include "proxy/daemon/links.h"
#include "proxy/daemon/probe.h"
#include "proxy/wire/secret.h"
#include "proxy/daemon/server.h"

#define MAX_POS         4
#define MAX_OPTS        16
#define SECRET_ENV      "TGPROXY_SECRET"
#define SECRET_FILE_MAX 1024 /* bytes read from --secret-file */

struct opt_spec {
    const char *name; /* without the leading "--" */
    bool has_value;
};

struct args {
    const char *cmd;
    const char *pos[MAX_POS];
    size_t npos;
    struct {
        const char *name;
        const char *value; /* NULL for flags */
    } opts[MAX_OPTS];
    size_t nopts;
};

struct io {
    FILE *out;
    FILE *err;
};

static const char usage_text[] =
    "usage: tgproxy COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  run CONFIG.toml              serve with a configuration file\n"
    "  simple-run HOST:PORT [SECRET]\n"
    "                               serve without a file\n"
    "      [--secret-file FILE] [--workers N] [--concurrency N] [--fronting-host H]\n"
    "      [--fronting-port P] [--public-host H] [--public-port P] [--prefer-ip MODE]\n"
    "      [--tolerate-time-skewness DURATION] [--log-level LEVEL] [--no-fast-mode]\n"
    "      SECRET on the command line is visible to every local user (/proc/PID/cmdline):\n"
    "      prefer --secret-file FILE (its first line; - reads standard input) or " SECRET_ENV "\n"
    "  generate-secret [--hex|--base64] DOMAIN\n"
    "                               print a new FakeTLS (ee) secret for DOMAIN\n"
    "  access CONFIG.toml [--host H] [--port P] [--base64] [--no-qr]\n"
    "                               print tg:// and t.me links and QR codes\n"
    "  access CONFIG.toml --json [--ipv4 IP] [--ipv6 IP] [--host H] [--port P] [--base64]\n"
    "      [--no-qr]                the same as JSON, in mtg's `access` format, for scripts\n"
    "  doctor CONFIG.toml [--strict]\n"
    "                               check the file, the clock, the DCs, the fronting host and\n"
    "                               its certificate, the open-files limit and the addresses\n"
    "                               to bind: one line per check; exit 0 if none fails\n"
    "                               (ignored or deprecated mtg keys are warnings; with\n"
    "                               --strict they exit 2), 1 if any fails\n"
    "  probe HOST:PORT [--front HOST:PORT] [--sni DOMAIN] [--secret-file FILE|-] [--wait D]\n"
    "      [--handshakes N] [--json] [--strict] [--config CONFIG.toml]\n"
    "                               probe a running proxy from outside as a censor would, and\n"
    "                               its front directly; compare the answers: exit 0 if\n"
    "                               indistinguishable, 1 if something gives it away. The\n"
    "                               secret (for real FakeTLS handshakes) comes from the file,\n"
    "                               standard input or " SECRET_ENV ", never the command line;\n"
    "                               --config: send PROXY v2 headers as its proxy-protocol\n"
    "                               keys say (to the front, to a proxy-protocol-listener)\n"
    "  --help, --version\n"
    "\n"
    "Exit codes (every command): 0 ok, 1 a doctor check failed or probe found a difference,\n"
    "2 doctor --strict found warnings, 64 usage, 65 bad argument, 69 cannot bind (a listen or\n"
    "metrics address) or probe cannot reach a peer, 70 internal error, 71 OS resources,\n"
    "74 output error, 78 configuration error.\n"
    "See docs/tgproxy.md.\n";

__attribute__((format(printf, 2, 3))) static int usage_error(const struct io *io, const char *fmt,
                                                             ...)
{
    va_list ap;
    fputs("tgproxy: ", io->err);
    va_start(ap, fmt);
    vfprintf(io->err, fmt, ap);
    va_end(ap);
    fputs("\ntry 'tgproxy --help'\n", io->err);
    return EX_USAGE;
}

int cli_fail(FILE *err, int code, const char *fmt, ...)
{
    va_list ap;
    fputs("tgproxy: ", err);
    va_start(ap, fmt);
    vfprintf(err, fmt, ap);
    va_end(ap);
    fputc('\n', err);
    return code;
}

/* ---- argument parsing ---- */

static const struct opt_spec *find_spec(const struct opt_spec *specs, size_t n, const char *name,
                                        size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(specs[i].name) == len && memcmp(specs[i].name, name, len) == 0)
            return &specs[i];
    return NULL;
}

static int add_opt(const struct io *io, struct args *a, const struct opt_spec *spec,
                   const char *value)
{
    if (a->nopts == MAX_OPTS)
        return usage_error(io, "%s: too many options", a->cmd);
    a->opts[a->nopts].name = spec->name;
    a->opts[a->nopts].value = value;
    a->nopts++;
    return 0;
}

/* Could arg be a proxy secret? Such text is never repeated in a message. */
static bool looks_secret(const char *arg)
{
    struct secret s;
    bool yes = secret_parse(arg, strlen(arg), &s, NULL, 0) == 0;
    memset(&s, 0, sizeof s);
    return yes;
}

/* A stray argument is quoted in the message unless it parses as a secret. */
static int extra_argument(const struct io *io, const char *cmd, const char *arg)
{
    if (looks_secret(arg))
        return usage_error(io, "%s: unexpected extra argument (a secret, not shown)", cmd);
    return usage_error(io, "%s: unexpected argument '%.64s'", cmd, arg);
}

/* argv[0] is the command name. Returns 0 or EX_USAGE (message printed). */
static int parse_args(const struct io *io, int argc, char **argv, const struct opt_spec *specs,
                      size_t nspecs, size_t max_pos, struct args *a)
{
    bool only_pos = false;
    memset(a, 0, sizeof *a);
    a->cmd = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (only_pos || arg[0] != '-' || arg[1] == '\0') {
            if (a->npos == max_pos || a->npos == MAX_POS)
                return extra_argument(io, a->cmd, arg);
            a->pos[a->npos++] = arg;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            only_pos = true;
            continue;
        }
        const char *name = arg + (arg[1] == '-' ? 2 : 1);
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const struct opt_spec *spec = arg[1] == '-' ? find_spec(specs, nspecs, name, len) : NULL;
        if (!spec) /* the name only: what follows '=' may be a secret */
            return usage_error(io, "%s: unknown option '%.*s'", a->cmd,
                               (int)(name - arg + (len > 64 ? 64 : len)), arg);
        const char *value = NULL;
        if (spec->has_value) {
            if (!eq && i + 1 >= argc)
                return usage_error(io, "%s: option --%s needs a value", a->cmd, spec->name);
            value = eq ? eq + 1 : argv[++i];
        } else if (eq) {
            return usage_error(io, "%s: option --%s takes no value", a->cmd, spec->name);
        }
        if (add_opt(io, a, spec, value) != 0)
            return EX_USAGE;
    }
    return 0;
}

/* Value of the last --name, "" for a flag, NULL if absent. */
static const char *opt(const struct args *a, const char *name)
{
    const char *found = NULL;
    for (size_t i = 0; i < a->nopts; i++)
        if (strcmp(a->opts[i].name, name) == 0)
            found = a->opts[i].value ? a->opts[i].value : "";
    return found;
}

static int opt_uint(const struct io *io, const struct args *a, const char *name, uint64_t min,
                    uint64_t max, uint64_t *out)
{
    const char *v = opt(a, name);
    if (!v)
        return 0;
    /* the value is not repeated: a secret typed in the wrong place must not reach a log */
    if (tg__parse_u64(v, strlen(v), out) != 0 || *out < min || *out > max)
        return usage_error(io, "%s: --%s: expected an integer %llu..%llu (value not shown)", a->cmd,
                           name, (unsigned long long)min, (unsigned long long)max);
    return 0;
}

/* ---- serving ---- */

/* The loader's warnings, each once per run (a reload does not repeat them; server.c). */
static void warn_to_err(void *user, const char *msg)
{
    const struct io *io = user;
    if (config_warning_first(msg))
        fprintf(io->err, "tgproxy: warning: %s\n", msg);
}

/* The --secret-file holds a secret: say so when other users can read it (config_load_file
   says the same of a config file). */
static void warn_if_exposed(const struct io *io, const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0 && (st.st_mode & (S_IRGRP | S_IROTH)))
        fprintf(io->err,
                "tgproxy: warning: %s is readable by other users and holds secrets; "
                "chmod 600 it\n",
                path);
}

/* config_load_file with its warnings (ignored keys, a file others can read) on err; exit
   code or 0. */
static int load_config(const struct io *io, const char *path, struct config *cfg)
{
    char err[CONFIG_ERR_MAX];
    config_init(cfg);
    int rc = apistore_config_load(cfg, path, err, sizeof err, warn_to_err, (void *)io);
    if (rc != 0)
        return cli_fail(io->err, rc == -ENOMEM ? EX_OSERR : EX_CONFIG, "%s", err);
    return 0;
}

static int serve_exit_code(int rc)
{
    switch (-rc) {
    case 0:
        return 0;
    case EADDRINUSE:
    case EADDRNOTAVAIL:
    case EAFNOSUPPORT: /* an IPv6 bind-to on a host without IPv6 */
    case EACCES:
    case EPERM:
        return EX_UNAVAILABLE;
    case ENOMEM:
    case EAGAIN:
    case EMFILE:
    case ENFILE:
        return EX_OSERR;
    case EINVAL: /* a bad access-list file (its path:line is logged) */
        return EX_CONFIG;
    default:
        return EX_SOFTWARE;
    }
}

/* Serve cfg; path is the file SIGHUP re-reads (NULL for simple-run). */
static int serve(const struct io *io, const struct config *cfg, const char *path)
{
    tg__logger_set_level(tg__log_default(), cfg->log_level);
    server_scrub_secrets(cfg);
    fflush(io->out);
    int rc = server_run(cfg, path);
    if (rc != 0)
        return cli_fail(io->err, serve_exit_code(rc), "cannot serve: %s", strerror(-rc));
    return 0;
}

static int cmd_run(const struct io *io, int argc, char **argv)
{
    struct args a;
    if (parse_args(io, argc, argv, NULL, 0, 1, &a) != 0)
        return EX_USAGE;
    if (a.npos != 1)
        return usage_error(io, "run: expected a configuration file");
    struct config cfg;
    int rc = load_config(io, a.pos[0], &cfg);
    if (rc != 0)
        return rc;
    rc = serve(io, &cfg, a.pos[0]);
    config_cleanup(&cfg);
    return rc;
}

static int simple_fronting(const struct io *io, const struct args *a, struct config *cfg)
{
    uint64_t port = 0;
    if (opt_uint(io, a, "fronting-port", 1, 65535, &port) != 0)
        return EX_USAGE;
    if (port)
        cfg->fronting.port = (uint16_t)port;
    const char *host = opt(a, "fronting-host");
    if (!host)
        return 0;
    char text[CONFIG_HOST_MAX + 16], err[256];
    bool v6 = strchr(host, ':') != NULL;
    snprintf(text, sizeof text, "%s%s%s:%u", v6 ? "[" : "", host, v6 ? "]" : "",
             (unsigned)cfg->fronting.port);
    struct value_hostport hp;
    if (value_hostport_parse(text, strlen(text), &hp, err, sizeof err) != 0)
        return looks_secret(host) /* the parser's message quotes the host */
                   ? usage_error(io, "simple-run: --fronting-host: not a host name or IP "
                                     "address (value not shown: it parses as a secret)")
                   : usage_error(io, "simple-run: --fronting-host: %s", err);
    memcpy(cfg->fronting.host, hp.host, sizeof hp.host);
    cfg->fronting.resolved = hp.resolved;
    cfg->fronting.addr = hp.addr;
    cfg->fronting.addr_len = hp.addr_len;
    return 0;
}

static int simple_options(const struct io *io, const struct args *a, struct config *cfg)
{
    uint64_t v = 0;
    if (opt_uint(io, a, "workers", 0, CONFIG_MAX_WORKERS, &v) != 0)
        return EX_USAGE;
    cfg->workers = opt(a, "workers") ? (uint32_t)v : cfg->workers;
    if (opt_uint(io, a, "concurrency", 1, 10000000, &v) != 0)
        return EX_USAGE;
    cfg->concurrency = opt(a, "concurrency") ? (uint32_t)v : cfg->concurrency;
    if (opt_uint(io, a, "public-port", 1, 65535, &v) != 0)
        return EX_USAGE;
    cfg->public_port = opt(a, "public-port") ? (uint16_t)v : cfg->public_port;
    const char *s = opt(a, "public-host");
    if (s && tg__strlcpy(cfg->public_host, s, sizeof cfg->public_host) >= sizeof cfg->public_host)
        return usage_error(io, "simple-run: --public-host is too long");
    if ((s = opt(a, "prefer-ip")) != NULL) {
        int p = CONFIG_PREFER_IPV4;
        while (p <= CONFIG_ONLY_IPV6 && strcmp(s, config_prefer_ip_name(p)) != 0)
            p++;
        if (p > CONFIG_ONLY_IPV6)
            return usage_error(io, "simple-run: --prefer-ip: expected prefer-ipv4, "
                                   "prefer-ipv6, only-ipv4 or only-ipv6");
        cfg->prefer_ip = (enum config_prefer_ip)p;
    }
    if ((s = opt(a, "tolerate-time-skewness")) != NULL) {
        uint64_t ms;
        if (value_duration_ms(s, strlen(s), &ms) != 0 || ms < 1000 || ms > 3600000)
            return usage_error(io, "simple-run: --tolerate-time-skewness: expected a "
                                   "duration 1s..1h such as \"120s\"");
        cfg->tolerate_time_skewness_s = (uint32_t)(ms / 1000);
        uint32_t need = config_replay_window_min(cfg->tolerate_time_skewness_s);
        if (cfg->antireplay.window_s < need) /* derived, as for a file without `window` */
            cfg->antireplay.window_s = need;
    }
    if ((s = opt(a, "log-level")) != NULL) {
        int level = tg__log_level_parse(s);
        if (level < 0)
            return usage_error(io, "simple-run: --log-level: expected trace, debug, info, "
                                   "warn, error or off");
        cfg->log_level = level;
    }
    if (opt(a, "no-fast-mode"))
        cfg->fast_mode = false;
    return simple_fronting(io, a, cfg);
}

/* First line of path (of standard input for "-") into text (trailing blanks dropped); 0 or
   an exit code. Neither the content nor a path that parses as a secret is ever shown. */
static int read_secret_file(const struct io *io, const char *cmd, const char *path, char *text,
                            size_t cap)
{
    const char *shown = looks_secret(path) ? "(a secret, not shown)" : path;
    bool in = strcmp(path, "-") == 0;
    int fd = in ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return cli_fail(io->err, EX_CONFIG, "%s: --secret-file %.200s: cannot open: %s", cmd, shown,
                        strerror(errno));
    size_t n = 0;
    ssize_t r = 0;
    while (n + 1 < cap && (r = read(fd, text + n, cap - 1 - n)) != 0) {
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            break;
        n += (size_t)r;
        if (in && memchr(text, '\n', n)) /* a terminal or a pipe: the first line is enough */
            break;
    }
    int err = r < 0 ? errno : 0;
    if (!in)
        close(fd);
    text[n] = '\0';
    if (err)
        return cli_fail(io->err, EX_CONFIG, "%s: --secret-file %.200s: read failed: %s", cmd, shown,
                        strerror(err));
    text[strcspn(text, "\r\n")] = '\0';
    for (n = strlen(text); n > 0 && (text[n - 1] == ' ' || text[n - 1] == '\t'); n--)
        text[n - 1] = '\0';
    if (!text[0])
        return cli_fail(io->err, EX_CONFIG,
                        "%s: --secret-file %.200s: empty first line, expected the secret", cmd,
                        shown);
    if (!in)
        warn_if_exposed(io, path);
    return 0;
}

/* SECRET: the argument, else --secret-file, else $TGPROXY_SECRET (wiped from this
   process's environment once read, so /proc/PID/environ no longer shows it). Copied into
   text; *from_argv when it came from the command line. 0 or an exit code. */
static int simple_secret(const struct io *io, const struct args *a, char *text, size_t cap,
                         bool *from_argv)
{
    const char *file = opt(a, "secret-file");
    char *env = getenv(SECRET_ENV);
    *from_argv = a->npos == 2;
    if (*from_argv && file)
        return usage_error(io, "simple-run: SECRET and --secret-file exclude each other");
    if (*from_argv) {
        if (tg__strlcpy(text, a->pos[1], cap) >= cap)
            return cli_fail(io->err, EX_DATAERR, "simple-run: SECRET is too long");
        return 0;
    }
    if (file)
        return read_secret_file(io, "simple-run", file, text, cap);
    if (!env || !env[0])
        return usage_error(io, "simple-run: expected HOST:PORT and SECRET (or --secret-file "
                               "FILE, or " SECRET_ENV " in the environment)");
    size_t n = tg__strlcpy(text, env, cap);
    memset(env, 0, strlen(env));
    unsetenv(SECRET_ENV);
    return n >= cap ? cli_fail(io->err, EX_DATAERR, "simple-run: " SECRET_ENV " is too long") : 0;
}

static const struct opt_spec simple_specs[] = {
    {"secret-file", true},   {"workers", true},       {"concurrency", true},
    {"fronting-host", true}, {"fronting-port", true}, {"public-host", true},
    {"public-port", true},   {"prefer-ip", true},     {"tolerate-time-skewness", true},
    {"log-level", true},     {"no-fast-mode", false},
};

static int cmd_simple_run(const struct io *io, int argc, char **argv)
{
    struct args a;
    if (parse_args(io, argc, argv, simple_specs, sizeof simple_specs / sizeof simple_specs[0], 2,
                   &a) != 0)
        return EX_USAGE;
    if (a.npos < 1)
        return usage_error(io, "simple-run: expected HOST:PORT and SECRET");
    if (looks_secret(a.pos[0]))
        return usage_error(io, "simple-run: the first argument parses as a secret (not shown), "
                               "expected HOST:PORT first");
    struct config cfg;
    char err[CONFIG_ERR_MAX], text[SECRET_FILE_MAX];
    struct secret s;
    bool from_argv = false;
    config_init(&cfg);
    tg__strlcpy(cfg.source, "<cmdline>", sizeof cfg.source);
    int rc = simple_secret(io, &a, text, sizeof text, &from_argv);
    if (rc != 0)
        goto out;
    if (config_add_listen(&cfg, a.pos[0], strlen(a.pos[0]), err, sizeof err) != 0) {
        rc = usage_error(io, "simple-run: HOST:PORT: %s", err);
        goto out;
    }
    if (secret_parse(text, strlen(text), &s, err, sizeof err) != 0) {
        rc = cli_fail(io->err, EX_DATAERR, "simple-run: bad SECRET (%s)", err);
        goto out;
    }
    rc = config_add_secret(&cfg, "default", &s, err, sizeof err);
    memset(&s, 0, sizeof s);
    if (rc != 0) {
        rc = cli_fail(io->err, EX_OSERR, "simple-run: %s", err);
        goto out;
    }
    rc = simple_options(io, &a, &cfg);
    if (rc == 0 && config_validate(&cfg, err, sizeof err) != 0)
        rc = cli_fail(io->err, EX_CONFIG, "%s", err);
    if (rc == 0 && from_argv) {
        fprintf(io->err, "tgproxy: warning: SECRET on the command line can be read by every "
                         "local user in /proc/PID/cmdline until now; pass it with --secret-file "
                         "FILE or " SECRET_ENV " instead\n");
        memset((char *)a.pos[1], 0, strlen(a.pos[1])); /* argv is ours: blank it from now on */
    }
    if (rc == 0)
        rc = serve(io, &cfg, NULL);
out:
    memset(text, 0, sizeof text);
    config_cleanup(&cfg);
    return rc;
}

/* ---- generate-secret ---- */

static int random_bytes(uint8_t *out, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(out + got, n - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? -errno : -EIO;
        got += (size_t)r;
    }
    return 0;
}

static int finish_output(const struct io *io)
{
    if (fflush(io->out) != 0 || ferror(io->out))
        return cli_fail(io->err, EX_IOERR, "cannot write output: %s", strerror(errno));
    return 0;
}

static const struct opt_spec generate_specs[] = {
    {"hex", false},
    {"base64", false},
};

static int cmd_generate_secret(const struct io *io, int argc, char **argv)
{
    struct args a;
    if (parse_args(io, argc, argv, generate_specs, 2, 1, &a) != 0)
        return EX_USAGE;
    if (a.npos != 1)
        return usage_error(io, "generate-secret: expected a DOMAIN");
    bool base64 = opt(&a, "base64") != NULL;
    if (base64 && opt(&a, "hex"))
        return usage_error(io, "generate-secret: --hex and --base64 exclude each other");
    const char *domain = a.pos[0];
    size_t dn = strlen(domain);
    const char *problem = secret_domain_problem(domain, dn);
    if (problem)
        return looks_secret(domain)
                   ? cli_fail(io->err, EX_DATAERR,
                              "generate-secret: DOMAIN (not shown: it parses as a "
                              "secret): %s",
                              problem)
                   : cli_fail(io->err, EX_DATAERR, "generate-secret: domain '%.64s': %s", domain,
                              problem);
    struct secret s = {.kind = SECRET_EE, .domain_len = (uint8_t)dn};
    memcpy(s.domain, domain, dn + 1);
    int rc = random_bytes(s.key, sizeof s.key);
    if (rc != 0)
        return cli_fail(io->err, EX_OSERR, "generate-secret: no random bytes: %s", strerror(-rc));
    char text[2 * (1 + SECRET_KEY_LEN + SECRET_DOMAIN_MAX) + 1];
    int n = secret_format(&s, base64, text, sizeof text);
    memset(&s, 0, sizeof s);
    if (n < 0)
        return cli_fail(io->err, EX_SOFTWARE, "generate-secret: cannot format the secret");
    fprintf(io->out, "%s\n", text);
    memset(text, 0, sizeof text);
    return finish_output(io);
}

/* ---- access ---- */

static bool is_wildcard(const struct sockaddr_storage *sa)
{
    if (sa->ss_family == AF_INET)
        return ((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr == INADDR_ANY;
    const struct in6_addr *a6 = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
    return IN6_IS_ADDR_UNSPECIFIED(a6);
}

/* Host and port for links: --host/--port, then public-host/-port, then the first bind-to. */
static int access_target(const struct io *io, const struct args *a, const struct config *cfg,
                         char *host, size_t cap, uint16_t *port)
{
    const struct sockaddr_storage *sa = &cfg->listen[0].addr;
    uint64_t p = 0;
    if (opt_uint(io, a, "port", 1, 65535, &p) != 0)
        return EX_USAGE;
    const struct sockaddr_in *v4 = (const struct sockaddr_in *)(const void *)sa;
    const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)(const void *)sa;
    *port = p                  ? (uint16_t)p
            : cfg->public_port ? cfg->public_port
                               : ntohs(sa->ss_family == AF_INET ? v4->sin_port : v6->sin6_port);
    if (*port == 0)
        return cli_fail(io->err, EX_CONFIG,
                        "access: the first bind-to has port 0; set public-port "
                        "in the config or pass --port");
    const char *h = opt(a, "host");
    if (h || cfg->public_host[0]) {
        if (tg__strlcpy(host, h ? h : cfg->public_host, cap) >= cap || !host[0])
            return usage_error(io, "access: --host must be 1..%zu characters", cap - 1);
        return 0;
    }
    if (is_wildcard(sa))
        return cli_fail(io->err, EX_CONFIG,
                        "access: the first bind-to (%s) is a wildcard address; set "
                        "public-host in the config or pass --host",
                        cfg->listen[0].text);
    inet_ntop(sa->ss_family,
              sa->ss_family == AF_INET ? (const void *)&v4->sin_addr : (const void *)&v6->sin6_addr,
              host, (socklen_t)cap);
    return 0;
}

static const char *kind_name(const struct secret *s)
{
    switch (s->kind) {
    case SECRET_EE:
        return "FakeTLS (ee)";
    case SECRET_DD:
        return "padded obfuscated2 (dd)";
    default:
        return "classic obfuscated2";
    }
}

static int print_secret(const struct io *io, const struct config_secret *cs, const char *host,
                        uint16_t port, bool base64, bool qr)
{
    tg__buf b;
    tg__buf_init(&b, 1 << 20);
    int rc = tg__buf_printf(&b, "%s: %s%s%s\n", cs->label, kind_name(&cs->secret),
                            cs->secret.kind == SECRET_EE ? ", domain " : "", cs->secret.domain);
    if (rc == 0)
        rc = links_format(&b, LINKS_TG, host, port, &cs->secret, base64);
    if (rc == 0)
        rc = tg__buf_putc(&b, '\n');
    size_t tme = b.len;
    if (rc == 0)
        rc = links_format(&b, LINKS_TME, host, port, &cs->secret, base64);
    if (rc == 0)
        rc = tg__buf_putc(&b, '\n');
    if (rc == 0 && qr) {
        char *link = tg__strndup(b.data + tme, b.len - tme - 1);
        rc = link ? links_qr(&b, link) : -ENOMEM;
        if (link)
            memset(link, 0, strlen(link));
        tg__free(link);
    }
    if (rc == 0)
        fprintf(io->out, "%s\n", tg__buf_cstr(&b));
    if (b.data)
        memset(b.data, 0, b.len);
    tg__buf_cleanup(&b);
    if (rc != 0)
        return cli_fail(io->err, rc == -ENOMEM ? EX_OSERR : EX_SOFTWARE,
                        "access: %s: cannot build "
                        "links: %s",
                        cs->label, strerror(-rc));
    return 0;
}

static const struct opt_spec access_specs[] = {
    {"host", true},  {"port", true}, {"no-qr", false}, {"base64", false},
    {"json", false}, {"ipv4", true}, {"ipv6", true},
};

/* The address family of an IP literal (AF_INET, AF_INET6), else 0 (a host name). */
static int ip_family(const char *s)
{
    struct sockaddr_storage sa;
    socklen_t len;
    return s && value_parse_ip(s, strlen(s), &sa, &len) ? sa.ss_family : 0;
}

/* The first bind-to address as text when it is not a wildcard, else "". */
static void bind_host(const struct config *cfg, char *host, size_t cap)
{
    const struct sockaddr_storage *sa = &cfg->listen[0].addr;
    const void *a = sa->ss_family == AF_INET
                        ? (const void *)&((const struct sockaddr_in *)(const void *)sa)->sin_addr
                        : (const void *)&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
    host[0] = '\0';
    if (!is_wildcard(sa))
        inet_ntop(sa->ss_family, a, host, (socklen_t)cap);
}

/* access --json: mtg's document. ipv4 / ipv6: --ipv4 / --ipv6, else --host when it is such
   a literal, else public-ipv4 / -ipv6, else public-host when it is such a literal, else the
   first bind-to unless a wildcard; host: --host or public-host when it is a name. No
   address at all is not an error, as for mtg: the document then has the secrets only. */
static int access_json(const struct io *io, const struct args *a, const struct config *cfg)
{
    uint64_t p = 0;
    if (opt_uint(io, a, "port", 1, 65535, &p) != 0)
        return EX_USAGE;
    const struct sockaddr_storage *sa = &cfg->listen[0].addr;
    uint16_t bport = ntohs(sa->ss_family == AF_INET
                               ? ((const struct sockaddr_in *)(const void *)sa)->sin_port
                               : ((const struct sockaddr_in6 *)(const void *)sa)->sin6_port);
    uint16_t port = p ? (uint16_t)p : cfg->public_port ? cfg->public_port : bport;
    const char *want[LINKS_WHERE_COUNT] = {opt(a, "ipv4"), opt(a, "ipv6"), NULL};
    static const int fam[2] = {AF_INET, AF_INET6};
    for (int w = LINKS_IPV4; w <= LINKS_IPV6; w++)
        if (want[w] && ip_family(want[w]) != fam[w])
            return usage_error(io, "access: --%s: expected an %s address", w ? "ipv6" : "ipv4",
                               w ? "IPv6" : "IPv4");
    char bound[CONFIG_HOST_MAX];
    bind_host(cfg, bound, sizeof bound);
    const char *cand[] = {opt(a, "host"), NULL, NULL, cfg->public_host, bound};
    for (int w = LINKS_IPV4; w <= LINKS_IPV6; w++) {
        cand[1] = w == LINKS_IPV4 ? cfg->public_ipv4 : cfg->public_ipv6;
        cand[2] = cand[1];
        for (size_t i = 0; !want[w] && i < sizeof cand / sizeof cand[0]; i++)
            if (cand[i] && cand[i][0] && ip_family(cand[i]) == fam[w])
                want[w] = cand[i];
    }
    const char *name = opt(a, "host") ? opt(a, "host") : cfg->public_host;
    want[LINKS_HOST] = name && name[0] && !ip_family(name) ? name : NULL;
    struct links_endpoint ep[LINKS_WHERE_COUNT];
    for (int w = 0; w < LINKS_WHERE_COUNT; w++)
        ep[w] = (struct links_endpoint){want[w], port};
    if ((want[0] || want[1] || want[2]) && port == 0)
        return cli_fail(io->err, EX_CONFIG,
                        "access: the first bind-to has port 0; set public-port in the config or "
                        "pass --port");
    if (!want[0] && !want[1] && !want[2])
        fprintf(io->err,
                "tgproxy: warning: access: no address for links (the first bind-to, "
                "%s, is a wildcard): set public-host in the config or pass --host, "
                "--ipv4 or --ipv6\n",
                cfg->listen[0].text);
    const char *labels[CONFIG_MAX_SECRETS];
    const struct secret *secrets[CONFIG_MAX_SECRETS];
    size_t n = 0;
    for (; n < cfg->nsecrets && n < CONFIG_MAX_SECRETS; n++) {
        labels[n] = cfg->secrets[n].label;
        secrets[n] = &cfg->secrets[n].secret;
    }
    tg__buf b;
    tg__buf_init(&b, 16u << 20);
    int rc = links_access_json(&b, ep, labels, secrets, n, opt(a, "base64") != NULL,
                               opt(a, "no-qr") == NULL);
    if (rc == 0)
        fputs(tg__buf_cstr(&b), io->out);
    if (b.data)
        memset(b.data, 0, b.len);
    tg__buf_cleanup(&b);
    if (rc != 0)
        return cli_fail(io->err, rc == -ENOMEM ? EX_OSERR : EX_SOFTWARE,
                        "access: cannot build the JSON: %s", strerror(-rc));
    return 0;
}

static int cmd_access(const struct io *io, int argc, char **argv)
{
    struct args a;
    if (parse_args(io, argc, argv, access_specs, sizeof access_specs / sizeof access_specs[0], 1,
                   &a) != 0)
        return EX_USAGE;
    if (a.npos != 1)
        return usage_error(io, "access: expected a configuration file");
    struct config cfg;
    char host[CONFIG_HOST_MAX];
    uint16_t port = 0;
    if (!opt(&a, "json") && (opt(&a, "ipv4") || opt(&a, "ipv6")))
        return usage_error(io, "access: --ipv4 and --ipv6 go with --json (else use --host)");
    int rc = load_config(io, a.pos[0], &cfg);
    if (rc != 0)
        return rc;
    if (opt(&a, "json")) {
        rc = access_json(io, &a, &cfg);
        config_cleanup(&cfg);
        return rc == 0 ? finish_output(io) : rc;
    }
    rc = access_target(io, &a, &cfg, host, sizeof host, &port);
    for (size_t i = 0; rc == 0 && i < cfg.nsecrets; i++)
        rc = print_secret(io, &cfg.secrets[i], host, port, opt(&a, "base64") != NULL,
                          opt(&a, "no-qr") == NULL);
    config_cleanup(&cfg);
    return rc == 0 ? finish_output(io) : rc;
}

static const struct opt_spec doctor_specs[] = {{"strict", false}};

static int cmd_doctor(const struct io *io, int argc, char **argv)
{
    struct args a;
    if (parse_args(io, argc, argv, doctor_specs, 1, 1, &a) != 0)
        return EX_USAGE;
    if (a.npos != 1)
        return usage_error(io, "doctor: expected a configuration file");
    int rc = doctor_check(a.pos[0], io->out, opt(&a, "strict") != NULL);
    int wrc = finish_output(io);
    return wrc != 0 ? wrc : rc;
}

/* ---- probe ---- */

static const struct opt_spec probe_specs[] = {
    {"secret-file", true}, {"secret", true}, {"front", true},   {"sni", true},    {"wait", true},
    {"handshakes", true},  {"json", false},  {"strict", false}, {"config", true},
};

/* The probe's secret: --secret-file FILE ("-": standard input), else $TGPROXY_SECRET (wiped
   once read); none is fine (the probes alone). *have tells. 0 or an exit code. */
static int probe_secret(const struct io *io, const struct args *a, struct secret *s, bool *have)
{
    char text[SECRET_FILE_MAX], err[256];
    const char *file = opt(a, "secret-file");
    char *env = getenv(SECRET_ENV);
    *have = false;
    if (file) {
        int rc = read_secret_file(io, "probe", file, text, sizeof text);
        if (rc != 0)
            return rc;
    } else if (env && env[0]) {
        size_t n = tg__strlcpy(text, env, sizeof text);
        memset(env, 0, strlen(env));
        unsetenv(SECRET_ENV);
        if (n >= sizeof text)
            return cli_fail(io->err, EX_DATAERR, "probe: " SECRET_ENV " is too long");
    } else {
        return 0;
    }
    int rc = secret_parse(text, strlen(text), s, err, sizeof err);
    memset(text, 0, sizeof text);
    if (rc != 0)
        return cli_fail(io->err, EX_DATAERR, "probe: bad secret (%s)", err);
    if (s->kind != SECRET_EE) {
        memset(s, 0, sizeof *s);
        return cli_fail(io->err, EX_DATAERR,
                        "probe: the secret is not a FakeTLS (ee) secret: only ee "
                        "secrets are fronted, so there is nothing to compare");
    }
    *have = true;
    return 0;
}

static int cmd_probe(const struct io *io, int argc, char **argv)
{
    struct args a;
    if (parse_args(io, argc, argv, probe_specs, sizeof probe_specs / sizeof probe_specs[0], 1,
                   &a) != 0)
        return EX_USAGE;
    const char *inline_secret = opt(&a, "secret");
    if (inline_secret) {
        memset((char *)inline_secret, 0, strlen(inline_secret)); /* argv is ours: blank it */
        return usage_error(io, "probe: --secret on the command line is visible to every local "
                               "user (ps, /proc/PID/cmdline): pass it with --secret-file FILE, "
                               "--secret-file - (standard input) or " SECRET_ENV);
    }
    if (a.npos != 1)
        return usage_error(io, "probe: expected the proxy's HOST:PORT");
    if (looks_secret(a.pos[0]))
        return usage_error(io, "probe: the argument parses as a secret (not shown), expected "
                               "HOST:PORT");
    struct probe_opts po = {.proxy = a.pos[0],
                            .front = opt(&a, "front"),
                            .sni = opt(&a, "sni"),
                            .json = opt(&a, "json") != NULL,
                            .strict = opt(&a, "strict") != NULL};
    uint64_t v = 0;
    const char *w = opt(&a, "wait");
    if (w) {
        if (value_duration_ms(w, strlen(w), &v) != 0 || v < 100 || v > 600000)
            return usage_error(io, "probe: --wait: expected a duration 100ms..10m such as \"5s\"");
        po.wait_ms = (int)v;
    }
    if (opt_uint(io, &a, "handshakes", 1, PROBE_HANDSHAKES_MAX, &v) != 0)
        return EX_USAGE;
    po.handshakes = opt(&a, "handshakes") ? (int)v : 0;
    if (opt(&a, "config")) { /* the deployment's PROXY protocol setup, nothing else */
        struct config cfg;
        int crc = load_config(io, opt(&a, "config"), &cfg);
        if (crc != 0)
            return crc;
        po.front_proxy_v2 = cfg.fronting.proxy_protocol;
        po.proxy_proxy_v2 = cfg.proxy_protocol_listener;
        config_cleanup(&cfg);
    }
    struct secret s;
    bool have = false;
    int rc = probe_secret(io, &a, &s, &have);
    if (rc != 0)
        return rc;
    po.secret = have ? &s : NULL;
    rc = probe_run(&po, io->out, io->err);
    memset(&s, 0, sizeof s);
    int wrc = finish_output(io);
    return wrc != 0 ? wrc : rc;
}

/* ---- entry ---- */

/* run / simple-run with SIGHUP held from the start: `systemctl reload` right after a start
   (Type=simple: systemd counts the service as started at once) would otherwise kill the
   process while it loads (the default action). Held, it is taken by server_run's signal
   loop as a reload once serving; one left pending at the end is dropped, not delivered. */
static int serve_cmd(const struct io *io, int argc, char **argv)
{
    sigset_t hup, old;
    sigemptyset(&hup);
    sigaddset(&hup, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &hup, &old);
    int rc = strcmp(argv[0], "run") == 0 ? cmd_run(io, argc, argv) : cmd_simple_run(io, argc, argv);
    struct timespec now = {0, 0};
    while (sigtimedwait(&hup, NULL, &now) == SIGHUP)
        ;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

int cli_main(int argc, char **argv, FILE *out, FILE *err)
{
    const struct io io = {out, err};
    if (argc < 2)
        return usage_error(&io, "missing command");
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        fputs(usage_text, out);
        return finish_output(&io);
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        fprintf(out, "tgproxy %s\n", TGPROXY_VERSION);
        return finish_output(&io);
    }
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage_text, out);
            return finish_output(&io);
        }
    if (strcmp(cmd, "run") == 0 || strcmp(cmd, "simple-run") == 0)
        return serve_cmd(&io, argc - 1, argv + 1);
    if (strcmp(cmd, "generate-secret") == 0)
        return cmd_generate_secret(&io, argc - 1, argv + 1);
    if (strcmp(cmd, "access") == 0)
        return cmd_access(&io, argc - 1, argv + 1);
    if (strcmp(cmd, "doctor") == 0)
        return cmd_doctor(&io, argc - 1, argv + 1);
    if (strcmp(cmd, "probe") == 0)
        return cmd_probe(&io, argc - 1, argv + 1);
    if (looks_secret(cmd))
        return usage_error(&io, "unknown command (a secret, not shown)");
    return usage_error(&io, "unknown command '%.64s'", cmd);
}
