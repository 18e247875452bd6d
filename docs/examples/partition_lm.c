/*
 * partition_lm.c — the partitioner from C, end to end (docs/partitioner.md):
 * one global program of a tiny language model (embedding, a tensor-parallel
 * MLP, cross-entropy), partitioned for each device of a mesh of threads,
 * fed with int32 token ids, and its loss and gradients checked against the
 * same program on one device; then the same model written by hand in the
 * shard_map style, and explicit mode refusing an ambiguity until a reshard
 * decides it.
 *
 *   cc partition_lm.c $(pkg-config --cflags --libs meshtrain) -o partition_lm
 *   ./partition_lm
 */
#include <meshtrain.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 8, T = 4, V = 32, C = 16, H = 64 };   /* batch, time, vocabulary, width, hidden */

#define CHECK(call)                                                                      \
    do { mt_status s_ = (call); if (s_ != MT_OK) return s_; } while (0)

/* ---- 1. the global program: global shapes, no mesh in sight ---------------- */

/* loss = cross_entropy(gelu(wte[ids] · w1ᵀ) · w2ᵀ, targets); with `reshard`,
 * the logits are constrained to be replicated (explicit mode's way out). */
static mt_tensor *build(mt_graph *g, bool reshard) {
    const mt_init init = {MT_INIT_NORMAL, 0.5f};
    mt_tensor *ids = mt_input(g, "ids", MT_I32, 2, (int64_t[]){B, T});
    mt_tensor *targets = mt_input(g, "targets", MT_I32, 2, (int64_t[]){B, T});
    mt_tensor *wte = mt_param(g, "wte", 2, (int64_t[]){V, C}, init);
    mt_tensor *w1 = mt_param(g, "w1", 2, (int64_t[]){H, C}, init);
    mt_tensor *w2 = mt_param(g, "w2", 2, (int64_t[]){V, H}, init);
    mt_tensor *h = mt_gelu(g, mt_linear(g, mt_embedding(g, wte, ids), w1, NULL));  /* (B,T,H) */
    mt_tensor *logits = mt_linear(g, h, w2, NULL);                                  /* (B,T,V) */
    if (reshard) logits = mt_reshard(g, logits, &(mt_sharding){{0}, 0});
    return mt_cross_entropy(g, logits, targets, V, 1.0f / (B * T));
}

/* The batch every run sees, as global host arrays. */
static int32_t g_ids[B * T], g_targets[B * T];

/* ---- 2. annotate, partition, compile, feed, run: one device's side ---------- */

typedef struct {
    const char *mesh;        /* "data=2,tensor=2", ... */
    const char *specs[5];    /* partition specs of ids, targets, wte, w1, w2 */
    const char *gather;      /* axes over which parameters are stored split (FSDP) */
    mt_shard_mode mode;
    float      loss;         /* out: device 0's */
    float     *grads[3];     /* out: the global gradients of wte, w1, w2 */
} run;

static const char *const NAMES[5] = {"ids", "targets", "wte", "w1", "w2"};

static mt_status device(mt_ctx *ctx, void *arg) {
    run *r = arg;
    const mt_mesh *mesh = mt_ctx_mesh(ctx);
    mt_graph *global = mt_graph_create(), *local = NULL;
    mt_tensor *loss = build(global, false), *local_loss = NULL;
    CHECK(mt_graph_status(global));
    for (int k = 0; k < 5; k++) {   /* annotate the leaves */
        mt_sharding sh;
        CHECK(mt_sharding_parse(mesh, r->specs[k], 2, &sh));
        CHECK(mt_tensor_set_sharding(mt_graph_find(global, NAMES[k]), &sh));
    }
    mt_partition_opts opts = {.mode = r->mode};
    if (r->gather) CHECK(mt_mesh_axis_set(mesh, r->gather, &opts.gather_axes));
    mt_status s = mt_partition(global, loss, ctx, &opts, &local, &local_loss);
    if (s == MT_OK) s = mt_graph_compile(local, local_loss, &(mt_compile_opts){.seed = 7});
    /* feed: each device writes its block of the global batch */
    for (int k = 0; k < 2 && s == MT_OK; k++) {
        mt_tensor *t = mt_graph_find(local, NAMES[k]);
        mt_sharding sh = mt_tensor_sharding(t);
        int32_t block[B * T];
        s = mt_shard_put_typed(ctx, &sh, MT_I32, k ? g_targets : g_ids, 2, (int64_t[]){B, T},
                               block);
        if (s == MT_OK) s = mt_tensor_write(t, block, 0, mt_tensor_numel(t));
    }
    if (s == MT_OK) s = mt_graph_forward(local);
    if (s == MT_OK) s = mt_graph_backward(local);
    /* read: every device's block of each gradient, put back together */
    for (int k = 2; k < 5 && s == MT_OK; k++) {
        mt_tensor *p = mt_graph_find(local, NAMES[k]);
        mt_sharding sh = mt_tensor_sharding(p);
        int64_t shape[2] = {mt_tensor_global_dim(p, 0), mt_tensor_global_dim(p, 1)};
        s = mt_shard_gather(ctx, &sh, mt_tensor_f32(mt_tensor_grad(p)), 2, shape,
                            r->grads[k - 2]);   /* every device writes the same values */
    }
    if (s == MT_OK && mt_ctx_device(ctx) == 0) r->loss = mt_graph_loss(local);
    mt_graph_free(local);
    mt_graph_free(global);
    return s;
}

/* The same program compiled whole, on no mesh: the reference. */
static mt_status one_device(run *r) {
    mt_graph *g = mt_graph_create();
    mt_tensor *loss = build(g, false);
    CHECK(mt_graph_compile(g, loss, &(mt_compile_opts){.seed = 7}));
    memcpy(mt_tensor_i32(mt_graph_find(g, "ids")), g_ids, sizeof g_ids);
    memcpy(mt_tensor_i32(mt_graph_find(g, "targets")), g_targets, sizeof g_targets);
    CHECK(mt_graph_forward(g));
    CHECK(mt_graph_backward(g));
    r->loss = mt_graph_loss(g);
    for (int k = 2; k < 5; k++) {
        mt_tensor *p = mt_graph_find(g, NAMES[k]);
        memcpy(r->grads[k - 2], mt_tensor_f32(mt_tensor_grad(p)),
               (size_t)mt_tensor_numel(p) * sizeof(float));
    }
    mt_graph_free(g);
    return MT_OK;
}

static const int64_t NUMEL[3] = {V * C, H * C, V * H};

static double largest_difference(const run *a, const run *b) {
    double d = 0;
    for (int k = 0; k < 3; k++)
        for (int64_t i = 0; i < NUMEL[k]; i++)
            d = fmax(d, fabs((double)a->grads[k][i] - b->grads[k][i]));
    return d;
}

/* ---- 3. shard_map style: a device's program, written by hand --------------- */

/* Data parallel by hand on data=4: each device embeds its 2 rows of the
 * batch with a replicated table, and the loss is psummed. Nothing is
 * declared: the input varies over `data` by default, the parameter is
 * replicated, so the builder inserts pvary(wte) and wte's gradient sums
 * every device's share (the global gradient, as JAX's shard_map gives). */
static mt_status by_hand(mt_ctx *ctx, void *arg) {
    float *grad = arg;
    mt_axes data;
    CHECK(mt_ctx_axes(ctx, "data", &data));
    int P = mt_axis_size(ctx, data), r = mt_axis_index(ctx, data);
    mt_graph *g = mt_graph_create();
    CHECK(mt_graph_set_ctx(g, ctx));   /* bind first: variance is decided as ops are built */
    mt_tensor *ids = mt_input(g, "ids", MT_I32, 2, (int64_t[]){B / P, T});
    mt_tensor *targets = mt_input(g, "targets", MT_I32, 2, (int64_t[]){B / P, T});
    mt_tensor *wte = mt_param(g, "wte", 2, (int64_t[]){V, C}, (mt_init){MT_INIT_NORMAL, 0.5f});
    mt_tensor *w2 = mt_param(g, "w2", 2, (int64_t[]){V, C}, (mt_init){MT_INIT_NORMAL, 0.5f});
    mt_tensor *logits = mt_linear(g, mt_embedding(g, wte, ids), w2, NULL);
    mt_tensor *loss = mt_graph_psum(g, mt_cross_entropy(g, logits, targets, V, 1.0f / (B * T)),
                                    data);
    CHECK(mt_graph_compile(g, loss, &(mt_compile_opts){.seed = 7}));
    CHECK(mt_tensor_write(ids, g_ids + r * (B / P) * T, 0, (B / P) * T));
    CHECK(mt_tensor_write(targets, g_targets + r * (B / P) * T, 0, (B / P) * T));
    CHECK(mt_graph_forward(g));
    CHECK(mt_graph_backward(g));
    if (mt_ctx_device(ctx) == 0)
        memcpy(grad, mt_tensor_f32(mt_tensor_grad(wte)), sizeof(float) * V * C);
    mt_graph_free(g);
    return MT_OK;
}

/* The same model on one device, for by_hand's reference. */
static mt_status by_hand_reference(float *grad) {
    mt_graph *g = mt_graph_create();
    mt_tensor *ids = mt_input(g, "ids", MT_I32, 2, (int64_t[]){B, T});
    mt_tensor *targets = mt_input(g, "targets", MT_I32, 2, (int64_t[]){B, T});
    mt_tensor *wte = mt_param(g, "wte", 2, (int64_t[]){V, C}, (mt_init){MT_INIT_NORMAL, 0.5f});
    mt_tensor *w2 = mt_param(g, "w2", 2, (int64_t[]){V, C}, (mt_init){MT_INIT_NORMAL, 0.5f});
    mt_tensor *logits = mt_linear(g, mt_embedding(g, wte, ids), w2, NULL);
    CHECK(mt_graph_compile(g, mt_cross_entropy(g, logits, targets, V, 1.0f / (B * T)),
                           &(mt_compile_opts){.seed = 7}));
    memcpy(mt_tensor_i32(ids), g_ids, sizeof g_ids);
    memcpy(mt_tensor_i32(targets), g_targets, sizeof g_targets);
    CHECK(mt_graph_forward(g));
    CHECK(mt_graph_backward(g));
    memcpy(grad, mt_tensor_f32(mt_tensor_grad(wte)), sizeof(float) * V * C);
    mt_graph_free(g);
    return MT_OK;
}

/* ---- 4. explicit mode: refuse, then decide with a reshard ------------------- */

static mt_status explicit_device(mt_ctx *ctx, void *arg) {
    char *refusal = arg;
    const mt_mesh *mesh = mt_ctx_mesh(ctx);
    for (int with_reshard = 0; with_reshard < 2; with_reshard++) {
        mt_graph *global = mt_graph_create(), *local = NULL;
        mt_tensor *loss = build(global, with_reshard), *local_loss = NULL;
        const char *specs[5] = {"", "", "", "tensor", "_,tensor"};
        for (int k = 0; k < 5; k++) {
            mt_sharding sh;
            CHECK(mt_sharding_parse(mesh, specs[k], 2, &sh));
            CHECK(mt_tensor_set_sharding(mt_graph_find(global, NAMES[k]), &sh));
        }
        mt_status s = mt_partition(global, loss, ctx,
                                   &(mt_partition_opts){.mode = MT_SHARD_EXPLICIT}, &local,
                                   &local_loss);
        if (!with_reshard && mt_ctx_device(ctx) == 0)
            snprintf(refusal, 1024, "%s", s == MT_OK ? "(accepted)" : mt_errmsg());
        if (with_reshard && s != MT_OK) return s;
        mt_graph_free(local);
        mt_graph_free(global);
    }
    return MT_OK;
}

/* ---- main ------------------------------------------------------------------- */

int main(void) {
    for (int i = 0; i < B * T; i++) {   /* a fixed batch of token ids */
        g_ids[i] = (int32_t)((i * 7 + 3) % V);
        g_targets[i] = (int32_t)((i * 5 + 1) % V);
    }
    run runs[3] = {
        {.mesh = NULL},
        {.mesh = "data=2,tensor=2", .specs = {"data", "data", "", "tensor", "_,tensor"}},
        {.mesh = "fsdp=2,tensor=2", .specs = {"fsdp", "fsdp", "fsdp", "tensor", "_,tensor"},
         .gather = "fsdp"},
    };
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 3; k++) runs[i].grads[k] = calloc((size_t)NUMEL[k], sizeof(float));
    mt_status s = one_device(&runs[0]);
    printf("one device: loss %.6f\n", runs[0].loss);
    for (int i = 1; i < 3 && s == MT_OK; i++) {
        mt_launch_opts o = {.mesh = runs[i].mesh, .devices = 4};
        s = mt_launch(&o, device, &runs[i]);
        if (s == MT_OK)
            printf("%s: loss %.6f, largest gradient difference %.2e\n", runs[i].mesh,
                   runs[i].loss, largest_difference(&runs[i], &runs[0]));
    }
    float got[V * C], want[V * C];
    if (s == MT_OK) s = by_hand_reference(want);
    if (s == MT_OK) s = mt_launch(&(mt_launch_opts){.mesh = "data=4", .devices = 4}, by_hand, got);
    if (s == MT_OK) {
        double d = 0;
        for (int i = 0; i < V * C; i++) d = fmax(d, fabs((double)got[i] - want[i]));
        printf("shard_map, data=4, nothing declared: largest wte gradient difference %.2e\n", d);
    }
    char refusal[1024] = "";
    if (s == MT_OK)
        s = mt_launch(&(mt_launch_opts){.mesh = "tensor=2", .devices = 2}, explicit_device,
                      refusal);
    if (s == MT_OK) printf("explicit mode refused: %s\nexplicit mode with a reshard: accepted\n",
                           refusal);
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 3; k++) free(runs[i].grads[k]);
    if (s != MT_OK) {
        fprintf(stderr, "partition_lm: %s\n", mt_errmsg());
        return 1;
    }
    return 0;
}
