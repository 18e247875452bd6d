/*
 * remat.c — activation checkpointing: recompute a block's forward values in
 * its backward instead of keeping them (mt_compile_opts.remat, graph.h).
 *
 * A block is the forward nodes of one transformer layer, as the model's
 * builder tags them (mt_graph_set_block: the GPT's per layer, with the
 * embeddings, the final layernorm and the head outside every block; the
 * partitioner's device nodes keep their global node's block). A model that
 * tags no block has nothing to recompute.
 *
 * For each block the policy picks, node by node, what is recomputed:
 * everything the node makes (its output and saved aux: layernorm's mean and
 * rstd, attention's probabilities), or only its saved aux (attention under
 * ATTENTION and DOTS: its output is a matrix product's and stays). A node is
 * cloned as a B node that writes new tensors (the recomputed copies), reading
 * the copies made before it in the same block and the originals of the rest
 * (the block's input, parameters, the values the policy keeps). Every
 * backward node reading a recomputed value reads its copy instead, so the
 * original's last use is in the forward and the plan (plan.c) gives its
 * bytes to others. The block's clones run, in forward order, just before the
 * first B node that reads one of its copies, which is where the block's
 * backward starts needing them: the B/W split stands (W nodes read copies
 * made in B; a pipeline slot keeps them until its W as it keeps the rest of
 * its arena), and the kernels are deterministic, so the copies hold the
 * originals' bits.
 *
 * Kept whatever the policy: values another block or the head reads (the
 * residual stream between blocks: FULL keeps exactly these), values with
 * views (a copy would need its views cloned too), values made from
 * parameters only, and the outputs of collectives and of ops whose remat
 * class (op_desc.c) is NEVER (recomputing a collective would communicate
 * again).
 */
#include "graph/op_desc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *mt_remat_name(mt_remat r) {
    switch (r) {
    case MT_REMAT_NONE: return "none";
    case MT_REMAT_FULL: return "full";
    case MT_REMAT_ATTENTION: return "attention";
    case MT_REMAT_DOTS: return "dots";
    }
    return "?";
}

mt_status mt_remat_parse(const char *name, mt_remat *out) {
    for (int r = MT_REMAT_NONE; r <= MT_REMAT_DOTS; r++)
        if (name && strcmp(name, mt_remat_name((mt_remat)r)) == 0) {
            *out = (mt_remat)r;
            return MT_OK;
        }
    return mt_fail(MT_EINVAL, "unknown remat policy '%s'; use none, full, attention or dots",
                   name ? name : "(null)");
}

/* What the policy recomputes of one node. */
typedef enum { KEEP, ALL, AUX_ONLY } remat_what;

/* Ops a clone may re-run: local, deterministic, no communication (their
 * remat class in op_desc.c is anything but NEVER). */
static bool recomputable(mt_op op) { return mt__op_gdesc(op)->recomp != MT_RECOMP_NEVER; }

static remat_what policy_of(mt_remat policy, mt_op op) {
    mt_op_recomp rc = mt__op_gdesc(op)->recomp;
    switch (policy) {
    case MT_REMAT_FULL: return ALL;
    case MT_REMAT_ATTENTION: return rc == MT_RECOMP_SAVES_AUX ? AUX_ONLY : KEEP;
    case MT_REMAT_DOTS:
        return rc == MT_RECOMP_DOT ? KEEP : rc == MT_RECOMP_SAVES_AUX ? AUX_ONLY : ALL;
    case MT_REMAT_NONE: break;
    }
    return KEEP;
}

/* The block of every forward node (-1: none): its builder's tag. */
static void find_blocks(const mt_graph *g, int *block) {
    for (int i = 0; i < g->n_forward; i++) block[i] = g->nodes[i].block;
}

/* A node's outputs: out, out2, aux[0], aux[1] (NULL where it has none). */
static void outputs_of(const mt_op_call *c, mt_tensor *o[4]) {
    o[0] = c->out; o[1] = c->out2; o[2] = c->aux[0]; o[3] = c->aux[1];
}

/* Whether t may be replaced by a copy in the backward. */
static bool replaceable(const mt_graph *g, const mt_tensor *t, const bool *escapes,
                        const bool *viewed) {
    if (t->view_of || t->data_of || escapes[t->id] || viewed[t->id]) return false;
    if (t->kind != MT_ACT && t->kind != MT_AUX) return false;
    return !(g->loss && mt__storage_root(g->loss) == t);
}

/* A copy of t for the recomputation: same type, no gradient of its own. */
static mt_tensor *copy_of_tensor(mt_graph *g, const mt_tensor *t) {
    char name[MT_MAX_NAME];
    mt__name_derived(name, sizeof name, "remat(", t->name, MT_MAX_NAME - 8, ")");
    /* MT_AUX: what compile may add (saved for the backward, as the re-gathers) */
    mt_tensor *c = mt__tensor_new(g, mt_graph_find(g, name) ? NULL : name, t->dtype, MT_AUX,
                                  t->ndim, t->shape);
    if (!c) return NULL;
    c->sharding = t->sharding;
    c->data_dep = t->data_dep;
    return c;
}

/* Rebuilds B's run order with each block's clones (sorted by block, then
 * node index) before that block's first reader `site` (n_b: at the end). */
typedef struct {
    int block, site, node;
} clone_site;

static int by_site(const void *a, const void *b) {
    const clone_site *x = a, *y = b;
    if (x->site != y->site) return x->site < y->site ? -1 : 1;
    if (x->block != y->block) return x->block > y->block ? -1 : 1;   /* later blocks first */
    return (x->node > y->node) - (x->node < y->node);
}

void mt__remat(mt_graph *g, mt_remat policy) {
    if (policy == MT_REMAT_NONE || g->status != MT_OK) return;
    const int n_fwd = g->n_forward, n_nodes0 = g->n_nodes, n_b0 = g->prog->n_b, n_t0 = g->n_tensors;
    int *block = malloc((size_t)n_fwd * sizeof *block);
    int *producer = malloc((size_t)n_t0 * sizeof *producer);   /* block making it; -2 none */
    bool *escapes = calloc((size_t)n_t0, sizeof *escapes);
    bool *viewed = calloc((size_t)n_t0, sizeof *viewed);
    mt_tensor **copy = calloc((size_t)n_t0, sizeof *copy);     /* original id -> copy */
    clone_site *sites = malloc((size_t)(n_fwd + 1) * sizeof *sites);
    if (!block || !producer || !escapes || !viewed || !copy || !sites) {
        mt__graph_error(g, MT_ENOMEM, "out of memory planning the recomputation (remat)");
        goto done;
    }
    find_blocks(g, block);

    /* 1. What escapes its block: read by a forward node of another block. */
    for (int i = 0; i < n_t0; i++) {
        producer[i] = -2;
        if (g->tensors[i]->view_of) viewed[mt__storage_root(g->tensors[i])->id] = true;
    }
    for (int i = 0; i < n_fwd; i++) {
        const mt_op_call *c = &g->nodes[i].call;
        for (int k = 0; k < c->n_in; k++) {
            int id = mt__storage_root(c->in[k])->id;
            if (producer[id] != -2 && producer[id] != block[i]) escapes[id] = true;
        }
        mt_tensor *o[4];
        outputs_of(c, o);
        for (int k = 0; k < 4; k++)
            if (o[k]) producer[mt__storage_root(o[k])->id] = block[i];
    }

    /* 2. Clone the recomputed nodes, block by block in forward order. */
    int n_sites = 0;
    for (int i = 0; i < n_fwd && g->status == MT_OK; i++) {
        const mt_op_call f = g->nodes[i].call;   /* copy: appending moves the array */
        if (block[i] < 0 || !recomputable(f.op) || f.acc || !f.out->data_dep) continue;
        remat_what what = policy_of(policy, f.op);
        mt_tensor *o[4];
        outputs_of(&f, o);
        /* every output this node recomputes must be replaceable, or none is */
        for (int k = 0; k < 4 && what != KEEP; k++)
            if (o[k] && (what == ALL || k >= 2) && !replaceable(g, o[k], escapes, viewed))
                what = KEEP;
        if (what == KEEP) continue;
        mt_op_call again = f;
        for (int k = 0; k < again.n_in; k++)
            if (copy[again.in[k]->id]) again.in[k] = copy[again.in[k]->id];
        mt_tensor *made[4] = {0};
        for (int k = 0; k < 4; k++) {
            if (!o[k]) continue;
            /* an output that is not recomputed still needs bytes of its own:
             * the original is read by others meanwhile */
            if (!(made[k] = copy_of_tensor(g, o[k]))) break;
            if (what == ALL || k >= 2) copy[o[k]->id] = made[k];
        }
        if (g->status != MT_OK) break;
        again.out = made[0]; again.out2 = made[1]; again.aux[0] = made[2]; again.aux[1] = made[3];
        mt_node node = {.call = again, .phase = MT_PHASE_B, .recompute = true};
        g->cur_block = block[i];   /* the clone belongs to its original's block */
        int idx = mt__node_add(g, &node);
        g->cur_block = -1;
        if (idx < 0) break;
        sites[n_sites++] = (clone_site){block[i], -1, idx};
    }
    if (g->status != MT_OK || n_sites == 0) goto done;

    /* 3. The backward reads the copies. */
    for (int j = n_fwd; j < n_nodes0; j++) {
        mt_op_call *c = &g->nodes[j].call;
        for (int k = 0; k < c->n_in; k++)
            if (c->in[k]->id < n_t0 && copy[c->in[k]->id]) c->in[k] = copy[c->in[k]->id];
    }

    /* 4. Each block's clones go before its first B reader of a copy. */
    int n_blocks = 0;
    for (int i = 0; i < n_fwd; i++)
        if (block[i] + 1 > n_blocks) n_blocks = block[i] + 1;
    int *made_by = malloc((size_t)(g->n_tensors - n_t0) * sizeof *made_by);   /* copy -> block */
    int *site_of = malloc((size_t)n_blocks * sizeof *site_of);
    if (!made_by || !site_of) {
        free(made_by);
        free(site_of);
        mt__graph_error(g, MT_ENOMEM, "out of memory placing the recomputation");
        goto done;
    }
    for (int b = 0; b < n_blocks; b++) site_of[b] = n_b0;
    for (int q = 0; q < n_sites; q++) {
        mt_tensor *o[4];
        outputs_of(&g->nodes[sites[q].node].call, o);
        for (int k = 0; k < 4; k++)
            if (o[k]) made_by[o[k]->id - n_t0] = sites[q].block;
    }
    for (int j = n_b0 - 1; j >= 0; j--) {
        const mt_op_call *c = &g->nodes[g->prog->order_b[j]].call;
        for (int k = 0; k < c->n_in; k++)
            if (c->in[k]->id >= n_t0) site_of[made_by[c->in[k]->id - n_t0]] = j;
    }
    for (int q = 0; q < n_sites; q++) sites[q].site = site_of[sites[q].block];
    free(made_by);
    free(site_of);
    qsort(sites, (size_t)n_sites, sizeof *sites, by_site);
    /* both run orders have room for every node (emit.c grows them) */
    int n_all = n_b0 + n_sites;
    int *order = malloc((size_t)(g->n_nodes > n_all ? g->n_nodes : n_all) * sizeof *order);
    if (!order) { mt__graph_error(g, MT_ENOMEM, "out of memory placing the recomputation"); goto done; }
    int out = 0, s = 0;
    for (int j = 0; j <= n_b0; j++) {
        for (; s < n_sites && sites[s].site == j; s++) order[out++] = sites[s].node;
        if (j < n_b0) order[out++] = g->prog->order_b[j];
    }
    free(g->prog->order_b);
    g->prog->order_b = order;
    g->prog->n_b = out;
    if (g->prog->cap_order < g->n_nodes) {   /* keep order_w as large as order_b */
        int *w = realloc(g->prog->order_w, (size_t)g->n_nodes * sizeof *w);
        if (!w) { mt__graph_error(g, MT_ENOMEM, "out of memory placing the recomputation"); goto done; }
        g->prog->order_w = w;
    }
    g->prog->cap_order = g->n_nodes;
done:
    free(block);
    free(producer);
    free(escapes);
    free(viewed);
    free(copy);
    free(sites);
}

/* ======================================================================== */
/* W beside B (mt_compile_opts.interleave_w)                                 */
/* ======================================================================== */

/* A W node reads gradients that B nodes write (the last contribution is the
 * one to wait for), values of the forward or of the recomputation, and what
 * earlier W nodes wrote (a gradient its reduction reads): placed after the
 * last B writer of any of its inputs and after the W node before it, it
 * reads what it read in its own phase. Nothing in B reads what W writes. */
void mt__interleave_w(mt_graph *g) {
    if (g->status != MT_OK || g->prog->n_w == 0) return;
    int *last_write = malloc((size_t)g->n_tensors * sizeof *last_write);
    int *order = malloc((size_t)(g->prog->n_b + g->prog->n_w) * sizeof *order);
    if (!last_write || !order) {
        free(last_write);
        free(order);
        mt__graph_error(g, MT_ENOMEM, "out of memory interleaving the W nodes");
        return;
    }
    for (int i = 0; i < g->n_tensors; i++) last_write[i] = -1;
    for (int j = 0; j < g->prog->n_b; j++) {
        const mt_op_call *c = &g->nodes[g->prog->order_b[j]].call;
        last_write[mt__storage_root(c->out)->id] = j;
        if (c->out2) last_write[mt__storage_root(c->out2)->id] = j;
    }
    int out = 0, w = 0;
    for (int j = -1; j < g->prog->n_b; j++) {
        if (j >= 0) order[out++] = g->prog->order_b[j];
        for (; w < g->prog->n_w; w++) {
            const mt_op_call *c = &g->nodes[g->prog->order_w[w]].call;
            int ready = -1;
            for (int k = 0; k < c->n_in; k++) {
                int at = last_write[mt__storage_root(c->in[k])->id];
                if (at > ready) ready = at;
            }
            if (ready > j) break;
            order[out++] = g->prog->order_w[w];
        }
    }
    for (; w < g->prog->n_w; w++) order[out++] = g->prog->order_w[w];
    memcpy(g->prog->order_b, order, (size_t)out * sizeof *order);   /* room for every node */
    g->prog->n_b = out;
    g->prog->n_w = 0;
    free(order);
    free(last_write);
}
