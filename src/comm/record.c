/*
 * record.c — call records: every collective's number and record (what the
 * device is doing, for other devices' timeout messages and for
 * mt_ctx_last_collective), and its span on the device's timeline. Sends and receives (p2p.c) are numbered and recorded the same
 * way, with their peer and tag, but do not count as collectives (n_coll),
 * and the debug match check leaves them out.
 *
 * A device writes its own record on every collective, so writing it is on
 * the latency path of the smallest collectives: the text is built by hand
 * (record_text) and the fields others read are relaxed stores published by
 * one release of `seq`. Reading another device's record (mt__record_text)
 * happens only in timeout messages, and may be slow.
 */
#include "comm/coll_impl.h"

#include <stdio.h>
#include <string.h>

/* ======================================================================== */
/* Records                                                                   */
/* ======================================================================== */

void mt__record_text(const mt_launch_state *ls, const mt_device_record *rec, char *buf, size_t cap) {
    for (int attempt = 0; attempt < 4; attempt++) {
        uint64_t seq = atomic_load_explicit(&rec->seq, memory_order_acquire);
        if (seq == 0) { buf[0] = '\0'; return; }
        int kind = atomic_load_explicit(&rec->kind, memory_order_relaxed);
        int dtype = atomic_load_explicit(&rec->dtype, memory_order_relaxed);
        uint32_t key = atomic_load_explicit(&rec->axes_key, memory_order_relaxed);
        uint64_t bytes = atomic_load_explicit(&rec->bytes, memory_order_relaxed);
        int peer = atomic_load_explicit(&rec->peer, memory_order_relaxed);
        int tag = atomic_load_explicit(&rec->tag, memory_order_relaxed);
        char label[96], to[32] = "", with_tag[24] = "";
        mt__axes_label(ls->mesh, key, label, sizeof label);
        if (mt__coll_is_p2p(kind)) {
            snprintf(to, sizeof to, " %s device %d",
                     (kind & 15) == MT_COLL_SEND ? "to" : "from", peer);
            snprintf(with_tag, sizeof with_tag, " tag %d", tag);
        }
        snprintf(buf, cap, "#%llu %s%s over %s%s %s %llu bytes", (unsigned long long)seq,
                 mt__coll_name(kind), to, label, with_tag, mt_dtype_name((mt_dtype)dtype),
                 (unsigned long long)bytes);
        /* the field loads above before the second look at seq: an acquire
         * load orders only what follows it, and on ARM (unlike x86) relaxed
         * loads may be satisfied after a later load */
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&rec->seq, memory_order_acquire) == seq) return;
    }
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

/* "#12 psum over 'data' f32 4096 bytes" (a send or receive: "#13 send to
 * device 3 over 'pipe' tag 7 f32 4096 bytes") — by hand: snprintf would cost
 * as much as a whole 2-device small all-reduce (measured 2026-11-29, 2-core
 * Zen 5 dev VM). */
static void record_text(char *buf, size_t cap, uint64_t seq, const mt_coll_desc *d, const char *label) {
    const bool p2p = mt__coll_is_p2p(d->kind);
    size_t at = 0;
    put_str(buf, cap, &at, "#");
    put_u64(buf, cap, &at, seq);
    put_str(buf, cap, &at, " ");
    put_str(buf, cap, &at, mt__coll_name(d->kind));
    if (p2p) {
        put_str(buf, cap, &at, (d->kind & 15) == MT_COLL_SEND ? " to device " : " from device ");
        put_u64(buf, cap, &at, (uint64_t)d->peer);
    }
    put_str(buf, cap, &at, " over ");
    put_str(buf, cap, &at, label);
    if (p2p) {
        put_str(buf, cap, &at, " tag ");
        put_u64(buf, cap, &at, (uint64_t)d->tag);
    }
    put_str(buf, cap, &at, " ");
    put_str(buf, cap, &at, mt_dtype_name(d->dtype));
    put_str(buf, cap, &at, " ");
    put_u64(buf, cap, &at, d->bytes);
    put_str(buf, cap, &at, " bytes");
    buf[at] = '\0';
}

/* ======================================================================== */
/* A collective's beginning and end                                          */
/* ======================================================================== */

mt_status mt__coll_begin(mt_ctx *ctx, mt_group *g, mt_coll_desc *d) {
    mt_launch_state *ls = ctx->launch;
    mt_device_record *rec = ctx->record;
    const bool p2p = mt__coll_is_p2p(d->kind);
    ctx->seq++;
    if (!p2p) ctx->n_coll++;
    record_text(rec->text, sizeof rec->text, ctx->seq, d, g->label);
    atomic_store_explicit(&rec->kind, d->kind, memory_order_relaxed);
    atomic_store_explicit(&rec->dtype, (int)d->dtype, memory_order_relaxed);
    atomic_store_explicit(&rec->axes_key, g->key, memory_order_relaxed);
    atomic_store_explicit(&rec->bytes, (uint64_t)d->bytes, memory_order_relaxed);
    if (p2p) {
        atomic_store_explicit(&rec->peer, d->peer, memory_order_relaxed);
        atomic_store_explicit(&rec->tag, d->tag, memory_order_relaxed);
    } else {
        atomic_store_explicit(&rec->n_coll, ctx->n_coll, memory_order_relaxed);
    }
    atomic_store_explicit(&rec->in_collective, 1, memory_order_relaxed);
    atomic_store_explicit(&rec->seq, ctx->seq, memory_order_release);
    d->t0 = mt_time_now();
    ctx->deadline = d->t0 + ls->timeout_s;
    if (atomic_load_explicit(&ls->abort, memory_order_acquire))
        return mt_fail(MT_EABORTED, "device %d stopped before %s: device %d failed: %s",
                       ctx->device, rec->text, ls->failed_device, ls->failed_msg);
    /* sends and receives pair up between two devices: nothing to match
     * across the group (and the check's exchange would wait for all of it) */
    if (ls->check && g->size > 1 && !p2p) return mt__match_check(ctx, g, d);
    return MT_OK;
}

mt_status mt__coll_end(mt_ctx *ctx, const mt_group *g, const mt_coll_desc *d, mt_status st) {
    atomic_store_explicit(&ctx->record->in_collective, 0, memory_order_relaxed);
    if (ctx->trace.events) {
        const double t1 = mt_time_now() - ctx->t_start;
        mt_trace_event *ev = mt__trace_push(&ctx->trace);
        if (ev) {
            ev->t0 = d->t0 - ctx->t_start;
            ev->t1 = t1;
            char name[128];
            snprintf(name, sizeof name, "%s %s", mt__coll_name(d->kind), g->label);
            snprintf(ev->name, sizeof ev->name, "%.*s", (int)sizeof ev->name - 1, name);
            ev->bytes = d->bytes;
            ev->is_comm = true;
            if (mt__coll_is_p2p(d->kind)) {
                ev->is_p2p = true;
                ev->peer = d->peer;
                ev->tag = d->tag;
            }
        }
    }
    return st;
}
