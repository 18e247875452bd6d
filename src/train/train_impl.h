/*
 * train_impl.h — the trainer's model table: everything the training loop
 * needs to know about a model, one entry per mt_model_kind (model_table.c),
 * so that trainer.c never asks which model it trains and adding a model is
 * one entry there (and its name in mt_model_kind).
 */
#ifndef MT_TRAIN_IMPL_H
#define MT_TRAIN_IMPL_H

#include "meshtrain/train.h"

/* Members marked "optional" may be NULL; the default is said with each. */
typedef struct {
    /* As `meshtrain train --model` spells it, and as messages name it. */
    const char *name;
    /* True: a microbatch is B sequences of T tokens and data positions,
     * throughput and the loss's normaliser count tokens (T must be positive).
     * False: a microbatch is B examples and T is not used. */
    bool        sequences;
    /* llm.c checkpoints can hold the model (llmc_in, llmc_out allowed). */
    bool        llmc;
    /* Names of the graph's two inputs that fill_batch writes. */
    const char *input, *target;
    /* A constant with the batch as its dim 0 (GPT: the position ids), split
     * over the data axes like the inputs. Optional: NULL, none. */
    const char *batch_const;

    /* Sets the model's own fields of the defaults (mt_train_defaults).
     * Optional: the model has no fields of its own. */
    void (*defaults)(mt_train_config *c);
    /* The model's checks of a configuration, after the general ones; fails
     * with MT_EINVAL naming the field. Optional: nothing more to check. */
    mt_status (*check)(const mt_train_config *c);
    /* Opens the training data into *ds and completes the configuration from
     * it and from llmc_in (GPT: V and Vp). On failure *ds may already be set;
     * the caller frees it. Optional: synthetic data, *ds stays NULL. */
    mt_status (*open)(mt_train_config *c, mt_dataset **ds);
    /* Writes the model's description into buf (n bytes). Checkpoints record
     * it and a resume compares it byte for byte: it must never change. */
    void (*describe)(const mt_train_config *c, char *buf, size_t n);
    /* Builds the model for one microbatch into g with the loss times
     * `scale`; returns the loss, or NULL with the graph's status set. */
    mt_tensor *(*build)(const mt_train_config *c, mt_graph *g, float scale);
    /* Fills the constants of the compiled graph (GPT: position ids).
     * Optional: the model has none. */
    mt_status (*fill_constants)(mt_graph *g);
    /* Writes the whole (global) microbatch of `split` (0 train, 1 validation)
     * at *pos into `in` and `target`, dense buffers of the shapes and dtypes
     * of the graph's two inputs for the global batch (B rows first), and
     * advances *pos past it (in tokens or examples, as `sequences` says).
     * `ds` is what open made (NULL without open). A pure function of
     * (configuration, split, *pos): resumes and every device of a mesh depend
     * on it. */
    void (*fill_batch)(const mt_train_config *c, const mt_dataset *ds, int split, int64_t *pos,
                       void *in, void *target);
    /* Model FLOPs of one optimizer step over `units` tokens or examples.
     * Optional: the compiled graph's forward and backward FLOPs per
     * microbatch times accum. */
    double (*step_flops)(const mt_train_config *c, int64_t units);
} mt__train_model;

/* The entry of `kind`, or NULL when the kind is not a model. */
const mt__train_model *mt__train_model_of(mt_model_kind kind);

/* The number of entries: kinds 0 .. count-1 are models. */
int mt__train_model_count(void);

#endif /* MT_TRAIN_IMPL_H */
