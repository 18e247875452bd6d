/*
 * buckets.c — gradient buckets (mt_compile_opts.bucket_bytes), as PyTorch
 * DDP's: the deferred f32 all-reduces of W (data parallelism's gradient
 * reductions) and reduce-scatters (ZeRO-2/3's, fsdp's) go a bucket at a
 * time instead of one message per tensor.
 *
 * This file keeps the buckets (which gradient goes where, when one is to
 * start, the copies in and out, each the backend's: buffer_copy and
 * buffer_scale); exec.c starts each as a deferred collective and completes
 * it. When W reaches a bucketed psum (plan.c marks
 * them: node->bucketed) its input, the device's gradient of the parameter,
 * is complete: it is copied into the open bucket, a contiguous range of the
 * bucket block. The bucket
 * starts (one mt_all_reduce_start over the range, in place) when
 *   - the next gradient would not fit: another group of axes, or its bytes
 *     would take the bucket past bucket_bytes (a gradient of bucket_bytes
 *     or more is not bucketed: it is a message of its own anyway, and goes
 *     as without buckets, straight into its parameter's gradient);
 *   - it is full (bucket_bytes or more; the first of a phase at 1 MiB, as
 *     DDP's first bucket, so that communication starts early in W);
 *   - a node about to run touches the output of one of its members (the
 *     member's defer_until: a tied weight's second contribution, or the end
 *     of the phase);
 * and completes, as any deferred collective (exec.c), before the earliest of
 * its members' defer_until, adding each member's slice to its output (or
 * writing it, for a zeroed gradient's first contribution). The block holds
 * every bucketed gradient's floats once (offsets grow through a phase), so
 * buckets in flight never share bytes and nothing allocates while W runs.
 *
 * A reduce-scatter bucket is laid out shard-major: a reduce-scatter of a
 * concatenation is not the concatenation of reduce-scatters, so part r of
 * the bucket holds device r's shard of every member (a shard over an inner
 * dim gathered row by row, as psum_scatter's output holds it). Packing
 * reserves each part a bucket's worth (seg); closing moves the parts side
 * by side, reduce-scatters them into the floats after, and each member's
 * place becomes its shard's there.
 *
 * Why copies and not gradients laid out in the bucket (DDP's
 * gradient_as_bucket_view): a parameter gradient's bytes belong to the
 * persistent block, where the optimizer and the checkpoints read them, and
 * the input of a psum is an arena tensor (pvary's output gradient) placed by
 * liveness; copying B·4 bytes a gradient costs a memory pass where the
 * transport makes several, and leaves the plan as it was. Sums of a
 * concatenation are the concatenation of sums, so the result is the
 * per-tensor one up to the transport's order of additions (exactly the same
 * on two devices).
 */
#include "backend/backend_impl.h"
#include "graph/graph_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int64_t pad16(int64_t floats) { return (floats + 15) / 16 * 16; }

/* The parts of bucketed node n's collective: 1 for a psum, the devices a
 * (contiguous: plan.c) psum_scatter splits its input over. */
static int parts_of(const mt_node *n) {
    const mt_op_call *c = &n->call;
    return c->op == MT_OP_PSUM ? 1 : (int)(mt_tensor_numel(c->in[0]) / mt_tensor_numel(c->out));
}

/* The floats a reduce-scatter bucket over `parts` devices reserves a part:
 * a bucket's worth, or all the shards of its kind (`shards`) if fewer. */
static int64_t seg_of(const mt_graph *g, int parts, int64_t shards) {
    double cap = (double)g->prog->opts.bucket_bytes / sizeof(float) / parts;
    int64_t seg = pad16((int64_t)ceil(cap));
    return shards < seg ? shards : seg;
}

/* Each bucketed scatter's bucket_seg, from the shards of every bucketed
 * scatter over as many parts: one pass a kind of part count (there are one
 * or two: the fsdp and the ZeRO axes), not one a node. */
static void set_segs(mt_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) g->nodes[i].bucket_seg = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        mt_node *nd = &g->nodes[i];
        int parts = parts_of(nd);
        if (!nd->bucketed || parts == 1 || nd->bucket_seg) continue;
        int64_t shards = 0;
        for (int k = i; k < g->n_nodes; k++)
            if (g->nodes[k].bucketed && parts_of(&g->nodes[k]) == parts)
                shards += pad16(mt_tensor_numel(g->nodes[k].call.out));
        int64_t seg = seg_of(g, parts, shards);
        for (int k = i; k < g->n_nodes; k++)
            if (g->nodes[k].bucketed && parts_of(&g->nodes[k]) == parts)
                g->nodes[k].bucket_seg = seg;
    }
}

mt_status mt__buckets_prepare(mt_graph *g) {
    mt_program *pr = g->prog;
    mt__buckets_free(g);
    set_segs(g);
    int n = 0;
    int64_t floats = 0, slack = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const mt_node *nd = &g->nodes[i];
        if (!nd->bucketed) continue;
        n++;
        int parts = parts_of(nd);
        /* 64-byte slices; a shard-major bucket's parts and result */
        floats += parts == 1 ? pad16(mt_tensor_numel(nd->call.in[0]))
                             : (int64_t)(parts + 1) * pad16(mt_tensor_numel(nd->call.out));
        /* the open reduce-scatter bucket reserves its parts' whole seg */
        int64_t res = (int64_t)parts * nd->bucket_seg;
        if (res > slack) slack = res;
    }
    if (!n) return MT_OK;
    floats += slack;
    pr->bucket_member = malloc((size_t)n * sizeof *pr->bucket_member);
    if (!pr->bucket_member)
        return mt_fail(MT_ENOMEM, "out of memory for %d gradients' bucket places", n);
    pr->cap_bucket = n;
    void *block = NULL;
    if (pr->env.backend->buffer_alloc((size_t)floats * sizeof(float), &block) != MT_OK)
        return mt_fail(MT_ENOMEM, "out of memory for the gradient buckets' %lld floats (the "
                       "bucketed gradients, once); set mt_compile_opts.bucket_bytes to 0 for "
                       "one reduction a gradient", (long long)floats);
    pr->env.backend->buffer_clear(block, (size_t)floats * sizeof(float));   /* the padding stays 0 */
    pr->bucket_block = block;
    pr->bucket_floats = floats;
    mt__buckets_reset(g);
    return MT_OK;
}

void mt__buckets_reset(mt_graph *g) {
    mt_program *pr = g->prog;
    pr->n_bucket_member = 0;
    pr->bucket_used = 0;
    pr->bucket_open = -1;
    pr->bucket_open_until = 0;
    pr->bucket_base = 0;
    pr->bucket_seg = 0;
    pr->bucket_parts = 1;
}

void mt__buckets_free(mt_graph *g) {
    mt_program *pr = g->prog;
    const mt_backend *be = pr->env.backend ? pr->env.backend : mt_backend_cpu();
    be->buffer_free(pr->bucket_block);
    pr->bucket_block = NULL;
    pr->bucket_floats = 0;
    free(pr->bucket_member);
    pr->bucket_member = NULL;
    pr->cap_bucket = 0;
}

/* The open bucket's floats so far (its members' slices, padded; of every
 * part: the collective's input). */
static int64_t open_floats(const mt_program *pr) {
    return (pr->bucket_used - pr->bucket_base) * pr->bucket_parts;
}

/* The open bucket's cap in bytes: the first of a phase at most 1 MiB, as
 * DDP's, so that the reductions start while most of W is still to run. */
static double cap_of(const mt_program *pr) {
    double cap = (double)pr->opts.bucket_bytes;
    bool first = (pr->bucket_open < 0 ? pr->bucket_used : pr->bucket_base) == 0;
    return first && cap > MT_FIRST_BUCKET_BYTES ? MT_FIRST_BUCKET_BYTES : cap;
}

bool mt__buckets_fits(const mt_graph *g, const mt_node *n) {
    const mt_program *pr = g->prog;
    if (pr->bucket_open < 0) return true;
    const mt_op_call *o = &g->nodes[pr->bucket_member[pr->bucket_open].node].call;
    const mt_axes *ax = &o->p.coll.axes, *nx = &n->call.p.coll.axes;
    bool same = o->op == n->call.op && parts_of(n) == pr->bucket_parts && ax->n == nx->n &&
                !memcmp(ax->axis, nx->axis, (size_t)ax->n);
    if (!same) return false;
    if (pr->bucket_parts == 1)
        return (double)(open_floats(pr) + mt_tensor_numel(n->call.in[0])) * 4 <= cap_of(pr);
    int64_t shard = pad16(mt_tensor_numel(n->call.out));
    return pr->bucket_used - pr->bucket_base + shard <= pr->bucket_seg &&
           (double)(open_floats(pr) + shard * pr->bucket_parts) * 4 <= cap_of(pr);
}

mt_status mt__buckets_pack(mt_graph *g, const mt_node *n) {
    mt_program *pr = g->prog;
    const int parts = parts_of(n);
    if (pr->bucket_open < 0) {
        pr->bucket_base = pr->bucket_used;
        pr->bucket_parts = parts;
        pr->bucket_seg = n->bucket_seg;
    }
    /* plan.c sized the block and the members for every bucketed node once a phase */
    mt_bucket_member *m = &pr->bucket_member[pr->n_bucket_member];
    m->node = (int)(n - g->nodes);
    m->off = pr->bucket_used;
    /* shard r (numel floats; the whole gradient for a psum) into part r: of
     * a split of dim d, chunk floats of each of the outer rows (the dims
     * before d), as psum_scatter's output holds them */
    const mt_op_call *c = &n->call;
    const int64_t numel = mt_tensor_numel(c->out);
    int64_t outer = 1;
    for (int d = 0; parts > 1 && d < c->p.coll.dim; d++) outer *= c->in[0]->shape[d];
    const int64_t chunk = numel / outer;
    const float *in = mt_tensor_f32(c->in[0]);   /* addresses in the backend's memory */
    const size_t row = (size_t)chunk * sizeof(float);
    for (int r = 0; r < parts; r++) {
        mt_status s = mt__backend_copy(pr->env.backend, pr->bucket_block + m->off +
                                       r * pr->bucket_seg, row, in + r * chunk, row * parts, row,
                                       (size_t)outer);
        if (s != MT_OK) return s;
    }
    if (pr->bucket_open < 0) {
        pr->bucket_open = pr->n_bucket_member;
        pr->bucket_open_until = n->defer_until;
    } else if (n->defer_until < pr->bucket_open_until) {
        pr->bucket_open_until = n->defer_until;
    }
    pr->n_bucket_member++;
    pr->bucket_used += pad16(numel);
    return MT_OK;
}

bool mt__buckets_full(const mt_graph *g) {
    const mt_program *pr = g->prog;
    return pr->bucket_open >= 0 && (double)open_floats(pr) * 4 >= cap_of(pr);
}

bool mt__buckets_due(const mt_graph *g, int j) {
    const mt_program *pr = g->prog;
    return pr->bucket_open >= 0 && (j < 0 || pr->bucket_open_until <= j);
}

mt_status mt__buckets_close(mt_graph *g, mt_bucket_range *r) {
    mt_program *pr = g->prog;
    r->first = pr->bucket_open;
    r->n = pr->n_bucket_member - r->first;
    r->until = pr->bucket_open_until;
    const mt_bucket_member *first = &pr->bucket_member[r->first];
    const mt_bucket_member *last = &pr->bucket_member[r->first + r->n - 1];
    r->last = &g->nodes[last->node];
    r->op = r->last->call.op;
    r->parts = pr->bucket_parts;
    r->buf = pr->bucket_block + pr->bucket_base;
    r->result = NULL;
    pr->bucket_open = -1;
    if (pr->bucket_parts == 1) {
        /* its members' slices, not the padding after the last */
        r->count = (size_t)(last->off + mt_tensor_numel(r->last->call.in[0]) - first->off);
        return MT_OK;
    }
    /* shard-major: the parts side by side (a reduce-scatter's blocks), the
     * result after them, each member's shard at its place in a part */
    const int64_t used = pr->bucket_used - pr->bucket_base;
    for (int p = 1; p < pr->bucket_parts; p++) {   /* one row: may overlap its source */
        size_t bytes = (size_t)used * sizeof(float);
        mt_status s = mt__backend_copy(pr->env.backend, r->buf + p * used, bytes,
                                       r->buf + p * pr->bucket_seg, bytes, bytes, 1);
        if (s != MT_OK) return s;
    }
    r->count = (size_t)used;
    r->result = r->buf + pr->bucket_parts * used;
    for (int i = 0; i < r->n; i++) pr->bucket_member[r->first + i].off += pr->bucket_parts * used;
    pr->bucket_used = pr->bucket_base + (pr->bucket_parts + 1) * used;
    return MT_OK;
}

mt_status mt__buckets_unpack(mt_graph *g, int first, int n) {
    mt_program *pr = g->prog;
    for (int i = 0; i < n; i++) {
        const mt_bucket_member *m = &pr->bucket_member[first + i];
        const mt_node *nd = &g->nodes[m->node];
        mt_status s = mt__backend_scale(pr->env.backend, &pr->env, mt_tensor_f32(nd->call.out),
                                        pr->bucket_block + m->off, 1.0f,
                                        mt_tensor_numel(nd->call.out),
                                        mt__completion_accumulates(g, nd));
        if (s != MT_OK) return s;
    }
    return MT_OK;
}
