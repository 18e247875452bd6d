/*
 * program.c — one device's partitioned program, as the planner costs it.
 *
 * The trainer's own build (mt_train_build_chunk_program: the model's chunk,
 * sharded by the strategy presets), the partitioner and the compiler, on
 * the shape-only backend and a virtual device context: nothing is allocated
 * or run, and only the one device is built, so a device of a 16,384-device
 * mesh costs what a device of a 2-device mesh costs. The compile options are
 * `meshtrain explain`'s (and so the trainer's), so the bytes counted here are
 * the ones explain prints and the allocator would allocate.
 *
 * The summary walks the compiled program in run order: each node's class
 * (matrix product, other compute, collective: the op descriptor's cost
 * class), its cost from the op's own cost entry (mt_graph_node, the numbers
 * the profiler and the report use), and for collectives what they are for: a parameter's gather (fsdp, ZeRO)
 * or a parameter gradient's reduction (data parallel, ZeRO, fsdp).
 */
#include "plan/plan_impl.h"
#include "meshtrain/backend.h"
#include "meshtrain/comm.h"
#include "meshtrain/graph.h"
#include "meshtrain/partition.h"
#include "ops/ops_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The op's cost class, from its descriptor (ops/ops_impl.h): products and
 * attention's products are matrix products (attention's with its sequence
 * length), the rest vector work; an op the table does not know is vector
 * work. A collective's own class is never asked here (in->collective). */
mt__plan_node_class mt__plan_class_of(const mt_node_info *in, double *attention_seq) {
    *attention_seq = 0;
    const mt_op_def *def = mt__op_def_named(in->op);
    mt_op_cost_class cls = def ? def->cost_class : MT_COST_VECTOR;
    if (cls == MT_COST_ATTENTION && mt_tensor_ndim(in->out) >= 3)
        *attention_seq = (double)mt_tensor_dim(in->out, 1);   /* (B, T, ...): the GPT's qkv
                                                                 (B, T, 3, C) */
    return cls == MT_COST_PRODUCT || cls == MT_COST_ATTENTION ? MT__PN_MATMUL : MT__PN_VECTOR;
}

/* The bytes a score element of attention's (T, T) matrices costs an op
 * (mt__plan_node.score_bytes): [0] meshtrain's flash kernels' (op_cost.c),
 * 0: the scores live in tiles in cache, never in memory; [1] Megatron-LM's
 * unfused path in 16 bits, each tensor Korthikanti et al. list in §4.1 (the QKᵀ scores, 2 bytes; the softmax's output, 2;
 * the dropout mask, 1; its output, 2) written once and read once by the
 * next kernel: the forward writes scores, probabilities, mask and dropped
 * probabilities (7) and reads the scores, the probabilities and the
 * dropped ones (6), 13; the backward reads the dropped probabilities for
 * dV (2), writes and reads their gradient (4), reads the mask (1), writes
 * and reads the probabilities' gradient (4) with the probabilities (2),
 * and writes and reads the scores' gradient (4), 17 (GQA's: 13 with the
 * dq/dk products, 4 with dv's). */
static void unfused_scores(const char *op, float b[2]) {
    bool bwd = strcmp(op, "attention_bwd") == 0, v = strcmp(op, "gqa_bwd_v") == 0;
    b[0] = 0.0f;
    b[1] = bwd ? 17.0f : v ? 4.0f : 13.0f;
}

const char *mt__plan_coll_name(mt__plan_coll k) {
    static const char *const names[MT__PC_N_KINDS] = {"all-reduce", "all-gather",
                                                      "reduce-scatter", "all-to-all", "permute"};
    return k >= 0 && k < MT__PC_N_KINDS ? names[k] : "collective";
}

/* A collective node's kind by its op; the vocabulary-parallel cross-entropy's
 * row statistics are all-reduces. */
static mt__plan_coll coll_kind(const char *op, bool *overlapped) {
    *overlapped = false;
    if (strcmp(op, "all_gather") == 0) return MT__PC_ALL_GATHER;
    if (strcmp(op, "psum_scatter") == 0) return MT__PC_REDUCE_SCATTER;
    if (strcmp(op, "all_to_all") == 0) return MT__PC_ALL_TO_ALL;
    if (strcmp(op, "ppermute") == 0) return MT__PC_PERMUTE;
    if (strncmp(op, "moe_experts", 11) == 0) return MT__PC_ALL_TO_ALL;   /* over expert */
    if (strcmp(op, "ag_linear") == 0) { *overlapped = true; return MT__PC_ALL_GATHER; }
    if (strcmp(op, "linear_rs") == 0) { *overlapped = true; return MT__PC_REDUCE_SCATTER; }
    if (strncmp(op, "ring_attention", 14) == 0) { *overlapped = true; return MT__PC_PERMUTE; }
    return MT__PC_ALL_REDUCE;   /* psum, pmean, pmax, cross_entropy */
}

static int by_address(const void *a, const void *b) {
    const uintptr_t x = (uintptr_t)*(mt_tensor *const *)a, y = (uintptr_t)*(mt_tensor *const *)b;
    return (x > y) - (x < y);
}

/* Whether t is one of the program's parameters or one's gradient: list
 * sorted by address (by_address), searched by halves (a linear search per
 * node was 4 % of a search's time, issue 40's speed item). */
static bool in_list(mt_tensor *const *list, int n, const mt_tensor *t) {
    return n > 0 && bsearch(&t, list, (size_t)n, sizeof *list, by_address) != NULL;
}

static int64_t global_elems(const mt_tensor *t, const mt_mesh *mesh) {
    mt_type ty = mt_tensor_global_type(t, mesh);
    int64_t n = 1;
    for (int d = 0; d < ty.ndim; d++) n *= ty.shape[d];
    return n;
}

static size_t tensor_bytes(const mt_tensor *t) {
    return (size_t)mt_tensor_numel(t) * mt_dtype_size(mt_tensor_dtype(t));
}

/* Fills p from the compiled program g (the chunk's, on `mesh`, its
 * parameters stored over the axes `storage`, gathered at each use unless
 * `once`, again in the backward with `reshard`). */
static mt_status summarise(const mt_graph *g, const mt_mesh *mesh, bool reshard, bool once,
                           uint32_t storage, mt__plan_program *p) {
    int np = mt_graph_n_params(g);
    mt_tensor **params = calloc((size_t)np + 1, sizeof *params);
    mt_tensor **grads = calloc((size_t)np + 1, sizeof *grads);
    p->n_nodes = mt_graph_n_nodes(g);
    p->nodes = calloc((size_t)p->n_nodes + 1, sizeof *p->nodes);
    if (!params || !grads || !p->nodes) {
        free(params);
        free(grads);
        return mt_fail(MT_ENOMEM, "out of memory for a program summary of %d nodes", p->n_nodes);
    }
    mt_tensor **sorted = calloc((size_t)np + 1, sizeof *sorted);   /* params by address */
    if (!sorted) {
        free(params);
        free(grads);
        return mt_fail(MT_ENOMEM, "out of memory for a program summary of %d parameters", np);
    }
    for (int i = 0; i < np; i++) {
        params[i] = mt_graph_param_at(g, i);
        grads[i] = mt_tensor_grad(params[i]);
        p->param_elems += mt_tensor_numel(params[i]);
        p->param_global_elems += global_elems(params[i], mesh);
    }
    memcpy(sorted, params, (size_t)np * sizeof *sorted);
    qsort(sorted, (size_t)np, sizeof *sorted, by_address);
    qsort(grads, (size_t)np, sizeof *grads, by_address);   /* only searched */
    for (int i = 0; i < p->n_nodes; i++) {
        mt_node_info in;
        mt_status s = mt_graph_node(g, i, &in);
        if (s != MT_OK) {
            free(params);
            free(grads);
            free(sorted);
            return s;
        }
        mt__plan_node *n = &p->nodes[i];
        n->phase = in.phase;
        n->flops = in.flops;
        n->bytes = in.mem_bytes;
        n->recompute = in.recompute;
        n->block = in.block;
        n->param = -1;
        n->live_bytes = in.live_bytes;
        n->attention_rows = in.attention_rows, n->attention_keys = in.attention_keys;
        /* pvary moves nothing and runs nothing (a type change): its cost
           entry's bytes are the tensor's, not traffic (measured 0.01 ms
           where they would cost 1.2-2.5 ms a step: test_plan_validate) */
        if (strcmp(in.op, "pvary") == 0) n->flops = n->bytes = 0;
        size_t out_bytes = tensor_bytes(in.out);
        if (!in_list(sorted, np, in.out) && out_bytes > p->largest_temp_bytes)
            p->largest_temp_bytes = out_bytes;
        if (!in.collective) {
            n->cls = mt__plan_class_of(&in, &n->attention_seq);
            n->attention_scores = in.attention_scores;
            if (in.attention_scores > 0) unfused_scores(in.op, n->score_bytes);
            n->gemm_m = in.gemm_m, n->gemm_n = in.gemm_n, n->gemm_k = in.gemm_k;
            int ph = in.phase == 'F' ? 0 : in.phase == 'B' ? 1 : 2;
            p->flops[ph] += in.flops;
            p->bytes[ph] += in.mem_bytes;
            continue;
        }
        n->cls = MT__PN_COLLECTIVE;
        n->kind = coll_kind(in.op, &n->overlapped);
        n->axes = in.axes;
        n->comm_bytes = in.comm_bytes;
        /* an expert product's exchange (moe_experts over expert): the
           listing gives the bytes that leave the device at balance,
           4·(el·(P-1) + N·(P-1)/P·(C+OC)) (graph/listing.c); nccl-tests'
           all-to-all size is the whole send buffer, P/(P-1) of that: the
           counts' el·P int32 and the rows out, C wide, and back, OC wide
           (cost.c takes (P-1)/P of it across the group) */
        const bool moe_exchange = strncmp(in.op, "moe_experts", 11) == 0;
        if (moe_exchange) {
            int group = 1;
            for (int k = 0; k < in.axes.n; k++)
                group *= mt_mesh_axis_size(mesh, mt_mesh_axis_name(mesh, in.axes.axis[k]));
            if (group > 1) n->comm_bytes *= (double)group / (group - 1);
        }
        n->wire_width = (unsigned char)mt_dtype_size(mt_tensor_dtype(in.n_in > 0 ? in.in[0]
                                                                               : in.out));
        /* a collective that casts to bf16 on the wire (the trainer's gather16
           and bf16 reductions) has its comm_bytes already halved
           (graph/listing.c): it moves 2 bytes an element of its f32 buffer */
        const mt_tensor *buf = n->kind == MT__PC_ALL_GATHER ? in.out
                               : in.n_in > 0 ? in.in[0] : NULL;
        if (!n->overlapped && buf && n->wire_width == 4 &&
            (n->kind == MT__PC_ALL_GATHER || n->kind == MT__PC_REDUCE_SCATTER ||
             n->kind == MT__PC_ALL_REDUCE) &&
            2.0 * in.comm_bytes == 4.0 * (double)mt_tensor_numel(buf))
            n->wire_width = 2;
        bool of_param = false;
        for (int k = 0; k < in.n_in; k++) {
            mt_tensor *const *at = np > 0 ? bsearch(&in.in[k], sorted, (size_t)np,
                                                    sizeof *sorted, by_address) : NULL;
            if (at) of_param = true, n->param = (int)(at - sorted);
        }
        n->param_gather = of_param && n->kind == MT__PC_ALL_GATHER && !n->overlapped;
        n->once = in.once_a_step;
        if (in.once_a_step && n->kind == MT__PC_REDUCE_SCATTER)
            p->grad_kept_elems += mt_tensor_numel(in.in[0]);
        /* an expert product's weight gradient (bwd_w) is computed inside its
           exchange, which blocks the compute: no reduction to defer */
        n->grad_reduce = !moe_exchange &&
                         (in_list(grads, np, in.out) || (in.phase == 'W' && !n->overlapped));
        if (n->param_gather && in.phase == 'F') {
            int64_t e = mt_tensor_numel(in.out);
            p->gathered_elems += e;
            if (e > p->gathered_max_elems) p->gathered_max_elems = e;
        }
        if (n->grad_reduce && n->kind == MT__PC_ALL_REDUCE)
            p->grad_reduced_full_elems += mt_tensor_numel(in.out);
        if (n->grad_reduce && n->kind == MT__PC_REDUCE_SCATTER)
            p->grad_scattered_elems += mt_tensor_numel(in.in[0]);
    }
    /* blocks counted from the chunk's first: programs shared between
       pipeline stages (cache.c) are one program, byte for byte */
    int first_block = -1;
    for (int i = 0; i < p->n_nodes; i++)
        if (p->nodes[i].block >= 0 && (first_block < 0 || p->nodes[i].block < first_block))
            first_block = p->nodes[i].block;
    for (int i = 0; first_block > 0 && i < p->n_nodes; i++)
        if (p->nodes[i].block >= 0) p->nodes[i].block -= first_block;
    p->gathered_kept_elems = reshard ? 0 : p->gathered_elems;
    mt_status su = mt__plan_program_unsplit(g, mesh, storage, once, reshard, p);
    if (su != MT_OK) {
        free(params);
        free(grads);
        free(sorted);
        return su;
    }
    mt_graph_stats st = mt_graph_get_stats(g);
    p->param_bytes = st.param_bytes;
    p->grad_bytes = st.grad_bytes;
    p->kept_grad_bytes = st.kept_grad_bytes;
    p->optim_bytes = 2 * sizeof(float) * (size_t)p->param_elems;
    p->arena_bytes = st.n_slots > 1 ? st.arena_bytes / (size_t)st.n_slots : st.arena_bytes;
    p->scratch_bytes = st.scratch_bytes;
    p->flops_recompute = st.flops_recompute;
    free(params);
    free(grads);
    free(sorted);
    return MT_OK;
}

mt_status mt__plan_program_build(const mt_train_config *cfg, const mt_mesh *mesh, int device,
                                 int chunk, int n_chunks, mt__plan_program *out) {
    memset(out, 0, sizeof *out);
    mt_ctx *ctx = NULL;
    mt_status s = mt_ctx_virtual_create(mesh, device, &ctx);
    if (s != MT_OK) return s;
    mt_graph *g = mt_graph_create(), *local = NULL;
    mt_tensor *loss = NULL, *local_loss = NULL;
    mt_partition_opts po;
    memset(&po, 0, sizeof po);
    bool seeded = false;
    s = g ? mt_train_build_chunk_program(cfg, mesh, chunk, n_chunks, g, &loss, &seeded, &po)
          : mt_fail(MT_ENOMEM, "out of memory for a graph");
    po.mode = MT_SHARD_AUTO;
    if (s == MT_OK) s = mt_partition(g, loss, ctx, &po, &local, &local_loss);
    mt_graph_free(g);
    /* explain's (the trainer's) compile: W beside B under a remat policy */
    if (s == MT_OK)
        s = mt_graph_compile(local, local_loss, &(mt_compile_opts){
            .seed = 1, .seed_from_caller = seeded, .remat = cfg->remat,
            .interleave_w = cfg->remat != MT_REMAT_NONE, .precision = cfg->precision,
            .grad_reduce = cfg->grad_reduce, .backend = mt_backend_shape_only()});
    if (s == MT_OK)
        s = summarise(local, mesh, po.reshard_after_forward && !po.gather_once, po.gather_once,
                      po.gather_axes, out);
    mt_graph_free(local);
    mt_ctx_virtual_free(ctx);
    if (s != MT_OK) {
        mt__plan_program_free(out);
        if (n_chunks > 1) return mt_fail_wrap(s, "pipeline chunk %d of %d", chunk, n_chunks);
    }
    return s;
}

void mt__plan_program_traffic16(mt__plan_program *p, int grad_width, bool unfused_attention) {
    for (int i = 0; i < p->n_nodes; i++) {
        mt__plan_node *n = &p->nodes[i];
        n->bytes /= 2;
        if (unfused_attention && n->attention_scores > 0) {
            n->attention_keys = 0;   /* batched products, not the fused kernel's loop */
            double more = n->attention_scores * (n->score_bytes[1] - n->score_bytes[0] / 2);
            int ph = n->phase == 'F' ? 0 : n->phase == 'B' ? 1 : 2;
            n->bytes += more;
            p->bytes[ph] += 2 * more;   /* halved below with the rest */
        }
        if (n->cls == MT__PN_COLLECTIVE && n->wire_width > 0)
            n->comm_bytes *= (n->grad_reduce ? grad_width : 2) / (double)n->wire_width;
    }
    for (int ph = 0; ph < 3; ph++) p->bytes[ph] /= 2;
}

/* Whether node n is one of the forward's activation collectives of block
 * b >= 0 (tensor / sequence parallel, context: blocking, on activations): what a
 * framework's recomputed forward runs again. */
static bool activation_coll(const mt__plan_node *n, int b) {
    return n->phase == 'F' && n->cls == MT__PN_COLLECTIVE && n->block == b &&
           !n->overlapped && !n->param_gather && !n->grad_reduce && !n->once;
}

mt_status mt__plan_program_recompute_comm(mt__plan_program *p) {
    /* each block's last recomputed node (its clones run just before the
       block's first B reader, remat.c: in one run or split around a B node) */
    int n_blocks = 0;
    for (int i = 0; i < p->n_nodes; i++)
        if (p->nodes[i].recompute && p->nodes[i].block >= n_blocks)
            n_blocks = p->nodes[i].block + 1;
    if (n_blocks == 0) return MT_OK;
    int *last = malloc((size_t)n_blocks * sizeof *last), extra = 0;
    if (!last) return mt_fail(MT_ENOMEM, "out of memory for %d blocks", n_blocks);
    for (int b = 0; b < n_blocks; b++) last[b] = -1;
    for (int i = 0; i < p->n_nodes; i++)
        if (p->nodes[i].phase == 'B' && p->nodes[i].recompute && p->nodes[i].block >= 0)
            last[p->nodes[i].block] = i;
    for (int j = 0; j < p->n_nodes && p->nodes[j].phase == 'F'; j++) {
        const int b = p->nodes[j].block;
        extra += b >= 0 && b < n_blocks && last[b] >= 0 && activation_coll(&p->nodes[j], b);
    }
    mt__plan_node *nodes = extra ? malloc(((size_t)p->n_nodes + (size_t)extra) * sizeof *nodes)
                                 : NULL;
    if (extra && !nodes) {
        free(last);
        return mt_fail(MT_ENOMEM, "out of memory for %d recomputed collectives", extra);
    }
    int k = 0;
    for (int i = 0; extra && i < p->n_nodes; i++) {
        const mt__plan_node *n = &p->nodes[i];
        nodes[k++] = *n;
        if (n->phase != 'B' || !n->recompute || n->block < 0 || last[n->block] != i) continue;
        /* the block's copies, in forward order, after its last clone */
        for (int j = 0; j < p->n_nodes && p->nodes[j].phase == 'F'; j++) {
            if (!activation_coll(&p->nodes[j], n->block)) continue;
            nodes[k] = p->nodes[j];
            nodes[k].phase = 'B';
            nodes[k].recompute = true;
            k++;
        }
    }
    free(last);
    if (extra) {
        free(p->nodes);
        p->nodes = nodes;
        p->n_nodes = k;
    }
    return MT_OK;
}

void mt__plan_program_free(mt__plan_program *p) {
    if (!p) return;
    free(p->nodes);
    free(p->unsplit_uses);
    memset(p, 0, sizeof *p);
}
