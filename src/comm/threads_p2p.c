/*
 * threads_p2p.c — point-to-point messages on the threads transport: one
 * mailbox per device, in the launch's shared state.
 *
 * A send copies the data into a message of its own (malloc'd: header and
 * bytes) and appends it to the receiver's list under the mailbox's mutex, so
 * the sender never waits for the receiver. A receive takes the first message
 * of its channel (axes key, sender, tag) from its own list under the same
 * mutex, copies it out and frees it: the list is in send order, so a
 * channel's messages come out in the order they went in, whatever other
 * channels do. The copying happens outside the lock.
 *
 * A receiver with nothing to take waits with the transport's wait step (spin,
 * then yield, then sleep; abort and deadline) until the mailbox's count of
 * arrivals changes. The count changes only under the mutex, and the receiver
 * reads it under the mutex with the list it scanned, so an arrival after the
 * scan always shows.
 *
 * Messages left at the end of the launch are freed; on a launch that did not
 * fail the first device that has some fails it (mt__p2p_leftover).
 */
#include "comm/threads_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct p2p_msg {
    struct p2p_msg *next;
    uint32_t        key;          /* the channel: axes key, sender, tag */
    int             src;          /* the sender's device id */
    int             tag;
    size_t          bytes;
    unsigned char   data[];
} p2p_msg;

struct mt_mailbox {
    _Alignas(64) pthread_mutex_t mu;   /* guards the list and the count's changes */
    p2p_msg                *head, *tail;
    atomic_uint_least64_t   arrivals;  /* messages appended so far */
};

/* ======================================================================== */
/* Mailboxes                                                                 */
/* ======================================================================== */

mt_mailbox *mt__mailboxes_create(int n) {
    size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(mt_mailbox);
    mt_mailbox *boxes = aligned_alloc(64, bytes);   /* a multiple of 64: _Alignas */
    if (!boxes) return NULL;
    memset(boxes, 0, bytes);
    for (int i = 0; i < n; i++) {
        pthread_mutex_init(&boxes[i].mu, NULL);
        atomic_init(&boxes[i].arrivals, 0);
    }
    return boxes;
}

void mt__mailboxes_free(mt_mailbox *boxes, int n) {
    if (!boxes) return;
    for (int i = 0; i < n; i++) {
        for (p2p_msg *m = boxes[i].head, *next; m; m = next) {
            next = m->next;
            free(m);
        }
        pthread_mutex_destroy(&boxes[i].mu);
    }
    free(boxes);
}

void mt__mailboxes_close(mt_launch_state *ls, mt_mailbox *boxes, int n) {
    for (int i = 0; i < n; i++) {
        int n_left = 0;
        for (p2p_msg *m = boxes[i].head; m; m = m->next) n_left++;
        if (n_left) {
            const p2p_msg *first = boxes[i].head;
            (void)mt__p2p_leftover(ls, i, n_left, first->src, first->key, first->tag,
                                   first->bytes);
        }
        for (p2p_msg *m = boxes[i].head, *next; m; m = next) {
            next = m->next;
            free(m);
        }
        boxes[i].head = boxes[i].tail = NULL;
    }
}

static mt_mailbox *box_of(mt_ctx *ctx, int device) {
    return &((mt_threads_shared *)ctx->launch->transport)->boxes[device];
}

/* ======================================================================== */
/* Send and receive                                                          */
/* ======================================================================== */

mt_status mt__threads_send(mt_ctx *ctx, const mt_group *g, int dst, int tag, const void *buf,
                           size_t bytes) {
    if (bytes > SIZE_MAX - sizeof(p2p_msg))
        return mt_fail(MT_ENOMEM, "mt_send: a message of %zu bytes is more than memory holds",
                       bytes);
    p2p_msg *m = malloc(sizeof *m + bytes);
    if (!m)
        return mt_fail(MT_ENOMEM, "mt_send over %s: out of memory for a message of %zu bytes "
                       "(messages stay in memory until received)", g->label, bytes);
    m->next = NULL;
    m->key = g->key;
    m->src = ctx->device;
    m->tag = tag;
    m->bytes = bytes;
    if (bytes) memcpy(m->data, buf, bytes);
    mt_mailbox *box = box_of(ctx, g->members[dst]);
    pthread_mutex_lock(&box->mu);
    if (box->tail) box->tail->next = m;
    else box->head = m;
    box->tail = m;
    atomic_fetch_add_explicit(&box->arrivals, 1, memory_order_release);
    pthread_mutex_unlock(&box->mu);
    mt__wait_wake(ctx->launch);
    return MT_OK;
}

/* Unlinks and returns the first message of channel (key, src, tag) in box,
 * NULL when there is none; *seen = the arrivals the list holds. Takes the
 * mailbox's mutex. */
static p2p_msg *take(mt_mailbox *box, uint32_t key, int src, int tag, uint64_t *seen) {
    pthread_mutex_lock(&box->mu);
    *seen = atomic_load_explicit(&box->arrivals, memory_order_relaxed);
    p2p_msg *prev = NULL, *m = box->head;
    while (m && !(m->key == key && m->src == src && m->tag == tag)) {
        prev = m;
        m = m->next;
    }
    if (m) {
        if (prev) prev->next = m->next;
        else box->head = m->next;
        if (box->tail == m) box->tail = prev;
    }
    pthread_mutex_unlock(&box->mu);
    return m;
}

/* The receive on ctx from group rank src of g gave up (`st`): the message
 * that says why (a timeout names the sender and what it did last). */
static mt_status give_up(mt_ctx *ctx, const mt_group *g, int src, int tag, mt_status st) {
    if (st != MT_ETIMEOUT) return mt__wait_fail(ctx, g, st, NULL, 0);
    mt_launch_state *ls = ctx->launch;
    const int from = g->members[src];
    const mt_device_record *r = &ls->records[from];
    char rec[160], sender[256], msg[1024];
    mt__record_text(ls, r, rec, sizeof rec);
    snprintf(sender, sizeof sender, "no message arrived from device %d; device %d's last "
             "operation: %s%s", from, from, rec[0] ? rec : "none",
             rec[0] ? (atomic_load(&r->in_collective) ? " (still in it)" : " (finished)") : "");
    mt__p2p_timeout_text(ctx, g, src, tag, sender, msg, sizeof msg);
    mt__launch_fail(ls, ctx->device, MT_ETIMEOUT, msg);
    return mt_fail(MT_ETIMEOUT, "%s", msg);
}

mt_status mt__threads_recv(mt_ctx *ctx, const mt_group *g, int src, int tag, void *buf,
                           size_t bytes, size_t *got) {
    mt_mailbox *box = box_of(ctx, ctx->device);
    const int from = g->members[src];
    uint64_t seen;
    p2p_msg *m;
    int spins = 0;
    while (!(m = take(box, g->key, from, tag, &seen))) {
        mt_status st;
        do st = mt__wait_step(ctx, &spins);
        while (st == MT_OK && atomic_load_explicit(&box->arrivals, memory_order_acquire) == seen);
        /* it may have come just now: nothing to give up on then */
        if (st != MT_OK && !(m = take(box, g->key, from, tag, &seen)))
            return give_up(ctx, g, src, tag, st);
        if (m) break;
    }
    *got = m->bytes;
    mt_status st = MT_OK;
    if (m->bytes != bytes) st = MT_ESHAPE;
    else if (bytes) memcpy(buf, m->data, bytes);
    free(m);
    return st;
}
