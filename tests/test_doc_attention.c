/*
 * test_doc_attention.c — attention within documents (packed sequences) at
 * the graph level: a packed row of three documents through
 * mt_attention_gqa_docs and mt_attention_docs equals each document run
 * apart through the plain ops (an independent reference: no document ids,
 * T the document's length), for GQA, MQA and the GPT's packed qkv.
 */
#include "meshtrain.h"
#include "harness.h"

#include <math.h>
#include <string.h>

enum { T = 11, NDOC = 3 };
static const int DOC_LEN[NDOC] = {4, 5, 2};   /* sums to T */

/* value of element i of operand w: a fixed normal draw */
static float val(int w, int64_t i) { return mt_rng_normal(7, (uint64_t)w, (uint64_t)i); }

/* out (T, NH·HS) of one graph: q, k, v rows [t0, t0+n) of the packed row
 * (docs NULL: plain attention over them); gqa false: the GPT's packed form
 * (KV = NH). */
static void run(bool gqa, int NH, int KV, int HS, int64_t t0, int64_t n, const int32_t *docs,
                float *out) {
    const int64_t C = NH * HS, CK = KV * HS;
    mt_graph *g = mt_graph_create();
    const mt_init z = {MT_INIT_ZEROS, 0};
    mt_tensor *d = docs ? mt_input(g, "docs", MT_I32, 2, (int64_t[]){1, n}) : NULL, *o;
    mt_tensor *p[3] = {0};
    if (gqa) {
        p[0] = mt_param(g, "q", 3, (int64_t[]){1, n, C}, z);
        p[1] = mt_param(g, "k", 3, (int64_t[]){1, n, CK}, z);
        p[2] = mt_param(g, "v", 3, (int64_t[]){1, n, CK}, z);
        o = mt_attention_gqa_docs(g, p[0], p[1], p[2], NH, KV, d);
    } else {
        p[0] = mt_param(g, "qkv", 3, (int64_t[]){1, n, 3 * C}, z);
        o = mt_attention_docs(g, p[0], NH, d);
    }
    MT_CHECK(o, "%s", mt_graph_errmsg(g));
    o = mt_scale(g, o, 1.0f);   /* a result the caller reads after the forward */
    MT_CHECK_OK(mt_graph_compile(g, o, &(mt_compile_opts){.seed = 1, .seed_from_caller = true}));
    if (gqa) {
        const int64_t w[3] = {C, CK, CK};
        for (int k = 0; k < 3; k++)
            for (int64_t r = 0; r < n; r++)
                for (int64_t c = 0; c < w[k]; c++)
                    mt_tensor_f32(p[k])[r * w[k] + c] = val(k, (t0 + r) * w[k] + c);
    } else {
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < 3 * C; c++)
                mt_tensor_f32(p[0])[r * 3 * C + c] = val(0, (t0 + r) * 3 * C + c);
    }
    if (d) MT_CHECK_OK(mt_tensor_write(d, docs, 0, n));
    MT_CHECK_OK(mt_graph_forward(g));
    memcpy(out, mt_tensor_f32(o), (size_t)(n * C) * sizeof *out);
    mt_graph_free(g);
}

static void check_packed(bool gqa, int NH, int KV, int HS) {
    int32_t docs[T];
    int64_t t = 0;
    for (int j = 0; j < NDOC; j++)
        for (int i = 0; i < DOC_LEN[j]; i++) docs[t++] = j;
    const int64_t C = NH * HS;
    float packed[T * 64], apart[T * 64], plain[T * 64];
    MT_CHECK(C <= 64, "C=%lld", (long long)C);
    run(gqa, NH, KV, HS, 0, T, docs, packed);
    run(gqa, NH, KV, HS, 0, T, NULL, plain);
    int64_t t0 = 0;
    for (int j = 0; j < NDOC; j++) {
        run(gqa, NH, KV, HS, t0, DOC_LEN[j], NULL, apart + t0 * C);
        t0 += DOC_LEN[j];
    }
    double diff_plain = 0;
    for (int64_t i = 0; i < T * C; i++) {
        MT_CHECK(fabsf(packed[i] - apart[i]) <= 1e-5f * (1 + fabsf(apart[i])),
                 "%s NH=%d KV=%d: packed out[%lld] %g, the document alone %g",
                 gqa ? "gqa" : "packed qkv", NH, KV, (long long)i, packed[i], apart[i]);
        diff_plain += fabs((double)packed[i] - plain[i]);
    }
    /* the first document's rows see only it either way; later ones differ */
    MT_CHECK(diff_plain > 1e-3, "the document mask changed nothing (%g)", diff_plain);
}

MT_TEST(gqa_packed_documents_equal_each_document_apart) {
    check_packed(true, 4, 2, 4);   /* GQA */
    check_packed(true, 4, 1, 4);   /* MQA */
    check_packed(true, 2, 2, 8);   /* MHA */
}

MT_TEST(packed_qkv_documents_equal_each_document_apart) { check_packed(false, 2, 2, 8); }

MT_TEST(doc_ids_refuse_a_wrong_shape) {
    mt_graph *g = mt_graph_create();
    mt_tensor *q = mt_input(g, "q", MT_F32, 3, (int64_t[]){2, 4, 8});
    mt_tensor *d = mt_input(g, "docs", MT_I32, 2, (int64_t[]){2, 5});
    MT_CHECK(!mt_attention_gqa_docs(g, q, q, q, 2, 2, d), "docs (2,5) against T=4");
    MT_CHECK(strstr(mt_graph_errmsg(g), "docs"), "%s", mt_graph_errmsg(g));
    mt_graph_free(g);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
