/*
 * report_write.c — prints an analysed mt_report as tables or as one JSON
 * object; unknown figures (NaN) print "-" in the tables and null in JSON.
 */
#include "report_impl.h"

#include <math.h>

static const char *bound_name(mt_report_bound b) {
    return b == MT_BOUND_COMPUTE ? "compute" : b == MT_BOUND_MEMORY ? "memory"
         : b == MT_BOUND_COMM ? "comm" : "-";
}

/* "%*.*f" or "-" for NaN, right-aligned in `w`. */
static void num(FILE *f, int w, int prec, double v, double scale) {
    if (isnan(v)) fprintf(f, " %*s", w, "-");
    else fprintf(f, " %*.*f", w, prec, v * scale);
}

void mt_report_write_text(const mt_report *r, FILE *f) {
    fprintf(f, "ops (a device's peak ");
    if (r->machine.peak_gflops > 0) fprintf(f, "%.1f GFLOP/s", r->machine.peak_gflops);
    else fprintf(f, "unknown");
    if (r->machine.peak_gflops > 0 && r->machine.peak_source[0])
        fprintf(f, " (%s)", r->machine.peak_source);
    fprintf(f, ", bandwidth ");
    if (r->machine.bandwidth_gbs > 0) fprintf(f, "%.1f GB/s", r->machine.bandwidth_gbs);
    else fprintf(f, "unknown");
    fprintf(f, "):\n");
    fprintf(f, "  %-16s %7s %9s %7s %8s %8s %9s %10s %7s  %s\n", "op", "count", "time ms", "share%",
            "GFLOP/s", "GB/s", "flop/B", "bound GF/s", "of bnd%", "bound");
    for (int k = 0; k < r->n_ops; k++) {
        const mt_report_op *o = &r->ops[k];
        fprintf(f, "  %-16s %7ld", o->kind, o->count);
        num(f, 9, 3, o->time_us, 1e-3), num(f, 7, 1, o->share, 100);
        num(f, 8, 2, o->gflops, 1), num(f, 8, 2, o->gbs, 1), num(f, 9, 3, o->intensity, 1);
        num(f, 10, 2, o->bound_gflops, 1), num(f, 7, 1, o->of_bound, 100);
        fprintf(f, "  %s\n", bound_name(o->bound));
    }
    fprintf(f, "\ndevices (ms; exposed: comm the device waited for; hidden: async comm "
            "under its compute; sync: waiting for the other devices to arrive, load imbalance):\n");
    fprintf(f, "  %-7s %9s %9s %9s %9s %9s %8s %9s\n", "device", "busy", "idle", "exposed",
            "hidden", "async", "hidden%", "sync");
    for (int d = 0; d < r->n_devs; d++) {
        const mt_report_device *v = &r->devs[d];
        double comm = v->exposed_us + v->hidden_us;
        fprintf(f, "  %-7d", v->device);
        num(f, 9, 3, v->busy_us, 1e-3), num(f, 9, 3, v->idle_us, 1e-3);
        num(f, 9, 3, v->exposed_us, 1e-3), num(f, 9, 3, v->hidden_us, 1e-3);
        num(f, 9, 3, v->async_us, 1e-3), num(f, 8, 1, comm > 0 ? v->hidden_us / comm : NAN, 100);
        num(f, 9, 3, v->sync_us, 1e-3);
        fputc('\n', f);
    }
    fprintf(f, "\nsteps (the model's FLOPs per step ");
    if (r->machine.model_flops > 0)
        fprintf(f, "%.4g GFLOP, %s", r->machine.model_flops * 1e-9,
                r->model_flops_traced ? "from the trace" : "given");
    else
        fprintf(f, "unknown: give --model-flops");
    fprintf(f, "):\n  %-5s %9s %10s %6s %6s %8s\n", "step", "wall ms", "GFLOP", "MFU%",
            "HFU%", "bubble%");
    for (int j = 0; j < r->n_steps; j++) {
        const mt_report_step *s = &r->steps[j];
        fprintf(f, "  %-5d", s->step);
        num(f, 9, 3, s->wall_us, 1e-3), num(f, 10, 4, s->flops, 1e-9);
        num(f, 6, 1, s->mfu, 100), num(f, 6, 1, s->hfu, 100), num(f, 8, 1, s->bubble, 100);
        fputc('\n', f);
    }
    fprintf(f, "\nto fix first:\n");
    for (int i = 0; i < r->n_fixes; i++) fprintf(f, "  %d. %s\n", i + 1, r->fixes[i].text);
    if (r->n_fixes == 0) fprintf(f, "  nothing stands out\n");
    mt__report_write_run_text(r, f);
}

/* JSON number or null */
static void jnum(FILE *f, const char *key, double v, const char *sep) {
    if (isnan(v) || isinf(v)) fprintf(f, "\"%s\":null%s", key, sep);
    else fprintf(f, "\"%s\":%.9g%s", key, v, sep);
}

/* a JSON string of our own names: escape only '"' and '\\' */
static void jstr(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        if ((unsigned char)*s >= 0x20) fputc(*s, f);
    }
    fputc('"', f);
}

void mt_report_write_json(const mt_report *r, FILE *f) {
    fprintf(f, "{\"machine\":{");
    jnum(f, "peak_gflops", r->machine.peak_gflops > 0 ? r->machine.peak_gflops : NAN, ",");
    fprintf(f, "\"peak_source\":");
    if (r->machine.peak_gflops > 0 && r->machine.peak_source[0]) jstr(f, r->machine.peak_source);
    else fprintf(f, "null");
    fprintf(f, ",\"cpu_isa\":");
    if (r->traced_isa[0]) jstr(f, r->traced_isa);
    else fprintf(f, "null");
    fputc(',', f);
    jnum(f, "bandwidth_gbs", r->machine.bandwidth_gbs > 0 ? r->machine.bandwidth_gbs : NAN, ",");
    jnum(f, "model_flops", r->machine.model_flops > 0 ? r->machine.model_flops : NAN, "},\n");
    fprintf(f, "\"ops\":[");
    for (int k = 0; k < r->n_ops; k++) {
        const mt_report_op *o = &r->ops[k];
        fprintf(f, "%s\n {\"kind\":", k ? "," : "");
        jstr(f, o->kind);
        fprintf(f, ",\"count\":%ld,", o->count);
        jnum(f, "time_us", o->time_us, ","), jnum(f, "share", o->share, ",");
        jnum(f, "flops", o->flops, ","), jnum(f, "bytes", o->bytes, ",");
        jnum(f, "gflops", o->gflops, ","), jnum(f, "gbs", o->gbs, ",");
        jnum(f, "intensity", o->intensity, ","), jnum(f, "bound_gflops", o->bound_gflops, ",");
        jnum(f, "of_bound", o->of_bound, ",");
        fprintf(f, "\"bound\":\"%s\"}", bound_name(o->bound));
    }
    fprintf(f, "],\n\"devices\":[");
    for (int d = 0; d < r->n_devs; d++) {
        const mt_report_device *v = &r->devs[d];
        fprintf(f, "%s\n {\"device\":%d,", d ? "," : "", v->device);
        jnum(f, "busy_us", v->busy_us, ","), jnum(f, "idle_us", v->idle_us, ",");
        jnum(f, "exposed_us", v->exposed_us, ","), jnum(f, "hidden_us", v->hidden_us, ",");
        jnum(f, "sync_us", v->sync_us, ",");
        jnum(f, "async_us", v->async_us, "}");
    }
    fprintf(f, "],\n\"steps\":[");
    for (int j = 0; j < r->n_steps; j++) {
        const mt_report_step *s = &r->steps[j];
        fprintf(f, "%s\n {\"step\":%d,", j ? "," : "", s->step);
        jnum(f, "wall_us", s->wall_us, ","), jnum(f, "flops", s->flops, ",");
        jnum(f, "mfu", s->mfu, ","), jnum(f, "hfu", s->hfu, ",");
        jnum(f, "bubble", s->bubble, "}");
    }
    fprintf(f, "],\n\"fixes\":[");
    for (int i = 0; i < r->n_fixes; i++) {
        fprintf(f, "%s\n {\"text\":", i ? "," : "");
        jstr(f, r->fixes[i].text);
        fputc(',', f);
        jnum(f, "figure", r->fixes[i].figure, "}");
    }
    fprintf(f, "]");
    mt__report_write_run_json(r, f);
    fprintf(f, "}\n");
}

/* ======================================================================== */
/* The run, from its metrics log (mt_report_set_run)                         */
/* ======================================================================== */

void mt__report_write_run_text(const mt_report *r, FILE *f) {
    if (!r->has_run) return;
    const mt_report_run *u = &r->run;
    fprintf(f, "\nrun (metrics: %d lines, steps %d..%d):\n", u->steps, u->first_step, u->last_step);
    fprintf(f, "  train loss  %.4f (step %d) -> %.4f (step %d)\n", u->first_loss, u->first_step,
            u->last_loss, u->last_step);
    if (isnan(u->best_val_loss)) fprintf(f, "  val loss    - (no eval step)\n");
    else fprintf(f, "  val loss    last %.4f (step %d), best %.4f (step %d)\n", u->last_val_loss,
                 u->last_val_step, u->best_val_loss, u->best_val_step);
    fprintf(f, "  median     ");
    num(f, 1, 1, u->median_tokens_per_s, 1);
    fprintf(f, " tokens/s,");
    num(f, 1, 3, u->median_ms, 1);
    fprintf(f, " ms per step\n");
    if (u->moe_steps == 0) return;
    fprintf(f, "  experts     MaxVio last %.3f, max %.3f (%d steps); router losses mean",
            u->last_maxvio, u->max_maxvio, u->moe_steps);
    num(f, 1, 5, u->mean_moe_aux, 1);
    fprintf(f, "; dropped mean ");
    if (isnan(u->mean_moe_dropped)) fprintf(f, "- (no capacity)\n");
    else fprintf(f, "%.2f%%\n", 100 * u->mean_moe_dropped);
}

/* ,"run":{...} after the last table; val steps null without an eval step */
void mt__report_write_run_json(const mt_report *r, FILE *f) {
    if (!r->has_run) return;
    const mt_report_run *u = &r->run;
    bool val = !isnan(u->best_val_loss);
    fprintf(f, ",\n\"run\":{\"steps\":%d,\"first_step\":%d,\"last_step\":%d,", u->steps,
            u->first_step, u->last_step);
    jnum(f, "first_loss", u->first_loss, ","), jnum(f, "last_loss", u->last_loss, ",");
    jnum(f, "last_val_loss", u->last_val_loss, ",");
    jnum(f, "last_val_step", val ? u->last_val_step : NAN, ",");
    jnum(f, "best_val_loss", u->best_val_loss, ",");
    jnum(f, "best_val_step", val ? u->best_val_step : NAN, ",");
    jnum(f, "median_tokens_per_s", u->median_tokens_per_s, ",");
    jnum(f, "median_ms", u->median_ms, u->moe_steps ? "," : "}");
    if (u->moe_steps == 0) return;
    fprintf(f, "\"moe_steps\":%d,", u->moe_steps);
    jnum(f, "last_maxvio", u->last_maxvio, ","), jnum(f, "max_maxvio", u->max_maxvio, ",");
    jnum(f, "mean_moe_aux", u->mean_moe_aux, ",");
    jnum(f, "mean_moe_dropped", u->mean_moe_dropped, "}");
}
