/*
 * report_read.c — reads a trace for mt_report (report.h), strictly: the
 * writer's layout (src/profile/trace.c) line by line, each event a flat JSON
 * object with an optional "args" object of strings and numbers. Any other
 * shape fails with the line, the byte offset and what was expected.
 */
#include "report_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* A cursor over one line                                                    */
/* ======================================================================== */

typedef struct {
    const char *path, *s, *p;   /* the line and the position in it */
    long        line, off;      /* line number (1-based), line's byte offset */
} cursor;

static mt_status expected(const cursor *c, const char *what) {
    long at = c->off + (long)(c->p - c->s);
    char got[24];
    if (*c->p == '\0' || *c->p == '\n') snprintf(got, sizeof got, "the end of the line");
    else snprintf(got, sizeof got, "'%.12s'", c->p);
    return mt_fail(MT_EINVAL, "trace '%s', line %ld (byte %ld): expected %s, found %s; is it "
                   "a trace written by `meshtrain train --trace`?", c->path, c->line, at, what, got);
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

static mt_status read_number(cursor *c, double *v) {
    char *end;
    errno = 0;
    *v = strtod(c->p, &end);
    if (end == c->p || errno) return expected(c, "a number");
    c->p = end;
    return MT_OK;
}

/* ======================================================================== */
/* One event                                                                 */
/* ======================================================================== */

typedef struct {
    char   name[MT__REPORT_NAME], cat[16], ph[4], thread[MT__REPORT_NAME], level[16];
    double ts, dur, tid, flops, bytes, flops_per_step, seq;
    bool   has_ts, has_dur, has_tid, has_seq;
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
        if (s == MT_OK) s = *c->p == '"' ? read_string(c, str, sizeof str) : read_number(c, &v);
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
            s = read_number(c, &v);
            if (strcmp(key, "ts") == 0) f->ts = v, f->has_ts = true;
            else if (strcmp(key, "dur") == 0) f->dur = v, f->has_dur = true;
            else if (strcmp(key, "tid") == 0) f->tid = v, f->has_tid = true;
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

/* Files one event into the report. */
static mt_status keep(mt_report *r, cursor *c, const fields *f) {
    if (strcmp(f->ph, "M") == 0) {
        int dev, lane = 0;
        if (strcmp(f->name, "model") == 0) {
            if (!(f->flops_per_step > 0))
                return expected(c, "a \"model\" event with \"flops_per_step\" > 0");
            r->traced_model_flops = f->flops_per_step;
            return MT_OK;
        }
        if (strcmp(f->name, "cpu_isa") == 0) {
            if (!f->level[0]) return expected(c, "a \"cpu_isa\" event with a \"level\"");
            memcpy(r->traced_isa, f->level, sizeof r->traced_isa);
            return MT_OK;
        }
        if (strcmp(f->name, "thread_name") != 0 || !f->has_tid) return MT_OK;
        if (sscanf(f->thread, "device %d comm %d", &dev, &lane) < 1) return MT_OK;
        if (r->n_tracks == r->cap_tracks) {
            int cap = r->cap_tracks ? 2 * r->cap_tracks : 16;
            void *p = realloc(r->tracks, (size_t)cap * sizeof *r->tracks);
            if (!p) return mt_fail(MT_ENOMEM, "out of memory reading '%s'", c->path);
            r->tracks = p, r->cap_tracks = cap;
        }
        r->tracks[r->n_tracks++] = (mt__report_track){(long)f->tid, dev, lane};
        return MT_OK;
    }
    if (strcmp(f->ph, "X") != 0) return MT_OK;
    if (!f->has_ts || !f->has_dur || !f->has_tid || !f->name[0])
        return expected(c, "an \"X\" event with \"name\", \"ts\", \"dur\" and \"tid\"");
    if (r->n_ev == r->cap_ev) {
        int cap = r->cap_ev ? 2 * r->cap_ev : 256;
        void *p = realloc(r->ev, (size_t)cap * sizeof *r->ev);
        if (!p) return mt_fail(MT_ENOMEM, "out of memory reading '%s'", c->path);
        r->ev = p, r->cap_ev = cap;
    }
    mt__report_ev *e = &r->ev[r->n_ev++];
    memset(e, 0, sizeof *e);
    memcpy(e->name, f->name, sizeof e->name);
    e->cat = category(f->cat);
    e->tid = (long)f->tid;
    e->ts = f->ts, e->dur = f->dur, e->flops = f->flops, e->bytes = f->bytes;
    e->seq = f->has_seq && e->cat == MT__EV_COMM ? (long)f->seq : -1;
    return MT_OK;
}

/* Gives each event its device and lane: tid N < 100000 is device N's own
 * track; another tid must be named "device N comm K". */
static mt_status resolve(mt_report *r, const char *path) {
    for (int i = 0; i < r->n_ev; i++) {
        mt__report_ev *e = &r->ev[i];
        int t = 0;
        while (t < r->n_tracks && r->tracks[t].tid != e->tid) t++;
        if (t < r->n_tracks) e->device = r->tracks[t].device, e->lane = r->tracks[t].lane;
        else if (e->tid >= 0 && e->tid < 100000) e->device = (int)e->tid, e->lane = 0;
        else
            return mt_fail(MT_EINVAL, "trace '%s': event '%s' is on tid %ld, which no "
                           "thread_name names \"device N\" or \"device N comm K\"",
                           path, e->name, e->tid);
    }
    return MT_OK;
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
        cursor c = {path, line, line, lineno, off};
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
    if (lineno == 0) return mt_fail(MT_EINVAL, "trace '%s' is empty", path);
    if (!closed)
        return mt_fail(MT_EINVAL, "trace '%s' is truncated at byte %ld (line %ld): expected the "
                       "closing line '%s'; was the run stopped before it wrote the trace?",
                       path, off, lineno, LAST);
    if (comma && events > 0)
        return mt_fail(MT_EINVAL, "trace '%s', line %ld: the last event ends in ',' before "
                       "the closing line", path, lineno - 1);
    return resolve(r, path);
}

mt_status mt_report_read(const char *path, mt_report **out) {
    *out = NULL;
    FILE *fp = fopen(path, "r");
    if (!fp) return mt_fail(MT_EIO, "cannot open trace '%s': %s", path, strerror(errno));
    mt_report *r = calloc(1, sizeof *r);
    if (!r) {
        fclose(fp);
        return mt_fail(MT_ENOMEM, "out of memory reading '%s'", path);
    }
    mt_status s = read_lines(r, fp, path);
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
