/*
 * step.c — one training step of one layout (step.h's model): the phases of
 * every chunk's program (step_phase.c), put together as the trainer runs
 * them: microbatches one after another, or a pipeline's schedule through
 * the simulator; then the optimizer; then what binds and the MFU.
 */
#include "plan/step.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the accounting device spends over the step. */
typedef struct {
    double flop_bound, memory_bound;
    double coll[MT__PLAN_STEP_MAX_COMM], exposed[MT__PLAN_STEP_MAX_COMM];
    double ops[3], recompute;            /* flop_bound + memory_bound by phase (F, B, W) */
    double size[MT__PLAN_STEP_MAX_COMM]; /* bytes, by key: never scaled (tally_scale) */
} tally;

/* Phase q (0 F, 1 B, 2 W) of one program, `times` times. */
static void tally_add(tally *t, const mt__plan_phase *ph, int q, double times) {
    t->flop_bound += times * ph->flop_bound;
    t->memory_bound += times * ph->memory_bound;
    t->ops[q] += times * (ph->flop_bound + ph->memory_bound);
    t->recompute += times * ph->recompute;
    for (int k = 0; k < MT__PLAN_STEP_MAX_COMM; k++) {
        t->coll[k] += times * ph->coll[k];
        t->exposed[k] += times * ph->exposed[k];
        t->size[k] += times * ph->size[k];
    }
}

/* The bytes of the collectives a phase left out (`without` the whole
 * gradients' all-reduces, mt__plan_phase_run's skip) and ran once after
 * the flush: what the variant `with` them runs more. */
static void tally_skipped_bytes(tally *t, const mt__plan_phase *with,
                                const mt__plan_phase *without) {
    for (int k = 0; k < MT__PLAN_STEP_MAX_COMM; k++) t->size[k] += with->size[k] - without->size[k];
}

/* The whole gradients' all-reduces a phase left out (MT__PLAN_REDUCE_ONCE),
 * run after the flush: exposed whole. Returns their seconds. */
static double tally_flush(tally *t, const mt__plan_phase *ph) {
    double s = 0;
    for (int k = 0; k < MT__PLAN_STEP_MAX_COMM; k++) {
        t->coll[k] += ph->skipped[k];
        t->exposed[k] += ph->skipped[k];
        s += ph->skipped[k];
    }
    return s;
}

/* "all-reduce over data,tensor" */
static void comm_label(const mt_mesh *mesh, mt__plan_coll kind, mt_axes axes, char *buf,
                       size_t cap) {
    int n = snprintf(buf, cap, "%s over ", mt__plan_coll_name(kind));
    for (int i = 0; i < axes.n && n > 0 && (size_t)n < cap; i++)
        n += snprintf(buf + n, cap - (size_t)n, "%s%s", i ? "," : "",
                      mt_mesh_axis_name(mesh, axes.axis[i]));
}

static mt_status check_in(const mt__plan_step_in *in, mt_axes *pipe) {
    if (!in->hw || !in->mesh)
        return mt_fail(MT_EINVAL, "mt__plan_step needs the hardware and the mesh (got hw %s, "
                       "mesh %s)", in->hw ? "set" : "NULL", in->mesh ? "set" : "NULL");
    if (in->stages < 1 || in->chunks < 1 || in->microbatches < 1)
        return mt_fail(MT_EINVAL, "mt__plan_step: stages=%d, chunks=%d and microbatches=%d "
                       "must each be 1 or more", in->stages, in->chunks, in->microbatches);
    if (in->stages == 1 && in->chunks != 1)
        return mt_fail(MT_EINVAL, "mt__plan_step: chunks=%d a device without a pipeline "
                       "(stages=1); give chunks=1, or stages > 1", in->chunks);
    if (!(in->message_bytes >= 0) || !isfinite(in->message_bytes) ||
        !(in->optim_bytes >= 0) || !isfinite(in->optim_bytes))
        return mt_fail(MT_EINVAL, "mt__plan_step: message_bytes=%g and optim_bytes=%g must be "
                       "finite and >= 0 (optim_bytes 0: AdamW's %g)", in->message_bytes,
                       in->optim_bytes, MT__PLAN_ADAMW_BYTES);
    if (in->stages == 1) return MT_OK;
    int size = mt_mesh_axis_size(in->mesh, "pipe");
    if (size != in->stages)
        return mt_fail(MT_EINVAL, "mt__plan_step: stages=%d, but mesh '%s' has %s; the pipeline "
                       "runs over an axis named pipe of the stages' count", in->stages,
                       mt_mesh_spec(in->mesh), size ? "a pipe axis of another size" : "no pipe axis");
    return mt_mesh_axes(in->mesh, "pipe", pipe);
}

/* AdamW's bytes over a chunk's stored elements. */
static double optimizer_bytes(const mt__plan_step_in *in, double stored_elems) {
    double per = in->optim_bytes > 0 ? in->optim_bytes
                 : MT__PLAN_ADAMW_BYTES +
                       (in->precision == MT_PRECISION_BF16 ? MT__PLAN_BF16_CAST_BYTES : 0);
    return per * stored_elems;
}

/* AdamW over a chunk's stored elements: memory-bound. */
static double optimizer_seconds(const mt__plan_step_in *in, double stored_elems) {
    return mt__plan_op_seconds(in->hw, MT__PN_VECTOR, mt__plan_dtype_of(in->precision), 0,
                               optimizer_bytes(in, stored_elems), NULL);
}

/* The seconds chunk c's ops and optimizer cannot beat, m microbatches of
 * it, on the chip's peaks with no fraction: its FLOPs at the matrix peak
 * (the vector units' FLOPs included: no op outruns it) and its bytes at
 * the HBM bandwidth, each on its own (step.h's floor adds them per device). */
static void chunk_floor(const mt__plan_step_in *in, const mt__plan_chunk_time *c, double *flops_s,
                        double *bytes_s) {
    double fl = 0, by = 0;
    for (int q = 0; q < 3; q++) fl += c->phase[0][q].flops, by += c->phase[0][q].bytes;
    const double m = in->microbatches;
    *flops_s += m * fl / mt__plan_matmul_peak(in->hw, mt__plan_dtype_of(in->precision));
    *bytes_s += (m * by + optimizer_bytes(in, c->stored_elems)) / in->hw->hbm_bandwidth;
}

/* Every device's floor (chunk_floor over the chunks it holds, dev_of[k]
 * the device of chunk k; scratch: 2 x stages zeroed doubles), the most of
 * them, x `speed` (a time-shared host's devices at full speed: slots /
 * devices). */
static double step_floor(const mt__plan_step_in *in, const mt__plan_chunk_time *ch,
                         const int *dev_of, double speed, double *scratch) {
    const int p = in->stages;
    for (int k = 0; k < p * in->chunks; k++)
        chunk_floor(in, &ch[k], &scratch[dev_of[k]], &scratch[p + dev_of[k]]);
    double most = 0;
    for (int d = 0; d < 2 * p; d++)
        if (scratch[d] > most) most = scratch[d];
    return most * speed;
}

/* Scales what the tally spent (ops, collectives) by f. */
static void tally_scale(tally *t, double f) {
    t->flop_bound *= f;
    t->memory_bound *= f;
    for (int q = 0; q < 3; q++) t->ops[q] *= f;
    t->recompute *= f;
    for (int k = 0; k < MT__PLAN_STEP_MAX_COMM; k++) t->coll[k] *= f, t->exposed[k] *= f;
}

/* The pipeline: the schedule on the chunks' F, B, W; the accounting device
 * is the one that ends last (after its flush and its optimizer). With
 * `once`, whole gradients are all-reduced after the flush: the executor
 * leaves all but a chunk's last backward's (BW) or W's data-parallel
 * all-reduces to it (pipeline/executor.c), whatever the schedule. */
static mt_status pipeline(const mt__plan_step_in *in, mt_axes pipe,
                          const mt__plan_chunk_time *ch, bool once, tally *t,
                          mt__plan_step_result *out) {
    const int p = in->stages, S = p * in->chunks, m = in->microbatches;
    mt_schedule *sc = NULL;
    mt_status st = mt_schedule_make(in->schedule, p, m, in->chunks, &sc);
    if (st != MT_OK) return st;
    const int var = once ? 1 : 0;
    mt__plan_map map;
    st = mt__plan_map_make(in->hw, in->mesh, &map);
    if (st != MT_OK) {
        mt_schedule_free(sc);
        return st;
    }
    out->message = mt__plan_collective_seconds(&map, MT__PC_PERMUTE, pipe, in->message_bytes);
    mt_pipe_costs *cc = calloc((size_t)S, sizeof *cc);
    double *after = calloc((size_t)p, sizeof *after);
    int *dev_of = calloc((size_t)S, sizeof *dev_of);
    double *scratch = calloc(2 * (size_t)p, sizeof *scratch);
    if (!cc || !after || !dev_of || !scratch) {
        free(cc);
        free(after);
        free(dev_of);
        free(scratch);
        mt_schedule_free(sc);
        return mt_fail(MT_ENOMEM, "out of memory for %d chunks' costs", S);
    }
    for (int k = 0; k < S; k++) {
        const mt__plan_phase *q = ch[k].phase[var];
        /* a phase of nothing still takes a moment (the simulator wants f, b > 0) */
        cc[k] = (mt_pipe_costs){.f = q[0].seconds > 0 ? q[0].seconds : 1e-12,
                                .b = q[1].seconds > 0 ? q[1].seconds : 1e-12,
                                .w = q[2].seconds, .comm = out->message};
    }
    mt_pipe_sim sim = {0};
    const int devices = mt_mesh_size(in->mesh);
    const bool shared = in->host_slots > 0 && in->host_slots < devices;
    const double full = shared ? in->host_slots / devices : 1;
    if (st == MT_OK && shared) {
        /* time-shared cores: the costs at the static share are the work at
           full speed over slots / devices, and a device idle in the bubble
           leaves its share to the others (processor sharing) */
        for (int k = 0; k < S; k++) cc[k].f *= full, cc[k].b *= full, cc[k].w *= full;
        st = mt_schedule_simulate_shared(sc, cc, 0, devices / p, in->host_slots, &sim);
    } else if (st == MT_OK) {
        st = mt_schedule_simulate_chunks(sc, cc, 0, &sim);
    }
    if (st == MT_OK) {
        for (int k = 0; k < S; k++) {
            int d = dev_of[k] = mt_schedule_chunk_device(sc, k);
            after[d] += optimizer_seconds(in, ch[k].stored_elems) + ch[k].post_step;
            if (var == 1)
                for (int q = 0; q < 3; q++)
                    for (int c = 0; c < MT__PLAN_STEP_MAX_COMM; c++)
                        after[d] += ch[k].phase[1][q].skipped[c];
        }
        int dev = 0;
        for (int d = 1; d < p; d++)
            if (after[d] > after[dev] || (after[d] == after[dev] && sim.busy[d] > sim.busy[dev]))
                dev = d;
        out->device = dev;
        out->bubble = sim.makespan - sim.busy[dev];
        out->step = sim.makespan + after[dev];
        for (int d = 0; d < p; d++)
            if (sim.peak_activations[d] > out->peak_in_flight)
                out->peak_in_flight = sim.peak_activations[d];
        double ops = 0;   /* the device's phases' seconds at the static share */
        for (int k = 0; k < S; k++) {
            if (dev_of[k] != dev) continue;
            out->optimizer += optimizer_seconds(in, ch[k].stored_elems) + ch[k].post_step;
            for (int q = 0; q < 3; q++) {
                const mt__plan_phase *x = &ch[k].phase[var][q];
                tally_add(t, x, q, m);
                ops += m * x->seconds;
                out->phase[q] += x->seconds;
            }
        }
        /* shared cores: the device's ops took busy (as the sharing made
           them), each part of them in proportion, so that compute, exposed
           communication and bubble still add up to the makespan */
        if (shared && ops > 0) tally_scale(t, sim.busy[dev] / ops);
        for (int k = 0; k < S && var == 1; k++)
            for (int q = 0; q < 3 && dev_of[k] == dev; q++) {
                tally_flush(t, &ch[k].phase[1][q]);
                tally_skipped_bytes(t, &ch[k].phase[0][q], &ch[k].phase[1][q]);
            }
        /* the device's messages: each of its chunks sends its activations
           to the next chunk and its input's gradient to the one before,
           where that chunk is on another device (zb-v's and dualpipev's
           turn of the V stays on one), every microbatch */
        int sends = 0;
        for (int k = 0; k < S; k++) {
            if (dev_of[k] != dev) continue;
            sends += (k + 1 < S && dev_of[k + 1] != dev) + (k > 0 && dev_of[k - 1] != dev);
        }
        out->message_sent = (double)sends * m * in->message_bytes;
        out->floor = step_floor(in, ch, dev_of, full, scratch);
    }
    mt_pipe_sim_free(&sim);
    mt_schedule_free(sc);
    free(cc);
    free(after);
    free(dev_of);
    free(scratch);
    return st;
}

/* Without a pipe axis: m microbatches one after another, then the optimizer. */
static void accumulate(const mt__plan_step_in *in, const mt__plan_chunk_time *ch, bool once,
                       tally *t, mt__plan_step_result *out) {
    const int m = in->microbatches;
    const bool after = in->reduce == MT__PLAN_REDUCE_AFTER;
    const mt__plan_phase *with = ch->phase[0], *without = ch->phase[once ? 1 : 0];
    for (int q = 0; q < 3; q++) {
        /* MT__PLAN_REDUCE_ONCE: m - 1 without the whole gradients' all-reduces,
           the last with them (under its backward); MT__PLAN_REDUCE_AFTER: all m
           without, the reductions after the last, exposed */
        const mt__plan_phase *typical = once ? &without[q] : &with[q];
        const mt__plan_phase *last = after ? &without[q] : &with[q];
        tally_add(t, typical, q, m - 1);
        tally_add(t, last, q, 1);
        out->step += (m - 1) * typical->seconds + last->seconds;
        out->phase[q] = typical->seconds;
        if (after) {
            tally_skipped_bytes(t, &with[q], &without[q]);
            out->step += tally_flush(t, &without[q]);
        }
    }
    out->optimizer = optimizer_seconds(in, ch->stored_elems) + ch->post_step;
    out->step += out->optimizer;
    out->peak_in_flight = 1;
    const int dev0 = 0;
    double scratch[2] = {0, 0};
    out->floor = step_floor(in, ch, &dev0, 1, scratch);
}

/* What binds, and the line that says so. */
static void bind(const mt__plan_step_in *in, mt__plan_step_result *r) {
    double memory = r->memory_bound + r->optimizer, most = r->flop_bound;
    r->bound = MT__PLAN_BOUND_COMPUTE;
    if (memory > most) r->bound = MT__PLAN_BOUND_MEMORY, most = memory;
    if (r->comm_exposed > most) r->bound = MT__PLAN_BOUND_COMM, most = r->comm_exposed;
    if (r->bubble > most) r->bound = MT__PLAN_BOUND_BUBBLE, most = r->bubble;
    double pct = r->step > 0 ? 100 * most / r->step : 0;
    r->bound_comm = -1;
    switch (r->bound) {
    case MT__PLAN_BOUND_COMPUTE:
        snprintf(r->reason, sizeof r->reason, "compute: FLOP-bound ops take %.3g s of the %.3g s "
                 "step (%.0f%%)", most, r->step, pct);
        break;
    case MT__PLAN_BOUND_MEMORY:
        snprintf(r->reason, sizeof r->reason, "memory bandwidth: bandwidth-bound ops and the "
                 "optimizer take %.3g s of the %.3g s step (%.0f%%)", most, r->step, pct);
        break;
    case MT__PLAN_BOUND_COMM:
        for (int k = 0; k < r->n_comm; k++)
            if (r->bound_comm < 0 || r->comm[k].exposed > r->comm[r->bound_comm].exposed)
                r->bound_comm = k;
        snprintf(r->reason, sizeof r->reason, "communication: %s exposes %.3g s of the %.3g s "
                 "step (%.3g s exposed in all, %.0f%%)", r->comm[r->bound_comm].label,
                 r->comm[r->bound_comm].exposed, r->step, most, pct);
        break;
    case MT__PLAN_BOUND_BUBBLE:
        snprintf(r->reason, sizeof r->reason, "pipeline bubble: stage %d idles %.3g s of the "
                 "%.3g s step (%.0f%%; %s, %d stages, %d microbatches)", r->device, most, r->step,
                 pct, mt_schedule_kind_name(in->schedule), in->stages, in->microbatches);
        break;
    }
}

mt_status mt__plan_chunk_time_of(const mt_hardware *hw, const mt_mesh *mesh,
                                 mt_precision precision, const mt__plan_program *p,
                                 double bucket_bytes, mt__plan_comm_keys *keys,
                                 mt__plan_chunk_time *out) {
    memset(out, 0, sizeof *out);
    /* the mesh laid on the system once: every collective of the program */
    mt__plan_map map;
    mt_status st = mt__plan_map_make(hw, mesh, &map);
    for (int var = 0; var < 2 && st == MT_OK; var++)
        for (int q = 0; q < 3 && st == MT_OK; q++)
            st = mt__plan_phase_run(hw, &map, precision, p, "FBW"[q], var == 1, bucket_bytes,
                                    keys, &out->phase[var][q]);
    out->stored_elems = (double)(p->param_elems - p->pad_unstored_elems);
    out->flops_recompute = p->flops_recompute;
    if (st == MT_OK && p->ds_persist_params > 0) {
        double group = 1;
        for (int i = 0; i < p->ds_persist_axes.n; i++)
            group *= map.axis[p->ds_persist_axes.axis[i]].size;
        out->post_step = mt__plan_collective_seconds(&map, MT__PC_ALL_GATHER, p->ds_persist_axes,
                                                     p->ds_persist_bytes) +
                         (p->ds_persist_params + 1) * group * hw->kernel_overhead;
    }
    return st;
}

bool mt__plan_program_same_nodes(const mt__plan_program *a, const mt__plan_program *b) {
    if (a->n_nodes != b->n_nodes) return false;
    for (int i = 0; i < a->n_nodes; i++) {
        const mt__plan_node *x = &a->nodes[i], *y = &b->nodes[i];
        if (x->phase != y->phase || x->cls != y->cls || x->kind != y->kind ||
            x->overlapped != y->overlapped || x->grad_reduce != y->grad_reduce ||
            x->param_gather != y->param_gather || x->rank_copies != y->rank_copies ||
            x->attention_seq != y->attention_seq ||
            x->attention_keys != y->attention_keys ||
            memcmp(&x->axes, &y->axes, sizeof x->axes))
            return false;
    }
    return true;
}

mt_status mt__plan_chunk_time_at(const mt_hardware *hw, const mt_mesh *mesh,
                                 mt_precision precision, const mt__plan_program *p0, double b0,
                                 const mt__plan_program *p1, double b1, double b,
                                 double bucket_bytes, mt__plan_comm_keys *keys,
                                 mt__plan_chunk_time *out) {
    memset(out, 0, sizeof *out);
    if (!mt__plan_program_same_nodes(p0, p1) || !(b1 != b0) || !isfinite(b))
        return mt_fail(MT_EINVAL, "mt__plan_chunk_time_at: programs of %d and %d nodes at %g and "
                       "%g sequences, taken to %g: give two builds of one program (node for "
                       "node the same) at two batches", p0->n_nodes, p1->n_nodes, b0, b1, b);
    /* FLOPs and bytes are affine in the batch node by node; the times
       (latency floors, the streams' waits) are not: they come from the
       program at b, run */
    const double w = (b - b0) / (b1 - b0);
    mt__plan_program p = *p0;
    p.nodes = malloc(((size_t)p.n_nodes + 1) * sizeof *p.nodes);
    if (!p.nodes) return mt_fail(MT_ENOMEM, "out of memory for a program of %d nodes", p0->n_nodes);
    for (int i = 0; i < p.n_nodes; i++) {
        const mt__plan_node *x = &p0->nodes[i], *y = &p1->nodes[i];
        p.nodes[i] = *x;
        p.nodes[i].flops = x->flops + w * (y->flops - x->flops);
        p.nodes[i].bytes = x->bytes + w * (y->bytes - x->bytes);
        p.nodes[i].comm_bytes = x->comm_bytes + w * (y->comm_bytes - x->comm_bytes);
        /* a product's rows (M, or a weight gradient's K) and attention's
           scores grow with the sequences as its FLOPs do */
        p.nodes[i].gemm_m = x->gemm_m + w * (y->gemm_m - x->gemm_m);
        p.nodes[i].gemm_n = x->gemm_n + w * (y->gemm_n - x->gemm_n);
        p.nodes[i].gemm_k = x->gemm_k + w * (y->gemm_k - x->gemm_k);
        p.nodes[i].attention_scores =
            x->attention_scores + w * (y->attention_scores - x->attention_scores);
        p.nodes[i].attention_rows =
            x->attention_rows + w * (y->attention_rows - x->attention_rows);
    }
    p.flops_recompute = p0->flops_recompute + w * (p1->flops_recompute - p0->flops_recompute);
    mt_status st = mt__plan_chunk_time_of(hw, mesh, precision, &p, bucket_bytes, keys, out);
    free(p.nodes);
    return st;
}

mt_status mt__plan_step(const mt__plan_step_in *in, mt__plan_step_result *out) {
    memset(out, 0, sizeof *out);
    out->bound_comm = -1;
    mt_axes pipe = {0};
    mt_status st = check_in(in, &pipe);
    if (st != MT_OK) return st;
    if (!in->programs)
        return mt_fail(MT_EINVAL, "mt__plan_step needs the programs (got NULL)");
    const int S = in->stages * in->chunks;
    mt__plan_chunk_time *ch = calloc((size_t)S, sizeof *ch);
    if (!ch) return mt_fail(MT_ENOMEM, "out of memory for %d chunks' times", S);
    mt__plan_comm_keys keys = {0};
    for (int k = 0; k < S && st == MT_OK; k++)
        st = mt__plan_chunk_time_of(in->hw, in->mesh, in->precision, &in->programs[k],
                                    in->bucket_bytes, &keys, &ch[k]);
    if (st == MT_OK) st = mt__plan_step_chunks(in, ch, &keys, out);
    free(ch);
    return st;
}

double mt__plan_step_lower(const mt__plan_step_in *in, const mt__plan_chunk_time *const *ch,
                           const int *dev_of) {
    static const mt__plan_chunk_time none;   /* a chunk not known yet */
    const int p = in->stages, S = p * in->chunks;
    if (p < 2 || (in->host_slots > 0 && in->host_slots < mt_mesh_size(in->mesh))) return 0;
    /* pipeline()'s makespan is past every device's busy time, m times its
       chunks' F, B and W as the simulator costs them (f and b at least
       1e-12); its step adds the accounting device's after[], the most of
       them */
    const int var = in->reduce != MT__PLAN_REDUCE_EACH ? 1 : 0;
    double busy[MT_SCHEDULE_MAX_STAGES] = {0}, after[MT_SCHEDULE_MAX_STAGES] = {0};
    if (p > MT_SCHEDULE_MAX_STAGES) return 0;
    for (int k = 0; k < S; k++) {
        const int d = dev_of[k];
        if (d < 0 || d >= p) return 0;
        const mt__plan_chunk_time *t = ch[k] ? ch[k] : &none;
        const mt__plan_phase *q = t->phase[var];
        busy[d] += (q[0].seconds > 0 ? q[0].seconds : 1e-12) +
                   (q[1].seconds > 0 ? q[1].seconds : 1e-12) + q[2].seconds;
        after[d] += optimizer_seconds(in, t->stored_elems);
        if (var == 1)
            for (int x = 0; x < 3; x++)
                for (int c = 0; c < MT__PLAN_STEP_MAX_COMM; c++) after[d] += q[x].skipped[c];
    }
    double most_busy = 0, most_after = 0;
    for (int d = 0; d < p; d++) {
        if (busy[d] > most_busy) most_busy = busy[d];
        if (after[d] > most_after) most_after = after[d];
    }
    return in->microbatches * most_busy + most_after;
}

mt_status mt__plan_step_chunks(const mt__plan_step_in *in, const mt__plan_chunk_time *ch,
                               const mt__plan_comm_keys *keys, mt__plan_step_result *out) {
    memset(out, 0, sizeof *out);
    out->bound_comm = -1;
    mt_axes pipe = {0};
    mt_status st = check_in(in, &pipe);
    if (st != MT_OK) return st;
    if (!ch || !keys)
        return mt_fail(MT_EINVAL, "mt__plan_step_chunks needs the chunks' times and their keys");
    const int S = in->stages * in->chunks;
    const bool once = in->reduce != MT__PLAN_REDUCE_EACH;
    double flops = 0, recompute = 0, bytes = 0, optim = 0;
    for (int k = 0; k < S; k++) {
        for (int q = 0; q < 3; q++)
            flops += ch[k].phase[0][q].flops, bytes += ch[k].phase[0][q].bytes;
        recompute += ch[k].flops_recompute;
        optim += optimizer_bytes(in, ch[k].stored_elems);
    }
    tally t = {0};
    if (in->stages == 1) accumulate(in, ch, once, &t, out);
    else st = pipeline(in, pipe, ch, once, &t, out);
    if (st != MT_OK) {
        memset(out, 0, sizeof *out);
        out->bound_comm = -1;
        return st;
    }
    out->flop_bound = t.flop_bound;
    out->memory_bound = t.memory_bound;
    out->compute = t.flop_bound + t.memory_bound;
    for (int q = 0; q < 3; q++) out->ops[q] = t.ops[q];
    out->recompute = t.recompute;
    out->n_comm = keys->n;
    for (int k = 0; k < keys->n; k++) {
        mt__plan_step_comm *c = &out->comm[k];
        c->kind = keys->kind[k];
        c->axes = keys->axes[k];
        c->seconds = t.coll[k];
        c->exposed = t.exposed[k];
        c->size = t.size[k];
        const int n = mt_mesh_group_size(in->mesh, c->axes);
        const double ring = c->kind == MT__PC_PERMUTE ? 1
                            : c->kind == MT__PC_ALL_REDUCE ? 2.0 * (n - 1) / n
                                                           : (double)(n - 1) / n;
        c->sent = n > 0 ? ring * c->size : 0;
        comm_label(in->mesh, c->kind, c->axes, c->label, sizeof c->label);
        out->comm_exposed += c->exposed;
        out->comm_kind[c->kind] += c->exposed;
    }
    out->bubble_fraction = out->step > 0 ? out->bubble / out->step : 0;
    bind(in, out);
    /* the model FLOPs (6N + 6·L·H·Q·T: causal) and the FLOPs run, per device */
    const mt__plan_model *md = &in->model;
    double peak = mt__plan_matmul_peak(in->hw, mt__plan_dtype_of(in->precision));
    double devices = mt_mesh_size(in->mesh);
    out->flops_per_token = md->flops_per_token > 0
        ? md->flops_per_token
        : 6 * md->n_params + 6.0 * md->layers * md->heads * md->head_dim * md->seq;
    out->mfu = (md->n_params > 0 || md->flops_per_token > 0) && out->step > 0
                   ? md->tokens * out->flops_per_token / (out->step * devices * peak)
                   : NAN;
    /* PaLM's HFU: the same count plus the recomputation, at its share of
       the FLOPs the chunks run (the program's count of both), so HFU >= MFU
       by definition, equal without recomputation */
    out->flops_run = flops * in->microbatches;
    out->flops_recompute = recompute * in->microbatches;
    out->bytes_run = bytes * in->microbatches + optim;
    const double model_run = out->flops_run - out->flops_recompute;
    out->hfu = model_run > 0 ? out->mfu * out->flops_run / model_run : NAN;
    st = mt__plan_step_check(in, out);
    if (st != MT_OK) {
        memset(out, 0, sizeof *out);
        out->bound_comm = -1;
    }
    return st;
}
