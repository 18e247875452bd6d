/*
 * test_headtail.c — the head-tail split of a sequence over P devices
 * (../shared/CONTEXT_PARALLEL.md §3, §8 checks 1-3; issue 41 item 2):
 *  - mt_headtail_pos is a permutation of [0, S) for every P dividing S/2,
 *    and its inverse (built from it) restores the order;
 *  - device r holds chunks r and 2P-1-r, in that order (hand-written for
 *    S = 8, P = 2);
 *  - the causal (q,k) pairs per device are 2P·c² + c on every device (the
 *    closed form, counted pair by pair from the positions), where
 *    contiguous chunks give (4r+2)c² + c;
 *  - the flash kernel with per-row positions (a device's head-tail queries
 *    against every device's keys, gathered in device order) gives each
 *    device exactly the rows of one-device causal attention, and its dq and
 *    dk, dv summed over the devices are the one-device gradients.
 */
#include "harness.h"
#include "meshtrain.h"
#include "ops/kernels.h"

#include <stdint.h>

MT_TEST(headtail_is_a_permutation_with_inverse) {
    const int S_list[] = {2, 4, 8, 12, 24, 64, 96};
    for (size_t k = 0; k < sizeof S_list / sizeof S_list[0]; k++) {
        const int S = S_list[k];
        for (int P = 1; P <= S / 2; P++) {
            if ((S / 2) % P != 0) continue;
            const int local = S / P;
            int seen[96] = {0}, inv[96];
            for (int r = 0; r < P; r++)
                for (int i = 0; i < local; i++) {
                    int64_t p = mt_headtail_pos(i, local, P, r);
                    MT_CHECK(p >= 0 && p < S, "S=%d P=%d r=%d i=%d: position %lld", S, P, r, i,
                             (long long)p);
                    seen[p]++;
                    inv[p] = r * local + i;   /* where position p lives */
                }
            for (int p = 0; p < S; p++) {
                MT_CHECK(seen[p] == 1, "S=%d P=%d: position %d held %d times", S, P, p, seen[p]);
                int r = inv[p] / local, i = inv[p] % local;
                MT_CHECK(mt_headtail_pos(i, local, P, r) == p, "S=%d P=%d: inverse of %d", S, P,
                         p);
            }
        }
    }
    /* S = 8, P = 2, c = 2: device 0 holds chunks 0 and 3, device 1 chunks 1 and 2 */
    const int want[2][4] = {{0, 1, 6, 7}, {2, 3, 4, 5}};
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 4; i++)
            MT_CHECK(mt_headtail_pos(i, 4, 2, r) == want[r][i], "S=8 P=2 device %d row %d: %lld, "
                     "want %d", r, i, (long long)mt_headtail_pos(i, 4, 2, r), want[r][i]);
}

MT_TEST(headtail_causal_pairs_are_balanced) {
    for (int P = 1; P <= 8; P++)
        for (int c = 1; c <= 5; c++) {
            const int S = 2 * P * c, local = 2 * c;
            for (int r = 0; r < P; r++) {
                int64_t pairs = 0, contiguous = 0;
                for (int i = 0; i < local; i++) {
                    pairs += mt_headtail_pos(i, local, P, r) + 1;   /* keys 0..pos */
                    contiguous += (int64_t)r * local + i + 1;
                }
                MT_CHECK(pairs == 2LL * P * c * c + c, "P=%d c=%d device %d: %lld pairs, want "
                         "2Pc²+c = %lld", P, c, r, (long long)pairs, 2LL * P * c * c + c);
                MT_CHECK(contiguous == (4LL * r + 2) * c * c + c, "P=%d c=%d device %d: "
                         "contiguous %lld, want (4r+2)c²+c", P, c, r, (long long)contiguous);
            }
            (void)S;
        }
}

/* Causal attention over (B, S) rows, one device, the kernel's own layout;
 * then P devices, each its head-tail queries against all keys gathered in
 * device order: the outputs equal row for row, the gradients summed. */
static void split_equals_whole(int B, int S, int NH, int KV, int HS, int P) {
    const int local = S / P, G = NH / KV;
    const int64_t nq = (int64_t)B * S * NH * HS, nk = (int64_t)B * S * KV * HS;
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *dO = malloc(nq * 4);
    float *o = malloc(nq * 4), *lse = malloc((size_t)B * NH * S * 4);
    float *dq = malloc(nq * 4), *dk = malloc(nk * 4), *dv = malloc(nk * 4);
    uint64_t x = 12345;
#define RND() ((float)((x = x * 6364136223846793005ULL + 1442695040888963407ULL) >> 40) / \
               (float)(1 << 24) - 0.5f)
    for (int64_t i = 0; i < nq; i++) q[i] = RND(), dO[i] = RND();
    for (int64_t i = 0; i < nk; i++) k[i] = RND(), v[i] = RND();
    float *scratch = malloc(mt_kernel_attention_scratch(S, HS) * 4);
    mt_attn_layout W = {.B = B, .T = S, .NH = NH, .KV = KV, .HS = HS, .G = G,
                        .ldq = NH * HS, .ldk = KV * HS, .ldv = KV * HS, .ldo = NH * HS};
    mt_kernel_attention_fwd(o, lse, q, k, v, &W, scratch, 0, B * NH);
    mt_kernel_attention_bwd(&(mt_attn_grads){dq, dk, dv, false, false}, dO, q, k, v, o, lse, &W,
                            scratch, 0, B * KV);
    /* the gathered keys: device s's rows, in device order */
    float *kg = malloc(nk * 4), *vg = malloc(nk * 4), *dks = calloc(nk, 4), *dvs = calloc(nk, 4);
    float *dkg = malloc(nk * 4), *dvg = malloc(nk * 4);
    int32_t *qpos = malloc(local * 4), *kpos = malloc(S * 4);
    for (int j = 0; j < S; j++) kpos[j] = (int32_t)mt_headtail_pos(j % local, local, P, j / local);
    for (int b = 0; b < B; b++)
        for (int j = 0; j < S; j++)
            for (int e = 0; e < KV * HS; e++) {
                kg[((int64_t)b * S + j) * KV * HS + e] = k[((int64_t)b * S + kpos[j]) * KV * HS + e];
                vg[((int64_t)b * S + j) * KV * HS + e] = v[((int64_t)b * S + kpos[j]) * KV * HS + e];
            }
    float *ql = malloc((size_t)B * local * NH * HS * 4), *dOl = malloc((size_t)B * local * NH * HS * 4);
    float *ol = malloc((size_t)B * local * NH * HS * 4), *lsel = malloc((size_t)B * NH * local * 4);
    float *dql = malloc((size_t)B * local * NH * HS * 4);
    double worst = 0;
    for (int r = 0; r < P; r++) {
        for (int i = 0; i < local; i++) qpos[i] = (int32_t)mt_headtail_pos(i, local, P, r);
        for (int b = 0; b < B; b++)
            for (int i = 0; i < local; i++)
                for (int e = 0; e < NH * HS; e++) {
                    ql[((int64_t)b * local + i) * NH * HS + e] = q[((int64_t)b * S + qpos[i]) * NH * HS + e];
                    dOl[((int64_t)b * local + i) * NH * HS + e] = dO[((int64_t)b * S + qpos[i]) * NH * HS + e];
                }
        mt_attn_layout L = W;
        L.T = local;
        L.Tk = S;
        L.qpos = qpos;
        L.kpos = kpos;
        mt_kernel_attention_fwd(ol, lsel, ql, kg, vg, &L, scratch, 0, B * NH);
        mt_kernel_attention_bwd(&(mt_attn_grads){dql, dkg, dvg, false, false}, dOl, ql, kg, vg,
                                ol, lsel, &L, scratch, 0, B * KV);
        for (int b = 0; b < B; b++)
            for (int i = 0; i < local; i++)
                for (int e = 0; e < NH * HS; e++) {
                    int64_t w = ((int64_t)b * S + qpos[i]) * NH * HS + e;
                    int64_t l = ((int64_t)b * local + i) * NH * HS + e;
                    double d1 = fabs(ol[l] - o[w]), d2 = fabs(dql[l] - dq[w]);
                    worst = fmax(worst, fmax(d1, d2));
                }
        /* dK, dV of every key: summed over the devices (the reduce-scatter) */
        for (int b = 0; b < B; b++)
            for (int j = 0; j < S; j++)
                for (int e = 0; e < KV * HS; e++) {
                    dks[((int64_t)b * S + kpos[j]) * KV * HS + e] += dkg[((int64_t)b * S + j) * KV * HS + e];
                    dvs[((int64_t)b * S + kpos[j]) * KV * HS + e] += dvg[((int64_t)b * S + j) * KV * HS + e];
                }
    }
    for (int64_t i = 0; i < nk; i++)
        worst = fmax(worst, fmax(fabs(dks[i] - dk[i]), fabs(dvs[i] - dv[i])));
    MT_CHECK(worst < 1e-5, "B=%d S=%d NH=%d KV=%d HS=%d P=%d: split attention differs from one "
             "device's by %g", B, S, NH, KV, HS, P, worst);
    float *bufs[] = {q, k, v, dO, o, lse, dq, dk, dv, scratch, kg, vg, dks, dvs, dkg, dvg,
                     ql, dOl, ol, lsel, dql};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(qpos);
    free(kpos);
}

MT_TEST(headtail_kernel_split_equals_one_device) {
    split_equals_whole(2, 16, 4, 2, 8, 2);      /* GQA */
    split_equals_whole(1, 32, 4, 4, 8, 4);      /* multi-head */
    split_equals_whole(1, 24, 2, 1, 4, 3);      /* MQA, 3 devices */
    split_equals_whole(1, 512, 2, 1, 16, 2);    /* several key tiles: skip, open, masked */
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
