/*
 * attention_ring.c — ring attention (../shared/CONTEXT_PARALLEL.md §4): causal
 * attention over a sequence split head-tail over the P devices of a group
 * (device r holds chunks r and 2P-1-r of c = T/2 rows each, T its local
 * rows), the keys and values travelling around the ring r -> r+1 in P
 * steps. The kernel half of ring_attention and ring_attention_bwd
 * (mt__opdef_*, ops_impl.h's mt_ring_params); the graph half is
 * graph/attention_ring.c's.
 *
 *  - Forward. Step i holds the k, v that came from s = (r - i) mod P and
 *    starts sending them on to r+1 (receiving the next step's from r-1)
 *    before its block runs, waiting after it: the transfer is in flight
 *    while the block computes (mt_ppermute_start; see "Overlap, honestly"
 *    in collective_matmul.c for what that buys on each transport). The
 *    blocks, §4's case split, each 2c² (q,k) pairs:
 *      i = 0   every local row against the local keys, causal (the local
 *              rows' positions increase, so causal by row is by position);
 *      s < r   every local row against the first half of the received
 *              keys (chunk s precedes both local chunks), no mask;
 *      s > r   the second half of the rows (chunk 2P-1-r) against all the
 *              received keys (both follow chunk r, precede 2P-1-r).
 *    Each block is the flash kernel's (attention.c) with its own (O_b,
 *    L_b), merged into the running (O, L) in f32 by the stable pairwise
 *    identity of §2: O ← O − σ(L_b − L)(O − O_b), L ← L + softplus(L_b −
 *    L). Rows a block does not touch (s > r: the first half) are skipped,
 *    never merged with L_b = −inf. out and lse are the final (O, L).
 *  - Backward. The k, v rotate again the same way (P-1 sends); dQ stays
 *    local (each block adds into it, the kernel's P = exp(s − L) with the
 *    global L and D = rowsum(dO ∘ O) with the final O, so each block's
 *    gradient is exact); the dK, dV of the keys from s start on device s+1
 *    (step 1) and travel with them, each step adding its block's share: a
 *    step computes its share into a fresh buffer while the accumulator
 *    from r-1 is in flight, adds the arrival, and sends the sum on; after
 *    step P-1 the send lands on s itself, which adds its own step-0 share.
 *    P-1 sends of dK, dV besides the P-1 of k, v: §4's wire bytes.
 *
 * Work split: the forward's blocks over the B·NH (batch, query head) pairs
 * on the kernel pool, each pair writing and merging only its own rows; the
 * backward's over the B·KV (batch, kv head) groups, the query heads of a
 * group in order (no two threads write one kv head). Every kernel call is
 * one head (NH = 1 with hoff naming it), pointers placed at the block's
 * rows, so a half block needs no strided layout. A transfer whose start
 * finds comm's request queue full runs blocking (as collective_matmul.c).
 *
 * Scratch, the calling thread's as every communicating op's (it lends the
 * pool a part): each worker's kernel scratch (mt_kernel_attention_scratch
 * of a block's T keys) at env->scratch + w·tile for the pool's workers
 * (mt_get_num_threads, which the program's pool was made with; a run on a
 * larger pool fails, naming the sizes), then k|v rows (B,T,2·KV·HS) twice
 * (this step's, the next's), the forward's block (B,T,NH·HS) and its lse
 * (B,NH,T), or the backward's four more k|v-sized buffers (two shares, the
 * arrival, this device's own), and the block's positions (2T int32).
 *
 * Packed documents (p.doc): the rows' ids (B,T) int32 ride behind the k|v
 * rows in the two rotating buffers (B·T words more each, sent with them,
 * bit for bit), so each block's keys come with their ids; the dK, dV
 * accumulators travel without. A block row that sees no key of its block
 * (another document) gets lse_b = -inf from the kernel and is not merged.
 */
#include "ops/kernels.h"
#include "ops/ops_impl.h"

#include <math.h>
#include <string.h>

#define F32(t) ((float *)(t)->data)

/* ======================================================================== */
/* Shapes and buffers                                                        */
/* ======================================================================== */

static int64_t kvhs(const mt_ring_params *p) { return p->KV * p->HS; }
static int64_t ldq(const mt_ring_params *p) { return p->packed ? 3 * p->NH * p->HS : p->NH * p->HS; }
/* floats of one k|v buffer (B,T,2·KV·HS) */
static int64_t kv_floats(const mt_ring_params *p) { return p->B * p->T * 2 * kvhs(p); }
/* floats of one rotating buffer: the k|v rows, then their ids (B·T int32) */
static int64_t kvb_floats(const mt_ring_params *p) {
    return kv_floats(p) + (p->doc ? p->B * p->T : 0);
}

static size_t caller_floats(const mt_op_call *c) {
    const mt_ring_params *p = &c->p.ring;
    const int64_t kv = kv_floats(p), kvb = kvb_floats(p);
    const int64_t pos = p->T;   /* 2·pos floats hold the 2T int32 positions */
    if (c->op == MT_OP_RING_ATTENTION)
        return (size_t)(2 * kvb + p->B * p->T * p->NH * p->HS + p->B * p->NH * p->T + 2 * pos);
    return (size_t)(2 * kvb + 4 * kv + 2 * pos);
}

/* floats of one worker's kernel scratch (a block: T keys) */
static size_t tile_floats(const mt_ring_params *p) {
    return mt_kernel_attention_scratch(p->T, p->HS);
}

static int64_t workers_of(const mt_op_env *env) { return env->pool ? mt_pool_size(env->pool) : 1; }

static size_t scratch_ring(const mt_op_call *c) {
    int n = mt_get_num_threads();
    n = n < 1 ? 1 : n > MT_POOL_MAX ? MT_POOL_MAX : n;
    return (size_t)n * tile_floats(&c->p.ring) + caller_floats(c);
}

static void record(const mt_op_env *env, mt_status s) {
    if (s != MT_OK && env->status && *env->status == MT_OK) *env->status = s;
}

/* The group and this device's rank r; false with the failure recorded. */
static bool group(const mt_op_env *env, const mt_op_call *c, int *r) {
    const mt_ring_params *p = &c->p.ring;
    if (!env->ctx) {
        record(env, mt_fail(MT_ESTATE, "ring attention on '%s' has no device to run on; call "
                            "mt_graph_set_ctx before building the graph", c->out->name));
        return false;
    }
    const int P = mt_axis_size(env->ctx, p->cm.axes);
    if (P != p->cm.P) {
        record(env, mt_fail(MT_ESTATE, "ring attention on '%s' was built for a group of %d "
                            "devices but runs on one of %d; run the graph on the device it was "
                            "built on", c->out->name, p->cm.P, P));
        return false;
    }
    const size_t want = (size_t)workers_of(env) * tile_floats(p) + caller_floats(c);
    if (env->scratch_floats < want) {
        record(env, mt_fail(MT_ESTATE, "ring attention on '%s': %zu floats of kernel scratch for "
                            "a pool of %lld threads, %zu wanted; compile the graph with as many "
                            "threads as it runs on (mt_set_num_threads)", c->out->name,
                            env->scratch_floats, (long long)workers_of(env), want));
        return false;
    }
    *r = mt_axis_index(env->ctx, p->cm.axes);
    return true;
}

/* One ring transfer: started, or (comm's queue full) already done. */
typedef struct {
    mt_request req;
    bool       started;
} xfer;

/* recv (count) = send of rank r-1; send goes to r+1. */
static mt_status xfer_start(const mt_op_env *env, const mt_ring_params *p, const float *send,
                            float *recv, size_t count, xfer *x) {
    x->started = false;
    mt_status s = mt_ppermute_start(env->ctx, p->cm.axes, send, recv, count, MT_F32, p->cm.ring,
                                    p->cm.P, &x->req);
    if (s == MT_OK) {
        x->started = true;
        return MT_OK;
    }
    if (s != MT_ESTATE) return s;
    return mt_ppermute(env->ctx, p->cm.axes, send, recv, count, MT_F32, p->cm.ring, p->cm.P);
}

static mt_status xfer_wait(const mt_op_env *env, xfer *x) {
    mt_status s = x->started ? mt_wait(env->ctx, &x->req) : MT_OK;
    x->started = false;
    return s;
}

/* The local k, v rows into kv (B,T,2·KV·HS): k then v on every row; then
 * the rows' document ids, if any. */
static void pack_kv(const mt_op_call *c, float *kv) {
    const mt_ring_params *p = &c->p.ring;
    const int64_t n = kvhs(p), rows = p->B * p->T;
    const int base = c->op == MT_OP_RING_ATTENTION ? 0 : 1;   /* the backward's in0 is dout */
    const float *qkv = F32(c->in[base]), *k = p->packed ? NULL : F32(c->in[base + 1]);
    const float *v = p->packed ? NULL : F32(c->in[base + 2]);
    for (int64_t t = 0; t < rows; t++) {
        if (p->packed) {   /* qkv rows: q | k | v, k and v side by side */
            memcpy(kv + t * 2 * n, qkv + t * 3 * n + n, (size_t)(2 * n) * sizeof *kv);
        } else {
            memcpy(kv + t * 2 * n, k + t * n, (size_t)n * sizeof *kv);
            memcpy(kv + t * 2 * n + n, v + t * n, (size_t)n * sizeof *kv);
        }
    }
    if (p->doc)
        memcpy(kv + kv_floats(p), c->in[p->doc]->data, (size_t)rows * sizeof(int32_t));
}

/* The positions of device `dev`'s T rows (mt_headtail_pos). */
static void positions(int32_t *pos, int64_t T, int P, int dev) {
    for (int64_t i = 0; i < T; i++) pos[i] = (int32_t)mt_headtail_pos(i, T, P, dev);
}

/* ======================================================================== */
/* One step's block                                                          */
/* ======================================================================== */

typedef enum { BLOCK_LOCAL, BLOCK_EARLIER, BLOCK_LATER } block_kind;

/* What a step's block reads and writes (either direction). */
typedef struct {
    const mt_op_env      *env;
    const mt_ring_params *p;
    block_kind            kind;
    const float          *q, *kv;        /* q (B,T,·) ld ldq; this step's k|v (B,T,2·KV·HS) */
    const int32_t        *qpos, *kpos;   /* the local rows' positions, the keys' */
    const int32_t        *qdoc, *kdoc;   /* their document ids (B,T), or NULL */
    /* forward */
    float                *out, *lse;     /* the running O (B,T,NH·HS), L (B,NH,T) */
    float                *ob, *lseb;     /* the block's (BLOCK_LOCAL: out, lse themselves) */
    /* backward */
    const float          *dout, *o;      /* dO, the final O (B,T,NH·HS); lse the final L */
    float                *dq, *dkv;      /* dq (B,T,·) ld ldq; the keys' dK|dV (+)= */
    bool                  acc_q;
} step;

/* The one-head layout of the block (rows [q0, q0+nq) against keys [0, nk)),
 * batch b, query head h. */
static mt_attn_layout block_layout(const step *st, int64_t b, int64_t h, int64_t *q0) {
    const mt_ring_params *p = st->p;
    const int64_t T = p->T, c = T / 2;
    mt_attn_layout L = {.B = 1, .T = T, .Tk = T, .NH = 1, .KV = p->KV, .HS = p->HS, .G = p->G,
                        .hoff = p->hoff + h, .ldq = ldq(p), .ldk = 2 * kvhs(p),
                        .ldv = 2 * kvhs(p), .ldo = p->NH * p->HS};
    *q0 = 0;
    if (st->kind != BLOCK_LOCAL) {
        /* no mask: every key of the block precedes every row; the kernel's
         * layout takes positions with Tk != T, which a full block never masks by */
        L.full = true;
        L.qpos = st->qpos;
        L.kpos = st->kpos;
    }
    if (st->kind == BLOCK_EARLIER) L.Tk = c;   /* chunk s: the first half of the keys */
    if (st->kind == BLOCK_LATER) {             /* chunk 2P-1-r: the second half of the rows */
        L.T = c;
        *q0 = c;
        L.qpos = st->qpos + c;
    }
    if (st->qdoc) {   /* one sequence a call (B = 1): the ids at its rows and keys */
        L.doc = st->qdoc + b * T + *q0;
        L.kdoc = st->kind == BLOCK_LOCAL ? NULL : st->kdoc + b * T;
    }
    return L;
}

/* softplus(x) = log(1 + e^x), without overflow */
static float softplus(float x) { return x > 0 ? x + log1pf(expf(-x)) : log1pf(expf(x)); }

static void range_fwd(void *arg, int64_t i0, int64_t i1, int w) {
    const step *st = arg;
    const mt_ring_params *p = st->p;
    const int64_t T = p->T, NH = p->NH, HS = p->HS, ldo = NH * HS;
    float *scratch = st->env->scratch + (size_t)w * tile_floats(p);
    for (int64_t bh = i0; bh < i1; bh++) {
        const int64_t b = bh / NH, h = bh % NH;
        int64_t q0;
        const mt_attn_layout L = block_layout(st, b, h, &q0);
        const int64_t row = b * T + q0;
        float *ob = (st->kind == BLOCK_LOCAL ? st->out : st->ob) + row * ldo + h * HS;
        float *lb = (st->kind == BLOCK_LOCAL ? st->lse : st->lseb) + (b * NH + h) * T + q0;
        mt_kernel_attention_fwd(ob, lb, st->q + row * L.ldq + h * HS, st->kv + b * T * L.ldk,
                                st->kv + b * T * L.ldk + kvhs(p), &L, scratch, 0, 1);
        if (st->kind == BLOCK_LOCAL) continue;
        /* merge the block's rows into the running (O, L), in f32 */
        float *o = st->out + row * ldo + h * HS, *l = st->lse + (b * NH + h) * T + q0;
        for (int64_t i = 0; i < L.T; i++) {
            if (lb[i] == -INFINITY) continue;   /* no key of the block seen (documents) */
            const float wgt = 1.0f / (1.0f + expf(l[i] - lb[i]));   /* σ(L_b − L) */
            float *restrict oi = o + i * ldo;
            const float *restrict bi = ob + i * ldo;
            for (int64_t e = 0; e < HS; e++) oi[e] -= wgt * (oi[e] - bi[e]);
            l[i] += softplus(lb[i] - l[i]);
        }
    }
}

static void range_bwd(void *arg, int64_t g0, int64_t g1, int w) {
    const step *st = arg;
    const mt_ring_params *p = st->p;
    const int64_t T = p->T, NH = p->NH, HS = p->HS, ldo = NH * HS;
    float *scratch = st->env->scratch + (size_t)w * tile_floats(p);
    for (int64_t g = g0; g < g1; g++) {
        const int64_t b = g / p->KV, j = g % p->KV;
        /* the query heads that read kv head j, in order */
        int64_t h0 = j * p->G - p->hoff, h1 = h0 + p->G;
        if (h0 < 0) h0 = 0;
        if (h1 > NH) h1 = NH;
        for (int64_t h = h0; h < h1; h++) {
            int64_t q0;
            const mt_attn_layout L = block_layout(st, b, h, &q0);
            const int64_t row = b * T + q0, qo = row * L.ldq + h * HS, oo = row * ldo + h * HS;
            float *dk = st->dkv + b * T * L.ldk;
            const mt_attn_grads d = {.dq = st->dq + qo, .dk = dk, .dv = dk + kvhs(p),
                                     .acc_q = st->acc_q, .acc_kv = true};
            mt_kernel_attention_bwd(&d, st->dout + oo, st->q + qo, st->kv + b * T * L.ldk,
                                    st->kv + b * T * L.ldk + kvhs(p), st->o + oo,
                                    st->lse + (b * NH + h) * T + q0, &L, scratch, j, j + 1);
        }
    }
}

/* Step i's block on the k|v buffer kv: its kind, its keys' positions (from
 * s = (r - i) mod P) and their ids (behind the rows). */
static void place(step *st, int i, int r, int32_t *kpos, const float *kv) {
    const int P = st->p->cm.P, s = ((r - i) % P + P) % P;
    st->kind = i == 0 ? BLOCK_LOCAL : s < r ? BLOCK_EARLIER : BLOCK_LATER;
    positions(kpos, st->p->T, P, s);
    st->kv = kv;
    st->kdoc = st->p->doc ? (const int32_t *)(kv + kv_floats(st->p)) : NULL;
}

static void run_block(step *st, bool fwd) {
    const mt_ring_params *p = st->p;
    const int64_t items = fwd ? p->B * p->NH : p->B * p->KV;
    mt_pool_run(st->env->pool, items, 1, fwd ? range_fwd : range_bwd, st);
}

/* ======================================================================== */
/* The ops                                                                   */
/* ======================================================================== */

/* Both ops' start: this device's rank in the ring into *r, its own k|v
 * packed into the ring's first buffer, which starts the scratch past the
 * workers' tiles (returned); NULL when the ring cannot run (recorded). */
static float *ring_begin(const mt_op_env *env, const mt_op_call *c, int *r) {
    if (!group(env, c, r)) return NULL;
    float *big = env->scratch + (size_t)workers_of(env) * tile_floats(&c->p.ring);
    pack_kv(c, big);
    return big;
}

/* RING_ATTENTION: out (B,T,NH·HS), aux lse (B,NH,T) from q, k, v (or qkv). */
static void run_ring_fwd(const mt_op_env *env, const mt_op_call *c) {
    int r;
    float *big = ring_begin(env, c, &r);
    if (!big) return;
    const mt_ring_params *p = &c->p.ring;
    const int P = p->cm.P;
    const int64_t kvb = kvb_floats(p);   /* k|v rows and their ids */
    float *kv[2] = {big, big + kvb}, *ob = big + 2 * kvb;
    float *lseb = ob + p->B * p->T * p->NH * p->HS;
    int32_t *qpos = (int32_t *)(lseb + p->B * p->NH * p->T), *kpos = qpos + p->T;
    positions(qpos, p->T, P, r);
    step st = {.env = env, .p = p, .q = F32(c->in[0]), .qpos = qpos, .kpos = kpos,
               .qdoc = p->doc ? c->in[p->doc]->data : NULL, .out = F32(c->out),
               .lse = F32(c->aux[0]), .ob = ob, .lseb = lseb};
    for (int i = 0; i < P; i++) {
        xfer x = {0};
        mt_status s = MT_OK;
        if (i < P - 1) s = xfer_start(env, p, kv[i % 2], kv[(i + 1) % 2], (size_t)kvb, &x);
        if (s != MT_OK) { record(env, s); return; }
        place(&st, i, r, kpos, kv[i % 2]);
        run_block(&st, true);
        if ((s = xfer_wait(env, &x)) != MT_OK) { record(env, s); return; }
    }
}

/* dst (+)= the k|v buffer's half `half` (0: dK, 1: dV), rows of ld floats. */
static void unpack_half(const mt_ring_params *p, float *dst, int64_t ld, const float *kv,
                        int half, bool acc) {
    const int64_t n = kvhs(p);
    for (int64_t t = 0; t < p->B * p->T; t++) {
        float *restrict d = dst + t * ld;
        const float *restrict s = kv + t * 2 * n + half * n;
        if (acc) for (int64_t e = 0; e < n; e++) d[e] += s[e];
        else memcpy(d, s, (size_t)n * sizeof *d);
    }
}

/* RING_ATTENTION_BWD: packed: in dout qkv out lse -> out dqkv; else in dout
 * q k v out lse -> out dq, out2 dk, aux[0] dv (written; its copy adds it to
 * v's gradient). */
static void run_ring_bwd(const mt_op_env *env, const mt_op_call *c) {
    int r;
    float *big = ring_begin(env, c, &r);
    if (!big) return;
    const mt_ring_params *p = &c->p.ring;
    const int P = p->cm.P;
    const int64_t kvn = kv_floats(p), kvb = kvb_floats(p);   /* dK|dV; k|v and their ids */
    float *kv[2] = {big, big + kvb}, *acc = big + 2 * kvb;
    float *part[2] = {acc, acc + kvn}, *arr = acc + 2 * kvn, *home = acc + 3 * kvn;
    int32_t *qpos = (int32_t *)(acc + 4 * kvn), *kpos = qpos + p->T;
    const int n = c->n_in - (p->doc ? 1 : 0);   /* ..., out, lse[, docs] */
    positions(qpos, p->T, P, r);
    memset(home, 0, (size_t)kvn * sizeof *home);
    step st = {.env = env, .p = p, .q = F32(c->in[1]), .qpos = qpos, .kpos = kpos,
               .qdoc = p->doc ? c->in[p->doc]->data : NULL, .dout = F32(c->in[0]),
               .o = F32(c->in[n - 2]), .lse = F32(c->in[n - 1]), .dq = F32(c->out)};
    xfer xk = {0}, xa = {0};
    mt_status s = MT_OK;
    for (int i = 0; i < P && s == MT_OK; i++) {
        if (i < P - 1) s = xfer_start(env, p, kv[i % 2], kv[(i + 1) % 2], (size_t)kvb, &xk);
        if (s != MT_OK) break;
        st.acc_q = i > 0 || c->acc;
        st.dkv = i == 0 ? home : part[i % 2];
        if (i > 0) memset(st.dkv, 0, (size_t)kvn * sizeof *st.dkv);
        place(&st, i, r, kpos, kv[i % 2]);
        run_block(&st, false);
        if (i > 0) {
            /* the share of the keys from s so far (from r-1) joins this one's, goes on */
            if (i >= 2 && (s = xfer_wait(env, &xa)) == MT_OK)
                for (int64_t e = 0; e < kvn; e++) st.dkv[e] += arr[e];
            if (s == MT_OK) s = xfer_start(env, p, st.dkv, arr, (size_t)kvn, &xa);
        }
        if (s == MT_OK) s = xfer_wait(env, &xk);
    }
    if (s == MT_OK) s = xfer_wait(env, &xa);   /* this device's own keys' share, home */
    if (s != MT_OK) { record(env, s); return; }
    for (int64_t e = 0; e < kvn; e++) home[e] += arr[e];
    if (p->packed) {   /* dk, dv: the columns after dq's, side by side as in qkv */
        const int64_t C = kvhs(p);
        for (int64_t t = 0; t < p->B * p->T; t++) {
            float *restrict d = F32(c->out) + t * 3 * C + C;
            const float *restrict h = home + t * 2 * C;
            if (c->acc) for (int64_t e = 0; e < 2 * C; e++) d[e] += h[e];
            else memcpy(d, h, (size_t)(2 * C) * sizeof *d);
        }
    } else {
        unpack_half(p, F32(c->out2), kvhs(p), home, 0, c->acc2);
        unpack_half(p, F32(c->aux[0]), kvhs(p), home, 1, false);
    }
}

/* FLOPs of the attention a device runs (2P·c² + c causal pairs per head and
 * sequence, §3; the forward's 4·HS + 5 a pair, the backward twice that, as
 * attention's), bytes the operands streamed once per step. */
static void cost_ring(const mt_op_call *c, double *fl, double *by) {
    const mt_ring_params *p = &c->p.ring;
    const double P = p->cm.P, cc = (double)p->T / 2, HS = (double)p->HS;
    const double pairs = (double)p->B * (double)p->NH * (2 * P * cc * cc + cc);
    const double qo = (double)(p->B * p->T * p->NH) * HS, kv = (double)kv_floats(p);
    *fl = (4 * HS + 5) * pairs;
    *by = 4 * (2 * qo + P * kv);
    if (c->op == MT_OP_RING_ATTENTION_BWD) {
        *fl *= 2;
        *by = 4 * (4 * qo + 3 * P * kv);
    }
}

const mt_op_def mt__opdef_ring_attention = {
    .name = "ring_attention", .min_in = 1, .max_in = 4, .cost_class = MT_COST_COLLECTIVE,
    .cost = cost_ring,
};
const mt_op_kernel mt__kernel_ring_attention = {.run = run_ring_fwd, .scratch = scratch_ring,
                                                .scratch_caller = true};

const mt_op_def mt__opdef_ring_attention_bwd = {
    .name = "ring_attention_bwd", .min_in = 4, .max_in = 7, .cost_class = MT_COST_COLLECTIVE,
    .cost = cost_ring,
};
const mt_op_kernel mt__kernel_ring_attention_bwd = {.run = run_ring_bwd, .scratch = scratch_ring,
                                                    .scratch_caller = true};
