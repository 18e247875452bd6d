/*
 * args.c — GNU-style long flags (`--flag value`, `--flag=value`) parsed from
 * a per-command table, with messages that name the flag, the value and the
 * accepted range. Numbers are parsed strictly: "5x", "", "1e999" and "nan"
 * are refused rather than half-read, since a silently truncated --steps or a
 * NaN learning rate would waste a whole training run.
 */
#include "cli/args.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void cli_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("meshtrain: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- ranges ------------------------------------------------------------- */

static bool is_integer_kind(cli_kind k) { return k == CLI_INT || k == CLI_U64; }

/* "an integer in [1, 1000000]", "a number > 0", "a number in [0, 1)". */
static void describe_range_as(const cli_opt *o, char *buf, size_t n, const char *what) {
    bool has_lo = isfinite(o->lo), has_hi = isfinite(o->hi);
    if (has_lo && has_hi)
        snprintf(buf, n, "%s in %c%.10g, %.10g%c", what, o->lo_open ? '(' : '[', o->lo,
                 o->hi, o->hi_open ? ')' : ']');
    else if (has_lo)
        snprintf(buf, n, "%s %s %.10g", what, o->lo_open ? ">" : ">=", o->lo);
    else if (has_hi)
        snprintf(buf, n, "%s %s %.10g", what, o->hi_open ? "<" : "<=", o->hi);
    else
        snprintf(buf, n, "%s", what);
}

static void describe_range(const cli_opt *o, char *buf, size_t n) {
    describe_range_as(o, buf, n, is_integer_kind(o->kind) ? "an integer" : "a number");
}

static bool in_range(const cli_opt *o, double v) {
    if (isfinite(o->lo) && (o->lo_open ? v <= o->lo : v < o->lo)) return false;
    if (isfinite(o->hi) && (o->hi_open ? v >= o->hi : v > o->hi)) return false;
    return true;
}

/* ---- one value ---------------------------------------------------------- */

static int bad_number(const cli_opt *o, const char *text, const char *why) {
    char range[128];
    if (o->kind == CLI_U64)
        snprintf(range, sizeof range, "an integer in [0, %" PRIu64 "]", UINT64_MAX);
    else
        describe_range(o, range, sizeof range);
    cli_error("--%s: '%s' %s; expected %s", o->name, text, why, range);
    return CLI_EXIT_USAGE;
}

/* Returns the index of `text` among the '|'-separated choices, or -1. */
static int choice_index(const char *choices, const char *text) {
    size_t len = strlen(text);
    int idx = 0;
    for (const char *p = choices;; idx++) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == len && strncmp(p, text, n) == 0) return idx;
        if (!bar) return -1;
        p = bar + 1;
    }
}

static int set_value(const cli_opt *o, const char *text) {
    char *end = NULL;
    errno = 0;
    switch (o->kind) {
    case CLI_INT: {
        long long v = strtoll(text, &end, 10);
        if (end == text || *end != '\0') return bad_number(o, text, "is not an integer");
        if (errno == ERANGE || !in_range(o, (double)v))
            return bad_number(o, text, "is out of range");
        *(int *)o->dest = (int)v;
        return CLI_EXIT_OK;
    }
    case CLI_U64: {
        /* strtoull accepts "-1" and wraps it; a seed of 2^64-1 by accident is
         * worse than an error. */
        const char *p = text;
        while (isspace((unsigned char)*p)) p++;   /* as strtoull skips them */
        if (*p == '-') return bad_number(o, text, "is out of range");
        unsigned long long v = strtoull(text, &end, 10);
        if (end == text || *end != '\0') return bad_number(o, text, "is not an integer");
        if (errno == ERANGE) return bad_number(o, text, "is out of range");
        *(uint64_t *)o->dest = (uint64_t)v;
        return CLI_EXIT_OK;
    }
    case CLI_FLOAT:
    case CLI_DOUBLE: {
        double v = strtod(text, &end);
        if (end == text || *end != '\0') return bad_number(o, text, "is not a number");
        if (!isfinite(v)) return bad_number(o, text, "is not a finite number");
        if (errno == ERANGE && fabs(v) > 1.0) return bad_number(o, text, "is out of range");
        if (!in_range(o, v)) return bad_number(o, text, "is out of range");
        /* a double that is finite but overflows a float (1e39) would become inf */
        if (o->kind == CLI_FLOAT && !isfinite((float)v))
            return bad_number(o, text, "is out of range");
        if (o->kind == CLI_FLOAT) *(float *)o->dest = (float)v;
        else *(double *)o->dest = v;
        return CLI_EXIT_OK;
    }
    case CLI_STR:
        *(const char **)o->dest = text;
        return CLI_EXIT_OK;
    case CLI_CHOICE: {
        int idx = choice_index(o->choices, text);
        if (idx < 0) {
            cli_error("--%s: '%s' is not one of %s", o->name, text, o->choices);
            return CLI_EXIT_USAGE;
        }
        *(int *)o->dest = idx;
        return CLI_EXIT_OK;
    }
    case CLI_FLAG:
        break;
    }
    *(bool *)o->dest = true;
    return CLI_EXIT_OK;
}

/* ---- unknown flags: suggest the nearest known one ---------------------- */

static int edit_distance(const char *a, size_t na, const char *b) {
    size_t nb = strlen(b);
    if (na > 63 || nb > 63) return 99;
    int row[64];
    for (size_t j = 0; j <= nb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= na; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= nb; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[nb];
}

static const cli_opt *nearest(const cli_opt *opts, const char *name, size_t len) {
    const cli_opt *best = NULL;
    int best_d = 3;  /* more than two edits away is a different word */
    for (const cli_opt *o = opts; o->name; o++) {
        int d = edit_distance(name, len, o->name);
        if (d < best_d && d < (int)len) { best_d = d; best = o; }
    }
    return best;
}

static int unknown_flag(const char *cmd, const cli_opt *opts, const char *arg) {
    const char *name = arg[0] == '-' && arg[1] == '-' ? arg + 2 : arg + 1;
    size_t len = strcspn(name, "=");
    const cli_opt *near = nearest(opts, name, len);
    if (near)
        cli_error("unknown flag '%.*s' (did you mean --%s?); see `meshtrain %s --help`",
                  (int)(name - arg + len), arg, near->name, cmd);
    else
        cli_error("unknown flag '%.*s'; see `meshtrain %s --help`", (int)(name - arg + len),
                  arg, cmd);
    return CLI_EXIT_USAGE;
}

/* ---- the parser --------------------------------------------------------- */

static bool is_help(const char *a) { return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0; }

static bool looks_like_flag(const char *a) { return a[0] == '-' && a[1] == '-' && a[2] != '\0'; }

int cli_parse(const char *cmd, const cli_opt *opts, int argc, char **argv, bool *seen) {
    /* --help anywhere wins, so `meshtrain train --bogus --help` still helps. */
    for (int i = 0; i < argc; i++)
        if (is_help(argv[i])) return -1;

    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (!looks_like_flag(arg)) {
            if (arg[0] == '-' && arg[1] != '\0') return unknown_flag(cmd, opts, arg);
            cli_error("unexpected argument '%s' (flags are written --name value); "
                      "see `meshtrain %s --help`", arg, cmd);
            return CLI_EXIT_USAGE;
        }
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const cli_opt *o = opts;
        while (o->name && !(strlen(o->name) == len && strncmp(o->name, name, len) == 0)) o++;
        if (!o->name) return unknown_flag(cmd, opts, arg);
        if (seen) seen[o - opts] = true;

        if (o->kind == CLI_FLAG) {
            if (eq) {
                cli_error("--%s takes no value (got '%s')", o->name, eq + 1);
                return CLI_EXIT_USAGE;
            }
            *(bool *)o->dest = true;
            continue;
        }
        /* A following "--word" is the next flag, not this one's value: it is
         * far likelier that the value was forgotten than that it starts "--". */
        const char *value = eq ? eq + 1
                          : (i + 1 < argc && !looks_like_flag(argv[i + 1])) ? argv[++i]
                          : NULL;
        if (!value || value[0] == '\0') {
            char range[128] = "";
            if (o->kind == CLI_CHOICE) snprintf(range, sizeof range, "one of %s", o->choices);
            else if (o->kind == CLI_STR) snprintf(range, sizeof range, "%s", o->metavar);
            else describe_range(o, range, sizeof range);
            cli_error("--%s needs a value (%s); see `meshtrain %s --help`", o->name, range, cmd);
            return CLI_EXIT_USAGE;
        }
        int rc = set_value(o, value);
        if (rc != CLI_EXIT_OK) return rc;
    }
    return CLI_EXIT_OK;
}

bool cli_given(const cli_opt *opts, const bool *seen, const char *name) {
    for (int j = 0; opts[j].name; j++)
        if (strcmp(opts[j].name, name) == 0) return seen[j];
    return false;
}

bool cli_parse_named(const char *cmd, const char *name, const char *kind, const char *usage,
                     const cli_opt *opts, int argc, char **argv, int *rc) {
    if (argc == 0) {
        cli_error("%s needs a name: %s; see `meshtrain %s --help`", cmd, name, cmd);
        *rc = CLI_EXIT_USAGE;
        return false;
    }
    if (!is_help(argv[0]) && strcmp(argv[0], name) != 0) {
        cli_error("unknown %s '%s' (%ss: %s); see `meshtrain %s --help`", kind, argv[0], kind,
                  name, cmd);
        *rc = CLI_EXIT_USAGE;
        return false;
    }
    char full[128];
    snprintf(full, sizeof full, "%s %s", cmd, name);
    *rc = is_help(argv[0]) ? -1 : cli_parse(full, opts, argc - 1, argv + 1, NULL);
    if (*rc < 0) {
        cli_print_help(stdout, usage, opts);
        *rc = CLI_EXIT_OK;
        return false;
    }
    return *rc == CLI_EXIT_OK;
}

/* ---- help --------------------------------------------------------------- */

static void current_value(const cli_opt *o, char *buf, size_t n) {
    buf[0] = '\0';
    switch (o->kind) {
    case CLI_INT:    snprintf(buf, n, "%d", *(int *)o->dest); break;
    case CLI_U64:    snprintf(buf, n, "%" PRIu64, *(uint64_t *)o->dest); break;
    case CLI_FLOAT:  snprintf(buf, n, "%g", (double)*(float *)o->dest); break;
    case CLI_DOUBLE: snprintf(buf, n, "%g", *(double *)o->dest); break;
    case CLI_STR: {
        /* escaped, so a default prompt of "\n" does not break the help's lines */
        const char *s = *(const char **)o->dest;
        size_t k = 0;
        if (!s) break;
        buf[k++] = '"';
        for (; *s && k + 4 < n; s++) {
            if (*s == '\n') { buf[k++] = '\\'; buf[k++] = 'n'; }
            else if (*s == '\t') { buf[k++] = '\\'; buf[k++] = 't'; }
            else if (*s == '"' || *s == '\\') { buf[k++] = '\\'; buf[k++] = *s; }
            else buf[k++] = *s;
        }
        buf[k++] = '"';
        buf[k] = '\0';
        break;
    }
    case CLI_CHOICE: {
        int idx = *(int *)o->dest;
        const char *p = o->choices;
        for (int i = 0; i < idx && p; i++) {
            p = strchr(p, '|');
            if (p) p++;
        }
        if (p) snprintf(buf, n, "%.*s", (int)strcspn(p, "|"), p);
        break;
    }
    case CLI_FLAG: break;
    }
}

void cli_print_help(FILE *out, const char *usage, const cli_opt *opts) {
    fputs(usage, out);
    fputs("\nFlags (--flag value or --flag=value):\n", out);
    for (const cli_opt *o = opts; o->name; o++) {
        char head[64], range[128] = "", def[96];
        snprintf(head, sizeof head, "--%s%s%s", o->name, o->metavar ? " " : "",
                 o->metavar ? o->metavar : "");
        if (o->kind == CLI_CHOICE)
            snprintf(range, sizeof range, "%s", o->choices);
        else if (o->kind == CLI_INT && isfinite(o->lo) && isfinite(o->hi) && !o->lo_open &&
                 !o->hi_open)
            snprintf(range, sizeof range, "%.10g..%.10g", o->lo, o->hi);
        else if (o->kind == CLI_INT || o->kind == CLI_FLOAT || o->kind == CLI_DOUBLE) {
            /* "x in [0, 1)" and "x >= 0" read as ranges once the "x" is dropped */
            char tmp[128];
            describe_range_as(o, tmp, sizeof tmp, "x");
            snprintf(range, sizeof range, "%s", tmp + (strncmp(tmp, "x in ", 5) == 0 ? 5 : 2));
        }
        current_value(o, def, sizeof def);
        /* a number outside its own range is "unset, chosen later" (--eot-id's
           -1: the model's end-of-text id): the help says what, not the -1 */
        if (o->kind == CLI_INT && (*(const int *)o->dest < o->lo || *(const int *)o->dest > o->hi))
            def[0] = '\0';
        fprintf(out, "  %-20s %s", head, o->help);
        if (range[0] && def[0]) fprintf(out, "; %s, default %s", range, def);
        else if (range[0]) fprintf(out, "; %s", range);
        else if (def[0]) fprintf(out, "; default %s", def);
        fputc('\n', out);
    }
    fprintf(out, "  %-20s %s\n", "--help", "print this help");
}

/* ---- human numbers ------------------------------------------------------ */

void cli_fmt_count(char *buf, size_t n, double v) {
    double a = fabs(v);
    if (!isfinite(v)) snprintf(buf, n, "?");
    else if (a < 1e3) snprintf(buf, n, "%.0f", v);
    else if (a < 1e6) snprintf(buf, n, "%.1fk", v / 1e3);
    else if (a < 1e9) snprintf(buf, n, "%.2fM", v / 1e6);
    else snprintf(buf, n, "%.2fG", v / 1e9);
}

void cli_fmt_duration(char *buf, size_t n, double s) {
    if (!isfinite(s) || s < 0) snprintf(buf, n, "?");
    else if (s < 10) snprintf(buf, n, "%.1fs", s);
    else if (s < 60) snprintf(buf, n, "%.0fs", s);
    else if (s < 3600) snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
}

/* ---- library statuses as exit codes ------------------------------------ */

int cli_exit_of(mt_status s) {
    switch (s) {
    case MT_OK:
        return CLI_EXIT_OK;
    case MT_EINVAL:
    case MT_ESHAPE:
    case MT_ESHARDING:
    case MT_EUNSUPPORTED:
        return CLI_EXIT_USAGE;
    default:
        return CLI_EXIT_FAIL;
    }
}

void cli_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') fprintf(f, "\\%c", *c);
        else if (*c < 0x20) fprintf(f, "\\u%04x", *c);
        else fputc(*c, f);
    }
    fputc('"', f);
}

/* ---- values parsed after cli_parse: lists and sizes -------------------- */

/* Decimal digits only into *v (no sign, no space); false past INT64_MAX or
 * when `text` is not all digits. */
static bool digits_u63(const char *text, size_t len, uint64_t *v) {
    if (len == 0) return false;
    uint64_t x = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] < '0' || text[i] > '9') return false;
        unsigned d = (unsigned)(text[i] - '0');
        if (x > ((uint64_t)INT64_MAX - d) / 10) return false;
        x = x * 10 + d;
    }
    *v = x;
    return true;
}

int cli_parse_int_list(const char *flag, const char *text, int lo, int hi, int *out,
                       int max_n, int *n) {
    *n = 0;
    if (!text || !*text) {
        cli_error("--%s: the list is empty; give up to %d integers from %d to %d, separated "
                  "by commas (like 2,4,8)", flag, max_n, lo, hi);
        return CLI_EXIT_USAGE;
    }
    for (const char *p = text;;) {
        size_t len = strcspn(p, ",");
        bool neg = lo < 0 && len > 0 && p[0] == '-';
        uint64_t v = 0;
        const char *why = NULL;
        if (len == 0) why = "has an empty item";
        else if (p[0] == '-' && lo >= 0) why = "has a negative item";
        else if (!digits_u63(p + neg, len - neg, &v)) why = "has an item that is not an integer";
        else if (v > (uint64_t)INT32_MAX + neg ||
                 (neg ? -(int64_t)v < lo : (int64_t)v < lo) || (!neg && (int64_t)v > hi))
            why = "has an item out of range";
        else if (*n == max_n) why = "has too many items";
        if (why) {
            cli_error("--%s '%s' %s ('%.*s'); give up to %d integers from %d to %d, separated "
                      "by commas (like 2,4,8)", flag, text, why, (int)len, p, max_n, lo, hi);
            return CLI_EXIT_USAGE;
        }
        out[(*n)++] = neg ? (int)-(int64_t)v : (int)v;
        if (!p[len]) break;
        p += len + 1;
    }
    return CLI_EXIT_OK;
}

int cli_parse_bytes(const char *flag, const char *text, uint64_t *out) {
    size_t len = strspn(text, "0123456789");
    const char *u = text + len;
    unsigned shift = 0;
    if (*u == 'k' || *u == 'K') shift = 10, u++;
    else if (*u == 'm' || *u == 'M') shift = 20, u++;
    else if (*u == 'g' || *u == 'G') shift = 30, u++;
    if (shift && *u == 'i') u++;
    if (*u == 'B' || *u == 'b') u++;
    uint64_t v = 0;
    if (*u || len == 0) {
        cli_error("--%s '%s' is not a size; give a whole number of bytes with an optional "
                  "unit k, M or G (8, 4k, 256M, 1G)", flag, text);
        return CLI_EXIT_USAGE;
    }
    if (!digits_u63(text, len, &v) || v > ((uint64_t)INT64_MAX >> shift)) {
        cli_error("--%s '%s' is out of range; a size is below 2^63 bytes", flag, text);
        return CLI_EXIT_USAGE;
    }
    *out = v << shift;
    return CLI_EXIT_OK;
}
