/*
 * cli/plan_print.h — `meshtrain plan`'s output (plan_print.c): the report
 * of mt_plan_search as a table with the best layout's details, or as one
 * JSON object (docs/planning.md, "Output").
 */
#ifndef MT_CLI_PLAN_PRINT_H
#define MT_CLI_PLAN_PRINT_H

#include "meshtrain.h"

#include <stdio.h>

/* The most tokens --train-tokens takes: 10^18, a million times the largest
 * published run's, past which days of training mean nothing. */
#define CLI_PLAN_MAX_TRAIN_TOKENS 1e18

/* What the caller asked beside the request. */
typedef struct {
    const char *hw_name;       /* the system's name, as loaded */
    double      train_tokens;  /* --train-tokens: tokens to train on; 0: not given */
} cli_plan_out;

/* Steps, days and device-hours of training on o->train_tokens tokens at
 * layout r's step: ceil(train_tokens / batch_tokens) steps, days = steps x
 * step / 86400 s, device-hours = r's chips x hours. All 0 when no
 * --train-tokens was given. */
void cli_plan_training(const cli_plan_out *o, const mt_plan_request *q, const mt_plan_result *r,
                       double *steps, double *days, double *device_hours);

/* The report as text: the header, the best layouts' table (memory in
 * binary units, step, tokens/s per device, MFU and HFU, what binds), the
 * best layout's memory, step split, throughput, communication a step by
 * kind and axes, and training time with --train-tokens; the refusals, one
 * line a reason; the families; the MFU and units footer. */
void cli_plan_print_text(FILE *out, const mt_plan_request *q, const cli_plan_out *o,
                         const mt_plan_report *rep);

/* The report as one JSON object: numbers in bytes and seconds. */
void cli_plan_print_json(FILE *out, const mt_plan_request *q, const cli_plan_out *o,
                         const mt_plan_report *rep);

#endif /* MT_CLI_PLAN_PRINT_H */
