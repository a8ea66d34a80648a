/*
 * test_helpers_i18n: gettext catalogs compiled by GNU msgfmt from .po files written here,
 * read by libtgbot and compared with glibc's own gettext (an independent implementation)
 * for every n in 0..1000 and a few huge ones, across plural rules with 1, 2, 3, 4 and 6
 * forms; the language fallback chain (pt-BR -> pt -> default), contexts, both byte orders,
 * a directory of catalogs, and malformed files refused with a message naming the problem.
 */
#include "tgtest.h"

#include <libintl.h>
#include <locale.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tgbot/tgbot.h"

static char dir[128];

/* Plural rules as gettext's documentation lists them. */
static const struct {
    const char *lang, *rule, *forms[6];
} langs[] = {
    {"ja", "nplurals=1; plural=0;", {"%d りんご"}},
    {"de", "nplurals=2; plural=(n != 1);", {"%d Apfel", "%d \xC3\x84pfel"}},
    {"fr", "nplurals=2; plural=n>1;", {"%d pomme", "%d pommes"}},
    {"pl",
     "nplurals=3; plural=(n==1 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2);",
     {"%d jab\xC5\x82ko", "%d jab\xC5\x82ka", "%d jab\xC5\x82\x65k"}},
    {"ru",
     "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || "
     "n%100>=20) ? 1 : 2);",
     {"%d яблоко", "%d яблока", "%d яблок"}},
    {"sl",
     "nplurals=4; plural=(n%100==1 ? 0 : n%100==2 ? 1 : n%100==3 || n%100==4 ? 2 : 3);",
     {"%d jabolko", "%d jabolki", "%d jabolka", "%d jabolk"}},
    {"ar",
     "nplurals=6; plural=(n==0 ? 0 : n==1 ? 1 : n==2 ? 2 : n%100>=3 && n%100<=10 ? 3 : "
     "n%100>=11 ? 4 : 5);",
     {"a0", "a1", "a2", "a3", "a4", "a5"}},
};

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Compile po text with msgfmt into path (extra: more msgfmt options). */
static void msgfmt(const char *po_text, const char *path, const char *extra)
{
    char po[256], cmd[1024];
    snprintf(po, sizeof po, "%s/in.po", dir);
    write_file(po, po_text);
    snprintf(cmd, sizeof cmd, "msgfmt %s -o '%s' '%s'", extra, path, po);
    assert_int_equal(system(cmd), 0);
}

static void make_lang(size_t i)
{
    char po[2048], path[256];
    int n = snprintf(po, sizeof po,
                     "msgid \"\"\nmsgstr \"\"\n\"Content-Type: text/plain; charset=UTF-8\\n\"\n"
                     "\"Plural-Forms: %s\\n\"\n\nmsgid \"Hello\"\nmsgstr \"Hello-%s\"\n\n"
                     "msgid \"%%d apple\"\nmsgid_plural \"%%d apples\"\n",
                     langs[i].rule, langs[i].lang);
    for (int k = 0; k < 6 && langs[i].forms[k]; k++)
        n += snprintf(po + n, sizeof po - (size_t)n, "msgstr[%d] \"%s\"\n", k, langs[i].forms[k]);
    /* glibc side: every catalog under language "xx", one domain per language */
    snprintf(path, sizeof path, "%s/xx/LC_MESSAGES/%s.mo", dir, langs[i].lang);
    msgfmt(po, path, "");
}

static int setup(void **state)
{
    (void)state;
    if (system("msgfmt --version > /dev/null 2>&1") != 0) {
        fprintf(stderr, "msgfmt (Debian package gettext) is not installed\n");
        return -1;
    }
    snprintf(dir, sizeof dir, "/tmp/tgbot-i18n-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    char p[256];
    snprintf(p, sizeof p, "%s/xx", dir);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/xx/LC_MESSAGES", dir);
    mkdir(p, 0700);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_plurals_match_glibc(void **state)
{
    (void)state;
    setenv("LANGUAGE", "xx", 1);
    assert_non_null(setlocale(LC_ALL, "C.UTF-8"));
    tg_i18n *tr = tg_i18n_new("en");
    for (size_t i = 0; i < sizeof langs / sizeof *langs; i++) {
        make_lang(i);
        char path[256];
        snprintf(path, sizeof path, "%s/xx/LC_MESSAGES/%s.mo", dir, langs[i].lang);
        assert_int_equal(tg_i18n_load_file(tr, langs[i].lang, path), TG_OK);
        bindtextdomain(langs[i].lang, dir);
        bind_textdomain_codeset(langs[i].lang, "UTF-8");
    }
    static const uint64_t big[] = {1000001,     1000011,     1000102,
                                   4294967295u, 4294967297u, UINT64_C(18446744073709551615)};
    for (size_t i = 0; i < sizeof langs / sizeof *langs; i++) {
        const char *l = langs[i].lang;
        assert_string_equal(tg_i18n_get(tr, l, "Hello"), dgettext(l, "Hello"));
        for (uint64_t n = 0; n < 1000 + sizeof big / sizeof *big; n++) {
            uint64_t v = n < 1000 ? n : big[n - 1000];
            const char *ours = tg_i18n_nget(tr, l, "%d apple", "%d apples", v);
            const char *theirs = dngettext(l, "%d apple", "%d apples", (unsigned long)v);
            if (strcmp(ours, theirs) != 0)
                fail_msg("%s n=%llu: ours \"%s\", glibc \"%s\"", l, (unsigned long long)v, ours,
                         theirs);
        }
    }
    /* spot checks that the comparison is not vacuous */
    assert_string_equal(tg_i18n_nget(tr, "pl", "%d apple", "%d apples", 22), "%d jab\xC5\x82ka");
    assert_string_equal(tg_i18n_nget(tr, "pl", "%d apple", "%d apples", 12), "%d jab\xC5\x82\x65k");
    assert_string_equal(tg_i18n_nget(tr, "ar", "%d apple", "%d apples", 111), "a4");
    assert_string_equal(tg_i18n_nget(tr, "ja", "%d apple", "%d apples", 5), "%d りんご");
    tg_i18n_free(tr);
}

static void test_fallbacks_and_context(void **state)
{
    (void)state;
    char path[256];
    tg_i18n *tr = tg_i18n_new("en");
    snprintf(path, sizeof path, "%s/pt.mo", dir);
    msgfmt("msgid \"Hello\"\nmsgstr \"Ol\xC3\xA1\"\n\nmsgid \"Bye\"\nmsgstr \"Tchau\"\n\n"
           "msgctxt \"verb\"\nmsgid \"Order\"\nmsgstr \"Pedir\"\n\n"
           "msgctxt \"noun\"\nmsgid \"Order\"\nmsgstr \"Pedido\"\n",
           path, "");
    assert_int_equal(tg_i18n_load_file(tr, "pt", path), TG_OK);
    snprintf(path, sizeof path, "%s/ptbr.mo", dir);
    msgfmt("msgid \"Bye\"\nmsgstr \"Falou\"\n", path, "--endianness=big");
    assert_int_equal(tg_i18n_load_file(tr, "pt_BR", path), TG_OK);
    snprintf(path, sizeof path, "%s/en.mo", dir);
    msgfmt("msgid \"menu.title\"\nmsgstr \"Menu\"\n", path, "");
    assert_int_equal(tg_i18n_load_file(tr, "en", path), TG_OK);

    assert_string_equal(tg_i18n_get(tr, "pt-BR", "Bye"), "Falou");
    assert_string_equal(tg_i18n_get(tr, "pt-BR", "Hello"), "Ol\xC3\xA1"
                                                           ""); /* pt-br -> pt */
    assert_string_equal(tg_i18n_resolve(tr, "pt-BR", "Hello"), "pt");
    assert_string_equal(tg_i18n_resolve(tr, "PT_br", "Bye"), "pt-br");
    assert_string_equal(tg_i18n_get(tr, "pt", "Bye"), "Tchau");
    assert_string_equal(tg_i18n_get(tr, "pt-PT-x-y", "Bye"), "Tchau");
    assert_string_equal(tg_i18n_get(tr, "de", "Hello"), "Hello"); /* no de: the msgid */
    assert_null(tg_i18n_resolve(tr, "de", "Hello"));
    assert_string_equal(tg_i18n_get(tr, "de", "menu.title"), "Menu"); /* default catalog */
    assert_string_equal(tg_i18n_get(tr, NULL, "menu.title"), "Menu");
    assert_string_equal(tg_i18n_get(tr, NULL, "Hello"), "Hello");
    assert_string_equal(tg_i18n_get(tr, "", "Hello"), "Hello");
    assert_string_equal(tg_i18n_get(tr, "p t", "Hello"), "Hello");
    assert_string_equal(tg_i18n_pget(tr, "pt-BR", "verb", "Order"), "Pedir");
    assert_string_equal(tg_i18n_pget(tr, "pt", "noun", "Order"), "Pedido");
    assert_string_equal(tg_i18n_get(tr, "pt", "Order"), "Order"); /* only with a context */
    assert_string_equal(tg_i18n_nget(tr, "de", "one", "many", 1), "one");
    assert_string_equal(tg_i18n_nget(tr, "de", "one", "many", 0), "many");
    assert_null(tg_i18n_get(tr, "pt", NULL));
    assert_string_equal(tg_i18n_get(NULL, "pt", "x"), "x");
    tg_i18n_free(tr);
}

static void test_load_dir(void **state)
{
    (void)state;
    char path[256];
    static const char *sub[] = {"locale",
                                "locale/de",
                                "locale/de/LC_MESSAGES",
                                "locale/pt_BR",
                                "locale/pt_BR/LC_MESSAGES",
                                "locale/fr",
                                "locale/.hidden"};
    for (size_t i = 0; i < sizeof sub / sizeof *sub; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, sub[i]);
        mkdir(path, 0700);
    }
    snprintf(path, sizeof path, "%s/locale/de/LC_MESSAGES/bot.mo", dir);
    msgfmt("msgid \"Hi\"\nmsgstr \"Moin\"\n", path, "");
    snprintf(path, sizeof path, "%s/locale/pt_BR/LC_MESSAGES/bot.mo", dir);
    msgfmt("msgid \"Hi\"\nmsgstr \"Oi\"\n", path, "");
    tg_i18n *tr = tg_i18n_new(NULL);
    size_t count = 99;
    snprintf(path, sizeof path, "%s/locale", dir);
    assert_int_equal(tg_i18n_load_dir(tr, path, "bot", &count), TG_OK);
    assert_int_equal(count, 2); /* fr has no bot.mo */
    assert_string_equal(tg_i18n_get(tr, "de-AT", "Hi"), "Moin");
    assert_string_equal(tg_i18n_get(tr, "pt-br", "Hi"), "Oi");
    assert_string_equal(tg_i18n_get(tr, "pt", "Hi"), "Hi");
    assert_int_equal(tg_i18n_load_dir(tr, "/nonexistent-tgbot", "bot", &count), TG_ERR_IO);
    assert_non_null(strstr(tg_i18n_errmsg(tr), "/nonexistent-tgbot: cannot open"));
    assert_int_equal(tg_i18n_load_file(tr, "de", "/nonexistent-tgbot.mo"), TG_ERR_IO);
    assert_int_equal(tg_i18n_load_file(tr, "de", dir), TG_ERR_IO); /* a directory */
    tg_i18n_free(tr);
}

/* A valid little-endian .mo with one entry ("a" -> "b") and a header, built by hand. */
static size_t tiny_mo(unsigned char *out, const char *header)
{
    size_t hl = strlen(header);
    uint32_t w[] = {0x950412de,
                    0,
                    2,
                    28,
                    44,
                    0,
                    60,
                    /* originals */ 0,
                    60,
                    1,
                    61,
                    /* translations */ (uint32_t)hl,
                    63,
                    1,
                    (uint32_t)(64 + hl)};
    memcpy(out, w, sizeof w);
    memcpy(out + 60, "\0a\0", 3);
    memcpy(out + 63, header, hl + 1);
    memcpy(out + 64 + hl, "b", 2);
    return 66 + hl;
}

static void test_malformed(void **state)
{
    (void)state;
    unsigned char mo[512];
    tg_i18n *tr = tg_i18n_new("en");
    size_t n = tiny_mo(mo, "Content-Type: text/plain; charset=UTF-8\n");
    assert_int_equal(tg_i18n_load_mem(tr, "de", mo, n, "tiny.mo"), TG_OK);
    assert_string_equal(tg_i18n_get(tr, "de", "a"), "b");

    static const struct {
        size_t at; /* byte to change (SIZE_MAX: truncate to len instead) */
        unsigned char v;
        size_t len;
        const char *expect;
    } cases[] = {
        {0, 0x00, 0, "tiny.mo: not a .mo file: magic 0x950412"},
        {SIZE_MAX, 0, 20, "tiny.mo: not a .mo file: 20 bytes is shorter than its header"},
        {16, 0xF0, 0, "tiny.mo: entry 0 of the translation table is outside the file"},
        {SIZE_MAX, 0, 50, "tiny.mo: string 0 of the original table runs past the end"},
        {SIZE_MAX, 0, 62, "tiny.mo: string 0 of the translation table runs past the end"},
        {6, 0x02, 0, "tiny.mo: unsupported .mo revision 2.0"},
        {9, 0x10, 0, "tiny.mo: 4098 strings cannot fit"},
        {61, 0xff, 0, "tiny.mo: string 1 of the original table is not UTF-8"},
        {62, 'x', 0,
         "tiny.mo: string 1 of the original table runs past the end of the file or "
         "lacks its NUL"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        unsigned char bad[512];
        size_t len = n;
        memcpy(bad, mo, n);
        if (cases[i].at == SIZE_MAX)
            len = cases[i].len;
        else
            bad[cases[i].at] = cases[i].v;
        assert_int_equal(tg_i18n_load_mem(tr, "de", bad, len, "tiny.mo"), TG_ERR_DECODE);
        if (strncmp(tg_i18n_errmsg(tr), cases[i].expect, strlen(cases[i].expect)) != 0)
            fail_msg("case %zu: %s", i, tg_i18n_errmsg(tr));
        assert_string_equal(tg_i18n_get(tr, "de", "a"), "b"); /* the old catalog stays */
    }
    static const struct {
        const char *header, *expect;
    } headers[] = {
        {"Content-Type: text/plain; charset=ISO-8859-1\n", "tiny.mo: header: charset is not UTF-8"},
        {"Plural-Forms: nplurals=2; plural=n !!= 1;\n",
         "tiny.mo: Plural-Forms: unexpected text after the formula at character 23"},
        {"Plural-Forms: nplurals=2; plural=;\n", "tiny.mo: Plural-Forms: expected n, a number"},
        {"Plural-Forms: nplurals=0; plural=0;\n",
         "tiny.mo: Plural-Forms: nplurals must be 1 to 100"},
        {"Plural-Forms: nplurals=2; plural=(n != 1;\n", "tiny.mo: Plural-Forms: expected ')'"},
        {"Plural-Forms: nplurals=2; plural=n ? 1;\n", "tiny.mo: Plural-Forms: expected ':'"},
        {"Plural-Forms: nplurals=2; plural=n & 1;\n", "tiny.mo: Plural-Forms: unexpected text"},
        {"Plural-Forms: nplurals=2; "
         "plural=((((((((((((((((((((((((((((((((((n)))))))))))))))))))))))))))))))))));\n",
         "tiny.mo: Plural-Forms: formula nested too deeply"},
        {"Plural-Forms: nplurals=2; plural=99999999999;\n",
         "tiny.mo: Plural-Forms: number too large"},
        {"Plural-Forms: plural=n;\n", "tiny.mo: Plural-Forms: expected \"nplurals=\""},
    };
    for (size_t i = 0; i < sizeof headers / sizeof *headers; i++) {
        n = tiny_mo(mo, headers[i].header);
        assert_int_equal(tg_i18n_load_mem(tr, "de", mo, n, "tiny.mo"), TG_ERR_DECODE);
        if (strncmp(tg_i18n_errmsg(tr), headers[i].expect, strlen(headers[i].expect)) != 0)
            fail_msg("header %zu: %s", i, tg_i18n_errmsg(tr));
    }
    /* 128 nodes (64 n, 63 '+', one '!') fit; 129 do not */
    char h[600];
    for (int extra = 0; extra < 2; extra++) {
        int k = snprintf(h, sizeof h, "Plural-Forms: nplurals=2; plural=!n");
        for (int i = 0; i < 63 + extra; i++)
            k += snprintf(h + k, sizeof h - (size_t)k, "+n");
        snprintf(h + k, sizeof h - (size_t)k, ";\n");
        n = tiny_mo(mo, h);
        assert_int_equal(tg_i18n_load_mem(tr, "de", mo, n, "tiny.mo"),
                         extra ? TG_ERR_DECODE : TG_OK);
    }
    assert_non_null(strstr(tg_i18n_errmsg(tr), "formula too long"));
    n = tiny_mo(mo, "Plural-Forms: nplurals=3; plural=n%0 + 7/0 + n/2;\n"); /* no trap */
    assert_int_equal(tg_i18n_load_mem(tr, "cs", mo, n, "tiny.mo"), TG_OK);
    assert_int_equal(tg_i18n_load_mem(tr, "c s", mo, n, "tiny.mo"), TG_ERR_INVALID);
    tg_i18n_free(tr);
}

/* Lookups from several threads at once on a loaded catalog set (ThreadSanitizer in CI). */
struct lookup_job {
    const tg_i18n *tr;
    int mismatches;
};

static void *lookup_many(void *arg)
{
    struct lookup_job *j = arg;
    static const char *langs_seen[] = {"pl", "ru-RU", "de_AT", "xx", NULL};
    for (uint64_t n = 0; n < 4000; n++) {
        const char *lang = langs_seen[n % 5];
        const char *s = tg_i18n_nget(j->tr, lang, "%d apple", "%d apples", n);
        const char *again = tg_i18n_nget(j->tr, lang, "%d apple", "%d apples", n);
        j->mismatches += s != again;
    }
    return NULL;
}

static void test_concurrent_lookups(void **state)
{
    (void)state;
    tg_i18n *tr = tg_i18n_new("en");
    for (size_t i = 0; i < sizeof langs / sizeof *langs; i++) {
        char path[256];
        make_lang(i);
        snprintf(path, sizeof path, "%s/xx/LC_MESSAGES/%s.mo", dir, langs[i].lang);
        assert_int_equal(tg_i18n_load_file(tr, langs[i].lang, path), TG_OK);
    }
    pthread_t th[4];
    struct lookup_job jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (struct lookup_job){tr, 0};
        assert_int_equal(pthread_create(&th[i], NULL, lookup_many, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(jobs[i].mismatches, 0);
    }
    assert_string_equal(tg_i18n_nget(tr, "ru-RU", "%d apple", "%d apples", 21), "%d яблоко");
    tg_i18n_free(tr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plurals_match_glibc),
        cmocka_unit_test(test_fallbacks_and_context),
        cmocka_unit_test(test_load_dir),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_concurrent_lookups),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
