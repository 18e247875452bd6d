/*
 * base_impl.h — the base layer's internal helpers (internal).
 */
#ifndef MT_BASE_IMPL_H
#define MT_BASE_IMPL_H

#include "meshtrain/base.h"

/* Bytes of a CPU bit set (bit c of byte c/8 is CPU c): 1024 CPUs. */
#define MT_CPU_SET_BYTES 128

/* The CPUs this process may run on: the count of its affinity mask (what
 * taskset, cgroups and mpirun's binding leave it), else the online CPUs;
 * at least 1. Every "how many cores" question asks this. */
int mt__cpu_count(void);

/* The same, and the mask itself into set[MT_CPU_SET_BYTES] (all zero when
 * the mask cannot be read), so that processes sharing a node can combine
 * theirs. */
int mt__cpu_set(unsigned char *set);

#endif /* MT_BASE_IMPL_H */
