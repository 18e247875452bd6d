/*
 * trace.c — per-device timelines and the Chrome trace writer.
 *
 * A timeline (mt_trace_list) holds a device's compute regions and the spans
 * of its collectives, times in seconds since the launch started. At the end
 * of a launch the writer turns every device's events into one Chrome trace
 * JSON file (the "JSON Array/Object Format" that chrome://tracing and Perfetto
 * open), one track per device:
 *
 *   {"traceEvents":[
 *   {"name":"process_name","ph":"M","pid":0,"tid":0,"args":{"name":"meshtrain"}},
 *   {"name":"cpu_isa","ph":"M","pid":0,"tid":0,"args":{"level":"avx2","best":"avx512"}},
 *   {"name":"thread_name","ph":"M","pid":0,"tid":2,"args":{"name":"device 2"}},
 *   {"name":"step","cat":"compute","ph":"X","ts":12.500,"dur":80.250,"pid":0,"tid":2},
 *   {"name":"psum","cat":"comm","ph":"X","ts":92.750,"dur":3.125,"pid":0,"tid":2,
 *    "args":{"bytes":16,"seq":1}},
 *   ...],"displayTimeUnit":"ms"}
 *
 * ts/dur are microseconds since the launch started (with a trace run,
 * comm.h: since its first launch, so that a training run's steps follow one
 * another). "bytes" is the
 * collective's size as nccl-tests counts it (the all-reduce buffer, the
 * all-gather's output, the reduce-scatter's input, the all-to-all buffer),
 * as `meshtrain explain` prints it. "seq" is the collective's
 * 1-based sequence number on its device: every collective is recorded, in
 * issue order, so it is the ordinal of the comm event on its track (async
 * ones included, wherever they are drawn). Sends and receives are comm
 * events too, numbered with the collectives ("send 'pipe'", "recv 'pipe'"),
 * with the other device and the tag in their args:
 *   "args":{"bytes":4096,"seq":3,"peer":1,"tag":7}
 *
 * A training step is a span "step N" (cat "step"), on the device's track and
 * on each of its comm lanes; a graph node is a span named by its op (cat
 * "op") inside its phase's region, with its phase, layer (its transformer
 * block, as the model's builder tags it: mt_graph_set_block), cost and
 * output tensor:
 *   {"name":"matmul","cat":"op",...,"args":{"phase":"W","layer":1,
 *    "flops":524288,"bytes":69632,"out":"grad.h.1.mlp.fc.w"}}
 * Idle time is written, not recorded: within each step, the gaps of at
 * least IDLE_MIN_S between the spans of the device's own track (regions,
 * ops, blocking collectives) are spans "idle" (cat "idle").
 *
 * Complete events on one track must nest (Perfetto drops those that do not),
 * but an asynchronous collective runs from its start to its completion while
 * the device computes and starts others: such events go on lanes of their
 * own below the device's track, "device 2 comm 1", "device 2 comm 2", ...
 * (tid LANE_TID + 64·device + lane, only the lanes used), each event on the
 * first lane free at its start, so that no two on a lane overlap.
 *
 * JSON must be UTF-8, and one stray byte in a region name (Latin-1 text, a
 * name cut in the middle of a character) would make the whole file
 * unreadable to json.load and Perfetto: names are cut at character
 * boundaries when recorded, and the writer replaces what is still not UTF-8.
 */
#include "profile/profile_impl.h"
#include "meshtrain/files.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* Recording                                                                 */
/* ======================================================================== */

bool mt__trace_list_init(mt_trace_list *l, int cap) {
    l->n = l->first = 0;
    l->open = -1;
    l->step = -1;
    l->n_steps = 0;
    l->events = malloc((size_t)cap * sizeof *l->events);
    l->cap = l->events ? cap : 0;
    return l->events != NULL;
}

void mt__trace_list_free(mt_trace_list *l) {
    free(l->events);
    l->events = NULL;
    l->n = l->cap = l->first = 0;
    l->open = -1;
    l->step = -1;
    l->n_steps = 0;
}

mt_trace_event *mt__trace_push(mt_trace_list *l) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 256;
        mt_trace_event *e = realloc(l->events, (size_t)cap * sizeof *e);
        if (!e) return NULL;
        l->events = e;
        l->cap = cap;
    }
    mt_trace_event *e = &l->events[l->n++];
    memset(e, 0, sizeof *e);
    return e;
}

/* Copies name into dst[cap], cut at a UTF-8 character boundary: a cut in the
 * middle of a multi-byte character leaves half of it, which is not UTF-8 (the
 * writer would print it as U+FFFD; cutting before it keeps the name clean). */
void mt__trace_copy_name(char *dst, size_t cap, const char *name) {
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

void mt__trace_region_begin(mt_trace_list *l, double now, const char *name) {
    /* regions do not nest: a begin without an end closes the open one */
    if (l->open >= 0 && l->open < l->n) l->events[l->open].t1 = now;
    l->open = -1;
    mt_trace_event *e = mt__trace_push(l);
    if (!e) return;
    e->t0 = e->t1 = now;
    mt__trace_copy_name(e->name, sizeof e->name, name ? name : "region");
    e->is_comm = false;
    l->open = l->n - 1;
}

void mt__trace_region_end(mt_trace_list *l, double now) {
    if (l->open >= 0 && l->open < l->n) l->events[l->open].t1 = now;
    l->open = -1;
}

/* Drops the events of the oldest step (those before the second step span):
 * `first` moves past them, and the dropped events leave the array only when
 * they are as many as the kept ones (amortised O(1) per event). */
static void drop_oldest_step(mt_trace_list *l) {
    int seen = 0, k = l->first;
    while (k < l->n && !(l->events[k].kind == MT_TRACE_STEP && seen++ == 1)) k++;
    l->first = k;
    l->n_steps--;
    if (l->open >= 0 && l->open < k) l->open = -1;
    if (l->step >= 0 && l->step < k) l->step = -1;
    if (l->first < l->n - l->first) return;
    memmove(l->events, l->events + k, (size_t)(l->n - k) * sizeof *l->events);
    l->n -= k;
    l->first = 0;
    if (l->open >= 0) l->open -= k;
    if (l->step >= 0) l->step -= k;
}

void mt__trace_step_begin(mt_trace_list *l, double now, int step, int keep) {
    mt__trace_step_end(l, now);
    if (keep > 0)
        while (l->n_steps >= keep) drop_oldest_step(l);
    mt_trace_event *e = mt__trace_push(l);
    if (!e) return;
    e->t0 = e->t1 = now;
    e->kind = MT_TRACE_STEP;
    snprintf(e->name, sizeof e->name, "step %d", step);
    l->step = l->n - 1;
    l->n_steps++;
}

void mt__trace_step_end(mt_trace_list *l, double now) {
    if (l->step >= 0 && l->step < l->n) l->events[l->step].t1 = now;
    l->step = -1;
}

mt_trace_track mt__trace_list_track(const mt_trace_list *l, int device, double t_end) {
    mt_trace_track t = {.device = device, .events = l->events ? l->events + l->first : NULL,
                        .n = l->n - l->first, .open = l->open >= l->first ? l->open - l->first : -1,
                        .t_end = t_end};
    return t;
}

/* ======================================================================== */
/* Writing                                                                   */
/* ======================================================================== */

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

/* The writer's output: events are formatted by hand into a buffer written
 * with one fwrite when full (fprintf of each number and fwrite of each
 * character took four fifths of the writing), the same bytes as printf's
 * "%.3f", "%d", "%llu" and "%.17g". */
typedef struct {
    FILE  *f;
    size_t n;
    char   b[1 << 16];
} out;

/* Writes out what the buffer holds. */
static void out_flush(out *o) {
    if (o->n) fwrite(o->b, 1, o->n, o->f);
    o->n = 0;
}

/* Appends n bytes (flushing first when they do not fit). */
static inline void put_bytes(out *o, const char *s, size_t n) {
    if (o->n + n > sizeof o->b) {
        out_flush(o);
        if (n > sizeof o->b) {
            fwrite(s, 1, n, o->f);
            return;
        }
    }
    memcpy(o->b + o->n, s, n);
    o->n += n;
}

/* Appends one byte; put_cstr a string. */
static inline void put_byte(out *o, char c) {
    if (o->n == sizeof o->b) out_flush(o);
    o->b[o->n++] = c;
}

static void put_cstr(out *o, const char *s) { put_bytes(o, s, strlen(s)); }

/* A string literal, its length known when compiled. */
#define PUT_LIT(o, lit) put_bytes((o), (lit), sizeof(lit) - 1)

/* printf's "%llu" */
static void put_u64(out *o, uint64_t v) {
    char d[24];
    int n = 0;
    do d[sizeof d - 1 - n++] = (char)('0' + v % 10), v /= 10; while (v);
    put_bytes(o, d + sizeof d - n, (size_t)n);
}

/* printf's "%d" of an int, "%lld" of the rest */
static void put_i64(out *o, int64_t v) {
    if (v < 0) put_byte(o, '-');
    put_u64(o, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v);
}

/* printf's "%.3f": the binary value rounded to 3 decimals, a tie to even.
 * In doubles when the rounding is clear (the product's error is below
 * ulp(p) / 2, 2^-52 p at most); exactly in a long double of 64 bits or
 * more (|v| · 1000 takes 53 + 7 bits) when it is within that of a tie;
 * elsewhere, and for values of 1e15 or more, snprintf. */
static void put_fixed3(out *o, double v) {
#if LDBL_MANT_DIG >= 64
    const double a = fabs(v);
    if (a < 1e15) {
        const double p = a * 1000.0, fl = floor(p), fr = p - fl, eps = p * 0x1p-51;
        uint64_t n = (uint64_t)fl;
        if (fr > 0.5 + eps) {
            n++;
        } else if (fr >= 0.5 - eps) {
            const long double pe = (long double)a * 1000.0L;
            n = (uint64_t)pe;
            const long double frac = pe - (long double)n;
            if (frac > 0.5L || (frac == 0.5L && (n & 1))) n++;
        }
        char d[4] = {'.', (char)('0' + n / 100 % 10), (char)('0' + n / 10 % 10),
                     (char)('0' + n % 10)};
        if (signbit(v)) put_byte(o, '-');
        put_u64(o, n / 1000);
        put_bytes(o, d, 4);
        return;
    }
#endif
    char t[400];
    int k = snprintf(t, sizeof t, "%.3f", v);
    put_bytes(o, t, k > 0 ? (size_t)k : 0);
}

/* printf's "%.17g": a whole number below 1e15 is its digits */
static void put_g17(out *o, double v) {
    if (v >= 0 && v < 1e15 && v == floor(v) && !signbit(v)) {
        put_u64(o, (uint64_t)v);
        return;
    }
    char t[40];
    int k = snprintf(t, sizeof t, "%.17g", v);
    put_bytes(o, t, k > 0 ? (size_t)k : 0);
}

/* A JSON string of at most `cap` bytes of s: quotes, backslashes and control
 * bytes escaped, and bytes that are not UTF-8 written as U+FFFD (see the
 * file comment). */
static void put_json_string(out *o, const char *s, size_t cap) {
    static const char HEX[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    const size_t n = strnlen(s, cap);
    put_byte(o, '"');
    for (size_t i = 0; i < n;) {
        const unsigned c = p[i];
        size_t len;
        if (c == '"' || c == '\\') {
            const char e[2] = {'\\', (char)c};
            put_bytes(o, e, 2), i++;
        } else if (c < 0x20) {
            const char e[6] = {'\\', 'u', '0', '0', HEX[c >> 4], HEX[c & 15]};
            put_bytes(o, e, 6), i++;
        } else if ((len = utf8_len(p + i, n - i)) == 0) {
            PUT_LIT(o, "\\ufffd"), i++;
        } else {
            put_bytes(o, s + i, len), i += len;
        }
    }
    put_byte(o, '"');
}

/* Lanes of a track's async events: the end of the last event on each. */
#define LANE_TID  100000
#define MAX_LANES 63
typedef struct {
    double end[MAX_LANES];
    int    n;
} lanes;

/* The lane (1-based) of an event from t0 to t1: the first one free at t0
 * (events come in the order they began), a new one, or when all are taken
 * the last (its events then overlap). */
static int lane_take(lanes *l, double t0, double t1) {
    int k = 0;
    while (k < l->n && l->end[k] > t0) k++;
    if (k == MAX_LANES) k = MAX_LANES - 1;
    if (k == l->n) l->n++;
    if (t1 > l->end[k]) l->end[k] = t1;
    return k + 1;
}

/* The end of event i of a track (an open region ends with the track). */
static double event_end(const mt_trace_track *tr, int i) {
    const mt_trace_event *e = &tr->events[i];
    double t1 = i == tr->open ? tr->t_end : e->t1;
    return t1 < e->t0 ? e->t0 : t1;
}

/* One span: name, cat, times (seconds) and tid; the caller adds args and
 * closes the object. */
static void put_span(out *o, const char *name, size_t cap, const char *cat, double t0, double t1,
                     int tid) {
    PUT_LIT(o, ",\n{\"name\":");
    put_json_string(o, name, cap);
    PUT_LIT(o, ",\"cat\":\"");
    put_cstr(o, cat);
    PUT_LIT(o, "\",\"ph\":\"X\",\"ts\":");
    put_fixed3(o, t0 * 1e6);
    PUT_LIT(o, ",\"dur\":");
    put_fixed3(o, (t1 - t0) * 1e6);
    PUT_LIT(o, ",\"pid\":0,\"tid\":");
    put_i64(o, tid);
}

/* A span of a device's own track, for its steps' idle time. */
typedef struct {
    double t0, t1;
} span;

/* qsort: spans by start. */
static int by_start(const void *a, const void *b) {
    double x = ((const span *)a)->t0, y = ((const span *)b)->t0;
    return (x > y) - (x < y);
}

/* Idle spans shorter than this are not written (the gap between two
 * regions, a few clock reads). */
#define IDLE_MIN_S 1e-6

/* The spans on the device's own track that idle time is the gaps between
 * (regions, ops, blocking collectives; not the steps, nor the async
 * collectives, which run beside the device), sorted by start into own[];
 * returns their count. */
static int own_spans(const mt_trace_track *tr, span *own) {
    int m = 0;
    for (int i = 0; i < tr->n; i++) {
        const mt_trace_event *e = &tr->events[i];
        if (e->kind != MT_TRACE_STEP && !e->is_async) own[m++] = (span){e->t0, event_end(tr, i)};
    }
    bool sorted = true;   /* they mostly are: events come in the order they began */
    for (int k = 1; k < m && sorted; k++) sorted = own[k - 1].t0 <= own[k].t0;
    if (!sorted) qsort(own, (size_t)m, sizeof *own, by_start);
    return m;
}

/* The first of own[m] (sorted) that starts at or after t. */
static int first_from(const span *own, int m, double t) {
    int lo = 0, hi = m;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (own[mid].t0 < t) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The idle spans of the step event s: the gaps, within the step, between
 * the spans that start inside it (own[m], sorted: see own_spans). Only those
 * are visited, so the steps of a track cost O(n log n) together. */
static void put_idle(out *o, const mt_trace_track *tr, int s, const span *own, int m) {
    const mt_trace_event *st = &tr->events[s];
    const double s1 = event_end(tr, s);
    double cur = st->t0;
    for (int k = first_from(own, m, st->t0);; k++) {
        const bool in = k < m && own[k].t0 < s1;
        const double next = in ? own[k].t0 : s1;
        if (next - cur > IDLE_MIN_S) {
            put_span(o, "idle", 5, "idle", cur, next, tr->device);
            put_byte(o, '}');
        }
        if (!in) break;
        if (own[k].t1 > cur) cur = own[k].t1;
    }
}

/* Writes one track's events (and its steps' idle time); false when out of
 * memory. */
static bool put_track(out *o, const mt_trace_track *tr) {
    span *own = malloc(((size_t)tr->n + 1) * sizeof *own);
    if (!own) return false;
    const int m = own_spans(tr, own);
    uint64_t seq = 0;
    lanes l = {.n = 0};
    for (int i = 0; i < tr->n; i++) {
        const mt_trace_event *e = &tr->events[i];
        const double t1 = event_end(tr, i);
        int tid = tr->device;
        if (e->is_async)
            tid = LANE_TID + tr->device * (MAX_LANES + 1) + lane_take(&l, e->t0, t1);
        if (e->kind == MT_TRACE_STEP) {
            put_span(o, e->name, sizeof e->name, "step", e->t0, t1, tid);
            put_byte(o, '}');
            put_idle(o, tr, i, own, m);
            continue;
        }
        if (e->kind == MT_TRACE_OP) {
            put_span(o, e->name, sizeof e->name, "op", e->t0, t1, tid);
            PUT_LIT(o, ",\"args\":{\"phase\":\"");
            put_byte(o, e->phase);
            put_byte(o, '"');
            if (e->layer >= 0) PUT_LIT(o, ",\"layer\":"), put_i64(o, e->layer);
            PUT_LIT(o, ",\"flops\":");
            put_g17(o, e->flops);
            PUT_LIT(o, ",\"bytes\":");
            put_u64(o, e->bytes);
            PUT_LIT(o, ",\"out\":");
            put_json_string(o, e->out, sizeof e->out);
            PUT_LIT(o, "}}");
            continue;
        }
        put_span(o, e->name, sizeof e->name, e->is_comm ? "comm" : "compute", e->t0, t1, tid);
        if (e->is_comm) {
            PUT_LIT(o, ",\"args\":{\"bytes\":");
            put_u64(o, e->bytes);
            PUT_LIT(o, ",\"seq\":");
            put_u64(o, ++seq);
        }
        if (e->is_comm && e->is_p2p) {
            PUT_LIT(o, ",\"peer\":");
            put_i64(o, e->peer);
            PUT_LIT(o, ",\"tag\":");
            put_i64(o, e->tag);
        }
        if (e->is_comm) put_byte(o, '}');
        put_byte(o, '}');
    }
    /* the steps on the comm lanes too, so that each lane shows where a step
     * begins */
    for (int i = 0; i < tr->n; i++) {
        const mt_trace_event *e = &tr->events[i];
        if (e->kind != MT_TRACE_STEP) continue;
        for (int k = 1; k <= l.n; k++) {
            put_span(o, e->name, sizeof e->name, "step", e->t0, event_end(tr, i),
                     LANE_TID + tr->device * (MAX_LANES + 1) + k);
            put_byte(o, '}');
        }
    }
    free(own);
    return true;
}

mt_status mt__trace_write_json_to(FILE *f, const char *name, const mt_trace_track *tracks,
                                  int n_tracks, double model_flops) {
    bool oom = false;
    fputs("{\"traceEvents\":[\n", f);
    fputs("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"tid\":0,"
          "\"args\":{\"name\":\"meshtrain\"}}", f);
    /* the kernel level the run's kernels ran at (the writing process's: a
     * launch runs one), for the report's roofline */
    fprintf(f, ",\n{\"name\":\"cpu_isa\",\"ph\":\"M\",\"pid\":0,\"tid\":0,"
            "\"args\":{\"level\":\"%s\",\"best\":\"%s\"}}", mt_cpu_isa_name(mt_get_cpu_isa()),
            mt_cpu_isa_name(mt_cpu_isa_best()));
    if (model_flops > 0)
        fprintf(f, ",\n{\"name\":\"model\",\"ph\":\"M\",\"pid\":0,\"tid\":0,"
                "\"args\":{\"flops_per_step\":%.17g}}", model_flops);
    for (int t = 0; t < n_tracks; t++) {
        const int dev = tracks[t].device;
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,"
                "\"args\":{\"name\":\"device %d\"}}", dev, dev);
        fprintf(f, ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,"
                "\"args\":{\"sort_index\":%d}}", dev, dev * (MAX_LANES + 1));
        lanes l = {.n = 0};
        for (int i = 0; i < tracks[t].n; i++)
            if (tracks[t].events[i].is_async)
                (void)lane_take(&l, tracks[t].events[i].t0, event_end(&tracks[t], i));
        for (int k = 1; k <= l.n; k++) {
            const int tid = LANE_TID + dev * (MAX_LANES + 1) + k;
            fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,"
                    "\"args\":{\"name\":\"device %d comm %d\"}}", tid, dev, k);
            fprintf(f, ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,"
                    "\"args\":{\"sort_index\":%d}}", tid, dev * (MAX_LANES + 1) + k);
        }
    }
    out *o = malloc(sizeof *o);
    if (o) o->f = f, o->n = 0;
    oom = !o;
    for (int t = 0; t < n_tracks && !oom; t++) oom = !put_track(o, &tracks[t]);
    if (o) out_flush(o);
    free(o);
    fputs("\n],\"displayTimeUnit\":\"ms\"}\n", f);
    if (oom)
        return mt_fail(MT_ENOMEM, "out of memory writing the trace to '%s'", name);
    if (ferror(f))
        return mt_fail(MT_EIO, "writing the trace to '%s' failed (disk full?)", name);
    return MT_OK;
}

typedef struct {
    const char           *path;
    const mt_trace_track *tracks;
    int                   n;
    double                model_flops;
} json_job;

static mt_status write_job(FILE *f, void *arg) {
    const json_job *j = arg;
    return mt__trace_write_json_to(f, j->path, j->tracks, j->n, j->model_flops);
}

mt_status mt__trace_write_json(mt_output *claim, const char *path, const mt_trace_track *tracks,
                               int n_tracks, double model_flops) {
    mt_output *own = NULL;
    if (!claim) {
        mt_status s = mt_output_claim(path, "trace", &own);
        if (s != MT_OK) return s;
        claim = own;
    }
    json_job job = {path, tracks, n_tracks, model_flops};
    mt_status s = mt_output_write(claim, write_job, &job);
    mt_output_close(own);
    return s;
}
