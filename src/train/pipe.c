/*
 * pipe.c — the trainer on a mesh with a pipe axis: pipeline parallelism.
 *
 * The model's L blocks are cut into S = p·v contiguous chunks (p the pipe
 * axis's size, v the chunks per device: 1, or 2 and more for the
 * interleaved and V-shaped schedules); the embedding goes with chunk 0, the
 * head and the loss with chunk S-1. Each device builds, for each chunk the
 * schedule gives it, the model's stage graph (mt_gpt_build_stage: the same
 * parameter names and initial values as the whole model), shards and
 * partitions it over the mesh's other axes like any program, and compiles
 * it; a chunk that is not the last takes its backward's seed from the next
 * chunk. The step's accum microbatches are the pipeline's microbatches:
 * the executor (pipeline/executor.c) runs the device's list of the
 * schedule, every loss scaled by 1/(the global batch), so gradients
 * accumulate to the one-device step's.
 *
 * With a context axis every stage runs on the device's head-tail share of
 * each sequence: the executor feeds each stage its share of the
 * microbatch (pipe_data.c; the document ids to every stage with doc_mask),
 * the first stage's position ids are its rows', and a stage's input is
 * declared split over context as the previous stage's output is.
 *
 * After the flush, before the optimizer:
 *   - the tied token embedding: chunk 0's copy (the lookup) and chunk
 *     S-1's (the head) each hold part of its gradient; their devices
 *     exchange the parts and both add them in the same order, so both
 *     copies take the same update and stay equal;
 *   - the gradient norm: every chunk's optimizer gives its part of Σ g²
 *     (the head's copy of the embedding left out), a psum over the pipe
 *     axis adds the devices', and every chunk clips by the one global norm.
 */
#include "graph/tensor_data.h"
#include "pipeline/executor_impl.h"
#include "train/pipe_data.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The trainer's pipeline state on one device. */
struct mt__train_pipe {
    mt_schedule    *sched;
    int             p, v, S, rank;  /* pipe size, chunks per device, chunks, this device's rank */
    const mt_pipe_op *ops;          /* this device's list */
    int             n_ops;
    int            *device_of;      /* (S) */
    mt__pipe_chunk  chunk[MT_PIPE_MAX_CHUNKS];
    mt_optim       *opt[MT_PIPE_MAX_CHUNKS];
    /* each chunk's data inputs (NULL: it has none of the kind): the tokens
     * on the first, the targets on the last, the document ids on every
     * chunk with doc_mask */
    mt_tensor      *in[MT_PIPE_MAX_CHUNKS], *target[MT_PIPE_MAX_CHUNKS], *docs[MT_PIPE_MAX_CHUNKS];
    mt__pipe_exec   x;
    mt__pipe_data   data;                    /* the step's global microbatches */
    /* buffers each step reuses: the tied embedding's gradient from the
     * other device (NULL: not needed here), the bubble's measurements */
    float          *tied_other;              /* (numel of the tied parameter), of be */
    const mt_backend *be;                    /* the chunks' graphs' backend */
    float          *meas;                    /* (2 + 3S): max span, max busy; (S,3) op times */
    mt_pipe_costs  *costs;                   /* (S) */
    /* each chunk's expert loads and router losses of the step, and of an
     * evaluation (moe_load.c); loads: the ones after_f adds to now; none
     * kept (no reads, no sums) where the model's shape has no experts */
    mt__moe_load    moe[MT_PIPE_MAX_CHUNKS], eval_moe[MT_PIPE_MAX_CHUNKS], *loads;
    bool            mixture;
};

/* The name of the parameter the run's model ties (its head and its
 * embedding), or NULL. */
static const char *tied_name(const mt_trainer *tr) {
    return tr->m->tied_param ? tr->m->tied_param(&tr->cfg) : NULL;
}

/* This device's copies of the tied parameter: chunk 0's and chunk S-1's
 * (NULL where it holds not that chunk, or the model ties nothing). */
static void tied_copies(const mt_trainer *tr, const mt__train_pipe *pp, mt_tensor **first,
                        mt_tensor **last) {
    *first = *last = NULL;
    const char *name = tied_name(tr);
    if (!name || pp->S < 2) return;
    for (int i = 0; i < pp->v; i++) {
        if (pp->chunk[i].chunk == 0) *first = mt_graph_find(pp->chunk[i].g, name);
        if (pp->chunk[i].chunk == pp->S - 1) *last = mt_graph_find(pp->chunk[i].g, name);
    }
}

/* Blocks [*layer0, *layer0 + *layers) of chunk k of S over L blocks: as
 * even as can be, the first L mod S chunks one block more (the last chunk
 * also carries the head). */
/* The blocks the model's pipeline cuts (its table's `blocks`). */
static int m_blocks(const mt_train_config *c) {
    return mt__train_model_of(c->model)->blocks(c);
}

static void split_layers(int L, int S, int k, int *layer0, int *layers) {
    int base = L / S, extra = L % S;
    *layer0 = k * base + (k < extra ? k : extra);
    *layers = base + (k < extra ? 1 : 0);
}

/* "zb-h1 over pipe=2, 8 microbatches; device 0: chunk 0 (embedding, blocks
 * 0-3); device 1: chunk 1 (blocks 4-7, head)", and the schedule's note. */
static void describe(const mt_train_config *c, const mt_schedule *s, char *buf, size_t n) {
    const int p = mt_schedule_stages(s), v = mt_schedule_chunks(s), S = p * v;
    size_t at = 0;
#define PUT(...) (at += (size_t)snprintf(buf + at, at < n ? n - at : 0, __VA_ARGS__))
    PUT("%s over pipe=%d, %d microbatches, %d chunk%s a device", c->schedule, p, c->accum, v,
        v == 1 ? "" : "s");
    for (int d = 0; d < p; d++) {
        PUT(d == 0 ? "; device %d:" : "; %d:", d);
        for (int k = 0, first = 1; k < S; k++) {
            if (mt_schedule_chunk_device(s, k) != d) continue;
            int l0, nl;
            split_layers(m_blocks(c), S, k, &l0, &nl);
            PUT("%s chunk %d (%s", first ? "" : ",", k, k == 0 ? "embedding, " : "");
            if (nl > 1) PUT("blocks %d-%d", l0, l0 + nl - 1);
            else if (nl == 1) PUT("block %d", l0);
            else PUT("no blocks");
            PUT("%s)", k == S - 1 ? ", head" : "");
            first = 0;
        }
    }
    if (*mt_schedule_note(s)) PUT("; note: %s", mt_schedule_note(s));
#undef PUT
    if (at >= n && n > 4) memcpy(buf + n - 4, "...", 4);
}

/* A stage's input (the previous stage's output) holds the residual
 * stream's rows as that stage left them: over context, the device's
 * head-tail share (the rules split only the data inputs' sequence dim, so
 * left alone the input would be read whole and every stage after the first
 * would gather its rows). */
static mt_status split_stage_input(const mt__train_model *m, mt_graph *g, const mt_mesh *mesh) {
    uint32_t context = mt__axis_bit(mesh, "context");
    mt_tensor *x = m->stage_input ? mt_graph_find(g, m->stage_input) : NULL;
    if (!x || !context || mt_mesh_axis_size(mesh, "context") < 2 || mt_tensor_ndim(x) < 2)
        return MT_OK;
    mt_sharding sh = mt_tensor_sharding(x);
    sh.dim_axes[1] |= context;
    return mt_tensor_set_sharding(x, &sh);
}

/* ---- the chunks, as explain sees them (train.h) ------------------------ */

mt_status mt_train_pipe_chunks(const mt_train_config *cfg, const mt_mesh *mesh, int device,
                               int *chunk, int max, int *n, int *S) {
    *n = 0;
    *S = 1;
    int p = mesh ? mt__train_pipe_size(mesh) : 1;
    if (p < 2) {
        if (max < 1) return mt_fail(MT_EINVAL, "mt_train_pipe_chunks: room for no chunk");
        chunk[0] = 0;
        *n = 1;
        return MT_OK;
    }
    const mt__train_model *m = mt__train_model_of(cfg->model);
    if (!m) return mt_fail(MT_EINVAL, "unknown model kind %d", (int)cfg->model);
    mt_status st = mt__train_pipe_check(cfg, m, p);
    mt_schedule_kind kind;
    if (st == MT_OK) st = mt_schedule_kind_parse(mt__train_pipe_schedule(cfg), &kind);
    mt_schedule *s = NULL;
    if (st == MT_OK) st = mt_schedule_make(kind, p, cfg->accum, cfg->pipe_chunks, &s);
    if (st != MT_OK) return st;
    int coords[MT_MESH_MAX_AXES], pipe = 0;
    mt_mesh_coords(mesh, device, coords);
    for (int a = 0; a < mt_mesh_ndim(mesh); a++)
        if (strcmp(mt_mesh_axis_name(mesh, a), "pipe") == 0) pipe = coords[a];
    *S = p * mt_schedule_chunks(s);
    for (int k = 0; k < *S; k++) {
        if (mt_schedule_chunk_device(s, k) != pipe) continue;
        if (*n == max) {
            mt_schedule_free(s);
            return mt_fail(MT_EINVAL, "mt_train_pipe_chunks: device %d holds more than %d "
                           "chunks", device, max);
        }
        chunk[(*n)++] = k;
    }
    mt_schedule_free(s);
    return MT_OK;
}

mt_status mt_train_build_chunk_program(const mt_train_config *cfg, const mt_mesh *mesh, int chunk,
                                       int S, mt_graph *g, mt_tensor **out, bool *seeded,
                                       mt_partition_opts *opts) {
    *seeded = false;
    if (S <= 1) return mt_train_build_program(cfg, mesh, g, out, opts);
    *out = NULL;
    mt_partition_opts unused;
    if (!opts) opts = &unused;
    memset(opts, 0, sizeof *opts);
    const mt__train_model *m = mt__train_model_of(cfg->model);
    if (!m || !m->build_stage)
        return mt_fail(MT_EINVAL, "a pipeline chunk needs a model that can be cut into stages");
    if (chunk < 0 || chunk >= S)
        return mt_fail(MT_EINVAL, "pipeline chunk %d of %d; use 0..%d", chunk, S, S - 1);
    mt_model_stage st = {.first = chunk == 0, .last = chunk == S - 1};
    split_layers(m_blocks(cfg), S, chunk, &st.layer0, &st.layers);
    /* the trainer's scale: every microbatch's loss over the global batch */
    float scale = (float)(1.0 / ((double)mt__microbatch_size(m, cfg) * cfg->accum));
    mt_tensor *o = m->build_stage(cfg, g, &st, scale);
    if (!o) return mt_fail(mt_graph_status(g) != MT_OK ? mt_graph_status(g) : MT_EINVAL, "%s",
                           mt_graph_errmsg(g));
    mt_status s = mesh ? mt__shard_program(m, cfg, g, mesh, opts) : MT_OK;
    if (s == MT_OK && mesh) s = split_stage_input(m, g, mesh);
    if (s != MT_OK) return mt_fail_wrap(s, "pipeline chunk %d", chunk);
    *out = o;
    *seeded = !st.last;
    return MT_OK;
}

/* ---- building a device's chunks ---------------------------------------- */

/* The compiled graph of chunk k: the model's stage, sharded and partitioned
 * over the mesh's other axes. */
static mt_status make_chunk(mt_trainer *tr, mt__train_pipe *pp, mt_ctx *ctx, int i, int k,
                            float scale) {
    const mt_train_config *c = &tr->cfg;
    mt__pipe_chunk *ch = &pp->chunk[i];
    mt_model_stage st = {.first = k == 0, .last = k == pp->S - 1};
    split_layers(m_blocks(c), pp->S, k, &st.layer0, &st.layers);
    mt_graph *g = mt_graph_create();
    if (!g) return mt_fail(MT_ENOMEM, "out of memory creating the graph of pipeline chunk %d", k);
    mt_tensor *out = tr->m->build_stage(c, g, &st, scale);
    mt_status s = MT_OK;
    if (!out) {
        s = mt_graph_status(g) != MT_OK ? mt_graph_status(g) : MT_EINVAL;
        mt_fail(s, "%s", mt_graph_errmsg(g));
        mt_graph_free(g);
        return s;
    }
    mt_graph *local = NULL;
    mt_tensor *local_out = NULL;
    mt_partition_opts po;
    s = mt__shard_program(tr->m, c, g, mt_ctx_mesh(ctx), &po);
    if (s == MT_OK) s = split_stage_input(tr->m, g, mt_ctx_mesh(ctx));
    if (s == MT_OK) s = mt_partition(g, out, ctx, &po, &local, &local_out);
    mt_graph_free(g);
    if (s != MT_OK) return mt_fail_wrap(s, "pipeline chunk %d", k);
    /* a schedule that runs every backward whole (BW: gpipe, 1f1b,
     * interleaved) runs each W right after its B, so with remat the W nodes
     * join B's order and the recomputed values die within their block; a
     * split schedule (zb-*) runs W later and keeps them until then */
    bool split_w = false;
    for (int o = 0; o < pp->n_ops; o++) split_w |= pp->ops[o].type == MT_PIPE_W;
    mt_compile_opts opts = {.seed = c->seed, .seed_from_caller = !st.last, .remat = c->remat,
                            .interleave_w = c->remat != MT_REMAT_NONE && !split_w,
                            .precision = c->precision, .grad_reduce = c->grad_reduce,
                            .f32_activations = c->f32_activations,
                            .bucket_bytes = mt__train_bucket_bytes(c),
                            .backend = mt__train_backend(c)};
    s = mt_graph_compile(local, local_out, &opts);
    if (s == MT_OK && st.first && tr->m->fill_constants) s = tr->m->fill_constants(local);
    /* a sequence split over context: the first chunk's position ids (the
     * GPT's) are those of the device's head-tail rows, as off a pipeline */
    if (s == MT_OK && st.first && tr->m->batch_const)
        s = mt__train_seq_positions(ctx, local, tr->m->batch_const);
    if (s != MT_OK) {
        mt_graph_free(local);
        return mt_fail_wrap(s, "pipeline chunk %d", k);
    }
    *ch = (mt__pipe_chunk){.g = local, .chunk = k,
                           .in = st.first ? NULL : mt_graph_find(local, tr->m->stage_input),
                           .out = st.last ? NULL : local_out};
    pp->in[i] = st.first ? mt_graph_find(local, tr->m->input) : NULL;
    pp->target[i] = st.last ? mt_graph_find(local, tr->m->target) : NULL;
    pp->docs[i] = c->doc_mask ? mt_graph_find(local, "docs") : NULL;
    if ((!st.first && !ch->in) || (st.first && !pp->in[i]) || (st.last && !pp->target[i]) ||
        (c->doc_mask && !pp->docs[i]))
        return mt_fail(MT_EINTERNAL, "pipeline chunk %d lacks its inputs", k);
    return MT_OK;
}

/* Both sides of a stage boundary must lay the activation out alike: every
 * chunk's input and output are such boundaries, so each chunk's two must
 * have the same local size (sequence parallelism would split the output's
 * rows, not the input's). */
static mt_status check_boundaries(const mt__train_pipe *pp) {
    for (int i = 0; i < pp->v; i++) {
        const mt__pipe_chunk *ch = &pp->chunk[i];
        if (ch->out && ch->in && mt_tensor_numel(ch->out) != mt_tensor_numel(ch->in))
            return mt_fail(MT_EUNSUPPORTED, "pipeline chunk %d takes an input of %lld elements "
                           "but gives %lld: the layouts at the stage boundary differ; drop "
                           "--sequence-parallel with pipe", ch->chunk,
                           (long long)mt_tensor_numel(ch->in), (long long)mt_tensor_numel(ch->out));
    }
    return MT_OK;
}

mt_status mt__train_pipe_create(mt_trainer *tr, mt__train_dev *d, mt_ctx *ctx) {
    const mt_train_config *c = &tr->cfg;
    mt__train_pipe *pp = calloc(1, sizeof *pp);
    if (!pp) return mt_fail(MT_ENOMEM, "out of memory for the pipeline");
    d->pipe = pp;
    mt_model_shape shape = {0};   /* a model without a shape may have experts */
    if (tr->m->shape) tr->m->shape(c, &shape);
    pp->mixture = !tr->m->shape || shape.moe_experts > 0;
    mt_axes pipe = {0};
    mt_status s = mt_ctx_axes(ctx, "pipe", &pipe);
    if (s != MT_OK) return s;
    pp->p = mt_axis_size(ctx, pipe);
    pp->rank = mt_axis_index(ctx, pipe);
    mt_schedule_kind kind;
    if ((s = mt_schedule_kind_parse(c->schedule, &kind)) != MT_OK) return s;
    if ((s = mt_schedule_make(kind, pp->p, c->accum, c->pipe_chunks, &pp->sched)) != MT_OK)
        return s;
    /* validated before it runs: a list that could deadlock never starts */
    if ((s = mt_schedule_validate(pp->sched, NULL)) != MT_OK) return s;
    pp->v = mt_schedule_chunks(pp->sched);
    pp->S = pp->p * pp->v;
    if (pp->v > MT_PIPE_MAX_CHUNKS)
        return mt_fail(MT_EINVAL, "%d chunks per device; the trainer holds at most %d",
                       pp->v, MT_PIPE_MAX_CHUNKS);
    if (m_blocks(c) < pp->S)
        return mt_fail(MT_EINVAL, "a %s pipeline over pipe=%d cuts the model into %d chunks, "
                       "more than its L=%d blocks; use more layers or fewer chunks",
                       c->schedule, pp->p, pp->S, m_blocks(c));
    /* the layout, with the model's L as resolved (llmc_in's): written once
     * a process, by its first device */
    if (tr->n_dev == 1 || mt_ctx_device(ctx) == 0)
        describe(c, pp->sched, tr->pipe_layout, sizeof tr->pipe_layout);
    pp->device_of = malloc((size_t)pp->S * sizeof *pp->device_of);
    if (!pp->device_of) return mt_fail(MT_ENOMEM, "out of memory for the pipeline");
    for (int k = 0; k < pp->S; k++) pp->device_of[k] = mt_schedule_chunk_device(pp->sched, k);
    pp->ops = mt_schedule_ops(pp->sched, pp->rank);
    pp->n_ops = mt_schedule_n_ops(pp->sched, pp->rank);
    float scale = (float)(1.0 / ((double)mt__microbatch_size(tr->m, c) * c->accum));
    int i = 0;
    for (int k = 0; k < pp->S && s == MT_OK; k++)
        if (pp->device_of[k] == pp->rank) s = make_chunk(tr, pp, ctx, i++, k, scale);
    if (s != MT_OK) return s;
    if (i != pp->v)
        return mt_fail(MT_EINTERNAL, "the schedule gives pipe rank %d %d chunks, not %d",
                       pp->rank, i, pp->v);
    if ((s = check_boundaries(pp)) != MT_OK) return s;
    for (i = 0; i < pp->v && s == MT_OK; i++) {
        s = mt_optim_create(pp->chunk[i].g, &c->optim, &pp->opt[i]);
        /* the head's copy of the tied embedding: counted once, on chunk 0 */
        if (s == MT_OK && pp->chunk[i].chunk == pp->S - 1 && tied_name(tr))
            s = mt_optim_exclude_from_norm(pp->opt[i], tied_name(tr));
    }
    if (s != MT_OK) return s;
    /* what every step reuses */
    pp->be = mt__graph_backend(pp->chunk[0].g);
    mt_tensor *first, *last;
    tied_copies(tr, pp, &first, &last);
    if ((first != NULL) != (last != NULL)) {   /* the other copy is on another device */
        size_t n = (size_t)mt_tensor_numel(first ? first : last);
        if ((s = mt_backend_alloc(pp->be, n * sizeof *pp->tied_other,
                                  (void **)&pp->tied_other)) != MT_OK)
            return mt_fail_wrap(s, "the gradient of the tied '%s'", tied_name(tr));
    }
    pp->meas = malloc((2 + 3 * (size_t)pp->S) * sizeof *pp->meas);
    pp->costs = malloc((size_t)pp->S * sizeof *pp->costs);
    if (!pp->meas || !pp->costs)
        return mt_fail(MT_ENOMEM, "out of memory for the pipeline's measurements");
    pp->x = (mt__pipe_exec){.ctx = ctx, .pipe = pipe, .S = pp->S, .m = c->accum,
                            .device_of = pp->device_of, .chunks = pp->chunk, .n_chunks = pp->v,
                            .feed = NULL, .arg = NULL};
    if ((s = mt__pipe_setup(&pp->x, pp->ops, pp->n_ops)) != MT_OK) return s;
    /* the step's data: accum global microbatches (a device of middle
     * chunks needs no tokens or targets, but makes them too, so that its
     * data position moves on; with doc_mask it needs the documents') */
    if ((s = mt__pipe_data_init(&pp->data, tr)) != MT_OK) return s;
    /* for inspection (mt_trainer_graph, memory): the device's first chunk */
    d->g = pp->chunk[0].g;
    d->opt = pp->opt[0];
    return MT_OK;
}

void mt__train_pipe_free(mt__train_pipe *pp) {
    if (!pp) return;
    mt__pipe_free(&pp->x);
    for (int i = 0; i < MT_PIPE_MAX_CHUNKS; i++) {
        mt_optim_free(pp->opt[i]);
        mt_graph_free(pp->chunk[i].g);
    }
    mt_schedule_free(pp->sched);
    free(pp->device_of);
    mt__pipe_data_free(&pp->data);
    if (pp->be) mt_backend_free(pp->be, pp->tied_other);
    free(pp->meas);
    free(pp->costs);
    for (int i = 0; i < MT_PIPE_MAX_CHUNKS; i++) {
        mt__moe_load_free(&pp->moe[i]);
        mt__moe_load_free(&pp->eval_moe[i]);
    }
    free(pp);
}

/* ---- a step ------------------------------------------------------------ */

typedef struct {
    mt_trainer     *tr;
    mt__train_pipe *pp;
    mt_ctx         *ctx;
} feed_arg;

/* Writes this device's share of microbatch mb (its batch rows, and its
 * head-tail share of each over context) into chunk c's inputs: the tokens
 * on chunk 0, the targets on chunk S-1, the document ids on every chunk. */
static mt_status feed(void *arg, const mt__pipe_chunk *c, int mb) {
    feed_arg *f = arg;
    mt__train_pipe *pp = f->pp;
    int i = (int)(c - pp->chunk);
    mt_status s = mt__pipe_data_feed(&pp->data, f->ctx, mb, MT__PIPE_TOKENS, pp->in[i]);
    if (s == MT_OK) s = mt__pipe_data_feed(&pp->data, f->ctx, mb, MT__PIPE_TARGETS, pp->target[i]);
    if (s == MT_OK) s = mt__pipe_data_feed(&pp->data, f->ctx, mb, MT__PIPE_DOCS, pp->docs[i]);
    return s;
}

/* A chunk's router choices and losses, after each of its F (moe_load.c). */
static mt_status after_f(void *arg, const mt__pipe_chunk *c, int mb) {
    (void)mb;
    feed_arg *f = arg;
    return mt__moe_load_add(&f->pp->loads[c - f->pp->chunk], c->g);
}

/* The balance of the step or evaluation whose loads are pp->loads. */
static mt_status moe_balance(mt__train_pipe *pp, mt_ctx *ctx, mt__moe_step *ms) {
    if (!pp->mixture) return (*ms = (mt__moe_step){NAN, NAN, 0, NAN}), MT_OK;
    bool last[MT_PIPE_MAX_CHUNKS];
    for (int i = 0; i < pp->v; i++) last[i] = pp->chunk[i].chunk == pp->S - 1;
    return mt__moe_load_pipe(pp->loads, pp->v, last, ctx, pp->x.pipe, ms);
}

/* The tied embedding's two copies (chunk 0's and chunk S-1's) get the sum
 * of both gradients: exchanged when on two devices (each adds the other's
 * part to its own; float addition commutes, so both sums are the same
 * bits), added in place when on one. The sums run on the backend
 * (mt__buffer_scale), on its buffers. */
static mt_status sum_tied(mt_trainer *tr, mt__train_pipe *pp, mt_ctx *ctx) {
    mt_tensor *first, *last;
    tied_copies(tr, pp, &first, &last);
    if (!first && !last) return MT_OK;
    mt_tensor *mine = first ? first : last;
    if (!mt_tensor_grad(mine)) return MT_OK;   /* (never: both copies are used) */
    mt_graph *gm = pp->chunk[0].g;
    float *g = mt__tensor_buffer(mt_tensor_grad(mine));
    size_t n = (size_t)mt_tensor_numel(mine);
    if (first && last) {   /* one device holds both */
        float *g2 = mt__tensor_buffer(mt_tensor_grad(last));
        mt_status s = mt__buffer_scale(gm, g, g2, 1.0f, (int64_t)n, true);
        return s == MT_OK ? mt__buffer_scale(gm, g2, g, 1.0f, (int64_t)n, false) : s;
    }
    float *other = pp->tied_other;
    int peer = first ? pp->device_of[pp->S - 1] : pp->device_of[0];
    const int tag = MT_TAG_MAX;   /* unused by the executor's messages in a step */
    mt_status s = mt_send(ctx, pp->x.pipe, g, n, MT_F32, peer, tag);
    if (s == MT_OK) s = mt_recv(ctx, pp->x.pipe, other, n, MT_F32, peer, tag);
    if (s == MT_OK) s = mt__buffer_scale(gm, g, other, 1.0f, (int64_t)n, true);
    return s;
}

/* The step's bubble as measured on every device of the pipe, and as the
 * simulator predicts it from the chunks' measured op costs (each the mean
 * over the step's microbatches; a BW's B and W parts apart, for the
 * report; the simulator's BW costs their sum, as the executor runs it),
 * into d->bubble and d->stage_cost. */
static mt_status measure_bubble(mt__train_pipe *pp, mt__train_dev *d, mt_ctx *ctx) {
    const mt__pipe_exec *x = &pp->x;
    const int S = pp->S, m = x->m;
    float *buf = pp->meas;   /* span, busy; (S,3) op times */
    mt_pipe_costs *costs = pp->costs;
    memset(buf, 0, (2 + 3 * (size_t)S) * sizeof *buf);
    float *per = buf + 2;
    double busy = 0;
    for (int o = 0; o < pp->n_ops; o++) {
        const mt_pipe_op *op = &pp->ops[o];
        busy += x->t1[o] - x->t0[o];
        if (op->type == MT_PIPE_BW) {
            per[3 * op->chunk + 1] += (float)((x->tb[o] - x->t0[o]) / m);
            per[3 * op->chunk + 2] += (float)((x->t1[o] - x->tb[o]) / m);
        } else {
            per[3 * op->chunk + (op->type == MT_PIPE_F ? 0 : op->type == MT_PIPE_W ? 2 : 1)] +=
                (float)((x->t1[o] - x->t0[o]) / m);
        }
    }
    buf[0] = pp->n_ops ? (float)(x->t1[pp->n_ops - 1] - x->t0[0]) : 0;
    buf[1] = (float)busy;
    mt_status s = mt_pmax(ctx, x->pipe, buf, 2);
    if (s == MT_OK) s = mt_psum(ctx, x->pipe, per, 3 * (size_t)S);
    if (s == MT_OK) {
        d->bubble[0] = buf[0] > 0 ? (buf[0] - buf[1]) / buf[0] : 0;
        d->stage_cost[0] = d->stage_cost[1] = d->stage_cost[2] = 0;
        for (int k = 0; k < S; k++) {
            /* a chunk's op that took no measurable time still costs > 0 */
            costs[k] = (mt_pipe_costs){.f = per[3 * k] > 0 ? per[3 * k] : 1e-9,
                                       .b = per[3 * k + 1] > 0 ? per[3 * k + 1] : 1e-9,
                                       .w = per[3 * k + 2], .comm = 0};
            for (int q = 0; q < 3; q++) d->stage_cost[q] += per[3 * k + q] * pp->v / S;
        }
        /* (the simulation allocates its timeline: p·n_ops doubles a step) */
        mt_pipe_sim sim;
        s = mt_schedule_simulate_chunks(pp->sched, costs, 0, &sim);
        if (s == MT_OK) {
            d->bubble[1] = sim.bubble_rate;
            mt_pipe_sim_free(&sim);
        }
    }
    return s;
}

mt_status mt__train_pipe_step(mt_trainer *tr, mt__train_dev *d, mt_ctx *ctx, float lr, int step) {
    const mt_train_config *c = &tr->cfg;
    mt__train_pipe *pp = d->pipe;
    mt_status s = MT_OK;
    for (int i = 0; i < pp->v && s == MT_OK; i++) s = mt_graph_set_ctx(pp->chunk[i].g, ctx);
    if (s != MT_OK) return s;
    /* the step's microbatches, each the global one (a pure function of pos);
     * every device advances the position, data or not */
    d->pos = tr->data_pos;
    if ((s = mt__pipe_data_fill(&pp->data, tr, 0, &d->pos, c->accum)) != MT_OK) return s;
    feed_arg fa = {tr, pp, ctx};
    pp->x.ctx = ctx;
    pp->x.feed = feed;
    pp->x.after_f = pp->mixture ? after_f : NULL;
    pp->x.arg = &fa;
    pp->loads = pp->moe;
    double loss = 0;
    mt__moe_step ms = {0};
    s = mt__pipe_run(&pp->x, pp->ops, pp->n_ops, &loss);
    if (s == MT_OK) s = moe_balance(pp, ctx, &ms);
    if (s == MT_OK) s = measure_bubble(pp, d, ctx);
    if (s == MT_OK) s = sum_tied(tr, pp, ctx);
    /* the loss lives on the last chunk's device; the norm's parts on all */
    double sumsq = 0;
    for (int i = 0; i < pp->v && s == MT_OK; i++) {
        double part = 0;
        s = mt_optim_sumsq(pp->opt[i], &part);
        sumsq += part;
    }
    float both[2] = {(float)loss, (float)sumsq};
    if (s == MT_OK) s = mt_psum(ctx, pp->x.pipe, both, 2);
    if (s != MT_OK) {
        for (int i = 0; i < pp->v; i++) mt_graph_zero_grad(pp->chunk[i].g);
        return s;
    }
    /* the chunks before the last hold router losses its loss lacks */
    d->loss = both[0] + ms.aux_mid;
    d->moe_maxvio = ms.maxvio, d->moe_aux = ms.aux, d->moe_dropped = ms.dropped;
    if (!isfinite(d->loss)) {
        for (int i = 0; i < pp->v; i++) mt_graph_zero_grad(pp->chunk[i].g);
        return mt_fail(MT_ENAN, "loss is %g at step %d; lower the learning rate (now %g) or "
                       "check the data", d->loss, step, (double)lr);
    }
    d->grad_norm = sqrtf(both[1]);
    mt_trace_begin(ctx, "optimizer");
    for (int i = 0; i < pp->v && s == MT_OK; i++) s = mt_optim_step_norm(pp->opt[i], d->grad_norm);
    /* the routers' aux-loss-free bias, by the step's global loads */
    for (int i = 0; i < pp->v && s == MT_OK && tr->m->router_bias_update; i++)
        s = mt__moe_load_bias(&pp->moe[i], pp->chunk[i].g, ctx, tr->m->router_bias_update(c));
    mt_trace_end(ctx);
    if (s != MT_OK) {
        for (int i = 0; i < pp->v; i++) mt_graph_zero_grad(pp->chunk[i].g);
        if (s == MT_ENAN)
            return mt_fail(s, "at step %d: %s; lower the learning rate (now %g)", step,
                           mt_errmsg(), (double)lr);
        return mt_fail_wrap(s, "at step %d", step);
    }
    return MT_OK;
}

mt_status mt__train_pipe_eval(mt_trainer *tr, mt__train_dev *d, mt_ctx *ctx) {
    const mt_train_config *c = &tr->cfg;
    mt__train_pipe *pp = d->pipe;
    mt_status s = MT_OK;
    for (int i = 0; i < pp->v && s == MT_OK; i++) s = mt_graph_set_ctx(pp->chunk[i].g, ctx);
    feed_arg fa = {tr, pp, ctx};
    pp->x.ctx = ctx;
    pp->x.feed = feed;
    pp->x.after_f = pp->mixture ? after_f : NULL;
    pp->x.arg = &fa;
    pp->loads = pp->eval_moe;
    int64_t pos = 0;   /* the same validation batches every time */
    double sum = 0;
    for (int i = 0; i < c->eval_batches && s == MT_OK; i++) {
        /* microbatch 0 of the step's buffers holds it */
        s = mt__pipe_data_fill(&pp->data, tr, 1, &pos, 1);
        if (s == MT_OK) s = mt__pipe_forward(&pp->x, 0, &sum);
    }
    /* the training graphs scale each loss by 1/(accum microbatches) */
    float mean = (float)(sum * c->accum / c->eval_batches);
    if (s == MT_OK) s = mt_psum(ctx, pp->x.pipe, &mean, 1);
    /* a mixture's validation loss is its language model's: the last
       chunk's router losses taken out (moe_balance's aux less aux_mid) */
    mt__moe_step ms = {.aux = NAN};
    if (s == MT_OK) s = moe_balance(pp, ctx, &ms);
    d->loss = mean - (isnan(ms.aux) ? 0 : ms.aux - ms.aux_mid);
    return s;
}

mt_graph *mt__train_pipe_graph(const mt__train_dev *d, int i) {
    return d->pipe && i >= 0 && i < d->pipe->v ? d->pipe->chunk[i].g : NULL;
}

mt_optim *mt__train_pipe_optim(const mt__train_dev *d, int i) {
    return d->pipe && i >= 0 && i < d->pipe->v ? d->pipe->opt[i] : NULL;
}
