/*
 * crypto: EVP wrappers, and the dispatch of AES-CTR to aesctr.c (see crypto.h).
 */
/* SHA256_Init/Update/Final are deprecated in OpenSSL 3 but kept: the one SHA-256 there that
   allocates nothing (see sha256_with). Without them (a no-deprecated build) EVP serves. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include "proxy/wire/crypto.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include "proxy/wire/aesctr.h"

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static pthread_once_t fetch_once = PTHREAD_ONCE_INIT; /* the EVP path's, on its first use */
static EVP_CIPHER *aes_ctr;
static EVP_MD *sha256;
static pthread_key_t tls_key;
static bool tls_key_ok;
static bool ctr_aesni;        /* the CPU has AES-NI: streams use aesctr.c (set once) */
static bool ctr_force_evp;    /* atomic: the test hook crypto_ctr_force_evp() */

/* Do streams go through aesctr.c right now (else EVP and the thread's slots)? */
static bool use_aesni(void)
{
    return ctr_aesni && !__atomic_load_n(&ctr_force_evp, __ATOMIC_RELAXED);
}

/*
 * Per-thread reusable OpenSSL objects: one digest context, and the thread's keyed cipher
 * contexts ("slots"). A stream (struct crypto_ctr) holds no OpenSSL object of its own: only
 * key, IV and position. Applying it looks up the slot it was last keyed into; if that slot
 * still belongs to it at the same position, the bytes go straight through, otherwise the
 * least recently used slot is re-keyed for it (one key schedule, ~0.3 us, plus at most 15
 * bytes of keystream to skip). So the contexts follow the thread's active streams, at most
 * CTR_SLOTS of them (~650 bytes each, created on demand), and a quiet stream costs no
 * cipher heap at all, however many there are. Freed at thread exit (pthread key
 * destructor).
 */
#define CTR_SLOTS 256
#define SLOT_NONE 0xffff
_Static_assert(CTR_SLOTS <= (1 << 14), "struct crypto_ctr's slot field holds a slot index");
_Static_assert(sizeof(struct crypto_ctr) == 64, "struct crypto_ctr is 64 bytes (crypto.h)");

/*
 * Small random requests (a filler length, a DC header) are served from a per-thread block
 * of CSPRNG output (the kernel's, getrandom(2)): one system call per 512 bytes rather than
 * per request. (OpenSSL's RAND_bytes, used before, cost ~1.4 us per call whatever its size,
 * and its first call activated OpenSSL's default provider: ~1.6 MB resident, issue 30.)
 * Bytes handed out are wiped from the block at once; a fork empties the child's block (its
 * bytes would repeat the parent's).
 */
#define RND_BLOCK 512
#define RND_SMALL 64 /* requests up to this size come from the block */

/*
 * Bytes that are sent in clear (the ServerHello's filler, the key share's candidates) come
 * from a per-thread AES-256-CTR keystream instead (crypto_random_public): keyed from 48
 * bytes of getrandom(2), re-keyed after PUB_REKEY bytes and in a forked child. One
 * aesctr_xor (AES-NI: the keystream written straight into the buffer, ~0.3 us for a 3.6 KB
 * filler) or EVP_EncryptUpdate per request; RAND_bytes cost ~2 us for the same filler
 * here, with a getpid (its fork check) each time.
 */
#define PUB_REKEY (1u << 20)

struct ctr_slot {
    EVP_CIPHER_CTX *ctx; /* bound to AES-256-CTR once created */
    uint64_t owner;      /* serial of the stream keyed into ctx; 0 = free */
    uint64_t pos;        /* that stream's keystream position as ctx stands */
    uint16_t prev, next; /* LRU list: head = most recently used */
};

struct crypto_thread {
    EVP_MD_CTX *md;
    EVP_CIPHER_CTX *pub; /* the public keystream on the EVP path (NULL until first used) */
    uint8_t pub_key[48]; /* on the AES-NI path: its key and IV */
    uint64_t pub_pos;    /* and its position */
    bool pub_aesni;      /* which of the two pub_left counts down */
    unsigned pub_fork;   /* fork_count when pub was keyed */
    uint32_t pub_left;   /* bytes until it is re-keyed */
    unsigned rnd_fork;   /* fork_count when rnd was filled */
    uint16_t rnd_left;   /* unused bytes at the end of rnd */
    uint8_t rnd[RND_BLOCK];
    uint16_t head, tail, nslots;
    struct ctr_slot slot[CTR_SLOTS];
};

static uint64_t serial_next; /* atomic: stream serials, unique per process */
static unsigned fork_count;  /* atomic: forks seen (pthread_atfork child handler) */

/* 48 bits: unique for 2^48 streams (nine years at a million a second); never 0 */
static uint64_t serial_new(void)
{
    uint64_t serial;
    do
        serial = __atomic_add_fetch(&serial_next, 1, __ATOMIC_RELAXED) & ((1ull << 48) - 1);
    while (!serial);
    return serial;
}

static void after_fork_child(void)
{
    __atomic_add_fetch(&fork_count, 1, __ATOMIC_RELAXED);
}

static void thread_free(void *arg)
{
    struct crypto_thread *t = arg;
    OPENSSL_cleanse(t->rnd, sizeof t->rnd);
    OPENSSL_cleanse(t->pub_key, sizeof t->pub_key);
    EVP_MD_CTX_free(t->md);
    EVP_CIPHER_CTX_free(t->pub); /* frees (and wipes) its key schedule */
    for (int i = 0; i < t->nslots; i++)
        EVP_CIPHER_CTX_free(t->slot[i].ctx);
    OPENSSL_free(t);
}

static void init_state(void)
{
    ctr_aesni = aesctr_available();
    tls_key_ok = pthread_key_create(&tls_key, thread_free) == 0 &&
                 pthread_atfork(NULL, NULL, after_fork_child) == 0;
}

static void fetch_algorithms(void)
{
    aes_ctr = EVP_CIPHER_fetch(NULL, "AES-256-CTR", NULL);
    sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
}

/* The EVP path's algorithms, fetched on its first use: the first fetch activates OpenSSL's
   default provider, which nothing else of a start on an AES-NI CPU needs (crypto.h). */
static int fetch_evp(void)
{
    pthread_once(&fetch_once, fetch_algorithms);
    return aes_ctr && sha256 ? 0 : -EIO;
}

/* Where every stream (or hash) will go through EVP, fetch now: the first connection would
   anyway, and a provider that cannot serve AES-CTR then stops the start, not each
   connection. */
static bool evp_always(void)
{
#ifdef OPENSSL_NO_DEPRECATED_3_0
    return true;
#else
    return !ctr_aesni;
#endif
}

int crypto_init(void)
{
    pthread_once(&init_once, init_state);
    if (!tls_key_ok)
        return -EIO;
    return evp_always() ? fetch_evp() : 0;
}

/* This thread's state, created on first use; NULL on allocation failure. */
static struct crypto_thread *thread_state(void)
{
    struct crypto_thread *t = pthread_getspecific(tls_key);
    if (t)
        return t;
    t = OPENSSL_zalloc(sizeof *t);
    if (!t)
        return NULL;
    t->head = t->tail = SLOT_NONE;
    if (pthread_setspecific(tls_key, t) != 0) {
        OPENSSL_free(t);
        return NULL;
    }
    return t;
}

static void lru_unlink(struct crypto_thread *t, uint16_t i)
{
    struct ctr_slot *s = &t->slot[i];
    if (s->prev != SLOT_NONE)
        t->slot[s->prev].next = s->next;
    else
        t->head = s->next;
    if (s->next != SLOT_NONE)
        t->slot[s->next].prev = s->prev;
    else
        t->tail = s->prev;
}

/* Put slot i first (in use now) or last (free: the next to be taken). */
static void lru_place(struct crypto_thread *t, uint16_t i, bool first)
{
    struct ctr_slot *s = &t->slot[i];
    if (first) {
        s->prev = SLOT_NONE;
        s->next = t->head;
        if (t->head != SLOT_NONE)
            t->slot[t->head].prev = i;
        t->head = i;
        if (t->tail == SLOT_NONE)
            t->tail = i;
    } else {
        s->next = SLOT_NONE;
        s->prev = t->tail;
        if (t->tail != SLOT_NONE)
            t->slot[t->tail].next = i;
        t->tail = i;
        if (t->head == SLOT_NONE)
            t->head = i;
    }
}

/* The slot c is keyed into on this thread, or NULL. */
static struct ctr_slot *slot_of(struct crypto_thread *t, const struct crypto_ctr *c)
{
    if (!t || !c->homed || c->slot >= t->nslots || t->slot[c->slot].owner != c->serial)
        return NULL;
    return &t->slot[c->slot];
}

/* A slot for a stream about to be keyed: a new one while under CTR_SLOTS, else the least
   recently used (free ones are kept last). Its context is bound to the cipher. */
static int slot_take(struct crypto_thread *t, uint16_t *out)
{
    uint16_t i = t->tail;
    if (t->nslots < CTR_SLOTS && (i == SLOT_NONE || t->slot[i].owner != 0)) {
        EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
        if (!ctx)
            return -ENOMEM;
        i = t->nslots++;
        t->slot[i] = (struct ctr_slot){.ctx = ctx};
    } else {
        lru_unlink(t, i);
    }
    t->slot[i].owner = 0;
    lru_place(t, i, true);
    *out = i;
    return 0;
}

/* Key a slot's context for c at keystream position c->pos. */
static int ctr_open(struct crypto_thread *t, struct crypto_ctr *c, struct ctr_slot **out)
{
    uint8_t iv[16], skip[16] = {0};
    int outl = 0, rc = -EIO;
    uint16_t i;
    if (fetch_evp() != 0)
        return -EIO;
    if ((rc = slot_take(t, &i)) != 0)
        return rc;
    if (!c->serial) /* begun on the AES-NI path, before crypto_ctr_force_evp() */
        c->serial = serial_new();
    struct ctr_slot *s = &t->slot[i];
    memcpy(iv, c->iv, 16);
    crypto_ctr_iv_add(iv, c->pos / 16);
    int part = (int)(c->pos % 16);
    /* a context that already holds the cipher is re-keyed without re-creating it */
    const EVP_CIPHER *ciph = EVP_CIPHER_CTX_get0_cipher(s->ctx) ? NULL : aes_ctr;
    rc = -EIO;
    if (EVP_EncryptInit_ex2(s->ctx, ciph, c->key, iv, NULL) == 1 &&
        (part == 0 || (EVP_EncryptUpdate(s->ctx, skip, &outl, skip, part) == 1 && outl == part))) {
        s->owner = c->serial;
        s->pos = c->pos;
        c->homed = 1;
        c->slot = i;
        *out = s;
        rc = 0;
    }
    crypto_wipe(skip, sizeof skip);
    return rc;
}

/* Let go of c's slot on this thread, if it has one: last in line for reuse, and with
   wipe, its key schedule overwritten with a zero key first. */
static void slot_release(struct crypto_ctr *c, bool wipe)
{
    static const uint8_t zero[32];
    struct crypto_thread *t = c->homed ? pthread_getspecific(tls_key) : NULL;
    struct ctr_slot *s = slot_of(t, c);
    c->homed = 0;
    if (!s)
        return;
    if (wipe)
        (void)EVP_EncryptInit_ex2(s->ctx, NULL, zero, zero, NULL);
    s->owner = 0;
    uint16_t i = (uint16_t)(s - t->slot);
    lru_unlink(t, i);
    lru_place(t, i, false);
}

int crypto_ctr_init(struct crypto_ctr *c, const uint8_t key[32], const uint8_t iv[16])
{
    if (crypto_init() != 0)
        return -EIO;
    if (c->ready)
        slot_release(c, false); /* re-keyed below, or left to the next stream */
    memcpy(c->key, key, 32);
    memcpy(c->iv, iv, 16);
    c->pos = 0;
    c->homed = 0;
    c->ready = 1;
    if (use_aesni()) { /* nothing to set up: each apply expands the key itself */
        c->serial = 0;
        return 0;
    }
    c->serial = serial_new();
    struct crypto_thread *t = thread_state();
    struct ctr_slot *s;
    int rc = t ? ctr_open(t, c, &s) : -ENOMEM;
    if (rc != 0)
        c->ready = 0;
    return rc;
}

int crypto_ctr_apply2(struct crypto_ctr *c, const uint8_t *in, uint8_t *out, size_t n)
{
    if (!c->ready)
        return -EINVAL;
    if (use_aesni()) {
        aesctr_xor(c->key, c->iv, c->pos, in, out, n);
        c->pos += n;
        return 0;
    }
    struct crypto_thread *t = thread_state();
    if (!t)
        return -ENOMEM;
    struct ctr_slot *s = slot_of(t, c);
    if (s && s->pos == c->pos) {
        uint16_t i = (uint16_t)(s - t->slot);
        if (t->head != i) {
            lru_unlink(t, i);
            lru_place(t, i, true);
        }
    } else {
        int rc = ctr_open(t, c, &s);
        if (rc != 0)
            return rc;
    }
    while (n > 0) {
        int chunk = n > (size_t)(INT_MAX / 2) ? INT_MAX / 2 : (int)n;
        int outl = 0;
        if (EVP_EncryptUpdate(s->ctx, out, &outl, in, chunk) != 1 || outl != chunk) {
            s->owner = 0; /* unknown state: re-keyed on the next use */
            return -EIO;
        }
        in += chunk;
        out += chunk;
        n -= (size_t)chunk;
        c->pos += (uint64_t)chunk;
    }
    s->pos = c->pos;
    return 0;
}

int crypto_ctr_apply(struct crypto_ctr *c, uint8_t *buf, size_t n)
{
    return crypto_ctr_apply2(c, buf, buf, n);
}

void crypto_ctr_park(struct crypto_ctr *c)
{
    if (c && c->ready)
        slot_release(c, false);
}

bool crypto_ctr_force_evp(bool on)
{
    (void)crypto_init();
    __atomic_store_n(&ctr_force_evp, on, __ATOMIC_RELAXED);
    return use_aesni();
}

bool crypto_ctr_aesni(void)
{
    return crypto_init() == 0 && use_aesni();
}

bool crypto_ctr_keyed(const struct crypto_ctr *c)
{
    return c->ready && c->homed && slot_of(pthread_getspecific(tls_key), c) != NULL;
}

void crypto_ctr_cleanup(struct crypto_ctr *c)
{
    if (!c)
        return;
    if (c->ready)
        slot_release(c, true);
    crypto_wipe(c, sizeof(*c));
}

void crypto_ctr_iv_add(uint8_t iv[16], uint64_t blocks)
{
    unsigned carry = 0;
    for (int i = 15; i >= 0; i--) {
        unsigned sum = iv[i] + (unsigned)(blocks & 0xff) + carry;
        iv[i] = (uint8_t)sum;
        carry = sum >> 8;
        blocks >>= 8;
    }
}

#ifdef OPENSSL_NO_DEPRECATED_3_0
/* Hash parts into out with md (initialised here). */
static int digest_parts(EVP_MD_CTX *md, const uint8_t *first, size_t first_n,
                        const struct crypto_part *parts, size_t nparts, uint8_t out[32])
{
    unsigned outl = 0;
    if (EVP_DigestInit_ex2(md, sha256, NULL) != 1 ||
        (first_n && EVP_DigestUpdate(md, first, first_n) != 1))
        return -EIO;
    for (size_t i = 0; i < nparts; i++)
        if (parts[i].n && EVP_DigestUpdate(md, parts[i].p, parts[i].n) != 1)
            return -EIO;
    return EVP_DigestFinal_ex(md, out, &outl) == 1 && outl == 32 ? 0 : -EIO;
}
#endif

/*
 * SHA-256 of first ‖ parts. OpenSSL 3.0's EVP_DigestInit_ex2 re-creates the provider's
 * context on every init, even on a reused EVP_MD_CTX of the same digest: one allocation
 * per hash, so three per HMAC and three per obfs2 header. The low-level functions run
 * the same block code (SHA-NI where the CPU has it) on a caller's struct.
 */
static int sha256_with(const uint8_t *first, size_t first_n, const struct crypto_part *parts,
                       size_t nparts, uint8_t out[32])
{
#ifndef OPENSSL_NO_DEPRECATED_3_0
    SHA256_CTX s;
    int ok = SHA256_Init(&s) == 1 && (!first_n || SHA256_Update(&s, first, first_n) == 1);
    for (size_t i = 0; ok && i < nparts; i++)
        ok = !parts[i].n || SHA256_Update(&s, parts[i].p, parts[i].n) == 1;
    ok = ok && SHA256_Final(out, &s) == 1;
    crypto_wipe(&s, sizeof s);
    return ok ? 0 : -EIO;
#else
    if (crypto_init() != 0 || fetch_evp() != 0)
        return -EIO;
    struct crypto_thread *t = thread_state();
    if (t && !t->md)
        t->md = EVP_MD_CTX_new();
    if (t && t->md)
        return digest_parts(t->md, first, first_n, parts, nparts, out);
    EVP_MD_CTX *md = EVP_MD_CTX_new(); /* no thread cache: one-off context */
    if (!md)
        return -ENOMEM;
    int rc = digest_parts(md, first, first_n, parts, nparts, out);
    EVP_MD_CTX_free(md);
    return rc;
#endif
}

int crypto_sha256(const struct crypto_part *parts, size_t nparts, uint8_t out[32])
{
    return sha256_with(NULL, 0, parts, nparts, out);
}

/*
 * HMAC-SHA256 (RFC 2104) over sha256_with: H(K^opad ‖ H(K^ipad ‖ m)), no allocation.
 * Built here rather than through EVP_MAC because the MAC provider looks the digest up by
 * name on every init, which cost more than the hashing for the proxy's short messages.
 */
int crypto_hmac_sha256(const void *key, size_t keylen, const struct crypto_part *parts,
                       size_t nparts, uint8_t out[32])
{
    uint8_t k[64] = {0}, pad[64], inner[32];
    int rc = 0;
    if (keylen > sizeof k) {
        struct crypto_part kp = {key, keylen};
        rc = sha256_with(NULL, 0, &kp, 1, k);
    } else if (keylen) {
        memcpy(k, key, keylen);
    }
    for (size_t i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x36;
    if (rc == 0)
        rc = sha256_with(pad, 64, parts, nparts, inner);
    for (size_t i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x5c;
    struct crypto_part ip = {inner, 32};
    if (rc == 0)
        rc = sha256_with(pad, 64, &ip, 1, out);
    crypto_wipe(k, sizeof k);
    crypto_wipe(pad, sizeof pad);
    crypto_wipe(inner, sizeof inner);
    return rc;
}

/* n bytes from the kernel's CSPRNG: getrandom(2) blocks only until the pool is first
   initialised, and gives at most 32 MiB minus one per call (or less if a signal interrupts
   a large request), hence the loop. */
static int random_direct(void *buf, size_t n)
{
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t got = getrandom(p, n, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return -EIO; /* ENOSYS (a kernel before 3.17), EFAULT: no bytes to give */
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

int crypto_random(void *buf, size_t n)
{
    struct crypto_thread *t = n <= RND_SMALL && crypto_init() == 0 ? thread_state() : NULL;
    if (!t)
        return random_direct(buf, n);
    unsigned forks = __atomic_load_n(&fork_count, __ATOMIC_RELAXED);
    if (t->rnd_fork != forks || t->rnd_left < n) {
        if (random_direct(t->rnd, RND_BLOCK) != 0)
            return -EIO;
        t->rnd_left = RND_BLOCK;
        t->rnd_fork = forks;
    }
    uint8_t *src = t->rnd + RND_BLOCK - t->rnd_left;
    memcpy(buf, src, n);
    OPENSSL_cleanse(src, n);
    t->rnd_left = (uint16_t)(t->rnd_left - n);
    return 0;
}

/* Key (or re-key) t's public keystream from the CSPRNG. */
static int pub_rekey(struct crypto_thread *t, unsigned forks, bool aesni)
{
    uint8_t k[48];
    int rc = -EIO;
    t->pub_aesni = aesni;
    if (aesni) { /* no context: aesctr_xor expands the key on each call */
        if (random_direct(t->pub_key, sizeof t->pub_key) != 0) {
            t->pub_left = 0;
            return -EIO;
        }
        t->pub_pos = 0;
        t->pub_left = PUB_REKEY;
        t->pub_fork = forks;
        return 0;
    }
    if (fetch_evp() != 0) {
        t->pub_left = 0;
        return -EIO;
    }
    if (!t->pub && !(t->pub = EVP_CIPHER_CTX_new()))
        return -ENOMEM;
    const EVP_CIPHER *ciph = EVP_CIPHER_CTX_get0_cipher(t->pub) ? NULL : aes_ctr;
    if (random_direct(k, sizeof k) == 0 &&
        EVP_EncryptInit_ex2(t->pub, ciph, k, k + 32, NULL) == 1) {
        t->pub_left = PUB_REKEY;
        t->pub_fork = forks;
        rc = 0;
    } else {
        t->pub_left = 0;
    }
    crypto_wipe(k, sizeof k);
    return rc;
}

int crypto_random_public(void *buf, size_t n)
{
    struct crypto_thread *t = n <= PUB_REKEY && crypto_init() == 0 ? thread_state() : NULL;
    if (!t)
        return random_direct(buf, n);
    unsigned forks = __atomic_load_n(&fork_count, __ATOMIC_RELAXED);
    bool aesni = use_aesni();
    /* re-keyed also when the path changed (crypto_ctr_force_evp): each keeps its own key */
    if ((t->pub_fork != forks || t->pub_left < n || t->pub_aesni != aesni) &&
        pub_rekey(t, forks, aesni) != 0)
        return -EIO;
    if (aesni) { /* keystream = the encryption of zeros, written straight out */
        aesctr_xor(t->pub_key, t->pub_key + 32, t->pub_pos, NULL, buf, n);
        t->pub_pos += n;
        t->pub_left -= (uint32_t)n;
        return 0;
    }
    int outl = 0;
    memset(buf, 0, n); /* keystream = the encryption of zeros */
    if (EVP_EncryptUpdate(t->pub, buf, &outl, buf, (int)n) != 1 || (size_t)outl != n) {
        t->pub_left = 0; /* unknown state: re-keyed on the next use */
        return -EIO;
    }
    t->pub_left -= (uint32_t)n;
    return 0;
}

uint32_t crypto_random_range(uint32_t lo, uint32_t hi)
{
    uint32_t span = hi - lo, r;
    if (hi <= lo)
        return lo;
    /* Rejection sampling: drop the biased tail of the 32-bit range (bounded: p < 1/2). */
    uint32_t limit = UINT32_MAX - (UINT32_MAX % span);
    for (int tries = 0; tries < 64; tries++) {
        if (crypto_random(&r, sizeof r) != 0)
            return lo;
        if (r < limit)
            return lo + r % span;
    }
    return lo + r % span;
}

int crypto_x25519_public(const uint8_t scalar[32], uint8_t pub[32])
{
    size_t len = 32;
    EVP_PKEY *k = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, scalar, 32);
    if (!k)
        return -EIO;
    int ok = EVP_PKEY_get_raw_public_key(k, pub, &len) == 1 && len == 32;
    EVP_PKEY_free(k);
    return ok ? 0 : -EIO;
}

int crypto_x25519_random_public(uint8_t pub[32])
{
    /* keygen through a fresh context measured ~20% cheaper than raw scalar -> public */
    EVP_PKEY *k = NULL;
    size_t len = 32;
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_id(EVP_PKEY_X25519, NULL);
    int ok = c && EVP_PKEY_keygen_init(c) == 1 && EVP_PKEY_keygen(c, &k) == 1 &&
             EVP_PKEY_get_raw_public_key(k, pub, &len) == 1 && len == 32;
    EVP_PKEY_free(k);
    EVP_PKEY_CTX_free(c);
    return ok ? 0 : -EIO;
}

void crypto_wipe(void *p, size_t n)
{
    OPENSSL_cleanse(p, n);
}
