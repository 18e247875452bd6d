/*
 * ckpt_mesh.c — checkpoints on a mesh that splits the parameters (fsdp or
 * tensor axes larger than 1). A checkpoint holds whole tensors, the ones a
 * one-device run holds, so that any layout loads what any other wrote; on
 * such a mesh every device holds only its block of each parameter and of its
 * AdamW moments.
 *
 * The route goes through a "host twin": the model built and compiled without
 * a mesh (one device, batch B=1 so that its activations stay small) plus an
 * optimizer. Saving gathers every parameter and both moments, in parameter
 * order on every device (the collectives must match), into the twin on the
 * process that holds device 0, which then writes it with the one-device
 * savers: the bytes are those a one-device run with the same values writes.
 * Loading reads the file into a twin on every process (each MPI rank reads
 * it itself; threads share one), and every device copies its block out.
 *
 * A pipeline (a pipe axis) also goes this way: each device holds the
 * parameters of its chunks only, each chunk a graph with its optimizer.
 * Saving, every device gathers its chunks' parameters over the other axes
 * as above; device 0 (pipe rank 0) writes its own into the twin, and the
 * first device of every other pipe rank (its other coordinates 0) sends
 * the names of its parameters, then each one's three arrays, to device 0
 * (mt_send over the pipe axis), which puts them into the twin by name. The
 * tied embedding arrives twice, equal. Loading, every device puts into
 * each of its chunks what the twin holds under those names.
 *
 * Every array here (parameters, moments, the gather's scratch) is a buffer
 * of its graph's backend, handed to comm's gathers, puts and sends, which
 * move the backend's memory (ops/backend_impl.h); only the one-device
 * savers and loaders copy values out and in (io/backend_io.c).
 *
 * Memory: the twin is a whole copy of the model on one process (parameters,
 * their gradients, m and v: four times the parameters' size), built on the
 * first save or load and kept for later saves where device 0 lives.
 */
#include "graph/tensor_data.h"
#include "train/train_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* The host twin                                                             */
/* ======================================================================== */

mt_status mt__ckpt_twin(mt_trainer *tr) {
    if (tr->twin_g) return MT_OK;
    mt_train_config c = tr->cfg;
    c.B = 1;       /* the parameters do not depend on the batch: keep activations small */
    c.accum = 1;
    mt_tensor *in = NULL, *target = NULL;
    mt_status s = mt__train_make_graph(tr->m, &c, NULL, 1.0f, false, &tr->twin_g, &in, &target);
    if (s == MT_OK) s = mt_optim_create(tr->twin_g, &c.optim, &tr->twin_opt);
    if (s != MT_OK) {
        mt__ckpt_twin_free(tr);
        return mt_fail_wrap(s, "building the one-device copy of the model that checkpoints of "
                            "mesh '%s' go through", tr->cfg.mesh);
    }
    return MT_OK;
}

void mt__ckpt_twin_free(mt_trainer *tr) {
    mt_optim_free(tr->twin_opt);
    mt_graph_free(tr->twin_g);
    tr->twin_opt = NULL;
    tr->twin_g = NULL;
}

/* ======================================================================== */
/* One parameter: where its whole tensor lives in the twin                   */
/* ======================================================================== */

typedef struct {
    mt_tensor  *local;              /* the device's parameter (a block, or whole) */
    mt_sharding sh;                 /* its sharding over the mesh */
    int         ndim;
    int64_t     shape[MT_MAX_DIMS]; /* the global shape */
    int64_t     numel;              /* of the global tensor */
    float      *whole[3];           /* the twin's parameter, m and v (moments may be NULL):
                                       buffers of the twin's backend */
} param_pair;

/* Pairs the device's parameter i with the twin's by name and checks that
 * its local size is the block of the global shape its sharding says. */
static mt_status pair_param(mt_trainer *tr, mt_graph *g, mt_ctx *ctx, int i, param_pair *p) {
    memset(p, 0, sizeof *p);
    p->local = mt_graph_param_at(g, i);
    const char *name = mt_tensor_name(p->local);
    int j = i;   /* the same order is expected; searched for if not */
    int n_twin = mt_graph_n_params(tr->twin_g);
    if (j >= n_twin || strcmp(mt_tensor_name(mt_graph_param_at(tr->twin_g, j)), name) != 0)
        for (j = 0; j < n_twin; j++)
            if (strcmp(mt_tensor_name(mt_graph_param_at(tr->twin_g, j)), name) == 0) break;
    if (j == n_twin)
        return mt_fail(MT_EINTERNAL, "parameter '%s' of device %d has no twin in the one-device "
                       "model the checkpoint goes through", name, mt_ctx_device(ctx));
    mt_tensor *whole = mt_graph_param_at(tr->twin_g, j);
    p->sh = mt_tensor_sharding(p->local);
    p->ndim = mt_tensor_ndim(whole);
    p->numel = mt_tensor_numel(whole);
    for (int k = 0; k < p->ndim; k++) p->shape[k] = mt_tensor_dim(whole, k);
    int64_t lshape[MT_MAX_DIMS], lnumel = 1;
    mt_status s = mt_sharding_local_shape(mt_ctx_mesh(ctx), &p->sh, p->ndim, p->shape, lshape);
    if (s != MT_OK) return mt_fail_wrap(s, "parameter '%s'", name);
    for (int k = 0; k < p->ndim; k++) lnumel *= lshape[k];
    if (lnumel != mt_tensor_numel(p->local))
        return mt_fail(MT_EINTERNAL, "parameter '%s' holds %lld elements on device %d, but its "
                       "sharding makes blocks of %lld", name,
                       (long long)mt_tensor_numel(p->local), mt_ctx_device(ctx), (long long)lnumel);
    p->whole[0] = mt__tensor_buffer(whole);
    p->whole[1] = mt_optim_moment(tr->twin_opt, j, 1);
    p->whole[2] = mt_optim_moment(tr->twin_opt, j, 2);
    return MT_OK;
}

/* The device's array k of parameter i: 0 the parameter, 1 m, 2 v (buffers
 * of its graph's backend). */
static float *local_array(mt_optim *opt, const param_pair *p, int i, int k) {
    return k == 0 ? mt__tensor_buffer(p->local) : mt_optim_moment(opt, i, k);
}

/* The device's graphs holding parameters, and their optimizers: a
 * pipeline's chunks, else its one graph. Returns how many. */
static int dev_graphs(mt__train_dev *d, mt_graph **gs, mt_optim **os) {
    if (!d->pipe) {
        gs[0] = d->g;
        os[0] = d->opt;
        return 1;
    }
    int n = 0;
    for (; n < MT_PIPE_MAX_CHUNKS && mt__train_pipe_graph(d, n); n++) {
        gs[n] = mt__train_pipe_graph(d, n);
        os[n] = mt__train_pipe_optim(d, n);
    }
    return n;
}

/* ======================================================================== */
/* Gather (save) and put (load)                                              */
/* ======================================================================== */

/* What this process did before the launch (building or loading its twin):
 * a failure is raised inside the launch, so that the peers stop with it
 * (MT_EABORTED) instead of waiting for a device that never comes. */
typedef struct {
    mt_status s;
    char      msg[1024];
    int       steps;   /* put: the optimizer step count to set; < 0 leaves it */
} prior;

static void prior_set(prior *p, mt_status s) {
    p->s = s;
    if (s != MT_OK) snprintf(p->msg, sizeof p->msg, "%s", mt_errmsg());
}

/* Parameter i of a device that has no twin: its global shape from the local
 * one and the sharding (the shape device 0 finds in its twin). */
static void pair_local(mt_graph *g, mt_ctx *ctx, int i, param_pair *p) {
    const mt_mesh *mesh = mt_ctx_mesh(ctx);
    memset(p, 0, sizeof *p);
    p->local = mt_graph_param_at(g, i);
    p->sh = mt_tensor_sharding(p->local);
    p->ndim = mt_tensor_ndim(p->local);
    p->numel = 1;
    for (int k = 0; k < p->ndim; k++) {
        p->shape[k] = mt_tensor_dim(p->local, k);
        for (int a = 0; a < mt_mesh_ndim(mesh); a++)
            if (p->sh.dim_axes[k] & (1u << a))
                p->shape[k] *= mt_mesh_axis_size(mesh, mt_mesh_axis_name(mesh, a));
        p->numel *= p->shape[k];
    }
}

/* A pipeline: the first device of each pipe rank, its other coordinates
 * all 0 (it holds the whole parameters of its chunks after the gathers);
 * *rank gets its pipe rank. Off a pipeline, false. */
static bool pipe_sender(mt__train_dev *d, mt_ctx *ctx, mt_axes *pipe, int *rank) {
    if (!d->pipe || mt_ctx_axes(ctx, "pipe", pipe) != MT_OK) return false;
    const mt_mesh *mesh = mt_ctx_mesh(ctx);
    mt_axes others = {0};
    for (int a = 0; a < mt_mesh_ndim(mesh); a++)
        if (a != pipe->axis[0]) others.axis[others.n++] = (uint8_t)a;
    *rank = mt_axis_index(ctx, *pipe);
    return others.n == 0 || mt_axis_index(ctx, others) == 0;
}

/* The names of a device's chunks' parameters, MT_MAX_NAME bytes each, and
 * then each one's arrays (parameter, m, v; a missing moment sent as
 * nothing), from pipe rank `rank` to device 0 over the pipe axis. */
enum { TAG_NAMES = 0, TAG_DATA = 1 };
/* a name's bytes, sent as 4-byte words */
#define NAME_WORDS (MT_MAX_NAME / 4)
_Static_assert(MT_MAX_NAME % 4 == 0, "names travel as whole 4-byte words");

static mt_status send_whole(mt_ctx *ctx, mt_axes pipe, const float *whole, int64_t numel) {
    return mt_send(ctx, pipe, whole, (size_t)numel, MT_F32, 0, TAG_DATA);
}

/* Device 0: receives pipe rank r's parameters into the twin by name. */
static mt_status recv_rank(mt_trainer *tr, mt_ctx *ctx, mt_axes pipe, int r) {
    int n = 0;
    mt_status s = mt_recv(ctx, pipe, &n, 1, MT_I32, r, TAG_NAMES);
    char *names = s == MT_OK ? malloc((size_t)(n > 0 ? n : 1) * MT_MAX_NAME) : NULL;
    if (s == MT_OK && !names) s = mt_fail(MT_ENOMEM, "out of memory for pipe rank %d's names", r);
    if (s == MT_OK) s = mt_recv(ctx, pipe, names, (size_t)n * NAME_WORDS, MT_I32, r, TAG_NAMES);
    for (int i = 0; i < n && s == MT_OK; i++) {
        const char *name = names + (size_t)i * MT_MAX_NAME;
        int j = 0, n_twin = mt_graph_n_params(tr->twin_g);
        while (j < n_twin && strcmp(mt_tensor_name(mt_graph_param_at(tr->twin_g, j)), name)) j++;
        if (j == n_twin) {
            s = mt_fail(MT_EINTERNAL, "pipe rank %d sent parameter '%s', which the one-device "
                        "model does not have", r, name);
            break;
        }
        mt_tensor *whole = mt_graph_param_at(tr->twin_g, j);
        float *dst[3] = {mt__tensor_buffer(whole), mt_optim_moment(tr->twin_opt, j, 1),
                         mt_optim_moment(tr->twin_opt, j, 2)};
        for (int k = 0; k < 3 && s == MT_OK; k++)
            if (dst[k]) s = mt_recv(ctx, pipe, dst[k], (size_t)mt_tensor_numel(whole), MT_F32, r,
                                    TAG_DATA);
    }
    free(names);
    return s == MT_OK ? MT_OK : mt_fail_wrap(s, "receiving pipe rank %d's parameters", r);
}

/* Every device: the whole parameters and moments of each of its graphs,
 * gathered in parameter order (the same on every device of a group, so the
 * collectives match); device 0 gathers into the twin, the others into
 * scratch, which a pipe rank's sender then sends to device 0. */
static mt_status gather_dev(mt_trainer *tr, mt__train_dev *d, mt_ctx *ctx, void *arg) {
    const bool dev0 = mt_ctx_device(ctx) == 0;
    const prior *before = arg;
    if (dev0 && before->s != MT_OK) return mt_fail(before->s, "%s", before->msg);
    mt_graph *gs[MT_PIPE_MAX_CHUNKS];
    mt_optim *os[MT_PIPE_MAX_CHUNKS];
    const int n_g = dev_graphs(d, gs, os);
    mt_axes pipe = {0};
    int rank = 0;
    const bool sends = !dev0 && pipe_sender(d, ctx, &pipe, &rank);
    float *scratch = NULL;
    if (!dev0) {
        int64_t biggest = 0;
        for (int q = 0; q < n_g; q++)
            for (int i = 0; i < mt_graph_n_params(gs[q]); i++) {
                param_pair p;
                pair_local(gs[q], ctx, i, &p);
                if (p.numel > biggest) biggest = p.numel;
            }
        mt_status st = mt_backend_alloc(mt__graph_backend(gs[0]),
                                        (size_t)biggest * sizeof(float), (void **)&scratch);
        if (st != MT_OK)
            return mt_fail_wrap(st, "a %lld-float buffer gathering the checkpoint on device %d",
                                (long long)biggest, mt_ctx_device(ctx));
    }
    mt_status s = MT_OK;
    if (sends) {   /* the names first, so that device 0 knows what comes */
        int n = 0;
        for (int q = 0; q < n_g; q++) n += mt_graph_n_params(gs[q]);
        char *names = calloc((size_t)(n > 0 ? n : 1), MT_MAX_NAME);
        if (!names) s = mt_fail(MT_ENOMEM, "out of memory for the parameters' names");
        for (int q = 0, at = 0; s == MT_OK && q < n_g; q++)
            for (int i = 0; i < mt_graph_n_params(gs[q]); i++, at++)
                snprintf(names + (size_t)at * MT_MAX_NAME, MT_MAX_NAME, "%s",
                         mt_tensor_name(mt_graph_param_at(gs[q], i)));
        if (s == MT_OK) s = mt_send(ctx, pipe, &n, 1, MT_I32, 0, TAG_NAMES);
        if (s == MT_OK) s = mt_send(ctx, pipe, names, (size_t)n * NAME_WORDS, MT_I32, 0, TAG_NAMES);
        free(names);
    }
    for (int q = 0; q < n_g && s == MT_OK; q++)
        for (int i = 0; i < mt_graph_n_params(gs[q]) && s == MT_OK; i++) {
            param_pair p;
            if (dev0) s = pair_param(tr, gs[q], ctx, i, &p);
            else pair_local(gs[q], ctx, i, &p);
            for (int k = 0; k < 3 && s == MT_OK; k++) {
                const float *local = local_array(os[q], &p, i, k);
                if (!local) continue;   /* no such moment: the same on every device */
                float *dst = dev0 ? p.whole[k] : scratch;
                if (!dst)
                    s = mt_fail(MT_EINTERNAL, "parameter '%s' has moment %d on the mesh but not "
                                "in the one-device model", mt_tensor_name(p.local), k);
                else
                    s = mt_shard_gather(ctx, &p.sh, local, p.ndim, p.shape, dst);
                if (s == MT_OK && sends) s = send_whole(ctx, pipe, dst, p.numel);
            }
            if (s != MT_OK)
                s = mt_fail_wrap(s, "gathering parameter '%s' for the checkpoint",
                                 mt_tensor_name(mt_graph_param_at(gs[q], i)));
        }
    mt_backend_free(mt__graph_backend(gs[0]), scratch);
    if (s == MT_OK && dev0 && d->pipe && pipe_sender(d, ctx, &pipe, &rank))
        for (int r = 1; r < mt_axis_size(ctx, pipe) && s == MT_OK; r++)
            s = recv_rank(tr, ctx, pipe, r);
    if (s == MT_OK && dev0) mt_optim_set_steps(tr->twin_opt, mt_optim_steps(os[0]));
    return s;
}

mt_status mt__ckpt_mesh_gather(mt_trainer *tr) {
    prior before = {.s = MT_OK, .steps = -1};
    if (mt__train_dev0(tr)) prior_set(&before, mt__ckpt_twin(tr));
    if (before.s != MT_OK && tr->launch.transport != MT_TRANSPORT_MPI) return before.s;
    return mt__train_run_devices(tr, gather_dev, &before);
}

/* Every device: its block of every parameter and moment, from the twin. */
static mt_status put_dev(mt_trainer *tr, mt__train_dev *d, mt_ctx *ctx, void *arg) {
    const prior *before = arg;
    if (before->s != MT_OK) return mt_fail(before->s, "%s", before->msg);
    const int steps = before->steps;
    mt_graph *gs[MT_PIPE_MAX_CHUNKS];
    mt_optim *os[MT_PIPE_MAX_CHUNKS];
    const int n_g = dev_graphs(d, gs, os);
    mt_status s = MT_OK;
    for (int q = 0; q < n_g && s == MT_OK; q++) {
        for (int i = 0; i < mt_graph_n_params(gs[q]) && s == MT_OK; i++) {
            param_pair p;
            s = pair_param(tr, gs[q], ctx, i, &p);
            for (int k = 0; k < 3 && s == MT_OK; k++) {
                float *local = local_array(os[q], &p, i, k);
                if (!local || !p.whole[k]) continue;
                s = mt_shard_put(ctx, &p.sh, p.whole[k], p.ndim, p.shape, local);
            }
            if (s != MT_OK) s = mt_fail_wrap(s, "putting parameter '%s' from the checkpoint",
                                             mt_tensor_name(mt_graph_param_at(gs[q], i)));
        }
        mt_graph_params_changed(gs[q]);
        if (s == MT_OK && steps >= 0) mt_optim_set_steps(os[q], steps);
    }
    return s;
}

mt_status mt__ckpt_mesh_put(mt_trainer *tr, mt_status loaded, int steps) {
    /* threads: no other process waits; the failure goes back as it is */
    if (loaded != MT_OK && tr->launch.transport != MT_TRANSPORT_MPI) return loaded;
    prior before = {.s = MT_OK, .steps = steps};
    prior_set(&before, loaded);
    return mt__train_run_devices(tr, put_dev, &before);
}
