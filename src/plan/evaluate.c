/*
 * evaluate.c — one layout's memory per device and step time.
 *
 * A layout's programs are those of its distinct pipeline chunks (the first,
 * with the embedding; a middle one; the last, with the head and the loss;
 * just one without a pipe axis), each as one device of its stage runs it
 * (SPMD: the stage's other devices run the same program on their slices).
 * Transformer blocks repeat, and a program's costs and bytes grow linearly
 * in its blocks and in its sequences a replica, so each chunk is built at
 * 1 and 2 blocks and 1 and 2 sequences and its numbers taken bilinearly
 * at the layout's own: X(k, b) = X11 + (k-1)(X21-X11) + (b-1)(X12-X11) +
 * (k-1)(b-1)(X22-X21-X12+X11), exact for what is bilinear (FLOPs, bytes,
 * parameter counts, saved activations) and checked against direct builds
 * in test_plan_search. A chunk of 1 or 2 blocks, a replica of 1 or 2
 * sequences, is built as it is. Programs are cached by everything they
 * depend on, so a program shared by many layouts (the ZeRO stages' ...
 * microbatch counts' ...) is built once.
 */
#include "plan/memory.h"
#include "plan/search_impl.h"
#include "plan/timing.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char NO_DATA[] = "(plan reads no data)";

/* ======================================================================== */
/* The program cache                                                         */
/* ======================================================================== */

/* What a chunk's program depends on. */
typedef struct {
    int d, f, t, p, v;          /* mesh and chunks a device */
    int zero, remat, sp, cm, schedule;
    int blocks, batch;          /* per chunk; sequences a replica */
    int chunk;                  /* global chunk index */
} prog_key;

struct mt__plan_cached {
    prog_key         key;
    mt_status        status;    /* the build's (a refusal is a property of the layout) */
    char             why[256];
    mt__plan_program prog;
    mt__plan_time    time;      /* its seconds on the request's hardware */
};

static bool same_key(const prog_key *a, const prog_key *b) { return !memcmp(a, b, sizeof *a); }

static uint64_t key_hash(const prog_key *k) {
    uint64_t h = 1469598103934665603u;   /* FNV-1a */
    const unsigned char *b = (const unsigned char *)k;
    for (size_t i = 0; i < sizeof *k; i++) h = (h ^ b[i]) * 1099511628211u;
    return h;
}

/* The slot of key: where it is, or the empty one where it goes. */
static size_t slot_of(const mt__plan_search *s, const prog_key *key) {
    size_t i = (size_t)key_hash(key) & (s->n_slots - 1);
    while (s->slots[i] && !same_key(&s->cache[s->slots[i] - 1]->key, key))
        i = (i + 1) & (s->n_slots - 1);
    return i;
}

/* Room for one more entry: the array and the slots, grown (rehashed) by
 * doubling. */
static mt_status grow(mt__plan_search *s) {
    if (s->n_cache == s->cap_cache) {
        size_t c = s->cap_cache ? 2 * s->cap_cache : 64;
        mt__plan_cached **g = realloc(s->cache, c * sizeof *g);
        if (!g) return mt_fail(MT_ENOMEM, "out of memory for %zu cached programs", c);
        s->cache = g;
        s->cap_cache = c;
    }
    if (2 * (s->n_cache + 1) <= s->n_slots) return MT_OK;
    size_t n = s->n_slots ? 2 * s->n_slots : 256;
    size_t *slots = calloc(n, sizeof *slots);
    if (!slots) return mt_fail(MT_ENOMEM, "out of memory for %zu cache slots", n);
    free(s->slots);
    s->slots = slots;
    s->n_slots = n;
    for (size_t i = 0; i < s->n_cache; i++) s->slots[slot_of(s, &s->cache[i]->key)] = i + 1;
    return MT_OK;
}

/* Builds (or finds) the program of `key`. */
static mt_status program(mt__plan_search *s, const prog_key *key, const mt__plan_cached **out) {
    if (s->n_slots) {
        size_t at = slot_of(s, key);
        if (s->slots[at]) {
            *out = s->cache[s->slots[at] - 1];
            return MT_OK;
        }
    }
    mt_status gst = grow(s);
    if (gst != MT_OK) return gst;
    mt__plan_cached *e = calloc(1, sizeof *e);
    if (!e) return mt_fail(MT_ENOMEM, "out of memory for a cached program");
    e->key = *key;
    const mt_plan_request *r = s->req;
    const mt_model_about *about = mt_model_about_of(r->model.model);
    /* the model at key->blocks blocks a chunk */
    void *mc = malloc(about->config_size ? about->config_size : 1);
    if (!mc) {
        free(e);
        return mt_fail(MT_ENOMEM, "out of memory for a model's settings");
    }
    memcpy(mc, r->model.model_config, about->config_size);
    int S = key->p * key->v;
    mt__plan_model_set_int(mc, &r->model, "layers", key->blocks * S);
    if (mt__plan_model_int(&r->model, "max-seq", 0) > 0 &&
        mt__plan_model_int(&r->model, "max-seq", 0) < s->seq)
        mt__plan_model_set_int(mc, &r->model, "max-seq", s->seq);
    mt_train_config c = mt_train_defaults();
    c.model = r->model.model;
    c.model_config = mc;
    c.model_config_size = about->config_size;
    if (about->dataset) c.data = NO_DATA;
    c.B = key->batch * key->d * key->f;
    c.T = s->seq;
    c.accum = key->p > 1 ? (key->schedule == MT_SCHEDULE_DUALPIPEV ? 2 * key->p : key->p) : 1;
    c.zero = key->zero;
    c.remat = (mt_remat)key->remat;
    c.sequence_parallel = key->sp;
    c.collective_matmul = key->sp ? (key->cm ? 1 : -1) : 0;
    c.precision = r->precision;
    c.schedule = key->p > 1 ? mt_schedule_kind_name((mt_schedule_kind)key->schedule) : NULL;
    c.pipe_chunks = key->p > 1 ? key->v : 0;
    mt_plan_layout l = {.data = key->d, .fsdp = key->f, .tensor = key->t, .pipe = key->p};
    char spec[96];
    mt__plan_mesh_text(&l, spec, sizeof spec);
    c.mesh = spec;
    c.devices = key->d * key->f * key->t * key->p;
    c.grad_reduce = r->precision;   /* bf16 plans reduce in bf16, as large runs do */
    mt_mesh *mesh = NULL;
    mt_status st = mt_mesh_create(spec, c.devices, &mesh);
    /* the device of the chunk's stage: pipe coordinate the stage, the rest 0 */
    int device = 0;
    if (st == MT_OK && key->p > 1) {
        int pipe_axis = mt_mesh_ndim(mesh) - 1, coords[MT_MESH_MAX_AXES] = {0};
        bool found = false;
        for (int stage = 0; stage < key->p && !found && st == MT_OK; stage++) {
            coords[pipe_axis] = stage;
            int dev = mt_mesh_device(mesh, coords), ch[MT_SCHEDULE_MAX_CHUNKS], n = 0, SS = 1;
            st = mt_train_pipe_chunks(&c, mesh, dev, ch, MT_SCHEDULE_MAX_CHUNKS, &n, &SS);
            for (int i = 0; i < n && !found; i++)
                if (ch[i] == key->chunk) found = true, device = dev;
        }
    }
    if (st == MT_OK) st = mt_train_config_check(&c);
    if (st == MT_OK) st = mt__plan_program_build(&c, mesh, device, key->chunk, S, &e->prog);
    if (st == MT_OK) mt__plan_program_time(r->hw, mesh, r->precision, &e->prog, &e->time);
    mt_mesh_free(mesh);
    free(mc);
    e->status = st;
    if (st == MT_ENOMEM) {
        free(e);
        return st;
    }
    if (st != MT_OK) snprintf(e->why, sizeof e->why, "%s", mt_errmsg());
    s->n_built += st == MT_OK;
    s->cache[s->n_cache++] = e;
    s->slots[slot_of(s, key)] = s->n_cache;
    *out = e;
    return MT_OK;
}

void mt__plan_cache_free(mt__plan_search *s) {
    for (size_t i = 0; i < s->n_cache; i++) {
        mt__plan_program_free(&s->cache[i]->prog);
        free(s->cache[i]);
    }
    free(s->cache);
    free(s->slots);
    s->cache = NULL;
    s->slots = NULL;
    s->n_cache = s->cap_cache = s->n_slots = 0;
}

/* ======================================================================== */
/* Points and interpolation                                                  */
/* ======================================================================== */

/* What a chunk's program gives the layout, as numbers that grow linearly in
 * blocks and in sequences (interpolated field by field). */
typedef struct {
    mt__plan_mem_counts mem;       /* what the memory conventions read */
    mt__plan_time       time;      /* seconds of one microbatch */
    double flops, flops_recompute; /* one microbatch, every phase */
} chunk_vec;
#define CHUNK_VEC_N (sizeof(chunk_vec) / sizeof(double))

static chunk_vec vec_of(const mt__plan_cached *e) {
    const mt__plan_program *p = &e->prog;
    chunk_vec v;
    mt__plan_mem_counts_of(p, &v.mem);
    v.time = e->time;
    v.flops = p->flops[0] + p->flops[1] + p->flops[2];
    v.flops_recompute = p->flops_recompute;
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

/* The points a value is interpolated from: a replica's sequences n itself
 * up to 4, else 2 and 4 (past one sequence the arena grows with the batch
 * to the byte; at one it packs differently); a
 * chunk's blocks n itself up to 8, else 4 and 8: the planned arena's offsets
 * pack each block's activations a little differently (per block +-15% on a
 * 128-wide llama, +-2% on llama3-8b), so the slope is taken over 4 blocks. */
static void batch_points(int n, int *lo, int *hi) {
    *lo = n <= 4 ? n : 2;
    *hi = n <= 4 ? n : 4;
}

static void block_points(int n, int *lo, int *hi) {
    *lo = n <= 8 ? n : 4;
    *hi = n <= 8 ? n : 8;
}

/* The programs of global chunk `chunk` at the layout's blocks and
 * sequences, interpolated; fails (with *why) where a build is refused. */
static mt_status chunk_at(mt__plan_search *s, prog_key key, int blocks, int batch,
                          const mt__plan_cached *at[4], chunk_vec *out, char *why, size_t cap) {
    int k0, k1, b0, b1;
    block_points(blocks, &k0, &k1);
    batch_points(batch, &b0, &b1);
    const int ks[4] = {k0, k1, k0, k1}, bs[4] = {b0, b0, b1, b1};
    chunk_vec v[4];
    for (int i = 0; i < 4; i++) {
        key.blocks = ks[i];
        key.batch = bs[i];
        mt_status st = program(s, &key, &at[i]);
        if (st != MT_OK) return st;
        if (at[i]->status != MT_OK) {
            snprintf(why, cap, "%s", at[i]->why);
            return MT_OK;
        }
        v[i] = vec_of(at[i]);
    }
    lerp2((double *)&v[0], (double *)&v[1], (double *)&v[2], (double *)&v[3], k0, k1, b0, b1,
          blocks, batch, (double *)out, CHUNK_VEC_N);
    return MT_OK;
}

/* The slots (microbatches between F and W at once) the pipeline executor
 * gives each global chunk, as it counts them (executor.c), into slots[S],
 * and the device (stage) that holds it into dev[S]. */
static mt_status pipeline_slots(const mt_plan_layout *l, int v, int *slots, int *dev, char *why,
                                size_t cap) {
    mt_schedule *sc = NULL;
    mt_status st = mt_schedule_make((mt_schedule_kind)l->schedule, l->pipe, l->microbatches, v,
                                    &sc);
    if (st != MT_OK) {
        snprintf(why, cap, "%s", mt_errmsg());
        return MT_OK;
    }
    for (int c = 0; c < l->pipe * v; c++) {
        dev[c] = mt_schedule_chunk_device(sc, c);
        int n = mt_schedule_n_ops(sc, dev[c]);
        const mt_pipe_op *ops = mt_schedule_ops(sc, dev[c]);
        int live = 0, peak = 0;
        for (int o = 0; o < n; o++) {
            if (ops[o].chunk != c) continue;
            if (ops[o].type == MT_PIPE_F) live++;
            if (ops[o].type == MT_PIPE_W || ops[o].type == MT_PIPE_BW) live--;
            if (live > peak) peak = live;
        }
        slots[c] = peak < 1 ? 1 : peak;
    }
    mt_schedule_free(sc);
    return MT_OK;
}

/* ======================================================================== */
/* Step time                                                                 */
/* ======================================================================== */

/* The time of the step of layout l from its chunks' numbers (role: the
 * first, a middle and the last chunk), and what binds, into res. */
static mt_status step_time(mt__plan_search *s, const mt_plan_layout *l, const chunk_vec role[3],
                           const int *dev_of, int S, int v, int batch, mt_plan_result *res) {
    const mt_plan_request *r = s->req;
    const mt_hardware *hw = r->hw;
    const int m = l->microbatches;
    const double chips = res->chips;
    double core, busy_flops = 0, stored = 0;
    mt__plan_time sum = {0};   /* the busiest device's, over the step */
    if (l->pipe == 1) {
        const mt__plan_time *t = &role[0].time;
        core = m * t->total;
        sum = *t;
        sum.compute *= m, sum.flop_bound *= m, sum.exposed_tensor *= m;
        sum.exposed_gather *= m, sum.exposed_reduce *= m;
        busy_flops = m * t->flops;
        stored = role[0].mem.param_elems;
        res->bubble = 0;
    } else {
        /* the schedule on the chunks' F, B, W and the message between stages:
           one microbatch's activations (B, T, C floats) over pipe */
        mt_pipe_costs *cc = calloc((size_t)S, sizeof *cc);
        if (!cc) return mt_fail(MT_ENOMEM, "out of memory for %d chunks' costs", S);
        mt_mesh *mesh = NULL;
        char spec[96];
        mt__plan_mesh_text(l, spec, sizeof spec);
        mt_status st = mt_mesh_create(spec, res->chips, &mesh);
        mt_axes pipe;
        if (st == MT_OK) st = mt_mesh_axes(mesh, "pipe", &pipe);
        double msg = st == MT_OK ? mt__plan_coll_time(hw, mesh, MT__PC_PERMUTE, pipe,
                                                      4.0 * batch * s->seq * s->channels /
                                                          l->tensor)
                                 : 0;
        mt_mesh_free(mesh);
        for (int c = 0; c < S && st == MT_OK; c++) {
            const mt__plan_time *t = &role[c == 0 ? 0 : c == S - 1 ? 2 : 1].time;
            /* a phase of zero (W under a whole-backward kind) stays positive */
            cc[c] = (mt_pipe_costs){.f = t->phase[0] > 0 ? t->phase[0] : 1e-12,
                                    .b = t->phase[1] > 0 ? t->phase[1] : 1e-12,
                                    .w = t->phase[2], .comm = msg};
        }
        mt_schedule *sc = NULL;
        mt_pipe_sim sim = {0};
        if (st == MT_OK)
            st = mt_schedule_make((mt_schedule_kind)l->schedule, l->pipe, m, v, &sc);
        if (st == MT_OK) st = mt_schedule_simulate_chunks(sc, cc, 0, &sim);
        free(cc);
        mt_schedule_free(sc);
        if (st != MT_OK) {
            snprintf(res->why, sizeof res->why, "%.250s", mt_errmsg());
            mt_pipe_sim_free(&sim);
            return MT_OK;
        }
        core = sim.makespan;
        /* the busiest device: its chunks' compute and exposed communication */
        int busiest = 0;
        for (int d = 1; d < l->pipe; d++)
            if (sim.busy[d] > sim.busy[busiest]) busiest = d;
        res->bubble = sim.makespan - sim.busy[busiest];
        mt_pipe_sim_free(&sim);
        for (int c = 0; c < S; c++) {
            if (dev_of[c] != busiest) continue;
            const chunk_vec *cv = &role[c == 0 ? 0 : c == S - 1 ? 2 : 1];
            sum.compute += m * cv->time.compute;
            sum.flop_bound += m * cv->time.flop_bound;
            sum.exposed_tensor += m * cv->time.exposed_tensor;
            sum.exposed_gather += m * cv->time.exposed_gather;
            sum.exposed_reduce += m * cv->time.exposed_reduce;
            busy_flops += m * cv->time.flops;
            stored += cv->mem.param_elems;
        }
    }
    /* AdamW over the stored elements: reads p, g, m, v and writes p, m, v,
       7 floats an element */
    res->optimizer_step = 28.0 * stored / (hw->hbm_bandwidth * hw->hbm_fraction);
    res->step = core + res->optimizer_step;
    res->compute = sum.compute;
    res->comm_exposed = res->step - res->compute - res->bubble - res->optimizer_step;
    if (res->comm_exposed < 0) res->comm_exposed = 0;
    res->tokens_per_chip = r->batch_tokens / chips;
    res->tokens_per_s_per_device = r->batch_tokens / res->step / chips;
    double peak = mt__plan_matmul_peak(hw, r->precision);
    res->mfu = s->flops_per_token * r->batch_tokens / (chips * peak * res->step);
    res->hfu = busy_flops / (peak * res->step);
    /* what binds: the largest share of the step */
    double memory_bound = res->compute - sum.flop_bound + res->optimizer_step;
    const char *what = "compute";
    double most = sum.flop_bound;
    if (memory_bound > most) what = "memory bandwidth", most = memory_bound;
    if (res->comm_exposed > most) what = "communication", most = res->comm_exposed;
    if (res->bubble > most) what = "pipeline bubble", most = res->bubble;
    snprintf(res->bound, sizeof res->bound, "%s", what);
    if (strcmp(what, "communication") == 0) {
        const char *kind = "tensor-parallel collectives";
        double e = sum.exposed_tensor;
        if (sum.exposed_gather > e) kind = "parameter all-gathers", e = sum.exposed_gather;
        if (sum.exposed_reduce > e) kind = "gradient reductions", e = sum.exposed_reduce;
        snprintf(res->bound_why, sizeof res->bound_why, "%.0f%% of the step is exposed "
                 "communication, most of it %s (%.3g s of %.3g s)", 100 * most / res->step, kind,
                 e, res->step);
    } else if (strcmp(what, "pipeline bubble") == 0) {
        snprintf(res->bound_why, sizeof res->bound_why, "the bubble is %.0f%% of the step (%d "
                 "stages, %d microbatches)", 100 * most / res->step, l->pipe, m);
    } else {
        snprintf(res->bound_why, sizeof res->bound_why, "%.0f%% of the step is %s-bound work "
                 "(%.3g s of %.3g s)", 100 * most / res->step, what, most, res->step);
    }
    res->feasible = true;
    res->why[0] = '\0';
    return MT_OK;
}

/* ======================================================================== */
/* One layout                                                                */
/* ======================================================================== */

mt_status mt__plan_evaluate(mt__plan_search *s, const mt_plan_layout *l, mt_plan_result *res) {
    memset(res, 0, sizeof *res);
    res->layout = *l;
    mt__plan_mesh_text(l, res->mesh, sizeof res->mesh);
    res->chips = l->data * l->fsdp * l->tensor * l->pipe;
    mt__plan_divides(s, l, res->why, sizeof res->why);
    if (res->why[0]) return MT_OK;
    const int v = l->pipe > 1 ? mt__plan_schedule_chunks(l->schedule) : 1, S = l->pipe * v;
    const int blocks = s->layers / S;
    const int batch = (int)(s->sequences / l->microbatches / (l->data * l->fsdp));
    prog_key key = {.d = l->data, .f = l->fsdp, .t = l->tensor, .p = l->pipe, .v = v,
                    .zero = l->zero, .remat = (int)l->remat, .sp = l->sequence_parallel,
                    .cm = l->collective_matmul, .schedule = l->pipe > 1 ? l->schedule : -1};
    /* the chunks' numbers: the first, a middle one (standing for all), the last */
    int slots[2 * MT_SCHEDULE_MAX_STAGES], dev_of[2 * MT_SCHEDULE_MAX_STAGES];
    slots[0] = 1;
    dev_of[0] = 0;
    if (l->pipe > 1) {
        mt_status st = pipeline_slots(l, v, slots, dev_of, res->why, sizeof res->why);
        if (st != MT_OK || res->why[0]) return st;
    }
    chunk_vec role[3];
    const mt__plan_cached *at[3][4];
    const int role_chunk[3] = {0, S > 2 ? 1 : 0, S - 1};
    for (int r = 0; r < 3; r++) {
        if (r > 0 && role_chunk[r] == role_chunk[r - 1]) {
            role[r] = role[r - 1];
            memcpy(at[r], at[r - 1], sizeof at[r]);
            continue;
        }
        key.chunk = role_chunk[r];
        mt_status st = chunk_at(s, key, blocks, batch, at[r], &role[r], res->why,
                                sizeof res->why);
        if (st != MT_OK || res->why[0]) return st;
    }
    /* memory: the device whose chunks hold most */
    const mt_plan_request *r = s->req;
    mt__plan_mem_layout ml = {.data = l->data, .fsdp = l->fsdp, .tensor = l->tensor,
                              .zero = l->zero, .sequence_parallel = l->sequence_parallel,
                              .remat = l->remat, .s = s->seq, .b = batch, .h = s->channels,
                              .a = s->heads, .kv_heads = s->kv_heads, .ffn = s->ffn,
                              .gated = s->gated};
    res->total = -1;
    for (int stage = 0; stage < l->pipe; stage++) {
        mt__plan_mem_chunk ch[MT_SCHEDULE_MAX_CHUNKS];
        int n = 0;
        for (int c = 0; c < S && n < MT_SCHEDULE_MAX_CHUNKS; c++) {
            if (dev_of[c] != stage) continue;
            ch[n].counts = role[c == 0 ? 0 : c == S - 1 ? 2 : 1].mem;
            ch[n].layers = blocks;
            ch[n].in_flight = slots[c];
            n++;
        }
        mt__plan_mem_bytes mb;
        mt_status st = mt__plan_mem_device(r->memory, &ml, ch, n, &mb);
        if (st != MT_OK) return st;
        if (mb.total > res->total) {
            res->params = mb.params;
            res->grads = mb.grads;
            res->optimizer = mb.optimizer;
            res->activations = mb.activations;
            res->temporaries = mb.temporaries;
            res->total = mb.total;
        }
    }
    if (res->total > r->hw->hbm_bytes) {
        snprintf(res->why, sizeof res->why, "out of memory: %.3g GB a device, the %s has %.3g GB",
                 res->total / 1e9, r->hw->name, r->hw->hbm_bytes / 1e9);
        return MT_OK;
    }
    return step_time(s, l, role, dev_of, S, v, batch, res);
}

mt_status mt__plan_model_facts(mt__plan_search *s) {
    /* the whole model on one device at 1 and 2 blocks: N(L) = N1 + (L-1)(N2-N1) */
    prog_key key = {.d = 1, .f = 1, .t = 1, .p = 1, .v = 1, .schedule = -1, .batch = 1};
    double n[2];
    for (int k = 0; k < 2; k++) {
        const mt__plan_cached *e = NULL;
        key.blocks = k + 1;
        mt_status st = program(s, &key, &e);
        if (st != MT_OK) return st;
        if (e->status != MT_OK)
            return mt_fail(e->status, "plan: the model does not build: %s", e->why);
        n[k] = (double)e->prog.param_global_elems;
    }
    s->params = n[0] + (s->layers - 1) * (n[1] - n[0]);
    /* PaLM (appendix B): 6N + 12·L·H·Q·T, H·Q the attention width C */
    s->flops_per_token = 6 * s->params + 12.0 * s->layers * s->channels * s->seq;
    return MT_OK;
}
