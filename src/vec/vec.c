/* vec.c — which table of vector kernels runs: the level mt_get_cpu_isa()
 * names (vec.h). */
#include "vec/vec.h"

#include <stddef.h>

extern const mt_vec_ops mt__vec_ops_generic;
#if defined(__x86_64__)
extern const mt_vec_ops mt__vec_ops_avx2, mt__vec_ops_avx512;
#endif
#if defined(__aarch64__)
extern const mt_vec_ops mt__vec_ops_neon;
#endif

/* Indexed by mt_cpu_isa; NULL where this architecture has no such level. */
static const mt_vec_ops *const tables[] = {
    [MT_ISA_GENERIC] = &mt__vec_ops_generic,
#if defined(__aarch64__)
    [MT_ISA_NEON]    = &mt__vec_ops_neon,
#endif
#if defined(__x86_64__)
    [MT_ISA_AVX2]    = &mt__vec_ops_avx2,
    [MT_ISA_AVX512]  = &mt__vec_ops_avx512,
#endif
};
#define N_TABLES ((int)(sizeof tables / sizeof tables[0]))

const mt_vec_ops *mt__vec_at(mt_cpu_isa isa) {
    if ((int)isa < 0 || (int)isa >= N_TABLES || !tables[isa]) return NULL;
    /* a level above the CPU's would die of an illegal instruction */
    if (isa > mt_cpu_isa_best()) return NULL;
    return tables[isa];
}

const mt_vec_ops *mt__vec(void) {
    /* mt_get_cpu_isa() never names a level the CPU lacks */
    return tables[mt_get_cpu_isa()];
}
