/*
 * report_read.c — reads a trace for mt_report (report.h), strictly: the
 * writer's layout (src/profile/trace.c) line by line, each event a flat JSON
 * object with an optional "args" object of strings and numbers. Any other
 * shape fails with the line, the byte offset and what was expected; a value
 * the analysis cannot use (a NaN or infinite time, a negative duration, a
 * device id out of range, an absurd count) fails naming the line, the event
 * and the field. All of it in O(n log n): events are matched to their
 * thread names by binary search, a device's steps checked after one sort.
 */
#include "report_impl.h"

#include "meshtrain/files.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A trace larger than this is refused before it is read (a 4000-step trace
 * of a small GPT on 2 devices is 34 MB). */
#define MAX_TRACE_BYTES (INT64_C(4) << 30)
/* The events a report holds (an int counts them; the analysis allocates a
 * few arrays of this many). */
#define MAX_EVENTS (INT_MAX / 8)

/* ======================================================================== */
/* A cursor over one line                                                    */
/* ======================================================================== */

typedef struct {
    const char *path, *s, *p;   /* the line and the position in it */
    long        line, off;      /* line number (1-based), line's byte offset */
    long        event;          /* the event's number in "traceEvents" (1-based) */
} cursor;

static mt_status expected(const cursor *c, const char *what) {
    long at = c->off + (long)(c->p - c->s);
    char got[24];
    if (*c->p == '\0' || *c->p == '\n') snprintf(got, sizeof got, "the end of the line");
    else snprintf(got, sizeof got, "'%.12s'", c->p);
    return mt_fail(MT_EFORMAT, "trace '%s', line %ld (byte %ld): expected %s, found %s; is it "
                   "a trace written by `meshtrain train --trace`?", c->path, c->line, at, what, got);
}

/* A field whose value the analysis cannot use: names the file, the line, the
 * event and the field, then what is wrong (printf-style). */
static mt_status bad_field(const cursor *c, const char *field, const char *fmt, ...) {
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return mt_fail(MT_EFORMAT, "trace '%s', line %ld (event %ld): \"%s\" %s; is it a trace "
                   "written by `meshtrain train --trace`?", c->path, c->line, c->event, field, what);
}

static bool eat(cursor *c, char ch) {
    if (*c->p != ch) return false;
    c->p++;
    return true;
}

/* A string without escapes other than \" and \\ (the writer's names). */
static mt_status read_string(cursor *c, char *out, size_t n) {
    if (!eat(c, '"')) return expected(c, "a string");
    size_t k = 0;
    while (*c->p && *c->p != '"' && *c->p != '\n') {
        char ch = *c->p++;
        if (ch == '\\' && *c->p) ch = *c->p++;
        if (k + 1 < n) out[k++] = ch;
    }
    out[k] = '\0';
    if (!eat(c, '"')) return expected(c, "the string's closing '\"'");
    return MT_OK;
}

/* The writer's numbers, "-123.456" with 15 digits at most and no exponent,
 * without strtod: their digits as an integer below 2^53 over a power of ten
 * up to 10^22 are both exact doubles, so one division is the correctly
 * rounded value strtod gives (Clinger's fast path). false: another form. */
static bool plain_number(const char *p, double *v, const char **end) {
    static const double TEN[] = {1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15};
    const bool neg = *p == '-';
    const char *q = p + neg;
    uint64_t m = 0;
    int digits = 0, frac = -1;
    if (q[0] == '0' && isdigit((unsigned char)q[1])) return false;   /* JSON: no leading 0 */
    for (;; q++) {
        if (isdigit((unsigned char)*q)) {
            m = m * 10 + (uint64_t)(*q - '0');
            if (++digits > 15) return false;
            if (frac >= 0) frac++;
        } else if (*q == '.' && frac < 0 && digits > 0) {
            frac = 0;
        } else {
            break;
        }
    }
    if (digits == 0 || frac == 0 || isalnum((unsigned char)*q) || (*q && strchr(".+-", *q)))
        return false;
    double x = (double)m / TEN[frac > 0 ? frac : 0];
    *v = neg ? -x : x;
    *end = q;
    return true;
}

/* A JSON number (so never nan, inf or hex: strtod alone takes them), finite.
 * `key` names it in the message. */
static mt_status read_number(cursor *c, const char *key, double *v) {
    const char *q = c->p + (*c->p == '-');
    if (!isdigit((unsigned char)*q))
        return bad_field(c, key, "is not a number (found '%.12s')", c->p);
    if (plain_number(c->p, v, &q)) {
        c->p = q;
        return MT_OK;
    }
    char *end;
    errno = 0;
    *v = strtod(c->p, &end);
    for (q = c->p; q < end; q++)
        if (!isdigit((unsigned char)*q) && !strchr("+-.eE", *q)) break;
    if (end == c->p || q != end || errno)
        return bad_field(c, key, "is not a finite JSON number (found '%.12s')", c->p);
    c->p = end;
    return MT_OK;
}

/* ======================================================================== */
/* One event                                                                 */
/* ======================================================================== */

typedef struct {
    char   name[MT__REPORT_NAME], cat[16], ph[4], thread[MT__REPORT_NAME], level[16];
    double ts, dur, tid, pid, flops, bytes, flops_per_step, seq;
    bool   has_ts, has_dur, has_tid, has_pid, has_seq;
} fields;

/* "args": {"k": number or string, ...} */
static mt_status read_args(cursor *c, fields *f) {
    if (!eat(c, '{')) return expected(c, "'{' opening \"args\"");
    if (eat(c, '}')) return MT_OK;
    for (;;) {
        char key[32], str[MT__REPORT_NAME];
        double v = 0;
        mt_status s = read_string(c, key, sizeof key);
        if (s == MT_OK && !eat(c, ':')) s = expected(c, "':' after an args key");
        if (s == MT_OK) s = *c->p == '"' ? read_string(c, str, sizeof str) : read_number(c, key, &v);
        if (s != MT_OK) return s;
        if (strcmp(key, "flops") == 0) f->flops = v;
        else if (strcmp(key, "bytes") == 0) f->bytes = v;
        else if (strcmp(key, "flops_per_step") == 0) f->flops_per_step = v;
        else if (strcmp(key, "seq") == 0) f->seq = v, f->has_seq = true;
        else if (strcmp(key, "name") == 0 && c->p[-1] == '"') memcpy(f->thread, str, sizeof str);
        else if (strcmp(key, "level") == 0 && c->p[-1] == '"') {
            size_t k = strnlen(str, sizeof f->level - 1);   /* a longer one is no level */
            memcpy(f->level, str, k);
            f->level[k] = '\0';
        }
        if (eat(c, '}')) return MT_OK;
        if (!eat(c, ',')) return expected(c, "',' or '}' in \"args\"");
    }
}

static mt_status read_event(cursor *c, fields *f) {
    memset(f, 0, sizeof *f);
    if (!eat(c, '{')) return expected(c, "'{' opening an event");
    for (;;) {
        char key[16];
        mt_status s = read_string(c, key, sizeof key);
        if (s == MT_OK && !eat(c, ':')) s = expected(c, "':' after a key");
        if (s != MT_OK) return s;
        if (strcmp(key, "name") == 0) s = read_string(c, f->name, sizeof f->name);
        else if (strcmp(key, "cat") == 0) s = read_string(c, f->cat, sizeof f->cat);
        else if (strcmp(key, "ph") == 0) s = read_string(c, f->ph, sizeof f->ph);
        else if (strcmp(key, "args") == 0) s = read_args(c, f);
        else {
            double v;
            s = read_number(c, key, &v);
            if (strcmp(key, "ts") == 0) f->ts = v, f->has_ts = true;
            else if (strcmp(key, "dur") == 0) f->dur = v, f->has_dur = true;
            else if (strcmp(key, "tid") == 0) f->tid = v, f->has_tid = true;
            else if (strcmp(key, "pid") == 0) f->pid = v, f->has_pid = true;
        }
        if (s != MT_OK) return s;
        if (eat(c, '}')) return MT_OK;
        if (!eat(c, ',')) return expected(c, "',' or '}' after a value");
    }
}

static mt__ev_cat category(const char *cat) {
    static const char *const NAMES[] = {"op", "compute", "comm", "idle", "step"};
    for (int i = 0; i < 5; i++)
        if (strcmp(cat, NAMES[i]) == 0) return (mt__ev_cat)i;
    return MT__EV_OTHER;
}

/* A whole number in [lo, hi] in *out, or a message naming the field. */
static mt_status whole(const cursor *c, const char *field, double v, double lo, double hi,
                       long *out) {
    if (!(v >= lo && v <= hi && v == floor(v)))
        return bad_field(c, field, "is %.17g; expected a whole number from %.0f to %.0f", v, lo, hi);
    *out = (long)v;
    return MT_OK;
}

/* A thread name "device N" or "device N comm K" (the writer's; what follows
 * is not read, as sscanf("device %d comm %d") did): *dev = N, *lane = K or
 * 0. Returns false for a name of no device; N and K out of range fail. */
static mt_status thread_device(const cursor *c, const char *name, bool *is_dev, int *dev,
                               int *lane) {
    *is_dev = false, *lane = 0;
    if (strncmp(name, "device", 6) != 0) return MT_OK;
    const char *p = name + 6;
    char *end;
    while (isspace((unsigned char)*p)) p++;
    errno = 0;
    long n = strtol(p, &end, 10);
    if (end == p) return MT_OK;
    if (errno || n < 0 || n >= MT__REPORT_MAX_DEVICE)
        return bad_field(c, "args.name", "names device '%.20s'; expected a device from 0 to %d",
                         p, MT__REPORT_MAX_DEVICE - 1);
    *is_dev = true, *dev = (int)n;
    p = end;
    while (isspace((unsigned char)*p)) p++;
    if (strncmp(p, "comm", 4) != 0) return MT_OK;
    p += 4;
    errno = 0;
    long k = strtol(p, &end, 10);
    if (end == p) return MT_OK;
    if (errno || k < 1 || k > MT__REPORT_MAX_LANE)
        return bad_field(c, "args.name", "names comm lane '%.20s'; expected a lane from 1 to %d",
                         p, MT__REPORT_MAX_LANE);
    *lane = (int)k;
    return MT_OK;
}

/* The N of a span named "step N" (as sscanf("step %d") read it: spaces
 * optional, a sign allowed); -1 for another name. N must fit an int. */
static mt_status step_number(const cursor *c, const char *name, int *step) {
    *step = -1;
    if (strncmp(name, "step", 4) != 0) return MT_OK;
    const char *p = name + 4;
    char *end;
    while (isspace((unsigned char)*p)) p++;
    errno = 0;
    long k = strtol(p, &end, 10);
    if (end == p) return MT_OK;
    if (errno || k < 0 || k > INT_MAX)
        return bad_field(c, "name", "is step '%.20s'; expected a step number from 0 to %d", p,
                         INT_MAX);
    *step = (int)k;
    return MT_OK;
}

/* The fields of an "X" event that the analysis uses, checked (and the pid,
 * which it does not, but which is no process's when negative or huge). */
static mt_status check_span(const cursor *c, const fields *f, long *tid) {
    long pid;
    mt_status s = whole(c, "tid", f->tid, 0, (double)MT__REPORT_MAX_TID, tid);
    if (s == MT_OK && f->has_pid) s = whole(c, "pid", f->pid, 0, INT_MAX, &pid);
    if (s != MT_OK) return s;
    if (!(fabs(f->ts) <= MT__REPORT_MAX_US))
        return bad_field(c, "ts", "is %g; expected a time in µs within ±%g", f->ts, MT__REPORT_MAX_US);
    if (!(f->dur >= 0 && f->dur <= MT__REPORT_MAX_US))
        return bad_field(c, "dur", "is %g; expected a duration in µs from 0 to %g", f->dur,
                         MT__REPORT_MAX_US);
    if (!(f->flops >= 0 && f->flops <= MT__REPORT_MAX_COUNT))
        return bad_field(c, "args.flops", "is %g; expected a count from 0 to %g", f->flops,
                         MT__REPORT_MAX_COUNT);
    if (!(f->bytes >= 0 && f->bytes <= MT__REPORT_MAX_COUNT))
        return bad_field(c, "args.bytes", "is %g; expected a count from 0 to %g", f->bytes,
                         MT__REPORT_MAX_COUNT);
    long seq;
    if (f->has_seq) return whole(c, "args.seq", f->seq, 0, MT__REPORT_MAX_SEQ, &seq);
    return MT_OK;
}

/* Files a metadata event into the report. */
static mt_status keep_meta(mt_report *r, cursor *c, const fields *f) {
    if (strcmp(f->name, "model") == 0) {
        if (!(f->flops_per_step > 0 && f->flops_per_step <= MT__REPORT_MAX_COUNT * 1e9))
            return expected(c, "a \"model\" event with \"flops_per_step\" > 0 (and finite)");
        r->traced_model_flops = f->flops_per_step;
        return MT_OK;
    }
    if (strcmp(f->name, "cpu_isa") == 0) {
        if (!f->level[0]) return expected(c, "a \"cpu_isa\" event with a \"level\"");
        memcpy(r->traced_isa, f->level, sizeof r->traced_isa);
        return MT_OK;
    }
    if (strcmp(f->name, "thread_name") != 0 || !f->has_tid) return MT_OK;
    bool is_dev;
    int dev, lane;
    long tid = 0;
    mt_status s = thread_device(c, f->thread, &is_dev, &dev, &lane);
    if (s != MT_OK || !is_dev) return s;
    if ((s = whole(c, "tid", f->tid, 0, (double)MT__REPORT_MAX_TID, &tid)) != MT_OK) return s;
    if (r->n_tracks == r->cap_tracks) {
        if (r->cap_tracks >= MAX_EVENTS / 2)
            return bad_field(c, "tid", "names one track too many (%d already)", r->n_tracks);
        int cap = r->cap_tracks ? 2 * r->cap_tracks : 16;
        void *p = realloc(r->tracks, (size_t)cap * sizeof *r->tracks);
        if (!p) return mt_fail(MT_ENOMEM, "out of memory reading '%s'", c->path);
        r->tracks = p, r->cap_tracks = cap;
    }
    r->tracks[r->n_tracks++] = (mt__report_track){tid, dev, lane};
    return MT_OK;
}

/* Files one event into the report. */
static mt_status keep(mt_report *r, cursor *c, const fields *f) {
    if (strcmp(f->ph, "M") == 0) return keep_meta(r, c, f);
    if (strcmp(f->ph, "X") != 0) return MT_OK;
    if (!f->has_ts || !f->has_dur || !f->has_tid || !f->name[0])
        return expected(c, "an \"X\" event with \"name\", \"ts\", \"dur\" and \"tid\"");
    long tid = 0;
    int step = -1;
    mt__ev_cat cat = category(f->cat);
    mt_status s = check_span(c, f, &tid);
    if (s == MT_OK && cat == MT__EV_STEP) s = step_number(c, f->name, &step);
    if (s != MT_OK) return s;
    if (r->n_ev == r->cap_ev) {
        if (r->cap_ev >= MAX_EVENTS / 2)
            return mt_fail(MT_EFORMAT, "trace '%s', line %ld: more than %d events; a report "
                           "reads at most that many (trace fewer steps: --trace-steps)",
                           c->path, c->line, r->n_ev);
        int cap = r->cap_ev ? 2 * r->cap_ev : 256;
        void *p = realloc(r->ev, (size_t)cap * sizeof *r->ev);
        if (!p) return mt_fail(MT_ENOMEM, "out of memory reading '%s'", c->path);
        r->ev = p, r->cap_ev = cap;
    }
    mt__report_ev *e = &r->ev[r->n_ev++];
    memset(e, 0, sizeof *e);
    memcpy(e->name, f->name, sizeof e->name);
    e->cat = cat;
    e->tid = tid;
    e->line = c->line;
    e->step = step;
    e->ts = f->ts, e->dur = f->dur, e->flops = f->flops, e->bytes = f->bytes;
    e->seq = f->has_seq && e->cat == MT__EV_COMM ? (long)f->seq : -1;
    return MT_OK;
}

/* ======================================================================== */
/* Tracks and steps                                                          */
/* ======================================================================== */

/* Thread names by tid. */
static int by_tid(const void *x, const void *y) {
    const mt__report_track *p = x, *q = y;
    return (p->tid > q->tid) - (p->tid < q->tid);
}

/* A thread name and its place in the file: a tid named twice keeps its
 * first name. */
typedef struct {
    mt__report_track t;
    int              i;
} ranked;

static int by_tid_then_place(const void *x, const void *y) {
    const ranked *p = x, *q = y;
    if (p->t.tid != q->t.tid) return (p->t.tid > q->t.tid) - (p->t.tid < q->t.tid);
    return (p->i > q->i) - (p->i < q->i);
}

/* Gives each event its device and lane: tid N < 100000 is device N's own
 * track; another tid must be named "device N comm K". The tracks become one
 * per tid (its first name), sorted by tid. */
static mt_status resolve(mt_report *r, const char *path) {
    ranked *rk = malloc(((size_t)r->n_tracks + 1) * sizeof *rk);
    if (!rk) return mt_fail(MT_ENOMEM, "out of memory reading '%s'", path);
    for (int t = 0; t < r->n_tracks; t++) rk[t] = (ranked){r->tracks[t], t};
    qsort(rk, (size_t)r->n_tracks, sizeof *rk, by_tid_then_place);
    int n = 0;
    for (int k = 0; k < r->n_tracks; k++)
        if (k == 0 || rk[k].t.tid != rk[k - 1].t.tid) r->tracks[n++] = rk[k].t;
    r->n_tracks = n;
    free(rk);
    for (int i = 0; i < r->n_ev; i++) {
        mt__report_ev *e = &r->ev[i];
        mt__report_track key = {.tid = e->tid};
        const mt__report_track *t =
            n ? bsearch(&key, r->tracks, (size_t)n, sizeof key, by_tid) : NULL;
        if (t) e->device = t->device, e->lane = t->lane;
        else if (e->tid < MT__REPORT_LANE_TID) e->device = (int)e->tid, e->lane = 0;
        else
            return mt_fail(MT_EFORMAT, "trace '%s', line %ld: event '%s' is on tid %ld, which no "
                           "thread_name names \"device N\" or \"device N comm K\"",
                           path, e->line, e->name, e->tid);
    }
    return MT_OK;
}

/* A device's step span, for the check below. */
typedef struct {
    int    device, step;
    double t0, t1;
    long   line;
} step_span;

/* qsort: by device, then start (then line); by device, then step number. */
static int by_device_start(const void *x, const void *y) {
    const step_span *p = x, *q = y;
    if (p->device != q->device) return (p->device > q->device) - (p->device < q->device);
    if (p->t0 != q->t0) return (p->t0 > q->t0) - (p->t0 < q->t0);
    return (p->line > q->line) - (p->line < q->line);
}

static int by_device_step(const void *x, const void *y) {
    const step_span *p = x, *q = y;
    if (p->device != q->device) return (p->device > q->device) - (p->device < q->device);
    if (p->step != q->step) return (p->step > q->step) - (p->step < q->step);
    return (p->line > q->line) - (p->line < q->line);
}

/* The writer prints times to the ns: a step may seem to end up to that
 * much after the next begins. */
#define STEP_OVERLAP_US 0.01

/* A device's steps (its own track's "step N" spans) follow one another:
 * each number once, none starting before the ones before it ended. The
 * analysis relies on it (each span is visited once per step). */
static mt_status check_steps(const mt_report *r, const char *path) {
    step_span *v = malloc(((size_t)r->n_ev + 1) * sizeof *v);
    if (!v) return mt_fail(MT_ENOMEM, "out of memory reading '%s'", path);
    int m = 0;
    for (int i = 0; i < r->n_ev; i++) {
        const mt__report_ev *e = &r->ev[i];
        if (e->cat == MT__EV_STEP && e->lane == 0 && e->step >= 0)
            v[m++] = (step_span){e->device, e->step, e->ts, e->ts + e->dur, e->line};
    }
    mt_status s = MT_OK;
    qsort(v, (size_t)m, sizeof *v, by_device_step);
    for (int k = 1; k < m && s == MT_OK; k++)
        if (v[k].device == v[k - 1].device && v[k].step == v[k - 1].step)
            s = mt_fail(MT_EFORMAT, "trace '%s', lines %ld and %ld: device %d has two spans of "
                        "step %d; a trace holds each step of a device once", path,
                        v[k - 1].line, v[k].line, v[k].device, v[k].step);
    qsort(v, (size_t)m, sizeof *v, by_device_start);
    double end = -INFINITY;
    int last = 0;
    for (int k = 0; k < m && s == MT_OK; k++) {
        if (k > 0 && v[k].device != v[k - 1].device) end = -INFINITY;
        if (v[k].t0 < end - STEP_OVERLAP_US)
            s = mt_fail(MT_EFORMAT, "trace '%s', line %ld: device %d's step %d starts at %.3f µs, "
                        "before its step %d (line %ld) ended at %.3f µs; a device's steps follow "
                        "one another", path, v[k].line, v[k].device, v[k].step, v[k].t0,
                        v[last].step, v[last].line, end);
        if (v[k].t1 > end) end = v[k].t1, last = k;
    }
    free(v);
    return s;
}

/* ======================================================================== */
/* The file                                                                  */
/* ======================================================================== */

static mt_status read_lines(mt_report *r, FILE *fp, const char *path) {
    static const char FIRST[] = "{\"traceEvents\":[", LAST[] = "],\"displayTimeUnit\":\"ms\"}";
    char *line = NULL;
    size_t cap = 0;
    long off = 0, lineno = 0;
    bool closed = false, comma = true;   /* comma: the previous event ended in ',' */
    long events = 0;
    ssize_t len;
    mt_status s = MT_OK;
    while (s == MT_OK && (len = getline(&line, &cap, fp)) >= 0) {
        lineno++;
        cursor c = {path, line, line, lineno, off, events + 1};
        off += len;
        if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
        if (lineno == 1) {
            if (strcmp(line, FIRST) != 0) s = expected(&c, "'{\"traceEvents\":[' on the first line");
            continue;
        }
        if (closed) {
            s = expected(&c, "nothing after the closing line");
        } else if (strcmp(line, LAST) == 0) {
            closed = true;
        } else if (!comma) {
            s = expected(&c, "no event after one that did not end in ','");
        } else {
            fields f;
            s = read_event(&c, &f);
            comma = eat(&c, ',');
            events++;
            if (s == MT_OK && *c.p) s = expected(&c, "the end of the line after an event");
            if (s == MT_OK) s = keep(r, &c, &f);
        }
    }
    free(line);
    if (s != MT_OK) return s;
    if (ferror(fp)) return mt_fail(MT_EIO, "cannot read trace '%s': %s", path, strerror(errno));
    if (lineno == 0)
        return mt_fail(MT_EFORMAT, "trace '%s' is empty; give the file `meshtrain train --trace` "
                       "wrote", path);
    if (!closed)
        return mt_fail(MT_EFORMAT, "trace '%s' is truncated at byte %ld (line %ld): expected the "
                       "closing line '%s'; was the run stopped before it wrote the trace?",
                       path, off, lineno, LAST);
    if (comma && events > 0)
        return mt_fail(MT_EFORMAT, "trace '%s', line %ld: the last event ends in ',' before "
                       "the closing line", path, lineno - 1);
    s = resolve(r, path);
    return s == MT_OK ? check_steps(r, path) : s;
}

mt_status mt_report_read(const char *path, mt_report **out) {
    *out = NULL;
    FILE *fp = NULL;
    mt_status s = mt_input_open(path, "trace", MAX_TRACE_BYTES, &fp, NULL);
    if (s != MT_OK) return s;
    mt_report *r = calloc(1, sizeof *r);
    if (!r) {
        fclose(fp);
        return mt_fail(MT_ENOMEM, "out of memory reading '%s'", path);
    }
    s = read_lines(r, fp, path);
    fclose(fp);
    if (s != MT_OK) {
        mt_report_free(r);
        return s;
    }
    *out = r;
    return MT_OK;
}

void mt_report_free(mt_report *r) {
    if (!r) return;
    free(r->ev);
    free(r->tracks);
    free(r->ops);
    free(r->devs);
    free(r->steps);
    free(r);
}
