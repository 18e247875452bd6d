/*
 * step_phase.c — one phase of one program on two streams (step.h's model):
 * the compute stream runs the nodes in run order; the communication stream
 * runs the deferred collectives (gradient reductions, prefetched parameter
 * gathers) one after another, each issued when the compute reaches it and
 * queued behind the ones before it. A wait of the compute stream, from t0
 * to t1, is charged to the collectives the communication stream runs in
 * [t0, t1]: the stream has no gap after t0 (everything queued on it was
 * issued by t0), so the charges add up to the wait.
 */
#include "plan/step.h"

#include <stdlib.h>
#include <string.h>

/* The key of (kind, axes) in *keys, added when new; -1 when full. */
static int key_of(mt__plan_comm_keys *keys, mt__plan_coll kind, mt_axes axes) {
    for (int i = 0; i < keys->n; i++)
        if (keys->kind[i] == kind && keys->axes[i].n == axes.n &&
            !memcmp(keys->axes[i].axis, axes.axis, (size_t)axes.n))
            return i;
    if (keys->n == MT__PLAN_STEP_MAX_COMM) return -1;
    keys->kind[keys->n] = kind;
    keys->axes[keys->n] = axes;
    return keys->n++;
}

/* The communication stream: its collectives in start order. */
typedef struct {
    int     n, first;    /* first: the earliest that may still end after a wait's start */
    double *start, *end;
    int    *key;
    double  free_at;     /* when its last one ends */
} comm_stream;

/* Queues a collective of `t` seconds issued at `at`; returns its index. */
static int issue(comm_stream *cs, double at, double t, int key) {
    double s = cs->free_at > at ? cs->free_at : at;
    cs->start[cs->n] = s;
    cs->end[cs->n] = s + t;
    cs->key[cs->n] = key;
    cs->free_at = s + t;
    return cs->n++;
}

/* The compute stream at *t waits until `until`: the wait is charged to the
 * collectives running in it. */
static void wait_until(comm_stream *cs, double *t, double until, mt__plan_phase *out) {
    if (!(until > *t)) return;
    while (cs->first < cs->n && cs->end[cs->first] <= *t) cs->first++;
    for (int i = cs->first; i < cs->n && cs->start[i] < until; i++) {
        double a = cs->start[i] > *t ? cs->start[i] : *t;
        double b = cs->end[i] < until ? cs->end[i] : until;
        if (b > a) out->exposed[cs->key[i]] += b - a;
    }
    *t = until;
}

/* Node n's nccl-tests size: its comm_bytes, but a collective matmul's ring,
 * whose comm_bytes are the P-1 chunks it moves: the P of the all-gather or
 * reduce-scatter it replaces, so that a step's bytes by kind do not change
 * with collective matmul. Ring attention's permutes replace nothing: their
 * P-1 sends are their size, as a permute's. */
static int group_of(const mt__plan_map *map, mt_axes axes) {
    int group = 1;
    for (int i = 0; i < axes.n; i++) group *= map->axis[axes.axis[i]].size;
    return group;
}

static double size_of(const mt__plan_map *map, const mt__plan_node *n) {
    if (!n->overlapped || n->kind == MT__PC_PERMUTE) return n->comm_bytes;
    int group = group_of(map, n->axes);
    return group > 1 ? n->comm_bytes * group / (group - 1) : n->comm_bytes;
}

/* Node n's seconds as a collective: NCCL's, and for a list-form one
 * (rank_copies) one copy a rank of its group, each a kernel of the
 * hardware file's kernel_overhead (PyTorch's ProcessGroupNCCL copies each
 * rank's part out of, or into, its flat buffer: plan_impl.h's
 * mt__plan_program_list_collectives); the copies are small (a rank's part)
 * and run back to back, so each costs its launch and ramp. */
static double coll_seconds(const mt_hardware *hw, const mt__plan_map *map,
                           const mt__plan_group *grp, const mt__plan_node *n) {
    double c = mt__plan_group_seconds(grp, n->kind, n->comm_bytes);
    int group = group_of(map, n->axes);
    if (n->rank_copies && group > 1 && n->comm_bytes > 0) c += group * hw->kernel_overhead;
    return c;
}

double mt__plan_bucket_bytes(const mt_train_config *c) {
    return c->grad_reduce == MT_PRECISION_FP32 && c->bucket_mb > 0 ? c->bucket_mb * 1048576.0 : 0;
}

/* W's open gradient bucket: reductions of one collective key (kind and
 * axes) gathered into one collective (graph/buckets.c). */
typedef struct {
    int    key;     /* -1: none open */
    double bytes;
    double cap;     /* bucket_bytes, the phase's first bucket MT_FIRST_BUCKET_BYTES at most */
} bucket;

/* The groups of a phase's collectives by key (kind and axes), each made
 * when its key first comes: the collectives of one key, a few dozen in a
 * phase, share it (making it for each was 4 % of a search, perf). */
typedef struct {
    bool           made[MT__PLAN_STEP_MAX_COMM];
    mt__plan_group group[MT__PLAN_STEP_MAX_COMM];
} groups;

static const mt__plan_group *group_at(groups *gs, const mt__plan_map *map,
                                      const mt__plan_comm_keys *keys, int k) {
    if (!gs->made[k]) {
        mt__plan_group_make(map, keys->axes[k], &gs->group[k]);
        gs->made[k] = true;
    }
    return &gs->group[k];
}

/* The open bucket's collective, at the compute stream's *t: queued on the
 * communication stream (no window: buckets hold their gradients in the
 * bucket block, not on the wire, graph/plan.c), or blocking on a threads
 * host; then none is open, and the next one's cap is the whole size. */
static void bucket_start(bucket *b, const mt__plan_map *map, const mt__plan_comm_keys *keys,
                         groups *gs, double bucket_bytes, comm_stream *cs, double *t,
                         mt__plan_phase *out) {
    if (b->key < 0) return;
    const mt__plan_group *grp = group_at(gs, map, keys, b->key);
    double c = mt__plan_group_seconds(grp, keys->kind[b->key], b->bytes);
    out->coll[b->key] += c;
    if (grp->on_cores) {
        out->exposed[b->key] += c;
        *t += c;
    } else {
        issue(cs, *t, c, b->key);
    }
    b->key = -1;
    b->bytes = 0;
    b->cap = bucket_bytes;
}

mt_status mt__plan_phase_run(const mt_hardware *hw, const mt__plan_map *map, mt_precision precision,
                             const mt__plan_program *p, char phase, bool skip_whole,
                             double bucket_bytes, mt__plan_comm_keys *keys,
                             mt__plan_phase *out) {
    memset(out, 0, sizeof *out);
    int n_coll = 0, last_gather = -1;
    for (int i = 0; i < p->n_nodes; i++) {
        const mt__plan_node *n = &p->nodes[i];
        if (n->phase != phase || n->cls != MT__PN_COLLECTIVE) continue;
        n_coll++;
        if (n->param_gather) last_gather = i;
    }
    /* the stream's arrays on the stack up to STREAM_STACK collectives (a
       chunk's phase holds tens to hundreds; from the heap they were 1.3
       million mallocs of GPT-3's search, on a heap its cached programs
       fragment), else from the heap */
    enum { STREAM_STACK = 512 };
    double local_start[2 * STREAM_STACK];
    int local_key[STREAM_STACK];
    const bool heap = n_coll + 1 > STREAM_STACK;
    comm_stream cs = {0};
    cs.start = heap ? malloc(2 * ((size_t)n_coll + 1) * sizeof *cs.start) : local_start;
    cs.key = heap ? malloc(((size_t)n_coll + 1) * sizeof *cs.key) : local_key;
    if (!cs.start || !cs.key) {
        if (heap) free(cs.start), free(cs.key);
        return mt_fail(MT_ENOMEM, "out of memory for a phase of %d collectives", n_coll);
    }
    cs.end = cs.start + n_coll + 1;
    int window[MT__PLAN_DEFER_WINDOW], n_red = 0;   /* the reductions in flight, a ring */
    int pending = -1;     /* the last gather issued, not yet waited for */
    bucket bk = {.key = -1, .cap = bucket_bytes < MT_FIRST_BUCKET_BYTES ? bucket_bytes
                                                                         : MT_FIRST_BUCKET_BYTES};
    mt__plan_gemm_memo memo = {0};   /* the products' shapes met, on hw */
    groups gs;
    memset(gs.made, 0, sizeof gs.made);
    double due = 0;       /* the compute's next node waits until then (gathers) */
    double t = 0;
    mt_status st = MT_OK;
    for (int i = 0; i < p->n_nodes && st == MT_OK; i++) {
        const mt__plan_node *n = &p->nodes[i];
        if (n->phase != phase) continue;
        if (n->cls != MT__PN_COLLECTIVE) {
            wait_until(&cs, &t, due, out);
            bool fb = false;
            double c = mt__plan_node_seconds_memo(hw, n, mt__plan_dtype_of(precision), &memo,
                                                  &fb);
            *(fb ? &out->flop_bound : &out->memory_bound) += c;
            if (n->recompute) out->recompute += c;
            out->flops += n->flops;
            out->bytes += n->bytes;
            t += c;
            continue;
        }
        int k = key_of(keys, n->kind, n->axes);
        if (k < 0) {
            st = mt_fail(MT_EINVAL, "a step with more than %d distinct collectives (kind and "
                         "axes); raise MT__PLAN_STEP_MAX_COMM", MT__PLAN_STEP_MAX_COMM);
            break;
        }
        const mt__plan_group *grp = group_at(&gs, map, keys, k);
        double c = coll_seconds(hw, map, grp, n);
        /* copies on the devices' own cores (a threads host) run on the
           compute stream whatever the schedule defers: blocking, below */
        bool on_cores = grp->on_cores;
        if (skip_whole && (n->once || (n->grad_reduce && !n->overlapped &&
                                       n->kind == MT__PC_ALL_REDUCE))) {
            out->skipped[k] += c;
            continue;
        }
        out->size[k] += size_of(map, n);   /* bucketed or not, the same bytes */
        if (n->grad_reduce && !n->overlapped && phase == 'W' && n->comm_bytes < bucket_bytes &&
            (n->kind == MT__PC_ALL_REDUCE || n->kind == MT__PC_REDUCE_SCATTER)) {
            /* a bucket's: the open one starts first when this one does not
               fit it, and after when it is full */
            if (bk.key >= 0 && (bk.key != k || bk.bytes + n->comm_bytes > bk.cap))
                bucket_start(&bk, map, keys, &gs, bucket_bytes, &cs, &t, out);
            bk.key = k;
            bk.bytes += n->comm_bytes;
            if (bk.bytes >= bk.cap) bucket_start(&bk, map, keys, &gs, bucket_bytes, &cs, &t, out);
            continue;
        }
        if (n->grad_reduce && !n->overlapped && !on_cores) {
            out->coll[k] += c;
            /* the window: the oldest must be done before another is issued */
            if (n_red >= MT__PLAN_DEFER_WINDOW)
                wait_until(&cs, &t, cs.end[window[n_red % MT__PLAN_DEFER_WINDOW]], out);
            window[n_red++ % MT__PLAN_DEFER_WINDOW] = issue(&cs, t, c, k);
        } else if (n->param_gather && !n->overlapped && !on_cores) {
            out->coll[k] += c;
            /* one parameter ahead: the previous gather's readers come next */
            if (pending >= 0 && cs.end[pending] > due) due = cs.end[pending];
            pending = issue(&cs, t, c, k);
            if (i == last_gather) {
                if (cs.end[pending] > due) due = cs.end[pending];
                pending = -1;
            }
        } else if (n->overlapped) {
            /* a collective matmul, or ring attention (its flash kernel's
               loop costed: mt__plan_node_flops) */
            bool fb = false;
            double own = mt__plan_op_seconds(hw, MT__PN_MATMUL, mt__plan_dtype_of(precision),
                                             mt__plan_node_flops(hw, n), n->bytes, &fb);
            *(fb ? &out->flop_bound : &out->memory_bound) += own;
            out->flops += n->flops;
            out->bytes += n->bytes;
            out->coll[k] += c;
            /* its ring under its products, or after them on a threads host */
            double hidden = on_cores ? 0 : (c < own ? c : own);
            out->exposed[k] += c - hidden;
            t += own + c - hidden;
        } else {
            /* blocking: the compute stream waits for it (it reads
               activations, not the gather due next; or its copies take
               the device's own cores) */
            out->coll[k] += c;
            out->exposed[k] += c;
            t += c;
            /* one that also computes (the vocabulary-parallel loss's
               softmax; an expert product's grouped GEMM between its
               all-to-alls, a product): its own work on the roofline too; a
               pure move's bytes are the collective's */
            if (n->flops > 0) {
                bool fb = false;
                const mt__plan_node_class own_cls =
                    n->kind == MT__PC_ALL_TO_ALL ? MT__PN_MATMUL : MT__PN_VECTOR;
                double own = mt__plan_op_seconds(hw, own_cls, mt__plan_dtype_of(precision),
                                                 n->flops, n->bytes, &fb);
                *(fb ? &out->flop_bound : &out->memory_bound) += own;
                out->flops += n->flops;
                out->bytes += n->bytes;
                t += own;
            }
        }
    }
    /* the open bucket starts at the phase's end; nothing stays in flight
       when a phase returns (exec.c) */
    if (st == MT_OK) bucket_start(&bk, map, keys, &gs, bucket_bytes, &cs, &t, out);
    if (st == MT_OK) wait_until(&cs, &t, cs.free_at, out);
    out->seconds = t;
    if (heap) free(cs.start), free(cs.key);
    return st;
}
