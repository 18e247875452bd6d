/*
 * meshtrain/pipeline.h — pipeline schedules as data: generated, validated,
 * simulated, written as JSON (and read back) and drawn.
 *
 * A schedule says, for each of the p devices of the `pipe` axis, the ordered
 * list of ops it runs in one optimizer step of m microbatches. The model is
 * cut into K = p·v contiguous chunks of layers, numbered 0 .. K-1 in model
 * order (chunk 0 holds the embedding, chunk K-1 the head and the loss); each
 * device holds v of them. An op is
 *
 *   F   the forward of microbatch `mb` through chunk `chunk`;
 *   B   its input gradient (the graph's backward nodes tagged B);
 *   W   its weight gradient (the nodes tagged W);
 *   BW  B and W as one op, for the schedules that do not split them.
 *
 * Dependencies (what the validator checks and the simulator waits for):
 *
 *   F(j,k)       after F(j,k-1)                       (k > 0)
 *   B(j,k)       after F(j,k) and B(j,k+1)            (k = K-1: after F(j,K-1) only)
 *   W(j,k)       after B(j,k)
 *   BW(j,k)      as B(j,k)
 *
 * An edge between two chunks on different devices is a message: an
 * activation sent from chunk k-1's device to chunk k's, or a gradient from
 * chunk k+1's device to chunk k's. The executor learns everything it needs
 * from a schedule: for an op, its chunk's layers (the chunk's index among
 * the K groups), and its neighbours (mt_schedule_chunk_device of chunk-1 and
 * chunk+1).
 *
 * The kinds, with their unit-cost bubbles, are described in
 * docs/pipelines.md; the header says what each function does.
 *
 * Part of the public API; programs include <meshtrain.h>, which includes this.
 */
#ifndef MESHTRAIN_PIPELINE_H
#define MESHTRAIN_PIPELINE_H

#include "meshtrain/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================== */
/* Kinds and ops                                                             */
/* ======================================================================== */

/* The schedule kinds, numbered from 0 without gaps (MT_SCHEDULE_N_KINDS of
 * them). Chunks per device (v) and chunk placement:
 *
 *   GPIPE        v = 1   all forwards, then all whole backwards (BW) in
 *                        microbatch order
 *   1F1B         v = 1   stage i: p-1-i warm-up forwards, then one F and one
 *                        BW in turn, then the remaining BW
 *   INTERLEAVED  v >= 2  Megatron's interleaved 1F1B: device i holds chunks
 *                        i, i+p, i+2p, ...; needs m divisible by p
 *   ZB_H1        v = 1   1F1B's warm-up, B and W split, stage i defers its
 *                        W by i microbatches (the tail fills with W)
 *   ZB_H2        v = 1   stage i warms up with 2p-1-2i forwards and defers
 *                        its W by 2i microbatches; below m = 2p-1 it warms up
 *                        with min(2p-1-2i, m) (the schedule's note says so)
 *   ZB_V         v = 2   the V shape: device i holds chunks i and 2p-1-i;
 *                        ops placed by a greedy list scheduler at unit costs
 *   DUALPIPEV    v = 2   the V shape run in DualPipeV's eight steps (the
 *                        one-sided DualPipe of DeepSeek-V3); needs m >= 2p
 */
typedef enum {
    MT_SCHEDULE_GPIPE = 0,
    MT_SCHEDULE_1F1B = 1,
    MT_SCHEDULE_INTERLEAVED = 2,
    MT_SCHEDULE_ZB_H1 = 3,
    MT_SCHEDULE_ZB_H2 = 4,
    MT_SCHEDULE_ZB_V = 5,
    MT_SCHEDULE_DUALPIPEV = 6,
    MT_SCHEDULE_N_KINDS = 7
} mt_schedule_kind;

/* The name of a kind as `meshtrain schedule --kind` spells it ("gpipe",
 * "1f1b", "interleaved", "zb-h1", "zb-h2", "zb-v", "dualpipev"): a static
 * string. NULL for a value that is not a kind. Does not set a message. */
const char *mt_schedule_kind_name(mt_schedule_kind kind);

/* The kind named `name`. Fails with MT_EINVAL, listing the kinds, for an
 * unknown name. */
mt_status mt_schedule_kind_parse(const char *name, mt_schedule_kind *out);

typedef enum {
    MT_PIPE_F = 0,   /* forward */
    MT_PIPE_B = 1,   /* input gradient */
    MT_PIPE_W = 2,   /* weight gradient */
    MT_PIPE_BW = 3   /* B and W as one op */
} mt_pipe_op_type;

/* "F", "B", "W", "BW"; NULL for a value that is not an op type. */
const char *mt_pipe_op_name(mt_pipe_op_type type);

/* One op of a device's list. `chunk` is the GLOBAL chunk index, 0 .. p·v-1,
 * in model order (not the device's local chunk number). */
typedef struct {
    mt_pipe_op_type type;
    int mb;      /* microbatch, 0 .. m-1 */
    int chunk;   /* global chunk, 0 .. p·v-1 */
} mt_pipe_op;

/* ======================================================================== */
/* Schedules                                                                 */
/* ======================================================================== */

typedef struct mt_schedule mt_schedule;

/* Largest sizes a schedule may have (they bound memory, not meaning). */
#define MT_SCHEDULE_MAX_STAGES 1024
#define MT_SCHEDULE_MAX_CHUNKS 64           /* v, chunks per device */
#define MT_SCHEDULE_MAX_OPS    (1 << 24)    /* 3·p·m·v, all devices' ops together */

/* Builds the schedule of `kind` for p = `stages` devices, m = `microbatches`
 * and v = `chunks` chunks per device (0: the kind's own, 1 or 2). A pure
 * function of its arguments: the same call always gives the same lists.
 * The order of every kind here is fixed by (kind, p, m, v); op costs enter
 * the simulator, not the order (zb-v's greedy placement is done at unit
 * costs, the paper's T_F = T_B = T_W). *out is the caller's, freed with
 * mt_schedule_free.
 *
 * Fails with MT_EINVAL, naming the rule and the numbers, when m < p (every
 * kind), m is not a multiple of p (interleaved), m < 2p (dualpipev), v is
 * not the kind's (1 for gpipe, 1f1b, zb-h1, zb-h2; 2 for zb-v and
 * dualpipev; 2 or more for interleaved), or a size is out of range. Below
 * m = 2p-1, zb-h2 and zb-v build a shorter warm-up and say so in
 * mt_schedule_note. */
mt_status mt_schedule_make(mt_schedule_kind kind, int stages, int microbatches, int chunks,
                           mt_schedule **out);

/* An empty schedule (no ops yet) with the chunk placement of `kind` (the V
 * shape for zb-v and dualpipev, device i holding chunks i, i+p, ... for the
 * others), for hand-built or loaded lists: fill it with mt_schedule_set_ops,
 * then mt_schedule_validate. No rule on m is checked here. Fails with
 * MT_EINVAL for sizes out of range or a v the kind does not allow. */
mt_status mt_schedule_create(mt_schedule_kind kind, int stages, int microbatches, int chunks,
                             mt_schedule **out);

/* Replaces device `device`'s list with a copy of ops[0 .. n). Nothing is
 * checked but the device index and the total size (MT_EINVAL): a list that
 * breaks a rule is for mt_schedule_validate to report. */
mt_status mt_schedule_set_ops(mt_schedule *s, int device, const mt_pipe_op *ops, int n);

/* Frees a schedule; NULL is a no-op. */
void mt_schedule_free(mt_schedule *s);

/* The kind, p, m and v of a schedule. */
mt_schedule_kind mt_schedule_get_kind(const mt_schedule *s);
int mt_schedule_stages(const mt_schedule *s);
int mt_schedule_microbatches(const mt_schedule *s);
int mt_schedule_chunks(const mt_schedule *s);

/* The device that holds global chunk `chunk` (0 .. p·v-1), or -1 out of range. */
int mt_schedule_chunk_device(const mt_schedule *s, int chunk);

/* Device `device`'s list: its length, and the ops (valid until the list is
 * replaced or the schedule freed). 0 and NULL for a device out of range. */
int mt_schedule_n_ops(const mt_schedule *s, int device);
const mt_pipe_op *mt_schedule_ops(const mt_schedule *s, int device);

/* A human note about how the schedule departs from its kind's usual form
 * (a fallback below the microbatch count the kind wants), "" when none.
 * `meshtrain schedule` prints it. Valid as long as the schedule. */
const char *mt_schedule_note(const mt_schedule *s);

/* ======================================================================== */
/* Validation                                                                */
/* ======================================================================== */

/* Checks a schedule, made or hand-built, in this order, and fails with
 * MT_EINVAL at the first rule broken, naming the op as "device D op #I
 * (TYPE mb J chunk K)" (I counts from 0 in the device's list) and the rule:
 *
 *  1. every op names a type, a microbatch in [0, m) and a chunk in
 *     [0, p·v) that lives on the op's device;
 *  2. every (microbatch, chunk) has exactly one F and either one B and one
 *     W or one BW (a missing, duplicated or mixed op is named);
 *  3. a dependency between two ops of the same device runs in list order
 *     (a W after its B, a B after its F, and in the V shape chunk p's F
 *     after chunk p-1's on device p-1);
 *  4. no deadlock: each device runs its list in order, an op waiting until
 *     every op it depends on has run; sends never block (they are queued
 *     without bound) and a receive takes the message of its (type,
 *     microbatch, chunk), in whatever order they arrive. Every list must
 *     drain; if the lists stop with ops left, the order has a cycle and
 *     the message names the op at the head of each stuck device and what
 *     it waits for. Lists that drain here run without deadlock on any
 *     transport that queues sends and matches messages by that tag.
 *
 * On success, peak_activations (p entries; may be NULL) receives each
 * device's peak count of in-flight microbatch activations, in units of one
 * microbatch on one whole stage: an F adds 1/v, its B or BW takes it back
 * (so this is the simulator's count with w_memory 0). */
mt_status mt_schedule_validate(const mt_schedule *s, double *peak_activations);

/* ======================================================================== */
/* Simulation                                                                */
/* ======================================================================== */

/* The time of a forward, input gradient and weight gradient of one
 * microbatch on one WHOLE stage, and of one message between two devices.
 * An op on a chunk costs 1/v of its stage's; a BW costs (b + w)/v. */
typedef struct {
    double f, b, w, comm;
} mt_pipe_costs;

/* 1, 1, 1, 0: the costs the paper's formulas are written for. */
mt_pipe_costs mt_pipe_costs_default(void);

/* The check mt_schedule_simulate makes of its costs and w_memory, on its
 * own, so a caller can refuse them before any other work (before reading a
 * schedule file): MT_EINVAL, naming the values, for a cost that is not
 * finite, f or b not positive, w or comm negative, a cost above 1e12, or
 * w_memory outside [0, 1]. */
mt_status mt_pipe_costs_check(const mt_pipe_costs *costs, double w_memory);

/* What mt_schedule_simulate computes. Per-device arrays have `stages`
 * entries; start[d][i] and end[d][i] are the times of device d's op #i. */
typedef struct {
    int      stages;
    double   makespan;          /* the last op's end; every device starts at t = 0 */
    double   bubble_fraction;   /* mean over devices of (makespan - busy) / makespan */
    double   bubble_rate;       /* the paper's: (max span - max busy) / max span */
    double   bubble;            /* max span - max busy, in time units */
    double  *busy;              /* sum of the device's op costs */
    double  *span;              /* first op's start to last op's end */
    double  *peak_activations;  /* as in mt_schedule_validate, with w_memory */
    double **start, **end;
} mt_pipe_sim;

/* Runs a schedule on a model of the devices. Conventions (the paper's, so
 * results compare with it): every device starts at t = 0; an op starts when
 * its device has finished the op before it in its list and its inputs have
 * arrived: a producer on the same device delivers at its end, one on
 * another device at its end + costs->comm. costs NULL means
 * mt_pipe_costs_default().
 *
 * Activation memory counts in units of one microbatch's activations on one
 * whole stage: an F adds 1/v; a B releases its chunk's 1/v except
 * w_memory × 1/v, which stays until the W; a BW releases all of it.
 * peak_activations is each device's maximum over its list.
 *
 * bubble_rate is (max span - max busy) / max span, the paper's definition
 * (cost = the largest execution time of all stages, m(T_F+T_B+T_W) the
 * useful time of one): every device's busy time is the same when each holds
 * v chunks of equal cost, as here; a hand-edited schedule whose devices
 * differ counts the largest.
 *
 * Validates the schedule first and fails with the validator's message if it
 * breaks a rule; MT_EINVAL for negative or non-finite costs, f or b not
 * positive, a cost above 1e12 (they are relative times: larger ones could
 * overflow the sums), or w_memory outside [0, 1]. On success *out owns its arrays:
 * free them with mt_pipe_sim_free. */
mt_status mt_schedule_simulate(const mt_schedule *s, const mt_pipe_costs *costs,
                               double w_memory, mt_pipe_sim *out);

/* The same with each chunk's own costs: chunk_costs has p·v entries, entry
 * k the F, B and W of one microbatch on global chunk k (not divided by v)
 * and the message into it from another device. For a prediction from
 * measured costs, where chunks differ (the last holds the head and the
 * loss). The same errors, naming the chunk. */
mt_status mt_schedule_simulate_chunks(const mt_schedule *s, const mt_pipe_costs *chunk_costs,
                                      double w_memory, mt_pipe_sim *out);

/* mt_schedule_simulate_chunks on devices that time-share a host's cores
 * (more thread devices than cores). `replicas` copies of the schedule run
 * side by side (the devices of the mesh's other axes, each copy in the same
 * state at the same time); while `a` devices of one copy have an op under
 * way, each works at min(1, slots / (replicas x a)) of its speed, `slots`
 * being the devices the host runs at full speed at once (its cores over a
 * device's kernel threads): processor sharing, a device idle in the bubble
 * leaving its share of the cores to the others. Costs are at full speed; a
 * message's comm delays it and takes no core. busy[d] is the wall time of
 * device d's ops (each as long as the sharing made it). With slots >=
 * replicas x p it is mt_schedule_simulate_chunks. The same errors, and
 * MT_EINVAL for replicas < 1 or slots not finite and > 0. */
mt_status mt_schedule_simulate_shared(const mt_schedule *s, const mt_pipe_costs *chunk_costs,
                                      double w_memory, int replicas, double slots,
                                      mt_pipe_sim *out);

/* Frees the arrays of a simulation and zeroes it; safe on a zeroed one. */
void mt_pipe_sim_free(mt_pipe_sim *sim);

/* ======================================================================== */
/* JSON, text and pictures                                                   */
/* ======================================================================== */

/* Writes one JSON object and a newline to `out`, with these keys in this
 * order: "kind", "stages", "microbatches", "makespan", "busy" (per device),
 * "bubble_fraction", "span" (per device), "bubble_rate",
 * "peak_activations" (per device) and "ops": per device a list of
 * {"type":"F|B|W|BW","mb":j,"chunk":k,"start":t,"end":t}. `sim` is the
 * simulation of `s`. Fails with MT_EIO if the stream reports an error. */
mt_status mt_schedule_write_json(const mt_schedule *s, const mt_pipe_sim *sim, FILE *out);

/* Reads a schedule from text[0 .. len) in the format mt_schedule_write_json
 * writes, for instance one edited by hand. Only "kind", "stages",
 * "microbatches" and "ops" are read (kind must name one of the kinds: it
 * fixes the chunk placement; v is the number of chunks the ops use over p,
 * for interleaved); the statistics and each op's "start" and "end" are
 * skipped, so they may be stale or absent. Any other key, JSON that is
 * not well formed, or sizes a schedule cannot have (stages outside 1 ..
 * MT_SCHEDULE_MAX_STAGES, microbatches below 1, one list per stage missing,
 * more than MT_SCHEDULE_MAX_OPS ops) fail with MT_EFORMAT (the text is
 * wrong, not the caller) and a message that gives the byte offset, or the
 * device and op index. The result is not validated: call
 * mt_schedule_validate (whose MT_EINVAL, for a loaded schedule, is also the
 * file's fault). */
mt_status mt_schedule_read_json(const char *text, size_t len, mt_schedule **out);

/* Writes the simulated timeline as text, one row per device, time to the
 * right: each op is its label (type and microbatch: F3, B3, W3, BW3; lower
 * case for a device's second chunk when v = 2, a ".c" suffix with the local
 * chunk c when v > 2) padded to its length in columns, idle time is '.'.
 * The scale is chosen so the shortest op fits its label (at most 2000
 * columns in all; labels are cut beyond); times round to the nearest
 * column. A time ruler and a key follow. Fails with MT_EIO on a stream
 * error. */
mt_status mt_schedule_write_timeline(const mt_schedule *s, const mt_pipe_sim *sim, FILE *out);

/* Writes the simulated timeline as an SVG picture: one row per device,
 * time to the right, F, B, W and BW in four colours, a device's later
 * chunks in darker shades, each box labelled with its microbatch, idle time
 * left empty; the kind, p, m, v, bubble rate and makespan in the title, the
 * costs, bubble fraction and peak activations under it, a time axis and a
 * legend. Text is 12 px; the shortest op is 26 px wide (the picture is at
 * most 20000 px of time wide, and boxes too narrow lose their label). `costs` are the ones the
 * simulation used (NULL: the defaults), for the title. Fails with MT_EIO on
 * a stream error. */
mt_status mt_schedule_write_svg(const mt_schedule *s, const mt_pipe_sim *sim,
                                const mt_pipe_costs *costs, FILE *out);

#ifdef __cplusplus
}
#endif
#endif /* MESHTRAIN_PIPELINE_H */
