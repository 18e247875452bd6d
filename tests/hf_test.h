/*
 * hf_test.h — what the Hugging Face tests (test_hf.c, test_hf_gpt2.c)
 * share: a temporary directory made by the test (mkdtemp on hf_dir) and
 * removed at exit, paths in it, and a compiled graph's tokens and targets
 * filled at random (ids below V). Each test program includes it once.
 */
#ifndef MT_TEST_HF_TEST_H
#define MT_TEST_HF_TEST_H

#include "meshtrain.h"
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>

static char hf_dir[] = "/tmp/mt-test-hf-XXXXXX";

static void hf_cleanup(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", hf_dir);
    if (system(cmd) != 0) fprintf(stderr, "  could not remove %s\n", hf_dir);
}

/* Makes the directory (once a test case: each runs in its own child). */
static void hf_make_dir(void) {
    MT_CHECK(mkdtemp(hf_dir), "mkdtemp");
    atexit(hf_cleanup);
}

/* "DIR/sub/name", either part empty for none; two at a time stay valid. */
static const char *hf_at(const char *sub, const char *name) {
    static char buf[2][512];
    static int k;
    k ^= 1;
    snprintf(buf[k], sizeof buf[k], "%s%s%s%s%s", hf_dir, *sub ? "/" : "", sub, *name ? "/" : "",
             name);
    return buf[k];
}

/* g's "tokens" and "targets" (B·T each) at random below V, the same every run. */
static void hf_fill_tokens(mt_graph *g, int n, int V) {
    int32_t *tok = mt_tensor_i32(mt_graph_find(g, "tokens"));
    int32_t *tgt = mt_tensor_i32(mt_graph_find(g, "targets"));
    for (int i = 0; i < n; i++) {
        tok[i] = (int32_t)(mt_rng_uniform(4, 0, (uint64_t)i) * V) % V;
        tgt[i] = (int32_t)(mt_rng_uniform(4, 1, (uint64_t)i) * V) % V;
    }
}

#endif /* MT_TEST_HF_TEST_H */
