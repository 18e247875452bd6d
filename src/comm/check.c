/*
 * check.c — the debug match check (mt_launch_opts.check): before every
 * collective the group exchanges what each member is about to issue, so a
 * mismatch (another op, count, dtype, root or ppermute pairs) fails at once
 * with both sides named, instead of corrupting data or hanging until the
 * timeout. It costs one extra all-gather per collective, hence debug only.
 */
#include "comm/coll_impl.h"

#include <stdio.h>
#include <string.h>

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
    mt__axes_label(ctx->launch->mesh, e->key, label, sizeof label);
    snprintf(buf, cap, "#%llu %s over %s %s count %llu", (unsigned long long)e->seq,
             mt__coll_name(e->kind), label, mt_dtype_name((mt_dtype)e->dtype), (unsigned long long)e->count);
    if ((e->kind & 15) == MT_COLL_BROADCAST)
        snprintf(buf + strlen(buf), cap - strlen(buf), " root %d", e->root);
    if ((e->kind & 15) == MT_COLL_PERMUTE)
        snprintf(buf + strlen(buf), cap - strlen(buf), " pairs #%08llx",
                 (unsigned long long)(e->extra & 0xffffffffu));
}

mt_status mt__match_check(mt_ctx *ctx, mt_group *g, const mt_coll_desc *d) {
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
