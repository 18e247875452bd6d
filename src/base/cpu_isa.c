/* cpu_isa.c — which vector level the kernels run at: the CPU's best, capped
 * by MT_CPU_ISA or mt_set_cpu_isa (base.h says what each level is). */
#include "base/base_impl.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const isa_names[] = {
    [MT_ISA_GENERIC] = "generic",
    [MT_ISA_NEON]    = "neon",
    [MT_ISA_AVX2]    = "avx2",
    [MT_ISA_AVX512]  = "avx512",
};
#define N_ISA ((int)(sizeof isa_names / sizeof isa_names[0]))

const char *mt_cpu_isa_name(mt_cpu_isa isa) {
    return (int)isa >= 0 && (int)isa < N_ISA ? isa_names[isa] : "?";
}

/* Whether level `isa` is for this build's architecture (the others are not
 * compiled in: ops/vec_*.c). */
static bool isa_of_this_arch(mt_cpu_isa isa) {
    switch (isa) {
    case MT_ISA_GENERIC: return true;
#if defined(__aarch64__)
    case MT_ISA_NEON:    return true;
#endif
#if defined(__x86_64__)
    case MT_ISA_AVX2:
    case MT_ISA_AVX512:  return true;
#endif
    default:             return false;
    }
}

mt_cpu_isa mt_cpu_isa_best(void) {
#if defined(__x86_64__)
    /* libgcc's probe checks the OS saves the registers (XCR0) as well */
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return MT_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return MT_ISA_AVX2;
    return MT_ISA_GENERIC;
#elif defined(__aarch64__)
    return MT_ISA_NEON;   /* Advanced SIMD is part of every AArch64 CPU */
#else
    return MT_ISA_GENERIC;
#endif
}

/* The level in use, or -1 before the first mt_get_cpu_isa / mt_set_cpu_isa.
 * The one process-wide kernel setting beside the thread count. */
static atomic_int isa_in_use = -1;

int mt_cpu_isa_parse(const char *name) {
    for (int i = 0; name && i < N_ISA; i++)
        if (strcmp(name, isa_names[i]) == 0) return i;
    return -1;
}

/* The level called `name` of this architecture, or -1. */
static int isa_parse(const char *name) {
    int i = mt_cpu_isa_parse(name);
    return i >= 0 && isa_of_this_arch((mt_cpu_isa)i) ? i : -1;
}

/* "generic, avx2, avx512": the levels of this architecture, for messages. */
static void isa_list(char *buf, size_t n) {
    buf[0] = '\0';
    for (int i = 0; i < N_ISA; i++) {
        if (!isa_of_this_arch((mt_cpu_isa)i)) continue;
        size_t len = strlen(buf);
        snprintf(buf + len, n - len, "%s%s", len ? ", " : "", isa_names[i]);
    }
}

mt_status mt_set_cpu_isa(const char *name) {
    bool from_env = name == NULL;
    if (from_env) name = getenv("MT_CPU_ISA");
    int best = (int)mt_cpu_isa_best(), level = best;
    if (name && *name) {
        int cap = isa_parse(name);
        if (cap < 0) {
            char levels[64];
            isa_list(levels, sizeof levels);
            return mt_fail(MT_EINVAL, "%s'%s' is not a kernel level of this CPU's "
                           "architecture; use one of %s (or leave it unset for the best, %s)",
                           from_env ? "MT_CPU_ISA=" : "", name, levels, isa_names[best]);
        }
        /* a level of the same architecture below the best runs on this CPU:
         * every x86-64 level below avx512 is a subset of it, and generic
         * runs anywhere */
        if (cap < level) level = cap;
    }
    atomic_store(&isa_in_use, level);
    return MT_OK;
}

mt_cpu_isa mt_get_cpu_isa(void) {
    int level = atomic_load(&isa_in_use);
    if (level >= 0) return (mt_cpu_isa)level;
    if (mt_set_cpu_isa(NULL) != MT_OK) {
        fprintf(stderr, "meshtrain: %s; running the kernels at %s\n", mt_errmsg(),
                isa_names[mt_cpu_isa_best()]);
        atomic_store(&isa_in_use, (int)mt_cpu_isa_best());
    }
    return (mt_cpu_isa)atomic_load(&isa_in_use);
}
