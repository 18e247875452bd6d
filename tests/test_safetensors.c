/*
 * test_safetensors.c — Hugging Face's safetensors files (meshtrain/io.h,
 * issue 43) against files built by hand here, byte by byte:
 *
 *  - a file whose header lists its tensors out of offset order, with F32,
 *    BF16 and F16 values whose bit patterns are written here and whose
 *    values are worked by hand (1, -2, 65504, 2^-24, -inf, ...), read whole
 *    and by element ranges, with its metadata;
 *  - IEEE half conversions against an independent reference: every one of
 *    the 65536 patterns decoded by the formula (-1)^s · 2^(e-15) · (1 +
 *    f/1024) (subnormals 2^-14 · f/1024), and f32 -> f16 against the
 *    nearest of those values found by search, ties to the even pattern;
 *  - malformed headers, each refused naming the file's fault and the tensor;
 *  - a written file read back bit for bit, its header padded to 8 bytes,
 *    and written again from what was read: the same bytes;
 *  - shards through model.safetensors.index.json (by the index's path and
 *    by the directory), and an index that disagrees with its shards.
 */
#include "meshtrain.h"
#include "harness.h"
#include "tensor/tensor_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/mt-test-st-XXXXXX";

static const char *path_of(const char *name) {
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* A file of an 8-byte length, `json` (as given, unpadded) and data[n]. */
static void write_raw(const char *name, const char *json, const void *data, size_t n,
                      uint64_t claimed) {
    FILE *f = fopen(path_of(name), "wb");
    MT_CHECK(f, "create %s", name);
    uint64_t len = claimed ? claimed : strlen(json);
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(len >> (8 * i));
    fwrite(b, 1, 8, f);
    fwrite(json, 1, strlen(json), f);
    if (n) fwrite(data, 1, n, f);
    fclose(f);
}

static void cleanup(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "  could not remove %s\n", dir);
}

/* Each case (a child of its own) makes the directory and removes it when
 * it passes. */
static void setup(void) {
    MT_CHECK(mkdtemp(dir), "mkdtemp");
    atexit(cleanup);
}

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

MT_TEST(hand_built_file_read) {
    setup();
    /* data: a F32 (2,2) = 1 2 3 4 at [0,16); b BF16 (3) at [16,22); c F16 (4) at [22,30) */
    uint8_t data[30];
    const float a[4] = {1, 2, 3, 4};
    memcpy(data, a, 16);
    const uint16_t b[3] = {0x3F80, 0xC000, 0x3EAB};          /* 1, -2, 0.333984375 */
    const uint16_t c[4] = {0x3C00, 0x7BFF, 0x0001, 0xFC00};  /* 1, 65504, 2^-24, -inf */
    memcpy(data + 16, b, 6);
    memcpy(data + 22, c, 8);
    write_raw("hand.safetensors",
              "{\"c\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[22,30]},"
              "\"__metadata__\":{\"format\":\"pt\"},"
              "\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
              "\"b\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[16,22]}}",
              data, sizeof data, 0);
    mt_safetensors *st = NULL;
    MT_CHECK_OK(mt_safetensors_open(path_of("hand.safetensors"), &st));
    MT_CHECK(mt_safetensors_count(st) == 3, "%d tensors", mt_safetensors_count(st));
    MT_CHECK(!strcmp(mt_safetensors_tensor(st, 0)->name, "a") &&
             !strcmp(mt_safetensors_tensor(st, 2)->name, "c"), "not in offset order");
    MT_CHECK(mt_safetensors_metadata(st, "format") &&
             !strcmp(mt_safetensors_metadata(st, "format"), "pt"), "metadata");
    MT_CHECK(!mt_safetensors_metadata(st, "other") && !mt_safetensors_find(st, "d"), "absent");
    const mt_st_tensor *ta = mt_safetensors_find(st, "a"), *tb = mt_safetensors_find(st, "b"),
                       *tc = mt_safetensors_find(st, "c");
    MT_CHECK(ta->ndim == 2 && ta->shape[0] == 2 && ta->shape[1] == 2 && ta->numel == 4 &&
             ta->dtype == MT_ST_F32, "a's shape");
    MT_CHECK(tb->dtype == MT_ST_BF16 && tc->dtype == MT_ST_F16 && tc->numel == 4, "dtypes");
    float got[4];
    MT_CHECK_OK(mt_safetensors_read_f32(st, ta, 0, 4, got));
    for (int i = 0; i < 4; i++) MT_CHECK(got[i] == a[i], "a[%d] = %g", i, got[i]);
    MT_CHECK_OK(mt_safetensors_read_f32(st, tb, 0, 3, got));
    MT_CHECK(got[0] == 1.0f && got[1] == -2.0f && got[2] == 0.333984375f, "b: %g %g %g",
             got[0], got[1], got[2]);
    MT_CHECK_OK(mt_safetensors_read_f32(st, tc, 0, 4, got));
    MT_CHECK(got[0] == 1.0f && got[1] == 65504.0f && got[2] == ldexpf(1, -24) &&
             isinf(got[3]) && got[3] < 0, "c: %g %g %g %g", got[0], got[1], got[2], got[3]);
    MT_CHECK_OK(mt_safetensors_read_f32(st, tc, 1, 2, got));   /* a range: 2 elements from 1 */
    MT_CHECK(got[0] == 65504.0f && got[1] == ldexpf(1, -24), "c[1..2]: %g %g", got[0], got[1]);
    MT_CHECK_FAILS(mt_safetensors_read_f32(st, tc, 3, 2, got), MT_EINVAL, "'c'", "past");
    mt_safetensors_close(st);
}

/* The value of half pattern h by the formula (NaN for NaN patterns). */
static double half_value(uint16_t h) {
    const int s = h >> 15, e = (h >> 10) & 31, f = h & 1023;
    if (e == 31) return f ? NAN : (s ? -INFINITY : INFINITY);
    double v = e ? ldexp(1.0 + f / 1024.0, e - 15) : ldexp(f / 1024.0, -14);
    return s ? -v : v;
}

MT_TEST(half_conversions_against_the_formula) {
    for (uint32_t h = 0; h < 65536; h++) {
        const double want = half_value((uint16_t)h);
        const float got = mt__f16_to_f32_1((uint16_t)h);
        if (isnan(want)) MT_CHECK(isnan(got), "%04x: %g, want NaN", h, got);
        else MT_CHECK((double)got == want && !signbit(got) == !signbit(want), "%04x: %.9g, want "
                      "%.9g", h, got, want);
    }
    /* f32 -> f16: the nearest half by search among the positive finite
       patterns, ties to the even pattern; beyond 65504 + half an ulp, inf */
    for (uint32_t i = 0; i < 200000; i++) {
        float x;
        if (i < 65536 && (i & 0x7c00) != 0x7c00 && (i & 0x7fff) < 0x7bff) {
            /* the midpoint above each finite half: the hardest case */
            const double lo = half_value((uint16_t)i), hi = half_value((uint16_t)(i + 1));
            x = (float)((lo + hi) / 2);
        } else {
            x = ldexpf(mt_rng_uniform(3, 0, i) * 2 - 1, (int)(mt_rng_uniform(3, 1, i) * 44) - 28);
        }
        const double ax = fabs((double)x);
        uint16_t best = 0;
        if (ax >= 65520.0) best = 0x7c00;
        else {
            double err = INFINITY;
            int lo = 0, hi = 0x7bff;   /* the largest half <= ax, by bisection */
            while (lo < hi) {
                const int mid = (lo + hi + 1) / 2;
                if (half_value((uint16_t)mid) <= ax) lo = mid; else hi = mid - 1;
            }
            for (int c = lo; c <= lo + 1 && c <= 0x7bff; c++) {
                const double e = fabs(half_value((uint16_t)c) - ax);
                if (e < err || (e == err && !(c & 1))) err = e, best = (uint16_t)c;
            }
        }
        if (signbit(x)) best |= 0x8000;
        MT_CHECK(mt__f32_to_f16_1(x) == best, "%.9g -> %04x, want %04x", x,
                 mt__f32_to_f16_1(x), best);
    }
    MT_CHECK((mt__f32_to_f16_1(NAN) & 0x7c00) == 0x7c00 && (mt__f32_to_f16_1(NAN) & 0x3ff),
             "NaN -> %04x", mt__f32_to_f16_1(NAN));
    MT_CHECK(mt__f32_to_f16_1(bits_f32(0x477fefff)) == 0x7bff &&
             mt__f32_to_f16_1(65520.0f) == 0x7c00, "the overflow's edge");
}

/* A header with one F32 tensor "w" of 4 elements over 16 bytes, where
 * `entry` replaces w's entry, must be refused with `code` naming each of
 * the strings given. */
static void refused(const char *json, size_t data_bytes, uint64_t claimed, mt_status code,
                    const char *want1, const char *want2) {
    static const uint8_t zeros[64];
    write_raw("bad.safetensors", json, zeros, data_bytes, claimed);
    mt_safetensors *st = NULL;
    MT_CHECK_FAILS(mt_safetensors_open(path_of("bad.safetensors"), &st), code, want1, want2);
    MT_CHECK(!st, "a handle after a refusal");
}

#define W(dt, shape, off) "\"w\":{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":" off "}"

MT_TEST(malformed_headers_are_refused_naming_the_tensor) {
    setup();
    const char *v = "\"v\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":";
    char j[512];
    snprintf(j, sizeof j, "{%s[8,16]}," W("F32", "[4]", "[0,16]") "}", v);
    refused(j, 16, 0, MT_EFORMAT, "'v'", "overlap");
    snprintf(j, sizeof j, "{%s[20,28]}," W("F32", "[4]", "[0,16]") "}", v);
    refused(j, 28, 0, MT_EFORMAT, "'v'", "a gap");
    refused("{" W("F32", "[4]", "[0,16]") "}", 12, 0, MT_EFORMAT, "past the file's end", "16");
    refused("{" W("F32", "[4]", "[0,16]") "}", 20, 0, MT_EFORMAT, "left over", "20");
    refused("{" W("F99", "[4]", "[0,16]") "}", 16, 0, MT_EFORMAT, "'w'", "unknown dtype 'F99'");
    refused("{" W("I64", "[2]", "[0,16]") "}", 16, 0, MT_EUNSUPPORTED, "'w' is I64", "F16");
    refused("{" W("F32", "[4294967296,4294967296]", "[0,16]") "}", 16, 0, MT_EFORMAT, "'w'",
            "2^53");
    refused("{" W("F32", "[3]", "[0,16]") "}", 16, 0, MT_EFORMAT, "'w'", "12");
    refused("{" W("F32", "[2.5]", "[0,10]") "}", 16, 0, MT_EFORMAT, "'w'", "shape[0]");
    refused("{" W("F32", "[-4]", "[0,16]") "}", 16, 0, MT_EFORMAT, "'w'", "shape[0]");
    refused("{" W("F32", "[4]", "[16,0]") "}", 16, 0, MT_EFORMAT, "'w'", "[16, 0]");
    refused("{" W("F32", "[4]", "[0]") "}", 16, 0, MT_EFORMAT, "'w'", "data_offsets");
    refused("{\"w\":{\"shape\":[4],\"data_offsets\":[0,16]}}", 16, 0, MT_EFORMAT, "'w'",
            "no dtype");
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16],\"x\":1}}", 16, 0,
            MT_EFORMAT, "'w'", "unknown field 'x'");
    refused("{" W("F32", "[4]", "[0,16]") "," W("F32", "[4]", "[0,16]") "}", 16, 0, MT_EFORMAT,
            "'w'", "bad.safetensors");
    refused("{\"__metadata__\":{\"n\":1}," W("F32", "[4]", "[0,16]") "}", 16, 0, MT_EFORMAT,
            "__metadata__ 'n'", "not a string");
    refused("{" W("F32", "[4]", "[0,16]") "}", 16, 1000000, MT_EFORMAT, "1000000", "past");
    refused(" {" W("F32", "[4]", "[0,16]") "}", 16, 0, MT_EFORMAT, "does not start with '{'",
            "bad.safetensors");
    write_raw("short.safetensors", "", NULL, 0, 0);
    truncate(path_of("short.safetensors"), 5);
    mt_safetensors *st = NULL;
    MT_CHECK_FAILS(mt_safetensors_open(path_of("short.safetensors"), &st), MT_EFORMAT,
                   "5 bytes", "8-byte");
    MT_CHECK_FAILS(mt_safetensors_open(dir, &st), MT_EIO, "neither", "model.safetensors");
}

MT_TEST(written_file_round_trips_bit_for_bit) {
    setup();
    enum { N1 = 6, N2 = 5, N3 = 7 };
    float x[N1], y[N2], z[N3];
    for (int i = 0; i < N1; i++) x[i] = mt_rng_normal(1, 0, (uint64_t)i);
    /* values each dtype holds exactly: decoded from random patterns */
    for (int i = 0; i < N2; i++) y[i] = mt__bf16_to_f32_1((uint16_t)(mt_rng_uniform(1, 1, i) * 65535));
    for (int i = 0; i < N3; i++) z[i] = mt__f16_to_f32_1((uint16_t)(mt_rng_uniform(1, 2, i) * 31743));
    const int64_t s1[2] = {2, 3}, s2[1] = {N2}, s3[3] = {1, 7, 1};
    const mt_st_write_tensor t[3] = {{"model.x", MT_ST_F32, 2, s1, x},
                                     {"model.y", MT_ST_BF16, 1, s2, y},
                                     {"model.z", MT_ST_F16, 3, s3, z}};
    const char *meta[] = {"format", "pt", NULL};
    MT_CHECK_OK(mt_safetensors_write(path_of("rt.safetensors"), t, 3, meta));
    FILE *f = fopen(path_of("rt.safetensors"), "rb");
    uint8_t len8[8];
    MT_CHECK(fread(len8, 1, 8, f) == 8, "read");
    fclose(f);
    MT_CHECK(len8[0] % 8 == 0, "header length %d is not a multiple of 8", len8[0]);
    mt_safetensors *st = NULL;
    MT_CHECK_OK(mt_safetensors_open(path_of("rt.safetensors"), &st));
    const float *want[3] = {x, y, z};
    float got[8], back[3][8];
    for (int k = 0; k < 3; k++) {
        const mt_st_tensor *r = mt_safetensors_find(st, t[k].name);
        MT_CHECK(r && r->dtype == t[k].dtype && r->ndim == t[k].ndim, "%s", t[k].name);
        MT_CHECK_OK(mt_safetensors_read_f32(st, r, 0, r->numel, got));
        MT_CHECK(!memcmp(got, want[k], (size_t)r->numel * 4), "%s differs", t[k].name);
        memcpy(back[k], got, sizeof got);
    }
    MT_CHECK(!strcmp(mt_safetensors_metadata(st, "format"), "pt"), "metadata");
    mt_safetensors_close(st);
    const mt_st_write_tensor t2[3] = {{"model.x", MT_ST_F32, 2, s1, back[0]},
                                      {"model.y", MT_ST_BF16, 1, s2, back[1]},
                                      {"model.z", MT_ST_F16, 3, s3, back[2]}};
    MT_CHECK_OK(mt_safetensors_write(path_of("rt2.safetensors"), t2, 3, meta));
    char cmd[600];
    snprintf(cmd, sizeof cmd, "cmp -s %s %s", path_of("rt.safetensors"), path_of("rt2.safetensors"));
    MT_CHECK(system(cmd) == 0, "written again from what was read: not the same bytes");
    const mt_st_write_tensor dup[2] = {t[0], t[0]}, quote = {"a\"b", MT_ST_F32, 2, s1, x};
    MT_CHECK_FAILS(mt_safetensors_write(path_of("no.safetensors"), dup, 2, NULL), MT_EINVAL,
                   "'model.x'", "twice");
    MT_CHECK_FAILS(mt_safetensors_write(path_of("no.safetensors"), &quote, 1, NULL), MT_EINVAL,
                   "quote");
}

/* Two shards of "a", "b" and "c", and an index written from `map`. */
static void shards(const char *map) {
    const float v[4] = {1, 2, 3, 4};
    const int64_t s2[1] = {2}, s4[1] = {4};
    const mt_st_write_tensor one[2] = {{"a", MT_ST_F32, 1, s2, v}, {"b", MT_ST_F32, 1, s4, v}};
    const mt_st_write_tensor two[1] = {{"c", MT_ST_BF16, 1, s4, v}};
    MT_CHECK_OK(mt_safetensors_write(path_of("model-00001-of-00002.safetensors"), one, 2, NULL));
    MT_CHECK_OK(mt_safetensors_write(path_of("model-00002-of-00002.safetensors"), two, 1, NULL));
    FILE *f = fopen(path_of("model.safetensors.index.json"), "w");
    fputs(map, f);
    fclose(f);
}

#define SH1 "\"model-00001-of-00002.safetensors\""
#define SH2 "\"model-00002-of-00002.safetensors\""

MT_TEST(shards_through_the_index) {
    setup();
    /* bytes: a 8, b 16, c 8 */
    shards("{\"metadata\":{\"total_size\":32},\"weight_map\":{\"c\":" SH2 ",\"a\":" SH1 ","
           "\"b\":" SH1 "}}");
    for (int by_dir = 0; by_dir < 2; by_dir++) {
        mt_safetensors *st = NULL;
        MT_CHECK_OK(mt_safetensors_open(by_dir ? dir : path_of("model.safetensors.index.json"),
                                        &st));
        MT_CHECK(mt_safetensors_count(st) == 3, "%d tensors", mt_safetensors_count(st));
        const mt_st_tensor *c = mt_safetensors_find(st, "c");
        MT_CHECK(c && strstr(mt_safetensors_file(st, c), "00002"), "c's shard");
        float got[4];
        MT_CHECK_OK(mt_safetensors_read_f32(st, c, 0, 4, got));
        MT_CHECK(got[0] == 1 && got[3] == 4, "c: %g .. %g", got[0], got[3]);
        MT_CHECK_OK(mt_safetensors_read_f32(st, mt_safetensors_find(st, "b"), 2, 2, got));
        MT_CHECK(got[0] == 3 && got[1] == 4, "b[2..3]: %g %g", got[0], got[1]);
        mt_safetensors_close(st);
    }
    char idx[300];   /* path_of's buffers turn over in shards() */
    snprintf(idx, sizeof idx, "%s", path_of("model.safetensors.index.json"));
    mt_safetensors *st = NULL;
    shards("{\"metadata\":{\"total_size\":33},\"weight_map\":{\"c\":" SH2 ",\"a\":" SH1 ","
           "\"b\":" SH1 "}}");
    MT_CHECK_FAILS(mt_safetensors_open(idx, &st), MT_EFORMAT, "total_size is 33", "32");
    shards("{\"weight_map\":{\"c\":" SH2 ",\"a\":" SH1 "}}");
    MT_CHECK_FAILS(mt_safetensors_open(idx, &st), MT_EFORMAT, "'b'", "does not name");
    shards("{\"weight_map\":{\"c\":" SH1 ",\"a\":" SH1 ",\"b\":" SH1 "}}");
    MT_CHECK_FAILS(mt_safetensors_open(idx, &st), MT_EFORMAT, "'c'", "in no shard");
    shards("{\"weight_map\":{\"c\":" SH2 ",\"a\":" SH1 ",\"b\":" SH1 ",\"d\":" SH2 "}}");
    MT_CHECK_FAILS(mt_safetensors_open(idx, &st), MT_EFORMAT, "'d'", "in no shard");
    shards("{\"weight_map\":{\"c\":\"../model-00002-of-00002.safetensors\"}}");
    MT_CHECK_FAILS(mt_safetensors_open(idx, &st), MT_EFORMAT, "not a file name", "../");
    shards("{\"weight_map\":{}}");
    MT_CHECK_FAILS(mt_safetensors_open(idx, &st), MT_EFORMAT, "no weight_map");
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
