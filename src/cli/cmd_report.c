/*
 * cmd_report.c — `meshtrain report TRACE`: where a traced run's time went
 * (include/meshtrain/report.h does the analysis and defines its numbers).
 */
#include "args.h"

#include <math.h>
#include <string.h>

#include "meshtrain.h"

static const char USAGE[] =
    "usage: meshtrain report TRACE [--peak-gflops X] [--bandwidth-gbs Y] [--model-flops F] "
    "[--json]\n"
    "Reads a trace of `meshtrain train --trace TRACE` and prints per op kind its time share,\n"
    "GFLOP/s, GB/s, flops/byte and roofline bound min(peak, intensity x bandwidth); per device\n"
    "busy, idle, exposed communication (comm spans on its own track and 'wait:' regions: the\n"
    "device stood still) and hidden communication (async comm-lane time under its busy time);\n"
    "per step wall time, MFU (model FLOPs / (wall x peak)), HFU (op FLOPs / (wall x peak x\n"
    "devices)) and the pipeline bubble; and the three things to fix first.\n";

int cli_cmd_report(int argc, char **argv) {
    double peak = 0, bw = 0, model = 0;
    bool json = false;
    const cli_opt opts[] = {
        {"peak-gflops", CLI_DOUBLE, &peak, 0, HUGE_VAL, false, false, NULL, "X",
         "a device's peak, GFLOP/s (0: unknown)"},
        {"bandwidth-gbs", CLI_DOUBLE, &bw, 0, HUGE_VAL, false, false, NULL, "Y",
         "a device's memory bandwidth, GB/s (0: unknown)"},
        {"model-flops", CLI_DOUBLE, &model, 0, HUGE_VAL, false, false, NULL, "F",
         "the model's FLOPs per step, all devices (0: unknown; MFU needs it)"},
        {"json", CLI_FLAG, &json, 0, 0, false, false, NULL, NULL, "one JSON object instead"},
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
    mt_report *r = NULL;
    mt_report_machine m = {.peak_gflops = peak, .bandwidth_gbs = bw, .model_flops = model};
    mt_status s = mt_report_read(argv[0], &r);
    if (s == MT_OK) s = mt_report_analyse(r, &m);
    if (s != MT_OK) {
        cli_error("%s", mt_errmsg());
        mt_report_free(r);
        return CLI_EXIT_FAIL;
    }
    if (json) mt_report_write_json(r, stdout);
    else mt_report_write_text(r, stdout);
    mt_report_free(r);
    return CLI_EXIT_OK;
}
