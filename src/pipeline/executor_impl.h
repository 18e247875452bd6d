/*
 * executor_impl.h — runs one device's list of a pipeline schedule for real:
 * the forward (F), input-gradient (B) and weight-gradient (W) passes of its
 * model chunks, microbatch by microbatch, with activations sent forward and
 * gradients backward to the devices holding the neighbouring chunks
 * (mt_send, buffered: a send never waits for its receiver; mt_recv, waiting
 * for what an op needs). Each chunk is one compiled graph whose slots
 * (mt_graph_set_slots) hold the microbatches in flight between their F and
 * their W. The trainer (src/train/pipe.c) builds the chunks and feeds the
 * data; this file knows nothing of models.
 */
#ifndef MT_PIPELINE_EXECUTOR_IMPL_H
#define MT_PIPELINE_EXECUTOR_IMPL_H

#include "meshtrain/graph.h"
#include "meshtrain/pipeline.h"

/* One model chunk held by this device. */
typedef struct {
    mt_graph  *g;          /* compiled; mt_graph_set_slots(g, n_slots) done by the executor */
    int        chunk;      /* global chunk index, 0 .. S-1 in model order */
    mt_tensor *in;         /* the chunk's input activation (chunk > 0), its gradient
                              computed by B; NULL on chunk 0 (fed from the data) */
    mt_tensor *out;        /* the chunk's output (chunk < S-1), its gradient the seed
                              the caller supplies; NULL on the last (its loss) */
    /* the executor's bookkeeping */
    int        n_slots;
    int       *slot_of;    /* (m): microbatch -> slot, -1 when none */
    int       *free_slot;  /* (n_slots): a stack of free slots */
    int        n_free;
    int        n_back;     /* W and BW ops run this step: one but the last leaves its
                              gradients' data-parallel reductions to a later backward
                              (mt_graph_set_reduce_later) */
} mt__pipe_chunk;

typedef struct {
    mt_ctx          *ctx;
    mt_axes          pipe;        /* the pipe axis: neighbours are ranks of its group */
    int              S;           /* chunks in all (devices × chunks per device) */
    int              m;           /* microbatches per step */
    const int       *device_of;   /* (S): the pipe rank holding chunk k */
    mt__pipe_chunk  *chunks;      /* this device's */
    int              n_chunks;
    /* Writes microbatch mb's data into c's graph (its current slot), called
     * before every chunk's F: the tokens on chunk 0, the targets on chunk
     * S-1 (one chunk may be both), side inputs (document ids) on any. */
    mt_status      (*feed)(void *arg, const mt__pipe_chunk *c, int mb);
    /* Reads what microbatch mb's forward left in c's graph (its current
     * slot: a mixture's router choices and losses), called after every
     * chunk's F, before its output is sent; NULL: nothing to read. */
    mt_status      (*after_f)(void *arg, const mt__pipe_chunk *c, int mb);
    void            *arg;
    /* measured by the last run, per op of the list (mt_time_now seconds):
     * when its work began, after the message it waited for had come, and
     * when it ended (its send included); tb, for a BW, when its B part
     * ended (the input gradient sent) and its W part began, for other ops
     * t1 */
    double          *t0, *t1, *tb;   /* (n_ops) */
} mt__pipe_exec;

/* The slots each of this device's chunks needs for its list `ops` (the
 * most microbatches between an F and their W at once), into
 * x->chunks[i].n_slots; then gives every chunk's graph that many slots and
 * the bookkeeping arrays (and the timings'). Call once, before the first
 * run. */
mt_status mt__pipe_setup(mt__pipe_exec *x, const mt_pipe_op *ops, int n_ops);
void      mt__pipe_free(mt__pipe_exec *x);

/* Runs the device's list `ops` once (one optimizer step's microbatches):
 * parameter gradients accumulate in the chunks' graphs; *loss gets the sum
 * of the last chunk's losses over the microbatches (0 on devices without
 * it). Every device of the pipe group runs its own list of the same
 * schedule. On failure the chunks' slots are reset for the next run. */
mt_status mt__pipe_run(mt__pipe_exec *x, const mt_pipe_op *ops, int n_ops, double *loss);

/* Forward only (an evaluation): microbatch j through this device's chunks
 * in model order, each on its slot 0 (x->chunks ascending by chunk);
 * *loss += the last chunk's loss. No backward may follow before the next
 * mt__pipe_run. */
mt_status mt__pipe_forward(mt__pipe_exec *x, int j, double *loss);

#endif /* MT_PIPELINE_EXECUTOR_IMPL_H */
