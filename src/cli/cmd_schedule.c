/*
 * cmd_schedule.c — `meshtrain schedule`: builds a pipeline schedule (or
 * loads one from JSON), validates it, simulates it, and prints the timeline
 * and the statistics, the JSON object (--json), or an SVG picture (--svg).
 *
 *   $ meshtrain schedule --kind zb-h1 --stages 4 --microbatches 8
 *   zb-h1: p = 4 stages, m = 8 microbatches, v = 1 chunk per device; ...
 *   dev 0 | F0 F1 F2 F3 ......... B0 W0 F4 B1 ...
 *   ...
 *   makespan          27
 *   bubble rate       11.1%  (max span 27 - busy 24) / 27
 */
#include "cli/args.h"
#include "cli/files.h"
#include "meshtrain.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char SCHEDULE_USAGE[] =
    "usage: meshtrain schedule --kind KIND --stages P --microbatches M [flags]\n"
    "       meshtrain schedule --load FILE [--costs ...] [--w-memory X] [--svg FILE] [--json]\n"
    "\n"
    "Builds the pipeline schedule KIND for P devices (stages) and M microbatches,\n"
    "checks it (every dependency, no deadlock), runs it on a model of the devices,\n"
    "and prints one row per device with its ops on a time line, then the\n"
    "statistics: makespan, bubble rate (the paper's: (max span - busy) / max span),\n"
    "bubble fraction (mean idle / makespan) and peak activations per device.\n"
    "\n"
    "Kinds: gpipe, 1f1b, interleaved (Megatron; --chunks V >= 2, M divisible by P),\n"
    "zb-h1, zb-h2 (Zero Bubble, Qi et al. 2024), zb-v and dualpipev (the V shape:\n"
    "device i holds chunks i and 2P-1-i; dualpipev needs M >= 2P). Every kind needs\n"
    "M >= P. An op costs 1/V of its stage's F, B or W; a whole backward BW costs\n"
    "B+W; a message between devices costs COMM. Activation memory counts one\n"
    "microbatch on one whole stage as 1: an F adds 1/V, a B frees it but for\n"
    "--w-memory of it, which its W frees.\n"
    "\n"
    "--json prints only one JSON object (kind, stages, microbatches, makespan,\n"
    "busy, bubble_fraction, span, bubble_rate, peak_activations, ops); --load reads\n"
    "such an object back, for instance edited by hand, and checks and simulates it\n"
    "(start and end times and statistics in it are ignored). See docs/pipelines.md.\n"
    "\n"
    "examples:\n"
    "  meshtrain schedule --kind zb-h1 --stages 4 --microbatches 8\n"
    "  meshtrain schedule --kind interleaved --stages 4 --microbatches 8 --chunks 2\n"
    "  meshtrain schedule --kind zb-v --stages 4 --microbatches 8 --costs 1,2,1,0.1\n"
    "  meshtrain schedule --kind zb-h2 --stages 4 --microbatches 8 --svg zb-h2.svg\n"
    "  meshtrain schedule --kind 1f1b --stages 4 --microbatches 8 --json > s.json\n"
    "  meshtrain schedule --load s.json\n";

/* "gpipe|1f1b|...": the kinds as a CLI_CHOICE, in enum order. */
static void kind_choices(char *buf, size_t cap) {
    size_t at = 0;
    buf[0] = '\0';
    for (int k = 0; k < MT_SCHEDULE_N_KINDS && at < cap; k++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%s", k ? "|" : "",
                               mt_schedule_kind_name((mt_schedule_kind)k));
}

/* "F,B,W" or "F,B,W,COMM" into *c; false (after the message naming the
 * item) on bad text: an item that is not a number, not finite ("nan",
 * "inf", "1e999"), or negative; then mt_pipe_costs_check's rules. */
static bool parse_costs(const char *text, double w_memory, mt_pipe_costs *c) {
    double x[4] = {0, 0, 0, 0};
    int n = 0;
    for (const char *p = text;; n++) {
        size_t len = strcspn(p, ",");
        char item[64];
        snprintf(item, sizeof item, "%.*s", (int)(len < 63 ? len : 63), p);
        char *end = item;
        errno = 0;
        double v = len && len < 63 ? strtod(item, &end) : 0;
        if (n == 4) {
            cli_error("--costs: '%s' has more than 4 numbers; give F,B,W[,COMM] (e.g. 1,2,1 "
                      "or 1,1,1,0.1)", text);
            return false;
        }
        if (end == item || *end || len == 0) {
            cli_error("--costs: '%s': item %d ('%s') is not a number; give F,B,W[,COMM] (e.g. "
                      "1,2,1 or 1,1,1,0.1)", text, n + 1, item);
            return false;
        }
        if (!isfinite(v) || (errno == ERANGE && fabs(v) > 1)) {
            cli_error("--costs: '%s': item %d ('%s') is not a finite number", text, n + 1, item);
            return false;
        }
        x[n] = v;
        if (!p[len]) { n++; break; }
        p += len + 1;
    }
    if (n != 3 && n != 4) {
        cli_error("--costs: '%s' is not 3 or 4 numbers F,B,W[,COMM] (e.g. 1,1,1,0 or 1,2,1)",
                  text);
        return false;
    }
    if (!(x[0] > 0) || !(x[1] > 0) || x[2] < 0 || x[3] < 0) {
        cli_error("--costs: '%s': F and B must be > 0, W and COMM >= 0", text);
        return false;
    }
    *c = (mt_pipe_costs){.f = x[0], .b = x[1], .w = x[2], .comm = x[3]};
    if (mt_pipe_costs_check(c, w_memory) != MT_OK) {
        cli_error("--costs '%s': %s", text, mt_errmsg());
        return false;
    }
    return true;
}

/* A schedule JSON is about 60 bytes an op, and a schedule holds at most
 * MT_SCHEDULE_MAX_OPS ops; a file past this is refused before it is read. */
#define MAX_SCHEDULE_JSON ((int64_t)64 << 20)

/* Reads, parses and validates the schedule in `path`. Every failure is the
 * file's (MT_EIO: it cannot be read; MT_EFORMAT: its contents, the rules of
 * a schedule included), with the path in the message. */
static mt_status load_schedule(const char *path, mt_schedule **out) {
    *out = NULL;
    char real[4096];
    if (mt_file_is_tmp(path, real, sizeof real))
        return mt_fail(MT_EIO, "--load '%s' is the temporary file of a save in progress (or "
                       "of a killed one); load '%s' instead", path, real);
    char *text = NULL;
    size_t len = 0;
    mt_status st = mt_input_read_all(path, "schedule", MAX_SCHEDULE_JSON, &text, &len);
    if (st != MT_OK) return mt_fail_wrap(st, "--load");
    st = mt_schedule_read_json(text, len, out);
    free(text);
    if (st == MT_OK && (st = mt_schedule_validate(*out, NULL)) == MT_EINVAL)
        st = mt_fail(MT_EFORMAT, "%s", mt_errmsg());   /* the file's rules, not the flags' */
    if (st != MT_OK) {
        mt_schedule_free(*out);
        *out = NULL;
        return mt_fail_wrap(st, "--load '%s'", path);
    }
    return MT_OK;
}

/* Whether any op of s is a split B (its W then counts w_memory). */
static bool has_split_backward(const mt_schedule *s) {
    for (int d = 0; d < mt_schedule_stages(s); d++)
        for (int i = 0; i < mt_schedule_n_ops(s, d); i++)
            if (mt_schedule_ops(s, d)[i].type == MT_PIPE_B) return true;
    return false;
}

/* Flags that would change nothing for this schedule: an error naming what
 * would make them count. CLI_EXIT_USAGE after the message, or CLI_EXIT_OK. */
static int check_context(const mt_schedule *s, bool w_memory_given, const mt_pipe_costs *c,
                         const char *costs_text) {
    const char *kind = mt_schedule_kind_name(mt_schedule_get_kind(s));
    if (w_memory_given && !has_split_backward(s)) {
        cli_error("--w-memory counts only for schedules that split the backward into B and W "
                  "(zb-h1, zb-h2, zb-v, dualpipev); this %s schedule runs whole backwards (BW), "
                  "which free all their activations: drop --w-memory or choose such a kind",
                  kind);
        return CLI_EXIT_USAGE;
    }
    if (c->comm != 0 && mt_schedule_stages(s) == 1) {
        cli_error("--costs '%s': COMM %g counts only between devices, and this schedule has "
                  "1 stage, which sends no messages; give --stages 2 or more, or drop COMM",
                  costs_text, c->comm);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

/* Whether standard output is the file `path` (`schedule --load s.json
 * --json > s.json`: the shell emptied it before meshtrain started). */
static bool stdout_is(const char *path) {
    struct stat a, b;
    return fstat(STDOUT_FILENO, &a) == 0 && S_ISREG(a.st_mode) && stat(path, &b) == 0 &&
           a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* ---- printing ------------------------------------------------------------- */

static void print_text(const mt_schedule *s, const mt_pipe_sim *sim, const mt_pipe_costs *c,
                       double w_memory) {
    int p = mt_schedule_stages(s), v = mt_schedule_chunks(s);
    printf("%s: p = %d stages, m = %d microbatches, v = %d chunk%s per device; costs F %g, "
           "B %g, W %g, COMM %g; w-memory %g\n",
           mt_schedule_kind_name(mt_schedule_get_kind(s)), p, mt_schedule_microbatches(s), v,
           v == 1 ? "" : "s", c->f, c->b, c->w, c->comm, w_memory);
    if (mt_schedule_note(s)[0]) printf("note: %s\n", mt_schedule_note(s));
    printf("\n");
    mt_schedule_write_timeline(s, sim, stdout);
    double max_span = 0, max_busy = 0;
    for (int d = 0; d < p; d++) {
        if (sim->span[d] > max_span) max_span = sim->span[d];
        if (sim->busy[d] > max_busy) max_busy = sim->busy[d];
    }
    printf("\nmakespan          %.6g\n", sim->makespan);
    printf("bubble rate       %.2f%%   (max span %.6g - busy %.6g) / max span\n",
           100 * sim->bubble_rate, max_span, max_busy);
    printf("bubble fraction   %.2f%%   mean over devices of (makespan - busy) / makespan\n",
           100 * sim->bubble_fraction);
    printf("\n%-8s %10s %10s %10s %10s\n", "device", "busy", "span", "idle", "peak act");
    for (int d = 0; d < p; d++)
        printf("%-8d %10.6g %10.6g %10.6g %10.6g\n", d, sim->busy[d], sim->span[d],
               sim->span[d] - sim->busy[d], sim->peak_activations[d]);
    printf("(idle: inside the device's span; peak act: activations held, one microbatch on one "
           "whole stage = 1)\n");
}

typedef struct {
    const mt_schedule   *s;
    const mt_pipe_sim   *sim;
    const mt_pipe_costs *c;
} svg_job;

/* mt_output_write's writer of the picture. */
static mt_status put_svg(FILE *f, void *arg) {
    const svg_job *j = arg;
    return mt_schedule_write_svg(j->s, j->sim, j->c, f);
}

/* The JSON object, whole, into a new buffer *text (free it) of *len bytes:
 * stdout then gets all of it or, on a failure here, none. */
static mt_status json_text(const mt_schedule *s, const mt_pipe_sim *sim, char **text,
                           size_t *len) {
    *text = NULL;
    FILE *f = open_memstream(text, len);
    if (!f) return mt_fail(MT_ENOMEM, "out of memory for the schedule's JSON");
    mt_status st = mt_schedule_write_json(s, sim, f);
    if (fclose(f) != 0 && st == MT_OK)
        st = mt_fail(MT_ENOMEM, "out of memory for the schedule's JSON");
    if (st != MT_OK) {
        free(*text);
        *text = NULL;
    }
    return st;
}

/* ---- the command ---------------------------------------------------------- */

int cli_cmd_schedule(int argc, char **argv) {
    char choices[128];
    kind_choices(choices, sizeof choices);
    int kind = MT_SCHEDULE_1F1B, stages = 4, microbatches = 8, chunks = 0;
    const char *costs_text = "1,1,1,0", *svg = NULL, *load = NULL;
    double w_memory = 0;
    bool json = false;
    const cli_opt opts[] = {
        {"kind", CLI_CHOICE, &kind, 0, 0, 0, 0, choices, "KIND", "the schedule (required "
         "unless --load)"},
        {"stages", CLI_INT, &stages, 1, MT_SCHEDULE_MAX_STAGES, 0, 0, NULL, "P",
         "pipeline stages, one device each"},
        {"microbatches", CLI_INT, &microbatches, 1, 1 << 20, 0, 0, NULL, "M",
         "microbatches per optimizer step"},
        {"chunks", CLI_INT, &chunks, 0, MT_SCHEDULE_MAX_CHUNKS, 0, 0, NULL, "V",
         "model chunks per device (0: the kind's own: 2 for interleaved, zb-v, dualpipev, "
         "else 1)"},
        {"costs", CLI_STR, &costs_text, 0, 0, 0, 0, NULL, "F,B,W[,COMM]",
         "times of a forward, input gradient, weight gradient on a whole stage, and of a "
         "message"},
        {"w-memory", CLI_DOUBLE, &w_memory, 0, 1, 0, 0, NULL, "X",
         "share of a chunk's activations a B keeps until its W"},
        {"svg", CLI_STR, &svg, 0, 0, 0, 0, NULL, "FILE", "also draw the timeline as SVG here"},
        {"json", CLI_FLAG, &json, 0, 0, 0, 0, NULL, NULL, "print only the JSON object"},
        {"load", CLI_STR, &load, 0, 0, 0, 0, NULL, "FILE",
         "check and simulate the schedule in this JSON file instead of building one"},
        {NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL},
    };
    bool seen[sizeof opts / sizeof opts[0]] = {false};
    int rc = cli_parse("schedule", opts, argc, argv, seen);
    if (rc < 0) {
        cli_print_help(stdout, SCHEDULE_USAGE, opts);
        return CLI_EXIT_OK;
    }
    if (rc != CLI_EXIT_OK) return rc;
    if (load && (seen[0] || seen[1] || seen[2] || seen[3])) {
        cli_error("--load takes the kind, stages, microbatches and chunks from the file; drop "
                  "--%s", seen[0] ? "kind" : seen[1] ? "stages" : seen[2] ? "microbatches"
                                                                    : "chunks");
        return CLI_EXIT_USAGE;
    }
    if (!load && !seen[0]) {
        cli_error("schedule needs --kind KIND (%s) or --load FILE; see `meshtrain schedule "
                  "--help`", choices);
        return CLI_EXIT_USAGE;
    }
    mt_pipe_costs costs;
    if (!parse_costs(costs_text, w_memory, &costs)) return CLI_EXIT_USAGE;
    if (svg && mt_file_is_tmp(svg, NULL, 0)) {
        cli_error("--svg '%s': names ending in '%s' are the temporary files of saves; choose "
                  "another name", svg, MT_TMP_SUFFIX);
        return CLI_EXIT_USAGE;
    }
    if (load && stdout_is(load)) {
        cli_error("standard output is the --load file '%s': the shell emptied it before "
                  "meshtrain started; write the output to another file", load);
        return CLI_EXIT_USAGE;
    }

    /* a schedule made from the flags: their mistakes (m < p, chunks the
     * kind does not run) are usage errors, found before any file is touched */
    mt_schedule *s = NULL;
    mt_status st = MT_OK;
    if (!load) {
        st = mt_schedule_make((mt_schedule_kind)kind, stages, microbatches, chunks, &s);
        if (st != MT_OK) {
            cli_error("%s", mt_errmsg());
            return cli_exit_of(st);
        }
        if ((rc = check_context(s, seen[5], &costs, costs_text)) != CLI_EXIT_OK) {
            mt_schedule_free(s);
            return rc;
        }
    }
    /* the files: --svg never the --load file; claimed before the work */
    cli_file files[] = {
        {.flag = "load", .path = load, .role = CLI_FILE_IN},
        {.flag = "svg", .path = svg, .role = CLI_FILE_SAVE},
    };
    mt_output *svg_out = NULL;
    rc = cli_check_files(files, 2);
    if (rc == CLI_EXIT_OK && svg && (st = mt_output_claim(svg, "picture", &svg_out)) != MT_OK) {
        cli_error("--svg: %s", mt_errmsg());
        rc = cli_exit_of(st);
    }
    if (rc == CLI_EXIT_OK && load) {
        if ((st = load_schedule(load, &s)) != MT_OK) {
            cli_error("%s", mt_errmsg());
            rc = cli_exit_of(st);
        } else {
            rc = check_context(s, seen[5], &costs, costs_text);
        }
    }
    mt_pipe_sim sim;
    memset(&sim, 0, sizeof sim);
    if (rc == CLI_EXIT_OK && (st = mt_schedule_simulate(s, &costs, w_memory, &sim)) != MT_OK) {
        cli_error("%s", mt_errmsg());
        rc = cli_exit_of(st);
    }
    int out_err = 0;
    if (rc == CLI_EXIT_OK && json) {
        char *text = NULL;
        size_t len = 0;
        if ((st = json_text(s, &sim, &text, &len)) != MT_OK) {
            cli_error("%s", mt_errmsg());
            rc = cli_exit_of(st);
        } else if (fwrite(text, 1, len, stdout) != len) {
            out_err = errno ? errno : EIO;
        }
        free(text);
    } else if (rc == CLI_EXIT_OK) {
        print_text(s, &sim, &costs, w_memory);
    }
    if (rc == CLI_EXIT_OK && svg_out) {
        const svg_job job = {s, &sim, &costs};
        if ((st = mt_output_write(svg_out, put_svg, (void *)&job)) != MT_OK) {
            cli_error("--svg: %s", mt_errmsg());
            rc = cli_exit_of(st);
        } else if (!json) {
            printf("wrote %s\n", svg);
        }
    }
    if (rc == CLI_EXIT_OK && (!cli_flush(stdout, &out_err) || out_err)) {
        cli_error("cannot write to standard output: %s", strerror(out_err ? out_err : EIO));
        rc = CLI_EXIT_FAIL;
    }
    mt_output_close(svg_out);
    mt_pipe_sim_free(&sim);
    mt_schedule_free(s);
    return rc;
}
