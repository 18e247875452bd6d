/*
 * evaluate_lerp.c — a layout's numbers taken between the programs built at
 * its points: bilinear counts, the arena along the batch, the seconds
 * along the blocks, and the collectives' keys of one program moved into a
 * layout's table (evaluate.c says which points and why).
 */
#include "plan/evaluate_lerp.h"

#include <math.h>
#include <string.h>

/* X(k, b) from X at k, b in {k0, k1} x {b0, b1} (k1 = k0 when there is one
 * block count, b1 = b0 likewise): bilinear. */
void mt__plan_lerp2(const double *x00, const double *x10, const double *x01, const double *x11,
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
bool mt__plan_arena_at_batch(const mt__plan_program *p0, int b0, const mt__plan_program *p1,
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
mt_status mt__plan_rekey(const mt__plan_comm_keys *from, const mt__plan_chunk_time *in,
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

/* X(k) from X at k0 and k1 blocks (the same batch), into *out: linear,
 * each repeated block adding the same seconds. Past k1 (a chunk of more
 * than 8 blocks) a collective's wait is extended by what a block adds to
 * it, never less than nothing nor more than the block adds to the
 * collective's own seconds: a wait that shrank or outgrew its collective
 * from k0 to k1 did so at an edge (gradients falling into buckets
 * otherwise), not in a block; a phase's seconds stay its ops' plus its
 * waits (step_phase.c). */
void mt__plan_lerp_blocks(const mt__plan_chunk_time *x0, const mt__plan_chunk_time *x1, int k0,
                          int k1, int k, mt__plan_chunk_time *out) {
    const size_t n = sizeof *out / sizeof(double);
    mt__plan_lerp2((const double *)x0, (const double *)x1, (const double *)x0, (const double *)x1, k0, k1,
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

