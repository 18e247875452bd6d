/*
 * machine.c — the machine file (include/meshtrain/profile.h): a writer and a
 * strict reader for its one small JSON object.
 *
 * Both walk the same schema, a table of fields per object (key, kind, where
 * the value lives in mt_machine), so the file's layout is written down once.
 * The reader is a recursive descent over that schema, not a general JSON
 * parser: a key the schema does not know, a missing key, a duplicate or a
 * value of the wrong type fails with the byte offset where it was found.
 */
#include "meshtrain/profile.h"
#include "meshtrain/files.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ======================================================================== */
/* The schema                                                                */
/* ======================================================================== */

typedef enum {
    F_NUM,        /* double; null allowed (NAN) */
    F_INT,        /* int, a whole number >= 0 */
    F_STR,        /* char[size] */
    F_OBJ,        /* a nested object: `sub` */
    F_OBJ_NULL,   /* a nested object or null: `sub`, presence in the bool at `flag` */
    F_OBJ_NAN     /* a nested object of F_NUMs, or null for all of them NAN (written
                     when they all are) */
} field_kind;

typedef struct field {
    const char         *key;
    field_kind          kind;
    size_t              off;    /* of the value in mt_machine */
    size_t              size;   /* F_STR: the buffer's size */
    const struct field *sub;    /* F_OBJ, F_OBJ_NULL: terminated by key == NULL */
    size_t              flag;   /* F_OBJ_NULL: offset of its bool */
    bool                optional;   /* a key older files lack: the reader lets it be
                                       absent (mt_machine_read's defaults stay) */
} field;

#define NUM(k, m) {.key = k, .kind = F_NUM, .off = offsetof(mt_machine, m)}
#define INT(k, m) {.key = k, .kind = F_INT, .off = offsetof(mt_machine, m)}
#define STR(k, m) {.key = k, .kind = F_STR, .off = offsetof(mt_machine, m), \
                   .size = sizeof ((mt_machine *)0)->m}
#define LINK(prefix)                                                              \
    {NUM("latency_us", prefix.latency_us), NUM("busbw_gbs", prefix.busbw_gbs), {0}}

static const field SGEMM[] = {NUM("1", sgemm_gflops_1), NUM("all", sgemm_gflops_all),
                              INT("size", sgemm_size), {0}};
static const field ATTENTION[] = {INT("head_size", attention_head_size),
                                  NUM("64", attention_gflops_1[0]),
                                  NUM("128", attention_gflops_1[1]),
                                  NUM("256", attention_gflops_1[2]),
                                  NUM("512", attention_gflops_1[3]),
                                  NUM("1024", attention_gflops_1[4]), {0}};
static const field SGEMM_COLD[] = {NUM("1", sgemm_cold_gflops_1),
                                   NUM("all", sgemm_cold_gflops_all),
                                   INT("size", sgemm_cold_size), {0}};
static const field FMA[] = {NUM("1", fma_gflops_1), NUM("all", fma_gflops_all), {0}};
static const field BF16[] = {NUM("1", bf16_gflops_1), NUM("all", bf16_gflops_all), {0}};
static const field TRIAD[] = {NUM("1", triad_gbs_1), NUM("all", triad_gbs_all),
                              INT("bytes_per_element", triad_bytes_per_element), {0}};
static const field LINK_THREADS[] = LINK(threads);
static const field LINK_MPI[] = LINK(mpi);
#define LEVEL(isa) {NUM("1", fma_isa_gflops_1[isa]), NUM("all", fma_isa_gflops_all[isa]), {0}}
static const field LEVEL_GENERIC[] = LEVEL(MT_ISA_GENERIC);
static const field LEVEL_NEON[] = LEVEL(MT_ISA_NEON);
static const field LEVEL_AVX2[] = LEVEL(MT_ISA_AVX2);
static const field LEVEL_AVX512[] = LEVEL(MT_ISA_AVX512);
/* the keys are mt_cpu_isa_name()'s */
static const field BY_ISA[] = {{.key = "generic", .kind = F_OBJ_NAN, .sub = LEVEL_GENERIC},
                               {.key = "neon", .kind = F_OBJ_NAN, .sub = LEVEL_NEON},
                               {.key = "avx2", .kind = F_OBJ_NAN, .sub = LEVEL_AVX2},
                               {.key = "avx512", .kind = F_OBJ_NAN, .sub = LEVEL_AVX512},
                               {0}};
static const field CPU_ISA[] = {STR("best", isa_best), STR("in_use", isa_in_use),
                                STR("onednn", onednn_isa), {0}};
static const field ALLREDUCE[] = {
    {.key = "threads", .kind = F_OBJ, .sub = LINK_THREADS},
    {.key = "mpi", .kind = F_OBJ_NULL, .sub = LINK_MPI, .flag = offsetof(mt_machine, has_mpi)},
    {0}};
static const field MACHINE[] = {
    STR("cpu", cpu), INT("cores", cores), STR("blas_core", blas_core),
    {.key = "sgemm_gflops", .kind = F_OBJ, .sub = SGEMM},
    {.key = "fma_gflops", .kind = F_OBJ, .sub = FMA},
    {.key = "bf16_dot_gflops", .kind = F_OBJ, .sub = BF16},
    {.key = "triad_gbs", .kind = F_OBJ, .sub = TRIAD},
    {.key = "allreduce", .kind = F_OBJ, .sub = ALLREDUCE},
    NUM("nominal_gflops", nominal_gflops), NUM("nominal_ghz", nominal_ghz),
    STR("measured_at", measured_at),
    {.key = "fma_gflops_by_isa", .kind = F_OBJ, .sub = BY_ISA, .optional = true},
    {.key = "cpu_isa", .kind = F_OBJ, .sub = CPU_ISA, .optional = true},
    {.key = "sgemm_cold_gflops", .kind = F_OBJ, .sub = SGEMM_COLD, .optional = true},
    {.key = "attention_gflops", .kind = F_OBJ, .sub = ATTENTION, .optional = true}, {0}};
_Static_assert(MT_MACHINE_N_ATTENTION == 5, "ATTENTION's keys are T = 64 << i, i < 5");

#define N_LEVELS ((int)(sizeof ((mt_machine *)0)->fma_isa_gflops_1 / sizeof(double)))

#define AT(base, f, type) ((type *)((char *)(base) + (f)->off))

/* ======================================================================== */
/* Writing                                                                   */
/* ======================================================================== */

static void put_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void put_object(FILE *f, const mt_machine *m, const field *fs, int depth) {
    fputc('{', f);
    for (const field *x = fs; x->key; x++) {
        if (x != fs) fputs(depth == 0 ? ",\n " : ", ", f);
        put_string(f, x->key);
        fputs(": ", f);
        switch (x->kind) {
        case F_NUM: {
            double v = *AT(m, x, const double);
            if (isfinite(v)) fprintf(f, "%.6g", v);
            else fputs("null", f);
            break;
        }
        case F_INT: fprintf(f, "%d", *AT(m, x, const int)); break;
        case F_STR: put_string(f, AT(m, x, const char)); break;
        case F_OBJ_NULL:
            if (!*(const bool *)((const char *)m + x->flag)) { fputs("null", f); break; }
            /* fall through */
        case F_OBJ: put_object(f, m, x->sub, depth + 1); break;
        case F_OBJ_NAN: {
            bool any = false;
            for (const field *y = x->sub; y->key; y++) any |= isfinite(*AT(m, y, const double));
            if (any) put_object(f, m, x->sub, depth + 1);
            else fputs("null", f);
            break;
        }
        }
    }
    fputc('}', f);
}

/* mt_output_write's writer: the object and a newline. */
static mt_status put_machine(FILE *f, void *arg) {
    put_object(f, arg, MACHINE, 0);
    fputc('\n', f);
    return MT_OK;
}

/* Through the output contract (meshtrain/files.h): written to
 * "<path>.tmp" and renamed, so a failed write (a full disk) leaves the
 * previous file whole; a FIFO, device or directory at `path` is refused
 * before anything is written. */
mt_status mt_machine_write(const mt_machine *m, const char *path) {
    mt_output *o;
    mt_status s = mt_output_claim(path, "machine file", &o);
    if (s == MT_OK) s = mt_machine_write_to(m, o);
    mt_output_close(o);
    return s;
}

mt_status mt_machine_write_to(const mt_machine *m, mt_output *out) {
    if (!m || !out) return mt_fail(MT_EINVAL, "mt_machine_write_to: m or out is NULL");
    return mt_output_write(out, put_machine, (void *)m);
}

/* ======================================================================== */
/* Reading                                                                   */
/* ======================================================================== */

typedef struct {
    const char *path, *s;
    size_t      n, i;
} reader;

static mt_status expected(reader *r, const char *what) {
    char found[24];
    if (r->i >= r->n) snprintf(found, sizeof found, "the end of the file");
    else {
        int k = 0;   /* up to 8 bytes, cut at a line's end */
        while (k < 8 && r->i + (size_t)k < r->n && r->s[r->i + (size_t)k] != '\n') k++;
        snprintf(found, sizeof found, "'%.*s'", k, r->s + r->i);
    }
    return mt_fail(MT_EFORMAT, "machine file '%s', byte %zu: expected %s, found %s; "
                   "write it again with `meshtrain bench machine --out %s`",
                   r->path, r->i, what, found, r->path);
}

static void skip_ws(reader *r) {
    while (r->i < r->n && strchr(" \t\r\n", r->s[r->i])) r->i++;
}

/* Consumes `c` (after white space) or fails naming `what`. */
static mt_status take(reader *r, char c, const char *what) {
    skip_ws(r);
    if (r->i < r->n && r->s[r->i] == c) { r->i++; return MT_OK; }
    return expected(r, what);
}

static bool take_word(reader *r, const char *w) {
    size_t k = strlen(w);
    if (r->n - r->i >= k && memcmp(r->s + r->i, w, k) == 0) { r->i += k; return true; }
    return false;
}

/* A string of printable ASCII (and \" \\ \/ \n \t \uXXXX below 0x80) into buf. */
static mt_status get_string(reader *r, char *buf, size_t size) {
    mt_status s = take(r, '"', "a string");
    size_t k = 0;
    while (s == MT_OK) {
        if (r->i >= r->n) return expected(r, "the string's closing '\"'");
        char c = r->s[r->i];
        if (c == '"') { r->i++; break; }
        if ((unsigned char)c < 0x20) return expected(r, "a character of a string");
        if (c == '\\') {
            char e = r->i + 1 < r->n ? r->s[r->i + 1] : 0;
            unsigned u = 0;
            if (e == 'u' && r->n - r->i >= 6 && sscanf(r->s + r->i + 2, "%4x", &u) == 1 && u < 0x80)
                c = (char)u, r->i += 4;
            else if (e == 'n') c = '\n';
            else if (e == 't') c = '\t';
            else if (e == '"' || e == '\\' || e == '/') c = e;
            else return expected(r, "an escape (\\\" \\\\ \\/ \\n \\t \\u00XX)");
            r->i++;
        }
        if (k + 1 >= size) return expected(r, "a shorter string");
        buf[k++] = c;
        r->i++;
    }
    if (s == MT_OK) buf[k] = '\0';
    return s;
}

/* A JSON number, or null when `null_ok` (NAN). */
static mt_status get_number(reader *r, double *v, bool null_ok) {
    skip_ws(r);
    if (null_ok && take_word(r, "null")) { *v = NAN; return MT_OK; }
    const char *p = r->s + r->i;
    size_t k = 0;
    while (r->i + k < r->n && strchr("+-.eE0123456789", p[k])) k++;
    char buf[64];
    if (k == 0 || k >= sizeof buf) return expected(r, null_ok ? "a number or null" : "a number");
    memcpy(buf, p, k);
    buf[k] = '\0';
    char *end;
    *v = strtod(buf, &end);
    if (*end || !isfinite(*v)) return expected(r, "a finite number");
    r->i += k;
    return MT_OK;
}

static mt_status get_object(reader *r, mt_machine *m, const field *fs);

static mt_status get_value(reader *r, mt_machine *m, const field *x) {
    double v;
    mt_status s;
    switch (x->kind) {
    case F_NUM: return get_number(r, AT(m, x, double), true);
    case F_INT: {
        skip_ws(r);
        const size_t at = r->i;
        if ((s = get_number(r, &v, false)) != MT_OK) return s;
        if (v < 0 || v > 1e9 || v != floor(v)) {
            r->i = at;
            return expected(r, "a whole number from 0 to 1e9");
        }
        *AT(m, x, int) = (int)v;
        return MT_OK;
    }
    case F_STR: return get_string(r, AT(m, x, char), x->size);
    case F_OBJ_NULL:
        skip_ws(r);
        *(bool *)((char *)m + x->flag) = !take_word(r, "null");
        if (!*(bool *)((char *)m + x->flag)) return MT_OK;
        /* fall through */
    case F_OBJ: return get_object(r, m, x->sub);
    case F_OBJ_NAN:
        skip_ws(r);
        if (!take_word(r, "null")) return get_object(r, m, x->sub);
        for (const field *y = x->sub; y->key; y++) *AT(m, y, double) = NAN;
        return MT_OK;
    }
    return MT_EINTERNAL;
}

static mt_status get_object(reader *r, mt_machine *m, const field *fs) {
    enum { MAX_FIELDS = 16 };
    bool seen[MAX_FIELDS] = {false};
    mt_status s = take(r, '{', "'{'");
    int n = 0;
    for (const field *x = fs; x->key; x++) n++;
    skip_ws(r);
    bool empty = s == MT_OK && r->i < r->n && r->s[r->i] == '}';
    for (bool first = true; s == MT_OK && !empty; first = false) {
        if (!first) {
            skip_ws(r);
            if (r->i < r->n && r->s[r->i] == '}') break;
            if ((s = take(r, ',', "',' or '}'")) != MT_OK) break;
        }
        skip_ws(r);
        const size_t key_at = r->i;
        char key[32];
        if ((s = get_string(r, key, sizeof key)) != MT_OK) break;
        int k = 0;
        while (k < n && strcmp(fs[k].key, key) != 0) k++;
        if (k == n || seen[k]) {
            char want[256] = "";
            for (int j = 0; j < n; j++)
                if (!seen[j] && strlen(want) + strlen(fs[j].key) + 8 < sizeof want)
                    snprintf(want + strlen(want), sizeof want - strlen(want), "%s\"%s\"",
                             want[0] ? ", " : "", fs[j].key);
            r->i = key_at;
            char what[sizeof want + sizeof key + 64];
            snprintf(what, sizeof what, "one of the keys %s (\"%s\" is %s)", want, key,
                     k == n ? "unknown" : "given twice");
            return expected(r, what);
        }
        seen[k] = true;
        if ((s = take(r, ':', "':'")) == MT_OK) s = get_value(r, m, &fs[k]);
    }
    if (s == MT_OK) s = take(r, '}', "'}'");
    for (int k = 0; s == MT_OK && k < n; k++)
        if (!seen[k] && !fs[k].optional) {
            r->i--;   /* at the closing brace */
            char what[64];
            snprintf(what, sizeof what, "the key \"%s\" before the '}'", fs[k].key);
            return expected(r, what);
        }
    return s;
}

/* A machine file is about 1 KiB; a file past this is not one (reading
 * /dev/zero or a trace by mistake is refused at once). */
#define MAX_MACHINE_BYTES ((int64_t)1 << 20)

mt_status mt_machine_read(const char *path, mt_machine *out) {
    char *buf = NULL;
    size_t n = 0;
    mt_status s = mt_input_read_all(path, "machine file", MAX_MACHINE_BYTES, &buf, &n);
    if (s != MT_OK) {
        if (s == MT_EIO && path && access(path, F_OK) != 0 && errno == ENOENT)
            return mt_fail(s, "cannot read the machine file '%s': %s; write it with `meshtrain "
                           "bench machine`", path, strerror(ENOENT));
        return s;
    }
    memset(out, 0, sizeof *out);
    for (int i = 0; i < N_LEVELS; i++) out->fma_isa_gflops_1[i] = out->fma_isa_gflops_all[i] = NAN;
    out->sgemm_cold_gflops_1 = out->sgemm_cold_gflops_all = NAN;
    for (int i = 0; i < MT_MACHINE_N_ATTENTION; i++) out->attention_gflops_1[i] = NAN;
    reader r = {.path = path, .s = buf, .n = n};
    s = get_object(&r, out, MACHINE);
    if (s == MT_OK) {
        skip_ws(&r);
        if (r.i != r.n) s = expected(&r, "the end of the file after the object");
    }
    free(buf);
    return s;
}

double mt_machine_isa_gflops(const mt_machine *m, mt_cpu_isa isa, bool all) {
    if ((int)isa < 0 || (int)isa >= N_LEVELS) return NAN;
    return all ? m->fma_isa_gflops_all[isa] : m->fma_isa_gflops_1[isa];
}
