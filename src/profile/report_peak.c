/*
 * report_peak.c — a traced run's machine figures from the machine file
 * (mt_report_machine_from_file, report.h): the roof is the FMA peak of the
 * kernel level the run ran at, which the trace records.
 */
#include "report_impl.h"

#include <math.h>
#include <string.h>

const char *mt_report_cpu_isa(const mt_report *r) { return r->traced_isa; }

/* A device's share of a machine figure: the larger of one thread's and all
 * cores' over n devices (NAN in the file: unknown, 0). */
static double share(double one, double all, int n) {
    double per = isnan(all) ? 0 : all / (n > 0 ? n : 1);
    return isnan(one) ? per : fmax(one, per);
}

void mt_report_machine_from_file(const mt_report *r, const mt_machine *m, int n_devices,
                                 mt_report_machine *out) {
    if (out->peak_gflops == 0) {
        const char *name = r->traced_isa;
        const int isa = mt_cpu_isa_parse(name);   /* -1: none, or unknown */
        const double one = isa >= 0 ? mt_machine_isa_gflops(m, (mt_cpu_isa)isa, false) : NAN,
                     all = isa >= 0 ? mt_machine_isa_gflops(m, (mt_cpu_isa)isa, true) : NAN;
        if (one > 0 || all > 0) {   /* NAN (or an unset 0): the file lacks it */
            out->peak_gflops = share(one, all, n_devices);
            snprintf(out->peak_source, sizeof out->peak_source,
                     "the %s FMA peak: the run's kernel level", name);
        } else {
            out->peak_gflops = share(m->sgemm_gflops_1, m->sgemm_gflops_all, n_devices);
            if (!name[0])
                snprintf(out->peak_source, sizeof out->peak_source,
                         "Open BLAS sgemm: the trace does not say its kernel level");
            else
                snprintf(out->peak_source, sizeof out->peak_source,
                         "Open BLAS sgemm: the machine file has no %s FMA peak", name);
        }
    }
    if (out->bandwidth_gbs == 0) out->bandwidth_gbs = share(m->triad_gbs_1, m->triad_gbs_all, n_devices);
}
