/*
 * evaluate.c — one layout's memory per device and step time.
 *
 * A layout's programs are those of its distinct pipeline chunks (the first,
 * with the embedding; a middle one of each length, L blocks cut into S
 * chunks as the trainer cuts them, the first L mod S one block more; the
 * last, with the head and the loss; just one without a pipe axis), each as
 * one device of its stage runs it (SPMD: the stage's other devices run the
 * same program on their slices).
 * Transformer blocks repeat, and a program's costs and bytes grow nearly
 * linearly in its blocks and in its sequences a replica, so a chunk of more
 * than 8 blocks is built at 4 and 8, a replica of more than 4 sequences at
 * 2 and 4, and the numbers are taken bilinearly at the layout's own:
 * X(k, b) = X00 + u(X10-X00) + w(X01-X00) + uw(X11-X10-X01+X00) with u, w
 * the fractions along each. That is exact for what is bilinear (FLOPs,
 * bytes, parameter counts); the planned arena's best-fit packing is not
 * quite (within 6% on the cases test_plan_search checks against direct
 * builds). Smaller chunks and replicas are built as they are. The programs
 * come from the cache (cache.c), built once for every layout that shares
 * them (the microbatch counts of a batch, the schedules of a pipeline).
 *
 * Times are not bilinear in the sequences: a collective below its
 * bandwidth-bound size costs its latency floor, and a wait is the max of
 * two streams. Extrapolated from 2 and 4 sequences to 64 they went
 * negative (a step shorter than its compute, MFU above 100 %: issues 37
 * and 40). So a replica of more than 4 sequences is timed on its own
 * program: each node's FLOPs and bytes (which are affine in the batch)
 * taken at the layout's sequences from the 2- and 4-sequence builds, then
 * run on the two streams (step_phase.c) as any program. Along the blocks,
 * at that batch, the times are taken linearly: each repeated block adds
 * the same nodes, so the same seconds and, past the edges, the same waits.
 */
#include "base/base_impl.h"
#include "plan/memory.h"
#include "plan/search_impl.h"
#include "plan/host.h"
#include "plan/step.h"
#include "plan/step_output.h"
#include "plan/cost.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* Points and interpolation                                                  */
/* ======================================================================== */

/* What a chunk's program gives the layout, as numbers that grow linearly in
 * blocks and in sequences (interpolated field by field). */
typedef struct {
    mt__plan_mem_counts mem;       /* what the memory conventions read */
} chunk_vec;
#define CHUNK_VEC_N (sizeof(chunk_vec) / sizeof(double))

static chunk_vec vec_of(const mt__plan_cached *e) {
    const mt__plan_program *p = &e->prog;
    chunk_vec v;
    mt__plan_mem_counts_of(p, &v.mem);
    return v;
}

/* X(k, b) from X at k, b in {k0, k1} x {b0, b1} (k1 = k0 when there is one
 * block count, b1 = b0 likewise): bilinear. */
static void lerp2(const double *x00, const double *x10, const double *x01, const double *x11,
                  int k0, int k1, int b0, int b1, int k, int b, double *out, size_t n) {
    double u = k1 > k0 ? (double)(k - k0) / (k1 - k0) : 0;
    double w = b1 > b0 ? (double)(b - b0) / (b1 - b0) : 0;
    for (size_t i = 0; i < n; i++)
        out[i] = x00[i] + u * (x10[i] - x00[i]) + w * (x01[i] - x00[i]) +
                 u * w * (x11[i] - x10[i] - x01[i] + x00[i]);
}

/* The arena of a program at b sequences from its builds p0 at b0 and p1 at
 * b1 (node for node the same; else false): the largest over the nodes of
 * the bytes alive, each node's affine in the batch (every value's bytes
 * are), plus the packing's excess over that peak taken along the batch
 * (never below 0). The arena itself is not affine: it is the peak of
 * affine functions, whose node changes with the batch. Taken straight
 * from 2 and 4 sequences to 64 its chord missed the peak's move: a LLaMA
 * on fsdp=2 keeping its gathered parameters (--reshard-after-forward off)
 * peaks late in B at 4 sequences, nearly as without them, so off - on
 * went from 20 MB (the gathered parameters) to -10 MB at 64. */
static bool arena_at_batch(const mt__plan_program *p0, int b0, const mt__plan_program *p1,
                           int b1, int b, double *out) {
    if (b1 == b0 || !mt__plan_program_same_nodes(p0, p1)) return false;
    const double w = (double)(b - b0) / (b1 - b0);
    double peak = 0, peak0 = 0, peak1 = 0;
    for (int i = 0; i < p0->n_nodes; i++) {
        const double x = p0->nodes[i].live_bytes, y = p1->nodes[i].live_bytes;
        peak = fmax(peak, x + w * (y - x));
        peak0 = fmax(peak0, x);
        peak1 = fmax(peak1, y);
    }
    if (!(peak1 > 0)) return false;   /* a program without its nodes' live bytes */
    const double x = (double)p0->arena_bytes - peak0, y = (double)p1->arena_bytes - peak1;
    *out = peak + fmax(0, x + w * (y - x));
    return true;
}

/* in (keyed by from) re-keyed into the table *into (keys added as met)
 * as *out. MT_EINVAL past MT__PLAN_STEP_MAX_COMM distinct collectives. */
static mt_status rekey(const mt__plan_comm_keys *from, const mt__plan_chunk_time *in,
                       mt__plan_comm_keys *into, mt__plan_chunk_time *out) {
    int map[MT__PLAN_STEP_MAX_COMM];
    for (int j = 0; j < from->n; j++) {
        int k = 0;
        while (k < into->n && !(into->kind[k] == from->kind[j] &&
                                !memcmp(&into->axes[k], &from->axes[j], sizeof from->axes[j])))
            k++;
        if (k == into->n) {
            if (into->n == MT__PLAN_STEP_MAX_COMM)
                return mt_fail(MT_EINVAL, "plan: a step with more than %d distinct collectives",
                               MT__PLAN_STEP_MAX_COMM);
            into->kind[k] = from->kind[j];
            into->axes[k] = from->axes[j];
            into->n++;
        }
        map[j] = k;
    }
    *out = *in;
    for (int v = 0; v < 2; v++)
        for (int ph = 0; ph < 3; ph++) {
            mt__plan_phase *o = &out->phase[v][ph];
            const mt__plan_phase *i = &in->phase[v][ph];
            memset(o->coll, 0, sizeof o->coll);
            memset(o->exposed, 0, sizeof o->exposed);
            memset(o->skipped, 0, sizeof o->skipped);
            memset(o->size, 0, sizeof o->size);
            for (int j = 0; j < from->n; j++) {
                o->coll[map[j]] = i->coll[j];
                o->exposed[map[j]] = i->exposed[j];
                o->skipped[map[j]] = i->skipped[j];
                o->size[map[j]] = i->size[j];
            }
        }
    return MT_OK;
}

/* What timing a chunk's program needs: the layout's device, mesh and
 * gradient buckets (cache.c times its points the same way). */
typedef struct {
    const mt_hardware *hw;
    const mt_mesh     *mesh;
    mt_precision       precision;
    double             bucket_bytes;
} timing;

/* The time of program c0 (at its batch) taken to `batch` along c1 (at
 * another), keyed into *keys (step.c's mt__plan_chunk_time_at). Falls
 * back to a build at `batch` itself where the two programs are not node
 * for node the same. */
static mt_status time_at_batch(mt__plan_search *s, const timing *tm, mt__plan_prog_key key,
                               const mt__plan_cached *c0, const mt__plan_cached *c1, int batch,
                               mt__plan_comm_keys *keys, mt__plan_chunk_time *out, char *why,
                               size_t cap) {
    if (!mt__plan_program_same_nodes(&c0->prog, &c1->prog)) {
        const mt__plan_cached *e = NULL;
        key.batch = batch;
        mt_status st = mt__plan_program_cached(s, &key, &e);
        if (st != MT_OK) return st;
        if (e->status != MT_OK) {
            mt__text_format(why, cap, "%s", e->why);
            return MT_OK;
        }
        return rekey(&e->keys, &e->ct, keys, out);
    }
    /* remembered by the two builds and the batch: they name the mesh (their
       key's), and the hardware, precision and buckets are the request's */
    if (!s->time_memo && !(s->time_memo = calloc(MT__PLAN_TIME_MEMO, sizeof *s->time_memo)))
        return mt_fail(MT_ENOMEM, "out of memory for %d remembered times", MT__PLAN_TIME_MEMO);
    const uintptr_t h = ((uintptr_t)c0 >> 4) * 31u + ((uintptr_t)c1 >> 4) * 7u + (uintptr_t)batch;
    mt__plan_time_memo *m = &s->time_memo[h % MT__PLAN_TIME_MEMO];
    if (m->c0 != c0 || m->c1 != c1 || m->batch != batch) {
        m->c0 = NULL;   /* empty until made */
        memset(&m->keys, 0, sizeof m->keys);
        mt_status st = mt__plan_chunk_time_at(tm->hw, tm->mesh, tm->precision, &c0->prog,
                                              c0->key.batch, &c1->prog, c1->key.batch, batch,
                                              tm->bucket_bytes, &m->keys, &m->t);
        if (st != MT_OK) return st;
        m->c0 = c0, m->c1 = c1, m->batch = batch;
    }
    return rekey(&m->keys, &m->t, keys, out);
}

/* X(k) from X at k0 and k1 blocks (the same batch), into *out: linear,
 * each repeated block adding the same seconds. Past k1 (a chunk of more
 * than 8 blocks) a collective's wait is extended by what a block adds to
 * it, never less than nothing nor more than the block adds to the
 * collective's own seconds: a wait that shrank or outgrew its collective
 * from k0 to k1 did so at an edge (gradients falling into buckets
 * otherwise), not in a block; a phase's seconds stay its ops' plus its
 * waits (step_phase.c). */
static void lerp_blocks(const mt__plan_chunk_time *x0, const mt__plan_chunk_time *x1, int k0,
                        int k1, int k, mt__plan_chunk_time *out) {
    const size_t n = sizeof *out / sizeof(double);
    lerp2((const double *)x0, (const double *)x1, (const double *)x0, (const double *)x1, k0, k1,
          0, 0, k, 0, (double *)out, n);
    if (k <= k1) return;   /* between the points: a convex mix, waits >= 0 */
    const double past = (double)(k - k1) / (k1 - k0);
    for (int v = 0; v < 2; v++)
        for (int q = 0; q < 3; q++) {
            mt__plan_phase *o = &out->phase[v][q];
            const mt__plan_phase *a = &x0->phase[v][q], *b = &x1->phase[v][q];
            o->seconds = o->flop_bound + o->memory_bound;
            for (int c = 0; c < MT__PLAN_STEP_MAX_COMM; c++) {
                /* carried on, a wait that outgrew its collective passed the
                   collective's own time (a GPT of 48 blocks: an all-gather
                   over tensor exposing 0.0626 s of its 0.0624 s,
                   test_plan_property) */
                const double most = b->coll[c] - a->coll[c];
                double grow = b->exposed[c] - a->exposed[c];
                if (grow > most) grow = most;
                o->exposed[c] = b->exposed[c] + past * (grow > 0 ? grow : 0);
                o->seconds += o->exposed[c];
            }
        }
}

/* The programs of global chunk `chunk` at the layout's blocks and
 * sequences: its memory counts interpolated (bilinear), its times (ct) as
 * the file's comment says; fails (with *why) where a build is refused.
 * With `proxy`, the memory-first check's counts alone (tm, keys and ct
 * unused): the points along the blocks built as mt__plan_memory_proxy
 * says, and the batch's two points the same one, as the counts the
 * conventions other than meshtrain read are along the batch. */
static mt_status chunk_at(mt__plan_search *s, const timing *tm, mt__plan_prog_key key,
                          int blocks, int batch, mt__plan_comm_keys *keys,
                          mt__plan_chunk_time *ct, chunk_vec *out, char *why, size_t cap,
                          bool proxy, bool *timing_refused) {
    const mt__plan_cached *at[4];
    int k0, k1, b0, b1;
    mt__plan_block_points(blocks, &k0, &k1);
    /* a mixture of experts whose MoE blocks do not grow along the line
       through the points: its own blocks */
    if (!mt__plan_moe_linear(s, blocks, k0, k1)) k0 = k1 = blocks;
    mt__plan_batch_points(batch, &b0, &b1);
    const bool past = blocks > k1 || batch > b1;
    if (proxy) {
        key = mt__plan_memory_proxy(key);
        b0 = b1 = key.batch;
    }
    const int ks[4] = {k0, k1, k0, k1}, bs[4] = {b0, b0, b1, b1};
    chunk_vec v[4];
    for (int i = 0; i < 4; i++) {
        key.blocks = ks[i];
        key.batch = bs[i];
        mt_status st = mt__plan_program_cached(s, &key, &at[i]);
        if (st != MT_OK) return st;
        if (at[i]->status != MT_OK) {
            mt__text_format(why, cap, "%s", at[i]->why);
            if (timing_refused) *timing_refused = at[i]->prog_ok;
            return MT_OK;
        }
        v[i] = vec_of(at[i]);
    }
    lerp2((double *)&v[0], (double *)&v[1], (double *)&v[2], (double *)&v[3], k0, k1, b0, b1,
          blocks, batch, (double *)out, CHUNK_VEC_N);
    /* past the points, a count is at least what the points measured: no
     * count shrinks with more blocks or sequences, so a slope below zero
     * between two points (the arena packing 4 sequences a little tighter
     * than 2) is not carried out to 128 sequences, where it went below zero */
    if (past)
        for (size_t i = 0; i < CHUNK_VEC_N; i++)
            for (int j = 0; j < 4; j++) {
                double *o = (double *)out + i;
                const double m = ((const double *)&v[j])[i];
                if (*o < m) *o = m;
            }
    if (proxy) return MT_OK;
    /* the arena at the layout's batch node by node, at each block count,
       then along the blocks as the rest */
    double a[2];
    if (b1 != b0 && arena_at_batch(&at[0]->prog, b0, &at[2]->prog, b1, batch, &a[0]) &&
        arena_at_batch(&at[1]->prog, b0, &at[3]->prog, b1, batch, &a[1])) {
        const double u = k1 > k0 ? (double)(blocks - k0) / (k1 - k0) : 0;
        double arena = a[0] + u * (a[1] - a[0]);
        for (int j = 0; j < 4 && (blocks > k1 || batch > b1); j++)
            arena = fmax(arena, v[j].mem.arena_bytes);
        out->mem.arena_bytes = arena;
    }
    /* the seconds at the layout's batch, at each block point, each point's
       collectives re-keyed into the layout's table (one point when the
       chunk is built at its own blocks: the second would time it again) */
    mt__plan_chunk_time t[2];
    for (int i = 0; i < 2; i++) {
        if (i == 1 && k1 == k0) {
            t[1] = t[0];
            break;
        }
        key.blocks = ks[i];
        mt_status st = b1 == b0 ? rekey(&at[i]->keys, &at[i]->ct, keys, &t[i])
                                : time_at_batch(s, tm, key, at[i], at[i + 2], batch, keys, &t[i],
                                                why, cap);
        if (st != MT_OK || why[0]) return st;
    }
    lerp_blocks(&t[0], &t[1], k0, k1, blocks, ct);
    return MT_OK;
}

/* ======================================================================== */
/* Step time                                                                 */
/* ======================================================================== */

/* What step.c's model takes of layout l besides its chunks' times. */
static mt__plan_step_in step_in_of(const mt__plan_search *s, const mt_plan_layout *l,
                                   const timing *tm, int v, int batch, int chips) {
    const mt_plan_request *r = s->req;
    /* one microbatch's (B, T, C) activations between stages, f32 (16-bit
       under the mixed16 convention, as its traffic: plan_impl.h): a tensor
       slice under sequence parallelism, else whole on every tensor device */
    double msg = mt__plan_act_bytes(r) * batch * s->seq * s->channels / (l->sequence_parallel ? l->tensor : 1);
    return (mt__plan_step_in){
        .hw = tm->hw, .mesh = tm->mesh,
        .precision = r->precision, .stages = l->pipe, .chunks = v,
        .schedule = l->pipe > 1 ? (mt_schedule_kind)l->schedule : MT_SCHEDULE_1F1B,
        .microbatches = l->microbatches, .message_bytes = l->pipe > 1 ? msg : 0,
        /* where the trainer can (step.h); Megatron-LM's after its backward */
        .reduce = mt__plan_step_conv_of(r).reduce_after ? MT__PLAN_REDUCE_AFTER
                                                         : MT__PLAN_REDUCE_ONCE,
        .model = {.n_params = s->params, .layers = s->layers, .heads = s->heads,
                  .head_dim = s->head_dim, .seq = s->seq,
                  .tokens = r->batch_tokens, .flops_per_token = s->flops_per_token},
        .host_slots = mt__plan_host_slots(s->req->hw, chips, 0)};
}

/* Whether a step cannot come below s->prune_above: its bound from the times
 * of the roles built[] (ct), the other chunks' taken as none (the bound only
 * grows with them). */
static bool bound_passes(const mt__plan_search *s, const mt__plan_step_in *in,
                         const mt__plan_chunk_time ct[MT__PLAN_N_ROLES], const bool *built,
                         int S, const int *dev_of) {
    const mt__plan_chunk_time *chunks[2 * MT_SCHEDULE_MAX_STAGES];
    for (int c = 0; c < S; c++) {
        const int k = mt__plan_role_of(s->layers, S, c);
        chunks[c] = built[k] ? &ct[k] : NULL;
    }
    return mt__plan_step_lower(in, chunks, dev_of) > s->prune_above * (1 + MT__PLAN_PRUNE_SLACK);
}

/* res counted as fitting, its step not made (search.c's pruning). */
static void pruned(mt__plan_search *s, mt_plan_result *res) {
    s->last_pruned = res->feasible = true;
    res->why[0] = '\0';
}

/* The time of the step of layout l from its chunks' seconds (ct: each
 * role's, keyed in *keys), by step.c's model on tm's device and mesh, into
 * res. */
static mt_status step_time(mt__plan_search *s, const mt_plan_layout *l, const timing *tm,
                           const mt__plan_comm_keys *keys,
                           const mt__plan_chunk_time ct[MT__PLAN_N_ROLES],
                           int S, int v, int batch, const int *dev_of, mt_plan_result *res,
                           mt__plan_step_result *detail) {
    const mt_plan_request *r = s->req;
    mt__plan_step_in in = step_in_of(s, l, tm, v, batch, res->chips);
    /* a pipeline whose step cannot come below its bound where the search
       would keep it: counted as fitting, its schedule not simulated (before
       its chunks' times are copied out) */
    const bool every[MT__PLAN_N_ROLES] = {true, true, true, true};
    if (s->prune_above > 0 && !detail && bound_passes(s, &in, ct, every, S, dev_of)) {
        pruned(s, res);
        return MT_OK;
    }
    mt__plan_chunk_time *chunks = malloc((size_t)S * sizeof *chunks);
    if (!chunks) return mt_fail(MT_ENOMEM, "out of memory for %d chunks' times", S);
    for (int c = 0; c < S; c++) chunks[c] = ct[mt__plan_role_of(s->layers, S, c)];
    mt__plan_step_result out;
    mt_status st = mt__plan_step_chunks(&in, chunks, keys, &out);
    free(chunks);
    if (st == MT_ENOMEM) return st;
    if (st == MT_EINTERNAL)   /* an impossible step (step_check.c): the layout named */
        return mt_fail_wrap(st, "plan: layout %s zero %d remat %s%s%s schedule %s, %d "
                            "microbatches", res->mesh, l->zero, mt_remat_name(l->remat),
                            l->sequence_parallel ? " sp" : "", l->collective_matmul ? " cm" : "",
                            l->pipe > 1 ? mt_schedule_kind_name((mt_schedule_kind)l->schedule)
                                        : "none",
                            l->microbatches);
    if (st != MT_OK) {   /* a schedule that refuses the counts */
        mt__text_format(res->why, sizeof res->why, "%.250s", mt_errmsg());
        return MT_OK;
    }
    if (detail) *detail = out;
    res->step = out.step;
    res->compute = out.compute;
    res->comm_exposed = out.comm_exposed;
    res->bubble = out.bubble;
    res->optimizer_step = out.optimizer;
    res->tokens_per_chip = r->batch_tokens / res->chips;
    res->tokens_per_s_per_device = r->batch_tokens / out.step / res->chips;
    res->mfu = out.mfu;
    res->hfu = out.hfu;
    mt__plan_step_output(tm->mesh, &out, res);   /* the split and the bytes, for the output */
    static const char *const BOUND[] = {"compute", "memory bandwidth", "communication",
                                        "pipeline bubble"};
    mt__text_format(res->bound, sizeof res->bound, "%s", BOUND[out.bound]);
    /* the reason without the bound it starts with ("communication: ...") */
    const char *why = out.reason;
    size_t nb = strlen(res->bound);
    if (!strncmp(why, res->bound, nb) && !strncmp(why + nb, ": ", 2)) why += nb + 2;
    mt__text_format(res->bound_why, sizeof res->bound_why, "%s", why);
    res->feasible = true;
    res->why[0] = '\0';
    return MT_OK;
}

/* ======================================================================== */
/* One layout                                                                */
/* ======================================================================== */

/* Whether the mesh of layout result r lays out on hw (mt__plan_map_make;
 * true where the mesh itself is refused), the error cleared. */
static bool mesh_lays_out(const mt_hardware *hw, const mt_plan_result *r) {
    mt_mesh *mesh = NULL;
    mt__plan_map map;
    bool ok = mt_mesh_create(r->mesh, r->chips, &mesh) != MT_OK ||
              mt__plan_map_make(hw, mesh, &map) == MT_OK;
    mt_mesh_free(mesh);
    mt_errclear();
    return ok;
}

/* Layout l refused for memory, under a convention other than meshtrain,
 * from the counts of the programs mt__plan_memory_proxy names (res as the
 * layout's own programs make it: the counts it reads are theirs), or
 * under any convention where its mesh does not lay out on the system (a
 * proxy built and refused by its timing with the words the layout's own
 * first build gets); res untouched where it fits, a proxy is refused
 * otherwise, or the layout has a context axis (the proxies are not
 * checked for it). Its
 * own programs are built only where it may fit: most of a search's
 * layouts do not, and their own builds were three quarters of its time
 * (issue 40). */
static mt_status memory_first(mt__plan_search *s, const mt_plan_layout *l,
                              mt__plan_prog_key key, int S, int batch, const int *slots,
                              const int *peak, const int *dev_of, mt_plan_result *res) {
    if (s->own_builds || l->context > 1) return MT_OK;
    mt_hardware tmp;
    const mt_hardware *hw = mt__plan_layout_hw(s, res->chips, &tmp);
    /* meshtrain's bytes read the arena, the policy's and the batch's: only
       a mesh the system does not lay out is refused from a proxy */
    const bool memory = s->req->memory != MT_PLAN_MEMORY_MESHTRAIN;
    if (!memory && mesh_lays_out(hw, res)) return MT_OK;
    chunk_vec role[MT__PLAN_N_ROLES];
    mt__plan_mem_counts counts[MT__PLAN_N_ROLES];
    bool built[MT__PLAN_N_ROLES] = {false};
    char why[sizeof res->why] = "";
    bool timed_out = false;
    for (int c = 0; c < S && !why[0]; c++) {
        const int k = mt__plan_role_of(s->layers, S, c);
        if (built[k]) continue;
        built[k] = true;
        key.chunk = k == MT__PLAN_ROLE_FIRST ? 0 : k == MT__PLAN_ROLE_LAST ? S - 1 : 1;
        mt_status st = chunk_at(s, NULL, key, mt__plan_chunk_blocks(s->layers, S, c), batch,
                                NULL, NULL, &role[k], why, sizeof why, true, &timed_out);
        if (st != MT_OK) return st;
    }
    if (why[0]) {
        /* a proxy built but not timed: where the mesh does not lay out on
           the system (cost_map.c: every timing's first step, whatever the
           program), the layout's own first build is refused with the same
           words; else its own builds say why */
        if (timed_out && !mesh_lays_out(hw, res)) {
            mt__text_format(res->why, sizeof res->why, "%s", why);
            s->n_proxy_refused++;
        }
        return MT_OK;
    }
    if (!memory) return MT_OK;
    for (int k = 0; k < MT__PLAN_N_ROLES; k++) counts[k] = role[k].mem;
    mt_plan_result m = *res;
    mt_status st = mt__plan_layout_memory(s, l, key, counts, built, S, batch, slots, peak, dev_of,
                                          hw, true, &m);
    if (st != MT_OK || !m.why[0]) return st;
    *res = m;
    s->n_proxy_refused++;
    return MT_OK;
}

mt_status mt__plan_evaluate(mt__plan_search *s, const mt_plan_layout *l, mt_plan_result *res) {
    return mt__plan_evaluate_step(s, l, res, NULL);
}

mt_status mt__plan_evaluate_step(mt__plan_search *s, const mt_plan_layout *l, mt_plan_result *res,
                                 mt__plan_step_result *step) {
    memset(res, 0, sizeof *res);
    if (step) memset(step, 0, sizeof *step);
    s->last_pruned = false;
    res->layout = *l;
    mt__plan_mesh_text(l, res->mesh, sizeof res->mesh);
    res->chips = mt__plan_layout_devices(l);
    mt__plan_divides(s, l, res->why, sizeof res->why);
    if (res->why[0]) return MT_OK;
    const int v = mt__plan_layout_chunks(l), S = l->pipe * v;
    const int batch = (int)(s->sequences / l->microbatches / mt__plan_layout_replicas(l));
    mt__plan_prog_key key = {.d = l->data, .f = l->fsdp, .t = l->tensor, .p = l->pipe, .v = v,
                    .zero = l->zero, .remat = (int)l->remat, .sp = l->sequence_parallel,
                    .cm = l->collective_matmul, .c = l->context > 1 ? l->context : 0,
                    .cpa = l->context > 1 ? l->cp_attention : 0, .e = l->expert * (l->expert > 1)};
    /* each chunk's in-flight microbatches and its device */
    int slots[2 * MT_SCHEDULE_MAX_STAGES], peak[2 * MT_SCHEDULE_MAX_STAGES],
        dev_of[2 * MT_SCHEDULE_MAX_STAGES];
    slots[0] = peak[0] = 1;
    dev_of[0] = 0;
    if (l->pipe > 1) {
        mt_status st = mt__plan_pipeline_slots(s, l, v, slots, peak, dev_of, res->why,
                                               sizeof res->why);
        if (st != MT_OK || res->why[0]) return st;
    }
    mt_status st = memory_first(s, l, key, S, batch, slots, peak, dev_of, res);
    if (st != MT_OK || res->why[0]) return st;
    /* each role's program, at the blocks of its first chunk (one chunk
       stands for its role's others: the same program) */
    mt__plan_mem_counts counts[MT__PLAN_N_ROLES];
    chunk_vec role[MT__PLAN_N_ROLES];
    mt__plan_chunk_time ct[MT__PLAN_N_ROLES];
    mt__plan_comm_keys keys = {0};
    bool built[MT__PLAN_N_ROLES] = {false};
    const mt_plan_request *r = s->req;
    /* the layout's device, mesh and buckets, as cache.c times its points */
    mt_train_config bc = {.grad_reduce = r->precision, .bucket_mb = r->model.bucket_mb};
    mt_hardware tmp;
    timing tm = {.hw = mt__plan_layout_hw(s, res->chips, &tmp), .precision = r->precision,
                 .bucket_bytes = mt__plan_bucket_bytes(&bc)};
    mt_mesh *mesh = NULL;
    st = mt_mesh_create(res->mesh, res->chips, &mesh);
    tm.mesh = mesh;
    /* a pipeline whose memory the proxies settled (memory_first) is pruned
       once the roles built so far pass the bound: the rest go unbuilt */
    int n_roles = 0, done_roles = 0;
    const bool partial = st == MT_OK && s->prune_above > 0 && !step && l->pipe > 1 &&
                         !s->own_builds && l->context <= 1 &&
                         r->memory != MT_PLAN_MEMORY_MESHTRAIN;
    mt__plan_step_in in;
    if (partial) {
        bool seen[MT__PLAN_N_ROLES] = {false};
        for (int c = 0, k; c < S; c++)
            n_roles += !seen[k = mt__plan_role_of(s->layers, S, c)], seen[k] = true;
        in = step_in_of(s, l, &tm, v, batch, res->chips);
    }
    for (int c = 0; c < S && st == MT_OK && !res->why[0]; c++) {
        const int k = mt__plan_role_of(s->layers, S, c);
        if (built[k]) continue;
        built[k] = true;
        /* a model of n blocks a chunk is cut evenly, and all its middle
           chunks run one program: chunk 1 stands for them (one key) */
        key.chunk = k == MT__PLAN_ROLE_FIRST ? 0 : k == MT__PLAN_ROLE_LAST ? S - 1 : 1;
        st = chunk_at(s, &tm, key, mt__plan_chunk_blocks(s->layers, S, c), batch, &keys, &ct[k],
                      &role[k], res->why, sizeof res->why, false, NULL);
        if (st == MT_OK && !res->why[0] && partial && ++done_roles < n_roles &&
            bound_passes(s, &in, ct, built, S, dev_of)) {
            pruned(s, res);
            goto done;
        }
    }
    if (st != MT_OK || res->why[0]) goto done;
    /* memory: the device whose chunks hold most (evaluate_memory.c) */
    for (int k = 0; k < MT__PLAN_N_ROLES; k++) counts[k] = role[k].mem;
    st = mt__plan_layout_memory(s, l, key, counts, built, S, batch, slots, peak, dev_of, tm.hw,
                                false, res);
    if (st != MT_OK) goto done;
    if (!res->why[0]) st = step_time(s, l, &tm, &keys, ct, S, v, batch, dev_of, res, step);
done:
    mt_mesh_free(mesh);
    return st;
}

mt_status mt__plan_model_facts(mt__plan_search *s) {
    /* the whole model on one device at 1 and 2 blocks: N(L) = N1 + (L-1)(N2-N1);
       a mixture of experts whose MoE blocks do not grow so, at L */
    mt__plan_prog_key key = {.d = 1, .f = 1, .t = 1, .p = 1, .v = 1, .batch = 1};
    const bool line = mt__plan_moe_linear(s, s->layers, 1, 2);
    double n[2];
    for (int k = 0; k < 2; k++) {
        const mt__plan_cached *e = NULL;
        key.blocks = line ? k + 1 : s->layers;
        mt_status st = mt__plan_program_cached(s, &key, &e);
        if (st != MT_OK) return st;
        if (e->status != MT_OK)
            return mt_fail(e->status, "plan: the model does not build: %s", e->why);
        n[k] = (double)e->prog.param_global_elems;
    }
    s->params = n[0] + (s->layers - 1) * (n[1] - n[0]);
    /* the model's own count, the trainer's MFU's (PaLM's appendix B: 6 a
       product weight; causal attention 6·L·H·Q·T, half PaLM's): an untied LLaMA's lookup
       table is no product, and counted as one (6N of every parameter, as
       before) it put a small LLaMA of a large vocabulary past 100 % MFU
       (test_plan_property); a model without a count: 6N + 6·L·H·Q·T,
       H·Q the attention width */
    mt_train_config c;
    mt__plan_model_config(s->req, &c);
    if (mt_model_flops_per_token(&c, &s->flops_per_token) != MT_OK || !(s->flops_per_token > 0))
        s->flops_per_token = 6 * s->params + 6.0 * s->layers * s->heads * s->head_dim * s->seq;
    mt_errclear();
    return MT_OK;
}
