/*
 * executor.c — one device's list of a pipeline schedule, run for real (see
 * executor_impl.h).
 *
 * Per op, on chunk k of microbatch j:
 *   F   takes a free slot for j; fills its input: the data (chunk 0) or the
 *       activation chunk k-1 sent (mt_recv); runs the forward; sends its
 *       output to chunk k+1's device, or (last chunk) adds the loss.
 *   B   receives d out from chunk k+1 into the seed (last chunk: the loss's
 *       own seed); runs the input-gradient pass; sends d in to chunk k-1.
 *   W   runs the weight-gradient pass (gradients accumulate over the
 *       microbatches); frees the slot.
 *   BW  B then W, then d in sent (the schedules that do not split the
 *       backward: a whole backward, its gradient out at its end). A BW
 *       that is not its chunk's last backward of the step leaves the
 *       gradients' data-parallel all-reduces to a later one
 *       (mt_graph_set_reduce_later, DDP's no_sync): m microbatches cost
 *       one all-reduce a gradient. A split B and W (the zero-bubble kinds,
 *       DualPipeV's) do the same with their W passes: each but the
 *       chunk's last of the step adds its gradients locally, and the last
 *       reduces them (the flag is read when a W starts).
 * Messages are tagged by (kind, chunk, microbatch), so the order in which
 * a device receives them need not be the order they were sent in; a chunk
 * whose neighbour is on the same device (the V shape's turn) sends to
 * itself. Every dependency the schedule's validator checked is thus a
 * message or a slot: a wrong list deadlocks in mt_recv, which times out
 * naming the sender and the tag, rather than computing something else.
 *
 * The activations and their gradients are the chunks' graphs' backend's:
 * their buffers (graph/tensor_data.h) go to comm's sends and receives,
 * whose transports move the backend's memory; nothing here reads them.
 */
#include "graph/tensor_data.h"
#include "pipeline/executor_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { KIND_ACT = 0, KIND_GRAD = 1 };

/* The tag of the message of `kind` into chunk k (activations) or out of
 * chunk k+1 into chunk k (gradients) for microbatch j; unique per step
 * (checked by setup: 2·S·m tags, below MT_TAG_MAX, which the trainer's
 * tied-embedding exchange uses). An evaluation's microbatch j goes as
 * j mod m: messages of one tag arrive in the order sent. */
static int tag_of(const mt__pipe_exec *x, int kind, int k, int j) {
    return (kind * x->S + k) * x->m + j % x->m;
}

static mt__pipe_chunk *chunk_of(mt__pipe_exec *x, int k) {
    for (int i = 0; i < x->n_chunks; i++)
        if (x->chunks[i].chunk == k) return &x->chunks[i];
    return NULL;
}

static int64_t numel_of(mt_tensor *t) { return mt_tensor_numel(t); }

mt_status mt__pipe_setup(mt__pipe_exec *x, const mt_pipe_op *ops, int n_ops) {
    if (2 * (int64_t)x->S * x->m > MT_TAG_MAX)
        return mt_fail(MT_EINVAL, "a pipeline of %d chunks and %d microbatches needs %lld message "
                       "tags, more than the %d a transport guarantees; use fewer microbatches",
                       x->S, x->m, 2LL * x->S * x->m, MT_TAG_MAX);
    for (int i = 0; i < x->n_chunks; i++) {
        mt__pipe_chunk *c = &x->chunks[i];
        /* the most microbatches between their F and their W at once */
        int live = 0, peak = 0;
        for (int o = 0; o < n_ops; o++) {
            if (ops[o].chunk != c->chunk) continue;
            if (ops[o].type == MT_PIPE_F) live++;
            if (ops[o].type == MT_PIPE_W || ops[o].type == MT_PIPE_BW) live--;
            if (live > peak) peak = live;
        }
        if (peak < 1) peak = 1;
        c->n_slots = peak;
        c->slot_of = malloc((size_t)x->m * sizeof *c->slot_of);
        c->free_slot = malloc((size_t)peak * sizeof *c->free_slot);
        if (!c->slot_of || !c->free_slot)
            return mt_fail(MT_ENOMEM, "out of memory for the pipeline's slots");
        mt_status s = mt_graph_set_slots(c->g, peak);
        if (s != MT_OK) return s;
    }
    if (!(x->t0 = calloc(3 * (size_t)n_ops + 1, sizeof *x->t0)))
        return mt_fail(MT_ENOMEM, "out of memory for the pipeline's timings");
    x->t1 = x->t0 + n_ops;
    x->tb = x->t1 + n_ops;
    return MT_OK;
}

void mt__pipe_free(mt__pipe_exec *x) {
    free(x->t0);
    x->t0 = x->t1 = x->tb = NULL;
    for (int i = 0; x->chunks && i < x->n_chunks; i++) {
        free(x->chunks[i].slot_of);
        free(x->chunks[i].free_slot);
        x->chunks[i].slot_of = x->chunks[i].free_slot = NULL;
    }
}

static void reset_slots(mt__pipe_exec *x) {
    for (int i = 0; i < x->n_chunks; i++) {
        mt__pipe_chunk *c = &x->chunks[i];
        for (int j = 0; j < x->m; j++) c->slot_of[j] = -1;
        c->n_free = c->n_slots;
        c->n_back = 0;
        for (int k = 0; k < c->n_slots; k++) c->free_slot[k] = c->n_slots - 1 - k;
    }
}

/* Makes microbatch j's slot current in c's graph (taking one at its F). */
static mt_status use_slot(mt__pipe_chunk *c, int j, bool take, const mt_pipe_op *op) {
    if (take) {
        if (c->slot_of[j] >= 0 || c->n_free == 0)
            return mt_fail(MT_ESTATE, "pipeline op F of microbatch %d on chunk %d: %s", j,
                           c->chunk, c->slot_of[j] >= 0 ? "it already ran"
                                                        : "every slot holds a microbatch");
        c->slot_of[j] = c->free_slot[--c->n_free];
    } else if (c->slot_of[j] < 0) {
        return mt_fail(MT_ESTATE, "pipeline op %s of microbatch %d on chunk %d comes before its F",
                       mt_pipe_op_name(op->type), j, c->chunk);
    }
    return mt_graph_use_slot(c->g, c->slot_of[j]);
}

static mt_status run_f(mt__pipe_exec *x, mt__pipe_chunk *c, int j, double *loss, double *t0) {
    mt_status s;
    /* every chunk: the first takes the tokens, the last the targets, and
     * any the batch's side inputs (the document ids) */
    if ((s = x->feed(x->arg, c, j)) != MT_OK) return s;
    if (c->chunk > 0 &&
        (s = mt_recv(x->ctx, x->pipe, mt__tensor_buffer(c->in), (size_t)numel_of(c->in), MT_F32,
                     x->device_of[c->chunk - 1], tag_of(x, KIND_ACT, c->chunk, j))) != MT_OK)
        return s;
    *t0 = mt_time_now();
    if ((s = mt_graph_forward(c->g)) != MT_OK) return s;
    if (x->after_f && (s = x->after_f(x->arg, c, j)) != MT_OK) return s;
    if (c->chunk == x->S - 1) {
        *loss += mt_graph_loss(c->g);
        return MT_OK;
    }
    return mt_send(x->ctx, x->pipe, mt__tensor_buffer(c->out), (size_t)numel_of(c->out), MT_F32,
                   x->device_of[c->chunk + 1], tag_of(x, KIND_ACT, c->chunk + 1, j));
}

/* The input-gradient pass of microbatch j: receives d out, runs B. */
static mt_status run_b(mt__pipe_exec *x, mt__pipe_chunk *c, int j, double *t0) {
    mt_status s;
    if (c->chunk < x->S - 1 &&
        (s = mt_recv(x->ctx, x->pipe, mt__tensor_buffer(mt_tensor_grad(c->out)),
                     (size_t)numel_of(c->out), MT_F32, x->device_of[c->chunk + 1],
                     tag_of(x, KIND_GRAD, c->chunk, j))) != MT_OK)
        return s;
    *t0 = mt_time_now();
    return mt_graph_backward_b(c->g);
}

/* Sends d in of microbatch j to the chunk before (none before chunk 0). */
static mt_status send_grad(mt__pipe_exec *x, mt__pipe_chunk *c, int j) {
    if (c->chunk == 0) return MT_OK;
    return mt_send(x->ctx, x->pipe, mt__tensor_buffer(mt_tensor_grad(c->in)),
                   (size_t)numel_of(c->in), MT_F32, x->device_of[c->chunk - 1],
                   tag_of(x, KIND_GRAD, c->chunk - 1, j));
}

static mt_status run_w(mt__pipe_chunk *c, int j) {
    mt_status s = mt_graph_backward_w(c->g);
    if (s != MT_OK) return s;
    c->free_slot[c->n_free++] = c->slot_of[j];
    c->slot_of[j] = -1;
    return MT_OK;
}

/* Runs one op; *t0 gets when its work began (after its message came), *tb
 * (a BW's) when its B part ended. A BW is one op, as the simulator and the
 * paper count a whole backward: its input gradient leaves at its end, after
 * its W (sending it after the B part would make it a ZB-H1 in all but
 * name, and the measured bubbles would not be the kinds'). */
static mt_status run_op(mt__pipe_exec *x, const mt_pipe_op *op, double *loss, double *t0,
                        double *tb) {
    mt__pipe_chunk *c = chunk_of(x, op->chunk);
    if (!c || op->mb < 0 || op->mb >= x->m)
        return mt_fail(MT_EINVAL, "pipeline op %s of microbatch %d on chunk %d: %s",
                       mt_pipe_op_name(op->type), op->mb, op->chunk,
                       c ? "no such microbatch" : "this device holds no such chunk");
    mt_status s = use_slot(c, op->mb, op->type == MT_PIPE_F, op);
    if (s != MT_OK) return s;
    char label[24];
    snprintf(label, sizeof label, "mb %d chunk %d", op->mb, op->chunk);
    mt_graph_set_trace_label(c->g, label);
    *t0 = mt_time_now();
    switch (op->type) {
    case MT_PIPE_F: return run_f(x, c, op->mb, loss, t0);
    case MT_PIPE_B:
        s = run_b(x, c, op->mb, t0);
        return s == MT_OK ? send_grad(x, c, op->mb) : s;
    case MT_PIPE_W:
        /* the chunk's last W reduces what the W passes before it held */
        s = mt_graph_set_reduce_later(c->g, ++c->n_back < x->m);
        return s == MT_OK ? run_w(c, op->mb) : s;
    case MT_PIPE_BW:
        /* the chunk's last backward reduces what the BWs before it held */
        s = mt_graph_set_reduce_later(c->g, ++c->n_back < x->m);
        if (s == MT_OK) s = run_b(x, c, op->mb, t0);
        *tb = mt_time_now();
        if (s == MT_OK) s = run_w(c, op->mb);
        return s == MT_OK ? send_grad(x, c, op->mb) : s;
    }
    return mt_fail(MT_EINVAL, "pipeline op of unknown type %d", (int)op->type);
}

mt_status mt__pipe_forward(mt__pipe_exec *x, int j, double *loss) {
    /* chunks ascend in model order on every device: a chunk's input comes
     * from a chunk another device ran before, or this one just did */
    for (int i = 0; i < x->n_chunks; i++) {
        mt__pipe_chunk *c = &x->chunks[i];
        double t0;
        mt_status s = mt_graph_use_slot(c->g, 0);
        if (s == MT_OK) s = run_f(x, c, j, loss, &t0);
        if (s != MT_OK)
            return mt_fail_wrap(s, "pipeline forward of microbatch %d, chunk %d", j, c->chunk);
    }
    return MT_OK;
}

mt_status mt__pipe_run(mt__pipe_exec *x, const mt_pipe_op *ops, int n_ops, double *loss) {
    *loss = 0;
    reset_slots(x);
    for (int o = 0; o < n_ops; o++) {
        mt_status s = run_op(x, &ops[o], loss, &x->t0[o], &x->tb[o]);
        x->t1[o] = mt_time_now();
        if (ops[o].type != MT_PIPE_BW) x->tb[o] = x->t1[o];
        if (s != MT_OK)
            return mt_fail_wrap(s, "pipeline op %d of %d (%s of microbatch %d, chunk %d)", o + 1,
                                n_ops, mt_pipe_op_name(ops[o].type), ops[o].mb,
                                ops[o].chunk);
    }
    for (int i = 0; i < x->n_chunks; i++)
        if (x->chunks[i].n_free != x->chunks[i].n_slots)
            return mt_fail(MT_ESTATE, "pipeline chunk %d ends the step with a microbatch whose "
                           "W never ran; the schedule is missing it", x->chunks[i].chunk);
    return MT_OK;
}
