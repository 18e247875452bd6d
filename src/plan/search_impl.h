/*
 * plan/search_impl.h — what the search's files share (layouts.c, the
 * enumeration; evaluate.c, one layout's memory and step time from cached
 * programs; search.c, the request, the ranking and the families).
 */
#ifndef MT_PLAN_SEARCH_IMPL_H
#define MT_PLAN_SEARCH_IMPL_H

#include "plan/plan_impl.h"
#include "plan/memory.h"
#include "meshtrain/pipeline.h"

#include <stddef.h>
#include <stdint.h>

/* The widest tensor axis searched: Megatron's and the book's 8 to 16 ways,
 * with room for a model whose F carries more. */
#define MT__PLAN_MAX_TENSOR 64

/* The most model chunks a device of a pipeline holds: the trainer's
 * (train_impl.h's MT_PIPE_MAX_CHUNKS, --chunks 1..8). */
#define MT__PLAN_MAX_CHUNKS 8

#include "plan/step.h"

/* Entries of mt__plan_search.time_memo. */
#define MT__PLAN_TIME_MEMO 1024

/* What a chunk's program depends on. Not the schedule: it orders and
 * places the chunks, and every schedule runs the same program for a chunk
 * of as many blocks in the same role, whatever the chunks a device (the
 * cache builds the first, a middle and the last chunk of a pipeline under
 * interleaved at v = 2, whatever the v asked: cache.c).
 * Not the request's rules either: they are one for every key of a search
 * (the cache lives for one mt_plan_search), and the rules a chunk is built
 * with are theirs less the axes of size 1 in (d, f, t, p) (cache.c's
 * layout_rules). */
typedef struct {
    int d, f, t, p, v;          /* mesh and chunks a device */
    int c, cpa;                 /* the context axis (0 or 1: none) and its lowering (MT_CP_*) */
    int e;                      /* the expert axis (0: none) */
    int zero, remat, sp, cm;
    int blocks, batch;          /* per chunk; sequences a replica */
    int chunk;                  /* global chunk index */
} mt__plan_prog_key;

/* One cached program: the chunk of a layout's program as one device of its
 * stage runs it, at key.blocks blocks and key.batch sequences a replica. */
typedef struct {
    mt__plan_prog_key   key;
    mt_status           status;  /* the build's (a refusal is a property of the layout) */
    char                why[256];
    mt__plan_program    prog;
    bool                borrowed;  /* prog.nodes are another entry's (cache.c's shared
                                      programs), freed with it */
    unsigned long long  used;      /* a shared program's last use (mt__plan_search.clock) */
    bool                prog_ok;   /* prog built (its timing may yet have failed: a mesh
                                      the hardware cannot lay out, cost_map.c), or passed
                                      the trainer's checks and left unbuilt (unbuilt) */
    bool                unbuilt;   /* on a mesh the hardware cannot lay out: refused by
                                      the timing's first step, so not built (cache.c's
                                      build); prog empty, never shared */
    /* packed (cache_pack.c; prog.nodes NULL until unpacked): the distinct
       nodes, and the run order as indexes into them */
    mt__plan_node      *packed_nodes;   /* (n_packed) */
    uint32_t           *packed_order;   /* (prog.n_nodes); NULL: not packed */
    double             *packed_live;    /* (prog.n_nodes) each node's live_bytes, kept apart so
                                           that alike nodes pack once */
    int                 n_packed;
    mt__plan_comm_keys  keys;    /* its collectives, as ct indexes them */
    mt__plan_chunk_time ct;      /* its seconds on the request's hardware (step.h) */
} mt__plan_cached;

/* A program's time at a layout's batch, taken from its builds at two
 * others (evaluate.c's time_at_batch), remembered: the layouts of one
 * option set that differ in schedule or chunks a device ask it again. */
typedef struct {
    const void          *c0, *c1;   /* the two builds (mt__plan_cached); NULL: empty */
    int                  batch;
    mt__plan_comm_keys   keys;      /* t's collectives */
    mt__plan_chunk_time  t;
} mt__plan_time_memo;

/* The in-flight microbatches and the stage of each global chunk of a
 * pipeline under one schedule (pipeline_slots.c), remembered: every mesh
 * and option set of p stages asks the same. */
typedef struct {
    int   kind, p, m, v;              /* p 0: empty */
    char *why;                        /* the schedule's refusal; NULL if made */
    int  *ints;                       /* (3·p·v): the slots, the device (stage) and the
                                         in flight at the device's peak of each chunk (the
                                         search's layers weigh the chunks) */
} mt__plan_slots_memo;
/* The most entries of mt__plan_search.slots_memo before it is emptied (a
 * search asks a few thousand: schedules x microbatch counts x chunks x
 * pipe depths). */
#define MT__PLAN_SLOTS_MEMO 16384

/* The stage that holds global chunk `chunk` of a pipeline of p stages and v
 * chunks a device, as the trainer places it (p 0: an empty entry). */
typedef struct {
    int p, v, chunk, stage;
} mt__plan_stage_memo;

typedef struct {
    const mt_plan_request *req;
    int        chips;
    long long  sequences;             /* per step: batch_tokens / seq */
    int        seq, layers, heads, kv_heads, channels;
    int        head_dim;              /* HS: q heads·HS wide, k and v kv_heads·HS */
    int        ffn;                   /* MLP width F */
    bool       gated;                 /* a gated MLP (SwiGLU) */
    mt_model_shape moe;               /* the model's shape, read for its moe_* fields (a
                                         mixture of experts; moe_experts 0: dense) */
    double     params;                /* N, the whole model's */
    double     flops_per_token;       /* 6N + 6·L·H·Q·T (causal) */
    int        mesh_axes[6];          /* req->mesh's data, fsdp, tensor, pipe, context,
                                         expert (1: absent) */
    /* the programs built, by key (evaluate.c) */
    mt__plan_cached **cache;          /* (n_cache) in build order */
    size_t     n_cache, cap_cache;
    size_t    *slots;                 /* (n_slots) open addressing: index + 1 into cache, 0
                                         empty; n_slots a power of two, >= 2 n_cache */
    size_t     n_slots;
    int        n_built;               /* programs built (a key dropped and built again counts
                                         twice: mt__plan_cache_trim) */
    mt__plan_stage_memo stage_memo[256];   /* direct-mapped (cache.c's build) */
    mt__plan_slots_memo *slots_memo;  /* (n_slots_memo) open addressing by (kind, p, m, v);
                                         n_slots_memo a power of two, >= 2 used */
    size_t     n_slots_memo, used_slots_memo;
    mt__plan_time_memo *time_memo;    /* (MT__PLAN_TIME_MEMO) direct-mapped, by the builds'
                                         addresses: emptied whenever entries are freed */
    size_t     n_pinned;              /* cache[0 .. n_pinned) outlive mt__plan_cache_trim */
    size_t     cache_bytes;           /* what cache[n_pinned ..] holds, entries and nodes
                                         (the packed ones' apart) */
    size_t     packed_bytes;          /* what the packed entries hold (cache_pack.c) */
    unsigned long long clock;         /* uses of shared programs so far */
    /* the results kept */
    mt_plan_report *rep;
    int        cap_best, cap_infeasible;
    bool       last_feasible;         /* the layout just evaluated fits */
    bool       own_builds;            /* every layout's own programs built, none refused for
                                         memory from the proxy's (tests: evaluate.c) */
    long long  n_proxy_refused;       /* layouts refused from the proxies' programs, for
                                         memory or a mesh the system cannot lay out */
    double     prune_above;           /* > 0: a pipeline layout whose step's lower bound
                                         (mt__plan_step_lower) passes this many seconds is
                                         counted as fitting without its schedule simulated
                                         (search.c sets it to the slowest step the layout
                                         would have to beat to be printed); 0: none */
    bool       last_pruned;           /* the layout just evaluated fits and was pruned so:
                                         its result holds no step */
    long long  n_pruned;              /* layouts pruned so (search.c) */
    /* the search's threads (search_workers.c) */
    struct mt__plan_shared *shared;   /* what they share: the classes claimed, the steps to
                                         beat; NULL outside mt_plan_search */
    int        n_workers;             /* how many (the cache budgets are split over them) */
    int        worker;                /* this one's index among them */
    int        n_classes;             /* the classes of layouts met so far (mt__plan_claim) */
    long long  next_seq;              /* the next layout's mt_plan_result.seq */
} mt__plan_search;

/* Whether this thread searches the next class of layouts: every layout of
 * one tensor x pipe mesh pair on one context axis and chip count
 * (layouts.c), met in one order by every thread of the search; the first
 * to meet it claims it, and the others pass it by. Their programs' keys
 * hold t and the chips over t x p, so two classes share no program (but
 * by class 4 of cache.c's sharing, rarely). Sets s->next_seq to the class's
 * first layout's. True outside mt_plan_search (no threads). */
bool mt__plan_claim(mt__plan_search *s);

/* Whether any layout of the search fits so far: every thread's, once all
 * have come to this point of the enumeration (a barrier: every thread
 * asks at the same points, or has left). */
bool mt__plan_any_feasible(mt__plan_search *s);

/* The relative margin by which a step's lower bound must pass prune_above:
 * the bound adds the simulator's seconds in another order (a few ulps). */
#define MT__PLAN_PRUNE_SLACK 1e-9


/* The first DeepSpeed release whose ZeRO-3 gathers into one flat buffer
 * (_all_gather_base, PR #1188, commit c0eeb69): 0.5.5, as
 * mt_plan_request.deepspeed_release counts it. */
#define MT__PLAN_DS_FLAT_RELEASE 505

/* What a memory convention says of the step's time, besides its bytes: the
 * one place the step model reads a convention (cache.c, evaluate.c). */
typedef struct {
    double act_bytes;        /* an activation element's bytes in the traffic: 2 under the
                                16-bit systems' (mixed16, megatron, deepspeed, torchtitan:
                                mt__plan_program_traffic16), else meshtrain's 4 (the book
                                counts only memory its way) */
    int    grad_width;       /* a gradient reduction's bytes an element under the 16-bit
                                ones: 4 where the framework reduces fp32 gradients
                                (Megatron-LM's main grads, torchtitan's reduce_dtype), 2 */
    bool   unfused_attention;   /* attention's (T, T) tensors as Megatron-LM's unfused path
                                   moves them (megatron) */
    bool   reduce_after;     /* gradient reductions after the last backward, exposed
                                (megatron: MT__PLAN_REDUCE_AFTER) */
    bool   recompute_comm;   /* full recomputation re-runs the block's tensor- and
                                sequence-parallel collectives (megatron, deepspeed,
                                torchtitan: mt__plan_program_recompute_comm) */
    bool   ds_fetches;       /* ZeRO-3's gathers where DeepSpeed's hooks fetch
                                (deepspeed: mt__plan_program_ds_fetches) */
    bool   list_collectives;   /* ZeRO-3's collectives one a parameter, synchronous,
                                  list-form (deepspeed before 0.5.5:
                                  mt__plan_program_list_collectives) */
    mt__plan_pad pad;        /* parameters the storage axes do not divide, split as the
                                framework pads them (deepspeed: flat partitions,
                                torchtitan: FSDP2's rows; mt__plan_program_pad_unsplit),
                                as memory.c counts them */
} mt__plan_step_conv;

static inline mt__plan_step_conv mt__plan_step_conv_of(const mt_plan_request *r) {
    const mt_plan_memory m = r->memory;
    const bool megatron = m == MT_PLAN_MEMORY_MEGATRON;
    const bool bits16 = m == MT_PLAN_MEMORY_MIXED16 || megatron ||
                        m == MT_PLAN_MEMORY_DEEPSPEED || m == MT_PLAN_MEMORY_TORCHTITAN;
    return (mt__plan_step_conv){
        .act_bytes = bits16 ? 2.0 : 4.0,
        .grad_width = megatron || m == MT_PLAN_MEMORY_TORCHTITAN ? 4 : 2,
        .unfused_attention = megatron,
        .reduce_after = megatron,
        .recompute_comm = megatron || m == MT_PLAN_MEMORY_DEEPSPEED ||
                          m == MT_PLAN_MEMORY_TORCHTITAN,
        .ds_fetches = m == MT_PLAN_MEMORY_DEEPSPEED,
        .list_collectives = m == MT_PLAN_MEMORY_DEEPSPEED && r->deepspeed_release > 0 &&
                            r->deepspeed_release < MT__PLAN_DS_FLAT_RELEASE,
        .pad = m == MT_PLAN_MEMORY_DEEPSPEED    ? MT__PLAN_PAD_FLAT
               : m == MT_PLAN_MEMORY_TORCHTITAN ? MT__PLAN_PAD_ROWS
                                                : MT__PLAN_PAD_NONE};
}

static inline double mt__plan_act_bytes(const mt_plan_request *r) {
    return mt__plan_step_conv_of(r).act_bytes;
}

/* "pipe=2,data=2,fsdp=256,context=4,tensor=8" of a layout, outermost first ("data=1" on one
 * chip). */
void mt__plan_mesh_text(const mt_plan_layout *l, char *buf, size_t cap);

/* The blocks of global chunk c when L blocks are cut into S chunks as the
 * trainer cuts them (pipe.c): the first L mod S one block more
 * (layout_text.c). */
int mt__plan_chunk_blocks(int L, int S, int c);

/* The slots (microbatches between F and W at once) pipeline layout l's
 * executor gives each of its p·v global chunks, into slots[]; the
 * microbatches of each in flight at its device's peak (the search's layers
 * weighing the chunks), into peak[]; the device (stage) that holds each,
 * into dev[]; the schedule's refusal into why (cap bytes; "" when it runs).
 * Remembered by (schedule, p, m, v) in s (pipeline_slots.c). Fails only
 * for MT_ENOMEM. */
mt_status mt__plan_pipeline_slots(mt__plan_search *s, const mt_plan_layout *l, int v, int *slots,
                                  int *peak, int *dev, char *why, size_t cap);
/* Frees what mt__plan_pipeline_slots remembered in s (pipeline_slots.c). */
void mt__plan_pipeline_slots_free(mt__plan_search *s);
/* Chunks a device holds under schedule `kind` by default (2 for zb-v,
 * dualpipev and interleaved; else 1). */
int  mt__plan_schedule_chunks(int kind);
/* v of layout l: its chunks (the kind's own when 0), 1 without a pipe axis. */
int  mt__plan_layout_chunks(const mt_plan_layout *l);
/* Whether schedule `kind` runs v chunks a device as the trainer does
 * (interleaved 2 to MT__PLAN_MAX_CHUNKS, zb-v and dualpipev 2, the others 1). */
bool mt__plan_kind_runs_chunks(int kind, int v);
/* "pipe=2,data=2 zero=0 remat=none sp cm 1f1b v=1 mb=4" (after the mesh
 * " cp=ring" with a context axis): layout l on the mesh text `mesh`, into
 * buf (cap bytes). */
void mt__plan_layout_text(const mt_plan_layout *l, const char *mesh, char *buf, size_t cap);
/* Why l cannot divide the model or the batch ("" if it can). */
void mt__plan_divides(const mt__plan_search *s, const mt_plan_layout *l, char *why, size_t cap);
/* fn on every layout the request leaves open; the first failure it returns. */
mt_status mt__plan_each_layout(mt__plan_search *s,
                               mt_status (*fn)(mt__plan_search *, const mt_plan_layout *));

/* The points a value is interpolated from (evaluate.c): a replica's
 * sequences n itself up to 4, else 2 and 4 (past one sequence the arena
 * grows with the batch to the byte; at one it packs differently); a chunk's
 * blocks n itself up to 8, else 4 and 8: the planned arena's offsets pack
 * each block's activations a little differently (per block +-15% on a
 * 128-wide llama, +-2% on llama3-8b), so the slope is taken over 4 blocks. */
static inline void mt__plan_batch_points(int n, int *lo, int *hi) {
    *lo = n <= 4 ? n : 2;
    *hi = n <= 4 ? n : 4;
}

static inline void mt__plan_block_points(int n, int *lo, int *hi) {
    *lo = n <= 8 ? n : 4;
    *hi = n <= 8 ? n : 8;
}

/* The devices that split layout l's batch, data x fsdp x expert (the
 * expert axis folded over the batch as over data: presets.c's
 * batch=data+fsdp+expert), and the devices l lays out. */
static inline int mt__plan_layout_replicas(const mt_plan_layout *l) {
    return l->data * l->fsdp * (l->expert > 1 ? l->expert : 1);
}

static inline int mt__plan_layout_devices(const mt_plan_layout *l) {
    return mt__plan_layout_replicas(l) * l->tensor * l->pipe * (l->context > 1 ? l->context : 1);
}

/* The mixture-of-experts blocks among a model's first n (s->moe's rule,
 * mt_model_shape). */
static inline int mt__plan_moe_blocks(const mt__plan_search *s, int n) {
    const mt_model_shape *m = &s->moe;
    if (m->moe_experts < 1 || n <= m->moe_first_dense) return 0;
    const int every = m->moe_every > 0 ? m->moe_every : 1;
    return (n - m->moe_first_dense + every - 1) / every;
}

/* Whether a count of n blocks taken on the line through the programs of
 * k0 and k1 blocks (k0 < k1; or k0 = k1 = n) counts n's MoE blocks right:
 * the MoE blocks grow along the line (a dense model's always do). Where
 * not (--moe-first-dense past k0, --moe-every not dividing k1 - k0 and
 * n - k0), or a probe would hold no MoE block (which the model refuses),
 * the planner builds the program at n blocks itself. */
static inline bool mt__plan_moe_linear(const mt__plan_search *s, int n, int k0, int k1) {
    if (k0 == k1) return k0 == n;
    /* a probe without an MoE block is refused by the model's check */
    if (s->moe.moe_experts > 0 && mt__plan_moe_blocks(s, k0) == 0) return false;
    const long long m0 = mt__plan_moe_blocks(s, k0), m1 = mt__plan_moe_blocks(s, k1);
    return (long long)(mt__plan_moe_blocks(s, n) - m0) * (k1 - k0) == (long long)(n - k0) * (m1 - m0);
}

/* A layout's chunks as the trainer cuts them (pipe.c): L blocks into S
 * chunks, the first L mod S one block more. Their programs differ by role:
 * the first (with the embedding), a middle one of each length, the last
 * (with the head and the loss). */
enum { MT__PLAN_ROLE_FIRST, MT__PLAN_ROLE_LONG, MT__PLAN_ROLE_SHORT, MT__PLAN_ROLE_LAST,
       MT__PLAN_N_ROLES };

static inline int mt__plan_role_of(int L, int S, int c) {
    return c == 0 ? MT__PLAN_ROLE_FIRST : c == S - 1 ? MT__PLAN_ROLE_LAST
           : c < L % S ? MT__PLAN_ROLE_LONG : MT__PLAN_ROLE_SHORT;
}

/* The memory per device of layout l (its device whose chunks hold most)
 * into res: each role's program counts counts[k] (built[k]: the layout has
 * the role), its S global chunks' in-flight microbatches slots[] (meshtrain's
 * executor) and peak[] (the frameworks') and devices dev_of[], `batch`
 * sequences a replica, on device hw; res->why says why it does not fit ("":
 * it does), naming a parameter the storage axes left whole, from the
 * program of `key` (chunk unset) at its first interpolation point, or with
 * `proxy` from the memory-first proxy's (mt__plan_memory_proxy). Fails
 * only for what mt__plan_mem_device refuses (evaluate_memory.c). */
mt_status mt__plan_layout_memory(mt__plan_search *s, const mt_plan_layout *l,
                                 mt__plan_prog_key key, const mt__plan_mem_counts *counts,
                                 const bool *built, int S, int batch, const int *slots,
                                 const int *peak, const int *dev_of, const mt_hardware *hw,
                                 bool proxy, mt_plan_result *res);

/* The key whose program stands for `key`'s in the memory-first check
 * (evaluate.c): under a convention other than meshtrain a layout's bytes
 * read only its programs' parameter, gathered and reduced counts, which
 * neither the remat policy nor the sequences a replica change
 * (test_plan_memory_first.c checks every layout of its searches against
 * its own builds), so a layout is refused for memory from the program at
 * remat none and MT__PLAN_PROXY_BATCH sequences, without building its own
 * at every remat policy and batch point. */
#define MT__PLAN_PROXY_BATCH 1
static inline mt__plan_prog_key mt__plan_memory_proxy(mt__plan_prog_key key) {
    key.remat = MT_REMAT_NONE;
    key.batch = MT__PLAN_PROXY_BATCH;
    return key;
}

/* One layout's memory and step time into *res (feasible or why not).
 * Fails only for what is no property of the layout (out of memory), and
 * MT_EINTERNAL, naming the layout, for a step that breaks an invariant
 * (mt__plan_step_check: a planner bug). */
mt_status mt__plan_evaluate(mt__plan_search *s, const mt_plan_layout *l, mt_plan_result *res);
/* mt__plan_evaluate, and with `step` non-NULL the step's parts as step.c
 * made them into *step (zeroed where the layout is infeasible). */
mt_status mt__plan_evaluate_step(mt__plan_search *s, const mt_plan_layout *l, mt_plan_result *res,
                                 mt__plan_step_result *step);
/* Starts a search of r on `chips` chips in *s (zeroed first) without
 * searching: the request checked as mt_plan_search checks it and the
 * model's facts derived (mt__plan_model_facts); then mt__plan_evaluate
 * any layouts on it, and free its cache with mt__plan_cache_free. Fails
 * as mt_plan_search's checks and mt__plan_model_facts (the cache freed). */
mt_status mt__plan_search_begin(mt__plan_search *s, const mt_plan_request *r, int chips);
/* The whole model's N and its model FLOPs a token into s (from programs of 1
 * and 2 blocks on one device). Fails when the model does not build. */
mt_status mt__plan_model_facts(mt__plan_search *s);
/* Builds (or finds, cache.c) the program of `key` into *out, whose status
 * says whether the layout builds (a refusal is the layout's, with why).
 * Fails only for MT_ENOMEM. */
mt_status mt__plan_program_cached(mt__plan_search *s, const mt__plan_prog_key *key,
                                  const mt__plan_cached **out);
/* Builds the program of `key` (as asked: no chunk or sharing taken for
 * another) into *e without the cache: key, status and why, prog (free it
 * with mt__plan_program_free), keys and ct. For tests: what the cache
 * shares between keys (cache.c's shared_key) checked against direct
 * builds. Fails only for MT_ENOMEM. */
mt_status mt__plan_program_uncached(mt__plan_search *s, const mt__plan_prog_key *key,
                                    mt__plan_cached *e);
/* The system as one device of a `chips`-device layout sees it: the
 * request's hardware, or on a host of thread devices (its innermost level
 * MT_LINK_THREADS) one device's share of the host (host.h's rule) in *tmp.
 * Returns the one to use. */
const mt_hardware *mt__plan_layout_hw(const mt__plan_search *s, int chips, mt_hardware *tmp);
/* The trainer's configuration of r's model (its settings as given, no
 * data read, T the request's seq) into *c, the rest mt_train_defaults():
 * what a layout's program (cache.c) and the rules' check (search.c) start
 * from. */
void mt__plan_model_config(const mt_plan_request *r, mt_train_config *c);
/* Frees the cache. */
void mt__plan_cache_free(mt__plan_search *s);
/* The cache's programs past s->n_pinned freed when they hold more than
 * MT__PLAN_CACHE_BUDGET bytes, so that a search's memory stays bounded
 * whatever its layouts. Called between the (mesh, ZeRO, remat, sp, cm)
 * option sets of a search (layouts.c): every key names its mesh and those
 * options, so a program built for one set is never asked for by another
 * of the same chip count (only --min-chips' power-of-two meshes, tried
 * again at a later count, build theirs again), and no answer changes.
 * Kept: the shared programs (cache.c's shared_key) last used, up to half
 * the budget. No pointer into the cache may be held across the call. */
void mt__plan_cache_trim(mt__plan_search *s);
/* Packs e's nodes (its distinct nodes once, the run order as indexes;
 * prog.nodes freed and NULL); nothing when packed already. Unpacked, the
 * nodes are the program's, byte for byte (cache_pack.c). Fails only for
 * MT_ENOMEM (e unchanged). */
mt_status mt__plan_cache_pack(mt__plan_cached *e);
/* e's packed nodes unpacked into e->prog.nodes, the packed arrays kept
 * (packing it again only frees the nodes); nothing when not packed. Fails
 * only for MT_ENOMEM (e unchanged). */
mt_status mt__plan_cache_unpack(mt__plan_cached *e);
/* The bytes e's packed nodes hold (0: not packed). */
size_t mt__plan_cache_packed_bytes(const mt__plan_cached *e);
/* The bytes of packed shared programs mt__plan_cache_trim keeps past
 * MT__PLAN_CACHE_BUDGET's (least recently used dropped first). */
#define MT__PLAN_PACK_BUDGET ((size_t)256 << 20)
/* The bytes past which mt__plan_cache_trim frees (256 MiB, well inside the
 * 1 GiB a search may hold, issue 40, with room for the rest). */
#define MT__PLAN_CACHE_BUDGET ((size_t)256 << 20)
/* The most threads one search runs (mt_plan_request.threads). */
#define MT__PLAN_MAX_WORKERS 8

#endif /* MT_PLAN_SEARCH_IMPL_H */
