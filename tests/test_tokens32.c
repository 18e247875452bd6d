/*
 * test_tokens32.c — llm.c's uint32 token files (its Llama 3 kind: a header
 * of 256 int32, magic 20240801, version 7, the token count, then uint32
 * tokens little-endian; llm.c's dev/data/data_common.py), for vocabularies
 * past the 65,536 ids a uint16 file holds (Llama 3's 128,256, Qwen's
 * 151,936).
 *
 * The references are the bytes the test lays out itself, int by int, and
 * the uint16 file of the same ids:
 *   - mt_tokens_write of ids past 65,535 writes exactly those bytes, and of
 *     ids below it the uint16 kind, as before;
 *   - a file built by hand (and one from mt_tokens_write) read as a dataset
 *     and as a shard gives its ids back, batch for batch the uint16 file's
 *     where the ids fit both, the vocabulary its largest id + 1;
 *   - bad files refused naming what is wrong: the uint16 version under the
 *     uint32 magic, a payload of uint16 size, an id past INT32_MAX, an id past
 *     a bounded vocabulary.
 */
#include "harness.h"
#include "meshtrain.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define N 1000

typedef struct {
    char dir[64];
    char path[128];
} tmp;

static const char *tmp_file(tmp *t, const char *name) {
    if (!t->dir[0]) {
        snprintf(t->dir, sizeof t->dir, "/tmp/mt_tokens32_XXXXXX");
        MT_CHECK(mkdtemp(t->dir) != NULL, "mkdtemp");
    }
    snprintf(t->path, sizeof t->path, "%s/%s", t->dir, name);
    return t->path;
}

static void tmp_clean(tmp *t) {
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->dir);
    MT_CHECK(system(cmd) == 0, "%s", cmd);
}

/* The ids: i·7919 mod 150000 (past uint16 from i = 9), or below 60000. */
static void ids_of(int32_t *ids, bool wide) {
    for (int i = 0; i < N; i++) ids[i] = (int32_t)((int64_t)i * 7919 % (wide ? 150000 : 60000));
}

/* llm.c's file of ids (n), laid out here: the header's 256 little-endian
 * int32, then each id in `width` bytes, little-endian. */
static size_t layout(const int32_t *ids, int n, int32_t magic, int32_t version, int width,
                     unsigned char *out) {
    memset(out, 0, 1024);
    const uint32_t h[3] = {(uint32_t)magic, (uint32_t)version, (uint32_t)n};
    for (int k = 0; k < 3; k++)
        for (int b = 0; b < 4; b++) out[4 * k + b] = (unsigned char)(h[k] >> (8 * b));
    for (int i = 0; i < n; i++)
        for (int b = 0; b < width; b++)
            out[1024 + (size_t)i * width + b] = (unsigned char)((uint32_t)ids[i] >> (8 * b));
    return 1024 + (size_t)n * width;
}

static void write_bytes(const char *path, const unsigned char *b, size_t n) {
    FILE *f = fopen(path, "wb");
    MT_CHECK(f && fwrite(b, 1, n, f) == n && fclose(f) == 0, "writing %s", path);
}

static unsigned char *read_bytes(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    MT_CHECK(f != NULL, "opening %s", path);
    unsigned char *b = malloc(1024 + 4 * N + 16);
    *n = f ? fread(b, 1, 1024 + 4 * N + 16, f) : 0;
    if (f) fclose(f);
    return b;
}

MT_TEST(write_lays_out_llm_c_s_two_kinds) {
    tmp t = {0};
    int32_t ids[N];
    unsigned char *want = malloc(1024 + 4 * N);
    for (int wide = 0; wide <= 1; wide++) {
        ids_of(ids, wide);
        const char *path = tmp_file(&t, wide ? "w32.bin" : "w16.bin");
        MT_CHECK_OK(mt_tokens_write(path, ids, N));
        size_t n_want = wide ? layout(ids, N, 20240801, 7, 4, want)
                             : layout(ids, N, 20240520, 1, 2, want);
        size_t n_got;
        unsigned char *got = read_bytes(path, &n_got);
        MT_CHECK(n_got == n_want && !memcmp(got, want, n_want),
                 "%s: %zu bytes, want %zu, %s", path, n_got, n_want,
                 n_got == n_want ? "the bytes differ" : "the sizes differ");
        free(got);
        mt_file_kind kind;
        MT_CHECK_OK(mt_file_detect(path, &kind));
        MT_CHECK(kind == MT_FILE_TOKENS, "%s detected as %d", path, (int)kind);
    }
    /* the edge: 65535 is the last id of the uint16 kind, 65536 the first past */
    for (int32_t id = 65535; id <= 65536; id++) {
        int32_t two[2] = {7, id};
        const char *path = tmp_file(&t, "edge.bin");
        MT_CHECK_OK(mt_tokens_write(path, two, 2));
        size_t n_want = layout(two, 2, id > 65535 ? 20240801 : 20240520, id > 65535 ? 7 : 1,
                               id > 65535 ? 4 : 2, want);
        size_t n_got;
        unsigned char *got = read_bytes(path, &n_got);
        MT_CHECK(n_got == n_want && !memcmp(got, want, n_want), "ids 7, %d: %zu bytes, want %zu",
                 id, n_got, n_want);
        free(got);
    }
    ids[3] = -1;
    MT_CHECK_FAILS(mt_tokens_write(tmp_file(&t, "neg.bin"), ids, N), MT_EINVAL, "token 3",
                   "negative");
    MT_CHECK(access(t.path, F_OK) != 0, "a refused write left %s", t.path);
    free(want);
    tmp_clean(&t);
}

/* Every batch of (B, T) windows of `a` and `b` from position 0, the same. */
static void same_batches(mt_dataset *a, mt_dataset *b, const int32_t *ids, const char *what) {
    enum { B = 3, T = 16 };
    int32_t x[B * T], y[B * T], u[B * T], v[B * T];
    int64_t pa = 0, pb = 0;
    for (int step = 0; step < 40; step++) {
        MT_CHECK_OK(mt_dataset_batch(a, 0, &pa, B, T, x, y));
        MT_CHECK_OK(mt_dataset_batch(b, 0, &pb, B, T, u, v));
        MT_CHECK(!memcmp(x, u, sizeof x) && !memcmp(y, v, sizeof y),
                 "%s: batch %d differs (%d vs %d first)", what, step, x[0], u[0]);
    }
    /* and the first window is the ids themselves */
    int64_t p = 0;
    MT_CHECK_OK(mt_dataset_batch(a, 0, &p, 1, T, x, y));
    for (int i = 0; i < T; i++)
        MT_CHECK(x[i] == ids[i] && y[i] == ids[i + 1], "%s: token %d is %d/%d, want %d/%d",
                 what, i, x[i], y[i], ids[i], ids[i + 1]);
}

MT_TEST(datasets_read_the_uint32_kind) {
    tmp t = {0};
    int32_t ids[N];
    unsigned char *b = malloc(1024 + 4 * N);
    /* ids that fit both kinds: the uint32 file reads as the uint16 one */
    ids_of(ids, false);
    write_bytes(tmp_file(&t, "narrow32.bin"), b, layout(ids, N, 20240801, 7, 4, b));
    MT_CHECK_OK(mt_tokens_write(tmp_file(&t, "narrow16.bin"), ids, N));
    mt_dataset *a = NULL, *c = NULL;
    MT_CHECK_OK(mt_dataset_open(tmp_file(&t, "narrow32.bin"), 0.0, &a));
    MT_CHECK_OK(mt_dataset_open(tmp_file(&t, "narrow16.bin"), 0.0, &c));
    MT_CHECK(mt_dataset_tokens(a, 0) == N && mt_dataset_vocab(a) == mt_dataset_vocab(c),
             "%lld tokens, vocab %d; uint16: vocab %d", (long long)mt_dataset_tokens(a, 0),
             mt_dataset_vocab(a), mt_dataset_vocab(c));
    same_batches(a, c, ids, "uint32 against uint16");
    mt_dataset_free(a);
    mt_dataset_free(c);
    /* ids past uint16, by hand and from the writer, as a file and a shard */
    ids_of(ids, true);
    int32_t most = 0;
    for (int i = 0; i < N; i++) most = ids[i] > most ? ids[i] : most;
    write_bytes(tmp_file(&t, "wide.bin"), b, layout(ids, N, 20240801, 7, 4, b));
    char dir[160];
    snprintf(dir, sizeof dir, "%s/shards", t.dir);
    MT_CHECK(mkdir(dir, 0700) == 0, "mkdir %s", dir);
    MT_CHECK_OK(mt_tokens_write(tmp_file(&t, "shards/x_train_000001.bin"), ids, N));
    MT_CHECK_OK(mt_dataset_open(tmp_file(&t, "wide.bin"), 0.0, &a));
    MT_CHECK_OK(mt_dataset_open(dir, 0.0, &c));
    MT_CHECK(mt_dataset_vocab(a) == most + 1 && mt_dataset_vocab(c) == most + 1,
             "vocab %d and %d (shard), want %d", mt_dataset_vocab(a), mt_dataset_vocab(c),
             most + 1);
    same_batches(a, c, ids, "hand-made file against the writer's shard");
    mt_dataset_free(a);
    mt_dataset_free(c);
    free(b);
    tmp_clean(&t);
}

MT_TEST(bad_uint32_files_are_refused) {
    tmp t = {0};
    int32_t ids[N];
    ids_of(ids, true);
    unsigned char *b = malloc(1024 + 4 * N);
    mt_dataset *d = NULL;
    /* the uint16 kind's version under the uint32 magic */
    write_bytes(tmp_file(&t, "v1.bin"), b, layout(ids, N, 20240801, 1, 4, b));
    MT_CHECK_FAILS(mt_dataset_open(t.path, 0.0, &d), MT_EFORMAT, "v1.bin", "version 1",
                   "expected version 7", "uint32");
    /* a payload of uint16 size under the uint32 magic */
    write_bytes(tmp_file(&t, "half.bin"), b, layout(ids, N, 20240801, 7, 2, b));
    MT_CHECK_FAILS(mt_dataset_open(t.path, 0.0, &d), MT_EFORMAT, "half.bin", "truncated");
    /* an id past INT32_MAX */
    ids[5] = -7;   /* 0xfffffff9 as uint32 */
    write_bytes(tmp_file(&t, "huge.bin"), b, layout(ids, N, 20240801, 7, 4, b));
    MT_CHECK_FAILS(mt_dataset_open(t.path, 0.0, &d), MT_EFORMAT, "huge.bin", "4294967289");
    /* an id past a bounded vocabulary: named with its index */
    ids_of(ids, true);
    write_bytes(tmp_file(&t, "bound.bin"), b, layout(ids, N, 20240801, 7, 4, b));
    MT_CHECK_FAILS(mt_dataset_open_bounded(t.path, 0.0, 128256, &d), MT_EINVAL, "bound.bin",
                   "outside the model's vocabulary of 128256");
    free(b);
    tmp_clean(&t);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
