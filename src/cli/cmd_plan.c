/*
 * cmd_plan.c — `meshtrain plan`: the best layouts of a model on hardware we
 * do not have (mt_plan_search, meshtrain/plan.h), as a table or one JSON
 * object, with a line for each family of layouts saying why it loses.
 *
 *   $ meshtrain plan --model llama --preset llama3-70b --hardware tpu-v5p \
 *         --chips 8960 --batch-tokens 4M --seq 8192
 */
#include "cli/args.h"
#include "cli/model_flags.h"
#include "cli/strategy_flags.h"
#include "meshtrain.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: meshtrain plan --model gpt|llama [model flags] --hardware NAME --chips N\n"
    "                      --batch-tokens N --seq T [--precision bf16|fp32]\n"
    "                      [--remat auto|none|full|attention|dots] [--zero auto|0|1|2|3]\n"
    "                      [--sequence-parallel auto|on|off] [--collective-matmul auto|on|off]\n"
    "                      [--mesh AXES] [--schedule auto|KIND] [--chunks V]\n"
    "                      [--microbatches M] [--rules RULES]\n"
    "                      [--memory meshtrain|mixed16|book|megatron|deepspeed|torchtitan]\n"
    "                      [--top K] [--min-chips] [--json]\n"
    "\n"
    "Lays one training step of the model on N chips of the system NAME (a hardware\n"
    "description: hardware/NAME.json, or a path; docs/planning.md) every way the\n"
    "flags leave open: data x fsdp x tensor x pipe, ZeRO stage, remat policy,\n"
    "sequence parallelism and collective matmul, pipeline schedule, its chunks a\n"
    "device (interleaved: v = 2, and every v to 8 that divides) and microbatches.\n"
    "Each layout's per-device program is the trainer's, partitioned and compiled on\n"
    "the shape-only backend; its memory is counted per device and its step time on\n"
    "the system's roofline and links. Prints the best K feasible layouts (memory per\n"
    "device, step time, tokens/s per device, MFU, what binds), one line per family\n"
    "of layouts saying why it loses, and one line per reason layouts were refused\n"
    "(out of memory, sizes that do not divide), with how many: those are never\n"
    "ranked (--json: with --mesh each is listed with why). --min-chips\n"
    "finds the fewest chips (up to --chips, if given) on which some layout fits.\n"
    "--batch-tokens takes k, M, G (x1024: 4M = 4,194,304 tokens).\n"
    "--rules (as train's) builds every layout with the rules, each rule's mesh axes\n"
    "those the layout has (an axis of size 1 splits nothing).\n"
    "MFU is PaLM's: 6N + 12·L·H·Q·T FLOPs a token, recomputation excluded.\n"
    "\n"
    "examples:\n"
    "  meshtrain plan --model llama --preset llama3-70b --hardware tpu-v5p --chips 8960 \\\n"
    "      --batch-tokens 4M --seq 8192\n"
    "  meshtrain plan --model llama --preset llama2-13b --hardware tpu-v5p --chips 4096 \\\n"
    "      --batch-tokens 3M --seq 3072 --mesh fsdp=1024,tensor=4 --memory book\n"
    "  meshtrain plan --model gpt --layers 48 --channels 1600 --heads 25 --vocab 50257 \\\n"
    "      --hardware h100-sxm --batch-tokens 512k --seq 1024 --min-chips\n";

static void print_memory(FILE *out, double bytes) {
    if (bytes >= 1e12) fprintf(out, "%7.2f TB", bytes / 1e12);
    else if (bytes >= 1e9) fprintf(out, "%7.2f GB", bytes / 1e9);
    else fprintf(out, "%7.2f MB", bytes / 1e6);
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

static const char *schedule_name(int k) {
    return k >= 0 ? mt_schedule_kind_name((mt_schedule_kind)k) : "-";
}

static void print_row(FILE *out, int rank, const mt_plan_result *r) {
    const mt_plan_layout *l = &r->layout;
    char v[16] = "-";
    if (l->schedule >= 0) snprintf(v, sizeof v, "%d", l->chunks);
    fprintf(out, "%3d  %-30s %4d  %-9s %-3s %-3s %-11s %2s %4d  ", rank, r->mesh, l->zero,
            mt_remat_name(l->remat), l->sequence_parallel ? "on" : "off",
            l->collective_matmul ? "on" : "off", schedule_name(l->schedule), v, l->microbatches);
    print_memory(out, r->total);
    fprintf(out, "  ");
    print_seconds(out, r->step);
    fprintf(out, "  %10.0f  %5.1f%%  %s\n", r->tokens_per_s_per_device, 100 * r->mfu, r->bound);
}

static void json_result(FILE *out, const mt_plan_result *r) {
    const mt_plan_layout *l = &r->layout;
    fprintf(out, "{\"mesh\": ");
    cli_json_string(out, r->mesh);
    fprintf(out, ", \"chips\": %d", r->chips);
    fprintf(out, ", \"data\": %d, \"fsdp\": %d, \"tensor\": %d, \"pipe\": %d, \"zero\": %d, "
            "\"remat\": \"%s\", \"sequence_parallel\": %s, \"collective_matmul\": %s, "
            "\"schedule\": %s%s%s, \"chunks\": %d, \"microbatches\": %d, \"feasible\": %s",
            l->data, l->fsdp, l->tensor, l->pipe, l->zero, mt_remat_name(l->remat),
            l->sequence_parallel ? "true" : "false", l->collective_matmul ? "true" : "false",
            l->schedule >= 0 ? "\"" : "", l->schedule >= 0 ? schedule_name(l->schedule) : "null",
            l->schedule >= 0 ? "\"" : "", l->chunks, l->microbatches,
            r->feasible ? "true" : "false");
    if (!r->feasible) {
        fprintf(out, ", \"why\": ");
        cli_json_string(out, r->why);
    }
    fprintf(out, ", \"memory_per_device\": {\"parameters\": %.0f, \"gradients\": %.0f, "
            "\"optimizer\": %.0f, \"activations\": %.0f, \"temporaries\": %.0f, \"total\": %.0f}",
            r->params, r->grads, r->optimizer, r->activations, r->temporaries, r->total);
    if (r->feasible) {
        fprintf(out, ", \"step_seconds\": %.9g, \"compute_seconds\": %.9g, "
                "\"exposed_comm_seconds\": %.9g, \"bubble_seconds\": %.9g, "
                "\"optimizer_seconds\": %.9g, \"tokens_per_s_per_device\": %.9g, \"mfu\": %.9g, "
                "\"hfu\": %.9g, \"tokens_per_chip\": %.9g, \"bound\": \"%s\", \"bound_why\": ",
                r->step, r->compute, r->comm_exposed, r->bubble, r->optimizer_step,
                r->tokens_per_s_per_device, r->mfu, r->hfu, r->tokens_per_chip, r->bound);
        cli_json_string(out, r->bound_why);
    }
    fprintf(out, "}");
}

static void print_json(FILE *out, const mt_plan_request *q, const char *hw_name,
                       const mt_plan_report *rep) {
    fprintf(out, "{\n  \"model\": \"%s\", \"hardware\": ", mt_model_name(q->model.model));
    cli_json_string(out, hw_name);
    if (q->model.rules && *q->model.rules) {   /* only when given: the same object otherwise */
        fprintf(out, ", \"rules\": ");
        cli_json_string(out, q->model.rules);
    }
    if (q->model.reshard_after_forward)   /* the same: only when given */
        fprintf(out, ", \"reshard_after_forward\": \"%s\"",
                q->model.reshard_after_forward > 0 ? "on" : "off");
    if (q->model.fsdp_gather)
        fprintf(out, ", \"fsdp_gather\": \"%s\"", q->model.fsdp_gather > 0 ? "once" : "microbatch");
    fprintf(out, ", \"chips\": %d, \"batch_tokens\": %.0f, \"seq\": %d, \"precision\": \"%s\", "
            "\"memory_convention\": \"%s\",\n  \"parameters\": %.0f, \"flops_per_token\": %.0f, "
            "\"evaluated\": %d, \"feasible\": %d, \"programs\": %d, \"seconds\": %.3f,\n"
            "  \"best\": [", rep->chips, q->batch_tokens, q->seq,
            q->precision == MT_PRECISION_BF16 ? "bf16" : "fp32", mt_plan_memory_name(q->memory),
            rep->model_params, rep->flops_per_token, rep->n_evaluated, rep->n_feasible,
            rep->n_programs, rep->seconds);
    for (int i = 0; i < rep->n_best; i++) {
        fprintf(out, "%s\n    ", i ? "," : "");
        json_result(out, &rep->best[i]);
    }
    fprintf(out, "%s],\n  \"infeasible\": [", rep->n_best ? "\n  " : "");
    for (int i = 0; i < rep->n_infeasible; i++) {
        fprintf(out, "%s\n    ", i ? "," : "");
        json_result(out, &rep->infeasible[i]);
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

static void print_text(FILE *out, const mt_plan_request *q, const char *hw_name,
                       const mt_plan_report *rep) {
    fprintf(out, "plan: %s, %.4g parameters, on %d x %s; %.0f tokens a step (%.0f sequences of "
            "%d), %s products, memory counted as %s\n", mt_model_name(q->model.model),
            rep->model_params, rep->chips, hw_name, q->batch_tokens, q->batch_tokens / q->seq,
            q->seq, q->precision == MT_PRECISION_BF16 ? "bf16" : "fp32",
            mt_plan_memory_name(q->memory));
    if (q->model.rules && *q->model.rules)
        fprintf(out, "rules: %s (every layout built with them)\n", q->model.rules);
    if (q->model.reshard_after_forward)
        fprintf(out, "reshard after forward: %s (every layout that stores parameters split)\n",
                q->model.reshard_after_forward > 0 ? "on" : "off");
    if (q->model.fsdp_gather)
        fprintf(out, "fsdp gather: %s (every layout that stores parameters split over fsdp or "
                "under ZeRO-3; ZeRO-1/2 gather once a step)\n",
                q->model.fsdp_gather > 0 ? "once a step" : "every microbatch");
    fprintf(out, "%d layouts evaluated, %d feasible, from %d distinct programs, in %.2f s\n",
            rep->n_evaluated, rep->n_feasible, rep->n_programs, rep->seconds);
    if (rep->n_best) {
        fprintf(out, "\n  #  %-30s zero  remat     sp  cm  schedule     v   mb     memory        "
                "step   tok/s/dev    MFU  bound\n", "mesh");
        for (int i = 0; i < rep->n_best; i++) print_row(out, i + 1, &rep->best[i]);
        const mt_plan_result *b = &rep->best[0];
        fprintf(out, "\nbest: %s", b->mesh);
        if (b->chips < rep->chips && rep->n_feasible_all == 0) {
            fprintf(out, " (uses %d of the %d chips: no layout of all %d fits)", b->chips,
                    rep->chips, rep->chips);
        } else if (b->chips < rep->chips) {
            char t[64];
            format_seconds(t, sizeof t, rep->best_all.step, 0);
            fprintf(out, " (uses %d of the %d chips: faster than the best of all %d, %s, at "
                    "%s)", b->chips, rep->chips, rep->chips, rep->best_all.mesh, t);
        }
        fprintf(out, "\n  memory per device: parameters ");
        print_memory(out, b->params);
        fprintf(out, ", gradients ");
        print_memory(out, b->grads);
        fprintf(out, ", optimizer ");
        print_memory(out, b->optimizer);
        fprintf(out, ", activations ");
        print_memory(out, b->activations);
        fprintf(out, ", temporaries ");
        print_memory(out, b->temporaries);
        fprintf(out, "\n  step: compute ");
        print_seconds(out, b->compute);
        fprintf(out, ", exposed communication ");
        print_seconds(out, b->comm_exposed);
        fprintf(out, ", bubble ");
        print_seconds(out, b->bubble);
        fprintf(out, ", optimizer ");
        print_seconds(out, b->optimizer_step);
        fprintf(out, "\n  bound: %s: %s\n", b->bound, b->bound_why);
    } else {
        fprintf(out, "\nno layout fits\n");
    }
    print_refusals(out, rep);
    if (rep->n_families) fprintf(out, "\nfamilies:\n");
    for (int i = 0; i < rep->n_families; i++) fprintf(out, "  %s\n", rep->families[i].line);
    fprintf(out, "\nMFU: PaLM's %.4g FLOPs a token (6N + 12·L·H·Q·T, recomputation excluded)\n",
            rep->flops_per_token);
}

/* The most tokens a step: 2^50, past which a batch is no batch (and the
 * sequences outnumber what the search counts in). */
#define MAX_BATCH_TOKENS 1125899906842624.0

/* --batch-tokens: a whole count of tokens with an optional k, M or G
 * (x1024), or a plain number such as 1e6 when it is whole, into *out. */
static int parse_tokens(const char *text, int seq, double *out) {
    static const char HOW[] = "give a whole number of tokens with an optional unit k, M or G "
                              "(x1024: 65536, 64k, 4M), a multiple of --seq";
    if (text[0] == '-') {
        cli_error("--batch-tokens '%s' is negative; %s", text, HOW);
        return CLI_EXIT_USAGE;
    }
    size_t len = strspn(text, "0123456789");
    const char *u = text + len;
    double scale = 1;
    if (*u == 'k' || *u == 'K') scale = 1024, u++;
    else if (*u == 'm' || *u == 'M') scale = 1024.0 * 1024, u++;
    else if (*u == 'g' || *u == 'G') scale = 1024.0 * 1024 * 1024, u++;
    double v;
    if (len > 0 && !*u && len <= 18) {
        v = strtod(text, NULL) * scale;
    } else {
        char *end;
        v = strtod(text, &end);
        if (end == text || *end || isnan(v)) {
            cli_error("--batch-tokens '%s' is not a count of tokens; %s", text, HOW);
            return CLI_EXIT_USAGE;
        }
        if (v < 0) {
            cli_error("--batch-tokens '%s' is negative; %s", text, HOW);
            return CLI_EXIT_USAGE;
        }
        if (v <= MAX_BATCH_TOKENS && v != floor(v)) {
            cli_error("--batch-tokens '%s' is not a whole number of tokens; %s", text, HOW);
            return CLI_EXIT_USAGE;
        }
    }
    if (!(v <= MAX_BATCH_TOKENS)) {
        cli_error("--batch-tokens '%s' is more than 2^50 tokens (%.0f), the most a step may "
                  "hold; give fewer", text, MAX_BATCH_TOKENS);
        return CLI_EXIT_USAGE;
    }
    if (v == 0) {
        cli_error("--batch-tokens %s: a step needs 1 or more tokens; give a multiple of --seq "
                  "%d", text, seq);
        return CLI_EXIT_USAGE;
    }
    *out = v;
    return CLI_EXIT_OK;
}

int cli_cmd_plan(int argc, char **argv) {
    mt_plan_request q = mt_plan_request_defaults();
    mt_train_config *t = &q.model;
    *t = mt_train_defaults();
    int model = 0, precision = 0, memory = 0;
    const char *hardware = NULL, *batch_tokens = NULL;
    bool json = false;
    char choices_model[64] = "";
    cli_model_names(choices_model, sizeof choices_model, "|");
    cli_model_flags mf;
    t->T = 1024;
    cli_model_flags_init(&mf, t, true);
    cli_strategy_flags sf;   /* the strategy's, from their table: "auto" searches */
    cli_strategy_flags_init(&sf, CLI_STRATEGY_PLAN, t);
    enum { MODEL_FLAGS_AT = 1 };
    cli_opt opts[32 + CLI_MAX_MODEL_FLAGS + CLI_MAX_STRATEGY_FLAGS] = {
        {"model", CLI_CHOICE, &model, 0, 0, 0, 0, choices_model, "NAME", "model to plan"},
    };
    const cli_opt common[] = {
        {"hardware", CLI_STR, &hardware, 0, 0, 0, 0, NULL, "NAME", "system: hardware/NAME.json or a path"},
        {"chips", CLI_INT, &q.chips, 1, 1 << 24, 0, 0, NULL, "N", "devices (with --min-chips: the most to try)"},
        {"batch-tokens", CLI_STR, &batch_tokens, 0, 0, 0, 0, NULL, "N", "tokens a step (k, M, G: x1024)"},
        {"seq", CLI_INT, &q.seq, 1, 1 << 24, 0, 0, NULL, "T", "tokens a sequence"},
        {"precision", CLI_CHOICE, &precision, 0, 0, 0, 0, "bf16|fp32", "P", "matrix products' precision"},
        {"mesh", CLI_STR, &q.mesh, 0, 0, 0, 0, NULL, "AXES", "one mesh (data=2,fsdp=256,tensor=8); default: every one"},
        {NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL},
    };
    const cli_opt rest[] = {
        {"bucket-mb", CLI_DOUBLE, &t->bucket_mb, 0, 1048576, 0, 0, NULL, "MB",
         "gradient buckets of f32 reductions, MiB, as train's (0: one a gradient)"},
        {"memory", CLI_CHOICE, &memory, 0, 0, 0, 0, "meshtrain|mixed16|book|megatron|deepspeed|torchtitan", "CONV", "how bytes are counted (docs/planning.md)"},
        {"top", CLI_INT, &q.top, 1, 1000, 0, 0, NULL, "K", "layouts to print"},
        {"min-chips", CLI_FLAG, &q.min_chips, 0, 0, 0, 0, NULL, NULL, "find the fewest chips that fit"},
        {"json", CLI_FLAG, &json, 0, 0, 0, 0, NULL, NULL, "print one JSON object"},
        {NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL},
    };
    int n_opts = MODEL_FLAGS_AT + cli_model_flags_opts(&mf, opts + MODEL_FLAGS_AT);
    for (size_t i = 0; common[i].name; i++) opts[n_opts++] = common[i];
    n_opts += cli_strategy_flags_opts(&sf, opts + n_opts);
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) opts[n_opts++] = rest[i];
    bool seen[sizeof opts / sizeof opts[0]] = {0};
    int rc = cli_parse("plan", opts, argc, argv, seen);
    if (rc < 0) {
        cli_print_help(stdout, USAGE, opts);
        return CLI_EXIT_OK;
    }
    if (rc != CLI_EXIT_OK) return rc;
    t->model = (mt_model_kind)model;
    t->T = q.seq > 0 ? q.seq : t->T;
    if ((rc = cli_model_flags_apply(&mf, opts, seen, MODEL_FLAGS_AT, t)) != CLI_EXIT_OK)
        return rc;
    q.precision = precision == 1 ? MT_PRECISION_FP32 : MT_PRECISION_BF16;
    cli_strategy_flags_plan(&sf, &q);
    q.memory = (mt_plan_memory)memory;
    if (!hardware) {
        cli_error("plan: give --hardware NAME (the shipped systems are in hardware/; "
                  "docs/planning.md)");
        return CLI_EXIT_USAGE;
    }
    if (!batch_tokens || q.seq < 1) {
        cli_error("plan: give --batch-tokens N and --seq T (tokens a step, tokens a sequence)");
        return CLI_EXIT_USAGE;
    }
    if ((rc = parse_tokens(batch_tokens, q.seq, &q.batch_tokens)) != CLI_EXIT_OK) return rc;
    if (q.chips < 1 && !q.min_chips) {
        cli_error("plan: give --chips N (or --min-chips)");
        return CLI_EXIT_USAGE;
    }
    mt_hardware *hw = NULL;
    char found[4096];
    mt_status s = mt_hardware_find(hardware, &hw, found, sizeof found);
    if (s != MT_OK) {
        cli_error("%s", mt_errmsg());
        return cli_exit_of(s);
    }
    q.hw = hw;
    mt_plan_report rep;
    s = mt_plan_search(&q, &rep);
    if (s != MT_OK) {
        cli_error("%s", mt_errmsg());
        mt_hardware_free(hw);
        return cli_exit_of(s);
    }
    /* nothing fits: the reason on stderr; stdout the last search's
       report, when one ran (the families, or the mesh's layouts, say more) */
    if (rep.n_best == 0)
        cli_error("plan: %s", rep.why_none[0] ? rep.why_none : "no layout fits");
    if (rep.n_best > 0 || rep.n_evaluated > 0) {
        if (json) print_json(stdout, &q, hw->name, &rep);
        else print_text(stdout, &q, hw->name, &rep);
    }
    rc = rep.n_best > 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    mt_plan_report_free(&rep);
    mt_hardware_free(hw);
    return rc;
}
