/*
 * plan_print.c — `meshtrain plan`'s report, as a table or one JSON object
 * (plan_print.h). Memory and bytes in the text are in binary units (KiB,
 * MiB, GiB, TiB: powers of 2^10, said in the footer), as --batch-tokens'
 * k, M, G are; the JSON gives bytes and seconds as plain numbers.
 */
#include "cli/plan_print.h"
#include "cli/args.h"

#include <math.h>
#include <string.h>

/* ======================================================================== */
/* Units                                                                     */
/* ======================================================================== */

/* bytes in the largest binary unit, from the `least` (0 B, 1 KiB, 2 MiB,
 * ...), in which they are 1 or more: "12.34 GiB", the number `width` wide
 * (0: as short as it goes). */
static void format_bytes_from(char *buf, size_t cap, double b, int width, int least) {
    static const char *const UNIT[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (u < 5 && (u < least || fabs(b) >= 1024)) b /= 1024, u++;
    snprintf(buf, cap, "%*.2f %s", width, b, UNIT[u]);
}

static void format_bytes(char *buf, size_t cap, double b, int width) {
    format_bytes_from(buf, cap, b, width, 0);
}

/* Memory in the table's column: MiB at least, 11 characters up to TiB. */
static void print_memory(FILE *out, double bytes) {
    char t[64];
    format_bytes_from(t, sizeof t, bytes, 7, 2);
    fputs(t, out);
}

/* s in the table's width (10 characters), or with `width` 0 as short as it goes. */
static void format_seconds(char *buf, size_t cap, double s, int width) {
    if (s >= 1) snprintf(buf, cap, "%*.3f s%s", width ? 8 : 0, s, width ? " " : "");
    else if (s >= 1e-3) snprintf(buf, cap, "%*.2f ms", width ? 8 : 0, s * 1e3);
    else snprintf(buf, cap, "%*.1f us", width ? 8 : 0, s * 1e6);
}

static void print_seconds(FILE *out, double s) {
    char t[64];
    format_seconds(t, sizeof t, s, 1);
    fputs(t, out);
}

/* "name 1.23 ms" with the seconds as short as they go. */
static void print_part(FILE *out, const char *sep, const char *name, double s) {
    char t[64];
    format_seconds(t, sizeof t, s, 0);
    fprintf(out, "%s%s %s", sep, name, t);
}

static const char *schedule_name(int k) {
    return k >= 0 ? mt_schedule_kind_name((mt_schedule_kind)k) : "-";
}

void cli_plan_training(const cli_plan_out *o, const mt_plan_request *q, const mt_plan_result *r,
                       double *steps, double *days, double *device_hours) {
    *steps = *days = *device_hours = 0;
    if (!(o->train_tokens > 0) || !(q->batch_tokens > 0)) return;
    *steps = ceil(o->train_tokens / q->batch_tokens);
    const double seconds = *steps * r->step;
    *days = seconds / 86400;
    *device_hours = r->chips * seconds / 3600;
}

/* ======================================================================== */
/* Communication a step, by kind and axes                                    */
/* ======================================================================== */

static const char *const KINDS[] = {"all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                                    "permute"};
#define N_KINDS 5

/* One group of mesh axes: its bytes by kind, and what the device sends. */
typedef struct {
    char   axes[40];       /* "data (8)" */
    double size[N_KINDS];
    double sent;
} comm_row;

/* r's volumes as rows (one a group of axes, in the order met) into rows[],
 * the last one their sums ("all"); returns the rows, 0 when nothing moves. */
static int comm_rows(const mt_plan_result *r, comm_row *rows, int max) {
    int n = 0;
    for (int i = 0; i < r->n_volumes; i++) {
        const mt_plan_volume *v = &r->volumes[i];
        char name[40];
        snprintf(name, sizeof name, "%.28s (%d)", v->axes, v->group);
        int j = 0;
        while (j < n && strcmp(rows[j].axes, name)) j++;
        if (j == n) {
            if (n == max - 1) continue;
            memset(&rows[n], 0, sizeof rows[n]);
            snprintf(rows[n].axes, sizeof rows[n].axes, "%s", name);
            n++;
        }
        for (int k = 0; k < N_KINDS; k++)
            if (!strcmp(v->kind, KINDS[k])) rows[j].size[k] += v->size;
        rows[j].sent += v->sent;
    }
    if (n == 0) return 0;
    comm_row *all = &rows[n];
    memset(all, 0, sizeof *all);
    snprintf(all->axes, sizeof all->axes, "all");
    for (int j = 0; j < n; j++) {
        for (int k = 0; k < N_KINDS; k++) all->size[k] += rows[j].size[k];
        all->sent += rows[j].sent;
    }
    return n + 1;
}

static void print_comm(FILE *out, const mt_plan_result *r) {
    comm_row rows[MT_PLAN_MAX_VOLUMES + 1];
    int n = comm_rows(r, rows, MT_PLAN_MAX_VOLUMES + 1);
    if (!n) {
        fprintf(out, "  communication a step: none (no collective moves bytes)\n");
        return;
    }
    fprintf(out, "  communication a step, per device (each collective's size as nccl-tests "
            "counts it; sent: what the device sends on a ring, and receives):\n");
    fprintf(out, "    %-18s", "axes (devices)");
    for (int k = 0; k < N_KINDS; k++) fprintf(out, " %14s", KINDS[k]);
    fprintf(out, " %14s\n", "sent");
    for (int j = 0; j < n; j++) {
        char t[32];
        fprintf(out, "    %-18s", rows[j].axes);
        for (int k = 0; k < N_KINDS; k++) {
            if (rows[j].size[k] > 0) format_bytes(t, sizeof t, rows[j].size[k], 10);
            else snprintf(t, sizeof t, "-");
            fprintf(out, " %14s", t);
        }
        format_bytes(t, sizeof t, rows[j].sent, 10);
        fprintf(out, " %14s\n", t);
    }
}

/* ======================================================================== */
/* Memory by pipeline stage                                                  */
/* ======================================================================== */

/* The stages a report lists of a pipeline deeper than it lists whole: the
 * first STAGES_HEAD, then the peak and the last. */
#define STAGES_HEAD 4

/* Stage st's bytes and activations: the listed stages' from their arrays,
 * the peak's and the last's past them from their own fields; false when
 * the result does not hold them (a stage past the listed ones). */
static bool stage_bytes(const mt_plan_result *r, int st, double *total, double *act) {
    if (st < 0 || st >= r->n_stages) return false;
    if (st < MT_PLAN_MAX_STAGE_MEMORY) {
        *total = r->stage_total[st];
        *act = r->stage_activations[st];
    } else if (st == r->peak_stage) {
        *total = r->total;
        *act = r->activations;
    } else if (st == r->n_stages - 1) {
        *total = r->last_stage_total;
        *act = r->last_stage_activations;
    } else {
        return false;
    }
    return true;
}

/* The stages to list, ascending and each once, into list[] (room for
 * MT_PLAN_MAX_STAGE_MEMORY + 2); returns how many. `head` stages first
 * (all the result holds with head >= MT_PLAN_MAX_STAGE_MEMORY), then the
 * peak and the last. 0 without a pipeline or before its memory was
 * counted (a layout refused first). */
static int stages_listed(const mt_plan_result *r, int head, int *list) {
    if (r->n_stages < 2) return 0;
    int n = 0;
    for (int st = 0; st < r->n_stages && st < head && st < MT_PLAN_MAX_STAGE_MEMORY; st++)
        list[n++] = st;
    const int more[2] = {r->peak_stage, r->n_stages - 1};   /* peak <= last */
    for (int i = 0; i < 2; i++)
        if (more[i] > list[n - 1] && more[i] < r->n_stages) list[n++] = more[i];
    return n;
}

/* "  memory by pipeline stage, GiB a device in all (of it activations): 0:
 * 61.20 (40.00) peak, 1: ..." with every stage up to the listed ones, past
 * them the first few, the peak and the last, "…" for the stages between. */
static void print_stages(FILE *out, const mt_plan_result *r) {
    int list[MT_PLAN_MAX_STAGE_MEMORY + 2];
    const int head = r->n_stages <= MT_PLAN_MAX_STAGE_MEMORY ? MT_PLAN_MAX_STAGE_MEMORY
                                                             : STAGES_HEAD;
    const int n = stages_listed(r, head, list);
    if (!n) return;
    /* one unit for the line, the peak's: GiB for any model that needs a
       planner, MiB for the small ones of the tests */
    const double MIB = 1048576.0, GIB = MIB * 1024, TIB = GIB * 1024;
    const double unit = r->total >= TIB ? TIB : r->total >= GIB ? GIB : MIB;
    fprintf(out, "  memory by pipeline stage, %s a device in all (of it activations):",
            unit == TIB ? "TiB" : unit == GIB ? "GiB" : "MiB");
    for (int i = 0; i < n; i++) {
        double total, act;
        if (!stage_bytes(r, list[i], &total, &act)) continue;
        const char *sep = !i ? " " : list[i] > list[i - 1] + 1 ? ", …, " : ", ";
        fprintf(out, "%s%d: %.2f (%.2f)%s", sep, list[i], total / unit, act / unit,
                list[i] == r->peak_stage ? " peak" : "");
    }
    fprintf(out, "\n");
}

/* ======================================================================== */
/* Text                                                                      */
/* ======================================================================== */

/* Row r's mesh column: with a context axis, its attention's lowering after
 * the mesh. */
static void mesh_label(const mt_plan_result *r, char *mesh, size_t n) {
    const mt_plan_layout *l = &r->layout;
    snprintf(mesh, n, "%s%s%s", r->mesh, l->context > 1 ? " cp=" : "",
             l->context > 1 ? mt_plan_cp_attention_name(l->cp_attention) : "");
}

/* The mesh column's width: 30, or the longest label of the rows. */
static int mesh_width(const mt_plan_report *rep) {
    int w = 30;
    for (int i = 0; i < rep->n_best; i++) {
        char mesh[128];
        mesh_label(&rep->best[i], mesh, sizeof mesh);
        if ((int)strlen(mesh) > w) w = (int)strlen(mesh);
    }
    return w;
}

static void print_row(FILE *out, int rank, int width, const mt_plan_result *r) {
    const mt_plan_layout *l = &r->layout;
    char v[16] = "-";
    if (l->schedule >= 0) snprintf(v, sizeof v, "%d", l->chunks);
    char mesh[128];
    mesh_label(r, mesh, sizeof mesh);
    fprintf(out, "%3d  %-*s %4d  %-9s %-3s %-3s %-11s %2s %4d  ", rank, width, mesh, l->zero,
            mt_remat_name(l->remat), l->sequence_parallel ? "on" : "off",
            l->collective_matmul ? "on" : "off", schedule_name(l->schedule), v, l->microbatches);
    print_memory(out, r->total);
    fprintf(out, "  ");
    print_seconds(out, r->step);
    fprintf(out, "  %10.0f  %5.1f%%  %5.1f%%  %s\n", r->tokens_per_s_per_device, 100 * r->mfu,
            100 * r->hfu, r->bound);
}

/* The best layout: where its memory, its step and its bytes go. */
static void print_best(FILE *out, const mt_plan_request *q, const cli_plan_out *o,
                       const mt_plan_report *rep) {
    const mt_plan_result *b = &rep->best[0];
    fprintf(out, "\nbest: %s", b->mesh);
    if (b->layout.context > 1)
        fprintf(out, " (context=%d: attention by %s)", b->layout.context,
                mt_plan_cp_attention_name(b->layout.cp_attention));
    if (b->chips < rep->chips && rep->n_feasible_all == 0) {
        fprintf(out, " (uses %d of the %d chips: no layout of all %d fits)", b->chips,
                rep->chips, rep->chips);
    } else if (b->chips < rep->chips) {
        char t[64];
        format_seconds(t, sizeof t, rep->best_all.step, 0);
        fprintf(out, " (uses %d of the %d chips: faster than the best of all %d, %s, at "
                "%s)", b->chips, rep->chips, rep->chips, rep->best_all.mesh, t);
    }
    /* the device that needs most: in a pipeline, the peak stage (its parts;
       every stage's total on the line after) */
    const struct { const char *name; double bytes; } mem[] = {
        {"parameters", b->params}, {"gradients", b->grads}, {"optimizer", b->optimizer},
        {"activations", b->activations}, {"temporaries", b->temporaries},
        {"runtime reserve", b->reserve},
    };
    fprintf(out, "\n  memory per device:");
    for (size_t i = 0; i < sizeof mem / sizeof mem[0]; i++) {
        fprintf(out, "%s %s ", i ? "," : "", mem[i].name);
        print_memory(out, mem[i].bytes);
    }
    /* what the reserve is (memory_reserve.c), or why there is none: the
       papers' conventions and meshtrain's own count none, the frameworks'
       none on a chip without a CUDA runtime */
    if (b->reserve > 0)
        fprintf(out, " (CUDA context, cuBLAS workspace, NCCL buffers, allocator fragmentation)");
    else if (q->memory == MT_PLAN_MEMORY_MEGATRON || q->memory == MT_PLAN_MEMORY_DEEPSPEED ||
             q->memory == MT_PLAN_MEMORY_TORCHTITAN)
        fprintf(out, " (none for the %s: no CUDA runtime known)", q->hw->name);
    else
        fprintf(out, " (%s counts none)", mt_plan_memory_name(q->memory));
    char t[32], h[32], m[32];
    format_bytes(t, sizeof t, b->total, 0);
    format_bytes(h, sizeof h, q->hw->hbm_bytes, 0);
    format_bytes(m, sizeof m, fabs(b->margin), 0);
    fprintf(out, "\n  memory in all: %s of the %s's %s (%.1f%%), %s %s%s\n", t, q->hw->name, h,
            100 * b->total / q->hw->hbm_bytes, m, b->margin >= 0 ? "free" : "over",
            b->layout.pipe > 1 ? ", on the pipeline stage that holds most" : "");
    print_stages(out, b);
    fprintf(out, "  step ");
    format_seconds(t, sizeof t, b->step, 0);
    fputs(t, out);
    print_part(out, ": ", "forward", b->forward);
    print_part(out, ", ", "backward", b->backward);
    print_part(out, ", ", "recompute", b->recompute);
    print_part(out, ", ", "optimizer", b->optimizer_step);
    print_part(out, ", ", "exposed communication", b->comm_exposed);
    print_part(out, ", ", "bubble", b->bubble);
    fprintf(out, "\n  throughput: %.0f tokens/s in all, %.0f tokens/s per device; MFU %.1f%%, "
            "HFU %.1f%%\n", q->batch_tokens / b->step, b->tokens_per_s_per_device, 100 * b->mfu,
            100 * b->hfu);
    fprintf(out, "  bound: %s: %s\n", b->bound, b->bound_why);
    print_comm(out, b);
    if (o->train_tokens > 0) {
        double steps, days, hours;
        cli_plan_training(o, q, b, &steps, &days, &hours);
        format_seconds(t, sizeof t, b->step, 0);
        fprintf(out, "  training on %.6g tokens: %.0f steps of %s, %.2f days, %.0f device-hours "
                "(%d chips x %.1f hours)\n", o->train_tokens, steps, t, days, hours, b->chips,
                days * 24);
    }
}

/* One line per reason layouts were refused, with how many and one of them. */
static void print_refusals(FILE *out, const mt_plan_report *rep) {
    if (!rep->n_refusals) return;
    fprintf(out, "\nrefused: %d of the %d layouts, for %d reason%s:\n",
            rep->n_evaluated - rep->n_feasible, rep->n_evaluated, rep->n_refusals,
            rep->n_refusals == 1 ? "" : "s");
    for (int i = 0; i < rep->n_refusals; i++)
        fprintf(out, "  %7d  %s (e.g. %s)\n", rep->refusals[i].count, rep->refusals[i].reason,
                rep->refusals[i].example);
}

void cli_plan_print_text(FILE *out, const mt_plan_request *q, const cli_plan_out *o,
                         const mt_plan_report *rep) {
    fprintf(out, "plan: %s, %.4g parameters, on %d x %s; %.0f tokens a step (%.0f sequences of "
            "%d), %s products, memory counted as %s\n", mt_model_name(q->model.model),
            rep->model_params, rep->chips, o->hw_name, q->batch_tokens, q->batch_tokens / q->seq,
            q->seq, q->precision != MT_PRECISION_BF16 ? "fp32"
                    : q->hw && q->hw->products16_fp16 ? "fp16" : "bf16",
            mt_plan_memory_name(q->memory));
    if (q->deepspeed_release)
        fprintf(out, "ZeRO-3 costed as DeepSpeed %d.%d.%d ran it\n", q->deepspeed_release / 10000,
                q->deepspeed_release / 100 % 100, q->deepspeed_release % 100);
    if (q->model.rules && *q->model.rules)
        fprintf(out, "rules: %s (every layout built with them)\n", q->model.rules);
    if (q->model.reshard_after_forward)
        fprintf(out, "reshard after forward: %s (every layout that stores parameters split)\n",
                q->model.reshard_after_forward > 0 ? "on" : "off");
    if (q->model.fsdp_gather)
        fprintf(out, "fsdp gather: %s (every layout that stores parameters split over fsdp or "
                "under ZeRO-3; ZeRO-1/2 gather once a step)\n",
                q->model.fsdp_gather > 0 ? "once a step" : "every microbatch");
    fprintf(out, "%d layouts evaluated, %d feasible, from %d programs built, in %.2f s\n",
            rep->n_evaluated, rep->n_feasible, rep->n_programs, rep->seconds);
    if (rep->n_best) {
        const int width = mesh_width(rep);
        fprintf(out, "\n%3s  %-*s %4s  %-9s %-3s %-3s %-11s %2s %4s  %11s  %10s  %10s  %6s  "
                "%6s  %s\n", "#", width, "mesh", "zero", "remat", "sp", "cm", "schedule", "v",
                "mb", "memory", "step", "tok/s/dev", "MFU", "HFU", "bound");
        for (int i = 0; i < rep->n_best; i++) print_row(out, i + 1, width, &rep->best[i]);
        print_best(out, q, o, rep);
    } else {
        fprintf(out, "\nno layout fits\n");
    }
    print_refusals(out, rep);
    if (rep->n_families) fprintf(out, "\nfamilies:\n");
    for (int i = 0; i < rep->n_families; i++) fprintf(out, "  %s\n", rep->families[i].line);
    /* a mixture of experts: N is its active parameters (docs/moe.md) */
    mt_model_shape shape;
    const bool moe = mt_model_shape_of(&q->model, &shape) == MT_OK && shape.moe_experts > 0;
    mt_errclear();
    fprintf(out, "\nMFU: %.4g FLOPs a token (6N + 6·L·H·Q·T: causal attention counted at the "
            "pairs key <= query, half PaLM's 12·L·H·Q·T, as llm.c and MaxText; recomputation "
            "excluded%s); HFU: the FLOPs run, recomputation included\n", rep->flops_per_token,
            moe ? "; N the active parameters, a mixture of experts' router and top-k and "
                  "shared experts, Megatron's convention" : "");
    if (moe)
        fprintf(out, "MoE: an expert axis of P runs each expert product's dropless all-to-alls "
                "(rows out and back, forward and backward) on the links it spans; memory holds "
                "each device's receive buffers at the dropless worst case, every source's T·k "
                "rows on one device (P·T·k rows), as the trainer allocates them "
                "(docs/moe.md)\n");
    fprintf(out, "units: GiB = 2^30 bytes (KiB 2^10, MiB 2^20, TiB 2^40), as --batch-tokens' "
            "k, M, G; --train-tokens' K, M, B, T are 10^3, 10^6, 10^9, 10^12\n");
}

/* ======================================================================== */
/* JSON                                                                      */
/* ======================================================================== */

/* {"data": {"all-reduce": {"size": bytes, "sent": bytes}, ...}, ...}: the
 * groups of axes in the order met, each with its kinds. */
static void json_comm(FILE *out, const mt_plan_result *r) {
    fprintf(out, "{");
    bool done[MT_PLAN_MAX_VOLUMES] = {false};
    int groups = 0;
    for (int i = 0; i < r->n_volumes; i++) {
        if (done[i]) continue;
        fprintf(out, "%s", groups++ ? ", " : "");
        cli_json_string(out, r->volumes[i].axes);
        fprintf(out, ": {\"devices\": %d", r->volumes[i].group);
        for (int j = i; j < r->n_volumes; j++) {
            const mt_plan_volume *v = &r->volumes[j];
            if (done[j] || strcmp(v->axes, r->volumes[i].axes)) continue;
            done[j] = true;
            fprintf(out, ", \"%s\": {\"size\": %.0f, \"sent\": %.0f}", v->kind, v->size, v->sent);
        }
        fprintf(out, "}");
    }
    fprintf(out, "}");
}

/* A pipeline's ", "peak_stage": k, "stages": [{"stage": 0, "total": bytes,
 * "activations": bytes}, ...]": every stage the result holds (the first
 * MT_PLAN_MAX_STAGE_MEMORY, the peak and the last past them); nothing
 * without a pipeline or before its memory was counted. */
static void json_stages(FILE *out, const mt_plan_result *r) {
    int list[MT_PLAN_MAX_STAGE_MEMORY + 2];
    const int n = stages_listed(r, MT_PLAN_MAX_STAGE_MEMORY, list);
    if (!n) return;
    fprintf(out, ", \"peak_stage\": %d, \"stages\": [", r->peak_stage);
    for (int i = 0; i < n; i++) {
        double total, act;
        if (!stage_bytes(r, list[i], &total, &act)) continue;
        fprintf(out, "%s{\"stage\": %d, \"total\": %.0f, \"activations\": %.0f}",
                i ? ", " : "", list[i], total, act);
    }
    fprintf(out, "]");
}

static void json_result(FILE *out, const mt_plan_request *q, const cli_plan_out *o,
                        const mt_plan_result *r) {
    const mt_plan_layout *l = &r->layout;
    fprintf(out, "{\"mesh\": ");
    cli_json_string(out, r->mesh);
    fprintf(out, ", \"chips\": %d", r->chips);
    fprintf(out, ", \"context\": %d, \"cp_attention\": ", l->context > 1 ? l->context : 1);
    if (l->context > 1) cli_json_string(out, mt_plan_cp_attention_name(l->cp_attention));
    else fprintf(out, "null");
    fprintf(out, ", \"data\": %d, \"fsdp\": %d, \"tensor\": %d, \"pipe\": %d, \"zero\": %d, "
            "\"remat\": \"%s\", \"sequence_parallel\": %s, \"collective_matmul\": %s, "
            "\"schedule\": %s%s%s, \"chunks\": %d, \"microbatches\": %d, \"feasible\": %s",
            l->data, l->fsdp, l->tensor, l->pipe, l->zero, mt_remat_name(l->remat),
            l->sequence_parallel ? "true" : "false", l->collective_matmul ? "true" : "false",
            l->schedule >= 0 ? "\"" : "", l->schedule >= 0 ? schedule_name(l->schedule) : "null",
            l->schedule >= 0 ? "\"" : "", l->chunks, l->microbatches,
            r->feasible ? "true" : "false");
    if (l->expert > 1) fprintf(out, ", \"expert\": %d", l->expert);   /* MoE layouts only */
    if (!r->feasible) {
        fprintf(out, ", \"why\": ");
        cli_json_string(out, r->why);
    }
    fprintf(out, ", \"memory_per_device\": {\"parameters\": %.0f, \"gradients\": %.0f, "
            "\"optimizer\": %.0f, \"activations\": %.0f, \"temporaries\": %.0f, "
            "\"reserve\": %.0f, \"total\": %.0f, \"margin\": %.0f",
            r->params, r->grads, r->optimizer, r->activations, r->temporaries, r->reserve,
            r->total, r->margin);
    json_stages(out, r);
    fprintf(out, "}");
    if (!r->feasible) {
        fprintf(out, "}");
        return;
    }
    fprintf(out, ", \"step_seconds\": %.9g, \"compute_seconds\": %.9g, "
            "\"forward_seconds\": %.9g, \"backward_seconds\": %.9g, "
            "\"recompute_seconds\": %.9g, "
            "\"exposed_comm_seconds\": %.9g, \"bubble_seconds\": %.9g, "
            "\"optimizer_seconds\": %.9g, \"tokens_per_s\": %.9g, "
            "\"tokens_per_s_per_device\": %.9g, \"mfu\": %.9g, "
            "\"hfu\": %.9g, \"tokens_per_chip\": %.9g, \"bound\": \"%s\", \"bound_why\": ",
            r->step, r->compute, r->forward, r->backward, r->recompute, r->comm_exposed,
            r->bubble, r->optimizer_step, q->batch_tokens / r->step, r->tokens_per_s_per_device,
            r->mfu, r->hfu, r->tokens_per_chip, r->bound);
    cli_json_string(out, r->bound_why);
    fprintf(out, ", \"comm_bytes_per_step\": ");
    json_comm(out, r);
    if (o->train_tokens > 0) {
        double steps, days, hours;
        cli_plan_training(o, q, r, &steps, &days, &hours);
        fprintf(out, ", \"train_steps\": %.0f, \"train_days\": %.9g, \"device_hours\": %.9g",
                steps, days, hours);
    }
    fprintf(out, "}");
}

void cli_plan_print_json(FILE *out, const mt_plan_request *q, const cli_plan_out *o,
                         const mt_plan_report *rep) {
    fprintf(out, "{\n  \"model\": \"%s\", \"hardware\": ", mt_model_name(q->model.model));
    cli_json_string(out, o->hw_name);
    if (q->model.rules && *q->model.rules) {   /* only when given: the same object otherwise */
        fprintf(out, ", \"rules\": ");
        cli_json_string(out, q->model.rules);
    }
    if (q->model.reshard_after_forward)   /* the same: only when given */
        fprintf(out, ", \"reshard_after_forward\": \"%s\"",
                q->model.reshard_after_forward > 0 ? "on" : "off");
    if (q->model.fsdp_gather)
        fprintf(out, ", \"fsdp_gather\": \"%s\"", q->model.fsdp_gather > 0 ? "once" : "microbatch");
    if (q->deepspeed_release)   /* the same: only when given */
        fprintf(out, ", \"deepspeed_version\": \"%d.%d.%d\"", q->deepspeed_release / 10000,
                q->deepspeed_release / 100 % 100, q->deepspeed_release % 100);
    fprintf(out, ", \"chips\": %d, \"batch_tokens\": %.0f, \"seq\": %d, \"precision\": \"%s\", "
            "\"memory_convention\": \"%s\",\n  \"parameters\": %.0f, \"flops_per_token\": %.0f, "
            "\"evaluated\": %d, \"feasible\": %d, \"programs\": %d, \"seconds\": %.3f,\n",
            rep->chips, q->batch_tokens, q->seq,
            q->precision == MT_PRECISION_BF16 ? "bf16" : "fp32", mt_plan_memory_name(q->memory),
            rep->model_params, rep->flops_per_token, rep->n_evaluated, rep->n_feasible,
            rep->n_programs, rep->seconds);
    {   /* a mixture of experts: the receive buffers' convention (dense: nothing) */
        mt_model_shape shape;
        if (mt_model_shape_of(&q->model, &shape) == MT_OK && shape.moe_experts > 0)
            fprintf(out, "  \"moe_receive_buffer\": \"dropless worst case: P·T·k rows a "
                    "device on an expert axis of P, as the trainer allocates them\",\n");
        mt_errclear();
    }
    if (o->train_tokens > 0) {   /* only when given, with the best layout's time */
        fprintf(out, "  \"train_tokens\": %.0f", o->train_tokens);
        if (rep->n_best) {
            double steps, days, hours;
            cli_plan_training(o, q, &rep->best[0], &steps, &days, &hours);
            fprintf(out, ", \"train_steps\": %.0f, \"train_days\": %.9g, \"device_hours\": %.9g",
                    steps, days, hours);
        }
        fprintf(out, ",\n");
    }
    fprintf(out, "  \"best\": [");
    for (int i = 0; i < rep->n_best; i++) {
        fprintf(out, "%s\n    ", i ? "," : "");
        json_result(out, q, o, &rep->best[i]);
    }
    fprintf(out, "%s],\n  \"infeasible\": [", rep->n_best ? "\n  " : "");
    for (int i = 0; i < rep->n_infeasible; i++) {
        fprintf(out, "%s\n    ", i ? "," : "");
        json_result(out, q, o, &rep->infeasible[i]);
    }
    fprintf(out, "%s],\n  \"refusals\": [", rep->n_infeasible ? "\n  " : "");
    for (int i = 0; i < rep->n_refusals; i++) {
        fprintf(out, "%s\n    {\"reason\": ", i ? "," : "");
        cli_json_string(out, rep->refusals[i].reason);
        fprintf(out, ", \"count\": %d, \"example\": ", rep->refusals[i].count);
        cli_json_string(out, rep->refusals[i].example);
        fprintf(out, "}");
    }
    fprintf(out, "%s],\n  \"families\": [", rep->n_refusals ? "\n  " : "");
    for (int i = 0; i < rep->n_families; i++) {
        fprintf(out, "%s\n    {\"family\": \"%s\", \"feasible\": %d, \"line\": ", i ? "," : "",
                rep->families[i].name, rep->families[i].n_feasible);
        cli_json_string(out, rep->families[i].line);
        fprintf(out, "}");
    }
    fprintf(out, "%s]\n}\n", rep->n_families ? "\n  " : "");
}
