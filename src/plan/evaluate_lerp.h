/*
 * plan/evaluate_lerp.h — a layout's numbers taken between the programs
 * built at its points (evaluate_lerp.c; evaluate.c's file comment says
 * which points and why).
 */
#ifndef MT_PLAN_EVALUATE_LERP_H
#define MT_PLAN_EVALUATE_LERP_H

#include "plan/search_impl.h"

/* X(k, b) from X at k, b in {k0, k1} x {b0, b1} (k1 = k0 when there is one
 * block count, b1 = b0 likewise), n numbers each, into out: bilinear. */
void mt__plan_lerp2(const double *x00, const double *x10, const double *x01, const double *x11,
                    int k0, int k1, int b0, int b1, int k, int b, double *out, size_t n);

/* The arena of a program at b sequences from its builds p0 at b0 and p1 at
 * b1 into *out; false where they are not node for node the same, b1 == b0,
 * or they hold no live bytes. */
bool mt__plan_arena_at_batch(const mt__plan_program *p0, int b0, const mt__plan_program *p1,
                             int b1, int b, double *out);

/* in (keyed by from) re-keyed into the table *into (keys added as met) as
 * *out. MT_EINVAL past MT__PLAN_STEP_MAX_COMM distinct collectives. */
mt_status mt__plan_rekey(const mt__plan_comm_keys *from, const mt__plan_chunk_time *in,
                         mt__plan_comm_keys *into, mt__plan_chunk_time *out);

/* X(k) from X at k0 and k1 blocks (the same batch, one key table) into
 * *out: linear, waits past k1 carried on as the function's comment in
 * evaluate_lerp.c says. */
void mt__plan_lerp_blocks(const mt__plan_chunk_time *x0, const mt__plan_chunk_time *x1, int k0,
                          int k1, int k, mt__plan_chunk_time *out);

#endif /* MT_PLAN_EVALUATE_LERP_H */
