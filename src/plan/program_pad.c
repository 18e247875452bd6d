/*
 * program_pad.c — the parameters a program keeps whole because its storage
 * axes divide none of their dims, and the same program as the frameworks
 * that pad run it.
 *
 * meshtrain's partitioner stores a parameter split over the storage axes
 * (fsdp; data under ZeRO) on the first dim they divide, and keeps one that
 * none divides whole on every device (train/presets.c's shard_fsdp): its
 * gradient is then all-reduced as data parallelism's and the optimizer
 * steps all of it. DeepSpeed (stage3.py's flat partitions: each rank holds
 * ceil(numel / N) elements, the last padded) and FSDP2 (dim 0 padded to a
 * multiple of N) split every parameter whatever its size. Under their
 * conventions the planner times such a parameter as they run it: gathered
 * over the storage axes where a split one would be (N x the padded share
 * on the wire), its gradient reduce-scattered over them (as many), the
 * optimizer over the share. The trainer's own program (the meshtrain
 * convention) is left as it runs.
 *
 *   uses:  F  [gather u] reader(u) ...   B  [gather u] reader(u) ...
 *          W  all-reduce(grad u) over A  ->  [all-reduce over A \ S]
 *                                            reduce-scatter over S
 *   (S the storage axes; A \ S the batch axes that do not store, as an
 *    HSDP layout reduces its split parameters' gradients)
 */
#include "plan/plan_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The devices of the mesh axes in `bits`. */
static int64_t axes_parts(const mt_mesh *mesh, uint32_t bits) {
    int64_t n = 1;
    for (int a = 0; a < mt_mesh_ndim(mesh); a++)
        if (bits & (1u << a)) n *= mt_mesh_axis_size(mesh, mt_mesh_axis_name(mesh, a));
    return n;
}

/* One unsplit parameter while the nodes are walked. */
typedef struct {
    const mt_tensor *t, *grad;
    int64_t          numel, rows;   /* whole over the storage axes; FSDP2's share */
    unsigned char    seen;          /* phases whose first reader was met: 1 F, 2 B, 4 W */
} unsplit;

/* A tensor that is an unsplit parameter or a copy of one (a pvary, a cast,
 * a view: a node of one input and as many elements), sorted by address. */
typedef struct {
    const mt_tensor *t;
    int              of;    /* its unsplit parameter */
} alias;

static int by_tensor(const void *a, const void *b) {
    const uintptr_t x = (uintptr_t)((const alias *)a)->t, y = (uintptr_t)((const alias *)b)->t;
    return (x > y) - (x < y);
}

/* The unsplit parameter t is (a copy of), or -1. */
static int find(const alias *keys, int n, const mt_tensor *t) {
    const alias key = {.t = t};
    const alias *at = n > 0 ? bsearch(&key, keys, (size_t)n, sizeof *keys, by_tensor) : NULL;
    return at ? at->of : -1;
}

/* Adds t as a copy of parameter `of` to keys (n of cap), in order. */
static void add(alias *keys, int *n, int cap, const mt_tensor *t, int of) {
    int i = *n;
    if (i >= cap || find(keys, *n, t) >= 0) return;
    while (i > 0 && (uintptr_t)keys[i - 1].t > (uintptr_t)t) {
        keys[i] = keys[i - 1];
        i--;
    }
    keys[i] = (alias){.t = t, .of = of};
    (*n)++;
}

/* p's counts of the unsplit parameters (plan_impl.h), the largest named;
 * each appended to list (n so far) when list is not NULL. */
static void shares(const mt_graph *g, const mt_mesh *mesh, uint32_t storage, int64_t n_dev,
                   mt__plan_program *p, unsplit *list, int *n) {
    for (int i = 0; i < mt_graph_n_params(g); i++) {
        const mt_tensor *t = mt_graph_param_at(g, i);
        const mt_sharding sh = mt_tensor_sharding(t);
        const int nd = mt_tensor_ndim(t);
        int64_t dims[MT_MAX_DIMS] = {1}, numel = 1;   /* before the storage split */
        bool split = false;
        for (int d = 0; d < nd; d++) {
            const uint32_t b = sh.dim_axes[d] & storage;
            dims[d] = mt_tensor_dim(t, d) * (b ? axes_parts(mesh, b) : 1);
            split |= b != 0;
            numel *= dims[d];
        }
        /* FSDP2 splits dim 0 of the parameter as torchtitan's models hold
           it, 2-D (out, in) weights: a stacked (3, C, C) is its (3C, C) */
        const int64_t last = nd > 1 && dims[nd - 1] > 0 ? dims[nd - 1] : 1, r = numel / last;
        const int64_t rows = (r + n_dev - 1) / n_dev * last;
        if (split) {
            p->rows_pad_elems += rows - mt_tensor_numel(t);
            continue;
        }
        p->unsplit_elems += numel;
        p->unsplit_zero_elems += (numel + n_dev - 1) / n_dev;
        p->unsplit_rows_elems += rows;
        if (list) list[(*n)++] = (unsplit){.t = t, .grad = mt_tensor_grad((mt_tensor *)t),
                                           .numel = numel, .rows = rows};
        if (numel <= p->unsplit_max_elems) continue;
        p->unsplit_max_elems = numel;
        char shape[48] = "";
        for (int d = 0, k = 0; d < nd && k < (int)sizeof shape; d++)
            k += snprintf(shape + k, sizeof shape - (size_t)k, "%s%lld", d ? ", " : "",
                          (long long)dims[d]);
        /* no axis names: layouts that split over other axes of as many
           devices share the program (cache.c); the verdict names them */
        snprintf(p->unsplit_what, sizeof p->unsplit_what, "'%.32s' (%.28s)", mt_tensor_name(t),
                 shape);
    }
}

/* Appends a use of u to p's list (room for every node and parameter), param its id
 * (mt__plan_unsplit_use.param). */
static void note(mt__plan_program *p, int node, bool reduce, const unsplit *u, int64_t n_dev,
                 int param) {
    p->unsplit_uses[p->n_unsplit_uses++] = (mt__plan_unsplit_use){
        .node = node, .reduce = reduce, .numel = u->numel, .param = param,
        .flat = (u->numel + n_dev - 1) / n_dev * n_dev, .rows = u->rows * n_dev,
        .width = (unsigned char)mt_dtype_size(mt_tensor_dtype(u->t))};
}

mt_status mt__plan_program_unsplit(const mt_graph *g, const mt_mesh *mesh, uint32_t storage,
                                   bool once, bool reshard, mt__plan_program *p) {
    const int64_t n_dev = axes_parts(mesh, storage);
    if (n_dev <= 1) return MT_OK;
    for (int a = 0; a < mt_mesh_ndim(mesh); a++)
        if (storage & (1u << a)) p->storage_axes.axis[p->storage_axes.n++] = (uint8_t)a;
    const int np = mt_graph_n_params(g), cap = 4 * np + 1;
    p->unsplit_once = once;
    unsplit *list = calloc((size_t)np + 1, sizeof *list);
    alias *keys = calloc((size_t)cap, sizeof *keys);
    alias *grads = calloc((size_t)np + 1, sizeof *grads);
    if (!list || !keys || !grads) {
        free(list), free(keys), free(grads);
        return mt_fail(MT_ENOMEM, "out of memory for %d parameters' shares", np);
    }
    int n = 0, n_keys = 0, n_grads = 0;
    shares(g, mesh, storage, n_dev, p, list, &n);
    mt_status s = MT_OK;
    if (n > 0) {
        /* each parameter's reader of F, B and W at most, and its reduction */
        p->unsplit_uses = calloc(4 * (size_t)n + 1, sizeof *p->unsplit_uses);
        if (!p->unsplit_uses) s = mt_fail(MT_ENOMEM, "out of memory for %d parameters' uses", n);
        for (int i = 0; i < n; i++) {
            add(keys, &n_keys, cap, list[i].t, i);
            if (list[i].grad) add(grads, &n_grads, np + 1, list[i].grad, i);
        }
    }
    for (int i = 0; n > 0 && s == MT_OK && i < mt_graph_n_nodes(g); i++) {
        mt_node_info in;
        s = mt_graph_node(g, i, &in);
        if (s != MT_OK) break;
        if (in.collective) {
            const int u = strcmp(in.op, "psum") == 0 ? find(grads, n_grads, in.out) : -1;
            if (u >= 0 && in.phase != 'F' && p->n_unsplit_uses < 4 * n)
                note(p, i, true, &list[u], n_dev, np + u);
            continue;
        }
        const unsigned char bit = in.phase == 'F' ? 1 : in.phase == 'B' ? 2 : 4;
        for (int k = 0; k < in.n_in; k++) {
            const int u = find(keys, n_keys, in.in[k]);
            if (u < 0) continue;
            /* the forward's copies (pvary, a cast) are what the backward reads */
            if (in.n_in == 1 && in.phase == 'F' &&
                mt_tensor_numel(in.out) == mt_tensor_numel(in.in[0]))
                add(keys, &n_keys, cap, in.stored, u);
            if ((list[u].seen & bit) || (bit != 1 && !reshard) || p->n_unsplit_uses >= 4 * n)
                continue;
            list[u].seen |= bit;   /* without reshard the forward's gathered copy is kept */
            note(p, i, false, &list[u], n_dev, np + u);
        }
    }
    free(list), free(keys), free(grads);
    return s;
}

/* axes less the storage axes. */
static mt_axes without(mt_axes axes, const mt_axes *storage) {
    mt_axes r = {0};
    for (int i = 0; i < axes.n; i++) {
        bool stored = false;
        for (int j = 0; j < storage->n; j++) stored |= axes.axis[i] == storage->axis[j];
        if (!stored) r.axis[r.n++] = axes.axis[i];
    }
    return r;
}

/* Whether axes holds every storage axis. */
static bool holds(mt_axes axes, const mt_axes *storage) {
    return without(*storage, &axes).n == 0;
}

mt_status mt__plan_program_pad_unsplit(mt__plan_program *p, mt__plan_pad pad) {
    mt__plan_unsplit_use *uses = p->unsplit_uses;
    const int n_uses = p->n_unsplit_uses;
    p->unsplit_uses = NULL;
    p->n_unsplit_uses = 0;
    if (pad == MT__PLAN_PAD_NONE || n_uses == 0) {
        free(uses);
        return MT_OK;
    }
    int more = 0;   /* nodes added: the gathers, the non-storing axes' all-reduces */
    for (int u = 0; u < n_uses; u++) {
        const mt__plan_node *n = &p->nodes[uses[u].node];
        more += !uses[u].reduce ||
                (holds(n->axes, &p->storage_axes) && without(n->axes, &p->storage_axes).n > 0);
    }
    mt__plan_node *nodes = malloc(((size_t)p->n_nodes + (size_t)more + 1) * sizeof *nodes);
    if (!nodes) {
        free(uses);
        return mt_fail(MT_ENOMEM, "out of memory for a program of %d nodes",
                       p->n_nodes + more);
    }
    int k = 0;
    for (int i = 0, u = 0; i < p->n_nodes; i++) {
        const mt__plan_node *at = &p->nodes[i];
        bool reduce = false;
        double padded = 0;
        for (; u < n_uses && uses[u].node == i; u++) {
            const mt__plan_unsplit_use *x = &uses[u];
            const double elems = (double)(pad == MT__PLAN_PAD_ROWS ? x->rows : x->flat);
            if (x->reduce) {
                reduce = true, padded = elems / (double)x->numel;
                continue;
            }
            /* the gather a split parameter has before its reader (program.c's
               param_gather), of the padded whole */
            nodes[k++] = (mt__plan_node){
                .phase = at->phase, .cls = MT__PN_COLLECTIVE, .kind = MT__PC_ALL_GATHER,
                .axes = p->storage_axes, .comm_bytes = elems * x->width,
                .bytes = elems * x->width, .wire_width = x->width, .param_gather = true,
                .once = p->unsplit_once, .block = at->block, .live_bytes = at->live_bytes,
                .param = x->param};
        }
        nodes[k] = *at;
        if (!reduce || !holds(at->axes, &p->storage_axes)) {
            k++;
            continue;
        }
        /* the whole gradient's all-reduce over the axes that do not store
           first (HSDP's order), then the padded reduce-scatter */
        const mt_axes rest = without(at->axes, &p->storage_axes);
        if (rest.n > 0) {
            nodes[k].axes = rest;
            nodes[k].once = p->unsplit_once;
            nodes[++k] = *at;
        }
        mt__plan_node *rs = &nodes[k++];
        rs->kind = MT__PC_REDUCE_SCATTER;
        rs->axes = p->storage_axes;
        rs->comm_bytes *= padded;
        rs->bytes = 2 * rs->comm_bytes;
        rs->once = p->unsplit_once;   /* as the split ones' (kept whole for the step) */
    }
    free(uses);
    free(p->nodes);
    p->nodes = nodes;
    p->n_nodes = k;
    p->pad_unstored_elems = p->unsplit_elems - (pad == MT__PLAN_PAD_ROWS ? p->unsplit_rows_elems
                                                                          : p->unsplit_zero_elems);
    return MT_OK;
}
