/*
 * exec.c — running a compiled graph: forward, then B, then W.
 *
 * Calls cannot fail except the collective ones (ops/collective.c), which
 * record their failure in g->prog->run_status through the environment; a run
 * checks it after every node and stops at the first failure, returning it
 * with the node named before comm's message.
 *
 * Overlap. In W, a psum marked async (pvary's backward: the data-parallel
 * gradient all-reduce) does not run when reached: its reduction starts
 * asynchronously and the W nodes after it run meanwhile. When its result
 * overwrites the output (a zeroed parameter gradient's first contribution)
 * it reduces straight into the output; otherwise in place on its input
 * (pvary's output gradient, read by nothing else), and completing adds it
 * to the output. It completes (the wait, and that add) before the first
 * later node that touches its input or output (node->defer_until, from the
 * plan), when
 * MT_MAX_PENDING are in flight and another starts (the oldest first), and at
 * the end of W, in start order. Each gradient is its own request ("bucket");
 * small ones run at their wait on comm's latency path. In F and B, FSDP's
 * parameter gathers marked async (issued one parameter ahead: prefetched)
 * run the same way, straight into their outputs, completing before their
 * first reader. Nothing is left in flight when a phase returns, whether it
 * succeeds or fails. Each collective in flight is an event of the backend's
 * stream (ops/backend_impl.h; the host's holds its comm request), recorded
 * when it starts and waited for when it completes.
 *
 * With a device (g->ctx) the phases are regions on its trace track
 * ("forward", "backward B", "backward W"; no-ops unless the launch traces),
 * and so is the wait for the reductions still in flight when the W nodes are
 * done ("wait: gradient reductions"): the communication W did not hide.
 * Inside them every node is a span (its op's name; phase, layer, the op
 * table's cost and the output in its args), the start of a deferred
 * collective included; recording one is a push into the preallocated
 * timeline, two clock reads and two name copies.
 * Regions do not nest: one the caller opened is closed by the next phase.
 */
#include "backend/backend_impl.h"
#include "graph/graph_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const phase_name[3] = {"forward", "backward B", "backward W"};

/* Wraps a failure `s` (its message in mt_errmsg()) with the node. */
static mt_status wrap_node(mt_graph *g, const mt_node *n, mt_status s) {
    return mt_fail_wrap(s, "%s node %d (%s -> '%s')", phase_name[n->phase], (int)(n - g->nodes),
                        mt__op_def(n->call.op)->name, n->call.out->name);
}

/* Wraps a call's failure (g->prog->run_status) with the node. */
static mt_status node_failed(mt_graph *g, const mt_node *n) {
    mt_status s = g->prog->run_status;
    g->prog->run_status = MT_OK;
    return wrap_node(g, n, s);
}

/* Adds one call's time and cost to its op's row (profiling on). */
static void profile_add(mt_graph *g, const mt_op_call *c, double seconds, bool count) {
    double fl = 0, by = 0;
    mt__op_def(c->op)->cost(c, &fl, &by);
    mt_op_profile *p = &g->prog->profile[c->op];
    p->seconds += seconds;
    if (!count) return;
    p->calls++;
    p->flops += fl;
    p->bytes += by;
}

/* Ends a node's trace span (begun by mt_trace_op_begin) with its op, phase,
 * layer (its block, mt_graph_set_block), cost and output. */
static void trace_node(mt_graph *g, const mt_node *n, const mt_op_call *c, int span, bool cost) {
    if (span < 0) return;
    const mt_op_def *def = mt__op_def(c->op);
    double fl = 0, by = 0;
    if (cost) def->cost(c, &fl, &by);
    mt_trace_op_end(g->ctx, span, def->name, "FBW"[n->phase], n->block, fl, by, c->out->name);
}

/* Runs one node; with profiling on, adds its time to its op's row. While the
 * gradients are marked zero, a parameter gradient's first contribution
 * overwrites instead of adding, whichever output of the node receives it.
 * Returns the call's failure (a collective's), wrapped with the node. */
static mt_status run_node(mt_graph *g, const mt_node *n) {
    const mt_op_call *c = &n->call;
    mt_op_call first;
    /* held: a first reduction that took the local sums in writes (take_held) */
    if (n->param_first && mt__first_writes(g, n)) {
        first = *c;
        if (n->param_first & MT_FIRST_OUT) first.acc = false;
        if (n->param_first & MT_FIRST_OUT2) first.acc2 = false;
        c = &first;
    }
    /* the backend runs it (check_compiled refused a backend that runs nothing) */
    void (*run)(const mt_op_env *, const mt_op_call *) = g->prog->env.backend->run_op;
    mt_status cast;   /* a bf16-stored output's cast, after the call */
    if (g->prog->tracing) {   /* a span per node, on the device's track */
        int span = mt_trace_op_begin(g->ctx);
        double t0 = g->prog->profile ? mt_time_now() : 0;
        run(&g->prog->env, c);
        cast = mt__precision_cast_out(g, n);
        if (g->prog->profile) profile_add(g, c, mt_time_now() - t0, true);
        trace_node(g, n, c, span, true);
    } else if (!g->prog->profile) {
        run(&g->prog->env, c);
        cast = mt__precision_cast_out(g, n);
    } else {
        double t0 = mt_time_now();
        run(&g->prog->env, c);
        cast = mt__precision_cast_out(g, n);
        profile_add(g, c, mt_time_now() - t0, true);
    }
    if (g->prog->run_status != MT_OK) return node_failed(g, n);
    return cast == MT_OK ? MT_OK : wrap_node(g, n, cast);
}

/* ======================================================================== */
/* Deferred collectives (W's reductions, F's and B's prefetched gathers)     */
/* ======================================================================== */

/* Keeps the first failure of complete_oldest, with its message (the next
 * waits raise messages of their own). */
static void keep_first(mt_graph *g, const mt_node *n, mt_status s, mt_status *first, char *msg,
                       size_t cap) {
    if (s == MT_OK || *first != MT_OK) return;
    *first = wrap_node(g, n, s);
    snprintf(msg, cap, "%s", mt_errmsg());
}

/* Completes the oldest `k` reductions in flight, in start order: waits for
 * each, then out (+)= its reduced input, honouring acc and, while the
 * gradients are marked zero, the first contribution (as run_node); a
 * bucket's members each take their slice (buckets.c). After a failed wait
 * the rest are still waited for (they fail fast: the launch is failing), so
 * none stays in flight; the first failure is returned, wrapped with its
 * node (a bucket's: its last member). */
static mt_status complete_oldest(mt_graph *g, int k) {
    mt_status first = MT_OK;
    char msg[1024];
    for (int i = 0; i < k; i++) {
        const mt_inflight *f = &g->prog->inflight[i];
        const mt_node *n = &g->nodes[f->node];
        double t0 = g->prog->profile ? mt_time_now() : 0;
        mt_backend_event ev = f->ev;
        mt_status s = mt__backend_event_wait(g->prog->env.backend, g->prog->stream, &ev);
        if (s != MT_OK) {
            keep_first(g, n, s, &first, msg, sizeof msg);
            continue;
        }
        if (first != MT_OK) continue;
        const mt_op_call *c = &n->call;
        const mt_backend *be = g->prog->env.backend;
        if (f->bucket_n) {
            keep_first(g, n, mt__buckets_unpack(g, f->bucket_first, f->bucket_n), &first, msg,
                       sizeof msg);
            if (g->prog->profile) g->prog->profile[n->call.op].seconds += mt_time_now() - t0;
            continue;
        }
        if (c->op == MT_OP_ALL_GATHER) {   /* a prefetched gather landed in its output */
            if (g->prog->profile) profile_add(g, c, mt_time_now() - t0, false);
            continue;
        }
        if (f->direct) {   /* landed in its output */
            if (g->prog->profile) profile_add(g, c, mt_time_now() - t0, false);
            continue;
        }
        bool acc = mt__completion_accumulates(g, n);
        if (c->p.coll.bf16) {   /* reduced in bf16 in the input's bytes (second half: a scatter's) */
            const uint16_t *r = c->in[0]->data;   /* an address in the backend's memory */
            if (c->op == MT_OP_PSUM_SCATTER) r += mt_tensor_numel(c->in[0]);
            s = mt__backend_convert(be, &g->prog->env, MT_CONVERT_FROM_BF16, c->out->data, r,
                                    mt_tensor_numel(c->out), acc);
        } else {
            /* a psum reduced its input in place; a psum_scatter into its buffer */
            const float *result = n->defer_buf >= 0 ? g->prog->defer_block + n->defer_buf
                                                    : mt_tensor_f32(c->in[0]);
            s = mt__backend_scale(be, &g->prog->env, mt_tensor_f32(c->out), result, 1.0f,
                                  mt_tensor_numel(c->out), acc);
        }
        keep_first(g, n, s, &first, msg, sizeof msg);
        if (g->prog->profile) profile_add(g, c, mt_time_now() - t0, false);
    }
    memmove(g->prog->inflight, g->prog->inflight + k, (size_t)(g->prog->n_inflight - k) * sizeof *g->prog->inflight);
    g->prog->n_inflight -= k;
    if (first != MT_OK) return mt_fail(first, "%s", msg);
    return MT_OK;
}

/* Before the W node at position j: completes every reduction that must be
 * done by then, with the ones started before it (start order). */
static mt_status complete_due(mt_graph *g, int j) {
    int k = 0;
    for (int i = 0; i < g->prog->n_inflight; i++)
        if (g->prog->inflight[i].until <= j) k = i + 1;
    return k ? complete_oldest(g, k) : MT_OK;
}

/* The program's stream for the device it runs on now: made at the first
 * deferred collective, again when the graph was bound to another device
 * (each launch binds it anew). */
static mt_status stream_for_run(mt_graph *g) {
    mt_program *pr = g->prog;
    if (pr->stream && pr->stream_ctx == g->ctx) return MT_OK;
    mt__backend_stream_free(pr->env.backend, pr->stream);   /* nothing in flight: a phase
                                                               leaves none */
    pr->stream = NULL;
    mt_status s = mt__backend_stream_create(pr->env.backend, g->ctx, &pr->stream);
    if (s == MT_OK) pr->stream_ctx = g->ctx;
    return s;
}

/* Starts node n's reduction in place on its input and leaves it in flight.
 * When comm's queue is full of the caller's own requests, runs the node as
 * it comes instead. */
static mt_status start_reduction(mt_graph *g, const mt_node *n) {
    mt_status s;
    if (g->prog->n_inflight == MT_MAX_PENDING && (s = complete_oldest(g, 1)) != MT_OK) return s;
    if ((s = stream_for_run(g)) != MT_OK) return wrap_node(g, n, s);
    const mt_op_call *c = &n->call;
    mt_request req;
    double t0 = g->prog->profile ? mt_time_now() : 0;
    int span = g->prog->tracing ? mt_trace_op_begin(g->ctx) : -1;   /* the start's span */
    mt_inflight *f = &g->prog->inflight[g->prog->n_inflight];
    f->direct = false;
    f->bucket_n = 0;
    if (c->op == MT_OP_ALL_GATHER && c->p.coll.gather16)   /* its bf16 copy, as bf16 */
        s = mt_all_gather_start(g->ctx, c->p.coll.axes, c->p.coll.gather16, c->out->data,
                                (size_t)mt_tensor_numel(c->in[0]), MT_BF16, &req);
    else if (c->op == MT_OP_ALL_GATHER)   /* a prefetched parameter: straight into its output */
        s = mt_all_gather_start(g->ctx, c->p.coll.axes, mt_tensor_f32(c->in[0]),
                                mt_tensor_f32(c->out), (size_t)mt_tensor_numel(c->in[0]), MT_F32,
                                &req);
    else if (c->p.coll.bf16) {   /* cast in place, reduced there (collective.c) */
        uint16_t *buf = c->in[0]->data;
        size_t n_in = (size_t)mt_tensor_numel(c->in[0]);
        if ((s = mt__backend_convert(g->prog->env.backend, &g->prog->env,
                                     MT_CONVERT_TO_BF16_INPLACE, buf, buf, (int64_t)n_in,
                                     false)) != MT_OK)
            return wrap_node(g, n, s);
        if (c->op == MT_OP_PSUM_SCATTER)
            s = mt_psum_scatter_start(g->ctx, c->p.coll.axes, buf, buf + n_in,
                                      (size_t)mt_tensor_numel(c->out), MT_BF16, &req);
        else
            s = mt_all_reduce_start(g->ctx, c->p.coll.axes, buf, n_in, MT_BF16, MT_REDUCE_SUM,
                                    &req);
    } else if (!mt__completion_accumulates(g, n)) {
        /* the result overwrites the output: reduced straight into it */
        f->direct = true;
        if (c->op == MT_OP_PSUM_SCATTER)
            s = mt_psum_scatter_start(g->ctx, c->p.coll.axes, mt_tensor_f32(c->in[0]),
                                      mt_tensor_f32(c->out), (size_t)mt_tensor_numel(c->out),
                                      MT_F32, &req);
        else
            s = mt_all_reduce_into_start(g->ctx, c->p.coll.axes, mt_tensor_f32(c->in[0]),
                                         mt_tensor_f32(c->out), (size_t)mt_tensor_numel(c->in[0]),
                                         MT_F32, MT_REDUCE_SUM, &req);
    } else if (n->defer_buf >= 0)   /* psum_scatter: this device's block into its buffer */
        s = mt_psum_scatter_start(g->ctx, c->p.coll.axes, mt_tensor_f32(c->in[0]),
                                  g->prog->defer_block + n->defer_buf, (size_t)mt_tensor_numel(c->out),
                                  MT_F32, &req);
    else
        s = mt_all_reduce_start(g->ctx, c->p.coll.axes, mt_tensor_f32(c->in[0]),
                                (size_t)mt_tensor_numel(c->in[0]), MT_F32, MT_REDUCE_SUM, &req);
    /* run as it comes: its own span has the cost, this try none */
    trace_node(g, n, c, span, s == MT_OK);
    /* its run casts again: back to f32 (exact for what that cast reads, which
     * rounds bf16 values to themselves) */
    if (s == MT_ESTATE && c->p.coll.bf16 &&
        (s = mt__backend_convert(g->prog->env.backend, &g->prog->env,
                                 MT_CONVERT_FROM_BF16_INPLACE, c->in[0]->data, c->in[0]->data,
                                 mt_tensor_numel(c->in[0]), false)) != MT_OK)
        return wrap_node(g, n, s);
    if (s == MT_ESTATE) return run_node(g, n);
    /* the event of the stream the collective completes with */
    if (s == MT_OK) s = mt__backend_event_record(g->prog->env.backend, g->prog->stream, &f->ev, &req);
    if (s != MT_OK) return wrap_node(g, n, s);
    f->node = (int)(n - g->nodes);
    f->until = n->defer_until;
    g->prog->n_inflight++;
    if (g->prog->profile) profile_add(g, c, mt_time_now() - t0, true);
    return MT_OK;
}

/* Starts the open gradient bucket's collective (an all-reduce, or a
 * shard-major bucket's reduce-scatter) over its range of the bucket block
 * (buckets.c), in flight as any deferred collective; a full queue of the
 * caller's own requests (MT_ESTATE) reduces it at once. */
static mt_status start_bucket(mt_graph *g) {
    mt_program *pr = g->prog;
    mt_bucket_range b;
    mt_status s = mt__buckets_close(g, &b);
    if (s != MT_OK) return wrap_node(g, b.last, s);
    if (pr->n_inflight == MT_MAX_PENDING && (s = complete_oldest(g, 1)) != MT_OK) return s;
    if ((s = stream_for_run(g)) != MT_OK) return wrap_node(g, b.last, s);
    double t0 = pr->profile ? mt_time_now() : 0;
    int span = pr->tracing ? mt_trace_op_begin(g->ctx) : -1;
    mt_inflight *f = &pr->inflight[pr->n_inflight];
    *f = (mt_inflight){.node = (int)(b.last - g->nodes), .until = b.until,
                       .bucket_first = b.first, .bucket_n = b.n};
    mt_request req;
    const mt_axes axes = b.last->call.p.coll.axes;
    const bool scatter = b.op == MT_OP_PSUM_SCATTER;
    /* the bytes it sends: a reduce-scatter's whole input */
    const double bytes = (double)b.count * 4 * b.parts;
    s = scatter ? mt_psum_scatter_start(g->ctx, axes, b.buf, b.result, b.count, MT_F32, &req)
                : mt_all_reduce_start(g->ctx, axes, b.buf, b.count, MT_F32, MT_REDUCE_SUM, &req);
    if (span >= 0) {
        char what[48];
        snprintf(what, sizeof what, "bucket of %d gradients", b.n);
        mt_trace_op_end(g->ctx, span, scatter ? "psum_scatter" : "psum", "FBW"[b.last->phase],
                        b.last->block, 0, bytes, what);
    }
    if (s == MT_ESTATE) {   /* the queue is the caller's: reduce it here */
        s = scatter ? mt_psum_scatter(g->ctx, axes, b.buf, b.result, b.count, MT_F32)
                    : mt_all_reduce(g->ctx, axes, b.buf, b.count, MT_F32, MT_REDUCE_SUM);
        if (s == MT_OK) s = mt__buckets_unpack(g, b.first, b.n);
    } else {
        if (s == MT_OK) s = mt__backend_event_record(pr->env.backend, pr->stream, &f->ev, &req);
        if (s == MT_OK) pr->n_inflight++;
    }
    if (s != MT_OK) return wrap_node(g, b.last, s);
    if (pr->profile) {
        mt_op_profile *p = &pr->profile[b.op];
        p->calls++;   /* a collective issued: one a bucket */
        p->bytes += bytes;
        p->seconds += mt_time_now() - t0;
    }
    return MT_OK;
}

/* Bucketed node n reached: its gradient joins the open bucket, which starts
 * first when n does not fit it and after when it is full. */
static mt_status add_to_bucket(mt_graph *g, const mt_node *n) {
    mt_status s;
    if (!mt__buckets_fits(g, n) && (s = start_bucket(g)) != MT_OK) return s;
    if ((s = mt__buckets_pack(g, n)) != MT_OK) return wrap_node(g, n, s);
    return mt__buckets_full(g) ? start_bucket(g) : MT_OK;
}

/* Starts the open bucket when the node at position j needs one of its
 * gradients (j < 0: now, at the end of a phase). */
static mt_status flush_bucket(mt_graph *g, int j) {
    return mt__buckets_due(g, j) ? start_bucket(g) : MT_OK;
}

/* ======================================================================== */
/* Reductions left to a later backward (mt_graph_set_reduce_later)           */
/* ======================================================================== */

/* A local pass: the device's own gradient added where the reduced one would
 * go (the first contribution to zeroed gradients written), nothing sent. */
static mt_status add_locally(mt_graph *g, const mt_node *n) {
    const mt_op_call *c = &n->call;
    bool acc = c->acc && !((n->kept_out ? g->prog->kept_zero : g->prog->grads_zero) &&
                           (n->param_first & MT_FIRST_OUT));
    mt_status s = mt__backend_scale(g->prog->env.backend, &g->prog->env, mt_tensor_f32(c->out),
                                    mt_tensor_f32(c->in[0]), 1.0f, mt_tensor_numel(c->out), acc);
    return s == MT_OK ? MT_OK : wrap_node(g, n, s);
}

/* The pass after local ones: a gradient's first reduction takes in the local
 * sums its output holds (in += out), and then writes the output (as
 * completion_accumulates says while held): Σ over devices of every pass's
 * gradient, once. */
static mt_status take_held(mt_graph *g, const mt_node *n) {
    const mt_op_call *c = &n->call;
    if (!(n->param_first & MT_FIRST_OUT)) return MT_OK;
    mt_status s = mt__backend_scale(g->prog->env.backend, &g->prog->env, mt_tensor_f32(c->in[0]),
                                    mt_tensor_f32(c->out), 1.0f, mt_tensor_numel(c->in[0]), true);
    return s == MT_OK ? MT_OK : wrap_node(g, n, s);
}

mt_status mt_graph_set_reduce_later(mt_graph *g, bool later) {
    if (!g || !g->prog)
        return mt_fail(MT_ESTATE, "mt_graph_set_reduce_later: compile the graph first "
                       "(mt_graph_compile)");
    g->prog->reduce_later = later;
    return MT_OK;
}

/* ======================================================================== */
/* Runs                                                                      */
/* ======================================================================== */

static mt_status check_compiled(mt_graph *g, const char *what) {
    if (g->status != MT_OK) return mt_fail(g->status, "%s", g->errmsg);
    if (!g->prog) return mt_fail(MT_ESTATE, "%s: compile the graph first (mt_graph_compile)", what);
    if (!g->prog->env.backend->run_op)
        return mt_fail(MT_EUNSUPPORTED, "%s: the graph was compiled for the '%s' backend, which "
                       "holds no data and runs nothing (its plan is for explain and planners); "
                       "compile it on one that runs (mt_compile_opts.backend NULL: the CPU)",
                       what, g->prog->env.backend->name);
    g->prog->run_status = MT_OK;
    g->prog->env.status = &g->prog->run_status;
    return MT_OK;
}

/* Marks a phase on the device's trace track (no-op without a device). */
static void phase_begin(mt_graph *g, mt_phase ph) {
    if (!g->ctx) return;
    if (!g->trace_label[0]) {
        mt_trace_begin(g->ctx, phase_name[ph]);
        return;
    }
    char name[64];
    snprintf(name, sizeof name, "%s %s", phase_name[ph], g->trace_label);
    mt_trace_begin(g->ctx, name);
}

void mt_graph_set_trace_label(mt_graph *g, const char *label) {
    snprintf(g->trace_label, sizeof g->trace_label, "%s", label ? label : "");
}
static void phase_end(mt_graph *g) {
    if (g->ctx) mt_trace_end(g->ctx);
}

/* Runs the `count` nodes of a phase (order NULL: the forward nodes, in
 * index order). A deferrable node (plan.c: W's gradient reductions, F's and
 * B's prefetched parameter gathers) starts its collective and leaves it in
 * flight; each completes before the node that needs it, and whatever is
 * still in flight at the end of the phase completes there (in W on its own
 * trace region, "wait: gradient reductions": what the W compute did not
 * hide). Nothing stays in flight when this returns, whether it succeeds or
 * fails. */
static mt_status run_phase(mt_graph *g, mt_phase ph, const int *order, int count) {
    mt_status s = MT_OK;
    g->prog->tracing = mt_trace_on(g->ctx);
    phase_begin(g, ph);
    g->prog->n_inflight = 0;
    mt__buckets_reset(g);
    const bool defer = !g->prog->sync_reduce;
    for (int j = 0; j < count && s == MT_OK; j++) {
        const mt_node *n = &g->nodes[order ? order[j] : j];
        /* a bucket a node here needs starts first, then what is due completes */
        if ((s = flush_bucket(g, j)) != MT_OK || (s = complete_due(g, j)) != MT_OK) break;
        if (g->prog->local_pass && mt__later_reducible(n)) {
            s = add_locally(g, n);
            continue;
        }
        /* a kept gradient holds this pass's sum already, to be reduced by
         * the step's last pass; a kept copy is as new as the parameters
         * (mt_tensor.step_kept, grad_kept) */
        if ((g->prog->local_pass && mt__step_reduced(n)) ||
            (!g->prog->kept_stale && n->call.op == MT_OP_ALL_GATHER &&
             mt__storage_root(n->call.out)->step_kept))
            continue;
        mt__comm_count_node(g, n);
        if (g->prog->held && mt__later_reducible(n) && (s = take_held(g, n)) != MT_OK) break;
        if (defer && n->bucketed) s = add_to_bucket(g, n);
        else s = n->defer_until >= 0 && defer ? start_reduction(g, n) : run_node(g, n);
    }
    if (s == MT_OK) s = flush_bucket(g, -1);
    mt__buckets_reset(g);   /* after a failure, what was packed is dropped */
    if (s == MT_OK && g->prog->n_inflight) {
        if (ph == MT_PHASE_W) {
            phase_end(g);
            if (g->ctx) mt_trace_begin(g->ctx, "wait: gradient reductions");
        }
        s = complete_oldest(g, g->prog->n_inflight);
    } else if (g->prog->n_inflight) {   /* none may stay in flight; keep the first failure */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", mt_errmsg());
        (void)complete_oldest(g, g->prog->n_inflight);
        mt_fail(s, "%s", msg);
    }
    phase_end(g);
    return s;
}

mt_status mt_graph_forward(mt_graph *g) {
    mt_status s = check_compiled(g, "mt_graph_forward");
    if (s != MT_OK) return s;
    /* bf16 weight copies, when the parameters changed */
    if ((s = mt__precision_refresh(g)) != MT_OK) return s;
    if ((s = run_phase(g, MT_PHASE_F, NULL, g->n_forward)) != MT_OK) return s;
    g->prog->kept_stale = false;   /* the kept copies gathered (if any) */
    /* a caller-supplied seed: the "loss" is the stage's output, not a scalar */
    g->prog->loss_value = NAN;
    if (g->prog->opts.seed_from_caller) return MT_OK;
    return mt__backend_read_f32(g->prog->env.backend, g->loss->data, &g->prog->loss_value);
}

/* Whether the pass starting now is a local one: reductions left to a later
 * pass, onto gradients that hold no reduced sum. */
static bool local_now(const mt_graph *g) {
    return g->prog->reduce_later && (g->prog->grads_zero || g->prog->held);
}

mt_status mt_graph_backward_b(mt_graph *g) {
    mt_status s = check_compiled(g, "mt_graph_backward_b");
    if (s != MT_OK) return s;
    if (g->prog->opts.no_grad) return mt_fail(MT_ESTATE, "graph was compiled with no_grad; it has no backward");
    if (!g->prog->opts.seed_from_caller &&   /* d loss / d loss */
        (s = mt__backend_write_f32(g->prog->env.backend, g->loss->grad->data, 1.0f)) != MT_OK)
        return s;
    /* W beside B (mt_compile_opts.interleave_w): W's reductions run here,
     * so the pass is local or not from here (as at W's start otherwise) */
    if (g->prog->opts.interleave_w) g->prog->local_pass = local_now(g);
    return run_phase(g, MT_PHASE_B, g->prog->order_b, g->prog->n_b);
}

mt_status mt_graph_backward_w(mt_graph *g) {
    mt_status s = check_compiled(g, "mt_graph_backward_w");
    if (s != MT_OK) return s;
    if (g->prog->opts.no_grad) return mt_fail(MT_ESTATE, "graph was compiled with no_grad; it has no backward");
    /* a local pass only onto gradients that hold no reduced sum; read when
     * the W pass starts (its reductions are W's), so a split B and W may
     * have other passes between them */
    if (!g->prog->opts.interleave_w) g->prog->local_pass = local_now(g);
    if ((s = run_phase(g, MT_PHASE_W, g->prog->order_w, g->prog->n_w)) != MT_OK) return s;
    g->prog->grads_zero = false;
    g->prog->held = g->prog->local_pass;
    /* a pass that reduced the kept gradients leaves them to be written anew */
    g->prog->kept_zero = !g->prog->local_pass;
    g->prog->local_pass = false;
    return MT_OK;
}

mt_status mt_graph_backward(mt_graph *g) {
    mt_status s = mt_graph_backward_b(g);
    return s == MT_OK ? mt_graph_backward_w(g) : s;
}

void mt__graph_mark_grads_zero(mt_graph *g) {
    if (!g->prog) return;
    g->prog->grads_zero = g->prog->kept_zero = true;
    g->prog->held = false;
}

void mt_graph_zero_grad(mt_graph *g) {
    if (!g->prog) return;   /* no gradients before compile */
    g->prog->grads_zero = false;
    g->prog->kept_zero = true;   /* the kept ones are written anew, not cleared */
    g->prog->held = false;
    const mt_backend *be = g->prog->env.backend;
    for (int i = 0; i < g->n_params; i++) {
        mt_tensor *t = g->params[i];
        if (t->grad && t->grad->data)
            be->buffer_clear(t->grad->data, (size_t)mt_tensor_numel(t) * sizeof(float));
    }
}

float mt_graph_loss(const mt_graph *g) { return g->prog ? g->prog->loss_value : NAN; }

mt_status mt_graph_set_profiling(mt_graph *g, bool on) {
    if (!g->prog)
        return mt_fail(MT_ESTATE, "mt_graph_set_profiling: compile the graph first "
                       "(mt_graph_compile); the profile belongs to its program");
    free(g->prog->profile);
    g->prog->profile = NULL;
    if (on && !(g->prog->profile = calloc(MT_OP_COUNT, sizeof *g->prog->profile)))
        return mt_fail(MT_ENOMEM, "out of memory for the profile");
    return MT_OK;
}

mt_status mt_graph_profile_op(const mt_graph *g, const char *op, mt_op_totals *out) {
    if (!g || !op || !out) return mt_fail(MT_EINVAL, "mt_graph_profile_op: g, op or out is NULL");
    if (!g->prog || !g->prog->profile)
        return mt_fail(MT_ESTATE, "mt_graph_profile_op: profiling is off; turn it on with "
                       "mt_graph_set_profiling after mt_graph_compile");
    for (int k = 0; k < MT_OP_COUNT; k++)
        if (strcmp(mt__op_def((mt_op)k)->name, op) == 0) {
            const mt_op_profile *p = &g->prog->profile[k];
            *out = (mt_op_totals){.calls = p->calls, .seconds = p->seconds, .flops = p->flops,
                                  .bytes = p->bytes};
            return MT_OK;
        }
    return mt_fail(MT_EINVAL, "mt_graph_profile_op: '%s' is no op (mt_graph_print names "
                   "them: \"attention\", \"linear\", ...)", op);
}

void mt_graph_print_profile(const mt_graph *g, FILE *out) {
    if (!g->prog || !g->prog->profile) {
        fprintf(out, "profiling is off (mt_graph_set_profiling)\n");
        return;
    }
    double total = 0;
    for (int op = 0; op < MT_OP_COUNT; op++) total += g->prog->profile[op].seconds;
    fprintf(out, "%-16s %8s %10s %6s %10s %9s\n", "op", "calls", "ms", "%", "GFLOP/s", "GB/s");
    for (int op = 0; op < MT_OP_COUNT; op++) {
        const mt_op_profile *p = &g->prog->profile[op];
        if (!p->calls) continue;
        double s = p->seconds > 0 ? p->seconds : 1e-12;
        fprintf(out, "%-16s %8lld %10.3f %5.1f%% %10.2f %9.2f\n", mt__op_def((mt_op)op)->name,
                (long long)p->calls, p->seconds * 1e3, 100 * p->seconds / (total > 0 ? total : 1),
                p->flops / s * 1e-9, p->bytes / s * 1e-9);
    }
    fprintf(out, "%-16s %8s %10.3f\n", "total", "", total * 1e3);
}
