/*
 * train_impl.h — the trainer's table of models: everything the training
 * loop needs to know about a model, one entry per model (the library's in
 * train/models/<model>.c, its builder in src/models/<model>/), reached by
 * kind and by name from one table (model_table.c), so that trainer.c never
 * asks which model it trains.
 */
#ifndef MT_TRAIN_IMPL_H
#define MT_TRAIN_IMPL_H

#include "meshtrain/train.h"

#include <stddef.h>

/* Members marked "optional" may be NULL; the default is said with each. */
typedef struct {
    /* What a command line knows of it (train.h): its name as `meshtrain
     * train --model` spells it and messages name it; sequences (a
     * microbatch is B sequences of T tokens, and data positions, throughput
     * and the loss's normaliser count tokens, T positive; else B examples,
     * T unused); dataset (it has `open`); llmc (llm.c checkpoints can hold
     * it: llmc_in, llmc_out allowed; the GPT's are llm.c's, the LLaMA's
     * llama2.c's model.bin); its settings' struct (config_type,
     * config_size) and their flags, offsets into that struct. */
    mt_model_about about;
    /* The model's own settings: its defaults, about.config_size bytes, the
     * settings a NULL mt_train_config.model_config means. Every hook reads
     * c->model_config, cast to the model's struct, or these where it is
     * NULL. Required with a config_size; NULL without one. */
    const void *config_defaults;
    /* Names of the graph's two inputs that fill_batch writes. */
    const char *input, *target;
    /* A constant with the batch as its dim 0 (GPT: the position ids), split
     * over the data axes like the inputs. Optional: NULL, none. */
    const char *batch_const;
    /* The end-of-text id of its data, the documents' separator with
     * doc_mask when eot_id is negative (GPT: 50256). */
    int eot_id;

    /* Completes mc (config_size bytes, holding config_defaults) for a
     * program built without data (mt_model_config_without_data): what the
     * data would give, from c (GPT: V 256, maxT c->T). Optional: the
     * defaults need nothing. */
    void (*without_data)(const mt_train_config *c, void *mc);
    /* The model's checks of a configuration, after the general ones; fails
     * with MT_EINVAL naming the field. Optional: nothing more to check. */
    mt_status (*check)(const mt_train_config *c);
    /* Opens the training data into *ds and completes the model's settings
     * mc (the trainer's copy, which c->model_config points at) from it and
     * from llmc_in (GPT: V and Vp). On failure *ds may already be set; the
     * caller frees it. Optional: synthetic data, *ds stays NULL. */
    mt_status (*open)(mt_train_config *c, void *mc, mt_dataset **ds);
    /* llm.c checkpoints (about.llmc; required with it): llmc_read reads the
     * model's settings from the header of `path` into mc; llmc_load loads
     * c->llmc_in's weights into g; llmc_save writes g as an llm.c file,
     * through `out` when it is not NULL (claimed at create), else to
     * c->llmc_out. */
    mt_status (*llmc_read)(const char *path, void *mc);
    mt_status (*llmc_load)(const mt_train_config *c, mt_graph *g);
    mt_status (*llmc_save)(const mt_train_config *c, mt_graph *g, mt_output *out);
    /* Hugging Face directories (optional: NULL, the model has none):
     * hf_arch the config.json architecture it reads; hf_read reads dir's
     * config.json into mc; hf_load loads c->hf_in's weights into g (open
     * took the model from its config.json; part: g is a pipeline stage's,
     * the tensors it lacks skipped); hf_save writes g to c->hf_out. */
    const char *hf_arch;
    mt_status (*hf_read)(const char *dir, void *mc);
    mt_status (*hf_load)(const mt_train_config *c, mt_graph *g, bool part);
    mt_status (*hf_save)(const mt_train_config *c, mt_graph *g);
    /* Writes the model's description into buf (n bytes). Checkpoints record
     * it and a resume compares it byte for byte: it must never change. */
    void (*describe)(const mt_train_config *c, char *buf, size_t n);
    /* Sampling (mt_sample): reads a description describe wrote back into
     * mc (config_size bytes, holding config_defaults) and the model's
     * context maxT and vocabulary V into *maxT, *V; MT_EINVAL when desc is
     * not this model's, the model's config check's error when its settings
     * are bad. Optional: NULL, the model cannot be sampled. */
    mt_status (*parse)(const char *desc, void *mc, int *maxT, int *V);
    /* With parse: the name of the graph's next-token logits (B,T,Vp), Vp >= V
     * (the columns past V are padding). */
    const char *logits;
    /* Builds the model for one microbatch into g with the loss times
     * `scale`; returns the loss, or NULL with the graph's status set. */
    mt_tensor *(*build)(const mt_train_config *c, mt_graph *g, float scale);
    /* Fills the constants of the compiled graph (GPT: position ids).
     * Optional: the model has none. */
    mt_status (*fill_constants)(mt_graph *g);
    /* Writes rows [row0, row0+rows) of the (global) microbatch of `split`
     * (0 train, 1 validation) at *pos into `in` and `target`, dense buffers
     * of the shapes and dtypes of the graph's two inputs for those rows (rows
     * first, of the B of the global batch), and advances *pos past the whole
     * microbatch (in tokens or examples, as `sequences` says), so that a
     * device of a mesh makes and reads only its own rows. `ds` is what open
     * made (NULL without open). A pure function of (configuration, split,
     * *pos): resumes and every device of a mesh depend on it. Fails as
     * mt_dataset_rows does (a shard that cannot be read). */
    mt_status (*fill_batch)(const mt_train_config *c, const mt_dataset *ds, int split,
                            int64_t *pos, int row0, int rows, void *in, void *target);
    /* The logical axes the builder names on its leaves' dims
     * (mt_graph_logical: "batch,seq,vocab,embed,heads,kv_heads,mlp"), which
     * rules (mt_train_config.rules, the strategies' rows in presets.c) map
     * onto the mesh: no layout is written per parameter name. */
    const char *logical_axes;
    /* A transformer's shape (train.h's mt_model_shape) from c's settings,
     * and its settings struct `config` set to `layers` blocks and a context
     * of at least max_seq. Optional: NULL, the model has no such shape. */
    void (*shape)(const mt_train_config *c, mt_model_shape *out);
    void (*resize)(void *config, int layers, int max_seq);
    /* The sizes tensor parallelism over `size` devices must divide (GPT: the
     * heads, 4C, Vp), checked when the rules shard the model and, before any
     * file is read, by mt_train_config_check: sizes still to come from the
     * data (V and Vp 0) are skipped there; with llmc_in the whole model
     * comes from the file and the early check is not made. Fails with
     * MT_EINVAL naming the flag. Optional: nothing has to divide. */
    mt_status (*tensor_check)(const mt_train_config *c, int size);
    /* Activation checkpointing (remat) has blocks to recompute: false, a
     * remat policy would change nothing and is refused. */
    bool remat;
    /* The activations are (B,T,...) with T a sequence: sequence parallelism
     * applies. */
    bool sequence;
    /* Pipeline parallelism: builds stage `st` of the model (a contiguous
     * group of its blocks, mt_model_stage) with the loss times
     * `scale` on the last stage, else the stage's output. Optional: NULL,
     * the model cannot be cut into stages. */
    mt_tensor *(*build_stage)(const mt_train_config *c, mt_graph *g, const mt_model_stage *st,
                              float scale);
    /* The blocks build_stage's stages are cut from (GPT: L), as configured
     * (with llmc_in, once open read the file). Required with build_stage. */
    int (*blocks)(const mt_train_config *c);
    /* The input of a stage that is not the first (with build_stage). */
    const char *stage_input;
    /* The parameter both the first and the last stage of c's model hold
     * (a token embedding tied to the LM head: the GPT's "wte" always, the
     * LLaMA's "tok_emb.w" with tie_embeddings), whose gradients a pipeline
     * sums; NULL when c's model ties nothing. Optional: NULL, no model of
     * the kind ties one. */
    const char *(*tied_param)(const mt_train_config *c);
    /* Model FLOPs of one optimizer step over `units` tokens or examples.
     * Optional: the compiled graph's forward and backward FLOPs per
     * microbatch times accum. */
    double (*step_flops)(const mt_train_config *c, int64_t units);
    /* γ of the mixture of experts' aux-loss-free router bias (the LLaMA's
     * --moe-bias-update), which the trainer moves after each optimizer
     * step by the step's expert loads (moe_load.c); 0: no router has a
     * bias. Optional: NULL, none has. */
    float (*router_bias_update)(const mt_train_config *c);
} mt__train_model;

/* The one table of models (model_table.c), over the runtime's model
 * registry (base/registry.c): the library's models (below) are registered
 * in it first, on the first lookup, each at its stable kind, through the
 * same checks as a model registered from outside; mt_model_find (train.h)
 * finds any of them by name. */

/* The entry of `kind`, or NULL when the kind is not a model. */
const mt__train_model *mt__train_model_of(mt_model_kind kind);

/* The number of entries: kinds 0 .. count-1 are models (the library's,
 * then those registered from outside). */
int mt__train_model_count(void);

/* Registers a model from outside the library: `m` (which must outlive every
 * run of it) becomes kind *kind, the next after the library's and earlier
 * registered ones, and the trainer, explain, mt_model_name and
 * mt_model_find reach it as they reach the library's ones. Its builder names its leaves' logical axes
 * (mt_graph_logical) and `logical_axes` lists them; the strategies' rows
 * and registered rows (mt__strategy_register) then shard it. MT_EINVAL
 * naming the member for an entry without about.name, build, fill_batch,
 * describe, input or target, settings without defaults or too large, or a name that
 * is taken; MT_ENOMEM when the registry is full (MT__REGISTRY_MAX models,
 * the library's included). Safe from any thread; the
 * usual place is before the first run. */
mt_status mt__train_model_register(const mt__train_model *m, mt_model_kind *kind);

/* The models whose llm.c-family files the trainer reads and writes
 * (about.llmc), as "gpt or llama" into buf (n bytes), for messages. */
const char *mt__train_llmc_models(char *buf, size_t n);

/* Room for any model's own settings (model_table.c asserts that each
 * model's struct fits), aligned for any of them. */
#define MT__MODEL_CONFIG_MAX 256
typedef union {
    max_align_t   align;
    unsigned char bytes[MT__MODEL_CONFIG_MAX];
} mt__model_config_buf;

/* Copies c's model settings (c->model_config, or the model's defaults
 * where it is NULL) into *dst. After mt_train_config_check, which checked
 * model_config_size. */
void mt__train_model_config_copy(const mt__train_model *m, const mt_train_config *c,
                                 mt__model_config_buf *dst);

/* The checks of a token dataset ds opened for c against a model of V
 * tokens: no token past V, a training split of T+1 tokens
 * or more. MT_EINVAL naming the file. (model_data.c) */
mt_status mt__train_data_fits(const mt_train_config *c, const mt_dataset *ds, int V);
/* The vocabulary to open c->data with (mt_dataset_open_bounded): the
 * model's V for llm.c's shards, each token checked against it in the one
 * pass at open (a token past V fails before step 1, naming the shard, the
 * token's index and id); 0 for one file, whose vocabulary the pass finds
 * and mt__train_data_fits compares with V. (model_data.c) */
int       mt__train_scan_vocab(const mt_train_config *c, int V);
/* The checks before a token dataset is opened: c->data set, val_frac in
 * [0, 1); MT_EINVAL naming `who` ("GPT"). (model_data.c) */
mt_status mt__train_needs_data(const mt_train_config *c, const char *who);
/* The fill_batch of the models trained on a token dataset (GPT, LLaMA):
 * windows of c->T + 1 tokens, B of them a microbatch (mt_dataset_rows), the
 * inputs and targets int32 (B,T). (model_data.c) */
mt_status mt__train_fill_tokens(const mt_train_config *c, const mt_dataset *ds, int split,
                                int64_t *pos, int row0, int rows, void *in, void *target);

/* c->bucket_mb as mt_compile_opts.bucket_bytes (build.c, pipe.c). */
/* The backend c names (NULL: the CPU's, mt_compile_opts.backend's default);
 * mt_train_config_check has refused a name no backend has. */
static inline const mt_backend *mt__train_backend(const mt_train_config *c) {
    return c->backend && *c->backend ? mt_backend_find(c->backend) : NULL;
}

static inline size_t mt__train_bucket_bytes(const mt_train_config *c) {
    return (size_t)(c->bucket_mb * 1048576.0);
}

/* ---- the library's models (train/models/, a file each) ---- */

/* Their entries (gpt.c, mlp.c, linreg.c, llama.c), which model_table.c
 * registers first, at their stable kinds MT_MODEL_GPT, MT_MODEL_MLP,
 * MT_MODEL_LINREG and MT_MODEL_LLAMA. */
extern const mt__train_model mt__model_gpt, mt__model_mlp, mt__model_linreg, mt__model_llama;
/* The LLaMA's defaults (its entry's config_defaults), for tests that start
 * from them. */
extern const mt_llama_config mt__llama_defaults;
/* A LLaMA checkpoint's model description (models/llama_desc.c): the
 * settings line of m into buf (n bytes), and back into mc (a
 * mt_llama_config) with its maxT and V; MT_EINVAL for a line that is not
 * one. */
void      mt__llama_describe(const mt_llama_config *m, char *buf, size_t n);
mt_status mt__llama_parse(const char *desc, void *mc, int *maxT, int *V);
/* For an entry's about: its flags from an array of them, and its settings'
 * struct's name and size. */
#define MT__MODEL_FLAGS(a) .flags = a, .n_flags = (int)(sizeof a / sizeof a[0])
#define MT__MODEL_CONFIG(type) .config_type = #type, .config_size = sizeof(type)

/* ======================================================================== */
/* The trainer and its devices (trainer.c, devices.c)                        */
/* ======================================================================== */

/* One device's part of the run: its graphs (partitioned on a mesh), their
 * inputs, its optimizer, and what its last step or evaluation returned. Off a
 * mesh there is one, and no launch. */
typedef struct mt__train_pipe mt__train_pipe;

/* The experts' counts of a step (moe_load.c): per MoE layer, E of them,
 * in the order of the layers' routers; and the router losses' sum. */
typedef struct {
    int32_t *counts;
    int64_t  n, cap, E;
    /* the graph's moe_route and moe_router_loss nodes, found on the first
     * call (a graph's nodes do not change); routes NULL before it */
    int     *routes, *losses;
    int      n_routes, n_losses;
    /* each router's bias parameter (its aux-loss-free bias; NULL: none) */
    mt_tensor **bias;
    /* the moe_capacity nodes (--moe-capacity), and the step's pairs they
     * dropped and saw (summed over the microbatches, then the devices) */
    int     *caps;
    int      n_caps;
    int32_t  drop[2];
    double   dropped;    /* the step's dropped share of the pairs; NAN: no capacity */
    double   aux;        /* Σ over the step's microbatches of the layers' router losses */
    int      aux_n;      /* microbatches added */
    bool     summed;     /* counts are the step's, summed over the devices */
    /* the mesh axes (bits) the sums run over: those splitting the ids'
     * rows (data, fsdp, expert, context: not tensor, whose devices route
     * the same rows), the router loss's partial sums, the capacity's rows */
    uint32_t count_axes, loss_axes, drop_axes;
    int32_t *ids;        /* (ids_cap) the last route's or capacity's ids read back */
    int64_t  ids_cap;
} mt__moe_load;

/* Adds the counts of the experts each moe_route node of g's forward chose
 * (its int32 ids, read back) to c, layer after layer; none: c->n 0. Call it
 * after each microbatch's forward, with one graph for the life of c (its
 * routers are found on the first call). */
mt_status mt__moe_load_add(mt__moe_load *c, mt_graph *g);
/* Sums c's counts over the mesh axes that split the routers' rows (ctx
 * NULL: one device; every device of the mesh calls it), writes the largest MaxVio over the
 * layers to *out and the router losses (aux + z, summed over the layers
 * and over the devices' parts of the batch, a mean over the microbatches:
 * the share of the step's loss) to *aux
 * (both NAN without MoE layers). The summed counts stay for
 * mt__moe_load_bias until the next mt__moe_load_add starts a new step. */
mt_status mt__moe_load_maxvio(mt__moe_load *c, mt_ctx *ctx, double *out, double *aux);
/* A step's balance over a pipeline (mt__moe_load_pipe): the largest MaxVio
 * and the router losses (a mean over the microbatches) over every chunk of
 * every stage (NAN without MoE layers), those of the chunks that are not
 * the model's last apart (aux_mid: the last chunk's loss holds its own,
 * the others' the step's loss lacks), and the share of pairs a capacity
 * dropped (NAN: none). */
typedef struct {
    double maxvio, aux, aux_mid, dropped;
} mt__moe_step;
/* The loads of a pipeline device's n chunks (last[i]: chunk i is the
 * model's last), each added after each of its microbatches' F: each
 * chunk's counts summed over its rows' axes (mt__moe_load_maxvio, left
 * for mt__moe_load_bias), then the balance over the chunks and the pipe
 * axis into *out. Every device of the mesh calls it. */
mt_status mt__moe_load_pipe(mt__moe_load *loads, int n, const bool *last, mt_ctx *ctx,
                           mt_axes pipe, mt__moe_step *out);
/* DeepSeek-V3's aux-loss-free update of each router's bias in g (the graph
 * c counted; ../shared/MOE.md §2): after the optimizer's step, with the
 * step's counts summed by mt__moe_load_maxvio, bias += γ·(sign(mean c −
 * c_i), centred: mt_moe_bias_update). Every device computes the same Δb
 * from the same global counts and adds its block of it to its block of
 * the bias (whole, or split by fsdp or ZeRO), so every layout makes the
 * one-device bias bit for bit. Nothing to do with gamma 0, routers without
 * a bias, or counts not summed. */
mt_status mt__moe_load_bias(mt__moe_load *c, mt_graph *g, mt_ctx *ctx, float gamma);
void      mt__moe_load_free(mt__moe_load *c);

typedef struct {
    mt_graph  *g;               /* training graph (a pipeline: its first chunk's) */
    mt__train_pipe *pipe;       /* on a mesh with a pipe axis of 2+ (pipe.c), else NULL */
    mt_tensor *in, *target;     /* its inputs, named by the model's entry */
    mt_optim  *opt;
    mt_graph  *eval_g;          /* forward-only graph, built on the first eval */
    mt_tensor *eval_in, *eval_target;
    void      *stage_in, *stage_target;   /* the global microbatch (off a mesh, the batch) */
    int32_t   *stage_docs;   /* with doc_mask: the microbatch's document ids, as stage_in */
    /* results of the last step or evaluation */
    double     loss;
    float      grad_norm;
    double     bubble[2];       /* a pipeline's step: measured, predicted (else NAN) */
    double     stage_cost[3];   /* a pipeline's step: mean F, B, W of a whole stage */
    int64_t    pos;             /* data position after it */
    bool       stop;            /* the devices agreed to stop after it */
    mt__moe_load moe;           /* the experts' counts of the step (moe_load.c) */
    double     moe_maxvio;      /* the last step's MaxVio; NAN without MoE */
    double     moe_aux;         /* the last step's router losses; NAN without MoE */
    double     moe_dropped;     /* the last step's pairs past a capacity; NAN: none */
    mt__moe_load eval_moe;      /* the evaluation graph's router losses, taken out */
} mt__train_dev;

struct mt_trainer {
    mt_train_config cfg;        /* as resolved; its strings point at the copies below */
    const mt__train_model *m;   /* the model's table entry */
    mt__model_config_buf model_cfg;   /* the model's settings, as resolved:
                                         cfg.model_config points here */
    char           *data, *ckpt_in, *ckpt_out, *llmc_in, *llmc_out, *hf_in, *hf_out, *mesh,
                   *trace, *schedule;   /* copies */
    char            model[256]; /* model description, checked on resume */
    mt_dataset     *ds;         /* models trained on a dataset only (GPT) */
    mt__train_dev  *dev;        /* (n_dev): off a mesh and under MPI 1, threads: every device */
    int             n_dev;
    bool            on_mesh;
    mt_launch_opts  launch;     /* on a mesh: how each step is launched */
    mt_trace_run   *trace_run;  /* with a trace: every launch's timelines (launch.trace_run) */
    int             n_devices;  /* devices of the mesh */
    int             step;       /* optimizer steps taken */
    int64_t         data_pos;   /* training data consumed: tokens or examples (m->sequences) */
    /* the mesh splits parameters (fsdp or tensor > 1): checkpoints go through
     * the host twin (ckpt_mesh.c), a one-device copy of the model and its
     * optimizer; NULL until a save or load needs it */
    char            pipe_layout[1024];   /* mt_trainer_pipeline; "" off a pipeline */
    bool            split_params;
    mt_graph       *twin_g;
    mt_optim       *twin_opt;
    /* the outputs, claimed at create by the process that writes them
     * (outputs.c): NULL when not asked for, or on another MPI rank */
    mt_output      *out_ckpt, *out_llmc, *out_trace;
};

/* ---- outputs (outputs.c) ---- */

/* Whether this process writes the run's files: always, but under MPI only
 * rank 0. */
bool      mt__train_writes_files(const mt_trainer *tr);
/* Claims ckpt_out, llmc_out and trace (meshtrain/files.h) before any work,
 * so that a second run writing one of them is refused at its start. */
mt_status mt__train_claim_outputs(mt_trainer *tr);
void      mt__train_release_outputs(mt_trainer *tr);


/* ---- pipelines (pipe.c) ---- */

#define MT_PIPE_MAX_CHUNKS 8    /* model chunks a device holds at most */
/* The pipe axis's size (1 without one). */
int       mt__train_pipe_size(const mt_mesh *mesh);
/* The schedule a pipeline runs: c->schedule, or "1f1b" when it is NULL. */
const char *mt__train_pipe_schedule(const mt_train_config *c);
/* The configuration's checks for a pipeline of p stages (mt_train_config_
 * check's): the model can be cut, the schedule kind is known (first), its
 * shape fits p and the microbatches, the chunks fit the layers (skipped
 * with llmc_in: mt__train_pipe_create checks them once the file is read). */
mt_status mt__train_pipe_check(const mt_train_config *c, const mt__train_model *m, int p);
/* Builds device d's chunks, their optimizers and the executor (d->pipe);
 * the first device of this process also writes the layout
 * (mt_trainer_pipeline) into tr->pipe_layout. */
mt_status mt__train_pipe_create(mt_trainer *tr, mt__train_dev *d, mt_ctx *ctx);
void      mt__train_pipe_free(mt__train_pipe *pp);
/* One optimizer step of the pipeline on device d: d->loss, d->grad_norm,
 * d->pos as step_dev sets them. */
mt_status mt__train_pipe_step(mt_trainer *tr, mt__train_dev *d, mt_ctx *ctx, float lr, int step);
/* The graph of device d's i-th chunk (in model order); NULL past the last,
 * or off a pipeline. For tests and inspection. */
mt_graph *mt__train_pipe_graph(const mt__train_dev *d, int i);
mt_optim *mt__train_pipe_optim(const mt__train_dev *d, int i);   /* its optimizer */
/* The mean validation loss over eval_batches microbatches into d->loss. */
mt_status mt__train_pipe_eval(mt_trainer *tr, mt__train_dev *d, mt_ctx *ctx);

/* ---- strategies as sharding presets (presets.c) ---- */

/* The bit of the mesh axis `name`; 0 when the mesh has none. */
uint32_t  mt__axis_bit(const mt_mesh *mesh, const char *name);
/* The axes that split the batch: data, fsdp and expert (expert parallelism
 * folds the experts' axis over devices that hold different tokens), those
 * the mesh has. */
mt_axes   mt__batch_axes(const mt_mesh *mesh);
/* The rule table of a run: the strategies' rows that c takes (batch over
 * data+fsdp; vocab, heads, kv_heads and mlp over tensor; with sequence
 * parallelism act_length over tensor), then the rows registered
 * (mt__strategy_register), each logical axis's rule replaced by a later
 * row's and finally by c->rules' where they give one; and, when `lowerings`
 * is not NULL, the rows' lowering variants ','-joined into it (cap bytes).
 * MT_EINVAL from mt_rules_parse. */
mt_status mt__train_rules(const mt_train_config *c, mt_rules *out, char *lowerings, size_t cap);

/* A strategy as one row of rules over logical axes (presets.c's ROWS). */
typedef struct {
    const char *strategy;   /* what it is, for messages ("expert parallelism over expert") */
    const char *rules;      /* mt_rules_parse's text: "experts=expert" */
    /* the lowering variants it runs (mt_partition_opts.lowerings; NULL: none) */
    const char *lowerings;
    /* whether a run's configuration takes the row (NULL: every run) */
    bool      (*on)(const mt_train_config *c);
} mt__strategy_row;

/* Registers a row from outside the library (it must outlive every run):
 * every run's rule table then holds it after the built-in rows. MT_EINVAL
 * naming the row when its rules do not parse; MT_ENOMEM when the registry
 * is full. */
mt_status mt__strategy_register(const mt__strategy_row *row);
/* Sets the shardings of the global program's leaves for the mesh's axes
 * (the rule table over the builder's logical axes, FSDP storage) and the
 * partitioner's options (*opts: fsdp's gather). */
mt_status mt__shard_program(const mt__train_model *m, const mt_train_config *c, mt_graph *g,
                            const mt_mesh *mesh, mt_partition_opts *opts);

/* Tokens or examples (m->sequences) in one microbatch of the global batch. */
int64_t   mt__microbatch_size(const mt__train_model *m, const mt_train_config *c);

/* Builds c's model with its loss times `scale` into a new graph; on a mesh
 * (ctx) as the global program with its batch leaves split over "data",
 * partitioned for ctx's device. Compiles it, fills its constants and finds
 * its two inputs. */
mt_status mt__train_make_graph(const mt__train_model *m, const mt_train_config *c, mt_ctx *ctx,
                               float scale, bool no_grad, mt_graph **out, mt_tensor **in,
                               mt_tensor **target);

/* The documents' separator with doc_mask: cfg.eot_id, or the model's when
 * it is negative. */
int32_t mt__train_eot_id(const mt_trainer *tr);
/* Fills one microbatch of `split` at *pos into a device's inputs and
 * advances *pos; on a mesh the device keeps its slice of the global one.
 * The inputs are written through their graph's backend (copy_in), whose
 * failure is returned. */
mt_status mt__train_fill_batch(const mt_trainer *tr, mt__train_dev *d, mt_ctx *ctx, int split,
                               int64_t *pos, mt_tensor *in, mt_tensor *target);
/* dst (rows,T) = this device's head-tail share (mt_headtail_pos, device
 * `part` of `parts`) of each of the rows (rows, parts·T) of 4-byte elements
 * at src; dst may be src (cut in place). (devices.c) */
void      mt__train_headtail_rows(void *dst, const void *src, int64_t rows, int64_t T, int parts,
                                  int part);

/* The split of t's dim 1 (a sequence) over devices, on ctx's device: the
 * devices in it (*parts, 1 when whole or off a mesh) and this one's place
 * (*part). A split sequence is laid out head-tail (mt_headtail_pos).
 * (devices.c) */
void      mt__train_seq_split(mt_ctx *ctx, const mt_tensor *t, int *parts, int *part);
/* Rewrites the (B,T) int32 constant `name` of g (the GPT's position ids),
 * when its T is split over devices, with each local row's positions in the
 * whole sequence. (devices.c) */
mt_status mt__train_seq_positions(mt_ctx *ctx, mt_graph *g, const char *name);

/* Work for every device: ctx is NULL off a mesh. */
typedef mt_status (*mt__dev_fn)(mt_trainer *tr, mt__train_dev *d, mt_ctx *ctx, void *arg);
/* Runs fn on every device: directly off a mesh, else in one launch, with
 * the device's graphs bound to the launch's context. */
mt_status mt__train_run_devices(mt_trainer *tr, mt__dev_fn fn, void *arg);
/* Device 0's part, the one that reports and saves; NULL on an MPI rank
 * without it. */
mt__train_dev *mt__train_dev0(mt_trainer *tr);

/* ---- the configuration's checks (config_check.c) ---- */

/* The devices a mesh run trains on: devices, else under MPI the ranks, else
 * the product of the mesh's sizes. MT_EINVAL when devices disagrees with
 * mpirun's ranks, or the spec has no product (mt_mesh_spec_devices). */
mt_status mt__train_mesh_devices(const mt_train_config *c, int *out);

/* On a mesh (after mt_train_config_check, which checked it): makes the
 * mesh, counts the devices, decides what the checkpoints gather, and sets
 * up the launch; before any device starts. */
mt_status mt__train_setup_mesh(mt_trainer *tr);
/* An mt__dev_fn: builds a device's graph and optimizer (and on a mesh its
 * buffer for the global microbatch). */
mt_status mt__train_create_dev(mt_trainer *tr, mt__train_dev *d, mt_ctx *ctx, void *arg);

/* ---- checkpoints of split parameters (ckpt_mesh.c) ---- */

/* Builds the host twin (tr->twin_g, tr->twin_opt) unless it exists: the
 * model without a mesh, batch 1, compiled with gradients, and its optimizer.
 * A whole copy of the model (4x the parameters' bytes with m, v and the
 * gradients) on this process. */
mt_status mt__ckpt_twin(mt_trainer *tr);
void      mt__ckpt_twin_free(mt_trainer *tr);
/* On a mesh, every process: gathers every parameter and its moments (and
 * device 0's optimizer step count) into the twin of the process holding
 * device 0, building it there first. Other processes build none. */
mt_status mt__ckpt_mesh_gather(mt_trainer *tr);
/* On a mesh, every process, after loading its twin with status `loaded`:
 * every device copies its block of every parameter and of the moments the
 * twin has from the twin, and sets its optimizer's step count to `steps`
 * (< 0: left alone). A failed load (loaded != MT_OK, its message the last
 * one) fails every device of this process inside the launch, so that the
 * other processes stop too instead of waiting for it. */
mt_status mt__ckpt_mesh_put(mt_trainer *tr, mt_status loaded, int steps);

#endif /* MT_TRAIN_IMPL_H */
