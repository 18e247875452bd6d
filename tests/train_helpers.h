/*
 * train_helpers.h — what the trainer-level tests share (test_strategies.c,
 * test_strategies_ckpt.c): the configurations they train, a small text
 * corpus, and device 0's parameters compared block by block with one
 * device's; and the launch options of the shard_map-level tests
 * (test_collgraph.c, test_collmatmul.c, test_vma.c).
 */
#ifndef MT_TEST_TRAIN_HELPERS_H
#define MT_TEST_TRAIN_HELPERS_H

#include "meshtrain.h"

#define MT_TEST_MAX_PARAMS 64

/* Device 0's parameters after a run: blocks on a mesh that splits them. */
typedef struct {
    float  *params;                     /* concatenated */
    int64_t n;
    int     n_tensors;
    int64_t shape[MT_TEST_MAX_PARAMS][MT_MAX_DIMS];   /* unused dims 1 */
} mt_test_params;

/* 10 steps of AdamW (lr 3e-3, warmup 2, clipping at 1), B=8, seed 7, 1 thread;
 * the GPT's settings mt_test_gpt() (model_config points at a constant),
 * the others' their defaults. */
mt_train_config mt_test_config(mt_model_kind model, const char *text_path);
/* The tests' GPT: L=2 C=64 NH=4 maxT=16, V and Vp from the data. */
mt_gpt_config   mt_test_gpt(void);
/* Points c's model settings at *mc, the model's own struct, which the
 * caller keeps alive while c is used (the trainer copies it at create). */
#define MT_TEST_MODEL_CONFIG(c, mc) \
    ((c)->model_config = (mc), (c)->model_config_size = sizeof *(mc))
/* c's GPT settings (c->model == MT_MODEL_GPT): its model_config, or the
 * defaults where it is NULL. */
mt_gpt_config   mt_test_gpt_of(const mt_train_config *c);
/* Writes a small text corpus to a new file made from `path_template`
 * ("/tmp/...XXXXXX", changed in place), for the GPT. */
void            mt_test_write_text(char *path_template);
/* The most steps mt_test_steps runs. */
#define MT_TEST_MAX_STEPS 10

/* Each step's loss and global gradient norm. */
typedef struct {
    float loss[MT_TEST_MAX_STEPS], norm[MT_TEST_MAX_STEPS];
} mt_test_curve;

/* Runs `steps` (1 to MT_TEST_MAX_STEPS) steps of tr, failing the test on an
 * error; the curve of them. */
mt_test_curve   mt_test_steps(mt_trainer *tr, int steps);
/* Copies device 0's parameters out of a trainer (free with free(p->params)). */
mt_test_params  mt_test_params_of(mt_trainer *tr);
/* The worst difference of got's blocks (device 0 holds block (0,..,0): its
 * coordinates are all 0) from one's whole tensors, relative above 1 and
 * absolute below; counts into *n_split the parameters got holds split. */
double          mt_test_params_diff(const mt_test_params *got, const mt_test_params *one,
                                    int *n_split);

/* Launch options for `devices` threads on `mesh`: a 30 s collective
 * timeout, one kernel thread a device. */
mt_launch_opts  mt_test_launch_opts(const char *mesh, int devices);

#endif /* MT_TEST_TRAIN_HELPERS_H */
