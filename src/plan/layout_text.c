/*
 * layout_text.c — a layout as text (its mesh as --mesh takes it, the line a
 * refusal gives as its example) and its chunks a device: what the search,
 * the cache, the evaluation and the refusals all read of a layout, below
 * each of them.
 */
#include "base/base_impl.h"
#include "plan/search_impl.h"

#include <stdio.h>

void mt__plan_mesh_text(const mt_plan_layout *l, char *buf, size_t cap) {
    size_t at = 0;
    buf[0] = '\0';
    /* outermost first (devices fill the levels in this order, the last axis
       innermost): Megatron-LM's placement, the pipeline's stages across
       nodes, then the replicas, and the tensor axis, whose collectives block
       the compute, on the fastest links */
    /* context inside the replicas and outside tensor: Llama 3's order
       (§3.3.1: [TP, CP, PP, DP] innermost first), its ring or gathers on
       the links after tensor's */
    /* expert inside the replicas, as Megatron-LM and torchtitan place it:
       its all-to-alls block the compute, on the fastest links the axes
       outside it leave (explain's data=8,fsdp=16,expert=8) */
    const int size[6] = {l->pipe, l->data, l->fsdp, l->context, l->expert, l->tensor};
    static const char *const name[6] = {"pipe", "data", "fsdp", "context", "expert", "tensor"};
    /* "%s%s=%d" a piece, without printf (base/text.c: a layout's mesh is
       written for each of its evaluations and builds) */
    for (int a = 0; a < 6 && at + 1 < cap; a++)
        if (size[a] > 1) {
            mt__text_put(buf, cap, &at, ",", at ? 1 : 0);
            mt__text_put(buf, cap, &at, name[a], (size_t)-1);
            mt__text_put(buf, cap, &at, "=", 1);
            mt__text_put_int(buf, cap, &at, size[a]);
        }
    if (!at) snprintf(buf, cap, "data=1");
}

/* The chunks per device a schedule kind runs by default (pipeline.h). */
int mt__plan_schedule_chunks(int kind) {
    return kind == MT_SCHEDULE_ZB_V || kind == MT_SCHEDULE_DUALPIPEV ||
                   kind == MT_SCHEDULE_INTERLEAVED
               ? 2
               : 1;
}

int mt__plan_layout_chunks(const mt_plan_layout *l) {
    if (l->pipe <= 1) return 1;
    return l->chunks > 0 ? l->chunks : mt__plan_schedule_chunks(l->schedule);
}

bool mt__plan_kind_runs_chunks(int kind, int v) {
    if (kind == MT_SCHEDULE_INTERLEAVED) return v >= 2 && v <= MT__PLAN_MAX_CHUNKS;
    return v == mt__plan_schedule_chunks(kind);
}

void mt__plan_layout_text(const mt_plan_layout *l, const char *mesh, char *buf, size_t cap) {
    char sched[48] = "";
    if (l->pipe > 1 && l->schedule >= 0)
        snprintf(sched, sizeof sched, " %s v=%d",
                 mt_schedule_kind_name((mt_schedule_kind)l->schedule), mt__plan_layout_chunks(l));
    snprintf(buf, cap, "%s%s%s zero=%d remat=%s%s%s%s mb=%d", mesh,
             l->context > 1 ? " cp=" : "", l->context > 1 ? mt_plan_cp_attention_name(l->cp_attention) : "",
             l->zero, mt_remat_name(l->remat), l->sequence_parallel ? " sp" : "",
             l->collective_matmul ? " cm" : "", sched, l->microbatches);
}

const char *mt_plan_cp_attention_name(int cp_attention) {
    static const char *const name[3] = {"allgather", "ring", "ulysses"};
    return cp_attention >= 0 && cp_attention < 3 ? name[cp_attention] : "?";
}

int mt__plan_chunk_blocks(int L, int S, int c) {
    return L / S + (c < L % S ? 1 : 0);
}
