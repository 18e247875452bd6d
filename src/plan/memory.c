/*
 * memory.c — bytes per device under a memory convention (plan/memory.h).
 *
 * MESHTRAIN adds the program's own buffers. MIXED16, BOOK and MEGATRON count model
 * states from what the program does with each parameter element, so that a
 * layout the ZeRO paper never names (ZeRO with tensor parallelism, fsdp
 * beside ZeRO, parameters too small to split) is counted as it runs:
 *   O  the optimizer's elements: the stored ones (each device updates its
 *      shards; all of them under plain data parallelism);
 *   W  the 16-bit working weights resident through the step: the stored
 *      elements, plus for each copy gathered and kept until the backward
 *      (ZeRO-1/2) the rest of it, gathered_kept · (1 - 1/n), n the storage
 *      degree; a copy freed after use (fsdp, ZeRO-3) is a temporary;
 *   G  the 16-bit gradients resident: the parameters as the forward uses
 *      them, U = stored + gathered · (1 - 1/n), less what a reduce-scatter
 *      leaves on other devices, grad_scattered · (1 - 1/n), plus what a
 *      kept gradient holds whole for the step, grad_kept · (1 - 1/n)
 *      (ZeRO-1; ZeRO-2 and fsdp once over several microbatches: the
 *      caller drops it for one); all-reduced gradients (data parallel)
 *      stay whole.
 * On data=Nd that is the paper's: DP W = G = O = Ψ; ZeRO-1 W = G = Ψ,
 * O = Ψ/Nd; ZeRO-2 W = Ψ, G = O = Ψ/Nd; ZeRO-3 W = G = O = Ψ/Nd.
 * The conventions weigh them: MIXED16 2W + 2G + 12O (the paper's K = 12),
 * BOOK 2W + 8O, MEGATRON 2W + 4G + 12O (fp32 main gradients: 18Ψ under
 * data parallelism, 6Ψ + 12Ψ/Nd under the distributed optimizer, which is
 * ZeRO-1's W and G).
 * DEEPSPEED follows DeepSpeed's engine (runtime/engine.py): bf16 without
 * ZeRO accumulates gradients in fp32 by default and runs BF16_Optimizer,
 * 2W + 4G + 12O = 18Ψ; with ZeRO its optimizer is the ZeRO one, whose
 * published estimators (estimate_zero2/3_model_states_mem_needs) hold
 * ZeRO-1/2 at 2W + 2U + 16O (16-bit weights and gradients whole, U the
 * parameters as the forward uses them; fp32 master, m, v and the fp32
 * gradient partition the optimizer steps with) = 4Ψ + 16Ψ/N, and ZeRO-3 at
 * 2W + 16O = 18Ψ/N with 4 bytes an element of the largest gathered
 * parameter (its 16-bit copy and gradient). A layout that frees its
 * gathered copies (fsdp, ZeRO-3) is counted as ZeRO-3, one that keeps them
 * as ZeRO-1/2, one with no storage axis as BF16_Optimizer.
 * TORCHTITAN follows FSDP2 under torchtitan's default MixedPrecisionPolicy
 * (config/job_config.py: mixed_precision_param "bfloat16",
 * mixed_precision_reduce "float32"): the sharded parameter stays fp32 and
 * its gradient arrives reduce-scattered in fp32, so 4O + 4G + 8O (Adam's m
 * and v), plus 2 bytes an element of a bf16 copy kept whole (reshard after
 * forward off), and while gathered the bf16 copy and its unsharded fp32
 * gradient, 6 bytes an element of the largest. Without a storage axis
 * (DDP, autocast) that is 16Ψ.
 */
#include "plan/memory.h"

#include <math.h>
#include <string.h>

const char *mt_plan_memory_name(mt_plan_memory m) {
    switch (m) {
    case MT_PLAN_MEMORY_MESHTRAIN: return "meshtrain";
    case MT_PLAN_MEMORY_MIXED16: return "mixed16";
    case MT_PLAN_MEMORY_BOOK: return "book";
    case MT_PLAN_MEMORY_MEGATRON: return "megatron";
    case MT_PLAN_MEMORY_DEEPSPEED: return "deepspeed";
    case MT_PLAN_MEMORY_TORCHTITAN: return "torchtitan";
    default: return "?";
    }
}

void mt__plan_mem_counts_of(const mt__plan_program *p, mt__plan_mem_counts *out) {
    *out = (mt__plan_mem_counts){
        .param_elems = (double)p->param_elems,
        .param_global_elems = (double)p->param_global_elems,
        .gathered_elems = (double)p->gathered_elems,
        .gathered_kept_elems = (double)p->gathered_kept_elems,
        .gathered_max_elems = (double)p->gathered_max_elems,
        .grad_reduced_full_elems = (double)p->grad_reduced_full_elems,
        .grad_scattered_elems = (double)p->grad_scattered_elems,
        .grad_kept_elems = (double)p->grad_kept_elems,
        .kept_grad_bytes = (double)p->kept_grad_bytes,
        .param_bytes = (double)p->param_bytes,
        .grad_bytes = (double)p->grad_bytes,
        .optim_bytes = (double)p->optim_bytes,
        .arena_bytes = (double)p->arena_bytes,
        .scratch_bytes = (double)p->scratch_bytes,
        .largest_temp_bytes = (double)p->largest_temp_bytes,
        .unsplit_elems = (double)p->unsplit_elems,
        .unsplit_zero_elems = (double)p->unsplit_zero_elems,
        .unsplit_rows_elems = (double)p->unsplit_rows_elems,
        .unsplit_max_elems = (double)p->unsplit_max_elems,
        .rows_pad_elems = (double)p->rows_pad_elems,
    };
}

/* ======================================================================== */
/* Checks                                                                    */
/* ======================================================================== */

static mt_status check_layout(mt_plan_memory conv, const mt__plan_mem_layout *l, bool layers) {
    if ((int)conv < 0 || conv >= MT_PLAN_MEMORY_N)
        return mt_fail(MT_EINVAL, "memory convention %d is none of meshtrain, mixed16, book, "
                       "megatron, deepspeed, torchtitan (0 to %d)", (int)conv,
                       MT_PLAN_MEMORY_N - 1);
    if (l->data < 1 || l->fsdp < 1 || l->tensor < 1)
        return mt_fail(MT_EINVAL, "a layout's axis sizes must be 1 or more (1: the axis "
                       "absent), got data=%d fsdp=%d tensor=%d", l->data, l->fsdp, l->tensor);
    if (l->zero < 0 || l->zero > 3)
        return mt_fail(MT_EINVAL, "zero=%d: the ZeRO stages are 0 (off) to 3", l->zero);
    if (conv == MT_PLAN_MEMORY_MESHTRAIN || !layers) return MT_OK;
    if (!(l->s > 0 && l->b > 0 && l->h > 0 && l->a > 0))
        return mt_fail(MT_EINVAL, "%s activations need s (tokens a sequence), b (sequences of "
                       "a microbatch a replica), h (hidden) and a (heads) positive, got s=%g "
                       "b=%g h=%g a=%g", mt_plan_memory_name(conv), l->s, l->b, l->h, l->a);
    if (!(l->kv_heads >= 0 && l->kv_heads <= l->a))
        return mt_fail(MT_EINVAL, "kv_heads=%g: key/value heads are 1 to the %g heads "
                       "(0: as many)", l->kv_heads, l->a);
    if (!(l->ffn >= 0))
        return mt_fail(MT_EINVAL, "ffn=%g: the MLP's width is positive (0: 4h)", l->ffn);
    if (!(l->hd >= 0))
        return mt_fail(MT_EINVAL, "hd=%g: the head size is positive (0: h/a)", l->hd);
    if (!(l->moe_share >= 0 && l->moe_share <= 1 && l->moe_k >= 0 && l->moe_ffn >= 0 &&
          l->moe_experts >= 0))
        return mt_fail(MT_EINVAL, "moe_share=%g moe_k=%g moe_ffn=%g moe_experts=%g: a mixture "
                       "of experts' share of the layers is 0 to 1 and its sizes 0 or more",
                       l->moe_share, l->moe_k, l->moe_ffn, l->moe_experts);
    return MT_OK;
}

static mt_status check_chunk(const mt__plan_mem_chunk *c, int i) {
    const double *f = (const double *)&c->counts;
    for (size_t k = 0; k < sizeof c->counts / sizeof *f; k++)
        if (!(f[k] >= 0))
            return mt_fail(MT_EINVAL, "chunk %d: count %zu of its program is %g; counts are "
                           "0 or more (mt__plan_mem_counts_of fills them)", i, k, f[k]);
    if (!(c->layers >= 0) || !(c->in_flight >= 0))
        return mt_fail(MT_EINVAL, "chunk %d: layers %g and in-flight microbatches %g must be "
                       "0 or more", i, c->layers, c->in_flight);
    return MT_OK;
}

/* ======================================================================== */
/* Per chunk                                                                 */
/* ======================================================================== */

/* One chunk's model-state elements (the file's comment). */
typedef struct {
    double W, G, O;   /* 16-bit weights, gradients, optimizer elements resident */
    double U;         /* the parameters as the forward uses them */
    double kept;      /* gathered elements kept whole through the step */
    bool   freed;     /* gathered copies freed after use (fsdp, ZeRO-3) */
} states_t;

/* c as the framework of `conv` stores it: under DEEPSPEED and TORCHTITAN a
 * parameter the storage axes could not split (kept whole by meshtrain's
 * partitioner) split as the framework pads it, gathered and
 * reduce-scattered as the split ones are (kept or freed, its gradient kept
 * or not, as theirs; with none split, as the ZeRO stage does). The other
 * conventions count what the program stores. */
static mt__plan_mem_counts as_framework(mt_plan_memory conv, const mt__plan_mem_layout *l,
                                        const mt__plan_mem_counts *c, double n) {
    mt__plan_mem_counts a = *c;
    if (conv == MT_PLAN_MEMORY_TORCHTITAN) a.param_elems += c->rows_pad_elems;
    const double u = c->unsplit_elems;
    if ((conv != MT_PLAN_MEMORY_DEEPSPEED && conv != MT_PLAN_MEMORY_TORCHTITAN) || !(u > 0) ||
        n <= 1)
        return a;
    double share = conv == MT_PLAN_MEMORY_TORCHTITAN ? c->unsplit_rows_elems
                                                     : c->unsplit_zero_elems;
    if (!(share > 0)) share = ceil(u / n);   /* counts given without their shares */
    const double kr = c->gathered_elems > 0 ? c->gathered_kept_elems / c->gathered_elems
                      : l->zero == 1 || l->zero == 2 ? 1 : 0;
    const double gr = c->grad_scattered_elems > 0
                          ? c->grad_kept_elems / c->grad_scattered_elems
                          : l->zero == 1 ? 1 : 0;
    a.param_elems += share - u;
    a.gathered_elems += u;
    a.gathered_kept_elems += u * kr;
    a.grad_scattered_elems += u;
    a.grad_kept_elems += u * gr;
    a.gathered_max_elems = fmax(a.gathered_max_elems, c->unsplit_max_elems);
    return a;
}

static states_t states(const mt__plan_mem_counts *c, double n) {
    const double rest = 1 - 1 / n;   /* of a gathered copy, what is not this device's */
    states_t s = {.O = c->param_elems, .kept = c->gathered_kept_elems};
    s.W = c->param_elems + c->gathered_kept_elems * rest;
    s.U = c->param_elems + c->gathered_elems * rest;
    s.G = s.U + (c->grad_kept_elems - c->grad_scattered_elems) * rest;
    s.freed = c->gathered_elems > c->gathered_kept_elems;
    return s;
}

/* Model states and temporaries of one chunk into r, weighed by `conv`
 * (the file's comment). */
static void weigh(mt_plan_memory conv, const states_t *s, double gathered_max, double n,
                  mt__plan_mem_bytes *r) {
    double params = 2 * s->W, grads = 0, optim = 12 * s->O, temp = 2 * gathered_max;
    switch (conv) {
    case MT_PLAN_MEMORY_MIXED16: grads = 2 * s->G; break;
    case MT_PLAN_MEMORY_BOOK: optim = 8 * s->O; break;
    case MT_PLAN_MEMORY_MEGATRON: grads = 4 * s->G; break;
    case MT_PLAN_MEMORY_DEEPSPEED:
        if (n <= 1) {
            grads = 4 * s->G;               /* BF16_Optimizer: fp32 accumulation */
        } else if (!s->freed) {
            grads = 2 * s->U + 4 * s->O;    /* ZeRO-1/2: 16-bit whole, fp32 partition */
        } else {
            grads = 4 * s->O;               /* ZeRO-3: the fp32 partition */
            temp = 4 * gathered_max;        /* the largest layer's 16-bit copy and grad */
        }
        break;
    case MT_PLAN_MEMORY_TORCHTITAN:
        params = 4 * s->O + 2 * s->kept;    /* fp32 shards; bf16 copies kept whole */
        grads = 4 * s->G;                   /* fp32 (reduce_dtype) */
        optim = 8 * s->O;
        temp = 6 * gathered_max;            /* bf16 copy + its unsharded fp32 gradient */
        break;
    default: break;
    }
    r->params += params;
    r->grads += grads;
    r->optimizer += optim;
    if (s->freed) r->temporaries = fmax(r->temporaries, temp);
}

/* The book's checkpoint bytes of one layer and one microbatch: 2 bytes a
 * saved element; its TP keeps the D-wide values split as well as the F-wide
 * ones (In[B, D_Y], its FSDP+TP row "ckpt/N"), so they divide by tensor. A
 * mixture of experts' MoE layers (moe_share of them) have F-wide values
 * moe_ffn wide a token (the routed rows' and shared experts'): F is the
 * layers' mean. */
static double book_layer(const mt__plan_mem_layout *l) {
    const double F0 = l->ffn > 0 ? l->ffn : 4 * l->h;
    const double F = l->moe_share > 0 ? (1 - l->moe_share) * F0 + l->moe_share * l->moe_ffn : F0;
    return 2 * l->s * l->b * mt__plan_mem_book_width(l->remat, l->h, F) / l->tensor;
}

mt_status mt__plan_mem_device(mt_plan_memory conv, const mt__plan_mem_layout *lay,
                              const mt__plan_mem_chunk *chunks, int n_chunks,
                              mt__plan_mem_bytes *out) {
    memset(out, 0, sizeof *out);
    if (n_chunks < 1 || !chunks)
        return mt_fail(MT_EINVAL, "a device holds %d chunks; give it 1 or more", n_chunks);
    bool layers = false;
    for (int i = 0; i < n_chunks; i++) {
        mt_status s = check_chunk(&chunks[i], i);
        if (s != MT_OK) return s;
        layers |= chunks[i].layers > 0;
    }
    mt_status s = check_layout(conv, lay, layers);
    if (s != MT_OK) return s;
    if (conv != MT_PLAN_MEMORY_MESHTRAIN && lay->remat != MT_REMAT_NONE &&
        lay->remat != MT_REMAT_FULL && lay->remat != MT_REMAT_ATTENTION &&
        lay->remat != MT_REMAT_DOTS)
        return mt_fail(MT_EINVAL, "remat policy %d is none of none, full, attention, dots",
                       (int)lay->remat);
    /* torchtitan's attention is PyTorch's SDPA (flash or memory-efficient
       kernels), which keeps no (a, s, s) scores: Korthikanti's count without
       the 5as²b term, the one selective recompute drops */
    mt__plan_mem_layout flash = *lay;
    if (flash.remat == MT_REMAT_NONE) flash.remat = MT_REMAT_ATTENTION;
    const mt__plan_mem_layout *kl = conv == MT_PLAN_MEMORY_TORCHTITAN ? &flash : lay;
    const double per_layer = !layers || conv == MT_PLAN_MEMORY_MESHTRAIN ? 0
                             : conv == MT_PLAN_MEMORY_BOOK ? book_layer(lay)
                                                           : mt__plan_mem_korthikanti_layer(kl);
    const double n = (double)lay->fsdp * (lay->zero > 0 ? lay->data : 1);
    mt__plan_mem_bytes r = {0};
    for (int i = 0; i < n_chunks; i++) {
        const mt__plan_mem_counts *c = &chunks[i].counts;
        const double mb = chunks[i].in_flight;
        if (conv == MT_PLAN_MEMORY_MESHTRAIN) {
            r.params += c->param_bytes;
            r.grads += c->grad_bytes;
            r.optimizer += c->optim_bytes;
            r.activations += c->arena_bytes * mb;
            r.temporaries += c->scratch_bytes;   /* each chunk's graph has its own */
            continue;
        }
        const mt__plan_mem_counts a = as_framework(conv, lay, c, n);
        const states_t st = states(&a, n);
        /* a gathered copy freed after use: one at a time */
        weigh(conv, &st, a.gathered_max_elems, n, &r);
        r.activations += per_layer * chunks[i].layers * mb;
    }
    r.total = r.params + r.grads + r.optimizer + r.activations + r.temporaries;
    *out = r;
    return MT_OK;
}

/* ======================================================================== */
/* The fewest chips                                                          */
/* ======================================================================== */

static bool fits(double replicated, double sharded, double hbm, double n) {
    return replicated + sharded / n <= hbm * (1 + 1e-12);
}

mt_status mt__plan_mem_min_chips(double replicated, double sharded, double hbm, int64_t *out) {
    *out = 0;
    if (!(hbm > 0) || !(replicated >= 0) || !(sharded >= 0))
        return mt_fail(MT_EINVAL, "minimum chips: memory per chip %g bytes must be positive "
                       "and the bytes to place (%g replicated, %g sharded) 0 or more", hbm,
                       replicated, sharded);
    if (!fits(replicated, 0, hbm, 1) || (sharded > 0 && !(replicated < hbm)))
        return mt_fail(MT_EINVAL, "minimum chips: %.4g bytes every chip holds whole do not fit "
                       "in its %.4g bytes (%.3g times too many) on any number of chips; "
                       "shard them", replicated, hbm, replicated / hbm);
    if (sharded == 0) {
        *out = 1;
        return MT_OK;
    }
    double n = ceil(sharded / (hbm - replicated));
    if (n < 1) n = 1;
    if (n > 1e15)   /* past counting, and past where n - 1 differs from n */
        return mt_fail(MT_EINVAL, "minimum chips: %.4g sharded bytes over the %.4g a chip has "
                       "left need %.4g chips, past counting", sharded, hbm - replicated, n);
    /* the quotient's rounding, either way */
    while (n > 1 && fits(replicated, sharded, hbm, n - 1)) n--;
    while (!fits(replicated, sharded, hbm, n)) n++;
    *out = (int64_t)n;
    return MT_OK;
}
