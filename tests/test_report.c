/*
 * test_report.c — mt_report (include/meshtrain/report.h) on a synthetic
 * two-device trace whose answers are worked out by hand below: busy, idle,
 * exposed and hidden communication, MFU and HFU, the bubble of a small
 * pipeline timeline, the roofline class of ops of known intensity; and the
 * errors for a truncated and an invalid trace, for every field whose value
 * the analysis cannot use (NaN, infinite, negative, out of range), and for
 * inputs that are no regular file.
 */
#include "harness.h"
#include "meshtrain.h"
#include "trace_text.h"
#include "profile/profile_impl.h"

#include <sys/stat.h>
#include <unistd.h>

#define OP(name, tid, ts, dur, flops, bytes)                                                  \
    "{\"name\":\"" name "\",\"cat\":\"op\",\"ph\":\"X\",\"ts\":" #ts ",\"dur\":" #dur        \
    ",\"pid\":0,\"tid\":" #tid ",\"args\":{\"phase\":\"F\",\"layer\":0,\"flops\":" #flops \
    ",\"bytes\":" #bytes ",\"out\":\"act.1\"}}"

/*
 * Device 0, step 0..100 µs:   idle 0-10 | forward mb 0 chunk 0 10-40 (op matmul 10-30)
 *   | psum on its own track 40-50 | backward B mb 0 chunk 0 50-80 (op gemm 50-70)
 *   | wait: gradient reductions 80-90 | idle 90-100;  its comm lane: psum (async) 60-85.
 *   busy = [10,40]+[50,80] = 60; waits = [40,50]+[80,90] -> exposed 20; idle 20;
 *   hidden = [60,85] ∩ busy = [60,80] = 20; async 25.
 * Device 1, step 0..100:   idle 0-30 | forward mb 0 chunk 0 30-60 | backward B mb 0 chunk 0
 *   60-90 | idle 90-100.  busy 60, idle 40, exposed 0, hidden 0.
 * Bubble: spans 70 (dev 0: 10..80) and 60; busy 60 and 60 -> (70 - 60) / 70.
 * matmul: 1e5 flops, 1e5 bytes in 20 µs: intensity 1, 5 GFLOP/s; at peak 100 GFLOP/s and
 *   10 GB/s memory-bound, bound 10, at half of it. gemm: 1e6 flops, 1e4 bytes: intensity
 *   100, 50 GFLOP/s, compute-bound, bound 100, half of it.
 * Step flops 1.1e6 in 100 µs: HFU = 1.1e6 / (1e-4 · 1e11 · 2) = 0.055; MFU at 4e6 model
 *   FLOPs = 4e6 / (1e-4 · 1e11 · 2) = 0.2 (the peak of both devices); at the trace's
 *   own 6e6 ("model" metadata, used when none is given) 0.3.
 */
#define MODEL "{\"name\":\"model\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{\"flops_per_step\":6e6}},\n"
#define EVENTS \
    "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{\"name\":\"device 0\"}},\n" \
    "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":100001,\"args\":{\"name\":\"device 0 comm 1\"}},\n" \
    "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":1,\"args\":{\"name\":\"device 1\"}},\n" \
    X("step 1", "step", 0, 0, 100) ",\n" \
    X("idle", "idle", 0, 0, 10) ",\n" \
    X("forward mb 0 chunk 0", "compute", 0, 10, 30) ",\n" \
    OP("matmul", 0, 10, 20, 100000, 100000) ",\n" \
    X("psum 'data'", "comm", 0, 40, 10) ",\n" \
    X("backward B mb 0 chunk 0", "compute", 0, 50, 30) ",\n" \
    OP("gemm", 0, 50, 20, 1000000, 10000) ",\n" \
    X("wait: gradient reductions", "compute", 0, 80, 10) ",\n" \
    X("idle", "idle", 0, 90, 10) ",\n" \
    X("step 1", "step", 100001, 0, 100) ",\n" \
    X("psum (async) 'data'", "comm", 100001, 60, 25) ",\n" \
    X("step 1", "step", 1, 0, 100) ",\n" \
    X("idle", "idle", 1, 0, 30) ",\n" \
    X("forward mb 0 chunk 0", "compute", 1, 30, 30) ",\n" \
    X("backward B mb 0 chunk 0", "compute", 1, 60, 30) ",\n" \
    X("idle", "idle", 1, 90, 10)
static const char TRACE[] = HEAD EVENTS TAIL;
static const char TRACE_MODEL[] = HEAD MODEL EVENTS TAIL;

static const char *write_file(const char *name, const char *text, size_t n) {
    FILE *f = fopen(name, "wb");
    MT_CHECK(f, "cannot write %s", name);
    MT_CHECK(fwrite(text, 1, n, f) == n, "short write to %s", name);
    fclose(f);
    return name;
}

static mt_report *analysed(const mt_report_machine *m) {
    mt_report *r = NULL;
    MT_CHECK_OK(mt_report_read(write_file("synthetic.json", TRACE, sizeof TRACE - 1), &r));
    MT_CHECK_OK(mt_report_analyse(r, m));
    return r;
}

MT_TEST(devices_busy_idle_exposed_hidden) {
    mt_report *r = analysed(NULL);
    int n;
    const mt_report_device *d = mt_report_devices(r, &n);
    MT_CHECK(n == 2, "%d devices, want 2", n);
    const double want[2][5] = {{60, 20, 20, 20, 25}, {60, 40, 0, 0, 0}};
    for (int i = 0; i < 2; i++) {
        MT_CHECK(d[i].device == i, "device %d at %d", d[i].device, i);
        MT_CHECK_CLOSE(d[i].busy_us, want[i][0], 1e-9, "device %d busy", i);
        MT_CHECK_CLOSE(d[i].idle_us, want[i][1], 1e-9, "device %d idle", i);
        MT_CHECK_CLOSE(d[i].exposed_us, want[i][2], 1e-9, "device %d exposed", i);
        MT_CHECK_CLOSE(d[i].hidden_us, want[i][3], 1e-9, "device %d hidden", i);
        MT_CHECK_CLOSE(d[i].async_us, want[i][4], 1e-9, "device %d async", i);
    }
    mt_report_free(r);
}

MT_TEST(step_mfu_hfu_bubble) {
    mt_report_machine m = {.peak_gflops = 100, .bandwidth_gbs = 10, .model_flops = 4e6};
    mt_report *r = analysed(&m);
    int n;
    const mt_report_step *s = mt_report_steps(r, &n);
    MT_CHECK(n == 1 && s[0].step == 1, "%d steps", n);
    MT_CHECK_CLOSE(s[0].wall_us, 100, 1e-9, "wall");
    MT_CHECK_CLOSE(s[0].flops, 1.1e6, 1e-9, "flops");
    MT_CHECK_CLOSE(s[0].mfu, 0.2, 1e-9, "MFU");
    MT_CHECK_CLOSE(s[0].hfu, 0.055, 1e-9, "HFU");
    MT_CHECK_CLOSE(s[0].bubble, 10.0 / 70, 1e-9, "bubble");
    /* without the machine's figures MFU and HFU are unknown */
    MT_CHECK_OK(mt_report_analyse(r, NULL));
    s = mt_report_steps(r, &n);
    MT_CHECK(isnan(s[0].mfu) && isnan(s[0].hfu), "MFU %g HFU %g without a peak", s[0].mfu, s[0].hfu);
    mt_report_free(r);
}

/*
 * Waiting for other devices (sync) apart from exposed communication, one
 * step of 100 µs on two devices; collectives matched by their "seq":
 *   device 0: op 0-10 | psum 'data' seq 1, 10-50 | wait 85-95 | send 96-98;
 *             lane: psum (async) seq 2, 60-95.
 *   device 1: op 0-40 | psum 'data' seq 1, 40-50 | wait 92-96 | recv 96-99;
 *             lane: psum (async) seq 2, 90-96.
 * seq 1 arrives at 40: device 0 waits 10-40 for device 1 (sync 30), then
 * 40-50 exposed. seq 2 arrives at 90: device 0's wait 85-95 is sync 85-90,
 * exposed 90-95. Sends and receives are not matched: exposed.
 *   device 0: waits 40 + 10 + 2 = 52, sync 35, exposed 17.
 *   device 1: waits 10 + 4 + 3 = 17, sync 0 (it arrived last), exposed 17.
 * The first fix: sync 35 / (2 devices · 100 µs) = 17.5 % of the step.
 * An embedding op on device 1 moves 5e4 bytes in 10 µs and does no FLOPs:
 * 5 GB/s, memory-bound at half of a 10 GB/s bandwidth.
 */
#define SEQ(name, tid, ts, dur, seq)                                                        \
    "{\"name\":\"" name "\",\"cat\":\"comm\",\"ph\":\"X\",\"ts\":" #ts ",\"dur\":" #dur \
    ",\"pid\":0,\"tid\":" #tid ",\"args\":{\"bytes\":1024,\"seq\":" #seq "}}"
static const char TRACE_SYNC[] =
    HEAD
    "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{\"name\":\"device 0\"}},\n"
    "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":1,\"args\":{\"name\":\"device 1\"}},\n"
    "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":100001,\"args\":{\"name\":\"device 0 comm 1\"}},\n"
    "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":100065,\"args\":{\"name\":\"device 1 comm 1\"}},\n"
    X("step 1", "step", 0, 0, 100) ",\n"
    OP("matmul", 0, 0, 10, 1000, 1000) ",\n"
    SEQ("psum 'data'", 0, 10, 40, 1) ",\n"
    X("wait: gradient reductions", "compute", 0, 85, 10) ",\n"
    SEQ("send 'pipe'", 0, 96, 2, 3) ",\n"
    SEQ("psum (async) 'data'", 100001, 60, 35, 2) ",\n"
    X("step 1", "step", 1, 0, 100) ",\n"
    OP("gemm", 1, 0, 40, 1000, 1000) ",\n"
    SEQ("psum 'data'", 1, 40, 10, 1) ",\n"
    OP("embedding", 1, 50, 10, 0, 50000) ",\n"
    X("wait: gradient reductions", "compute", 1, 92, 4) ",\n"
    SEQ("recv 'pipe'", 1, 96, 3, 3) ",\n"
    SEQ("psum (async) 'data'", 100065, 90, 6, 2)
    TAIL;

MT_TEST(waiting_for_other_devices_is_sync_not_exposed) {
    mt_report *r = NULL;
    MT_CHECK_OK(mt_report_read(write_file("sync.json", TRACE_SYNC, sizeof TRACE_SYNC - 1), &r));
    MT_CHECK_OK(mt_report_analyse(r, NULL));
    int n;
    const mt_report_device *d = mt_report_devices(r, &n);
    MT_CHECK(n == 2, "%d devices", n);
    MT_CHECK_CLOSE(d[0].sync_us, 35, 1e-9, "device 0 sync");
    MT_CHECK_CLOSE(d[0].exposed_us, 17, 1e-9, "device 0 exposed");
    MT_CHECK_CLOSE(d[1].sync_us, 0, 1e-9, "device 1 sync");
    MT_CHECK_CLOSE(d[1].exposed_us, 17, 1e-9, "device 1 exposed");
    const mt_report_fix *f = mt_report_fixes(r, &n);
    MT_CHECK(n >= 1 && strstr(f[0].text, "waiting for other devices"), "first fix '%s'",
             n ? f[0].text : "(none)");
    MT_CHECK_CLOSE(f[0].figure, 0.175, 1e-9, "the sync share of the step");
    mt_report_machine m = {.peak_gflops = 100, .bandwidth_gbs = 10};
    MT_CHECK_OK(mt_report_analyse(r, &m));
    const mt_report_op *o = mt_report_ops(r, &n);
    int k = 0;
    while (k < n && strcmp(o[k].kind, "embedding") != 0) k++;
    MT_CHECK(k < n, "no embedding op kind");
    MT_CHECK(o[k].bound == MT_BOUND_MEMORY && isnan(o[k].bound_gflops),
             "a data-only op is memory-bound without a FLOP bound (bound %d)", (int)o[k].bound);
    MT_CHECK_CLOSE(o[k].of_bound, 0.5, 1e-9, "embedding's share of the bandwidth");
    mt_report_free(r);
}

MT_TEST(model_flops_from_the_trace) {
    mt_report *r = NULL;
    MT_CHECK_OK(mt_report_read(write_file("model.json", TRACE_MODEL, sizeof TRACE_MODEL - 1), &r));
    mt_report_machine m = {.peak_gflops = 100};
    MT_CHECK_OK(mt_report_analyse(r, &m));
    int n;
    const mt_report_step *s = mt_report_steps(r, &n);
    MT_CHECK_CLOSE(s[0].mfu, 0.3, 1e-9, "MFU from the trace's model FLOPs");
    m.model_flops = 4e6;   /* a figure given wins */
    MT_CHECK_OK(mt_report_analyse(r, &m));
    s = mt_report_steps(r, &n);
    MT_CHECK_CLOSE(s[0].mfu, 0.2, 1e-9, "MFU from the given model FLOPs");
    mt_report_free(r);
}

/*
 * The roof of a run capped at avx2 on an AVX-512 machine is the avx2 FMA peak
 * (the trace's "cpu_isa" metadata), a device's share of it: the machine file
 * below gives avx2 60 GFLOP/s on 1 thread and 100 on all cores, so each of the
 * 2 devices gets max(60, 100 / 2) = 60; MFU = 6e6 / (1e-4 s · 60e9 · 2) = 0.5
 * (avx512's 120/200 would give 0.25). A trace without the metadata, or a file
 * without the level, falls back to sgemm: max(50, 90 / 2) = 50, MFU 0.6. The
 * bandwidth: max(10, 16 / 2) = 10 either way.
 */
#define CPU_ISA "{\"name\":\"cpu_isa\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{\"level\":\"avx2\",\"best\":\"avx512\"}},\n"
static const char TRACE_ISA[] = HEAD MODEL CPU_ISA EVENTS TAIL;

static mt_machine levels_machine(void) {
    mt_machine m = {.sgemm_gflops_1 = 50, .sgemm_gflops_all = 90, .triad_gbs_1 = 10,
                    .triad_gbs_all = 16};
    for (int i = 0; i < 4; i++) m.fma_isa_gflops_1[i] = m.fma_isa_gflops_all[i] = NAN;
    m.fma_isa_gflops_1[MT_ISA_AVX2] = 60, m.fma_isa_gflops_all[MT_ISA_AVX2] = 100;
    m.fma_isa_gflops_1[MT_ISA_AVX512] = 120, m.fma_isa_gflops_all[MT_ISA_AVX512] = 200;
    return m;
}

/* MFU of the trace `text` against machine file `file`, and the text report's first line */
static double mfu_with(const char *text, size_t n, const mt_machine *file, char *head, size_t hn) {
    mt_report *r = NULL;
    MT_CHECK_OK(mt_report_read(write_file("isa.json", text, n), &r));
    mt_report_machine none = {0}, m = {0};
    int n_dev = 0, n_steps = 0;
    MT_CHECK_OK(mt_report_analyse(r, &none));
    mt_report_devices(r, &n_dev);
    MT_CHECK(n_dev == 2, "%d devices", n_dev);
    mt_report_machine_from_file(r, file, n_dev, &m);
    MT_CHECK_CLOSE(m.bandwidth_gbs, 10, 1e-12, "a device's bandwidth");
    MT_CHECK_OK(mt_report_analyse(r, &m));
    const double mfu = mt_report_steps(r, &n_steps)[0].mfu;
    FILE *f = tmpfile();
    MT_CHECK(f, "tmpfile");
    mt_report_write_text(r, f);
    rewind(f);
    MT_CHECK(fgets(head, (int)hn, f), "the text report's first line");
    fclose(f);
    mt_report_free(r);
    return mfu;
}

MT_TEST(roof_of_the_runs_kernel_level) {
    char head[512];
    mt_machine file = levels_machine();
    MT_CHECK_CLOSE(mfu_with(TRACE_ISA, sizeof TRACE_ISA - 1, &file, head, sizeof head), 0.5, 1e-9,
                   "MFU over the avx2 FMA peak");
    MT_CHECK(strcmp(head, "ops (a device's peak 60.0 GFLOP/s (the avx2 FMA peak: the run's "
                    "kernel level), bandwidth 10.0 GB/s):\n") == 0, "head: %s", head);
    mt_report *r = NULL;
    MT_CHECK_OK(mt_report_read("isa.json", &r));
    MT_CHECK(strcmp(mt_report_cpu_isa(r), "avx2") == 0, "the trace's level '%s'", mt_report_cpu_isa(r));
    mt_report_machine given = {.peak_gflops = 7};   /* a peak given wins over the file */
    mt_report_machine_from_file(r, &file, 2, &given);
    MT_CHECK(given.peak_gflops == 7 && !given.peak_source[0] && given.bandwidth_gbs == 10,
             "given peak kept (%g '%s'), bandwidth from the file", given.peak_gflops,
             given.peak_source);
    mt_report_free(r);

    /* a trace from before kernel levels: sgemm */
    MT_CHECK_CLOSE(mfu_with(TRACE_MODEL, sizeof TRACE_MODEL - 1, &file, head, sizeof head), 0.6,
                   1e-9, "MFU over sgemm");
    MT_CHECK(strstr(head, "peak 50.0 GFLOP/s (Open BLAS sgemm: the trace does not say its kernel "
                    "level)"), "head: %s", head);
    /* a machine file from before kernel levels (or without avx2): sgemm */
    file.fma_isa_gflops_1[MT_ISA_AVX2] = file.fma_isa_gflops_all[MT_ISA_AVX2] = NAN;
    MT_CHECK_CLOSE(mfu_with(TRACE_ISA, sizeof TRACE_ISA - 1, &file, head, sizeof head), 0.6, 1e-9,
                   "MFU over sgemm, no avx2 figure");
    MT_CHECK(strstr(head, "(Open BLAS sgemm: the machine file has no avx2 FMA peak)"), "head: %s",
             head);
}

MT_TEST(roofline_classes) {
    mt_report_machine m = {.peak_gflops = 100, .bandwidth_gbs = 10};
    mt_report *r = analysed(&m);
    int n, seen = 0;
    const mt_report_op *o = mt_report_ops(r, &n);
    MT_CHECK(n == 2, "%d op kinds, want 2", n);
    for (int k = 0; k < n; k++) {
        MT_CHECK_CLOSE(o[k].share, 0.5, 1e-9, "%s share", o[k].kind);
        MT_CHECK_CLOSE(o[k].of_bound, 0.5, 1e-9, "%s of its bound", o[k].kind);
        if (strcmp(o[k].kind, "matmul") == 0) {
            seen++;
            MT_CHECK_CLOSE(o[k].intensity, 1, 1e-9, "matmul intensity");
            MT_CHECK_CLOSE(o[k].gflops, 5, 1e-9, "matmul GFLOP/s");
            MT_CHECK_CLOSE(o[k].bound_gflops, 10, 1e-9, "matmul bound");
            MT_CHECK(o[k].bound == MT_BOUND_MEMORY, "matmul at intensity 1 is memory-bound");
        } else {
            seen++;
            MT_CHECK_CLOSE(o[k].intensity, 100, 1e-9, "gemm intensity");
            MT_CHECK_CLOSE(o[k].bound_gflops, 100, 1e-9, "gemm bound");
            MT_CHECK(o[k].bound == MT_BOUND_COMPUTE, "gemm at intensity 100 is compute-bound");
        }
    }
    MT_CHECK(seen == 2, "matmul and gemm");
    int nf;
    const mt_report_fix *f = mt_report_fixes(r, &nf);
    MT_CHECK(nf == 3, "%d fixes, want 3", nf);
    /* the biggest: idle (30 of 200 device-µs), then the bubble (10/70) */
    MT_CHECK(strstr(f[0].text, "idle") && fabs(f[0].figure - 0.3) < 1e-9, "first fix '%s'", f[0].text);
    MT_CHECK(strstr(f[1].text, "bubble"), "second fix '%s'", f[1].text);
    mt_report_free(r);
}

MT_TEST(truncated_and_invalid) {
    mt_report *r = NULL;
    /* cut after a whole event: no closing line */
    const char *cut = strstr(TRACE, X("idle", "idle", 0, 0, 10));
    size_t n = (size_t)(cut - TRACE);
    MT_CHECK_FAILS(mt_report_read(write_file("cut.json", TRACE, n), &r), MT_EFORMAT,
                   "truncated", "closing line");
    /* cut inside an event */
    MT_CHECK_FAILS(mt_report_read(write_file("cut2.json", TRACE, n + 30), &r), MT_EFORMAT,
                   "line 6", "byte");
    const char bad[] = HEAD "{\"name\":\"gemm\",\"cat\":\"op\",\"ph\":\"X\",\"ts\":abc}" TAIL;
    MT_CHECK_FAILS(mt_report_read(write_file("bad.json", bad, sizeof bad - 1), &r), MT_EFORMAT,
                   "line 2", "a number");
    const char notrace[] = "[1, 2, 3]\n";
    MT_CHECK_FAILS(mt_report_read(write_file("not.json", notrace, sizeof notrace - 1), &r),
                   MT_EFORMAT, "line 1", "traceEvents");
    MT_CHECK_FAILS(mt_report_read("no-such-trace.json", &r), MT_EIO, "no-such-trace.json");
    MT_CHECK(r == NULL, "no report on failure");
}

/* A trace of one step on device 0 whose line `ev` replaces its op span. */
static mt_status read_with(const char *name, const char *ev, mt_report **r) {
    char text[2048];
    snprintf(text, sizeof text, HEAD "%s,\n%s,\n%s" TAIL, X("step 1", "step", 0, 0, 100), ev,
             X("idle", "idle", 0, 90, 10));
    return mt_report_read(write_file(name, text, strlen(text)), r);
}

MT_TEST(fields_that_cannot_be_used_are_refused) {
    mt_report *r = NULL;
    /* the good line reads: the cases below differ in one field */
    MT_CHECK_OK(read_with("good.json", OP("matmul", 0, 10, 20, 100, 100), &r));
    mt_report_free(r), r = NULL;
    static const struct {
        const char *ev, *field, *what;
    } CASES[] = {
        {OP("matmul", 0, nan, 20, 100, 100), "\"ts\"", "not a number"},
        {OP("matmul", 0, -nan, 20, 100, 100), "\"ts\"", "not a number"},
        {OP("matmul", 0, 1e400, 20, 100, 100), "\"ts\"", "not a finite JSON number"},
        {OP("matmul", 0, 2e15, 20, 100, 100), "\"ts\"", "within"},
        {OP("matmul", 0, 10, inf, 100, 100), "\"dur\"", "not a number"},
        {OP("matmul", 0, 10, -inf, 100, 100), "\"dur\"", "not a number"},
        {OP("matmul", 0, 10, -5, 100, 100), "\"dur\"", "from 0"},
        {OP("matmul", 0, 10, 0x10, 100, 100), "\"dur\"", "not a finite JSON number"},
        {OP("matmul", -1, 10, 20, 100, 100), "\"tid\"", "whole number"},
        {OP("matmul", 2.5, 10, 20, 100, 100), "\"tid\"", "whole number"},
        {OP("matmul", 1e30, 10, 20, 100, 100), "\"tid\"", "whole number"},
        {"{\"name\":\"gemm\",\"cat\":\"op\",\"ph\":\"X\",\"ts\":10,\"dur\":5,\"pid\":-7,"
         "\"tid\":0}", "\"pid\"", "whole number"},
        {OP("matmul", 0, 10, 20, -1, 100), "\"args.flops\"", "from 0"},
        {OP("matmul", 0, 10, 20, 1e300, 100), "\"args.flops\"", "from 0"},
        {OP("matmul", 0, 10, 20, 100, NaN), "\"bytes\"", "not a number"},
        {OP("matmul", 0, 10, 20, 100, 1e22), "\"args.bytes\"", "from 0"},
        {"{\"name\":\"psum\",\"cat\":\"comm\",\"ph\":\"X\",\"ts\":10,\"dur\":5,\"pid\":0,"
         "\"tid\":0,\"args\":{\"bytes\":16,\"seq\":-3}}", "\"args.seq\"", "whole number"},
        {"{\"name\":\"psum\",\"cat\":\"comm\",\"ph\":\"X\",\"ts\":10,\"dur\":5,\"pid\":0,"
         "\"tid\":0,\"args\":{\"bytes\":16,\"seq\":1e300}}", "\"args.seq\"", "whole number"},
        {"{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":7,"
         "\"args\":{\"name\":\"device -2\"}}", "\"args.name\"", "device from 0"},
        {"{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":7,"
         "\"args\":{\"name\":\"device 99999999999999999999\"}}", "\"args.name\"", "device from 0"},
        {"{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":100001,"
         "\"args\":{\"name\":\"device 0 comm 900\"}}", "\"args.name\"", "lane from 1"},
        {"{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":-4,"
         "\"args\":{\"name\":\"device 0\"}}", "\"tid\"", "whole number"},
        {X("step 99999999999", "step", 0, 200, 10), "\"name\"", "step number"},
        {X("step -1", "step", 0, 200, 10), "\"name\"", "step number"},
    };
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
        char name[32];
        snprintf(name, sizeof name, "field%zu.json", k);
        mt_status s = read_with(name, CASES[k].ev, &r);
        MT_CHECK(s == MT_EFORMAT, "case %zu (%s): %s, want MT_EFORMAT", k, CASES[k].ev,
                 mt_status_name(s));
        const char *msg = mt_errmsg();
        MT_CHECK(strstr(msg, name) && strstr(msg, "line 3") && strstr(msg, "(event 2)") &&
                     strstr(msg, CASES[k].field) && strstr(msg, CASES[k].what) &&
                     !strchr(msg, '\n'),
                 "case %zu: the message names the file, line, event, %s and '%s': %s", k,
                 CASES[k].field, CASES[k].what, msg);
        MT_CHECK(r == NULL, "no report after case %zu", k);
    }
    /* "flops_per_step":inf of a model event is no figure */
    MT_CHECK_FAILS(read_with("model_inf.json", "{\"name\":\"model\",\"ph\":\"M\",\"pid\":0,"
                             "\"tid\":0,\"args\":{\"flops_per_step\":1e308}}", &r),
                   MT_EFORMAT, "model_inf.json", "line 3", "flops_per_step");
}

MT_TEST(steps_of_a_device_follow_one_another) {
    mt_report *r = NULL;
    char text[1024];
    snprintf(text, sizeof text, HEAD "%s,\n%s,\n%s" TAIL, X("step 1", "step", 0, 0, 100),
             X("step 2", "step", 0, 50, 100), X("step 1", "step", 1, 0, 100));
    MT_CHECK_FAILS(mt_report_read(write_file("overlap.json", text, strlen(text)), &r),
                   MT_EFORMAT, "overlap.json", "line 3", "device 0's step 2", "step 1 (line 2)");
    snprintf(text, sizeof text, HEAD "%s,\n%s" TAIL, X("step 1", "step", 0, 0, 100),
             X("step 1", "step", 0, 200, 100));
    MT_CHECK_FAILS(mt_report_read(write_file("twice.json", text, strlen(text)), &r),
                   MT_EFORMAT, "twice.json", "lines 2 and 3", "two spans of step 1");
    /* the writer's ns rounding: one may end 1 ns after the next begins */
    snprintf(text, sizeof text, HEAD "%s,\n%s" TAIL, X("step 1", "step", 0, 0, 100.001),
             X("step 2", "step", 0, 100, 100));
    MT_CHECK_OK(mt_report_read(write_file("rounded.json", text, strlen(text)), &r));
    MT_CHECK_OK(mt_report_analyse(r, NULL));
    mt_report_free(r);
}

MT_TEST(inputs_that_are_no_regular_file) {
    mt_report *r = NULL;
    mt_report_metrics *m = NULL;
    rmdir("adir");
    MT_CHECK(mkdir("adir", 0755) == 0, "mkdir adir");
    MT_CHECK_FAILS(mt_report_read("adir", &r), MT_EIO, "'adir'", "is a directory");
    MT_CHECK_FAILS(mt_report_metrics_read("adir", &m), MT_EIO, "'adir'", "is a directory");
    rmdir("adir");
    unlink("afifo");
    MT_CHECK(mkfifo("afifo", 0644) == 0, "mkfifo afifo");
    MT_CHECK_FAILS(mt_report_read("afifo", &r), MT_EIO, "'afifo'", "FIFO");
    MT_CHECK_FAILS(mt_report_metrics_read("afifo", &m), MT_EIO, "'afifo'", "FIFO");
    unlink("afifo");
    MT_CHECK_FAILS(mt_report_read("/dev/zero", &r), MT_EIO, "/dev/zero", "not a regular file");
    MT_CHECK_FAILS(mt_report_read(write_file("empty.json", "", 0), &r), MT_EFORMAT, "empty");
    MT_CHECK(r == NULL && m == NULL, "nothing read");
}

/* A 2-device run of `steps` steps as the recorder would hold it: per step a
 * forward and a backward phase region with 4 op spans each, a blocking psum
 * and an async one (the same sequence number on both devices), and a wait
 * for it. Device 1 starts each collective 1 µs later. */
static void long_run(mt_trace_list *l, int dev, int steps) {
    MT_CHECK(mt__trace_list_init(l, 16), "list");
    const double us = 1e-6, d = dev * us;
    for (int s = 0; s < steps; s++) {
        const double t = s * 100 * us;
        mt__trace_step_begin(l, t, s + 1, 0);
        for (int ph = 0; ph < 2; ph++) {
            mt__trace_region_begin(l, t + (1 + 40 * ph) * us, ph ? "backward mb 0 chunk 0"
                                                               : "forward mb 0 chunk 0");
            for (int k = 0; k < 4; k++) {
                mt_trace_event *e = mt__trace_push(l);
                e->kind = MT_TRACE_OP, e->layer = -1, e->phase = 'F', e->flops = 1000, e->bytes = 64;
                e->t0 = t + (2 + 40 * ph + 8 * k) * us, e->t1 = e->t0 + 6 * us;
                snprintf(e->name, sizeof e->name, "%s", k % 2 ? "matmul" : "gelu");
            }
            mt__trace_region_end(l, t + (35 + 40 * ph) * us);
        }
        mt_trace_event *c = mt__trace_push(l);   /* blocking: 36..40 (+d) */
        c->is_comm = true, c->bytes = 256, c->t0 = t + 36 * us + d, c->t1 = t + 40 * us;
        snprintf(c->name, sizeof c->name, "psum 'data'");
        mt_trace_event *a = mt__trace_push(l);   /* async under the backward: 50..82, ends in the wait */
        a->is_comm = a->is_async = true, a->bytes = 256, a->t0 = t + 50 * us + d;
        a->t1 = t + 82 * us;
        snprintf(a->name, sizeof a->name, "psum (async) 'data'");
        mt__trace_region_begin(l, t + 80 * us, "wait: gradient reductions");
        mt__trace_region_end(l, t + 85 * us);
        mt__trace_step_end(l, t + 90 * us);
    }
}

MT_TEST(a_long_trace_is_written_and_reported_in_linear_time) {
    enum { STEPS = 4000 };
    mt_trace_list l[2];
    mt_trace_track tr[2];
    for (int d = 0; d < 2; d++) {
        long_run(&l[d], d, STEPS);
        tr[d] = mt__trace_list_track(&l[d], d, STEPS * 100e-6);
    }
    /* quadratic, the write took seconds and the report 35 s at this size
     * (release build); linear, 0.05 and 0.15 s: the bounds leave room for a
     * loaded machine and the sanitizers */
    double t0 = mt_time_now();
    MT_CHECK_OK(mt__trace_write_json(NULL, "long.json", tr, 2, 16000));
    double t1 = mt_time_now();
    mt_report *r = NULL;
    MT_CHECK_OK(mt_report_read("long.json", &r));
    MT_CHECK_OK(mt_report_analyse(r, NULL));
    double t2 = mt_time_now();
    MT_CHECK(t1 - t0 < 5, "writing %d steps took %.1f s", STEPS, t1 - t0);
    MT_CHECK(t2 - t1 < 10, "reporting on %d steps took %.1f s", STEPS, t2 - t1);
    int ns, nd;
    const mt_report_step *st = mt_report_steps(r, &ns);
    const mt_report_device *dv = mt_report_devices(r, &nd);
    MT_CHECK(ns == STEPS && nd == 2, "%d steps on %d devices, want %d on 2", ns, nd, STEPS);
    for (int j = 0; j < ns; j++) {
        MT_CHECK(st[j].step == j + 1, "row %d is step %d", j, st[j].step);
        MT_CHECK(st[j].flops == 16000, "step %d: %.0f FLOPs, want 8 ops x 1000 x 2 devices",
                 st[j].step, st[j].flops);
        /* phase regions 1..35 and 41..75 (busy 68): span 74, bubble 6/74 */
        MT_CHECK_CLOSE(st[j].bubble, 6.0 / 74, 1e-6, "step %d's bubble", st[j].step);
    }
    for (int d = 0; d < 2; d++) {
        /* device 1 arrives last at both psums: device 0 waits 1 µs of each
         * blocking one for it (the async one arrived long before the wait) */
        MT_CHECK_CLOSE(dv[d].busy_us, 68.0 * STEPS, 1e-6, "device %d's busy time", d);
        MT_CHECK_CLOSE(dv[d].sync_us, (d == 0 ? 1.0 : 0.0) * STEPS, 1e-6,
                       "device %d's sync time", d);
    }
    mt_report_free(r);
    mt__trace_list_free(&l[0]), mt__trace_list_free(&l[1]);
    unlink("long.json");
}

int main(int argc, char **argv) { return mt_test_main_in_scratch(argc, argv); }
