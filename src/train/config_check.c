/*
 * config_check.c — mt_train_config_check: every check of a training
 * configuration that the configuration alone decides, made before any file
 * is opened or any device started. mt_trainer_create runs it first and
 * `meshtrain explain --model` runs it on its flags, so that a mistake gets
 * one message from one place whichever command meets it.
 *
 * The order is the order a reader would fix things in: the fields one by one
 * (sizes, ranges, flags that need another flag), the model's own checks,
 * then the mesh (its spec, its device count, its axes) and what each axis
 * asks of the rest (ZeRO a data axis, sequence parallelism a tensor axis, a
 * pipeline its schedule, the batch and the model's sizes dividing over the
 * axes that split them). What only a file can tell (llmc_in's model, V from
 * the data) is checked when the trainer reads it.
 */
#include "meshtrain/pipeline.h"
#include "train/strategy_fit.h"
#include "train/train_impl.h"

#include <stdio.h>
#include <string.h>

/* ======================================================================== */
/* The fields                                                                */
/* ======================================================================== */

/* "gpt, mlp or linreg": the names of the table, for messages. */
static void model_names(char *buf, size_t n) {
    const int count = mt__train_model_count();
    size_t at = 0;
    buf[0] = '\0';
    for (int k = 0; k < count && at < n; k++) {
        const mt__train_model *m = mt__train_model_of((mt_model_kind)k);
        if (!m) continue;
        int w = snprintf(buf + at, n - at, "%s%s", at == 0 ? "" : k == count - 1 ? " or " : ", ",
                         m->about.name);
        if (w < 0) break;
        at += (size_t)w;
    }
}

static bool has_mesh(const mt_train_config *c) { return c->mesh && *c->mesh; }

/* Each field alone, and the pairs of fields where one needs the other. */
static mt_status check_fields(const mt_train_config *c, const mt__train_model *m) {
    if (c->B <= 0) return mt_fail(MT_EINVAL, "batch size B=%d must be positive", c->B);
    if (c->precision != MT_PRECISION_FP32 && c->precision != MT_PRECISION_BF16)
        return mt_fail(MT_EINVAL, "precision %d: use MT_PRECISION_FP32 or MT_PRECISION_BF16",
                       (int)c->precision);
    if (c->grad_reduce != MT_PRECISION_FP32 && c->grad_reduce != MT_PRECISION_BF16)
        return mt_fail(MT_EINVAL, "grad_reduce %d: use MT_PRECISION_FP32 or MT_PRECISION_BF16",
                       (int)c->grad_reduce);
    if (!(c->bucket_mb >= 0 && c->bucket_mb <= 1048576))   /* also NaN */
        return mt_fail(MT_EINVAL, "bucket_mb %g: give the gradient buckets' size in MiB, "
                       "0 to 1048576 (0: one all-reduce per gradient; PyTorch DDP's 25)",
                       c->bucket_mb);
    mt_status ps = mt_precision_check(c->precision);
    if (ps != MT_OK) return ps;
    if (c->doc_mask && !m->sequence)
        return mt_fail(MT_EINVAL, "--doc-mask on keeps attention within the documents of a "
                       "sequence, and --model %s has no sequences; use gpt or llama, or drop "
                       "--doc-mask", m->about.name);
    if (c->trace_steps < 0)
        return mt_fail(MT_EINVAL, "trace_steps=%d: give the number of steps to keep, or 0 for "
                       "the default (20)", c->trace_steps);
    if (m->about.sequences && c->T <= 0)
        return mt_fail(MT_EINVAL, "sequence length T=%d must be positive", c->T);
    if (c->accum <= 0)
        return mt_fail(MT_EINVAL, "accum=%d microbatches per step must be positive", c->accum);
    if (c->steps < 0) return mt_fail(MT_EINVAL, "steps=%d must not be negative", c->steps);
    if (c->eval_every < 0)
        return mt_fail(MT_EINVAL, "eval_every=%d must not be negative (0 = never)", c->eval_every);
    if (c->eval_every > 0 && c->eval_batches <= 0)
        return mt_fail(MT_EINVAL, "eval_batches=%d must be positive when eval_every=%d",
                       c->eval_batches, c->eval_every);
    if (c->ckpt_every < 0)
        return mt_fail(MT_EINVAL, "ckpt_every=%d must not be negative (0 = at the end only)",
                       c->ckpt_every);
    /* without a path the periodic saves would silently not happen */
    if (c->ckpt_every > 0 && !c->ckpt_out)
        return mt_fail(MT_EINVAL, "ckpt_every=%d has no checkpoint to write: set ckpt_out, "
                       "or set ckpt_every to 0", c->ckpt_every);
    if (c->zero < 0 || c->zero > 3)
        return mt_fail(MT_EINVAL, "zero=%d: the ZeRO stages are 1, 2 and 3 (0: off)", c->zero);
    if (c->zero > 0 && !has_mesh(c))
        return mt_fail(MT_EINVAL, "zero=%d needs a mesh with a data axis (e.g. --mesh data=2)",
                       c->zero);
    if (c->threads < 0)
        return mt_fail(MT_EINVAL, "threads=%d must not be negative (0 = all cores)", c->threads);
    if (c->devices < 0)
        return mt_fail(MT_EINVAL, "devices=%d must not be negative (0: the mesh's product)",
                       c->devices);
    if ((c->schedule || c->pipe_chunks) && !has_mesh(c))
        return mt_fail(MT_EINVAL, "a pipeline schedule (%s) needs a mesh with a pipe axis (e.g. "
                       "--mesh pipe=2)", c->schedule ? c->schedule : "chunks");
    if (c->pipe_chunks < 0 || c->pipe_chunks > MT_PIPE_MAX_CHUNKS)
        return mt_fail(MT_EINVAL, "pipe_chunks=%d: a device holds 1 to %d model chunks (0: the "
                       "schedule's own)", c->pipe_chunks, MT_PIPE_MAX_CHUNKS);
    if ((int)c->remat < (int)MT_REMAT_NONE || (int)c->remat > (int)MT_REMAT_DOTS)
        return mt_fail(MT_EINVAL, "remat %d: use one of none, full, attention, dots",
                       (int)c->remat);
    mt_status s;
    if (m->check && (s = m->check(c)) != MT_OK) return s;
    if (!m->about.llmc && (c->llmc_in || c->llmc_out)) {
        char names[128];
        return mt_fail(MT_EINVAL, "llm.c-family checkpoints (%s: llm.c's or llama2.c's) hold "
                       "%s models, not --model %s; drop them or train one of those",
                       c->llmc_in ? c->llmc_in : c->llmc_out,
                       mt__train_llmc_models(names, sizeof names), m->about.name);
    }
    if (!m->about.dataset && c->data)
        return mt_fail(MT_EINVAL, "--model %s trains on a synthetic problem of its own and "
                       "reads no data: drop --data '%s', or train a model that reads it "
                       "(--model gpt)", m->about.name, c->data);
    if (c->ckpt_in && c->llmc_in)
        return mt_fail(MT_EINVAL, "give either ckpt_in (%s, a resume) or llmc_in (%s, an "
                       "initialisation), not both", c->ckpt_in, c->llmc_in);
    if ((c->hf_in || c->hf_out) && !m->hf_load)
        return mt_fail(MT_EINVAL, "Hugging Face directories (%s) hold LLaMA-family and GPT-2 "
                       "models, not --model %s; drop --hf-in/--hf-out or train --model llama "
                       "or gpt",
                       c->hf_in ? c->hf_in : c->hf_out, m->about.name);
    if (c->hf_in && (c->ckpt_in || c->llmc_in))
        return mt_fail(MT_EINVAL, "give one start: --hf-in '%s' (an initialisation) or %s '%s', "
                       "not both", c->hf_in, c->ckpt_in ? "--ckpt-in" : "--llmc-in",
                       c->ckpt_in ? c->ckpt_in : c->llmc_in);
    return MT_OK;
}

/* Settings that would change nothing where they are: a mistake to say, not
 * to ignore (the message says which setting would make them count). */
static mt_status check_no_effect(const mt_train_config *c, const mt__train_model *m) {
    if (c->f32_activations && c->precision != MT_PRECISION_BF16)
        return mt_fail(MT_EINVAL, "--f32-activations keeps the activations of bf16 products in "
                       "f32, but the products are fp32 (every activation is f32 already): add "
                       "--precision bf16, or drop --f32-activations");
    if (c->grad_reduce == MT_PRECISION_BF16 && !has_mesh(c))
        return mt_fail(MT_EINVAL, "--grad-reduce bf16 sets the precision of gradient reductions "
                       "between devices, and one device reduces nothing: add --devices N (or "
                       "--mesh data=N), or drop --grad-reduce");
    if (c->remat != MT_REMAT_NONE && !m->remat)
        return mt_fail(MT_EINVAL, "--remat recomputes the activations of transformer blocks, "
                       "and --model %s has none: use --model gpt, or drop --remat", m->about.name);
    const mt__strategy_sizes z = {.sp = c->sequence_parallel, .cm = c->collective_matmul != 0};
    if (mt__strategy_misfits(&z) & MT__MISFIT_CM_NO_SP)
        return mt_fail(MT_EINVAL, "--collective-matmul moves the collectives of sequence "
                       "parallelism into the matmuls, and there are none: add "
                       "--sequence-parallel (with a tensor axis), or drop --collective-matmul");
    if (c->sequence_parallel && !has_mesh(c))
        return mt_fail(MT_EINVAL, "--sequence-parallel splits the rows over the mesh's tensor "
                       "axis, but there is no mesh: add one (e.g. --mesh tensor=2), or drop "
                       "--sequence-parallel");
    if (c->fsdp_gather && !has_mesh(c))
        return mt_fail(MT_EINVAL, "--fsdp-gather chooses when parameters stored split are "
                       "gathered, and without a mesh none is: add an fsdp axis (e.g. --mesh "
                       "fsdp=2), or drop --fsdp-gather");
    if (c->reshard_after_forward && !has_mesh(c))
        return mt_fail(MT_EINVAL, "--reshard-after-forward chooses what happens to parameters "
                       "gathered from their shards, and without a mesh none is stored split: "
                       "add an fsdp axis (e.g. --mesh fsdp=2), or drop --reshard-after-forward");
    if (c->rules && *c->rules && !has_mesh(c))
        return mt_fail(MT_EINVAL, "--rules maps the model's logical axes onto a mesh's axes, "
                       "but there is no mesh: add one (e.g. --mesh data=2,tensor=2), or drop "
                       "--rules");
    return MT_OK;
}

/* ======================================================================== */
/* The mesh                                                                  */
/* ======================================================================== */

unsigned mt__strategy_misfits(const mt__strategy_sizes *z) {
    unsigned m = 0;
    if (z->cm && !z->sp) m |= MT__MISFIT_CM_NO_SP;
    if (z->zero > 0 && z->data < 2) m |= MT__MISFIT_ZERO_NO_DATA;
    if (z->zero == 1 && z->fsdp > 1) m |= MT__MISFIT_ZERO1_FSDP;
    if (z->sp && z->tensor < 2) m |= MT__MISFIT_SP_NO_TENSOR;
    else if (z->sp && z->T % z->tensor != 0) m |= MT__MISFIT_SP_T;
    return m;
}

mt_status mt__train_mesh_devices(const mt_train_config *c, int *out) {
    *out = 0;
    mt_transport_kind kind = mt_transport_resolve(c->transport);
    int rank = 0, world = 1;
    mt_launcher_world(&rank, &world);
    int n = kind == MT_TRANSPORT_MPI ? (c->devices > 0 ? c->devices : world) : c->devices;
    if (kind == MT_TRANSPORT_MPI && n != world)
        return mt_fail(MT_EINVAL, "devices=%d, but mpirun started %d ranks; under MPI each rank "
                       "is one device: give -np %d or leave devices out", n, world, n);
    if (n <= 0) {   /* no device count: the product of the mesh's sizes */
        mt_status s = mt_mesh_spec_devices(c->mesh, &n);
        if (s != MT_OK) return s;
    }
    *out = n;
    return MT_OK;
}

/* The axes the strategies know (presets.c, pipe.c). */
static mt_status check_axes(const mt_train_config *c, const mt_mesh *mesh) {
    static const char *const KNOWN[] = {"data", "fsdp", "tensor", "pipe", "context", "expert"};
    for (int a = 0; a < mt_mesh_ndim(mesh); a++) {
        bool known = false;
        for (size_t k = 0; k < sizeof KNOWN / sizeof KNOWN[0]; k++)
            known |= strcmp(mt_mesh_axis_name(mesh, a), KNOWN[k]) == 0;
        if (!known)
            return mt_fail(MT_EINVAL, "mesh '%s': axis '%s' is unknown to the trainer; name the "
                           "axes data (splits the batch), fsdp (the batch and the parameters), "
                           "tensor, pipe, context (the sequences) or expert (a mixture's "
                           "experts, the batch folded over it)", c->mesh,
                           mt_mesh_axis_name(mesh, a));
    }
    return MT_OK;
}

/* Ulysses splits each device's heads over context: the query heads and the
 * kv heads that tensor parallelism leaves a device (kv heads that do not
 * divide over tensor are replicated) must divide by context. */
static mt_status check_ulysses(const mt_train_config *c, const mt_mesh *mesh, int cp) {
    mt_model_shape sh;
    if (mt_model_shape_of(c, &sh) != MT_OK) return MT_OK;   /* no heads: checked elsewhere */
    const int tp = mt_mesh_axis_size(mesh, "tensor") > 1 ? mt_mesh_axis_size(mesh, "tensor") : 1;
    const int nh = sh.heads / tp, kv = sh.kv_heads % tp == 0 ? sh.kv_heads / tp : sh.kv_heads;
    if (nh % cp != 0 || kv % cp != 0)
        return mt_fail(MT_EINVAL, "--cp-attention ulysses splits each device's heads over "
                       "context=%d: with %d heads and %d kv heads over tensor=%d a device holds "
                       "%d and %d, and both must divide by %d; pick --heads and --kv-heads so "
                       "(MQA's single kv head never does), or use --cp-attention allgather or ring",
                       cp, sh.heads, sh.kv_heads, tp, nh, kv, cp);
    if (sh.kv_heads % tp != 0)
        return mt_fail(MT_EINVAL, "--cp-attention ulysses needs the %d kv heads split over "
                       "tensor=%d (each device's query heads then read its own kv heads); pick "
                       "--kv-heads a multiple of %d, or use --cp-attention allgather or ring",
                       sh.kv_heads, tp, tp);
    return MT_OK;
}

/* Context parallelism: a model with sequences, T in 2·context chunks, a
 * lowering whose needs hold (Ulysses': the heads). With a pipe axis every
 * stage runs on its head-tail share (pipe.c feeds it). */
static mt_status check_context(const mt_train_config *c, const mt__train_model *m,
                               const mt_mesh *mesh) {
    const int cp = mt_mesh_axis_size(mesh, "context");
    if (cp < 2) return MT_OK;
    if (!m->sequence)
        return mt_fail(MT_EINVAL, "context parallelism splits the sequences over context=%d, "
                       "and --model %s has none; use gpt or llama, or drop the context axis",
                       cp, m->about.name);
    if (c->T % (2 * cp) != 0)
        return mt_fail(MT_EINVAL, "context parallelism over context=%d cuts each sequence into "
                       "2x%d = %d head-tail chunks, and T=%d (--seq) does not divide by %d; "
                       "pick T a multiple of %d", cp, cp, 2 * cp, c->T, 2 * cp, 2 * cp);
    mt_status s;
    if (c->cp_attention == MT_CP_ULYSSES && (s = check_ulysses(c, mesh, cp)) != MT_OK) return s;
    return MT_OK;
}

/* Whether `name` is an entry of the comma list `list`. */
static bool in_list(const char *list, const char *name);

/* What each axis asks of the rest of the configuration. */
static mt_status check_rules(const mt_train_config *c, const mt__train_model *m,
                             const mt_mesh *mesh);

static mt_status check_layout(const mt_train_config *c, const mt__train_model *m,
                              const mt_mesh *mesh) {
    mt_status s = check_axes(c, mesh);
    if (s != MT_OK) return s;
    const int data = mt_mesh_axis_size(mesh, "data"), fsdp = mt_mesh_axis_size(mesh, "fsdp");
    const int tensor = mt_mesh_axis_size(mesh, "tensor");
    const int cp = mt_mesh_axis_size(mesh, "context") > 1 ? mt_mesh_axis_size(mesh, "context") : 1;
    /* sequence parallelism splits each device's rows: T/context of them */
    const unsigned miss = mt__strategy_misfits(&(mt__strategy_sizes){
        .data = data, .fsdp = fsdp, .tensor = tensor, .T = c->T / cp, .zero = c->zero,
        .sp = c->sequence_parallel, .cm = c->collective_matmul != 0});
    if (miss & MT__MISFIT_ZERO_NO_DATA)
        return mt_fail(MT_EINVAL, "zero=%d splits the parameters over the mesh's data axis, "
                       "which '%s' %s; add one of 2 or more (e.g. data=2) or drop --zero",
                       c->zero, c->mesh, data ? "gives only 1 device" : "does not have");
    if (miss & MT__MISFIT_ZERO1_FSDP)
        return mt_fail(MT_EINVAL, "zero=1 with an fsdp axis: ZeRO-1 keeps every gradient whole "
                       "on every device, which an fsdp axis is there to avoid; use zero=2 or 3 "
                       "(with --fsdp-gather once for ZeRO-1's traffic)");
    const bool keeps = c->zero == 1 || c->zero == 2;   /* the paper's: gathered once a step */
    if ((c->reshard_after_forward || c->fsdp_gather) && fsdp < 2 && c->zero < 1)
        return mt_fail(MT_EINVAL, "--%s chooses what happens to parameters gathered from their "
                       "shards, and mesh '%s' stores none split: add an fsdp axis of 2 or more, "
                       "or --zero 3, or drop --%s",
                       c->fsdp_gather ? "fsdp-gather" : "reshard-after-forward", c->mesh,
                       c->fsdp_gather ? "fsdp-gather" : "reshard-after-forward");
    if (keeps && c->fsdp_gather < 0)
        return mt_fail(MT_EINVAL, "--fsdp-gather microbatch with zero=%d: ZeRO-1 and ZeRO-2 keep "
                       "the parameters whole and gather them once a step (the ZeRO paper's); "
                       "for a gather every microbatch use --zero 3, or drop --fsdp-gather",
                       c->zero);
    if (c->reshard_after_forward && (keeps || c->fsdp_gather > 0))
        return mt_fail(MT_EINVAL, "--reshard-after-forward with %s: the gathered parameters are "
                       "kept for the whole step, so none is gathered again in the backward; "
                       "drop --reshard-after-forward%s",
                       keeps ? (c->zero == 1 ? "zero=1" : "zero=2") : "--fsdp-gather once",
                       keeps ? ", or use --zero 3" : ", or use --fsdp-gather microbatch");
    const int pipe = mt__train_pipe_size(mesh);
    if (pipe > 1) {
        if ((s = mt__train_pipe_check(c, m, pipe)) != MT_OK) return s;
    } else if (c->schedule || c->pipe_chunks) {
        return mt_fail(MT_EINVAL, "schedule '%s' pipelines over the mesh's pipe axis, but mesh "
                       "'%s' has none of 2 or more devices; add one (e.g. pipe=2) or drop the "
                       "schedule", c->schedule ? c->schedule : "(chunks)", c->mesh);
    }
    if ((s = check_context(c, m, mesh)) != MT_OK) return s;
    /* packed documents take every axis: the ids are fed to each program's
     * (each pipeline stage's) attention, split head-tail over context as
     * the tokens, the keys' ids travelling with the keys */
    if (c->sequence_parallel) {
        if (miss & MT__MISFIT_SP_NO_TENSOR)
            return mt_fail(MT_EINVAL, "sequence parallelism splits the rows over the tensor "
                           "axis, but mesh '%s' has no tensor axis of 2 or more; add one "
                           "(e.g. tensor=2) or drop --sequence-parallel", c->mesh);
        if (!m->sequence)
            return mt_fail(MT_EINVAL, "sequence parallelism needs a model with a sequence "
                           "dim (the GPT); --model %s has none: drop --sequence-parallel",
                           m->about.name);
        if (miss & MT__MISFIT_SP_T)
            return mt_fail(MT_EINVAL, "sequence parallelism splits T=%d (--seq) over "
                           "tensor=%d%s, which does not divide it; pick T a multiple of %d",
                           c->T, tensor, cp > 1 ? " after context" : "", tensor * cp);
        /* over context too, a device's rows are its head-tail share, split
           again over tensor: context the major split, as the mesh must say
           (sharding.h: a dim over several axes is split in mesh order) */
        if (cp > 1 && mt__axis_bit(mesh, "tensor") < mt__axis_bit(mesh, "context"))
            return mt_fail(MT_EINVAL, "sequence parallelism with context parallelism splits each "
                           "device's share of the sequence (over context) again over tensor, "
                           "so mesh '%s' must name context before tensor; write it so (e.g. "
                           "context=%d,tensor=%d)", c->mesh, cp, tensor);
    }
    const int parts = mt_mesh_group_size(mesh, mt__batch_axes(mesh));
    if (c->B % parts != 0)
        return mt_fail(MT_EINVAL, "batch B=%d (--batch) does not divide over the axes that "
                       "split it, data, fsdp and expert (%d devices in '%s'): each takes B/%d "
                       "of the global batch; pick B a multiple of %d", c->B, parts, c->mesh, parts,
                       parts);
    if (mt_mesh_axis_size(mesh, "expert") > 1 && !in_list(m->logical_axes, "experts"))
        return mt_fail(MT_EINVAL, "mesh '%s': the expert axis splits a mixture's experts, and "
                       "--model %s has none; use --model llama with --moe-experts, or name the "
                       "axis data", c->mesh, m->about.name);
    if ((s = check_rules(c, m, mesh)) != MT_OK) return s;
    /* with llmc_in the model's sizes are the file's: the tensor check runs
     * again when the rules shard the model */
    if (tensor > 1 && m->tensor_check && !c->llmc_in && !c->hf_in &&
        (s = m->tensor_check(c, tensor)) != MT_OK)
        return s;
    return MT_OK;
}

/* ======================================================================== */
/* The user's rules                                                          */
/* ======================================================================== */

/* Whether `name` is an entry of the comma list `list`. */
static bool in_list(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && !strncmp(p, name, n)) return true;
        p += len;
        if (*p) p++;
    }
    return false;
}

/* Every rule of --rules names a logical axis the model has and mesh axes
 * the mesh has: a typo would otherwise shard nothing, silently. */
static mt_status check_rules(const mt_train_config *c, const mt__train_model *m,
                             const mt_mesh *mesh) {
    if (!c->rules || !*c->rules) return MT_OK;
    mt_rules r;
    mt_status s = mt_rules_parse(c->rules, &r);
    if (s != MT_OK) return mt_fail(s, "--rules: %s", mt_errmsg());
    for (int k = 0; k < r.n; k++) {
        if (!in_list(m->logical_axes, r.rule[k].logical))
            return mt_fail(MT_EINVAL, "--rules '%s': --model %s has no logical axis '%s'; its "
                           "logical axes are %s", c->rules, m->about.name, r.rule[k].logical,
                           m->logical_axes ? m->logical_axes : "none");
        /* the batch's axes are the data loader's too (each device reads its
         * rows of the batch over data, fsdp and expert, devices.c): not a rule
         * to move */
        if (!strcmp(r.rule[k].logical, "batch"))
            return mt_fail(MT_EINVAL, "--rules '%s': the batch is split over data, fsdp and "
                           "expert, the axes each device reads its rows by, and no rule moves "
                           "it; rules map the model's other logical axes (of %s)", c->rules,
                           m->logical_axes);
        uint32_t bits;
        if (mt_mesh_axis_set(mesh, r.rule[k].mesh, &bits) != MT_OK)
            return mt_fail(MT_EINVAL, "--rules '%s': '%s' maps to %s", c->rules,
                           r.rule[k].logical, mt_errmsg());
    }
    return MT_OK;
}

/* ======================================================================== */
/* The whole configuration                                                   */
/* ======================================================================== */

mt_status mt_train_config_check(const mt_train_config *cfg) {
    if (!cfg) return mt_fail(MT_EINVAL, "mt_train_config_check needs a configuration (got NULL)");
    const mt__train_model *m = mt__train_model_of(cfg->model);
    if (!m) {
        char names[128];
        model_names(names, sizeof names);
        return mt_fail(MT_EINVAL, "unknown model kind %d; use %s", (int)cfg->model, names);
    }
    /* the model's hooks read model_config as their own struct */
    if (cfg->model_config && cfg->model_config_size != m->about.config_size)
        return mt_fail(MT_EINVAL, "model_config_size=%zu, but --model %s's settings are %s of "
                       "%zu bytes: point model_config at the model's own struct and set its "
                       "size, or leave model_config NULL for the model's defaults",
                       cfg->model_config_size, m->about.name,
                       m->about.config_type ? m->about.config_type : "nothing",
                       m->about.config_size);
    mt_status s = check_fields(cfg, m);
    if (s == MT_OK) s = check_no_effect(cfg, m);
    if (s == MT_OK && cfg->backend && *cfg->backend) {   /* a backend that runs */
        const mt_backend *be = mt_backend_find(cfg->backend);
        if (!be) return mt_fail_wrap(MT_EINVAL, "backend");
        if (!mt_backend_runs(be))
            return mt_fail(MT_EINVAL, "backend '%s' runs nothing (it plans shapes for explain "
                           "and planners); train on one that runs, e.g. cpu", cfg->backend);
    }
    /* without a mesh (a trace's data=1 included) nothing is split */
    if (s != MT_OK || !has_mesh(cfg)) return s;
    int n = 0;
    if ((s = mt__train_mesh_devices(cfg, &n)) != MT_OK) return s;
    mt_mesh *mesh = NULL;
    if ((s = mt_mesh_create(cfg->mesh, n, &mesh)) != MT_OK) return s;
    s = check_layout(cfg, m, mesh);
    mt_mesh_free(mesh);
    return s;
}

/* ---- pipelines (pipe.c runs them) ---------------------------------------- */

int mt__train_pipe_size(const mt_mesh *mesh) {
    return mt__axis_bit(mesh, "pipe") ? mt_mesh_axis_size(mesh, "pipe") : 1;
}

const char *mt__train_pipe_schedule(const mt_train_config *c) {
    return c->schedule ? c->schedule : "1f1b";
}

/* The checks a pipeline configuration must pass before any device starts. */
mt_status mt__train_pipe_check(const mt_train_config *c, const mt__train_model *m, int p) {
    if (!m->build_stage)
        return mt_fail(MT_EINVAL, "pipeline parallelism (pipe=%d) needs a model that can be cut "
                       "into stages; %s cannot: use --model gpt or drop the pipe axis", p,
                       m->about.name);
    /* the kind first: an unknown one is the mistake, not its microbatches */
    const char *name = mt__train_pipe_schedule(c);
    mt_schedule_kind kind;
    mt_status st = mt_schedule_kind_parse(name, &kind);
    if (st != MT_OK) return mt_fail_wrap(st, "--schedule");
    if (c->accum < p)
        return mt_fail(MT_EINVAL, "a pipeline over pipe=%d needs at least %d microbatches per "
                       "step (m >= p), got %d; give --microbatches %d or more", p, p, c->accum, p);
    /* the schedule (a pure function) once here: its shape's errors before
     * any device starts */
    mt_schedule *s = NULL;
    st = mt_schedule_make(kind, p, c->accum, c->pipe_chunks, &s);
    /* with llmc_in or hf_in, L comes from the file: mt__train_pipe_create checks it */
    const int L = m->blocks(c);
    if (st == MT_OK && !c->llmc_in && !c->hf_in && L < p * mt_schedule_chunks(s))
        st = mt_fail(MT_EINVAL, "a %s pipeline over pipe=%d cuts the model into %d chunks, more "
                     "than its L=%d blocks (--layers); use more layers or fewer chunks", name, p,
                     p * mt_schedule_chunks(s), L);
    mt_schedule_free(s);
    return st;
}
