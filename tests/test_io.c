/*
 * test_io.c — the io layer: CRC-32, datasets, llm.c files, checkpoints.
 *
 * Expected values come from outside the code under test: published CRC check
 * values and a bit-at-a-time CRC, raw bytes of the files the tests write
 * themselves, file layouts written out by hand from the format descriptions.
 * Every case works in its own mkdtemp directory.
 */
#include "meshtrain.h"
#include "harness.h"

#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct { char dir[64]; char path[8][128]; int n; } tmpdir;

static void tmp_open(tmpdir *td) {
    memset(td, 0, sizeof *td);
    snprintf(td->dir, sizeof td->dir, "/tmp/mt_test_io_XXXXXX");
    MT_CHECK(mkdtemp(td->dir) != NULL, "mkdtemp failed");
}

/* A path inside the directory; valid until tmp_close. */
static const char *tmp_path(tmpdir *td, const char *name) {
    MT_CHECK(td->n < 8, "too many temp paths");
    char buf[sizeof td->path[0]];   /* via a local: gcc's -Wrestrict sees one object */
    snprintf(buf, sizeof buf, "%s/%s", td->dir, name);
    memcpy(td->path[td->n], buf, sizeof buf);
    return td->path[td->n++];
}

/* Removes every file in the directory (including ones the code under test
 * left behind, which count_files would have caught), then the directory. */
static void tmp_close(tmpdir *td) {
    DIR *d = opendir(td->dir);
    if (d) {
        struct dirent *e;
        char p[512];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            snprintf(p, sizeof p, "%s/%s", td->dir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(td->dir);
}

static int count_files(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
    closedir(d);
    return n;
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    MT_CHECK(f != NULL, "cannot create %s", path);
    MT_CHECK(fwrite(p, 1, n, f) == n, "short write to %s", path);
    fclose(f);
}

/* Reads a whole file; the caller frees. */
static unsigned char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    MT_CHECK(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(size > 0 ? (size_t)size : 1);
    MT_CHECK(b && fread(b, 1, (size_t)size, f) == (size_t)size, "cannot read %s", path);
    fclose(f);
    *n = (size_t)size;
    return b;
}

static void flip_byte(const char *path, long at) {
    FILE *f = fopen(path, "r+b");
    MT_CHECK(f != NULL, "cannot open %s", path);
    fseek(f, at, SEEK_SET);
    int c = fgetc(f);
    fseek(f, at, SEEK_SET);
    fputc(c ^ 0x10, f);
    fclose(f);
}

#define CHECK_MSG_HAS(needle)                                                   \
    MT_CHECK(strstr(mt_errmsg(), (needle)) != NULL, "message '%s' lacks '%s'", \
             mt_errmsg(), (needle))

/* ------------------------------------------------------------------------ */
/* CRC-32                                                                    */
/* ------------------------------------------------------------------------ */

/* The definition, one bit at a time, no table. */
static uint32_t crc32_bitwise(const unsigned char *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return ~c;
}

MT_TEST(crc32_known_values) {
    MT_CHECK(mt_crc32(0, "123456789", 9) == 0xcbf43926u, "check value: 0x%08x",
             mt_crc32(0, "123456789", 9));
    MT_CHECK(mt_crc32(0, "", 0) == 0, "empty buffer");
    const char *fox = "The quick brown fox jumps over the lazy dog";
    MT_CHECK(mt_crc32(0, fox, strlen(fox)) == 0x414fa339u, "fox: 0x%08x",
             mt_crc32(0, fox, strlen(fox)));
    /* continuing from a previous value gives the CRC of the concatenation */
    MT_CHECK(mt_crc32(mt_crc32(0, "1234", 4), "56789", 5) == 0xcbf43926u, "continuation");
}

MT_TEST(crc32_long_buffers_match_bitwise) {
    /* long buffers take the slicing-by-8 path; odd lengths and offsets test its edges */
    size_t n = 300001;
    unsigned char *b = malloc(n);
    MT_CHECK(b != NULL, "malloc");
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(mt_rng_uniform(7, 1, i) * 256.0f);
    size_t lens[] = {0, 1, 7, 8, 9, 16383, 16384, 16385, 100003, 300001};
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        size_t off = k % 3, len = lens[k] - (lens[k] > off ? off : lens[k]);
        uint32_t want = crc32_bitwise(b + off, len);
        MT_CHECK(mt_crc32(0, b + off, len) == want, "len %zu off %zu", len, off);
        /* split in two, the first part long, the second short */
        size_t cut = len / 3 * 2;
        MT_CHECK(mt_crc32(mt_crc32(0, b + off, cut), b + off + cut, len - cut) == want,
                 "split at %zu of %zu", cut, len);
    }
    free(b);
}

/* ------------------------------------------------------------------------ */
/* Datasets                                                                  */
/* ------------------------------------------------------------------------ */

/* An llm.c token file written by hand from its description. */
static void write_token_file_by_hand(const char *path, int32_t magic, int32_t version,
                                     int32_t count, const uint16_t *tok, size_t n) {
    int32_t h[256] = {magic, version, count};
    FILE *f = fopen(path, "wb");
    MT_CHECK(f != NULL, "cannot create %s", path);
    fwrite(h, sizeof h, 1, f);
    if (n) fwrite(tok, 2, n, f);
    fclose(f);
}

MT_TEST(tokens_write_read_round_trip) {
    tmpdir td;
    tmp_open(&td);
    const char *path = tmp_path(&td, "tok.bin");
    enum { N = 5000 };
    int32_t *tok = malloc(N * sizeof *tok);
    for (int i = 0; i < N; i++) tok[i] = (int32_t)((i * 7919u) % 50257u);
    tok[123] = 65535;   /* the largest token a uint16 file holds */
    MT_CHECK_OK(mt_tokens_write(path, tok, N));

    /* the bytes are the format: header of 256 int32, then uint16 tokens */
    size_t size;
    unsigned char *raw = read_all(path, &size);
    MT_CHECK(size == 1024 + 2 * N, "file size %zu", size);
    int32_t h[3];
    memcpy(h, raw, sizeof h);
    MT_CHECK(h[0] == 20240520 && h[1] == 1 && h[2] == N, "header %d %d %d", h[0], h[1], h[2]);
    for (size_t i = 12; i < 1024; i++) MT_CHECK(raw[i] == 0, "header byte %zu not zero", i);
    for (int i = 0; i < N; i++) {
        int v = raw[1024 + 2 * i] | raw[1024 + 2 * i + 1] << 8;
        MT_CHECK(v == tok[i], "token %d: %d in the file, %d written", i, v, tok[i]);
    }
    free(raw);

    mt_dataset *ds;
    MT_CHECK_OK(mt_dataset_open(path, 0.2, &ds));
    MT_CHECK(mt_dataset_tokens(ds, 0) == 4000 && mt_dataset_tokens(ds, 1) == 1000,
             "split %lld/%lld", (long long)mt_dataset_tokens(ds, 0),
             (long long)mt_dataset_tokens(ds, 1));
    MT_CHECK(mt_dataset_vocab(ds) == 65536, "vocab %d", mt_dataset_vocab(ds));
    int32_t x[3 * 16], y[3 * 16];
    int64_t pos = 100;
    mt_dataset_batch(ds, 0, &pos, 3, 16, x, y);
    for (int b = 0; b < 3; b++)
        for (int t = 0; t < 16; t++) {
            MT_CHECK(x[b * 16 + t] == tok[100 + b * 16 + t], "x[%d][%d]", b, t);
            MT_CHECK(y[b * 16 + t] == tok[101 + b * 16 + t], "y[%d][%d]", b, t);
        }
    MT_CHECK(pos == 148, "pos %lld", (long long)pos);
    pos = 0;
    mt_dataset_batch(ds, 1, &pos, 1, 16, x, y);   /* val starts at token 4000 */
    for (int t = 0; t < 16; t++)
        MT_CHECK(x[t] == tok[4000 + t] && y[t] == tok[4001 + t], "val x/y[%d]", t);
    mt_dataset_free(ds);
    free(tok);
    tmp_close(&td);
}

MT_TEST(tokens_write_rejects_bad_tokens) {
    tmpdir td;
    tmp_open(&td);
    const char *path = tmp_path(&td, "bad.bin");
    int32_t tok[4] = {1, 2, -1, 3};   /* (70000 goes to a uint32 file: test_tokens32) */
    MT_CHECK(mt_tokens_write(path, tok, 4) == MT_EINVAL, "token -1 accepted");
    CHECK_MSG_HAS("token 2 is -1");
    CHECK_MSG_HAS(path);
    MT_CHECK(access(path, F_OK) != 0, "a file was left at %s", path);
    tmp_close(&td);
}

MT_TEST(text_dataset_split_and_batches) {
    tmpdir td;
    tmp_open(&td);
    const char *path = tmp_path(&td, "text.txt");
    /* 100 bytes: "0123456789" ten times, but with each decade's first digit
     * replaced by a letter so windows are told apart */
    char text[101];
    for (int i = 0; i < 100; i++) text[i] = (char)(i % 10 ? '0' + i % 10 : 'A' + i / 10);
    write_bytes(path, text, 100);

    mt_dataset *ds;
    MT_CHECK_OK(mt_dataset_open(path, 0.1, &ds));
    MT_CHECK(mt_dataset_vocab(ds) == 256, "vocab %d", mt_dataset_vocab(ds));
    MT_CHECK(mt_dataset_tokens(ds, 0) == 90, "train %lld", (long long)mt_dataset_tokens(ds, 0));
    MT_CHECK(mt_dataset_tokens(ds, 1) == 10, "val %lld", (long long)mt_dataset_tokens(ds, 1));

    int32_t x[2 * 4], y[2 * 4];
    int64_t pos = 0;
    mt_dataset_batch(ds, 0, &pos, 2, 4, x, y);
    /* windows of T+1 = 5 bytes at 0 and 4: "A1234", "45678" */
    const char *wx = "A1234567", *wy = "12345678";
    for (int i = 0; i < 8; i++) {
        int b = i / 4, t = i % 4;
        MT_CHECK(x[i] == wx[b * 4 + t] && y[i] == wy[b * 4 + t],
                 "batch 1 [%d][%d]: x %d y %d", b, t, x[i], y[i]);
    }
    MT_CHECK(pos == 8, "pos after one batch %lld", (long long)pos);

    /* at 84 the first window [84, 89) fits the 90 train bytes, the second
     * would need [88, 93) and restarts at 0 */
    pos = 84;
    mt_dataset_batch(ds, 0, &pos, 2, 4, x, y);
    MT_CHECK(x[0] == text[84] && x[3] == text[87] && y[3] == text[88], "window at 84");
    MT_CHECK(x[4] == 'A' && y[4] == '1' && y[7] == '4', "window after the wrap: %c %c %c",
             x[4], y[4], y[7]);
    MT_CHECK(pos == 4, "pos after the wrap %lld", (long long)pos);

    /* the val split is the tail: bytes 90..99 = "J123456789" */
    pos = 0;
    mt_dataset_batch(ds, 1, &pos, 1, 4, x, y);
    MT_CHECK(x[0] == 'J' && x[3] == '3' && y[3] == '4', "val window %c..%c", x[0], x[3]);
    pos = 6;   /* 6 + 5 > 10: restarts at 0 */
    mt_dataset_batch(ds, 1, &pos, 1, 4, x, y);
    MT_CHECK(x[0] == 'J', "val window at 6 should restart at 0, got %c", x[0]);

    /* deterministic: the same position gives the same batch */
    int32_t x2[8], y2[8];
    int64_t p1 = 40, p2 = 40;
    mt_dataset_batch(ds, 0, &p1, 2, 4, x, y);
    mt_dataset_batch(ds, 0, &p2, 2, 4, x2, y2);
    MT_CHECK(memcmp(x, x2, sizeof x) == 0 && memcmp(y, y2, sizeof y) == 0 && p1 == p2,
             "same position, different batch");
    mt_dataset_free(ds);
    tmp_close(&td);
}

MT_TEST(dataset_short_split_never_reads_past_it) {
    tmpdir td;
    tmp_open(&td);
    const char *path = tmp_path(&td, "short.txt");
    write_bytes(path, "abc", 3);
    mt_dataset *ds;
    MT_CHECK_OK(mt_dataset_open(path, 0.0, &ds));
    MT_CHECK(mt_dataset_tokens(ds, 1) == 0, "val of val_frac 0");
    int32_t x[8], y[8];
    int64_t pos = 0;
    /* 3 tokens cannot hold a window of T+1 = 5: padded, targets past the data are -1 */
    mt_dataset_batch(ds, 0, &pos, 2, 4, x, y);
    MT_CHECK(x[0] == 'a' && x[2] == 'c' && y[0] == 'b' && y[1] == 'c' && y[2] == -1 &&
             y[3] == -1, "padded window: %d %d %d / %d %d %d %d", x[0], x[1], x[2], y[0],
             y[1], y[2], y[3]);
    mt_dataset_batch(ds, 1, &pos, 2, 4, x, y);   /* empty split */
    for (int i = 0; i < 8; i++) MT_CHECK(y[i] == -1, "empty split target %d = %d", i, y[i]);
    mt_dataset_batch(ds, 7, &pos, 2, 4, x, y);   /* no such split */
    MT_CHECK(pos == 0 && y[0] == -1, "bad split");
    mt_dataset_free(ds);
    tmp_close(&td);
}

MT_TEST(dataset_open_errors_name_the_file) {
    tmpdir td;
    tmp_open(&td);
    mt_dataset *ds = (mt_dataset *)&td;   /* must come back NULL on failure */

    const char *missing = tmp_path(&td, "missing.bin");
    MT_CHECK(mt_dataset_open(missing, 0.1, &ds) == MT_EIO, "missing file");
    CHECK_MSG_HAS(missing);
    CHECK_MSG_HAS("No such file");
    MT_CHECK(ds == NULL, "out not cleared");

    MT_CHECK(mt_dataset_open(td.dir, 0.1, &ds) == MT_EIO, "a directory");
    CHECK_MSG_HAS("directory");

    const char *empty = tmp_path(&td, "empty.txt");
    write_bytes(empty, "", 0);
    MT_CHECK(mt_dataset_open(empty, 0.1, &ds) == MT_EFORMAT, "empty file");
    CHECK_MSG_HAS(empty);
    CHECK_MSG_HAS("empty");

    uint16_t tok[100];
    for (int i = 0; i < 100; i++) tok[i] = (uint16_t)i;
    const char *trunc = tmp_path(&td, "trunc.bin");
    write_token_file_by_hand(trunc, 20240520, 1, 100, tok, 50);
    MT_CHECK(mt_dataset_open(trunc, 0.1, &ds) == MT_EFORMAT, "truncated");
    CHECK_MSG_HAS(trunc);
    CHECK_MSG_HAS("truncated");
    CHECK_MSG_HAS("says 100 tokens, the file holds 50");

    const char *ver = tmp_path(&td, "v2.bin");
    write_token_file_by_hand(ver, 20240520, 2, 100, tok, 100);
    MT_CHECK(mt_dataset_open(ver, 0.1, &ds) == MT_EFORMAT, "version 2");
    CHECK_MSG_HAS(ver);
    CHECK_MSG_HAS("version 2, expected version 1");

    const char *zero = tmp_path(&td, "zero.bin");
    write_token_file_by_hand(zero, 20240520, 1, 0, tok, 0);
    MT_CHECK(mt_dataset_open(zero, 0.1, &ds) == MT_EFORMAT, "zero tokens");
    CHECK_MSG_HAS("at least one token");

    const char *longer = tmp_path(&td, "long.bin");
    write_token_file_by_hand(longer, 20240520, 1, 40, tok, 100);
    MT_CHECK(mt_dataset_open(longer, 0.1, &ds) == MT_EFORMAT, "trailing bytes");
    CHECK_MSG_HAS("120 bytes after its 40 tokens");

    /* a header cut short inside the 1024 bytes */
    const char *shorthdr = tmp_path(&td, "shorthdr.bin");
    int32_t h[10] = {20240520, 1, 5};
    write_bytes(shorthdr, h, sizeof h);
    MT_CHECK(mt_dataset_open(shorthdr, 0.1, &ds) == MT_EFORMAT, "short header");
    CHECK_MSG_HAS("truncated");

    /* any other magic is not an error: the file is text, 1024 + 200 bytes of it */
    const char *other = tmp_path(&td, "other.bin");
    write_token_file_by_hand(other, 12345, 1, 100, tok, 100);
    MT_CHECK_OK(mt_dataset_open(other, 0.5, &ds));
    MT_CHECK(mt_dataset_vocab(ds) == 256 && mt_dataset_tokens(ds, 0) == 612 &&
             mt_dataset_tokens(ds, 1) == 612, "read as text: vocab %d, %lld + %lld tokens",
             mt_dataset_vocab(ds), (long long)mt_dataset_tokens(ds, 0),
             (long long)mt_dataset_tokens(ds, 1));
    mt_dataset_free(ds);
    ds = (mt_dataset *)&td;
    MT_CHECK(mt_dataset_open(other, 1.0, &ds) == MT_EINVAL, "val_frac 1");
    CHECK_MSG_HAS("val_frac 1");
    MT_CHECK(mt_dataset_open(other, -0.5, &ds) == MT_EINVAL, "val_frac -0.5");
    MT_CHECK(ds == NULL, "out not cleared");
    tmp_close(&td);
}

/* ------------------------------------------------------------------------ */
/* llm.c checkpoints: the header                                             */
/* ------------------------------------------------------------------------ */

static int64_t gpt_floats(const mt_gpt_config *c) {
    int64_t C = c->C;
    return (int64_t)c->Vp * C + (int64_t)c->maxT * C + 2 * C +
           (int64_t)c->L * (12 * C * C + 13 * C);   /* per layer: 4 LN + qkv + proj + fc + fcproj */
}

static void write_llmc_by_hand(const char *path, int32_t magic, int32_t version,
                               const mt_gpt_config *c, int64_t n_floats) {
    int32_t h[256] = {magic, version, c->maxT, c->V, c->L, c->NH, c->C, c->Vp};
    FILE *f = fopen(path, "wb");
    MT_CHECK(f != NULL, "cannot create %s", path);
    fwrite(h, sizeof h, 1, f);
    for (int64_t i = 0; i < n_floats; i++) {
        float v = (float)i;
        fwrite(&v, 4, 1, f);
    }
    fclose(f);
}

static const mt_gpt_config small_cfg = {.L = 2, .C = 8, .NH = 2, .maxT = 6, .V = 10, .Vp = 12};

MT_TEST(llmc_header_read_and_errors) {
    tmpdir td;
    tmp_open(&td);
    const mt_gpt_config *c = &small_cfg;
    const char *good = tmp_path(&td, "good.bin");
    write_llmc_by_hand(good, 20240326, 3, c, gpt_floats(c));
    mt_gpt_config got;
    memset(&got, 0, sizeof got);
    MT_CHECK_OK(mt_llmc_read_config(good, &got));
    MT_CHECK(got.L == 2 && got.C == 8 && got.NH == 2 && got.maxT == 6 && got.V == 10 &&
             got.Vp == 12, "config L=%d C=%d NH=%d maxT=%d V=%d Vp=%d", got.L, got.C, got.NH,
             got.maxT, got.V, got.Vp);
    /* header only, against a config: g == NULL */
    MT_CHECK_OK(mt_llmc_load(good, NULL, c));
    mt_gpt_config other = *c;
    other.C = 16;
    MT_CHECK(mt_llmc_load(good, NULL, &other) == MT_ESHAPE, "C mismatch accepted");
    CHECK_MSG_HAS("C = 8 but the model has C = 16");
    CHECK_MSG_HAS(good);

    const char *magic = tmp_path(&td, "magic.bin");
    write_llmc_by_hand(magic, 12345, 3, c, gpt_floats(c));
    MT_CHECK(mt_llmc_read_config(magic, &got) == MT_EFORMAT, "bad magic");
    CHECK_MSG_HAS(magic);
    CHECK_MSG_HAS("magic is 12345, expected 20240326");

    const char *v5 = tmp_path(&td, "v5.bin");
    write_llmc_by_hand(v5, 20240326, 5, c, gpt_floats(c));
    MT_CHECK(mt_llmc_read_config(v5, &got) == MT_EFORMAT, "version 5");
    CHECK_MSG_HAS(v5);
    CHECK_MSG_HAS("version 5, expected 3");
    CHECK_MSG_HAS("bf16");

    const char *trunc = tmp_path(&td, "trunc.bin");
    write_llmc_by_hand(trunc, 20240326, 3, c, gpt_floats(c) - 1);
    MT_CHECK(mt_llmc_read_config(trunc, &got) == MT_EFORMAT, "truncated");
    CHECK_MSG_HAS(trunc);
    CHECK_MSG_HAS("truncated");

    /* only the magic: truncated, not "version 0" */
    const char *magic_only = tmp_path(&td, "magic.bin");
    int32_t magic_word = 20240326;
    write_bytes(magic_only, &magic_word, sizeof magic_word);
    MT_CHECK(mt_llmc_read_config(magic_only, &got) == MT_EFORMAT, "4-byte file");
    CHECK_MSG_HAS("truncated");

    const char *badv = tmp_path(&td, "badvp.bin");
    mt_gpt_config bad = *c;
    bad.Vp = 9;   /* < V */
    write_llmc_by_hand(badv, 20240326, 3, &bad, 0);
    MT_CHECK(mt_llmc_read_config(badv, &got) == MT_EFORMAT, "Vp < V");
    CHECK_MSG_HAS("Vp = 9 < V = 10");

    MT_CHECK(mt_llmc_read_config(tmp_path(&td, "none.bin"), &got) == MT_EIO, "missing");
    CHECK_MSG_HAS("none.bin");
    tmp_close(&td);
}

/* ------------------------------------------------------------------------ */
/* meshtrain checkpoints without a graph: the header, written by hand        */
/* ------------------------------------------------------------------------ */

static void put32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> 8 * i); }
static void put64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> 8 * i); }

MT_TEST(ckpt_meta_of_hand_written_file) {
    tmpdir td;
    tmp_open(&td);
    const char *path = tmp_path(&td, "ck.mt");
    /* the layout documented at the top of src/io/checkpoint.c, no parameters */
    unsigned char b[312] = {0};
    memcpy(b, "MTCKPT\0\0", 8);
    put32(b + 8, 1);
    put32(b + 12, 0);
    put64(b + 16, 42);
    put64(b + 24, 123456789012LL);
    put64(b + 32, 0xfeedfacecafebeefULL);
    put64(b + 40, (uint64_t)-1);
    strcpy((char *)b + 48, "gpt L=1 C=8");
    put32(b + 304, crc32_bitwise(b, 304));
    put32(b + 308, crc32_bitwise(b, 308));
    write_bytes(path, b, sizeof b);

    mt_ckpt_meta m;
    MT_CHECK_OK(mt_ckpt_read_meta(path, &m));
    MT_CHECK(m.step == 42 && m.data_pos == 123456789012LL && m.seed == 0xfeedfacecafebeefULL,
             "meta step %d pos %lld seed %llx", m.step, (long long)m.data_pos,
             (unsigned long long)m.seed);
    MT_CHECK(strcmp(m.model, "gpt L=1 C=8") == 0, "model '%s'", m.model);

    flip_byte(path, 20);   /* inside the step */
    MT_CHECK(mt_ckpt_read_meta(path, &m) == MT_ECHECKSUM, "flipped meta byte not caught");
    CHECK_MSG_HAS(path);
    CHECK_MSG_HAS("corrupted");

    /* version from the future, CRC intact */
    put32(b + 8, 2);
    put32(b + 304, crc32_bitwise(b, 304));
    write_bytes(path, b, sizeof b);
    MT_CHECK(mt_ckpt_read_meta(path, &m) == MT_EFORMAT, "version 2 accepted");
    CHECK_MSG_HAS("version 2, expected 1");

    /* a sane CRC over an insane step: refused, not cut to int */
    put32(b + 8, 1);
    put64(b + 16, (1LL << 32) + 5);
    put32(b + 304, crc32_bitwise(b, 304));
    write_bytes(path, b, sizeof b);
    MT_CHECK(mt_ckpt_read_meta(path, &m) == MT_EFORMAT, "step 2^32+5 accepted as %d", m.step);
    CHECK_MSG_HAS("impossible step");
    put64(b + 16, 42);
    put64(b + 24, (uint64_t)-7);   /* negative data position */
    put32(b + 304, crc32_bitwise(b, 304));
    write_bytes(path, b, sizeof b);
    MT_CHECK(mt_ckpt_read_meta(path, &m) == MT_EFORMAT, "negative data position accepted");

    /* an llm.c file is told apart */
    const char *llmc = tmp_path(&td, "llmc.bin");
    write_llmc_by_hand(llmc, 20240326, 3, &small_cfg, gpt_floats(&small_cfg));
    MT_CHECK(mt_ckpt_read_meta(llmc, &m) == MT_EFORMAT, "llm.c file read as checkpoint");
    CHECK_MSG_HAS("mt_llmc_load");
    MT_CHECK(mt_ckpt_read_meta(tmp_path(&td, "nope.mt"), &m) == MT_EIO, "missing");
    CHECK_MSG_HAS("nope.mt");
    tmp_close(&td);
}

/* ------------------------------------------------------------------------ */
/* With a compiled graph                                                     */
/* ------------------------------------------------------------------------ */

/* Builds the GPT parameters by name (as mt_gpt_build names them), with C of
 * `odd` (if not NULL) made one larger, and `skip` left out, and compiles a
 * loss that touches all of them. */
static mt_graph *gpt_param_graph(const mt_gpt_config *c, const char *odd, const char *skip) {
    mt_graph *g = mt_graph_create();
    MT_CHECK(g != NULL, "mt_graph_create");
    int64_t C = c->C;
    struct { const char *name; int nd; int64_t d0, d1; } per_layer[] = {
        {"ln_1.w", 1, C, 0},          {"ln_1.b", 1, C, 0},
        {"attn.qkv.w", 2, 3 * C, C},  {"attn.qkv.b", 1, 3 * C, 0},
        {"attn.proj.w", 2, C, C},     {"attn.proj.b", 1, C, 0},
        {"ln_2.w", 1, C, 0},          {"ln_2.b", 1, C, 0},
        {"mlp.fc.w", 2, 4 * C, C},    {"mlp.fc.b", 1, 4 * C, 0},
        {"mlp.proj.w", 2, C, 4 * C},  {"mlp.proj.b", 1, C, 0},
    };
    mt_init init = {MT_INIT_NORMAL, 0.02f};
    mt_tensor *loss = NULL;
    char name[64];
    for (int k = -2; k < c->L * 12 + 2; k++) {
        int64_t shape[2];
        int nd;
        if (k == -2)      { snprintf(name, 64, "wte"); nd = 2; shape[0] = c->Vp; shape[1] = C; }
        else if (k == -1) { snprintf(name, 64, "wpe"); nd = 2; shape[0] = c->maxT; shape[1] = C; }
        else if (k >= c->L * 12) {
            snprintf(name, 64, k == c->L * 12 ? "ln_f.w" : "ln_f.b"); nd = 1; shape[0] = C;
        } else {
            int l = k / 12, e = k % 12;
            snprintf(name, 64, "h.%d.%s", l, per_layer[e].name);
            nd = per_layer[e].nd; shape[0] = per_layer[e].d0; shape[1] = per_layer[e].d1;
        }
        if (skip && strcmp(name, skip) == 0) continue;
        if (odd && strcmp(name, odd) == 0) shape[nd - 1]++;
        mt_tensor *p = mt_param(g, name, nd, shape, init);
        mt_tensor *s = mt_sum(g, p);
        loss = loss ? mt_add(g, loss, s) : s;
    }
    mt_compile_opts opts = {.seed = 1};
    MT_CHECK_OK(mt_graph_compile(g, loss, &opts));
    return g;
}

/* Fills every parameter with numbers that depend on (salt, name, index). */
static void fill_params(mt_graph *g, uint64_t salt) {
    for (int i = 0; i < mt_graph_n_params(g); i++) {
        mt_tensor *t = mt_graph_param_at(g, i);
        float *d = mt_tensor_f32(t);
        MT_CHECK(d != NULL, "no storage for %s", mt_tensor_name(t));
        for (int64_t k = 0; k < mt_tensor_numel(t); k++)
            d[k] = mt_rng_normal(salt, mt_hash_name(mt_tensor_name(t)), (uint64_t)k);
    }
}

static void check_params(mt_graph *g, uint64_t salt, const char *what) {
    for (int i = 0; i < mt_graph_n_params(g); i++) {
        mt_tensor *t = mt_graph_param_at(g, i);
        const float *d = mt_tensor_f32(t);
        for (int64_t k = 0; k < mt_tensor_numel(t); k++) {
            float want = mt_rng_normal(salt, mt_hash_name(mt_tensor_name(t)), (uint64_t)k);
            MT_CHECK(d[k] == want, "%s: %s[%lld] = %g, want %g", what, mt_tensor_name(t),
                     (long long)k, d[k], want);
        }
    }
}

MT_TEST(llmc_save_load_round_trip) {
    tmpdir td;
    tmp_open(&td);
    const mt_gpt_config *c = &small_cfg;
    const char *path = tmp_path(&td, "gpt.bin");
    mt_graph *g = gpt_param_graph(c, NULL, NULL);
    fill_params(g, 11);
    MT_CHECK_OK(mt_llmc_save(path, g, c));
    MT_CHECK(count_files(td.dir) == 1, "temporary files left: %d files", count_files(td.dir));

    /* the layout, by hand: header, wte, wpe, ln1w (L,C), ln1b (L,C), qkvw (L,3C,C) ... */
    size_t size;
    unsigned char *raw = read_all(path, &size);
    MT_CHECK((int64_t)size == 1024 + 4 * gpt_floats(c), "size %zu", size);
    int32_t h[8];
    memcpy(h, raw, sizeof h);
    MT_CHECK(h[0] == 20240326 && h[1] == 3 && h[2] == 6 && h[3] == 10 && h[4] == 2 &&
             h[5] == 2 && h[6] == 8 && h[7] == 12, "header %d %d %d %d %d %d %d %d",
             h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]);
    const float *f = (const float *)(raw + 1024);
    int64_t C = c->C, L = c->L;
    int64_t at_qkvw = 12 * C + 6 * C + 2 * L * C;     /* after wte, wpe, ln1w, ln1b */
    int64_t at_qkvw_l1 = at_qkvw + 3 * C * C;         /* layer 1's slice */
    int64_t at_lnfb = gpt_floats(c) - C;
    mt_tensor *q1 = mt_graph_find(g, "h.1.attn.qkv.w");
    mt_tensor *lnfb = mt_graph_find(g, "ln_f.b");
    mt_tensor *wpe = mt_graph_find(g, "wpe");
    MT_CHECK(q1 && lnfb && wpe, "names");
    MT_CHECK(memcmp(f + at_qkvw_l1, mt_tensor_f32(q1), 3 * C * C * 4) == 0, "h.1.attn.qkv.w");
    MT_CHECK(memcmp(f + at_lnfb, mt_tensor_f32(lnfb), C * 4) == 0, "ln_f.b");
    MT_CHECK(memcmp(f + 12 * C, mt_tensor_f32(wpe), 6 * C * 4) == 0, "wpe");
    free(raw);

    mt_gpt_config rc;
    MT_CHECK_OK(mt_llmc_read_config(path, &rc));
    MT_CHECK(memcmp(&rc, c, sizeof rc) == 0, "config read back differs");
    mt_graph *g2 = gpt_param_graph(&rc, NULL, NULL);
    fill_params(g2, 99);
    MT_CHECK_OK(mt_llmc_load(path, g2, &rc));
    check_params(g2, 11, "after llm.c load");
    mt_graph_free(g2);
    mt_graph_free(g);
    tmp_close(&td);
}

MT_TEST(llmc_load_names_the_mismatched_tensor) {
    tmpdir td;
    tmp_open(&td);
    const mt_gpt_config *c = &small_cfg;
    const char *path = tmp_path(&td, "gpt.bin");
    mt_graph *g = gpt_param_graph(c, NULL, NULL);
    fill_params(g, 3);
    MT_CHECK_OK(mt_llmc_save(path, g, c));

    mt_graph *odd = gpt_param_graph(c, "h.1.mlp.fc.b", NULL);
    fill_params(odd, 4);
    MT_CHECK(mt_llmc_load(path, odd, c) == MT_ESHAPE, "odd shape accepted");
    CHECK_MSG_HAS("'h.1.mlp.fc.b'");
    CHECK_MSG_HAS("(33)");
    CHECK_MSG_HAS("(32)");
    check_params(odd, 4, "graph after a failed load");   /* untouched */
    mt_graph_free(odd);

    mt_graph *missing = gpt_param_graph(c, NULL, "h.0.ln_2.b");
    MT_CHECK(mt_llmc_load(path, missing, c) == MT_EINVAL, "missing tensor accepted");
    CHECK_MSG_HAS("'h.0.ln_2.b'");
    MT_CHECK(mt_llmc_save(path, missing, c) == MT_EINVAL, "save of a partial model");
    mt_graph_free(missing);
    MT_CHECK_OK(mt_llmc_load(path, g, c));   /* the failed save left the file alone */
    check_params(g, 3, "after reloading");
    mt_graph_free(g);
    tmp_close(&td);
}

/* A small mixed model: 1-D, 2-D and 3-D parameters. */
static mt_graph *small_graph(int64_t w0, int64_t w1, bool extra) {
    mt_graph *g = mt_graph_create();
    MT_CHECK(g != NULL, "mt_graph_create");
    mt_init init = {MT_INIT_NORMAL, 0.02f};
    int64_t sw[2] = {w0, w1}, sb[1] = {5}, sk[3] = {2, 3, 4}, se[1] = {7};
    mt_tensor *loss = mt_sum(g, mt_param(g, "w", 2, sw, init));
    loss = mt_add(g, loss, mt_sum(g, mt_param(g, "b", 1, sb, init)));
    loss = mt_add(g, loss, mt_sum(g, mt_param(g, "blocks.k", 3, sk, init)));
    if (extra) loss = mt_add(g, loss, mt_sum(g, mt_param(g, "extra", 1, se, init)));
    mt_compile_opts opts = {.seed = 5};
    MT_CHECK_OK(mt_graph_compile(g, loss, &opts));
    return g;
}

static void fill_moments(mt_graph *g, mt_optim *opt, uint64_t salt) {
    for (int i = 0; i < mt_graph_n_params(g); i++)
        for (int w = 1; w <= 2; w++) {
            float *m = mt_optim_moment(opt, i, w);
            MT_CHECK(m != NULL, "AdamW has no moment %d for param %d", w, i);
            for (int64_t k = 0; k < mt_tensor_numel(mt_graph_param_at(g, i)); k++)
                m[k] = mt_rng_uniform(salt + (uint64_t)w, (uint64_t)i, (uint64_t)k);
        }
}

static void check_moments(mt_graph *g, mt_optim *opt, uint64_t salt) {
    for (int i = 0; i < mt_graph_n_params(g); i++)
        for (int w = 1; w <= 2; w++) {
            const float *m = mt_optim_moment(opt, i, w);
            for (int64_t k = 0; k < mt_tensor_numel(mt_graph_param_at(g, i)); k++)
                MT_CHECK(m[k] == mt_rng_uniform(salt + (uint64_t)w, (uint64_t)i, (uint64_t)k),
                         "moment %d of %s [%lld]", w, mt_tensor_name(mt_graph_param_at(g, i)),
                         (long long)k);
        }
}

static mt_optim *adamw(mt_graph *g) {
    mt_optim_config oc = mt_optim_defaults();
    oc.kind = MT_OPT_ADAMW;
    mt_optim *opt = NULL;
    MT_CHECK_OK(mt_optim_create(g, &oc, &opt));
    return opt;
}

MT_TEST(ckpt_save_load_round_trip) {
    tmpdir td;
    tmp_open(&td);
    const char *path = tmp_path(&td, "run.mt");
    mt_graph *g = small_graph(3, 4, false);
    mt_optim *opt = adamw(g);
    fill_params(g, 21);
    fill_moments(g, opt, 31);
    mt_optim_set_steps(opt, 7);
    mt_ckpt_meta meta = {.step = 7, .data_pos = 4096, .seed = 1337};
    snprintf(meta.model, sizeof meta.model, "test L=0 C=4");
    MT_CHECK_OK(mt_ckpt_save(path, g, opt, &meta));
    /* saving again over it works and leaves no temporary behind */
    MT_CHECK_OK(mt_ckpt_save(path, g, opt, &meta));
    MT_CHECK(count_files(td.dir) == 1, "temporary files left: %d files", count_files(td.dir));

    /* the trailer is the CRC of everything before it */
    size_t size;
    unsigned char *raw = read_all(path, &size);
    uint32_t stored = (uint32_t)raw[size - 4] | (uint32_t)raw[size - 3] << 8 |
                      (uint32_t)raw[size - 2] << 16 | (uint32_t)raw[size - 1] << 24;
    MT_CHECK(stored == crc32_bitwise(raw, size - 4), "trailer is not the CRC");
    MT_CHECK(memcmp(raw, "MTCKPT", 6) == 0, "magic");
    free(raw);

    mt_ckpt_meta rm;
    MT_CHECK_OK(mt_ckpt_read_meta(path, &rm));
    MT_CHECK(rm.step == 7 && rm.data_pos == 4096 && rm.seed == 1337 &&
             strcmp(rm.model, "test L=0 C=4") == 0, "read_meta");

    mt_graph *g2 = small_graph(3, 4, false);
    mt_optim *opt2 = adamw(g2);
    fill_params(g2, 22);
    memset(&rm, 0, sizeof rm);
    MT_CHECK_OK(mt_ckpt_load(path, g2, opt2, &rm));
    check_params(g2, 21, "after checkpoint load");
    check_moments(g2, opt2, 31);
    MT_CHECK(mt_optim_steps(opt2) == 7, "steps %d", mt_optim_steps(opt2));
    MT_CHECK(rm.step == 7 && rm.data_pos == 4096 && rm.seed == 1337 &&
             strcmp(rm.model, "test L=0 C=4") == 0, "meta from load");

    /* parameters only */
    mt_graph *g3 = small_graph(3, 4, false);
    MT_CHECK_OK(mt_ckpt_load(path, g3, NULL, NULL));
    check_params(g3, 21, "parameters-only load");
    const char *noopt = tmp_path(&td, "noopt.mt");
    MT_CHECK_OK(mt_ckpt_save(noopt, g3, NULL, &meta));
    MT_CHECK_OK(mt_ckpt_load(noopt, g2, NULL, NULL));
    check_params(g2, 21, "from a checkpoint without moments");

    mt_graph_free(g3);
    mt_optim_free(opt2);
    mt_graph_free(g2);
    mt_optim_free(opt);
    mt_graph_free(g);
    tmp_close(&td);
}

MT_TEST(ckpt_shape_mismatch_names_the_tensor) {
    tmpdir td;
    tmp_open(&td);
    const char *path = tmp_path(&td, "run.mt");
    mt_graph *g = small_graph(3, 4, false);
    fill_params(g, 1);
    mt_ckpt_meta meta = {.step = 1};
    MT_CHECK_OK(mt_ckpt_save(path, g, NULL, &meta));

    mt_graph *t = small_graph(4, 3, false);
    fill_params(t, 2);
    MT_CHECK(mt_ckpt_load(path, t, NULL, NULL) == MT_ESHAPE, "transposed w accepted");
    CHECK_MSG_HAS("'w'");
    CHECK_MSG_HAS("(4,3) in the graph");
    CHECK_MSG_HAS("(3,4) in checkpoint");
    check_params(t, 2, "graph after a failed load");
    mt_graph_free(t);

    mt_graph *x = small_graph(3, 4, true);
    MT_CHECK(mt_ckpt_load(path, x, NULL, NULL) == MT_ESHAPE, "extra graph param accepted");
    CHECK_MSG_HAS("'extra'");
    mt_graph_free(x);

    const char *big = tmp_path(&td, "big.mt");
    mt_graph *e = small_graph(3, 4, true);
    MT_CHECK_OK(mt_ckpt_save(big, e, NULL, &meta));
    MT_CHECK(mt_ckpt_load(big, g, NULL, NULL) == MT_ESHAPE, "extra checkpoint param accepted");
    CHECK_MSG_HAS("'extra'");
    mt_graph_free(e);
    mt_graph_free(g);
    tmp_close(&td);
}

/* A parameter whose leading dims are grouped otherwise, the same storage (as
 * GPT's q, k, v went from (3C,C) to (3,C,C)), loads; one whose last dim
 * differs does not. */
MT_TEST(ckpt_loads_the_same_storage_regrouped) {
    tmpdir td;
    tmp_open(&td);
    const char *path = tmp_path(&td, "flat.mt");
    mt_graph *g = small_graph(6, 4, false);   /* w (6,4) */
    fill_params(g, 3);
    mt_ckpt_meta meta = {.step = 1};
    MT_CHECK_OK(mt_ckpt_save(path, g, NULL, &meta));
    for (int last = 4; last >= 2; last -= 2) {
        mt_graph *r = mt_graph_create();
        mt_init init = {MT_INIT_NORMAL, 0.02f};
        int64_t sw[3] = {2, 12 / last, last}, sb[1] = {5}, sk[3] = {2, 3, 4};
        mt_tensor *loss = mt_sum(r, mt_param(r, "w", 3, sw, init));
        loss = mt_add(r, loss, mt_sum(r, mt_param(r, "b", 1, sb, init)));
        loss = mt_add(r, loss, mt_sum(r, mt_param(r, "blocks.k", 3, sk, init)));
        MT_CHECK_OK(mt_graph_compile(r, loss, &(mt_compile_opts){.seed = 5}));
        if (last == 4) {
            MT_CHECK_OK(mt_ckpt_load(path, r, NULL, NULL));
            check_params(r, 3, "w (6,4) loaded as (2,3,4)");
        } else {
            MT_CHECK(mt_ckpt_load(path, r, NULL, NULL) == MT_ESHAPE, "w (6,4) loaded as (2,6,2)");
            CHECK_MSG_HAS("(2,6,2) in the graph");
        }
        mt_graph_free(r);
    }
    mt_graph_free(g);
    tmp_close(&td);
}

MT_TEST(ckpt_corruption_is_detected) {
    tmpdir td;
    tmp_open(&td);
    const char *path = tmp_path(&td, "run.mt");
    mt_graph *g = small_graph(3, 4, false);
    mt_optim *opt = adamw(g);
    fill_params(g, 1);
    fill_moments(g, opt, 2);
    mt_ckpt_meta meta = {.step = 3};
    MT_CHECK_OK(mt_ckpt_save(path, g, opt, &meta));
    size_t size;
    free(read_all(path, &size));

    mt_graph *g2 = small_graph(3, 4, false);
    mt_optim *opt2 = adamw(g2);
    fill_params(g2, 5);
    long spots[] = {0 + 9, 400, (long)size / 2, (long)size - 2};   /* header, data, trailer */
    for (size_t k = 0; k < sizeof spots / sizeof spots[0]; k++) {
        flip_byte(path, spots[k]);
        MT_CHECK(mt_ckpt_load(path, g2, opt2, NULL) == MT_ECHECKSUM,
                 "flipped byte %ld not caught", spots[k]);
        CHECK_MSG_HAS(path);
        CHECK_MSG_HAS("corrupted");
        flip_byte(path, spots[k]);   /* back */
    }
    check_params(g2, 5, "graph after corrupted loads");
    MT_CHECK(mt_optim_steps(opt2) == 0, "steps changed by a failed load");

    /* a torn (truncated) file */
    MT_CHECK(truncate(path, (off_t)size - 100) == 0, "truncate");
    MT_CHECK(mt_ckpt_load(path, g2, opt2, NULL) == MT_ECHECKSUM, "truncated file: %s",
             mt_errmsg());
    MT_CHECK(truncate(path, 100) == 0, "truncate");
    MT_CHECK(mt_ckpt_load(path, g2, opt2, NULL) == MT_EFORMAT, "cut inside the header");
    CHECK_MSG_HAS("truncated");
    check_params(g2, 5, "graph after truncated loads");

    mt_optim_free(opt2);
    mt_graph_free(g2);
    mt_optim_free(opt);
    mt_graph_free(g);
    tmp_close(&td);
}

/* The whole path a run takes: a real GPT's loss is the same after its weights
 * go through an llm.c file or a checkpoint into a differently seeded model. */
static mt_graph *gpt_model(const mt_gpt_config *c, uint64_t seed, float *loss) {
    mt_graph *g = mt_graph_create();
    MT_CHECK(g != NULL, "mt_graph_create");
    mt_tensor *l = mt_gpt_build(g, c, 2, 8, 1.0f / 16.0f);
    MT_CHECK(l != NULL, "mt_gpt_build: %s", mt_errmsg());
    mt_compile_opts opts = {.seed = seed};
    MT_CHECK_OK(mt_graph_compile(g, l, &opts));
    MT_CHECK_OK(mt_gpt_fill_constants(g));
    int32_t *x = mt_tensor_i32(mt_graph_find(g, "tokens"));
    int32_t *y = mt_tensor_i32(mt_graph_find(g, "targets"));
    MT_CHECK(x && y, "GPT inputs");
    for (int i = 0; i < 16; i++) { x[i] = (i * 7) % c->V; y[i] = (i * 7 + 3) % c->V; }
    MT_CHECK_OK(mt_graph_forward(g));
    *loss = mt_graph_loss(g);
    return g;
}

MT_TEST(gpt_loss_survives_llmc_and_checkpoint) {
    tmpdir td;
    tmp_open(&td);
    const char *bin = tmp_path(&td, "gpt.bin"), *ck = tmp_path(&td, "gpt.mt");
    mt_gpt_config c = {.L = 2, .C = 16, .NH = 2, .maxT = 8, .V = 20, .Vp = 32};
    float l1, l2, l3;
    mt_graph *g1 = gpt_model(&c, 1, &l1);
    mt_ckpt_meta meta = {.step = 0};
    MT_CHECK_OK(mt_llmc_save(bin, g1, &c));
    MT_CHECK_OK(mt_ckpt_save(ck, g1, NULL, &meta));

    mt_graph *g2 = gpt_model(&c, 2, &l2);
    MT_CHECK(l2 != l1, "seeds 1 and 2 give the same loss %g", l1);
    MT_CHECK_OK(mt_llmc_load(bin, g2, &c));
    MT_CHECK_OK(mt_graph_forward(g2));
    MT_CHECK(mt_graph_loss(g2) == l1, "after llm.c load: %.9g, want %.9g", mt_graph_loss(g2), l1);

    mt_graph *g3 = gpt_model(&c, 3, &l3);
    MT_CHECK_OK(mt_ckpt_load(ck, g3, NULL, NULL));
    MT_CHECK_OK(mt_graph_forward(g3));
    MT_CHECK(mt_graph_loss(g3) == l1, "after checkpoint load: %.9g, want %.9g",
             mt_graph_loss(g3), l1);
    mt_graph_free(g3);
    mt_graph_free(g2);
    mt_graph_free(g1);
    tmp_close(&td);
}

/* ------------------------------------------------------------------------ */
/* Files: temporary names, what a path is, non-finite values (issue 7)       */
/* ------------------------------------------------------------------------ */

/* Saves write "<path>.tmp", one name per output: a stale one (left by a killed
 * save) is replaced, and nothing else is left next to the file. */
MT_TEST(saves_use_one_temporary_name_and_remove_a_stale_one) {
    tmpdir td;
    tmp_open(&td);
    const char *path = tmp_path(&td, "run.mt"), *stale = tmp_path(&td, "run.mt.tmp");
    const char *bin = tmp_path(&td, "gpt.bin"), *bin_stale = tmp_path(&td, "gpt.bin.tmp");
    char buf[256];
    MT_CHECK_OK(mt_file_tmp_path(path, buf, sizeof buf));
    MT_CHECK(strcmp(buf, stale) == 0, "temporary name '%s', want '%s'", buf, stale);
    MT_CHECK(strcmp(MT_TMP_SUFFIX, ".tmp") == 0, "MT_TMP_SUFFIX is '%s'", MT_TMP_SUFFIX);
    MT_CHECK(mt_file_tmp_path(path, buf, 8) == MT_EINVAL, "a name that does not fit");

    /* what a killed save leaves: the start of its file (the formats' magics) */
    write_bytes(stale, "MTCKPT\0\0left by kill -9", 23);
    write_bytes(bin_stale, "\xc6\xd7\x34\x01left by kill -9", 19);
    mt_graph *g = small_graph(3, 4, false);
    fill_params(g, 1);
    mt_ckpt_meta meta = {.step = 1};
    MT_CHECK_OK(mt_ckpt_save(path, g, NULL, &meta));
    mt_graph *gg = gpt_param_graph(&small_cfg, NULL, NULL);
    fill_params(gg, 2);
    MT_CHECK_OK(mt_llmc_save(bin, gg, &small_cfg));
    struct stat st;
    MT_CHECK(stat(stale, &st) != 0 && stat(bin_stale, &st) != 0, "a stale temporary file is left");
    MT_CHECK(count_files(td.dir) == 2, "%d files, want the two saved ones", count_files(td.dir));
    mt_graph_free(gg);
    mt_graph_free(g);
    tmp_close(&td);
}

/* A save renames over its target: a FIFO, a directory or a device there would
 * be replaced by a file. They are refused, and left as they were. */
MT_TEST(saves_refuse_targets_that_are_not_regular_files) {
    tmpdir td;
    tmp_open(&td);
    const char *fifo = tmp_path(&td, "out.fifo"), *dir = tmp_path(&td, "out.dir");
    const char *tmpname = tmp_path(&td, "x.ckpt.tmp");
    MT_CHECK(mkfifo(fifo, 0600) == 0 && mkdir(dir, 0700) == 0, "mkfifo, mkdir");
    mt_graph *g = small_graph(3, 4, false);
    fill_params(g, 1);
    mt_ckpt_meta meta = {.step = 1};
    MT_CHECK_FAILS(mt_ckpt_save(fifo, g, NULL, &meta), MT_EIO, fifo, "FIFO", "not a regular file");
    MT_CHECK_FAILS(mt_ckpt_save(dir, g, NULL, &meta), MT_EIO, dir, "a directory");
    MT_CHECK_FAILS(mt_ckpt_save(tmpname, g, NULL, &meta), MT_EINVAL, "temporary", "x.ckpt'");
    mt_graph *gg = gpt_param_graph(&small_cfg, NULL, NULL);
    fill_params(gg, 2);
    MT_CHECK_FAILS(mt_llmc_save(fifo, gg, &small_cfg), MT_EIO, fifo, "FIFO");
    struct stat st;
    MT_CHECK(stat(fifo, &st) == 0 && S_ISFIFO(st.st_mode), "the FIFO was replaced");
    MT_CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode), "the directory was replaced");
    MT_CHECK(count_files(td.dir) == 2, "%d files: a save left something", count_files(td.dir));
    mt_graph_free(gg);
    mt_graph_free(g);
    rmdir(dir);
    tmp_close(&td);
}

/* A save's temporary file is never loaded, even a whole one: the message names
 * the file to load instead. */
MT_TEST(loads_refuse_temporary_files_naming_the_real_one) {
    tmpdir td;
    tmp_open(&td);
    const char *path = tmp_path(&td, "run.mt"), *tmp = tmp_path(&td, "run.mt.tmp");
    const char *old = tmp_path(&td, "run.mt.tmp.4242");
    const char *bin = tmp_path(&td, "gpt.bin"), *bin_tmp = tmp_path(&td, "gpt.bin.tmp");
    mt_graph *g = small_graph(3, 4, false);
    fill_params(g, 1);
    mt_ckpt_meta meta = {.step = 1};
    MT_CHECK_OK(mt_ckpt_save(path, g, NULL, &meta));
    size_t n;
    unsigned char *raw = read_all(path, &n);
    write_bytes(tmp, raw, n);
    write_bytes(old, raw, n);
    free(raw);
    char want[160];
    snprintf(want, sizeof want, "load '%s'", path);
    MT_CHECK_FAILS(mt_ckpt_load(tmp, g, NULL, NULL), MT_EINVAL, tmp, "temporary", want);
    MT_CHECK_FAILS(mt_ckpt_read_meta(tmp, &meta), MT_EINVAL, "temporary", want);
    MT_CHECK_FAILS(mt_ckpt_load(old, g, NULL, NULL), MT_EINVAL, "temporary", want);

    mt_graph *gg = gpt_param_graph(&small_cfg, NULL, NULL);
    fill_params(gg, 2);
    MT_CHECK_OK(mt_llmc_save(bin, gg, &small_cfg));
    raw = read_all(bin, &n);
    write_bytes(bin_tmp, raw, n);
    free(raw);
    mt_gpt_config c;
    snprintf(want, sizeof want, "load '%s'", bin);
    MT_CHECK_FAILS(mt_llmc_read_config(bin_tmp, &c), MT_EINVAL, "temporary", want);
    MT_CHECK_FAILS(mt_llmc_load(bin_tmp, gg, &small_cfg), MT_EINVAL, "temporary", want);
    mt_graph_free(gg);
    mt_graph_free(g);
    tmp_close(&td);
}

/* Opening a FIFO for reading waits for a writer: every reader must refuse it
 * at once (a hang fails this case on the harness's timeout), and say what a
 * directory is rather than call it empty or truncated. */
MT_TEST(readers_refuse_fifos_and_directories_without_blocking) {
    tmpdir td;
    tmp_open(&td);
    const char *fifo = tmp_path(&td, "in.fifo");
    MT_CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
    mt_graph *g = small_graph(3, 4, false);
    mt_gpt_config c;
    mt_ckpt_meta meta;
    mt_dataset *ds = NULL;
    mt_file_kind kind;
    const char *paths[2] = {fifo, td.dir}, *what[2] = {"FIFO", "a directory"};
    for (int i = 0; i < 2; i++) {
        MT_CHECK_FAILS(mt_dataset_open(paths[i], 0.1, &ds), MT_EIO, paths[i], what[i]);
        MT_CHECK_FAILS(mt_ckpt_read_meta(paths[i], &meta), MT_EIO, paths[i], what[i]);
        MT_CHECK_FAILS(mt_ckpt_load(paths[i], g, NULL, NULL), MT_EIO, paths[i], what[i]);
        MT_CHECK_FAILS(mt_llmc_read_config(paths[i], &c), MT_EIO, paths[i], what[i]);
        MT_CHECK_FAILS(mt_llmc_load(paths[i], NULL, &small_cfg), MT_EIO, paths[i], what[i]);
        MT_CHECK_FAILS(mt_file_detect(paths[i], &kind), MT_EIO, paths[i], what[i]);
    }
    const char *missing = tmp_path(&td, "missing");
    MT_CHECK_FAILS(mt_file_detect(missing, &kind), MT_EIO, missing, "No such file");
    mt_graph_free(g);
    tmp_close(&td);
}

MT_TEST(file_detect_reads_the_magic) {
    tmpdir td;
    tmp_open(&td);
    const char *ck = tmp_path(&td, "a.mt"), *bin = tmp_path(&td, "a.bin");
    const char *tok = tmp_path(&td, "a.tok"), *txt = tmp_path(&td, "a.txt");
    const char *empty = tmp_path(&td, "empty");
    mt_graph *g = small_graph(3, 4, false);
    mt_ckpt_meta meta = {.step = 1};
    MT_CHECK_OK(mt_ckpt_save(ck, g, NULL, &meta));
    write_llmc_by_hand(bin, 20240326, 3, &small_cfg, 4);   /* only the magic is read */
    int32_t t[3] = {1, 2, 3};
    MT_CHECK_OK(mt_tokens_write(tok, t, 3));
    write_bytes(txt, "MTCKP", 5);   /* a prefix of the magic is not the magic */
    write_bytes(empty, "", 0);
    const char *paths[] = {ck, bin, tok, txt, empty};
    const mt_file_kind want[] = {MT_FILE_CKPT, MT_FILE_LLMC, MT_FILE_TOKENS, MT_FILE_OTHER,
                                 MT_FILE_OTHER};
    for (int i = 0; i < 5; i++) {
        mt_file_kind kind = (mt_file_kind)99;
        MT_CHECK_OK(mt_file_detect(paths[i], &kind));
        MT_CHECK(kind == want[i], "%s: kind %d, want %d", paths[i], (int)kind, (int)want[i]);
    }
    mt_graph_free(g);
    tmp_close(&td);
}

/* The start-up check of an output goes the way the save will: it catches a
 * missing directory, a directory, a temporary name and a name too long once
 * ".tmp" is added, and leaves nothing behind. */
MT_TEST(file_check_save_tries_the_temporary_file) {
    tmpdir td;
    tmp_open(&td);
    const char *fresh = tmp_path(&td, "new.mt"), *stale = tmp_path(&td, "old.mt.tmp");
    const char *old = tmp_path(&td, "old.mt"), *fifo = tmp_path(&td, "p");
    const char *nodir = tmp_path(&td, "nodir/x.mt");
    MT_CHECK_OK(mt_file_check_save(fresh));
    MT_CHECK(count_files(td.dir) == 0, "the check left %d files", count_files(td.dir));
    write_bytes(old, "a checkpoint", 12);
    write_bytes(stale, "MTCKPT\0\0left by kill -9", 23);   /* a killed save's start */
    MT_CHECK_OK(mt_file_check_save(old));
    struct stat st;
    MT_CHECK(stat(stale, &st) != 0, "the stale temporary file is still there");
    size_t n;
    unsigned char *raw = read_all(old, &n);
    MT_CHECK(n == 12 && memcmp(raw, "a checkpoint", 12) == 0, "the target was touched");
    free(raw);
    MT_CHECK_FAILS(mt_file_check_save(nodir), MT_EIO, nodir, "No such file");
    MT_CHECK_FAILS(mt_file_check_save(td.dir), MT_EIO, "a directory");
    MT_CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
    MT_CHECK_FAILS(mt_file_check_save(fifo), MT_EIO, "FIFO");
    MT_CHECK_FAILS(mt_file_check_save(stale), MT_EINVAL, "temporary");
    /* NAME_MAX is 255: a 252-byte name fits, its temporary name does not */
    char longname[512];
    int k = snprintf(longname, sizeof longname, "%s/", td.dir);
    memset(longname + k, 'n', 252);
    longname[k + 252] = '\0';
    MT_CHECK_FAILS(mt_file_check_save(longname), MT_EIO, "too long");
    MT_CHECK(count_files(td.dir) == 2, "%d files, want old.mt and the FIFO", count_files(td.dir));
    tmp_close(&td);
}

/* A CRC says the bytes are as written, not that the numbers are sane: a NaN or
 * infinity is refused naming the tensor, and nothing is copied. */
MT_TEST(ckpt_load_refuses_non_finite_values) {
    tmpdir td;
    tmp_open(&td);
    const char *path = tmp_path(&td, "nan.mt"), *inf = tmp_path(&td, "inf.mt");
    mt_graph *g = small_graph(3, 4, false);
    mt_optim *opt = adamw(g);
    fill_params(g, 1);
    fill_moments(g, opt, 2);
    mt_ckpt_meta meta = {.step = 3};
    mt_tensor *b = mt_graph_find(g, "b");
    mt_tensor_f32(b)[2] = NAN;
    MT_CHECK_OK(mt_ckpt_save(path, g, opt, &meta));
    mt_tensor_f32(b)[2] = 0.5f;
    int ib = -1;
    for (int i = 0; i < mt_graph_n_params(g); i++)
        if (mt_graph_param_at(g, i) == b) ib = i;
    mt_optim_moment(opt, ib, 2)[4] = INFINITY;   /* v of 'b' */
    MT_CHECK_OK(mt_ckpt_save(inf, g, opt, &meta));

    mt_graph *g2 = small_graph(3, 4, false);
    mt_optim *opt2 = adamw(g2);
    fill_params(g2, 5);
    fill_moments(g2, opt2, 6);
    MT_CHECK_FAILS(mt_ckpt_load(path, g2, opt2, NULL), MT_ENAN, path, "'b'", "element 2", "nan");
    check_params(g2, 5, "graph after the refused load");
    check_moments(g2, opt2, 6);
    MT_CHECK_FAILS(mt_ckpt_load(inf, g2, opt2, NULL), MT_ENAN, inf, "moment v", "'b'", "element 4");
    check_params(g2, 5, "graph after the refused load");
    /* parameters only: the moments are not loaded, so they are not checked */
    MT_CHECK_OK(mt_ckpt_load(inf, g2, NULL, NULL));
    MT_CHECK(mt_tensor_f32(mt_graph_find(g2, "b"))[2] == 0.5f, "parameters-only load");
    mt_optim_free(opt2);
    mt_graph_free(g2);
    mt_optim_free(opt);
    mt_graph_free(g);
    tmp_close(&td);
}

MT_TEST(llmc_load_refuses_non_finite_values) {
    tmpdir td;
    tmp_open(&td);
    const mt_gpt_config *c = &small_cfg;
    const char *path = tmp_path(&td, "gpt.bin");
    mt_graph *g = gpt_param_graph(c, NULL, NULL);
    fill_params(g, 3);
    MT_CHECK_OK(mt_llmc_save(path, g, c));
    /* wpe (maxT,C) follows the 1024-byte header and wte (Vp,C): its element 5 */
    long at = 1024 + 4L * c->Vp * c->C + 4L * 5;
    float inf = INFINITY;
    FILE *f = fopen(path, "r+b");
    MT_CHECK(f && fseek(f, at, SEEK_SET) == 0 && fwrite(&inf, 4, 1, f) == 1, "patch");
    fclose(f);
    mt_graph *g2 = gpt_param_graph(c, NULL, NULL);
    fill_params(g2, 4);
    MT_CHECK_FAILS(mt_llmc_load(path, g2, c), MT_ENAN, path, "'wpe'", "element 5", "inf");
    check_params(g2, 4, "graph after the refused load");
    mt_graph_free(g2);
    mt_graph_free(g);
    tmp_close(&td);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
