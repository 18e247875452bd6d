/*
 * token_files.c — the files a dataset reads tokens from, and the bounded
 * window of them that is memory-mapped.
 *
 * A token file is an llm.c token file (256 int32 — magic 20240520, version
 * 1, token count N — then N uint16 tokens, little-endian; or llm.c's Llama 3
 * kind, magic 20240801, version 7, N uint32 tokens) or, for a single --data
 * file only, text (token = byte, one byte each). Opening checks the
 * header against the file's size and keeps a descriptor for the run, so the
 * run reads the files it checked even when they are renamed or removed
 * under it (a thousand shards are a thousand descriptors: ulimit -n).
 *
 * Tokens are read through read-only shared mappings of 64 MiB blocks of a
 * file, a few at a time: at most MAP_KEEP blocks stay mapped while nobody
 * reads them, so a corpus of any size costs a few blocks of address space
 * and of resident pages, and a reader touches only the pages of the rows it
 * reads. Device threads read concurrently; the window is guarded by a mutex
 * and a block in use is never unmapped. Where a mapping cannot be made (no
 * address space left, every slot in use) the tokens are read with pread.
 */
#include "io/io_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "llm.c token files are little-endian; token_files.c reads them in place"
#endif

#define TOKENS_MAGIC   MT__TOKENS_MAGIC
#define TOKENS_VERSION MT__TOKENS_VERSION
#define HEADER_INTS    MT__TOKENS_HEADER_INTS
#define HEADER_BYTES   (HEADER_INTS * (int64_t)sizeof(int32_t))

#define MAP_BLOCK ((int64_t)64 << 20)   /* bytes a mapping covers; a multiple of any page */
#define MAP_SLOTS 64                    /* blocks mapped at once, at most (readers in flight) */
#define MAP_KEEP  2                     /* idle blocks left mapped for the next reads */

/* ======================================================================== */
/* Opening                                                                   */
/* ======================================================================== */

/* Checks an llm.c header `hdr` of a file of `size` bytes; `what` names it
 * ("dataset 'a.bin'", "shard 'x/fineweb_train_000001.bin'"). Its tokens'
 * bytes into *width: 2 under magic 20240520, 4 under 20240801. */
static mt_status check_header(const char *what, int64_t size, const int32_t *hdr, int64_t *n,
                              int *width) {
    if (size < HEADER_BYTES)
        return mt_fail(MT_EFORMAT, "%s is truncated: it holds %lld bytes, less than the "
                       "%lld-byte llm.c header", what, (long long)size, (long long)HEADER_BYTES);
    const bool wide = hdr[0] == MT__TOKENS32_MAGIC;
    const int version = wide ? MT__TOKENS32_VERSION : TOKENS_VERSION;
    if (hdr[1] != version)
        return mt_fail(MT_EFORMAT, "%s has magic %d and version %d, expected version %d (%s "
                       "tokens, llm.c's %s files)", what, hdr[0], hdr[1], version,
                       wide ? "uint32" : "uint16", wide ? "Llama 3" : "GPT-2");
    const int w = wide ? 4 : 2;
    *width = w;
    *n = hdr[2];
    int64_t held = (size - HEADER_BYTES) / w;
    if (*n <= 0)
        return mt_fail(MT_EFORMAT, "%s has a token count of %lld in its header; it must hold "
                       "at least one token", what, (long long)*n);
    if (held < *n)
        return mt_fail(MT_EFORMAT, "%s is truncated: the header says %lld tokens, the file "
                       "holds %lld", what, (long long)*n, (long long)held);
    if (size != HEADER_BYTES + w * *n)
        return mt_fail(MT_EFORMAT, "%s has %lld bytes after its %lld tokens; the header's token "
                       "count is wrong or the file was appended to", what,
                       (long long)(size - HEADER_BYTES - w * *n), (long long)*n);
    return MT_OK;
}

mt_status mt__tokfile_open(const char *path, bool shard, mt__tokfile *tf) {
    memset(tf, 0, sizeof *tf);
    tf->fd = -1;
    const char *kind = shard ? "shard" : "dataset";
    char what[PATH_MAX + 16];
    snprintf(what, sizeof what, "%s '%s'", kind, path);
    FILE *f;
    int64_t size = 0;
    mt_status s = mt_input_open(path, kind, 0, &f, &size);   /* never blocks: a FIFO is refused */
    if (s != MT_OK) return s;
    int32_t hdr[HEADER_INTS] = {0};
    size_t got = fread(hdr, 1, size < HEADER_BYTES ? (size_t)size : (size_t)HEADER_BYTES, f);
    bool short_read = got != (size_t)(size < HEADER_BYTES ? size : HEADER_BYTES);
    int fd = fcntl(fileno(f), F_DUPFD_CLOEXEC, 0);
    int dup_err = errno;
    fclose(f);
    if (fd < 0)
        return mt_fail(MT_EIO, "cannot keep %s open: %s%s", what, strerror(dup_err),
                       dup_err == EMFILE ? " (a dataset holds one descriptor a shard: raise "
                                           "`ulimit -n`, or train on fewer shards)" : "");
    tf->fd = fd;
    if (short_read)
        return mt_fail(MT_EIO, "reading the header of %s: got %zu bytes (%s)", what, got,
                       "the file shrank while reading");
    if (size == 0)
        return mt_fail(MT_EFORMAT, "%s is empty; give %s with at least one token", what,
                       shard ? "an llm.c token shard" : "a text file or an llm.c token file");
    bool tokens = got >= sizeof(int32_t) &&
                  (hdr[0] == TOKENS_MAGIC || hdr[0] == MT__TOKENS32_MAGIC);
    if (shard && !tokens)
        return mt_fail(MT_EFORMAT, "%s is not an llm.c token file: its first int32 is %d, not "
                       "the magic %d (uint16 tokens) or %d (uint32); shards are what llm.c's "
                       "data scripts write (a text file is a dataset of its own: give it alone "
                       "to --data)", what, got >= 4 ? hdr[0] : 0, TOKENS_MAGIC,
                       MT__TOKENS32_MAGIC);
    if (tokens) {
        if ((s = check_header(what, size, hdr, &tf->n, &tf->width)) != MT_OK) return s;
        tf->header = HEADER_BYTES;
    } else {
        tf->n = size;
        tf->header = 0;
        tf->width = 1;
    }
    tf->size = size;
    tf->path = strdup(path);
    if (!tf->path) return mt_fail(MT_ENOMEM, "no memory for the name of %s", what);
    return MT_OK;
}

void mt__tokfile_close(mt__tokfile *tf) {
    if (!tf) return;
    if (tf->fd >= 0) close(tf->fd);
    tf->fd = -1;
    free(tf->path);
    tf->path = NULL;
}

/* Checks tf's file is still the size it was opened with (one truncated or
 * appended to in place under a run would give other tokens, or SIGBUS past
 * its new end). */
static mt_status check_size(const mt__tokfile *tf) {
    struct stat st;
    if (fstat(tf->fd, &st) != 0 || (int64_t)st.st_size != tf->size)
        return mt_fail(MT_EIO, "token file '%s' changed since the run opened it (%lld bytes "
                       "then); do not rewrite a dataset in place while it trains", tf->path,
                       (long long)tf->size);
    return MT_OK;
}

/* Reads `n` bytes at `off` of fd into buf; MT_EIO naming the file. */
static mt_status pread_all(int fd, const mt__tokfile *tf, int64_t off, void *buf, size_t n) {
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, (char *)buf + done, n - done, (off_t)(off + (int64_t)done));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return mt_fail(MT_EIO, "reading token file '%s' at byte %lld: %s", tf->path,
                           (long long)(off + (int64_t)done),
                           r < 0 ? strerror(errno) : "the file ended early");
        done += (size_t)r;
    }
    return MT_OK;
}

/* The largest of the n tokens at p (width 1, 2 or 4 bytes). The lanes' inner
 * loop has a fixed count, so -O2's cheap vectoriser takes it (a plain
 * running max stays scalar there, 4x slower than the reads): the scan of a
 * corpus runs at the speed of its reads. */
#define LANES 64
/* The largest of the n tokens of type T at p, by lanes, into m. */
#define LANES_MAX(T, p, n, m)                                                                 \
    do {                                                                                      \
        const T *t_ = (const T *)(const void *)(p);                                           \
        T lane_[LANES] = {0};                                                                 \
        size_t i_ = 0;                                                                        \
        for (; i_ + LANES <= (n); i_ += LANES)                                                \
            for (int k = 0; k < LANES; k++)                                                   \
                lane_[k] = t_[i_ + k] > lane_[k] ? t_[i_ + k] : lane_[k];                     \
        for (int k = 0; k < LANES; k++) (m) = lane_[k] > (m) ? lane_[k] : (m);                \
        for (; i_ < (n); i_++) (m) = t_[i_] > (m) ? t_[i_] : (m);                             \
    } while (0)
static unsigned chunk_max(const unsigned char *p, size_t n, int width) {
    unsigned m = 0;
    if (width == 1) LANES_MAX(unsigned char, p, n, m);
    else if (width == 4) LANES_MAX(uint32_t, p, n, m);
    else LANES_MAX(uint16_t, p, n, m);
    return m;
}
#undef LANES_MAX
#undef LANES

mt_status mt__tokfile_scan(const mt__tokfile *tf, int bound, mt__tokscan *out) {
    /* text: every byte is a token of the byte vocabulary, read only when
     * the bound is below it */
    *out = (mt__tokscan){.vocab = tf->width == 1 ? MT_BYTE_VOCAB : 0, .max_id = -1,
                         .first_bad = -1, .bad_id = -1};
    if (tf->width == 1 && (bound <= 0 || bound >= MT_BYTE_VOCAB)) return MT_OK;
    enum { CHUNK = 1 << 20 };   /* bytes a read, through the page cache, not mapped */
    unsigned char *buf = malloc(CHUNK);
    if (!buf) return mt_fail(MT_ENOMEM, "no memory to scan token file '%s'", tf->path);
    mt_status s = MT_OK;
    unsigned maxtok = 0;
    int64_t per = CHUNK / tf->width;
    for (int64_t at = 0; s == MT_OK && at < tf->n; at += per) {
        size_t m = (size_t)(tf->n - at < per ? tf->n - at : per);
        s = pread_all(tf->fd, tf, tf->header + at * tf->width, buf, m * (size_t)tf->width);
        if (s != MT_OK) break;
        unsigned cm = chunk_max(buf, m, tf->width);
        if (cm > maxtok) maxtok = cm;
        if (bound > 0 && cm >= (unsigned)bound && out->first_bad < 0) {
            for (size_t i = 0; i < m; i++) {   /* the first one past, once */
                unsigned v = tf->width == 1   ? buf[i]
                             : tf->width == 4 ? ((const uint32_t *)(void *)buf)[i]
                                              : ((const uint16_t *)(void *)buf)[i];
                if (v >= (unsigned)bound) {
                    out->first_bad = at + (int64_t)i;
                    out->bad_id = (int)v;
                    break;
                }
            }
        }
    }
    free(buf);
    if (s == MT_OK && maxtok >= (unsigned)INT32_MAX)
        return mt_fail(MT_EFORMAT, "token file '%s' holds the id %u, past the %d a vocabulary "
                       "can have; the file is not tokens", tf->path, maxtok, INT32_MAX - 1);
    out->max_id = (int)maxtok;
    if (tf->width != 1) out->vocab = (int)maxtok + 1;
    return s;
}

/* ======================================================================== */
/* The mapped window                                                         */
/* ======================================================================== */

typedef struct {
    int      file;      /* index into the files; -1: the slot is empty */
    int64_t  block;     /* bytes [block·MAP_BLOCK, +len) of the file */
    char    *addr;
    size_t   len;
    int      refs;      /* readers copying from it now */
    uint64_t used;      /* the window's clock at its last use (least recent unmapped first) */
} map_slot;

struct mt__tokmap {
    const mt__tokfile *files;
    int                n_files;
    pthread_mutex_t    mu;
    uint64_t           clock;
    map_slot           slot[MAP_SLOTS];
};

mt_status mt__tokmap_create(const mt__tokfile *files, int n_files, mt__tokmap **out) {
    *out = NULL;
    mt__tokmap *m = calloc(1, sizeof *m);
    if (!m) return mt_fail(MT_ENOMEM, "no memory for the dataset's mapping window");
    if (pthread_mutex_init(&m->mu, NULL) != 0) {
        free(m);
        return mt_fail(MT_ENOMEM, "cannot make the dataset's mapping window's mutex");
    }
    m->files = files;
    m->n_files = n_files;
    for (int i = 0; i < MAP_SLOTS; i++) m->slot[i].file = -1;
    *out = m;
    return MT_OK;
}

void mt__tokmap_free(mt__tokmap *m) {
    if (!m) return;
    for (int i = 0; i < MAP_SLOTS; i++)
        if (m->slot[i].addr) munmap(m->slot[i].addr, m->slot[i].len);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

/* Unmaps the least recently used idle blocks past MAP_KEEP (`room`: also
 * one more, to free a slot for a new block). Under m->mu. */
static void trim(mt__tokmap *m, bool room) {
    for (;;) {
        int idle = 0, lru = -1, empty = 0;
        for (int i = 0; i < MAP_SLOTS; i++) {
            map_slot *sl = &m->slot[i];
            if (!sl->addr) { empty++; continue; }
            if (sl->refs > 0) continue;
            idle++;
            if (lru < 0 || sl->used < m->slot[lru].used) lru = i;
        }
        if (lru < 0 || (idle <= MAP_KEEP && (!room || empty > 0))) return;
        munmap(m->slot[lru].addr, m->slot[lru].len);
        m->slot[lru].addr = NULL;
        m->slot[lru].file = -1;
    }
}

/* The slot holding block `block` of file f, mapped now if it is not, with a
 * reference taken; NULL when it cannot be mapped (the caller preads). */
static map_slot *acquire(mt__tokmap *m, int f, int64_t block) {
    pthread_mutex_lock(&m->mu);
    map_slot *hit = NULL, *free_slot = NULL;
    for (int i = 0; i < MAP_SLOTS && !hit; i++) {
        map_slot *sl = &m->slot[i];
        if (sl->addr && sl->file == f && sl->block == block) hit = sl;
        else if (!sl->addr && !free_slot) free_slot = sl;
    }
    if (!hit) {
        if (!free_slot) {
            trim(m, true);
            for (int i = 0; i < MAP_SLOTS && !free_slot; i++)
                if (!m->slot[i].addr) free_slot = &m->slot[i];
        }
        const mt__tokfile *tf = &m->files[f];
        if (free_slot && check_size(tf) == MT_OK) {
            int64_t off = block * MAP_BLOCK;
            size_t len = (size_t)(tf->size - off < MAP_BLOCK ? tf->size - off : MAP_BLOCK);
            void *a = mmap(NULL, len, PROT_READ, MAP_SHARED, tf->fd, (off_t)off);
            if (a != MAP_FAILED) {
                madvise(a, len, MADV_SEQUENTIAL);   /* streamed forward: read ahead, drop behind */
                *free_slot = (map_slot){.file = f, .block = block, .addr = a, .len = len};
                hit = free_slot;
            }
        }
    }
    if (hit) {
        hit->refs++;
        hit->used = ++m->clock;
    }
    pthread_mutex_unlock(&m->mu);
    return hit;
}

static void release(mt__tokmap *m, map_slot *sl) {
    pthread_mutex_lock(&m->mu);
    sl->refs--;
    trim(m, false);
    pthread_mutex_unlock(&m->mu);
}

/* out[i] = the token at byte p + i·width, i < n. */
static void widen(int32_t *out, const unsigned char *p, int64_t n, int width) {
    if (width == 1) {
        for (int64_t i = 0; i < n; i++) out[i] = p[i];
    } else if (width == 4) {   /* ids past INT32_MAX are refused by the scan */
        for (int64_t i = 0; i < n; i++) {
            uint32_t v;
            memcpy(&v, p + 4 * i, 4);
            out[i] = (int32_t)v;
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            uint16_t v;
            memcpy(&v, p + 2 * i, 2);
            out[i] = v;
        }
    }
}

/* Tokens [first, first+n) of file f, all in one block, without a mapping. */
static mt_status read_unmapped(const mt__tokfile *tf, int64_t first, int64_t n, int32_t *out) {
    unsigned char buf[1 << 13];
    mt_status s = check_size(tf);
    int64_t per = (int64_t)sizeof buf / tf->width;
    for (int64_t at = 0; s == MT_OK && at < n; at += per) {
        int64_t k = n - at < per ? n - at : per;
        s = pread_all(tf->fd, tf, tf->header + (first + at) * tf->width, buf,
                      (size_t)(k * tf->width));
        if (s == MT_OK) widen(out + at, buf, k, tf->width);
    }
    return s;
}

mt_status mt__tokmap_read(mt__tokmap *m, int f, int64_t first, int64_t n, int32_t *out) {
    const mt__tokfile *tf = &m->files[f];
    while (n > 0) {
        int64_t byte = tf->header + first * tf->width;
        int64_t block = byte / MAP_BLOCK;
        /* tokens are 1 or 2 bytes at an even header: none straddles a block */
        int64_t in_block = ((block + 1) * MAP_BLOCK - byte) / tf->width;
        int64_t k = n < in_block ? n : in_block;
        map_slot *sl = acquire(m, f, block);
        if (sl) {
            widen(out, (const unsigned char *)sl->addr + (byte - block * MAP_BLOCK), k, tf->width);
            release(m, sl);
        } else {
            mt_status s = read_unmapped(tf, first, k, out);
            if (s != MT_OK) return s;
        }
        first += k;
        out += k;
        n -= k;
    }
    return MT_OK;
}

int mt__tokmap_mapped(mt__tokmap *m) {
    pthread_mutex_lock(&m->mu);
    int n = 0;
    for (int i = 0; i < MAP_SLOTS; i++) n += m->slot[i].addr != NULL;
    pthread_mutex_unlock(&m->mu);
    return n;
}
