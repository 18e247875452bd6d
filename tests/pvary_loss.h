/*
 * pvary_loss.h — the data-parallel graph test_overlap.c and test_bf16_comm.c
 * both reduce: loss = sum_k sum(x · pvary(p_k)) over `np` replicated
 * parameters p0, p1, ... of n zeros each, so that every p_k's gradient is x
 * all-reduced over `data` (a deferred psum in W).
 */
#ifndef MT_TEST_PVARY_LOSS_H
#define MT_TEST_PVARY_LOSS_H

#include "meshtrain.h"

#include <stdio.h>

/* Builds the parameters into p[0..np) and returns the loss (NULL when a
 * builder failed: the graph holds the error). */
static inline mt_tensor *mt_test_pvary_loss(mt_graph *g, mt_tensor *x, int np, int64_t n,
                                            mt_axes data, mt_tensor **p) {
    mt_tensor *loss = NULL;
    for (int k = 0; k < np; k++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", k);
        p[k] = mt_param(g, name, 1, (int64_t[]){n}, (mt_init){MT_INIT_ZEROS, 0});
        mt_tensor *term = mt_sum(g, mt_mul(g, x, mt_graph_pvary(g, p[k], data)));
        loss = loss ? mt_add(g, loss, term) : term;
    }
    return loss;
}

#endif
