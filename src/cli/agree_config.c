/*
 * agree_config.c — the record of the settings of `meshtrain train` that
 * every rank under mpirun must share (files.h's cli_agree_record_*), and the
 * first difference between two ranks' records. agree.c exchanges them.
 *
 * Each rank runs its own command line (an MPMD launch, a wrapper script, a
 * host with another copy of the data), and a rank whose settings differ
 * either desynchronises the collectives (a model of other sizes: Open MPI's
 * MPI_ERR_TRUNCATE), leaves the others waiting (fewer --steps) or trains a
 * replica that silently diverges (another --seed or --lr). So before step 1
 * every rank writes what it will run as text, one setting a line, and the
 * ranks compare it.
 *
 * What is compared: every setting of the run as resolved by the flags (the
 * model's settings after --tokenizer, the mesh after --devices, microbatches
 * as accum), and the inputs by their contents, not by their paths: a host
 * may keep the data elsewhere, and a stale copy under the same name is the
 * mistake to catch. A file's identity is its size and a checksum of its
 * first and last 64 KiB (the header, and what a truncated or appended copy
 * changes), cheap for any size; shards are compared by their names, sizes
 * and the same blocks. Outputs are compared by presence only: rank 0 alone
 * writes them (their paths are its own business), but saves and the trace
 * are collective, so either every rank takes part or none.
 *
 * Not compared, as they may differ per rank without changing the run:
 * --threads (each host its own cores), --metrics, --quiet and --profile
 * (rank 0 alone prints and logs; profiling times ops locally), and the
 * output paths.
 *
 * A line is "key\tvalue\tshown\n": key names the setting as the user gives
 * it (the flag), value is compared, shown (when not empty) is what a message
 * says instead of value (a path and its identity). The hash covers key and
 * value only.
 */
#include "cli/files.h"
#include "cli/model_flags.h"

#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { IDENTITY_BLOCK = 64 << 10 };   /* bytes hashed at each end of a file */

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME  0x100000001b3ull

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * FNV_PRIME;
    return h;
}

/* ======================================================================== */
/* The record                                                                */
/* ======================================================================== */

typedef struct {
    cli_agree_record *rec;
    size_t            cap;
    bool              oom;
} builder;

/* Appends s (n bytes), a control character (tab, newline) written as '?' so
 * that a path cannot break the format. */
static void put(builder *b, const char *s, size_t n, bool clean) {
    if (b->oom) return;
    if (b->rec->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->rec->len + n + 1) cap *= 2;
        char *t = realloc(b->rec->text, cap);
        if (!t) { b->oom = true; return; }
        b->rec->text = t;
        b->cap = cap;
    }
    char *at = b->rec->text + b->rec->len;
    for (size_t i = 0; i < n; i++)
        at[i] = clean && (unsigned char)s[i] < 0x20 ? '?' : s[i];
    b->rec->len += n;
    b->rec->text[b->rec->len] = '\0';
}

/* One setting: key, the compared value, and what to show instead (NULL or
 * "": the value). */
static void add(builder *b, const char *key, const char *value, const char *shown) {
    size_t at = b->rec->len;
    put(b, key, strlen(key), true);
    put(b, "\t", 1, false);
    put(b, value, strlen(value), true);
    if (!b->oom) {
        b->rec->hash = fnv(b->rec->hash, b->rec->text + at, b->rec->len - at);
        b->rec->hash = fnv(b->rec->hash, "\n", 1);
    }
    put(b, "\t", 1, false);
    if (shown) put(b, shown, strlen(shown), true);
    put(b, "\n", 1, false);
}

static void addf(builder *b, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void addf(builder *b, const char *key, const char *fmt, ...) {
    char value[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(value, sizeof value, fmt, ap);
    va_end(ap);
    add(b, key, value, NULL);
}

/* The shortest text that reads back as the same double (0.001, not
 * 0.00100000005): values that differ always print differently. */
static void fmt_double(char *buf, size_t n, double v) {
    for (int p = 6; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, v);
        if (strtod(buf, NULL) == v) return;
    }
}

static void fmt_float(char *buf, size_t n, float v) {
    for (int p = 6; p <= 9; p++) {
        snprintf(buf, n, "%.*g", p, (double)v);
        if (strtof(buf, NULL) == v) return;
    }
}

static void add_double(builder *b, const char *key, double v) {
    char s[40];
    fmt_double(s, sizeof s, v);
    add(b, key, s, NULL);
}

static void add_float(builder *b, const char *key, float v) {
    char s[40];
    fmt_float(s, sizeof s, v);
    add(b, key, s, NULL);
}

/* ======================================================================== */
/* Inputs, by their contents                                                 */
/* ======================================================================== */

/* Folds file `path`'s size and its first and last IDENTITY_BLOCK bytes into
 * *h; its size into *size. false (errno set) when it cannot be read. */
static bool hash_file(const char *path, uint64_t *h, long long *size, unsigned char *block) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);   /* a FIFO must not block */
    if (fd < 0) return false;
    struct stat sb = {0};
    bool ok = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode);
    off_t ends[2] = {0, sb.st_size > IDENTITY_BLOCK ? sb.st_size - IDENTITY_BLOCK : 0};
    for (int e = 0; ok && e < (sb.st_size > IDENTITY_BLOCK ? 2 : 1); e++) {
        ssize_t got = pread(fd, block, IDENTITY_BLOCK, ends[e]);
        if (got < 0) ok = false;
        else *h = fnv(*h, block, (size_t)got);
    }
    if (ok) {
        *size = (long long)sb.st_size;
        *h = fnv(*h, size, sizeof *size);
    }
    close(fd);
    return ok;
}

/* The setting of input `key` (a path, or NULL): compared by contents, shown
 * with its path. */
static void add_input(builder *b, const char *key, const char *path, bool maybe_shards) {
    if (!path) { add(b, key, "none", NULL); return; }
    char value[160], shown[PATH_MAX + 200];
    unsigned char *block = malloc(IDENTITY_BLOCK);
    if (!block) { b->oom = true; return; }
    uint64_t h = FNV_OFFSET;
    long long size = 0;
    if (maybe_shards && mt_dataset_is_sharded(path)) {
        /* as the dataset reads them; none when they cannot be listed (its
         * open says why) */
        char **names = NULL;
        int n = 0;
        (void)mt_dataset_shards(path, &names, &n);
        long long total = 0;
        for (int i = 0; i < n; i++) {
            const char *base = strrchr(names[i], '/');
            base = base ? base + 1 : names[i];
            h = fnv(h, base, strlen(base) + 1);
            if (hash_file(names[i], &h, &size, block)) total += size;
            else h = fnv(h, "unreadable", 10);
        }
        mt_dataset_shards_free(names, n);
        snprintf(value, sizeof value, "%d shards, %lld bytes, checksum %016llx", n, total,
                 (unsigned long long)h);
    } else if (hash_file(path, &h, &size, block)) {
        snprintf(value, sizeof value, "%lld bytes, checksum %016llx", size, (unsigned long long)h);
    } else {
        snprintf(value, sizeof value, "unreadable");
    }
    free(block);
    snprintf(shown, sizeof shown, "'%s' (%s)", path, value);
    add(b, key, value, shown);
}

/* An output: whether it is given (rank 0 alone writes it), shown as its path. */
static void add_output(builder *b, const char *key, const char *path) {
    char shown[PATH_MAX + 4];
    if (path) snprintf(shown, sizeof shown, "'%s'", path);
    add(b, key, path ? "given" : "none", path ? shown : NULL);
}

/* ======================================================================== */
/* The settings                                                              */
/* ======================================================================== */

/* The model's own settings, as its table names them (--layers ...). */
static void add_model(builder *b, const mt_train_config *c) {
    const mt_model_about *a = mt_model_about_of(c->model);
    add(b, "--model", a ? a->name : "?", NULL);
    if (!a || a->config_size == 0) return;
    cli_model_config defaults;
    const void *mc = c->model_config;
    if (!mc) {
        if (a->config_size > sizeof defaults.bytes ||
            mt_model_config_defaults(c->model, defaults.bytes, a->config_size) != MT_OK)
            return;
        mc = defaults.bytes;
    }
    for (int i = 0; i < a->n_flags; i++) {
        const mt_model_flag *f = &a->flags[i];
        char key[64];
        snprintf(key, sizeof key, "--%s", f->flag);
        if (f->type == MT_MODEL_FLAG_PRESET) continue;   /* its settings are the fields */
        if (f->type == MT_MODEL_FLAG_FLOAT) {
            float v;
            memcpy(&v, (const char *)mc + f->offset, sizeof v);
            add_float(b, key, v);
        } else if (f->type == MT_MODEL_FLAG_BOOL) {
            add(b, key, cli_model_setting(mc, f) ? "on" : "off", NULL);
        } else if (f->type == MT_MODEL_FLAG_CHOICE) {
            char name[32];
            add(b, key, cli_model_choice(f, cli_model_setting(mc, f), name, sizeof name), NULL);
        } else {
            addf(b, key, "%d", cli_model_setting(mc, f));
        }
    }
}

int cli_agree_record_make(const mt_train_config *c, const char *tokenizer, int world,
                          cli_agree_record *rec) {
    *rec = (cli_agree_record){.hash = FNV_OFFSET};
    builder b = {.rec = rec};
    const mt_optim_config *o = &c->optim;
    bool mesh = c->mesh && *c->mesh;

    add_model(&b, c);
    add_input(&b, "--data", c->data, true);
    add_input(&b, "--tokenizer", tokenizer, false);
    add_double(&b, "--val-frac", c->val_frac);
    addf(&b, "--batch", "%d", c->B);
    addf(&b, "--seq", "%d", c->T);
    addf(&b, "--accum (--microbatches)", "%d", c->accum);
    addf(&b, "--steps", "%d", c->steps);
    add(&b, "--optim", o->kind == MT_OPT_SGD ? "sgd" : "adamw", NULL);
    add_float(&b, "--lr", o->lr);
    add_float(&b, "--min-lr-frac", o->min_lr_frac);
    addf(&b, "--warmup", "%d", o->warmup_steps);
    add_float(&b, "--weight-decay", o->weight_decay);
    add_float(&b, "--grad-clip", o->grad_clip);
    add_float(&b, "the optimizer's beta1", o->beta1);
    add_float(&b, "the optimizer's beta2", o->beta2);
    add_float(&b, "the optimizer's eps", o->eps);
    add_float(&b, "the optimizer's momentum", o->momentum);
    /* cosine over the whole run (total_steps is --steps, compared above) or constant */
    add(&b, "the lr schedule", o->total_steps > 0 ? "cosine" : "constant", NULL);
    addf(&b, "--seed", "%llu", (unsigned long long)c->seed);
    addf(&b, "--eval-every", "%d", c->eval_every);
    addf(&b, "--eval-batches", "%d", c->eval_batches);
    add_input(&b, "--ckpt-in", c->ckpt_in, false);
    add_output(&b, "--ckpt-out", c->ckpt_out);
    addf(&b, "--ckpt-every", "%d", c->ckpt_every);
    add_input(&b, "--llmc-in", c->llmc_in, false);
    add_output(&b, "--llmc-out", c->llmc_out);
    add(&b, "--hf-in", c->hf_in ? c->hf_in : "none", NULL);
    add(&b, "--hf-out", c->hf_out ? c->hf_out : "none", NULL);
    /* without --mesh, --devices 2 is the mesh data=2 (cmd_train.c); under
     * MPI, no --devices is one a rank: both say the same run */
    add(&b, "--mesh", mesh ? c->mesh : "none", NULL);
    addf(&b, "--devices", "%d", mesh && c->devices == 0 ? world : c->devices);
    addf(&b, "--zero", "%d", c->zero);
    add(&b, "--rules", c->rules && *c->rules ? c->rules : "default", NULL);
    add(&b, "--sequence-parallel", c->sequence_parallel ? "on" : "off", NULL);
    add(&b, "--collective-matmul",
        c->collective_matmul > 0 ? "on" : c->collective_matmul < 0 ? "off" : "auto", NULL);
    add(&b, "--reshard-after-forward", c->reshard_after_forward > 0   ? "on"
                                       : c->reshard_after_forward < 0 ? "off"
                                                                      : "auto", NULL);
    add(&b, "--fsdp-gather", c->fsdp_gather > 0   ? "once"
                             : c->fsdp_gather < 0 ? "microbatch"
                                                  : "auto", NULL);
    add(&b, "--schedule", c->schedule ? c->schedule : "default", NULL);
    addf(&b, "--chunks", "%d", c->pipe_chunks);
    add(&b, "--remat", mt_remat_name(c->remat), NULL);
    add(&b, "--precision", c->precision == MT_PRECISION_BF16 ? "bf16" : "fp32", NULL);
    add(&b, "--f32-activations", c->f32_activations ? "on" : "off", NULL);
    add(&b, "--grad-reduce", c->grad_reduce == MT_PRECISION_BF16 ? "bf16" : "fp32", NULL);
    add_double(&b, "--bucket-mb", c->bucket_mb);
    add_output(&b, "--trace", c->trace);
    addf(&b, "--trace-steps", "%d", c->trace_steps);
    if (b.oom) {
        cli_agree_record_free(rec);
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

void cli_agree_record_free(cli_agree_record *rec) {
    free(rec->text);
    *rec = (cli_agree_record){0};
}

/* ======================================================================== */
/* The first difference                                                      */
/* ======================================================================== */

/* The fields of one line: key, value, shown; *next past its newline. */
typedef struct {
    const char *key, *value, *shown;
    int nkey, nvalue, nshown;
} line_fields;

static bool next_line(const char **at, line_fields *f) {
    const char *p = *at;
    if (!p || !*p) return false;
    const char *t1 = strchr(p, '\t'), *nl = strchr(p, '\n');
    if (!nl) nl = p + strlen(p);
    const char *t2 = t1 && t1 < nl ? memchr(t1 + 1, '\t', (size_t)(nl - t1 - 1)) : NULL;
    if (!t1 || t1 > nl) t1 = nl;
    if (!t2) t2 = nl;
    *f = (line_fields){.key = p, .nkey = (int)(t1 - p),
                       .value = t1 < nl ? t1 + 1 : nl, .nvalue = (int)(t2 - (t1 < nl ? t1 + 1 : nl)),
                       .shown = t2 < nl ? t2 + 1 : nl, .nshown = (int)(nl - (t2 < nl ? t2 + 1 : nl))};
    *at = *nl ? nl + 1 : nl;
    return true;
}

static bool same(const char *a, int na, const char *b, int nb) {
    return na == nb && memcmp(a, b, (size_t)na) == 0;
}

bool cli_agree_record_diff(const char *a, const char *b, int rank_b, char *msg, size_t n) {
    line_fields fa, fb;
    for (;;) {
        bool ha = next_line(&a, &fa), hb = next_line(&b, &fb);
        if (!ha && !hb) return false;
        if (ha && hb && same(fa.key, fa.nkey, fb.key, fb.nkey) &&
            same(fa.value, fa.nvalue, fb.value, fb.nvalue))
            continue;
        /* what a line shows: shown when given, else its value */
#define SHOWN(f) (f).nshown ? (f).nshown : (f).nvalue, (f).nshown ? (f).shown : (f).value
        if (ha && hb && same(fa.key, fa.nkey, fb.key, fb.nkey))
            snprintf(msg, n, "%.*s: rank 0 has %.*s, rank %d has %.*s", fa.nkey, fa.key, SHOWN(fa),
                     rank_b, SHOWN(fb));
        else if (ha && hb)   /* settings of another model: --model differed first */
            snprintf(msg, n, "the settings: rank 0 has %.*s %.*s, rank %d has %.*s %.*s", fa.nkey,
                     fa.key, SHOWN(fa), rank_b, fb.nkey, fb.key, SHOWN(fb));
        else if (ha)
            snprintf(msg, n, "%.*s: rank 0 has %.*s, rank %d has none", fa.nkey, fa.key,
                     SHOWN(fa), rank_b);
        else
            snprintf(msg, n, "%.*s: rank 0 has none, rank %d has %.*s", fb.nkey, fb.key, rank_b,
                     SHOWN(fb));
#undef SHOWN
        return true;
    }
}
