/*
 * profile_impl.h — the profile layer: trace events, one device's timeline,
 * and the Chrome trace writer (internal).
 *
 * The layer sits below comm and knows nothing of devices' contexts or
 * collectives: comm keeps one mt_trace_list per device (compute regions from
 * mt_trace_begin/end, a span per collective) and, at the end of a launch,
 * hands the lists to mt__trace_write_json_to as tracks (src/comm/trace.c, which
 * also gathers the tracks of MPI ranks). The profiler grows here.
 */
#ifndef MT_PROFILE_IMPL_H
#define MT_PROFILE_IMPL_H

#include "meshtrain/base.h"
#include "meshtrain/files.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A trace event (Chrome trace "complete" event). Under MPI it travels as
 * int32 words through the transport (src/comm/trace.c), so it holds no
 * pointer. */
typedef enum {
    MT_TRACE_REGION = 0,   /* a compute region (mt_trace_begin/end) or a collective */
    MT_TRACE_OP,           /* one graph node: name is its op, out its output tensor */
    MT_TRACE_STEP,         /* a training step: name "step N" */
} mt_trace_kind;

typedef struct {
    double   t0, t1;       /* seconds since launch (with a trace run: since its first) */
    char     name[48];
    uint64_t bytes;        /* collectives: their size; ops: their memory traffic */
    double   flops;        /* ops: one run's, from the op table's cost */
    char     out[40];      /* ops: the output tensor's name (cut like name) */
    uint8_t  kind;         /* mt_trace_kind */
    char     phase;        /* ops: 'F', 'B' or 'W' */
    int16_t  layer;        /* ops: the node's block (mt_graph_set_block), -1 none */
    bool     is_comm;
    bool     is_async;     /* a collective in flight while the device went on
                              (started, completed later): may overlap anything */
    bool     is_p2p;       /* a send or receive: peer and tag below */
    int32_t  peer, tag;    /* the other device's id, the message's tag */
} mt_trace_event;

/* One device's events in the order they began. It grows by doubling (one
 * entry per region or collective, not per element); recording must not fail
 * the run, so when memory runs out the event is dropped. The events kept are
 * events[first .. n): dropping the oldest step moves `first` on, and the
 * dropped ones are moved out only once they are as many as those kept, so
 * that keeping the last K steps of a long run costs O(1) per event, not a
 * memmove of K steps per step. Indices (open, step, the spans' indices the
 * recorders hold) count from events[0]. */
typedef struct {
    mt_trace_event *events;   /* (cap); NULL: not recording */
    int             n, cap;
    int             first;    /* the first event kept (those before: dropped) */
    int             open;     /* index of a region begun and not ended, -1 none */
    int             step;     /* index of the step begun and not ended, -1 none */
    int             n_steps;  /* step events kept */
} mt_trace_list;

/* Starts recording into an empty list with room for `cap` events; false
 * when memory ran out (the list then records nothing). */
bool mt__trace_list_init(mt_trace_list *l, int cap);
void mt__trace_list_free(mt_trace_list *l);

/* A new event at the end of the list, zeroed; NULL when memory ran out. */
mt_trace_event *mt__trace_push(mt_trace_list *l);

/* Begins the compute region `name` (NULL: "region") at `now` (seconds since
 * launch); regions do not nest: an open one ends at `now`. A name longer than
 * an event holds is cut at a UTF-8 character boundary. */
void mt__trace_region_begin(mt_trace_list *l, double now, const char *name);
/* Ends the open region (if any) at `now`. */
void mt__trace_region_end(mt_trace_list *l, double now);

/* Copies name into dst[cap], cut at a UTF-8 character boundary. */
void mt__trace_copy_name(char *dst, size_t cap, const char *name);

/* Begins the span "step <step>" at `now` (an open one ends there). With
 * `keep` > 0, when the list already holds `keep` steps the oldest step's
 * events are dropped first (call it with no region or collective open: the
 * indices of the events after it may move). Amortised O(1). */
void mt__trace_step_begin(mt_trace_list *l, double now, int step, int keep);
/* Ends the open step span (if any) at `now`. */
void mt__trace_step_end(mt_trace_list *l, double now);

/* One device's events as the writer sees them. */
typedef struct {
    int                   device;
    const mt_trace_event *events;   /* (n) */
    int                   n;
    int                   open;     /* index of a region never ended, -1 none */
    double                t_end;    /* closes that region */
} mt_trace_track;

/* The writer's view of list l, device `device`'s: its kept events; an
 * open region ends at t_end. */
mt_trace_track mt__trace_list_track(const mt_trace_list *l, int device, double t_end);

/* Writes the tracks as one Chrome trace JSON to the stream f (the format
 * chrome://tracing and Perfetto open), one track per device, with the idle
 * time of every step (see trace.c), and model_flops > 0 (the model's FLOPs
 * per step, all devices) as a metadata event
 * {"name":"model","ph":"M",...,"args":{"flops_per_step":X}}, and the kernel
 * level the kernels ran at (mt_get_cpu_isa) beside the CPU's best as
 * {"name":"cpu_isa","ph":"M",...,"args":{"level":"avx2","best":"avx512"}}.
 * `name` names the file in messages (the target path, not a temporary
 * name). The stream is neither flushed nor closed: the caller owns it (an
 * output claim's temporary file, files.h). MT_EIO, naming `name`, when a
 * write to f failed (ferror); MT_ENOMEM. Time and memory are O(n log n)
 * and O(n) in the events. */
mt_status mt__trace_write_json_to(FILE *f, const char *name, const mt_trace_track *tracks,
                                  int n_tracks, double model_flops);

/* mt__trace_write_json_to into `path` through the output contract
 * (meshtrain/files.h): through `claim` (the caller's claim of path), or,
 * when claim is NULL, through a claim of its own. Fails as mt_output_claim
 * and mt_output_commit do, naming the path; the previous file is kept. */
mt_status mt__trace_write_json(mt_output *claim, const char *path, const mt_trace_track *tracks,
                               int n_tracks, double model_flops);

#endif /* MT_PROFILE_IMPL_H */
