/*
 * plural: the Plural-Forms formula of a gettext catalog, compiled once and evaluated per
 * lookup. The formula is a C expression over n with the operators gettext allows:
 *   ?:  ||  &&  == !=  < > <= >=  + -  * / %  !  ( )  decimal numbers  n
 * parsed by recursive descent with a depth limit into at most TG__PLURAL_MAX_NODES nodes.
 * Arithmetic is unsigned 64-bit as in gettext; division by zero yields 0 instead of a trap,
 * and a result past nplurals-1 selects form 0 (gettext does the same).
 */
#include <stdio.h>
#include <string.h>

#include "bot/helpers/mo.h"

enum {
    OP_NUM,
    OP_VAR,
    OP_NOT,
    OP_MUL,
    OP_DIV,
    OP_MOD,
    OP_ADD,
    OP_SUB,
    OP_LT,
    OP_GT,
    OP_LE,
    OP_GE,
    OP_EQ,
    OP_NE,
    OP_AND,
    OP_OR,
    OP_COND,
};

struct parser {
    const char *s;
    size_t n, i;
    struct tg__plural *p;
    int depth;
    char *err;
    size_t errcap;
    bool failed;
};

static void skip_ws(struct parser *ps)
{
    while (ps->i < ps->n && strchr(" \t\r\n", ps->s[ps->i]) && ps->s[ps->i])
        ps->i++;
}

static int fail(struct parser *ps, const char *what)
{
    if (!ps->failed)
        snprintf(ps->err, ps->errcap, "Plural-Forms: %s at character %zu", what, ps->i + 1);
    ps->failed = true;
    return -1;
}

/* Consume tok if it comes next (after spaces). */
static bool eat(struct parser *ps, const char *tok)
{
    skip_ws(ps);
    size_t k = strlen(tok);
    if (ps->n - ps->i >= k && memcmp(ps->s + ps->i, tok, k) == 0) {
        ps->i += k;
        return true;
    }
    return false;
}

static int node(struct parser *ps, uint8_t op, int a, int b, int c, uint32_t num)
{
    if (a < 0 || b < 0 || c < 0)
        return -1;
    if (ps->p->count == TG__PLURAL_MAX_NODES)
        return fail(ps, "formula too long");
    struct tg__plural_node *nd = &ps->p->nodes[ps->p->count];
    *nd = (struct tg__plural_node){op, (uint8_t)a, (uint8_t)b, (uint8_t)c, num};
    return (int)ps->p->count++;
}

static int expr(struct parser *ps);

static int primary(struct parser *ps)
{
    skip_ws(ps);
    if (eat(ps, "(")) {
        int e = expr(ps);
        if (e >= 0 && !eat(ps, ")"))
            return fail(ps, "expected ')'");
        return e;
    }
    if (eat(ps, "n"))
        return node(ps, OP_VAR, 0, 0, 0, 0);
    if (ps->i < ps->n && ps->s[ps->i] >= '0' && ps->s[ps->i] <= '9') {
        uint64_t v = 0;
        while (ps->i < ps->n && ps->s[ps->i] >= '0' && ps->s[ps->i] <= '9') {
            v = v * 10 + (uint64_t)(ps->s[ps->i++] - '0');
            if (v > UINT32_MAX)
                return fail(ps, "number too large");
        }
        return node(ps, OP_NUM, 0, 0, 0, (uint32_t)v);
    }
    return fail(ps, "expected n, a number or '('");
}

static int unary(struct parser *ps)
{
    if (++ps->depth > TG__PLURAL_MAX_DEPTH)
        return fail(ps, "formula nested too deeply");
    int r = eat(ps, "!") ? node(ps, OP_NOT, unary(ps), 0, 0, 0) : primary(ps);
    ps->depth--;
    return r;
}

/* One binary level: operands from next, operators from ops (longest first). */
struct level {
    int (*next)(struct parser *);
    const char *tok[4];
    uint8_t op[4];
};

static int binary(struct parser *ps, const struct level *lv)
{
    int left = lv->next(ps);
    for (;;) {
        if (left < 0)
            return -1;
        int k = -1;
        for (int j = 0; j < 4 && lv->tok[j]; j++) {
            skip_ws(ps);
            size_t tl = strlen(lv->tok[j]);
            /* "<" must not take the first half of "<=", "!" of "!=" is not at this level */
            if (ps->n - ps->i >= tl && memcmp(ps->s + ps->i, lv->tok[j], tl) == 0) {
                k = j;
                break;
            }
        }
        if (k < 0)
            return left;
        ps->i += strlen(lv->tok[k]);
        left = node(ps, lv->op[k], left, lv->next(ps), 0, 0);
    }
}

static int mul(struct parser *ps)
{
    static const struct level lv = {unary, {"*", "/", "%"}, {OP_MUL, OP_DIV, OP_MOD}};
    return binary(ps, &lv);
}

static int add(struct parser *ps)
{
    static const struct level lv = {mul, {"+", "-"}, {OP_ADD, OP_SUB}};
    return binary(ps, &lv);
}

static int rel(struct parser *ps)
{
    static const struct level lv = {add, {"<=", ">=", "<", ">"}, {OP_LE, OP_GE, OP_LT, OP_GT}};
    return binary(ps, &lv);
}

static int eq(struct parser *ps)
{
    static const struct level lv = {rel, {"==", "!="}, {OP_EQ, OP_NE}};
    return binary(ps, &lv);
}

static int and_(struct parser *ps)
{
    static const struct level lv = {eq, {"&&"}, {OP_AND}};
    return binary(ps, &lv);
}

static int or_(struct parser *ps)
{
    static const struct level lv = {and_, {"||"}, {OP_OR}};
    return binary(ps, &lv);
}

static int expr(struct parser *ps)
{
    if (++ps->depth > TG__PLURAL_MAX_DEPTH)
        return fail(ps, "formula nested too deeply");
    int c = or_(ps);
    if (c >= 0 && eat(ps, "?")) {
        int a = expr(ps);
        if (a >= 0 && !eat(ps, ":"))
            c = fail(ps, "expected ':'");
        else
            c = node(ps, OP_COND, c, a, expr(ps), 0);
    }
    ps->depth--;
    return c;
}

int tg__plural_parse(struct tg__plural *p, const char *s, size_t n, char *err, size_t errcap)
{
    memset(p, 0, sizeof *p);
    struct parser ps = {.s = s, .n = n, .p = p, .err = err, .errcap = errcap};
    if (!eat(&ps, "nplurals") || !eat(&ps, "="))
        return fail(&ps, "expected \"nplurals=\"");
    skip_ws(&ps);
    unsigned np = 0;
    while (ps.i < n && s[ps.i] >= '0' && s[ps.i] <= '9' && np <= 100)
        np = np * 10 + (unsigned)(s[ps.i++] - '0');
    if (np < 1 || np > 100)
        return fail(&ps, "nplurals must be 1 to 100");
    if (!eat(&ps, ";") || !eat(&ps, "plural") || !eat(&ps, "="))
        return fail(&ps, "expected \"; plural=\"");
    int root = expr(&ps);
    eat(&ps, ";");
    skip_ws(&ps);
    if (root >= 0 && ps.i < n)
        root = fail(&ps, "unexpected text after the formula");
    if (root < 0) {
        memset(p, 0, sizeof *p);
        return -1;
    }
    p->nplurals = np;
    return 0;
}

static uint64_t eval(const struct tg__plural *p, unsigned i, uint64_t n)
{
    const struct tg__plural_node *nd = &p->nodes[i];
    uint64_t a = 0, b = 0;
    if (nd->op == OP_NUM)
        return nd->num;
    if (nd->op == OP_VAR)
        return n;
    a = eval(p, nd->a, n);
    if (nd->op == OP_NOT)
        return !a;
    if (nd->op == OP_AND)
        return a && eval(p, nd->b, n);
    if (nd->op == OP_OR)
        return a || eval(p, nd->b, n);
    if (nd->op == OP_COND)
        return a ? eval(p, nd->b, n) : eval(p, nd->c, n);
    b = eval(p, nd->b, n);
    switch (nd->op) {
    case OP_MUL:
        return a * b;
    case OP_DIV:
        return b ? a / b : 0;
    case OP_MOD:
        return b ? a % b : 0;
    case OP_ADD:
        return a + b;
    case OP_SUB:
        return a - b;
    case OP_LT:
        return a < b;
    case OP_GT:
        return a > b;
    case OP_LE:
        return a <= b;
    case OP_GE:
        return a >= b;
    case OP_EQ:
        return a == b;
    default:
        return a != b; /* OP_NE */
    }
}

unsigned tg__plural_eval(const struct tg__plural *p, uint64_t n)
{
    if (p->count == 0)
        return n != 1; /* Germanic default, as gettext without a header */
    uint64_t v = eval(p, p->count - 1, n);
    return v < p->nplurals ? (unsigned)v : 0;
}
