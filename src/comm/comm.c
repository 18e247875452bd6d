/*
 * comm.c — the collectives' front end: argument checks, groups, numbering
 * and records, the debug match check, trace spans, the flat collectives and
 * the asynchronous forms. The dimensioned forms are in comm_dims.c,
 * element-wise reduction (mt__reduce_into) in reduce.c.
 *
 * Every collective, whatever the transport, goes through coll_begin /
 * coll_end: a device's record then always says what it is doing, which is
 * what a timeout on another device reports. coll_end also appends the
 * collective's span to ctx->events when tracing (regions and the writer are
 * in trace.c).
 *
 * Asynchronous requests: mt_*_start checks the arguments; then, when the
 * transport has asynchronous forms (threads) and takes the request (large
 * messages; not in check mode, whose match check is a blocking exchange),
 * it is numbered and recorded at once and the transport starts it: peers
 * that wait on it meanwhile move its data. Otherwise (small messages, the
 * MPI transport, check mode) it is queued and runs as the blocking collective
 * at the first mt_wait that needs it. Either way mt_wait completes every
 * request up to and including the one waited for, in start order, and any
 * blocking collective first completes the whole queue, so every device runs
 * its collectives in the order it issued them.
 */
#include "comm/comm_impl.h"

#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* Names and records                                                         */
/* ======================================================================== */

#define KIND_MEAN 64   /* record kind flag: an all-reduce that was a pmean */

const char *mt__coll_name(int kind) {
    if ((kind & 15) == MT_COLL_ALL_REDUCE) {
        if (kind & KIND_MEAN) return "pmean";
        int op = (kind >> 4) & 3;
        return op == MT_REDUCE_MAX ? "pmax" : op == MT_REDUCE_MIN ? "pmin" : "psum";
    }
    switch (kind & 15) {
    case MT_COLL_ALL_GATHER: return "all_gather";
    case MT_COLL_REDUCE_SCATTER: return "psum_scatter";
    case MT_COLL_ALL_TO_ALL: return "all_to_all";
    case MT_COLL_PERMUTE: return "ppermute";
    case MT_COLL_BROADCAST: return "broadcast";
    case MT_COLL_BARRIER: return "barrier";
    }
    return "collective";
}

static uint32_t axes_key(mt_axes axes) {
    uint32_t key = 0;
    for (int i = 0; i < axes.n; i++) key |= (uint32_t)(axes.axis[i] + 1) << (4 * i);
    return key;
}

/* "'data'" / "'data,tensor'" / "'' (no axes)" */
static void key_label(const mt_mesh *mesh, uint32_t key, char *buf, size_t cap) {
    size_t off = (size_t)snprintf(buf, cap, "'");
    for (int i = 0; key >> (4 * i) && i < 8 && off < cap; i++) {
        int a = (int)((key >> (4 * i)) & 15) - 1;
        off += (size_t)snprintf(buf + off, cap - off, "%s%s", i ? "," : "", mt_mesh_axis_name(mesh, a));
    }
    if (off < cap) snprintf(buf + off, cap - off, key ? "'" : "' (no axes)");
}

void mt__record_text(const mt_launch_state *ls, const mt_device_record *rec, char *buf, size_t cap) {
    for (int attempt = 0; attempt < 4; attempt++) {
        uint64_t seq = atomic_load_explicit(&rec->seq, memory_order_acquire);
        if (seq == 0) { buf[0] = '\0'; return; }
        int kind = atomic_load_explicit(&rec->kind, memory_order_relaxed);
        int dtype = atomic_load_explicit(&rec->dtype, memory_order_relaxed);
        uint32_t key = atomic_load_explicit(&rec->axes_key, memory_order_relaxed);
        uint64_t bytes = atomic_load_explicit(&rec->bytes, memory_order_relaxed);
        char label[96];
        key_label(ls->mesh, key, label, sizeof label);
        snprintf(buf, cap, "#%llu %s over %s %s %llu bytes", (unsigned long long)seq,
                 mt__coll_name(kind), label, mt_dtype_name((mt_dtype)dtype), (unsigned long long)bytes);
        if (atomic_load_explicit(&rec->seq, memory_order_acquire) == seq) return;
    }
}

/* ======================================================================== */
/* Groups                                                                    */
/* ======================================================================== */

mt_status mt__ctx_group(mt_ctx *ctx, mt_axes axes, mt_group **out) {
    mt_launch_state *ls = ctx->launch;
    /* the key packs axis+1 in 4 bits each: it is a safe read and names one
     * axis list only for n <= ndim (<= MT_MESH_MAX_AXES) axes of the mesh,
     * so those come first; a cached key then is a valid group (no repeats) */
    const int ndim = mt_mesh_ndim(ls->mesh);
    bool in_range = axes.n >= 0 && axes.n <= ndim;
    for (int i = 0; in_range && i < axes.n; i++) in_range = axes.axis[i] < ndim;
    if (!in_range) return mt_mesh_axes_check(ls->mesh, axes);
    uint32_t key = axes_key(axes);
    for (int i = 0; i < ctx->n_groups; i++)
        if (ctx->groups[i]->key == key) { *out = ctx->groups[i]; return MT_OK; }
    mt_status st = mt_mesh_axes_check(ls->mesh, axes);
    if (st != MT_OK) return st;
    if (ctx->n_groups == ctx->cap_groups) {
        int cap = ctx->cap_groups ? 2 * ctx->cap_groups : 16;
        mt_group **grown = realloc(ctx->groups, (size_t)cap * sizeof *grown);
        if (!grown) return mt_fail(MT_ENOMEM, "out of memory for %d groups", cap);
        ctx->groups = grown;
        ctx->cap_groups = cap;
    }
    mt_group *g = calloc(1, sizeof *g);
    if (!g) return mt_fail(MT_ENOMEM, "out of memory for a group");
    g->key = key;
    g->axes = axes;
    g->size = mt_mesh_group_size(ls->mesh, axes);
    g->rank = mt_mesh_group_rank(ls->mesh, axes, ctx->device);
    g->members = malloc((size_t)g->size * sizeof *g->members);
    g->check_buf = ls->check ? calloc((size_t)g->size, 64) : NULL;
    if (!g->members || (ls->check && !g->check_buf)) {
        int size = g->size;
        free(g->members);
        free(g->check_buf);
        free(g);
        return mt_fail(MT_ENOMEM, "out of memory for a group of %d devices", size);
    }
    mt_mesh_group(ls->mesh, axes, ctx->device, g->members);
    key_label(ls->mesh, key, g->label, sizeof g->label);
    if (ls->ops->group_init && (st = ls->ops->group_init(ctx, g)) != MT_OK) {
        free(g->members);
        free(g->check_buf);
        free(g);
        return st;
    }
    ctx->groups[ctx->n_groups++] = g;
    *out = g;
    return MT_OK;
}

/* ======================================================================== */
/* Numbering, records, the debug check, trace spans                          */
/* ======================================================================== */

typedef struct {
    int      kind;       /* mt_coll_kind, + 16·op for all-reduce, + KIND_MEAN */
    mt_dtype dtype;
    size_t   count;      /* elements per device (as the caller gave it) */
    size_t   bytes;      /* bytes this device contributes */
    int      root;       /* broadcast */
    uint64_t extra;      /* ppermute: a hash of the pairs */
    double   t0;
} coll_desc;

/* What the debug check exchanges: one 64-byte entry per device. */
typedef struct {
    int32_t  kind, dtype, root, device;
    uint32_t key, pad;
    uint64_t count, extra, seq;
    uint8_t  fill[16];
} check_entry;
_Static_assert(sizeof(check_entry) == 64, "check entries are 64 bytes");

static void describe(const mt_ctx *ctx, const check_entry *e, char *buf, size_t cap) {
    char label[96];
    key_label(ctx->launch->mesh, e->key, label, sizeof label);
    snprintf(buf, cap, "#%llu %s over %s %s count %llu", (unsigned long long)e->seq,
             mt__coll_name(e->kind), label, mt_dtype_name((mt_dtype)e->dtype), (unsigned long long)e->count);
    if ((e->kind & 15) == MT_COLL_BROADCAST)
        snprintf(buf + strlen(buf), cap - strlen(buf), " root %d", e->root);
    if ((e->kind & 15) == MT_COLL_PERMUTE)
        snprintf(buf + strlen(buf), cap - strlen(buf), " pairs #%08llx",
                 (unsigned long long)(e->extra & 0xffffffffu));
}

static mt_status match_check(mt_ctx *ctx, mt_group *g, const coll_desc *d) {
    check_entry mine;
    memset(&mine, 0, sizeof mine);
    mine.kind = d->kind;
    mine.dtype = d->dtype;
    mine.root = d->root;
    mine.device = ctx->device;
    mine.key = g->key;
    mine.count = d->count;
    mine.extra = d->extra;
    mine.seq = ctx->seq;
    mt_status st = ctx->launch->ops->all_gather(ctx, g, &mine, g->check_buf, sizeof mine);
    if (st != MT_OK) return st;
    const check_entry *all = g->check_buf;
    /* every device compares with rank 0, so all report the same mismatch */
    for (int j = 1; j < g->size; j++) {
        const check_entry *a = &all[0], *b = &all[j];
        if (a->kind != b->kind || a->dtype != b->dtype || a->root != b->root ||
            a->key != b->key || a->count != b->count || a->extra != b->extra) {
            char da[160], db[160];
            describe(ctx, a, da, sizeof da);
            describe(ctx, b, db, sizeof db);
            return mt_fail(MT_EMISMATCH, "collective mismatch in the group over %s: device %d "
                           "issued %s but device %d issued %s; every device of a group must issue "
                           "the same collectives, with the same sizes, in the same order",
                           g->label, a->device, da, b->device, db);
        }
    }
    return MT_OK;
}

static void push_event(mt_ctx *ctx, const mt_trace_event *ev) {
    if (!ctx->events) return;
    if (ctx->n_events == ctx->cap_events) {
        /* tracing is best effort: without memory, later events are dropped */
        int cap = ctx->cap_events * 2;
        mt_trace_event *e = realloc(ctx->events, (size_t)cap * sizeof *e);
        if (!e) return;
        ctx->events = e;
        ctx->cap_events = cap;
    }
    ctx->events[ctx->n_events++] = *ev;
}

/* Appends s at *at, keeping one byte for the terminator. */
static void put_str(char *buf, size_t cap, size_t *at, const char *s) {
    while (*s && *at + 1 < cap) buf[(*at)++] = *s++;
}

static void put_u64(char *buf, size_t cap, size_t *at, uint64_t v) {
    char digits[24];
    int n = 0;
    do { digits[n++] = (char)('0' + v % 10); v /= 10; } while (v);
    while (n && *at + 1 < cap) buf[(*at)++] = digits[--n];
}

/* "#12 psum over 'data' f32 4096 bytes" — by hand: snprintf would cost as
 * much as a whole 2-device small all-reduce. */
static void record_text(char *buf, size_t cap, uint64_t seq, const coll_desc *d, const char *label) {
    size_t at = 0;
    put_str(buf, cap, &at, "#");
    put_u64(buf, cap, &at, seq);
    put_str(buf, cap, &at, " ");
    put_str(buf, cap, &at, mt__coll_name(d->kind));
    put_str(buf, cap, &at, " over ");
    put_str(buf, cap, &at, label);
    put_str(buf, cap, &at, " ");
    put_str(buf, cap, &at, mt_dtype_name(d->dtype));
    put_str(buf, cap, &at, " ");
    put_u64(buf, cap, &at, d->bytes);
    put_str(buf, cap, &at, " bytes");
    buf[at] = '\0';
}

static mt_status coll_begin(mt_ctx *ctx, mt_group *g, coll_desc *d) {
    mt_launch_state *ls = ctx->launch;
    mt_device_record *rec = ctx->record;
    ctx->seq++;
    record_text(rec->text, sizeof rec->text, ctx->seq, d, g->label);
    atomic_store_explicit(&rec->kind, d->kind, memory_order_relaxed);
    atomic_store_explicit(&rec->dtype, (int)d->dtype, memory_order_relaxed);
    atomic_store_explicit(&rec->axes_key, g->key, memory_order_relaxed);
    atomic_store_explicit(&rec->bytes, (uint64_t)d->bytes, memory_order_relaxed);
    atomic_store_explicit(&rec->in_collective, 1, memory_order_relaxed);
    atomic_store_explicit(&rec->seq, ctx->seq, memory_order_release);
    d->t0 = mt_time_now();
    ctx->deadline = d->t0 + ls->timeout_s;
    if (atomic_load_explicit(&ls->abort, memory_order_acquire))
        return mt_fail(MT_EABORTED, "device %d stopped before %s: device %d failed: %s",
                       ctx->device, rec->text, ls->failed_device, ls->failed_msg);
    if (ls->check && g->size > 1) return match_check(ctx, g, d);
    return MT_OK;
}

static mt_status coll_end(mt_ctx *ctx, const mt_group *g, const coll_desc *d, mt_status st) {
    atomic_store_explicit(&ctx->record->in_collective, 0, memory_order_relaxed);
    if (ctx->events) {
        mt_trace_event ev;
        memset(&ev, 0, sizeof ev);
        ev.t0 = d->t0 - ctx->t_start;
        ev.t1 = mt_time_now() - ctx->t_start;
        char name[128];
        snprintf(name, sizeof name, "%s %s", mt__coll_name(d->kind), g->label);
        snprintf(ev.name, sizeof ev.name, "%.*s", (int)sizeof ev.name - 1, name);
        ev.bytes = d->bytes;
        ev.is_comm = true;
        push_event(ctx, &ev);
    }
    return st;
}

/* ======================================================================== */
/* Argument checks                                                           */
/* ======================================================================== */

mt_status mt__check_dtype(const char *what, mt_dtype dtype) {
    if (dtype != MT_F32 && dtype != MT_BF16 && dtype != MT_I32)
        return mt_fail(MT_EINVAL, "%s: unknown dtype %d; use MT_F32, MT_BF16 or MT_I32", what,
                       (int)dtype);
    return MT_OK;
}

static mt_status check_buf(const char *what, const char *name, const void *p, size_t count) {
    if (!p && count > 0)
        return mt_fail(MT_EINVAL, "%s: %s is NULL but count is %zu", what, name, count);
    return MT_OK;
}

/* count·factor·esize must fit in size_t */
static mt_status check_size(const char *what, size_t count, size_t factor, mt_dtype dtype) {
    size_t es = mt_dtype_size(dtype);
    if (factor && count > SIZE_MAX / factor / es)
        return mt_fail(MT_EINVAL, "%s: count %zu is too large", what, count);
    return MT_OK;
}

static mt_status flush_pending(mt_ctx *ctx, int upto);

/* The common head of a blocking collective: queue flushed, group resolved. */
mt_status mt__coll_prologue(mt_ctx *ctx, mt_axes axes, mt_group **g) {
    if (ctx->n_pending > 0) {
        mt_status st = flush_pending(ctx, ctx->n_pending);
        if (st != MT_OK) return st;
    }
    return mt__ctx_group(ctx, axes, g);
}

/* ======================================================================== */
/* Flat collectives                                                          */
/* ======================================================================== */

static mt_status do_all_reduce(mt_ctx *ctx, mt_axes axes, void *buf, size_t count,
                               mt_dtype dtype, mt_reduce_op op, bool mean) {
    const char *what = mean ? "pmean" : "all_reduce";
    mt_status st;
    if ((st = mt__check_dtype(what, dtype)) || (st = check_buf(what, "buf", buf, count)) ||
        (st = check_size(what, count, 1, dtype)))
        return st;
    if (op != MT_REDUCE_SUM && op != MT_REDUCE_MAX && op != MT_REDUCE_MIN)
        return mt_fail(MT_EINVAL, "all_reduce: unknown reduction %d", (int)op);
    mt_group *g;
    if ((st = mt__ctx_group(ctx, axes, &g)) != MT_OK) return st;
    coll_desc d = {MT_COLL_ALL_REDUCE | (int)op << 4 | (mean ? KIND_MEAN : 0), dtype, count,
                   count * mt_dtype_size(dtype), 0, 0, 0};
    st = coll_begin(ctx, g, &d);
    if (st == MT_OK && g->size > 1)
        st = ctx->launch->ops->all_reduce(ctx, g, buf, count, dtype, op);
    if (st == MT_OK && mean && g->size > 1) {
        float *x = buf;
        float P = (float)g->size;
        for (size_t i = 0; i < count; i++) x[i] /= P;
    }
    return coll_end(ctx, g, &d, st);
}

mt_status mt_all_reduce(mt_ctx *ctx, mt_axes axes, void *buf, size_t count, mt_dtype dtype,
                        mt_reduce_op op) {
    mt_group *g;
    mt_status st = mt__coll_prologue(ctx, axes, &g);
    return st != MT_OK ? st : do_all_reduce(ctx, axes, buf, count, dtype, op, false);
}

mt_status mt_psum(mt_ctx *ctx, mt_axes axes, float *buf, size_t count) {
    return mt_all_reduce(ctx, axes, buf, count, MT_F32, MT_REDUCE_SUM);
}

mt_status mt_pmax(mt_ctx *ctx, mt_axes axes, float *buf, size_t count) {
    return mt_all_reduce(ctx, axes, buf, count, MT_F32, MT_REDUCE_MAX);
}

mt_status mt_pmean(mt_ctx *ctx, mt_axes axes, float *buf, size_t count) {
    mt_group *g;
    mt_status st = mt__coll_prologue(ctx, axes, &g);
    return st != MT_OK ? st : do_all_reduce(ctx, axes, buf, count, MT_F32, MT_REDUCE_SUM, true);
}

mt_status mt__do_all_gather(mt_ctx *ctx, mt_axes axes, const void *send, void *recv,
                               size_t count, mt_dtype dtype) {
    mt_status st;
    mt_group *g;
    if ((st = mt__check_dtype("all_gather", dtype)) || (st = check_buf("all_gather", "send", send, count)) ||
        (st = check_buf("all_gather", "recv", recv, count)) ||
        (st = mt__ctx_group(ctx, axes, &g)) ||
        (st = check_size("all_gather", count, (size_t)g->size, dtype)))
        return st;
    size_t bytes = count * mt_dtype_size(dtype);
    coll_desc d = {MT_COLL_ALL_GATHER, dtype, count, bytes, 0, 0, 0};
    st = coll_begin(ctx, g, &d);
    if (st == MT_OK) {
        if (g->size > 1) st = ctx->launch->ops->all_gather(ctx, g, send, recv, bytes);
        else if (bytes && send != recv) memcpy(recv, send, bytes);
    }
    return coll_end(ctx, g, &d, st);
}

mt_status mt_all_gather(mt_ctx *ctx, mt_axes axes, const void *send, void *recv, size_t count,
                        mt_dtype dtype) {
    mt_group *g;
    mt_status st = mt__coll_prologue(ctx, axes, &g);
    return st != MT_OK ? st : mt__do_all_gather(ctx, axes, send, recv, count, dtype);
}

mt_status mt__do_psum_scatter(mt_ctx *ctx, mt_axes axes, const void *send, void *recv,
                                 size_t count, mt_dtype dtype) {
    mt_status st;
    mt_group *g;
    if ((st = mt__check_dtype("psum_scatter", dtype)) ||
        (st = check_buf("psum_scatter", "send", send, count)) ||
        (st = check_buf("psum_scatter", "recv", recv, count)) ||
        (st = mt__ctx_group(ctx, axes, &g)) ||
        (st = check_size("psum_scatter", count, (size_t)g->size, dtype)))
        return st;
    size_t bytes = count * mt_dtype_size(dtype);
    coll_desc d = {MT_COLL_REDUCE_SCATTER, dtype, count, bytes * (size_t)g->size, 0, 0, 0};
    st = coll_begin(ctx, g, &d);
    if (st == MT_OK) {
        if (g->size > 1)
            st = ctx->launch->ops->reduce_scatter(ctx, g, send, recv, count, dtype, MT_REDUCE_SUM);
        else if (bytes && send != recv) memcpy(recv, send, bytes);
    }
    return coll_end(ctx, g, &d, st);
}

mt_status mt_psum_scatter(mt_ctx *ctx, mt_axes axes, const void *send, void *recv, size_t count,
                          mt_dtype dtype) {
    mt_group *g;
    mt_status st = mt__coll_prologue(ctx, axes, &g);
    return st != MT_OK ? st : mt__do_psum_scatter(ctx, axes, send, recv, count, dtype);
}

mt_status mt_all_to_all(mt_ctx *ctx, mt_axes axes, const void *send, void *recv, size_t count,
                        mt_dtype dtype) {
    mt_status st;
    mt_group *g;
    if ((st = mt__coll_prologue(ctx, axes, &g)) || (st = mt__check_dtype("all_to_all", dtype)) ||
        (st = check_buf("all_to_all", "send", send, count)) ||
        (st = check_buf("all_to_all", "recv", recv, count)) ||
        (st = check_size("all_to_all", count, (size_t)g->size, dtype)))
        return st;
    size_t bytes = count * mt_dtype_size(dtype);
    coll_desc d = {MT_COLL_ALL_TO_ALL, dtype, count, bytes * (size_t)g->size, 0, 0, 0};
    st = coll_begin(ctx, g, &d);
    if (st == MT_OK) {
        if (g->size > 1) st = ctx->launch->ops->all_to_all(ctx, g, send, recv, bytes);
        else if (bytes && send != recv) memcpy(recv, send, bytes);
    }
    return coll_end(ctx, g, &d, st);
}

mt_status mt_ppermute(mt_ctx *ctx, mt_axes axes, const void *send, void *recv, size_t count,
                      mt_dtype dtype, const int (*pairs)[2], int n_pairs) {
    mt_status st;
    mt_group *g;
    if ((st = mt__coll_prologue(ctx, axes, &g)) || (st = mt__check_dtype("ppermute", dtype)) ||
        (st = check_buf("ppermute", "send", send, count)) ||
        (st = check_buf("ppermute", "recv", recv, count)) ||
        (st = check_size("ppermute", count, 1, dtype)))
        return st;
    if (n_pairs < 0 || (n_pairs > 0 && !pairs))
        return mt_fail(MT_EINVAL, "ppermute: %d pairs at %p", n_pairs, (const void *)pairs);
    int dest = -1, src = -1;
    uint64_t hash = 1469598103934665603ull;
    for (int k = 0; k < n_pairs; k++) {
        int s = pairs[k][0], t = pairs[k][1];
        if (s < 0 || s >= g->size || t < 0 || t >= g->size)
            return mt_fail(MT_EINVAL, "ppermute over %s: pair %d {%d,%d} names a rank outside the "
                           "group of %d", g->label, k, s, t, g->size);
        for (int j = 0; j < k; j++) {
            if (pairs[j][0] == s)
                return mt_fail(MT_EINVAL, "ppermute over %s: pair %d {%d,%d} repeats source %d "
                               "(pair %d is {%d,%d}); each rank may send at most once", g->label,
                               k, s, t, s, j, pairs[j][0], pairs[j][1]);
            if (pairs[j][1] == t)
                return mt_fail(MT_EINVAL, "ppermute over %s: pair %d {%d,%d} repeats destination "
                               "%d (pair %d is {%d,%d}); each rank may receive at most once",
                               g->label, k, s, t, t, j, pairs[j][0], pairs[j][1]);
        }
        if (s == g->rank) dest = t;
        if (t == g->rank) src = s;
        hash = (hash ^ (uint64_t)(s * 4099 + t)) * 1099511628211ull;
    }
    size_t bytes = count * mt_dtype_size(dtype);
    coll_desc d = {MT_COLL_PERMUTE, dtype, count, bytes, 0, hash, 0};
    st = coll_begin(ctx, g, &d);
    if (st == MT_OK) {
        if (g->size > 1) {
            st = ctx->launch->ops->permute(ctx, g, send, recv, bytes, dest, src);
        } else if (bytes) {
            if (src == 0) { if (send != recv) memcpy(recv, send, bytes); }
            else memset(recv, 0, bytes);
        }
    }
    return coll_end(ctx, g, &d, st);
}

mt_status mt_broadcast(mt_ctx *ctx, mt_axes axes, void *buf, size_t count, mt_dtype dtype, int root) {
    mt_status st;
    mt_group *g;
    if ((st = mt__coll_prologue(ctx, axes, &g)) || (st = mt__check_dtype("broadcast", dtype)) ||
        (st = check_buf("broadcast", "buf", buf, count)) ||
        (st = check_size("broadcast", count, 1, dtype)))
        return st;
    if (root < 0 || root >= g->size)
        return mt_fail(MT_EINVAL, "broadcast over %s: root %d is not a rank of the group of %d",
                       g->label, root, g->size);
    size_t bytes = count * mt_dtype_size(dtype);
    coll_desc d = {MT_COLL_BROADCAST, dtype, count, bytes, root, 0, 0};
    st = coll_begin(ctx, g, &d);
    if (st == MT_OK && g->size > 1) st = ctx->launch->ops->broadcast(ctx, g, buf, bytes, root);
    return coll_end(ctx, g, &d, st);
}

mt_status mt_barrier(mt_ctx *ctx, mt_axes axes) {
    mt_status st;
    mt_group *g;
    if ((st = mt__coll_prologue(ctx, axes, &g))) return st;
    coll_desc d = {MT_COLL_BARRIER, MT_F32, 0, 0, 0, 0, 0};
    st = coll_begin(ctx, g, &d);
    if (st == MT_OK && g->size > 1) st = ctx->launch->ops->barrier(ctx, g);
    return coll_end(ctx, g, &d, st);
}

/* ======================================================================== */
/* Asynchronous forms                                                        */
/* ======================================================================== */

/* What a request is, as coll_begin / coll_end record it. */
static coll_desc pending_desc(const mt_pending *p, const mt_group *g) {
    size_t bytes = p->count * mt_dtype_size(p->dtype);
    coll_desc d = {p->kind, p->dtype, p->count, bytes, 0, 0, 0};
    if (p->kind == MT_COLL_ALL_REDUCE) d.kind |= (int)p->op << 4;
    if (p->kind == MT_COLL_REDUCE_SCATTER) d.bytes *= (size_t)g->size;
    return d;
}

/* Queues a request after checking everything that can fail on this device
 * alone (axes, group, sizes): what fails later fails for the launch. A
 * request the transport takes is started here. */
static mt_status enqueue(mt_ctx *ctx, const char *what, const mt_pending *p, bool times_P,
                         mt_request *req) {
    if (!req) return mt_fail(MT_EINVAL, "%s: req is NULL", what);
    req->id = 0;
    if (ctx->n_pending == MT_MAX_PENDING)
        return mt_fail(MT_ESTATE, "%d collectives are already started and not waited for; call "
                       "mt_wait on one first", MT_MAX_PENDING);
    mt_group *g;
    mt_status st;
    if ((st = mt__ctx_group(ctx, p->axes, &g)) ||
        (st = check_size(what, p->count, times_P ? (size_t)g->size : 1, p->dtype)))
        return st;
    mt_pending *q = &ctx->pending[ctx->n_pending];
    *q = *p;
    q->g = g;
    q->eager = false;
    q->tag = 0;
    const mt_launch_state *ls = ctx->launch;
    if (ls->ops->async_start && !ls->check && g->size > 1 && ls->ops->async_eager(ctx, g, q)) {
        /* numbered and recorded now, in issue order; the span is the start's */
        coll_desc d = pending_desc(q, g);
        st = coll_begin(ctx, g, &d);
        if (st == MT_OK) st = ls->ops->async_start(ctx, g, q);
        if ((st = coll_end(ctx, g, &d, st)) != MT_OK) return st;   /* not started */
        q->eager = true;
    }
    ctx->n_pending++;
    q->id = ++ctx->next_request;
    q->started = true;
    req->id = q->id;
    return MT_OK;
}

mt_status mt_all_reduce_start(mt_ctx *ctx, mt_axes axes, void *buf, size_t count, mt_dtype dtype,
                              mt_reduce_op op, mt_request *req) {
    mt_status st;
    if ((st = mt__check_dtype("all_reduce_start", dtype)) ||
        (st = check_buf("all_reduce_start", "buf", buf, count)))
        return st;
    if (op != MT_REDUCE_SUM && op != MT_REDUCE_MAX && op != MT_REDUCE_MIN)
        return mt_fail(MT_EINVAL, "all_reduce_start: unknown reduction %d", (int)op);
    mt_pending p = {0, false, MT_COLL_ALL_REDUCE, axes, buf, NULL, NULL, count, dtype, op, NULL, false, 0};
    return enqueue(ctx, "all_reduce_start", &p, false, req);
}

mt_status mt_all_gather_start(mt_ctx *ctx, mt_axes axes, const void *send, void *recv,
                              size_t count, mt_dtype dtype, mt_request *req) {
    mt_status st;
    if ((st = mt__check_dtype("all_gather_start", dtype)) ||
        (st = check_buf("all_gather_start", "send", send, count)) ||
        (st = check_buf("all_gather_start", "recv", recv, count)))
        return st;
    mt_pending p = {0, false, MT_COLL_ALL_GATHER, axes, NULL, send, recv, count, dtype, MT_REDUCE_SUM,
                    NULL, false, 0};
    return enqueue(ctx, "all_gather_start", &p, true, req);
}

mt_status mt_psum_scatter_start(mt_ctx *ctx, mt_axes axes, const void *send, void *recv,
                                size_t count, mt_dtype dtype, mt_request *req) {
    mt_status st;
    if ((st = mt__check_dtype("psum_scatter_start", dtype)) ||
        (st = check_buf("psum_scatter_start", "send", send, count)) ||
        (st = check_buf("psum_scatter_start", "recv", recv, count)))
        return st;
    mt_pending p = {0, false, MT_COLL_REDUCE_SCATTER, axes, NULL, send, recv, count, dtype,
                    MT_REDUCE_SUM, NULL, false, 0};
    return enqueue(ctx, "psum_scatter_start", &p, true, req);
}

static mt_status run_pending(mt_ctx *ctx, mt_pending *p) {
    if (p->eager) {
        /* the transport started it: complete it (peers may have already) */
        coll_desc d = pending_desc(p, p->g);
        d.t0 = mt_time_now();
        ctx->deadline = d.t0 + ctx->launch->timeout_s;
        atomic_store_explicit(&ctx->record->in_collective, 1, memory_order_relaxed);
        return coll_end(ctx, p->g, &d, ctx->launch->ops->async_wait(ctx, p->g, p));
    }
    switch (p->kind) {
    case MT_COLL_ALL_REDUCE:
        return do_all_reduce(ctx, p->axes, p->buf, p->count, p->dtype, p->op, false);
    case MT_COLL_ALL_GATHER:
        return mt__do_all_gather(ctx, p->axes, p->send, p->recv, p->count, p->dtype);
    case MT_COLL_REDUCE_SCATTER:
        return mt__do_psum_scatter(ctx, p->axes, p->send, p->recv, p->count, p->dtype);
    }
    return mt_fail(MT_EINTERNAL, "pending request of unknown kind %d", p->kind);
}

/* Settles started requests pending[from..n_pending) after a failure: the
 * launch is failed first, so the transport's wait gives each up if it never
 * committed, or completes it if peers may be using its buffers (bounded
 * work). Keeps the caller's error message. */
static void settle_started(mt_ctx *ctx, int from, mt_status st) {
    bool any = false;
    for (int i = from; i < ctx->n_pending; i++) any |= ctx->pending[i].eager;
    if (!any) return;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", mt_errmsg());
    mt__launch_fail(ctx->launch, ctx->device, st, msg);
    for (int i = from; i < ctx->n_pending; i++)
        if (ctx->pending[i].eager)
            (void)ctx->launch->ops->async_wait(ctx, ctx->pending[i].g, &ctx->pending[i]);
    mt_fail(st, "%s", msg);
}

void mt__async_abandon(mt_ctx *ctx) {
    if (ctx->n_pending == 0) return;
    settle_started(ctx, 0, MT_EABORTED);
    ctx->n_pending = 0;
}

/* Completes the first `upto` requests, in start order. When one fails
 * (the launch is failing: the local checks ran at start), it and every
 * request queued after it are dropped (the started ones settled), and their
 * ids recorded so that a later mt_wait on any of them returns the failure
 * instead of MT_OK. */
static mt_status flush_pending(mt_ctx *ctx, int upto) {
    mt_status st = MT_OK;
    int done = 0;
    while (done < upto && st == MT_OK) st = run_pending(ctx, &ctx->pending[done++]);
    if (st != MT_OK) {
        settle_started(ctx, done, st);
        /* one range for all failures: a second failure extends the first
         * one's (requests in between then report a failure too, which after
         * a launch failure they had anyway), so no dropped id reads as run */
        if (ctx->dropped_hi == 0) ctx->dropped_lo = ctx->pending[done - 1].id;
        ctx->dropped_hi = ctx->pending[ctx->n_pending - 1].id;
        ctx->dropped_status = st;
        snprintf(ctx->dropped_msg, sizeof ctx->dropped_msg, "%s", mt_errmsg());
        ctx->n_pending = 0;
        return st;
    }
    memmove(ctx->pending, ctx->pending + done, (size_t)(ctx->n_pending - done) * sizeof *ctx->pending);
    ctx->n_pending -= done;
    return MT_OK;
}

mt_status mt_wait(mt_ctx *ctx, mt_request *req) {
    if (!req) return mt_fail(MT_EINVAL, "mt_wait: req is NULL");
    for (int i = 0; i < ctx->n_pending; i++)
        if (ctx->pending[i].id == req->id) {
            mt_status st = flush_pending(ctx, i + 1);
            req->id = 0;
            return st;
        }
    if (req->id <= 0 || req->id > ctx->next_request)
        return mt_fail(MT_EINVAL, "mt_wait: request %d was never started on device %d", req->id,
                       ctx->device);
    int id = req->id;
    req->id = 0;
    if (id >= ctx->dropped_lo && id <= ctx->dropped_hi)
        return mt_fail(ctx->dropped_status, "mt_wait: request %d did not complete: it, or one "
                       "started before it, failed: %s", id, ctx->dropped_msg);
    return MT_OK;   /* already run by an earlier wait */
}
