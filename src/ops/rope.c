/*
 * rope.c — rotary position embedding (RoPE), forward and backward.
 *
 * llama2.c's convention (run.c): in every head of HS channels, the pair
 * (2i, 2i+1) of row t is rotated by the angle pos · theta^(-2i/HS), pos =
 * pos0 + t, as the complex number x[2i] + i·x[2i+1] times e^(i·angle). The
 * backward is the transposed rotation, the angle negated. Every head and
 * every batch row at one t shares the angles, so a row range computes its
 * sines and cosines once per t and applies them to B·NH heads. They are
 * computed in double and rounded once: at positions past a few thousand a
 * float angle would be off by more than float rounding of the result.
 * Outputs must not overlap inputs.
 */
#include "ops/kernels.h"

#include <assert.h>
#include <math.h>

/* Pairs whose angles are computed at a time (a stack buffer). */
#define ROPE_PAIRS 64

void mt_kernel_rope(float *restrict out, const float *restrict x, int64_t B, int64_t T,
                    int64_t NH, int64_t HS, float theta, int64_t pos0, int sign, bool acc,
                    int64_t t0, int64_t t1) {
    assert(HS > 0 && HS % 2 == 0 && (sign == 1 || sign == -1));
    assert(0 <= t0 && t0 <= t1 && t1 <= T);
    const int64_t C = NH * HS, half = HS / 2;
    float cs[ROPE_PAIRS], sn[ROPE_PAIRS];
    for (int64_t t = t0; t < t1; t++) {
        const double pos = (double)(pos0 + t);
        for (int64_t i0 = 0; i0 < half; i0 += ROPE_PAIRS) {
            const int64_t n = half - i0 < ROPE_PAIRS ? half - i0 : ROPE_PAIRS;
            for (int64_t i = 0; i < n; i++) {
                const double freq = pow((double)theta, -(double)(2 * (i0 + i)) / (double)HS);
                cs[i] = (float)cos(pos * freq);
                sn[i] = (float)(sign * sin(pos * freq));
            }
            for (int64_t b = 0; b < B; b++)
                for (int64_t h = 0; h < NH; h++) {
                    const int64_t off = (b * T + t) * C + h * HS + 2 * i0;
                    const float *restrict xi = x + off;
                    float *restrict o = out + off;
                    for (int64_t i = 0; i < n; i++) {
                        const float x0 = xi[2 * i], x1 = xi[2 * i + 1];
                        const float y0 = x0 * cs[i] - x1 * sn[i], y1 = x0 * sn[i] + x1 * cs[i];
                        if (acc) {
                            o[2 * i] += y0;
                            o[2 * i + 1] += y1;
                        } else {
                            o[2 * i] = y0;
                            o[2 * i + 1] = y1;
                        }
                    }
                }
        }
    }
}
