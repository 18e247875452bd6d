/*
 * cmd_report.c — `meshtrain report TRACE`: where a traced run's time went
 * (include/meshtrain/report.h does the analysis and defines its numbers).
 */
#include "args.h"
#include "bench_machine.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "meshtrain.h"

static const char USAGE[] =
    "usage: meshtrain report TRACE [--machine FILE] [--peak-gflops X] [--bandwidth-gbs Y]\n"
    "                            [--model-flops F] [--json] [--metrics FILE] [--out DIR]\n"
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
    "(train and validation loss per step); then prints 'pictures: ...' (on stderr with --json).\n";

/* Makes `dir` when missing (one level, as mkdir). */
static bool make_dir(const char *dir) {
    struct stat st;
    if (mkdir(dir, 0777) == 0) return true;
    if (errno == EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) return true;
    if (errno == EEXIST)
        cli_error("--out '%s' is there but is not a directory; give a directory for the pictures",
                  dir);
    else
        cli_error("--out: cannot make the directory '%s': %s; give a directory whose parent "
                  "exists", dir, strerror(errno));
    return false;
}

/* Writes roofline.svg, timeline.svg and (with metrics) loss.svg into dir;
 * `written` gets " DIR/NAME" for each. */
static bool write_pictures(const mt_report *r, const mt_report_metrics *metrics, const char *dir,
                           char *written, size_t n) {
    static const char *const NAME[3] = {"roofline.svg", "timeline.svg", "loss.svg"};
    if (!make_dir(dir)) return false;
    for (int i = 0; i < (metrics ? 3 : 2); i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, NAME[i]);
        FILE *f = fopen(path, "w");
        if (!f) {
            cli_error("--out: cannot write '%s': %s", path, strerror(errno));
            return false;
        }
        mt_status s = i == 0 ? mt_report_write_svg_roofline(r, f)
                    : i == 1 ? mt_report_write_svg_timeline(r, f)
                             : mt_report_write_svg_loss(metrics, f);
        if (fclose(f) != 0 && s == MT_OK)
            s = mt_fail(MT_EIO, "cannot write '%s': %s", path, strerror(errno));
        if (s != MT_OK) {
            cli_error("--out: '%s': %s", path, mt_errmsg());
            return false;
        }
        size_t at = strlen(written);
        snprintf(written + at, n - at, " %s", path);
    }
    return true;
}

int cli_cmd_report(int argc, char **argv) {
    double peak = 0, bw = 0, model = 0;
    bool json = false;
    const char *machine_path = NULL, *metrics_path = NULL, *out_dir = NULL;
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
    mt_machine mach;
    char used_path[4096];
    bool have_machine = false;
    if (!cli_machine_load(machine_path, &mach, &have_machine, used_path, sizeof used_path))
        return CLI_EXIT_FAIL;
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
    if (s != MT_OK) cli_error("%s", mt_errmsg());
    else if (out_dir && !write_pictures(r, metrics, out_dir, written, sizeof written)) s = MT_EIO;
    if (s != MT_OK) {
        mt_report_metrics_free(metrics);
        mt_report_free(r);
        return CLI_EXIT_FAIL;
    }
    if (json) mt_report_write_json(r, stdout);
    else mt_report_write_text(r, stdout);
    if (out_dir) fprintf(json ? stderr : stdout, "pictures:%s\n", written);
    mt_report_metrics_free(metrics);
    mt_report_free(r);
    return CLI_EXIT_OK;
}
