/*
 * cmd_explain_model.c — `meshtrain explain --model ...`: the partitioned
 * program of a whole model, as each device runs it.
 *
 * Every device of the mesh (threads of this process) builds the global
 * program, splits its batch over the mesh's "data" axis, partitions it and
 * compiles it, as `meshtrain train` does, but on the shape-only backend
 * (backend.h): the plan and its byte counts are the trainer's, and nothing
 * is allocated, so a 175B-parameter model on 1,024 devices fits in a few
 * hundred MB. With a pipe axis each device builds the pipeline chunks the
 * trainer gives it (mt_train_pipe_chunks: its stage's blocks, the embedding
 * with the first, the head with the last), and its memory is theirs.
 * MT_EXPLAIN_BACKEND=cpu compiles on the CPU backend instead (allocating
 * everything, as before: the tests compare the two). Device 0's program is printed node
 * by node in run order (forward, B, W): every op with its type (global dims,
 * sharding) and local shape, and every collective with its axes and bytes
 * per step. Then its memory and communication per step, and for every other
 * device a line that checks its program against device 0's (SPMD: the same
 * ops and collectives on its own slices).
 */
#include "cli/args.h"
#include "cli/model_flags.h"
#include "cli/strategy_flags.h"
#include "meshtrain.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: meshtrain explain --model gpt|mlp|linreg [model flags] --devices N --mesh AXES\n"
    "                         [--precision fp32|bf16] [--grad-reduce fp32|bf16]\n"
    "                         [--explicit] [--json]\n"
    "\n"
    "Prints the program each device runs: every op with its type (global dims and their\n"
    "mesh axes; {U:axes} for partial sums) and local shape, every collective the\n"
    "partitioner inserted with its axes and bytes per step, then the memory per device\n"
    "(parameters, gradients, AdamW state, planned activations) and the communication\n"
    "per step. The layout is the trainer's: the batch split over the axes data and fsdp,\n"
    "parameters stored split over fsdp (gathered before use) and over tensor where the\n"
    "model has a tensor-parallel layout (the MLP), else replicated.\n"
    "\n"
    "example:\n"
    "  meshtrain explain --model gpt --layers 2 --channels 64 --devices 4 --mesh data=2,tensor=2\n";

typedef struct {
    mt_train_config train;            /* the model and batch, as `meshtrain train` takes them */
    bool explicit_mode, json;
} explain_cfg;

/* What each device's program comes to (compared with device 0's). */
typedef struct {
    int     nodes, collectives;
    double  comm_bytes;
    int     step_collectives;      /* a step's: each node's run count (once a step, or a
                                      microbatch) times ... */
    double  step_bytes;            /* ... and its bytes */
    size_t  param_bytes, grad_bytes, act_bytes;
    size_t  optim_bytes;           /* AdamW's m and v: two of each stored (not kept) element */
    int     stage;                 /* the pipe axis's coordinate (0 without one) */
    int     chunk0, n_chunks;      /* the pipeline chunks it holds: the first, how many */
} program_summary;

/* The most pipeline chunks one device holds (the V and interleaved
 * schedules give two or more). */
#define EXPLAIN_MAX_CHUNKS 16

typedef struct {
    const explain_cfg *cfg;
    const mt_backend  *backend;    /* shape-only, unless MT_EXPLAIN_BACKEND says otherwise */
    program_summary   *dev;        /* (devices) */
    FILE              *out;        /* the whole output, written to stdout on success */
    /* the devices building at once, at most `most` (the cores): every device
       thread holding its program at once peaked at 1.6 GB for Mixtral 8x22B
       on 1,024 devices; a build waits on no other device (its groups are
       registered, not met: threads.c) */
    pthread_mutex_t    mu;
    pthread_cond_t     turn;
    int                building, most;
} explain_job;

/* A turn to build (explain_chunk) among the job's `most`, and back. */
static void build_begin(explain_job *job) {
    pthread_mutex_lock(&job->mu);
    while (job->building >= job->most) pthread_cond_wait(&job->turn, &job->mu);
    job->building++;
    pthread_mutex_unlock(&job->mu);
}

static void build_end(explain_job *job) {
    pthread_mutex_lock(&job->mu);
    job->building--;
    pthread_cond_signal(&job->turn);
    pthread_mutex_unlock(&job->mu);
}

static void axes_text(const mt_mesh *mesh, mt_axes ax, char *buf, size_t cap) {
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < ax.n && at < cap; i++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%s", i ? "+" : "",
                               mt_mesh_axis_name(mesh, ax.axis[i]));
}

static void shape_text(const mt_tensor *t, char *buf, size_t cap) {
    size_t at = (size_t)snprintf(buf, cap, "(");
    for (int d = 0; d < mt_tensor_ndim(t) && at < cap; d++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%lld", d ? "," : "",
                               (long long)mt_tensor_dim(t, d));
    if (at < cap) snprintf(buf + at, cap - at, ")");
}

/* Ring attention's sends, step by step (../shared/CONTEXT_PARALLEL.md §4):
 * step i holds the k, v of rank r-i and sends them on to r+1 for step i+1
 * while its block runs; the backward sends with them the dK, dV gathered so
 * far, the last step's landing home. */
static void ring_steps(FILE *out, const mt_mesh *mesh, const mt_node_info *in) {
    int P = 1;
    for (int i = 0; i < in->axes.n; i++)
        P *= mt_mesh_axis_size(mesh, mt_mesh_axis_name(mesh, in->axes.axis[i]));
    if (P < 2) return;
    const bool bwd = in->phase != 'F';
    const double each = in->comm_bytes / (P - 1) / (bwd ? 2 : 1);
    for (int i = 0; i < P; i++) {
        fprintf(out, "       step %d: k, v of rank r-%d", i, i);
        if (i < P - 1) fprintf(out, "; sends them to r+1, %.0f bytes", each);
        if (bwd && i > 0)
            fprintf(out, "; sends the dK, dV of rank r-%d's keys to r+1%s, %.0f bytes", i,
                    i == P - 1 ? " (home)" : "", each);
        fprintf(out, "\n");
    }
}

/* Prints device 0's program (text or the entries of the JSON's "program"
 * array, after the *printed entries of its chunks before). */
static void print_program(FILE *out, const mt_graph *g, const mt_mesh *mesh, bool json,
                          int *printed) {
    int n = mt_graph_n_nodes(g);
    for (int i = 0; i < n; i++) {
        mt_node_info in;
        if (mt_graph_node(g, i, &in) != MT_OK) continue;
        mt_type ty = mt_tensor_global_type(in.out, mesh);
        char type[160], local[64], axes[64];
        mt_type_format(mesh, &ty, type, sizeof type);
        shape_text(in.out, local, sizeof local);
        axes_text(mesh, in.axes, axes, sizeof axes);
        if (json) {
            fprintf(out, "%s    {\"phase\": \"%c\", \"op\": \"%s\", \"out\": \"%s\", \"type\": \"%s\", "
                   "\"local\": \"%s\"", (*printed)++ ? ",\n" : "", in.phase, in.op, mt_tensor_name(in.out), type, local);
            if (in.collective)
                fprintf(out, ", \"collective\": {\"axes\": \"%s\", \"bytes\": %.0f%s}", axes,
                        in.comm_bytes, in.once_a_step ? ", \"once_a_step\": true" : "");
            fprintf(out, "}");
        } else if (in.collective) {
            fprintf(out, "  %c  %-14s %-26s %-28s local %-16s %s over %s, %.0f bytes%s\n", in.phase,
                   in.op, mt_tensor_name(in.out), type, local, "collective", axes, in.comm_bytes,
                   in.once_a_step ? ", once a step" : "");
            if (strncmp(in.op, "ring_attention", 14) == 0) ring_steps(out, mesh, &in);
        } else {
            fprintf(out, "  %c  %-14s %-26s %-28s local %s%s%s\n", in.phase, in.op,
                   mt_tensor_name(in.out), type, local, in.axes.n ? " over " : "",
                   in.axes.n ? axes : "");
        }
    }
}

/* One program's summary; a step runs it `microbatches` times, and its
 * collectives marked once a step once. */
static program_summary summarise(const mt_graph *g, int microbatches) {
    program_summary s = {0};
    s.nodes = mt_graph_n_nodes(g);
    for (int i = 0; i < s.nodes; i++) {
        mt_node_info in;
        if (mt_graph_node(g, i, &in) != MT_OK || !in.collective) continue;
        s.collectives++;
        s.comm_bytes += in.comm_bytes;
        const int runs = in.once_a_step ? 1 : microbatches;
        s.step_collectives += runs;
        s.step_bytes += runs * in.comm_bytes;
    }
    mt_graph_stats st = mt_graph_get_stats(g);
    s.optim_bytes = 2 * (st.param_bytes - st.kept_param_bytes);
    s.param_bytes = st.param_bytes;
    s.grad_bytes = st.grad_bytes;
    s.act_bytes = st.arena_bytes;
    return s;
}

/* One pipeline chunk (the whole model without a pipe axis): built,
 * partitioned and compiled as the trainer does, on the job's backend; its
 * summary added to *sum, and device 0's program printed. */
static mt_status explain_chunk(mt_ctx *ctx, const explain_job *job, int chunk, int S,
                               program_summary *sum, int *printed) {
    const explain_cfg *c = job->cfg;
    const mt_mesh *mesh = mt_ctx_mesh(ctx);
    mt_graph *g = mt_graph_create(), *local = NULL;
    mt_tensor *loss = NULL, *local_loss = NULL;
    mt_partition_opts po;
    bool seeded = false;
    mt_status s = g ? mt_train_build_chunk_program(&c->train, mesh, chunk, S, g, &loss, &seeded, &po)
                    : mt_fail(MT_ENOMEM, "out of memory for a graph");
    po.mode = c->explicit_mode ? MT_SHARD_EXPLICIT : MT_SHARD_AUTO;
    if (s == MT_OK) s = mt_partition(g, loss, ctx, &po, &local, &local_loss);
    mt_graph_free(g);
    /* as the trainer compiles it: W beside B when a remat policy is on (a
     * pipeline's W too, as the whole-backward schedules run it) */
    mt_remat remat = c->train.remat;
    if (s == MT_OK)
        s = mt_graph_compile(local, local_loss, &(mt_compile_opts){
            .seed = 1, .seed_from_caller = seeded, .remat = remat,
            .interleave_w = remat != MT_REMAT_NONE, .precision = c->train.precision,
            .grad_reduce = c->train.grad_reduce, .backend = job->backend});
    if (s == MT_OK) {
        program_summary one = summarise(local, c->train.accum > 1 ? c->train.accum : 1);
        sum->nodes += one.nodes;
        sum->collectives += one.collectives;
        sum->comm_bytes += one.comm_bytes;
        sum->step_collectives += one.step_collectives;
        sum->step_bytes += one.step_bytes;
        sum->optim_bytes += one.optim_bytes;
        sum->param_bytes += one.param_bytes;
        sum->grad_bytes += one.grad_bytes;
        sum->act_bytes += one.act_bytes;
        if (mt_ctx_device(ctx) == 0) {
            if (S > 1 && !c->json)
                fprintf(job->out, "pipeline chunk %d of %d:\n", chunk, S);
            print_program(job->out, local, mesh, c->json, printed);
        }
    }
    mt_graph_free(local);
    return S > 1 && s != MT_OK ? mt_fail_wrap(s, "pipeline chunk %d", chunk) : s;
}

static mt_status explain_device(mt_ctx *ctx, void *arg) {
    explain_job *job = arg;
    const mt_mesh *mesh = mt_ctx_mesh(ctx);
    int d = mt_ctx_device(ctx), chunk[EXPLAIN_MAX_CHUNKS], n = 0, S = 1;
    mt_status s = mt_train_pipe_chunks(&job->cfg->train, mesh, d, chunk, EXPLAIN_MAX_CHUNKS, &n, &S);
    program_summary sum = {0};
    int printed = 0;   /* device 0's chunks one after the other, in one JSON array */
    if (d == 0 && job->cfg->json) fprintf(job->out, "  \"program\": [\n");
    for (int i = 0; i < n && s == MT_OK; i++) {
        build_begin(job);
        s = explain_chunk(ctx, job, chunk[i], S, &sum, &printed);
        build_end(job);
    }
    if (d == 0 && job->cfg->json) fprintf(job->out, "%s  ],\n", printed ? "\n" : "");
    int coords[MT_MESH_MAX_AXES];
    mt_mesh_coords(mesh, d, coords);
    for (int a = 0; a < mt_mesh_ndim(mesh); a++)
        if (strcmp(mt_mesh_axis_name(mesh, a), "pipe") == 0) sum.stage = coords[a];
    sum.chunk0 = n ? chunk[0] : 0;
    sum.n_chunks = n;
    job->dev[d] = sum;
    return s;
}

static void coords_text(const mt_mesh *mesh, int device, char *buf, size_t cap) {
    int coords[MT_MESH_MAX_AXES];
    mt_mesh_coords(mesh, device, coords);
    size_t at = 0;
    buf[0] = '\0';
    for (int a = 0; a < mt_mesh_ndim(mesh) && at < cap; a++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%s=%d", a ? "," : "",
                               mt_mesh_axis_name(mesh, a), coords[a]);
}

/* The first device of d's pipeline stage (device 0 without a pipe axis):
 * SPMD holds within a stage, whose devices run the same chunks. */
static int stage_ref(const program_summary *dev, int d) {
    int r = 0;
    while (dev[r].stage != dev[d].stage) r++;
    return r;
}

static bool same_program(const program_summary *a, const program_summary *b) {
    return a->nodes == b->nodes && a->collectives == b->collectives &&
           a->comm_bytes == b->comm_bytes && a->param_bytes == b->param_bytes &&
           a->grad_bytes == b->grad_bytes && a->act_bytes == b->act_bytes;
}

static int report(FILE *out, const explain_cfg *c, const mt_mesh *mesh, const program_summary *dev) {
    const double MiB = 1 << 20;
    const program_summary *p0 = &dev[0];
    int n = mt_mesh_size(mesh), stages = 0;
    bool same = true;
    for (int d = 0; d < n; d++) {
        same &= same_program(&dev[d], &dev[stage_ref(dev, d)]);
        if (dev[d].stage + 1 > stages) stages = dev[d].stage + 1;
    }
    if (c->json) {
        fprintf(out, "  \"memory_per_device\": {\"parameters\": %zu, \"gradients\": %zu, "
               "\"optimizer\": %zu, \"activations\": %zu},\n", p0->param_bytes, p0->grad_bytes,
               p0->optim_bytes, p0->act_bytes);
        /* a pipeline's devices differ by stage: each stage's, device 0's first */
        fprintf(out, "  \"stages\": [");
        for (int k = 0, d = 0; k < stages; k++) {
            while (dev[d].stage != k) d++;
            const program_summary *p = &dev[d];
            fprintf(out, "%s\n    {\"stage\": %d, \"device\": %d, \"chunks\": %d, \"first_chunk\": %d, "
                    "\"parameters\": %zu, \"gradients\": %zu, \"optimizer\": %zu, "
                    "\"activations\": %zu, \"nodes\": %d, \"collectives\": %d, \"bytes\": %.0f}",
                    k ? "," : "", k, d, p->n_chunks, p->chunk0, p->param_bytes, p->grad_bytes,
                    p->optim_bytes, p->act_bytes, p->nodes, p->step_collectives, p->step_bytes);
            d = 0;
        }
        fprintf(out, "\n  ],\n");
        fprintf(out, "  \"communication_per_step\": {\"collectives\": %d, \"bytes\": %.0f},\n",
               p0->step_collectives, p0->step_bytes);
        fprintf(out, "  \"devices\": [");
        for (int d = 0; d < n; d++)
            fprintf(out, "%s{\"device\": %d, \"nodes\": %d, \"collectives\": %d, \"bytes\": %.0f}",
                   d ? ", " : "", d, dev[d].nodes, dev[d].collectives, dev[d].comm_bytes);
        fprintf(out, "],\n  \"spmd\": %s\n}\n", same ? "true" : "false");
        return same ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    }
    fprintf(out, "memory per device: parameters %.2f MiB, gradients %.2f MiB, optimizer %.2f MiB "
           "(AdamW m and v), activations %.2f MiB (planned)\n", p0->param_bytes / MiB,
           p0->grad_bytes / MiB, p0->optim_bytes / MiB, p0->act_bytes / MiB);
    fprintf(out, "communication per step: %d collectives, %.2f MiB per device\n",
           p0->step_collectives, p0->step_bytes / MiB);
    for (int d = 1; d < n; d++) {
        char where[96];
        coords_text(mesh, d, where, sizeof where);
        int r = stage_ref(dev, d);
        bool ok = same_program(&dev[d], &dev[r]);
        if (r == d)   /* the first device of a later pipeline stage */
            fprintf(out, "device %d (%s): pipeline stage %d (%d chunk%s from %d): parameters "
                    "%.2f MiB, gradients %.2f MiB, optimizer %.2f MiB, activations %.2f MiB, "
                    "%d collectives, %.2f MiB\n", d, where, dev[d].stage, dev[d].n_chunks,
                    dev[d].n_chunks == 1 ? "" : "s", dev[d].chunk0, dev[d].param_bytes / MiB,
                    dev[d].grad_bytes / MiB, dev[d].optim_bytes / MiB, dev[d].act_bytes / MiB,
                    dev[d].step_collectives, dev[d].step_bytes / MiB);
        else if (r == 0)
            fprintf(out, "device %d (%s): %s\n", d, where,
                    ok ? "the same program on its own slices" : "a DIFFERENT program (a bug: SPMD)");
        else
            fprintf(out, "device %d (%s): %s device %d's\n", d, where,
                    ok ? "the same program on its own slices as" :
                         "a DIFFERENT program (a bug: SPMD) from", r);
    }
    return same ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

/* The program of every device, in one launch, and the report, into `out`;
 * *whole says the output is complete (the report ran, its SPMD check may
 * still have failed); *refused is the launch's status (a partition refused
 * in explicit mode, on some device). */
static int explain_into(FILE *out, const explain_cfg *c, const mt_mesh *mesh, bool *whole,
                        mt_status *refused) {
    const mt_train_config *t = &c->train;
    program_summary *dev = calloc((size_t)mt_mesh_size(mesh), sizeof *dev);
    if (!dev) {
        cli_error("out of memory for %d devices' summaries", mt_mesh_size(mesh));
        return CLI_EXIT_FAIL;
    }
    /* MT_EXPLAIN_BACKEND names another backend (cpu: allocate everything,
     * as a real compile does; the tests compare the two) */
    const char *name = getenv("MT_EXPLAIN_BACKEND");
    const mt_backend *be = name && *name ? mt_backend_find(name) : mt_backend_shape_only();
    if (!be) {
        cli_error("MT_EXPLAIN_BACKEND: %s", mt_errmsg());
        free(dev);
        return CLI_EXIT_FAIL;
    }
    explain_job job = {c, be, dev, out, .mu = PTHREAD_MUTEX_INITIALIZER,
                       .turn = PTHREAD_COND_INITIALIZER, .most = mt_get_num_threads()};
    *whole = false;
    if (c->json)
        fprintf(out, "{\n  \"model\": \"%s\", \"mesh\": \"%s\", \"devices\": %d, \"mode\": \"%s\",\n",
                mt_model_name(t->model), mt_mesh_spec(mesh), mt_mesh_size(mesh),
                c->explicit_mode ? "explicit" : "auto");
    else
        fprintf(out, "explain: %s, global batch B=%d, mesh %s (%d devices), %s mode; the "
                "trainer's layout (the batch over data, fsdp and expert, parameters over "
                "fsdp, tensor and expert)\ndevice 0's program (forward, then B, then W):\n",
                mt_model_name(t->model), t->B, mt_mesh_spec(mesh), mt_mesh_size(mesh),
                c->explicit_mode ? "explicit" : "auto");
    mt_launch_opts lo = {.mesh = mt_mesh_spec(mesh), .devices = mt_mesh_size(mesh),
                         .transport = MT_TRANSPORT_THREADS, .kernel_threads = 1};
    mt_status s = mt_launch(&lo, explain_device, &job);
    int rc;
    *refused = s;
    if (s != MT_OK) {
        cli_error("%s", mt_errmsg());
        rc = CLI_EXIT_FAIL;
    } else {
        rc = report(out, c, mesh, dev);
        *whole = true;
    }
    free(dev);
    return rc;
}

/* A name in place of the data file train would read: the check opens no
 * file, and explain builds the program from its flags (V included). */
static const char NO_DATA[] = "(explain reads no data)";

int cli_explain_model(int argc, char **argv) {
    explain_cfg c = {.train = mt_train_defaults()};
    mt_train_config *t = &c.train;
    int model = 0, precision = 0, grad_reduce = 0, doc_mask = 0;
    const char *mesh_spec = NULL;
    int devices = 0;
    char choices_model[64] = "";
    cli_model_names(choices_model, sizeof choices_model, "|");
    /* the model's own flags come from the models' tables, after --model,
     * starting from the settings of a build without data (no file is read) */
    cli_model_flags mf;
    cli_model_flags_init(&mf, t, true);
    cli_strategy_flags sf;   /* and the strategy's from their table, as train's */
    cli_strategy_flags_init(&sf, CLI_STRATEGY_EXPLAIN, t);
    enum { MODEL_FLAGS_AT = 1 };
    cli_opt opts[32 + CLI_MAX_MODEL_FLAGS + CLI_MAX_STRATEGY_FLAGS] = {
        {"model", CLI_CHOICE, &model, 0, 0, 0, 0, choices_model, "NAME", "model to explain"},
    };
    const cli_opt common[] = {
        {"batch", CLI_INT, &t->B, 1, 1 << 20, 0, 0, NULL, "N", "global batch B"},
        {"seq", CLI_INT, &t->T, 1, 1 << 20, 0, 0, NULL, "N", "tokens per sequence T"},
        {"devices", CLI_INT, &devices, 1, CLI_MAX_THREAD_DEVICES, 0, 0, NULL, "N", "devices (default: the mesh's product)"},
        {"mesh", CLI_STR, &mesh_spec, 0, 0, 0, 0, NULL, "AXES", "mesh, e.g. data=2,tensor=2 (default data=N)"},
        {NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL},
    };
    const cli_opt rest[] = {
        {"explicit", CLI_FLAG, &c.explicit_mode, 0, 0, 0, 0, NULL, NULL, "explicit mode: fail where the sharding is ambiguous"},
        {"precision", CLI_CHOICE, &precision, 0, 0, 0, 0, "fp32|bf16", "P",
         "matrix products' precision (as train): bf16 shows FSDP's bf16 all-gathers"},
        {"grad-reduce", CLI_CHOICE, &grad_reduce, 0, 0, 0, 0, "fp32|bf16", "P",
         "gradient reductions' precision (as train)"},
        {"doc-mask", CLI_CHOICE, &doc_mask, 0, 0, 0, 0, "off|on", "MODE",
         "packed documents (as train): on shows the program with the document ids, which "
         "travel with the keys under each --cp-attention"},
        {"json", CLI_FLAG, &c.json, 0, 0, 0, 0, NULL, NULL, "print one JSON object"},
        {NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL},
    };
    int n_opts = MODEL_FLAGS_AT + cli_model_flags_opts(&mf, opts + MODEL_FLAGS_AT);
    for (size_t i = 0; common[i].name; i++) opts[n_opts++] = common[i];
    n_opts += cli_strategy_flags_opts(&sf, opts + n_opts);
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) opts[n_opts++] = rest[i];
    bool seen[sizeof opts / sizeof opts[0]] = {0};
    int rc = cli_parse("explain", opts, argc, argv, seen);
    if (rc < 0) {
        cli_print_help(stdout, USAGE, opts);
        return CLI_EXIT_OK;
    }
    if (rc != CLI_EXIT_OK) return rc;
    t->model = (mt_model_kind)model;
    if ((rc = cli_model_flags_apply(&mf, opts, seen, MODEL_FLAGS_AT, t)) != CLI_EXIT_OK)
        return rc;
    cli_strategy_flags_apply(&sf, opts, seen, t);
    if ((rc = cli_strategy_flags_check(&sf, opts, seen, t)) != CLI_EXIT_OK) return rc;
    t->precision = precision == 1 ? MT_PRECISION_BF16 : MT_PRECISION_FP32;
    t->grad_reduce = grad_reduce == 1 ? MT_PRECISION_BF16 : MT_PRECISION_FP32;
    t->doc_mask = doc_mask == 1;
    if (mt_model_about_of(t->model)->dataset) t->data = NO_DATA;
    /* the mesh as train takes it: --devices N alone is data=N, one device none */
    char spec[64];
    if (!mesh_spec && devices > 1) {
        snprintf(spec, sizeof spec, "data=%d", devices);
        mesh_spec = spec;
    }
    t->mesh = mesh_spec;
    t->devices = devices;
    t->transport = MT_TRANSPORT_THREADS;
    /* without --microbatches a pipe axis gets the fewest a pipeline runs:
     * one per stage (a malformed mesh is the check's to report) */
    if (!cli_given(opts, seen, "microbatches") && mesh_spec) {
        int nd = devices;
        mt_mesh *m = NULL;
        if ((nd > 0 || mt_mesh_spec_devices(mesh_spec, &nd) == MT_OK) &&
            mt_mesh_create(mesh_spec, nd, &m) == MT_OK) {
            for (int a = 0; a < mt_mesh_ndim(m); a++)
                if (strcmp(mt_mesh_axis_name(m, a), "pipe") == 0)
                    t->accum = mt_mesh_axis_size(m, "pipe");
        }
        mt_mesh_free(m);
    }
    /* every mistake train would refuse before its first step, in train's words */
    mt_status s = mt_train_config_check(t);
    if (s != MT_OK) {
        cli_error("%s", mt_errmsg());
        return cli_exit_of(s);
    }
    int n = 0;
    mt_mesh *mesh = NULL;
    if (!mesh_spec) {   /* no mesh: the program of one device */
        mesh_spec = "data=1";
        n = 1;
    } else if (devices > 0) {
        n = devices;
    } else if ((s = mt_mesh_spec_devices(mesh_spec, &n)) != MT_OK) {
        cli_error("%s", mt_errmsg());
        return cli_exit_of(s);
    }
    if ((s = mt_mesh_create(mesh_spec, n, &mesh)) != MT_OK) {
        cli_error("%s", mt_errmsg());
        return cli_exit_of(s);
    }
    /* the output whole or not at all: a failure leaves no half a program (or
     * half a JSON object) on stdout */
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out) {
        cli_error("cannot buffer the output: %s", strerror(errno));
        mt_mesh_free(mesh);
        return CLI_EXIT_FAIL;
    }
    bool whole = false;
    mt_status refused = MT_OK;
    char msg[1024];
    rc = explain_into(out, &c, mesh, &whole, &refused);
    snprintf(msg, sizeof msg, "%s", mt_errmsg());
    if (c.json && refused != MT_OK) {
        /* a refusal as one JSON object: what was asked, the status and the message */
        printf("{\"refused\": true, \"model\": \"%s\", \"mesh\": ", mt_model_name(t->model));
        cli_json_string(stdout, mt_mesh_spec(mesh));
        printf(", \"mode\": \"%s\", \"status\": \"%s\", \"message\": ",
               c.explicit_mode ? "explicit" : "auto", mt_status_name(refused));
        cli_json_string(stdout, msg);
        printf("}\n");
    }
    mt_mesh_free(mesh);
    if (fclose(out) != 0) {
        cli_error("cannot buffer the output: %s", strerror(errno));
        rc = CLI_EXIT_FAIL;
    } else if (whole) {   /* a DIFFERENT program on a device is reported, and exits 1 */
        if (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0) {
            cli_error("writing stdout: %s", strerror(errno));
            rc = CLI_EXIT_FAIL;
        }
    }
    free(text);
    return rc;
}
