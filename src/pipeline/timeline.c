/*
 * timeline.c — a simulated schedule as text: one row per device, each op
 * its label padded to its length, idle time '.', a time ruler and a key.
 *
 *   dev 0 | F0 F1 F2 F3 ......... B0 W0 F4 B1 W1 ...
 */
#include "pipeline/pipeline_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Columns per time unit: enough for every op to hold its label and a space,
 * but at most MAX_COLUMNS in all (labels are cut beyond that). */
enum { MAX_COLUMNS = 2000 };

static double columns_per_unit(const mt_schedule *s, const mt_pipe_sim *sim) {
    double need = 1;
    for (int d = 0; d < s->p; d++)
        for (int i = 0; i < s->n_ops[d]; i++) {
            double dur = sim->end[d][i] - sim->start[d][i];
            char label[24];
            mt__op_label(s, s->ops[d][i], label, sizeof label);
            if (dur > 1e-12 && (strlen(label) + 1) / dur > need) need = (strlen(label) + 1) / dur;
        }
    need = ceil(need - 1e-9);
    if (sim->makespan * need > MAX_COLUMNS) need = MAX_COLUMNS / sim->makespan;
    return need;
}

static int col(double t, double cpu) { return (int)floor(t * cpu + 0.5); }

mt_status mt_schedule_write_timeline(const mt_schedule *s, const mt_pipe_sim *sim, FILE *out) {
    double cpu = columns_per_unit(s, sim);
    int width = col(sim->makespan, cpu);
    char *row = malloc((size_t)width + 2);
    if (!row) return mt_fail(MT_ENOMEM, "out of memory for a timeline row of %d columns", width);
    int dw = snprintf(NULL, 0, "%d", s->p - 1);   /* digits of the last device */
    for (int d = 0; d < s->p; d++) {
        memset(row, '.', (size_t)width);
        for (int i = 0; i < s->n_ops[d]; i++) {
            int c0 = col(sim->start[d][i], cpu), c1 = col(sim->end[d][i], cpu);
            if (c1 <= c0) c1 = c0 + 1;   /* shorter than a column: one character */
            if (c1 > width) c1 = width;
            if (c1 <= c0) continue;
            char label[24];
            mt__op_label(s, s->ops[d][i], label, sizeof label);
            int len = (int)strlen(label);
            memset(row + c0, ' ', (size_t)(c1 - c0));
            memcpy(row + c0, label, (size_t)(len < c1 - c0 ? len : c1 - c0));
        }
        int end = width;
        while (end > 0 && row[end - 1] == ' ') end--;   /* the last label's padding */
        row[end] = '\0';
        fprintf(out, "dev %*d | %s\n", dw, d, row);
    }
    /* the ruler: a tick every 1, 2, 5, 10, 20, 50, ... time units, at least
     * 8 columns apart so that their numbers fit */
    double step = 1;
    for (int k = 0; step * cpu < 8; k++) step *= k % 3 == 1 ? 2.5 : 2;
    memset(row, ' ', (size_t)width + 1);
    for (double t = 0; col(t, cpu) <= width; t += step) {
        char num[24];
        int n = snprintf(num, sizeof num, "%g", t), c = col(t, cpu);
        if (c + n > width + 1) break;
        memcpy(row + c, num, (size_t)n);
    }
    int end = width + 1;
    while (end > 0 && row[end - 1] == ' ') end--;
    row[end] = '\0';
    fprintf(out, "%*s   %s\n", dw + 4, "time", row);
    free(row);
    fprintf(out, "key: F forward, B input gradient, W weight gradient, BW whole backward, "
                 "then the microbatch; '.' idle; %.4g column%s a time unit\n",
            cpu, cpu == 1 ? "" : "s");
    if (s->v == 2)
        fprintf(out, "     lower case (f, b, w, bw): the device's second chunk (%s)\n",
                mt__sched_kind_get(s->kind)->v_shape ? "chunk 2p-1-i of device i"
                                                     : "chunk i+p of device i");
    else if (s->v > 2)
        fprintf(out, "     .c: the device's local chunk c (global chunk c·p + i on device i)\n");
    if (ferror(out)) return mt_fail(MT_EIO, "cannot write the timeline: the stream failed");
    return MT_OK;
}
