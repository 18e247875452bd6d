/*
 * meshtrain/train.h — the training loop behind `meshtrain train`, and
 * sampling from a checkpoint behind `meshtrain sample`.
 */
#ifndef MESHTRAIN_TRAIN_H
#define MESHTRAIN_TRAIN_H

#include "meshtrain/io.h"

#include <signal.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A model's kind: the handle by which the trainer, explain, sampling and
 * the planner reach a model in the one table of models, which is also
 * reached by name (mt_model_find, mt_model_name). The constants are the
 * library's own models, registered in that table first, at these values:
 * stable public values, kept for API compatibility, which never change. A
 * model registered from outside the library (mt__train_model_register,
 * src/train/train_impl.h) takes the next value, 4, 5, ...: a value of this
 * type that no constant names. Kinds are numbered from 0 without gaps. */
typedef enum {
    MT_MODEL_GPT = 0, MT_MODEL_MLP = 1, MT_MODEL_LINREG = 2, MT_MODEL_LLAMA = 3
} mt_model_kind;

/* The name of a model kind as `meshtrain train --model` spells it ("gpt",
 * "mlp", "linreg", "llama"): a static string, not to be freed. NULL for a
 * value that is not a model kind, so kinds 0, 1, ... up to the first NULL
 * are all of them. Does not set a message. */
const char *mt_model_name(mt_model_kind kind);
/* The kind of the model `name` names, as `meshtrain train --model` spells
 * it (one of the library's or one registered from outside), into *kind.
 * MT_EINVAL naming the models there are when none has the name, or when an
 * argument is NULL. */
mt_status   mt_model_find(const char *name, mt_model_kind *kind);

/* What a model flag's value is (mt_model_flag.type). */
typedef enum {
    MT_MODEL_FLAG_INT = 0,   /* an int field, in [lo, hi] (the default: 0) */
    MT_MODEL_FLAG_FLOAT,     /* a float field, in [flo, fhi] */
    MT_MODEL_FLAG_BOOL,      /* an int field, 0 or 1: the flag, given without a value, sets 1;
                                the command line's --no-<flag> sets 0 (over a preset) */
    MT_MODEL_FLAG_PRESET,    /* a name: `preset` writes the whole settings from it (offset
                                unused), before every other flag, so that they override it */
    MT_MODEL_FLAG_CHOICE,    /* an int field, the index of one of the names `metavar` lists
                                ("none|llama3|yarn": 0, 1, 2); in [lo, hi] */
} mt_model_flag_type;

/* One setting that only one model reads, as `meshtrain train` and `meshtrain
 * explain --model` take it: a field of the model's own settings (its
 * struct, mt_model_about.config_type: mt_gpt_config, mt_mlp_config,
 * mt_llama_config), of the flag's type. Each model lists its own
 * (mt_model_about), so a command line reads the flags of the model it was
 * given from the model's table and writes them into a buffer of the
 * model's config_size, with no branch on the kind. Flags of one name in
 * several models have one type. */
typedef struct {
    const char *flag;          /* "heads": the flag, without "--" */
    const char *field;         /* "NH": its name in messages and model files */
    size_t      offset;        /* offsetof(the model's config struct, ...) of an int (a float
                                  for MT_MODEL_FLAG_FLOAT) */
    int         lo, hi;        /* the values an int takes */
    bool        zero_is_auto;  /* 0 means "from the data" (GPT: V and Vp) */
    const char *metavar;       /* "N", for help; MT_MODEL_FLAG_CHOICE: the names, "a|b|c" */
    const char *help;          /* one line */
    mt_model_flag_type type;   /* what the value is; 0: an int */
    float       flo, fhi;      /* the values a float takes */
    /* MT_MODEL_FLAG_PRESET: writes the settings `name` into mc (the model's
     * struct, holding its defaults); MT_EINVAL naming the known names. */
    mt_status (*preset)(const char *name, void *mc);
    /* NULL, or the flag (its "flag") of an MT_MODEL_FLAG_CHOICE, INT or
     * BOOL this one is a setting of: a settings line shows it only while
     * that one is past its first ("none"), nonzero or on, as --rope-factor
     * with --rope-scaling (a switch naming itself: shown only when on) */
    const char *setting_of;
} mt_model_flag;

/* What a command line needs to know of a model. */
typedef struct {
    const char          *name;       /* as --model spells it: "gpt" */
    bool                 sequences;  /* a microbatch is B sequences of T tokens (T, --seq,
                                        applies; throughput counts tokens); else B examples */
    bool                 dataset;    /* trains on data (mt_train_config.data, --data); else
                                        on a synthetic problem of its own */
    bool                 llmc;       /* llm.c checkpoints hold it (llmc_in, llmc_out) */
    const char          *config_type;  /* its settings' struct ("mt_gpt_config"), for
                                          messages; NULL: it has none */
    size_t               config_size;  /* sizeof that struct; 0: none */
    const mt_model_flag *flags;      /* its own settings, n_flags of them */
    int                  n_flags;
} mt_model_about;

/* What the trainer knows of model `kind` (static, not to be freed); NULL
 * for a value that is no model. */
const mt_model_about *mt_model_about_of(mt_model_kind kind);

/* The shape of a transformer model, as its own entry states it (the
 * planner reads these, never a flag by name): */
typedef struct {
    int  layers, width, heads;
    int  kv_heads;    /* key/value heads as set (the GPT: heads) */
    int  head_dim;    /* the size of one head: q is heads·head_dim wide, k and v
                         kv_heads·head_dim (the GPT: width/heads; LLaMA: --head-dim,
                         width/heads when 0) */
    int  ffn;         /* the MLP's hidden width (the GPT: 4·width; LLaMA: its F) */
    bool gated;       /* a gated MLP, three matrices (SwiGLU) */
    int  max_seq;     /* the context */
    int  vocab;       /* 0: from the data */
    /* A mixture of experts (docs/moe.md; 0 experts: dense): block l is MoE
     * when l >= moe_first_dense and (l - moe_first_dense) % moe_every == 0,
     * its feed-forward moe_top_k routed SwiGLU experts of moe_ffn (of
     * moe_experts) and moe_shared shared ones of moe_ffn each; the others
     * are dense (ffn). Settings at 0 resolved (top-k, every, moe_ffn). */
    int  moe_experts, moe_top_k, moe_ffn, moe_shared, moe_first_dense, moe_every;
} mt_model_shape;


/* Whether sequence parallelism runs its collectives as collective matmuls
 * when mt_train_config.collective_matmul is 0: off, because on the threads
 * transport of a 2-core machine (2026-11-30) a c768 layer measured 3-4%
 * slower with them (one gemm a ring step; 9-10% before): the same cores
 * that compute move the ring's chunks, so no transfer runs under a product,
 * and the split products cost more than the collectives they replace. */
#define MT_COLLECTIVE_MATMUL_DEFAULT 0

typedef struct {
    mt_model_kind   model;
    /* The model's own settings: a pointer to its struct (mt_model_about's
     * config_type: mt_gpt_config for the GPT, mt_mlp_config for the MLP),
     * and that struct's size, which the checks compare with the model's
     * config_size so that the struct of another model is refused, not read.
     * NULL (size ignored): the model's defaults (mt_model_config_defaults).
     * A pointer rather than a member per model, or a union of them, so that
     * this struct names no model, a new model adds no field here, and the
     * library can tell a wrong struct from a right one by its size. The
     * caller keeps the struct alive for the call it passes it to;
     * mt_trainer_create copies it (the caller's may die afterwards), and
     * mt_trainer_config's model_config points at the trainer's copy, as
     * resolved (GPT: V and Vp from the data, the sizes of llmc_in). */
    const void     *model_config;
    size_t          model_config_size;
    const char     *data;        /* text file or llm.c token file (GPT); NULL for
                                    MLP/linreg, which make synthetic data */
    double          val_frac;    /* tail of the data held out (default 0.1) */
    int             B, T;        /* microbatch (B sequences of T tokens) */
    int             accum;       /* microbatches per step (gradient accumulation) */
    int             steps;       /* optimizer steps to take (in total, counting resumed ones) */
    mt_optim_config optim;
    uint64_t        seed;
    int             eval_every;  /* steps between validation losses; 0 = never. Needs a
                                    validation split of at least T+1 tokens (val_frac) */
    int             eval_batches;
    const char     *ckpt_in;     /* resume from a meshtrain checkpoint, or NULL */
    const char     *ckpt_out;    /* write a meshtrain checkpoint at the end (and every ckpt_every) */
    int             ckpt_every;  /* 0 = at the end only; > 0 needs ckpt_out */
    const char     *llmc_in;     /* initialise from the model's llm.c-family checkpoint
                                    (llm.c's for the GPT, llama2.c's model.bin for LLaMA) */
    const char     *llmc_out;    /* also write one at the end */
    const char     *hf_in;       /* initialise from a Hugging Face model directory
                                    (config.json and safetensors; LLaMA and GPT-2: io.h's
                                    mt_hf_read_*_config): the model is its config's */
    const char     *hf_out;      /* also write one at the end (a directory, made if missing) */
    int             threads;     /* kernel threads in all; 0 = all cores. On a mesh each
                                    device gets threads / devices (at least 1) */
    const char     *backend;     /* where every device's program runs, by name
                                    (backend.h, mt_backend_find: "cpu", or one registered);
                                    NULL or "": the CPU */
    /* Training on a mesh: NULL (or "") trains on this process alone, as one
     * device. Otherwise the mesh spec ("data=4"): the program is partitioned
     * (partition.h) and each step runs on every device of the mesh, threads
     * of this process or, under mpirun, one device per rank. The batch (B
     * sequences or examples, the GLOBAL microbatch) is split over the mesh's
     * "data" axis, if it has one: B must divide by its size; the other axes
     * replicate the work. Every mesh trains the same run as one device. */
    const char       *mesh;
    int               devices;   /* threads: device count (0 = the mesh's product); under MPI
                                    0 = one device per rank */
    mt_transport_kind transport; /* AUTO: MPI under mpirun with > 1 rank, else threads */
    /* The strategy as data (sharding.h's rules, MaxText's
     * logical_axis_rules): the model's logical axes (its entry's list; a
     * rule naming another is refused, listing them) to mesh axes,
     * "mlp=tensor,heads=tensor,embed=fsdp". Each rule replaces the default
     * rows' rule of its logical axis (but batch's, which the data loader
     * reads by: refused); the default rows are batch=data+fsdp
     * (data parallel, FSDP's batch) and vocab=tensor, heads=tensor,
     * kv_heads=tensor, mlp=tensor (Megatron's tensor parallelism), and
     * with sequence_parallel act_length=tensor (the residual stream's rows:
     * "act_length=tensor" alone is sequence parallelism). A rule
     * that maps a logical axis to fsdp (or with zero, data) stores the
     * parameters split on that dim, gathered before use. NULL or "": the
     * default rows alone. */
    const char       *rules;
    /* ZeRO over the mesh's data axis: 0 off (data parallel: parameters and
     * optimizer state replicated, gradients all-reduced); 1 parameters and
     * AdamW state stored split over data, gradients all-reduced and sliced,
     * the parameters gathered back for use; 2 the same with the gradients
     * reduce-scattered; 3 the same as 2, with the gathered parameters freed
     * after the forward and gathered again in the backward, as fsdp does.
     * Needs a data axis of 2 or more. */
    int               zero;
    /* Sequence parallelism over the mesh's tensor axis (the rule
     * act_length=tensor: a constraint on the residual stream's rows,
     * partition.h's mt_tensor_set_constraint): the layernorms and residual
     * adds run on T/n rows, all-gathers and reduce-scatters replace tensor
     * parallelism's all-reduces. Needs a tensor axis of 2 or more and a
     * model with a sequence. */
    bool              sequence_parallel;
    /* Context parallelism over the mesh's context axis (the rule
     * seq=context): each device holds a head-tail share of every sequence
     * (mt_headtail_pos; T % (2·context) == 0) and runs everything but
     * attention on it. cp_attention is attention's lowering (partition.h's
     * MT_CP_*): 0 the all-gather of k and v (Llama 3's; the default), 1 the
     * ring of k, v sends (dK, dV travelling home), 2 Ulysses' all-to-alls
     * over heads (the heads and kv heads per device dividing by context,
     * checked by mt_train_config_check). */
    int               cp_attention;
    /* With parameters stored split and gathered before use (an fsdp axis,
     * zero 2 or 3): 1 frees a gathered parameter after its forward use and
     * gathers it again for the backward (partition.h's
     * reshard_after_forward: about one layer's gathered parameters alive
     * at a time, one more all-gather a microbatch), -1 keeps it from the
     * forward to the backward (torchtitan's reshard_after_forward=False),
     * 0 the default: on for fsdp and ZeRO-3. ZeRO-1 and ZeRO-2 keep the
     * gathered parameters for the whole step (fsdp_gather): set with them,
     * or with fsdp_gather 1, it is refused. */
    int               reshard_after_forward;
    /* When parameters stored split are gathered (an fsdp axis, zero 3):
     * 1 once a step, the gathered copies kept for the whole step and between
     * steps, and with more than one microbatch their gradients accumulated
     * whole and reduce-scattered once (partition.h's gather_once and
     * grads_once; Llama 3's FSDP), -1 for every microbatch (and as
     * reshard_after_forward says in the backward), 0 the default: every
     * microbatch. ZeRO-1 and ZeRO-2 always gather once, as the ZeRO paper
     * defines them (ZeRO-1 keeping the whole gradient, ZeRO-2 only across
     * microbatches): -1 with them is refused. */
    int               fsdp_gather;
    /* With sequence parallelism: its gathers and reduce-scatters run inside
     * the linear layers as collective matmuls (partition.h's lowering
     * variant "collective_matmul"). 1 on, -1 off,
     * 0 the default (MT_COLLECTIVE_MATMUL_DEFAULT). */
    int               collective_matmul;
    /* Pipeline parallelism over the mesh's pipe axis (GPT): the layers cut
     * into stages, one or more chunks a device, run by a schedule
     * (meshtrain/pipeline.h) whose microbatches are the step's accum
     * microbatches (m >= the pipe size). The schedule's kind: "gpipe",
     * "1f1b", "interleaved", "zb-h1", "zb-h2", "zb-v" or "dualpipev"; NULL
     * means "1f1b" when the mesh has a pipe axis of 2 or more. A schedule
     * without such an axis is an error. */
    const char       *schedule;
    int               pipe_chunks;   /* model chunks per device; 0: the kind's own */
    /* Non-zero asks the run to stop (a signal handler sets it). Under MPI
     * every rank reads its own, and each step ends with the ranks agreeing
     * (any one set: all stop), so that all stop after the same step; the
     * step's report says so (stop). NULL: not watched. */
    const volatile sig_atomic_t *stop_flag;
    const char       *trace;     /* mt_trainer_write_trace writes the Chrome trace of
                                    the run's steps here (a track per device: every op,
                                    collective, optimizer step, idle time, and the
                                    model's FLOPs per step; see src/profile/trace.c);
                                    NULL: none. Without a mesh the run is traced as the
                                    one-device mesh data=1 (the same training run) */
    int               trace_steps; /* the trace keeps the last this many steps; 0: 20 */
    /* Activation checkpointing (graph.h, mt_remat): what each transformer
     * block keeps for its backward, the rest recomputed there; every graph
     * the trainer compiles gets it (one device, each device of a mesh, each
     * pipeline chunk). Off a pipeline the step then runs each block's W
     * right after its B (mt_compile_opts.interleave_w), so that the
     * recomputed values die within the block. The training run is bitwise
     * the same; the activation memory (mt_trainer_memory) is smaller. */
    mt_remat          remat;
    /* The matrix products' precision (mt_precision, meshtrain/tensor.h;
     * docs/precision.md): MT_PRECISION_FP32 (the default) or
     * MT_PRECISION_BF16, bf16 operands with f32 accumulation on oneDNN for
     * every graph the run compiles (one device, each device of a mesh, each
     * pipeline stage, the evaluation graphs). Parameters, gradients and
     * optimizer state stay f32. MT_EUNSUPPORTED at create in a build
     * without oneDNN. */
    mt_precision      precision;
    /* With MT_PRECISION_BF16: keep every activation f32
     * (mt_compile_opts.f32_activations). By default the activations only
     * bf16 products read are stored in bf16; the run is bitwise the same. */
    bool              f32_activations;
    /* The precision the gradient reductions move in (mt_compile_opts.
     * grad_reduce; docs/precision.md): MT_PRECISION_FP32 (the default) or
     * MT_PRECISION_BF16, data parallelism's all-reduces and FSDP's and
     * ZeRO's reduce-scatters of the gradients in bf16, half the bytes.
     * Independent of `precision`; the gradients stay f32. */
    mt_precision      grad_reduce;
    /* Gradient buckets (mt_compile_opts.bucket_bytes): data parallelism's
     * f32 gradient all-reduces (and fsdp's and ZeRO 2/3's reduce-scatters)
     * go in buckets of up to this many MiB (2^20 bytes), one message a
     * bucket; 25 by default (PyTorch DDP's bucket_cap_mb), 0 for one
     * reduction per gradient. In [0, 1048576]. */
    double            bucket_mb;
    /* Packed documents (--doc-mask): true keeps attention within documents.
     * The loader derives each token's document id from its row (a token
     * after eot_id starts a new document; the eot_id token belongs to the
     * document it ends) into the model's "docs" input. Positions stay the
     * row's (0..T-1), not the document's. GPT and LLaMA only; refused with
     * a pipe axis of 2+ and with a context axis of 2+. false: the run is
     * bitwise what it was without. */
    bool              doc_mask;
    /* The end-of-text id that separates documents; negative: the model's
     * (GPT-2's <|endoftext|> 50256; LLaMA: 2, SentencePiece's </s>, which
     * tokenize --doc-sep writes). Read only with doc_mask. */
    int               eot_id;
} mt_train_config;

/* c's model's shape, from its settings (model_config) or, NULL, its
 * defaults. MT_EUNSUPPORTED for a model that is not a transformer (mlp,
 * linreg: no such shape);
 * MT_EINVAL for a kind that is not a model. */
mt_status mt_model_shape_of(const mt_train_config *c, mt_model_shape *out);
/* Writes into `config` (c's model's settings struct, config_size bytes, a
 * copy of c's) the same model with `layers` blocks and a context of at
 * least `max_seq`: what a planner builds to cost a pipeline's chunk. Errors
 * as mt_model_shape_of. */
mt_status mt_model_resize(const mt_train_config *c, void *config, int layers, int max_seq);
/* c's model's FLOPs for one token of training at sequence length c->T, as
 * its entry counts them for the trainer's MFU (GPT: llm.c's 6N + 6·L·C·T,
 * N every parameter, causal attention half PaLM's 12·L·C·T; LLaMA: 6 a
 * product weight, the untied lookup table none, plus 6·L·NH·HS·T), into *out: what a plan's
 * MFU counts, so that it is the trainer's. MT_EUNSUPPORTED for a model
 * whose entry has no count (the graph's own FLOPs stand in for the
 * trainer's); MT_EINVAL for a kind that is not a model. */
mt_status mt_model_flops_per_token(const mt_train_config *c, double *out);

/* Writes model `kind`'s default settings into cfg, `size` bytes, which must
 * be the model's config_size (mt_model_about): GPT's mt_gpt_config L=2 C=64
 * NH=4 maxT=64 V=0 Vp=0 (V and Vp from the data), the MLP's mt_mlp_config
 * hidden=64 layers=3, LLaMA's mt_llama_config dim=64 ffn_dim=0 (from the
 * rule: multiple_of 32, ffn_mult 1, giving 192) n_layers=2 n_heads=4
 * n_kv_heads=2 vocab=0 (from the data) max_seq=64 rope_theta=10000
 * norm_eps=1e-5, untied, RoPE unscaled with Llama 3.1's settings
 * (MT_LLAMA31_ROPE_SCALING(MT_ROPE_SCALING_NONE)); linear regression has none (size 0, cfg may be
 * NULL). These are the settings a NULL mt_train_config.model_config means.
 * MT_EINVAL for a kind that is no model, or a size that is not the model's. */
mt_status mt_model_config_defaults(mt_model_kind kind, void *cfg, size_t size);

/* The settings of model `kind` for a program built without its data, as
 * `meshtrain explain --model` builds it: the defaults, with what the data
 * would give taken as a build without data takes it from `c` (GPT: V 256,
 * the byte vocabulary of a text file, and maxT c->T, the longest sequence
 * the program reads; LLaMA: vocab 256 and max_seq c->T as well). A command
 * line writes its flags over them. Errors as mt_model_config_defaults. */
mt_status mt_model_config_without_data(mt_model_kind kind, const mt_train_config *c, void *cfg,
                                       size_t size);

/* Reads model `kind`'s settings from the header of the llm.c checkpoint
 * `path` into cfg (`size` bytes, the model's config_size), as llmc_in
 * gives them to the trainer. MT_EINVAL for a model llm.c files do not hold
 * (mt_model_about.llmc false) or a size that is not the model's; the
 * reader's errors (MT_EIO naming the file) otherwise. */
mt_status mt_model_config_from_llmc(mt_model_kind kind, const char *path, void *cfg, size_t size);

/* Builds the program the trainer partitions: cfg's model for one microbatch
 * of the global batch (B sequences of T tokens, or B examples), its loss
 * normalised by the global count (the mean over the microbatch), sharded for
 * `mesh` as the strategies say (mesh NULL: nothing split): the batch over
 * the axes data and fsdp, the parameters over fsdp (FSDP, gathered before
 * use) and tensor (tensor parallel, where the model supports it). *opts (may
 * be NULL) gets the partitioner options the layout needs. GPT needs V
 * set in its settings (the trainer takes it from the data; Vp 0 is V
 * rounded up to 64, as the trainer takes it): settings from
 * mt_model_config_without_data have it. For `meshtrain explain`. */
mt_status mt_train_build_program(const mt_train_config *cfg, const mt_mesh *mesh, mt_graph *g,
                                 mt_tensor **loss, mt_partition_opts *opts);

/* On a mesh with a pipe axis of 2 or more: the pipeline chunks the trainer
 * gives `device`, in order, in chunk[0..*n) (at most `max`), and the
 * chunks of the whole model in *S (the schedule's stages times its chunks
 * per device: cfg->schedule, cfg->accum, cfg->pipe_chunks). Without a pipe
 * axis *n = *S = 1, chunk[0] = 0. The schedule's errors (mt_schedule_make)
 * otherwise. For `meshtrain explain`. */
mt_status mt_train_pipe_chunks(const mt_train_config *cfg, const mt_mesh *mesh, int device,
                               int *chunk, int max, int *n, int *S);

/* Builds chunk `chunk` of S (mt_train_pipe_chunks) as the trainer builds
 * it: the model's blocks of that chunk (the embedding with chunk 0, the
 * head and the loss with chunk S-1, the tied embedding on both), sharded
 * for `mesh` as mt_train_build_program shards the whole model. *out is the
 * loss (the last chunk) or the chunk's output, which compiles with
 * seed_from_caller (*seeded true). S = 1 is mt_train_build_program. */
mt_status mt_train_build_chunk_program(const mt_train_config *cfg, const mt_mesh *mesh, int chunk,
                                       int S, mt_graph *g, mt_tensor **out, bool *seeded,
                                       mt_partition_opts *opts);

/* Defaults: the GPT with its default settings (model_config NULL: L=2 C=64
 * NH=4 maxT=64), B=8 T=64, accum 1, 100 steps, AdamW lr 1e-3 with 10 warmup
 * steps and cosine decay, seed 1337, val_frac 0.1. */
mt_train_config mt_train_defaults(void);

typedef struct mt_trainer mt_trainer;

/* What one step did. */
typedef struct {
    int     step;          /* 1-based, after the update */
    float   loss;          /* mean over the global batch */
    float   grad_norm;
    float   lr;
    double  seconds;       /* wall time of the step */
    int64_t tokens;        /* tokens in the global batch (examples for MLP/linreg) */
    double  flops;         /* model FLOPs of the step */
    bool    stop;          /* the stop flag was set (on any rank): stop after this step */
    /* A pipeline (a pipe axis of 2+): the step's bubble rate as measured,
     * (max span - max busy) / max span over the pipe's devices, where a
     * device's span runs from its first op's start to its last op's end
     * and its busy time is what its ops worked (not their waits for
     * messages); the simulator's for the measured op costs of every chunk
     * (mt_schedule_simulate_chunks, messages costing 0; a whole backward
     * sends its gradient at its end, in both); and those costs, the mean over chunks of one
     * microbatch's F, B, W on a whole stage (a whole backward's B and W
     * parts apart). NAN off a pipeline. */
    double  bubble_rate, bubble_predicted;
    double  stage_f, stage_b, stage_w;
    /* Device 0's collectives in this step (every chunk of its pipeline:
     * graph.h's mt_comm_count), and psi: the parameters device 0 computes
     * with, each counted whole over the axes that store it split (data
     * under ZeRO, fsdp) but not over tensor or pipe, so that comm's
     * param_gather + grad_scatter + 2·grad_reduce is 2·psi a data-parallel
     * or ZeRO-1/2 step and 3·psi a ZeRO-3 microbatch (the ZeRO paper's §7). */
    mt_comm_count comm;
    double  psi;
    /* A mixture of experts: the step's MaxVio, (max_i c_i − mean c) / mean c
     * of the (token, slot) pairs each expert got over the global batch, the
     * largest over the MoE layers (0: balanced); NAN without MoE layers. */
    double  moe_maxvio;
    /* and the router losses the step's loss includes (the aux loss and the
     * z-loss, summed over the MoE layers; over the batch, a mean over the
     * microbatches, as the loss): loss − moe_aux is the language model's
     * own. NAN without MoE layers. */
    double  moe_aux;
    /* With a capacity (--moe-capacity): the share of the step's (token,
     * slot) pairs dropped past their experts' capacity, over the global
     * batch and every MoE layer; NAN without one. */
    double  moe_dropped;
} mt_step_report;

/* Every check of cfg that the configuration alone decides, made without
 * opening a file or starting a device (mt_trainer_create makes it first;
 * `meshtrain explain --model` makes it on its flags):
 *   - each field (sizes, counts and ranges; model_config_size the model's
 *     config_size when model_config is set; ckpt_every needs ckpt_out, zero
 *     and a schedule need a mesh, llmc files a GPT or a LLaMA (theta 10000,
 *     eps 1e-5: llama2.c's), ckpt_in or llmc_in);
 *   - settings that would change nothing where they are: f32_activations
 *     without bf16, grad_reduce bf16 without a mesh, remat on a model
 *     without blocks, collective_matmul on without sequence parallelism,
 *     sequence parallelism without a mesh;
 *   - the model's own settings, with the model's messages (GPT: data
 *     given, val_frac, C divisible by NH, Vp >= V, T <= maxT; with llmc_in
 *     the sizes are the file's and are checked when it is read; the MLP:
 *     hidden and layers positive);
 *   - the mesh: its spec (names, sizes, products), the device count against
 *     it (and under mpirun against the ranks), axes the trainer knows (data,
 *     fsdp, tensor, pipe), ZeRO's data axis of 2+, zero=1 without fsdp,
 *     sequence parallelism's tensor axis of 2+ dividing T, a pipe axis's
 *     schedule (the kind known, checked first; then m >= p and the kind's
 *     shape, the chunks no more than the layers), no schedule without a
 *     pipe axis, B divisible by the axes that split the batch, and the
 *     model's sizes tensor parallelism splits (GPT: NH, 4C, Vp when known).
 * Returns MT_OK, or MT_EINVAL (MT_EUNSUPPORTED for what the build or the
 * trainer cannot do, e.g. bf16 without oneDNN, sequence parallelism in a
 * pipeline) with one message naming the setting, as its flag, and what to
 * do. Statuses that say the configuration is wrong, never a file. */
mt_status mt_train_config_check(const mt_train_config *cfg);

/* Validates the configuration (mt_train_config_check), opens the data, builds and compiles the model, creates the optimizer, and
 * loads ckpt_in / llmc_in if given. Every conflict a run would meet later is
 * an error here, before step 1 (MT_EINVAL): ckpt_every without ckpt_out, and
 * eval_every with a validation split shorter than T+1 tokens. A non-finite
 * value in ckpt_in or llmc_in fails with MT_ENAN naming the tensor. The
 * caller owns *out (mt_trainer_free); the paths of cfg and its model's
 * settings (model_config) are copied. */
mt_status mt_trainer_create(const mt_train_config *cfg, mt_trainer **out);
void      mt_trainer_free(mt_trainer *tr);
/* The configuration as resolved (V from the data, step resumed from, ...);
 * its model_config points at the trainer's copy of the model's settings,
 * as resolved, valid as long as the trainer. */
const mt_train_config *mt_trainer_config(const mt_trainer *tr);
/* Steps already taken (non-zero after a resume). */
int       mt_trainer_step_count(const mt_trainer *tr);
/* One optimizer step over accum microbatches. Fails with MT_ENAN naming the
 * step if the loss or a gradient is not finite. */
mt_status mt_trainer_step(mt_trainer *tr, mt_step_report *report);
/* Writes the trace of the steps so far (the last trace_steps) to
 * cfg.trace, replacing the file; MT_OK without a trace. On a mesh every
 * device takes part (call it on every rank: under MPI rank 0 gathers and
 * writes the file). MT_EIO naming the path when it cannot be written. */
mt_status mt_trainer_write_trace(mt_trainer *tr);
/* Mean validation loss over eval_batches microbatches: the language
 * model's cross-entropy (a mixture of experts' router losses, part of the
 * training loss, are not in it). */
mt_status mt_trainer_eval(mt_trainer *tr, float *val_loss);
/* Writes ckpt_out (and llmc_out), each through "<path>.tmp" renamed
 * over it (meshtrain/io.h). On failure (MT_EIO with the system's message,
 * e.g. a full disk) the previous files are untouched and the trainer is
 * unchanged: training may go on and a later save retry. On a
 * mesh every device takes part (call it on every rank): split parameters
 * and their optimizer state are gathered, and the file is the one a single
 * device holding those values writes, so that any layout loads it (loads
 * give each device its block). The process holding device 0 keeps a
 * one-device copy of the model for this (about 4x the parameter bytes). */
mt_status mt_trainer_save(mt_trainer *tr);
/* Device 0's memory by category, from what was allocated (the buffer plan
 * and the optimizer), not from formulas. On a mesh that splits parameters
 * these are the shards'; in a pipeline, the sum over the device's chunks,
 * activations counting every slot (a microbatch in flight each). */
typedef struct {
    size_t parameters, gradients, optimizer;  /* persistent */
    size_t activations;                       /* the planned arena (incl. gathered parameters) */
    size_t activations_f32;                   /* the same had every activation been kept f32
                                                 (mt_graph_stats.arena_bytes_f32): more than
                                                 activations with bf16 activation storage */
    size_t temporary;                         /* kernels' scratch */
} mt_memory_report;
mt_memory_report mt_trainer_memory(mt_trainer *tr);

/* The compiled training graph (for inspection): on a mesh, device 0's
 * partitioned one. */
mt_graph *mt_trainer_graph(mt_trainer *tr);
/* A pipeline's layout, as `meshtrain train` prints it: the schedule, the
 * microbatches, and which blocks each chunk holds on which device (uneven
 * counts included), with the schedule's note when it falls back. NULL off a
 * pipeline. Valid as long as the trainer. */
const char *mt_trainer_pipeline(const mt_trainer *tr);
/* The number of devices the run trains on (1 off a mesh). */
int       mt_trainer_devices(const mt_trainer *tr);

/* Samples `n` tokens after `prompt` (bytes) from a checkpoint of a language
 * model (gpt, llama) with temperature and top-k (0 = all), writing each
 * decoded byte to `out` as it is produced (and flushing it). The
 * checkpoint is `ckpt`, a meshtrain one (its recorded description says the
 * model and its settings; a LLaMA's theta and eps come back with its six
 * significant digits) or an llm.c GPT-2 file (told apart by magic); or
 * `llmc_in`, the llm.c-family file of `model` (llm.c's for gpt, llama2.c's
 * model.bin for llama, which has no magic to tell it by); or `hf_in`, a
 * Hugging Face directory of a LLaMA or a GPT-2: exactly one of the three. MT_EINVAL
 * for more than one or none, a checkpoint of a model that
 * cannot be sampled (mlp, linreg), the model's own checks of the file's
 * settings. Fails with
 * MT_EIO naming the system's message when the checkpoint cannot be opened or
 * is not a regular file, or when writing to `out` fails (the sample stops
 * there); with MT_ENAN when the checkpoint holds a non-finite weight.
 * With `tokenizer` (any kind mt_tokenizer_open reads) the prompt is encoded
 * and each token decoded through it (mt_tokenizer_open's and _encode's
 * failures); the ids fed first are mt_sample_prompt's. The model's
 * vocabulary must be the tokenizer's pieces, or 256 without one (tokens are
 * bytes): MT_EINVAL naming both sizes otherwise (mt_sample_check). */
typedef enum {
    MT_SAMPLE_BOS_AUTO = 0,   /* the tokenizer's BOS first where it defines one (as run.c
                                 and Hugging Face's encode), none for bytes */
    MT_SAMPLE_BOS_ON,         /* the same; MT_EINVAL where there is no BOS */
    MT_SAMPLE_BOS_OFF,        /* the prompt's ids alone */
} mt_sample_bos;
typedef struct {
    const char *ckpt;
    const char *prompt;
    int         n;
    float       temperature;
    int         top_k;
    uint64_t    seed;
    int         threads;
    const char *tokenizer;   /* a tokenizer file (mt_tokenizer_open), or NULL: byte tokens */
    const char *llmc_in;     /* instead of ckpt: `model`'s llm.c-family file */
    mt_model_kind model;     /* with llmc_in: the model it holds (0: MT_MODEL_GPT) */
    const char *hf_in;       /* instead of ckpt: a Hugging Face directory of a LLaMA or
                                a GPT-2 (io.h's mt_hf_read_*_config) */
    mt_sample_bos bos;       /* the BOS before the prompt (0: MT_SAMPLE_BOS_AUTO) */
} mt_sample_config;
mt_status mt_sample(const mt_sample_config *cfg, FILE *out);

/* The ids mt_sample feeds before its first token, into a new *ids (free()
 * it) of *n: the BOS cfg->bos asks for (mt_tokenizer_bos), then `prompt`
 * (NULL: "") through cfg->tokenizer, or its bytes; the ids of "\n" where
 * that leaves none. mt_sample keeps their last T-1. MT_EINVAL for
 * MT_SAMPLE_BOS_ON without a BOS (no tokenizer; GPT-2's, cl100k_base's);
 * mt_tokenizer_open's and mt_tokenizer_encode's failures; MT_ENOMEM. */
mt_status mt_sample_prompt(const mt_sample_config *cfg, int32_t **ids, int64_t *n);

/* What mt_sample checks before it builds the model, from the checkpoint's
 * settings alone: that the model's vocabulary V is the tokenizer's pieces
 * (cfg->tokenizer), or 256 (bytes) without one, and a BOS for
 * MT_SAMPLE_BOS_ON. MT_OK when they are; MT_EINVAL naming both sizes and
 * the fix, *mismatch (may be NULL) then true, when they are not (the wrong
 * pair of files or flags was given); the failures
 * of reading the checkpoint's settings or opening the tokenizer, as
 * mt_sample's, with *mismatch false. */
mt_status mt_sample_check(const mt_sample_config *cfg, bool *mismatch);

#ifdef __cplusplus
}
#endif
#endif /* MESHTRAIN_TRAIN_H */
