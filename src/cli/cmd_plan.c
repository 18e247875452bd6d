/*
 * cmd_plan.c — `meshtrain plan`: the best layouts of a model on hardware we
 * do not have (mt_plan_search, meshtrain/plan.h), as a table or one JSON
 * object, with a line for each family of layouts saying why it loses
 * (plan_print.c prints them).
 *
 *   $ meshtrain plan --model llama --preset llama3-70b --hardware tpu-v5p \
 *         --chips 8960 --batch-tokens 4M --seq 8192
 */
#include "cli/args.h"
#include "cli/model_flags.h"
#include "cli/plan_print.h"
#include "cli/strategy_flags.h"
#include "meshtrain.h"

#include <ctype.h>
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
    "                      [--fabric NAME|PATH] [--slice-chips N]\n"
    "                      [--memory meshtrain|mixed16|book|megatron|deepspeed|torchtitan]\n"
    "                      [--deepspeed-version V]\n"
    "                      [--top K] [--min-chips] [--train-tokens N] [--json]\n"
    "\n"
    "Lays one training step of the model on N chips of the system NAME (a hardware\n"
    "description: hardware/NAME.json, or a path; docs/planning.md) every way the\n"
    "flags leave open: data x fsdp x tensor x pipe (a mixture of experts: x expert,\n"
    "every divisor of its experts), ZeRO stage, remat policy,\n"
    "sequence parallelism and collective matmul, pipeline schedule, its chunks a\n"
    "device (interleaved: v = 2, and every v to 8 that divides) and microbatches.\n"
    "Each layout's per-device program is the trainer's, partitioned and compiled on\n"
    "the shape-only backend; its memory is counted per device and its step time on\n"
    "the system's roofline and links. Prints the best K feasible layouts (memory per\n"
    "device, step time, tokens/s per device, MFU and HFU, what binds); for the best,\n"
    "its memory, its step split (forward, backward, recompute, optimizer, exposed\n"
    "communication, bubble), tokens/s in all, and the bytes a device moves a step by\n"
    "collective kind and mesh axes; one line per family\n"
    "of layouts saying why it loses, and one line per reason layouts were refused\n"
    "(out of memory, sizes that do not divide), with how many: those are never\n"
    "ranked (--json: with --mesh each is listed with why). --min-chips\n"
    "finds the fewest chips (up to --chips, if given) on which some layout fits.\n"
    "--batch-tokens takes k, M, G (x1024: 4M = 4,194,304 tokens).\n"
    "--train-tokens N: the days and device-hours (chips x hours) of training on N\n"
    "tokens at each layout's step; K, M, B, T are decimal (x1000: 300B = 3e11).\n"
    "Memory and bytes are printed in binary units: GiB = 2^30 bytes (MiB 2^20, TiB\n"
    "2^40); --json gives bytes and seconds.\n"
    "--rules (as train's) builds every layout with the rules, each rule's mesh axes\n"
    "those the layout has (an axis of size 1 splits nothing).\n"
    "MFU counts 6N + 6·L·H·Q·T FLOPs a token: causal attention at its pairs with\n"
    "key <= query, half PaLM's 12·L·H·Q·T (as llm.c and MaxText count it),\n"
    "recomputation excluded; HFU the FLOPs run, recomputation included (MFU <= HFU).\n"
    "--fabric puts a fabric (hardware/fabrics/NAME.json: ib-hdr, ib-ndr, opa, roce,\n"
    "or a path) in place of the system's scale-out level (its outermost: InfiniBand,\n"
    "DCN). --slice-chips lays a TPU run as slices of N chips joined over DCN (N must\n"
    "form a box inside the pod; default: one slice up to a pod).\n"
    "\n"
    "examples:\n"
    "  meshtrain plan --model llama --preset llama3-70b --hardware tpu-v5p --chips 8960 \\\n"
    "      --batch-tokens 4M --seq 8192\n"
    "  meshtrain plan --model llama --preset llama2-13b --hardware tpu-v5p --chips 4096 \\\n"
    "      --batch-tokens 3M --seq 3072 --mesh fsdp=1024,tensor=4 --memory book\n"
    "  meshtrain plan --model gpt --layers 48 --channels 1600 --heads 25 --vocab 50257 \\\n"
    "      --hardware h100-sxm --batch-tokens 512k --seq 1024 --min-chips\n";

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

/* --deepspeed-version: MAJOR.MINOR[.PATCH], each 0 to 99, into
 * mt_plan_request.deepspeed_release (0.3.13: 313). */
static int parse_release(const char *text, int *out) {
    int v[3] = {0, 0, 0}, n = 0;
    const char *p = text;
    while (n < 3) {
        char *end = NULL;
        long x = isdigit((unsigned char)*p) ? strtol(p, &end, 10) : -1;
        if (x < 0 || x > 99 || end - p > 2) break;
        v[n++] = (int)x;
        p = end;
        if (*p != '.') break;
        p++;
    }
    if (n < 2 || *p || (v[0] == 0 && v[1] == 0 && v[2] == 0)) {
        cli_error("--deepspeed-version '%s' is not a release: give MAJOR.MINOR[.PATCH], each "
                  "0 to 99 (0.3.13, 0.4.2)", text);
        return CLI_EXIT_USAGE;
    }
    *out = v[0] * 10000 + v[1] * 100 + v[2];
    return CLI_EXIT_OK;
}

/* --train-tokens: a count of tokens, decimal, with an optional unit K, M,
 * B or T (x1000: published budgets are "300B tokens", "15T"), any case;
 * fractions before the unit ("1.5T") and exponents ("3e11") are whole
 * counts too. Into *out. */
static int parse_train_tokens(const char *text, double *out) {
    static const char HOW[] = "give a whole number of tokens, decimal, with an optional unit K, "
                              "M, B or T (x1000: 300B = 300,000,000,000 tokens, 1.5T, 3e11)";
    size_t len = strspn(text, "0123456789.eE+");
    const char *u = text + len;
    double scale = 1;
    switch (*u) {
    case 'k': case 'K': scale = 1e3, u++; break;
    case 'm': case 'M': scale = 1e6, u++; break;
    case 'b': case 'B': scale = 1e9, u++; break;
    case 't': case 'T': scale = 1e12, u++; break;
    default: break;
    }
    char num[64];
    char *end = NULL;
    double v = NAN;
    if (len > 0 && len < sizeof num && !*u) {
        memcpy(num, text, len);
        num[len] = '\0';
        v = strtod(num, &end) * scale;
    }
    if (!end || *end || !isfinite(v)) {
        cli_error("--train-tokens '%s' is not a count of tokens; %s", text, HOW);
        return CLI_EXIT_USAGE;
    }
    if (!(v >= 1) || v > CLI_PLAN_MAX_TRAIN_TOKENS) {
        cli_error("--train-tokens '%s' is %.6g tokens: give 1 to %.0e; %s", text, v,
                  CLI_PLAN_MAX_TRAIN_TOKENS, HOW);
        return CLI_EXIT_USAGE;
    }
    if (v != floor(v)) {
        cli_error("--train-tokens '%s' is %.17g tokens, not a whole number; %s", text, v, HOW);
        return CLI_EXIT_USAGE;
    }
    *out = v;
    return CLI_EXIT_OK;
}

int cli_cmd_plan(int argc, char **argv) {
    mt_plan_request q = mt_plan_request_defaults();
    mt_train_config *t = &q.model;
    *t = mt_train_defaults();
    int model = 0, precision = 0, memory = 0, doc_mask = 0;
    const char *hardware = NULL, *batch_tokens = NULL, *train_tokens = NULL, *fabric = NULL;
    const char *context = NULL, *deepspeed = NULL;
    int slice_chips = 0;
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
        {"mesh", CLI_STR, &q.mesh, 0, 0, 0, 0, NULL, "AXES", "one mesh (data=2,fsdp=256,tensor=8; context=N splits each sequence); default: every one"},
        {"context", CLI_STR, &context, 0, 0, 0, 0, NULL, "N|auto", "a context axis searched without --mesh: N, or auto every size dividing the chips and T/2 (and none); default none"},
        {"fabric", CLI_STR, &fabric, 0, 0, 0, 0, NULL, "NAME", "scale-out fabric: hardware/fabrics/NAME.json or a path"},
        {"slice-chips", CLI_INT, &slice_chips, 1, 1 << 24, 0, 0, NULL, "N", "TPU: slices of N chips over DCN"},
        {NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL},
    };
    const cli_opt rest[] = {
        {"bucket-mb", CLI_DOUBLE, &t->bucket_mb, 0, 1048576, 0, 0, NULL, "MB",
         "gradient buckets of f32 reductions, MiB, as train's (0: one a gradient)"},
        {"memory", CLI_CHOICE, &memory, 0, 0, 0, 0, "meshtrain|mixed16|book|megatron|deepspeed|torchtitan", "CONV", "how bytes are counted (docs/planning.md)"},
        {"deepspeed-version", CLI_STR, &deepspeed, 0, 0, 0, 0, NULL, "V",
         "with --memory deepspeed, the release whose ZeRO-3 collectives are costed (before "
         "0.5.5: one a parameter, synchronous, a copy a rank; default: a current one)"},
        {"doc-mask", CLI_CHOICE, &doc_mask, 0, 0, 0, 0, "off|on", "MODE",
         "packed documents (as train): the document ids' inputs and their moves beside the "
         "keys; attention still costed causal over the whole row (the documents' lengths "
         "are the data's)"},
        {"top", CLI_INT, &q.top, 1, 1000, 0, 0, NULL, "K", "layouts to print"},
        {"min-chips", CLI_FLAG, &q.min_chips, 0, 0, 0, 0, NULL, NULL, "find the fewest chips that fit"},
        {"threads", CLI_INT, &q.threads, 0, 8, 0, 0, NULL, "N",
         "the search's threads (0: all cores, at most 8); the answer is the same on any"},
        {"train-tokens", CLI_STR, &train_tokens, 0, 0, 0, 0, NULL, "N",
         "tokens to train on: days and device-hours (K, M, B, T: x1000)"},
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
    if (deepspeed && (rc = parse_release(deepspeed, &q.deepspeed_release)) != CLI_EXIT_OK)
        return rc;
    t->doc_mask = doc_mask == 1;
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
    if (context) {
        char *end = NULL;
        long n = strcmp(context, "auto") ? strtol(context, &end, 10) : -1;
        if (n == 0 || n < -1 || n > (1 << 24) || (end && (end == context || *end)) ||
            (n > 1 && q.seq % (2 * n))) {
            cli_error("plan: --context '%s': give auto or a size N with T=%d a multiple of "
                      "2N (head-tail chunks)", context, q.seq);
            return CLI_EXIT_USAGE;
        }
        if (q.mesh) {
            cli_error("plan: --context and --mesh both say the context axis; give it in the "
                      "mesh (context=N) or drop --mesh");
            return CLI_EXIT_USAGE;
        }
        q.context = (int)n;
    }
    cli_plan_out po = {.train_tokens = 0};
    if (train_tokens && (rc = parse_train_tokens(train_tokens, &po.train_tokens)) != CLI_EXIT_OK)
        return rc;
    if (q.chips < 1 && !q.min_chips) {
        cli_error("plan: give --chips N (or --min-chips)");
        return CLI_EXIT_USAGE;
    }
    if (slice_chips && !q.min_chips && q.chips % slice_chips) {
        cli_error("plan: --chips %d is no whole number of slices of --slice-chips %d; give a "
                  "multiple of %d", q.chips, slice_chips, slice_chips);
        return CLI_EXIT_USAGE;
    }
    mt_hardware *hw = NULL;
    char found[4096];
    mt_status s = mt_hardware_find(hardware, &hw, found, sizeof found);
    if (s != MT_OK) {
        cli_error("%s", mt_errmsg());
        return cli_exit_of(s);
    }
    /* the flags' values are what is wrong when these refuse: exit 2 */
    if (fabric) s = mt_hardware_set_fabric(hw, fabric, NULL, 0);
    if (s == MT_OK && slice_chips) s = mt_hardware_set_slice_chips(hw, slice_chips);
    if (s != MT_OK) {
        cli_error("%s", mt_errmsg());
        mt_hardware_free(hw);
        return s == MT_ENOMEM ? CLI_EXIT_FAIL : CLI_EXIT_USAGE;
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
        po.hw_name = hw->name;
        if (json) cli_plan_print_json(stdout, &q, &po, &rep);
        else cli_plan_print_text(stdout, &q, &po, &rep);
    }
    rc = rep.n_best > 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    mt_plan_report_free(&rep);
    mt_hardware_free(hw);
    return rc;
}
