/* test_base.c — status table, error messages and wrapping them, Philox known
 * answers, RNG moments. */
#include "meshtrain.h"
#include "harness.h"
#include "base/base_impl.h"
#include "base/json.h"

#include <stdio.h>
#include <string.h>

MT_TEST(status_names_and_messages) {
    MT_CHECK(strcmp(mt_status_name(MT_EINVAL), "MT_EINVAL") == 0, "name of MT_EINVAL");
    MT_CHECK(strcmp(mt_status_name(-999), "MT_E?") == 0, "unknown code");
    MT_CHECK(strcmp(mt_status_text(MT_ECHECKSUM), "checksum mismatch") == 0, "text");
    mt_status s = mt_fail(MT_ESHAPE, "tensor '%s' is (%d,%d)", "x", 2, 3);
    MT_CHECK(s == MT_ESHAPE, "mt_fail returns its code");
    MT_CHECK(strcmp(mt_errmsg(), "tensor 'x' is (2,3)") == 0, "message: %s", mt_errmsg());
    mt_errclear();
    MT_CHECK(mt_errmsg()[0] == '\0', "cleared");
}

/* A message built from the current one: the old text is read before it is
 * replaced, whether passed as an argument or wrapped. */
MT_TEST(wrapping_a_message_keeps_the_old_one) {
    mt_fail(MT_EIO, "cannot read 'a.ckpt'");
    mt_status s = mt_fail(MT_EFORMAT, "at step %d: %s; try again", 7, mt_errmsg());
    MT_CHECK(s == MT_EFORMAT && strcmp(mt_errmsg(), "at step 7: cannot read 'a.ckpt'; try again") == 0,
             "argument: '%s'", mt_errmsg());
    mt_fail(MT_EIO, "cannot read 'a.ckpt'");
    s = mt_fail_wrap(MT_EINVAL, "resuming at step %d", 7);
    MT_CHECK(s == MT_EINVAL && strcmp(mt_errmsg(), "resuming at step 7: cannot read 'a.ckpt'") == 0,
             "wrap: '%s'", mt_errmsg());
    mt_fail_wrap(MT_EINVAL, "device %d", 2);
    MT_CHECK(strcmp(mt_errmsg(), "device 2: resuming at step 7: cannot read 'a.ckpt'") == 0,
             "wrapped twice: '%s'", mt_errmsg());
    mt_errclear();
    mt_fail_wrap(MT_EINVAL, "nothing below");
    MT_CHECK(strcmp(mt_errmsg(), "nothing below") == 0, "no message to wrap: '%s'", mt_errmsg());
    /* a long message is cut, never overrun, and stays terminated */
    char longer[3000];
    memset(longer, 'x', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    mt_fail(MT_EIO, "%s", longer);
    mt_fail_wrap(MT_EIO, "prefix");
    MT_CHECK(strncmp(mt_errmsg(), "prefix: xxx", 11) == 0 && strlen(mt_errmsg()) < 1024,
             "cut to %zu bytes", strlen(mt_errmsg()));
    mt_fail(MT_EIO, "short");
    mt_fail_wrap(MT_EIO, "%s", longer);
    MT_CHECK(strlen(mt_errmsg()) < 1024 && mt_errmsg()[0] == 'x', "a long prefix is cut too");
}

/* Known-answer vectors of Philox-4x32-10 from the Random123 distribution. */
MT_TEST(philox_known_answers) {
    struct { uint64_t key, hi, lo; uint32_t want[4]; } kat[] = {
        {0, 0, 0, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
        {0xffffffffffffffffull, 0xffffffffffffffffull, 0xffffffffffffffffull,
         {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
        {0x299f31d0a4093822ull, 0x0370734413198a2eull, 0x85a308d3243f6a88ull,
         {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
    };
    for (size_t k = 0; k < sizeof kat / sizeof kat[0]; k++) {
        uint32_t out[4];
        mt_philox4x32(kat[k].key, kat[k].hi, kat[k].lo, out);
        for (int j = 0; j < 4; j++)
            MT_CHECK(out[j] == kat[k].want[j], "vector %zu word %d: %08x, want %08x", k, j,
                     out[j], kat[k].want[j]);
    }
}

MT_TEST(rng_moments_and_determinism) {
    double s = 0, s2 = 0, u_min = 1, u_max = 0;
    int n = 200000;
    for (int i = 0; i < n; i++) {
        double x = mt_rng_normal(7, 3, (uint64_t)i);
        s += x;
        s2 += x * x;
        double u = mt_rng_uniform(7, 3, (uint64_t)i);
        if (u < u_min) u_min = u;
        if (u > u_max) u_max = u;
    }
    MT_CHECK(fabs(s / n) < 0.01, "normal mean %g", s / n);
    MT_CHECK(fabs(s2 / n - 1) < 0.02, "normal variance %g", s2 / n);
    MT_CHECK(u_min >= 0 && u_max < 1 && u_min < 1e-3 && u_max > 0.999, "uniform range [%g, %g]",
             u_min, u_max);
    /* a value depends only on (seed, stream, index) */
    MT_CHECK(mt_rng_normal(7, 3, 12345) == mt_rng_normal(7, 3, 12345), "deterministic");
    MT_CHECK(mt_rng_normal(7, 3, 12345) != mt_rng_normal(8, 3, 12345), "seed matters");
    MT_CHECK(mt_rng_normal(7, 3, 12345) != mt_rng_normal(7, 4, 12345), "stream matters");
    MT_CHECK(mt_hash_name("wte") != mt_hash_name("wpe"), "names hash apart");
}

/* The run forms give the one-at-a-time numbers bit for bit, whatever the
 * first index and length (inside a block of 16 lanes, across blocks, and
 * across the 2^32 boundary of the counter's low word). */
MT_TEST(rng_fills_equal_the_scalar_functions) {
    static const struct { uint64_t first; int64_t n; } runs[] = {
        {0, 1}, {0, 16}, {3, 29}, {1000, 100}, {(1ull << 32) - 5, 40}, {123456789, 0},
    };
    float out[128];
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        mt__rng_normal_fill(42, 7, runs[k].first, runs[k].n, 0.02f, out);
        for (int64_t i = 0; i < runs[k].n; i++) {
            float want = 0.02f * mt_rng_normal(42, 7, runs[k].first + (uint64_t)i);
            MT_CHECK(memcmp(&out[i], &want, sizeof want) == 0, "normal run %zu element %lld: %.9g, "
                     "want %.9g", k, (long long)i, out[i], want);
        }
        mt__rng_uniform_fill(42, 7, runs[k].first, runs[k].n, 0.5f, out);
        for (int64_t i = 0; i < runs[k].n; i++) {
            float want = 0.5f * (2.0f * mt_rng_uniform(42, 7, runs[k].first + (uint64_t)i) - 1.0f);
            MT_CHECK(memcmp(&out[i], &want, sizeof want) == 0, "uniform run %zu element %lld: "
                     "%.9g, want %.9g", k, (long long)i, out[i], want);
        }
    }
}

/* mt__text_put and mt__text_put_int (text.c) against snprintf, the
 * reference they stand in for: "%s%.*s%s%lld" piece by piece, every cap
 * from 0 past the whole text, each precision, negative and extreme ints. */
MT_TEST(text_pieces_cut_as_snprintf_cuts) {
    static const char *const name[] = {"", "h.0.attn.qkv.w", "grad.pvary(remat(x))"};
    static const long long v[] = {0, 7, -7, 1234567, -9223372036854775807LL - 1,
                                  9223372036854775807LL};
    static const size_t most[] = {0, 3, 14, (size_t)-1};
    for (size_t n = 0; n < 3; n++)
        for (size_t m = 0; m < 4; m++)
            for (size_t k = 0; k < 6; k++)
                for (size_t cap = 0; cap < 64; cap++) {
                    char want[64] = "#", got[64] = "#";
                    const int prec = most[m] > 64 ? 64 : (int)most[m];
                    if (cap) snprintf(want, cap, "pvary(%.*s)%lld", prec, name[n], v[k]);
                    size_t at = 0;
                    if (cap) got[0] = '\0';
                    mt__text_put(got, cap, &at, "pvary(", (size_t)-1);
                    mt__text_put(got, cap, &at, name[n], most[m]);
                    mt__text_put(got, cap, &at, ")", 1);
                    mt__text_put_int(got, cap, &at, v[k]);
                    MT_CHECK(!strcmp(want, got), "cap %zu: snprintf '%s', pieces '%s'", cap,
                             want, got);
                    MT_CHECK(cap == 0 || at == strlen(got), "cap %zu: %zu bytes written, "
                             "text of %zu", cap, at, strlen(got));
                }
}

/* mt__text_format (text.c) against snprintf, the reference it stands in
 * for: every plain conversion (its own code) and some that are not (handed
 * to vsnprintf), every cap from 0 past the whole text; the same bytes and
 * the same return. */
MT_TEST(text_format_writes_as_snprintf_writes) {
    static const char *const s[] = {"", "h.0.attn.qkv.w", "grad.pvary(remat(x))", NULL};
    static const long long v[] = {0, 7, -7, 1234567, -9223372036854775807LL - 1,
                                  9223372036854775807LL};
    for (size_t i = 0; i < 4; i++)
        for (size_t k = 0; k < 6; k++)
            for (size_t cap = 0; cap < 120; cap++) {
                char want[120] = "#", got[120] = "#";
                const int iv = (int)v[k];
                const long lv = (long)v[k];
                const unsigned long long uv = (unsigned long long)v[k];
                const char *si = s[i] ? s[i] : "x";
                int nw, ng;
#define SAME(...)                                                                           \
    nw = snprintf(want, cap, __VA_ARGS__);                                                  \
    ng = mt__text_format(got, cap, __VA_ARGS__);                                            \
    MT_CHECK(nw == ng && (cap == 0 || !strcmp(want, got)),                                  \
             "cap %zu, '%s': snprintf %d '%s', mt__text_format %d '%s'", cap, #__VA_ARGS__, \
             nw, cap ? want : "", ng, cap ? got : "");
                SAME("%lld sequences do not split into %d microbatches (%s)%%", v[k], iv, si)
                SAME("%.5s|%.*s|%.0s|%.30s|%c%i|%ld|%lu|%llu|%u|%zu", si, (int)k - 2, si, si, si,
                     'A' + (int)k, iv, lv, (unsigned long)lv, uv, (unsigned)iv, (size_t)uv)
                SAME("%.3s %.6s %.*s %s", s[i], s[i], (int)k, s[i], s[i])
                SAME("%s: %.2f GiB, %5d, %-3s, %x", si, (double)iv / 3, iv, si, (unsigned)iv)
                SAME("no conversion at all, %%, then %s%d", si, iv)
#undef SAME
            }
}

/* \uXXXX escapes become UTF-8 (surrogate pairs joined); a lone surrogate
 * and U+0000 are refused; a large object (a tokenizer's vocabulary) still
 * finds a repeated key, at the byte where it repeats. */
MT_TEST(json_unicode_escapes_and_large_objects) {
    static const char text[] = "[\"\\u00e9\\ud83d\\ude00\\u0120x\"]";
    mt_json *j = NULL;
    MT_CHECK_OK(mt__json_parse(text, sizeof text - 1, "t.json", &j));
    /* é C3 A9, U+1F600 F0 9F 98 80, Ġ C4 A0 */
    MT_CHECK(j && j->n == 1 && strcmp(j->kids[0]->str, "\xC3\xA9\xF0\x9F\x98\x80\xC4\xA0x") == 0,
             "the escapes decode to '%s'", j && j->n ? j->kids[0]->str : "(none)");
    mt__json_free(j);
    MT_CHECK_FAILS(mt__json_parse("[\"\\ud800x\"]", 11, "t.json", &j), MT_EFORMAT, "byte 3", "surrogate pair");
    MT_CHECK_FAILS(mt__json_parse("[\"\\u0000\"]", 10, "t.json", &j), MT_EFORMAT, "U+0000");
    char big[40000];
    int n = snprintf(big, sizeof big, "{");
    for (int i = 0; i < 1000; i++) n += snprintf(big + n, sizeof big - (size_t)n, "\"k%d\": %d, ", i, i);
    size_t at = (size_t)n;   /* where "k700" comes again */
    n += snprintf(big + n, sizeof big - (size_t)n, "\"k700\": 1, \"k3\": 2}");
    char want[32];
    snprintf(want, sizeof want, "byte %zu", at);
    MT_CHECK_FAILS(mt__json_parse(big, (size_t)n, "t.json", &j), MT_EFORMAT, want, "'k700'", "twice");
    big[at + 2] = '9';   /* "k900": the next repeat is k3's, later in the text */
    big[at + 3] = '9';
    big[at + 4] = '9';
    MT_CHECK_FAILS(mt__json_parse(big, (size_t)n, "t.json", &j), MT_EFORMAT, "'k999'", "twice");
    big[at + 2] = 'x';   /* "kx99": new, so k3 is the one repeated */
    MT_CHECK_FAILS(mt__json_parse(big, (size_t)n, "t.json", &j), MT_EFORMAT, "'k3'", "twice");
    big[n - 7] = 'q';    /* "q3": no key repeats */
    MT_CHECK_OK(mt__json_parse(big, (size_t)n, "t.json", &j));
    MT_CHECK(j && j->n == 1002, "%d members, want 1002", j ? j->n : -1);
    mt__json_free(j);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
