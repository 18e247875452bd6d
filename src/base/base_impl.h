/*
 * base_impl.h — the base layer's internal helpers (internal).
 */
#ifndef MT_BASE_IMPL_H
#define MT_BASE_IMPL_H

#include "meshtrain/base.h"

#include <stdarg.h>
#include <stddef.h>

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

/* out[i] = scale · mt_rng_normal(seed, stream, first + i) for i < n, and
 * out[i] = scale · (2 · mt_rng_uniform(seed, stream, first + i) - 1): the
 * same numbers, bit for bit, ~1.5x faster (measured 2026-11-30 on the
 * 2-core dev VM: 38 ns a normal instead of 57). Parameter initialisation
 * uses them. */
void mt__rng_normal_fill(uint64_t seed, uint64_t stream, uint64_t first, int64_t n, float scale,
                         float *out);
void mt__rng_uniform_fill(uint64_t seed, uint64_t stream, uint64_t first, int64_t n, float scale,
                          float *out);

/* ---- registry.c: tables extended from outside the library ---- */

/* The registries: entries a layer above adds (their types are its own). */
typedef enum {
    MT__REGISTRY_MODELS = 0,     /* train/: const mt__train_model * */
    MT__REGISTRY_STRATEGIES,     /* train/: const mt__strategy_row * */
    MT__REGISTRY_BACKENDS,       /* backend/: const mt_backend * */
    MT__REGISTRY_COUNT
} mt__registry;

#define MT__REGISTRY_MAX 32   /* entries a registry holds */

/* Adds `entry` (which must outlive its use) to registry `which`; returns
 * its index (0, 1, ... in order of adding), or -1 when the registry is full
 * or an argument is bad. Safe from any thread. */
int         mt__registry_add(mt__registry which, const void *entry);
/* The number of entries added, and entry i (NULL past them). */
int         mt__registry_count(mt__registry which);
const void *mt__registry_get(mt__registry which, int i);

/* Appends to dst (cap bytes, *at of them written, NUL-terminated after)
 * at most `most` bytes of s, as far as cap leaves room: the pieces of an
 * snprintf "%s%.*s..." one at a time, cut where it cuts; *at becomes the
 * bytes written (text.c: without printf). Nothing when cap is 0. */
void mt__text_put(char *dst, size_t cap, size_t *at, const char *s, size_t most);
/* The same for the decimal digits of v (a '-' before a negative one). */
void mt__text_put_int(char *dst, size_t cap, size_t *at, long long v);
/* snprintf and vsnprintf, the same bytes and return, written without
 * printf where every conversion is %%, %c, %s (%.Ns, %.*s) or an integer
 * %d %i %u (no length, l, ll or z) with no flags or widths; any other
 * format is vsnprintf's. For the texts a search writes by the million
 * (refusal reasons, names): glibc's printf there takes its slow path. */
int mt__text_format(char *dst, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int mt__text_vformat(char *dst, size_t cap, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

#endif /* MT_BASE_IMPL_H */
