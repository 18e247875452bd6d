/* rng.c — Philox-4x32-10 counter-based generator (Salmon et al., SC'11).
 *
 * Stateless: a number is a pure function of (seed, stream, index), so any
 * shard of a tensor can compute exactly the values the whole tensor holds.
 * The fill functions compute the same numbers as the one-at-a-time ones,
 * bit for bit, for a run of indices: Philox for 16 counters at once (the
 * round loop outside, the lanes inside, which the compiler vectorises), then
 * the floating-point part per element. */
#include "base/base_impl.h"

#include <math.h>

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

static inline uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t *hi) {
    uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

void mt_philox4x32(uint64_t key, uint64_t ctr_hi, uint64_t ctr_lo, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)ctr_lo, c1 = (uint32_t)(ctr_lo >> 32);
    uint32_t c2 = (uint32_t)ctr_hi, c3 = (uint32_t)(ctr_hi >> 32);
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int round = 0; round < 10; round++) {
        uint32_t hi0, hi1;
        uint32_t lo0 = mulhilo(PHILOX_M0, c0, &hi0);
        uint32_t lo1 = mulhilo(PHILOX_M1, c2, &hi1);
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

/* 24 random bits -> [0, 1). */
static inline float u32_to_unit(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }

/* Box–Muller on two words of the same counter; u1 in (0, 1]. */
static inline float box_muller(uint32_t w0, uint32_t w1) {
    double u1 = ((double)(w0 >> 8) + 1.0) / 16777216.0;
    double u2 = (double)(w1 >> 8) / 16777216.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

float mt_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
    uint32_t r[4];
    mt_philox4x32(seed, stream, index, r);
    return u32_to_unit(r[0]);
}

float mt_rng_normal(uint64_t seed, uint64_t stream, uint64_t index) {
    uint32_t r[4];
    mt_philox4x32(seed, stream, index, r);
    return box_muller(r[0], r[1]);
}

/* ---- runs of indices --------------------------------------------------- */

#define LANES 16

/* Words 0 and 1 of mt_philox4x32(key, hi, lo0 + i) for i < LANES. */
static void philox_lanes(uint64_t key, uint64_t hi, uint64_t lo0, uint32_t *restrict w0,
                         uint32_t *restrict w1) {
    uint32_t c0[LANES], c1[LANES], c2[LANES], c3[LANES];
    for (int i = 0; i < LANES; i++) {
        uint64_t lo = lo0 + (uint64_t)i;
        c0[i] = (uint32_t)lo;
        c1[i] = (uint32_t)(lo >> 32);
        c2[i] = (uint32_t)hi;
        c3[i] = (uint32_t)(hi >> 32);
    }
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int round = 0; round < 10; round++) {
        for (int i = 0; i < LANES; i++) {
            uint64_t p0 = (uint64_t)PHILOX_M0 * c0[i], p1 = (uint64_t)PHILOX_M1 * c2[i];
            uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1[i] ^ k0;
            uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3[i] ^ k1;
            c1[i] = (uint32_t)p1;
            c3[i] = (uint32_t)p0;
            c0[i] = n0;
            c2[i] = n2;
        }
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    for (int i = 0; i < LANES; i++) {
        w0[i] = c0[i];
        w1[i] = c1[i];
    }
}

/* out[i] = scale · f(words of counter first + i), for the two fills below
 * (inlined into each: the element function costs as much as Philox). */
static inline void fill(uint64_t seed, uint64_t stream, uint64_t first, int64_t n, float scale,
                        float *out, bool normal) {
    uint32_t w0[LANES], w1[LANES];
    for (int64_t b = 0; b < n; b += LANES) {
        int m = n - b < LANES ? (int)(n - b) : LANES;
        philox_lanes(seed, stream, first + (uint64_t)b, w0, w1);
        for (int i = 0; i < m; i++)
            out[b + i] = scale * (normal ? box_muller(w0[i], w1[i])
                                         : 2.0f * u32_to_unit(w0[i]) - 1.0f);
    }
}

void mt__rng_normal_fill(uint64_t seed, uint64_t stream, uint64_t first, int64_t n, float scale,
                         float *out) {
    fill(seed, stream, first, n, scale, out, true);
}

void mt__rng_uniform_fill(uint64_t seed, uint64_t stream, uint64_t first, int64_t n, float scale,
                          float *out) {
    fill(seed, stream, first, n, scale, out, false);
}

uint64_t mt_hash_name(const char *name) {
    uint64_t h = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        h ^= *p;
        h *= 1099511628211ull;
    }
    return h;
}
