/* test_plan_property.c — the planner's invariants (plan/step.h; issue 40,
 * item 2) on thousands of random (model, hardware, layout) triples, each
 * evaluated through the search's own entry (mt__plan_evaluate_step):
 *
 *   - no collective exposes less than nothing, no part of the step is
 *     negative, and step = compute + exposed + bubble + optimizer;
 *   - step >= compute, and step >= every device's FLOPs at the chip's
 *     matrix peak and its HBM bytes at its bandwidth (here the devices'
 *     mean: the step's FLOPs and bytes over the stages, fractions not
 *     applied, the busiest device's floor from step.c too);
 *   - 0 < MFU <= HFU <= 1, HFU being MFU plus the recomputation's share;
 *   - remat full recomputes (FLOPs > 0) and its step is no faster than the
 *     same layout's without remat; without remat nothing is recomputed.
 *
 * Models: GPT and LLaMA shapes of random sizes (one block of 8-wide heads
 * up to 48 blocks, GQA, head sizes of their own, untied or tied heads) and
 * the published ones (llama presets, GPT-2, GPT-3 175B). Hardware: every
 * description in the source tree's hardware/ folder. Layouts: random
 * data x fsdp x tensor x pipe splits of the chips, ZeRO 0-3, every remat
 * policy, sequence parallelism and collective matmul on and off, every
 * schedule, random microbatch counts, each memory convention, bf16 and
 * fp32. Memory is given room (the chip's HBM x 1e9) in most worlds, so
 * that large models on few chips are timed too; the rest keep the chip's.
 *
 * The draws are seeded (MT_PLAN_PROPERTY_SEED overrides the seed), and a
 * failure prints the triple: model, hardware, chips, tokens, layout. Under
 * the sanitizers a fraction of the worlds is drawn (harness.h). Also here:
 * the check itself refuses a broken step (MT_EINTERNAL, naming it), and
 * collective matmul's full remat is counted at what it keeps under the
 * published memory conventions. */
#include "meshtrain.h"
#include "harness.h"
#include "plan/host.h"
#include "plan/search_impl.h"
#include "plan_unit_hw.h"

#include <dirent.h>
#include <stdint.h>

/* ======================================================================== */
/* Draws                                                                     */
/* ======================================================================== */

static uint64_t rng_state;

/* splitmix64 (Steele, Lea and Flood, 2014) */
static uint64_t next_u64(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform in [lo, hi] */
static int pick(int lo, int hi) {
    return lo + (int)(next_u64() % (uint64_t)(hi - lo + 1));
}

static int pick_of(const int *v, int n) { return v[pick(0, n - 1)]; }

/* The case's own seed, or with MT_PLAN_PROPERTY_SEED=S another one per
 * case (S x 1000003 + base: each case draws its own worlds). */
static void seed(uint64_t base) {
    const char *e = getenv("MT_PLAN_PROPERTY_SEED");
    rng_state = e && *e ? strtoull(e, NULL, 0) * 1000003ull + base : base;
}

/* ======================================================================== */
/* Hardware: every shipped description                                       */
/* ======================================================================== */

#define MAX_HW 32

typedef struct {
    int          n;
    mt_hardware *hw[MAX_HW];
} hw_set;

static hw_set load_all(void) {
    hw_set set = {0};
    const char *dirs[4];
    int nd = mt_hardware_dirs(dirs, 4);
    MT_CHECK(nd > 0, "no hardware folder compiled in");
    const char *dir = dirs[nd - 1];   /* the source tree's */
    DIR *d = opendir(dir);
    MT_CHECK(d, "cannot open %s", dir);
    struct dirent *e;
    while ((e = readdir(d)) && set.n < MAX_HW) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json")) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        MT_CHECK_OK(mt_hardware_load(path, &set.hw[set.n]));
        set.n++;
    }
    closedir(d);
    MT_CHECK(set.n >= 8, "%d hardware descriptions in %s, want every shipped one", set.n, dir);
    return set;
}

static void free_all(hw_set *set) {
    for (int i = 0; i < set->n; i++) mt_hardware_free(set->hw[i]);
}

static bool threads_host(const mt_hardware *hw) {
    return hw->n_levels > 0 && hw->levels[0].kind == MT_LINK_THREADS;
}

/* The most devices hw has (its outermost level's; 0: unbounded). */
static int hw_devices(const mt_hardware *hw) {
    return hw->n_levels ? hw->levels[hw->n_levels - 1].devices : 0;
}

/* ======================================================================== */
/* Models                                                                    */
/* ======================================================================== */

typedef struct {
    mt_model_kind   kind;
    mt_gpt_config   gpt;
    mt_llama_config llama;
    int             kv_heads;     /* the heads a tensor axis must divide */
    char            text[160];
} model;

static void gpt_shape(model *m, int L, int C, int NH, int V, int maxT) {
    m->kind = MT_MODEL_GPT;
    MT_CHECK_OK(mt_model_config_defaults(MT_MODEL_GPT, &m->gpt, sizeof m->gpt));
    m->gpt.L = L, m->gpt.C = C, m->gpt.NH = NH, m->gpt.V = V, m->gpt.Vp = 0;
    m->gpt.maxT = maxT;
    m->kv_heads = NH;
    snprintf(m->text, sizeof m->text, "gpt L=%d C=%d NH=%d V=%d maxT=%d", L, C, NH, V, maxT);
}

/* A model: a random shape (tiny to a few blocks of 2k wide, sometimes
 * 13-48 blocks, interpolated from 4 and 8) or a published one, its
 * context at least `seq`. */
static model draw_model(int seq) {
    static const int HS[] = {8, 16, 32, 64, 128};
    static const int NHS[] = {1, 2, 3, 4, 6, 8, 12, 16};
    model m;
    memset(&m, 0, sizeof m);
    const int kind = pick(0, 9);
    const int maxT = seq * pick(1, 2);
    const int L = pick(0, 3) ? pick(1, 12) : pick(13, 48);
    if (kind <= 3) {
        const int NH = pick_of(NHS, 8);
        gpt_shape(&m, L, NH * pick_of(HS, 5), NH, pick(64, 60000), maxT);
    } else if (kind == 4) {   /* GPT-2 small, medium, XL; GPT-3 175B */
        static const int S[4][3] = {{12, 768, 12}, {24, 1024, 16}, {48, 1600, 25}, {96, 12288, 96}};
        const int *s = S[pick(0, 3)];
        gpt_shape(&m, s[0], s[1], s[2], 50257, maxT);
    } else {
        m.kind = MT_MODEL_LLAMA;
        MT_CHECK_OK(mt_model_config_defaults(MT_MODEL_LLAMA, &m.llama, sizeof m.llama));
        mt_llama_config *c = &m.llama;
        if (kind == 5) {   /* a preset */
            int n = 0;
            while (mt_llama_preset_name(n)) n++;
            /* dense ones and mixtures of experts (planned on data x fsdp) */
            MT_CHECK_OK(mt_llama_preset(mt_llama_preset_name(pick(0, n - 1)), c));
        } else {
            const int NH = pick_of(NHS, 8), hs = 2 * pick(2, 64);
            int kv = NH;
            while (pick(0, 1) && kv % 2 == 0) kv /= 2;
            c->n_layers = L;
            c->n_heads = NH;
            c->n_kv_heads = kv;
            c->dim = pick(0, 3) ? NH * hs : 8 * pick(1, 256);
            c->head_dim = c->dim == NH * hs ? 0 : hs;
            c->ffn_dim = pick(0, 1) ? 0 : 8 * pick(1, 1024);
            c->vocab = pick(64, 130000);
            c->tie_embeddings = pick(0, 1);
        }
        c->max_seq = maxT;
        m.kv_heads = c->n_kv_heads;
        snprintf(m.text, sizeof m.text, "llama L=%d dim=%d NH=%d KV=%d hd=%d ffn=%d V=%d maxT=%d "
                 "tie=%d experts=%d", c->n_layers, c->dim, c->n_heads, c->n_kv_heads,
                 c->head_dim, c->ffn_dim, c->vocab, c->max_seq, c->tie_embeddings,
                 c->moe.experts);
    }
    return m;
}

static int layers_of(const model *m) {
    return m->kind == MT_MODEL_GPT ? m->gpt.L : m->llama.n_layers;
}

static int heads_of(const model *m) {
    return m->kind == MT_MODEL_GPT ? m->gpt.NH : m->llama.n_heads;
}

/* ======================================================================== */
/* Worlds: a model on some chips of a system, a batch, a convention          */
/* ======================================================================== */

typedef struct {
    model           m;
    mt_hardware     hw;         /* a copy: its memory given room in most worlds */
    mt_plan_request q;
    int             chips;
    long long       sequences;
    mt__plan_search s;
    char            text[512];
} world;

/* Draws a world into *w and starts its search; false when the request is
 * refused (a context the model lacks, more chips than the system has). */
static bool draw_world(world *w, const hw_set *set) {
    static const int SEQ[] = {16, 32, 64, 128, 256, 512, 1024, 2048, 4096};
    static const int PER[] = {1, 2, 4, 8, 16, 64};
    memset(w, 0, sizeof *w);
    const mt_hardware *hw = set->hw[pick(0, set->n - 1)];
    w->hw = *hw;
    const bool room = pick(0, 4) != 0;
    if (room) w->hw.hbm_bytes *= 1e9;
    const int seq = SEQ[pick(0, 8)];
    w->m = draw_model(seq);
    int chips = threads_host(hw) ? 1 << pick(0, 3) : 1 << pick(0, 8);
    if (!threads_host(hw) && pick(0, 5) == 0) chips *= 3;
    const int most = hw_devices(hw);
    while (most > 0 && chips > most) chips /= 2;
    w->chips = chips;
    w->sequences = (long long)chips * PER[pick(0, 5)];
    mt_plan_request *q = &w->q;
    *q = mt_plan_request_defaults();
    q->model = mt_train_defaults();
    q->model.model = w->m.kind;
    q->model.model_config = w->m.kind == MT_MODEL_GPT ? (const void *)&w->m.gpt
                                                      : (const void *)&w->m.llama;
    q->model.model_config_size = w->m.kind == MT_MODEL_GPT ? sizeof w->m.gpt : sizeof w->m.llama;
    q->model.bucket_mb = pick(0, 2) ? 25 : pick(0, 1);
    if (pick(0, 3) == 0) q->model.fsdp_gather = pick(0, 1) ? 1 : -1;
    else if (pick(0, 3) == 0) q->model.reshard_after_forward = -1;
    q->hw = &w->hw;
    q->chips = chips;
    q->seq = seq;
    q->batch_tokens = (double)w->sequences * seq;
    q->precision = pick(0, 3) ? MT_PRECISION_BF16 : MT_PRECISION_FP32;
    q->memory = (mt_plan_memory)pick(0, MT_PLAN_MEMORY_N - 1);
    snprintf(w->text, sizeof w->text, "%s on %d x %s%s, %lld sequences of %d, %s, memory %s, "
             "bucket %g MiB, fsdp_gather %d, reshard %d", w->m.text, chips, hw->name,
             room ? " (HBM x 1e9)" : "", w->sequences, seq,
             q->precision == MT_PRECISION_BF16 ? "bf16" : "fp32", mt_plan_memory_name(q->memory),
             q->model.bucket_mb, q->model.fsdp_gather, q->model.reshard_after_forward);
    mt_status st = mt__plan_search_begin(&w->s, q, chips);
    MT_CHECK(st == MT_OK || st == MT_EINVAL, "%s: begin -> %s: %s", w->text, mt_status_name(st),
             mt_errmsg());
    return st == MT_OK;
}

/* A random split of w's chips into data x fsdp x tensor x pipe and the
 * rest of a layout; mostly ones the trainer takes (the tensor axis
 * dividing the heads, the pipe at most the layers, m dividing a replica's
 * sequences), some it refuses (infeasible: also fine). */
static mt_plan_layout draw_layout(const world *w) {
    mt_plan_layout l = {.data = 1, .fsdp = 1, .tensor = 1, .pipe = 1};
    for (int tries = 0; tries < 8; tries++) {
        int ax[4] = {1, 1, 1, 1}, n = w->chips;
        for (int f = 2; n > 1; f++)
            while (n % f == 0) ax[pick(0, 3)] *= f, n /= f;
        if (heads_of(&w->m) % ax[2] || w->m.kv_heads % ax[2] || ax[2] > 64 ||
            ax[3] > layers_of(&w->m))
            continue;
        l.data = ax[0], l.fsdp = ax[1], l.tensor = ax[2], l.pipe = ax[3];
        break;
    }
    if (l.data * l.fsdp * l.tensor * l.pipe != w->chips) l.data = w->chips;
    l.remat = (mt_remat)pick(0, 3);
    l.zero = l.data >= 2 && pick(0, 1) ? pick(1, 3) : 0;
    if (l.zero == 1 && l.fsdp > 1 && pick(0, 3)) l.zero = 2;
    l.sequence_parallel = l.tensor >= 2 && w->q.seq % l.tensor == 0 && pick(0, 2) != 0;
    l.collective_matmul = l.sequence_parallel && pick(0, 1);
    l.schedule = l.pipe > 1 ? pick(0, MT_SCHEDULE_N_KINDS - 1) : -1;
    /* m divides a replica's sequences; a pipeline's at least p (2p: dualpipev) */
    const long long rep = w->sequences / (l.data * l.fsdp);
    const long long least = l.pipe == 1 ? 1 : l.schedule == MT_SCHEDULE_DUALPIPEV ? 2 * l.pipe
                                                                                   : l.pipe;
    int div[64], n = 0;
    for (long long d = 1; d <= rep && n < 64; d++)
        if (rep % d == 0 && d >= least) div[n++] = (int)d;
    l.microbatches = n ? div[pick(0, n - 1)] : 1;
    return l;
}

static void layout_text(const mt_plan_layout *l, char *buf, size_t cap) {
    snprintf(buf, cap, "data=%d,fsdp=%d,tensor=%d,pipe=%d zero %d remat %s%s%s schedule %s "
             "m=%d", l->data, l->fsdp, l->tensor, l->pipe, l->zero, mt_remat_name(l->remat),
             l->sequence_parallel ? " sp" : "", l->collective_matmul ? " cm" : "",
             l->pipe > 1 ? mt_schedule_kind_name((mt_schedule_kind)l->schedule) : "-",
             l->microbatches);
}

/* ======================================================================== */
/* The invariants                                                            */
/* ======================================================================== */

#define REL 1e-9   /* sums of seconds taken in another order */

static bool le(double a, double b) { return a <= b + REL * (fabs(b) > 1 ? fabs(b) : 1); }

typedef struct {
    int evaluated, feasible, full_pairs, within;
    double worst_mfu, worst_hfu;   /* where the model's count is within the FLOPs run */
    double most_mfu;               /* anywhere */
} tally;

/* Evaluates l in w (through the search's entry) and checks a feasible
 * result; returns whether it was feasible, its step in *step_out. */
static bool check_layout(world *w, const mt_plan_layout *l, tally *t, mt__plan_step_result *sr) {
    char lt[160];
    layout_text(l, lt, sizeof lt);
    mt_plan_result r;
    mt_status st = mt__plan_evaluate_step(&w->s, l, &r, sr);
    MT_CHECK(st == MT_OK, "%s | %s: %s: %s", w->text, lt, mt_status_name(st), mt_errmsg());
    t->evaluated++;
    if (!r.feasible) return false;
    t->feasible++;
    /* every part is seconds spent; no collective exposes less than nothing */
    MT_CHECK(r.step > 0 && r.compute > 0 && r.comm_exposed >= 0 && r.bubble >= 0 &&
                 r.optimizer_step >= 0,
             "%s | %s: step %g, compute %g, exposed %g, bubble %g, optimizer %g", w->text, lt,
             r.step, r.compute, r.comm_exposed, r.bubble, r.optimizer_step);
    for (int k = 0; k < sr->n_comm; k++)
        MT_CHECK(sr->comm[k].exposed >= 0 && le(sr->comm[k].exposed, sr->comm[k].seconds),
                 "%s | %s: %s exposes %g s of its %g s", w->text, lt, sr->comm[k].label,
                 sr->comm[k].exposed, sr->comm[k].seconds);
    /* the documented identity */
    const double sum = r.compute + r.comm_exposed + r.bubble + r.optimizer_step;
    MT_CHECK(fabs(sum - r.step) <= REL * r.step, "%s | %s: compute + exposed + bubble + "
             "optimizer = %.12g, step %.12g", w->text, lt, sum, r.step);
    /* the roofline: compute, and every device's FLOPs and bytes at the
       chip's peaks (the stages' mean, on the device's own share of a
       threads host, at full speed where a pipeline time-shares its cores) */
    mt_hardware share;
    const mt_hardware *hw = mt__plan_layout_hw(&w->s, r.chips, &share);
    const double slots = mt__plan_host_slots(&w->hw, r.chips, 0);
    const double speed = l->pipe > 1 && slots > 0 && slots < r.chips ? slots / r.chips : 1;
    const mt_hw_dtype dt = w->q.precision == MT_PRECISION_BF16 ? MT_HW_BF16 : MT_HW_FP32;
    const double fl = sr->flops_run / l->pipe / mt__plan_matmul_peak(hw, dt) * speed;
    const double by = sr->bytes_run / l->pipe / hw->hbm_bandwidth * speed;
    MT_CHECK(le(r.compute, r.step) && le(fl, r.step) && le(by, r.step) && le(sr->floor, r.step),
             "%s | %s: step %g s below compute %g, FLOPs at peak %g, bytes at bandwidth %g or "
             "the busiest device's floor %g", w->text, lt, r.step, r.compute, fl, by, sr->floor);
    /* 0 < MFU <= HFU, HFU = MFU plus the recomputation's share; both <= 1
       where the model's count (PaLM's convention) is no more than the
       FLOPs a device runs for it (else the FLOPs run, at peak, bound the
       step: above) */
    const double run = sr->flops_run, rec = sr->flops_recompute;
    MT_CHECK(rec >= 0 && rec < run && fabs(r.hfu * (run - rec) - r.mfu * run) <= 1e-9 * r.mfu * run,
             "%s | %s: HFU %.9g, MFU %.9g, %g FLOPs run of which %g recomputed", w->text, lt,
             r.hfu, r.mfu, run, rec);
    const double counted = w->q.batch_tokens * w->s.flops_per_token / r.chips;
    const bool within = counted <= (run - rec) / l->pipe;
    MT_CHECK(r.mfu > 0 && le(r.mfu, r.hfu) && (!within || le(r.hfu, 1)), "%s | %s: MFU %.6g, "
             "HFU %.6g (%g model FLOPs a device, %g run for them)", w->text, lt, r.mfu, r.hfu,
             counted, (run - rec) / l->pipe);
    t->within += within;
    if (r.mfu > t->most_mfu) t->most_mfu = r.mfu;
    if (within && r.mfu > t->worst_mfu) t->worst_mfu = r.mfu;
    if (within && r.hfu > t->worst_hfu) t->worst_hfu = r.hfu;
    MT_CHECK(l->remat != MT_REMAT_NONE || rec == 0, "%s | %s: %g FLOPs recomputed without remat",
             w->text, lt, rec);
    MT_CHECK(l->remat != MT_REMAT_FULL || rec > 0, "%s | %s: remat full recomputes nothing",
             w->text, lt);
    return true;
}

/* Recomputation is costed: full runs none's FLOPs and the recomputed ones,
 * and (one stage: the same device accounts for both) its compute is
 * none's and at least their time at the chip's peak; a step that exposes
 * no communication either way is no faster. A step that does may be: the
 * recomputation reorders the backward's parameter gathers (a block's, in
 * forward order, before its gradients), and the planner costs the program
 * as it runs (a 22-block LLaMA on fsdp=4,tensor=2 of v6e, fp32, 32
 * microbatches: 1.903 s under full, 1.931 s without, its compute 0.316 s
 * against 0.245 s). */
static void check_full_against_none(const world *w, const mt_plan_layout *l, const char *lt,
                                    const mt__plan_step_result *full,
                                    const mt__plan_step_result *none) {
    const double rec = full->flops_recompute;
    MT_CHECK(fabs(full->flops_run - rec - none->flops_run) <= 1e-9 * none->flops_run,
             "%s | %s: remat full runs %.12g FLOPs, %.12g recomputed; without %.12g", w->text,
             lt, full->flops_run, rec, none->flops_run);
    if (l->pipe > 1) return;
    mt_hardware share;
    const mt_hardware *hw = mt__plan_layout_hw(&w->s, w->chips, &share);
    const mt_hw_dtype dt = w->q.precision == MT_PRECISION_BF16 ? MT_HW_BF16 : MT_HW_FP32;
    const double at_peak = rec / mt__plan_matmul_peak(hw, dt);
    MT_CHECK(le(none->compute + at_peak, full->compute), "%s | %s: remat full's compute %.9g s, "
             "without %.9g s: less than the %g recomputed FLOPs at peak (%.9g s)", w->text, lt,
             full->compute, none->compute, rec, at_peak);
    if (full->comm_exposed == 0 && none->comm_exposed == 0)
        MT_CHECK(le(none->step, full->step), "%s | %s: remat full's step %.9g s, without "
                 "%.9g s (no communication exposed)", w->text, lt, full->step, none->step);
}

/* `worlds` worlds of `per` layouts each, from `base`; prints the counts. */
static void run_worlds(uint64_t base, int worlds, int per) {
    if (MT_TEST_SANITIZED) worlds = worlds / 8 > 2 ? worlds / 8 : 2;
    seed(base);
    hw_set set = load_all();
    tally t = {0};
    mt__plan_step_result *sr = malloc(2 * sizeof *sr);
    MT_CHECK(sr, "out of memory");
    world *w = malloc(sizeof *w);
    MT_CHECK(w, "out of memory");
    int started = 0;
    for (int i = 0; i < worlds; i++) {
        if (!draw_world(w, &set)) continue;
        started++;
        for (int j = 0; j < per; j++) {
            mt_plan_layout l = draw_layout(w);
            if (!check_layout(w, &l, &t, &sr[0]) || l.remat != MT_REMAT_FULL) continue;
            /* full remat against none: recomputation is never free */
            mt_plan_layout none = l;
            none.remat = MT_REMAT_NONE;
            if (!check_layout(w, &none, &t, &sr[1])) continue;
            char lt[160];
            layout_text(&l, lt, sizeof lt);
            t.full_pairs++;
            check_full_against_none(w, &l, lt, &sr[0], &sr[1]);
        }
        mt__plan_cache_free(&w->s);
    }
    printf("  %d worlds (%d started), %d layouts evaluated, %d feasible (%d whose model count "
           "is within the FLOPs run: MFU up to %.3g, HFU %.3g; MFU up to %.3g in all), %d full/none "
           "pairs\n", worlds, started, t.evaluated, t.feasible, t.within, t.worst_mfu,
           t.worst_hfu, t.most_mfu, t.full_pairs);
    MT_CHECK(t.feasible >= t.evaluated / 4, "only %d of %d layouts feasible: the draws miss",
             t.feasible, t.evaluated);
    free(w);
    free(sr);
    free_all(&set);
}

MT_TEST(random_triples_a) { run_worlds(0x40a, 60, 25); }
MT_TEST(random_triples_b) { run_worlds(0x40b, 60, 25); }
MT_TEST(random_triples_c) { run_worlds(0x40c, 60, 25); }

/* ======================================================================== */
/* The check refuses a broken step; what full remat under collective matmul  */
/* keeps                                                                     */
/* ======================================================================== */

/* On the unit system (plan_unit_hw.h: bf16 products at 4e12 x 0.5, HBM
 * 1e11 x 0.5), one chunk of 2e12 FLOPs in F (1 s at 2e12), B and W empty,
 * no stored elements, over data=2: a step of 1 s. Each broken copy must be
 * refused with MT_EINTERNAL, naming the invariant. */
MT_TEST(check_refuses_broken_steps) {
    mt_hardware hw = unit_hw();
    mt_mesh *mesh = NULL;
    MT_CHECK_OK(mt_mesh_create("data=2", 2, &mesh));
    mt__plan_comm_keys keys = {.n = 1, .kind = {MT__PC_ALL_REDUCE}};
    MT_CHECK_OK(mt_mesh_axes(mesh, "data", &keys.axes[0]));
    mt__plan_chunk_time ch;
    memset(&ch, 0, sizeof ch);
    for (int v = 0; v < 2; v++)
        ch.phase[v][0] = (mt__plan_phase){.seconds = 1, .flop_bound = 1, .flops = 2e12,
                                          .bytes = 1e6};
    mt__plan_step_in in = {.hw = &hw, .mesh = mesh, .precision = MT_PRECISION_BF16,
                           .stages = 1, .chunks = 1, .microbatches = 1,
                           .reduce = MT__PLAN_REDUCE_EACH,
                           .model = {.n_params = 1e6, .layers = 1, .heads = 1, .head_dim = 1,
                                     .seq = 1, .tokens = 1e5}};
    mt__plan_step_result r;
    MT_CHECK_OK(mt__plan_step_chunks(&in, &ch, &keys, &r));
    MT_CHECK_CLOSE(r.step, 1, 1e-12, "the whole step");
    /* a collective that exposes less than nothing */
    mt__plan_chunk_time bad = ch;
    bad.phase[0][0].coll[0] = 0.5, bad.phase[0][0].exposed[0] = -0.5;
    bad.phase[0][0].seconds = 0.5;
    MT_CHECK_FAILS(mt__plan_step_chunks(&in, &bad, &keys, &r), MT_EINTERNAL, "data=2",
                   "exposed communication is -0.5 s");
    /* a phase faster than its FLOPs at the chip's peak (4e12: 0.5 s) */
    bad = ch;
    bad.phase[0][0].seconds = bad.phase[0][0].flop_bound = 0.25;
    MT_CHECK_FAILS(mt__plan_step_chunks(&in, &bad, &keys, &r), MT_EINTERNAL, "faster than",
                   "peaks");
    /* a step whose parts do not add up */
    bad = ch;
    bad.phase[0][0].flop_bound = 0.75;
    MT_CHECK_FAILS(mt__plan_step_chunks(&in, &bad, &keys, &r), MT_EINTERNAL, "compute 0.75",
                   "not the step's 1");
    /* more recomputed than run */
    bad = ch;
    bad.flops_recompute = 3e12;
    MT_CHECK_FAILS(mt__plan_step_chunks(&in, &bad, &keys, &r), MT_EINTERNAL, "recomputed");
    mt_mesh_free(mesh);
}

/* One layout of a small GPT (4 blocks of 256, T 256, 32 sequences) on 2
 * H100s over tensor with sequence parallelism, remat and collective
 * matmul as given, under `memory`. */
static mt_plan_result gpt_tp2(mt__plan_search *s, mt_remat remat, bool cm) {
    mt_plan_layout l = {.data = 1, .fsdp = 1, .tensor = 2, .pipe = 1, .remat = remat,
                        .sequence_parallel = true, .collective_matmul = cm, .schedule = -1,
                        .microbatches = 1};
    mt_plan_result r;
    MT_CHECK_OK(mt__plan_evaluate(s, &l, &r));
    MT_CHECK(r.feasible, "%s: %s", r.mesh, r.why);
    return r;
}

/* remat.c recomputes no collective, and under collective matmul a block's
 * products are collectives: FULL keeps them, as DOTS does, at DOTS's time.
 * The published conventions counted it as FULL's block input alone, so it
 * held FULL's memory at DOTS's step (issue 40: 121 MB at 6.96 ms, where
 * FULL without collective matmul held 121 MB at 7.58 ms and DOTS 1.2 GB at
 * 6.96). Now it counts what it keeps: DOTS's bytes; without collective
 * matmul FULL recomputes the products and keeps less. */
MT_TEST(full_remat_under_collective_matmul_counts_what_it_keeps) {
    mt_gpt_config g;
    MT_CHECK_OK(mt_model_config_defaults(MT_MODEL_GPT, &g, sizeof g));
    g.L = 4, g.C = 256, g.NH = 4, g.V = 512, g.maxT = 256;
    mt_hardware *hw = NULL;
    MT_CHECK_OK(mt_hardware_find("h100-sxm", &hw, NULL, 0));
    for (int conv = 0; conv < MT_PLAN_MEMORY_N; conv++) {
        mt_plan_request q = mt_plan_request_defaults();
        q.model = mt_train_defaults();
        q.model.model_config = &g;
        q.model.model_config_size = sizeof g;
        q.hw = hw;
        q.chips = 2;
        q.seq = 256;
        q.batch_tokens = 32.0 * 256;
        q.memory = (mt_plan_memory)conv;
        mt__plan_search s;
        MT_CHECK_OK(mt__plan_search_begin(&s, &q, 2));
        mt_plan_result full_cm = gpt_tp2(&s, MT_REMAT_FULL, true);
        mt_plan_result dots_cm = gpt_tp2(&s, MT_REMAT_DOTS, true);
        mt_plan_result full = gpt_tp2(&s, MT_REMAT_FULL, false);
        const char *name = mt_plan_memory_name(q.memory);
        /* the same program's time: nothing more is recomputed under full */
        MT_CHECK_CLOSE(full_cm.step, dots_cm.step, 1e-12, "%s: full+cm's step is dots+cm's",
                       name);
        MT_CHECK(full.activations < full_cm.activations, "%s: full without cm keeps %g bytes, "
                 "with cm %g (it recomputes the products)", name, full.activations,
                 full_cm.activations);
        if (q.memory != MT_PLAN_MEMORY_MESHTRAIN)   /* the formulas: what it keeps */
            MT_CHECK_CLOSE(full_cm.activations, dots_cm.activations, 1e-12,
                           "%s: full+cm keeps dots+cm's activations", name);
        mt__plan_cache_free(&s);
    }
    mt_hardware_free(hw);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
