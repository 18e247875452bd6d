/*
 * meshtrain/base.h — the bottom layer: status codes and messages, counter-based
 * random numbers, the clock, and the kernel thread count.
 *
 * Part of the public API; programs include <meshtrain.h>, which includes this.
 */
#ifndef MESHTRAIN_BASE_H
#define MESHTRAIN_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MT_VERSION_STRING "0.1.0"

/* ======================================================================== */
/* Status codes and messages                                                 */
/* ======================================================================== */

typedef int mt_status;

#define MT_STATUS_TABLE(X)                                                   \
    X(MT_OK,           0,  "ok")                                             \
    X(MT_EINVAL,      -1,  "invalid argument")                               \
    X(MT_ENOMEM,      -2,  "out of memory")                                  \
    X(MT_EIO,         -3,  "input/output error")                             \
    X(MT_EFORMAT,     -4,  "bad file format")                                \
    X(MT_ESHAPE,      -5,  "shape mismatch")                                 \
    X(MT_ENAN,        -6,  "non-finite value")                               \
    X(MT_ETIMEOUT,    -7,  "timed out")                                      \
    X(MT_ESTATE,      -8,  "called in the wrong state")                      \
    X(MT_EUNSUPPORTED,-9,  "not supported")                                  \
    X(MT_ECHECKSUM,  -10,  "checksum mismatch")                              \
    X(MT_EINTERNAL,  -11,  "internal error")                                \
    X(MT_EABORTED,   -12,  "stopped because another device failed")         \
    X(MT_EMISMATCH,  -13,  "devices issued different collectives")             \
    X(MT_ESHARDING,  -14,  "invalid or ambiguous sharding")                 \
    X(MT_EBUSY,      -15,  "in use by another process")

enum {
#define MT__STATUS_ENUM(name, value, text) name = value,
    MT_STATUS_TABLE(MT__STATUS_ENUM)
#undef MT__STATUS_ENUM
};

/* The symbolic name of a status ("MT_EINVAL"), or "MT_E?" for an unknown one. */
const char *mt_status_name(mt_status status);

/* A one-phrase description of a status code ("invalid argument"). */
const char *mt_status_text(mt_status status);

/* The message of the last failure on the calling thread; "" if none. The
 * pointer stays valid until the next failure on this thread. */
const char *mt_errmsg(void);

/* Records a failure message (printf-style) for the calling thread and returns
 * `code`, so that `return mt_fail(MT_EINVAL, "...", ...);` reads naturally.
 * The new message is built before it replaces the old one, so mt_errmsg()
 * may be one of the arguments: mt_fail(s, "at step %d: %s; ...", step,
 * mt_errmsg()). */
mt_status mt_fail(mt_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Adds context in front of the calling thread's message and returns `code`:
 * after mt_fail(MT_EIO, "cannot read 'a.ckpt'"), mt_fail_wrap(MT_EIO,
 * "resuming at step %d", 7) leaves "resuming at step 7: cannot read
 * 'a.ckpt'". With no message yet it is mt_fail. */
mt_status mt_fail_wrap(mt_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Clears the calling thread's message. */
void mt_errclear(void);

/* ======================================================================== */
/* Counter-based random numbers, clock                                       */
/* ======================================================================== */

/* Philox-4x32-10: four 32-bit random words for counter `ctr` under key `key`.
 * Stateless: the same (key, ctr) always gives the same words, which is what
 * lets a shard of a tensor fill its slice with exactly the numbers the whole
 * tensor holds there. */
void mt_philox4x32(uint64_t key, uint64_t ctr_hi, uint64_t ctr_lo, uint32_t out[4]);

/* Uniform float in [0, 1) and standard normal for stream `stream` (e.g. a
 * parameter id), element index `index`, under `seed`. */
float mt_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index);
float mt_rng_normal(uint64_t seed, uint64_t stream, uint64_t index);

/* A 64-bit stream id from a name (FNV-1a), so a parameter's numbers depend on
 * its name, not on the order parameters were declared in. */
uint64_t mt_hash_name(const char *name);

/* Monotonic time in seconds. */
double mt_time_now(void);

/* ======================================================================== */
/* Kernel threads                                                            */
/* ======================================================================== */

/* Sets the number of threads kernels use (Open BLAS and meshtrain's own);
 * 0 picks the number of cores this process may run on (its affinity mask). */
void mt_set_num_threads(int n);
int  mt_get_num_threads(void);

/* ======================================================================== */
/* Kernel level (the CPU's vector instructions)                              */
/* ======================================================================== */

/* The vector instruction sets meshtrain's own kernels (softmax and
 * cross-entropy, GELU, layernorm, attention's softmax, AdamW, the
 * collectives' adds) are built for, in one binary; each process runs one
 * level, picked from the CPU's features at start-up. Ordered: a level runs
 * on every CPU that has a higher one of the same architecture.
 *   generic  portable C, one lane (any CPU)
 *   neon     aarch64 Advanced SIMD, 4 lanes
 *   avx2     x86-64 AVX2 + FMA, 8 lanes
 *   avx512   x86-64 AVX-512 F, BW, DQ and VL, 16 lanes */
typedef enum mt_cpu_isa {
    MT_ISA_GENERIC = 0,
    MT_ISA_NEON    = 1,
    MT_ISA_AVX2    = 2,
    MT_ISA_AVX512  = 3,
} mt_cpu_isa;

/* The level's name as MT_CPU_ISA spells it ("avx2"), or "?" for none. */
const char *mt_cpu_isa_name(mt_cpu_isa isa);

/* The level spelt `name` ("avx2"), of any architecture (a trace from another
 * machine names its own), or -1 for a name that is no level. */
int mt_cpu_isa_parse(const char *name);

/* The best level this CPU (and the operating system, for the vector
 * registers' state) and this build support, ignoring any cap. */
mt_cpu_isa mt_cpu_isa_best(void);

/* Caps the level: `name` is a level's name, or NULL to read the
 * environment variable MT_CPU_ISA (unset or empty: no cap). The level in
 * use becomes the lower of the cap and mt_cpu_isa_best(): like oneDNN's
 * ONEDNN_MAX_CPU_ISA, a cap above what the CPU has is no error. Call it
 * before the first kernel runs (the CLI does, at start); a later call
 * changes the level for kernels called afterwards. The cap also caps
 * oneDNN's ISA (bf16 products) unless ONEDNN_MAX_CPU_ISA is set, and only
 * if oneDNN has not run yet. MT_EINVAL for a name that is no level, naming
 * the levels. */
mt_status mt_set_cpu_isa(const char *name);

/* The level the kernels run at. The first call without an mt_set_cpu_isa
 * before it applies MT_CPU_ISA (an invalid value there is ignored with one
 * line on stderr; mt_set_cpu_isa(NULL) reports it as an error instead). */
mt_cpu_isa mt_get_cpu_isa(void);

#ifdef __cplusplus
}
#endif
#endif /* MESHTRAIN_BASE_H */
