/*
 * meshtrain/profile.h — what a machine can do: the probe's figures
 * (`meshtrain bench machine`) and the small JSON file that holds them, which
 * the performance commands read with --machine FILE.
 *
 * The file, one object, every key present (a figure not measured is null):
 *
 *   {"cpu": "AMD EPYC 9R45", "cores": 2, "blas_core": "Cooperlake",
 *    "sgemm_gflops": {"1": 231.5, "all": 440.2, "size": 4096},
 *    "fma_gflops": {"1": 262.1, "all": 519.8},
 *    "triad_gbs": {"1": 39.1, "all": 57.3, "bytes_per_element": 12},
 *    "allreduce": {"threads": {"latency_us": 0.4, "busbw_gbs": 11.2},
 *                  "mpi": {"latency_us": 0.2, "busbw_gbs": 2.0}},
 *    "nominal_gflops": 524.8, "nominal_ghz": 4.1,
 *    "measured_at": "2026-11-30T23:40:00Z",
 *    "sgemm_cold_gflops": {"1": 205.0, "all": 398.1, "size": 1024},
 *    "attention_gflops": {"head_size": 64, "64": 41.2, "128": 60.3, "256": 78.0,
 *                         "512": 90.1, "1024": 96.6},
 *    "fma_gflops_by_isa": {"generic": {"1": 16.3, "all": 32.5}, "neon": null,
 *                          "avx2": {"1": 131.0, "all": 260.1},
 *                          "avx512": {"1": 262.1, "all": 519.8}},
 *    "cpu_isa": {"best": "avx512", "in_use": "avx512", "onednn": "avx512_core_bf16"}}
 *
 * "1" is one thread, "all" every core. "sgemm_cold_gflops" is sgemm as the
 * engine runs its products: its threads split them, Open BLAS on one thread
 * each, their operands from memory (a training step's working set is larger
 * than the caches); "all" is every core its own one-thread sgemm at once,
 * summed, each call on the next set of operands (128 MiB in all, at least
 * 16 MiB a thread), "size" at most 1024. "attention_gflops" is meshtrain's causal attention (mt_attention
 * and its gradient, 4 heads of head_size, 2048 tokens a run) on one thread,
 * by sequence length: the FLOPs of its cost entries over its time, which
 * falls short of sgemm's the shorter the sequence (its products are
 * (T, T) blocks and its softmax is not a product). GFLOP/s count a fused multiply-add as
 * 2 flops. triad_gbs counts bytes as STREAM does: the triad
 * a[i] = b[i] + s*c[i] on float arrays moves 3 x 4 = 12 bytes per element.
 * busbw is nccl-tests' bus bandwidth of a 2-device all-reduce (algbw x
 * 2(P-1)/P); latency_us is the time of an 8-byte all-reduce. "mpi" is null
 * unless the probe ran under mpirun with more than one rank.
 *
 * "fma_gflops" is the FMA peak at the CPU's best kernel level;
 * "fma_gflops_by_isa" has it at every level (mt_cpu_isa, base.h), null for a
 * level the CPU lacks, so that a run capped at a lower level (MT_CPU_ISA)
 * finds its own roof. "cpu_isa" is what the probe saw: the best level, the
 * level its process ran at, and oneDNN's ISA (its bf16 products). These
 * four keys came later: the reader accepts a file without them (the
 * figures NAN, the size 0, the strings "").
 *
 * Part of the public API; programs include <meshtrain.h>, which includes this.
 */
#ifndef MESHTRAIN_PROFILE_H
#define MESHTRAIN_PROFILE_H

#include "meshtrain/base.h"
#include "meshtrain/files.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The sequence lengths the attention probe measures: T = 64 << i. */
#define MT_MACHINE_N_ATTENTION 5

/* One transport's all-reduce: latency (8 bytes) and bus bandwidth (large). */
typedef struct {
    double latency_us;
    double busbw_gbs;
} mt_machine_link;

/* The probe's figures. A figure that is unknown is NAN (null in the file). */
typedef struct {
    char   cpu[128];              /* the model name of /proc/cpuinfo, or "unknown" */
    int    cores;                 /* cores this process may run on */
    char   blas_core[32];         /* openblas_get_corename(): "Cooperlake", "Haswell", ... */
    double sgemm_gflops_1, sgemm_gflops_all;
    int    sgemm_size;            /* the sgemm's m = n = k */
    double fma_gflops_1, fma_gflops_all;     /* at the best level (isa_best) */
    double fma_isa_gflops_1[4], fma_isa_gflops_all[4];
                                  /* [mt_cpu_isa]: the FMA peak with each kernel level's
                                     registers (generic one lane, neon 4, avx2 8, avx512
                                     16 floats); NAN for a level this CPU lacks, and for
                                     every level in a file that predates them */
    double bf16_gflops_1, bf16_gflops_all;   /* bf16 dot products (VDPBF16PS) on registers:
                                                the peak of bf16 matrix products; NAN
                                                without AVX512-BF16 */
    double triad_gbs_1, triad_gbs_all;
    int    triad_bytes_per_element;   /* 12: float arrays, STREAM's count */
    mt_machine_link threads;      /* the threads transport, 2 devices */
    bool            has_mpi;      /* false: "mpi" is null, `mpi` is unused */
    mt_machine_link mpi;
    double nominal_gflops;        /* cores x FMA units x SIMD floats x 2 x GHz; NAN: unknown */
    double nominal_ghz;           /* the frequency it used; NAN: unknown */
    char   measured_at[32];       /* ISO 8601, UTC */
    char   isa_best[16];          /* mt_cpu_isa_name(mt_cpu_isa_best()); "" in older files */
    char   isa_in_use[16];        /* the level the probe ran at (MT_CPU_ISA caps it); "" */
    double sgemm_cold_gflops_1, sgemm_cold_gflops_all;   /* the engine's products: one
                                  thread; every core its own at once, summed; operands
                                  from memory (NAN in files that predate them) */
    int    sgemm_cold_size;       /* their m = n = k (0 in such files) */
    double attention_gflops_1[MT_MACHINE_N_ATTENTION];
                                  /* meshtrain's causal attention, forward and backward,
                                     on one thread, at T = 64 << i: its cost entries'
                                     FLOPs a second (NAN: not measured) ... */
    int    attention_head_size;   /* ... at this head size (0 in files that predate it) */
    char   onednn_isa[48];        /* oneDNN's effective ISA then ("avx512_core_amx"),
                                     "none" in a build without oneDNN; "" in older files */
} mt_machine;

/* The FMA peak of kernel level `isa` in *m, on all cores (`all`) or one
 * thread; NAN when the file has none for it (a level this CPU lacks, a file
 * that predates the levels). */
double mt_machine_isa_gflops(const mt_machine *m, mt_cpu_isa isa, bool all);

/* Writes `m` to `path` as the JSON above, claimed and written through its
 * temporary file (meshtrain/files.h: the previous file is kept on any
 * failure). Fails as mt_output_claim does (another run writing it:
 * MT_EBUSY), and with MT_EIO, the path and the system's reason, when it
 * cannot be written. mt_machine_write_to writes through the caller's claim
 * (bench machine claims its --out before the minute of measuring). */
mt_status mt_machine_write(const mt_machine *m, const char *path);
mt_status mt_machine_write_to(const mt_machine *m, mt_output *out);

/* Measures this machine's hardware figures into *m (src/profile/probe.c):
 * the CPU's name, cores (mt_get_num_threads after mt_set_num_threads(0)),
 * Open BLAS's kernel, sgemm (warm and cold) and the FMA peak at every kernel
 * level on one thread and on all cores, the bf16 dot peak, the triad, the
 * kernel levels and the nominal peak; every other field is left as it is
 * (attention_*, onednn_isa, threads, mpi, has_mpi, measured_at: the engine's
 * figures, which `bench machine` measures through the engine). `quick`:
 * small sizes and few repetitions (a few seconds). `note` (note_cap bytes)
 * gets a line to print when Open BLAS runs a kernel below this CPU's ("" if
 * none), *ghz_source where the frequency came from. Takes a minute; leaves
 * mt_set_num_threads at all cores. MT_ENOMEM with a message when the
 * threads of a measurement on all cores cannot be started. */
mt_status mt_machine_probe(bool quick, mt_machine *m, char *note, size_t note_cap,
                           const char **ghz_source);

/* GFLOP/s of the best of `reps` Open BLAS sgemms (m,n) = (m,k)·(k,n), row
 * major, after one warm-up, on `threads` of Open BLAS's own threads
 * (openblas_set_num_threads; afterwards Open BLAS is back at the 1 thread
 * mt_set_num_threads gives it); NAN when the matrices cannot be allocated. */
double mt_sgemm_gflops(int m, int n, int k, int threads, int reps);

/* GFLOP/s of `threads` threads each running its own n^3 sgemms on one Open
 * BLAS thread at the same time, summed, every call on the next of its sets
 * of operands (128 MiB of them in all, at least 16 MiB a thread: from
 * memory, not the caches): the best of `reps` repetitions (after a
 * warm-up), each as long as its slowest thread. NAN when the matrices
 * cannot be allocated or the threads started. */
double mt_sgemm_cold_gflops(int n, int threads, int reps);

/* SIMD floats of a kernel level's vector register (avx512 16, avx2 8, neon
 * 4, generic 1). */
int mt_cpu_isa_floats(mt_cpu_isa isa);

/* Reads a file written by mt_machine_write into *out. The reader is strict:
 * every key must be present once (but "fma_gflops_by_isa" and "cpu_isa",
 * which older files lack), with its type (a number, a string, an object, or
 * null where a figure may be unknown), and no other key.
 * MT_EIO when the file cannot be read; MT_EFORMAT otherwise, with a message
 * naming the file, the byte offset and what was expected there. *out is
 * unspecified after a failure. */
mt_status mt_machine_read(const char *path, mt_machine *out);

#ifdef __cplusplus
}
#endif
#endif /* MESHTRAIN_PROFILE_H */
