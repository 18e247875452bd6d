/*
 * plan_request.h — a free search's request for the planner's tests (a
 * header of the tests, included by each): the model (kind, its config),
 * `sequences` sequences of `seq` tokens a step, the precision and the
 * memory convention, the rest mt_plan_request_defaults(); the caller sets
 * the hardware and the chips.
 */
#ifndef MT_TEST_PLAN_REQUEST_H
#define MT_TEST_PLAN_REQUEST_H

#include "meshtrain/plan.h"
#include "meshtrain/models.h"

static mt_plan_request plan_request_of(mt_model_kind kind, const void *config, size_t size,
                                       int seq, double sequences, mt_precision precision,
                                       mt_plan_memory memory) {
    mt_plan_request q = mt_plan_request_defaults();
    q.model = mt_train_defaults();
    q.model.model = kind;
    q.model.model_config = config;
    q.model.model_config_size = size;
    q.seq = seq;
    q.batch_tokens = (double)seq * sequences;
    q.precision = precision;
    q.memory = memory;
    return q;
}

/* The request of one fixed layout of LLaMA m: `mesh` on `chips` chips,
 * no remat, ZeRO 0, no sequence parallelism, one microbatch. */
static inline mt_plan_request plan_layout_request(const mt_llama_config *m,
                                                  const mt_hardware *hw, const char *mesh,
                                                  int chips, int seq, double seqs,
                                                  mt_plan_memory memory,
                                                  mt_precision precision) {
    mt_plan_request q = plan_request_of(MT_MODEL_LLAMA, m, sizeof *m, seq, seqs, precision,
                                        memory);
    q.hw = hw;
    q.chips = chips;
    q.mesh = mesh;
    q.remat = MT_REMAT_NONE;
    q.zero = 0;
    q.sequence_parallel = 0;
    q.microbatches = 1;
    return q;
}

#endif /* MT_TEST_PLAN_REQUEST_H */
