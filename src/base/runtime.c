/* runtime.c — clock, the CPUs this process may use, and the kernel thread
 * count. */
#define _GNU_SOURCE   /* sched_getaffinity / CPU_COUNT */
#include "base/base_impl.h"

#include <cblas.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double mt_time_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

_Static_assert(sizeof(cpu_set_t) >= MT_CPU_SET_BYTES, "cpu_set_t holds MT_CPU_SET_BYTES");

int mt__cpu_set(unsigned char *bits) {
    cpu_set_t set;
    if (bits) memset(bits, 0, MT_CPU_SET_BYTES);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) {
        for (int c = 0; bits && c < 8 * MT_CPU_SET_BYTES; c++)
            if (CPU_ISSET(c, &set)) bits[c / 8] |= (unsigned char)(1u << (c % 8));
        return CPU_COUNT(&set);
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int mt__cpu_count(void) { return mt__cpu_set(NULL); }

/* Kernel threads per graph. meshtrain splits matrix products over its own
 * pool and runs Open BLAS single-threaded inside each piece: one set of
 * threads, one waiting policy, and no BLAS threads spinning while our
 * kernels run (two pools on two cores fight: bench/bench_gpt.c, 2026-11-29,
 * 2-core Zen 5 dev VM). This is runtime configuration, the one process-wide
 * setting. */
static atomic_int kernel_threads;

void mt_set_num_threads(int n) {
    if (n <= 0) n = mt__cpu_count();
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
