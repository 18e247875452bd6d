/*
 * hf_impl.h — what the Hugging Face directory's files share (hf_config.c,
 * hf_llama.c).
 */
#ifndef MT_HF_IMPL_H
#define MT_HF_IMPL_H

#include "meshtrain/io.h"

/* Writes dir/config.json for cfg (LlamaForCausalLM) through a claim. */
mt_status mt__hf_write_llama_config(const char *dir, const mt_llama_config *cfg);
/* Writes dir/config.json for cfg (GPT2LMHeadModel) through a claim. */
mt_status mt__hf_write_gpt2_config(const char *dir, const mt_gpt_config *cfg);

#endif /* MT_HF_IMPL_H */
