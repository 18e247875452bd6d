/*
 * test_shards.c — datasets larger than memory: llm.c's sharded corpora (a
 * directory or glob of *_train_*.bin / *_val_*.bin), read through a bounded
 * window of mappings, and text at one byte a token.
 *
 * The references are independent of the loader: the tokens the test wrote,
 * cut into windows by the rule written out here; the one-file dataset of the
 * shards' concatenation (whose batches test_io pins by hand); the one-device
 * and the uninterrupted runs.
 */
#include "harness.h"
#include "io/io_impl.h"
#include "train_helpers.h"
#include "meshtrain.h"

#include <fcntl.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------ */

static void make_dir(char *tmpl) { MT_CHECK(mkdtemp(tmpl) != NULL, "mkdtemp %s", tmpl); }

static void rm_dir(const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    MT_CHECK(system(cmd) == 0, "%s", cmd);
}

/* Writes tok (n) as an llm.c token file dir/name. */
static void write_shard(const char *dir, const char *name, const int32_t *tok, int64_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    MT_CHECK_OK(mt_tokens_write(path, tok, n));
}

static void write_file(const char *path, const void *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    MT_CHECK(f && fwrite(bytes, 1, n, f) == n && fclose(f) == 0, "writing %s", path);
}

/* A field of /proc/self/status in KiB ("VmHWM", "VmRSS"). */
static long status_kib(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    MT_CHECK(f, "/proc/self/status");
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':') v = atol(line + n + 1);
    fclose(f);
    MT_CHECK(v >= 0, "no %s in /proc/self/status", field);
    return v;
}

/* The reference windows: row b of the batch at p over a split of `len`
 * tokens `all` starts at p_b, p_0 = p, restarting at 0 where p_b + T + 1
 * would pass len, p_{b+1} = p_b + T. Checks x, y (B,T) against them and
 * returns the position after. */
static int64_t check_batch(const int32_t *all, int64_t len, int64_t p, int B, int T,
                           const int32_t *x, const int32_t *y, const char *what) {
    for (int b = 0; b < B; b++) {
        if (p + T + 1 > len) p = 0;
        for (int t = 0; t < T; t++) {
            MT_CHECK(x[b * T + t] == all[p + t], "%s: x[%d][%d] = %d, want %d (token %lld)",
                     what, b, t, x[b * T + t], all[p + t], (long long)(p + t));
            MT_CHECK(y[b * T + t] == all[p + t + 1], "%s: y[%d][%d] = %d, want %d", what, b, t,
                     y[b * T + t], all[p + t + 1]);
        }
        p += T;
    }
    return p;
}

/* A small corpus: train shards 000001..000004 of 200, 300, 250, 210 tokens
 * (960) and one val shard of 320 written to dir, with a tokenizer and a
 * README llm.c leaves beside them; all (1280) holds train then val. */
enum { N_TRAIN = 960, N_VAL = 320, N_ALL = N_TRAIN + N_VAL };
static const int SHARD_LEN[4] = {200, 300, 250, 210};

static void write_corpus(const char *dir, int32_t *all) {
    for (int i = 0; i < N_ALL; i++) all[i] = (i * 37 + i / 7) % 97;
    all[555] = 300;   /* the vocabulary comes from every shard */
    write_shard(dir, "tiny_val_000000.bin", all + N_TRAIN, N_VAL);
    /* written out of order: name order decides */
    int64_t at[4] = {0, 200, 500, 750};
    char name[64];
    for (int k = 3; k >= 0; k--) {
        snprintf(name, sizeof name, "tiny_train_%06d.bin", k + 1);
        write_shard(dir, name, all + at[k], SHARD_LEN[k]);
    }
    char path[512];
    snprintf(path, sizeof path, "%s/README", dir);
    write_file(path, "not a shard\n", 12);
}

/* ---- the shards are one stream ------------------------------------------ */

MT_TEST(shards_are_one_stream_in_name_order) {
    char dir[] = "/tmp/mt_test_shards_XXXXXX";
    make_dir(dir);
    int32_t all[N_ALL];
    write_corpus(dir, all);
    char glob[600];
    snprintf(glob, sizeof glob, "%s/tiny_*.bin", dir);

    const char *paths[2] = {dir, glob};
    for (int k = 0; k < 2; k++) {
        MT_CHECK(mt_dataset_is_sharded(paths[k]), "%s is not taken as shards", paths[k]);
        mt_dataset *ds;
        MT_CHECK_OK(mt_dataset_open(paths[k], 0.5 /* not used */, &ds));
        MT_CHECK(mt_dataset_tokens(ds, 0) == N_TRAIN && mt_dataset_tokens(ds, 1) == N_VAL,
                 "%s: splits %lld/%lld", paths[k], (long long)mt_dataset_tokens(ds, 0),
                 (long long)mt_dataset_tokens(ds, 1));
        MT_CHECK(mt_dataset_files(ds, 0) == 4 && mt_dataset_files(ds, 1) == 1, "files %d/%d",
                 mt_dataset_files(ds, 0), mt_dataset_files(ds, 1));
        MT_CHECK(mt_dataset_vocab(ds) == 301, "vocab %d", mt_dataset_vocab(ds));
        /* from every start, across shard ends (200, 500, 750) and the split's */
        enum { B = 5, T = 33 };
        int32_t x[B * T], y[B * T], xr[2 * T], yr[2 * T];
        for (int64_t p0 = 0; p0 < N_TRAIN + 40; p0 += 7) {
            int64_t pos = p0;
            MT_CHECK_OK(mt_dataset_batch(ds, 0, &pos, B, T, x, y));
            int64_t want = check_batch(all, N_TRAIN, p0, B, T, x, y, "train");
            MT_CHECK(pos == want, "pos %lld after a batch at %lld, want %lld", (long long)pos,
                     (long long)p0, (long long)want);
            /* rows 2..3 alone: the same tokens, the same position after */
            int64_t rpos = p0;
            MT_CHECK_OK(mt_dataset_rows(ds, 0, &rpos, B, T, 2, 2, xr, yr));
            MT_CHECK(rpos == pos && memcmp(xr, x + 2 * T, sizeof xr) == 0 &&
                     memcmp(yr, y + 2 * T, sizeof yr) == 0, "rows 2..3 at %lld", (long long)p0);
        }
        int64_t pos = 0;
        MT_CHECK_OK(mt_dataset_batch(ds, 1, &pos, B, T, x, y));
        check_batch(all + N_TRAIN, N_VAL, 0, B, T, x, y, "val");
        MT_CHECK_FAILS(mt_dataset_rows(ds, 0, &pos, B, T, 4, 2, xr, yr), MT_EINVAL, "[4, 6)");
        mt_dataset_free(ds);
    }
    rm_dir(dir);
}

/* With the vocabulary given every token is checked at open: the batches are
 * the scanned dataset's, and a token past the vocabulary (token 555 of the
 * stream, id 300: the 56th of shard 000003) fails the open, naming the
 * shard, its index there and the id, before any batch. A shard rewritten in
 * place under an open dataset (same size) is still caught as its batch is
 * cut. */
MT_TEST(a_given_vocabulary_is_checked_at_open) {
    char dir[] = "/tmp/mt_test_shards_XXXXXX";
    make_dir(dir);
    int32_t all[N_ALL];
    write_corpus(dir, all);
    mt_dataset *ds;
    MT_CHECK_FAILS(mt_dataset_open_bounded(dir, 0, -1, &ds), MT_EINVAL, "negative");
    MT_CHECK_OK(mt_dataset_open_bounded(dir, 0, 4096, &ds));
    MT_CHECK(mt_dataset_vocab(ds) == 4096, "vocab %d, want the one given", mt_dataset_vocab(ds));
    enum { B = 2, T = 16 };
    int32_t x[B * T], y[B * T];
    for (int64_t p0 = 0; p0 < N_TRAIN; p0 += 5) {
        int64_t pos = p0;
        MT_CHECK_OK(mt_dataset_batch(ds, 0, &pos, B, T, x, y));
        check_batch(all, N_TRAIN, p0, B, T, x, y, "bounded");
    }
    mt_dataset_free(ds);

    char want[700], shard3[80];   /* dir is 26 bytes */
    snprintf(shard3, sizeof shard3, "%s/tiny_train_000003.bin", dir);
    snprintf(want, sizeof want, "shard '%s' holds id 300 at token 55,", shard3);
    ds = (mt_dataset *)dir;   /* must come back NULL */
    MT_CHECK_FAILS(mt_dataset_open_bounded(dir, 0, 300, &ds), MT_EINVAL, want,
                   "vocabulary of 300 (ids 0..299)", "largest id is 300", "at least 301");
    MT_CHECK(ds == NULL, "ds set on failure");

    /* in place, under an open dataset: token 55 of shard 000003 becomes 400 */
    MT_CHECK_OK(mt_dataset_open_bounded(dir, 0, 301, &ds));
    int fd = open(shard3, O_WRONLY);
    uint16_t v = 400;
    MT_CHECK(fd >= 0 && pwrite(fd, &v, 2, 1024 + 2 * 55) == 2 && close(fd) == 0, "rewriting %s",
             shard3);
    snprintf(want, sizeof want, "token 55 of '%s' is id 400", shard3);
    for (int64_t p0 = 0; p0 + B * T + 1 <= N_TRAIN; p0 += 5) {
        int64_t pos = p0;
        if (p0 <= 555 && 555 <= p0 + B * T)   /* the window holds it (as input or target) */
            MT_CHECK_FAILS(mt_dataset_batch(ds, 0, &pos, B, T, x, y), MT_EFORMAT, want);
        else
            MT_CHECK_OK(mt_dataset_batch(ds, 0, &pos, B, T, x, y));
    }
    mt_dataset_free(ds);
    rm_dir(dir);
}

MT_TEST(shard_errors_name_the_shard) {
    char dir[] = "/tmp/mt_test_shards_XXXXXX";
    make_dir(dir);
    mt_dataset *ds = (mt_dataset *)dir;   /* must come back NULL */
    MT_CHECK_FAILS(mt_dataset_open(dir, 0.1, &ds), MT_EIO, "a directory", "_train_");
    MT_CHECK(ds == NULL, "ds set on failure");

    int32_t tok[64];
    for (int i = 0; i < 64; i++) tok[i] = i;
    write_shard(dir, "c_val_000000.bin", tok, 64);
    MT_CHECK_FAILS(mt_dataset_open(dir, 0.1, &ds), MT_EIO, "no llm.c train shards");
    write_shard(dir, "c_train_000001.bin", tok, 64);
    MT_CHECK_OK(mt_dataset_open(dir, 0.1, &ds));
    mt_dataset_free(ds);

    char bad[600], pat[600];
    /* a text file named as a shard */
    snprintf(bad, sizeof bad, "%s/c_train_000002.bin", dir);
    write_file(bad, "hello, world, this is text", 26);
    MT_CHECK_FAILS(mt_dataset_open(dir, 0.1, &ds), MT_EFORMAT, bad, "not an llm.c token file");
    /* version 2, truncated, the count wrong */
    int32_t hdr[256] = {20240520, 2, 4};
    write_file(bad, hdr, sizeof hdr);
    MT_CHECK_FAILS(mt_dataset_open(dir, 0.1, &ds), MT_EFORMAT, bad, "version 2");
    hdr[1] = 1;
    write_file(bad, hdr, sizeof hdr);
    MT_CHECK_FAILS(mt_dataset_open(dir, 0.1, &ds), MT_EFORMAT, bad, "truncated");
    write_file(bad, hdr, 100);
    MT_CHECK_FAILS(mt_dataset_open(dir, 0.1, &ds), MT_EFORMAT, bad, "1024-byte");
    unlink(bad);

    /* a glob: a match that is no shard, no match at all, val only */
    snprintf(bad, sizeof bad, "%s/c_tokenizer.bin", dir);
    write_file(bad, hdr, sizeof hdr);
    snprintf(pat, sizeof pat, "%s/c_*.bin", dir);
    MT_CHECK_FAILS(mt_dataset_open(pat, 0.1, &ds), MT_EINVAL, bad, "neither");
    snprintf(pat, sizeof pat, "%s/x_*_train_*.bin", dir);
    MT_CHECK_FAILS(mt_dataset_open(pat, 0.1, &ds), MT_EIO, pat, "matches no file");
    snprintf(pat, sizeof pat, "%s/c_val_*.bin", dir);
    MT_CHECK_FAILS(mt_dataset_open(pat, 0.1, &ds), MT_EIO, "no train shard", "1 val shard");
    MT_CHECK(!mt_dataset_is_sharded(bad), "a file is not shards");
    rm_dir(dir);
}

/* ---- text at one byte a token -------------------------------------------- */

MT_TEST(text_is_held_at_no_more_than_its_bytes) {
    char dir[] = "/tmp/mt_test_shards_XXXXXX";
    make_dir(dir);
    enum { MB = 64 };
    char path[600];
    snprintf(path, sizeof path, "%s/big.txt", dir);
    FILE *f = fopen(path, "wb");
    MT_CHECK(f, "%s", path);
    static char chunk[1 << 20];
    for (size_t i = 0; i < sizeof chunk; i++) chunk[i] = (char)('a' + (i * 7 + i / 26) % 26);
    for (int i = 0; i < MB; i++) MT_CHECK(fwrite(chunk, 1, sizeof chunk, f) == sizeof chunk, "w");
    MT_CHECK(fclose(f) == 0, "close");

    long before = status_kib("VmRSS");
    mt_dataset *ds;
    MT_CHECK_OK(mt_dataset_open(path, 0.1, &ds));
    MT_CHECK(mt_dataset_vocab(ds) == 256, "vocab %d", mt_dataset_vocab(ds));
    /* batches from the start, the middle and near the end of the train split */
    enum { B = 4, T = 64 };
    int32_t x[B * T], y[B * T];
    int64_t n = mt_dataset_tokens(ds, 0);
    int64_t starts[3] = {0, n / 2 + 3, n - B * T - 1};
    for (int k = 0; k < 3; k++) {
        int64_t pos = starts[k];
        MT_CHECK_OK(mt_dataset_batch(ds, 0, &pos, B, T, x, y));
        for (int i = 0; i < B * T; i++) {
            int64_t at = starts[k] + i / T * T + i % T;
            size_t c = (size_t)(at % (int64_t)sizeof chunk);
            MT_CHECK(x[i] == (unsigned char)chunk[c], "text token %lld", (long long)at);
        }
    }
    long grew = status_kib("VmRSS") - before;
    mt_dataset_free(ds);
    /* held as uint16 it would be 128 MiB; mapped, a few pages */
    MT_CHECK(grew < 8 * 1024, "a %d MiB text grew the RSS by %ld KiB", MB, grew);
    rm_dir(dir);
}

/* ---- larger than the address space --------------------------------------- */

/* 32 shards of 64M tokens (128 MiB each, 4 GiB in all) made sparse: a header,
 * real tokens at the start and end of each shard and at its 1/3 point, zeros
 * (valid tokens, never written to disk) between. Under a sanitizer, which
 * allows no address-space limit, 4 of them (opening scans every token for
 * the vocabulary: 20 s for 4 GiB under ASan). */
enum { BIG_SHARDS = MT_TEST_SANITIZED ? 4 : 32 };
#define BIG_TOKENS ((int64_t)64 << 20)
enum { MARK = 4096 };

static int32_t mark_token(int s, int64_t i) { return (int)((s * 131 + i * 7) % 1000) + 1; }

/* where the marks are in shard s: [0, MARK), [n/3, n/3 + MARK), [n - MARK, n) */
static int64_t mark_at(int k) {
    return k == 0 ? 0 : k == 1 ? BIG_TOKENS / 3 : BIG_TOKENS - MARK;
}

static void write_big(const char *dir) {
    int32_t hdr[256] = {20240520, 1, (int32_t)BIG_TOKENS};
    uint16_t buf[MARK];
    for (int s = 0; s < BIG_SHARDS; s++) {
        char path[600];
        snprintf(path, sizeof path, "%s/big_%s_%06d.bin", dir, s == 0 ? "val" : "train", s);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        MT_CHECK(fd >= 0, "%s", path);
        MT_CHECK(write(fd, hdr, sizeof hdr) == (ssize_t)sizeof hdr, "header");
        MT_CHECK(ftruncate(fd, (off_t)(sizeof hdr + 2 * BIG_TOKENS)) == 0, "ftruncate");
        for (int k = 0; k < 3; k++) {
            for (int i = 0; i < MARK; i++) buf[i] = (uint16_t)mark_token(s, mark_at(k) + i);
            off_t off = (off_t)(sizeof hdr + 2 * mark_at(k));
            MT_CHECK(pwrite(fd, buf, sizeof buf, off) == (ssize_t)sizeof buf, "marks");
        }
        MT_CHECK(close(fd) == 0, "close");
    }
}

/* The token at index g of the train split (shards 1..31). */
static int32_t big_token(int64_t g) {
    int s = 1 + (int)(g / BIG_TOKENS);
    int64_t i = g % BIG_TOKENS;
    for (int k = 0; k < 3; k++)
        if (i >= mark_at(k) && i < mark_at(k) + MARK) return mark_token(s, i);
    return 0;
}

/* Under a 1 GiB address-space limit (where mapping the 4 GiB would fail),
 * every train token is read in order through the window, checked against
 * what was written, and the peak RSS stays a few blocks; then a GPT trains
 * on them, on one device and on data=2, the same losses. */
MT_TEST(shards_larger_than_the_address_space) {
    char dir[] = "/tmp/mt_test_shards_XXXXXX";
    make_dir(dir);
    write_big(dir);
    if (!MT_TEST_SANITIZED) {   /* the sanitizers reserve terabytes of address space */
        struct rlimit lim = {.rlim_cur = (rlim_t)1 << 30, .rlim_max = (rlim_t)1 << 30};
        MT_CHECK(setrlimit(RLIMIT_AS, &lim) == 0, "setrlimit");
        void *all = malloc((size_t)2 << 30);   /* the limit holds */
        MT_CHECK(all == NULL, "a 2 GiB allocation succeeded under the 1 GiB limit");
    } else {
        printf("(sanitized build: no address-space limit, the RSS bound alone)\n");
    }
    int clear = open("/proc/self/clear_refs", O_WRONLY);   /* the peak from here on */
    if (clear >= 0) {
        MT_CHECK(write(clear, "5", 1) == 1, "clear_refs");
        close(clear);
    }

    mt_dataset *ds;
    MT_CHECK_OK(mt_dataset_open(dir, 0.1, &ds));
    int64_t n = mt_dataset_tokens(ds, 0);
    MT_CHECK(n == (BIG_SHARDS - 1) * BIG_TOKENS, "train tokens %lld", (long long)n);
    MT_CHECK(mt_dataset_tokens(ds, 1) == BIG_TOKENS, "val tokens");
    MT_CHECK(mt_dataset_vocab(ds) == 1001, "vocab %d", mt_dataset_vocab(ds));

    /* the whole train split, B·T = 1M tokens a batch */
    enum { B = 16, T = 65536 };
    int32_t *x = malloc((size_t)B * T * 4), *y = malloc((size_t)B * T * 4);
    MT_CHECK(x && y, "buffers");
    int64_t pos = 0;
    int most = 0;
    /* sanitized (instrumented copies, several times slower): the first 2
       shards, across their seam and past every mark of shard 1 */
    int64_t upto = MT_TEST_SANITIZED ? 2 * BIG_TOKENS : n;
    for (int64_t done = 0; done + (int64_t)B * T + 1 <= upto; done += (int64_t)B * T) {
        MT_CHECK_OK(mt_dataset_batch(ds, 0, &pos, B, T, x, y));
        MT_CHECK(pos == done + (int64_t)B * T, "pos %lld", (long long)pos);
        int m = mt__dataset_mapped(ds);
        if (m > most) most = m;
        /* every token of the batch where a shard starts or has marks, else a sample */
        int64_t s_lo = done / BIG_TOKENS, s_hi = (done + (int64_t)B * T) / BIG_TOKENS;
        bool marks = s_lo != s_hi;
        for (int k = 0; k < 3 && !marks; k++) {
            int64_t at = s_lo * BIG_TOKENS + mark_at(k);
            marks = at + MARK > done && at < done + (int64_t)B * T;
        }
        for (int64_t i = 0; i < (int64_t)B * T; i += marks ? 1 : 4093) {
            MT_CHECK(x[i] == big_token(done + i), "token %lld: %d, want %d",
                     (long long)(done + i), x[i], big_token(done + i));
            MT_CHECK(y[i] == big_token(done + i + 1), "target of token %lld",
                     (long long)(done + i));
        }
    }
    free(x);
    free(y);
    long hwm = status_kib("VmHWM");
    printf("streamed %.1f GiB of shards: at most %d blocks mapped, peak RSS %ld MiB\n",
           (double)upto * 2 / (1 << 30), most, hwm / 1024);
    MT_CHECK(most <= 4, "%d blocks mapped at once", most);
    MT_CHECK(hwm < 400 * 1024, "peak RSS %ld MiB streaming %.1f GiB of shards", hwm / 1024,
             (double)upto * 2 / (1 << 30));
    mt_dataset_free(ds);

    /* training on them: the first steps read the marks of shard 1 */
    mt_train_config c = mt_test_config(MT_MODEL_GPT, dir);
    c.steps = c.optim.total_steps = 3;
    float loss[2][3];
    const char *mesh[2] = {NULL, "data=2"};
    for (int k = 0; k < 2; k++) {
        c.mesh = mesh[k];
        mt_trainer *tr;
        MT_CHECK_OK(mt_trainer_create(&c, &tr));
        for (int s = 0; s < 3; s++) {
            mt_step_report r;
            MT_CHECK_OK(mt_trainer_step(tr, &r));
            loss[k][s] = r.loss;
        }
        mt_trainer_free(tr);
    }
    for (int s = 0; s < 3; s++)
        MT_CHECK_CLOSE(loss[1][s], loss[0][s], 1e-5, "data=2 on the shards: loss at step %d",
                       s + 1);
    MT_CHECK(status_kib("VmHWM") < 600 * 1024, "peak RSS %ld MiB training on the shards",
             status_kib("VmHWM") / 1024);
    rm_dir(dir);
}

/* ---- training on shards --------------------------------------------------- */

#define STEPS 10

/* Trains c on `mesh` until step `until` (from c.ckpt_in if set), with an
 * evaluation after the last step; the losses by step into loss[]. */
static float train(mt_train_config c, const char *mesh, int until, float *loss) {
    c.mesh = mesh;
    mt_trainer *tr;
    MT_CHECK_OK(mt_trainer_create(&c, &tr));
    while (mt_trainer_step_count(tr) < until) {
        mt_step_report r;
        MT_CHECK_OK(mt_trainer_step(tr, &r));
        loss[r.step - 1] = r.loss;
    }
    float val = 0;
    MT_CHECK_OK(mt_trainer_eval(tr, &val));
    if (c.ckpt_out) MT_CHECK_OK(mt_trainer_save(tr));
    mt_trainer_free(tr);
    return val;
}

/* 10 steps of 128 tokens cross every shard boundary and wrap around the
 * 960-token train split: the run on the shards is the run on one file of
 * their concatenation (val_frac 0.25 holds out exactly the val shard), on
 * one device and on data=2, and 5 steps + a resume of 5 are the 10. */
MT_TEST(training_on_shards_is_training_on_their_concatenation) {
    char dir[] = "/tmp/mt_test_shards_XXXXXX";
    make_dir(dir);
    int32_t all[N_ALL];
    write_corpus(dir, all);
    char one[600], ckpt[600];
    snprintf(one, sizeof one, "%s/all.tokens", dir);   /* not a shard name: the directory skips it */
    MT_CHECK_OK(mt_tokens_write(one, all, N_ALL));
    snprintf(ckpt, sizeof ckpt, "%s/run.ckpt", dir);

    mt_train_config c = mt_test_config(MT_MODEL_GPT, one);
    MT_CHECK(c.B * c.T == 128, "the test assumes 128 tokens a step");
    c.val_frac = 0.25;
    c.eval_batches = 2;
    float ref[STEPS], got[STEPS], dp[STEPS], first[STEPS], second[STEPS];
    float ref_val = train(c, NULL, STEPS, ref);

    c.data = dir;
    c.val_frac = 0.1;   /* not used by shards */
    float val = train(c, NULL, STEPS, got);
    float dp_val = train(c, "data=2", STEPS, dp);
    for (int s = 0; s < STEPS; s++) {
        MT_CHECK(got[s] == ref[s], "shards: loss %.9g at step %d, one file %.9g", got[s], s + 1,
                 ref[s]);
        MT_CHECK_CLOSE(dp[s], ref[s], 1e-5, "shards on data=2: loss at step %d", s + 1);
    }
    MT_CHECK(val == ref_val, "shards: val loss %.9g, one file %.9g", val, ref_val);
    MT_CHECK_CLOSE(dp_val, ref_val, 1e-5, "shards on data=2: val loss");

    mt_train_config a = c;
    a.ckpt_out = ckpt;
    train(a, NULL, STEPS / 2, first);
    mt_train_config b = c;
    b.ckpt_in = ckpt;
    train(b, "data=2", STEPS, second);
    for (int s = 0; s < STEPS; s++)
        MT_CHECK_CLOSE(s < STEPS / 2 ? first[s] : second[s], ref[s], 1e-5,
                       "5 steps, then 5 resumed on data=2: loss at step %d", s + 1);
    rm_dir(dir);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
