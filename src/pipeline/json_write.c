/*
 * json_write.c — a simulated schedule as the one JSON object of
 * `meshtrain schedule --json` (keys in meshtrain/pipeline.h); json_read.c
 * reads the same format back.
 */
#include "pipeline/pipeline_impl.h"

/* Numbers as %.12g: times that are sums of thirds print as 8.33333333333,
 * not 8.3333333333333339, and whole ones as 26. */
static void put_list(FILE *out, const char *key, const double *x, int n) {
    fprintf(out, ",\"%s\":[", key);
    for (int i = 0; i < n; i++) fprintf(out, "%s%.12g", i ? "," : "", x[i]);
    fputc(']', out);
}

mt_status mt_schedule_write_json(const mt_schedule *s, const mt_pipe_sim *sim, FILE *out) {
    int p = s->p;
    fprintf(out, "{\"kind\":\"%s\",\"stages\":%d,\"microbatches\":%d,\"makespan\":%.12g",
            mt_schedule_kind_name(s->kind), p, s->m, sim->makespan);
    put_list(out, "busy", sim->busy, p);
    fprintf(out, ",\"bubble_fraction\":%.12g", sim->bubble_fraction);
    put_list(out, "span", sim->span, p);
    fprintf(out, ",\"bubble_rate\":%.12g", sim->bubble_rate);
    put_list(out, "peak_activations", sim->peak_activations, p);
    fputs(",\"ops\":[", out);
    for (int d = 0; d < p; d++) {
        fputs(d ? ",\n[" : "\n[", out);
        for (int i = 0; i < s->n_ops[d]; i++) {
            mt_pipe_op op = s->ops[d][i];
            fprintf(out, "%s{\"type\":\"%s\",\"mb\":%d,\"chunk\":%d,\"start\":%.12g,\"end\":%.12g}",
                    i ? "," : "", mt_pipe_op_name(op.type), op.mb, op.chunk, sim->start[d][i],
                    sim->end[d][i]);
        }
        fputc(']', out);
    }
    fputs("]}\n", out);
    if (ferror(out)) return mt_fail(MT_EIO, "cannot write the schedule's JSON: the stream failed");
    return MT_OK;
}
