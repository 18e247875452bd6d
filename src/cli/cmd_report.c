/*
 * cmd_report.c — `meshtrain report TRACE`: where a traced run's time went
 * (include/meshtrain/report.h does the analysis and defines its numbers).
 */
#include "args.h"
#include "bench_machine.h"
#include "files.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "meshtrain.h"

static const char USAGE[] =
    "usage: meshtrain report TRACE [--machine FILE] [--peak-gflops X] [--bandwidth-gbs Y]\n"
    "                            [--model-flops F] [--json] [--metrics FILE] [--out DIR]\n"
    "                            [--html FILE]\n"
    "Reads a trace of `meshtrain train --trace TRACE` and prints per op kind its time share,\n"
    "GFLOP/s, GB/s, flops/byte and roofline bound min(peak, intensity x bandwidth); per device\n"
    "busy, idle, exposed communication (comm spans on its own track and 'wait:' regions: the\n"
    "device stood still) and hidden communication (async comm-lane time under its busy time);\n"
    "per step wall time, MFU (model FLOPs / (wall x peak)), HFU (op FLOPs / (wall x peak x\n"
    "devices)) and the pipeline bubble; and the three things to fix first.\n"
    "\n"
    "A device's peak and bandwidth come from --peak-gflops and --bandwidth-gbs, else from the\n"
    "machine file of `meshtrain bench machine` (--machine FILE, or machine.json beside the\n"
    "binary when there): the devices share the machine, each getting the larger of the\n"
    "1-thread figure and the all-cores figure over the trace's devices. The peak is the FMA\n"
    "peak of the kernel level the run ran at (the trace says which; MT_CPU_ISA caps it), or\n"
    "Open BLAS sgemm's rate for a trace or machine file from before kernel levels; the\n"
    "table's head says which.\n"
    "\n"
    "--metrics FILE (the log of `meshtrain train --metrics FILE`) adds a 'run' section: steps,\n"
    "first and last train loss, last and best validation loss, median tokens/s and ms per step.\n"
    "--out DIR writes pictures into DIR (made when missing): roofline.svg (op kinds at their\n"
    "FLOP/byte and GFLOP/s under the roof, area = share of op time), timeline.svg (the step of\n"
    "median wall time, a row per device and per async comm lane) and, with --metrics, loss.svg\n"
    "(train and validation loss per step); then prints 'pictures: ...' (on stderr with --json).\n"
    "--html FILE writes the whole report as one self-contained page: the fixes, the roofline,\n"
    "the tables, the timeline and (with --metrics) the run and its loss, no script and nothing\n"
    "loaded from elsewhere; then prints 'page: FILE' (on stderr with --json).\n";

static const char *const PICTURE[3] = {"roofline.svg", "timeline.svg", "loss.svg"};

/* Makes `dir` when missing (one level, as mkdir); *made says it did. */
static int make_dir(const char *dir, bool *made) {
    struct stat st;
    *made = false;
    if (mkdir(dir, 0777) == 0) {
        *made = true;
        return CLI_EXIT_OK;
    }
    if (errno == EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) return CLI_EXIT_OK;
    if (errno == EEXIST)
        cli_error("--out '%s' is there but is not a directory; give a directory for the pictures",
                  dir);
    else
        cli_error("--out: cannot make the directory '%s': %s; give a directory whose parent "
                  "exists", dir, strerror(errno));
    return CLI_EXIT_FAIL;
}

/* The command's files: the inputs, and the pictures of --out, checked
 * against each other (an input among the pictures would be overwritten) and
 * claimed before the trace is read. picture[i] gets DIR/NAME. */
typedef struct {
    char       picture[3][4200];
    mt_output *claim[3];
    int        n;          /* pictures to write: 2, 3 with --metrics */
    bool       made_dir;   /* --out was made here: removed again on failure */
    mt_output *page;       /* --html's claim */
} report_files;

/* --html's file, checked against the inputs and claimed. */
static int claim_page(report_files *rf, const char *trace, const char *metrics,
                      const char *machine, const char *html) {
    const cli_file files[] = {
        {.flag = "trace", .path = trace, .role = CLI_FILE_IN},
        {.flag = "metrics", .path = metrics, .role = CLI_FILE_IN},
        {.flag = "machine", .path = machine, .role = CLI_FILE_IN},
        {.flag = "html", .path = html, .role = CLI_FILE_SAVE},
    };
    int rc = cli_check_files(files, 4);
    if (rc != CLI_EXIT_OK || !html) return rc;
    mt_status s = mt_output_claim(html, "page", &rf->page);
    if (s != MT_OK) {
        cli_error("--html: %s", mt_errmsg());
        return cli_exit_of(s);
    }
    return CLI_EXIT_OK;
}

static int claim_files(report_files *rf, const char *trace, const char *metrics,
                       const char *machine, const char *out_dir, const char *html) {
    memset(rf, 0, sizeof *rf);
    int rc = claim_page(rf, trace, metrics, machine, html);
    if (rc != CLI_EXIT_OK || !out_dir) return rc;
    if ((rc = make_dir(out_dir, &rf->made_dir)) != CLI_EXIT_OK) return rc;
    rf->n = metrics ? 3 : 2;
    for (int i = 0; i < rf->n; i++)
        snprintf(rf->picture[i], sizeof rf->picture[i], "%s/%s", out_dir, PICTURE[i]);
    const cli_file files[] = {
        {.flag = "trace", .path = trace, .role = CLI_FILE_IN},
        {.flag = "metrics", .path = metrics, .role = CLI_FILE_IN},
        {.flag = "machine", .path = machine, .role = CLI_FILE_IN},
        {.flag = "out", .path = rf->picture[0], .role = CLI_FILE_SAVE},
        {.flag = "out", .path = rf->picture[1], .role = CLI_FILE_SAVE},
        {.flag = "out", .path = rf->n > 2 ? rf->picture[2] : NULL, .role = CLI_FILE_SAVE},
        {.flag = "html", .path = html, .role = CLI_FILE_SAVE},
    };
    if ((rc = cli_check_files(files, 7)) != CLI_EXIT_OK) return rc;
    for (int i = 0; i < rf->n; i++) {
        mt_status s = mt_output_claim(rf->picture[i], "picture", &rf->claim[i]);
        if (s != MT_OK) {
            cli_error("--out: %s", mt_errmsg());
            return cli_exit_of(s);
        }
    }
    return CLI_EXIT_OK;
}

/* Releases the claims; a directory made for pictures never written goes. */
static void release_files(report_files *rf, const char *out_dir, bool written) {
    for (int i = 0; i < 3; i++) mt_output_close(rf->claim[i]);
    mt_output_close(rf->page);
    if (rf->made_dir && !written) rmdir(out_dir);
}

typedef struct {
    const mt_report         *r;
    const mt_report_metrics *metrics;
    int                      which;   /* 0-2 the pictures, 3 the page */
} picture_job;

static mt_status write_picture(FILE *f, void *arg) {
    const picture_job *j = arg;
    return j->which == 0 ? mt_report_write_svg_roofline(j->r, f)
         : j->which == 1 ? mt_report_write_svg_timeline(j->r, f)
         : j->which == 2 ? mt_report_write_svg_loss(j->metrics, f)
                         : mt_report_write_html(j->r, j->metrics, f);
}

/* Writes every picture through its claim; one that fails does not stop the
 * others. `written` gets " DIR/NAME" for each written. */
static bool write_pictures(const mt_report *r, const mt_report_metrics *metrics,
                           report_files *rf, char *written, size_t n) {
    bool all = true;
    for (int i = 0; i < rf->n; i++) {
        picture_job j = {r, metrics, i};
        if (mt_output_write(rf->claim[i], write_picture, &j) != MT_OK) {
            cli_error("--out: %s", mt_errmsg());
            all = false;
            continue;
        }
        size_t at = strlen(written);
        snprintf(written + at, n - at, " %s", rf->picture[i]);
    }
    return all;
}

int cli_cmd_report(int argc, char **argv) {
    double peak = 0, bw = 0, model = 0;
    bool json = false;
    const char *machine_path = NULL, *metrics_path = NULL, *out_dir = NULL, *html = NULL;
    const cli_opt opts[] = {
        {"machine", CLI_STR, &machine_path, 0, 0, false, false, NULL, "FILE",
         "the probe's figures (default: machine.json beside the binary, when there)"},
        {"peak-gflops", CLI_DOUBLE, &peak, 0, HUGE_VAL, false, false, NULL, "X",
         "a device's peak, GFLOP/s (0: unknown)"},
        {"bandwidth-gbs", CLI_DOUBLE, &bw, 0, HUGE_VAL, false, false, NULL, "Y",
         "a device's memory bandwidth, GB/s (0: unknown)"},
        {"model-flops", CLI_DOUBLE, &model, 0, HUGE_VAL, false, false, NULL, "F",
         "the model's FLOPs per step, all devices (0: unknown; MFU needs it)"},
        {"json", CLI_FLAG, &json, 0, 0, false, false, NULL, NULL, "one JSON object instead"},
        {"metrics", CLI_STR, &metrics_path, 0, 0, false, false, NULL, "FILE",
         "the run's metrics log (train --metrics): a run section, and loss.svg with --out"},
        {"out", CLI_STR, &out_dir, 0, 0, false, false, NULL, "DIR",
         "write roofline.svg, timeline.svg (and loss.svg) into DIR"},
        {"html", CLI_STR, &html, 0, 0, false, false, NULL, "FILE",
         "write the report as one self-contained HTML page"},
        {NULL, 0, NULL, 0, 0, false, false, NULL, NULL, NULL},
    };
    if (argc >= 1 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
        cli_print_help(stdout, USAGE, opts);
        return CLI_EXIT_OK;
    }
    if (argc < 1 || argv[0][0] == '-') {
        cli_error("report needs a trace file: meshtrain report TRACE (see meshtrain help report)");
        return CLI_EXIT_USAGE;
    }
    int rc = cli_parse("report", opts, argc - 1, argv + 1, NULL);
    if (rc == -1) {
        cli_print_help(stdout, USAGE, opts);
        return CLI_EXIT_OK;
    }
    if (rc != CLI_EXIT_OK) return rc;
    report_files rf;
    if ((rc = claim_files(&rf, argv[0], metrics_path, machine_path, out_dir, html)) !=
        CLI_EXIT_OK) {
        release_files(&rf, out_dir, false);
        return rc;
    }
    mt_machine mach;
    char used_path[4096];
    bool have_machine = false;
    if (!cli_machine_load(machine_path, &mach, &have_machine, used_path, sizeof used_path)) {
        release_files(&rf, out_dir, false);
        return CLI_EXIT_FAIL;
    }
    mt_report *r = NULL;
    mt_status s = mt_report_read(argv[0], &r);
    mt_report_machine m = {.peak_gflops = peak, .bandwidth_gbs = bw, .model_flops = model};
    if (s == MT_OK && have_machine) {   /* the flags win over the file */
        /* the devices of the trace: a first analysis finds them */
        mt_report_machine none = {0};
        int n_dev = 0;
        s = mt_report_analyse(r, &none);
        mt_report_devices(r, &n_dev);
        mt_report_machine_from_file(r, &mach, n_dev, &m);   /* the run's kernel level's peak */
    }
    if (s == MT_OK) s = mt_report_analyse(r, &m);
    mt_report_metrics *metrics = NULL;
    if (s == MT_OK && metrics_path) s = mt_report_metrics_read(metrics_path, &metrics);
    if (metrics) mt_report_set_run(r, mt_report_metrics_run(metrics));
    char written[3 * 4200] = "";
    if (s != MT_OK) {
        cli_error("%s", mt_errmsg());
        mt_report_metrics_free(metrics);
        mt_report_free(r);
        release_files(&rf, out_dir, false);
        return cli_exit_of(s);
    }
    /* a picture that cannot be written fails the command, after the others
     * and the report are written */
    rc = out_dir && !write_pictures(r, metrics, &rf, written, sizeof written) ? CLI_EXIT_FAIL
                                                                                : CLI_EXIT_OK;
    bool paged = false;
    if (html) {
        picture_job j = {r, metrics, 3};
        if (mt_output_write(rf.page, write_picture, &j) == MT_OK) paged = true;
        else cli_error("--html: %s", mt_errmsg()), rc = CLI_EXIT_FAIL;
    }
    if (json) mt_report_write_json(r, stdout);
    else mt_report_write_text(r, stdout);
    if (out_dir && written[0]) fprintf(json ? stderr : stdout, "pictures:%s\n", written);
    if (paged) fprintf(json ? stderr : stdout, "page: %s\n", html);
    mt_report_metrics_free(metrics);
    mt_report_free(r);
    release_files(&rf, out_dir, written[0] != '\0');
    return rc;
}
