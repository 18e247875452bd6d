/*
 * trace.c — per-device timeline: compute regions (mt_trace_begin/end) and the
 * collectives comm.c records land in ctx->events; at the end of a launch
 * mt__trace_write turns every device's events into one Chrome trace JSON
 * file (the "JSON Array/Object Format" that chrome://tracing and Perfetto
 * open), one track per device:
 *
 *   {"traceEvents":[
 *   {"name":"process_name","ph":"M","pid":0,"tid":0,"args":{"name":"meshtrain"}},
 *   {"name":"thread_name","ph":"M","pid":0,"tid":2,"args":{"name":"device 2"}},
 *   {"name":"step","cat":"compute","ph":"X","ts":12.500,"dur":80.250,"pid":0,"tid":2},
 *   {"name":"psum","cat":"comm","ph":"X","ts":92.750,"dur":3.125,"pid":0,"tid":2,
 *    "args":{"bytes":16,"seq":1}},
 *   ...],"displayTimeUnit":"ms"}
 *
 * ts/dur are microseconds since the launch started. "seq" is the collective's
 * 1-based sequence number on its device: every collective is recorded, in
 * issue order, so it is the ordinal of the comm event on its track.
 *
 * Under MPI every rank holds only its own device's events. mt__trace_write
 * gathers them with the launch's own transport (an all_gather over every
 * mesh axis: no MPI code here, and it works across machines), and rank 0
 * writes the file. If the launch failed (a gather could hang or abort), or
 * the gather itself fails, each rank writes its own events to "<path>.<rank>"
 * instead, which is a valid trace on its own. When rank 0 cannot write the
 * file, that is the error (naming the path); mpi.c then makes every rank
 * return the same trace status.
 *
 * The event array grows by doubling: it is one entry per region or
 * collective, not per element; recording must not fail the run, so an
 * allocation failure silently drops the event.
 */
#include "comm/comm_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* Recording                                                                 */
/* ======================================================================== */

static bool tracing(const mt_ctx *ctx) {
    return ctx && ctx->launch && ctx->launch->trace_path;
}

/* A new event at the end of ctx->events, or NULL when memory ran out. */
static mt_trace_event *trace_push(mt_ctx *ctx) {
    if (ctx->n_events == ctx->cap_events) {
        int cap = ctx->cap_events ? 2 * ctx->cap_events : 256;
        mt_trace_event *e = realloc(ctx->events, (size_t)cap * sizeof *e);
        if (!e) return NULL;
        ctx->events = e;
        ctx->cap_events = cap;
    }
    mt_trace_event *e = &ctx->events[ctx->n_events++];
    memset(e, 0, sizeof *e);
    return e;
}

/* Copies name into dst[cap], cut at a UTF-8 character boundary: a cut in the
 * middle of a multi-byte character leaves half of it, which is not UTF-8 (the
 * writer would print it as U+FFFD; cutting before it keeps the name clean). */
static void copy_name(char *dst, size_t cap, const char *name) {
    size_t n = strlen(name);
    if (n >= cap) {
        n = cap - 1;
        /* name[n] is the first byte dropped: while it continues a character
         * that began before the cut, drop that character's start too */
        while (n > 0 && ((unsigned char)name[n] & 0xC0) == 0x80) n--;
    }
    memcpy(dst, name, n);
    dst[n] = '\0';
}

void mt_trace_begin(mt_ctx *ctx, const char *name) {
    if (!tracing(ctx)) return;
    const double now = mt_time_now() - ctx->t_start;
    /* regions do not nest: a begin without an end closes the open one */
    if (ctx->open_region >= 0 && ctx->open_region < ctx->n_events)
        ctx->events[ctx->open_region].t1 = now;
    ctx->open_region = -1;
    mt_trace_event *e = trace_push(ctx);
    if (!e) return;
    e->t0 = e->t1 = now;
    copy_name(e->name, sizeof e->name, name ? name : "region");
    e->is_comm = false;
    ctx->open_region = ctx->n_events - 1;
}

void mt_trace_end(mt_ctx *ctx) {
    if (!tracing(ctx) || ctx->open_region < 0) return;
    if (ctx->open_region < ctx->n_events)
        ctx->events[ctx->open_region].t1 = mt_time_now() - ctx->t_start;
    ctx->open_region = -1;
}

/* ======================================================================== */
/* Writing                                                                   */
/* ======================================================================== */

/* One device's events as the writer sees them. */
typedef struct {
    int                   device;
    const mt_trace_event *events;
    int                   n;
    int                   open;     /* index of a region never ended, -1 none */
    double                t_end;    /* closes that region */
} track;

/* The length of the well-formed UTF-8 sequence at p (n bytes left), 0 if
 * there is none: no overlong forms, no surrogates, nothing above U+10FFFF
 * (RFC 3629, table 3-7 of the Unicode standard). */
static size_t utf8_len(const unsigned char *p, size_t n) {
    const unsigned c = p[0];
    size_t len;
    unsigned lo = 0x80, hi = 0xBF;   /* the range of the second byte */
    if (c < 0x80) return 1;
    else if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;          /* overlong */
        else if (c == 0xED) hi = 0x9F;     /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;          /* overlong */
        else if (c == 0xF4) hi = 0x8F;     /* above U+10FFFF */
    } else {
        return 0;
    }
    if (n < len || p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    return len;
}

/* A JSON string of at most `cap` bytes of s: quotes, backslashes and control
 * bytes escaped, and bytes that are not UTF-8 written as U+FFFD — JSON must be
 * UTF-8, and one stray byte in a region name (Latin-1 text, a name cut
 * elsewhere) would make the whole file unreadable to json.load and Perfetto. */
static void put_json_string(FILE *f, const char *s, size_t cap) {
    const unsigned char *p = (const unsigned char *)s;
    const size_t n = strnlen(s, cap);
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        const unsigned c = p[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c), i++;
        else if (c < 0x20) fprintf(f, "\\u%04x", c), i++;
        else {
            size_t len = utf8_len(p + i, n - i);
            if (len == 0) fputs("\\ufffd", f), i++;
            else fwrite(p + i, 1, len, f), i += len;
        }
    }
    fputc('"', f);
}

static mt_status write_json(const char *path, const track *tracks, int n_tracks) {
    FILE *f = fopen(path, "w");
    if (!f)
        return mt_fail(MT_EIO, "cannot write the trace to '%s'; check that its directory "
                       "exists and is writable", path);
    fputs("{\"traceEvents\":[\n", f);
    fputs("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"tid\":0,"
          "\"args\":{\"name\":\"meshtrain\"}}", f);
    for (int t = 0; t < n_tracks; t++) {
        const int dev = tracks[t].device;
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,"
                "\"args\":{\"name\":\"device %d\"}}", dev, dev);
        fprintf(f, ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,"
                "\"args\":{\"sort_index\":%d}}", dev, dev);
    }
    for (int t = 0; t < n_tracks; t++) {
        const track *tr = &tracks[t];
        uint64_t seq = 0;
        for (int i = 0; i < tr->n; i++) {
            const mt_trace_event *e = &tr->events[i];
            double t1 = i == tr->open ? tr->t_end : e->t1;
            if (t1 < e->t0) t1 = e->t0;
            fputs(",\n{\"name\":", f);
            put_json_string(f, e->name, sizeof e->name);
            fprintf(f, ",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":0,\"tid\":%d",
                    e->is_comm ? "comm" : "compute", e->t0 * 1e6, (t1 - e->t0) * 1e6, tr->device);
            if (e->is_comm)
                fprintf(f, ",\"args\":{\"bytes\":%llu,\"seq\":%llu}",
                        (unsigned long long)e->bytes, (unsigned long long)++seq);
            fputc('}', f);
        }
    }
    fputs("\n],\"displayTimeUnit\":\"ms\"}\n", f);
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0) bad = true;
    if (bad)
        return mt_fail(MT_EIO, "writing the trace to '%s' failed (disk full?)", path);
    return MT_OK;
}

/* The writer's view of a local ctx (its events stay where they are). */
static track local_track(mt_ctx *ctx) {
    track t = {.device = ctx->device, .events = ctx->events, .n = ctx->n_events,
               .open = ctx->open_region, .t_end = mt_time_now() - ctx->t_start};
    return t;
}

/* Every axis of the mesh in mesh order: the group of all devices, whose rank
 * order is the device id order. */
static mt_axes all_axes(const mt_mesh *mesh) {
    mt_axes a;
    memset(&a, 0, sizeof a);
    a.n = mt_mesh_ndim(mesh);
    for (int i = 0; i < a.n; i++) a.axis[i] = (uint8_t)i;
    return a;
}

/* The event record travels as int32 words through the transport. */
_Static_assert(sizeof(mt_trace_event) % 4 == 0, "trace events travel as int32 words");
#define EVENT_WORDS (sizeof(mt_trace_event) / 4)

/* MPI, one device per rank: all_gather every rank's events, rank 0 writes.
 * Every rank must call this (the gathers are collectives). *gathered says
 * whether the events arrived: a failure after that is rank 0's write, which
 * per-rank files would not help (the same directory). */
static mt_status gather_and_write(mt_launch_state *ls, mt_ctx *ctx, bool *gathered) {
    const mt_mesh *mesh = ls->mesh;
    const mt_axes all = all_axes(mesh);
    const int P = mt_mesh_size(mesh);
    track mine = local_track(ctx);
    /* copy first: the gathers below are collectives that comm.c records,
     * which may grow (move) ctx->events */
    int32_t n_mine = mine.n, open_mine = mine.open;
    int32_t *counts = calloc((size_t)P * 2, sizeof *counts);
    mt_trace_event *send = malloc(((size_t)n_mine + 1) * sizeof *send);
    mt_trace_event *all_ev = NULL;
    track *tracks = calloc((size_t)P, sizeof *tracks);
    mt_status s = MT_OK;
    if (!counts || !send || !tracks) {
        s = mt_fail(MT_ENOMEM, "cannot allocate the trace of %d devices", P);
        goto done;
    }
    if (n_mine) memcpy(send, mine.events, (size_t)n_mine * sizeof *send);
    int32_t head[2] = {n_mine, open_mine};
    s = mt_all_gather(ctx, all, head, counts, 2, MT_I32);
    if (s != MT_OK) goto done;
    int32_t max_n = 0;
    for (int r = 0; r < P; r++)
        if (counts[2 * r] > max_n) max_n = counts[2 * r];
    /* equal sizes for the gather: pad every rank to the longest track */
    mt_trace_event *padded = realloc(send, ((size_t)max_n + 1) * sizeof *send);
    if (!padded) { s = mt_fail(MT_ENOMEM, "cannot allocate %d trace events", max_n); goto done; }
    send = padded;
    if (max_n > n_mine) memset(send + n_mine, 0, (size_t)(max_n - n_mine) * sizeof *send);
    all_ev = malloc(((size_t)max_n * (size_t)P + 1) * sizeof *all_ev);
    if (!all_ev) { s = mt_fail(MT_ENOMEM, "cannot allocate %d trace events", max_n * P); goto done; }
    s = mt_all_gather(ctx, all, send, all_ev, (size_t)max_n * EVENT_WORDS, MT_I32);
    if (s != MT_OK) goto done;
    *gathered = true;
    if (ls->process_rank == 0) {
        for (int r = 0; r < P; r++) {
            tracks[r].device = r;
            tracks[r].events = all_ev + (size_t)r * (size_t)max_n;
            tracks[r].n = counts[2 * r];
            tracks[r].open = counts[2 * r + 1];
            tracks[r].t_end = mine.t_end;   /* rank clocks differ; near enough for an open region */
        }
        s = write_json(ls->trace_path, tracks, P);
    }
done:
    free(tracks);
    free(all_ev);
    free(send);
    free(counts);
    return s;
}

mt_status mt__trace_write(mt_launch_state *ls, mt_ctx **ctxs, int n) {
    if (!ls || !ls->trace_path) return MT_OK;
    if (n <= 0 || !ctxs) return MT_OK;
    if (ls->process_size <= 1) {
        /* one process holds every device: write them all */
        track *tracks = calloc((size_t)n, sizeof *tracks);
        if (!tracks) return mt_fail(MT_ENOMEM, "cannot allocate the trace of %d devices", n);
        for (int i = 0; i < n; i++) tracks[i] = local_track(ctxs[i]);
        mt_status s = write_json(ls->trace_path, tracks, n);
        free(tracks);
        return s;
    }
    if (n == 1 && !atomic_load(&ls->abort)) {
        bool gathered = false;
        mt_status s = gather_and_write(ls, ctxs[0], &gathered);
        if (s == MT_OK || gathered) return s;
        /* the gather failed: keep at least this rank's timeline */
    }
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", ls->trace_path, ls->process_rank);
    track *tracks = calloc((size_t)n, sizeof *tracks);
    if (!tracks) return mt_fail(MT_ENOMEM, "cannot allocate the trace of %d devices", n);
    for (int i = 0; i < n; i++) tracks[i] = local_track(ctxs[i]);
    mt_status s = write_json(path, tracks, n);
    free(tracks);
    return s;
}
