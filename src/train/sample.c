/*
 * sample.c — text generation from a GPT checkpoint (meshtrain's own or
 * llm.c's): a forward-only graph of one sequence of maxT tokens, run once per
 * new token, reading the next-token logits at the last filled position.
 * Causal attention makes the positions past it (padding) irrelevant.
 */
#include "graph/tensor_data.h"
#include "meshtrain/tokenizer.h"
#include "meshtrain/train.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Learns which model a checkpoint holds; *is_llmc tells the two formats apart.
 * mt_file_detect opens without blocking and says what a path is when it is
 * not a file (a directory, a FIFO), with the system's message when it is
 * missing; anything that is not an llm.c file goes to the meshtrain reader,
 * whose message says what a checkpoint must start with. */
static mt_status read_model(const char *path, mt_gpt_config *cfg, bool *is_llmc) {
    mt_file_kind kind;
    mt_status s = mt_file_detect(path, &kind);
    if (s != MT_OK) return mt_fail_wrap(s, "reading the checkpoint to sample from");
    *is_llmc = kind == MT_FILE_LLMC;
    if (*is_llmc) return mt_llmc_read_config(path, cfg);
    mt_ckpt_meta meta;
    s = mt_ckpt_read_meta(path, &meta);
    if (s != MT_OK) return s;
    memset(cfg, 0, sizeof *cfg);
    if (sscanf(meta.model, "gpt L=%d C=%d NH=%d maxT=%d V=%d Vp=%d", &cfg->L, &cfg->C,
               &cfg->NH, &cfg->maxT, &cfg->V, &cfg->Vp) != 6)
        return mt_fail(MT_EINVAL, "checkpoint %s holds model '%s'; sampling needs a GPT", path,
                       meta.model);
    return mt_gpt_config_check(cfg);
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

/* The prompt's tokens, its last T-1 into ctx (T): bytes, or through the
 * tokenizer `tok`; *n_ctx their count. */
static mt_status prompt_tokens(const char *prompt, const mt_tokenizer *tok, int V, int T,
                               int32_t *ctx, int *n_ctx) {
    size_t plen = strlen(prompt);
    int32_t *ids = NULL;
    int64_t n = 0;
    if (tok) {
        mt_status s = mt_tokenizer_encode(tok, prompt, plen, &ids, &n);
        if (s != MT_OK) return mt_fail_wrap(s, "encoding the prompt");
    }
    *n_ctx = 0;
    int64_t len = tok ? n : (int64_t)plen;
    for (int64_t i = len > T - 1 ? len - (T - 1) : 0; i < len; i++) {
        int t = tok ? ids[i] : (unsigned char)prompt[i];
        if (t >= V) {
            free(ids);
            return mt_fail(MT_EINVAL, "prompt %s %d at %lld is outside the model's vocabulary "
                           "V=%d", tok ? "token" : "byte", t, (long long)i, V);
        }
        ctx[(*n_ctx)++] = t;
    }
    free(ids);
    return MT_OK;
}

/* Writes token t: its text through the tokenizer, or the byte. */
static bool write_token(FILE *out, const mt_tokenizer *tok, int t) {
    if (!tok)
        return t < 256 ? fputc(t, out) != EOF : fprintf(out, "<%d>", t) > 0;   /* no tokenizer */
    char buf[256];
    size_t len = 0;
    int32_t id = t;
    if (mt_tokenizer_decode(tok, &id, 1, false, buf, sizeof buf, &len) != MT_OK) return false;
    return fwrite(buf, 1, len, out) == len;
}

mt_status mt_sample(const mt_sample_config *cfg, FILE *out) {
    if (!cfg || !cfg->ckpt || !out)
        return mt_fail(MT_EINVAL, "mt_sample needs a configuration with a checkpoint path and "
                       "an output stream");
    if (cfg->n < 0) return mt_fail(MT_EINVAL, "number of tokens n=%d must not be negative", cfg->n);
    if (cfg->top_k < 0) return mt_fail(MT_EINVAL, "top_k=%d must not be negative (0 = all)", cfg->top_k);
    if (!isfinite(cfg->temperature))
        return mt_fail(MT_EINVAL, "temperature=%g must be finite", (double)cfg->temperature);
    mt_set_num_threads(cfg->threads);

    mt_gpt_config gc;
    bool is_llmc = false;
    mt_status s = read_model(cfg->ckpt, &gc, &is_llmc);
    if (s != MT_OK) return s;
    const int T = gc.maxT, V = gc.V, Vp = gc.Vp;

    mt_tokenizer *tok = NULL;
    if (cfg->tokenizer && (s = mt_tokenizer_open(cfg->tokenizer, &tok)) != MT_OK) return s;
    if (tok && V > mt_tokenizer_vocab(tok)) {
        s = mt_fail(MT_EFORMAT, "checkpoint %s has vocabulary V=%d but tokenizer %s has %d "
                    "pieces: give the tokenizer the model was trained with", cfg->ckpt, V,
                    cfg->tokenizer, mt_tokenizer_vocab(tok));
        mt_tokenizer_free(tok);
        return s;
    }
    mt_graph *g = mt_graph_create();
    int32_t *ctx = malloc((size_t)T * sizeof *ctx);    /* (T) the window of context tokens */
    scored *work = malloc((size_t)V * sizeof *work);   /* (V) */
    /* the graph's tensors are its backend's: written and read through it */
    int32_t *feed = calloc(2 * (size_t)T, sizeof *feed);   /* (2,T) tokens, then targets */
    float *logits = malloc((size_t)Vp * sizeof *logits);   /* (Vp) the last position's */
    if (!g || !ctx || !work || !feed || !logits) {
        s = mt_fail(MT_ENOMEM, "out of memory for sampling");
        goto done;
    }
    mt_tensor *loss = mt_gpt_build(g, &gc, 1, T, 1.0f);
    if (!loss) { s = mt_graph_status(g) != MT_OK ? mt_graph_status(g) : MT_EINVAL; goto done; }
    mt_compile_opts opts = {.seed = cfg->seed, .no_grad = true};
    if ((s = mt_graph_compile(g, loss, &opts)) != MT_OK) goto done;
    if ((s = mt_gpt_fill_constants(g)) != MT_OK) goto done;
    mt_ckpt_meta meta;
    s = is_llmc ? mt_llmc_load(cfg->ckpt, g, &gc) : mt_ckpt_load(cfg->ckpt, g, NULL, &meta);
    if (s != MT_OK) goto done;

    mt_tensor *tokens = mt_graph_find(g, "tokens");     /* (1,T) i32 */
    mt_tensor *targets = mt_graph_find(g, "targets");   /* (1,T) i32 */
    mt_tensor *all = mt_graph_find(g, "logits");        /* (1,T,Vp) */
    if (!tokens || !targets || !all || mt_tensor_dtype(tokens) != MT_I32 ||
        mt_tensor_dtype(targets) != MT_I32 || mt_tensor_dtype(all) != MT_F32) {
        s = mt_fail(MT_EINTERNAL, "the GPT graph lacks tokens, targets or logits");
        goto done;
    }

    /* the prompt, through the tokenizer or as bytes; only its last T-1 tokens fit */
    int n_ctx = 0;
    if ((s = prompt_tokens(cfg->prompt ? cfg->prompt : "", tok, V, T, ctx, &n_ctx)) != MT_OK)
        goto done;
    /* no prompt: start a fresh line */
    if (n_ctx == 0 && tok && (s = prompt_tokens("\n", tok, V, T, ctx, &n_ctx)) != MT_OK) goto done;
    if (n_ctx == 0) ctx[n_ctx++] = '\n' < V ? '\n' : 0;

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
