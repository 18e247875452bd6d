/*
 * pipe_data.h — a pipeline's data on one device (pipe_data.c): the step's
 * global microbatches, made whole on every device of the pipe (their
 * making is a pure function of the data position, and every device moves
 * the position on), and each stage's share of one written into its inputs.
 */
#ifndef MT_TRAIN_PIPE_DATA_H
#define MT_TRAIN_PIPE_DATA_H

#include "train/train_impl.h"

/* What an input of a stage holds. */
typedef enum { MT__PIPE_TOKENS, MT__PIPE_TARGETS, MT__PIPE_DOCS } mt__pipe_input;

typedef struct {
    int      m;            /* microbatches a step */
    int64_t  B, T;         /* the global microbatch's rows and tokens a row */
    size_t   mb;           /* bytes of one global microbatch of each kind: B·T 4-byte elements */
    void    *in, *target;  /* (m, B, T) int32 tokens and targets */
    int32_t *docs;         /* (m, B, T) with doc_mask: the tokens' document ids; else NULL */
    void    *scratch;      /* (B, T) 4-byte elements: a device's share before it is written */
} mt__pipe_data;

/* Buffers for tr's step of c->accum microbatches (the documents' with
 * doc_mask). MT_ENOMEM naming them. */
mt_status mt__pipe_data_init(mt__pipe_data *pd, const mt_trainer *tr);
void      mt__pipe_data_free(mt__pipe_data *pd);

/* Fills microbatches 0 .. n-1 of `split` from *pos (advanced) with whole
 * global microbatches, and with doc_mask their document ids (from whole
 * rows: a document's start may lie in another device's share). */
mt_status mt__pipe_data_fill(mt__pipe_data *pd, const mt_trainer *tr, int split, int64_t *pos,
                             int n);

/* Writes this device's share of microbatch mb's `what` into the stage's
 * input t (NULL: nothing): its block of rows over the batch axes and, when
 * t's sequence dim is split over devices (context), its head-tail share of
 * each row (mt__train_seq_split), as devices.c cuts the inputs off a
 * pipeline. Off a mesh (ctx NULL) the whole microbatch. */
mt_status mt__pipe_data_feed(mt__pipe_data *pd, mt_ctx *ctx, int mb, mt__pipe_input what,
                             mt_tensor *t);

#endif /* MT_TRAIN_PIPE_DATA_H */
