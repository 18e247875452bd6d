/*
 * strategy_flags.c — the strategy flags' table, and how train, explain and
 * plan read it (strategy_flags.h).
 */
#include "cli/strategy_flags.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

enum {
    TRAIN = 1 << CLI_STRATEGY_TRAIN,
    EXPLAIN = 1 << CLI_STRATEGY_EXPLAIN,
    PLAN = 1 << CLI_STRATEGY_PLAN,
    ALL = TRAIN | EXPLAIN | PLAN
};

#define AT(field) offsetof(cli_strategy_flags, field)

/* One flag. Its help is `help`, then (a flag whose values are the schedule
 * kinds, one value) ": <kinds>", then the command's note. */
typedef struct {
    const char *name;
    unsigned    in;            /* the commands that read it */
    /* as one value */
    cli_kind    kind;
    double      lo, hi;
    const char *choices;       /* a CLI_CHOICE's */
    const char *metavar;
    size_t      at;            /* the value in cli_strategy_flags */
    /* as plan reads it: a CLI_CHOICE whose first choice is auto, or as above */
    cli_kind    plan_kind;
    double      plan_hi;
    const char *plan_choices;  /* NULL with `kinds`: "auto|" and the schedule kinds */
    const char *plan_metavar;
    size_t      plan_at;
    bool        kinds;         /* its values are the schedule kinds */
    const char *help;          /* what it sets, as every command reads it */
    const char *note[CLI_STRATEGY_N];   /* what a command adds */
} strategy_row;

static const strategy_row ROWS[] = {
    {"zero", ALL, CLI_INT, 0, 3, NULL, "N", AT(zero),
     CLI_CHOICE, 0, "auto|0|1|2|3", "N", AT(zero_pick), false,
     "ZeRO stage over the data axis: 1 optimizer state split, 2 and gradients, 3 and "
     "parameters",
     {NULL, NULL, " (auto: every stage)"}},
    {"rules", ALL, CLI_STR, 0, 0, NULL, "RULES", AT(rules),
     CLI_STR, 0, NULL, "RULES", AT(rules), false,
     "the strategy as rules from the model's logical axes to mesh axes, e.g. "
     "'mlp=tensor,heads=tensor,embed=fsdp' (each replaces the default rule of its axis: "
     "batch=data+fsdp(+expert), vocab/heads/kv_heads/mlp=tensor, experts=expert, with "
     "--sequence-parallel act_length=tensor; 'axis=' keeps it whole)",
     {NULL, NULL, "; every layout is planned with them"}},
    {"sequence-parallel", ALL, CLI_FLAG, 0, 0, NULL, NULL, AT(sp),
     CLI_CHOICE, 0, "auto|on|off", "MODE", AT(sp_pick), false,
     "sequence parallelism over the tensor axis (gpt, llama): the norms and residual adds on "
     "T/n rows",
     {NULL, NULL, " (auto: both)"}},
    {"cp-attention", ALL, CLI_CHOICE, 0, 0, "allgather|ring|ulysses", "KIND",
     AT(cpa), CLI_CHOICE, 0, "auto|allgather|ring|ulysses", "KIND", AT(cpa_pick), false,
     "context parallelism's attention over the context axis (the sequences split head-tail, "
     "T a multiple of 2 x context): allgather gathers k and v and reduce-scatters their "
     "gradients (Llama 3's; the default); ring sends k and v around the devices, the dK, dV "
     "travelling home (overlapped with each step's block); ulysses all-to-alls q, k, v over "
     "heads (heads and kv heads per device divisible by context)",
     {NULL, NULL, " (auto: every lowering, on the layouts with a context axis: --context or "
      "a --mesh with one)"}},
    {"collective-matmul", ALL, CLI_CHOICE, 0, 0, "auto|on|off", "MODE", AT(cm),
     CLI_CHOICE, 0, "auto|on|off", "MODE", AT(cm), false,
     "with --sequence-parallel: its collectives inside the matmuls (ring of ppermutes)",
     {NULL, NULL, "; every layout with sequence parallelism is planned so (auto: both)"}},
    {"reshard-after-forward", ALL, CLI_CHOICE, 0, 0, "auto|on|off", "MODE", AT(raf),
     CLI_CHOICE, 0, "auto|on|off", "MODE", AT(raf), false,
     "with parameters stored split (an fsdp axis, --zero 2 or 3): on frees a gathered "
     "parameter after its forward use and gathers it again for the backward (less memory, "
     "one more all-gather a microbatch), off keeps it from the forward to the backward "
     "(torchtitan's reshard_after_forward); auto is on for fsdp and ZeRO-3 (ZeRO-1/2 keep "
     "them for the step)",
     {NULL, NULL, ": every layout that stores parameters split is planned so"}},
    {"fsdp-gather", ALL, CLI_CHOICE, 0, 0, "auto|once|microbatch", "WHEN", AT(fg),
     CLI_CHOICE, 0, "auto|once|microbatch", "WHEN", AT(fg), false,
     "with an fsdp axis or --zero 3: once gathers each parameter once a step and keeps it "
     "whole for the step, its gradient reduce-scattered once (Llama 3's FSDP: 2 parameter "
     "sizes a step, not 3 a microbatch; the memory of whole parameters), microbatch gathers "
     "it for every microbatch; auto is microbatch (ZeRO-1/2 always gather once)",
     {NULL, NULL, ": every layout that stores parameters split over fsdp or ZeRO-3 is planned so"}},
    {"schedule", ALL, CLI_STR, 0, 0, NULL, "KIND", AT(schedule),
     CLI_CHOICE, 0, NULL, "KIND", AT(schedule_pick), true,
     "pipeline schedule over the pipe axis",
     {" (default 1f1b)", " (default 1f1b): each device shows the pipeline chunks it runs",
      " (auto: every kind but zb-h2)"}},
    {"microbatches", ALL, CLI_INT, 1, 1 << 20, NULL, "N", AT(microbatches),
     CLI_INT, 1 << 24, NULL, "M", AT(microbatches), false,
     "microbatches per step",
     {" (gradient accumulation, a pipeline's m: the same as --accum)",
      ", checked against a pipe axis as train checks them (default: 1, or one per stage of "
      "a pipe axis)",
      " (default: powers of two, p times them on a pipeline of p stages, and the counts that "
      "give each replica a power-of-two microbatch)"}},
    {"chunks", TRAIN | PLAN, CLI_INT, 1, 8, NULL, "N", AT(chunks),
     CLI_INT, 8, NULL, "N", AT(chunks), false,
     "model chunks per device (interleaved; zb-v and dualpipev use 2)",
     {NULL, NULL, "; only the schedules that run N are planned (default: each schedule's own, "
      "interleaved at 2 and at every N up to 8 whose stages x N divide the layers)"}},
    {"remat", ALL, CLI_CHOICE, 0, 0, "none|full|attention|dots", "POLICY", AT(remat),
     CLI_CHOICE, 0, "auto|none|full|attention|dots", "POLICY", AT(remat_pick), false,
     "activation checkpointing, per transformer block: full keeps only the block's input "
     "(about one forward more a step), attention recomputes only the attention "
     "probabilities, dots keeps the matmuls' outputs and recomputes the elementwise ops",
     {NULL, NULL, " (auto: every policy)"}},
};
enum { N_ROWS = (int)(sizeof ROWS / sizeof ROWS[0]) };
_Static_assert(N_ROWS <= CLI_MAX_STRATEGY_FLAGS, "raise CLI_MAX_STRATEGY_FLAGS");

void cli_strategy_flags_init(cli_strategy_flags *sf, cli_strategy_cmd cmd,
                             const mt_train_config *c) {
    memset(sf, 0, sizeof *sf);
    sf->cmd = cmd;
    for (int k = 0; k < MT_SCHEDULE_N_KINDS; k++) {
        size_t at = strlen(sf->kinds);
        snprintf(sf->kinds + at, sizeof sf->kinds - at, "%s%s", k ? "|" : "",
                 mt_schedule_kind_name((mt_schedule_kind)k));
    }
    snprintf(sf->plan_kinds, sizeof sf->plan_kinds, "auto|%s", sf->kinds);
    if (cmd == CLI_STRATEGY_PLAN) {   /* "auto" is pick 0: the request's -1 */
        const mt_plan_request q = mt_plan_request_defaults();
        sf->zero_pick = q.zero + 1;
        sf->remat_pick = q.remat + 1;
        sf->sp_pick = q.sequence_parallel < 0 ? 0 : q.sequence_parallel ? 1 : 2;
        sf->schedule_pick = q.schedule + 1;
        sf->microbatches = q.microbatches;
        sf->chunks = q.chunks;
        sf->cm = q.collective_matmul < 0 ? 0 : q.collective_matmul ? 1 : 2;
        sf->cpa_pick = q.cp_attention + 1;
        sf->rules = q.model.rules;
        return;
    }
    sf->zero = c->zero;
    sf->rules = c->rules;
    sf->sp = c->sequence_parallel;
    sf->cpa = c->cp_attention;
    sf->cm = c->collective_matmul > 0 ? 1 : c->collective_matmul < 0 ? 2 : 0;
    sf->raf = c->reshard_after_forward > 0 ? 1 : c->reshard_after_forward < 0 ? 2 : 0;
    sf->fg = c->fsdp_gather > 0 ? 1 : c->fsdp_gather < 0 ? 2 : 0;
    sf->schedule = c->schedule;
    sf->microbatches = c->accum;
    sf->chunks = c->pipe_chunks;
    sf->remat = (int)c->remat;
}

int cli_strategy_flags_opts(cli_strategy_flags *sf, cli_opt *opts) {
    const bool plan = sf->cmd == CLI_STRATEGY_PLAN;
    int n = 0;
    for (int i = 0; i < N_ROWS; i++) {
        const strategy_row *r = &ROWS[i];
        if (!(r->in & (1u << sf->cmd))) continue;
        const char *note = r->note[sf->cmd] ? r->note[sf->cmd] : "";
        if (r->kinds && !plan)
            snprintf(sf->help[n], sizeof sf->help[n], "%s: %s%s", r->help, sf->kinds, note);
        else
            snprintf(sf->help[n], sizeof sf->help[n], "%s%s", r->help, note);
        const char *choices = plan ? (r->kinds ? sf->plan_kinds : r->plan_choices) : r->choices;
        opts[n] = (cli_opt){r->name, plan ? r->plan_kind : r->kind,
                            (char *)sf + (plan ? r->plan_at : r->at), r->lo,
                            plan ? r->plan_hi : r->hi, false, false, choices,
                            plan ? r->plan_metavar : r->metavar, sf->help[n]};
        n++;
    }
    return n;
}

void cli_strategy_flags_apply(const cli_strategy_flags *sf, const cli_opt *opts, const bool *seen,
                              mt_train_config *cfg) {
    cfg->zero = sf->zero;
    cfg->rules = sf->rules;
    cfg->sequence_parallel = sf->sp;
    cfg->cp_attention = sf->cpa;
    cfg->collective_matmul = sf->cm == 1 ? 1 : sf->cm == 2 ? -1 : 0;
    cfg->reshard_after_forward = sf->raf == 1 ? 1 : sf->raf == 2 ? -1 : 0;
    cfg->fsdp_gather = sf->fg == 1 ? 1 : sf->fg == 2 ? -1 : 0;
    cfg->schedule = sf->schedule;
    if (sf->cmd == CLI_STRATEGY_TRAIN) cfg->pipe_chunks = sf->chunks;
    cfg->remat = (mt_remat)sf->remat;
    if (cli_given(opts, seen, "microbatches") && !cli_given(opts, seen, "accum"))
        cfg->accum = sf->microbatches;
}

int cli_strategy_flags_check(const cli_strategy_flags *sf, const cli_opt *opts, const bool *seen,
                             const mt_train_config *cfg) {
    if (cli_given(opts, seen, "microbatches") && cli_given(opts, seen, "accum") &&
        cfg->accum != sf->microbatches) {
        cli_error("--microbatches %d and --accum %d both set the microbatches per step; give one",
                  sf->microbatches, cfg->accum);
        return CLI_EXIT_USAGE;
    }
    /* the library refuses on and off without sequence parallelism
     * (mt_train_config_check, as it refuses --f32-activations without bf16,
     * --remat without blocks, ...); auto given explicitly is the flag's own */
    if (cli_given(opts, seen, "collective-matmul") && !cfg->sequence_parallel) {
        cli_error("--collective-matmul moves the collectives of sequence parallelism into the "
                  "matmuls, and there are none: add --sequence-parallel (with a tensor axis), "
                  "or drop --collective-matmul");
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

void cli_strategy_flags_plan(const cli_strategy_flags *sf, mt_plan_request *q) {
    q->zero = sf->zero_pick - 1;
    q->remat = sf->remat_pick - 1;
    q->sequence_parallel = sf->sp_pick == 0 ? -1 : sf->sp_pick == 1 ? 1 : 0;
    q->schedule = sf->schedule_pick - 1;
    q->collective_matmul = sf->cm == 1 ? 1 : sf->cm == 2 ? 0 : -1;
    q->cp_attention = sf->cpa_pick - 1;
    q->chunks = sf->chunks;
    q->microbatches = sf->microbatches;
    q->model.rules = sf->rules;
    q->model.reshard_after_forward = sf->raf == 1 ? 1 : sf->raf == 2 ? -1 : 0;
    q->model.fsdp_gather = sf->fg == 1 ? 1 : sf->fg == 2 ? -1 : 0;
}
