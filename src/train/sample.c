/*
 * sample.c — text generation from a checkpoint of any model the trainer's
 * table can sample (an entry with parse and logits: the GPT, the LLaMA
 * model): meshtrain's own checkpoint, whose description names the model and
 * its settings, or the model's llm.c-family file (llm.c's GPT-2 checkpoint,
 * told by its magic; llama2.c's model.bin, which has none, by
 * mt_sample_config.model). A forward-only graph of one sequence of maxT
 * tokens runs once per new token; the next-token logits are read at the
 * last filled position, and causal attention makes the positions past it
 * (padding) irrelevant.
 */
#include "graph/tensor_data.h"
#include "meshtrain/tokenizer.h"
#include "meshtrain/train.h"
#include "train/train_impl.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The model to sample and what the entry's hooks read of it. */
typedef struct {
    const mt__train_model *m;
    mt__model_config_buf   mc;     /* its settings */
    mt_train_config        tc;     /* B 1, T maxT, model_config &mc, llmc_in */
    int                    T, V;   /* its context maxT and vocabulary */
} sample_model;

/* The kind whose entry's name is the description's first word; -1 when
 * none is. */
static int kind_of_description(const char *desc) {
    size_t len = strcspn(desc, " ");
    for (int k = 0; k < mt__train_model_count(); k++) {
        const mt__train_model *m = mt__train_model_of((mt_model_kind)k);
        if (m && strlen(m->about.name) == len && strncmp(desc, m->about.name, len) == 0) return k;
    }
    return -1;
}

/* "gpt, llama": the models that can be sampled, for messages. */
static void sampled_names(char *buf, size_t n) {
    size_t at = 0;
    buf[0] = '\0';
    for (int k = 0; k < mt__train_model_count() && at < n; k++) {
        const mt__train_model *m = mt__train_model_of((mt_model_kind)k);
        if (!m || !m->parse) continue;
        int w = snprintf(buf + at, n - at, "%s%s", at ? ", " : "", m->about.name);
        if (w < 0) break;
        at += (size_t)w;
    }
}

/* Learns which model the file holds and its settings into *sm. A meshtrain
 * checkpoint says it in its description; an llm.c-family file is read by
 * the entry's llmc_read, and its settings go through describe and parse
 * like a checkpoint's, which gives maxT and V. mt_file_detect opens
 * without blocking and says what a path is when it is not a file (a
 * directory, a FIFO), with the system's message when it is missing;
 * anything that is not an llm.c file goes to the meshtrain reader, whose
 * message says what a checkpoint must start with. */
/* The one source a configuration names (NULL when it names none or more). */
static const char *source_of(const mt_sample_config *cfg) {
    if (!cfg || (cfg->ckpt != NULL) + (cfg->llmc_in != NULL) + (cfg->hf_in != NULL) != 1)
        return NULL;
    return cfg->hf_in ? cfg->hf_in : cfg->llmc_in ? cfg->llmc_in : cfg->ckpt;
}

/* A Hugging Face directory's model: its config.json read by the first
 * entry whose hf_read takes it (LLaMA's, then GPT-2's: each refuses the
 * other's architecture), as the train entry's hf_in reads it (hf_load
 * loads the weights). */
static mt_status read_hf_model(const mt_sample_config *cfg, sample_model *sm) {
    memset(sm, 0, sizeof *sm);
    static const mt_model_kind KINDS[] = {MT_MODEL_LLAMA, MT_MODEL_GPT};
    mt_status s = MT_EUNSUPPORTED;
    char first[512] = "";
    for (size_t i = 0; s != MT_OK && i < sizeof KINDS / sizeof KINDS[0]; i++) {
        sm->m = mt__train_model_of(KINDS[i]);
        memcpy(sm->mc.bytes, sm->m->config_defaults, sm->m->about.config_size);
        if ((s = sm->m->hf_read(cfg->hf_in, sm->mc.bytes)) == MT_OK) sm->tc.model = KINDS[i];
        else if (!i) snprintf(first, sizeof first, "%s", mt_errmsg());
        if (s != MT_OK && s != MT_EUNSUPPORTED) return s;   /* a file's fault: said as it is */
    }
    if (s != MT_OK) return mt_fail(s, "%s (nor GPT2LMHeadModel)", first);
    sm->tc.model_config = sm->mc.bytes;
    sm->tc.model_config_size = sm->m->about.config_size;
    sm->tc.B = 1;
    sm->tc.hf_in = cfg->hf_in;
    char desc[256];
    sm->m->describe(&sm->tc, desc, sizeof desc);
    if ((s = sm->m->parse(desc, sm->mc.bytes, &sm->T, &sm->V)) != MT_OK) return s;
    sm->tc.T = sm->T;
    return MT_OK;
}

static mt_status read_model(const mt_sample_config *cfg, sample_model *sm) {
    if (cfg->hf_in) return read_hf_model(cfg, sm);
    const char *path = cfg->llmc_in ? cfg->llmc_in : cfg->ckpt;
    int kind = cfg->llmc_in ? (int)cfg->model : MT_MODEL_GPT;
    bool llmc = cfg->llmc_in != NULL;
    mt_file_kind fk;
    mt_status s = mt_file_detect(path, &fk);
    if (s != MT_OK) return mt_fail_wrap(s, "reading the checkpoint to sample from");
    mt_ckpt_meta meta;
    char names[128];
    sampled_names(names, sizeof names);
    if (!llmc && fk == MT_FILE_LLMC) {
        llmc = true;   /* llm.c's GPT-2 checkpoint, told by its magic */
    } else if (!llmc) {
        if ((s = mt_ckpt_read_meta(path, &meta)) != MT_OK && fk == MT_FILE_OTHER) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", mt_errmsg());
            return mt_fail(s, "%s; llama2.c's model.bin has no magic: sample it as llmc_in "
                           "(--llmc-in FILE --model llama)", msg);
        }
        if (s != MT_OK) return s;
        kind = kind_of_description(meta.model);
        if (kind < 0 || !mt__train_model_of((mt_model_kind)kind)->parse)
            return mt_fail(MT_EINVAL, "checkpoint %s holds model '%s'; sampling needs a "
                           "language model (%s)", path, meta.model, names);
    }
    memset(sm, 0, sizeof *sm);
    sm->m = mt__train_model_of((mt_model_kind)kind);
    if (!sm->m || !sm->m->parse)
        return mt_fail(MT_EINVAL, "sampling needs a language model (%s), not model kind %d",
                       names, kind);
    if (llmc && !sm->m->about.llmc)
        return mt_fail(MT_EINVAL, "--model %s has no llm.c-family file to read %s from",
                       sm->m->about.name, path);
    if (sm->m->about.config_size)
        memcpy(sm->mc.bytes, sm->m->config_defaults, sm->m->about.config_size);
    sm->tc.model = (mt_model_kind)kind;
    sm->tc.model_config = sm->m->about.config_size ? sm->mc.bytes : NULL;
    sm->tc.model_config_size = sm->m->about.config_size;
    sm->tc.B = 1;
    if (llmc) {
        sm->tc.llmc_in = path;
        if ((s = sm->m->llmc_read(path, sm->mc.bytes)) != MT_OK) return s;
        sm->m->describe(&sm->tc, meta.model, sizeof meta.model);
    }
    if ((s = sm->m->parse(meta.model, sm->mc.bytes, &sm->T, &sm->V)) != MT_OK) return s;
    sm->tc.T = sm->T;
    return MT_OK;
}

/* The tokens a sample is read in, the tokenizer's pieces or the 256 bytes,
 * are the model's vocabulary, or every token would print as another piece
 * than the model learned (a LLaMA of 2048 pieces as bytes and "<2026>", a
 * byte-level GPT through a tokenizer as garbage). MT_EINVAL naming both
 * sizes and the fix. */
static mt_status check_vocab(const char *path, int V, const mt_tokenizer *tok) {
    if (tok && V != mt_tokenizer_vocab(tok))
        return mt_fail(MT_EINVAL, "checkpoint %s has a vocabulary of V=%d tokens but tokenizer "
                       "%s has %d pieces, so its tokens would print as other pieces than it "
                       "learned: give the tokenizer the model was trained with (train "
                       "--tokenizer MODEL), %s", path, V, mt_tokenizer_path(tok),
                       mt_tokenizer_vocab(tok),
                       V == 256 ? "or none: a model of 256 tokens reads bytes"
                                : "one of exactly that many pieces");
    if (!tok && V != 256)
        return mt_fail(MT_EINVAL, "checkpoint %s has a vocabulary of V=%d tokens, and without "
                       "a tokenizer the tokens are the 256 bytes: give the SentencePiece model "
                       "of %d pieces it was trained with (sample --tokenizer MODEL, made by "
                       "meshtrain tokenize)", path, V, V);
    return MT_OK;
}

/* MT_SAMPLE_BOS_ON needs a BOS to put: MT_EINVAL naming the tokenizer and the fix. */
static mt_status check_bos(const mt_sample_config *cfg, const mt_tokenizer *tok) {
    if (cfg->bos != MT_SAMPLE_BOS_ON || (tok && mt_tokenizer_bos(tok) >= 0)) return MT_OK;
    if (!tok)
        return mt_fail(MT_EINVAL, "a BOS before the prompt is a tokenizer's id, and without a "
                       "tokenizer the tokens are bytes: give the tokenizer (--tokenizer FILE) "
                       "or drop the BOS (--bos off)");
    return mt_fail(MT_EINVAL, "a BOS before the prompt was asked for, and tokenizer %s (%s) "
                   "defines none its library puts before a text (GPT-2's, cl100k_base and "
                   "o200k_base put none): drop it (--bos off)", mt_tokenizer_path(tok),
                   mt_tokenizer_kind(tok));
}

mt_status mt_sample_check(const mt_sample_config *cfg, bool *mismatch) {
    if (mismatch) *mismatch = false;
    if (!source_of(cfg))
        return mt_fail(MT_EINVAL, "mt_sample_check needs a configuration with one checkpoint "
                       "path (ckpt, llmc_in or hf_in)");
    sample_model sm;
    mt_status s = read_model(cfg, &sm);
    if (s != MT_OK) return s;
    mt_tokenizer *tok = NULL;
    if (cfg->tokenizer && (s = mt_tokenizer_open(cfg->tokenizer, &tok)) != MT_OK) return s;
    s = check_vocab(source_of(cfg), sm.V, tok);
    if (s == MT_OK) s = check_bos(cfg, tok);
    mt_tokenizer_free(tok);
    if (s != MT_OK && mismatch) *mismatch = true;
    return s;
}

/* mt_sample_prompt's ids through the tokenizer `tok` (NULL: bytes). */
static mt_status prompt_ids(const mt_sample_config *cfg, const mt_tokenizer *tok, int32_t **ids,
                            int64_t *n) {
    *ids = NULL;
    *n = 0;
    mt_status s = check_bos(cfg, tok);
    if (s != MT_OK) return s;
    const char *prompt = cfg->prompt && cfg->prompt[0] ? cfg->prompt : NULL;
    const int bos = tok && cfg->bos != MT_SAMPLE_BOS_OFF ? mt_tokenizer_bos(tok) : -1;
    if (!prompt && bos < 0) prompt = "\n";   /* nothing to start from: a fresh line */
    const size_t plen = prompt ? strlen(prompt) : 0;
    int32_t *text = NULL;   /* (n_text) the prompt's ids */
    int64_t n_text = 0;
    if (tok && plen && (s = mt_tokenizer_encode(tok, prompt, plen, &text, &n_text)) != MT_OK)
        return mt_fail_wrap(s, "encoding the prompt");
    if (!tok) n_text = (int64_t)plen;
    int32_t *v = malloc((size_t)(n_text + 1) * sizeof *v);   /* (1 + n_text) */
    if (!v) {
        free(text);
        return mt_fail(MT_ENOMEM, "out of memory for the %lld ids of the prompt",
                       (long long)n_text + 1);
    }
    if (bos >= 0) v[(*n)++] = bos;
    for (int64_t i = 0; i < n_text; i++) v[(*n)++] = tok ? text[i] : (unsigned char)prompt[i];
    free(text);
    *ids = v;
    return MT_OK;
}

mt_status mt_sample_prompt(const mt_sample_config *cfg, int32_t **ids, int64_t *n) {
    if (!cfg || !ids || !n)
        return mt_fail(MT_EINVAL, "mt_sample_prompt needs a configuration and places for the ids");
    mt_tokenizer *tok = NULL;
    mt_status s = cfg->tokenizer ? mt_tokenizer_open(cfg->tokenizer, &tok) : MT_OK;
    if (s == MT_OK) s = prompt_ids(cfg, tok, ids, n);
    mt_tokenizer_free(tok);
    return s;
}

typedef struct { float logit; int token; } scored;

static int by_logit_desc(const void *pa, const void *pb) {
    const scored *a = pa, *b = pb;
    if (a->logit != b->logit) return a->logit < b->logit ? 1 : -1;
    return a->token - b->token;   /* ties: lower token first, so the order is total */
}

/* Picks the next token from logits (V) with temperature and top-k, using the
 * uniform number u in [0,1). `work` holds V entries. temperature <= 0 is greedy. */
static int pick_token(const float *logits, int V, float temperature, int top_k, float u,
                      scored *work) {
    for (int v = 0; v < V; v++) work[v] = (scored){logits[v], v};
    qsort(work, (size_t)V, sizeof *work, by_logit_desc);
    if (temperature <= 0.0f) return work[0].token;
    int k = (top_k > 0 && top_k < V) ? top_k : V;
    double total = 0;
    for (int i = 0; i < k; i++) total += exp((double)(work[i].logit - work[0].logit) / temperature);
    double r = u * total, cum = 0;
    for (int i = 0; i < k; i++) {
        cum += exp((double)(work[i].logit - work[0].logit) / temperature);
        if (r < cum) return work[i].token;
    }
    return work[k - 1].token;   /* rounding left r at the very top */
}

/* mt_sample_prompt's ids, their last T-1 into ctx (T); *n_ctx their count. */
static mt_status prompt_tokens(const mt_sample_config *cfg, const mt_tokenizer *tok, int V,
                               int T, int32_t *ctx, int *n_ctx) {
    int32_t *ids;
    int64_t n;
    mt_status s = prompt_ids(cfg, tok, &ids, &n);
    if (s != MT_OK) return s;
    *n_ctx = 0;
    for (int64_t i = n > T - 1 ? n - (T - 1) : 0; i < n; i++) {
        if (ids[i] >= V) {
            s = mt_fail(MT_EINVAL, "prompt %s %d at %lld is outside the model's vocabulary "
                        "V=%d", tok ? "token" : "byte", ids[i], (long long)i, V);
            break;
        }
        ctx[(*n_ctx)++] = ids[i];
    }
    free(ids);
    return s;
}

/* Writes token t: its text through the tokenizer, or the byte (check_vocab
 * made the vocabulary 256 then). */
static bool write_token(FILE *out, const mt_tokenizer *tok, int t) {
    if (!tok) return fputc(t, out) != EOF;
    char buf[256];
    size_t len = 0;
    int32_t id = t;
    if (mt_tokenizer_decode(tok, &id, 1, false, buf, sizeof buf, &len) != MT_OK) return false;
    return fwrite(buf, 1, len, out) == len;
}

mt_status mt_sample(const mt_sample_config *cfg, FILE *out) {
    if (!source_of(cfg) || !out)
        return mt_fail(MT_EINVAL, "mt_sample needs a configuration with one checkpoint path "
                       "(ckpt, llmc_in or hf_in) and an output stream");
    if (cfg->n < 0) return mt_fail(MT_EINVAL, "number of tokens n=%d must not be negative", cfg->n);
    if (cfg->top_k < 0) return mt_fail(MT_EINVAL, "top_k=%d must not be negative (0 = all)", cfg->top_k);
    if (!isfinite(cfg->temperature))
        return mt_fail(MT_EINVAL, "temperature=%g must be finite", (double)cfg->temperature);
    mt_set_num_threads(cfg->threads);

    sample_model sm;
    mt_status s = read_model(cfg, &sm);
    if (s != MT_OK) return s;
    const mt__train_model *m = sm.m;
    const char *path = source_of(cfg);
    const int T = sm.T, V = sm.V;

    mt_tokenizer *tok = NULL;
    if (cfg->tokenizer && (s = mt_tokenizer_open(cfg->tokenizer, &tok)) != MT_OK) return s;
    if ((s = check_vocab(path, V, tok)) != MT_OK || (s = check_bos(cfg, tok)) != MT_OK) {
        mt_tokenizer_free(tok);
        return s;
    }
    mt_graph *g = mt_graph_create();
    int32_t *ctx = malloc((size_t)T * sizeof *ctx);    /* (T) the window of context tokens */
    scored *work = malloc((size_t)V * sizeof *work);   /* (V) */
    /* the graph's tensors are its backend's: written and read through it */
    int32_t *feed = calloc(2 * (size_t)T, sizeof *feed);   /* (2,T) tokens, then targets */
    float *logits = NULL;                                  /* (Vp) the last position's */
    if (!g || !ctx || !work || !feed) {
        s = mt_fail(MT_ENOMEM, "out of memory for sampling");
        goto done;
    }
    mt_tensor *loss = m->build(&sm.tc, g, 1.0f);
    if (!loss) { s = mt_graph_status(g) != MT_OK ? mt_graph_status(g) : MT_EINVAL; goto done; }
    mt_compile_opts opts = {.seed = cfg->seed, .no_grad = true};
    if ((s = mt_graph_compile(g, loss, &opts)) != MT_OK) goto done;
    if (m->fill_constants && (s = m->fill_constants(g)) != MT_OK) goto done;
    mt_ckpt_meta meta;
    s = sm.tc.hf_in     ? m->hf_load(&sm.tc, g, false)
        : sm.tc.llmc_in ? m->llmc_load(&sm.tc, g)
                        : mt_ckpt_load(path, g, NULL, &meta);
    if (s != MT_OK) goto done;

    mt_tensor *tokens = mt_graph_find(g, m->input);     /* (1,T) i32 */
    mt_tensor *targets = mt_graph_find(g, m->target);   /* (1,T) i32 */
    mt_tensor *all = mt_graph_find(g, m->logits);       /* (1,T,Vp) */
    if (!tokens || !targets || !all || mt_tensor_dtype(tokens) != MT_I32 ||
        mt_tensor_dtype(targets) != MT_I32 || mt_tensor_dtype(all) != MT_F32 ||
        mt_tensor_ndim(all) != 3 || mt_tensor_dim(all, 2) < V) {
        s = mt_fail(MT_EINTERNAL, "the %s graph lacks %s, %s or %s (1,T,Vp >= %d)",
                    m->about.name, m->input, m->target, m->logits, V);
        goto done;
    }
    const int64_t Vp = mt_tensor_dim(all, 2);
    if (!(logits = malloc((size_t)Vp * sizeof *logits))) {
        s = mt_fail(MT_ENOMEM, "out of memory for sampling");
        goto done;
    }

    /* the BOS and the prompt, through the tokenizer or as bytes; the last T-1 fit */
    int n_ctx = 0;
    if ((s = prompt_tokens(cfg, tok, V, T, ctx, &n_ctx)) != MT_OK) goto done;
    if (n_ctx == 0) ctx[n_ctx++] = 0;   /* "\n" encoded to nothing: any token starts */

    for (int i = 0; i < cfg->n; i++) {
        /* past n_ctx: padding the mask hides; the targets (0): the loss is not used */
        for (int t = 0; t < T; t++) feed[t] = t < n_ctx ? ctx[t] : 0;
        if ((s = mt_tensor_write(tokens, feed, 0, T)) != MT_OK ||
            (s = mt_tensor_write(targets, feed + T, 0, T)) != MT_OK ||
            (s = mt_graph_forward(g)) != MT_OK ||
            (s = mt_tensor_read(all, logits, (int64_t)(n_ctx - 1) * Vp, Vp)) != MT_OK)
            goto done;
        float u = mt_rng_uniform(cfg->seed, 0, (uint64_t)i);
        int next = pick_token(logits, V, cfg->temperature, cfg->top_k, u, work);
        /* a full disk or a closed pipe ends the sample: nothing else comes out */
        errno = 0;
        if (!write_token(out, tok, next) || fflush(out) != 0) {
            s = mt_fail(MT_EIO, "writing the sample failed after %d of %d tokens: %s", i,
                        cfg->n, errno ? strerror(errno) : "the stream reports an error");
            goto done;
        }
        if (n_ctx == T) {   /* the window is full: slide it by one */
            memmove(ctx, ctx + 1, (size_t)(T - 1) * sizeof *ctx);
            n_ctx--;
        }
        ctx[n_ctx++] = next;
    }
    s = MT_OK;
done:
    free(logits);
    free(feed);
    free(work);
    free(ctx);
    mt_graph_free(g);
    mt_tokenizer_free(tok);
    return s;
}
