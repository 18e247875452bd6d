/*
 * moe_load.c — the experts' load of a training step (issue 42;
 * ../shared/MOE.md §2): each MoE layer's counts of (token, slot) pairs per
 * expert, read from the router's ids after each microbatch's forward,
 * summed over the microbatches and over the devices that split the
 * routers' rows (the axes read from the nodes' types),
 * and the step's MaxVio, the largest over the layers; the router losses
 * (aux + z) the loss includes, read from the moe_router_loss nodes'
 * scalars, apart; and, from the same summed counts, the aux-loss-free
 * bias's move after the optimizer's step; with a capacity, the share of the
 * pairs its moe_capacity nodes dropped. The trainer's step (trainer.c)
 * calls it; the metrics line shows MaxVio, the router losses and the drops
 * (train.h's mt_step_report.moe_maxvio, moe_aux, moe_dropped).
 */
#include "train/train_impl.h"
#include "mesh/mesh_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Room for n counts in c (zeroed when grown). */
static mt_status room(mt__moe_load *c, int64_t n) {
    if (n <= c->cap) return MT_OK;
    int32_t *v = realloc(c->counts, (size_t)n * sizeof *v);
    if (!v) return mt_fail(MT_ENOMEM, "out of memory for the experts' counts");
    memset(v + c->cap, 0, (size_t)(n - c->cap) * sizeof *v);
    c->counts = v, c->cap = n;
    return MT_OK;
}

/* The int32 ids of t (*n, its numel, of them) read into c->ids, grown as
 * needed and kept for the next microbatch's reads. */
static mt_status read_ids(mt__moe_load *c, mt_tensor *t, int64_t *n) {
    *n = mt_tensor_numel(t);
    if (*n > c->ids_cap) {
        int32_t *v = realloc(c->ids, (size_t)*n * sizeof *v);
        if (!v) return mt_fail(MT_ENOMEM, "out of memory reading the router's ids");
        c->ids = v, c->ids_cap = *n;
    }
    return mt_tensor_read(t, c->ids, 0, *n);
}

/* The parameter t is read from: t itself, or the parameter a forward
 * node of g moved into t (a gather of its fsdp or ZeRO shards, a cast),
 * followed back through the nodes' first inputs; NULL if t comes from no
 * parameter. */
static mt_tensor *param_behind(mt_graph *g, mt_tensor *t) {
    const int n = mt_graph_n_nodes(g);
    for (int hop = 0; t && hop < 8; hop++) {
        if (mt_tensor_kind_of(t) == MT_PARAM) return t;
        mt_tensor *from = NULL;
        for (int i = 0; i < n && !from; i++) {
            mt_node_info info;
            if (mt_graph_node(g, i, &info) == MT_OK && info.phase == 'F' && info.n_in > 0 &&
                (info.out == t || info.stored == t))
                from = info.in[0];
        }
        t = from;
    }
    return NULL;
}

/* The forward's moe_route and moe_router_loss nodes of g into c->routes
 * and c->losses, and each router's bias parameter into c->bias (once). */
static mt_status find_routes(mt__moe_load *c, mt_graph *g) {
    const int n = mt_graph_n_nodes(g);
    const size_t room_n = (size_t)(n > 0 ? n : 1);
    c->n_routes = c->n_losses = 0;
    c->n_caps = 0;
    c->routes = malloc(room_n * sizeof *c->routes);
    c->losses = malloc(room_n * sizeof *c->losses);
    c->caps = malloc(room_n * sizeof *c->caps);
    c->bias = calloc(room_n, sizeof *c->bias);
    if (!c->routes || !c->losses || !c->caps || !c->bias)
        return mt_fail(MT_ENOMEM, "out of memory for the router nodes");
    for (int i = 0; i < n; i++) {
        mt_node_info info;
        mt_status s = mt_graph_node(g, i, &info);
        if (s != MT_OK) return s;
        if (info.phase != 'F') continue;
        /* the axes each sum runs over, from the nodes' own types */
        const mt_sharding sh = mt_tensor_sharding(info.out);
        uint32_t rows = 0;
        for (int d = 0; d + 1 < mt_tensor_ndim(info.out); d++) rows |= sh.dim_axes[d];
        if (strcmp(info.op, "moe_route") == 0) c->count_axes |= rows;
        if (strcmp(info.op, "moe_router_loss") == 0) c->loss_axes |= sh.partial_axes;
        if (strcmp(info.op, "moe_capacity") == 0) c->drop_axes |= rows;
        if (strcmp(info.op, "moe_route") == 0) {
            if (info.n_in > 1) {
                c->bias[c->n_routes] = param_behind(g, info.in[1]);
                if (!c->bias[c->n_routes])
                    return mt_fail(MT_EINTERNAL, "the bias '%s' of router %d is no parameter's "
                                   "value; the trainer cannot move it",
                                   mt_tensor_name(info.in[1]), c->n_routes);
            }
            c->routes[c->n_routes++] = i;
        }
        if (strcmp(info.op, "moe_router_loss") == 0) c->losses[c->n_losses++] = i;
        if (strcmp(info.op, "moe_capacity") == 0) c->caps[c->n_caps++] = i;
    }
    return MT_OK;
}

mt_status mt__moe_load_add(mt__moe_load *c, mt_graph *g) {
    mt_status s;
    if (!c->routes && (s = find_routes(c, g)) != MT_OK) return s;
    if (c->summed) {   /* the first microbatch of a step: the last one's counts are done */
        memset(c->counts, 0, (size_t)c->n * sizeof *c->counts);
        c->drop[0] = c->drop[1] = 0;
        c->summed = false;
    }
    int64_t at = 0;
    for (int r = 0; r < c->n_routes; r++) {
        mt_node_info info;
        if ((s = mt_graph_node(g, c->routes[r], &info)) != MT_OK) return s;
        const mt_tensor *logits = info.in[0];
        const int64_t E = mt_tensor_dim(logits, mt_tensor_ndim(logits) - 1);
        int64_t ne;
        if ((s = room(c, at + E)) != MT_OK || (s = read_ids(c, info.out, &ne)) != MT_OK) return s;
        const int32_t *ids = c->ids;
        for (int64_t j = 0; j < ne; j++)
            if (ids[j] >= 0 && ids[j] < E) c->counts[at + ids[j]]++;
        c->E = E;
        at += E;
    }
    c->n = at;
    for (int r = 0; r < c->n_caps; r++) {   /* the pairs past a capacity: -1 */
        mt_node_info info;
        if ((s = mt_graph_node(g, c->caps[r], &info)) != MT_OK) return s;
        int64_t ne;
        if ((s = read_ids(c, info.out, &ne)) != MT_OK) return s;
        const int32_t *ids = c->ids;
        for (int64_t j = 0; j < ne; j++) c->drop[0] += ids[j] < 0;
        c->drop[1] += (int32_t)ne;
    }
    for (int r = 0; r < c->n_losses; r++) {   /* each a scalar, this microbatch's */
        mt_node_info info;
        float v = 0;
        if ((s = mt_graph_node(g, c->losses[r], &info)) != MT_OK ||
            (s = mt_tensor_read(info.out, &v, 0, 1)) != MT_OK)
            return s;
        c->aux += v;
    }
    c->aux_n++;
    return MT_OK;
}

mt_status mt__moe_load_maxvio(mt__moe_load *c, mt_ctx *ctx, double *out, double *aux) {
    *out = *aux = c->dropped = NAN;
    if (c->n == 0) return MT_OK;
    /* a device's router loss is its part of the batch's (a partial sum
       over the axes its type names): summed over them, a mean over the
       microbatches */
    float sum = (float)c->aux;
    const int n_mb = c->aux_n;
    c->aux = 0, c->aux_n = 0;
    if (ctx) {
        const mt_axes rows = mt__mesh_axes_of(c->count_axes);
        const mt_axes parts = mt__mesh_axes_of(c->loss_axes);
        const mt_axes drops = mt__mesh_axes_of(c->drop_axes);
        mt_status s = rows.n ? mt_all_reduce(ctx, rows, c->counts, (size_t)c->n, MT_I32,
                                             MT_REDUCE_SUM)
                             : MT_OK;
        if (s == MT_OK && parts.n) s = mt_all_reduce(ctx, parts, &sum, 1, MT_F32, MT_REDUCE_SUM);
        if (s == MT_OK && drops.n && c->n_caps)
            s = mt_all_reduce(ctx, drops, c->drop, 2, MT_I32, MT_REDUCE_SUM);
        if (s != MT_OK) return s;
    }
    c->dropped = c->n_caps && c->drop[1] ? (double)c->drop[0] / c->drop[1] : NAN;
    if (c->n_losses > 0 && n_mb > 0) *aux = sum / n_mb;
    double worst = 0;
    for (int64_t l = 0; l + c->E <= c->n; l += c->E) {
        const double v = mt_moe_load_maxvio(c->counts + l, c->E);
        worst = v > worst ? v : worst;
    }
    *out = worst;
    c->summed = true;
    return MT_OK;
}

mt_status mt__moe_load_pipe(mt__moe_load *loads, int n, const bool *last, mt_ctx *ctx,
                           mt_axes pipe, mt__moe_step *out) {
    double vio = -1;   /* none yet: no chunk here has a router */
    /* Σ router losses, those of chunks not the model's last, dropped pairs,
       pairs, chunks with a capacity */
    float sums[5] = {0};
    for (int i = 0; i < n; i++) {
        double v, a;
        mt_status s = mt__moe_load_maxvio(&loads[i], ctx, &v, &a);
        if (s != MT_OK) return s;
        if (isnan(v)) continue;
        vio = v > vio ? v : vio;
        if (!isnan(a)) {
            sums[0] += (float)a;
            if (!last[i]) sums[1] += (float)a;
        }
        sums[2] += (float)loads[i].drop[0];
        sums[3] += (float)loads[i].drop[1];
        sums[4] += loads[i].n_caps > 0;
    }
    float most = (float)vio;
    mt_status s = mt_all_reduce(ctx, pipe, sums, 5, MT_F32, MT_REDUCE_SUM);
    if (s == MT_OK) s = mt_all_reduce(ctx, pipe, &most, 1, MT_F32, MT_REDUCE_MAX);
    if (s != MT_OK) return s;
    const bool moe = most >= 0;
    out->maxvio = moe ? most : NAN;
    out->aux = moe ? sums[0] : NAN;
    out->aux_mid = sums[1];
    out->dropped = sums[4] > 0 && sums[3] > 0 ? (double)sums[2] / sums[3] : NAN;
    return MT_OK;
}

mt_status mt__moe_load_bias(mt__moe_load *c, mt_graph *g, mt_ctx *ctx, float gamma) {
    if (!(gamma > 0.0f) || !c->summed || c->n == 0) return MT_OK;
    const int64_t E = c->E;
    float *delta = malloc((size_t)E * 2 * sizeof *delta), *mine = delta + E;
    if (!delta) return mt_fail(MT_ENOMEM, "out of memory for the routers' bias update");
    mt_status s = MT_OK;
    bool changed = false;
    for (int r = 0; s == MT_OK && r < c->n_routes; r++) {
        mt_tensor *b = c->bias[r];
        if (!b) continue;
        /* Δb (E) from the step's global counts, the same on every device */
        memset(delta, 0, (size_t)E * sizeof *delta);
        mt_moe_bias_step(delta, c->counts + (int64_t)r * E, E, gamma);
        /* this device's block of it (whole off a mesh) onto its block of b */
        const int64_t n = mt_tensor_numel(b);
        const mt_sharding sh = mt_tensor_sharding(b);
        if (ctx) s = mt_shard_put(ctx, &sh, delta, 1, &E, mine);
        else memcpy(mine, delta, (size_t)E * sizeof *mine);
        float *v = malloc((size_t)n * sizeof *v);
        if (s == MT_OK && !v) s = mt_fail(MT_ENOMEM, "out of memory for bias '%s'",
                                          mt_tensor_name(b));
        if (s == MT_OK) s = mt_tensor_read(b, v, 0, n);
        for (int64_t i = 0; s == MT_OK && i < n; i++) v[i] += mine[i];
        if (s == MT_OK) s = mt_tensor_write(b, v, 0, n);
        free(v);
        changed = true;
    }
    free(delta);
    if (changed) mt_graph_params_changed(g);
    return s == MT_OK ? MT_OK : mt_fail_wrap(s, "moving the routers' aux-loss-free bias");
}

void mt__moe_load_free(mt__moe_load *c) {
    free(c->counts);
    free(c->routes);
    free(c->losses);
    free(c->caps);
    free(c->bias);
    free(c->ids);
    *c = (mt__moe_load){0};
}
