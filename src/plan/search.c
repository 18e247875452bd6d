/*
 * search.c — `meshtrain plan`'s search (mt_plan_search, meshtrain/plan.h):
 * the request checked, every layout it leaves open evaluated (layouts.c,
 * evaluate.c), the feasible ones ranked by step time, the best of each
 * family of layouts kept with a line saying why it loses, and with
 * min_chips the fewest chips on which some layout fits.
 */
#include "plan/search_workers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

mt_plan_request mt_plan_request_defaults(void) {
    return (mt_plan_request){.precision = MT_PRECISION_BF16, .remat = -1, .zero = -1,
                             .sequence_parallel = -1, .collective_matmul = -1, .schedule = -1,
                             .top = 5, .context = 1, .cp_attention = -1};
}

/* ======================================================================== */
/* Families                                                                  */
/* ======================================================================== */

static const char *const FAMILY[] = {
    "one chip", "pure data", "ZeRO over data", "pure FSDP", "FSDP x tensor", "pipeline",
    "expert parallel",
};
enum { N_FAMILIES = (int)(sizeof FAMILY / sizeof FAMILY[0]) };
_Static_assert(N_FAMILIES == MT__PLAN_N_FAMILIES, "search_workers.h counts the families");

static int family_of(const mt_plan_layout *l) {
    if (l->expert > 1) return 6;
    if (l->pipe > 1) return 5;
    if (l->tensor > 1) return 4;
    if (l->fsdp > 1) return 3;
    if (l->data > 1) return l->zero ? 2 : 1;
    return 0;
}

/* The reason a family's best loses to the overall best, in one line. */
static void family_line(mt_plan_family *f, const mt_plan_result *top, char example[256]) {
    const mt_plan_result *b = &f->best;
    if (f->n_feasible == 0) {
        snprintf(f->line, sizeof f->line, "%s: no layout fits (%.200s)", f->name,
                 example[0] ? example : "none divides the model and the batch");
        return;
    }
    if (top && strcmp(b->mesh, top->mesh) == 0 && b->step == top->step) {
        snprintf(f->line, sizeof f->line, "%s: the best (%.96s, %s-bound)", f->name, b->mesh,
                 b->bound);
        return;
    }
    double slower = top ? b->step / top->step : 1;
    if (strcmp(b->bound, "communication") == 0 && b->compute > 0) {
        /* the communication of the data-parallel families does not shrink with
           the batch, the compute does: the tokens a chip needs to hide it */
        double need = b->tokens_per_chip * (b->comm_exposed + b->compute) / b->compute;
        snprintf(f->line, sizeof f->line, "%s: communication-bound at %.0f tokens per chip, "
                 "needs %.0f (%.2fx the best's step)", f->name, b->tokens_per_chip, need, slower);
    } else {
        snprintf(f->line, sizeof f->line, "%s: %s-bound, %.2fx the best's step (%.96s)", f->name,
                 b->bound, slower, b->mesh);
    }
}

/* ======================================================================== */
/* The search                                                                */
/* ======================================================================== */

/* Refuses a feasible result with a number that is not finite: the
 * hardware reader bounds its figures so that none is, and a printed
 * "-nan" (or an invalid --json) is worse than a message. */
static mt_status finite_result(const mt__plan_search *s, const mt_plan_result *r) {
    const struct { const char *name; double v; } f[] = {
        {"step time", r->step}, {"compute time", r->compute},
        {"exposed communication", r->comm_exposed}, {"bubble", r->bubble},
        {"optimizer time", r->optimizer_step}, {"tokens/s per device", r->tokens_per_s_per_device},
        {"MFU", r->mfu}, {"HFU", r->hfu}, {"tokens per chip", r->tokens_per_chip},
        {"memory per device", r->total},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (!isfinite(f[i].v))
            return mt_fail(MT_EFORMAT, "plan: layout %s on hardware '%s' comes to a %s of %g: "
                           "the description's figures are out of any chip's range; check its "
                           "peaks, bandwidths and fractions", r->mesh, s->req->hw->name,
                           f[i].name, f[i].v);
    return MT_OK;
}

/* The slowest step layout l would have to beat to change the report, over
 * every thread of the search (mt__plan_shared_to_beat): the last of a full
 * top list, its family's best, and on all the chips the best of those (0:
 * some slot is still empty, any step changes it). A layout slower than
 * every one changes only the counts (mt__plan_step_lower's pruning,
 * evaluate.c). */
static double prune_above(const mt__plan_search *s, const mt_plan_layout *l) {
    const int chips = mt__plan_layout_devices(l);
    return mt__plan_shared_to_beat(s, family_of(l), chips == s->chips);
}

static mt_status visit(mt__plan_search *s, const mt_plan_layout *l) {
    mt__plan_worker *w = (mt__plan_worker *)(void *)s;
    mt_plan_report *rep = s->rep;
    mt_plan_result r;
    s->prune_above = prune_above(s, l);
    mt_status st = mt__plan_evaluate(s, l, &r);
    s->prune_above = 0;
    if (st != MT_OK) return st;
    r.seq = s->next_seq++;
    const int fam = family_of(l);
    if (s->last_pruned) {   /* fits, and no slot of the report takes it */
        rep->n_evaluated++;
        rep->n_feasible++;
        rep->families[fam].n_feasible++;
        rep->n_feasible_all += r.chips == s->chips;
        s->n_pruned++;
        s->last_feasible = true;
        mt__plan_shared_publish(s, NULL, fam, false);
        return MT_OK;
    }
    if (r.feasible && (st = finite_result(s, &r)) != MT_OK) return st;
    r.layout.chunks = mt__plan_layout_chunks(l);
    rep->n_evaluated++;
    s->last_feasible = r.feasible;
    if (!r.feasible) {
        /* the family's example: an out-of-memory layout says more than one
           whose sizes do not divide */
        bool oom = strncmp(r.why, "out of memory", 13) == 0;
        if (!w->notes.example[fam][0] || (oom && !w->notes.oom[fam])) {
            w->notes.oom[fam] = oom;
            w->notes.at[fam] = r.seq;
            snprintf(w->notes.example[fam], sizeof w->notes.example[fam], "%.90s: %.160s",
                     r.mesh, r.why);
        }
        if ((st = mt__plan_refusals_add(&w->refusals, &r)) != MT_OK) return st;
        return s->req->mesh ? mt__plan_keep_infeasible(s, &r) : MT_OK;
    }
    rep->n_feasible++;
    const bool all = r.chips == s->chips;
    mt__plan_shared_publish(s, &r, fam, all);
    /* a best not yet set has chips 0: another thread's steps may have
       pruned this one's first layouts of a family */
    rep->n_feasible_all += all;
    if (all && (!rep->best_all.chips || mt__plan_result_better(&r, &rep->best_all)))
        rep->best_all = r;
    mt_plan_family *f = &rep->families[fam];
    f->n_feasible++;
    if (!f->best.chips || mt__plan_result_better(&r, &f->best)) f->best = r;
    return mt__plan_keep_best(s, &r, s->req->top > 0 ? s->req->top : 5);
}

static bool is_threads_host(const mt_hardware *hw) {
    return hw->n_levels > 0 && hw->levels[0].kind == MT_LINK_THREADS;
}

/* The most chips the system has: its outermost level's devices (0:
 * unbounded, up to a mesh's 2^20); thread devices time-share one host's
 * cores, up to the trainer's --devices bound (1024, cli/args.h). */
#define MAX_CHIPS (1 << 20)
#define MAX_THREAD_DEVICES 1024

static int system_chips(const mt_hardware *hw) {
    if (is_threads_host(hw)) return MAX_THREAD_DEVICES;
    int d = hw->n_levels > 0 ? hw->levels[hw->n_levels - 1].devices : 0;
    return d > 0 && d < MAX_CHIPS ? d : MAX_CHIPS;
}

/* The request's rules, as train checks them (mt_train_config_check: a
 * logical axis the model lacks, a mesh axis no layout has, a rule for the
 * batch), on a mesh of every axis the planner lays out, before any layout
 * is built with them (cache.c); and refused with a convention whose
 * activations are a published formula of the default rows' splits. */
static mt_status check_rules(const mt_plan_request *r) {
    const char *rules = r->model.rules;
    if (!rules || !*rules) return MT_OK;
    if (r->memory != MT_PLAN_MEMORY_MESHTRAIN)
        return mt_fail(MT_EINVAL, "plan: --rules '%s' with --memory %s: that convention counts "
                       "activations by the published formulas, which split them as the default "
                       "rows do (Megatron's tensor parallelism); plan the rules with --memory "
                       "meshtrain (the program's own buffers)", rules,
                       mt_plan_memory_name(r->memory));
    mt_train_config c;
    mt__plan_model_config(r, &c);
    c.rules = rules;
    c.mesh = "pipe=1,data=1,fsdp=1,tensor=1";
    c.devices = 1;
    mt_status st = mt_train_config_check(&c);
    return st == MT_OK ? MT_OK : mt_fail_wrap(st, "plan");
}

/* The request's collective matmul and chunks, as train refuses them: a
 * collective matmul fixed where no layout has sequence parallelism to move
 * into the matmuls, chunks outside the trainer's 1 to 8 or that the
 * schedule asked for does not run. */
static mt_status check_choices(const mt_plan_request *r) {
    if (r->collective_matmul >= 0 && r->sequence_parallel == 0)
        return mt_fail(MT_EINVAL, "plan: --collective-matmul %s with --sequence-parallel off: "
                       "collective matmul moves the collectives of sequence parallelism into "
                       "the matmuls, and there are none; give --sequence-parallel on or auto, "
                       "or drop --collective-matmul", r->collective_matmul ? "on" : "off");
    if (r->collective_matmul < -1 || r->collective_matmul > 1)
        return mt_fail(MT_EINVAL, "plan: collective_matmul %d; give 0, 1 or -1 (both)",
                       r->collective_matmul);
    if (r->chunks < 0 || r->chunks > MT__PLAN_MAX_CHUNKS)
        return mt_fail(MT_EINVAL, "plan: --chunks %d: a device holds 1 to %d model chunks "
                       "(0: searched)", r->chunks, MT__PLAN_MAX_CHUNKS);
    if (r->chunks > 0 && r->schedule >= 0 && !mt__plan_kind_runs_chunks(r->schedule, r->chunks)) {
        const char *kind = mt_schedule_kind_name((mt_schedule_kind)r->schedule);
        const int own = mt__plan_schedule_chunks(r->schedule);
        if (r->schedule == MT_SCHEDULE_INTERLEAVED)
            return mt_fail(MT_EINVAL, "plan: --chunks %d with --schedule %s, which runs 2 to %d "
                           "chunks a device; give --chunks 2 to %d, or --schedule 1f1b (one "
                           "chunk)", r->chunks, kind, MT__PLAN_MAX_CHUNKS, MT__PLAN_MAX_CHUNKS);
        return mt_fail(MT_EINVAL, "plan: --chunks %d with --schedule %s, which runs %d chunk%s a "
                       "device; give --chunks %d, or --schedule interleaved (2 to %d chunks)",
                       r->chunks, kind, own, own == 1 ? "" : "s", own, MT__PLAN_MAX_CHUNKS);
    }
    return MT_OK;
}

/* Checks the request and derives the model's facts into s. */
static mt_status start(mt__plan_search *s, const mt_plan_request *r, int chips) {
    memset(s, 0, sizeof *s);
    s->req = r;
    s->chips = chips;
    if (!r->hw) return mt_fail(MT_EINVAL, "plan: no hardware description; give --hardware NAME");
    if (!mt_model_about_of(r->model.model) || !mt_model_about_of(r->model.model)->sequences)
        return mt_fail(MT_EINVAL, "plan: the planner costs sequence models (gpt, llama); "
                       "give --model gpt or --model llama");
    if (chips < 1) return mt_fail(MT_EINVAL, "plan: --chips %d; give 1 or more", chips);
    if (r->seq < 1) return mt_fail(MT_EINVAL, "plan: --seq %d; give the sequence length", r->seq);
    double seqs = r->batch_tokens / r->seq;
    if (!(r->batch_tokens > 0) || seqs != floor(seqs))
        return mt_fail(MT_EINVAL, "plan: --batch-tokens %.0f is not a whole number of "
                       "sequences of --seq %d; give a multiple of %d", r->batch_tokens, r->seq,
                       r->seq);
    if (seqs > 1e12)
        return mt_fail(MT_EINVAL, "plan: --batch-tokens %.0f is %.4g sequences of --seq %d, "
                       "more than the 1e12 the planner counts; give fewer tokens or longer "
                       "sequences", r->batch_tokens, seqs, r->seq);
    s->sequences = (long long)seqs;
    s->seq = r->seq;
    mt_status cs = check_choices(r);
    if (cs != MT_OK) return cs;
    /* the trainer refuses a sequence past the model's context (train's
       check, model_table.c): so does the plan */
    mt_model_shape shape;
    mt_status sh = mt_model_shape_of(&r->model, &shape);
    if (sh != MT_OK) return mt_fail_wrap(sh, "plan");
    int context = shape.max_seq;
    if (context > 0 && r->seq > context)
        return mt_fail(MT_EINVAL, "plan: sequence length T=%d (--seq) exceeds the model's "
                       "context maxT=%d (--max-seq); lower T or raise maxT", r->seq, context);
    int most = system_chips(r->hw);
    if (chips > most)
        return mt_fail(MT_EINVAL, "plan: --chips %d is more than the %d %s of hardware '%s'; "
                       "give --chips %d or fewer%s", chips, most,
                       is_threads_host(r->hw) ? "thread devices the trainer runs on a host"
                                              : "devices",
                       r->hw->name, most,
                       is_threads_host(r->hw) ? "" : ", or a description with more devices");
    /* the model's own facts (its entry's shape), not its flags by name */
    s->layers = shape.layers;
    s->heads = shape.heads;
    s->kv_heads = shape.kv_heads;
    s->head_dim = shape.head_dim;
    s->channels = shape.width;
    s->ffn = shape.ffn;     /* the GPT's 4C; LLaMA's SwiGLU F (its rule when 0) */
    s->gated = shape.gated;
    s->moe = shape;
    for (int a = 0; a < 6; a++) s->mesh_axes[a] = 1;
    if (r->mesh) {
        /* the mesh is the chips, as train and explain take it (the search
           without a mesh may leave chips idle: 8960 v5p laid out as 4096) */
        mt_mesh *m = NULL;
        int devs = 0;
        mt_status st = mt_mesh_spec_devices(r->mesh, &devs);
        if (st == MT_OK && devs > chips)
            return mt_fail(MT_EINVAL, "plan: --mesh '%s' has %d devices, more than --chips %d; "
                           "give --chips %d, or a mesh of %d devices", r->mesh, devs, chips, devs,
                           chips);
        if (st == MT_OK && devs < chips)
            return mt_fail(MT_EINVAL, "plan: --mesh '%s' has %d devices but --chips is %d; "
                           "give --chips %d, or a mesh of %d devices (train and explain take "
                           "a mesh of exactly the devices)", r->mesh, devs, chips, devs, chips);
        if (st == MT_OK) st = mt_mesh_create(r->mesh, devs, &m);
        if (st != MT_OK) return mt_fail_wrap(st, "plan: --mesh '%s'", r->mesh);
        static const char *const name[6] = {"data", "fsdp", "tensor", "pipe", "context",
                                            "expert"};
        for (int a = 0; a < mt_mesh_ndim(m) && st == MT_OK; a++) {
            const char *n = mt_mesh_axis_name(m, a);
            int k = 0;
            while (k < 6 && strcmp(n, name[k])) k++;
            if (k == 6)
                st = mt_fail(MT_EINVAL, "plan: --mesh '%s' has an axis '%s'; the planner lays "
                             "out data, fsdp, tensor, pipe, context and expert", r->mesh, n);
            else
                s->mesh_axes[k] = mt_mesh_axis_size(m, n);
        }
        mt_mesh_free(m);
        if (st != MT_OK) return st;
    }
    if (r->deepspeed_release < 0 || r->deepspeed_release > 999999 ||
        (r->deepspeed_release && r->memory != MT_PLAN_MEMORY_DEEPSPEED))
        return mt_fail(MT_EINVAL, "plan: DeepSpeed release %d with --memory %s: a release "
                       "(major x 10000 + minor x 100 + patch, 0 to 999999) is costed under "
                       "--memory deepspeed only; give --memory deepspeed or drop the release",
                       r->deepspeed_release, mt_plan_memory_name(r->memory));
    return check_rules(r);
}

/* Why nothing fits, into rep->why_none: an infeasible layout's reason (one
 * out of memory rather than one whose sizes do not divide). */
static void why_none(mt_plan_report *rep, const mt_plan_request *r, const mt__plan_notes *notes) {
    int pick = -1;
    for (int f = 0; f < N_FAMILIES; f++)
        if (notes->example[f][0] && (pick < 0 || (notes->oom[f] && !notes->oom[pick]))) pick = f;
    snprintf(rep->why_none, sizeof rep->why_none, "no layout %s%s%sfits on %d chips (%d "
             "evaluated; %s%.200s)", r->mesh ? "of --mesh '" : "", r->mesh ? r->mesh : "",
             r->mesh ? "' " : "", rep->chips, rep->n_evaluated,
             pick >= 0 ? "e.g. " : "", pick >= 0 ? notes->example[pick] : "none was laid out");
}

/* The programs cache holds (a search state holding only its cache) into s,
 * and back (give). */
static void cache_take(mt__plan_search *s, const mt__plan_search *cache) {
    s->cache = cache->cache, s->n_cache = cache->n_cache, s->cap_cache = cache->cap_cache;
    s->slots = cache->slots, s->n_slots = cache->n_slots;
    s->n_built = cache->n_built;
    s->n_pinned = cache->n_pinned, s->cache_bytes = cache->cache_bytes;
    s->packed_bytes = cache->packed_bytes;
    s->clock = cache->clock, s->time_memo = cache->time_memo;
    s->slots_memo = cache->slots_memo, s->n_slots_memo = cache->n_slots_memo;
    s->used_slots_memo = cache->used_slots_memo;
}

static void cache_give(mt__plan_search *cache, const mt__plan_search *s) {
    memset(cache, 0, sizeof *cache);
    cache_take(cache, s);
}

/* One thread's layouts (mt__plan_workers_run). */
static mt_status walk(mt__plan_worker *w) {
    return mt__plan_each_layout(&w->base, visit);
}

/* The threads of a search of r: the request's, or the library's (the
 * cores), at most MT__PLAN_MAX_WORKERS. */
static int n_threads(const mt_plan_request *r) {
    int n = r->threads > 0 ? r->threads : mt_get_num_threads();
    return n < 1 ? 1 : n > MT__PLAN_MAX_WORKERS ? MT__PLAN_MAX_WORKERS : n;
}

/* The search of the n threads w[] (started, each with its cache and its
 * report) into w[0]'s report. */
static mt_status search_threads(mt__plan_worker *w, int n) {
    const mt_plan_request *r = w[0].base.req;
    const int top = r->top > 0 ? r->top : 5;
    struct mt__plan_shared *sh = NULL;
    mt_status st = mt__plan_shared_new(n, top, &sh);
    for (int i = 0; i < n && st == MT_OK; i++) {
        w[i].base.shared = sh;
        w[i].base.worker = i;
        w[i].base.n_workers = n;
    }
    if (st == MT_OK) st = mt__plan_workers_run(w, n, walk);
    for (int i = 0; i < n; i++) w[i].base.rep->n_pruned = (int)w[i].base.n_pruned;
    for (int i = 1; i < n && st == MT_OK; i++) st = mt__plan_worker_merge(&w[0], &w[i], top);
    for (int i = 0; i < n; i++) w[i].base.shared = NULL;
    mt__plan_shared_free(sh);
    return st;
}

/* One search on `chips` chips into *rep, on n threads, with the programs
 * of caches[0 .. n) (search states holding only their caches: what earlier
 * counts built, which depends on the layout and the request, not on the
 * chips), which each keeps there with the ones it builds. */
static mt_status search_chips(const mt_plan_request *r, int chips, mt_plan_report *rep,
                              mt__plan_search *caches, int n) {
    mt__plan_worker *w = calloc((size_t)n, sizeof *w);
    if (!w) return mt_fail(MT_ENOMEM, "out of memory for %d plan search threads", n);
    memset(rep, 0, sizeof *rep);
    mt_status st = MT_OK;
    int taken = 0;   /* the threads holding their caches */
    for (int i = 0; i < n && st == MT_OK; i++) {
        if ((st = start(&w[i].base, r, chips)) != MT_OK) break;
        cache_take(&w[i].base, &caches[i]);
        taken++;
        w[i].base.rep = i ? &w[i].rep : rep;
        w[i].base.rep->chips = chips;
    }
    mt__plan_search *s = &w[0].base;
    for (int f = 0; f < N_FAMILIES; f++) rep->families[f].name = FAMILY[f];
    if (st == MT_OK) st = mt__plan_model_facts(s);
    /* the model's own programs serve every count --min-chips tries */
    if (st == MT_OK && !s->n_pinned) s->n_pinned = s->n_cache, s->cache_bytes = 0;
    for (int i = 1; i < n && st == MT_OK; i++) {
        w[i].base.params = s->params;
        w[i].base.flops_per_token = s->flops_per_token;
    }
    rep->model_params = s->params;
    rep->flops_per_token = s->flops_per_token;
    if (st == MT_OK) st = search_threads(w, n);
    rep->n_programs = 0;
    for (int i = 0; i < taken; i++) {
        rep->n_programs += w[i].base.n_built;
        cache_give(&caches[i], &w[i].base);
    }
    for (int i = 1; i < n; i++) {
        mt__plan_refusals_free(&w[i].refusals);
        mt_plan_report_free(&w[i].rep);
    }
    if (st == MT_OK) st = mt__plan_refusals_report(&w[0].refusals, rep);
    mt__plan_refusals_free(&w[0].refusals);
    mt__plan_notes notes = w[0].notes;
    const bool s_moe = w[0].base.moe.moe_experts > 1;   /* the expert family's */
    free(w);
    if (st != MT_OK) {
        mt_plan_report_free(rep);
        return st;
    }
    if (!rep->n_best) why_none(rep, r, &notes);
    /* the families the chips allow, each with its line (one mesh given:
       none, the others were not laid out) */
    int k = 0;
    if (r->mesh) {
        rep->n_families = 0;
        return MT_OK;
    }
    for (int f = 0; f < N_FAMILIES; f++) {
        bool possible = f == 0 ? chips == 1 : f == 6 ? chips > 1 && s_moe : chips > 1;
        if (!possible) continue;
        mt_plan_family fam = rep->families[f];
        family_line(&fam, rep->n_best ? &rep->best[0] : NULL, notes.example[f]);
        rep->families[k++] = fam;
    }
    rep->n_families = k;
    return MT_OK;
}

/* Chip counts to try for min_chips: 1 .. max, with prime factors 2, 3, 5
 * and 7 only (the sizes meshes come in). */
static bool smooth(int n) {
    for (int p = 2; p <= 7; p++)
        while (n % p == 0) n /= p;
    return n == 1;
}

/* The fewest chips on which a layout fits into *out, from 1 up to the
 * request's chips, the system's devices, or the count past which no
 * replica gets a sequence (sequences x tensor x pipe: on more chips every
 * layout's data x fsdp outnumbers the sequences, and their power-of-two
 * fallbacks are smaller counts, tried already). Nothing fits: *out is the
 * last count's report, with why_none saying why. */
static mt_status search_min_chips(const mt_plan_request *req, mt_plan_report *out,
                                  mt__plan_search *caches, int n) {
    if (req->mesh)
        return mt_fail(MT_EINVAL, "plan: --min-chips searches the chip count; leave out "
                       "--mesh");
    const int most = system_chips(req->hw);
    if (req->chips > most) {   /* start's message */
        mt__plan_search probe;
        return start(&probe, req, req->chips);
    }
    int max = req->chips > 0 ? req->chips : most;
    const char *bound = req->chips > 0 ? "--chips" : "the hardware's devices";
    /* the memory bound: no count below the model states' bytes over a
       chip's memory fits: 16 bytes a parameter (meshtrain's fp32 weights,
       gradients and AdamW; the ZeRO paper's 2 + 2 + 12), the book's 10,
       Megatron's 18 (its states summed over the chips, however split);
       thread devices share one host's memory, so on them no count fits
       when the host cannot hold the states */
    const double per = req->memory == MT_PLAN_MEMORY_BOOK       ? 10
                       : req->memory == MT_PLAN_MEMORY_MEGATRON ? 18
                                                                : 16;
    mt_status st = MT_OK;
    bool searched = false;
    for (int c = 1; c <= max; c++) {
        if (!smooth(c)) continue;
        if (searched) mt_plan_report_free(out);
        st = search_chips(req, c, out, caches, n);
        if (st != MT_OK) return st;
        searched = true;
        if (out->n_feasible > 0) return MT_OK;
        if (c == 1) {
            /* the replicas' bound, once the model's sizes are known */
            mt_model_shape shape;
            if ((st = mt_model_shape_of(&req->model, &shape)) != MT_OK) return st;
            int heads = shape.heads, layers = shape.layers;
            double seqs = req->batch_tokens / req->seq;
            double useful = seqs * (heads < MT__PLAN_MAX_TENSOR ? heads : MT__PLAN_MAX_TENSOR) *
                            layers;
            if (useful >= 1 && useful < max) {
                max = (int)useful;
                bound = "sequences x tensor x pipe";
            }
        }
        const double states = out->model_params * per, hbm = req->hw->hbm_bytes;
        if (is_threads_host(req->hw) && states > hbm) {
            snprintf(out->why_none, sizeof out->why_none, "no count of thread devices fits: "
                     "the model states alone (%.4g parameters x %.0f bytes = %.3g GiB) exceed "
                     "the host's %.3g GiB, which its devices share", out->model_params, per,
                     states / MT__GIB, hbm / MT__GIB);
            return MT_OK;
        }
        const double least = ceil(states / hbm);
        if (least > max) {
            snprintf(out->why_none, sizeof out->why_none, "no count of chips up to %d (%s) "
                     "fits: the model states alone (%.4g parameters x %.0f bytes = %.3g GiB) "
                     "need %.0f chips of %.3g GiB", max, bound, out->model_params, per,
                     states / MT__GIB, least, hbm / MT__GIB);
            return MT_OK;
        }
        if (least - 1 > c) c = (int)least - 1;
    }
    if (searched && out->n_feasible == 0) {
        char last[sizeof out->why_none];
        snprintf(last, sizeof last, "%s", out->why_none);
        snprintf(out->why_none, sizeof out->why_none, "no count of chips up to %d (%s) fits; "
                 "the last tried: %.240s", max, bound, last);
    }
    return MT_OK;
}

mt_status mt_plan_search(const mt_plan_request *req, mt_plan_report *out) {
    memset(out, 0, sizeof *out);
    if (!req) return mt_fail(MT_EINVAL, "plan: the request is NULL");
    if (!req->hw) return mt_fail(MT_EINVAL, "plan: no hardware description; give --hardware NAME");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* each thread's programs, kept across the counts --min-chips tries */
    mt__plan_search caches[MT__PLAN_MAX_WORKERS];
    memset(caches, 0, sizeof caches);
    const int n = n_threads(req);
    mt_status st = req->min_chips ? search_min_chips(req, out, caches, n)
                                  : search_chips(req, req->chips, out, caches, n);
    for (int i = 0; i < n; i++) mt__plan_cache_free(&caches[i]);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    out->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return st;
}

void mt_plan_report_free(mt_plan_report *r) {
    if (!r) return;
    free(r->best);
    free(r->infeasible);
    free(r->refusals);
    memset(r, 0, sizeof *r);
}

mt_status mt__plan_search_begin(mt__plan_search *s, const mt_plan_request *r, int chips) {
    mt_status st = start(s, r, chips);
    if (st == MT_OK && (st = mt__plan_model_facts(s)) != MT_OK) mt__plan_cache_free(s);
    return st;
}
