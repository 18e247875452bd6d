/*
 * meshtrain/examples.h — worked examples as library functions, behind
 * `meshtrain example`.
 */
#ifndef MESHTRAIN_EXAMPLES_H
#define MESHTRAIN_EXAMPLES_H

#include "meshtrain/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The pmap linear-regression example of the JAX docs, as a library function:
 * 3 features, replicated parameters, the global batch split over a 1-axis
 * mesh of `devices`, pmean of loss and gradients, SGD. Writes the loss of
 * every step to losses[steps] (same on every rank under MPI). The pmean is
 * taken in float64 (an all_gather of the local means, summed in rank order),
 * so every mesh gives the 1-device run's numbers bit for bit. */
typedef struct {
    int      devices;        /* mesh size (>= 1); under MPI, 0 = the world size */
    int      steps;          /* default 20 */
    int      batch;          /* global batch, divisible by devices; default 128 */
    float    lr;             /* default 0.1 */
    uint64_t seed;
    mt_transport_kind transport;
    const char *trace;
} mt_linreg_example_opts;
mt_status mt_example_linreg(const mt_linreg_example_opts *opts, float *losses, float params[4]);

#ifdef __cplusplus
}
#endif
#endif /* MESHTRAIN_EXAMPLES_H */
