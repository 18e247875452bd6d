/*
 * test_doc_train.c — packed documents through the loader and the trainer
 * (--doc-mask): the document ids the loader derives from a hand-made token
 * file against a hand-computed table; the doc-masked attention ops'
 * backward against each document run apart (their gradients must be the
 * documents' own); a tiny GPT and a tiny LLaMA whose rows each hold one
 * document train the same run with the mask on as off (the mask keeps
 * everything), while packed rows train a different one; the packed run on
 * data=2 and tensor=2 trains the one-device run (losses 1e-5, parameters
 * 1e-4); and the refusal of a model without sequences.
 */
#include "meshtrain.h"
#include "harness.h"
#include "train_helpers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { EOT = 63, NTOK = 4097, TSTEPS = 10 };

/* Writes NTOK tokens in [0, EOT) from an LCG to a new file from tmpl, an
 * EOT wherever i % every == every-1 (every 0: where i % 16 == 15 only: one
 * document a row of T=16), for every > 0 also there. */
static void write_tokens(char *tmpl, int every) {
    int fd = mkstemp(tmpl);
    MT_CHECK(fd >= 0, "mkstemp %s", tmpl);
    close(fd);
    int32_t *t = malloc(NTOK * sizeof *t);
    uint32_t x = 12345;
    for (int i = 0; i < NTOK; i++) {
        x = x * 1664525u + 1013904223u;
        t[i] = (int32_t)((x >> 16) % EOT);
        if (i % 16 == 15 || (every > 0 && i % every == every - 1)) t[i] = EOT;
    }
    MT_CHECK_OK(mt_tokens_write(tmpl, t, NTOK));
    free(t);
}

MT_TEST(loader_doc_ids_from_a_hand_made_token_file) {
    /* two rows of T=8 from a file whose id 9 ends documents */
    const int32_t toks[17] = {1, 2, 9, 3, 4, 5, 9, 9,   /* row 0 */
                              9, 6, 7, 9, 8, 8, 8, 8,   /* row 1 */
                              1};                       /* row 1's last target */
    const int32_t want[16] = {0, 0, 0, 1, 1, 1, 1, 2,   /* row 0: EOT ends its document */
                              0, 1, 1, 1, 2, 2, 2, 2};  /* row 1 starts document 0 again */
    char path[] = "/tmp/mt_docids_XXXXXX";
    int fd = mkstemp(path);
    MT_CHECK(fd >= 0, "mkstemp");
    close(fd);
    MT_CHECK_OK(mt_tokens_write(path, toks, 17));
    mt_dataset *ds = NULL;
    MT_CHECK_OK(mt_dataset_open(path, 0.0, &ds));
    int32_t tok[16], tgt[16], docs[16];
    int64_t pos = 0;
    MT_CHECK_OK(mt_dataset_rows(ds, 0, &pos, 2, 8, 0, 2, tok, tgt));
    mt_dataset_doc_ids(tok, 2, 8, 9, docs);
    for (int i = 0; i < 16; i++)
        MT_CHECK(docs[i] == want[i], "token %d (%d): document %d, hand-computed %d", i, tok[i],
                 docs[i], want[i]);
    mt_dataset_free(ds);
    unlink(path);
}

/* ---- the ops' backward: each document's gradient is its own ------------ */

enum { BT = 11, BNDOC = 3 };
static const int BLEN[BNDOC] = {4, 5, 2};

static float val(int w, int64_t i) { return mt_rng_normal(11, (uint64_t)w, (uint64_t)i); }

/* d (Σ out ⊙ W) / d q, k, v (gqa) or qkv for rows [t0, t0+n) of the
 * packed row, into grad (rows of widths C, CK, CK or 3C, concatenated per
 * operand: grad + k·BT·64). */
static void grads(bool gqa, int NH, int KV, int HS, int64_t t0, int64_t n, const int32_t *docs,
                  float *grad) {
    const int64_t C = NH * HS, CK = KV * HS;
    mt_graph *g = mt_graph_create();
    const mt_init z = {MT_INIT_ZEROS, 0};
    mt_tensor *d = docs ? mt_input(g, "docs", MT_I32, 2, (int64_t[]){1, n}) : NULL, *o;
    mt_tensor *p[3] = {0};
    int64_t width[3] = {C, CK, CK};
    int np = gqa ? 3 : 1;
    if (gqa) {
        p[0] = mt_param(g, "q", 3, (int64_t[]){1, n, C}, z);
        p[1] = mt_param(g, "k", 3, (int64_t[]){1, n, CK}, z);
        p[2] = mt_param(g, "v", 3, (int64_t[]){1, n, CK}, z);
        o = mt_attention_gqa_docs(g, p[0], p[1], p[2], NH, KV, d);
    } else {
        width[0] = 3 * C;
        p[0] = mt_param(g, "qkv", 3, (int64_t[]){1, n, 3 * C}, z);
        o = mt_attention_docs(g, p[0], NH, d);
    }
    MT_CHECK(o, "%s", mt_graph_errmsg(g));
    /* the backward from the cotangent W: d (Σ out ⊙ W) */
    MT_CHECK_OK(mt_graph_compile(g, o, &(mt_compile_opts){.seed = 1, .seed_from_caller = true}));
    for (int k = 0; k < np; k++)
        for (int64_t i = 0; i < n * width[k]; i++)
            mt_tensor_f32(p[k])[i] = val(k, t0 * width[k] + i);
    if (d) MT_CHECK_OK(mt_tensor_write(d, docs, 0, n));
    MT_CHECK_OK(mt_graph_forward(g));
    float *cot = mt_tensor_f32(mt_tensor_grad(o));
    for (int64_t i = 0; i < n * C; i++) cot[i] = val(7, t0 * C + i);
    MT_CHECK_OK(mt_graph_backward(g));
    for (int k = 0; k < np; k++)
        memcpy(grad + k * BT * 64 + t0 * width[k], mt_tensor_f32(mt_tensor_grad(p[k])),
               (size_t)(n * width[k]) * sizeof *grad);
    mt_graph_free(g);
}

static void check_backward(bool gqa, int NH, int KV, int HS) {
    int32_t docs[BT];
    for (int j = 0, t = 0; j < BNDOC; j++)
        for (int i = 0; i < BLEN[j]; i++) docs[t++] = j;
    static float packed[3 * BT * 64], apart[3 * BT * 64], plain[3 * BT * 64];
    memset(packed, 0, sizeof packed);
    memset(apart, 0, sizeof apart);
    memset(plain, 0, sizeof plain);
    grads(gqa, NH, KV, HS, 0, BT, docs, packed);
    grads(gqa, NH, KV, HS, 0, BT, NULL, plain);
    for (int j = 0, t0 = 0; j < BNDOC; t0 += BLEN[j], j++)
        grads(gqa, NH, KV, HS, t0, BLEN[j], NULL, apart);
    double diff_plain = 0;
    for (int i = 0; i < 3 * BT * 64; i++) {
        MT_CHECK(fabsf(packed[i] - apart[i]) <= 1e-5f * (1 + fabsf(apart[i])),
                 "%s NH=%d KV=%d: packed gradient[%d] %g, the document alone %g",
                 gqa ? "gqa" : "packed qkv", NH, KV, i, packed[i], apart[i]);
        diff_plain += fabs((double)packed[i] - plain[i]);
    }
    MT_CHECK(diff_plain > 1e-3, "the document mask changed no gradient (%g)", diff_plain);
}

MT_TEST(doc_masked_backward_equals_each_document_apart) {
    check_backward(true, 4, 2, 4);    /* GQA */
    check_backward(true, 4, 1, 4);    /* MQA */
    check_backward(false, 2, 2, 8);   /* the GPT's packed qkv */
}

/* ---- the trainer ------------------------------------------------------- */

static mt_llama_config small_llama(void) {
    return (mt_llama_config){.dim = 32, .ffn_dim = 64, .n_layers = 2, .n_heads = 4,
                             .n_kv_heads = 2, .vocab = 0, .max_seq = 16,
                             .rope_theta = 10000.0f, .norm_eps = 1e-5f, .tie_embeddings = 0,
                             .multiple_of = 32, .ffn_mult = 1.0f};
}

static mt_train_config config(mt_model_kind model, const char *path, bool mask,
                              mt_llama_config *llama) {
    mt_train_config c = mt_test_config(model, path);
    c.data = path;
    c.T = 16;
    c.val_frac = 0;
    c.doc_mask = mask;
    c.eot_id = EOT;
    if (model == MT_MODEL_LLAMA) {
        *llama = small_llama();
        MT_TEST_MODEL_CONFIG(&c, llama);
    }
    return c;
}

static mt_test_curve run(const mt_train_config *c, mt_test_params *params) {
    mt_trainer *tr = NULL;
    MT_CHECK_OK(mt_trainer_create(c, &tr));
    mt_test_curve out = mt_test_steps(tr, TSTEPS);
    if (params) *params = mt_test_params_of(tr);
    mt_trainer_free(tr);
    return out;
}

static void one_doc_rows_and_packed(mt_model_kind model) {
    const char *name = model == MT_MODEL_GPT ? "gpt" : "llama";
    char rows[] = "/tmp/mt_docrows_XXXXXX", packed[] = "/tmp/mt_docpack_XXXXXX";
    write_tokens(rows, 0);
    write_tokens(packed, 5);
    mt_llama_config l1, l2;
    mt_train_config on = config(model, rows, true, &l1), off = config(model, rows, false, &l2);
    mt_test_curve a = run(&on, NULL), b = run(&off, NULL);
    for (int s = 0; s < TSTEPS; s++)
        MT_CHECK_CLOSE(a.loss[s], b.loss[s], 1e-6, "%s, one document a row: loss at step %d "
                       "with --doc-mask on against off", name, s + 1);
    on.data = off.data = packed;
    a = run(&on, NULL);
    b = run(&off, NULL);
    double most = 0;
    for (int s = 0; s < TSTEPS; s++) most = fmax(most, fabs((double)a.loss[s] - b.loss[s]));
    MT_CHECK(most > 1e-4, "%s, packed documents: the mask changed the losses by only %g", name,
             most);
    unlink(rows);
    unlink(packed);
}

MT_TEST(gpt_one_document_a_row_trains_the_same_packed_does_not) {
    one_doc_rows_and_packed(MT_MODEL_GPT);
}

MT_TEST(llama_one_document_a_row_trains_the_same_packed_does_not) {
    one_doc_rows_and_packed(MT_MODEL_LLAMA);
}

static void meshes_train_one_device(mt_model_kind model) {
    char packed[] = "/tmp/mt_docmesh_XXXXXX";
    write_tokens(packed, 5);
    mt_llama_config l;
    mt_train_config c = config(model, packed, true, &l);
    mt_test_params one;
    mt_test_curve want = run(&c, &one);
    const char *meshes[] = {"data=2", "tensor=2"};
    for (int i = 0; i < 2; i++) {
        c.mesh = meshes[i];
        mt_test_params p;
        mt_test_curve got = run(&c, &p);
        for (int s = 0; s < TSTEPS; s++)
            MT_CHECK_CLOSE(got.loss[s], want.loss[s], 1e-5, "%s on %s: loss at step %d",
                           model == MT_MODEL_GPT ? "gpt" : "llama", meshes[i], s + 1);
        int split = 0;
        double worst = mt_test_params_diff(&p, &one, &split);
        MT_CHECK(worst <= 1e-4, "%s: parameters %g from one device's", meshes[i], worst);
        free(p.params);
    }
    free(one.params);
    unlink(packed);
}

MT_TEST(gpt_doc_mask_on_data_and_tensor_trains_one_device) {
    meshes_train_one_device(MT_MODEL_GPT);
}

MT_TEST(llama_doc_mask_on_data_and_tensor_trains_one_device) {
    meshes_train_one_device(MT_MODEL_LLAMA);
}

MT_TEST(doc_mask_refusals_name_the_flag) {
    mt_train_config c = mt_test_config(MT_MODEL_MLP, NULL);
    c.doc_mask = true;
    MT_CHECK(mt_train_config_check(&c) == MT_EINVAL, "mlp with --doc-mask on");
    MT_CHECK(strstr(mt_errmsg(), "--doc-mask"), "%s", mt_errmsg());
}

int main(int argc, char **argv) {
    return mt_test_main(argc, argv);
}
