/*
 * plan.c — buffers, planned once per graph.
 *
 * Parameters, their gradients and constants live in one persistent block,
 * shared by every run. Inputs, the gradients of inputs that want one, the
 * loss and its seed gradient live in the run block: they outlive a run (the
 * caller fills or reads them) but belong to it, so each slot (slots.c) has
 * its own, as it has its own arena. Everything else (activations, saved
 * statistics, activation gradients) lives in one arena, placed by liveness over the run
 * order F, B, W: two tensors share bytes only if their lifetimes do not
 * overlap (arena.c: a heap simulated over that order, or greedy by size,
 * whichever arena is smaller). The arena stays within a few percent of the
 * peak of live bytes (tests/test_graph.c checks 15%).
 * After this nothing allocates while the graph runs.
 *
 * Every block comes from the graph's backend (g->prog->env.backend, backend.h):
 * on the shape-only backend each is NULL, and so is every tensor's data,
 * while the offsets and the byte counts are those of the CPU backend.
 *
 * A deferred reduction (a W psum marked async: exec.c starts it in place on
 * its input and completes it later) holds its input's buffer, and writes its
 * output, until it completes: before the first later W node that touches
 * either (the node's defer_until), or at the end of W. Both tensors are
 * kept alive until then.
 */
#include "backend/backend_impl.h"
#include "graph/graph_impl.h"

#include <stdlib.h>
#include <string.h>

#define MT_ALIGN 64

static size_t align_up(size_t n) { return (n + MT_ALIGN - 1) / MT_ALIGN * MT_ALIGN; }

/* The gradient of a leaf of `kind` (an input's is its caller's to read). */
static bool grad_of_kind(const mt_tensor *t, mt_tensor_kind kind) {
    return t->kind == MT_GRAD && t->grad_of && mt__storage_root(t->grad_of)->kind == kind;
}

/* The gradient of a gathered parameter kept for the step (mt_tensor.grad_kept). */
static bool kept_grad(const mt_tensor *t) {
    return t->kind == MT_GRAD && t->grad_of && mt__storage_root(t->grad_of)->grad_kept;
}

static bool is_persistent(const mt_graph *g, const mt_tensor *t) {
    if (t->kind == MT_PARAM || t->kind == MT_INPUT || t->kind == MT_CONST) return true;
    if (grad_of_kind(t, MT_PARAM) || grad_of_kind(t, MT_INPUT)) return true;
    /* a gathered parameter kept for the step, and its kept gradient: shared
     * by every slot, as the parameters are */
    if (t->step_kept || kept_grad(t)) return true;
    /* the loss (and its seed gradient, which a caller-supplied seed must
     * keep until W has read it) are read after the run: keep their storage,
     * which is the root when the loss is a view */
    if (g->loss && (t == mt__storage_root(g->loss) ||
                    (g->loss->grad && t == mt__storage_root(g->loss->grad))))
        return true;
    return t->read_after;
}

/* Persistent, but one per run (slot): in the run block, not the shared one. */
static bool in_run_block(const mt_graph *g, const mt_tensor *t) {
    return is_persistent(g, t) && t->kind != MT_PARAM && t->kind != MT_CONST &&
           !grad_of_kind(t, MT_PARAM) && !t->step_kept && !kept_grad(t);
}

static void touch(mt_tensor *t, int pos) {
    if (!t) return;
    t = mt__storage_root(t);
    if (t->data_of) t = t->data_of;   /* an alias (step 0): its target's bytes */
    if (t->first_use < 0 || pos < t->first_use) t->first_use = pos;
    if (pos > t->last_use) t->last_use = pos;
}

/* ======================================================================== */
/* Deferred reductions                                                       */
/* ======================================================================== */

/* A psum_scatter whose blocks are contiguous (nothing outside its dim):
 * comm's flat reduce-scatter can run it. */
static bool contiguous_scatter(const mt_op_call *c) {
    int64_t outer = 1;
    for (int d = 0; d < c->p.coll.dim; d++) outer *= c->in[0]->shape[d];
    return outer == 1;
}

/* Reductions in flight at once in W (see plan_deferred). Four hide the
 * all-reduces of data parallelism as well as sixteen did on the v50k GPT
 * (bench_dp) and bound the gradients held for them. */
#define MT_DEFER_WINDOW 4

static bool deferrable(const mt_node *n) {
    const mt_op_call *c = &n->call;
    /* the op first: p.coll is only the parameters of collectives */
    if (n->phase != MT_PHASE_W && c->op == MT_OP_ALL_GATHER && c->p.coll.async) {
        /* a prefetched parameter gather (FSDP) in F or B: comm's flat
         * all-gather concatenates whole blocks */
        int64_t outer = 1;
        for (int d = 0; d < c->p.coll.dim; d++) outer *= c->in[0]->shape[d];
        return outer == 1 && !c->acc;
    }
    if (n->phase != MT_PHASE_W || (c->op != MT_OP_PSUM && c->op != MT_OP_PSUM_SCATTER))
        return false;
    return c->p.coll.async && (c->op == MT_OP_PSUM || contiguous_scatter(c));
}

/* A phase's run order: its node indices (F: the first n_forward nodes). */
static const int *phase_order(const mt_graph *g, int ph, int *count, int *fwd_index) {
    *count = ph == 0 ? g->n_forward : ph == 1 ? g->prog->n_b : g->prog->n_w;
    *fwd_index = ph == 0;
    return ph == 1 ? g->prog->order_b : ph == 2 ? g->prog->order_w : NULL;
}

/* Whether t's storage is a parameter's gradient, or a kept one (persistent:
 * what is added into it stays from one backward to the next). */
static bool is_param_grad(const mt_graph *g, mt_tensor *t) {
    const mt_tensor *root = mt__storage_root(t);
    if (kept_grad(root)) return true;
    for (int i = 0; i < g->n_params; i++)
        if (g->params[i]->grad && mt__storage_root(g->params[i]->grad) == root) return true;
    return false;
}

/* Whether deferrable node n goes in a gradient bucket (buckets.c): an f32
 * psum of W smaller than a bucket, with buckets on. A gradient of a bucket
 * or more is a message of its own anyway, and reduces as without buckets:
 * straight into its parameter's gradient, not copied in and out. */
static bool bucketable(const mt_graph *g, const mt_node *n) {
    const mt_op_call *c = &n->call;
    size_t cap = g->prog->opts.bucket_bytes;
    /* a psum_scatter's shards are laid out shard-major in a bucket (its
     * packing gathers a shard over an inner dim) */
    return cap > 0 && n->phase == MT_PHASE_W &&
           (c->op == MT_OP_PSUM || c->op == MT_OP_PSUM_SCATTER) && !c->p.coll.bf16 &&
           c->in[0]->dtype == MT_F32 && c->out->dtype == MT_F32 &&
           (size_t)mt_tensor_numel(c->in[0]) * sizeof(float) < cap;
}

/* Sets every node's defer_until: -1, or for a deferrable node the first
 * later position of its phase whose node touches the storage of its input
 * or output (the phase's count if none). One walk of each phase's order
 * backwards, keeping for every storage root the next position that touches
 * it. */
static mt_status plan_deferred(mt_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        g->nodes[i].defer_until = -1;
        g->nodes[i].bucketed = false;
        g->nodes[i].into_grad = false;
    }
    int *next = malloc(((size_t)g->n_tensors + 1) * sizeof *next);
    if (!next) return mt_fail(MT_ENOMEM, "out of memory planning the gradient reductions");
    for (int ph = 0; ph < 3; ph++) {
        int count, fwd;
        const int *order = phase_order(g, ph, &count, &fwd);
        for (int i = 0; i < g->n_tensors; i++) next[i] = count;
        for (int j = count - 1; j >= 0; j--) {
            mt_node *n = &g->nodes[fwd ? j : order[j]];
            const mt_op_call *c = &n->call;
            /* a psum_scatter over an inner dim defers in a bucket alone, whose
             * packing gathers each device's shard */
            if (deferrable(n) || (n->phase == MT_PHASE_W && c->op == MT_OP_PSUM_SCATTER &&
                                  c->p.coll.async && bucketable(g, n))) {
                int a = next[mt__storage_root(c->in[0])->id], b = next[mt__storage_root(c->out)->id];
                /* a bucket copies the input out as it is reached: the output alone waits */
                n->bucketed = bucketable(g, n);
                n->into_grad = c->op == MT_OP_PSUM && is_param_grad(g, c->out);
                n->defer_until = n->bucketed || b < a ? b : a;
            }
            mt_tensor *touched[4 + MT_MAX_INPUTS] = {c->out, c->out2, c->aux[0], c->aux[1]};
            for (int k = 0; k < c->n_in; k++) touched[4 + k] = c->in[k];
            for (int k = 0; k < 4 + c->n_in; k++)
                if (touched[k]) next[mt__storage_root(touched[k])->id] = j;
        }
    }
    free(next);
    /* at most MT_DEFER_WINDOW reductions in flight: each completes before
     * the one that many later starts, so that the gradients waiting on the
     * wire (whole-size ones, for FSDP's reduce-scatters) stay a few layers'
     * worth, not the whole model's (W's reductions: in B's order too when
     * the W nodes run there, mt_compile_opts.interleave_w) */
    for (int ph = 1; ph < 3; ph++) {
        int count, fwd;
        const int *order = phase_order(g, ph, &count, &fwd);
        int window[MT_DEFER_WINDOW], n_seen = 0;
        for (int j = 0; j < count; j++) {
            mt_node *n = &g->nodes[order[j]];
            /* buckets hold their gradients in the bucket block, not on the wire */
            if (n->defer_until < 0 || n->phase != MT_PHASE_W || n->bucketed) continue;
            if (n_seen >= MT_DEFER_WINDOW) {
                mt_node *old = &g->nodes[order[window[n_seen % MT_DEFER_WINDOW]]];
                if (old->defer_until > j) old->defer_until = j;
            }
            window[n_seen++ % MT_DEFER_WINDOW] = j;
        }
    }
    /* a deferred psum_scatter reduces into a buffer of its own (its input
     * cannot hold the result: the blocks it sends are still being read) */
    int64_t floats = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        mt_node *n = &g->nodes[i];
        n->defer_buf = -1;
        if (n->defer_until < 0 || n->call.op != MT_OP_PSUM_SCATTER || n->bucketed) continue;
        n->defer_buf = floats;
        floats += (mt_tensor_numel(n->call.out) + 15) / 16 * 16;
    }
    const mt_backend *be = g->prog->env.backend;
    be->buffer_free(g->prog->defer_block);
    g->prog->defer_block = NULL;
    void *block = NULL;
    if (floats && be->buffer_alloc((size_t)floats * sizeof(float), &block) != MT_OK)
        return mt_fail(MT_ENOMEM, "out of memory for %lld floats of deferred reduce-scatters",
                       (long long)floats);
    g->prog->defer_block = block;
    return mt__buckets_prepare(g);
}

/* The arena (arena.c) over the run order's pos positions: sets every arena
 * tensor's offset; *arena_out is the arena's size, *unplanned_out the sum
 * without reuse. */
static mt_status place_arena(mt_graph *g, int pos, size_t *arena_out, size_t *unplanned_out) {
    mt_tensor **born = malloc(((size_t)g->n_tensors + 1) * sizeof *born);
    mt_tensor **dying = malloc(((size_t)g->n_tensors + 1) * sizeof *dying);
    if (!born || !dying) {
        free(born);
        free(dying);
        return mt_fail(MT_ENOMEM, "out of memory planning buffers");
    }
    int n_list = 0;
    size_t unplanned = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        mt_tensor *t = g->tensors[i];
        if (t->view_of || t->data_of || is_persistent(g, t) || t->first_use < 0) continue;
        t->in_arena = true;
        born[n_list] = dying[n_list] = t;
        n_list++;
        unplanned += align_up(mt__tensor_bytes(t));
    }
    mt_status st = mt__arena_place(born, dying, n_list, pos, MT_ALIGN, arena_out);
    free(born);
    free(dying);
    *unplanned_out = unplanned;
    return st;
}

/* The node at run-order position p (F, then B, then W). */
static mt_node *node_at(mt_graph *g, int p) {
    if (p < g->n_forward) return &g->nodes[p];
    p -= g->n_forward;
    return &g->nodes[p < g->prog->n_b ? g->prog->order_b[p] : g->prog->order_w[p - g->prog->n_b]];
}

/* Each node's live_bytes: the arena's bytes alive at its position (the
 * plan's lifetimes), a running sum of births and deaths kept in the nodes
 * themselves (no buffer: the planner compiles tens of thousands). */
static void count_live(mt_graph *g, int pos) {
    for (int p = 0; p < pos; p++) node_at(g, p)->live_bytes = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        const mt_tensor *t = g->tensors[i];
        if (!t->in_arena || t->first_use < 0) continue;
        node_at(g, t->first_use)->live_bytes += align_up(mt__tensor_bytes(t));
        if (t->last_use + 1 < pos)   /* unsigned: wraps, and the sum comes back */
            node_at(g, t->last_use + 1)->live_bytes -= align_up(mt__tensor_bytes(t));
    }
    for (int p = 1; p < pos; p++) node_at(g, p)->live_bytes += node_at(g, p - 1)->live_bytes;
}

/* Per storage root (by tensor id): how many nodes write it (an output, a
 * second output or an aux buffer) and the index of the last, in one pass. */
typedef struct {
    int n, last;
} writes;

static writes *count_writes(const mt_graph *g) {
    writes *w = calloc((size_t)g->n_tensors + 1, sizeof *w);
    if (!w) return NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        const mt_op_call *c = &g->nodes[i].call;
        mt_tensor *out[4] = {c->out, c->out2, c->aux[0], c->aux[1]};
        for (int k = 0; k < 4; k++) {
            if (!out[k]) continue;
            bool again = false;   /* two outputs of one node on one storage count once */
            for (int j = 0; j < k; j++)
                again |= out[j] && mt__storage_root(out[j]) == mt__storage_root(out[k]);
            if (again) continue;
            writes *r = &w[mt__storage_root(out[k])->id];
            r->n++;
            r->last = i;
        }
    }
    return w;
}

mt_status mt__plan_buffers(mt_graph *g) {
    mt_status st = plan_deferred(g);
    if (st != MT_OK) return st;

    /* 0. A forward pvary is the identity: its output reads its input's bytes
     *    instead of a copy of them, when nothing writes either after it: a
     *    parameter (data parallelism's marker on every replicated one), or
     *    a value written once before it (ZeRO-1's gathered parameter). The
     *    input's storage then lives as long as the output is read (touch). */
    writes *w = count_writes(g);
    if (!w) return mt_fail(MT_ENOMEM, "out of memory planning buffers");
    for (int i = 0; i < g->n_forward; i++) {
        const mt_op_call *c = &g->nodes[i].call;
        if (c->op != MT_OP_PVARY) continue;
        mt_tensor *in = mt__storage_root(c->in[0]);
        const writes *wi = &w[in->id], *wo = &w[mt__storage_root(c->out)->id];
        bool in_fixed = is_persistent(g, in) || (wi->n == 1 && wi->last < i);
        bool out_only = wo->n == 1 && wo->last == i;
        if (!c->acc && !c->out->view_of && !in->data_of && !is_persistent(g, c->out) &&
            in_fixed && out_only)
            c->out->data_of = in;
    }
    free(w);

    /* 1. Lifetimes, in run order: forward nodes, then B, then W. */
    int pos = 0;
    for (int i = 0; i < g->n_forward; i++, pos++) {
        const mt_op_call *c = &g->nodes[i].call;
        touch(c->out, pos); touch(c->out2, pos); touch(c->aux[0], pos); touch(c->aux[1], pos);
        touch(g->nodes[i].cast_out, pos);   /* bf16 storage, written as the node ends */
        for (int k = 0; k < c->n_in; k++) touch(c->in[k], pos);
    }
    for (int phase = 0; phase < 2; phase++) {
        int *order = phase == 0 ? g->prog->order_b : g->prog->order_w;
        int count = phase == 0 ? g->prog->n_b : g->prog->n_w;
        for (int j = 0; j < count; j++, pos++) {
            const mt_op_call *c = &g->nodes[order[j]].call;
            touch(c->out, pos); touch(c->out2, pos);
            touch(c->aux[0], pos); touch(c->aux[1], pos);   /* a recomputation's (remat.c) */
            touch(g->nodes[order[j]].cast_out, pos);
            for (int k = 0; k < c->n_in; k++) touch(c->in[k], pos);
        }
    }
    /* a deferred collective's input and output live until it completes: the
     * position of the node that needs them (which may reuse nothing of
     * theirs: births there precede deaths), or the last of its phase */
    for (int ph = 0, start = 0; ph < 3; ph++) {
        int count, fwd;
        const int *order = phase_order(g, ph, &count, &fwd);
        for (int j = 0; j < count; j++) {
            const mt_node *n = &g->nodes[fwd ? j : order[j]];
            if (n->defer_until < 0) continue;
            int until = start + (n->defer_until < count ? n->defer_until : count - 1);
            if (!n->bucketed) touch(n->call.in[0], until);   /* a bucket copied it out */
            touch(n->call.out, until);
        }
        start += count;
    }

    /* 2. Persistent block and run block. */
    size_t persistent = 0, run = 0;
    g->prog->stats.param_bytes = g->prog->stats.grad_bytes = 0;
    g->prog->stats.kept_param_bytes = g->prog->stats.kept_grad_bytes = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        mt_tensor *t = g->tensors[i];
        if (t->view_of || !is_persistent(g, t)) continue;
        size_t *top = in_run_block(g, t) ? &run : &persistent;
        t->offset = *top;
        *top += align_up(mt__tensor_bytes(t));
        /* the accounting behind the memory reports: what each kind holds */
        if (t->kind == MT_PARAM || t->step_kept) g->prog->stats.param_bytes += mt__tensor_bytes(t);
        else if ((t->kind == MT_GRAD && t->grad_of && t->grad_of->kind == MT_PARAM) ||
                 kept_grad(t))
            g->prog->stats.grad_bytes += mt__tensor_bytes(t);
        if (t->step_kept) g->prog->stats.kept_param_bytes += mt__tensor_bytes(t);
        if (kept_grad(t)) g->prog->stats.kept_grad_bytes += mt__tensor_bytes(t);
    }

    /* 3. Arena. With bf16 activations (precision.c), first the arena as it
     *    would be with them f32: their producers writing them directly (no
     *    f32 copies), 4 bytes an element, the same lifetimes. */
    size_t arena = 0, unplanned = 0, arena_f32 = 0, unused;
    bool bf16_acts = false;
    for (int i = 0; i < g->n_nodes; i++) bf16_acts |= g->nodes[i].cast_out != NULL;
    if (bf16_acts) {
        for (int i = 0; i < g->n_nodes; i++) {
            mt_node *n = &g->nodes[i];
            if (!n->cast_out) continue;
            n->cast_out->dtype = MT_F32;
            n->call.out->first_use = -n->call.out->first_use - 2;   /* hidden, restored below */
        }
        st = place_arena(g, pos, &arena_f32, &unused);
        for (int i = 0; i < g->n_nodes; i++) {
            mt_node *n = &g->nodes[i];
            if (!n->cast_out) continue;
            n->cast_out->dtype = MT_BF16;
            n->call.out->first_use = -n->call.out->first_use - 2;
        }
        if (st != MT_OK) return st;
    }
    if ((st = place_arena(g, pos, &arena, &unplanned)) != MT_OK) return st;
    /* the producers' f32 copies can cost more than the bf16 storage saves
     * (remat: the recomputed values live briefly, the copies beside them):
     * then keep every activation f32 */
    if (bf16_acts && arena >= arena_f32) {
        mt__precision_unstore_bf16(g);
        if ((st = place_arena(g, pos, &arena, &unplanned)) != MT_OK) return st;
    }
    g->prog->arena_bytes_f32 = bf16_acts ? arena_f32 : arena;
    count_live(g, pos);

    /* 4. Allocate (on the backend: NULL on the shape-only one) and point
     *    every tensor at its bytes. */
    const mt_backend *be = g->prog->env.backend;
    if (be->buffer_alloc(persistent, &g->prog->persistent) != MT_OK ||
        be->buffer_alloc(run, &g->prog->run_block) != MT_OK ||
        be->buffer_alloc(arena, &g->prog->arena) != MT_OK)
        return mt_fail(MT_ENOMEM, "cannot allocate %.1f MB of parameters, %.1f MB of inputs "
                       "and %.1f MB of activations on the %s backend; use a smaller model or "
                       "batch", persistent / 1e6, run / 1e6, arena / 1e6, be->name);
    be->buffer_clear(g->prog->persistent, persistent);
    be->buffer_clear(g->prog->run_block, run);
    g->prog->persistent_bytes = persistent;
    g->prog->run_bytes = run;
    g->prog->arena_bytes = arena;
    g->prog->arena_bytes_unplanned = unplanned;
    mt__plan_point(g);

    /* 5. Kernel scratch: the most any call asks for, per thread (attention's
     *    backward, T·T floats), or on the calling thread alone (the
     *    collective ops and collective matmuls), whichever is more. */
    size_t scratch = 0, caller = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const mt_op_call *c = &g->nodes[i].call;
        bool on_caller = false;
        size_t need = be->scratch ? be->scratch(c, &on_caller) : 0;
        size_t *most = on_caller ? &caller : &scratch;
        if (need > *most) *most = need;
    }
    scratch *= (size_t)mt_pool_size(g->prog->env.pool);
    if (caller > scratch) scratch = caller;
    if (scratch) {
        void *floats = NULL;
        if (be->buffer_alloc(scratch * sizeof(float), &floats) != MT_OK)
            return mt_fail(MT_ENOMEM, "out of memory for %zu floats of kernel scratch", scratch);
        g->prog->env.scratch = floats;
        g->prog->env.scratch_floats = floats ? scratch : 0;
    }
    g->prog->stats.scratch_bytes = scratch * sizeof(float);
    return MT_OK;
}

/* A tensor's bytes at `offset` of `block`; NULL where the backend gave
 * none (shape-only). */
static void *at(void *block, size_t offset) { return block ? (char *)block + offset : NULL; }

void mt__plan_point(mt_graph *g) {
    for (int i = 0; i < g->n_tensors; i++) {
        mt_tensor *t = g->tensors[i];
        if (t->view_of) continue;
        if (t->in_arena) t->data = at(g->prog->arena, t->offset);
        else if (in_run_block(g, t)) t->data = at(g->prog->run_block, t->offset);
        else if (is_persistent(g, t)) t->data = at(g->prog->persistent, t->offset);
    }
    for (int i = 0; i < g->n_tensors; i++) {
        mt_tensor *t = g->tensors[i];
        if (t->data_of) t->data = t->data_of->data;
    }
    for (int i = 0; i < g->n_tensors; i++) {
        mt_tensor *t = g->tensors[i];
        if (t->view_of) t->data = mt__storage_root(t)->data;
    }
}
