/*
 * plan/step_output.h — what a step's model (step.h) tells a planner's user,
 * copied into the public result (meshtrain/plan.h's mt_plan_result): the
 * step's compute split by phase, and its bytes by collective kind and axes.
 */
#ifndef MT_PLAN_STEP_OUTPUT_H
#define MT_PLAN_STEP_OUTPUT_H

#include "plan/step.h"

/* Fills res's forward, backward, recompute and volumes from step *r of a
 * layout on `mesh` (the mesh the step was timed on: its axis names and
 * group sizes): forward = r->ops[0], backward = r->ops[1] + r->ops[2] -
 * r->recompute, recompute = r->recompute; one volume a (kind, axes) that
 * moved bytes, and the pipeline's permutes over pipe (r->message_sent).
 * Past MT_PLAN_MAX_VOLUMES the rest are left out (step.h keys at most
 * MT__PLAN_STEP_MAX_COMM, one fewer). */
void mt__plan_step_output(const mt_mesh *mesh, const mt__plan_step_result *r,
                          mt_plan_result *res);

#endif /* MT_PLAN_STEP_OUTPUT_H */
