/* runtime.c — clock and kernel thread count. */
#include "meshtrain.h"

#include <cblas.h>
#include <time.h>
#include <unistd.h>

double mt_time_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Open BLAS keeps its own pool; we pick its size explicitly so device threads
 * and BLAS threads never oversubscribe the cores. */
void mt_set_num_threads(int n) {
    if (n <= 0) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n <= 0) n = 1;
    openblas_set_num_threads(n);
}

int mt_get_num_threads(void) { return openblas_get_num_threads(); }
