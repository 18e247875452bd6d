/*
 * hf_impl.h — what the Hugging Face directory's files share (hf_config.c,
 * hf_llama.c, hf_moe.c; their shared tensor helpers in hf_tensors.c).
 */
#ifndef MT_HF_IMPL_H
#define MT_HF_IMPL_H

#include "meshtrain/io.h"
#include "meshtrain/models.h"

/* Writes dir/config.json for cfg (LlamaForCausalLM, or the architecture
 * cfg's flags make: Qwen2, Qwen3, Mixtral, Qwen3-MoE) through a claim;
 * refuses what mt_hf_llama_writable refuses. */
mt_status mt__hf_write_llama_config(const char *dir, const mt_llama_config *cfg);
/* Writes dir/config.json for cfg (GPT2LMHeadModel) through a claim. */
mt_status mt__hf_write_gpt2_config(const char *dir, const mt_gpt_config *cfg);

/* The tensors mt_hf_save_llama writes, cap of them: n filled so far; each
 * one's name is names[n] (filled by the caller before mt__hf_out_add),
 * its values data[n] (owned: freed with the tables). */
typedef struct {
    mt_st_write_tensor *w;
    char              (*names)[MT_MAX_NAME];
    int64_t           (*shapes)[2];
    float             **data;
    int                 n, cap;
} mt__hf_out;

/* (hf_tensors.c) Adds the tensor named o->names[o->n] of ndim (1 or 2) dims as F32 values
 * v, which o then owns. The caller keeps o->n below o->cap. */
void mt__hf_out_add(mt__hf_out *o, int ndim, const int64_t *dims, float *v);

/* Reads rows [r0, r1) of dim 0 of tensor x of st (a 1-D tensor's
 * elements) into *buf (grown as needed) as f32, after checking its shape
 * is dims (ndim of them; MT_ESHAPE naming both) and then that every value
 * read is finite (MT_ENAN naming the element). A device's loader reads its
 * block's rows only (mt_tensor_global_box); 0, dims[0] reads it whole. */
mt_status mt__hf_read_checked(const mt_safetensors *st, const mt_st_tensor *x, int ndim,
                              const int64_t *dims, int64_t r0, int64_t r1, const char *dir,
                              float **buf);

/* The rows [*r0, *r1) of dim 0 of t's global tensor that its box
 * (mt_tensor_global_box) spans, widened to whole units of `unit` rows (a
 * head's, where rows are reordered within heads; 1 otherwise). */
void mt__hf_rows_of(const mt_tensor *t, int64_t unit, int64_t *r0, int64_t *r1);

/* A LLaMA's mixture-of-experts tensors (hf_moe.c): Mixtral's
 * block_sparse_moe.gate and experts.<e>.w1, w3, w2, Qwen3-MoE's mlp.gate
 * and mlp.experts.<e>.gate_proj, up_proj, down_proj, whichever cfg's
 * architecture has (qk_norm: Qwen3-MoE). */
/* Loads every MoE block's router and experts from st into g; *used grows
 * by the tensors taken. A router bias of g is set to zeros. */
mt_status mt__hf_load_moe(const mt_safetensors *st, mt_graph *g, const mt_llama_config *cfg,
                          const char *dir, int *used);
/* Appends every MoE block's router and experts of g to o; a router bias
 * that is not all zero is refused (MT_EUNSUPPORTED, naming it). */
mt_status mt__hf_save_moe(mt_graph *g, const mt_llama_config *cfg, const char *dir,
                          mt__hf_out *o);
/* Whether `name` is one of cfg's MoE tensors. */
bool      mt__hf_moe_known(const mt_llama_config *cfg, const char *name);

#endif /* MT_HF_IMPL_H */
