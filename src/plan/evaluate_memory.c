/*
 * evaluate_memory.c — one layout's memory per device from its chunks'
 * program counts (evaluate.c gives them): the device whose chunks hold
 * most, under the request's convention, and the verdict against the
 * device's memory, naming a parameter the storage axes left whole.
 */
#include "base/base_impl.h"
#include "plan/memory.h"
#include "plan/search_impl.h"

#include <stdio.h>
#include <string.h>

/* The policy whose published activations (--memory mixed16, book) are
 * what l's program keeps. remat.c recomputes no collective's output (it
 * would communicate again), and under collective matmul a block's products
 * are collectives (ag_linear, linear_rs): FULL keeps them and recomputes
 * the element-wise ops and attention, as DOTS does. Counted as FULL's
 * input alone, those layouts held FULL's memory at DOTS's time (no
 * products recomputed) and won every search that could take them (issue
 * 40: 36.96 s against 65.93 s for 530B on fsdp=4,tensor=64 at the same
 * 43.04 GB). */
static mt_remat kept_as(const mt_plan_layout *l) {
    return l->remat == MT_REMAT_FULL && l->collective_matmul ? MT_REMAT_DOTS : l->remat;
}

/* The largest parameter that the storage axes of layout l left whole in
 * the program of `key`'s chunk (its first interpolation point's, or the
 * memory-first proxy's), as plan_impl.h's unsplit_what and the axes
 * ("'wte' (50304, 768) over data x fsdp = 1120"), into buf; "" when none
 * or not built. */
static void unsplit_of(mt__plan_search *s, const mt_plan_layout *l, mt__plan_prog_key key,
                       int blocks, int batch, bool proxy, char *buf, size_t cap) {
    int k0, k1, b0, b1;
    mt__plan_block_points(blocks, &k0, &k1);
    mt__plan_batch_points(batch, &b0, &b1);
    key.blocks = k0;
    key.batch = b0;
    if (proxy) key = mt__plan_memory_proxy(key);
    buf[0] = '\0';
    const mt__plan_cached *e = NULL;
    if (mt__plan_program_cached(s, &key, &e) != MT_OK || !e || e->status != MT_OK ||
        !e->prog.unsplit_what[0])
        return;
    /* the storage axes: data under ZeRO, fsdp */
    const bool d = l->zero >= 1 && l->data > 1, f = l->fsdp > 1;
    mt__text_format(buf, cap, "%s over %s = %d", e->prog.unsplit_what,
                    d && f ? "data x fsdp" : d ? "data" : "fsdp",
                    (d ? l->data : 1) * (f ? l->fsdp : 1));
}

mt_status mt__plan_layout_memory(mt__plan_search *s, const mt_plan_layout *l,
                                 mt__plan_prog_key key, const mt__plan_mem_counts *counts,
                                 const bool *built, int S, int batch, const int *slots,
                                 const int *peak, const int *dev_of, const mt_hardware *hw,
                                 bool proxy, mt_plan_result *res) {
    const mt_plan_request *r = s->req;
    /* the closed forms' s is the rows a device holds, T/context (their
       (a, s, s) scores term then counts (T/context)², not the (T/context)·T
       an all-gather forms) */
    mt__plan_mem_layout ml = {.data = l->data, .fsdp = l->fsdp, .tensor = l->tensor,
                              .zero = l->zero, .sequence_parallel = l->sequence_parallel,
                              .remat = kept_as(l),
                              .s = s->seq / (l->context > 1 ? l->context : 1), .b = batch,
                              .h = s->channels,
                              .a = s->heads, .kv_heads = s->kv_heads, .hd = s->head_dim,
                              .ffn = s->ffn,
                              .gated = s->gated};
    if (s->moe.moe_experts > 0 && s->layers > 0) {
        ml.moe_share = (double)mt__plan_moe_blocks(s, s->layers) / s->layers;
        ml.moe_k = s->moe.moe_top_k;
        ml.moe_ffn = (double)(s->moe.moe_top_k + s->moe.moe_shared) * s->moe.moe_ffn;
        ml.moe_experts = s->moe.moe_experts;
    }
    res->total = -1;
    res->n_stages = l->pipe;
    /* NCCL communicators: one an axis that communicates */
    const int comms = (l->data > 1) + (l->fsdp > 1) + (l->tensor > 1) + (l->pipe > 1) +
                      (l->expert > 1);
    for (int stage = 0; stage < l->pipe; stage++) {
        mt__plan_mem_chunk ch[MT_SCHEDULE_MAX_CHUNKS];
        int n = 0;
        for (int c = 0; c < S && n < MT_SCHEDULE_MAX_CHUNKS; c++) {
            if (dev_of[c] != stage) continue;
            ch[n].counts = counts[mt__plan_role_of(s->layers, S, c)];
            /* ZeRO-2's and fsdp once's kept gradient only accumulates the
               microbatches (cache.c builds it): one holds none */
            if (l->microbatches == 1 && l->zero != 1) {
                ch[n].counts.grad_bytes -= ch[n].counts.kept_grad_bytes;
                ch[n].counts.grad_kept_elems = ch[n].counts.kept_grad_bytes = 0;
            }
            ch[n].layers = mt__plan_chunk_blocks(s->layers, S, c);
            /* meshtrain's executor allocates each chunk its own peak; the
               frameworks hold what is in flight at the device's */
            ch[n].in_flight = r->memory == MT_PLAN_MEMORY_MESHTRAIN ? slots[c] : peak[c];
            n++;
        }
        mt__plan_mem_bytes mb;
        mt_status st = mt__plan_mem_device(r->memory, &ml, ch, n, &mb);
        if (st != MT_OK) return st;
        const double reserve = mt__plan_mem_reserve(r->memory, hw->name, comms,
                                                    mb.activations + mb.temporaries);
        if (stage < MT_PLAN_MAX_STAGE_MEMORY) {
            res->stage_total[stage] = mb.total + reserve;
            res->stage_activations[stage] = mb.activations;
        }
        if (stage == l->pipe - 1) {
            res->last_stage_total = mb.total + reserve;
            res->last_stage_activations = mb.activations;
        }
        if (mb.total + reserve > res->total) {
            res->params = mb.params;
            res->grads = mb.grads;
            res->optimizer = mb.optimizer;
            res->activations = mb.activations;
            res->temporaries = mb.temporaries;
            res->reserve = reserve;
            res->total = mb.total + reserve;
            res->peak_stage = stage;
        }
    }
    /* a parameter the storage axes left whole (meshtrain's partitioner
       splits only a dim they divide): the verdict names it */
    char unsplit[192] = "";
    for (int k = 0; k < MT__PLAN_N_ROLES && !unsplit[0] && res->total > hw->hbm_bytes; k++)
        if (built[k] && counts[k].unsplit_elems > 0) {
            const int c = k == MT__PLAN_ROLE_FIRST ? 0 : k == MT__PLAN_ROLE_LAST ? S - 1 : 1;
            key.chunk = c;
            unsplit_of(s, l, key, mt__plan_chunk_blocks(s->layers, S, c), batch, proxy, unsplit,
                       sizeof unsplit);
        }
    mt__plan_mem_verdict(r->memory, res->total, hw->hbm_bytes, hw->name, unsplit, &res->margin,
                         res->why, sizeof res->why);
    return MT_OK;
}
