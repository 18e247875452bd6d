/*
 * layouts.c — the layouts `meshtrain plan` considers: every factorisation
 * of the chips into data x fsdp x tensor x pipe (x context, as asked), and
 * for each the attention lowering over context, the ZeRO
 * stages, remat policies, sequence parallelism, collective matmul,
 * schedules, chunks a device and microbatch counts the request leaves
 * open, with the model's and the batch's divisibility checked before
 * anything is built (a layout that cannot divide is infeasible, with the
 * reason).
 */
#include "base/base_impl.h"
#include "plan/search_impl.h"
#include "train/strategy_fit.h"
#include "meshtrain/partition.h"   /* MT_CP_* */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most microbatches a pipeline is searched with (microbatch_counts). */
#define MAX_PIPE_MICROBATCHES 1024
/* The most sequences a replica's microbatch and the most microbatches: the
 * programs count them in ints (a batch of 2^50 tokens has more). */
#define MAX_REPLICA_SEQUENCES (1 << 30)

/* Why layout l cannot run the request's model and batch, into why (cap
 * bytes), or "" when it divides. Sizes only: memory comes later. The kv
 * heads need not divide over tensor: the trainer keeps them whole
 * (replicated) then, each device reading the ones its query heads read
 * (graph.h's mt_attention_gqa), and the program built says what that
 * costs; the search without a mesh leaves those layouts out. */
void mt__plan_divides(const mt__plan_search *s, const mt_plan_layout *l, char *why, size_t cap) {
    why[0] = '\0';
    const int dp = mt__plan_layout_replicas(l);
    const int E = s->moe.moe_experts, ep = l->expert > 1 ? l->expert : 1;
    const long long seqs = s->sequences;
    if (seqs % l->microbatches) {
        mt__text_format(why, cap, "%lld sequences a step do not split into %d microbatches", seqs,
                        l->microbatches);
    } else if (seqs / l->microbatches / dp > MAX_REPLICA_SEQUENCES) {
        mt__text_format(why, cap,
                        "a microbatch of %lld sequences a replica is more than the %d the "
                        "planner counts", seqs / l->microbatches / dp, MAX_REPLICA_SEQUENCES);
    } else if ((seqs / l->microbatches) % dp) {
        mt__text_format(why, cap, "a microbatch of %lld sequences does not split over data x "
                        "fsdp%s = %d (%s)", seqs / l->microbatches, ep > 1 ? " x expert" : "",
                        dp, seqs / l->microbatches < dp ? "fewer sequences than replicas"
                                                        : "indivisible");
    } else if (ep > 1 && E < 1) {
        mt__text_format(why, cap, "expert=%d: the model has no experts to split (a dense "
                        "model); drop the expert axis or give --moe-experts", ep);
    } else if (ep > 1 && E % ep) {
        mt__text_format(why, cap, "%d experts do not split over expert=%d (give an expert axis "
                        "that divides them)", E, ep);
    } else if (s->heads % l->tensor) {
        mt__text_format(why, cap,
                        "%d attention heads do not split over tensor=%d", s->heads, l->tensor);
    } else if (l->context > 1 && s->seq % (2 * l->context)) {
        mt__text_format(why, cap, "context=%d: T=%d does not cut into 2 x %d head-tail chunks (T a "
                        "multiple of %d)", l->context, s->seq, l->context, 2 * l->context);
    } else if (l->context > 1 && l->cp_attention == MT_CP_ULYSSES &&
               ((s->heads / l->tensor) % l->context ||
                (s->kv_heads % l->tensor ? s->kv_heads : s->kv_heads / l->tensor) % l->context)) {
        mt__text_format(why, cap,
                        "ulysses over context=%d: %d heads and %d kv heads a tensor rank do not "
                        "split over it", l->context, s->heads / l->tensor,
                        s->kv_heads % l->tensor ? s->kv_heads : s->kv_heads / l->tensor);
    } else if (s->kv_heads % l->tensor && !s->req->mesh) {
        /* the trainer runs it, but building every such program costs the
           405B search 7x the programs (43022 against 6202) and 4.5x the
           time: planned only when the mesh is given */
        mt__text_format(why, cap,
                        "%d kv heads do not split over tensor=%d: the search leaves out "
                        "layouts that replicate them; give --mesh to plan one", s->kv_heads,
                        l->tensor);
    } else if (mt__strategy_misfits(&(mt__strategy_sizes){
                   .data = l->data, .fsdp = l->fsdp, .tensor = l->tensor,
                   .T = s->seq / (l->context > 1 ? l->context : 1),
                   .zero = l->zero, .sp = l->sequence_parallel,
                   .cm = l->collective_matmul}) & MT__MISFIT_SP_T) {
        mt__text_format(why, cap,
                        "sequence parallelism: T=%d does not split over tensor=%d", s->seq,
                        l->tensor);
    } else if (l->pipe > 1) {
        /* the trainer cuts L blocks into S = p·v chunks as evenly as can
           be (pipe.c: the first L mod S one block more), one block at least */
        int v = mt__plan_layout_chunks(l);
        if ((long long)l->pipe * v > 2 * MT_SCHEDULE_MAX_STAGES)
            mt__text_format(why, cap,
                            "%d stages x %d chunks are more than the %d chunks the planner "
                            "holds", l->pipe, v, 2 * MT_SCHEDULE_MAX_STAGES);
        else if (s->layers < l->pipe * v)
            mt__text_format(why, cap,
                            "%d layers do not fill %d stages x %d chunks (a chunk holds a "
                            "layer at least)", s->layers, l->pipe, v);
        else if (l->microbatches < l->pipe)
            mt__text_format(why, cap, "%d microbatches for %d stages (a pipeline needs m >= p)",
                            l->microbatches, l->pipe);
        else if (l->schedule == MT_SCHEDULE_DUALPIPEV && l->microbatches < 2 * l->pipe)
            mt__text_format(why, cap, "dualpipev needs m >= 2p = %d, got %d", 2 * l->pipe,
                            l->microbatches);
        else if (l->schedule == MT_SCHEDULE_INTERLEAVED && l->microbatches % l->pipe)
            mt__text_format(why, cap, "interleaved needs m a multiple of p = %d, got %d", l->pipe,
                            l->microbatches);
    }
}

/* The divisors of n, ascending, into d (at most max); returns how many. */
static int divisors(int n, int *d, int max) {
    int k = 0;
    for (int i = 1; i <= n && k < max; i++)
        if (n % i == 0) d[k++] = i;
    return k;
}

static int by_value(const void *a, const void *b) {
    const long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* The microbatch counts searched for a mesh of p stages and dp = data x
 * fsdp replicas, ascending, into m (room for MAX_COUNTS); returns how
 * many. Three ladders: powers of two; on a pipeline whose p is not one, p
 * times them (interleaved needs m a multiple of p: pipe=7 runs 7, 14, 28
 * ...); and the counts that give each replica a power-of-two microbatch,
 * R/2^k for the R = sequences/dp sequences a replica takes a step
 * (Megatron-LM's m = B/(b·dp): 1536 sequences over 12 replicas run 128,
 * 64, 32 ... and over 16 run 96, 48, 24 ..., which no power of two
 * divides as finely). Each ladder holds 31 counts at most, so the search
 * stays bounded. A pipeline's counts stop at MAX_PIPE_MICROBATCHES: its
 * schedule is simulated microbatch by microbatch, and past that count the
 * bubble, (p-1)/m of the compute, is already small, while a batch of 16G
 * tokens would ask for 2^25 of them. */
#define MAX_COUNTS 96
static int microbatch_counts(long long sequences, int p, int dp, long long *m) {
    long long most = sequences < MAX_REPLICA_SEQUENCES ? sequences : MAX_REPLICA_SEQUENCES;
    if (p > 1 && most > MAX_PIPE_MICROBATCHES) most = MAX_PIPE_MICROBATCHES;
    int n = 0;
    for (long long a = 1; a <= most && n < MAX_COUNTS; a *= 2) m[n++] = a;
    if (p & (p - 1))
        for (long long b = p; b <= most && n < MAX_COUNTS; b *= 2) m[n++] = b;
    if (sequences % dp == 0)
        for (long long r = sequences / dp; r >= 1 && n < MAX_COUNTS; r /= 2) {
            if (r <= most) m[n++] = r;
            if (r % 2) break;
        }
    qsort(m, (size_t)n, sizeof *m, by_value);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!k || m[k - 1] != m[i]) m[k++] = m[i];
    return k;
}

/* The chunks a device holds in the layouts of p stages under schedule
 * `kind`, into v (room for MT__PLAN_MAX_CHUNKS); returns how many
 * (0: the kind does not run the request's). The request's, where the kind
 * runs it; else the kind's own, and interleaved's at 2 and at every v up
 * to MT__PLAN_MAX_CHUNKS whose p·v chunks divide the layers (an uneven cut
 * leaves the stages with the longer chunks the slowest, and v = 2 is
 * already searched at any cut). */
static int chunk_choices(const mt__plan_search *s, int p, int kind, int *v) {
    const int given = s->req->chunks;
    if (p <= 1) {
        v[0] = 1;
        return 1;
    }
    if (given > 0) {
        v[0] = given;
        return mt__plan_kind_runs_chunks(kind, given) ? 1 : 0;
    }
    int n = 0;
    v[n++] = mt__plan_schedule_chunks(kind);
    if (kind == MT_SCHEDULE_INTERLEAVED)
        for (int c = 3; c <= MT__PLAN_MAX_CHUNKS; c++)
            if (s->layers % (p * c) == 0) v[n++] = c;
    return n;
}

/* Calls fn on layout *l (its mesh, ZeRO stage, remat and sequence
 * parallelism set) under every schedule, chunk count and microbatch count
 * (counts[n_counts]) the request leaves open. */
static mt_status each_schedule(mt__plan_search *s, mt_plan_layout *l, const long long *counts,
                               int n_counts,
                               mt_status (*fn)(mt__plan_search *, const mt_plan_layout *)) {
    const mt_plan_request *r = s->req;
    const int p = l->pipe;
    for (int k = p > 1 ? 0 : -1; k < (p > 1 ? MT_SCHEDULE_N_KINDS : 0); k++) {
        if (p > 1 && r->schedule >= 0 && k != r->schedule) continue;
        /* zb-h2's memory-heavy warm-up is zb-h1's with more in flight:
           searched only when asked for */
        if (p > 1 && r->schedule < 0 && k == MT_SCHEDULE_ZB_H2) continue;
        int vs[MT__PLAN_MAX_CHUNKS];
        const int n_v = chunk_choices(s, p, k, vs);
        l->schedule = k;
        for (int im = 0; im < n_counts && n_v > 0; im++) {
            const long long m = counts[im];
            if (p > 1 && m < p && r->microbatches <= 0) continue;
            l->microbatches = (int)m;
            for (int iv = 0; iv < n_v; iv++) {
                l->chunks = vs[iv];
                mt_status st = fn(s, l);
                if (st != MT_OK) return st;
            }
            /* off a pipeline more microbatches only repeat the
               per-microbatch collectives: past the first count that fits,
               none is faster */
            if (p == 1 && s->last_feasible) break;
        }
    }
    return MT_OK;
}

/* Calls fn on every option of mesh (d, f, t, p, context c) the request
 * leaves open. Returns the first failure fn returns. */
static mt_status each_option(mt__plan_search *s, int d, int f, int t, int p, int c, int e,
                             mt_status (*fn)(mt__plan_search *, const mt_plan_layout *)) {
    const mt_plan_request *r = s->req;
    mt_plan_layout l = {.data = d, .fsdp = f, .tensor = t, .pipe = p, .context = c,
                        .expert = e};
    long long counts[MAX_COUNTS];
    int n_counts;
    if (r->microbatches > 0) {   /* the count given, whatever it is: it is checked */
        counts[0] = r->microbatches;
        n_counts = 1;
    } else {
        n_counts = microbatch_counts(s->sequences, p, mt__plan_layout_replicas(&l), counts);
    }
    for (int zero = 0; zero <= 3; zero++) {
        if (r->zero >= 0 && zero != r->zero) continue;
        for (int rm = 0; rm < 4; rm++) {
            if (r->remat >= 0 && rm != r->remat) continue;
            for (int sp = 0; sp <= 1; sp++) {
                if (r->sequence_parallel >= 0 && sp != r->sequence_parallel) continue;
                for (int cm = 0; cm <= 1; cm++) {
                    /* collective matmul as asked for, on the layouts it applies to */
                    if (sp && r->collective_matmul >= 0 && cm != r->collective_matmul) continue;
                    /* what the trainer refuses is left out (ZeRO with no data axis to
                       shard over only when the stage is searched: one asked for is
                       built, and refused in the trainer's words); sequence
                       parallelism's T is mt__plan_divides' to say */
                    const unsigned miss = mt__strategy_misfits(&(mt__strategy_sizes){
                        .data = d, .fsdp = f, .tensor = t, .T = s->seq, .zero = zero,
                        .sp = sp, .cm = cm});
                    if (miss & (MT__MISFIT_CM_NO_SP | MT__MISFIT_ZERO1_FSDP |
                                MT__MISFIT_SP_NO_TENSOR))
                        continue;
                    if ((miss & MT__MISFIT_ZERO_NO_DATA) && r->zero < 0) continue;
                    l.zero = zero;
                    l.remat = (mt_remat)rm;
                    l.sequence_parallel = sp;
                    l.collective_matmul = cm;
                    /* the attention lowerings over a context axis, as asked */
                    for (int cpa = 0; cpa < (c > 1 ? 3 : 1); cpa++) {
                        if (c > 1 && r->cp_attention >= 0 && cpa != r->cp_attention) continue;
                        l.cp_attention = cpa;
                        mt_status st = each_schedule(s, &l, counts, n_counts, fn);
                        if (st != MT_OK) return st;
                        mt__plan_cache_trim(s);
                    }
                }
            }
        }
    }
    return MT_OK;
}

/* A mixture of experts' meshes of exactly `chips` chips with an expert
 * axis: every divisor e > 1 of its E experts that divides the chips, with
 * every data x fsdp of the rest (docs/moe.md: the trainer runs the expert
 * axis with data and fsdp only, refusing tensor, pipe and context with
 * MoE, so those are not laid out with it). Dense models have none, so
 * their classes and order stay as they were. Each e is a class of its own
 * (one thread's). */
static mt_status each_expert_mesh(mt__plan_search *s, int chips, int c,
                                  mt_status (*fn)(mt__plan_search *, const mt_plan_layout *)) {
    const int E = s->moe.moe_experts;
    if (E < 2 || c > 1) return MT_OK;
    for (int e = 2; e <= E && e <= chips; e++) {
        if (E % e || chips % e || !mt__plan_claim(s)) continue;
        const int rest = chips / e;
        for (int d = 1; d <= rest; d++) {
            if (rest % d) continue;
            mt_status st = each_option(s, d, rest / d, 1, 1, 1, e, fn);
            if (st != MT_OK) return st;
        }
    }
    return MT_OK;
}

/* The meshes of exactly `chips` chips besides a context axis of c. */
static mt_status each_mesh_of(mt__plan_search *s, int chips, int c,
                              mt_status (*fn)(mt__plan_search *, const mt_plan_layout *)) {
    int dv[4096];
    int n = divisors(chips, dv, 4096);
    for (int it = 0; it < n; it++) {
        int t = dv[it];
        if (t > MT__PLAN_MAX_TENSOR) break;
        for (int ip = 0; ip < n; ip++) {
            int p = dv[ip];
            if (chips % (t * p) || p > s->layers) continue;
            if (!mt__plan_claim(s)) continue;   /* another thread's class */
            int rest = chips / (t * p);
            for (int id = 0; id < n; id++) {
                int d = dv[id];
                if (rest % d) continue;
                mt_status st = each_option(s, d, rest / d, t, p, c, 1, fn);
                if (st != MT_OK) return st;
            }
        }
    }
    return each_expert_mesh(s, chips, c, fn);
}

/* The meshes of exactly `chips` chips: without a context axis, and with
 * the context sizes the request asks for (every size > 1 dividing the chips
 * and T/2 under -1, its N alone), head-tail chunks needing T % 2c == 0. */
static mt_status each_mesh(mt__plan_search *s, int chips,
                           mt_status (*fn)(mt__plan_search *, const mt_plan_layout *)) {
    const int ask = s->req->context;
    mt_status st = ask == 0 || ask == 1 || ask == -1 ? each_mesh_of(s, chips, 1, fn) : MT_OK;
    for (int c = 2; st == MT_OK && c <= chips && (ask == -1 || ask > 1); c++) {
        if (chips % c || s->seq % (2 * c) || (ask > 1 && c != ask)) continue;
        st = each_mesh_of(s, chips / c, c, fn);
    }
    return st;
}

mt_status mt__plan_each_layout(mt__plan_search *s,
                               mt_status (*fn)(mt__plan_search *, const mt_plan_layout *)) {
    const mt_plan_request *r = s->req;
    if (r->mesh) {
        const int *a = s->mesh_axes;
        return mt__plan_claim(s) ? each_option(s, a[0], a[1], a[2], a[3], a[4], a[5], fn)
                                 : MT_OK;
    }
    mt_status st = each_mesh(s, s->chips, fn);
    /* a pod whose chip count factors badly (8960 = 2^8 x 5 x 7 TPU v5p) is
       also laid out on its largest power of two, leaving the rest idle:
       batches and heads come in powers of two; and while nothing fits, on
       half as many again, down to an eighth of the chips (a batch of fewer
       sequences than replicas fits on fewer chips, not on more) */
    int pow2 = 1;
    while (2 * pow2 <= s->chips) pow2 *= 2;
    if (st == MT_OK && pow2 != s->chips) st = each_mesh(s, pow2, fn);
    for (pow2 /= 2; st == MT_OK && pow2 >= 1 && 8 * pow2 >= s->chips && !mt__plan_any_feasible(s);
         pow2 /= 2)
        st = each_mesh(s, pow2, fn);
    return st;
}
