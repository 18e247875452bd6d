/* runtime.c — clock and kernel thread count. */
#include "meshtrain.h"

#include <cblas.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

double mt_time_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Kernel threads per graph. meshtrain splits matrix products over its own
 * pool and runs Open BLAS single-threaded inside each piece: one set of
 * threads, one waiting policy, and no BLAS threads spinning while our
 * kernels run (two pools on two cores fight; measured in bench/). This is
 * runtime configuration, the one process-wide setting. */
static atomic_int kernel_threads;

void mt_set_num_threads(int n) {
    if (n <= 0) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n <= 0) n = 1;
    atomic_store(&kernel_threads, n);
    openblas_set_num_threads(1);
}

int mt_get_num_threads(void) {
    int n = atomic_load(&kernel_threads);
    if (n == 0) {   /* not set yet: all cores */
        mt_set_num_threads(0);
        n = atomic_load(&kernel_threads);
    }
    return n;
}
